//! Screening reports, built from what a run stored: per trial, patients
//! ranked with their eligibility; per patient, one row per criterion with
//! the decision in TrialGPT's wording, confidence, rationale and the cited
//! sentences shown verbatim from the store in their surrounding text.
//! Written as JSON, CSV (one row per decision) and one self-contained HTML
//! file. A citation that does not resolve to a stored sentence is shown as
//! a problem of its decision, never dropped.
//!
//! Every decision says what made it ([`DecidedBy`]): the model, a reviewed
//! check (with the lab values or timeline sentences it read), or both; when
//! both ran and disagree the criterion is "needs review" (counted as not
//! enough information) with both evidences shown.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use chrono::NaiveDateTime;
use evident_store::{ModelRunSummary, Store};
use serde::Serialize;
use serde_json::Value;

use evident_model::text::escape_html as esc;

use crate::batch::{stored_results, BatchError, CheckResult, Method};
use crate::checks::CheckOutcome;
use crate::criteria::{CriteriaSet, Criterion};
use crate::decision::{
    pool, rank, trial_verdict, Assessment, Confidence, CriterionResult, Decision, Determination, Eligibility,
    SentenceRef, TrialVerdict,
};
use crate::exemplars::ShownExemplar;
use crate::label_correction::{applied_correction, AppliedCorrection};
use crate::threshold::AppliedThreshold;

/// Sentences shown before and after each cited sentence.
const CONTEXT_SENTENCES: i64 = 2;

#[derive(Debug, Clone, Serialize)]
pub struct MatchReport {
    pub generated_at: String,
    pub trials: Vec<TrialReport>,
    /// Per patient, the trials ranked best first.
    pub patients: Vec<PatientTrials>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TrialReport {
    pub run_id: String,
    pub trial: CriteriaSet,
    pub method: String,
    /// Every requested task has a stored result.
    pub finished: bool,
    /// Tokens, calls, cost and latency over every invocation of the run.
    pub usage: Option<ModelRunSummary>,
    /// Ranked best first.
    pub patients: Vec<PatientReport>,
    /// Patient-criterion decisions made by reviewed checks.
    pub check_decisions: usize,
    /// Model tasks the checks made unnecessary in this job (set by the
    /// caller that ran the screening; `None` when unknown).
    pub model_tasks_saved: Option<usize>,
    /// The label correction the run's decisions went through, when one did.
    pub label_correction: Option<CorrectionUse>,
    /// The threshold table on P(MET) the run's decisions went through, when
    /// one did (its `table` is the file given to `evident match --thresholds`).
    pub thresholds: Option<CorrectionUse>,
}

/// A label correction table a run applied: its file and what it changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorrectionUse {
    /// The table's file, as given to `evident match --label-correction`.
    pub table: String,
    /// Model decisions the table was applied to.
    pub decisions: usize,
    /// Of those, the ones whose label it changed.
    pub relabelled: usize,
}

/// What made a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// The text strategy's model.
    Model,
    /// A reviewed check over the structured record.
    Check,
    /// Both ran and agree; the check's evidence and the model's are shown.
    CheckAndModel,
    /// Both ran and disagree: a person must decide.
    NeedsReview,
    /// The check found no data and leaves such criteria to the text
    /// strategy (`if_no_data: text`): the model decided.
    ModelAfterCheck,
    /// Nothing is stored for the criterion yet.
    Nothing,
}

