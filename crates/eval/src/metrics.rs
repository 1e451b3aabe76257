//! Criterion-level metrics on (gold, predicted) pairs: accuracy in
//! TrialGPT's label space and collapsed to met / not met / unknown,
//! per-class precision, recall and F1, Cohen's kappa, evidence-sentence
//! precision/recall/F1, and 95% percentile bootstrap intervals that
//! resample patients (a seeded SplitMix64 generator: same seed, same
//! interval on every machine).
//!
//! Conventions (stated here because the papers leave them open):
//! - A failed prediction (no valid model answer) is counted as wrong in
//!   every accuracy and kappa, and predicts no class and no sentence.
//! - Collapsed space: met = included/excluded; not met = not included/not
//!   excluded/not applicable (the criterion does not hold for the patient);
//!   unknown = not enough information.
//! - Kappa is computed in the four-decision space (MET, NOT MET, NOT ENOUGH
//!   INFORMATION, NOT APPLICABLE; failures as a fifth category) and in the
//!   collapsed space. Accuracy in TrialGPT's six wordings equals accuracy in
//!   the four decisions, because the criterion type is given.
//! - Evidence: micro-averaged over rows, |pred ∩ gold| / |pred| and
//!   |pred ∩ gold| / |gold| on pooled counts.

use std::collections::{BTreeMap, BTreeSet};

use evident_match::{CriterionType, Decision};
use serde::Serialize;

/// One criterion judged by a reference (the physician) and a predictor.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub patient_id: String,
    pub criterion_type: CriterionType,
    pub gold: Decision,
    /// `None` when the predictor failed on this row.
    pub predicted: Option<Decision>,
    pub gold_evidence: BTreeSet<i64>,
    pub predicted_evidence: BTreeSet<i64>,
}

/// met / not met / unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Collapsed {
    Met,
    NotMet,
    Unknown,
}

pub fn collapse(d: Decision) -> Collapsed {
    match d {
        Decision::Met => Collapsed::Met,
        Decision::NotMet | Decision::NotApplicable => Collapsed::NotMet,
        Decision::NotEnoughInformation => Collapsed::Unknown,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClassScores {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// Gold rows of this class.
    pub support: usize,
    /// Rows predicted as this class.
    pub predicted: usize,
}

/// Precision, recall and F1 from counts; 0 where a denominator is 0.
pub fn prf(true_positives: usize, predicted: usize, gold: usize) -> (f64, f64, f64) {
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let p = ratio(true_positives, predicted);
    let r = ratio(true_positives, gold);
    let f = if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) };
    (p, r, f)
}

/// Cohen's kappa of two raters over items given as category pairs.
/// Returns 1.0 when both raters put everything in one identical category
/// (no disagreement possible) and 0.0 for an empty input.
pub fn cohen_kappa<T: Ord + Clone>(pairs: &[(T, T)]) -> f64 {
    let n = pairs.len() as f64;
    if pairs.is_empty() {
        return 0.0;
    }
    let observed = pairs.iter().filter(|(a, b)| a == b).count() as f64 / n;
    let mut left: BTreeMap<T, f64> = BTreeMap::new();
    let mut right: BTreeMap<T, f64> = BTreeMap::new();
    for (a, b) in pairs {
        *left.entry(a.clone()).or_default() += 1.0;
        *right.entry(b.clone()).or_default() += 1.0;
    }
    let expected: f64 = left.iter().map(|(k, a)| a * right.get(k).copied().unwrap_or(0.0)).sum::<f64>() / (n * n);
    if (1.0 - expected).abs() < 1e-15 {
        return if observed == 1.0 { 1.0 } else { 0.0 };
    }
    (observed - expected) / (1.0 - expected)
}

/// Every criterion-level figure for one predictor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriterionMetrics {
    pub rows: usize,
    pub failed: usize,
    /// Accuracy in TrialGPT's label space (= the four decisions).
    pub accuracy: f64,
    pub accuracy_collapsed: f64,
    /// Per TrialGPT wording ("included", "not excluded", ...).
    pub per_class: BTreeMap<String, ClassScores>,
    pub per_class_collapsed: BTreeMap<String, ClassScores>,
    pub kappa: f64,
    pub kappa_collapsed: f64,
    pub evidence_precision: f64,
    pub evidence_recall: f64,
    pub evidence_f1: f64,
}

fn wording(d: Decision, t: CriterionType) -> String {
    d.trialgpt_label(t).to_string()
}

fn collapsed_name(c: Collapsed) -> String {
    match c {
        Collapsed::Met => "met",
        Collapsed::NotMet => "not met",
        Collapsed::Unknown => "unknown",
    }
    .to_string()
}

