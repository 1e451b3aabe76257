//! The one error type of the application layer. Each variant tells a front
//! end what the user can do: fix the request ([`AppError::Input`]), fix the
//! setup ([`AppError::Setup`]), run the same job again to resume
//! ([`AppError::Interrupted`]), or read the cause a library crate gave.
//! Messages name the input in the job's own terms, never a command-line
//! flag: the front end adds its own spelling if it wants to.

use std::path::PathBuf;

/// Why a job did not finish.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The request is wrong: an unknown patient, option value or input
    /// file. Fix the request and try again.
    #[error("{0}")]
    Input(String),
    /// What the request names is not stored: an unknown patient, run,
    /// document or job. (A kind of input error: a front end that does not
    /// tell them apart treats it as one; the server answers 404.)
    #[error("{0}")]
    NotFound(String),
    /// The configuration, a model or a tool is missing or wrong.
    #[error("{0}")]
    Setup(String),
    /// A long job stopped part way. What it finished is stored, so the
    /// same job started again resumes where it stopped.
    #[error("{what} stopped: {cause}. Decisions made so far are stored; run the same command again to resume.")]
    Interrupted { what: String, cause: Box<AppError> },
    /// A file could not be read or written. (The io error is part of
    /// the message, not a separate cause, so it is printed once.)
    #[error("{}: {cause}", path.display())]
    File { path: PathBuf, cause: std::io::Error },
    #[error(transparent)]
    Store(#[from] evident_store::StoreError),
    #[error(transparent)]
    Llm(#[from] evident_llm::LlmError),
    #[error(transparent)]
    Recorder(#[from] evident_recorder::RecorderError),
    #[error(transparent)]
    Prompt(#[from] evident_llm::PromptError),
    #[error(transparent)]
    Embed(#[from] evident_llm::EmbedError),
    #[error(transparent)]
    EmbedLoad(#[from] evident_embed::EmbedLoadError),
    #[error(transparent)]
    Ingest(#[from] evident_ingest::IngestError),
    #[error(transparent)]
    Retrieve(#[from] evident_retrieve::RetrieveError),
    #[error(transparent)]
    Match(#[from] evident_match::zero_shot::MatchError),
    #[error(transparent)]
    Criteria(#[from] evident_match::CriteriaError),
    #[error(transparent)]
    Batch(#[from] evident_match::batch::BatchError),
    #[error(transparent)]
    Eval(#[from] evident_eval::EvalError),
    #[error(transparent)]
    Stats(#[from] crate::stats::StatsJobError),
    #[error(transparent)]
    Chart(#[from] evident_chart::ChartError),
    #[error(transparent)]
    Db(#[from] evident_db::DbError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl AppError {
    /// The failed model call behind this error, if one is.
    pub fn llm_error(&self) -> Option<&evident_llm::LlmError> {
        use evident_match::batch::BatchError;
        use evident_match::zero_shot::MatchError;
        match self {
            AppError::Llm(e) => Some(e),
            AppError::Interrupted { cause, .. } => cause.llm_error(),
            AppError::Match(MatchError::Llm { source, .. })
            | AppError::Batch(BatchError::Match(MatchError::Llm { source, .. })) => Some(source),
            AppError::Chart(evident_chart::ChartError::Llm(e)) => Some(e),
            _ => None,
        }
    }

    /// Whether patient text was kept from a non-loopback endpoint.
    pub fn is_privacy_refusal(&self) -> bool {
        matches!(self.llm_error(), Some(evident_llm::LlmError::PrivacyRefused { .. }))
    }

    /// Reading or writing `path` failed.
    pub fn file(path: impl Into<PathBuf>, cause: std::io::Error) -> AppError {
        AppError::File { path: path.into(), cause }
    }
}

/// The result of a job.
pub type Result<T, E = AppError> = std::result::Result<T, E>;

/// Fails with [`AppError::Input`].
macro_rules! input_error {
    ($($arg:tt)*) => {
        return Err($crate::error::AppError::Input(format!($($arg)*)))
    };
}
pub(crate) use input_error;
