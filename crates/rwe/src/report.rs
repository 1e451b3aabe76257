//! The study report, `report.html`: one self-contained page (no scripts, no
//! outside resources) a reviewer reads beside `bundle.json`. It shows the
//! run's identity (task, strategy, model, database and code hashes), the
//! protocol, the attrition table the agent exported, a baseline table of the
//! agent's final cohort, the cohort audit (each rule check, the judge's
//! verdicts), the results per question (each choice and field with the
//! agent's answer and the step that gave it, the reference value, and
//! whether a gated field was ever revealed), the analyses the typed
//! statistics tools computed (Kaplan-Meier curves and forest plots as
//! inline SVG from `evident_stats::svg`) and the whole step trace.
//!
//! Every string that reaches the page goes through [`escape`]; the SVG
//! figures escape their own labels.

use std::fmt::Write;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use evident_model::text::escape_html as escape;

use crate::analysis::AnalysisOutput;
use crate::audit::{Attrition, AuditTable, StepKind, ATTRITION_FILE};
use crate::bundle::Bundle;
use crate::compiled_judge::JudgeStrategy;
use crate::gold::Gold;
use crate::sheet::{AnswerSheet, AnswerValue};
use crate::task::FieldKind;

/// The attrition table of a run: the agent's `attrition.csv` as read, or
/// why there is none, beside the size of the exported cohort.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttritionReport {
    pub table: Option<Attrition>,
    /// Why `table` is missing: no file, or what was wrong with it.
    pub problem: Option<String>,
    /// Rows of `cohort_audit.csv`, when it was exported.
    pub audit_rows: Option<usize>,
}

impl AttritionReport {
    /// Reads `attrition.csv` from the run's workspace.
    pub fn read(workspace: &Path, audit_rows: Option<usize>) -> AttritionReport {
        let path = workspace.join(ATTRITION_FILE);
        if !path.is_file() {
            return AttritionReport {
                table: None,
                problem: Some(format!("the agent wrote no {ATTRITION_FILE}")),
                audit_rows,
            };
        }
        match Attrition::read_csv(&path) {
            Ok(table) => AttritionReport { table: Some(table), problem: None, audit_rows },
            Err(problem) => AttritionReport { table: None, problem: Some(problem), audit_rows },
        }
    }

    /// Whether the last step's count equals the exported cohort's rows
    /// (`None` when either is missing).
    pub fn agrees_with_audit(&self) -> Option<bool> {
        Some(self.table.as_ref()?.remaining() == self.audit_rows? as u64)
    }
}

/// One variable of the cohort's baseline table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BaselineRow {
    pub variable: String,
    /// Rows with a value.
    pub n: usize,
    /// Rows without one (empty or `NA`).
    pub missing: usize,
    pub summary: BaselineSummary,
}

/// How a baseline variable is summarised.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BaselineSummary {
    /// Only 0 and 1: the count and percentage of 1.
    Binary {
        ones: usize,
        percent: f64,
    },
    Continuous {
        mean: f64,
        sd: f64,
        median: f64,
        q1: f64,
        q3: f64,
    },
    /// Not numeric: how many distinct values.
    Text {
        distinct: usize,
    },
}

/// The baseline table of the agent's final cohort: every column of the
/// audit file but the identifiers.
pub fn baseline_table(table: &AuditTable) -> Vec<BaselineRow> {
    let ids = ["subject_id", "hadm_id", "stay_id"];
    let mut rows = Vec::new();
    for (i, name) in table.columns.iter().enumerate() {
        if ids.iter().any(|id| name.eq_ignore_ascii_case(id)) {
            continue;
        }
        let cells: Vec<&str> = table
            .rows
            .iter()
            .map(|r| r[i].as_str())
            .filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case("na") && !c.eq_ignore_ascii_case("null"))
            .collect();
        let missing = table.rows.len() - cells.len();
        let numbers: Option<Vec<f64>> = cells.iter().map(|c| c.parse::<f64>().ok().filter(|v| v.is_finite())).collect();
        let summary = match numbers {
            Some(v) if !v.is_empty() && v.iter().all(|x| *x == 0.0 || *x == 1.0) => {
                let ones = v.iter().filter(|x| **x == 1.0).count();
                BaselineSummary::Binary { ones, percent: 100.0 * ones as f64 / v.len() as f64 }
            }
            Some(v) if !v.is_empty() => match evident_stats::describe::summarize(&v) {
                Ok(s) => BaselineSummary::Continuous { mean: s.mean, sd: s.sd, median: s.median, q1: s.q1, q3: s.q3 },
                Err(_) => continue,
            },
            _ => {
                let mut distinct = cells.clone();
                distinct.sort_unstable();
                distinct.dedup();
                BaselineSummary::Text { distinct: distinct.len() }
            }
        };
        rows.push(BaselineRow { variable: name.clone(), n: cells.len(), missing, summary });
    }
    rows
}

