//! Criteria as coordinators hold them: reading a trial in any accepted
//! form (an Evident criteria set, a ClinicalTrials.gov API v2 study, or
//! eligibility text pasted from a registry, from a file or standard input),
//! and the `criteria split` job, which writes an Evident set from text for
//! a person to edit (refine definitions, add checks).

use std::fmt;
use std::path::{Path, PathBuf};

use evident_match::{read_criteria, CriteriaForm, CriteriaSet, TrialNames};
use serde::Serialize;

use crate::error::{input_error, AppError, Result};

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

/// Splits criteria into an Evident set and writes it (through a temporary
/// file; an existing file is never overwritten, since it may hold edits).
pub fn split_criteria(request: &SplitRequest) -> Result<SplitReport> {
    let (set, form) = read_trial(&request.source, &request.names)?;
    let origin = match &request.source {
        TrialSource::File(p) => p.display().to_string(),
        TrialSource::Text { origin, .. } => origin.clone(),
    };
    let yaml = format!(
        "# Criteria of trial {} read from {origin} ({}) by `evident criteria split`.\n# Edit freely: give criteria clearer ids, a `refined` definition, or a `check`\n# over the structured record (see ARCHITECTURE.md, crates/match).\n{}",
        set.trial_id,
        form.as_str(),
        set.to_yaml()
    );
    if let Some(out) = &request.out {
        if out.exists() {
            input_error!("{} already exists and may hold edits; remove it or write elsewhere", out.display());
        }
        let tmp = out.with_extension("yaml.tmp");
        std::fs::write(&tmp, &yaml).map_err(|e| AppError::file(&tmp, e))?;
        std::fs::rename(&tmp, out).map_err(|e| AppError::file(out, e))?;
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
