//! The leave-one-patient-out threshold on P(MET): it finds the cut a
//! MET-leaning model's probabilities hold, it keeps the model's own 0.5
//! where the rows cannot tell, and a patient's own physician labels never
//! reach its thresholded decisions.

use std::collections::BTreeSet;

use evident_eval::threshold::{
    fit, threshold_leave_one_patient_out, threshold_then_correct_leave_one_patient_out, ARGMAX, MIN_ROWS,
};
use evident_eval::Prediction;
use evident_match::{CriterionType, Decision};

fn row(patient: &str, criterion_type: CriterionType, gold: Decision) -> Prediction {
    Prediction {
        patient_id: patient.into(),
        criterion_type,
        gold,
        predicted: Some(Decision::Met),
        gold_evidence: BTreeSet::new(),
        predicted_evidence: BTreeSet::new(),
    }
}

/// Four patients, each with exclusion rows a MET-leaning model answers MET
/// (P(MET) above 0.5) whatever the truth: the physicians' MET rows near
/// 0.9, their NOT MET rows near 0.7.
fn leaning() -> (Vec<Prediction>, Vec<Option<f64>>) {
    let mut rows = Vec::new();
    let mut p = Vec::new();
    for (i, patient) in ["a", "b", "c", "d"].into_iter().enumerate() {
        for j in 0..4 {
            let wiggle = 0.01 * (i * 4 + j) as f64 / 4.0;
            rows.push(row(patient, CriterionType::Exclusion, Decision::Met));
            p.push(Some(0.88 + wiggle));
            rows.push(row(patient, CriterionType::Exclusion, Decision::NotMet));
            p.push(Some(0.66 + wiggle));
        }
        // A failed row and a row without a probability keep their labels.
        rows.push(Prediction { predicted: None, ..row(patient, CriterionType::Exclusion, Decision::NotMet) });
        p.push(Some(0.1));
        rows.push(row(patient, CriterionType::Inclusion, Decision::NotMet));
        p.push(None);
    }
    (rows, p)
}

#[test]
fn a_met_leaning_models_probabilities_are_cut_where_the_physicians_differ() {
    let (rows, p) = leaning();
    let (out, summary) = threshold_leave_one_patient_out(&rows, &p);
    let correct = |rs: &[Prediction]| rs.iter().filter(|r| r.predicted == Some(r.gold)).count();
    assert_eq!(correct(&rows), 16, "the model's own answers: every MET row right, every NOT MET row wrong");
    assert_eq!(correct(&out), 32, "the threshold separates the two groups: {summary:?}");
    assert_eq!(summary.changes.get("exclusion MET -> NOT MET"), Some(&16));
    assert_eq!(summary.rows_with_probability, 32);
    let all = &summary.fitted_on_all;
    let exclusion = all.iter().find(|t| t.criterion_type == CriterionType::Exclusion).unwrap();
    assert!(exclusion.threshold > 0.69 && exclusion.threshold < 0.88, "{exclusion:?}");
    assert_eq!((exclusion.rows, exclusion.correct, exclusion.correct_at_argmax), (32, 32, 16));
    // The failed row and the row without a probability are as they were.
    for (before, after) in rows.iter().zip(&out) {
        if before.predicted.is_none() || before.criterion_type == CriterionType::Inclusion {
            assert_eq!(before.predicted, after.predicted);
        }
    }
}

#[test]
fn few_rows_or_no_better_cut_keep_the_models_own_rule() {
    let rows: Vec<(f64, Decision)> = (0..MIN_ROWS - 1).map(|_| (0.9, Decision::NotMet)).collect();
    assert_eq!(fit(CriterionType::Inclusion, &rows).threshold, ARGMAX);
    // Already right at 0.5: ties go to 0.5.
    let rows = vec![
        (0.2, Decision::NotMet),
        (0.3, Decision::NotMet),
        (0.7, Decision::Met),
        (0.8, Decision::Met),
        (0.9, Decision::Met),
    ];
    let fitted = fit(CriterionType::Inclusion, &rows);
    assert_eq!((fitted.threshold, fitted.correct, fitted.correct_at_argmax), (ARGMAX, 5, 5));
    // Physicians who say NOT ENOUGH INFORMATION cannot be reached; all
    // NOT MET is then the best a threshold can do, above the highest P(MET).
    let rows = vec![
        (0.6, Decision::NotMet),
        (0.7, Decision::NotEnoughInformation),
        (0.8, Decision::NotMet),
        (0.9, Decision::NotMet),
        (0.95, Decision::Met),
    ];
    let fitted = fit(CriterionType::Inclusion, &rows);
    assert!((fitted.threshold - 0.925).abs() < 1e-12, "{fitted:?}");
    assert_eq!((fitted.correct, fitted.correct_at_argmax), (4, 1));
}

