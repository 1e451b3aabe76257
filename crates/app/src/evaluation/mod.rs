//! The evaluations: a screening method scored against the physicians'
//! criterion-level labels of TrialGPT ([`trialgpt`]), and the n2c2 2018
//! Track 1 metric ([`n2c2`]); chart questions against a question bank
//! ([`chart`]). The first two screen through the same
//! [`Screening`](crate::screening::Screening) as the match job, so every
//! decision is stored and an interrupted evaluation resumes.

pub mod chart;
pub mod n2c2;
pub mod trialgpt;
mod trialgpt_markdown;

pub use n2c2::{evaluate_n2c2, N2c2Evaluation, N2c2Request};
pub use trialgpt::{evaluate_trialgpt, TrialgptEvaluation, TrialgptRequest};

use std::path::Path;

use crate::error::{AppError, Result};

/// Writes a whole file or nothing: the bytes go to a `.partial` file beside
/// it, which is then renamed into place (parent folders are created).
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| AppError::file(parent, e))?;
    }
    let partial = path.with_extension("partial");
    std::fs::write(&partial, bytes).map_err(|e| AppError::file(&partial, e))?;
    std::fs::rename(&partial, path).map_err(|e| AppError::file(path, e))
}
