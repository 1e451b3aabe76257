//! RWE-bench's metrics (section 2.4), exactly as the paper defines them.
//!
//! - ACC: the share of a task's choice questions answered with the gold option.
//! - RA (eq. 4), for a ratio with its CI fields: the estimate is on the same
//!   side of 1 as the gold, `(r̂-1)(r-1) > 0`, and the interval includes 1
//!   exactly when the gold interval does. RAR is the share of a task's ratio
//!   fields with RA = 1.
//! - SM (eq. 5), for a p-value: `(p̂ < 0.05) ⇔ (p < 0.05)`, where a bound is
//!   read with its sign ([`crate::gold::significance`]); an answer whose
//!   number and sign do not decide significance is no match. SMR is the
//!   share of a task's p-value fields with SM = 1.
//! - SR: a task succeeds when every choice is correct and every ratio (with
//!   its CI) and every p-value aligns; descriptive fields are not scored.
//!   SR after cohort screening (Fig. 4b) also needs a qualified cohort; it
//!   is not measured (`None`) when a cohort passed the rule checks but the
//!   judge did not run (`--no-judge`), and a run's rate is not measured
//!   when any of its tasks is not.
//! - CR: every visible question is answered when the run ends.
//! - Steps: the agent's steps in the task.
//!
//! A field that was never revealed or never answered counts as a miss.
//! Each metric is first a share within a task, then a macro-average across
//! the tasks that have such questions (a task without ratio fields does not
//! enter RAR), and over repeated runs the mean and its standard error.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::gold::{significance, Gold};
use crate::sheet::{AnswerSheet, AnswerValue, RecordedAnswer};
use crate::task::{FieldKind, Task};

/// One task's scores in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskScore {
    pub task: String,
    /// `None` when the task has no choice question.
    pub acc: Option<f64>,
    /// `None` when the task has no ratio field.
    pub rar: Option<f64>,
    /// `None` when the task has no p-value field.
    pub smr: Option<f64>,
    pub success: bool,
    /// Success with a cohort that passed the audit (rule checks and judge);
    /// `None` when the cohort was not screened (rules passed, judge not run).
    pub success_screened: Option<bool>,
    pub complete: bool,
    pub steps: u32,
}

/// RA of eq. 4 for an agent's ratio and interval against the gold ones.
pub fn regulatory_agreement(agent: (f64, f64, f64), gold: (f64, f64, f64)) -> bool {
    let includes_one = |(_, l, u): (f64, f64, f64)| l <= 1.0 && 1.0 <= u;
    (agent.0 - 1.0) * (gold.0 - 1.0) > 0.0 && includes_one(agent) == includes_one(gold)
}

fn number(answers: &BTreeMap<String, RecordedAnswer>, name: &str) -> Option<f64> {
    match answers.get(name) {
        Some(RecordedAnswer { value: AnswerValue::Number(x), .. }) => Some(*x),
        _ => None,
    }
}

fn share(hits: usize, n: usize) -> Option<f64> {
    (n > 0).then(|| hits as f64 / n as f64)
}

/// Scores one task run from its final answers. `cohort_qualified` is the
/// cohort audit's verdict (`Some(false)` when no audit file was exported or
/// a rule failed; `None` when the rules passed and the judge did not run).
pub fn score_task(
    task: &Task,
    gold: &Gold,
    answers: &BTreeMap<String, RecordedAnswer>,
    steps: u32,
    cohort_qualified: Option<bool>,
) -> TaskScore {
    let sheet = AnswerSheet::restore(task.clone(), gold.clone(), answers.clone());
    let (mut choices, mut choices_right) = (0, 0);
    for q in task.questions.iter().filter(|q| q.is_gated()) {
        choices += 1;
        choices_right += usize::from(sheet.choice_correct(&q.id));
    }
    let (mut ratios, mut ratios_aligned, mut pvalues, mut pvalues_matched) = (0, 0, 0, 0);
    for (_, field) in task.fields() {
        match field {
            FieldKind::Ratio { name, ci_low, ci_high, .. } => {
                ratios += 1;
                let agent = (number(answers, name), number(answers, ci_low), number(answers, ci_high));
                if let (Some(r), Some(l), Some(u)) = agent {
                    let g = (gold.fields[name], gold.fields[ci_low], gold.fields[ci_high]);
                    ratios_aligned += usize::from(regulatory_agreement((r, l, u), g));
                }
            }
            FieldKind::Pvalue { name, sign, .. } => {
                pvalues += 1;
                if let Some(p) = number(answers, name) {
                    let agent = significance(p, *sign);
                    let reference = significance(gold.fields[name], *sign);
                    pvalues_matched += usize::from(agent.is_some() && agent == reference);
                }
            }
            _ => {}
        }
    }
    let success = choices_right == choices && ratios_aligned == ratios && pvalues_matched == pvalues;
    TaskScore {
        task: task.id.clone(),
        acc: share(choices_right, choices),
        rar: share(ratios_aligned, ratios),
        smr: share(pvalues_matched, pvalues),
        success,
        success_screened: cohort_qualified.map(|q| success && q),
        complete: sheet.is_complete(),
        steps,
    }
}

