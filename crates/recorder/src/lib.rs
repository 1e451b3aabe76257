//! The model cache and the audit trail, kept out of the model layer's core
//! so that `evident-llm` (and the embedder on top of it) never links the
//! store. [`RecordingModel`] wraps any `ChatModel`: a deterministic request
//! already answered in full by the same model is served from the store's
//! content-addressed cache (key: [`cache_key`]), and every call, hit or not,
//! is recorded under a model run with tokens, latency, cost, endpoint and the
//! full request and response. It is also the run's `PipelineFailureLog`.
//! [`export_trace`] writes a run's calls and failures as JSON, optionally
//! with note text redacted.
//!
//! - [`cache_key`]: which requests are the same request.
//! - [`recording_model`]: the caching and recording wrapper.
//! - [`trace_export`]: a run read back as one JSON value.

pub mod cache_key;
mod error;
pub mod recording_model;
pub mod trace_export;

pub use cache_key::cache_key;
pub use error::RecorderError;
pub use recording_model::{RecordingModel, SharedStore};
pub use trace_export::export_trace;
