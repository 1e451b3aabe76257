//! `evident llm serve`: an OpenAI-compatible HTTP endpoint over local
//! models (`GET /v1/models`, `POST /v1/chat/completions`,
//! `POST /v1/embeddings`), so other tools can use them and the HTTP
//! provider is tested against a real server. Blocking: a fixed set of
//! worker threads take requests from one listener; each embedded model
//! serialises its own requests.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use serde_json::{json, Value};

use crate::chat::ChatModel;
use crate::embed::Embedder;
use crate::error::LlmError;
use crate::request::{ChatRequest, FinishReason, Message};

/// What the server serves.
pub struct ServeModels {
    /// Chat models by the name clients use; the first is the default.
    pub chat: Vec<(String, Arc<dyn ChatModel>)>,
    pub embedder: Option<(String, Arc<dyn Embedder>)>,
}

/// A running server; dropping it does not stop it, call [`Self::shutdown`].
pub struct RunningServer {
    pub addr: SocketAddr,
    http: Arc<tiny_http::Server>,
    workers: Vec<JoinHandle<()>>,
}

impl RunningServer {
    /// Stops accepting requests and waits for the workers.
    pub fn shutdown(self) {
        for _ in &self.workers {
            self.http.unblock();
        }
        for w in self.workers {
            let _ = w.join();
        }
    }

    /// Blocks until the server stops (it does not stop on its own).
    pub fn wait(self) {
        for w in self.workers {
            let _ = w.join();
        }
    }
}

/// Starts serving on `addr` (`127.0.0.1:0` picks a free port) with
/// `workers` request threads.
pub fn serve(addr: &str, models: ServeModels, workers: usize) -> Result<RunningServer, LlmError> {
    let http = tiny_http::Server::http(addr).map_err(|e| LlmError::Backend(format!("cannot listen on {addr}: {e}")))?;
    let addr = http.server_addr().to_ip().ok_or_else(|| LlmError::Backend(format!("{addr} is not an IP address")))?;
    let http = Arc::new(http);
    let models = Arc::new(models);
    let workers = (0..workers.max(1))
        .map(|i| {
            let http = http.clone();
            let models = models.clone();
            std::thread::Builder::new()
                .name(format!("serve-{i}"))
                .spawn(move || {
                    while let Ok(request) = http.recv() {
                        handle(request, &models);
                    }
                })
                .expect("spawn a server thread")
        })
        .collect();
    Ok(RunningServer { addr, http, workers })
}

fn respond(request: tiny_http::Request, status: u16, body: &Value) {
    let header = tiny_http::Header::from_bytes(&b"Content-Type"[..], &b"application/json"[..]).expect("valid header");
    let response = tiny_http::Response::from_string(body.to_string()).with_status_code(status).with_header(header);
    let _ = request.respond(response);
}

fn error_body(message: &str, kind: &str) -> Value {
    json!({"error": {"message": message, "type": kind}})
}

fn handle(mut request: tiny_http::Request, models: &ServeModels) {
    let method = request.method().clone();
    let path = request.url().split('?').next().unwrap_or("").trim_end_matches('/').to_string();
    let mut body = String::new();
    if request.as_reader().take(64 << 20).read_to_string(&mut body).is_err() {
        return respond(request, 400, &error_body("request body is not UTF-8", "invalid_request_error"));
    }
    let result = match (method, path.as_str()) {
        (tiny_http::Method::Get, "/v1/models") => Ok(list_models(models)),
        (tiny_http::Method::Post, "/v1/chat/completions") => chat_completion(&body, models),
        (tiny_http::Method::Post, "/v1/embeddings") => embeddings(&body, models),
        (_, other) => Err((404, error_body(&format!("no route {other}"), "not_found"))),
    };
    match result {
        Ok(value) => respond(request, 200, &value),
        Err((status, value)) => respond(request, status, &value),
    }
}

fn list_models(models: &ServeModels) -> Value {
    let mut data: Vec<Value> =
        models.chat.iter().map(|(name, _)| json!({"id": name, "object": "model", "owned_by": "evident"})).collect();
    if let Some((name, _)) = &models.embedder {
        data.push(json!({"id": name, "object": "model", "owned_by": "evident"}));
    }
    json!({"object": "list", "data": data})
}

