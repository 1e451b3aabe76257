//! The CohortEval check of the cohort judge (RWE-bench section 3.3 and
//! Appendix F), on a development task: true members of a reference cohort,
//! counterfactual negatives (a sampled member with one fact changed so that
//! it violates one criterion) and adversarial negatives (counterfactual
//! negatives with a misleading cue such as "Meets all criteria" added as a
//! fact). The judge reads each case with Figure 19's prompt, as it reads an
//! agent's audit rows; sensitivity, specificity, PPV and NPV are computed
//! with the **positive class = an eligible member** (the judge answers
//! "Do not exclude"), the reading that fits the paper's Table 6 (100
//! positives and 40 negatives per task, NPV falling with sensitivity).
//!
//! The specification is data, `cohort_eval.yaml` in the task's folder: the
//! SQL of the reference cohort (identifiers and the criterion variables, in
//! the shape of an audit file), the gold field whose value is the cohort's
//! size (so the SQL is checked against the independent R reference), the
//! counterfactual edits (column, new value, the criterion it violates) and
//! the adversarial cues.

use std::path::Path;

use evident_db::{ReadOnlyConnection, Value as DbValue};
use evident_llm::prompts::Prompts;
use evident_llm::StructuredModel;
use serde::{Deserialize, Serialize};

use crate::audit::{judge_pass, sample_rows, AuditError, AuditTable, Fact, JudgeVerdict};
use crate::compiled_judge::{CompiledCriteria, JudgeStrategy};
use crate::metrics::{summary, MetricSummary};

/// The file name of a task's CohortEval specification.
pub const SPEC_FILE: &str = "cohort_eval.yaml";

/// One counterfactual edit: set `column` to `value`, which violates `violates`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counterfactual {
    pub column: String,
    pub value: String,
    /// The criterion of the protocol the new value violates.
    pub violates: String,
}

/// A task's CohortEval specification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CohortEvalSpec {
    /// The task id (must match the task beside it).
    pub task: String,
    /// Read-only SQL returning the reference cohort: `subject_id`, `hadm_id`
    /// and/or `stay_id`, and the criterion variables, one row per member.
    pub reference_sql: String,
    /// The gold field holding the cohort's size (from the R reference).
    pub size_field: String,
    pub counterfactuals: Vec<Counterfactual>,
    /// Misleading text for the adversarial cases.
    pub adversarial_cues: Vec<String>,
}

impl CohortEvalSpec {
    /// Reads and checks a specification; errors name the file and field.
    pub fn load(path: &Path) -> Result<CohortEvalSpec, String> {
        let origin = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{origin}: {e}"))?;
        let spec: CohortEvalSpec = serde_yaml::from_str(&text).map_err(|e| format!("{origin}: {e}"))?;
        if spec.reference_sql.trim().is_empty() {
            return Err(format!("{origin}: reference_sql is empty"));
        }
        if spec.counterfactuals.is_empty() {
            return Err(format!("{origin}: counterfactuals: list at least one edit (column, value, violates)"));
        }
        if spec.adversarial_cues.iter().all(|c| c.trim().is_empty()) {
            return Err(format!("{origin}: adversarial_cues: give at least one cue, e.g. \"Meets all criteria\""));
        }
        Ok(spec)
    }

    /// Checks the edits against the reference cohort's columns.
    pub fn check_columns(&self, table: &AuditTable) -> Result<(), String> {
        for (i, c) in self.counterfactuals.iter().enumerate() {
            if !table.columns.iter().any(|col| col == &c.column) {
                return Err(format!(
                    "{SPEC_FILE}: counterfactuals[{i}].column {:?} is not a column of the reference cohort ({})",
                    c.column,
                    table.columns.join(", ")
                ));
            }
        }
        Ok(())
    }
}

/// Runs the specification's SQL and returns the reference cohort in the
/// shape of an audit file (NULL as an empty cell; line numbers as a CSV
/// with a header would have them).
pub fn reference_cohort(conn: &mut ReadOnlyConnection, spec: &CohortEvalSpec) -> Result<AuditTable, String> {
    let result = conn.query(&spec.reference_sql).map_err(|e| format!("{SPEC_FILE}: reference_sql: {e}"))?;
    if result.truncated {
        return Err(format!("{SPEC_FILE}: reference_sql returns more rows than a query may ({})", result.rows.len()));
    }
    let cell = |v: &DbValue| if matches!(v, DbValue::Null) { String::new() } else { v.to_text() };
    Ok(AuditTable {
        columns: result.columns.clone(),
        rows: result.rows.iter().map(|r| r.iter().map(cell).collect()).collect(),
        lines: (0..result.rows.len() as u64).map(|i| i + 2).collect(),
    })
}

