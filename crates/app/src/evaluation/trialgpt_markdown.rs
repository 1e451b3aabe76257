//! `eval.md` for a TrialGPT evaluation: the method's row beside GPT-4's
//! on the same rows, per-class figures, trial-level agreement with the
//! SIGIR labels, usage, and (with a baseline) the paired differences.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use evident_eval::paper::{
    overall_row, paper_markdown, paper_report, paper_table, prevalence_accuracy, BinaryRow, PaperReport, PaperTable,
    PrevalenceBy,
};
use evident_eval::run::{trial_level, TrialLevel};
use evident_eval::{criterion_metrics, Comparison, Prediction, ReportRow};
use evident_match::exemplars::ExemplarMatch;
use evident_match::Decision;
use evident_match::Eligibility;

use super::trialgpt::MethodEval;

fn interval(i: &evident_eval::Interval) -> String {
    format!("{:.3} ({:.3}-{:.3})", i.estimate, i.low, i.high)
}

fn table_row(name: &str, r: &ReportRow, rows: usize) -> String {
    let m = &r.metrics;
    format!(
        "| {name} | {rows} | {} | {} | {} | {:.3} | {:.3} / {:.3} / {:.3} ({:.3}-{:.3}) | {} |\n",
        interval(&r.accuracy),
        interval(&r.accuracy_collapsed),
        interval(&r.kappa),
        m.kappa_collapsed,
        m.evidence_precision,
        m.evidence_recall,
        m.evidence_f1,
        r.evidence_f1.low,
        r.evidence_f1.high,
        m.failed
    )
}

pub(super) fn markdown(
    ours: &MethodEval,
    ours_row: &ReportRow,
    gpt4: &ReportRow,
    expert: &[(Eligibility, i64)],
    gpt4_trial: &[(Eligibility, i64)],
    patients: usize,
) -> String {
    let method = &ours.name;
    let rows = ours.predictions.len();
    let mut md = String::new();
    let _ = writeln!(md, "# TrialGPT criterion annotations: {method}\n");
    let _ = writeln!(md, "{rows} rows, {patients} patients; 95% intervals by bootstrap over patients.\n");
    md.push_str("| predictor | rows | accuracy (95% CI) | collapsed accuracy (95% CI) | kappa (95% CI) | collapsed kappa | evidence P / R / F1 (F1 95% CI) | failures |\n");
    md.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    md.push_str(&table_row(&format!("Evident {method}"), ours_row, rows));
    md.push_str(&table_row("GPT-4 (same rows)", gpt4, rows));
    md.push_str(&baseline_rows(&ours.predictions));
    let _ = writeln!(md, "\nPer class ({method}), precision / recall / F1 (support):");
    for (label, c) in &ours_row.metrics.per_class {
        let _ = writeln!(md, "- {label}: {:.3} / {:.3} / {:.3} ({})", c.precision, c.recall, c.f1, c.support);
    }
    if !ours.trial_items.is_empty() {
        md.push_str(
            "\nTrial level (annotated criteria only) against the SIGIR relevance labels (2 eligible, 1 excluded):\n\n",
        );
        md.push_str(
            "| labels from | pairs | accuracy | predicted -> relevance label counts |\n| --- | --- | --- | --- |\n",
        );
        md.push_str(&trial_line(&format!("Evident {method}"), &trial_level(&ours.trial_items)));
        md.push_str(&trial_line("GPT-4", &trial_level(gpt4_trial)));
        md.push_str(&trial_line("physicians", &trial_level(expert)));
    }
    let _ = writeln!(md, "\nUsage: {}", evident_match::report::usage_text(&ours.usage));
    md
}

fn trial_line(name: &str, t: &TrialLevel) -> String {
    format!("| {name} | {} | {:.3} | {} |\n", t.pairs, t.accuracy, confusion_text(&t.confusion))
}

