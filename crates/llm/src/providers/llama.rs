//! The embedded provider: a GGUF model run in-process by llama.cpp
//! (`llama-cpp-2`). Uses the GGUF's own chat template and tokenizer;
//! JSON-schema requests are constrained with llguidance. One worker thread
//! owns the model and one context; requests queue on a channel, so the
//! model is used by one request at a time. The context keeps the KV cache
//! of the previous request, and a new request re-decodes only the tokens
//! after the longest shared prefix (a patient record first, then a varying
//! criterion, costs little more than the criterion).

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use serde::{Deserialize, Serialize};

use crate::chat::ChatModel;
use crate::error::LlmError;
use crate::request::{ChatRequest, ChatResponse, FinishReason, Message, Role};
use crate::request::{TokenLogprob, TopLogprob};

/// How to run a local GGUF model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaConfig {
    pub model_path: PathBuf,
    /// CPU threads for decoding; default: all available cores.
    #[serde(default)]
    pub threads: Option<u32>,
    /// Context window in tokens (prompt + answer).
    #[serde(default = "default_context_size")]
    pub context_size: u32,
    /// Tokens decoded per llama.cpp batch while reading the prompt.
    #[serde(default = "default_batch_size")]
    pub batch_size: u32,
    /// Reuse the KV cache of the previous request's shared prefix.
    #[serde(default = "default_true")]
    pub prefix_reuse: bool,
    /// `maxLength` added to schema strings that have none, for decoding
    /// only: without a bound a small model can loop inside a string.
    #[serde(default = "default_max_string_length")]
    pub max_string_length: u32,
    /// Under a JSON schema, decode the tokens the grammar forces (a key,
    /// the rest of an enum value) in one batch instead of one at a time
    /// (llguidance's fast-forward tokens, in their canonical
    /// tokenisation). Off: every token is sampled one at a time. Requests
    /// that ask for log-probabilities never fast-forward, so every token
    /// has its own.
    #[serde(default = "default_true")]
    pub fast_forward: bool,
}

fn default_context_size() -> u32 {
    4096
}
fn default_batch_size() -> u32 {
    512
}
fn default_true() -> bool {
    true
}
fn default_max_string_length() -> u32 {
    600
}

impl LlamaConfig {
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        LlamaConfig {
            model_path: model_path.into(),
            threads: None,
            context_size: default_context_size(),
            batch_size: default_batch_size(),
            prefix_reuse: true,
            max_string_length: default_max_string_length(),
            fast_forward: true,
        }
    }
}

/// Where the time of the last request went; used by the benchmarks to
/// compare Evident's total with llama.cpp's own decoding time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LlamaTimings {
    pub prompt_tokens: u32,
    pub reused_prompt_tokens: u32,
    pub completion_tokens: u32,
    /// Time inside `llama_decode` for the prompt tokens.
    pub prompt_decode_ms: f64,
    /// Time inside `llama_decode` for the generated tokens.
    pub generation_decode_ms: f64,
    /// Time choosing tokens (logits → token, including the grammar mask).
    pub sampling_ms: f64,
    /// Completion tokens the grammar forced, decoded in batches rather
    /// than sampled ([`LlamaConfig::fast_forward`]).
    pub forced_tokens: u32,
    /// Everything from receiving the request to returning the answer.
    pub total_ms: f64,
}

type Reply = mpsc::Sender<Result<(ChatResponse, LlamaTimings), LlmError>>;

/// What the model thread is asked: an answer, or the prompt tokens a
/// request's messages take (its template applied, tokenised).
enum Job {
    Chat(ChatRequest, Reply),
    CountTokens(ChatRequest, mpsc::Sender<Result<usize, LlmError>>),
}

/// A chat model run in-process by llama.cpp.
pub struct LlamaChatModel {
    id: String,
    endpoint: String,
    jobs: Mutex<mpsc::Sender<Job>>,
    last_timings: Arc<Mutex<LlamaTimings>>,
}

fn backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut backend = LlamaBackend::init().map_err(|e| e.to_string())?;
            backend.void_logs();
            Ok(backend)
        })
        .as_ref()
        .map_err(|e| LlmError::Backend(format!("cannot start llama.cpp: {e}")))
}

