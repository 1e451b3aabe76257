//! Label correction fitted leave-one-patient-out: Evident's lever against
//! a model's lean to one label (issue 19), not a method of either paper.
//!
//! A small model leans: the paper's zero-shot prompt answers MET to nearly
//! every criterion, MAKAR's agents NOT MET. The correction learns that lean
//! from reviewers' decisions on *other* patients and undoes it. For each
//! patient, it counts on every other patient's rows, per criterion type
//! (inclusion, exclusion) and predicted label, how often the physicians
//! gave each label; a prediction then becomes the physicians' most frequent
//! label for that (type, predicted label), the decision that maximises
//! expected accuracy under the other patients' confusion. It changes a
//! label only when the other patients hold at least [`MIN_ROWS`] rows of
//! that (type, predicted label) and another label is strictly more
//! frequent than the predicted one; a failed prediction stays failed.
//!
//! The patient's own rows never enter its correction: the counts for
//! patient p are taken over rows whose patient is not p
//! (`crates/eval/tests/label_correction.rs` changes a patient's own
//! physician labels and shows its corrected labels do not move).
//!
//! It works on hard labels (the model layer gives no label probabilities),
//! so it can only move a whole (type, predicted label) cell at once: it can
//! turn "exclusion, MET" into NOT MET or "inclusion, NOT MET" into NOT
//! ENOUGH INFORMATION, but it cannot tell two MET answers apart.

use std::collections::BTreeMap;

use evident_match::{CriterionType, Decision};
use serde::Serialize;

use crate::metrics::Prediction;

/// Rows of a (criterion type, predicted label) cell the other patients must
/// hold before the correction may change that cell's label.
pub const MIN_ROWS: usize = 5;

/// One cell of a fitted correction: what the predictor answered, for which
/// criterion type, and what the physicians said on those rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorrectionCell {
    pub criterion_type: &'static str,
    pub predicted: &'static str,
    pub rows: usize,
    /// Physician label -> rows, in Evident's four decisions.
    pub physicians: BTreeMap<&'static str, usize>,
    /// The label this cell's predictions become.
    pub corrected: &'static str,
}

/// What the correction did to one set of predictions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorrectionSummary {
    /// Rows whose label the leave-one-patient-out correction changed.
    pub changed: usize,
    /// (from, to) -> rows changed, over all patients' own corrections.
    pub changes: BTreeMap<String, usize>,
    /// The correction fitted on every patient's rows, for reading only: it
    /// shows where the predictor leans; no row is decided by it.
    pub fitted_on_all: Vec<CorrectionCell>,
}

type Key = (CriterionType, Decision);
pub(crate) type Counts = BTreeMap<Key, BTreeMap<Decision, usize>>;

pub(crate) fn count<'a>(rows: impl Iterator<Item = &'a Prediction>) -> Counts {
    let mut counts = Counts::new();
    for r in rows {
        if let Some(p) = r.predicted {
            *counts.entry((r.criterion_type, p)).or_default().entry(r.gold).or_default() += 1;
        }
    }
    counts
}

/// The label a (type, predicted) cell becomes under `counts`.
pub(crate) fn decide(counts: &Counts, key: Key) -> Decision {
    let predicted = key.1;
    let Some(cell) = counts.get(&key) else { return predicted };
    if cell.values().sum::<usize>() < MIN_ROWS {
        return predicted;
    }
    let own = cell.get(&predicted).copied().unwrap_or(0);
    // The most frequent physician label; the first in Decision::ALL's
    // order on ties, and the prediction unless another is strictly ahead.
    let (best, n) = Decision::ALL
        .iter()
        .map(|d| (*d, cell.get(d).copied().unwrap_or(0)))
        .fold((predicted, own), |acc, x| if x.1 > acc.1 { x } else { acc });
    if n > own {
        best
    } else {
        predicted
    }
}

