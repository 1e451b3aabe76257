//! The model layer. Workflows talk to models only through the traits here
//! ([`ChatModel`], [`Embedder`]) and the canonical [`ChatRequest`];
//! providers translate that request for one kind of backend: an
//! OpenAI-compatible server ([`providers::openai_compat`]) or the embedded
//! llama.cpp model (`providers::llama`, feature `llama`). Around them:
//! structured output with repair ([`chat_json`]) and the log its pipeline
//! failures go to ([`PipelineFailureLog`]), the privacy guard
//! ([`privacy`]), prices ([`Price`]), the model registry and `pull`
//! ([`models`]), typed `[llm]` configuration ([`config`]), prompt templates
//! ([`prompts`]) and an OpenAI-compatible HTTP server over local models
//! ([`serve`]). This crate does not depend on the store: the model cache
//! and the audit trail are crate `evident-recorder`.

mod chat;
pub mod config;
mod embed;
mod error;
pub mod models;
mod pipeline_failure;
mod price;
pub mod privacy;
pub mod prompts;
pub mod providers;
mod request;
pub mod serve;
mod structured;

pub use chat::ChatModel;
pub use config::{LlmConfig, ModelConfig};
pub use embed::{EmbedError, Embedder};
pub use error::LlmError;
pub use pipeline_failure::{NoPipelineFailureLog, PipelineFailure, PipelineFailureLog};
pub use price::{Price, PriceTable};
pub use prompts::{PromptError, Prompts};
pub use request::{ChatRequest, ChatResponse, FinishReason, Message, Role};
pub use request::{LogprobRequest, TokenLogprob, TopLogprob, MAX_TOP_LOGPROBS};
pub use structured::{chat_json, RepairPolicy, SchemaValidator, StructuredAnswer, StructuredModel};
pub use structured::{chat_json_with_logprobs, StructuredLogprobs};