impl LlamaChatModel {
    /// Loads the model (on a worker thread) and waits until it is ready.
    pub fn load(config: LlamaConfig) -> Result<Self, LlmError> {
        if !config.model_path.is_file() {
            return Err(LlmError::Unavailable(format!(
                "{} does not exist; run `evident models pull NAME` or give the path of a GGUF file",
                config.model_path.display()
            )));
        }
        let id = model_id_for(&config.model_path);
        let endpoint = format!("local:{}", config.model_path.display());
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), LlmError>>();
        let last_timings = Arc::new(Mutex::new(LlamaTimings::default()));
        let worker_id = id.clone();
        let worker_endpoint = endpoint.clone();
        std::thread::Builder::new()
            .name(format!("llama:{id}"))
            .spawn(move || worker(config, worker_id, worker_endpoint, jobs_rx, ready_tx))
            .map_err(|e| LlmError::Backend(format!("cannot start the model thread: {e}")))?;
        ready_rx.recv().map_err(|_| LlmError::Backend("the model thread stopped while loading".into()))??;
        Ok(LlamaChatModel { id, endpoint, jobs: Mutex::new(jobs_tx), last_timings })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Timings of the most recent request.
    pub fn last_timings(&self) -> LlamaTimings {
        *self.last_timings.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers `request` and returns where the time went.
    pub fn chat_with_timings(&self, request: &ChatRequest) -> Result<(ChatResponse, LlamaTimings), LlmError> {
        let (reply_tx, reply_rx) = mpsc::channel();
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Job::Chat(request.clone(), reply_tx))
            .map_err(|_| LlmError::Backend("the model thread has stopped".into()))?;
        let result =
            reply_rx.recv().map_err(|_| LlmError::Backend("the model thread stopped during a request".into()))?;
        if let Ok((_, timings)) = &result {
            *self.last_timings.lock().unwrap_or_else(|e| e.into_inner()) = *timings;
        }
        result
    }
}

impl ChatModel for LlamaChatModel {
    fn model_id(&self) -> &str {
        &self.id
    }
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.chat_with_timings(request).map(|(response, _)| response)
    }
    /// The prompt tokens of `messages` as a request would send them: the
    /// GGUF's chat template with the assistant's turn opened, tokenised.
    fn count_tokens(&self, messages: &[Message]) -> Option<usize> {
        let (reply_tx, reply_rx) = mpsc::channel();
        let request = ChatRequest::new(messages.to_vec());
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).send(Job::CountTokens(request, reply_tx)).ok()?;
        reply_rx.recv().ok()?.ok()
    }
}

/// The model id: the file name without `.gguf`, plus the first 12 hex
/// digits of a hash of its size and name (cheap, and distinguishes
/// re-quantised files of the same name).
fn model_id_for(path: &Path) -> String {
    use sha2::Digest;
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let digest = sha2::Sha256::digest(format!("{name}:{size}").as_bytes());
    format!("{name}@{}", &hex::encode(digest)[..12])
}

fn worker(
    config: LlamaConfig,
    id: String,
    endpoint: String,
    jobs: mpsc::Receiver<Job>,
    ready: mpsc::Sender<Result<(), LlmError>>,
) {
    let setup = (|| {
        let backend = backend()?;
        let model = LlamaModel::load_from_file(backend, &config.model_path, &LlamaModelParams::default())
            .map_err(|e| LlmError::Unavailable(format!("cannot load {}: {e}", config.model_path.display())))?;
        Ok::<_, LlmError>((backend, model))
    })();
    let (backend, model) = match setup {
        Ok(v) => v,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let threads = config
        .threads
        .map(|t| t as i32)
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get() as i32).unwrap_or(2));
    let n_ctx = config.context_size.min(model.n_ctx_train().max(512));
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(config.batch_size)
        .with_n_ubatch(config.batch_size)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let ctx = match model.new_context(backend, params) {
        Ok(ctx) => ctx,
        Err(e) => {
            let _ = ready.send(Err(LlmError::Backend(format!("cannot create a llama.cpp context: {e}"))));
            return;
        }
    };
    let mut engine = Engine {
        config: &config,
        model: &model,
        ctx,
        n_ctx,
        template: model.chat_template(None).ok(),
        cached: Vec::new(),
        tok_env: None,
        id,
        endpoint,
    };
    let _ = ready.send(Ok(()));
    for job in jobs {
        let (request, reply) = match job {
            Job::Chat(request, reply) => (request, reply),
            Job::CountTokens(request, reply) => {
                let count = engine
                    .render_prompt(&request)
                    .map(|prompt| engine.model.vocab().tokenize(prompt.as_bytes(), false, true).len());
                let _ = reply.send(count);
                continue;
            }
        };
        let result = engine.run(&request);
        if result.is_err() {
            // A failed request may leave the KV cache half-written.
            engine.forget_cache();
        }
        let _ = reply.send(result);
    }
}

