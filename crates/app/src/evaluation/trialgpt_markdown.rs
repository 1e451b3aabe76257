//! `eval.md` for a TrialGPT evaluation: the method's row beside GPT-4's
//! on the same rows, per-class figures, trial-level agreement with the
//! SIGIR labels, usage, and (with a baseline) the paired differences.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use evident_eval::run::{trial_level, TrialLevel};
use evident_eval::{Comparison, ReportRow};
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
    let method = ours.method;
    let rows = ours.predictions.len();
    let mut md = String::new();
    let _ = writeln!(md, "# TrialGPT criterion annotations: {method}\n");
    let _ = writeln!(md, "{rows} rows, {patients} patients; 95% intervals by bootstrap over patients.\n");
    md.push_str("| predictor | rows | accuracy (95% CI) | collapsed accuracy (95% CI) | kappa (95% CI) | collapsed kappa | evidence P / R / F1 (F1 95% CI) | failures |\n");
    md.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    md.push_str(&table_row(&format!("Evident {method}"), ours_row, rows));
    md.push_str(&table_row("GPT-4 (same rows)", gpt4, rows));
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
    let (a, b) = (ours.method, base.method);
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
