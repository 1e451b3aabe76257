//! A decision threshold on P(MET), fitted leave one patient out: Evident's
//! lever against a model's lean to MET (issue 19), not a method of either
//! paper.
//!
//! The paper's zero-shot prompt (MAKAR's C-A) answers 0 or 1; the model
//! layer can give the log-probabilities of that answer's first token, and
//! P(MET) is the probability of "1" renormalised over "0" and "1"
//! (`evident_match::makar::paper::p_met_of_binary`). The model's own answer
//! is the argmax, P(MET) >= 0.5. Here, for each patient and criterion type,
//! a threshold is chosen on the *other* patients' rows of that type: the
//! one that maximises accuracy against the physicians' labels (MET when
//! P(MET) >= threshold, NOT MET otherwise); ties go to the threshold
//! nearest 0.5, the model's own. A type with fewer than [`MIN_ROWS`] such
//! rows among the other patients keeps 0.5. Rows without a P(MET) (a
//! failed answer, or a model that gave no log-probabilities) keep the
//! model's label.
//!
//! Unlike the label correction ([`crate::correction`]), which can move a
//! whole (type, predicted label) cell only, a threshold tells two MET
//! answers apart by how sure the model was. Like it, it can only produce
//! MET and NOT MET: NOT ENOUGH INFORMATION, the physicians' label for many
//! rows, stays out of reach of a 0/1 answer.
//!
//! The patient's own rows never enter its threshold
//! (`crates/eval/tests/threshold.rs` changes a patient's own labels and
//! shows its thresholded labels do not move).

use std::collections::BTreeMap;

use evident_match::{CriterionType, Decision};
use serde::Serialize;

use crate::metrics::Prediction;

/// Rows of a criterion type with a P(MET) the other patients must hold
/// before a threshold other than 0.5 is fitted for it.
pub const MIN_ROWS: usize = 5;

/// The model's own decision rule: MET when P(MET) >= 0.5.
pub const ARGMAX: f64 = 0.5;

/// A threshold fitted on some rows of one criterion type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FittedThreshold {
    pub criterion_type: CriterionType,
    pub threshold: f64,
    /// Rows of this type with a P(MET) it was fitted on.
    pub rows: usize,
    /// Of those, rows the threshold decides as the physicians did.
    pub correct: usize,
    /// Of those, rows the model's own answer (0.5) decides as the physicians did.
    pub correct_at_argmax: usize,
}

/// What the leave-one-patient-out thresholds did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThresholdSummary {
    /// Rows that carried a P(MET).
    pub rows_with_probability: usize,
    /// Rows whose label the thresholds changed.
    pub changed: usize,
    /// "type from -> to" -> rows changed.
    pub changes: BTreeMap<String, usize>,
    /// Per criterion type, the lowest and highest threshold over the
    /// patients' folds (how stable the fit is).
    pub fold_range: BTreeMap<&'static str, (f64, f64)>,
    /// The thresholds fitted on every row, for reading and for saving as a
    /// table; no evaluated row is decided by them.
    pub fitted_on_all: Vec<FittedThreshold>,
}

/// The decision a threshold gives.
pub fn decide(p_met: f64, threshold: f64) -> Decision {
    if p_met >= threshold {
        Decision::Met
    } else {
        Decision::NotMet
    }
}

/// Fits the threshold of one criterion type on `(P(MET), physicians' label)`
/// rows: the candidate (0, each midpoint between consecutive distinct
/// probabilities, and above the highest) with the most rows decided as the
/// physicians did, nearest 0.5 on ties; 0.5 with fewer than [`MIN_ROWS`] rows.
pub fn fit(criterion_type: CriterionType, rows: &[(f64, Decision)]) -> FittedThreshold {
    let correct_at = |t: f64| rows.iter().filter(|(p, gold)| decide(*p, t) == *gold).count();
    let correct_at_argmax = correct_at(ARGMAX);
    if rows.len() < MIN_ROWS {
        return FittedThreshold {
            criterion_type,
            threshold: ARGMAX,
            rows: rows.len(),
            correct: correct_at_argmax,
            correct_at_argmax,
        };
    }
    let mut values: Vec<f64> = rows.iter().map(|(p, _)| *p).collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    let mut candidates = vec![0.0, ARGMAX];
    candidates.extend(values.windows(2).map(|w| (w[0] + w[1]) / 2.0));
    let top = *values.last().expect("rows are not empty");
    candidates.push(if top < 1.0 { (top + 1.0) / 2.0 } else { 1.0 });
    let mut best = (ARGMAX, correct_at_argmax);
    for t in candidates {
        let n = correct_at(t);
        if n > best.1 || (n == best.1 && (t - ARGMAX).abs() < (best.0 - ARGMAX).abs()) {
            best = (t, n);
        }
    }
    FittedThreshold { criterion_type, threshold: best.0, rows: rows.len(), correct: best.1, correct_at_argmax }
}

