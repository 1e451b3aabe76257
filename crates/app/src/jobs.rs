//! Background jobs for the review service: a screening or a chart
//! question started by a user, run by [`run`] (on a thread of the server
//! process; the same screening and chart jobs the command line calls), its
//! state, progress and result kept in the store's `jobs` table so that it
//! outlives the browser that started it. Starting a job writes its row and
//! a `job_start` audit entry in one transaction ([`start`]). A server that
//! starts calls [`recover`]: a job still queued or running then was cut
//! off and is marked interrupted; [`resume`] starts it again as a new job,
//! which picks up where it stopped (a screening's stored decisions are not
//! made twice).
//!
//! One job runs at a time in a process (the local models take every
//! core); the others wait queued. A job's files (a screening's report, a
//! chart answer's `answer.json`) go to `<store>-jobs/<job id>/` beside the
//! store.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use evident_match::TrialNames;
use evident_store::{JobRecord, NewAuditEntry, NewJob};
use serde::{Deserialize, Serialize};

use crate::error::{input_error, AppError, Result};
use crate::progress::{ProgressEvent, ProgressSink};
use crate::screening::{parse_method, screen_trials, ScreeningOptions, TrialsRequest};
use crate::session::Session;
use crate::users::{random_token, Actor};
use crate::ModelChoice;

/// What a job does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobRequest {
    Screening(ScreeningJob),
    Chart(ChartJob),
}

impl JobRequest {
    pub fn kind(&self) -> &'static str {
        match self {
            JobRequest::Screening(_) => "screening",
            JobRequest::Chart(_) => "chart",
        }
    }
}

/// Screen patients against one trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScreeningJob {
    /// The trial: the criteria of this stored screening run ...
    #[serde(default)]
    pub trial_from_run: Option<String>,
    /// ... or criteria text in any accepted form (an Evident criteria set,
    /// a ClinicalTrials.gov study record, eligibility text).
    #[serde(default)]
    pub criteria: Option<String>,
    /// Trial id and title for criteria given as eligibility text.
    #[serde(default)]
    pub trial_id: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// The patients; `None`: every patient in the store.
    #[serde(default)]
    pub patients: Option<Vec<String>>,
    /// The screening strategy (default `ican`).
    #[serde(default)]
    pub method: Option<String>,
    /// A known or configured model (default: the embedded one).
    #[serde(default)]
    pub model: Option<String>,
}

/// One question about one patient's record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChartJob {
    pub patient_id: String,
    pub question: String,
    /// The reference date, YYYY-MM-DD (default: the last document's date).
    #[serde(default)]
    pub as_of: Option<String>,
    /// agent (default), an ablation, baseline or full-context.
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    /// The answer schema the question expects (`yes_no`,
    /// `yes_no_unclear`, `date`, `category`, `score`, `date_list`, `interval_list`); stated to the
    /// model under the question, as `evident ask --answer-type` does.
    #[serde(default)]
    pub answer_type: Option<String>,
}

/// A job as the front ends show it.
#[derive(Debug, Clone, Serialize)]
pub struct JobView {
    pub id: String,
    pub kind: String,
    /// queued, running, finished, failed or interrupted.
    pub state: String,
    pub requested_by: String,
    pub request: serde_json::Value,
    /// The job this one resumes.
    pub resumes: Option<String>,
    pub progress_done: i64,
    pub progress_total: Option<i64>,
    pub message: String,
    /// A screening: `{"runs": [...], "report": ...}`; a chart question: the answer.
    pub result: Option<serde_json::Value>,
    pub error: Option<String>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub updated_at: String,
}

impl JobView {
    fn from_record(r: JobRecord) -> JobView {
        JobView {
            request: serde_json::from_str(&r.request_json).unwrap_or(serde_json::Value::Null),
            result: r.result_json.as_deref().and_then(|t| serde_json::from_str(t).ok()),
            id: r.id,
            kind: r.kind,
            state: r.state,
            requested_by: r.requested_by,
            resumes: r.resumes,
            progress_done: r.progress_done,
            progress_total: r.progress_total,
            message: r.message,
            error: r.error,
            created_at: r.created_at,
            started_at: r.started_at,
            finished_at: r.finished_at,
            updated_at: r.updated_at,
        }
    }

    /// Finished, failed or interrupted: nothing more will change.
    pub fn is_over(&self) -> bool {
        matches!(self.state.as_str(), "finished" | "failed" | "interrupted")
    }
}

/// Checks a request as far as can be done before running it (a bad
/// request is refused here, not recorded as a failed job).
fn check(session: &Session, request: &JobRequest) -> Result<()> {
    match request {
        JobRequest::Screening(s) => {
            match (&s.trial_from_run, &s.criteria) {
                (Some(run), None) => {
                    crate::review::stored_criteria(session, run)?;
                }
                (None, Some(text)) if !text.trim().is_empty() => {}
                _ => input_error!("a screening job needs the trial: either a stored run's criteria or criteria text"),
            }
            parse_method(s.method.as_deref().unwrap_or("ican"))?;
            if let Some(patients) = &s.patients {
                if patients.is_empty() {
                    input_error!("the patient list is empty; leave it out to screen every patient");
                }
                session.with_store(|store| {
                    for p in patients {
                        session.require_patient(store, p)?;
                    }
                    Ok(())
                })?;
            }
        }
        JobRequest::Chart(c) => {
            if c.question.trim().is_empty() {
                input_error!("the question is empty; ask something about the patient's record");
            }
            if let Some(t) = c.answer_type.as_deref().filter(|t| !t.trim().is_empty()) {
                crate::chart::parse_answer_type(t)?;
            }
            session.with_store(|store| session.require_patient(store, &c.patient_id))?;
        }
    }
    Ok(())
}