/// A number as the page shows it: NaN as a dash, small p-values in
/// scientific notation.
fn num(x: f64) -> String {
    if !x.is_finite() {
        return "–".to_string();
    }
    if x != 0.0 && x.abs() < 1e-3 {
        return format!("{x:.3e}");
    }
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn answer_text(v: &AnswerValue) -> String {
    match v {
        AnswerValue::Number(x) => num(*x),
        AnswerValue::Choice(c) => c.clone(),
    }
}

const STYLE: &str = "body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}\
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}\
td.n{text-align:right}.pass{color:#176117}.fail{color:#a11}pre{white-space:pre-wrap;background:#f6f6f6;padding:.5rem;overflow-x:auto}\
details{margin:.25rem 0}summary{cursor:pointer}.muted{color:#666}";

/// Renders the report of one run. `gold` holds the reference answers the
/// run was scored against.
pub fn render_report(bundle: &Bundle, gold: &Gold) -> String {
    let mut o = String::new();
    let task = bundle.task;
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        escape(&format!("Study report: {}", task.title))
    );
    let _ = writeln!(o, "<h1>{}</h1>", escape(&task.title));
    identity(&mut o, bundle);
    let _ = writeln!(
        o,
        "<h2>Protocol</h2>\n<h3>Background and objective</h3>\n<p>{}</p>",
        escape(&task.protocol.background)
    );
    let _ = writeln!(o, "<h3>Research methods</h3>\n<pre>{}</pre>", escape(&task.protocol.methods));
    attrition(&mut o, bundle.attrition);
    cohort_definition(&mut o, bundle.cohort_sql.as_deref());
    baseline(&mut o, bundle.baseline);
    audit(&mut o, bundle);
    results(&mut o, bundle, gold);
    analyses(&mut o, bundle);
    trace(&mut o, bundle);
    o.push_str("</body></html>\n");
    o
}

fn identity(o: &mut String, b: &Bundle) {
    let run = b.run;
    let elapsed: u64 = run.steps.iter().map(|s| s.elapsed_ms).sum();
    let rows: Vec<(&str, String)> = vec![
        ("task", b.task.id.clone()),
        ("strategy", b.strategy.as_str().to_string()),
        ("model", b.model.clone()),
        ("database", b.database.url.clone()),
        ("database hash", database_hash(&b.database)),
        ("task file SHA-256", b.task_sha256.clone()),
        ("prompts SHA-256", b.prompts_sha256.clone()),
        ("Evident", b.evident_version.to_string()),
        (
            "ended",
            format!(
                "{:?} after {} steps ({} resumed from an earlier process)",
                run.termination,
                run.steps.len(),
                run.resumed_steps
            ),
        ),
        ("tokens", format!("{} prompt, {} completion", run.prompt_tokens, run.completion_tokens)),
        ("agent time", format!("{:.1} s", elapsed as f64 / 1000.0)),
    ];
    o.push_str("<table>\n");
    for (k, v) in rows {
        let _ = writeln!(o, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(&v));
    }
    o.push_str("</table>\n");
}

/// The database hash as the identity table shows it: what kind it is,
/// the hash, when it was computed and whether it came from the cache, and
/// the note (why none, or the cache's limits).
fn database_hash(d: &crate::bundle::DatabaseInfo) -> String {
    let mut text = format!("{} (asked: {})", d.hash_method.describe(), d.hash_requested.as_str());
    if let Some(sha256) = &d.sha256 {
        let _ = write!(text, ": SHA-256 {sha256}");
    }
    if let Some(at) = &d.hash_computed_at {
        let took = d.hash_elapsed_ms.map(|ms| format!(" in {:.1} s", ms as f64 / 1000.0)).unwrap_or_default();
        let cached = if d.hash_from_cache { ", taken from Evident's cache" } else { "" };
        let _ = write!(text, "; computed {at}{took}{cached}");
    }
    if let Some(note) = &d.hash_note {
        let _ = write!(text, "; {note}");
    }
    text
}

