//! The scripted fake model the matcher tests share: it replays answers in
//! order, records every request, and is its own pipeline-failure log (as a
//! recording model is), so tests can check which model a failure was
//! logged against. Unit tests of control flow only; every workflow also has
//! a test against a real model (crates/cli/tests).
#![allow(dead_code)]

use std::sync::Mutex;

use evident_llm::{ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, PipelineFailure, PipelineFailureLog};

/// A response as a model would give it, with the given text.
pub fn response(text: String, prompt_tokens: u32, completion_tokens: u32, model: &str) -> ChatResponse {
    ChatResponse {
        text,
        prompt_tokens,
        completion_tokens,
        finish_reason: FinishReason::Stop,
        model: model.into(),
        endpoint: "test".into(),
        reused_prompt_tokens: 0,
    }
}

/// Replays scripted answers in order, records every request and every
/// pipeline failure logged against it.
pub struct Scripted {
    answers: Mutex<Vec<String>>,
    seen: Mutex<Vec<ChatRequest>>,
    failures: Mutex<Vec<PipelineFailure>>,
}

impl Scripted {
    pub fn new<S: AsRef<str>>(answers: &[S]) -> Self {
        Scripted {
            answers: Mutex::new(answers.iter().rev().map(|s| s.as_ref().to_string()).collect()),
            seen: Mutex::new(vec![]),
            failures: Mutex::new(vec![]),
        }
    }
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.seen.lock().unwrap().clone()
    }
    pub fn exhausted(&self) -> bool {
        self.answers.lock().unwrap().is_empty()
    }
    /// The pipeline failures logged against this model, in order.
    pub fn failures(&self) -> Vec<PipelineFailure> {
        self.failures.lock().unwrap().clone()
    }
}

impl ChatModel for Scripted {
    fn model_id(&self) -> &str {
        "scripted"
    }
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.seen.lock().unwrap().push(request.clone());
        let text = self.answers.lock().unwrap().pop().expect("script exhausted: more calls than scripted");
        Ok(response(text, 0, 0, "scripted"))
    }
}

impl PipelineFailureLog for Scripted {
    fn record_pipeline_failure(&self, failure: &PipelineFailure) -> Result<(), LlmError> {
        self.failures.lock().unwrap().push(failure.clone());
        Ok(())
    }
}
