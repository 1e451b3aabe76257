//! A structured call whose answer never validated ([`PipelineFailure`]),
//! and where such failures are recorded ([`PipelineFailureLog`]). This is
//! a capability of its own, not part of [`crate::ChatModel`]: a structured
//! call is given the log explicitly, so a model that keeps no audit trail
//! needs no hook, and a failure cannot silently miss the run it belongs to.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::LlmError;
use crate::request::ChatRequest;

/// A call whose answer never validated. Recorded, never coerced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineFailure {
    pub model: String,
    /// The last answer, exactly as the model wrote it.
    pub raw_text: String,
    /// What was wrong with the last answer.
    pub errors: Vec<String>,
    /// Answers requested in all (first + repairs).
    pub attempts: u32,
    pub request: ChatRequest,
}

/// Where [`crate::chat_json`] records an answer that stayed invalid after
/// the last repair attempt. The recorder's `RecordingModel` stores it in
/// its model run (`pipeline_failures`), next to the calls that produced it.
pub trait PipelineFailureLog: Send + Sync {
    /// Records `failure`; an error means it was not recorded, and the
    /// structured call that produced it fails with that error.
    fn record_pipeline_failure(&self, failure: &PipelineFailure) -> Result<(), LlmError>;
}

/// Records nothing: for callers that keep no audit trail and handle the
/// failure [`crate::chat_json`] returns themselves.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPipelineFailureLog;

impl PipelineFailureLog for NoPipelineFailureLog {
    fn record_pipeline_failure(&self, _failure: &PipelineFailure) -> Result<(), LlmError> {
        Ok(())
    }
}

impl<T: PipelineFailureLog + ?Sized> PipelineFailureLog for Arc<T> {
    fn record_pipeline_failure(&self, failure: &PipelineFailure) -> Result<(), LlmError> {
        (**self).record_pipeline_failure(failure)
    }
}
