//! Review of stored screening runs: the trial worklist (patients ranked,
//! with the model's standing and the standing once reviewers' overrides
//! are applied), one patient's criteria with the cited sentences, a whole
//! document with its sentences, a reviewer's override and sign-off (each
//! with its audit entry), the audit trail, and exports of the decisions
//! with overrides applied and the model's original kept beside them.
//!
//! An override never changes the model's decision: it is a new row, and
//! every view here shows both. The latest override of a criterion is the
//! one in effect.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use evident_match::batch::stored_results;
use evident_match::decision::{trial_verdict, Assessment, Confidence, Determination, Eligibility, TrialVerdict};
use evident_match::report::{trial_report, CriterionView, TrialReport};
use evident_match::{CriteriaSet, CriterionResult, Decision};
use evident_model::DocKind;
use evident_store::{AuditRecord, NewAuditEntry, NewOverride, OverrideRecord, SentenceRecord, SignoffRecord, Store};
use serde::Serialize;

use crate::error::{input_error, AppError, Result};
use crate::session::Session;
use crate::users::Actor;

/// A stored screening run, for the list of runs.
#[derive(Debug, Clone, Serialize)]
pub struct RunLine {
    pub run_id: String,
    pub trial_id: String,
    pub trial_title: String,
    pub method: String,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub patients: u64,
    pub overrides: usize,
    pub signoffs: usize,
}

/// The stored screening runs, newest first.
pub fn runs(session: &Session) -> Result<Vec<RunLine>> {
    session.with_reader(|store| {
        let mut lines = Vec::new();
        for run in store.match_runs()? {
            let set = run_criteria(&run.id, &run.definition_json).ok();
            lines.push(RunLine {
                trial_id: run.trial_id.clone(),
                trial_title: set.map(|s| s.title).unwrap_or_default(),
                method: run.method.clone(),
                created_at: run.created_at.clone(),
                finished_at: run.finished_at.clone(),
                patients: run.patients,
                overrides: store.overrides(&run.id, None)?.len(),
                signoffs: store.signoffs(&run.id, None)?.len(),
                run_id: run.id,
            });
        }
        lines.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.run_id.cmp(&b.run_id)));
        Ok(lines)
    })
}

/// The trials of the stored screening runs (one entry per distinct
/// criteria set), with their criteria.
pub fn trials(session: &Session) -> Result<Vec<CriteriaSet>> {
    session.with_reader(|store| {
        let mut sets: Vec<CriteriaSet> = Vec::new();
        for run in store.match_runs()? {
            let set = run_criteria(&run.id, &run.definition_json)?;
            if !sets.contains(&set) {
                sets.push(set);
            }
        }
        sets.sort_by(|a, b| a.trial_id.cmp(&b.trial_id));
        Ok(sets)
    })
}

/// Which patients a worklist shows.
pub fn parse_eligibility(text: &str) -> Result<Eligibility> {
    match text.trim() {
        "eligible" => Ok(Eligibility::Eligible),
        "needs_review" | "needs-review" => Ok(Eligibility::NeedsReview),
        "not_eligible" | "not-eligible" => Ok(Eligibility::NotEligible),
        "excluded" => Ok(Eligibility::Excluded),
        other => input_error!("filter {other:?} is not known; use eligible, needs_review, not_eligible or excluded"),
    }
}

