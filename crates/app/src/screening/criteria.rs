//! Criteria as coordinators hold them: reading a trial in any accepted
//! form (an Evident criteria set, a ClinicalTrials.gov API v2 study, or
//! eligibility text pasted from a registry, from a file or standard input),
//! and the `criteria split` job, which writes an Evident set from text for
//! a person to edit (refine definitions, add checks), and the `criteria
//! compile` job, in which a model proposes checks, marked proposed until a
//! person reviews them.

use std::fmt;
use std::path::{Path, PathBuf};

use evident_llm::StructuredModel;
use evident_match::checks::compile::{propose_checks, Compiled};
use evident_match::{read_criteria, CriteriaForm, CriteriaSet, TrialNames};
use evident_store::ModelRunSummary;
use serde::Serialize;

use crate::error::{input_error, AppError, Result};
use crate::models::ModelChoice;
use crate::session::{lock, Session};

/// Where a trial's criteria come from: a file, or text the front end read
/// (standard input), named `origin` in errors.
#[derive(Debug, Clone)]
pub enum TrialSource {
    File(PathBuf),
    Text { origin: String, text: String },
}

impl TrialSource {
    /// The path `-` stands for text the caller has read from standard input.
    pub fn from_path(path: &Path, stdin: Option<&str>) -> TrialSource {
        match (path.to_str(), stdin) {
            (Some("-"), Some(text)) => TrialSource::Text { origin: "standard input".into(), text: text.to_string() },
            _ => TrialSource::File(path.to_path_buf()),
        }
    }
}

/// Reads a trial in any accepted form; `names` gives plain text its trial
/// id and title (a file's name gives the id otherwise).
pub fn read_trial(source: &TrialSource, names: &TrialNames) -> Result<(CriteriaSet, CriteriaForm)> {
    match source {
        TrialSource::File(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| AppError::Input(format!("cannot read trial file {}: {e}", path.display())))?;
            let stem = path.file_stem().and_then(|s| s.to_str());
            Ok(read_criteria(&text, &path.display().to_string(), stem, names)?)
        }
        TrialSource::Text { origin, text } => Ok(read_criteria(text, origin, None, names)?),
    }
}

/// Reads a trial file in any accepted form, named by its file.
pub fn load_trial(path: &Path) -> Result<CriteriaSet> {
    Ok(read_trial(&TrialSource::File(path.to_path_buf()), &TrialNames::default())?.0)
}

/// `criteria split`: criteria text to an Evident set.
#[derive(Debug, Clone)]
pub struct SplitRequest {
    pub source: TrialSource,
    pub names: TrialNames,
    /// Where to write the set (YAML); `None`: return it as text.
    pub out: Option<PathBuf>,
}

/// The set written, and where.
#[derive(Debug, Serialize)]
pub struct SplitReport {
    pub trial_id: String,
    pub form: CriteriaForm,
    pub inclusion: usize,
    pub exclusion: usize,
    /// The file written; `None` when the set is returned as text.
    pub written: Option<PathBuf>,
    pub set: CriteriaSet,
    #[serde(skip)]
    pub yaml: String,
}

fn origin(source: &TrialSource) -> String {
    match source {
        TrialSource::File(p) => p.display().to_string(),
        TrialSource::Text { origin, .. } => origin.clone(),
    }
}

/// Writes `yaml` to `out` through a temporary file; an existing file is
/// never overwritten, since it may hold a person's edits.
fn write_new(out: &Path, yaml: &str) -> Result<()> {
    if out.exists() {
        input_error!("{} already exists and may hold edits; remove it or write elsewhere", out.display());
    }
    let tmp = out.with_extension("yaml.tmp");
    std::fs::write(&tmp, yaml).map_err(|e| AppError::file(&tmp, e))?;
    std::fs::rename(&tmp, out).map_err(|e| AppError::file(out, e))?;
    Ok(())
}

