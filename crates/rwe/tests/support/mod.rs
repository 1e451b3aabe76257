//! A scripted fake model for control-flow tests: it replays answers in
//! order, records every request, and is its own pipeline-failure log.
#![allow(dead_code)]

use std::sync::Mutex;

use evident_llm::{ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, PipelineFailure, PipelineFailureLog};

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
        // An exhausted script fails like a lost connection (a killed run).
        let text = self.answers.lock().unwrap().pop().ok_or(LlmError::Backend("script exhausted".into()))?;
        Ok(ChatResponse {
            text,
            prompt_tokens: 0,
            completion_tokens: 0,
            finish_reason: FinishReason::Stop,
            model: "scripted".into(),
            endpoint: "test".into(),
            reused_prompt_tokens: 0,
        })
    }
}

impl PipelineFailureLog for Scripted {
    fn record_pipeline_failure(&self, failure: &PipelineFailure) -> Result<(), LlmError> {
        self.failures.lock().unwrap().push(failure.clone());
        Ok(())
    }
}
