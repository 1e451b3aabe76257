//! [`RecordingModel`]: the caching and recording wrapper around any
//! [`ChatModel`]. A deterministic request already answered in full by the
//! same model is served from the store's cache; every call, hit or not, is
//! recorded under one model run; and the run is also where the wrapped
//! model's pipeline failures go (it is a [`PipelineFailureLog`]).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use evident_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, PipelineFailure, PipelineFailureLog, Price};
use evident_store::{NewModelCall, Store};

use crate::cache_key::cache_key;
use crate::error::RecorderError;

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

    /// With `false`, turns the cache off: every request reaches the model.
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

    fn record(
        &self,
        key: &str,
        request_json: &str,
        request: &ChatRequest,
        result: Result<&ChatResponse, &LlmError>,
        cache_hit: bool,
        latency_ms: f64,
    ) -> Result<(), RecorderError> {
        let (response_json, error) = match result {
            Ok(r) => (Some(to_json(r, "the response")?), None),
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
        self.store().record_model_call(&NewModelCall {
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
        })?;
        Ok(())
    }

    /// A cached complete answer to the request with this key, if any. An
    /// entry that is JSON but not a complete answer is a miss: stores
    /// written before cut-off answers were left out of the cache may hold a
    /// cut-off one, and older ones hold answers without a `finish_reason`
    /// (whether they were complete is unknown). An entry that is not JSON
    /// at all is damage, and an error.
    fn cached(&self, key: &str) -> Result<Option<ChatResponse>, RecorderError> {
        let Some(text) = self.store().cached_model_response(key)? else { return Ok(None) };
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|source| RecorderError::CorruptRecord {
            run_id: self.run_id.clone(),
            what: format!("cached answer under key {key}"),
            source,
        })?;
        let response = serde_json::from_value::<ChatResponse>(value).ok();
        Ok(response.filter(ChatResponse::is_complete))
    }
}

fn to_json(value: &impl serde::Serialize, what: &'static str) -> Result<String, RecorderError> {
    serde_json::to_string(value).map_err(|source| RecorderError::Serialize { what, source })
}

impl ChatModel for RecordingModel {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    /// The wrapped model's count (not recorded: no answer is asked for).
    fn count_tokens(&self, messages: &[evident_llm::Message]) -> Option<usize> {
        self.inner.count_tokens(messages)
    }

    fn parallelism(&self) -> usize {
        self.inner.parallelism()
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let key = cache_key(self.inner.model_id(), request)?;
        let request_json = to_json(request, "the request")?;
        let cacheable = self.use_cache && request.is_deterministic();
        if cacheable {
            if let Some(response) = self.cached(&key)? {
                let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
                self.record(&key, &request_json, request, Ok(&response), true, latency_ms)?;
                return Ok(response);
            }
        }
        let result = self.inner.chat(request);
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        self.record(&key, &request_json, request, result.as_ref(), false, latency_ms)?;
        let response = result?;
        if cacheable && response.is_complete() {
            let text = to_json(&response, "the response")?;
            self.store().put_cached_model_response(&key, self.inner.model_id(), &text).map_err(RecorderError::from)?;
        }
        Ok(response)
    }
}

