//! `DbError`: what went wrong with a database, in words that say what to do.
//! Input errors (a URL Evident cannot read, a database that does not
//! connect, a MIMIC-IV folder with a missing or malformed table) are the
//! caller's to fix and the CLI maps them to exit code 2; `Refused`,
//! `Query` and `Timeout` are answers to an agent's statement, shown to the
//! agent so that it can correct itself.

use std::path::PathBuf;

/// Everything this crate can fail with.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The database URL is not one Evident reads.
    #[error("database URL {url:?}: {message}")]
    Url { url: String, message: String },
    /// The database could not be opened or reached.
    #[error("cannot connect to {url}: {message}")]
    Connect { url: String, message: String },
    /// A MIMIC-IV folder, one of its files or one of its rows is missing or
    /// malformed. `line` is the 1-based line of the (decompressed) CSV file,
    /// the header being line 1.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Input { path: PathBuf, line: Option<u64>, message: String },
    /// An agent's statement would write, change a setting or reach outside
    /// the database; nothing was run.
    #[error("refused: {message}")]
    Refused { message: String },
    /// An agent's statement failed in the database (syntax, an unknown
    /// table or column, a type error); the message is the database's.
    #[error("query failed: {message}")]
    Query { message: String },
    /// An agent's statement ran past its time limit and was cancelled.
    #[error("the query ran past its time limit of {limit_ms} ms and was cancelled; filter earlier or aggregate")]
    Timeout { limit_ms: u64 },
    /// The database refused an operation Evident itself issued (loading,
    /// creating or dropping a role); `context` says which.
    #[error("{context}: {message}")]
    Backend { context: String, message: String },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

impl DbError {
    /// True when the error is about the caller's input (the URL, the
    /// server it names, the MIMIC-IV folder): fix the input and retry.
    pub fn is_input(&self) -> bool {
        matches!(self, DbError::Url { .. } | DbError::Connect { .. } | DbError::Input { .. })
    }

    pub(crate) fn backend(context: impl Into<String>, error: impl std::fmt::Display) -> DbError {
        DbError::Backend { context: context.into(), message: error.to_string() }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> DbError {
        DbError::Io { path: path.into(), source }
    }
}