type HttpError = (u16, Value);

fn bad(message: String) -> HttpError {
    (400, error_body(&message, "invalid_request_error"))
}

/// Translates an OpenAI chat-completions body into the canonical request.
pub fn parse_chat_body(body: &Value) -> Result<(Option<String>, ChatRequest), String> {
    let messages: Vec<Message> = serde_json::from_value(body.get("messages").cloned().unwrap_or(Value::Null))
        .map_err(|e| format!("messages: {e}"))?;
    if messages.is_empty() {
        return Err("messages: at least one message is required".into());
    }
    let mut request = ChatRequest::new(messages);
    if let Some(t) = body.get("temperature").and_then(Value::as_f64) {
        request.temperature = t as f32;
    }
    if let Some(n) = body.get("max_tokens").or_else(|| body.get("max_completion_tokens")).and_then(Value::as_u64) {
        request.max_tokens = n.min(u32::MAX as u64) as u32;
    }
    request.seed = body.get("seed").and_then(Value::as_u64);
    request.stop = match body.get("stop") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    };
    if let Some(format) = body.get("response_format") {
        match format.get("type").and_then(Value::as_str) {
            Some("json_schema") => {
                let schema = format
                    .get("json_schema")
                    .and_then(|j| j.get("schema"))
                    .cloned()
                    .ok_or("response_format.json_schema.schema is missing")?;
                request.json_schema = Some(schema);
            }
            Some("json_object") => request.json_schema = Some(json!({"type": "object"})),
            Some("text") | None => {}
            Some(other) => return Err(format!("response_format.type {other:?} is not supported")),
        }
    }
    let model = body.get("model").and_then(Value::as_str).map(str::to_string);
    Ok((model, request))
}

fn chat_completion(body: &str, models: &ServeModels) -> Result<Value, HttpError> {
    let body: Value = serde_json::from_str(body).map_err(|e| bad(format!("body is not JSON: {e}")))?;
    let (name, request) = parse_chat_body(&body).map_err(bad)?;
    let (served_name, model) = match &name {
        Some(n) => {
            models.chat.iter().find(|(m, _)| m == n).or(if models.chat.len() == 1 { models.chat.first() } else { None })
        }
        None => models.chat.first(),
    }
    .ok_or_else(|| (404, error_body(&format!("model {name:?} is not served here; see GET /v1/models"), "not_found")))?;
    let response = model.chat(&request).map_err(|e| {
        let status = match &e {
            LlmError::ContextOverflow { .. } | LlmError::InvalidSchema(_) => 400,
            _ => 500,
        };
        (status, error_body(&e.to_string(), "server_error"))
    })?;
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let finish = match response.finish_reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
    };
    Ok(json!({
        "id": format!("chatcmpl-{created}"),
        "object": "chat.completion",
        "created": created,
        "model": served_name,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": response.text},
            "finish_reason": finish
        }],
        "usage": {
            "prompt_tokens": response.prompt_tokens,
            "completion_tokens": response.completion_tokens,
            "total_tokens": response.prompt_tokens + response.completion_tokens
        }
    }))
}

