//! The OpenAI-compatible provider: chat completions over HTTP for vLLM,
//! Ollama, the llama.cpp server, OpenAI, Azure OpenAI and `evident llm
//! serve`. Several endpoints can serve one logical model; requests are
//! spread across them round-robin, and a retry moves on to the next one.
//! Retries use exponential backoff with jitter on 429, 5xx and connection
//! errors and honour `Retry-After`. At most `max_concurrency` requests are
//! in flight at once, whatever the number of calling threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::chat::ChatModel;
use crate::error::LlmError;
use crate::privacy;
use crate::request::{ChatRequest, ChatResponse, FinishReason};
use crate::request::{TokenLogprob, TopLogprob};

/// How to reach an OpenAI-compatible model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenAiConfig {
    /// Base URLs, e.g. `http://127.0.0.1:8000/v1` (`/chat/completions` is appended).
    pub endpoints: Vec<String>,
    /// The model name the server expects.
    pub model: String,
    /// Name of the environment variable holding the API key, if any.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Header carrying the key: `Authorization` (as `Bearer KEY`, default)
    /// or e.g. `api-key` for Azure OpenAI.
    #[serde(default)]
    pub api_key_header: Option<String>,
    /// Query string appended to every URL (Azure: `api-version=2024-10-21`).
    #[serde(default)]
    pub query: Option<String>,
    #[serde(default = "default_timeout_s")]
    pub timeout_s: f64,
    /// Retries after the first attempt.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    #[serde(default = "default_backoff_initial_ms")]
    pub backoff_initial_ms: u64,
    #[serde(default = "default_backoff_max_ms")]
    pub backoff_max_ms: u64,
    /// Requests in flight at once, over all endpoints.
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: usize,
    /// Send `response_format: json_schema` when a request has a schema.
    #[serde(default = "default_true")]
    pub json_schema_response_format: bool,
    /// Allow patient text to reach non-loopback endpoints.
    #[serde(default)]
    pub allow_remote: bool,
}

fn default_timeout_s() -> f64 {
    120.0
}
fn default_max_retries() -> u32 {
    4
}
fn default_backoff_initial_ms() -> u64 {
    500
}
fn default_backoff_max_ms() -> u64 {
    20_000
}
fn default_max_concurrency() -> usize {
    4
}
fn default_true() -> bool {
    true
}

impl OpenAiConfig {
    pub fn new(endpoint: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            endpoints: vec![endpoint.into()],
            model: model.into(),
            api_key_env: None,
            api_key_header: None,
            query: None,
            timeout_s: default_timeout_s(),
            max_retries: default_max_retries(),
            backoff_initial_ms: default_backoff_initial_ms(),
            backoff_max_ms: default_backoff_max_ms(),
            max_concurrency: default_max_concurrency(),
            json_schema_response_format: true,
            allow_remote: false,
        }
    }
}

/// A counting semaphore (std only).
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

struct SlotGuard<'a>(&'a Slots);