fn per_class(golds: &[String], preds: &[Option<String>]) -> BTreeMap<String, ClassScores> {
    let classes: BTreeSet<&String> = golds.iter().chain(preds.iter().flatten()).collect();
    classes
        .into_iter()
        .map(|c| {
            let support = golds.iter().filter(|g| *g == c).count();
            let predicted = preds.iter().filter(|p| p.as_ref() == Some(c)).count();
            let tp = golds.iter().zip(preds).filter(|(g, p)| *g == c && p.as_ref() == Some(c)).count();
            let (precision, recall, f1) = prf(tp, predicted, support);
            (c.clone(), ClassScores { precision, recall, f1, support, predicted })
        })
        .collect()
}

/// Computes [`CriterionMetrics`] over `rows`.
pub fn criterion_metrics(rows: &[Prediction]) -> CriterionMetrics {
    let n = rows.len();
    let failed = rows.iter().filter(|r| r.predicted.is_none()).count();
    let correct = rows.iter().filter(|r| r.predicted == Some(r.gold)).count();
    let correct_collapsed = rows.iter().filter(|r| r.predicted.map(collapse) == Some(collapse(r.gold))).count();
    let ratio = |a: usize| if n == 0 { 0.0 } else { a as f64 / n as f64 };

    let golds: Vec<String> = rows.iter().map(|r| wording(r.gold, r.criterion_type)).collect();
    let preds: Vec<Option<String>> = rows.iter().map(|r| r.predicted.map(|d| wording(d, r.criterion_type))).collect();
    let golds_c: Vec<String> = rows.iter().map(|r| collapsed_name(collapse(r.gold))).collect();
    let preds_c: Vec<Option<String>> = rows.iter().map(|r| r.predicted.map(|d| collapsed_name(collapse(d)))).collect();

    // Failures are their own category (index 4 / 3) so they never agree.
    let code = |d: Option<Decision>| d.map_or(4, |d| Decision::ALL.iter().position(|x| *x == d).unwrap());
    let kappa = cohen_kappa(&rows.iter().map(|r| (code(Some(r.gold)), code(r.predicted))).collect::<Vec<_>>());
    let ccode = |d: Option<Decision>| d.map_or(3, |d| collapse(d) as usize);
    let kappa_collapsed =
        cohen_kappa(&rows.iter().map(|r| (ccode(Some(r.gold)), ccode(r.predicted))).collect::<Vec<_>>());

    let (mut tp, mut npred, mut ngold) = (0, 0, 0);
    for r in rows {
        tp += r.predicted_evidence.intersection(&r.gold_evidence).count();
        npred += r.predicted_evidence.len();
        ngold += r.gold_evidence.len();
    }
    let (evidence_precision, evidence_recall, evidence_f1) = prf(tp, npred, ngold);

    CriterionMetrics {
        rows: n,
        failed,
        accuracy: ratio(correct),
        accuracy_collapsed: ratio(correct_collapsed),
        per_class: per_class(&golds, &preds),
        per_class_collapsed: per_class(&golds_c, &preds_c),
        kappa,
        kappa_collapsed,
        evidence_precision,
        evidence_recall,
        evidence_f1,
    }
}

/// SplitMix64: a small, fixed, portable generator for the bootstrap.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0), by rejection so there is no modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }
}

/// A point estimate with its 95% percentile bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
}

/// Percentile bootstrap over patients: each replicate draws as many
/// patients as there are, with replacement, and takes all rows of each
/// drawn patient (a patient drawn twice counts twice). Patients are taken
/// in sorted id order so the result depends only on the rows and the seed.
pub fn bootstrap_by_patient(
    rows: &[Prediction],
    replicates: usize,
    seed: u64,
    statistic: impl Fn(&[Prediction]) -> f64,
) -> Interval {
    let mut by_patient: BTreeMap<&str, Vec<&Prediction>> = BTreeMap::new();
    for r in rows {
        by_patient.entry(r.patient_id.as_str()).or_default().push(r);
    }
    let groups: Vec<&Vec<&Prediction>> = by_patient.values().collect();
    let estimate = statistic(rows);
    if groups.is_empty() || replicates == 0 {
        return Interval { estimate, low: estimate, high: estimate };
    }
    let mut rng = SplitMix64::new(seed);
    let mut values = Vec::with_capacity(replicates);
    let mut sample: Vec<Prediction> = Vec::with_capacity(rows.len());
    for _ in 0..replicates {
        sample.clear();
        for _ in 0..groups.len() {
            let g = groups[rng.below(groups.len() as u64) as usize];
            sample.extend(g.iter().map(|r| (*r).clone()));
        }
        values.push(statistic(&sample));
    }
    values.sort_by(f64::total_cmp);
    Interval { estimate, low: quantile(&values, 0.025), high: quantile(&values, 0.975) }
}

/// A difference between two predictors on the same rows, with its 95%
/// paired bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairedDifference {
    /// statistic(a) - statistic(b) on all rows.
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    /// Share of replicates in which the difference is above zero.
    pub share_above_zero: f64,
}

