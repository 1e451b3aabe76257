//! The model cache and the audit trail. [`RecordingModel`] wraps any
//! [`ChatModel`]: a deterministic request already answered in full by the same
//! model is served from the store's content-addressed cache (key: sha256 of
//! the model id and the full canonical request), and every call, hit or
//! not, is recorded under a run with tokens, latency, cost, endpoint and
//! the full request and response. [`export_trace`] writes a run's calls
//! as JSON, optionally with note text redacted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use evident_store::{NewModelCall, Store};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::chat::ChatModel;
use crate::error::LlmError;
use crate::request::{ChatRequest, ChatResponse};
use crate::structured::PipelineFailure;

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub prompt_usd_per_million: f64,
    pub completion_usd_per_million: f64,
}

impl Price {
    pub fn cost_usd(&self, prompt_tokens: u32, completion_tokens: u32) -> f64 {
        (prompt_tokens as f64 * self.prompt_usd_per_million
            + completion_tokens as f64 * self.completion_usd_per_million)
            / 1_000_000.0
    }
}

/// Model id (or configured name) → price.
pub type PriceTable = BTreeMap<String, Price>;

/// The cache key of `request` sent to `model_id`.
pub fn cache_key(model_id: &str, request: &ChatRequest) -> String {
    let mut hasher = Sha256::new();
    hasher.update(model_id.as_bytes());
    hasher.update([0u8]);
    hasher.update(serde_json::to_vec(request).unwrap_or_default());
    hex::encode(hasher.finalize())
}

/// A shared handle on the store (a SQLite connection is used by one thread
/// at a time).
pub type SharedStore = Arc<Mutex<Store>>;

/// Caches and records the calls of an inner model under one run.
pub struct RecordingModel {
    inner: Arc<dyn ChatModel>,
    store: SharedStore,
    run_id: String,
    use_cache: bool,
    price: Option<Price>,
}

impl RecordingModel {
    pub fn new(inner: Arc<dyn ChatModel>, store: SharedStore, run_id: impl Into<String>) -> Self {
        RecordingModel { inner, store, run_id: run_id.into(), use_cache: true, price: None }
    }

    /// Turns the cache off (`--no-cache`): every request reaches the model.
    pub fn with_cache(mut self, use_cache: bool) -> Self {
        self.use_cache = use_cache;
        self
    }

