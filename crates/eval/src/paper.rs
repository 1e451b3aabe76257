//! The papers' own figures on binary (met / not met) judgements, with the
//! two baselines every table carries.
//!
//! - MAKAR (seed 000, Tables I-II): per-criterion accuracy and F1, and the
//!   inclusion and exclusion criteria separately (CT-IN, CT-EX).
//! - Wornow et al. (seed 001; `calc_metrics` of their code): accuracy,
//!   precision and recall of the met class, the met and not-met F1s, the
//!   n2c2 "micro F1" (the mean of the two class F1s on counts pooled over
//!   criteria) and "macro F1" (that mean per criterion, averaged).
//! - Baselines: always NOT MET, and class prevalence: a predictor that says
//!   MET with the gold share of MET in the row's group (the criterion for
//!   n2c2, the criterion type for TrialGPT, where every criterion is its own
//!   row). The prevalence baseline is computed exactly as an expectation:
//!   every row contributes its probability of each outcome to the counts,
//!   so its accuracy is the expected accuracy, and its F1s are the F1s of
//!   the expected counts.
//!
//! Binary view of Evident's labels (both papers' convention): MET is met;
//! NOT MET, NOT ENOUGH INFORMATION and NOT APPLICABLE are not met. A failed
//! prediction (no valid answer) is wrong: it adds to the gold class's
//! support and to no prediction.

use std::collections::BTreeMap;

use evident_match::{CriterionType, Decision};
use serde::Serialize;

/// One judgement in the binary view. `p_met` is the probability the
/// predictor says MET (0 or 1 for a real predictor); `None` when it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct BinaryRow {
    pub criterion_id: String,
    pub criterion_type: CriterionType,
    pub gold_met: bool,
    pub p_met: Option<f64>,
}

impl BinaryRow {
    /// The binary view of a decision pair (`predicted` `None`: failed).
    pub fn from_decisions(
        criterion_id: &str,
        criterion_type: CriterionType,
        gold: Decision,
        predicted: Option<Decision>,
    ) -> BinaryRow {
        BinaryRow {
            criterion_id: criterion_id.to_string(),
            criterion_type,
            gold_met: gold == Decision::Met,
            p_met: predicted.map(|d| if d == Decision::Met { 1.0 } else { 0.0 }),
        }
    }
}

/// Expected confusion counts (fractional for the prevalence baseline).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Counts {
    pub true_met: f64,
    pub false_met: f64,
    pub false_not_met: f64,
    pub true_not_met: f64,
    /// Failed rows whose gold is met / not met.
    pub failed_met: f64,
    pub failed_not_met: f64,
}

impl Counts {
    fn add(&mut self, r: &BinaryRow) {
        match (r.p_met, r.gold_met) {
            (None, true) => self.failed_met += 1.0,
            (None, false) => self.failed_not_met += 1.0,
            (Some(p), true) => {
                self.true_met += p;
                self.false_not_met += 1.0 - p;
            }
            (Some(p), false) => {
                self.false_met += p;
                self.true_not_met += 1.0 - p;
            }
        }
    }

    fn merge(&mut self, o: &Counts) {
        self.true_met += o.true_met;
        self.false_met += o.false_met;
        self.false_not_met += o.false_not_met;
        self.true_not_met += o.true_not_met;
        self.failed_met += o.failed_met;
        self.failed_not_met += o.failed_not_met;
    }

    pub fn rows(&self) -> f64 {
        self.true_met + self.false_met + self.false_not_met + self.true_not_met + self.failed_met + self.failed_not_met
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}

fn f1(p: f64, r: f64) -> f64 {
    if p + r == 0.0 {
        0.0
    } else {
        2.0 * p * r / (p + r)
    }
}

/// The figures of one table row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BinaryScores {
    pub rows: f64,
    pub gold_met: f64,
    pub accuracy: f64,
    /// Precision, recall and F1 of the met class.
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub f1_not_met: f64,
    /// The n2c2 figure: mean of the two class F1s.
    pub mean_f1: f64,
}

impl BinaryScores {
    pub fn from_counts(c: &Counts) -> BinaryScores {
        let n = c.rows();
        let gold_met = c.true_met + c.false_not_met + c.failed_met;
        let gold_not_met = c.false_met + c.true_not_met + c.failed_not_met;
        let precision = ratio(c.true_met, c.true_met + c.false_met);
        let recall = ratio(c.true_met, gold_met);
        let p0 = ratio(c.true_not_met, c.true_not_met + c.false_not_met);
        let r0 = ratio(c.true_not_met, gold_not_met);
        let (f_met, f_not) = (f1(precision, recall), f1(p0, r0));
        BinaryScores {
            rows: n,
            gold_met,
            accuracy: ratio(c.true_met + c.true_not_met, n),
            precision,
            recall,
            f1: f_met,
            f1_not_met: f_not,
            mean_f1: (f_met + f_not) / 2.0,
        }
    }
}