#[test]
fn a_patients_own_labels_never_reach_its_thresholded_decisions() {
    let (rows, p) = leaning();
    let labels_of =
        |rs: &[Prediction]| rs.iter().filter(|r| r.patient_id == "a").map(|r| r.predicted).collect::<Vec<_>>();
    let (out, _) = threshold_leave_one_patient_out(&rows, &p);
    // Every one of A's labels flipped: A's decisions do not move.
    let flip = |d: Decision| if d == Decision::Met { Decision::NotMet } else { Decision::Met };
    let mut a_flipped = rows.clone();
    for r in a_flipped.iter_mut().filter(|r| r.patient_id == "a") {
        r.gold = flip(r.gold);
    }
    assert_eq!(labels_of(&threshold_leave_one_patient_out(&a_flipped, &p).0), labels_of(&out));
    // The others' labels flipped: A's decisions move (the test can fail).
    let mut others_flipped = rows.clone();
    for r in others_flipped.iter_mut().filter(|r| r.patient_id != "a") {
        r.gold = flip(r.gold);
    }
    assert_ne!(labels_of(&threshold_leave_one_patient_out(&others_flipped, &p).0), labels_of(&out));
}

#[test]
fn threshold_then_correction_reaches_labels_a_threshold_cannot_and_never_sees_the_patients_own_labels() {
    let (mut rows, p) = leaning();
    // The inclusion rows without a P(MET) (one per patient, answered MET)
    // are NOT ENOUGH INFORMATION to the physicians, like most of the
    // 6 more inclusion rows per patient that the model answers MET with a
    // P(MET) of 0.6.
    let mut p = p;
    for patient in ["a", "b", "c", "d"] {
        for _ in 0..6 {
            rows.push(Prediction {
                predicted: Some(Decision::Met),
                ..row(patient, CriterionType::Inclusion, Decision::NotEnoughInformation)
            });
            p.push(Some(0.6));
        }
    }
    let out = threshold_then_correct_leave_one_patient_out(&rows, &p);
    let nei = out.iter().filter(|r| r.predicted == Some(Decision::NotEnoughInformation)).count();
    assert!(nei >= 24, "the correction turns the inclusion cell into NOT ENOUGH INFORMATION: {nei}");
    let correct = |rs: &[Prediction]| rs.iter().filter(|r| r.predicted == Some(r.gold)).count();
    assert!(correct(&out) > correct(&threshold_leave_one_patient_out(&rows, &p).0));
    // A's own labels flipped: A's decisions do not move; the others' flipped: they do.
    let labels_of =
        |rs: &[Prediction]| rs.iter().filter(|r| r.patient_id == "a").map(|r| r.predicted).collect::<Vec<_>>();
    let mut a_changed = rows.clone();
    for r in a_changed.iter_mut().filter(|r| r.patient_id == "a") {
        r.gold = if r.gold == Decision::Met { Decision::NotMet } else { Decision::Met };
    }
    assert_eq!(labels_of(&threshold_then_correct_leave_one_patient_out(&a_changed, &p)), labels_of(&out));
    let mut others_changed = rows.clone();
    for r in others_changed.iter_mut().filter(|r| r.patient_id != "a") {
        r.gold = if r.gold == Decision::Met { Decision::NotMet } else { Decision::Met };
    }
    assert_ne!(labels_of(&threshold_then_correct_leave_one_patient_out(&others_changed, &p)), labels_of(&out));
}