/// One run over a task set: each metric macro-averaged across tasks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunMetrics {
    pub tasks: usize,
    pub acc: Option<f64>,
    pub rar: Option<f64>,
    pub smr: Option<f64>,
    pub sr: f64,
    /// `None` when any task's cohort was not screened.
    pub sr_screened: Option<f64>,
    pub cr: f64,
    pub steps: f64,
}

fn macro_mean(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let present: Vec<f64> = values.flatten().collect();
    (!present.is_empty()).then(|| present.iter().sum::<f64>() / present.len() as f64)
}

fn rate(scores: &[TaskScore], hit: impl Fn(&TaskScore) -> bool) -> f64 {
    scores.iter().filter(|s| hit(s)).count() as f64 / scores.len().max(1) as f64
}

/// Macro-averages one run's task scores.
pub fn run_metrics(scores: &[TaskScore]) -> RunMetrics {
    RunMetrics {
        tasks: scores.len(),
        acc: macro_mean(scores.iter().map(|s| s.acc)),
        rar: macro_mean(scores.iter().map(|s| s.rar)),
        smr: macro_mean(scores.iter().map(|s| s.smr)),
        sr: rate(scores, |s| s.success),
        sr_screened: scores
            .iter()
            .all(|s| s.success_screened.is_some())
            .then(|| rate(scores, |s| s.success_screened == Some(true))),
        cr: rate(scores, |s| s.complete),
        steps: scores.iter().map(|s| f64::from(s.steps)).sum::<f64>() / scores.len().max(1) as f64,
    }
}

/// A metric over repeated runs: the mean and one standard error
/// (sample standard deviation over √n; `None` with fewer than two runs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MetricSummary {
    pub mean: f64,
    pub se: Option<f64>,
    pub runs: usize,
}

/// The mean and standard error of `values` (`None` when empty).
pub fn summary(values: &[f64]) -> Option<MetricSummary> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let se = (values.len() > 1)
        .then(|| (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() / n.sqrt());
    Some(MetricSummary { mean, se, runs: values.len() })
}

/// The paper's table row: each metric's mean and standard error over runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunsSummary {
    pub acc: Option<MetricSummary>,
    pub rar: Option<MetricSummary>,
    pub smr: Option<MetricSummary>,
    pub sr: Option<MetricSummary>,
    pub sr_screened: Option<MetricSummary>,
    pub cr: Option<MetricSummary>,
    pub steps: Option<MetricSummary>,
}