/// Paired percentile bootstrap over patients of `statistic(a) -
/// statistic(b)`: each replicate draws patients as
/// [`bootstrap_by_patient`] does and takes *both* predictors' rows of each
/// drawn patient, so the interval is that of the difference, not two
/// intervals side by side. `a` and `b` hold the same rows in the same
/// order (same patient on each row), or this panics.
pub fn paired_bootstrap_by_patient(
    a: &[Prediction],
    b: &[Prediction],
    replicates: usize,
    seed: u64,
    statistic: impl Fn(&[Prediction]) -> f64,
) -> PairedDifference {
    assert_eq!(a.len(), b.len(), "a paired bootstrap needs the same rows for both predictors");
    let mut by_patient: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.patient_id, y.patient_id, "row {i}: the predictors' rows are not aligned");
        by_patient.entry(x.patient_id.as_str()).or_default().push(i);
    }
    let groups: Vec<&Vec<usize>> = by_patient.values().collect();
    let estimate = statistic(a) - statistic(b);
    if groups.is_empty() || replicates == 0 {
        return PairedDifference {
            estimate,
            low: estimate,
            high: estimate,
            share_above_zero: f64::from(u8::from(estimate > 0.0)),
        };
    }
    let mut rng = SplitMix64::new(seed);
    let mut values = Vec::with_capacity(replicates);
    let (mut sample_a, mut sample_b): (Vec<Prediction>, Vec<Prediction>) = (Vec::new(), Vec::new());
    for _ in 0..replicates {
        sample_a.clear();
        sample_b.clear();
        for _ in 0..groups.len() {
            let g = groups[rng.below(groups.len() as u64) as usize];
            sample_a.extend(g.iter().map(|&i| a[i].clone()));
            sample_b.extend(g.iter().map(|&i| b[i].clone()));
        }
        values.push(statistic(&sample_a) - statistic(&sample_b));
    }
    values.sort_by(f64::total_cmp);
    let above = values.iter().filter(|&&v| v > 0.0).count() as f64 / values.len() as f64;
    PairedDifference {
        estimate,
        low: quantile(&values, 0.025),
        high: quantile(&values, 0.975),
        share_above_zero: above,
    }
}

/// Linear interpolation between order statistics (R's type 7).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

#[cfg(test)]
mod tests {
    use super::*;
    use Decision::*;

    fn row(
        patient: &str,
        t: CriterionType,
        gold: Decision,
        pred: Option<Decision>,
        ge: &[i64],
        pe: &[i64],
    ) -> Prediction {
        Prediction {
            patient_id: patient.into(),
            criterion_type: t,
            gold,
            predicted: pred,
            gold_evidence: ge.iter().copied().collect(),
            predicted_evidence: pe.iter().copied().collect(),
        }
    }

    #[test]
    fn kappa_matches_a_hand_computed_table() {
        // Classic 2x2: a=20 (yes,yes), b=5 (yes,no), c=10 (no,yes), d=15.
        // po = 35/50 = 0.7; pe = (25*30 + 25*20)/2500 = 0.5; kappa = 0.4.
        let mut pairs = vec![];
        pairs.extend(std::iter::repeat_n((1, 1), 20));
        pairs.extend(std::iter::repeat_n((1, 0), 5));
        pairs.extend(std::iter::repeat_n((0, 1), 10));
        pairs.extend(std::iter::repeat_n((0, 0), 15));
        assert!((cohen_kappa(&pairs) - 0.4).abs() < 1e-12);
        assert_eq!(cohen_kappa(&[(1, 1), (1, 1)]), 1.0);
        assert_eq!(cohen_kappa::<i32>(&[]), 0.0);
    }

