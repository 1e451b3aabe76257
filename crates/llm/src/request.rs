//! The canonical request and response: one shape for every provider. A
//! provider translates a [`ChatRequest`] for its backend and fills a
//! [`ChatResponse`]; nothing else crosses the trait boundary.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Message { role: Role::System, content: content.into() }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Message { role: Role::User, content: content.into() }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Message { role: Role::Assistant, content: content.into() }
    }
}

/// What a workflow asks of a chat model. Every field takes part in the
/// cache key, so two requests that differ in anything are never confused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    /// 0.0 means greedy decoding (deterministic, and therefore cacheable).
    pub temperature: f32,
    pub max_tokens: u32,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub stop: Vec<String>,
    /// When set, the answer must be JSON valid against this schema. Providers
    /// that can constrain decoding do so; every answer is validated anyway.
    #[serde(default)]
    pub json_schema: Option<serde_json::Value>,
    /// Whether the messages carry patient text. Conservative default: true.
    /// Such requests reach only loopback endpoints unless remote use was
    /// allowed (see [`crate::privacy`]).
    #[serde(default = "default_true")]
    pub contains_patient_text: bool,
    /// When set, the answer also carries, for each generated token, its
    /// log-probability and the `top` most likely alternatives
    /// ([`ChatResponse::logprobs`]). Absent from the JSON when unset, so a
    /// request without it serialises, and therefore hashes into the
    /// recorder's cache key, exactly as before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<LogprobRequest>,
}

/// How many alternatives per generated token a request wants with their
/// log-probabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogprobRequest {
    /// The most likely tokens kept per position (OpenAI allows 0 to 20).
    pub top: u32,
}

/// The most alternatives a provider is asked for (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: u32 = 20;

fn default_true() -> bool {
    true
}

impl ChatRequest {
    /// A greedy request with the given messages, 512 tokens at most, marked
    /// as carrying patient text.
    pub fn new(messages: Vec<Message>) -> Self {
        ChatRequest {
            messages,
            temperature: 0.0,
            max_tokens: 512,
            seed: None,
            stop: Vec::new(),
            json_schema: None,
            contains_patient_text: true,
            logprobs: None,
        }
    }

    /// Asks for each generated token's log-probability and its `top` most
    /// likely alternatives (at most [`MAX_TOP_LOGPROBS`]).
    pub fn with_logprobs(mut self, top: u32) -> Self {
        self.logprobs = Some(LogprobRequest { top: top.min(MAX_TOP_LOGPROBS) });
        self
    }

    pub fn with_schema(mut self, schema: serde_json::Value) -> Self {
        self.json_schema = Some(schema);
        self
    }

    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Marks the request as carrying no patient text (e.g. criteria
    /// augmentation), which may then go to a remote model.
    pub fn without_patient_text(mut self) -> Self {
        self.contains_patient_text = false;
        self
    }

    /// Greedy decoding, or sampling with a fixed seed, gives the same answer
    /// for the same request; only those requests' complete answers are
    /// cached (see [`ChatResponse::is_complete`]).
    pub fn is_deterministic(&self) -> bool {
        self.temperature == 0.0 || self.seed.is_some()
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model ended its answer (end-of-generation token or stop string).
    Stop,
    /// The token limit was reached: `max_tokens`, or for the embedded
    /// model also the end of its context.
    Length,
}

/// A model's answer with what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub text: String,
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub finish_reason: FinishReason,
    /// The model that answered, as the backend names it.
    pub model: String,
    /// Where it ran: a URL, or `local:<path>` for the embedded model.
    pub endpoint: String,
    /// Prompt tokens whose KV cache was reused from the previous request
    /// (embedded model only; 0 elsewhere).
    #[serde(default)]
    pub reused_prompt_tokens: u32,
    /// One entry per generated token when the request asked for
    /// log-probabilities and the provider gave them; `None` otherwise
    /// (also for answers recorded before the field existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<TokenLogprob>>,
}

/// One generated token: its text, its natural-log probability under the
/// model (before any grammar constraint or sampling), and the most likely
/// alternatives at that position, most likely first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    pub token: String,
    pub logprob: f32,
    #[serde(default)]
    pub top: Vec<TopLogprob>,
}

/// One alternative at a position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    pub token: String,
    pub logprob: f32,
}

impl TokenLogprob {
    /// The log-probability of `token` at this position: the generated
    /// token's own, else the alternative's of that text, if listed.
    pub fn logprob_of(&self, token: &str) -> Option<f32> {
        if self.token == token {
            return Some(self.logprob);
        }
        self.top.iter().find(|t| t.token == token).map(|t| t.logprob)
    }
}

impl ChatResponse {
    /// Whether the model ended the answer itself. A cut-off answer is not
    /// cached: where it was cut also depends on the embedded model's
    /// context size, which is configuration, not part of the request.
    pub fn is_complete(&self) -> bool {
        self.finish_reason == FinishReason::Stop
    }
}

#[cfg(test)]
mod logprob_tests {
    use super::*;

    /// A request that does not ask for log-probabilities is written exactly
    /// as before the field existed (so its cache key is unchanged), and an
    /// answer recorded before then still reads.
    #[test]
    fn requests_without_logprobs_serialise_as_before() {
        let request = ChatRequest::new(vec![Message::user("q")]);
        let json = serde_json::to_string(&request).unwrap();
        assert_eq!(
            json,
            r#"{"messages":[{"role":"user","content":"q"}],"temperature":0.0,"max_tokens":512,"seed":null,"stop":[],"json_schema":null,"contains_patient_text":true}"#
        );
        let asked = request.clone().with_logprobs(50);
        assert_eq!(asked.logprobs, Some(LogprobRequest { top: MAX_TOP_LOGPROBS }));
        let back: ChatRequest = serde_json::from_str(&serde_json::to_string(&asked).unwrap()).unwrap();
        assert_eq!(back, asked);
        assert_ne!(serde_json::to_string(&asked).unwrap(), json);

        let old =
            r#"{"text":"1","prompt_tokens":3,"completion_tokens":1,"finish_reason":"stop","model":"m","endpoint":"e"}"#;
        let response: ChatResponse = serde_json::from_str(old).unwrap();
        assert!(response.logprobs.is_none());
        assert!(!serde_json::to_string(&response).unwrap().contains("logprobs"));
    }
}