/// Every prediction corrected by the confusion of the *other* patients'
/// rows (leave one patient out), in the input's order.
pub fn correct_leave_one_patient_out(predictions: &[Prediction]) -> (Vec<Prediction>, CorrectionSummary) {
    let mut by_patient: BTreeMap<&str, Counts> = BTreeMap::new();
    for p in predictions {
        by_patient
            .entry(p.patient_id.as_str())
            .or_insert_with(|| count(predictions.iter().filter(|r| r.patient_id != p.patient_id)));
    }
    let mut changes: BTreeMap<String, usize> = BTreeMap::new();
    let corrected: Vec<Prediction> = predictions
        .iter()
        .map(|row| {
            let Some(predicted) = row.predicted else { return row.clone() };
            let fold = &by_patient[row.patient_id.as_str()];
            let to = decide(fold, (row.criterion_type, predicted));
            if to != predicted {
                *changes
                    .entry(format!("{} {} -> {}", row.criterion_type.as_str(), predicted.as_str(), to.as_str()))
                    .or_default() += 1;
            }
            Prediction { predicted: Some(to), ..row.clone() }
        })
        .collect();
    let all = count(predictions.iter());
    let fitted_on_all = all
        .iter()
        .map(|(key, cell)| CorrectionCell {
            criterion_type: key.0.as_str(),
            predicted: key.1.as_str(),
            rows: cell.values().sum(),
            physicians: cell.iter().map(|(d, n)| (d.as_str(), *n)).collect(),
            corrected: decide(&all, *key).as_str(),
        })
        .collect();
    let summary = CorrectionSummary { changed: changes.values().sum(), changes, fitted_on_all };
    (corrected, summary)
}

/// The baseline the correction must beat: each patient's rows labelled
/// with the physicians' most frequent label among the other patients'
/// criteria of the same type (leave one patient out), whatever the model
/// said. It is what the correction gives a predictor whose label carries
/// no information (every prediction the same).
pub fn type_majority_leave_one_patient_out(predictions: &[Prediction]) -> Vec<Prediction> {
    let constant: Vec<Prediction> =
        predictions.iter().map(|p| Prediction { predicted: Some(Decision::Met), ..p.clone() }).collect();
    correct_leave_one_patient_out(&constant).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(patient: &str, t: CriterionType, gold: Decision, predicted: Option<Decision>) -> Prediction {
        Prediction {
            patient_id: patient.into(),
            criterion_type: t,
            gold,
            predicted,
            gold_evidence: Default::default(),
            predicted_evidence: Default::default(),
        }
    }

    #[test]
    fn a_cell_changes_only_with_enough_rows_and_a_strictly_larger_label() {
        use CriterionType::Exclusion as E;
        use Decision::{Met, NotMet};
        // Patient b's 5 exclusion rows answered MET are NOT MET 4 times:
        // a's MET becomes NOT MET. With 4 such rows it would stay.
        let mut rows: Vec<_> = (0..4).map(|_| row("b", E, NotMet, Some(Met))).collect();
        rows.push(row("b", E, Met, Some(Met)));
        rows.push(row("a", E, Met, Some(Met)));
        let (out, summary) = correct_leave_one_patient_out(&rows);
        assert_eq!(out[5].predicted, Some(NotMet));
        assert_eq!(summary.changes.get("exclusion MET -> NOT MET"), Some(&1));
        let (out, _) = correct_leave_one_patient_out(&rows[1..]);
        assert_eq!(out[4].predicted, Some(Met), "4 rows of b are below MIN_ROWS");
        // A tie keeps the prediction.
        let tie: Vec<_> = [NotMet, NotMet, NotMet, Met, Met, Met]
            .into_iter()
            .map(|g| row("b", E, g, Some(Met)))
            .chain([row("a", E, NotMet, Some(Met))])
            .collect();
        assert_eq!(correct_leave_one_patient_out(&tie).0[6].predicted, Some(Met));
    }

    #[test]
    fn the_type_majority_baseline_ignores_the_prediction() {
        use CriterionType::{Exclusion as E, Inclusion as I};
        use Decision::{Met, NotEnoughInformation as Nei, NotMet};
        let mut rows: Vec<_> = (0..6).map(|_| row("b", E, NotMet, Some(Met))).collect();
        rows.extend((0..6).map(|_| row("b", I, Nei, None)));
        rows.push(row("a", E, Met, Some(Met)));
        rows.push(row("a", I, Met, None));
        let out = type_majority_leave_one_patient_out(&rows);
        assert_eq!((out[12].predicted, out[13].predicted), (Some(NotMet), Some(Nei)));
    }

    #[test]
    fn failures_stay_failures() {
        let rows = vec![row("a", CriterionType::Inclusion, Decision::Met, None)];
        let (out, summary) = correct_leave_one_patient_out(&rows);
        assert_eq!(out[0].predicted, None);
        assert_eq!(summary.changed, 0);
    }
}