/// Records a queued job (with its audit entry) for `actor`, who must be a
/// reviewer or an admin. Run it with [`run`].
pub fn start(session: &Session, actor: &Actor, request: &JobRequest) -> Result<JobView> {
    start_job(session, actor, request, None)
}

fn start_job(session: &Session, actor: &Actor, request: &JobRequest, resumes: Option<&str>) -> Result<JobView> {
    if !actor.role.can_review() {
        input_error!("{} is a {}; starting a job needs the reviewer or admin role", actor.name, actor.role);
    }
    check(session, request)?;
    let id = format!("job-{}", &random_token()[..16]);
    let request_json = serde_json::to_string(request)?;
    let new = NewJob {
        id: id.clone(),
        kind: request.kind().to_string(),
        requested_by: actor.name.clone(),
        request_json: request_json.clone(),
        resumes: resumes.map(str::to_string),
    };
    let audit = NewAuditEntry {
        actor: actor.name.clone(),
        action: "job_start".into(),
        subject: format!("job/{id}"),
        before_json: None,
        after_json: Some(request_json),
        reason: resumes.map(|r| format!("resumes {r}")).unwrap_or_default(),
    };
    session.with_store(|store| Ok(store.put_job(&new, &audit)?))?;
    get(session, &id)
}

/// Starts an interrupted or failed job again as a new job with the same
/// request; what the old one stored is not done twice.
pub fn resume(session: &Session, actor: &Actor, job_id: &str) -> Result<JobView> {
    let old = get(session, job_id)?;
    if !matches!(old.state.as_str(), "interrupted" | "failed") {
        input_error!("job {job_id} is {}; only an interrupted or failed job can be resumed", old.state);
    }
    let request: JobRequest = serde_json::from_value(old.request.clone())?;
    start_job(session, actor, &request, Some(job_id))
}

/// One job.
pub fn get(session: &Session, job_id: &str) -> Result<JobView> {
    match session.with_store(|store| Ok(store.job(job_id)?))? {
        Some(r) => Ok(JobView::from_record(r)),
        None => Err(AppError::NotFound(format!("job {job_id:?} is not in the store"))),
    }
}

/// The latest jobs, newest first.
pub fn list(session: &Session, limit: usize) -> Result<Vec<JobView>> {
    let records = session.with_store(|store| Ok(store.jobs(limit)?))?;
    Ok(records.into_iter().map(JobView::from_record).collect())
}

/// Marks every job left queued or running by a previous server process
/// interrupted (call once when a server starts). Returns how many.
pub fn recover(session: &Session) -> Result<usize> {
    session.with_store(|store| {
        Ok(store.interrupt_unfinished_jobs("the server stopped before the job ended; resume it to continue")?)
    })
}

/// Where a job writes its files.
pub fn job_dir(session: &Session, job_id: &str) -> PathBuf {
    let db = session.db_path();
    let stem = db.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "evident".into());
    db.with_file_name(format!("{stem}-jobs")).join(job_id)
}

/// One job at a time per process.
static JOB_SLOT: Mutex<()> = Mutex::new(());

/// Runs a queued job to its end, recording progress and the outcome in the
/// store. The job's own failure is recorded (state failed, or interrupted
/// when what it did is stored and it can resume), not returned; an error
/// here means the store itself could not be written.
pub fn run(session: &Session, job_id: &str) -> Result<JobView> {
    let job = get(session, job_id)?;
    if job.state != "queued" {
        input_error!("job {job_id} is {}, not queued", job.state);
    }
    let request: JobRequest = serde_json::from_value(job.request.clone())?;
    let _slot = JOB_SLOT.lock().unwrap_or_else(|e| e.into_inner());
    session.with_store(|store| {
        store.start_job(job_id)?;
        Ok(store.job_progress(job_id, 0, None, "started")?)
    })?;
    let sink = JobProgress::new(session, job_id);
    let dir = job_dir(session, job_id);
    let outcome = match &request {
        JobRequest::Screening(s) => run_screening(session, s, dir, &sink),
        JobRequest::Chart(c) => run_chart(session, c, dir),
    };
    sink.flush();
    let (state, result, error) = match outcome {
        Ok(value) => ("finished", Some(serde_json::to_string(&value)?), None),
        Err(e @ AppError::Interrupted { .. }) => ("interrupted", None, Some(e.to_string())),
        Err(e) => ("failed", None, Some(e.to_string())),
    };
    session.with_store(|store| Ok(store.end_job(job_id, state, result.as_deref(), error.as_deref())?))?;
    get(session, job_id)
}

