//! The `ChatModel` capability: a canonical request in, an answer out.

use crate::error::LlmError;
use crate::request::{ChatRequest, ChatResponse};
use crate::structured::PipelineFailure;

/// A chat model. Blocking; callers get concurrency from threads, and each
/// provider bounds how many requests it runs at once.
pub trait ChatModel: Send + Sync {
    /// A stable id of the model (part of every cache key).
    fn model_id(&self) -> &str;

    /// Answers one request.
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;

    /// Called by [`crate::chat_json`] when an answer stayed invalid after the
    /// last repair attempt. Recording wrappers store it; others ignore it.
    fn record_pipeline_failure(&self, _failure: &PipelineFailure) {}
}

impl<T: ChatModel + ?Sized> ChatModel for std::sync::Arc<T> {
    fn model_id(&self) -> &str {
        (**self).model_id()
    }
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        (**self).chat(request)
    }
    fn record_pipeline_failure(&self, failure: &PipelineFailure) {
        (**self).record_pipeline_failure(failure)
    }
}