/// The rows of `criterion_type` with a prediction and a P(MET), as fitting input.
fn rows_of<'a>(
    predictions: &'a [Prediction],
    p_met: &'a [Option<f64>],
    criterion_type: CriterionType,
    keep: impl Fn(&Prediction) -> bool + 'a,
) -> Vec<(f64, Decision)> {
    predictions
        .iter()
        .zip(p_met)
        .filter(|(r, p)| r.criterion_type == criterion_type && r.predicted.is_some() && p.is_some() && keep(r))
        .map(|(r, p)| (p.expect("filtered"), r.gold))
        .collect()
}

/// The thresholds fitted on every row (no row left out).
pub fn fit_all(predictions: &[Prediction], p_met: &[Option<f64>]) -> Vec<FittedThreshold> {
    [CriterionType::Inclusion, CriterionType::Exclusion]
        .into_iter()
        .map(|t| fit(t, &rows_of(predictions, p_met, t, |_| true)))
        .collect()
}

/// Every prediction with a P(MET) decided by the threshold fitted on the
/// *other* patients' rows of its type, in the input's order; `p_met[i]`
/// belongs to `predictions[i]`.
pub fn threshold_leave_one_patient_out(
    predictions: &[Prediction],
    p_met: &[Option<f64>],
) -> (Vec<Prediction>, ThresholdSummary) {
    assert_eq!(predictions.len(), p_met.len(), "one P(MET) slot per prediction");
    let mut folds: BTreeMap<(&str, CriterionType), f64> = BTreeMap::new();
    let mut changes: BTreeMap<String, usize> = BTreeMap::new();
    let mut fold_range: BTreeMap<&'static str, (f64, f64)> = BTreeMap::new();
    let out: Vec<Prediction> = predictions
        .iter()
        .zip(p_met)
        .map(|(row, p)| {
            let (Some(predicted), Some(p)) = (row.predicted, p) else { return row.clone() };
            let key = (row.patient_id.as_str(), row.criterion_type);
            let threshold = *folds.entry(key).or_insert_with(|| {
                let rows = rows_of(predictions, p_met, row.criterion_type, |r| r.patient_id != row.patient_id);
                let t = fit(row.criterion_type, &rows).threshold;
                let range = fold_range.entry(row.criterion_type.as_str()).or_insert((t, t));
                *range = (range.0.min(t), range.1.max(t));
                t
            });
            let to = decide(*p, threshold);
            if to != predicted {
                let change = format!("{} {} -> {}", row.criterion_type.as_str(), predicted.as_str(), to.as_str());
                *changes.entry(change).or_default() += 1;
            }
            Prediction { predicted: Some(to), ..row.clone() }
        })
        .collect();
    let summary = ThresholdSummary {
        rows_with_probability: p_met
            .iter()
            .zip(predictions)
            .filter(|(p, r)| p.is_some() && r.predicted.is_some())
            .count(),
        changed: changes.values().sum(),
        changes,
        fold_range,
        fitted_on_all: fit_all(predictions, p_met),
    };
    (out, summary)
}

/// The threshold and then the label correction, nested leave one patient
/// out: for each patient, the thresholds are fitted on the other patients'
/// rows, the other patients' rows are thresholded with them and the
/// correction's counts taken on those, and the patient's rows are
/// thresholded and then corrected by them. Nothing of the patient's own
/// labels reaches its decisions. The threshold tells MET answers apart by
/// P(MET); the correction can then turn a (type, label) cell into NOT
/// ENOUGH INFORMATION, which no threshold on a 0/1 answer can reach.
pub fn threshold_then_correct_leave_one_patient_out(
    predictions: &[Prediction],
    p_met: &[Option<f64>],
) -> Vec<Prediction> {
    assert_eq!(predictions.len(), p_met.len(), "one P(MET) slot per prediction");
    let threshold_with =
        |thresholds: &BTreeMap<CriterionType, f64>, row: &Prediction, p: &Option<f64>| match (row.predicted, p) {
            (Some(_), Some(p)) => {
                Prediction { predicted: Some(decide(*p, thresholds[&row.criterion_type])), ..row.clone() }
            }
            _ => row.clone(),
        };
    let mut folds: BTreeMap<&str, crate::correction::Counts> = BTreeMap::new();
    let mut fold_thresholds: BTreeMap<&str, BTreeMap<CriterionType, f64>> = BTreeMap::new();
    predictions
        .iter()
        .zip(p_met)
        .map(|(row, p)| {
            let patient = row.patient_id.as_str();
            let thresholds = fold_thresholds.entry(patient).or_insert_with(|| {
                [CriterionType::Inclusion, CriterionType::Exclusion]
                    .into_iter()
                    .map(|t| (t, fit(t, &rows_of(predictions, p_met, t, |r| r.patient_id != patient)).threshold))
                    .collect()
            });
            let thresholds = thresholds.clone();
            let counts = folds.entry(patient).or_insert_with(|| {
                let others: Vec<Prediction> = predictions
                    .iter()
                    .zip(p_met)
                    .filter(|(r, _)| r.patient_id != patient)
                    .map(|(r, p)| threshold_with(&thresholds, r, p))
                    .collect();
                crate::correction::count(others.iter())
            });
            let mine = threshold_with(&thresholds, row, p);
            match mine.predicted {
                Some(label) => {
                    let to = crate::correction::decide(counts, (mine.criterion_type, label));
                    Prediction { predicted: Some(to), ..mine }
                }
                None => mine,
            }
        })
        .collect()
}