fn attrition(o: &mut String, a: &AttritionReport) {
    o.push_str("<h2>Attrition</h2>\n");
    match &a.table {
        None => {
            let _ = writeln!(
                o,
                "<p class=\"fail\">No attrition table: {}.</p>",
                escape(a.problem.as_deref().unwrap_or("none was exported"))
            );
        }
        Some(t) => {
            o.push_str("<table><tr><th>step</th><th>kind</th><th>removed</th><th>remaining</th></tr>\n");
            for s in t.steps() {
                let kind = match s.kind {
                    StepKind::Source => "source",
                    StepKind::Inclusion => "inclusion",
                    StepKind::Exclusion => "exclusion",
                };
                let removed = if s.kind == StepKind::Source { String::new() } else { s.removed.to_string() };
                let _ = writeln!(
                    o,
                    "<tr><td>{}</td><td>{kind}</td><td class=\"n\">{removed}</td><td class=\"n\">{}</td></tr>",
                    escape(&s.description),
                    s.remaining
                );
            }
            o.push_str("</table>\n");
        }
    }
    match (a.agrees_with_audit(), a.audit_rows) {
        (Some(true), Some(n)) => {
            let _ =
                writeln!(o, "<p class=\"pass\">The last step leaves {n} units, the rows of the exported cohort.</p>");
        }
        (Some(false), Some(n)) => {
            let _ = writeln!(
                o,
                "<p class=\"fail\">The last step leaves {} units, but the exported cohort has {n} rows.</p>",
                a.table.as_ref().map_or(0, Attrition::remaining)
            );
        }
        _ => {}
    }
}

fn cohort_definition(o: &mut String, sql: Option<&str>) {
    o.push_str("<h3>Cohort definition (SQL)</h3>\n");
    match sql {
        Some(sql) => {
            let _ = writeln!(o, "<pre>{}</pre>", escape(sql));
        }
        None => o.push_str(
            "<p class=\"muted\">No cohort.sql in the workspace: the SQL or R that built the cohort is in the step trace.</p>\n",
        ),
    }
}

fn baseline(o: &mut String, rows: &[BaselineRow]) {
    o.push_str("<h2>Baseline characteristics of the exported cohort</h2>\n");
    if rows.is_empty() {
        o.push_str("<p class=\"muted\">No cohort variables: no cohort_audit.csv, or it holds identifiers only.</p>\n");
        return;
    }
    o.push_str("<table><tr><th>variable</th><th>n</th><th>missing</th><th>summary</th></tr>\n");
    for r in rows {
        let summary = match &r.summary {
            BaselineSummary::Binary { ones, percent } => format!("{ones} ({percent:.1}%) with value 1"),
            BaselineSummary::Continuous { mean, sd, median, q1, q3 } => format!(
                "mean {} (SD {}); median {} (IQR {}–{})",
                num(*mean),
                num(*sd),
                num(*median),
                num(*q1),
                num(*q3)
            ),
            BaselineSummary::Text { distinct } => format!("{distinct} distinct values"),
        };
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            escape(&r.variable),
            r.n,
            r.missing,
            escape(&summary)
        );
    }
    o.push_str("</table>\n");
}

fn verdict(passed: bool) -> &'static str {
    if passed {
        "<span class=\"pass\">passed</span>"
    } else {
        "<span class=\"fail\">failed</span>"
    }
}

