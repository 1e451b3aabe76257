//! The match job: screen chosen patients against one or more trials, then
//! build the report from what the runs stored and write it (report.html,
//! decisions.json, decisions.csv) through temporary files, so a reader
//! never sees half a report.

use std::fmt;
use std::path::{Path, PathBuf};

use evident_match::batch::BatchSummary;
use evident_match::report::{self, checks_text, eligibility_text, MatchReport};
use evident_match::{CriteriaSet, Eligibility, LabelCounts, TrialNames};
use evident_store::ModelRunSummary;
use serde::Serialize;

use super::criteria::{read_trial, TrialSource};
use super::{stopped, Screening, ScreeningOptions};
use crate::error::{input_error, AppError, Result};
use crate::progress::ProgressSink;
use crate::session::{lock, Session};

/// One screening job.
#[derive(Debug, Clone)]
pub struct TrialsRequest {
    /// Criteria files in any accepted form (Evident set, ClinicalTrials.gov
    /// study, eligibility text); `-` is `stdin`. Several trials rank trials
    /// for each patient.
    pub trials: Vec<PathBuf>,
    /// The text `-` stands for, read by the front end.
    pub stdin: Option<String>,
    /// Trial id and title for a trial given as text (one trial only).
    pub names: TrialNames,
    /// The patients to screen; `None`: every patient in the store.
    pub patients: Option<Vec<String>>,
    /// The report folder.
    pub out: PathBuf,
    /// The run's name (default: derived from its definition).
    pub run_name: Option<String>,
    pub options: ScreeningOptions,
}

/// One patient's line in the summary.
#[derive(Debug, Serialize)]
pub struct PatientLine {
    pub patient_id: String,
    pub eligibility: Eligibility,
    pub matching_score: f64,
    pub counts: LabelCounts,
}

/// One trial's line in the summary.
#[derive(Debug, Serialize)]
pub struct TrialLine {
    pub trial_id: String,
    /// What this job did in the trial's run.
    pub run: BatchSummary,
    pub usage: Option<ModelRunSummary>,
    pub patients: Vec<PatientLine>,
    /// The label correction table the decisions went through, if any.
    pub label_correction: Option<report::CorrectionUse>,
    /// The threshold table on P(MET) the decisions went through, if any.
    pub thresholds: Option<report::CorrectionUse>,
    #[serde(skip)]
    pub method: String,
}

/// What a screening job did and where its report is.
#[derive(Debug, Serialize)]
pub struct ScreeningReport {
    /// `report.html` in the report folder.
    pub report: PathBuf,
    pub trials: Vec<TrialLine>,
    /// The whole report as written.
    #[serde(skip)]
    pub full: MatchReport,
}

/// Screens the request's patients against each trial (resuming stored
/// decisions) and writes the report.
pub fn screen_trials(
    session: &Session,
    request: &TrialsRequest,
    progress: &dyn ProgressSink,
) -> Result<ScreeningReport> {
    if request.trials.len() > 1 && request.names != TrialNames::default() {
        input_error!("a trial id or title can be given for one trial only, not for {}", request.trials.len());
    }
    let trials: Vec<CriteriaSet> = request
        .trials
        .iter()
        .map(|p| Ok(read_trial(&TrialSource::from_path(p, request.stdin.as_deref()), &request.names)?.0))
        .collect::<Result<_>>()?;
    let store = session.store()?;
    let patients: Vec<String> = match &request.patients {
        None => lock(&store).patients()?.into_iter().map(|p| p.patient.id).collect(),
        Some(ids) => ids.clone(),
    };
    if patients.is_empty() {
        input_error!("no patients to screen: the store {} is empty; ingest records first", session.db_path().display());
    }
    for p in &patients {
        session.require_patient(&lock(&store), p)?;
    }
    let label = format!("match {}", request.options.method.as_str());
    let screening = Screening::open(session, &request.options, &patients, &label, progress)?;
    let mut outcomes: Vec<(CriteriaSet, BatchSummary)> = Vec::new();
    let mut failure = None;
    for (i, set) in trials.iter().enumerate() {
        let run_name =
            request
                .run_name
                .as_ref()
                .map(|r| if trials.len() > 1 { format!("{r}-{}", set.trial_id) } else { r.clone() });
        let shown = format!("{} ({}/{})", set.trial_id, i + 1, trials.len());
        match screening.screen(set, &patients, run_name, &shown, progress) {
            Ok(outcome) => outcomes.push((set.clone(), outcome)),
            Err(e) => {
                failure = Some(stopped(&format!("screening for trial {}", set.trial_id), e));
                break;
            }
        }
    }
    screening.finish()?;
    if let Some(e) = failure {
        return Err(e);
    }
    let st = lock(&store);
    let mut trial_reports = Vec::new();
    for (set, outcome) in &outcomes {
        trial_reports.push(report::trial_report(&st, &outcome.run_id, set, &patients)?);
    }
    drop(st);
    for (t, (_, outcome)) in trial_reports.iter_mut().zip(&outcomes) {
        if outcome.check_decisions > 0 {
            t.model_tasks_saved = Some(outcome.model_tasks_saved);
        }
    }
    let full = report::match_report(trial_reports);
    write_report(&full, &request.out)?;
    let trials = full
        .trials
        .iter()
        .zip(outcomes)
        .map(|(t, (_, run))| TrialLine {
            trial_id: t.trial.trial_id.clone(),
            run,
            usage: t.usage.clone(),
            label_correction: t.label_correction.clone(),
            thresholds: t.thresholds.clone(),
            method: t.method.clone(),
            patients: t
                .patients
                .iter()
                .map(|p| PatientLine {
                    patient_id: p.patient_id.clone(),
                    eligibility: p.verdict.eligibility,
                    matching_score: p.verdict.matching_score,
                    counts: p.verdict.counts.clone(),
                })
                .collect(),
        })
        .collect();
    Ok(ScreeningReport { report: request.out.join("report.html"), trials, full })
}