pub fn aggregate_runs(runs: &[RunMetrics]) -> RunsSummary {
    let over = |f: &dyn Fn(&RunMetrics) -> Option<f64>| summary(&runs.iter().filter_map(f).collect::<Vec<_>>());
    RunsSummary {
        acc: over(&|r| r.acc),
        rar: over(&|r| r.rar),
        smr: over(&|r| r.smr),
        sr: over(&|r| Some(r.sr)),
        sr_screened: over(&|r| r.sr_screened),
        cr: over(&|r| Some(r.cr)),
        steps: over(&|r| Some(r.steps)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::tests::GOOD;

    /// The test task of `task.rs` (one choice gating OR, CI and an exact P)
    /// with gold OR 1.5 (1.1-2.0), P = 0.01, correct option A.
    fn t1() -> (Task, Gold) {
        let task = Task::from_yaml_str(GOOD, "t1").unwrap();
        let gold = Gold::from_json_str(
            r#"{"task": "lactate-demo", "produced_by": "test", "choices": {"q_lactate": "A"},
            "fields": {"n_patients": 74, "n_deaths": 11, "or_lactate": 1.5, "or_low": 1.1, "or_high": 2.0, "p_lactate": 0.01}}"#,
            &task,
            "gold",
        )
        .unwrap();
        (task, gold)
    }

    /// Two choices: q_hr gates an HR with CI and a bound P (< 0.001);
    /// q_km gates a log-rank P = 0.30. Gold: HR 0.6 (0.45-0.80), B, C.
    fn t2() -> (Task, Gold) {
        let yaml = r#"
id: two-choices
title: t
modelled_on: m
protocol: {background: b, methods: m}
questions:
  - id: q_hr
    result_type: primary_results
    choice: {question: q, options: {A: higher, B: lower, C: no association}}
    description: HR <hr> (95% CI <hr_low>-<hr_high>), P < <p_hr>.
    fields:
      - {type: ratio, name: hr, ci_low: hr_low, ci_high: hr_high}
      - {type: ci, name: hr_low}
      - {type: ci, name: hr_high}
      - {type: pvalue, name: p_hr, mode: bound, sign: "<"}
  - id: q_km
    result_type: primary_results
    choice: {question: q, options: {A: better, B: worse, C: no difference, D: crossing}}
    description: log-rank P = <p_km>.
    fields:
      - {type: pvalue, name: p_km, mode: exact, sign: "="}
"#;
        let task = Task::from_yaml_str(yaml, "t2").unwrap();
        let gold = Gold::from_json_str(
            r#"{"task": "two-choices", "produced_by": "test", "choices": {"q_hr": "B", "q_km": "C"},
            "fields": {"hr": 0.6, "hr_low": 0.45, "hr_high": 0.8, "p_hr": 0.001, "p_km": 0.3}}"#,
            &task,
            "gold",
        )
        .unwrap();
        (task, gold)
    }

    fn answers(pairs: &[(&str, AnswerValue)]) -> BTreeMap<String, RecordedAnswer> {
        pairs.iter().map(|(k, v)| (k.to_string(), RecordedAnswer { value: v.clone(), step: 1, basis: None })).collect()
    }
    use AnswerValue::{Choice as C, Number as N};

    #[test]
    fn regulatory_agreement_is_eq_4() {
        let gold = (1.5, 1.1, 2.0); // above 1, significant
        assert!(regulatory_agreement((1.3, 1.01, 1.7), gold));
        assert!(!regulatory_agreement((1.3, 0.9, 1.7), gold), "interval includes 1, gold does not");
        assert!(!regulatory_agreement((0.8, 0.7, 0.9), gold), "other side of 1");
        let null_gold = (1.2, 0.8, 1.8);
        assert!(regulatory_agreement((1.05, 0.5, 2.0), null_gold));
        assert!(!regulatory_agreement((0.95, 0.5, 2.0), null_gold), "direction still counts");
        assert!(!regulatory_agreement((1.0, 0.5, 2.0), null_gold), "an estimate of exactly 1 has no direction");
    }

    /// Run 1, derived by hand from the definitions:
    /// T1: choice right; OR 1.4 (0.9-2.1) includes 1 where gold does not, RA 0;
    ///     P = 0.2 against 0.01, SM 0; baseline unanswered, so incomplete.
    ///     ACC 1, RAR 0, SMR 0, not successful.
    /// T2: q_hr right; HR 0.7 (0.5-0.9) agrees, RA 1; P < 0.001 matches, SM 1;
    ///     q_km wrong (A), so p_km is never revealed: SM 0. ACC 1/2, RAR 1,
    ///     SMR 1/2, not successful, complete (nothing visible is unanswered).
    /// Macro: ACC (1 + 0.5)/2 = 0.75, RAR (0 + 1)/2 = 0.5,
    ///     SMR (0 + 0.5)/2 = 0.25 (micro would be 1/3), SR 0, CR 0.5.
    #[test]
    fn worked_example_run_one() {
        let (t1, g1) = t1();
        let a1 = answers(&[
            ("q_lactate", C("A".into())),
            ("or_lactate", N(1.4)),
            ("or_low", N(0.9)),
            ("or_high", N(2.1)),
            ("p_lactate", N(0.2)),
        ]);
        let s1 = score_task(&t1, &g1, &a1, 12, Some(true));
        assert_eq!((s1.acc, s1.rar, s1.smr, s1.success, s1.complete), (Some(1.0), Some(0.0), Some(0.0), false, false));
        let (t2, g2) = t2();
        let a2 = answers(&[
            ("q_hr", C("B".into())),
            ("hr", N(0.7)),
            ("hr_low", N(0.5)),
            ("hr_high", N(0.9)),
            ("p_hr", N(0.001)),
            ("q_km", C("A".into())),
        ]);
        let s2 = score_task(&t2, &g2, &a2, 30, Some(true));
        assert_eq!((s2.acc, s2.rar, s2.smr, s2.success, s2.complete), (Some(0.5), Some(1.0), Some(0.5), false, true));
        let run = run_metrics(&[s1, s2]);
        assert_eq!(run.acc, Some(0.75));
        assert_eq!(run.rar, Some(0.5));
        assert_eq!(run.smr, Some(0.25));
        assert_eq!((run.sr, run.sr_screened, run.cr, run.steps), (0.0, Some(0.0), 0.5, 21.0));
    }

    /// Success ignores descriptive fields but needs every choice, ratio and
    /// p-value; screening takes a success away when the cohort failed.
    #[test]
    fn success_and_screening() {
        let (t2, g2) = t2();
        let all = answers(&[
            ("q_hr", C("B".into())),
            ("hr", N(0.55)),
            ("hr_low", N(0.4)),
            ("hr_high", N(0.75)),
            ("p_hr", N(0.0004)),
            ("q_km", C("C".into())),
            ("p_km", N(0.06)),
        ]);
        let ok = score_task(&t2, &g2, &all, 20, Some(true));
        assert!(ok.success && ok.success_screened == Some(true) && ok.complete);
        let unqualified = score_task(&t2, &g2, &all, 20, Some(false));
        assert!(unqualified.success && unqualified.success_screened == Some(false));
        // A missing CI endpoint is a miss for RA, so no success.
        let mut no_ci = all.clone();
        no_ci.remove("hr_high");
        let s = score_task(&t2, &g2, &no_ci, 20, Some(true));
        assert_eq!((s.rar, s.success, s.complete), (Some(0.0), false, false));
        // T1 with every statistical field right but no baseline answers:
        // successful (descriptive fields are not scored) yet incomplete.
        let (t1, g1) = t1();
        let a = answers(&[
            ("q_lactate", C("A".into())),
            ("or_lactate", N(1.6)),
            ("or_low", N(1.2)),
            ("or_high", N(2.2)),
            ("p_lactate", N(0.003)),
        ]);
        let s = score_task(&t1, &g1, &a, 5, Some(true));
        assert!(s.success && !s.complete);
    }

    /// P-value bounds: an agent's "< 0.3" (read with the field's sign) does
    /// not decide significance and is no match; "< 0.05" is significant.
    #[test]
    fn pvalue_bounds_are_read_with_their_sign() {
        let (t2, g2) = t2();
        let with = |p: f64| {
            let a = answers(&[("q_hr", C("B".into())), ("p_hr", N(p))]);
            score_task(&t2, &g2, &a, 1, Some(true)).smr
        };
        assert_eq!(with(0.001), Some(0.5));
        assert_eq!(with(0.05), Some(0.5));
        assert_eq!(with(0.3), Some(0.0));
    }

    /// Without the judge (`--no-judge`) a cohort that passed the rules was
    /// never screened: SR after screening is not measured, for the task and
    /// for the run (even beside tasks that were screened), and stays out of
    /// the summary over runs; plain SR is unaffected.
    #[test]
    fn screening_without_the_judge_is_not_measured() {
        let (t2, g2) = t2();
        let a = answers(&[("q_hr", C("B".into())), ("q_km", C("C".into()))]);
        let unjudged = score_task(&t2, &g2, &a, 3, None);
        assert_eq!(unjudged.success_screened, None);
        let judged = score_task(&t2, &g2, &a, 3, Some(false));
        assert_eq!(judged.success_screened, Some(false));
        assert_eq!(run_metrics(std::slice::from_ref(&unjudged)).sr_screened, None);
        let mixed = run_metrics(&[unjudged, judged.clone()]);
        assert_eq!((mixed.sr, mixed.sr_screened), (0.0, None));
        let screened = run_metrics(&[judged]);
        assert_eq!(screened.sr_screened, Some(0.0));
        let summary = aggregate_runs(&[mixed.clone(), mixed]);
        assert_eq!(summary.sr_screened, None);
        assert_eq!(summary.sr.map(|m| m.mean), Some(0.0));
    }

    #[test]
    fn runs_give_mean_and_standard_error() {
        let run = |sr: f64, rar: Option<f64>| RunMetrics {
            tasks: 2,
            acc: Some(0.5),
            rar,
            smr: None,
            sr,
            sr_screened: Some(sr),
            cr: 1.0,
            steps: 10.0,
        };
        let s = aggregate_runs(&[run(0.0, Some(0.5)), run(0.5, Some(1.0)), run(0.25, None)]);
        let sr = s.sr.unwrap();
        // mean 0.25; sample sd 0.25; se 0.25/sqrt(3).
        assert!((sr.mean - 0.25).abs() < 1e-12);
        assert!((sr.se.unwrap() - 0.25 / 3f64.sqrt()).abs() < 1e-12);
        let rar = s.rar.unwrap();
        assert_eq!((rar.mean, rar.runs), (0.75, 2));
        assert_eq!(s.smr, None);
        assert_eq!(s.acc.unwrap().se, Some(0.0));
        assert_eq!(aggregate_runs(&[run(1.0, None)]).sr.unwrap().se, None);
    }
}