impl Slots {
    fn acquire(&self) -> SlotGuard<'_> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        SlotGuard(self)
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// A chat model behind one or more OpenAI-compatible endpoints.
pub struct OpenAiChatModel {
    config: OpenAiConfig,
    id: String,
    agent: ureq::Agent,
    api_key: Option<String>,
    next_endpoint: AtomicUsize,
    slots: Slots,
    jitter_state: Mutex<u64>,
}

/// What one HTTP attempt came to.
enum Attempt {
    Done(ChatResponse),
    Retry { message: String, retry_after: Option<Duration> },
    Fail(LlmError),
}

impl OpenAiChatModel {
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        if config.endpoints.is_empty() {
            return Err(LlmError::Unavailable(format!("model {}: no endpoints configured", config.model)));
        }
        let api_key = match &config.api_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                LlmError::Unavailable(format!(
                    "model {}: environment variable {var} (api_key_env) is not set",
                    config.model
                ))
            })?),
            None => None,
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs_f64(config.timeout_s.max(0.001))))
            .http_status_as_error(false)
            .build()
            .into();
        let id = format!("openai:{}", config.model);
        let slots = Slots { free: Mutex::new(config.max_concurrency.max(1)), freed: Condvar::new() };
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            | 1;
        Ok(OpenAiChatModel {
            config,
            id,
            agent,
            api_key,
            next_endpoint: AtomicUsize::new(0),
            slots,
            jitter_state: Mutex::new(seed),
        })
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let mut body = json!({
            "model": self.config.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        });
        if let Some(seed) = request.seed {
            body["seed"] = json!(seed);
        }
        if !request.stop.is_empty() {
            body["stop"] = json!(request.stop);
        }
        if let Some(want) = request.logprobs {
            body["logprobs"] = json!(true);
            body["top_logprobs"] = json!(want.top);
        }
        if let (Some(schema), true) = (&request.json_schema, self.config.json_schema_response_format) {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": true}
            });
        }
        body
    }

    fn url(&self, base: &str) -> String {
        let mut url = format!("{}/chat/completions", base.trim_end_matches('/'));
        if let Some(query) = &self.config.query {
            url.push('?');
            url.push_str(query);
        }
        url
    }

    /// A factor in [0.5, 1.0) (xorshift; no need for a crypto RNG here).
    fn jitter(&self) -> f64 {
        let mut state = self.jitter_state.lock().unwrap_or_else(|e| e.into_inner());
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        0.5 + (*state >> 11) as f64 / (1u64 << 53) as f64 * 0.5
    }

    fn backoff(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self.config.backoff_initial_ms.saturating_mul(1u64 << retry.min(20));
        let capped = exp.min(self.config.backoff_max_ms);
        let wait = Duration::from_millis((capped as f64 * self.jitter()) as u64);
        match retry_after {
            // The server said when; never wait less than that.
            Some(after) => after.max(wait),
            None => wait,
        }
    }

    fn attempt(&self, base: &str, body: &Value) -> Attempt {
        let url = self.url(base);
        let mut http = self.agent.post(&url).header("Content-Type", "application/json");
        if let Some(key) = &self.api_key {
            http = match self.config.api_key_header.as_deref() {
                None | Some("Authorization") => http.header("Authorization", &format!("Bearer {key}")),
                Some(header) => http.header(header, key),
            };
        }
        let mut response = match http.send_json(body) {
            Ok(r) => r,
            Err(ureq::Error::Timeout(_)) => {
                return Attempt::Fail(LlmError::Timeout {
                    endpoint: base.to_string(),
                    timeout_ms: (self.config.timeout_s * 1000.0) as u64,
                })
            }
            Err(
                e @ (ureq::Error::Io(_)
                | ureq::Error::ConnectionFailed
                | ureq::Error::HostNotFound
                | ureq::Error::Protocol(_)),
            ) => return Attempt::Retry { message: format!("connection error: {e}"), retry_after: None },
            Err(e) => return Attempt::Fail(LlmError::Backend(format!("{url}: {e}"))),
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|s| Duration::from_secs_f64(s.clamp(0.0, 300.0)));
        let text = match response.body_mut().with_config().limit(64 << 20).read_to_string() {
            Ok(t) => t,
            Err(ureq::Error::Timeout(_)) => {
                return Attempt::Fail(LlmError::Timeout {
                    endpoint: base.to_string(),
                    timeout_ms: (self.config.timeout_s * 1000.0) as u64,
                })
            }
            Err(e) => return Attempt::Retry { message: format!("reading the answer: {e}"), retry_after: None },
        };
        if status == 429 || status >= 500 {
            return Attempt::Retry { message: format!("HTTP {status}: {}", truncate(&text, 300)), retry_after };
        }
        if !(200..300).contains(&status) {
            return Attempt::Fail(LlmError::BadRequest {
                endpoint: base.to_string(),
                status,
                body: truncate(&text, 1000),
            });
        }
        match parse_completion(&text, base) {
            Ok(r) => Attempt::Done(r),
            Err(e) => Attempt::Fail(e),
        }
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Reads an OpenAI chat-completions answer.
pub fn parse_completion(text: &str, endpoint: &str) -> Result<ChatResponse, LlmError> {
    let bad = |what: &str| {
        LlmError::Backend(format!("{endpoint}: answer is not a chat completion ({what}): {}", truncate(text, 300)))
    };
    let value: Value = serde_json::from_str(text).map_err(|_| bad("not JSON"))?;
    let choice = value.get("choices").and_then(|c| c.get(0)).ok_or_else(|| bad("no choices"))?;
    let content = choice
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no message content"))?;
    let finish_reason = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("length") => FinishReason::Length,
        _ => FinishReason::Stop,
    };
    let usage = value.get("usage");
    let tokens = |key: &str| usage.and_then(|u| u.get(key)).and_then(Value::as_u64).unwrap_or(0) as u32;
    Ok(ChatResponse {
        text: content.to_string(),
        prompt_tokens: tokens("prompt_tokens"),
        completion_tokens: tokens("completion_tokens"),
        finish_reason,
        model: value.get("model").and_then(Value::as_str).unwrap_or_default().to_string(),
        endpoint: endpoint.to_string(),
        reused_prompt_tokens: 0,
        logprobs: parse_logprobs(choice),
    })
}