impl DecidedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            DecidedBy::Model => "model",
            DecidedBy::Check => "check",
            DecidedBy::CheckAndModel => "check and model",
            DecidedBy::NeedsReview => "needs review",
            DecidedBy::ModelAfterCheck => "model (the check found no data)",
            DecidedBy::Nothing => "nothing",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PatientReport {
    pub patient_id: String,
    pub verdict: TrialVerdict,
    pub criteria: Vec<CriterionView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CriterionView {
    pub criterion: Criterion,
    /// `None` when the run has no result for it yet.
    pub result: Option<CriterionResult>,
    /// TrialGPT's wording ("included", "excluded", ...) or "failed" / "missing".
    pub label: String,
    pub evidence: Vec<EvidenceView>,
    /// Unresolved citations and citations missing from the store.
    pub problems: Vec<String>,
    /// Note-level results the decision was pooled from (ACIN/ICIN).
    pub note_results: Vec<CriterionResult>,
    /// The agents' trace (MAKAR).
    pub trace: Option<Value>,
    /// The worked examples (exemplars of other patients) the decision's
    /// prompt showed, best first; empty without `--exemplars` or when none
    /// was close enough. Read from the stored trace.
    pub exemplars: Vec<ShownExemplar>,
    pub decided_by: DecidedBy,
    /// The check's decision and the rows it read, when a check ran.
    pub check: Option<CheckOutcome>,
    /// The model's own decision when a check ran too (`--checks both`).
    pub model_result: Option<CriterionResult>,
    /// The label correction applied to the model's decision: the model's
    /// label and the corrected one (`result` carries the corrected one).
    pub label_correction: Option<AppliedCorrection>,
    /// The threshold on P(MET) applied to the model's decision: the model's
    /// label, its P(MET), the threshold and the label it gave (`result`
    /// carries that one).
    pub threshold: Option<AppliedThreshold>,
}

/// Cited sentences of one document with their surroundings.
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceView {
    pub document_id: String,
    pub title: String,
    pub date: Option<NaiveDateTime>,
    /// Consecutive runs of sentences (ordinal, text, cited); a gap between
    /// runs is elided text.
    pub passages: Vec<Vec<(i64, String, bool)>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PatientTrials {
    pub patient_id: String,
    /// (trial id, eligibility, matching score), best first.
    pub trials: Vec<(String, Eligibility, f64)>,
}

/// One result per criterion from what a run stored: pooled note-level
/// results for ACIN/ICIN, stored patient-level results otherwise.
pub fn patient_level(set: &CriteriaSet, method: Method, stored: &[CriterionResult]) -> Vec<CriterionResult> {
    let individual_notes = matches!(method, Method::ZeroShot(s) if s.individual_notes());
    set.criteria
        .iter()
        .filter_map(|c| {
            let of: Vec<CriterionResult> = stored.iter().filter(|r| r.criterion_id == c.id).cloned().collect();
            if individual_notes {
                pool(&of, c.pooling_or_default(), c.window_months, None)
            } else {
                of.into_iter().next()
            }
        })
        .collect()
}

/// A check's decision as a criterion result: its summary as rationale and
/// its timeline sentences as evidence (so the report shows them from the
/// store like any citation); checks are certain of what they read.
pub fn check_as_result(check: &CheckResult) -> CriterionResult {
    CriterionResult {
        criterion_id: check.criterion_id.clone(),
        criterion_type: check.criterion_type,
        document_id: None,
        document_date: None,
        outcome: Determination::Assessed(Assessment {
            medications_and_supplements: Vec::new(),
            rationale: check.outcome.summary.clone(),
            decision: check.outcome.decision,
            confidence: Confidence::High,
            evidence: check
                .outcome
                .sentences
                .iter()
                .map(|s| SentenceRef { document_id: s.document_id.clone(), ordinal: s.ordinal })
                .collect(),
        }),
        unresolved_citations: Vec::new(),
    }
}

/// The decision for one criterion from what ran: the check, the model,
/// or both (agreeing, or needing review).
pub fn combine(check: Option<&CheckResult>, model: Option<&CriterionResult>) -> (Option<CriterionResult>, DecidedBy) {
    match (check, model) {
        (None, None) => (None, DecidedBy::Nothing),
        (None, Some(m)) => (Some(m.clone()), DecidedBy::Model),
        (Some(c), None) => (Some(check_as_result(c)), DecidedBy::Check),
        (Some(c), Some(m)) if c.deferred => (Some(m.clone()), DecidedBy::ModelAfterCheck),
        (Some(c), Some(m)) if m.decision() == Some(c.outcome.decision) => {
            let mut result = check_as_result(c);
            if let (Determination::Assessed(a), Determination::Assessed(b)) = (&mut result.outcome, &m.outcome) {
                for e in &b.evidence {
                    if !a.evidence.contains(e) {
                        a.evidence.push(e.clone());
                    }
                }
            }
            result.unresolved_citations = m.unresolved_citations.clone();
            (Some(result), DecidedBy::CheckAndModel)
        }
        (Some(c), Some(m)) => {
            let model_said = m.decision().map_or("no valid answer", Decision::as_str);
            let model_why = match &m.outcome {
                Determination::Assessed(a) => a.rationale.clone(),
                Determination::Failed(f) => f.errors.join("; "),
            };
            let mut evidence: Vec<SentenceRef> =
                check_as_result(c).outcome.assessment().map(|a| a.evidence.clone()).unwrap_or_default();
            if let Determination::Assessed(b) = &m.outcome {
                for e in &b.evidence {
                    if !evidence.contains(e) {
                        evidence.push(e.clone());
                    }
                }
            }
            let result = CriterionResult {
                criterion_id: c.criterion_id.clone(),
                criterion_type: c.criterion_type,
                document_id: None,
                document_date: None,
                outcome: Determination::Assessed(Assessment {
                    medications_and_supplements: Vec::new(),
                    rationale: format!(
                        "Needs review: the check decided {} ({}) but the model decided {model_said} ({model_why}).",
                        c.outcome.decision.as_str(),
                        c.outcome.summary
                    ),
                    decision: Decision::NotEnoughInformation,
                    confidence: Confidence::Low,
                    evidence,
                }),
                unresolved_citations: m.unresolved_citations.clone(),
            };
            (Some(result), DecidedBy::NeedsReview)
        }
    }
}

/// Builds the report of one stored run; `patients` lists who was asked for
/// (a patient with no stored result yet is shown with missing decisions).
pub fn trial_report(
    store: &Store,
    run_id: &str,
    set: &CriteriaSet,
    patients: &[String],
) -> Result<TrialReport, BatchError> {
    let run = store
        .match_run(run_id)?
        .ok_or_else(|| BatchError::Corrupt { run_id: run_id.to_string(), message: "no such run".into() })?;
    let method = Method::parse(&run.method).ok_or_else(|| BatchError::Corrupt {
        run_id: run_id.to_string(),
        message: format!("unknown method {}", run.method),
    })?;
    let stored: BTreeMap<String, _> =
        stored_results(store, run_id)?.into_iter().map(|p| (p.patient_id.clone(), p)).collect();
    let model_runs = store.match_model_runs(run_id)?;
    let usage = if model_runs.is_empty() {
        None
    } else {
        let ids: Vec<&str> = model_runs.iter().map(String::as_str).collect();
        Some(store.model_runs_summary(run_id, &format!("match {}", run.method), &ids)?)
    };
    let mut reports = Vec::new();
    for patient_id in patients {
        let (results, traces, checks) = match stored.get(patient_id) {
            Some(p) => (p.stored.clone(), p.traces.clone(), p.checks.clone()),
            None => (Vec::new(), BTreeMap::new(), BTreeMap::new()),
        };
        let model_results = patient_level(set, method, &results);
        let combined: Vec<(String, Option<CriterionResult>, DecidedBy)> = set
            .criteria
            .iter()
            .map(|c| {
                let (r, by) = combine(checks.get(&c.id), model_results.iter().find(|r| r.criterion_id == c.id));
                (c.id.clone(), r, by)
            })
            .collect();
        let patient_results: Vec<CriterionResult> = combined.iter().filter_map(|(_, r, _)| r.clone()).collect();
        let verdict = trial_verdict(set, &patient_results);
        let mut criteria = Vec::new();
        for (c, (_, result, decided_by)) in set.criteria.iter().zip(combined) {
            let check = checks.get(&c.id).map(|k| k.outcome.clone());
            let model_result = match decided_by {
                DecidedBy::CheckAndModel | DecidedBy::NeedsReview => {
                    model_results.iter().find(|r| r.criterion_id == c.id).cloned()
                }
                _ => None,
            };
            let note_results: Vec<CriterionResult> =
                results.iter().filter(|r| r.criterion_id == c.id && r.document_id.is_some()).cloned().collect();
            let (evidence, problems) = match &result {
                Some(r) => evidence_views(store, r)?,
                None => (Vec::new(), Vec::new()),
            };
            let label = match &result {
                None => "missing".to_string(),
                Some(_) if decided_by == DecidedBy::NeedsReview => "needs review".to_string(),
                Some(r) => match r.decision() {
                    Some(d) => d.trialgpt_label(c.criterion_type).to_string(),
                    None => "failed".to_string(),
                },
            };
            let trace = traces.get(&c.id).cloned();
            criteria.push(CriterionView {
                criterion: c.clone(),
                result,
                label,
                evidence,
                problems,
                note_results,
                exemplars: shown_exemplars(trace.as_ref()),
                label_correction: applied_correction(trace.as_ref()),
                threshold: applied_threshold(trace.as_ref()),
                trace,
                decided_by,
                check,
                model_result,
            });
        }
        reports.push(PatientReport { patient_id: patient_id.clone(), verdict, criteria });
    }
    let order: Vec<String> = {
        let mut items: Vec<(String, &TrialVerdict)> =
            reports.iter().map(|r| (r.patient_id.clone(), &r.verdict)).collect();
        rank(&mut items);
        items.into_iter().map(|(id, _)| id).collect()
    };
    reports.sort_by_key(|r| order.iter().position(|id| id == &r.patient_id));
    let check_decisions = stored.values().map(|p| p.checks.len()).sum();
    let applied: Vec<&AppliedCorrection> =
        reports.iter().flat_map(|p| &p.criteria).filter_map(|c| c.label_correction.as_ref()).collect();
    let label_correction = applied.first().map(|first| CorrectionUse {
        table: first.table.clone(),
        decisions: applied.len(),
        relabelled: applied.iter().filter(|a| a.changed).count(),
    });
    let thresholded: Vec<&AppliedThreshold> =
        reports.iter().flat_map(|p| &p.criteria).filter_map(|c| c.threshold.as_ref()).collect();
    let thresholds = thresholded.first().map(|first| CorrectionUse {
        table: first.table.clone(),
        decisions: thresholded.len(),
        relabelled: thresholded.iter().filter(|a| a.changed).count(),
    });
    Ok(TrialReport {
        label_correction,
        thresholds,
        check_decisions,
        model_tasks_saved: None,
        run_id: run_id.to_string(),
        trial: set.clone(),
        method: run.method,
        finished: run.finished_at.is_some(),
        usage,
        patients: reports,
    })
}

/// The exemplars a decision's trace names (zero-shot: `{"exemplars": [...]}`;
/// the paper's MAKAR: its trace's `exemplars`). A trace without them, or
/// one that does not read, names none.
pub fn shown_exemplars(trace: Option<&Value>) -> Vec<ShownExemplar> {
    trace
        .and_then(|t| t.get("exemplars"))
        .and_then(|e| serde_json::from_value::<Vec<ShownExemplar>>(e.clone()).ok())
        .unwrap_or_default()
}

/// One exemplar as a report names it: its id, where it came from and its
/// similarity to the criterion.
pub fn exemplar_text(e: &ShownExemplar) -> String {
    format!("#{} {} {} ({:.3})", e.id, e.source, e.source_ref, e.similarity)
}

/// What the label correction did to one decision, in words.
pub fn correction_text(a: &AppliedCorrection) -> String {
    let counts: Vec<String> = a.physicians.iter().map(|(d, n)| format!("{} {n}", d.as_str())).collect();
    let basis = if a.rows == 0 {
        "the table has no rows for this label".to_string()
    } else {
        format!("physicians on the {} fitted rows: {}", a.rows, counts.join(", "))
    };
    if a.changed {
        format!(
            "model {} -> corrected {} (table {}; {basis})",
            a.model_decision.as_str(),
            a.corrected.as_str(),
            a.table
        )
    } else {
        format!("model {} kept (table {}; {basis})", a.model_decision.as_str(), a.table)
    }
}

/// What the threshold stored in a decision's trace (`threshold`) did, if
/// one was applied.
pub fn applied_threshold(trace: Option<&Value>) -> Option<AppliedThreshold> {
    trace.and_then(|t| t.get("threshold")).and_then(|v| serde_json::from_value(v.clone()).ok())
}

/// What the threshold on P(MET) did to one decision, in words.
pub fn threshold_text(a: &AppliedThreshold) -> String {
    let Some(p) = a.p_met else {
        return format!("model {} kept: no P(MET) (table {})", a.model_decision.as_str(), a.table);
    };
    let basis = format!("P(MET) {p:.3}, threshold {:.3}", a.threshold);
    if a.changed {
        format!("model {} -> {} ({basis}; table {})", a.model_decision.as_str(), a.decision.as_str(), a.table)
    } else {
        format!("model {} kept ({basis}; table {})", a.model_decision.as_str(), a.table)
    }
}

/// Puts trial reports together and ranks trials for each patient.
pub fn match_report(trials: Vec<TrialReport>) -> MatchReport {
    let mut by_patient: BTreeMap<String, Vec<(String, TrialVerdict)>> = BTreeMap::new();
    for t in &trials {
        for p in &t.patients {
            by_patient.entry(p.patient_id.clone()).or_default().push((t.trial.trial_id.clone(), p.verdict.clone()));
        }
    }
    let patients = by_patient
        .into_iter()
        .map(|(patient_id, verdicts)| {
            let mut items: Vec<(String, &TrialVerdict)> = verdicts.iter().map(|(t, v)| (t.clone(), v)).collect();
            rank(&mut items);
            PatientTrials {
                patient_id,
                trials: items.into_iter().map(|(t, v)| (t, v.eligibility, v.matching_score)).collect(),
            }
        })
        .collect();
    MatchReport { generated_at: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(), trials, patients }
}

/// The cited sentences of a result, verbatim from the store with their
/// neighbours, and every citation that does not resolve.
fn evidence_views(store: &Store, result: &CriterionResult) -> Result<(Vec<EvidenceView>, Vec<String>), BatchError> {
    let mut problems = result.unresolved_citations.clone();
    let Determination::Assessed(a) = &result.outcome else { return Ok((Vec::new(), problems)) };
    let mut by_doc: BTreeMap<&str, BTreeSet<i64>> = BTreeMap::new();
    let mut doc_order: Vec<&str> = Vec::new();
    for SentenceRef { document_id, ordinal } in &a.evidence {
        if !doc_order.contains(&document_id.as_str()) {
            doc_order.push(document_id);
        }
        by_doc.entry(document_id).or_default().insert(*ordinal);
    }
    let mut views = Vec::new();
    for doc in doc_order {
        let cited = &by_doc[doc];
        let Some(document) = store.document(doc)? else {
            problems.extend(
                cited.iter().map(|o| format!("sentence {o} of document {doc}: the document is not in the store")),
            );
            continue;
        };
        let sentences: BTreeMap<i64, String> = store.sentences(doc)?.into_iter().map(|s| (s.ordinal, s.text)).collect();
        for o in cited {
            if !sentences.contains_key(o) {
                problems.push(format!("sentence {o} of document {doc} is not in the store"));
            }
        }
        let shown: BTreeSet<i64> = cited
            .iter()
            .filter(|o| sentences.contains_key(o))
            .flat_map(|o| (o - CONTEXT_SENTENCES)..=(o + CONTEXT_SENTENCES))
            .filter(|o| sentences.contains_key(o))
            .collect();
        let mut passages: Vec<Vec<(i64, String, bool)>> = Vec::new();
        let mut last: Option<i64> = None;
        for o in shown {
            if last != Some(o - 1) {
                passages.push(Vec::new());
            }
            passages.last_mut().expect("pushed above").push((o, sentences[&o].clone(), cited.contains(&o)));
            last = Some(o);
        }
        if !passages.is_empty() {
            views.push(EvidenceView {
                document_id: doc.to_string(),
                title: document.title,
                date: document.date,
                passages,
            });
        }
    }
    Ok((views, problems))
}

pub fn write_json(report: &MatchReport, path: &Path) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(report).expect("reports serialise");
    std::fs::write(path, text)
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// One row per patient-level decision; `exemplars` names the worked
/// examples its prompt showed ("#id source reference (similarity)", "; "
/// between them), empty when none.
pub fn to_csv(report: &MatchReport) -> String {
    let mut out = String::from(
        "run_id,trial_id,method,patient_id,eligibility,matching_score,criterion_id,type,criterion,decision,label,confidence,rationale,evidence,problems,failure,exemplars,model_decision,label_correction,threshold,decided_by\n",
    );
    for t in &report.trials {
        for p in &t.patients {
            for c in &p.criteria {
                let (decision, confidence, rationale, evidence, failure) = match c.result.as_ref().map(|r| &r.outcome) {
                    Some(Determination::Assessed(a)) => (
                        a.decision.as_str().to_string(),
                        format!("{:?}", a.confidence).to_lowercase(),
                        a.rationale.clone(),
                        a.evidence
                            .iter()
                            .map(|e| format!("{}#{}", e.document_id, e.ordinal))
                            .collect::<Vec<_>>()
                            .join(";"),
                        String::new(),
                    ),
                    Some(Determination::Failed(f)) => {
                        (String::new(), String::new(), String::new(), String::new(), f.errors.join("; "))
                    }
                    None => {
                        (String::new(), String::new(), String::new(), String::new(), "no result stored".to_string())
                    }
                };
                let fields = [
                    t.run_id.clone(),
                    t.trial.trial_id.clone(),
                    t.method.clone(),
                    p.patient_id.clone(),
                    eligibility_text(p.verdict.eligibility).to_string(),
                    format!("{:.4}", p.verdict.matching_score),
                    c.criterion.id.clone(),
                    c.criterion.criterion_type.as_str().to_string(),
                    c.criterion.text.clone(),
                    decision,
                    c.label.clone(),
                    confidence,
                    rationale,
                    evidence,
                    c.problems.join("; "),
                    failure,
                    c.exemplars.iter().map(exemplar_text).collect::<Vec<_>>().join("; "),
                    c.label_correction
                        .as_ref()
                        .map(|a| a.model_decision)
                        .or(c.threshold.as_ref().map(|a| a.model_decision))
                        .map(|d| d.as_str().to_string())
                        .unwrap_or_default(),
                    c.label_correction.as_ref().map(correction_text).unwrap_or_default(),
                    c.threshold.as_ref().map(threshold_text).unwrap_or_default(),
                    c.decided_by.as_str().to_string(),
                ];
                let row: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
                out.push_str(&row.join(","));
                out.push('\n');
            }
        }
    }
    out
}

/// One line on what a run cost: calls, cache hits, tokens, cost, latency,
/// pipeline failures and models. Shared by the report, `evident match` and
/// `evident eval`.
pub fn usage_text(u: &ModelRunSummary) -> String {
    let ms = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into());
    format!(
        "{} calls ({} from cache, {} reached the model), {} prompt + {} completion tokens, cost ${:.4}, latency p50 {} / p90 {} ms, {} pipeline failures, models {}.",
        u.calls,
        u.cache_hits,
        u.model_calls,
        u.prompt_tokens,
        u.completion_tokens,
        u.cost_usd,
        ms(u.latency_p50_ms),
        ms(u.latency_p90_ms),
        u.pipeline_failures,
        u.models.join(", ")
    )
}

/// One sentence on what checks did: decisions made, model tasks saved.
pub fn checks_text(decisions: usize, saved: Option<usize>) -> String {
    match saved {
        Some(saved) => {
            format!("Reviewed checks made {decisions} decisions from stored data; {saved} model tasks were not needed.")
        }
        None => format!("Reviewed checks made {decisions} decisions from stored data."),
    }
}

/// The check's decision and the lab rows it read (its timeline sentences
/// are shown as the decision's evidence).
fn write_check(h: &mut String, check: &CheckOutcome, decided_by: DecidedBy) {
    if decided_by == DecidedBy::NeedsReview || decided_by == DecidedBy::CheckAndModel {
        let _ = write!(h, "<div><b>Check</b>: {} — {}</div>", esc(check.decision.as_str()), esc(&check.summary));
    }
    if !check.labs.is_empty() {
        h.push_str("<table><tr><th>Lab value read by the check</th><th>Date</th><th>Value</th><th>In the check's unit</th><th>Source</th></tr>");
        for l in &check.labs {
            let converted = l
                .converted
                .map_or("cannot be read".to_string(), |v| format!("{} {}", (v * 100.0).round() / 100.0, l.check_unit));
            let _ = write!(
                h,
                "<tr><td>{}{}</td><td>{}</td><td>{} {}</td><td>{}</td><td><code>{}</code></td></tr>",
                esc(&l.name),
                if l.used { " <b>(used)</b>" } else { "" },
                l.time.format("%Y-%m-%d %H:%M"),
                esc(&l.value),
                esc(l.unit.as_deref().unwrap_or("")),
                esc(&converted),
                esc(&l.source_id)
            );
        }
        h.push_str("</table>");
    }
    for fact in &check.facts {
        let _ = write!(h, "<div class=\"muted\">From the patient record: {}</div>", esc(fact));
    }
}

pub fn eligibility_text(e: Eligibility) -> &'static str {
    match e {
        Eligibility::Eligible => "eligible",
        Eligibility::NeedsReview => "needs review",
        Eligibility::NotEligible => "not eligible",
        Eligibility::Excluded => "excluded",
    }
}