fn model_choice(name: &Option<String>) -> ModelChoice {
    match name {
        Some(n) if !n.trim().is_empty() => ModelChoice::named(n.trim()),
        _ => ModelChoice::default(),
    }
}

fn run_screening(
    session: &Session,
    job: &ScreeningJob,
    out: PathBuf,
    progress: &dyn ProgressSink,
) -> Result<serde_json::Value> {
    let text = match (&job.trial_from_run, &job.criteria) {
        (Some(run), _) => serde_json::to_string(&crate::review::stored_criteria(session, run)?)?,
        (None, Some(text)) => text.clone(),
        (None, None) => input_error!("a screening job needs the trial"),
    };
    let options = ScreeningOptions {
        method: parse_method(job.method.as_deref().unwrap_or("ican"))?,
        matching: model_choice(&job.model),
        ..ScreeningOptions::default()
    };
    let request = TrialsRequest {
        trials: vec![PathBuf::from("-")],
        stdin: Some(text),
        names: TrialNames { trial_id: job.trial_id.clone(), title: job.title.clone() },
        patients: job.patients.clone(),
        out: out.clone(),
        run_name: None,
        options,
    };
    let report = screen_trials(session, &request, progress)?;
    let runs: Vec<&str> = report.trials.iter().map(|t| t.run.run_id.as_str()).collect();
    Ok(serde_json::json!({ "runs": runs, "report": report.report }))
}

fn run_chart(session: &Session, job: &ChartJob, out: PathBuf) -> Result<serde_json::Value> {
    let request = crate::chart::AskRequest {
        patient_id: job.patient_id.clone(),
        question: job.question.clone(),
        answer_type: job.answer_type.clone().filter(|t| !t.trim().is_empty()),
        as_of: job.as_of.clone().filter(|a| !a.trim().is_empty()),
        method: job.method.clone().filter(|m| !m.trim().is_empty()).unwrap_or_else(|| "agent".into()),
        skills_dir: None,
        criteria_file: None,
        model: model_choice(&job.model),
        use_cache: true,
        temperature: None,
        seed: None,
        out_dir: Some(out),
    };
    let result = crate::chart::ask(session, &request)?;
    Ok(serde_json::to_value(&result)?)
}

/// Progress into the job's row, at most every quarter second. It never
/// waits for the store: when another thread holds it, this update is
/// skipped (the next one, or the final flush, writes it).
struct JobProgress<'a> {
    session: &'a Session,
    job_id: &'a str,
    state: Mutex<ProgressState>,
}

struct ProgressState {
    done: i64,
    total: Option<i64>,
    message: String,
    written: Option<Instant>,
}

impl<'a> JobProgress<'a> {
    fn new(session: &'a Session, job_id: &'a str) -> JobProgress<'a> {
        JobProgress {
            session,
            job_id,
            state: Mutex::new(ProgressState { done: 0, total: None, message: String::new(), written: None }),
        }
    }

    fn flush(&self) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let _ = self.session.with_store(|store| Ok(store.job_progress(self.job_id, s.done, s.total, &s.message)?));
    }
}

impl ProgressSink for JobProgress<'_> {
    fn report(&self, event: ProgressEvent) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut urgent = false;
        match event {
            ProgressEvent::ScreeningPlanned { total, done } => {
                s.total = Some(total as i64);
                s.done = done as i64;
                s.message = format!("{done} of {total} tasks stored before this job");
                urgent = true;
            }
            ProgressEvent::TaskDone => {
                s.done += 1;
                s.message = format!("{} of {} tasks", s.done, s.total.unwrap_or(0));
            }
            ProgressEvent::ScreeningStarted { label } => {
                s.message = format!("screening {label}");
                urgent = true;
            }
            ProgressEvent::EmbeddingNeeded { sections, .. } => s.message = format!("embedding {sections} sections"),
            ProgressEvent::Embedding { done, total } => s.message = format!("embedded {done} of {total} sections"),
            ProgressEvent::Augmenting { criterion, of } => {
                s.message = format!("augmenting criterion {criterion} of {of}")
            }
            ProgressEvent::ScreeningFinished => s.message = "writing the report".into(),
            _ => return,
        }
        let due = s.written.is_none_or(|t| t.elapsed() >= Duration::from_millis(250));
        if !(urgent || due) {
            return;
        }
        let Ok(store) = self.session.store() else { return };
        let Ok(guard) = store.try_lock() else { return };
        if guard.job_progress(self.job_id, s.done, s.total, &s.message).is_ok() {
            s.written = Some(Instant::now());
        }
    }
}

/// The chart question methods a job may name.
pub fn chart_methods() -> Vec<&'static str> {
    evident_chart::Method::ALL.iter().map(|m| m.as_str()).collect()
}

/// The answer types a chart job may state.
pub fn chart_answer_types() -> Vec<&'static str> {
    evident_chart::bank::AnswerType::ALL.iter().map(|t| t.as_str()).collect()
}

/// The screening strategies a job may name.
pub fn screening_methods() -> Vec<&'static str> {
    evident_match::batch::Method::ALL.iter().map(|m| m.as_str()).collect()
}