/// One patient in a worklist.
#[derive(Debug, Clone, Serialize)]
pub struct WorkItem {
    /// 1 = best match, as the model's decisions rank the patients.
    pub rank: usize,
    pub patient_id: String,
    /// From the model's (and checks') decisions alone.
    pub model_verdict: TrialVerdict,
    /// With the latest override of each criterion applied.
    pub verdict: TrialVerdict,
    pub overrides: usize,
    /// The latest sign-off, if any.
    pub signed_off: Option<SignoffRecord>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Worklist {
    pub run_id: String,
    pub trial_id: String,
    pub trial_title: String,
    pub method: String,
    pub finished: bool,
    /// The filter applied (on the standing with overrides applied).
    pub filter: Option<Eligibility>,
    pub patients: Vec<WorkItem>,
}

/// A run's patients ranked, optionally only those whose standing (with
/// overrides applied) is `filter`.
pub fn worklist(session: &Session, run_id: &str, filter: Option<Eligibility>) -> Result<Worklist> {
    session.with_reader(|store| {
        let (set, report) = load_report(session.db_path(), store, run_id)?;
        let all_overrides = store.overrides(run_id, None)?;
        // The latest override of each criterion, grouped by patient.
        let mut by_patient: BTreeMap<&str, BTreeMap<&str, &OverrideRecord>> = BTreeMap::new();
        for o in latest_overrides(&all_overrides).into_values() {
            by_patient.entry(o.patient_id.as_str()).or_default().insert(o.criterion_id.as_str(), o);
        }
        // The latest sign-off of each patient.
        let signoffs = store.signoffs(run_id, None)?;
        let mut last_signoff: BTreeMap<&str, &SignoffRecord> = BTreeMap::new();
        for s in &signoffs {
            last_signoff.insert(s.patient_id.as_str(), s);
        }
        let mut patients = Vec::new();
        for (i, p) in report.patients.iter().enumerate() {
            let mine = by_patient.get(p.patient_id.as_str());
            // A patient without overrides stands as the model's decisions put it.
            let verdict = match mine {
                Some(mine) => verdict_with_overrides(&set, &p.criteria, mine),
                None => p.verdict.clone(),
            };
            if filter.is_some_and(|f| f != verdict.eligibility) {
                continue;
            }
            patients.push(WorkItem {
                rank: i + 1,
                patient_id: p.patient_id.clone(),
                model_verdict: p.verdict.clone(),
                verdict,
                overrides: mine.map_or(0, |m| m.len()),
                signed_off: last_signoff.get(p.patient_id.as_str()).map(|s| (*s).clone()),
            });
        }
        Ok(Worklist {
            run_id: run_id.to_string(),
            trial_id: set.trial_id.clone(),
            trial_title: set.title.clone(),
            method: report.method.clone(),
            finished: report.finished,
            filter,
            patients,
        })
    })
}

/// One criterion of one patient under review.
#[derive(Debug, Clone, Serialize)]
pub struct CriterionReview {
    /// The model's (and checks') decision with its cited sentences, as the
    /// screening report shows it.
    pub view: CriterionView,
    /// Reviewers' overrides, oldest first; the last one is in effect.
    pub overrides: Vec<OverrideRecord>,
    /// The decision in effect: the latest override's, else the model's.
    pub effective_decision: Option<String>,
}

/// One patient's decisions for one run.
#[derive(Debug, Clone, Serialize)]
pub struct PatientReview {
    pub run_id: String,
    pub trial_id: String,
    pub trial_title: String,
    pub patient_id: String,
    pub model_verdict: TrialVerdict,
    pub verdict: TrialVerdict,
    pub criteria: Vec<CriterionReview>,
    pub signoffs: Vec<SignoffRecord>,
}

pub fn patient(session: &Session, run_id: &str, patient_id: &str) -> Result<PatientReview> {
    session.with_reader(|store| patient_review(session.db_path(), store, run_id, patient_id))
}

fn patient_review(db: &Path, store: &Store, run_id: &str, patient_id: &str) -> Result<PatientReview> {
    let (set, report) = load_report(db, store, run_id)?;
    let Some(p) = report.patients.iter().find(|p| p.patient_id == patient_id).cloned() else {
        return Err(AppError::NotFound(format!("patient {patient_id:?} has no decision in run {run_id:?}")));
    };
    let overrides = store.overrides(run_id, Some(patient_id))?;
    let latest = latest_overrides(&overrides);
    let mine: BTreeMap<&str, &OverrideRecord> =
        latest.iter().map(|((_, criterion), o)| (criterion.as_str(), *o)).collect();
    let verdict = verdict_with_overrides(&set, &p.criteria, &mine);
    let criteria = p
        .criteria
        .into_iter()
        .map(|view| {
            let list: Vec<OverrideRecord> =
                overrides.iter().filter(|o| o.criterion_id == view.criterion.id).cloned().collect();
            let effective_decision = list
                .last()
                .map(|o| o.decision.clone())
                .or_else(|| view.result.as_ref().and_then(|r| r.decision()).map(|d| d.as_str().to_string()));
            CriterionReview { view, overrides: list, effective_decision }
        })
        .collect();
    Ok(PatientReview {
        run_id: run_id.to_string(),
        trial_id: set.trial_id.clone(),
        trial_title: set.title.clone(),
        patient_id: patient_id.to_string(),
        model_verdict: p.verdict,
        verdict,
        criteria,
        signoffs: store.signoffs(run_id, Some(patient_id))?,
    })
}

/// A whole document with its sentences (byte spans into `text`).
#[derive(Debug, Clone, Serialize)]
pub struct DocumentView {
    pub id: String,
    pub patient_id: String,
    pub kind: DocKind,
    pub title: String,
    pub date: Option<chrono::NaiveDateTime>,
    pub text: String,
    pub sentences: Vec<SentenceRecord>,
}

/// One document of one patient. A document of another patient is refused
/// as not found, so a URL cannot reach across patients.
pub fn document(session: &Session, patient_id: &str, document_id: &str) -> Result<DocumentView> {
    session.with_reader(|store| {
        let doc = store.document(document_id)?;
        let Some(doc) = doc.filter(|d| d.patient_id == patient_id) else {
            return Err(AppError::NotFound(format!("patient {patient_id:?} has no document {document_id:?}")));
        };
        let sentences = store.sentences(document_id)?;
        Ok(DocumentView {
            id: doc.id,
            patient_id: doc.patient_id,
            kind: doc.kind,
            title: doc.title,
            date: doc.date,
            text: doc.text,
            sentences,
        })
    })
}

/// A reviewer's override of one decision.
#[derive(Debug, Clone)]
pub struct OverrideRequest {
    pub run_id: String,
    pub patient_id: String,
    pub criterion_id: String,
    /// MET, NOT MET, NOT ENOUGH INFORMATION or NOT APPLICABLE.
    pub decision: String,
    pub reason: String,
}

/// Stores a reviewer's override beside the model's decision, with an audit
/// entry holding the decision in effect before and the new one.
pub fn override_decision(session: &Session, actor: &Actor, request: &OverrideRequest) -> Result<OverrideRecord> {
    if !actor.role.can_review() {
        input_error!("{} is a {}; overriding a decision needs the reviewer or admin role", actor.name, actor.role);
    }
    let Some(decision) = Decision::parse(&request.decision) else {
        input_error!(
            "decision {:?} is not known; use one of {}",
            request.decision,
            Decision::ALL.map(|d| d.as_str()).join(", ")
        );
    };
    let reason = request.reason.trim();
    if reason.is_empty() {
        input_error!("an override needs a reason");
    }
    // The model's decision, read beside the writer (the report is kept
    // until the run's results change; a stored decision is never replaced).
    let review =
        session.with_reader(|store| patient_review(session.db_path(), store, &request.run_id, &request.patient_id))?;
    let Some(criterion) = review.criteria.iter().find(|c| c.view.criterion.id == request.criterion_id) else {
        return Err(AppError::NotFound(format!(
            "run {:?} has no criterion {:?}",
            request.run_id, request.criterion_id
        )));
    };
    let model_decision = criterion.view.result.as_ref().and_then(|r| r.decision()).map(|d| d.as_str().to_string());
    session.with_store(|store| {
        // The decision in effect before, read under the writer's lock, so
        // overrides sent at once each see the one before them.
        let before = store
            .overrides(&request.run_id, Some(&request.patient_id))?
            .into_iter()
            .rfind(|o| o.criterion_id == request.criterion_id)
            .map(|o| o.decision)
            .or(model_decision);
        let new = NewOverride {
            run_id: request.run_id.clone(),
            patient_id: request.patient_id.clone(),
            criterion_id: request.criterion_id.clone(),
            decision: decision.as_str().to_string(),
            reason: reason.to_string(),
            reviewer: actor.name.clone(),
        };
        let audit = NewAuditEntry {
            actor: actor.name.clone(),
            action: "override".into(),
            subject: format!("{}/{}/{}", request.run_id, request.patient_id, request.criterion_id),
            before_json: Some(serde_json::to_string(&before)?),
            after_json: Some(serde_json::to_string(decision.as_str())?),
            reason: reason.to_string(),
        };
        let id = store.put_override(&new, &audit)?;
        // The override enters the exemplar bank screening learns from.
        crate::exemplars::record_review(
            store,
            &crate::exemplars::reviewed(
                &review.trial_id,
                &request.run_id,
                &criterion.view,
                "override",
                decision,
                reason,
                &actor.name,
                &request.patient_id,
            ),
        )?;
        let stored = store.overrides(&request.run_id, Some(&request.patient_id))?;
        stored
            .into_iter()
            .find(|o| o.id == id)
            .ok_or_else(|| AppError::Setup(format!("override {id} was written but cannot be read back")))
    })
}

/// Signs off one patient-trial pair, with an audit entry.
pub fn sign_off(session: &Session, actor: &Actor, run_id: &str, patient_id: &str, note: &str) -> Result<SignoffRecord> {
    if !actor.role.can_review() {
        input_error!("{} is a {}; signing off needs the reviewer or admin role", actor.name, actor.role);
    }
    session.with_store(|store| {
        let review = patient_review(session.db_path(), store, run_id, patient_id)?;
        let after = serde_json::json!({
            "eligibility": review.verdict.eligibility,
            "decisions": review.criteria.iter().map(|c| (c.view.criterion.id.clone(), c.effective_decision.clone())).collect::<BTreeMap<_, _>>(),
        });
        let audit = NewAuditEntry {
            actor: actor.name.clone(),
            action: "sign_off".into(),
            subject: format!("{run_id}/{patient_id}"),
            before_json: review.signoffs.last().map(|s| serde_json::json!({ "signed_off_by": s.reviewer, "at": s.created_at }).to_string()),
            after_json: Some(after.to_string()),
            reason: note.trim().to_string(),
        };
        let id = store.put_signoff(run_id, patient_id, &actor.name, note.trim(), &audit)?;
        // Each signed-off decision enters the exemplar bank.
        for c in &review.criteria {
            let Some(decision) = c.effective_decision.as_deref().and_then(Decision::parse) else { continue };
            let rationale = match c.overrides.last() {
                Some(o) => o.reason.clone(),
                None => c.view.result.as_ref().map(crate::exemplars::rationale_of).unwrap_or_default(),
            };
            crate::exemplars::record_review(
                store,
                &crate::exemplars::reviewed(
                    &review.trial_id,
                    run_id,
                    &c.view,
                    "signoff",
                    decision,
                    &rationale,
                    &actor.name,
                    patient_id,
                ),
            )?;
        }
        store
            .signoffs(run_id, Some(patient_id))?
            .into_iter()
            .find(|s| s.id == id)
            .ok_or_else(|| AppError::Setup(format!("sign-off {id} was written but cannot be read back")))
    })
}

/// The audit trail, oldest first.
pub fn audit(session: &Session) -> Result<Vec<AuditRecord>> {
    session.with_reader(|store| Ok(store.audit_log()?))
}

/// The audit trail as CSV.
pub fn audit_csv(entries: &[AuditRecord]) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(["id", "at", "actor", "action", "subject", "before", "after", "reason"]).map_err(csv_error)?;
    for e in entries {
        w.write_record([
            e.id.to_string().as_str(),
            &e.at,
            &e.actor,
            &e.action,
            &e.subject,
            e.before_json.as_deref().unwrap_or(""),
            e.after_json.as_deref().unwrap_or(""),
            &e.reason,
        ])
        .map_err(csv_error)?;
    }
    finish_csv(w)
}