/// Splits criteria into an Evident set and writes it.
pub fn split_criteria(request: &SplitRequest) -> Result<SplitReport> {
    let (set, form) = read_trial(&request.source, &request.names)?;
    let yaml = format!(
        "# Criteria of trial {} read from {} ({}) by `evident criteria split`.\n# Edit freely: give criteria clearer ids, a `refined` definition, or a `check`\n# over the structured record (see ARCHITECTURE.md, crates/match).\n{}",
        set.trial_id,
        origin(&request.source),
        form.as_str(),
        set.to_yaml()
    );
    if let Some(out) = &request.out {
        write_new(out, &yaml)?;
    }
    Ok(SplitReport {
        trial_id: set.trial_id.clone(),
        form,
        inclusion: set.inclusions().count(),
        exclusion: set.exclusions().count(),
        written: request.out.clone(),
        set,
        yaml,
    })
}

impl fmt::Display for SplitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.written {
            Some(path) => writeln!(
                f,
                "trial {} ({}): {} inclusion and {} exclusion criteria written to {}",
                self.trial_id,
                self.form.as_str(),
                self.inclusion,
                self.exclusion,
                path.display()
            ),
            None => f.write_str(&self.yaml),
        }
    }
}

/// `criteria compile`: a model proposes checks for a trial's criteria.
#[derive(Debug, Clone)]
pub struct CompileRequest {
    pub source: TrialSource,
    pub names: TrialNames,
    /// Where to write the set with its proposed checks; `None`: return it.
    pub out: Option<PathBuf>,
    /// The model that proposes (criteria are not patient data, so it may be remote).
    pub model: ModelChoice,
    pub use_cache: bool,
}

/// What the model proposed, per criterion, and what it cost.
#[derive(Debug, Serialize)]
pub struct CompileReport {
    pub trial_id: String,
    pub written: Option<PathBuf>,
    /// (criterion id, what became of it).
    pub criteria: Vec<(String, Compiled)>,
    pub usage: ModelRunSummary,
    pub set: CriteriaSet,
    #[serde(skip)]
    pub yaml: String,
}

/// Asks the model for a check per criterion without one, validates each
/// proposal, and writes the set with the valid ones marked proposed.
pub fn compile_criteria(session: &Session, request: &CompileRequest) -> Result<CompileReport> {
    let (set, _) = read_trial(&request.source, &request.names)?;
    if let Some(out) = &request.out {
        if out.exists() {
            input_error!("{} already exists and may hold edits; remove it or write elsewhere", out.display());
        }
    }
    let run_id = session.begin_model_run(&format!("criteria compile {}", set.trial_id))?;
    let model = session.chat_model(&request.model, &run_id, request.use_cache)?;
    let repair = session.config().llm.repair_policy();
    let prompts_dir = session.config().llm.prompts_dir.clone();
    let outcome = propose_checks(StructuredModel::recorded(&model), &set, repair, prompts_dir.as_deref(), &|_, _| {});
    let store = session.store()?;
    lock(&store).finish_model_run(&run_id)?;
    let outcome = outcome?;
    let usage = lock(&store).model_runs_summary(&run_id, "criteria compile", &[run_id.as_str()])?;
    let yaml = format!(
        "# Criteria of trial {} from {} with checks proposed by {} (`evident criteria compile`).\n# A proposed check decides nothing: read it against its criterion, fix it if\n# needed, and change its status to reviewed.\n{}",
        set.trial_id,
        origin(&request.source),
        usage.models.join(", "),
        outcome.set.to_yaml()
    );
    if let Some(out) = &request.out {
        write_new(out, &yaml)?;
    }
    Ok(CompileReport {
        trial_id: set.trial_id.clone(),
        written: request.out.clone(),
        criteria: outcome.criteria,
        usage,
        set: outcome.set,
        yaml,
    })
}

impl fmt::Display for CompileReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.written.is_none() {
            f.write_str(&self.yaml)?;
        }
        for (id, compiled) in &self.criteria {
            let what = match compiled {
                Compiled::Kept => "kept its check".to_string(),
                Compiled::Proposed => "check proposed (review it, then mark it reviewed)".to_string(),
                Compiled::None => "no check: the model says structured data cannot state it".to_string(),
                Compiled::Rejected { reason } => format!("no check: the proposal did not validate ({reason})"),
                Compiled::Failed { errors } => format!("no check: no valid answer ({})", errors.join("; ")),
            };
            writeln!(f, "  {id}: {what}")?;
        }
        if let Some(path) = &self.written {
            writeln!(f, "trial {}: written to {}", self.trial_id, path.display())?;
        }
        writeln!(f, "usage: {}", evident_match::report::usage_text(&self.usage))
    }
}