fn anchor(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| p.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect::<String>())
        .collect::<Vec<_>>()
        .join("--")
}

const STYLE: &str = r#"
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;color:#1d2327;line-height:1.45}
h1{font-size:1.6rem}h2{font-size:1.3rem;margin-top:2.5rem;border-bottom:2px solid #ccd;padding-bottom:.2rem}h3{font-size:1.1rem;margin-top:1.8rem}
table{border-collapse:collapse;width:100%;margin:.6rem 0}th,td{border:1px solid #d5d8dc;padding:.35rem .5rem;vertical-align:top;text-align:left;font-size:.92rem}
th{background:#f3f4f6}.muted{color:#666;font-size:.88rem}
.pill{display:inline-block;padding:.05rem .5rem;border-radius:.8rem;font-size:.85rem;font-weight:600;white-space:nowrap}
.eligible,.included,.not-excluded{background:#d9f2e0;color:#145a2c}.excluded,.not-included,.not-eligible{background:#fadbd8;color:#7b1d14}
.needs-review,.not-enough-information,.failed,.missing{background:#fdf0c9;color:#6b4e00}.not-applicable{background:#e8e8e8;color:#444}
mark{background:#ffe58a;padding:0 .1rem}.passage{margin:.3rem 0 .5rem;padding:.4rem .6rem;background:#fafafa;border-left:3px solid #c9d1d9;font-size:.9rem}
.problem{color:#7b1d14;font-weight:600}details{margin:.2rem 0}summary{cursor:pointer;color:#2d5d9f}
"#;

fn pill(text: &str) -> String {
    format!("<span class=\"pill {}\">{}</span>", text.replace(' ', "-"), esc(text))
}

/// The whole report as one HTML page with no external resources.
pub fn to_html(report: &MatchReport) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Evident screening report</title><style>{STYLE}</style></head><body>"
    );
    let _ = write!(h, "<h1>Evident screening report</h1><p class=\"muted\">Generated {}. Each decision says what made it: the model, a reviewed check over the structured record, or both; every quoted sentence is shown verbatim from the patient's stored record, with the cited sentence highlighted.</p>", esc(&report.generated_at));
    for t in &report.trials {
        write_trial(&mut h, t);
    }
    if report.trials.len() > 1 {
        let _ = write!(
            h,
            "<h2>Trials ranked for each patient</h2><table><tr><th>Patient</th><th>Trials, best first</th></tr>"
        );
        for p in &report.patients {
            let trials: Vec<String> = p
                .trials
                .iter()
                .map(|(t, e, s)| {
                    format!("{} {} <span class=\"muted\">({s:.2})</span>", esc(t), pill(eligibility_text(*e)))
                })
                .collect();
            let _ = write!(h, "<tr><td>{}</td><td>{}</td></tr>", esc(&p.patient_id), trials.join("<br>"));
        }
        h.push_str("</table>");
    }
    h.push_str("</body></html>\n");
    h
}

fn write_trial(h: &mut String, t: &TrialReport) {
    let title = if t.trial.title.is_empty() { String::new() } else { format!(": {}", esc(&t.trial.title)) };
    let _ = write!(h, "<h2>Trial {}{title}</h2>", esc(&t.trial.trial_id));
    let _ = write!(
        h,
        "<p class=\"muted\">Method <b>{}</b>; run <code>{}</code>{}.",
        esc(&t.method),
        esc(&t.run_id),
        if t.finished {
            ""
        } else {
            " (<b>not finished</b>: some decisions are missing; run the same command again to resume)"
        }
    );
    if let Some(u) = &t.usage {
        let _ = write!(h, " {}", esc(&usage_text(u)));
    }
    if t.check_decisions > 0 {
        let _ = write!(h, " {}", esc(&checks_text(t.check_decisions, t.model_tasks_saved)));
    }
    if let Some(c) = &t.label_correction {
        let _ = write!(
            h,
            " <b>Label correction applied</b> from <code>{}</code> (Evident's correction of the model's lean, fitted on physicians' labels of a development split): {} of {} model decisions relabelled; each shows the model's label beside the corrected one.",
            esc(&c.table),
            c.relabelled,
            c.decisions
        );
    }
    if let Some(c) = &t.thresholds {
        let _ = write!(
            h,
            " <b>Threshold on P(MET) applied</b> from <code>{}</code> (Evident's lever, fitted on physicians' labels of a development split): {} of {} model decisions relabelled; each shows the model's label, its P(MET) and the threshold.",
            esc(&c.table),
            c.relabelled,
            c.decisions
        );
    }
    h.push_str("</p>");
    h.push_str("<table><tr><th>Rank</th><th>Patient</th><th>Eligibility</th><th>Score</th><th>Inclusion met / not met / unknown</th><th>Exclusion met / not met / unknown</th><th>Failed</th><th>Flagged</th></tr>");
    for (i, p) in t.patients.iter().enumerate() {
        let c = &p.verdict.counts;
        let _ = write!(
            h,
            "<tr><td>{}</td><td><a href=\"#{}\">{}</a></td><td>{}</td><td>{:.2}</td><td>{} / {} / {}</td><td>{} / {} / {}</td><td>{}</td><td>{}</td></tr>",
            i + 1,
            anchor(&[&t.trial.trial_id, &p.patient_id]),
            esc(&p.patient_id),
            pill(eligibility_text(p.verdict.eligibility)),
            p.verdict.matching_score,
            c.included,
            c.not_included,
            c.inclusion_unknown,
            c.excluded,
            c.not_excluded,
            c.exclusion_unknown,
            c.failed,
            c.flagged
        );
    }
    h.push_str("</table>");
    for p in &t.patients {
        let _ = write!(
            h,
            "<h3 id=\"{}\">Patient {} — {}</h3>",
            anchor(&[&t.trial.trial_id, &p.patient_id]),
            esc(&p.patient_id),
            pill(eligibility_text(p.verdict.eligibility))
        );
        h.push_str(
            "<table><tr><th>Criterion</th><th>Decision</th><th>Confidence</th><th>Rationale and evidence</th></tr>",
        );
        for c in &p.criteria {
            write_criterion(h, c);
        }
        h.push_str("</table>");
    }
}

fn write_criterion(h: &mut String, c: &CriterionView) {
    let _ = write!(
        h,
        "<tr><td><b>{}</b> <span class=\"muted\">({})</span><br>{}",
        esc(&c.criterion.id),
        c.criterion.criterion_type.as_str(),
        esc(&c.criterion.text)
    );
    if let Some(refined) = &c.criterion.refined {
        let _ = write!(h, "<details><summary>refined definition</summary>{}</details>", esc(refined));
    }
    h.push_str("</td>");
    let confidence = match c.result.as_ref().map(|r| &r.outcome) {
        Some(Determination::Assessed(a)) => format!("{:?}", a.confidence).to_lowercase(),
        _ => String::new(),
    };
    let _ = write!(
        h,
        "<td>{}<div class=\"muted\">by {}</div></td><td>{}</td><td>",
        pill(&c.label),
        esc(c.decided_by.as_str()),
        esc(&confidence)
    );
    match c.result.as_ref().map(|r| &r.outcome) {
        Some(Determination::Assessed(a)) => {
            let _ = write!(h, "{}", esc(&a.rationale));
        }
        Some(Determination::Failed(f)) => {
            let _ = write!(
                h,
                "<span class=\"problem\">No valid answer (pipeline failure): {}</span><details><summary>raw answer</summary><pre>{}</pre></details>",
                esc(&f.errors.join("; ")),
                esc(&f.raw_text)
            );
        }
        None => h.push_str("<span class=\"problem\">No decision stored yet.</span>"),
    }
    if let Some(a) = &c.label_correction {
        let _ = write!(h, "<div class=\"muted\">Label correction: {}</div>", esc(&correction_text(a)));
    }
    if let Some(a) = &c.threshold {
        let _ = write!(h, "<div class=\"muted\">Threshold on P(MET): {}</div>", esc(&threshold_text(a)));
    }
    for problem in &c.problems {
        let _ = write!(h, "<div class=\"problem\">Citation problem: {}</div>", esc(problem));
    }
    if let Some(check) = &c.check {
        write_check(h, check, c.decided_by);
    }
    for e in &c.evidence {
        let date = e
            .date
            .map(|d| d.format("%Y-%m-%d").to_string())
            .filter(|d| !e.title.contains(d.as_str()))
            .unwrap_or_default();
        let _ = write!(
            h,
            "<div class=\"muted\">{} {} <code>{}</code></div>",
            esc(&e.title),
            esc(&date),
            esc(&e.document_id)
        );
        for passage in &e.passages {
            h.push_str("<div class=\"passage\">");
            for (ordinal, text, cited) in passage {
                if *cited {
                    let _ = write!(h, "<mark title=\"sentence {ordinal}\">{}</mark> ", esc(text));
                } else {
                    let _ = write!(h, "{} ", esc(text));
                }
            }
            h.push_str("</div>");
        }
    }
    if !c.note_results.is_empty() {
        let _ = write!(h, "<details><summary>{} note-level decisions</summary><ul>", c.note_results.len());
        for n in &c.note_results {
            let label = n.decision().map(|d| d.trialgpt_label(c.criterion.criterion_type)).unwrap_or("failed");
            let _ = write!(h, "<li><code>{}</code>: {}</li>", esc(n.document_id.as_deref().unwrap_or("")), esc(label));
        }
        h.push_str("</ul></details>");
    }
    if !c.exemplars.is_empty() {
        let _ = write!(
            h,
            "<details class=\"exemplars\"><summary>{} worked example{} shown (other patients' adjudicated decisions)</summary><ul>",
            c.exemplars.len(),
            if c.exemplars.len() == 1 { "" } else { "s" }
        );
        for e in &c.exemplars {
            let _ = write!(h, "<li>{}</li>", esc(&exemplar_text(e)));
        }
        h.push_str("</ul></details>");
    }
    if let Some(trace) = &c.trace {
        let _ = write!(
            h,
            "<details><summary>agent trace</summary><pre>{}</pre></details>",
            esc(&serde_json::to_string_pretty(trace).unwrap_or_default())
        );
    }
    h.push_str("</td></tr>");
}