/// One decision in an export: the model's, the override in effect (if
/// any) and the final one.
#[derive(Debug, Clone, Serialize)]
pub struct ExportRow {
    pub run_id: String,
    pub trial_id: String,
    pub patient_id: String,
    pub criterion_id: String,
    pub criterion_type: String,
    /// The model's (or check's) decision, as stored.
    pub model_decision: Option<String>,
    pub decided_by: String,
    pub override_decision: Option<String>,
    pub override_reason: Option<String>,
    pub override_by: Option<String>,
    pub override_at: Option<String>,
    /// The override's decision when there is one, else the model's.
    pub final_decision: Option<String>,
    pub signed_off_by: Option<String>,
    pub signed_off_at: Option<String>,
}

/// Every decision of a run with overrides applied and the original kept.
pub fn export(session: &Session, run_id: &str) -> Result<Vec<ExportRow>> {
    session.with_reader(|store| {
        let (set, report) = load_report(session.db_path(), store, run_id)?;
        let overrides = store.overrides(run_id, None)?;
        let latest = latest_overrides(&overrides);
        let signoffs = store.signoffs(run_id, None)?;
        let mut rows = Vec::new();
        for p in &report.patients {
            let signed = signoffs.iter().rev().find(|s| s.patient_id == p.patient_id);
            for c in &p.criteria {
                let o = latest.get(&(p.patient_id.clone(), c.criterion.id.clone()));
                let model_decision = c.result.as_ref().and_then(|r| r.decision()).map(|d| d.as_str().to_string());
                rows.push(ExportRow {
                    run_id: run_id.to_string(),
                    trial_id: set.trial_id.clone(),
                    patient_id: p.patient_id.clone(),
                    criterion_id: c.criterion.id.clone(),
                    criterion_type: c.criterion.criterion_type.as_str().to_string(),
                    final_decision: o.map(|o| o.decision.clone()).or_else(|| model_decision.clone()),
                    model_decision,
                    decided_by: c.decided_by.as_str().to_string(),
                    override_decision: o.map(|o| o.decision.clone()),
                    override_reason: o.map(|o| o.reason.clone()),
                    override_by: o.map(|o| o.reviewer.clone()),
                    override_at: o.map(|o| o.created_at.clone()),
                    signed_off_by: signed.map(|s| s.reviewer.clone()),
                    signed_off_at: signed.map(|s| s.created_at.clone()),
                });
            }
        }
        Ok(rows)
    })
}