fn embeddings(body: &str, models: &ServeModels) -> Result<Value, HttpError> {
    let Some((name, embedder)) = &models.embedder else {
        return Err((404, error_body("no embedding model is served here", "not_found")));
    };
    let body: Value = serde_json::from_str(body).map_err(|e| bad(format!("body is not JSON: {e}")))?;
    let inputs: Vec<String> = match body.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(|| bad("input must be strings".into())))
            .collect::<Result<_, _>>()?,
        _ => return Err(bad("input: a string or an array of strings is required".into())),
    };
    let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let vectors = embedder.embed(&refs).map_err(|e| (500, error_body(&e.to_string(), "server_error")))?;
    let data: Vec<Value> = vectors
        .into_iter()
        .enumerate()
        .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
        .collect();
    Ok(json!({"object": "list", "data": data, "model": name, "usage": {"prompt_tokens": 0, "total_tokens": 0}}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::EmbedError;
    use crate::providers::openai_compat::{OpenAiChatModel, OpenAiConfig};
    use crate::request::ChatResponse;

    /// Echoes the last message; enough to test the HTTP translation.
    struct Echo;
    impl ChatModel for Echo {
        fn model_id(&self) -> &str {
            "echo"
        }
        fn chat(&self, r: &ChatRequest) -> Result<ChatResponse, LlmError> {
            let text = match &r.json_schema {
                Some(_) => json!({"echo": r.messages.last().unwrap().content}).to_string(),
                None => r.messages.last().unwrap().content.clone(),
            };
            Ok(ChatResponse {
                text,
                prompt_tokens: 3,
                completion_tokens: 2,
                finish_reason: FinishReason::Stop,
                model: "echo".into(),
                endpoint: "test".into(),
                reused_prompt_tokens: 0,
                logprobs: None,
            })
        }
    }

    /// A two-dimensional embedder: (length, 1) normalised.
    struct Tiny;
    impl Embedder for Tiny {
        fn model_id(&self) -> &str {
            "tiny"
        }
        fn dimensions(&self) -> usize {
            2
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let (a, b) = (t.len() as f32, 1.0f32);
                    let n = (a * a + b * b).sqrt();
                    vec![a / n, b / n]
                })
                .collect())
        }
    }

    fn start() -> RunningServer {
        let models = ServeModels {
            chat: vec![("echo".into(), Arc::new(Echo) as Arc<dyn ChatModel>)],
            embedder: Some(("tiny".into(), Arc::new(Tiny) as Arc<dyn Embedder>)),
        };
        serve("127.0.0.1:0", models, 2).unwrap()
    }

    #[test]
    fn http_provider_round_trip_through_the_server() {
        let server = start();
        let model = OpenAiChatModel::new(OpenAiConfig::new(format!("http://{}/v1", server.addr), "echo")).unwrap();
        let answer = model.chat(&ChatRequest::new(vec![Message::user("hello")])).unwrap();
        assert_eq!(answer.text, "hello");
        assert_eq!((answer.prompt_tokens, answer.completion_tokens), (3, 2));
        let schema = json!({"type": "object"});
        let answer = model.chat(&ChatRequest::new(vec![Message::user("x")]).with_schema(schema)).unwrap();
        assert_eq!(answer.text, r#"{"echo":"x"}"#);
        server.shutdown();
    }

    #[test]
    fn embeddings_and_models_and_errors() {
        let server = start();
        let base = format!("http://{}/v1", server.addr);
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut r = agent
            .post(&format!("{base}/embeddings"))
            .send_json(json!({"input": ["ab", "abcd"], "model": "tiny"}))
            .unwrap();
        let v: Value = r.body_mut().read_json().unwrap();
        assert_eq!(v["data"].as_array().unwrap().len(), 2);
        assert_eq!(v["data"][1]["index"], 1);
        let mut r = agent.get(&format!("{base}/models")).call().unwrap();
        let v: Value = r.body_mut().read_json().unwrap();
        assert_eq!(v["data"][0]["id"], "echo");
        assert_eq!(v["data"][1]["id"], "tiny");
        let r = agent.post(&format!("{base}/chat/completions")).send_json(json!({"messages": []})).unwrap();
        assert_eq!(r.status().as_u16(), 400);
        let r = agent.get(&format!("{base}/nope")).call().unwrap();
        assert_eq!(r.status().as_u16(), 404);
        server.shutdown();
    }

    #[test]
    fn parses_openai_bodies() {
        let (model, r) = parse_chat_body(&json!({
            "model": "m", "messages": [{"role": "user", "content": "q"}],
            "temperature": 0.5, "max_tokens": 7, "seed": 3, "stop": "END",
            "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
        }))
        .unwrap();
        assert_eq!(model.as_deref(), Some("m"));
        assert_eq!((r.temperature, r.max_tokens, r.seed), (0.5, 7, Some(3)));
        assert_eq!(r.stop, vec!["END".to_string()]);
        assert_eq!(r.json_schema, Some(json!({"type": "object"})));
        assert!(parse_chat_body(&json!({"messages": [{"role": "robot", "content": "q"}]})).is_err());
    }
}