/// The baseline's row and the paired differences `method - baseline`.
pub(super) fn comparison_markdown(
    ours: &MethodEval,
    base: &MethodEval,
    base_row: &ReportRow,
    c: &Comparison,
) -> String {
    let (a, b) = (&ours.name, &base.name);
    let rows = base.predictions.len();
    let mut md = String::new();
    let _ = writeln!(md, "\n## {a} against {b} on the same rows\n");
    md.push_str("| predictor | rows | accuracy (95% CI) | collapsed accuracy (95% CI) | kappa (95% CI) | collapsed kappa | evidence P / R / F1 (F1 95% CI) | failures |\n");
    md.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    md.push_str(&table_row(&format!("Evident {b}"), base_row, rows));
    let _ = writeln!(
        md,
        "\nDifference {a} - {b}, 95% interval by a paired bootstrap over patients (both methods' rows of each drawn patient), and the share of replicates above zero:\n"
    );
    md.push_str("| metric | difference (95% CI) | replicates > 0 |\n| --- | --- | --- |\n");
    for (name, d) in [
        ("accuracy", &c.accuracy),
        ("collapsed accuracy", &c.accuracy_collapsed),
        ("kappa", &c.kappa),
        ("evidence F1", &c.evidence_f1),
    ] {
        let _ = writeln!(
            md,
            "| {name} | {:+.3} ({:+.3} to {:+.3}) | {:.3} |",
            d.estimate, d.low, d.high, d.share_above_zero
        );
    }
    if !base.trial_items.is_empty() {
        md.push_str("\nTrial level:\n\n| labels from | pairs | accuracy | predicted -> relevance label counts |\n| --- | --- | --- | --- |\n");
        md.push_str(&trial_line(&format!("Evident {b}"), &trial_level(&base.trial_items)));
    }
    let _ = writeln!(md, "\nUsage ({b}): {}", evident_match::report::usage_text(&base.usage));
    md
}

