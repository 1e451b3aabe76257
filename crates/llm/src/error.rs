//! Why a model call failed, sorted by what the caller should do about it.

/// A model call failed. The variant tells the caller whether to retry,
/// give up, shrink the prompt or fix the setup.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// A transient failure (429, 5xx, connection reset); retrying may work.
    #[error("{endpoint}: transient failure: {message}; retried {attempts} times")]
    Transient { endpoint: String, message: String, attempts: u32 },
    /// The endpoint did not answer in time.
    #[error("{endpoint}: no answer within {timeout_ms} ms; raise timeout_s in [llm] or use a smaller model")]
    Timeout { endpoint: String, timeout_ms: u64 },
    /// The server refused the request as malformed; retrying will not help.
    #[error("{endpoint}: request refused with HTTP {status}: {body}")]
    BadRequest { endpoint: String, status: u16, body: String },
    /// The prompt does not fit the model's context window.
    #[error("prompt of {prompt_tokens} tokens does not fit the context of {context_size} tokens; raise context_size or shorten the prompt")]
    ContextOverflow { prompt_tokens: u32, context_size: u32 },
    /// Patient text was about to leave the machine.
    #[error("refusing to send patient text to non-loopback endpoint {endpoint}; allow remote endpoints for patient text (allow_remote = true in [llm]) if this is intended")]
    PrivacyRefused { endpoint: String },
    /// The model is not installed or not configured.
    #[error("model not available: {0}")]
    Unavailable(String),
    /// The JSON schema given with the request is itself invalid.
    #[error("invalid JSON schema: {0}")]
    InvalidSchema(String),
    /// The backend failed in a way retrying will not fix.
    #[error("model backend failed: {0}")]
    Backend(String),
    /// The audit trail (crate `evident-recorder`) failed; the call was not
    /// recorded.
    #[error("model-call store: {0}")]
    Store(String),
}

impl LlmError {
    /// Whether a retry (same or another endpoint) might succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, LlmError::Transient { .. } | LlmError::Timeout { .. })
    }
}