/// Export rows as CSV (one header line, then one line per decision).
pub fn export_csv(rows: &[ExportRow]) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for row in rows {
        w.serialize(row).map_err(csv_error)?;
    }
    if rows.is_empty() {
        w.write_record([
            "run_id",
            "trial_id",
            "patient_id",
            "criterion_id",
            "criterion_type",
            "model_decision",
            "decided_by",
            "override_decision",
            "override_reason",
            "override_by",
            "override_at",
            "final_decision",
            "signed_off_by",
            "signed_off_at",
        ])
        .map_err(csv_error)?;
    }
    finish_csv(w)
}

fn csv_error(e: csv::Error) -> AppError {
    AppError::Setup(format!("cannot write CSV: {e}"))
}

fn finish_csv(w: csv::Writer<Vec<u8>>) -> Result<String> {
    let bytes = w.into_inner().map_err(|e| AppError::Setup(format!("cannot write CSV: {e}")))?;
    String::from_utf8(bytes).map_err(|e| AppError::Setup(format!("CSV is not UTF-8: {e}")))
}

/// The criteria set a stored screening run was made with.
pub fn stored_criteria(session: &Session, run_id: &str) -> Result<CriteriaSet> {
    session.with_reader(|store| {
        let Some(run) = store.match_run(run_id)? else {
            return Err(AppError::NotFound(format!(
                "run {run_id:?} is not in the store; list the screening runs to see which are"
            )));
        };
        run_criteria(run_id, &run.definition_json)
    })
}