fn audit(o: &mut String, b: &Bundle) {
    o.push_str("<h2>Cohort audit</h2>\n");
    let Some(a) = b.cohort_audit else {
        o.push_str("<p class=\"fail\">The agent exported no cohort_audit.csv; the cohort was not audited and no answer was accepted.</p>\n");
        return;
    };
    let _ = writeln!(o, "<p>{} rows in cohort_audit.csv.</p>", a.rules.rows);
    o.push_str("<h3>Rule checks</h3>\n<table><tr><th>rule</th><th>result</th><th>detail</th></tr>\n");
    for c in &a.rules.checks {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&c.rule),
            verdict(c.passed),
            escape(&c.detail)
        );
    }
    o.push_str("</table>\n<h3>Cohort judge</h3>\n");
    match &a.judge {
        None if a.rules.passed() => o.push_str("<p class=\"muted\">The judge was not run (--no-judge).</p>\n"),
        None => o.push_str("<p class=\"muted\">The judge runs only on a cohort that passed the rule checks.</p>\n"),
        Some(j) => {
            let rate = j.exclusion_rate.map_or("–".to_string(), |r| format!("{:.1}%", 100.0 * r));
            let how = match j.strategy {
                JudgeStrategy::Paper => "Figure 19&#39;s prompt, RWE-bench&#39;s judge",
                JudgeStrategy::Compiled => "Evident&#39;s compiled judge: the checks below, run on each row",
            };
            let _ = writeln!(
                o,
                "<p>{} ({how}) sampled {} rows, judged {}, would exclude {}: exclusion rate {}, {} (at most 80% passes).</p>",
                escape(&j.model),
                j.sampled,
                j.judged,
                j.excluded,
                escape(&rate),
                verdict(j.passed())
            );
            compiled_checks(o, j);
            judged_cases(o, &j.cases);
        }
    }
    if let Some(d) = &a.database_judge {
        o.push_str("<h3>Second check: the judge on Evident&#39;s facts from the database</h3>\n");
        let rate = d.exclusion_rate.map_or("–".to_string(), |r| format!("{:.1}%", 100.0 * r));
        let _ = writeln!(
            o,
            "<p>The same sampled rows, described by Evident from the database by their identifiers (not by the agent&#39;s columns): judged {}, would exclude {} (rate {}). This check is reported beside the paper&#39;s and does not decide qualification.</p>",
            d.judged,
            d.excluded,
            escape(&rate)
        );
        compiled_checks(o, d);
        judged_cases(o, &d.cases);
    }
    let cohort = match a.qualified() {
        Some(true) => "qualified",
        Some(false) => "not qualified",
        None => "not screened (the rules passed; the judge did not run)",
    };
    let _ = writeln!(o, "<p>Cohort: <strong>{cohort}</strong>.</p>");
}

/// The compiled judge's checks: what each row was held to.
fn compiled_checks(o: &mut String, j: &crate::audit::JudgeReport) {
    if j.strategy != JudgeStrategy::Compiled {
        return;
    }
    let Some(c) = &j.compiled else {
        o.push_str("<p class=\"muted\">The model wrote no valid checks: every row is unjudged.</p>\n");
        return;
    };
    o.push_str("<table><tr><th>criterion</th><th>check</th></tr>\n");
    for check in &c.checks {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td><code>{} {} {}</code></td></tr>",
            escape(&check.criterion),
            escape(&check.fact),
            check.test.as_str(),
            escape(&check.value)
        );
    }
    for r in &c.rejected {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td class=\"muted\">not run: {}</td></tr>",
            escape(&r.check.criterion),
            escape(&r.reason)
        );
    }
    for f in &c.other_facts {
        let _ = writeln!(
            o,
            "<tr><td class=\"muted\">({})</td><td><code>{}</code>: no check</td></tr>",
            escape(&f.role),
            escape(&f.fact)
        );
    }
    o.push_str("</table>\n");
}

fn judged_cases(o: &mut String, cases: &[crate::audit::CaseJudgement]) {
    o.push_str("<details><summary>Each judged row</summary><table><tr><th>audit line</th><th>decision</th><th>triggered exclusion criteria</th><th>unevaluable criteria</th><th>evidence</th></tr>\n");
    for c in cases {
        match &c.verdict {
            None => {
                let _ = writeln!(
                    o,
                    "<tr><td class=\"n\">{}</td><td colspan=\"4\" class=\"muted\">no valid answer</td></tr>",
                    c.line
                );
            }
            Some(v) => {
                let _ = writeln!(
                    o,
                    "<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    c.line,
                    escape(&v.decision),
                    escape(&v.triggered_exclusion_criteria.join("; ")),
                    escape(&v.unevaluable_criteria.join("; ")),
                    escape(&v.evidence)
                );
            }
        }
    }
    o.push_str("</table></details>\n");
}

