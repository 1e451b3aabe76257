//! What the matcher tests share: the scripted fake model
//! (`evident_testdata::Scripted`) and model responses built by hand.
//! Unit tests of control flow only; every workflow also has a test against
//! a real model (crates/cli/tests).
#![allow(dead_code)]

use evident_llm::{ChatResponse, FinishReason};

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
        logprobs: None,
    }
}

#[allow(unused_imports)] // not every test binary scripts a model
pub use evident_testdata::Scripted;