    pub fn with_price(mut self, price: Option<Price>) -> Self {
        self.price = price;
        self
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The same model and settings, recording into the run `run_id`
    /// instead: one run per unit of work lets its calls be counted apart.
    pub fn in_run(&self, run_id: impl Into<String>) -> Self {
        RecordingModel { run_id: run_id.into(), inner: self.inner.clone(), store: self.store.clone(), ..*self }
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        key: &str,
        request_json: &str,
        request: &ChatRequest,
        result: Result<&ChatResponse, &LlmError>,
        cache_hit: bool,
        latency_ms: f64,
    ) -> Result<(), LlmError> {
        let (response_json, error) = match result {
            Ok(r) => (Some(serde_json::to_string(r).unwrap_or_default()), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let (model, endpoint, prompt_tokens, completion_tokens) = match result {
            Ok(r) => (r.model.as_str(), r.endpoint.as_str(), r.prompt_tokens, r.completion_tokens),
            Err(_) => (self.inner.model_id(), "", 0, 0),
        };
        let cost_usd = match (self.price, cache_hit) {
            (_, true) => Some(0.0),
            (Some(price), false) => Some(price.cost_usd(prompt_tokens, completion_tokens)),
            (None, false) => None,
        };
        let model = if model.is_empty() { self.inner.model_id() } else { model };
        self.store()
            .record_model_call(&NewModelCall {
                run_id: &self.run_id,
                model,
                endpoint,
                cache_key: key,
                cache_hit,
                prompt_tokens,
                completion_tokens,
                latency_ms,
                cost_usd,
                contains_patient_text: request.contains_patient_text,
                request_json,
                response_json: response_json.as_deref(),
                error: error.as_deref(),
            })
            .map_err(|e| LlmError::Store(e.to_string()))?;
        Ok(())
    }
}

impl ChatModel for RecordingModel {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let key = cache_key(self.inner.model_id(), request);
        let request_json = serde_json::to_string(request).unwrap_or_default();
        let cacheable = self.use_cache && request.is_deterministic();
        if cacheable {
            let cached = self.store().cached_model_response(&key).map_err(|e| LlmError::Store(e.to_string()))?;
            if let Some(text) = cached {
                // Stores written before cut-off answers were left out of the
                // cache may still hold one; it is a miss.
                let complete = serde_json::from_str::<ChatResponse>(&text).ok().filter(ChatResponse::is_complete);
                if let Some(response) = complete {
                    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
                    self.record(&key, &request_json, request, Ok(&response), true, latency_ms)?;
                    return Ok(response);
                }
            }
        }
        let result = self.inner.chat(request);
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        self.record(&key, &request_json, request, result.as_ref(), false, latency_ms)?;
        let response = result?;
        if cacheable && response.is_complete() {
            let text = serde_json::to_string(&response).unwrap_or_default();
            self.store()
                .put_cached_model_response(&key, self.inner.model_id(), &text)
                .map_err(|e| LlmError::Store(e.to_string()))?;
        }
        Ok(response)
    }

    fn record_pipeline_failure(&self, failure: &PipelineFailure) {
        let errors = serde_json::to_string(&failure.errors).unwrap_or_default();
        let request = serde_json::to_string(&failure.request).unwrap_or_default();
        // A failure to record is reported on stderr rather than lost: the
        // caller already holds the failure itself.
        if let Err(e) = self.store().record_pipeline_failure(
            &self.run_id,
            &failure.model,
            &failure.raw_text,
            &errors,
            failure.attempts,
            &request,
        ) {
            eprintln!("warning: could not record a pipeline failure in run {}: {e}", self.run_id);
        }
        self.inner.record_pipeline_failure(failure);
    }
}

fn redacted(text: &str) -> Value {
    let digest = hex::encode(Sha256::digest(text.as_bytes()));
    Value::String(format!("[redacted: {} chars, sha256 {}]", text.chars().count(), &digest[..12]))
}

/// A run's summary, calls and pipeline failures as one JSON value. With
/// `redact_note_text`, message contents and answers of calls that carried
/// patient text (and the raw text of failures) are replaced by their length
/// and a hash prefix, so traces can be shared for debugging.
pub fn export_trace(store: &Store, run_id: &str, redact_note_text: bool) -> Result<Value, LlmError> {
    let store_err = |e: evident_store::StoreError| LlmError::Store(e.to_string());
    let summary = store
        .model_run(run_id)
        .map_err(store_err)?
        .ok_or_else(|| LlmError::Store(format!("no run {run_id:?}; see `evident runs list`")))?;
    let mut calls = Vec::new();
    for call in store.model_calls(run_id).map_err(store_err)? {
        let mut request: Value = serde_json::from_str(&call.request_json).unwrap_or(Value::Null);
        let mut response: Value =
            call.response_json.as_deref().and_then(|t| serde_json::from_str(t).ok()).unwrap_or(Value::Null);
        if redact_note_text && call.contains_patient_text {
            if let Some(messages) = request.get_mut("messages").and_then(Value::as_array_mut) {
                for m in messages {
                    if let Some(content) = m.get("content").and_then(Value::as_str).map(str::to_string) {
                        m["content"] = redacted(&content);
                    }
                }
            }
            if let Some(text) = response.get("text").and_then(Value::as_str).map(str::to_string) {
                response["text"] = redacted(&text);
            }
        }
        calls.push(json!({
            "id": call.id,
            "started_at": call.started_at,
            "model": call.model,
            "endpoint": call.endpoint,
            "cache_hit": call.cache_hit,
            "prompt_tokens": call.prompt_tokens,
            "completion_tokens": call.completion_tokens,
            "latency_ms": call.latency_ms,
            "cost_usd": call.cost_usd,
            "contains_patient_text": call.contains_patient_text,
            "request": request,
            "response": response,
            "error": call.error,
        }));
    }
    let failures: Vec<Value> = store
        .pipeline_failures(run_id)
        .map_err(store_err)?
        .into_iter()
        .map(|f| {
            let raw = if redact_note_text { redacted(&f.raw_text) } else { Value::String(f.raw_text) };
            json!({
                "id": f.id,
                "model": f.model,
                "raw_text": raw,
                "errors": serde_json::from_str::<Value>(&f.errors_json).unwrap_or(Value::Null),
                "attempts": f.attempts,
                "created_at": f.created_at,
            })
        })
        .collect();
    Ok(json!({"run": summary, "calls": calls, "pipeline_failures": failures, "redacted": redact_note_text}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{FinishReason, Message};
    use std::sync::atomic::{AtomicU32, Ordering};

    struct Counting(AtomicU32);

    impl ChatModel for Counting {
        fn model_id(&self) -> &str {
            "counting"
        }
        /// Answers in full, or cut off at the token limit when the
        /// question starts with "long:".
        fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            let question = &request.messages[0].content;
            let finish_reason = if question.starts_with("long:") { FinishReason::Length } else { FinishReason::Stop };
            Ok(ChatResponse {
                text: format!("answer {n} to {question}"),
                prompt_tokens: 1000,
                completion_tokens: 100,
                finish_reason,
                model: "counting".into(),
                endpoint: "test://".into(),
                reused_prompt_tokens: 0,
            })
        }
    }

    fn setup() -> (Arc<Counting>, SharedStore) {
        let store = Arc::new(Mutex::new(Store::open_in_memory().unwrap()));
        (Arc::new(Counting(AtomicU32::new(0))), store)
    }

    #[test]
    fn second_identical_run_makes_no_model_calls() {
        let (inner, store) = setup();
        let price = Price { prompt_usd_per_million: 1.0, completion_usd_per_million: 10.0 };
        let request = ChatRequest::new(vec![Message::user("note: patient is 71")]);
        let run1 = store.lock().unwrap().begin_model_run("one").unwrap();
        let m1 = RecordingModel::new(inner.clone(), store.clone(), &run1).with_price(Some(price));
        let first = m1.chat(&request).unwrap();
        let run2 = store.lock().unwrap().begin_model_run("two").unwrap();
        let m2 = RecordingModel::new(inner.clone(), store.clone(), &run2).with_price(Some(price));
        let second = m2.chat(&request).unwrap();
        assert_eq!(first, second);
        assert_eq!(inner.0.load(Ordering::SeqCst), 1);
        let store = store.lock().unwrap();
        let s1 = store.model_run(&run1).unwrap().unwrap();
        let s2 = store.model_run(&run2).unwrap().unwrap();
        assert_eq!((s1.model_calls, s1.cache_hits), (1, 0));
        assert!((s1.cost_usd - 0.002).abs() < 1e-12, "{}", s1.cost_usd);
        assert_eq!((s2.calls, s2.model_calls, s2.cache_hits), (1, 0, 1));
        assert_eq!(s2.cost_usd, 0.0);
    }

    #[test]
    fn no_cache_and_sampling_requests_always_reach_the_model() {
        let (inner, store) = setup();
        let run = store.lock().unwrap().begin_model_run("r").unwrap();
        let request = ChatRequest::new(vec![Message::user("q")]);
        let m = RecordingModel::new(inner.clone(), store.clone(), &run).with_cache(false);
        m.chat(&request).unwrap();
        m.chat(&request).unwrap();
        let mut sampled = request.clone();
        sampled.temperature = 0.7;
        let cached = RecordingModel::new(inner.clone(), store.clone(), &run);
        cached.chat(&sampled).unwrap();
        cached.chat(&sampled).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn answers_cut_off_at_the_token_limit_are_not_reused() {
        let (inner, store) = setup();
        let run = store.lock().unwrap().begin_model_run("r").unwrap();
        let m = RecordingModel::new(inner.clone(), store.clone(), &run);
        let cut = ChatRequest::new(vec![Message::user("long: list every criterion")]);
        assert_eq!(m.chat(&cut).unwrap().text, "answer 0 to long: list every criterion");
        assert_eq!(m.chat(&cut).unwrap().text, "answer 1 to long: list every criterion");
        // One already in the cache (an older store) is a miss too.
        let key = cache_key(inner.model_id(), &cut);
        let stale = ChatResponse {
            text: "stale".into(),
            prompt_tokens: 1,
            completion_tokens: 1,
            finish_reason: FinishReason::Length,
            model: "counting".into(),
            endpoint: "test://".into(),
            reused_prompt_tokens: 0,
        };
        let stale = serde_json::to_string(&stale).unwrap();
        store.lock().unwrap().put_cached_model_response(&key, "counting", &stale).unwrap();
        assert_eq!(m.chat(&cut).unwrap().text, "answer 2 to long: list every criterion");
        let summary = store.lock().unwrap().model_run(&run).unwrap().unwrap();
        assert_eq!((summary.calls, summary.cache_hits), (3, 0));
    }

    #[test]
    fn keys_differ_by_model_and_by_any_request_field() {
        let a = ChatRequest::new(vec![Message::user("q")]);
        let mut b = a.clone();
        b.max_tokens += 1;
        assert_ne!(cache_key("m", &a), cache_key("m", &b));
        assert_ne!(cache_key("m", &a), cache_key("n", &a));
        assert_eq!(cache_key("m", &a), cache_key("m", &a.clone()));
    }

    #[test]
    fn trace_export_redacts_note_text_only_when_asked() {
        let (inner, store) = setup();
        let run = store.lock().unwrap().begin_model_run("r").unwrap();
        let m = RecordingModel::new(inner, store.clone(), &run);
        m.chat(&ChatRequest::new(vec![Message::user("Mr Smith has diabetes")])).unwrap();
        m.chat(&ChatRequest::new(vec![Message::user("criterion text")]).without_patient_text()).unwrap();
        m.record_pipeline_failure(&PipelineFailure {
            model: "counting".into(),
            raw_text: "Mr Smith {".into(),
            errors: vec!["not JSON".into()],
            attempts: 3,
            request: ChatRequest::new(vec![]),
        });
        let store = store.lock().unwrap();
        let plain = export_trace(&store, &run, false).unwrap().to_string();
        assert!(plain.contains("Mr Smith has diabetes"));
        let redacted = export_trace(&store, &run, true).unwrap().to_string();
        assert!(!redacted.contains("Smith"), "{redacted}");
        assert!(redacted.contains("criterion text"));
        assert!(redacted.contains("[redacted: 21 chars"));
        assert_eq!(store.model_run(&run).unwrap().unwrap().pipeline_failures, 1);
    }
}