/// The papers' table for one predictor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PaperTable {
    /// On all rows (pooled counts): accuracy, P, R, F1s; `overall.mean_f1`
    /// is the n2c2 "overall micro F1".
    pub overall: BinaryScores,
    /// MAKAR's CT-IN / CT-EX; `None` when there are no rows of the type.
    pub inclusion: Option<BinaryScores>,
    pub exclusion: Option<BinaryScores>,
    pub per_criterion: BTreeMap<String, BinaryScores>,
    /// The n2c2 "overall macro F1": the mean F1 per criterion, averaged.
    pub macro_f1: f64,
}

/// Computes [`PaperTable`] over `rows`.
pub fn paper_table(rows: &[BinaryRow]) -> PaperTable {
    let mut by: BTreeMap<String, Counts> = BTreeMap::new();
    let (mut all, mut inc, mut exc) = (Counts::default(), Counts::default(), Counts::default());
    for r in rows {
        let mut one = Counts::default();
        one.add(r);
        by.entry(r.criterion_id.clone()).or_default().merge(&one);
        all.merge(&one);
        match r.criterion_type {
            CriterionType::Inclusion => inc.merge(&one),
            CriterionType::Exclusion => exc.merge(&one),
        }
    }
    let per_criterion: BTreeMap<String, BinaryScores> =
        by.iter().map(|(id, c)| (id.clone(), BinaryScores::from_counts(c))).collect();
    let macro_f1 = if per_criterion.is_empty() {
        0.0
    } else {
        per_criterion.values().map(|s| s.mean_f1).sum::<f64>() / per_criterion.len() as f64
    };
    let some = |c: &Counts| (c.rows() > 0.0).then(|| BinaryScores::from_counts(c));
    PaperTable {
        overall: BinaryScores::from_counts(&all),
        inclusion: some(&inc),
        exclusion: some(&exc),
        per_criterion,
        macro_f1,
    }
}

/// The always-NOT-MET predictor on the same rows.
pub fn always_not_met(rows: &[BinaryRow]) -> Vec<BinaryRow> {
    rows.iter().map(|r| BinaryRow { p_met: Some(0.0), ..r.clone() }).collect()
}

/// How the prevalence baseline groups rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrevalenceBy {
    /// Each criterion's own share of MET (n2c2: 13 criteria over many patients).
    Criterion,
    /// The share of MET among the criteria of the row's type (TrialGPT:
    /// every criterion appears once).
    CriterionType,
}

/// The class-prevalence predictor on the same rows: says MET with the gold
/// share of MET in the row's group.
pub fn prevalence_baseline(rows: &[BinaryRow], by: PrevalenceBy) -> Vec<BinaryRow> {
    let key = |r: &BinaryRow| match by {
        PrevalenceBy::Criterion => r.criterion_id.clone(),
        PrevalenceBy::CriterionType => r.criterion_type.as_str().to_string(),
    };
    let mut share: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for r in rows {
        let e = share.entry(key(r)).or_default();
        e.0 += f64::from(u8::from(r.gold_met));
        e.1 += 1.0;
    }
    rows.iter()
        .map(|r| {
            let (met, n) = share[&key(r)];
            BinaryRow { p_met: Some(met / n), ..r.clone() }
        })
        .collect()
}

/// One predictor's table beside both baselines, as `eval` reports it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PaperReport {
    pub predictor: PaperTable,
    pub always_not_met: PaperTable,
    pub prevalence: PaperTable,
}

pub fn paper_report(rows: &[BinaryRow], by: PrevalenceBy) -> PaperReport {
    PaperReport {
        predictor: paper_table(rows),
        always_not_met: paper_table(&always_not_met(rows)),
        prevalence: paper_table(&prevalence_baseline(rows, by)),
    }
}

/// Expected accuracy of the class-prevalence predictor in a multi-class
/// label space: each row's predictor draws a label with the gold shares of
/// its group, so a row is right with the share of its own gold label.
/// `rows` are (group, gold label).
pub fn prevalence_accuracy<G: Ord + Clone, L: Ord + Clone>(rows: &[(G, L)]) -> f64 {
    if rows.is_empty() {
        return 0.0;
    }
    let mut by: BTreeMap<G, (BTreeMap<L, f64>, f64)> = BTreeMap::new();
    for (g, l) in rows {
        let e = by.entry(g.clone()).or_default();
        *e.0.entry(l.clone()).or_default() += 1.0;
        e.1 += 1.0;
    }
    rows.iter().map(|(g, l)| by[g].0[l] / by[g].1).sum::<f64>() / rows.len() as f64
}