fn results(o: &mut String, b: &Bundle, gold: &Gold) {
    o.push_str("<h2>Results</h2>\n");
    let s = b.score;
    let pct = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{:.0}%", 100.0 * v));
    let _ = writeln!(
        o,
        "<p>ACC {} · RAR {} · SMR {} · success {} · success with a qualified cohort {} · complete {}</p>",
        pct(s.acc),
        pct(s.rar),
        pct(s.smr),
        s.success,
        s.success_screened.map_or("–".to_string(), |v| v.to_string()),
        s.complete
    );
    let sheet = AnswerSheet::restore(b.task.clone(), gold.clone(), b.answers.clone());
    for q in &b.task.questions {
        let _ = writeln!(o, "<h3>{}</h3>\n<p>{}</p>", escape(&q.id), escape(&q.description));
        if let Some(choice) = &q.choice {
            let given = b.answers.get(&q.id);
            let right = gold.choices.get(&q.id).map(String::as_str).unwrap_or("");
            let _ = writeln!(o, "<p>{}</p>\n<ul>", escape(&choice.question));
            for (letter, text) in &choice.options {
                let mut marks = Vec::new();
                if given.is_some_and(|g| matches!(&g.value, AnswerValue::Choice(c) if c == letter)) {
                    // A choice Evident read from the results (`typed-read`)
                    // was submitted by the agent but not chosen by it.
                    let who = match given.and_then(|g| g.basis.as_ref()) {
                        Some(crate::provenance::AnswerBasis::Read { .. }) => "submitted by the agent, read by Evident",
                        _ => "the agent's answer",
                    };
                    marks.push(format!("{who} (step {})", given.map_or(0, |g| g.step)));
                    if let Some(basis) = given.and_then(|g| g.basis.as_ref()) {
                        marks.push(basis.note());
                    }
                }
                if letter == right {
                    marks.push("reference".to_string());
                }
                let mark = if marks.is_empty() {
                    String::new()
                } else {
                    format!(" — <em>{}</em>", escape(&marks.join(", ")))
                };
                let _ = writeln!(o, "<li>{}. {}{mark}</li>", escape(letter), escape(text));
            }
            o.push_str("</ul>\n");
            if given.is_none() {
                o.push_str("<p class=\"fail\">Not answered.</p>\n");
            }
        }
        let revealed = !q.is_gated() || sheet.choice_correct(&q.id);
        o.push_str(
            "<table><tr><th>field</th><th>type</th><th>agent</th><th>step</th><th>basis</th><th>reference</th></tr>\n",
        );
        for f in &q.fields {
            let name = f.name();
            let (agent, step) = match b.answers.get(name) {
                Some(a) => (escape(&answer_text(&a.value)), a.step.to_string()),
                None if revealed => ("<span class=\"fail\">not answered</span>".to_string(), String::new()),
                None => ("<span class=\"fail\">never revealed</span>".to_string(), String::new()),
            };
            // Where the answer's number comes from (typed strategy): an
            // unsupported one is marked for the reviewer.
            let basis = match b.answers.get(name).and_then(|a| a.basis.as_ref()) {
                Some(basis) if basis.is_unsupported() => {
                    format!("<span class=\"fail\">{}</span>", escape(&basis.note()))
                }
                Some(basis) => escape(&basis.note()),
                None => String::new(),
            };
            let mut kind = f.type_name().to_string();
            if let FieldKind::Pvalue { mode, sign, .. } = f {
                kind = format!(
                    "pvalue ({}, {})",
                    serde_json::to_value(mode).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
                    sign.as_str()
                );
            }
            let reference = gold.fields.get(name).map_or("–".to_string(), |v| num(*v));
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td class=\"n\">{agent}</td><td class=\"n\">{step}</td><td>{basis}</td><td class=\"n\">{}</td></tr>",
                escape(name),
                escape(&kind),
                escape(&reference)
            );
        }
        o.push_str("</table>\n");
    }
}

