//! Providers: each translates the canonical request for one kind of backend.

#[cfg(feature = "llama")]
pub mod llama;
pub mod openai_compat;