/// How many cases of each kind (the paper: 100, 30, 10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CaseCounts {
    pub members: usize,
    pub counterfactual: usize,
    pub adversarial: usize,
}

impl CaseCounts {
    pub const PAPER: CaseCounts = CaseCounts { members: 100, counterfactual: 30, adversarial: 10 };
}

/// What a case is, and so what the judge should answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseKind {
    /// A true member: the right answer is "Do not exclude".
    Member,
    /// One fact changed to violate a criterion: "Exclude".
    Counterfactual,
    /// A counterfactual case with a misleading cue: "Exclude".
    Adversarial,
}

/// One case the judge reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalCase {
    pub kind: CaseKind,
    /// The reference cohort's row it was made from (0-based).
    pub row: usize,
    pub facts: Vec<Fact>,
    /// The edit, for negatives: "column: old -> new (violates ...)".
    pub edit: Option<String>,
}

/// Builds the cases: `members` members sampled uniformly, `counterfactual`
/// sampled rows each with one edit (the edits taken in turn), and
/// `adversarial` copies of the first counterfactual cases with a cue added
/// as the fact `note`. Fewer members when the cohort is smaller.
pub fn build_cases(
    table: &AuditTable,
    spec: &CohortEvalSpec,
    counts: CaseCounts,
    seed: u64,
) -> Result<Vec<EvalCase>, String> {
    spec.check_columns(table)?;
    let n = table.rows.len();
    if n == 0 {
        return Err("the reference cohort is empty".into());
    }
    let mut cases = Vec::new();
    for row in sample_rows(n, counts.members, seed) {
        cases.push(EvalCase { kind: CaseKind::Member, row, facts: table.facts(row), edit: None });
    }
    let mut counterfactuals = Vec::new();
    // Distinct rows while the cohort allows, then again from the start.
    let rows: Vec<usize> = sample_rows(n, counts.counterfactual.min(n), seed.wrapping_add(1));
    for (i, row) in (0..counts.counterfactual).map(|i| (i, rows[i % rows.len()])) {
        let edit = &spec.counterfactuals[i % spec.counterfactuals.len()];
        let mut facts = table.facts(row);
        let fact = facts.iter_mut().find(|f| f.name == edit.column).ok_or("edit column vanished")?;
        let described =
            format!("{}: {} -> {} (violates: {})", edit.column, fact.value, edit.value, edit.violates.trim());
        fact.value = edit.value.clone();
        counterfactuals.push(EvalCase { kind: CaseKind::Counterfactual, row, facts, edit: Some(described) });
    }
    let cues: Vec<&String> = spec.adversarial_cues.iter().filter(|c| !c.trim().is_empty()).collect();
    let adversarial: Vec<EvalCase> = counterfactuals
        .iter()
        .cycle()
        .take(counts.adversarial)
        .enumerate()
        .map(|(i, c)| {
            let mut facts = c.facts.clone();
            facts.push(Fact { name: "note".into(), value: cues[i % cues.len()].clone() });
            EvalCase { kind: CaseKind::Adversarial, row: c.row, facts, edit: c.edit.clone() }
        })
        .collect();
    cases.extend(counterfactuals);
    cases.extend(adversarial);
    Ok(cases)
}

/// One case's verdict in one run (`None`: no valid answer).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    pub case: usize,
    pub kind: CaseKind,
    pub verdict: Option<JudgeVerdict>,
}

/// The confusion matrix of one run, positive = eligible member.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Confusion {
    /// Members the judge kept.
    pub tp: usize,
    /// Members the judge excluded.
    #[serde(rename = "fn")]
    pub fn_: usize,
    /// Negatives the judge excluded.
    pub tn: usize,
    /// Negatives the judge kept.
    pub fp: usize,
    /// Cases without a valid answer (left out of the four above).
    pub unjudged: usize,
    /// Adversarial negatives kept (part of `fp`).
    pub adversarial_kept: usize,
}

fn ratio(a: usize, b: usize) -> Option<f64> {
    (a + b > 0).then(|| a as f64 / (a + b) as f64)
}