/// One overall row of [`paper_markdown`]'s first table. The prevalence
/// baseline's rows are a sum of expected weights, so they are rounded
/// (49, not 48.99999999999996).
pub fn overall_row(label: &str, t: &PaperTable) -> String {
    let o = &t.overall;
    format!(
        "| {label} | {:.0} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |\n",
        o.rows, o.accuracy, o.precision, o.recall, o.f1, o.f1_not_met, o.mean_f1, t.macro_f1
    )
}

/// Markdown: the overall rows (predictor and both baselines), inclusion
/// and exclusion separately, and per criterion when `per_criterion`.
pub fn paper_markdown(name: &str, report: &PaperReport, per_criterion: bool) -> String {
    use std::fmt::Write as _;
    let mut md = String::new();
    md.push_str("| predictor | rows | accuracy | precision | recall | F1 (met) | F1 (not met) | micro F1 (n2c2) | macro F1 (n2c2) |\n");
    md.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (label, t) in [
        (name, &report.predictor),
        ("baseline: always NOT MET", &report.always_not_met),
        ("baseline: class prevalence (expected)", &report.prevalence),
    ] {
        md.push_str(&overall_row(label, t));
    }
    type Pick = fn(&PaperTable) -> Option<BinaryScores>;
    let by_type: [(&str, Pick); 2] = [("inclusion", |t| t.inclusion), ("exclusion", |t| t.exclusion)];
    if by_type.iter().any(|(_, f)| f(&report.predictor).is_some()) {
        md.push_str("\nInclusion and exclusion criteria separately (MAKAR's CT-IN / CT-EX), accuracy / F1 (met):\n\n");
        md.push_str("| criteria | rows | gold met | ");
        let _ = writeln!(md, "{name} | always NOT MET | class prevalence |");
        md.push_str("| --- | --- | --- | --- | --- | --- |\n");
        for (kind, f) in by_type {
            if let Some(p) = f(&report.predictor) {
                let cell =
                    |s: Option<BinaryScores>| s.map_or("-".into(), |s| format!("{:.3} / {:.3}", s.accuracy, s.f1));
                let _ = writeln!(
                    md,
                    "| {kind} | {} | {} | {} | {} | {} |",
                    p.rows,
                    p.gold_met,
                    cell(Some(p)),
                    cell(f(&report.always_not_met)),
                    cell(f(&report.prevalence))
                );
            }
        }
    }
    if per_criterion && !report.predictor.per_criterion.is_empty() {
        md.push_str("\nPer criterion (MAKAR's Table I), accuracy / F1 (met):\n\n");
        let _ = writeln!(md, "| criterion | rows | gold met | {name} | always NOT MET | class prevalence |");
        md.push_str("| --- | --- | --- | --- | --- | --- |\n");
        for (id, s) in &report.predictor.per_criterion {
            let cell = |t: &PaperTable| {
                t.per_criterion.get(id).map_or("-".into(), |s| format!("{:.3} / {:.3}", s.accuracy, s.f1))
            };
            let _ = writeln!(
                md,
                "| {id} | {} | {} | {:.3} / {:.3} | {} | {} |",
                s.rows,
                s.gold_met,
                s.accuracy,
                s.f1,
                cell(&report.always_not_met),
                cell(&report.prevalence)
            );
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, t: CriterionType, gold: bool, pred: Option<bool>) -> BinaryRow {
        BinaryRow {
            criterion_id: id.into(),
            criterion_type: t,
            gold_met: gold,
            p_met: pred.map(|p| f64::from(u8::from(p))),
        }
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    use CriterionType::{Exclusion as Ex, Inclusion as In};

    /// A (inclusion): gold met, met, not, not; predicted met, not, met, not.
    /// B (exclusion): gold met, not, not; predicted failed, not, not.
    fn rows() -> Vec<BinaryRow> {
        vec![
            row("A", In, true, Some(true)),
            row("A", In, true, Some(false)),
            row("A", In, false, Some(true)),
            row("A", In, false, Some(false)),
            row("B", Ex, true, None),
            row("B", Ex, false, Some(false)),
            row("B", Ex, false, Some(false)),
        ]
    }

    #[test]
    fn hand_computed_predictor() {
        let t = paper_table(&rows());
        // Pooled: tm=1, fm=1, fn=1, tn=3, failed met=1. Accuracy 4/7.
        close(t.overall.accuracy, 4.0 / 7.0);
        // Met: P = 1/2, R = 1/3 (gold met 3, the failed one included), F1 = 0.4.
        close(t.overall.precision, 0.5);
        close(t.overall.recall, 1.0 / 3.0);
        close(t.overall.f1, 0.4);
        // Not met: P = 3/4, R = 3/4, F1 = 0.75; n2c2 micro = (0.4 + 0.75) / 2.
        close(t.overall.f1_not_met, 0.75);
        close(t.overall.mean_f1, 0.575);
        // A: acc 1/2, met F1 1/2, not-met F1 1/2. B: acc 2/3, met F1 0, not met P=1 R=1 F1=1.
        close(t.per_criterion["A"].accuracy, 0.5);
        close(t.per_criterion["A"].f1, 0.5);
        close(t.per_criterion["B"].accuracy, 2.0 / 3.0);
        close(t.per_criterion["B"].f1, 0.0);
        close(t.per_criterion["B"].f1_not_met, 1.0);
        close(t.macro_f1, (0.5 + 0.5) / 2.0);
        // MAKAR's split equals the criteria here (A is the only inclusion).
        close(t.inclusion.unwrap().accuracy, 0.5);
        close(t.exclusion.unwrap().accuracy, 2.0 / 3.0);
    }

    #[test]
    fn hand_computed_baselines() {
        let rows = rows();
        let never = paper_table(&always_not_met(&rows));
        // 4 of 7 gold rows are not met.
        close(never.overall.accuracy, 4.0 / 7.0);
        close(never.overall.precision, 0.0);
        close(never.overall.recall, 0.0);
        close(never.overall.f1, 0.0);
        // Not met: P = 4/7, R = 1, F1 = 8/11.
        close(never.overall.f1_not_met, 8.0 / 11.0);
        close(never.exclusion.unwrap().accuracy, 2.0 / 3.0);

        // Prevalence by criterion: A says met with 1/2, B with 1/3.
        let prev = paper_table(&prevalence_baseline(&rows, PrevalenceBy::Criterion));
        // A: expected correct 4 x 1/2 = 2 of 4. B: 1/3 + 2/3 + 2/3 = 5/3 of 3.
        close(prev.per_criterion["A"].accuracy, 0.5);
        close(prev.per_criterion["B"].accuracy, 5.0 / 9.0);
        close(prev.overall.accuracy, (2.0 + 5.0 / 3.0) / 7.0);
        // B: tm=1/3, fm=2/3 (two not-met rows x 1/3), fn=2/3 -> P = 1/3, R = 1/3, F1 = 1/3.
        close(prev.per_criterion["B"].f1, 1.0 / 3.0);
        // By type gives the same groups here.
        let by_type = paper_table(&prevalence_baseline(&rows, PrevalenceBy::CriterionType));
        close(by_type.overall.accuracy, prev.overall.accuracy);
    }

    #[test]
    fn prevalence_accuracy_hand_computed() {
        // Group x: labels a, a, b -> shares 2/3, 2/3, 1/3; group y: c -> 1.
        let rows = [("x", "a"), ("x", "a"), ("x", "b"), ("y", "c")];
        close(prevalence_accuracy(&rows), (2.0 / 3.0 + 2.0 / 3.0 + 1.0 / 3.0 + 1.0) / 4.0);
    }

    #[test]
    fn decisions_map_to_the_binary_view() {
        let r = BinaryRow::from_decisions("X", In, Decision::NotEnoughInformation, Some(Decision::Met));
        assert!(!r.gold_met);
        assert_eq!(r.p_met, Some(1.0));
        assert_eq!(BinaryRow::from_decisions("X", In, Decision::Met, None).p_met, None);
        assert_eq!(BinaryRow::from_decisions("X", In, Decision::Met, Some(Decision::NotApplicable)).p_met, Some(0.0));
    }

    #[test]
    fn an_expected_row_count_prints_as_a_whole_number() {
        let mut t = paper_table(&rows());
        t.overall.rows = 49.0 - 4e-14;
        assert!(overall_row("prevalence", &t).starts_with("| prevalence | 49 | "), "{}", overall_row("prevalence", &t));
    }

    #[test]
    fn markdown_carries_both_baselines_and_the_split() {
        let md = paper_markdown("Evident ican", &paper_report(&rows(), PrevalenceBy::Criterion), true);
        assert!(md.contains("| Evident ican | 7 | 0.571 | 0.500 | 0.333 | 0.400 | 0.750 | 0.575 | 0.500 |"), "{md}");
        assert!(md.contains("| baseline: always NOT MET | 7 | 0.571 | 0.000 |"), "{md}");
        assert!(md.contains("| baseline: class prevalence (expected) | 7 |"));
        assert!(md.contains("| exclusion | 3 | 1 | 0.667 / 0.000 | 0.667 / 0.000 |"), "{md}");
        assert!(md.contains("| B | 3 | 1 | 0.667 / 0.000 | 0.667 / 0.000 | 0.556 / 0.333 |"), "{md}");
    }
}
