//! The scripted fake model the control-flow tests share: it replays
//! answers in order, records every request, and is its own pipeline-failure
//! log (as a recording model is), so tests can check which model a failure
//! was logged against. Unit tests of control flow only; every workflow also
//! has a test against a real model (crates/cli/tests).

use std::sync::Mutex;

use evident_llm::{ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, PipelineFailure, PipelineFailureLog};

pub struct Scripted {
    answers: Mutex<Vec<String>>,
    seen: Mutex<Vec<ChatRequest>>,
    failures: Mutex<Vec<PipelineFailure>>,
    /// Prompt, completion and reused prompt tokens reported per call.
    usage: (u32, u32, u32),
    /// An exhausted script fails like a lost connection instead of panicking.
    fail_when_exhausted: bool,
}

impl Scripted {
    /// Replays `answers` in order, reporting no tokens; one call more than
    /// scripted panics.
    pub fn new<S: AsRef<str>>(answers: &[S]) -> Self {
        Scripted {
            answers: Mutex::new(answers.iter().rev().map(|s| s.as_ref().to_string()).collect()),
            seen: Mutex::new(vec![]),
            failures: Mutex::new(vec![]),
            usage: (0, 0, 0),
            fail_when_exhausted: false,
        }
    }

    /// Reports `prompt`, `completion` and `reused` prompt tokens for every call.
    pub fn with_usage(mut self, prompt: u32, completion: u32, reused: u32) -> Self {
        self.usage = (prompt, completion, reused);
        self
    }

    /// One call more than scripted fails with a backend error ("script
    /// exhausted"), as a killed run's lost connection would.
    pub fn failing_when_exhausted(mut self) -> Self {
        self.fail_when_exhausted = true;
        self
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
        let text = match self.answers.lock().unwrap().pop() {
            Some(text) => text,
            None if self.fail_when_exhausted => return Err(LlmError::Backend("script exhausted".into())),
            None => panic!("script exhausted: more calls than scripted"),
        };
        let (prompt_tokens, completion_tokens, reused_prompt_tokens) = self.usage;
        Ok(ChatResponse {
            text,
            prompt_tokens,
            completion_tokens,
            finish_reason: FinishReason::Stop,
            model: "scripted".into(),
            endpoint: "test".into(),
            reused_prompt_tokens,
            logprobs: None,
        })
    }
}

impl PipelineFailureLog for Scripted {
    fn record_pipeline_failure(&self, failure: &PipelineFailure) -> Result<(), LlmError> {
        self.failures.lock().unwrap().push(failure.clone());
        Ok(())
    }
}