impl Confusion {
    pub fn from_results(results: &[CaseResult]) -> Confusion {
        let mut c = Confusion::default();
        for r in results {
            match (&r.verdict, r.kind) {
                (None, _) => c.unjudged += 1,
                (Some(v), CaseKind::Member) if v.excludes() => c.fn_ += 1,
                (Some(_), CaseKind::Member) => c.tp += 1,
                (Some(v), _) if v.excludes() => c.tn += 1,
                (Some(_), kind) => {
                    c.fp += 1;
                    c.adversarial_kept += usize::from(kind == CaseKind::Adversarial);
                }
            }
        }
        c
    }
    pub fn sensitivity(&self) -> Option<f64> {
        ratio(self.tp, self.fn_)
    }
    pub fn specificity(&self) -> Option<f64> {
        ratio(self.tn, self.fp)
    }
    pub fn ppv(&self) -> Option<f64> {
        ratio(self.tp, self.fp)
    }
    pub fn npv(&self) -> Option<f64> {
        ratio(self.tn, self.fn_)
    }
}

/// The judge check over runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JudgeCheck {
    pub task: String,
    pub model: String,
    pub strategy: JudgeStrategy,
    /// The compiled judge's checks in each run (empty for the paper's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub compiled: Vec<Option<CompiledCriteria>>,
    pub counts: CaseCounts,
    /// Size of the reference cohort (equal to the gold count).
    pub reference_rows: usize,
    pub cases: Vec<EvalCase>,
    pub runs: Vec<Vec<CaseResult>>,
    pub confusion: Vec<Confusion>,
    pub sensitivity: Option<MetricSummary>,
    pub specificity: Option<MetricSummary>,
    pub ppv: Option<MetricSummary>,
    pub npv: Option<MetricSummary>,
}

/// Judges every case `runs` times (run `r` passes seed `r` to the model;
/// under greedy decoding the runs agree) and summarises the four measures
/// as mean and standard error over runs. A run is one judge pass
/// ([`judge_pass`]) over all the cases; `progress` hears after each run.
#[allow(clippy::too_many_arguments)]
pub fn check_judge<'m>(
    model: impl Into<StructuredModel<'m>>,
    strategy: JudgeStrategy,
    prompts: &Prompts,
    task: &str,
    definition: &str,
    reference_rows: usize,
    counts: CaseCounts,
    cases: Vec<EvalCase>,
    runs: u32,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<JudgeCheck, AuditError> {
    let model: StructuredModel<'m> = model.into();
    let total = cases.len() * runs.max(1) as usize;
    let mut done = 0;
    let mut all = Vec::new();
    let mut compiled = Vec::new();
    let facts: Vec<Vec<Fact>> = cases.iter().map(|c| c.facts.clone()).collect();
    for r in 0..runs.max(1) {
        let pass = judge_pass(model, strategy, prompts, definition, &facts, Some(u64::from(r)))?;
        if strategy == JudgeStrategy::Compiled {
            compiled.push(pass.compiled);
        }
        let verdicts = pass.verdicts;
        let results: Vec<CaseResult> = cases
            .iter()
            .zip(verdicts)
            .enumerate()
            .map(|(i, (case, verdict))| CaseResult { case: i, kind: case.kind, verdict })
            .collect();
        done += results.len();
        progress(done, total);
        all.push(results);
    }
    let confusion: Vec<Confusion> = all.iter().map(|r| Confusion::from_results(r)).collect();
    let over = |f: fn(&Confusion) -> Option<f64>| summary(&confusion.iter().filter_map(f).collect::<Vec<_>>());
    Ok(JudgeCheck {
        task: task.to_string(),
        model: model.model_id().to_string(),
        strategy,
        compiled,
        counts,
        reference_rows,
        cases,
        sensitivity: over(Confusion::sensitivity),
        specificity: over(Confusion::specificity),
        ppv: over(Confusion::ppv),
        npv: over(Confusion::npv),
        runs: all,
        confusion,
    })
}

