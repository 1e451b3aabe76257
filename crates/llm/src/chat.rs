//! The `ChatModel` capability: a canonical request in, an answer out.
//! Nothing else: caching, accounting and recording live in wrappers
//! (crate `evident-recorder`), pipeline failures go to an explicit
//! [`crate::PipelineFailureLog`].

use crate::error::LlmError;
use crate::request::{ChatRequest, ChatResponse};

/// A chat model. Blocking; callers get concurrency from threads, and each
/// provider bounds how many requests it runs at once.
pub trait ChatModel: Send + Sync {
    /// A stable id of the model (part of every cache key).
    fn model_id(&self) -> &str;

    /// Answers one request.
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;
}

impl<T: ChatModel + ?Sized> ChatModel for std::sync::Arc<T> {
    fn model_id(&self) -> &str {
        (**self).model_id()
    }
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        (**self).chat(request)
    }
}