struct Engine<'m> {
    config: &'m LlamaConfig,
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    n_ctx: u32,
    template: Option<LlamaChatTemplate>,
    /// Tokens whose keys and values are in sequence 0 of the KV cache.
    cached: Vec<LlamaToken>,
    tok_env: Option<toktrie::TokEnv>,
    id: String,
    endpoint: String,
}

impl Engine<'_> {
    fn forget_cache(&mut self) {
        let _ = self.ctx.clear_kv_cache_seq(Some(0), None, None);
        self.cached.clear();
    }

    fn render_prompt(&self, request: &ChatRequest) -> Result<String, LlmError> {
        match &self.template {
            Some(template) => {
                let messages = request
                    .messages
                    .iter()
                    .map(|m| LlamaChatMessage::new(m.role.as_str().to_string(), m.content.clone()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| LlmError::Backend(format!("message not usable by llama.cpp: {e}")))?;
                self.model
                    .apply_chat_template(template, &messages, true)
                    .map_err(|e| LlmError::Backend(format!("chat template of {} failed: {e}", self.id)))
            }
            // A GGUF without a template (a base model): a plain transcript.
            None => {
                let mut text = String::new();
                for m in &request.messages {
                    let who = match m.role {
                        Role::System => "System",
                        Role::User => "User",
                        Role::Assistant => "Assistant",
                    };
                    text.push_str(&format!("{who}: {}\n", m.content));
                }
                text.push_str("Assistant:");
                Ok(text)
            }
        }
    }

    /// The sampler chain for `request`, and beside it, where the request
    /// has a schema and may fast-forward, a copy of the grammar's matcher
    /// that is kept in step with the chain's to find forced tokens.
    fn sampler(&mut self, request: &ChatRequest) -> Result<(LlamaSampler, Option<llguidance::Matcher>), LlmError> {
        // Never put top_k before the grammar (llama-cpp-rs#1082 aborts the
        // process); the grammar comes first and the chooser last.
        let chooser = |request: &ChatRequest| -> Vec<LlamaSampler> {
            if request.temperature <= 0.0 {
                vec![LlamaSampler::greedy()]
            } else {
                let seed = request.seed.unwrap_or(0xE71D) as u32;
                vec![LlamaSampler::temp(request.temperature), LlamaSampler::dist(seed)]
            }
        };
        let mut chain = Vec::new();
        let mut forward = None;
        if let Some(schema) = &request.json_schema {
            let mut schema = bound_strings(schema, self.config.max_string_length);
            // Compact JSON only: with llguidance's default flexible
            // whitespace a small model can emit newlines until max_tokens.
            if let Some(object) = schema.as_object_mut() {
                object.entry("x-guidance").or_insert_with(|| serde_json::json!({ "whitespace_flexible": false }));
            }
            let tok_env = match &self.tok_env {
                Some(env) => env.clone(),
                None => {
                    let env = tokenizer_env(self.model, &self.config.model_path, self.config.fast_forward);
                    self.tok_env.insert(env).clone()
                }
            };
            let factory = llguidance::ParserFactory::new_simple(&tok_env)
                .map_err(|e| LlmError::Backend(format!("llguidance: {e}")))?;
            let grammar = llguidance::api::TopLevelGrammar::from_json_schema(schema);
            let parser = factory.create_parser(grammar);
            if let Err(e) = &parser {
                return Err(LlmError::InvalidSchema(format!("llguidance cannot use the schema: {e}")));
            }
            let matcher = llguidance::Matcher::new(parser);
            if self.config.fast_forward && request.logprobs.is_none() {
                forward = Some(matcher.deep_clone());
            }
            chain.push(LlamaSampler::from(matcher));
        }
        chain.extend(chooser(request));
        Ok((LlamaSampler::chain_simple(chain), forward))
    }

    fn run(&mut self, request: &ChatRequest) -> Result<(ChatResponse, LlamaTimings), LlmError> {
        let started = Instant::now();
        let mut timings = LlamaTimings::default();
        let prompt = self.render_prompt(request)?;
        let tokens = self.model.vocab().tokenize(prompt.as_bytes(), false, true);
        if tokens.is_empty() {
            return Err(LlmError::Backend("the prompt is empty".into()));
        }
        let prompt_len = tokens.len() as u32;
        if prompt_len + 1 >= self.n_ctx {
            return Err(LlmError::ContextOverflow { prompt_tokens: prompt_len, context_size: self.n_ctx });
        }
        // The longest prefix already in the KV cache; at least the last
        // prompt token is decoded again so that its logits exist.
        let mut keep = if self.config.prefix_reuse {
            self.cached.iter().zip(&tokens).take_while(|(a, b)| a == b).count()
        } else {
            0
        };
        keep = keep.min(tokens.len() - 1);
        if keep < self.cached.len() {
            let cleared = self
                .ctx
                .clear_kv_cache_seq(Some(0), Some(keep as u32), None)
                .map_err(|e| LlmError::Backend(format!("KV cache: {e}")))?;
            if !cleared {
                self.forget_cache();
                keep = 0;
            }
            self.cached.truncate(keep);
        }
        timings.prompt_tokens = prompt_len;
        timings.reused_prompt_tokens = keep as u32;

        let (mut sampler, mut forward) = self.sampler(request)?;
        let batch_size = self.config.batch_size.max(1) as usize;
        let mut batch = LlamaBatch::new(batch_size, 1);
        let rest = &tokens[keep..];
        let decode_started = Instant::now();
        for (chunk_index, chunk) in rest.chunks(batch_size).enumerate() {
            batch.clear();
            let first_pos = keep + chunk_index * batch_size;
            for (i, token) in chunk.iter().enumerate() {
                let pos = first_pos + i;
                let last = pos + 1 == tokens.len();
                batch.add(*token, pos as i32, &[0], last).map_err(|e| LlmError::Backend(format!("batch: {e}")))?;
            }
            self.ctx
                .decode(&mut batch)
                .map_err(|e| LlmError::Backend(format!("llama.cpp could not read the prompt: {e}")))?;
            self.cached.extend_from_slice(chunk);
        }
        timings.prompt_decode_ms = ms(decode_started);

        let budget = request.max_tokens.min(self.n_ctx - prompt_len - 1);
        let mut text_bytes: Vec<u8> = Vec::new();
        let mut finish = FinishReason::Length;
        let mut generated = 0u32;
        let mut logits_index = batch.n_tokens() - 1;
        let mut token_logprobs: Vec<TokenLogprob> = Vec::new();
        while generated < budget {
            // The model's own distribution, read before the sampler chain
            // (grammar, temperature) sees the logits.
            let position = request.logprobs.map(|want| {
                let (log_norm, top) = log_softmax_top(self.ctx.get_logits_ith(logits_index), want.top as usize);
                (log_norm, top)
            });
            let sample_started = Instant::now();
            // `sample` also accepts the token in every sampler of the chain.
            let token = sampler.sample(&self.ctx, logits_index);
            timings.sampling_ms += ms(sample_started);
            if let (Some((log_norm, top)), false) = (position, self.model.vocab().is_eog(token)) {
                let logits = self.ctx.get_logits_ith(logits_index);
                let logit = logits.get(token.0 as usize).copied().unwrap_or(f32::NEG_INFINITY);
                let piece = |t: LlamaToken| {
                    String::from_utf8_lossy(&self.model.vocab().token_to_piece(t, false, None)).into_owned()
                };
                token_logprobs.push(TokenLogprob {
                    token: piece(token),
                    logprob: logit - log_norm,
                    top: top
                        .into_iter()
                        .map(|(id, logprob)| TopLogprob { token: piece(LlamaToken::new(id as i32)), logprob })
                        .collect(),
                });
            }
            if self.model.vocab().is_eog(token) {
                finish = FinishReason::Stop;
                break;
            }
            generated += 1;
            text_bytes.extend(self.model.vocab().token_to_piece(token, false, None));
            if cut_at_stop(&mut text_bytes, &request.stop) {
                finish = FinishReason::Stop;
                break;
            }
            if generated >= budget {
                break;
            }
            // The sampled token, then any the grammar now forces.
            let forced = match forward.as_mut() {
                // One batch holds the sampled token and what follows it.
                Some(matcher) => forced_after(matcher, token, ((budget - generated) as usize).min(batch_size - 1)),
                None => Vec::new(),
            };
            if forward.as_ref().is_some_and(|m| m.is_error()) {
                forward = None;
            }
            if !forced.is_empty() {
                sampler.accept_many(&forced);
                for t in &forced {
                    text_bytes.extend(self.model.vocab().token_to_piece(*t, false, None));
                }
                generated += forced.len() as u32;
                timings.forced_tokens += forced.len() as u32;
                if cut_at_stop(&mut text_bytes, &request.stop) {
                    finish = FinishReason::Stop;
                    break;
                }
                if generated >= budget {
                    break;
                }
            }
            batch.clear();
            let first = self.cached.len();
            let step: Vec<LlamaToken> = std::iter::once(token).chain(forced).collect();
            for (i, t) in step.iter().enumerate() {
                let last = i + 1 == step.len();
                batch.add(*t, (first + i) as i32, &[0], last).map_err(|e| LlmError::Backend(format!("batch: {e}")))?;
            }
            let decode_started = Instant::now();
            self.ctx.decode(&mut batch).map_err(|e| LlmError::Backend(format!("llama.cpp decode failed: {e}")))?;
            timings.generation_decode_ms += ms(decode_started);
            self.cached.extend_from_slice(&step);
            logits_index = batch.n_tokens() - 1;
        }
        timings.completion_tokens = generated;
        timings.total_ms = ms(started);
        let response = ChatResponse {
            text: String::from_utf8_lossy(&text_bytes).into_owned(),
            prompt_tokens: prompt_len,
            completion_tokens: generated,
            finish_reason: finish,
            model: self.id.clone(),
            endpoint: self.endpoint.clone(),
            reused_prompt_tokens: keep as u32,
            logprobs: request.logprobs.map(|_| token_logprobs),
        };
        Ok((response, timings))
    }
}