/// The per-token log-probabilities of a choice (`logprobs.content`, the
/// chat-completions layout), if the server gave them. An entry without a
/// token or a numeric logprob is skipped rather than guessed.
fn parse_logprobs(choice: &Value) -> Option<Vec<TokenLogprob>> {
    let content = choice.get("logprobs")?.get("content")?.as_array()?;
    let pair = |v: &Value| {
        let token = v.get("token")?.as_str()?.to_string();
        let logprob = v.get("logprob")?.as_f64()? as f32;
        Some((token, logprob))
    };
    Some(
        content
            .iter()
            .filter_map(|entry| {
                let (token, logprob) = pair(entry)?;
                let top = entry
                    .get("top_logprobs")
                    .and_then(Value::as_array)
                    .map(|alts| {
                        alts.iter().filter_map(pair).map(|(token, logprob)| TopLogprob { token, logprob }).collect()
                    })
                    .unwrap_or_default();
                Some(TokenLogprob { token, logprob, top })
            })
            .collect(),
    )
}

impl ChatModel for OpenAiChatModel {
    fn model_id(&self) -> &str {
        &self.id
    }

    /// `max_concurrency`: the requests in flight at once.
    fn parallelism(&self) -> usize {
        self.config.max_concurrency.max(1)
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        // Check every endpoint before sending anything: a retry may move on
        // to any of them.
        for endpoint in &self.config.endpoints {
            privacy::check_destination(endpoint, request.contains_patient_text, self.config.allow_remote)?;
        }
        let body = self.request_body(request);
        let _slot = self.slots.acquire();
        let start = self.next_endpoint.fetch_add(1, Ordering::Relaxed);
        let mut last_message = String::new();
        let mut last_endpoint = String::new();
        let started = Instant::now();
        for retry in 0..=self.config.max_retries {
            let base = &self.config.endpoints[(start + retry as usize) % self.config.endpoints.len()];
            match self.attempt(base, &body) {
                Attempt::Done(response) => return Ok(response),
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry { message, retry_after } => {
                    last_message = message;
                    last_endpoint = base.clone();
                    if retry < self.config.max_retries {
                        std::thread::sleep(self.backoff(retry, retry_after));
                    }
                }
            }
        }
        let _ = started;
        Err(LlmError::Transient { endpoint: last_endpoint, message: last_message, attempts: self.config.max_retries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_carries_schema_as_response_format() {
        let model = OpenAiChatModel::new(OpenAiConfig::new("http://127.0.0.1:1/v1", "m")).unwrap();
        let request = crate::ChatRequest::new(vec![crate::Message::user("hi")]).with_schema(json!({"type": "object"}));
        let body = model.request_body(&request);
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(body["response_format"]["json_schema"]["schema"], json!({"type": "object"}));
        assert_eq!(body["messages"][0]["role"], "user");
        assert!(body.get("seed").is_none());
    }

    #[test]
    fn backoff_grows_is_capped_and_honours_retry_after() {
        let mut config = OpenAiConfig::new("http://127.0.0.1:1/v1", "m");
        config.backoff_initial_ms = 100;
        config.backoff_max_ms = 1000;
        let model = OpenAiChatModel::new(config).unwrap();
        for retry in 0..8 {
            let wait = model.backoff(retry, None).as_millis() as u64;
            let full = (100u64 << retry).min(1000);
            assert!(wait >= full / 2 && wait <= full, "retry {retry}: {wait} ms");
        }
        assert!(model.backoff(0, Some(Duration::from_secs(3))) >= Duration::from_secs(3));
    }

    #[test]
    fn missing_api_key_variable_is_named() {
        let mut config = OpenAiConfig::new("http://127.0.0.1:1/v1", "m");
        config.api_key_env = Some("EVIDENT_TEST_SURELY_UNSET_KEY".into());
        let err = OpenAiChatModel::new(config).err().unwrap();
        assert!(err.to_string().contains("EVIDENT_TEST_SURELY_UNSET_KEY"));
    }

    /// One scripted HTTP exchange on a loopback port: answers `reply` to
    /// the first request and hands back the JSON body it was sent.
    fn scripted_endpoint(reply: &'static str) -> (String, std::thread::JoinHandle<Value>) {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap();
                    }
                }
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap();
            let mut stream = stream;
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            )
            .unwrap();
            serde_json::from_slice(&body).unwrap()
        });
        (base, handle)
    }

    #[test]
    fn logprobs_are_asked_for_and_read_back_over_http() {
        let reply = r#"{"model":"m","choices":[{"message":{"role":"assistant","content":"1"},"finish_reason":"stop",
            "logprobs":{"content":[{"token":"1","logprob":-0.25,"bytes":[49],
            "top_logprobs":[{"token":"1","logprob":-0.25,"bytes":[49]},{"token":"0","logprob":-1.5,"bytes":[48]}]}]}}],
            "usage":{"prompt_tokens":9,"completion_tokens":1}}"#;
        let (base, server) = scripted_endpoint(reply);
        let model = OpenAiChatModel::new(OpenAiConfig::new(base, "m")).unwrap();
        let answer = model.chat(&crate::ChatRequest::new(vec![crate::Message::user("q")]).with_logprobs(2)).unwrap();
        let sent = server.join().unwrap();
        assert_eq!((&sent["logprobs"], &sent["top_logprobs"]), (&json!(true), &json!(2)));
        let tokens = answer.logprobs.expect("logprobs parsed");
        assert_eq!(tokens.len(), 1);
        assert_eq!((tokens[0].token.as_str(), tokens[0].logprob), ("1", -0.25));
        assert_eq!(tokens[0].logprob_of("0"), Some(-1.5));
        assert_eq!(tokens[0].logprob_of("2"), None);

        // Not asked: nothing sent, and an answer without logprobs has none.
        let plain =
            r#"{"model":"m","choices":[{"message":{"role":"assistant","content":"1"},"finish_reason":"stop"}]}"#;
        let (base, server) = scripted_endpoint(plain);
        let model = OpenAiChatModel::new(OpenAiConfig::new(base, "m")).unwrap();
        let answer = model.chat(&crate::ChatRequest::new(vec![crate::Message::user("q")])).unwrap();
        let sent = server.join().unwrap();
        assert!(sent.get("logprobs").is_none() && sent.get("top_logprobs").is_none(), "{sent}");
        assert!(answer.logprobs.is_none());
    }

    #[test]
    fn parses_usage_and_finish_reason() {
        let text = r#"{"model":"x","choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#;
        let r = parse_completion(text, "e").unwrap();
        assert_eq!((r.text.as_str(), r.prompt_tokens, r.completion_tokens), ("hi", 5, 2));
        assert_eq!(r.finish_reason, FinishReason::Length);
        assert!(parse_completion("{}", "e").is_err());
    }
}