impl PipelineFailureLog for RecordingModel {
    /// Stores the failure in this model's run (`pipeline_failures`).
    fn record_pipeline_failure(&self, failure: &PipelineFailure) -> Result<(), LlmError> {
        let errors = to_json(&failure.errors, "the errors of a pipeline failure")?;
        let request = to_json(&failure.request, "the request of a pipeline failure")?;
        self.store()
            .record_pipeline_failure(
                &self.run_id,
                &failure.model,
                &failure.raw_text,
                &errors,
                failure.attempts,
                &request,
            )
            .map_err(RecorderError::from)?;
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use evident_llm::{FinishReason, Message};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Counts its calls; answers in full, or cut off at the token limit
    /// when the question starts with "long:".
    pub(crate) struct Counting(pub(crate) AtomicU32);

    impl ChatModel for Counting {
        fn model_id(&self) -> &str {
            "counting"
        }
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
                logprobs: request.logprobs.map(|_| {
                    vec![evident_llm::TokenLogprob {
                        token: "answer".into(),
                        logprob: -0.5,
                        top: vec![evident_llm::TopLogprob { token: "reply".into(), logprob: -1.25 }],
                    }]
                }),
            })
        }
    }

    pub(crate) fn setup() -> (Arc<Counting>, SharedStore) {
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
    fn logprobs_are_recorded_and_replayed_and_never_served_for_a_plain_request() {
        let (inner, store) = setup();
        let run = store.lock().unwrap().begin_model_run("r").unwrap();
        let m = RecordingModel::new(inner.clone(), store.clone(), &run);
        let plain = ChatRequest::new(vec![Message::user("q")]);
        let asked = plain.clone().with_logprobs(5);
        assert!(m.chat(&plain).unwrap().logprobs.is_none());
        // The plain answer in the cache is not served for the request that
        // asks for log-probabilities (a different key), nor the other way.
        let first = m.chat(&asked).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 2);
        let tokens = first.logprobs.clone().expect("the model gave logprobs");
        assert_eq!(tokens[0].logprob_of("reply"), Some(-1.25));
        let replayed = m.chat(&asked).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 2, "served from the cache");
        assert_eq!(replayed, first, "the replay carries the same log-probabilities");
        assert!(m.chat(&plain).unwrap().logprobs.is_none());
        assert_eq!(inner.0.load(Ordering::SeqCst), 2);
        let calls = store.lock().unwrap().model_calls(&run).unwrap();
        assert!(calls[1].response_json.as_deref().unwrap_or_default().contains(r#""logprob":-1.25"#), "recorded");
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
        let key = cache_key(inner.model_id(), &cut).unwrap();
        let stale = ChatResponse {
            text: "stale".into(),
            prompt_tokens: 1,
            completion_tokens: 1,
            finish_reason: FinishReason::Length,
            model: "counting".into(),
            endpoint: "test://".into(),
            reused_prompt_tokens: 0,
            logprobs: None,
        };
        let stale = serde_json::to_string(&stale).unwrap();
        store.lock().unwrap().put_cached_model_response(&key, "counting", &stale).unwrap();
        assert_eq!(m.chat(&cut).unwrap().text, "answer 2 to long: list every criterion");
        let summary = store.lock().unwrap().model_run(&run).unwrap().unwrap();
        assert_eq!((summary.calls, summary.cache_hits), (3, 0));
    }

    #[test]
    fn a_damaged_cache_entry_is_an_error_naming_its_key_not_a_miss() {
        let (inner, store) = setup();
        let run = store.lock().unwrap().begin_model_run("r").unwrap();
        let m = RecordingModel::new(inner.clone(), store.clone(), &run);
        let request = ChatRequest::new(vec![Message::user("q")]);
        let key = cache_key(inner.model_id(), &request).unwrap();
        store.lock().unwrap().put_cached_model_response(&key, "counting", "{not json").unwrap();
        let err = m.chat(&request).unwrap_err();
        assert!(matches!(err, LlmError::Store(_)), "{err}");
        assert!(err.to_string().contains(&key), "{err}");
        assert_eq!(inner.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_cached_answer_of_an_older_shape_is_a_miss() {
        let (inner, store) = setup();
        let run = store.lock().unwrap().begin_model_run("r").unwrap();
        let m = RecordingModel::new(inner.clone(), store.clone(), &run);
        let request = ChatRequest::new(vec![Message::user("q")]);
        let key = cache_key(inner.model_id(), &request).unwrap();
        // Written before answers carried a finish_reason.
        let old = r#"{"text":"old","prompt_tokens":1,"completion_tokens":1,"model":"counting","endpoint":"test://"}"#;
        store.lock().unwrap().put_cached_model_response(&key, "counting", old).unwrap();
        assert_eq!(m.chat(&request).unwrap().text, "answer 0 to q");
        assert_eq!(m.chat(&request).unwrap().text, "answer 0 to q", "the fresh answer replaced it");
        assert_eq!(inner.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn pipeline_failures_land_in_the_run_of_the_model_that_logs_them() {
        let (inner, store) = setup();
        let run1 = store.lock().unwrap().begin_model_run("one").unwrap();
        let run2 = store.lock().unwrap().begin_model_run("two").unwrap();
        let m1 = RecordingModel::new(inner, store.clone(), &run1);
        let m2 = m1.in_run(&run2);
        let failure = PipelineFailure {
            model: "counting".into(),
            raw_text: "{".into(),
            errors: vec!["the answer is not JSON".into()],
            attempts: 3,
            request: ChatRequest::new(vec![]),
        };
        m2.record_pipeline_failure(&failure).unwrap();
        let store = store.lock().unwrap();
        assert_eq!(store.model_run(&run1).unwrap().unwrap().pipeline_failures, 0);
        assert_eq!(store.model_run(&run2).unwrap().unwrap().pipeline_failures, 1);
        let stored = &store.pipeline_failures(&run2).unwrap()[0];
        assert_eq!((stored.raw_text.as_str(), stored.attempts), ("{", 3));
        assert_eq!(stored.errors_json, r#"["the answer is not JSON"]"#);
    }
}