/// Writes report.html, decisions.json and decisions.csv into `dir`, each
/// through a temporary file so a reader never sees half a report.
pub fn write_report(report: &MatchReport, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| AppError::file(dir, e))?;
    let write = |name: &str, text: String| -> Result<()> {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).map_err(|e| AppError::file(&tmp, e))?;
        std::fs::rename(&tmp, dir.join(name)).map_err(|e| AppError::file(dir.join(name), e))?;
        Ok(())
    };
    write("report.html", report::to_html(report))?;
    write("decisions.json", serde_json::to_string_pretty(report)?)?;
    write("decisions.csv", report::to_csv(report))?;
    Ok(())
}

impl fmt::Display for ScreeningReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for t in &self.trials {
            let o = &t.run;
            writeln!(
                f,
                "trial {} ({}), run {}: {} patients, {} tasks ({} run now, {} from earlier invocations)",
                t.trial_id, t.method, o.run_id, o.patients, o.tasks_total, o.tasks_run, o.tasks_skipped
            )?;
            for p in &t.patients {
                let c = &p.counts;
                writeln!(
                    f,
                    "  {:<16} {:<13} score {:>5.2}  inclusion {}/{}/{} exclusion {}/{}/{} (met/not met/unknown){}{}",
                    p.patient_id,
                    eligibility_text(p.eligibility),
                    p.matching_score,
                    c.included,
                    c.not_included,
                    c.inclusion_unknown,
                    c.excluded,
                    c.not_excluded,
                    c.exclusion_unknown,
                    if c.failed > 0 { format!(", {} failed", c.failed) } else { String::new() },
                    if c.flagged > 0 { format!(", {} flagged citations", c.flagged) } else { String::new() },
                )?;
            }
            if let Some(u) = &t.usage {
                writeln!(f, "  usage: {}", report::usage_text(u))?;
            }
            if o.check_decisions > 0 {
                writeln!(
                    f,
                    "  checks ({}): {}",
                    o.checks.as_str(),
                    checks_text(o.check_decisions, Some(o.model_tasks_saved))
                )?;
            }
            if let Some(c) = &t.label_correction {
                writeln!(
                    f,
                    "  label correction applied from {}: {} of {} model decisions relabelled (the report shows the model's label beside each)",
                    c.table, c.relabelled, c.decisions
                )?;
            }
            if let Some(c) = &t.thresholds {
                writeln!(
                    f,
                    "  threshold on P(MET) applied from {}: {} of {} model decisions relabelled (the report shows the model's label, P(MET) and the threshold beside each)",
                    c.table, c.relabelled, c.decisions
                )?;
            }
        }
        writeln!(f, "report: {}", self.report.display())
    }
}