/// llguidance's view of the model's tokenizer: the token trie llama-cpp-2
/// builds, and llama.cpp's own tokenizer for the bytes a grammar forces,
/// so that fast-forward tokens are the model's canonical tokenisation. The
/// tokenizer is a vocabulary-only load of the same GGUF, owned here,
/// since llguidance keeps its environment for as long as it likes.
/// llama-cpp-2's environment tokenises greedily and says it is not
/// canonical, so llguidance forces no tokens with it.
struct CanonicalTokEnv {
    trie: toktrie::TokTrie,
    vocabulary: LlamaModel,
}

impl toktrie::TokenizerEnv for CanonicalTokEnv {
    fn tok_trie(&self) -> &toktrie::TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<toktrie::TokenId> {
        self.vocabulary.vocab().tokenize(s, false, false).into_iter().map(|t| t.0 as u32).collect()
    }
}

/// The tokenizer environment of `model` for llguidance: canonical (see
/// [`CanonicalTokEnv`]) where `fast_forward` is on and the vocabulary
/// loads, else llama-cpp-2's, as without fast-forward.
fn tokenizer_env(model: &LlamaModel, path: &Path, fast_forward: bool) -> toktrie::TokEnv {
    let approximate = LlamaSampler::llguidance_tok_env(model);
    if !fast_forward {
        return approximate;
    }
    let params = LlamaModelParams::default().with_vocab_only(true);
    match backend().ok().and_then(|b| LlamaModel::load_from_file(b, path, &params).ok()) {
        Some(vocabulary) => Arc::new(CanonicalTokEnv { trie: approximate.tok_trie().clone(), vocabulary }),
        None => approximate,
    }
}