/// The criteria set a run was made with (its definition holds it).
fn run_criteria(run_id: &str, definition_json: &str) -> Result<CriteriaSet> {
    let definition: serde_json::Value = serde_json::from_str(definition_json)?;
    let criteria = definition
        .get("criteria")
        .cloned()
        .ok_or_else(|| AppError::Setup(format!("run {run_id:?} has no criteria in its definition")))?;
    Ok(serde_json::from_value(criteria)?)
}

/// A run's report over every patient it holds, as last built, and what
/// it was built from.
struct CachedReport {
    db: PathBuf,
    run_id: String,
    definition_json: String,
    fingerprint: (i64, i64),
    report: Arc<TrialReport>,
}

/// Reports built lately. A report is built from the model's stored
/// decisions only (overrides and sign-offs are applied per request), so it
/// stays valid until the run's results change, which the fingerprint
/// (count and newest row of the run's results) tells.
static REPORTS: Mutex<Vec<CachedReport>> = Mutex::new(Vec::new());
const REPORTS_KEPT: usize = 8;
/// Held while a report is built.
static BUILDING: Mutex<()> = Mutex::new(());

/// The run's criteria and its report over every patient it holds.
fn load_report(db: &Path, store: &Store, run_id: &str) -> Result<(CriteriaSet, Arc<TrialReport>)> {
    let Some(run) = store.match_run(run_id)? else {
        return Err(AppError::NotFound(format!(
            "run {run_id:?} is not in the store; list the screening runs to see which are"
        )));
    };
    let set = run_criteria(run_id, &run.definition_json)?;
    let fingerprint = store.match_results_fingerprint(run_id)?;
    let cached = || {
        let cache = REPORTS.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .iter()
            .find(|c| {
                c.db == db
                    && c.run_id == run_id
                    && c.definition_json == run.definition_json
                    && c.fingerprint == fingerprint
            })
            .map(|hit| hit.report.clone())
    };
    if let Some(report) = cached() {
        return Ok((set, report));
    }
    // One build at a time: requests that missed together wait for the
    // first one's report instead of each building the same.
    let _building = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(report) = cached() {
        return Ok((set, report));
    }
    let patients: Vec<String> = stored_results(store, run_id)?.into_iter().map(|r| r.patient_id).collect();
    let report = Arc::new(trial_report(store, run_id, &set, &patients)?);
    let mut cache = REPORTS.lock().unwrap_or_else(|e| e.into_inner());
    cache.retain(|c| !(c.db == db && c.run_id == run_id));
    if cache.len() >= REPORTS_KEPT {
        cache.remove(0);
    }
    cache.push(CachedReport {
        db: db.to_path_buf(),
        run_id: run_id.to_string(),
        definition_json: run.definition_json,
        fingerprint,
        report: report.clone(),
    });
    Ok((set, report))
}