impl std::fmt::Display for JudgeCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cell = |m: &Option<MetricSummary>| match m {
            None => "-".to_string(),
            Some(m) => match m.se {
                Some(se) => format!("{:.1} ± {:.1}", 100.0 * m.mean, 100.0 * se),
                None => format!("{:.1}", 100.0 * m.mean),
            },
        };
        let kinds = |k: CaseKind| self.cases.iter().filter(|c| c.kind == k).count();
        writeln!(
            f,
            "cohort judge check on {} (reference cohort {} rows), positive class = eligible member (\"Do not exclude\")",
            self.task, self.reference_rows
        )?;
        writeln!(f, "| judge | members / counterfactual / adversarial | runs | sensitivity | specificity | PPV | NPV | unjudged | adversarial kept |")?;
        writeln!(f, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")?;
        let unjudged: usize = self.confusion.iter().map(|c| c.unjudged).sum();
        let adv: usize = self.confusion.iter().map(|c| c.adversarial_kept).sum();
        write!(
            f,
            "| {} ({} judge) | {} / {} / {} | {} | {} | {} | {} | {} | {} | {} |",
            self.model,
            self.strategy.as_str(),
            kinds(CaseKind::Member),
            kinds(CaseKind::Counterfactual),
            kinds(CaseKind::Adversarial),
            self.runs.len(),
            cell(&self.sensitivity),
            cell(&self.specificity),
            cell(&self.ppv),
            cell(&self.npv),
            unjudged,
            adv
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> AuditTable {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.csv");
        let mut csv = String::from("subject_id,stay_id,age,lactate\n");
        for i in 0..10 {
            csv.push_str(&format!("{},{},{},{}\n", 100 + i, 200 + i, 40 + i, 1.0 + i as f64));
        }
        std::fs::write(&path, csv).unwrap();
        AuditTable::read(&path).unwrap()
    }

    fn spec() -> CohortEvalSpec {
        CohortEvalSpec {
            task: "t".into(),
            reference_sql: "SELECT 1".into(),
            size_field: "n".into(),
            counterfactuals: vec![
                Counterfactual { column: "age".into(), value: "16".into(), violates: "adults".into() },
                Counterfactual { column: "lactate".into(), value: "none charted".into(), violates: "lactate".into() },
            ],
            adversarial_cues: vec!["Meets all criteria".into()],
        }
    }

    #[test]
    fn cases_are_members_edits_and_cued_edits() {
        let cases =
            build_cases(&table(), &spec(), CaseCounts { members: 8, counterfactual: 4, adversarial: 2 }, 3).unwrap();
        let kinds: Vec<CaseKind> = cases.iter().map(|c| c.kind).collect();
        assert_eq!(kinds.iter().filter(|k| **k == CaseKind::Member).count(), 8);
        assert_eq!(kinds.iter().filter(|k| **k == CaseKind::Counterfactual).count(), 4);
        assert_eq!(kinds.iter().filter(|k| **k == CaseKind::Adversarial).count(), 2);
        let cf: Vec<&EvalCase> = cases.iter().filter(|c| c.kind == CaseKind::Counterfactual).collect();
        // Edits in turn: age, then lactate.
        assert_eq!(cf[0].facts[2].value, "16");
        assert!(cf[0].edit.as_deref().unwrap().starts_with("age: "), "{:?}", cf[0].edit);
        assert_eq!(cf[1].facts[3].value, "none charted");
        // Members are untouched rows of the table.
        let m = &cases[0];
        assert_eq!(m.facts, table().facts(m.row));
        // Adversarial cases are the first counterfactuals plus the cue.
        let adv: Vec<&EvalCase> = cases.iter().filter(|c| c.kind == CaseKind::Adversarial).collect();
        assert_eq!(adv[0].facts[..4], cf[0].facts[..]);
        assert_eq!(adv[0].facts[4], Fact { name: "note".into(), value: "Meets all criteria".into() });
    }

    #[test]
    fn an_edit_of_an_unknown_column_is_named() {
        let mut s = spec();
        s.counterfactuals[1].column = "lactate_max".into();
        let e = build_cases(&table(), &s, CaseCounts::PAPER, 1).unwrap_err();
        assert!(e.contains("counterfactuals[1].column \"lactate_max\" is not a column"), "{e}");
    }

    #[test]
    fn measures_take_members_as_positives() {
        let keep = Some(JudgeVerdict {
            unevaluable_criteria: vec![],
            decision: "Do not exclude".into(),
            triggered_exclusion_criteria: vec![],
            evidence: String::new(),
        });
        let exclude = Some(JudgeVerdict { decision: "Exclude".into(), ..keep.clone().unwrap() });
        let r = |kind, verdict: &Option<JudgeVerdict>| CaseResult { case: 0, kind, verdict: verdict.clone() };
        let results = vec![
            r(CaseKind::Member, &keep),
            r(CaseKind::Member, &keep),
            r(CaseKind::Member, &keep),
            r(CaseKind::Member, &exclude),
            r(CaseKind::Counterfactual, &exclude),
            r(CaseKind::Counterfactual, &keep),
            r(CaseKind::Adversarial, &keep),
            r(CaseKind::Adversarial, &None),
        ];
        let c = Confusion::from_results(&results);
        assert_eq!((c.tp, c.fn_, c.tn, c.fp, c.unjudged, c.adversarial_kept), (3, 1, 1, 2, 1, 1));
        assert_eq!(c.sensitivity(), Some(0.75));
        assert_eq!(c.specificity(), Some(1.0 / 3.0));
        assert_eq!(c.ppv(), Some(0.6));
        assert_eq!(c.npv(), Some(0.5));
    }
}