fn confusion_text(c: &BTreeMap<String, BTreeMap<i64, usize>>) -> String {
    c.iter()
        .map(|(pred, by)| {
            let parts: Vec<String> = by.iter().map(|(l, n)| format!("{l}: {n}")).collect();
            format!("{pred} ({})", parts.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The two baselines beside the main table: always NOT MET (its figures on
/// the same rows) and class prevalence (expected accuracy when each row's
/// label is drawn with the gold shares of its criterion type; kappa 0).
fn baseline_rows(rows: &[Prediction]) -> String {
    let never: Vec<Prediction> =
        rows.iter().map(|r| Prediction { predicted: Some(Decision::NotMet), ..r.clone() }).collect();
    let m = criterion_metrics(&never);
    let mut md = format!(
        "| baseline: always NOT MET | {} | {:.3} | {:.3} | {:.3} | {:.3} | - | 0 |\n",
        m.rows, m.accuracy, m.accuracy_collapsed, m.kappa, m.kappa_collapsed
    );
    let labels: Vec<(&str, Decision)> = rows.iter().map(|r| (r.criterion_type.as_str(), r.gold)).collect();
    let collapsed: Vec<(&str, evident_eval::metrics::Collapsed)> =
        rows.iter().map(|r| (r.criterion_type.as_str(), evident_eval::metrics::collapse(r.gold))).collect();
    md.push_str(&format!(
        "| baseline: class prevalence (expected) | {} | {:.3} | {:.3} | 0.000 | 0.000 | - | 0 |\n",
        rows.len(),
        prevalence_accuracy(&labels),
        prevalence_accuracy(&collapsed)
    ));
    md
}

/// The papers' binary tables on the same rows: the method's with both
/// baselines, and GPT-4's.
#[derive(Debug, Clone, serde::Serialize)]
pub(super) struct Papers {
    pub method: PaperReport,
    pub gpt4: PaperTable,
}

fn binary(rows: &[Prediction]) -> Vec<BinaryRow> {
    rows.iter()
        .map(|r| BinaryRow::from_decisions(r.criterion_type.as_str(), r.criterion_type, r.gold, r.predicted))
        .collect()
}

pub(super) fn papers(ours: &[Prediction], gpt4: &[Prediction]) -> Papers {
    Papers { method: paper_report(&binary(ours), PrevalenceBy::CriterionType), gpt4: paper_table(&binary(gpt4)) }
}

pub(super) fn papers_markdown(method: &str, p: &Papers) -> String {
    let mut md = String::from(
        "\n## The papers' metrics\n\nBinary view (MET against the rest, as both papers score: NOT ENOUGH INFORMATION counts as not met). \
         Every criterion here is its own row, so MAKAR's per-criterion table is not shown; the class-prevalence \
         baseline uses the share of MET among criteria of the same type.\n\n",
    );
    md.push_str(&paper_markdown(&format!("Evident {method}"), &p.method, false));
    md.push_str("\nGPT-4 on the same rows:\n\n| predictor | rows | accuracy | precision | recall | F1 (met) | F1 (not met) | micro F1 (n2c2) | macro F1 (n2c2) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    md.push_str(&overall_row("GPT-4 (same rows)", &p.gpt4));
    md
}

/// Rows per (physician's label, predicted label or "failed"): where the
/// method leans.
pub(super) fn label_confusion(predictions: &[Prediction]) -> BTreeMap<String, BTreeMap<String, usize>> {
    let mut out: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for p in predictions {
        let predicted = p.predicted.map(|d| d.as_str().to_string()).unwrap_or_else(|| "failed".into());
        *out.entry(p.gold.as_str().to_string()).or_default().entry(predicted).or_default() += 1;
    }
    out
}

/// The confusion of labels as a table (physicians' labels as rows).
pub(super) fn confusion_markdown(predictions: &[Prediction]) -> String {
    let c = label_confusion(predictions);
    let mut columns: Vec<String> = Decision::ALL.iter().map(|d| d.as_str().to_string()).collect();
    columns.push("failed".into());
    let mut md =
        String::from("\nLabel confusion (rows: physicians' label; columns: predicted):\n\n| physician \\ predicted |");
    for col in &columns {
        let _ = write!(md, " {col} |");
    }
    md.push_str("\n| --- |");
    md.push_str(&" --- |".repeat(columns.len()));
    md.push('\n');
    for gold in Decision::ALL {
        let row = c.get(gold.as_str());
        let _ = write!(md, "| {} |", gold.as_str());
        for col in &columns {
            let _ = write!(md, " {} |", row.and_then(|r| r.get(col)).copied().unwrap_or(0));
        }
        md.push('\n');
    }
    md
}

/// What the levers were (exemplars, calibration).
pub(super) fn levers_markdown(exemplars: Option<&crate::exemplars::ExemplarOptions>, calibrate: bool) -> String {
    let mut md = String::new();
    if let Some(e) = exemplars {
        let _ = writeln!(
            md,
            "\nExemplars: bank {:?}, k {}, minimum similarity {}, matched on {}; none from the patient screened (leave one patient out).",
            e.bank,
            e.k,
            e.min_similarity,
            match e.matching {
                ExemplarMatch::Criterion => "the criterion texts",
                ExemplarMatch::Evidence => "the criterion texts with the sentences that decide them",
            }
        );
    }
    if calibrate {
        let _ =
            writeln!(md, "\nCalibration on: a MET or NOT MET citing no sentence counted as NOT ENOUGH INFORMATION.");
    }
    md
}

/// What the leave-one-patient-out label correction changed, and the
/// correction fitted on every patient's rows (where the predictor leans).
pub(super) fn correction_markdown(c: &evident_eval::correction::CorrectionSummary) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\nLabel correction (Evident's, not a paper's): each patient's decisions relabelled by the physicians' most frequent label on the other patients' rows with the same criterion type and predicted label (at least {} rows; leave one patient out). Criterion level only: the trial-level figures are the uncorrected decisions'. Rows changed: {}{}.",
        evident_eval::correction::MIN_ROWS,
        c.changed,
        if c.changes.is_empty() {
            String::new()
        } else {
            format!(" ({})", c.changes.iter().map(|(k, n)| format!("{k}: {n}")).collect::<Vec<_>>().join(", "))
        }
    );
    md.push_str("\nFitted on all patients, for reading only (type, predicted: physicians' labels -> corrected):\n\n");
    for cell in &c.fitted_on_all {
        let labels = cell.physicians.iter().map(|(d, n)| format!("{d} {n}")).collect::<Vec<_>>().join(", ");
        let _ = writeln!(
            md,
            "- {} {} ({} rows): {labels} -> {}",
            cell.criterion_type, cell.predicted, cell.rows, cell.corrected
        );
    }
    md
}

/// The threshold on P(MET) beside the other arms on the same decisions:
/// what it changed, the thresholds, and a paired difference against each.
pub(super) fn threshold_markdown(
    ours: &MethodEval,
    s: &evident_eval::threshold::ThresholdSummary,
    arms: &[(&str, ReportRow, Comparison)],
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\nThreshold on P(MET) (Evident's, not a paper's): P(MET) is the model's probability of \"1\" against \"0\" at its answer's first token; each patient's rows are decided MET when P(MET) reaches the threshold of their criterion type that maximises accuracy on the other patients' rows (leave one patient out; at least {} rows, else 0.5, the model's own answer). Rows with a P(MET): {} of {}. Rows changed: {}{}.",
        evident_eval::threshold::MIN_ROWS,
        s.rows_with_probability,
        ours.predictions.len(),
        s.changed,
        if s.changes.is_empty() {
            String::new()
        } else {
            format!(" ({})", s.changes.iter().map(|(k, n)| format!("{k}: {n}")).collect::<Vec<_>>().join(", "))
        }
    );
    for t in &s.fitted_on_all {
        let range = s.fold_range.get(t.criterion_type.as_str()).copied().unwrap_or((t.threshold, t.threshold));
        let _ = writeln!(
            md,
            "- {}: threshold {:.3} fitted on all {} rows ({} right, {} at 0.5); over the patients' folds {:.3} to {:.3}",
            t.criterion_type.as_str(),
            t.threshold,
            t.rows,
            t.correct,
            t.correct_at_argmax,
            range.0,
            range.1
        );
    }
    let _ = writeln!(
        md,
        "\n| arm (same decisions) | rows | accuracy (95% CI) | kappa (95% CI) | {} minus it: accuracy (95% CI) | kappa (95% CI) |\n| --- | --- | --- | --- | --- | --- |",
        ours.name
    );
    for (name, row, c) in arms {
        let m = &row.metrics;
        let _ = writeln!(
            md,
            "| {name} | {} | {:.3} ({:.3}-{:.3}) | {:.3} ({:.3}-{:.3}) | {:+.3} ({:+.3} to {:+.3}) | {:+.3} ({:+.3} to {:+.3}) |",
            m.rows,
            m.accuracy,
            row.accuracy.low,
            row.accuracy.high,
            m.kappa,
            row.kappa.low,
            row.kappa.high,
            c.accuracy.estimate,
            c.accuracy.low,
            c.accuracy.high,
            c.kappa.estimate,
            c.kappa.low,
            c.kappa.high
        );
    }
    md.push_str("\nThe model's own answers (P(MET) >= 0.5) are the baseline table below.\n");
    md
}

/// The majority-label-by-type baseline beside a corrected method, and the
/// paired difference against it.
pub(super) fn type_majority_markdown(name: &str, row: &ReportRow, c: &Comparison) -> String {
    let mut md = String::new();
    let m = &row.metrics;
    let _ = writeln!(
        md,
        "\nBaseline for the correction: the physicians' most frequent label by criterion type on the other patients' rows (leave one patient out), whatever the model said: accuracy {:.3} ({:.3}-{:.3}), kappa {:.3} ({:.3}-{:.3}), {} rows. {name} minus it, paired bootstrap over patients: accuracy {:+.3} ({:+.3} to {:+.3}), kappa {:+.3} ({:+.3} to {:+.3}).",
        m.accuracy,
        row.accuracy.low,
        row.accuracy.high,
        m.kappa,
        row.kappa.low,
        row.kappa.high,
        m.rows,
        c.accuracy.estimate,
        c.accuracy.low,
        c.accuracy.high,
        c.kappa.estimate,
        c.kappa.low,
        c.kappa.high,
    );
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use evident_match::CriterionType;

    fn p(t: CriterionType, gold: Decision, predicted: Decision) -> Prediction {
        Prediction {
            patient_id: "P".into(),
            criterion_type: t,
            gold,
            predicted: Some(predicted),
            gold_evidence: Default::default(),
            predicted_evidence: Default::default(),
        }
    }

    #[test]
    fn baselines_and_papers_tables_hand_computed() {
        use CriterionType::{Exclusion as Ex, Inclusion as In};
        // Inclusion gold: MET, MET, NOT ENOUGH INFORMATION; exclusion gold: NOT MET.
        let rows = [
            p(In, Decision::Met, Decision::Met),
            p(In, Decision::Met, Decision::NotMet),
            p(In, Decision::NotEnoughInformation, Decision::Met),
            p(Ex, Decision::NotMet, Decision::Met),
        ];
        let md = baseline_rows(&rows);
        // Always NOT MET is right on the exclusion row only: 1/4; collapsed
        // the same (NOT ENOUGH INFORMATION is unknown, not "not met").
        assert!(md.contains("| baseline: always NOT MET | 4 | 0.250 | 0.250 |"), "{md}");
        // Prevalence: inclusion rows right with 2/3, 2/3, 1/3; exclusion 1 -> (2/3+2/3+1/3+1)/4 = 2/3.
        assert!(md.contains("| baseline: class prevalence (expected) | 4 | 0.667 | 0.667 | 0.000 |"), "{md}");
        let papers = papers(&rows, &rows);
        // Binary view: tm=1, fn=1, fm=2 (NEI and the exclusion), tn=0 -> accuracy 1/4, P 1/3, R 1/2.
        let o = papers.gpt4.overall;
        assert_eq!((o.accuracy, o.recall), (0.25, 0.5));
        assert!((o.precision - 1.0 / 3.0).abs() < 1e-12);
        let md = papers_markdown("ican", &papers);
        assert!(md.contains("| Evident ican | 4 | 0.250 | 0.333 | 0.500 | 0.400 | 0.000 | 0.200 |"), "{md}");
        assert!(md.contains("| baseline: always NOT MET | 4 | 0.500 | 0.000 | 0.000 |"), "{md}");
        assert!(md.contains("| GPT-4 (same rows) | 4 | 0.250 |"), "{md}");
    }
}