fn analyses(o: &mut String, b: &Bundle) {
    o.push_str("<h2>Analyses</h2>\n");
    let mut any = false;
    for step in &b.run.steps {
        let Some(a) = &step.analysis else { continue };
        any = true;
        match a {
            AnalysisOutput::KaplanMeier { file, time, event, group, curves, chi_square, df, p_value } => {
                let _ =
                    writeln!(o, "<h3>Step {}: Kaplan-Meier by {} ({})</h3>", step.step, escape(group), escape(file));
                let km: Vec<_> = curves.iter().map(|c| c.to_curve()).collect();
                let labels: Vec<String> = curves.iter().map(|c| format!("{group} = {}", num(c.group))).collect();
                o.push_str(&evident_stats::svg::kaplan_meier_svg(&km, &labels, time));
                let _ = writeln!(
                    o,
                    "<p>Event column {}; log-rank chi-square {} on {df} df, P = {}.</p>",
                    escape(event),
                    num(*chi_square),
                    num(*p_value)
                );
            }
            AnalysisOutput::Regression { tool, effect, file, n, terms } => {
                let _ = writeln!(o, "<h3>Step {}: {} ({}, n = {n})</h3>", step.step, escape(tool), escape(file));
                let rows: Vec<evident_stats::svg::ForestRow> = terms
                    .iter()
                    .map(|t| evident_stats::svg::ForestRow {
                        label: t.term.clone(),
                        estimate: t.ratio,
                        conf_low: t.conf_low,
                        conf_high: t.conf_high,
                    })
                    .collect();
                if terms.iter().all(|t| t.ratio > 0.0 && t.conf_low > 0.0 && t.conf_high.is_finite())
                    && !terms.is_empty()
                {
                    o.push_str(&evident_stats::svg::forest_svg(&rows, effect, 1.0, true));
                }
                let _ = writeln!(
                    o,
                    "<table><tr><th>term</th><th>{}</th><th>95% CI (Wald)</th><th>P</th></tr>",
                    escape(effect)
                );
                for t in terms {
                    let _ = writeln!(
                        o,
                        "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}–{}</td><td class=\"n\">{}</td></tr>",
                        escape(&t.term),
                        num(t.ratio),
                        num(t.conf_low),
                        num(t.conf_high),
                        num(t.p_value)
                    );
                }
                o.push_str("</table>\n");
            }
            AnalysisOutput::RocAuc { file, outcome, predictor, auc, conf_low, conf_high, cases, controls } => {
                let _ = writeln!(
                    o,
                    "<h3>Step {}: ROC AUC of {} for {} ({})</h3>\n<p>AUC {} (95% CI DeLong {}–{}); {cases} cases, {controls} controls.</p>",
                    step.step,
                    escape(predictor),
                    escape(outcome),
                    escape(file),
                    num(*auc),
                    num(*conf_low),
                    num(*conf_high)
                );
            }
        }
    }
    if !any {
        o.push_str("<p class=\"muted\">No typed statistics tool ran in this run; analyses done in R appear in the trace.</p>\n");
    }
}

fn trace(o: &mut String, b: &Bundle) {
    o.push_str("<h2>Step trace</h2>\n");
    for s in &b.run.steps {
        let end = s.termination.map(|t| format!("; ended the run: {t:?}")).unwrap_or_default();
        let _ = writeln!(
            o,
            "<details><summary>Step {}: {} ({:.1} s, {} + {} tokens, {} invalid outputs{})</summary>",
            s.step,
            escape(&s.action),
            s.elapsed_ms as f64 / 1000.0,
            s.prompt_tokens,
            s.completion_tokens,
            s.invalid_outputs,
            escape(&end)
        );
        if let Some(m) = &s.memory {
            let _ = writeln!(o, "<p>Memory summary that replaced the earlier history:</p><pre>{}</pre>", escape(m));
        }
        let _ = writeln!(
            o,
            "<p>Agent:</p><pre>{}</pre>\n<p>Observation:</p><pre>{}</pre>\n</details>",
            escape(&s.output),
            escape(&s.observation)
        );
    }
}

/// Writes `html` to `dir/report.html` through a temporary file.
pub fn write_report(dir: &Path, html: &str) -> std::io::Result<PathBuf> {
    let path = dir.join("report.html");
    let tmp = dir.join(".report.html.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(html.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\">O'Neil & co</a>"),
            "&lt;a href=&quot;x&quot;&gt;O&#39;Neil &amp; co&lt;/a&gt;"
        );
    }

    #[test]
    fn numbers_read_cleanly() {
        assert_eq!(num(2.5), "2.5");
        assert_eq!(num(1.0), "1");
        assert_eq!(num(0.00012), "1.200e-4");
        assert_eq!(num(f64::NAN), "–");
        assert_eq!(num(0.0271), "0.0271");
    }

    #[test]
    fn the_baseline_table_summarises_each_cohort_variable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cohort_audit.csv");
        std::fs::write(&path, "subject_id,stay_id,age,female,sex\n1,10,50,1,F\n2,20,70,0,M\n3,30,NA,1,F\n").unwrap();
        let rows = baseline_table(&AuditTable::read(&path).unwrap());
        assert_eq!(rows.len(), 3);
        assert_eq!((rows[0].variable.as_str(), rows[0].n, rows[0].missing), ("age", 2, 1));
        assert!(matches!(rows[0].summary, BaselineSummary::Continuous { mean, .. } if mean == 60.0));
        assert!(matches!(rows[1].summary, BaselineSummary::Binary { ones: 2, .. }));
        assert_eq!(rows[2].summary, BaselineSummary::Text { distinct: 2 });
    }
}
