//! The leave-one-patient-out label correction never lets a patient's own
//! physician labels reach that patient's corrected decisions: changing
//! every one of patient A's gold labels leaves A's corrected labels as they
//! were, while changing patient B's labels (which A's correction is fitted
//! on) moves them. Run on the real development split's GPT-4 rows turned
//! into a MET-leaning predictor, so the folds are realistic.

use std::path::Path;

use evident_eval::correction::correct_leave_one_patient_out;
use evident_eval::{load_annotations, Prediction};
use evident_match::{CriterionType, Decision};

fn rows() -> Vec<Prediction> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/trialgpt/criterion_annotations_dev.json");
    let rows = load_annotations(&path).unwrap_or_else(|e| panic!("{e}; the shared data must be present"));
    // A predictor with the embedded model's lean: MET on every exclusion,
    // the physicians' label on inclusion rows but NOT MET for NOT ENOUGH
    // INFORMATION.
    rows.iter()
        .map(|r| {
            let mut p = r.gpt4_prediction();
            p.predicted = Some(match (p.criterion_type, p.gold) {
                (CriterionType::Exclusion, _) => Decision::Met,
                (CriterionType::Inclusion, Decision::NotEnoughInformation) => Decision::NotMet,
                (CriterionType::Inclusion, g) => g,
            });
            p
        })
        .collect()
}

fn labels_of(rows: &[Prediction], patient: &str) -> Vec<Option<Decision>> {
    rows.iter().filter(|r| r.patient_id == patient).map(|r| r.predicted).collect()
}

#[test]
fn a_patients_own_labels_never_reach_its_corrected_decisions() {
    let original = rows();
    let a = original[0].patient_id.clone();
    let (corrected, summary) = correct_leave_one_patient_out(&original);
    assert!(summary.changed > 0, "the lean is corrected somewhere");
    assert!(
        labels_of(&corrected, &a).contains(&Some(Decision::NotMet)),
        "A's exclusion MET answers become NOT MET from the other patients' rows"
    );

    // Every one of A's physician labels changed (rotated through the four
    // decisions): A's corrected labels stay as they were.
    let mut a_relabelled = original.clone();
    for r in a_relabelled.iter_mut().filter(|r| r.patient_id == a) {
        r.gold = Decision::ALL[(Decision::ALL.iter().position(|d| *d == r.gold).unwrap() + 1) % 4];
    }
    let (after, _) = correct_leave_one_patient_out(&a_relabelled);
    assert_eq!(labels_of(&after, &a), labels_of(&corrected, &a));

    // The same change made to every patient but A moves A's labels: the
    // correction is fitted on the others, and the test can fail.
    let mut others_relabelled = original.clone();
    for r in others_relabelled.iter_mut().filter(|r| r.patient_id != a) {
        if r.criterion_type == CriterionType::Exclusion {
            r.gold = Decision::Met;
        }
    }
    let (moved, _) = correct_leave_one_patient_out(&others_relabelled);
    assert_ne!(labels_of(&moved, &a), labels_of(&corrected, &a));
}
