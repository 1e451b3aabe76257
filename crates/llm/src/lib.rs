//! The model layer. Workflows talk to models only through the traits here
//! ([`ChatModel`], [`Embedder`]) and the canonical [`ChatRequest`];
//! providers translate that request for one kind of backend: an
//! OpenAI-compatible server ([`providers::openai_compat`]) or the embedded
//! llama.cpp model (`providers::llama`, feature `llama`). Around them:
//! structured output with repair ([`chat_json`]), the privacy guard
//! ([`privacy`]), the model cache and accounting ([`recorder`]), the model
//! registry and `pull` ([`models`]), typed `[llm]` configuration
//! ([`config`]), prompt templates ([`prompts`]) and an OpenAI-compatible
//! HTTP server over local models ([`serve`]).

mod chat;
pub mod config;
mod embed;
mod error;
pub mod models;
pub mod privacy;
pub mod prompts;
pub mod providers;
pub mod recorder;
mod request;
pub mod serve;
mod structured;

pub use chat::ChatModel;
pub use config::{LlmConfig, ModelConfig};
pub use embed::{EmbedError, Embedder};
pub use error::LlmError;
pub use prompts::{PromptError, Prompts};
pub use recorder::{export_trace, Price, RecordingModel, SharedStore};
pub use request::{ChatRequest, ChatResponse, FinishReason, Message, Role};
pub use structured::{chat_json, PipelineFailure, RepairPolicy, SchemaValidator, StructuredOutcome};
