//! The `ChatModel` capability: a canonical request in, an answer out.
//! Nothing else: caching, accounting and recording live in wrappers
//! (crate `evident-recorder`), pipeline failures go to an explicit
//! [`crate::PipelineFailureLog`].

use crate::error::LlmError;
use crate::request::{ChatRequest, ChatResponse, Message};

/// A chat model. Blocking; callers get concurrency from threads, and each
/// provider bounds how many requests it runs at once.
pub trait ChatModel: Send + Sync {
    /// A stable id of the model (part of every cache key).
    fn model_id(&self) -> &str;

    /// Answers one request.
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError>;

    /// How many prompt tokens `messages` take in this model, as its own
    /// tokenizer counts them (the chat template applied), where the model
    /// can tell; `None` where it cannot (a remote endpoint, a fake), and a
    /// caller estimates.
    fn count_tokens(&self, messages: &[Message]) -> Option<usize> {
        let _ = messages;
        None
    }

    /// How many requests the model answers at once: callers with
    /// independent requests (a cohort judge's cases) send up to this many
    /// from as many threads. 1 (the default): one at a time.
    fn parallelism(&self) -> usize {
        1
    }
}

impl<T: ChatModel + ?Sized> ChatModel for std::sync::Arc<T> {
    fn model_id(&self) -> &str {
        (**self).model_id()
    }
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        (**self).chat(request)
    }
    fn count_tokens(&self, messages: &[Message]) -> Option<usize> {
        (**self).count_tokens(messages)
    }
    fn parallelism(&self) -> usize {
        (**self).parallelism()
    }
}