/// The tokens the grammar forces after `sampled` (at most `room`; bytes
/// of the answer, never an end of generation), consumed into `matcher`,
/// which holds the same grammar as the sampler chain and has seen every
/// token it has. An empty list where nothing is forced or the matcher
/// fails (the caller then stops fast-forwarding).
fn forced_after(matcher: &mut llguidance::Matcher, sampled: LlamaToken, room: usize) -> Vec<LlamaToken> {
    if matcher.consume_token(sampled.0 as u32).is_err() || matcher.is_stopped() {
        return Vec::new();
    }
    let mut forced = matcher.compute_ff_tokens();
    forced.truncate(room);
    if forced.is_empty() || matcher.consume_tokens(&forced).is_err() {
        return Vec::new();
    }
    forced.into_iter().map(|t| LlamaToken::new(t as i32)).collect()
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// The log of the softmax's normaliser over `logits` (log-sum-exp) and the
/// `k` most likely token ids with their log-probabilities, most likely
/// first. One pass over the vocabulary plus a k-sized insertion list.
fn log_softmax_top(logits: &[f32], k: usize) -> (f32, Vec<(usize, f32)>) {
    let max = logits.iter().copied().filter(|l| l.is_finite()).fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return (f32::INFINITY, Vec::new());
    }
    let mut sum = 0.0f64;
    let mut top: Vec<(usize, f32)> = Vec::with_capacity(k + 1);
    for (id, &logit) in logits.iter().enumerate() {
        if !logit.is_finite() {
            continue;
        }
        sum += f64::from(logit - max).exp();
        if k > 0 && (top.len() < k || logit > top[top.len() - 1].1) {
            let at = top.partition_point(|&(_, l)| l >= logit);
            top.insert(at, (id, logit));
            top.truncate(k);
        }
    }
    let log_norm = max + sum.ln() as f32;
    (log_norm, top.into_iter().map(|(id, logit)| (id, logit - log_norm)).collect())
}