    #[test]
    fn small_case_by_hand() {
        use CriterionType::{Exclusion as E, Inclusion as I};
        let rows = vec![
            row("p1", I, Met, Some(Met), &[1, 2], &[1]), // correct; ev tp 1
            row("p1", E, NotMet, Some(Met), &[], &[3]),  // wrong; collapsed wrong
            row("p2", I, NotEnoughInformation, Some(NotMet), &[4], &[4, 5]), // wrong; ev tp 1
            row("p2", E, NotApplicable, Some(NotMet), &[], &[]), // wrong, collapsed right
            row("p3", E, NotMet, None, &[6], &[]),       // failed
        ];
        let m = criterion_metrics(&rows);
        assert_eq!((m.rows, m.failed), (5, 1));
        assert!((m.accuracy - 0.2).abs() < 1e-12);
        assert!((m.accuracy_collapsed - 0.4).abs() < 1e-12);
        // Evidence: tp 2, predicted 4, gold 4.
        assert!((m.evidence_precision - 0.5).abs() < 1e-12);
        assert!((m.evidence_recall - 0.5).abs() < 1e-12);
        assert!((m.evidence_f1 - 0.5).abs() < 1e-12);
        // "excluded" predicted once, never gold: precision 0, support 0.
        let ex = m.per_class["excluded"];
        assert_eq!((ex.support, ex.predicted, ex.precision), (0, 1, 0.0));
        let inc = m.per_class["included"];
        assert_eq!((inc.precision, inc.recall, inc.f1), (1.0, 1.0, 1.0));
        // "not excluded": gold 2 (p1 row 2, p3), predicted 1 (p2 row 4 wording) -> tp 0.
        let ne = m.per_class["not excluded"];
        assert_eq!((ne.support, ne.predicted, ne.f1), (2, 1, 0.0));
        // Collapsed "not met": gold rows 2,4,5 -> 3; predicted rows 3,4 -> 2; tp row 4 -> 1.
        let nm = m.per_class_collapsed["not met"];
        assert_eq!((nm.support, nm.predicted), (3, 2));
        assert!((nm.precision - 0.5).abs() < 1e-12 && (nm.recall - 1.0 / 3.0).abs() < 1e-12);
        // Kappa (4 decisions + failure), by hand: gold codes [0,1,2,3,1], pred [0,0,1,1,4];
        // po = 1/5; pe = sum_k g_k p_k / 25 = (1*2 + 2*2 + 1*0 + 1*0)/25 = 6/25.
        let expected = (0.2 - 0.24) / (1.0 - 0.24);
        assert!((m.kappa - expected).abs() < 1e-12, "{} vs {expected}", m.kappa);
    }

    #[test]
    fn bootstrap_is_deterministic_and_brackets_the_estimate() {
        use CriterionType::Inclusion as I;
        let mut rows = vec![];
        for p in 0..20 {
            for k in 0..5 {
                let right = (p * 7 + k) % 3 != 0;
                rows.push(row(&format!("p{p}"), I, Met, Some(if right { Met } else { NotMet }), &[], &[]));
            }
        }
        let acc = |r: &[Prediction]| criterion_metrics(r).accuracy;
        let a = bootstrap_by_patient(&rows, 500, 7, acc);
        let b = bootstrap_by_patient(&rows, 500, 7, acc);
        assert_eq!(a, b);
        assert!(a.low < a.estimate && a.estimate < a.high, "{a:?}");
        assert!(a.high - a.low < 0.3);
    }

    #[test]
    fn paired_bootstrap_of_a_difference() {
        use CriterionType::Inclusion as I;
        let acc = |r: &[Prediction]| criterion_metrics(r).accuracy;
        // b is right on 2 of 4 rows per patient; a on the same 2 plus one
        // more for even patients: a is never worse, so every replicate's
        // difference is >= 0, and > 0 whenever an even patient is drawn.
        let (mut a, mut b) = (vec![], vec![]);
        for p in 0..10 {
            for k in 0..4 {
                let right_b = k < 2;
                let right_a = right_b || (k == 2 && p % 2 == 0);
                let pred = |right: bool| Some(if right { Met } else { NotMet });
                a.push(row(&format!("p{p}"), I, Met, pred(right_a), &[], &[]));
                b.push(row(&format!("p{p}"), I, Met, pred(right_b), &[], &[]));
            }
        }
        let d = paired_bootstrap_by_patient(&a, &b, 1000, 7, acc);
        assert!((d.estimate - 5.0 / 40.0).abs() < 1e-12, "{d:?}");
        assert!(d.low >= 0.0 && d.low < d.estimate && d.estimate < d.high && d.high <= 0.25, "{d:?}");
        assert!(d.share_above_zero > 0.99, "{d:?}");
        // Against itself: exactly zero in every replicate.
        let same = paired_bootstrap_by_patient(&a, &a, 200, 7, acc);
        assert_eq!((same.estimate, same.low, same.high, same.share_above_zero), (0.0, 0.0, 0.0, 0.0));
        // Reversed, the interval flips sign.
        let r = paired_bootstrap_by_patient(&b, &a, 1000, 7, acc);
        assert!((r.low + d.high).abs() < 1e-12 && (r.high + d.low).abs() < 1e-12, "{r:?} vs {d:?}");
    }

    #[test]
    #[should_panic(expected = "not aligned")]
    fn paired_bootstrap_refuses_unaligned_rows() {
        use CriterionType::Inclusion as I;
        let a = vec![row("p1", I, Met, Some(Met), &[], &[])];
        let b = vec![row("p2", I, Met, Some(Met), &[], &[])];
        paired_bootstrap_by_patient(&a, &b, 10, 1, |r| criterion_metrics(r).accuracy);
    }

    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        // Vigna's splitmix64.c with state 0.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn quantile_type_7() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.5), 2.5);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 4.0);
    }
}