/// The latest override of each (patient, criterion).
fn latest_overrides(all: &[OverrideRecord]) -> BTreeMap<(String, String), &OverrideRecord> {
    let mut latest = BTreeMap::new();
    for o in all {
        latest.insert((o.patient_id.clone(), o.criterion_id.clone()), o);
    }
    latest
}

/// The patient's standing with each overridden criterion's decision
/// replaced by the reviewer's (rationale: the reviewer's reason).
fn verdict_with_overrides(
    set: &CriteriaSet,
    criteria: &[CriterionView],
    overrides: &BTreeMap<&str, &OverrideRecord>,
) -> TrialVerdict {
    let results: Vec<CriterionResult> = criteria
        .iter()
        .filter_map(|c| match (overrides.get(c.criterion.id.as_str()), &c.result) {
            (Some(o), original) => Decision::parse(&o.decision).map(|decision| CriterionResult {
                criterion_id: c.criterion.id.clone(),
                criterion_type: c.criterion.criterion_type,
                document_id: None,
                document_date: None,
                outcome: Determination::Assessed(Assessment {
                    medications_and_supplements: Vec::new(),
                    rationale: o.reason.clone(),
                    decision,
                    confidence: Confidence::High,
                    evidence: original
                        .as_ref()
                        .and_then(|r| r.outcome.assessment())
                        .map(|a| a.evidence.clone())
                        .unwrap_or_default(),
                }),
                unresolved_citations: Vec::new(),
            }),
            (None, original) => original.clone(),
        })
        .collect();
    trial_verdict(set, &results)
}