/// Where the first stop string begins in `text`, if any.
/// Cuts `text` at the earliest stop string; true when there was one.
fn cut_at_stop(text: &mut Vec<u8>, stops: &[String]) -> bool {
    match stop_position(text, stops) {
        Some(cut) => {
            text.truncate(cut);
            true
        }
        None => false,
    }
}

fn stop_position(text: &[u8], stops: &[String]) -> Option<usize> {
    stops.iter().filter(|s| !s.is_empty()).filter_map(|s| text.windows(s.len()).position(|w| w == s.as_bytes())).min()
}

/// A copy of `schema` in which every `"type": "string"` without a
/// `maxLength` (and without an `enum`/`const`/`format`) gets `max_len`.
pub fn bound_strings(schema: &serde_json::Value, max_len: u32) -> serde_json::Value {
    use serde_json::Value;
    match schema {
        Value::Object(map) => {
            let mut out: serde_json::Map<String, Value> =
                map.iter().map(|(k, v)| (k.clone(), bound_strings(v, max_len))).collect();
            let is_string = match map.get("type") {
                Some(Value::String(t)) => t == "string",
                Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
                _ => false,
            };
            let bounded = ["maxLength", "enum", "const", "format", "pattern"].iter().any(|k| map.contains_key(*k));
            if is_string && !bounded {
                out.insert("maxLength".into(), Value::from(max_len));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| bound_strings(v, max_len)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unbounded_strings_get_max_length() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "string"},
            "b": {"type": "string", "maxLength": 5},
            "c": {"type": "string", "enum": ["x"]},
            "d": {"type": "array", "items": {"type": "string"}}
        }});
        let out = bound_strings(&schema, 100);
        assert_eq!(out["properties"]["a"]["maxLength"], 100);
        assert_eq!(out["properties"]["b"]["maxLength"], 5);
        assert!(out["properties"]["c"].get("maxLength").is_none());
        assert_eq!(out["properties"]["d"]["items"]["maxLength"], 100);
    }

    #[test]
    fn log_softmax_top_keeps_the_k_most_likely_normalised() {
        let logits = [1.0f32, 3.0, f32::NEG_INFINITY, 2.0, 0.5];
        let (log_norm, top) = log_softmax_top(&logits, 2);
        let expected_norm = [1.0f64, 3.0, 2.0, 0.5].iter().map(|l| l.exp()).sum::<f64>().ln() as f32;
        assert!((log_norm - expected_norm).abs() < 1e-5, "{log_norm} vs {expected_norm}");
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 3]);
        assert!((top[0].1 - (3.0 - expected_norm)).abs() < 1e-5);
        let total: f32 = logits.iter().filter(|l| l.is_finite()).map(|l| (l - log_norm).exp()).sum();
        assert!((total - 1.0).abs() < 1e-5, "probabilities sum to {total}");
        assert!(log_softmax_top(&logits, 0).1.is_empty());
    }

    #[test]
    fn stop_strings_cut_at_the_earliest() {
        assert_eq!(stop_position(b"abc END x STOP", &["STOP".into(), "END".into()]), Some(4));
        assert_eq!(stop_position(b"abc", &["".into()]), None);
    }
}
