//! Why recording failed. A model call whose recording fails fails with it
//! (as `LlmError::Store`): an unrecorded call would be a hole in the audit
//! trail and a cache that silently stops working.

use evident_llm::LlmError;

/// Recording a call, or reading a run back, failed.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// A value to be hashed or stored could not be written as JSON. Never
    /// papered over with an empty string: every cache key would collapse
    /// into one.
    #[error("cannot write {what} as JSON: {source}")]
    Serialize {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// A stored row of a model run is not the JSON it should be.
    #[error("model run {run_id}: the stored {what} is not valid JSON ({source}); the store is damaged")]
    CorruptRecord {
        run_id: String,
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("no model run {0:?} in this store")]
    UnknownRun(String),
    #[error(transparent)]
    Store(#[from] evident_store::StoreError),
}

impl From<RecorderError> for LlmError {
    fn from(e: RecorderError) -> Self {
        LlmError::Store(e.to_string())
    }
}
