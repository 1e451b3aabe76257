//! The embedded provider: a GGUF model run in-process by llama.cpp
//! (`llama-cpp-2`). Uses the GGUF's own chat template and tokenizer;
//! JSON-schema requests are constrained with llguidance. One worker thread
//! owns the model and one context; requests queue on a channel. The
//! context has [`LlamaConfig::parallel`] sequences (slots), one request in
//! each, and every step decodes the next tokens of all of them in one
//! batch. Each slot keeps the KV cache of its previous request, and a new
//! request goes to the free slot whose cache shares the longest prefix
//! with it, re-decoding only the tokens after that prefix (a patient
//! record first, then a varying criterion, costs little more than the
//! criterion).

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
    /// Requests answered at once, each in its own sequence of the KV
    /// cache (with its own `context_size` window): concurrent callers'
    /// tokens are decoded together in one batch (continuous batching),
    /// which on a CPU costs little more than one sequence's. 1: one
    /// request at a time, as builds before it did.
    #[serde(default = "default_parallel")]
    pub parallel: u32,
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
fn default_parallel() -> u32 {
    1
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
            parallel: default_parallel(),
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
    /// Decodes of this request's tokens that held another request's
    /// tokens too ([`LlamaConfig::parallel`]).
    pub shared_decodes: u32,
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
    parallel: usize,
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
        let parallel = config.parallel.max(1) as usize;
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
        Ok(LlamaChatModel { id, parallel, endpoint, jobs: Mutex::new(jobs_tx), last_timings })
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
    /// [`LlamaConfig::parallel`]: its slots.
    fn parallelism(&self) -> usize {
        self.parallel
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
    let slots = config.parallel.max(1);
    // Each sequence has its own window of `n_ctx` tokens (llama.cpp's
    // non-unified KV cache: one stream per sequence).
    let n_ctx = config.context_size.min(model.n_ctx_train().max(512));
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx * slots))
        .with_n_seq_max(slots)
        .with_kv_unified(false)
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
        slots: (0..slots as i32).map(|seq| Slot { seq, cached: Vec::new(), work: None }).collect(),
        batch: LlamaBatch::new(config.batch_size.max(1) as usize, 1),
        tok_env: None,
        id,
        endpoint,
    };
    let _ = ready.send(Ok(()));
    let mut open = true;
    while open || engine.busy() {
        // Block for a job only when nothing is being decoded; otherwise
        // take what has arrived, as long as a sequence is free for it.
        if !engine.busy() {
            match jobs.recv() {
                Ok(job) => engine.admit(job),
                Err(_) => break,
            }
        }
        while open && engine.slots.iter().any(|s| s.work.is_none()) {
            match jobs.try_recv() {
                Ok(job) => engine.admit(job),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => open = false,
            }
        }
        engine.step();
    }
}

struct Engine<'m> {
    config: &'m LlamaConfig,
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    /// The window of one sequence (prompt + answer).
    n_ctx: u32,
    template: Option<LlamaChatTemplate>,
    /// One per sequence of the KV cache ([`LlamaConfig::parallel`]).
    slots: Vec<Slot>,
    batch: LlamaBatch<'m>,
    tok_env: Option<toktrie::TokEnv>,
    id: String,
    endpoint: String,
}

/// The fewest prompt tokens worth copying from another slot's KV cache
/// rather than decoding them (a copy moves the whole sequence).
const MIN_COPIED_PREFIX: usize = 64;

/// A sequence of the KV cache and the request it is answering, if any.
struct Slot {
    seq: i32,
    /// Tokens whose keys and values are in this sequence of the KV cache.
    cached: Vec<LlamaToken>,
    work: Option<Work>,
}

/// A request being answered in a slot.
struct Work {
    request: ChatRequest,
    reply: Reply,
    started: Instant,
    /// The prompt's tokens; decoded while `cached` is shorter.
    tokens: Vec<LlamaToken>,
    reused: usize,
    /// The slot reading this prompt's first tokens as part of its own, and
    /// how many: this slot decodes nothing until it can copy them.
    waiting: Option<(usize, usize)>,
    sampler: LlamaSampler,
    /// A matcher of the request's grammar kept in step with the sampler's,
    /// to find the tokens it forces ([`LlamaConfig::fast_forward`]).
    forward: Option<llguidance::Matcher>,
    budget: u32,
    /// Generated tokens waiting to be decoded: the last sampled one and
    /// any the grammar forces after it.
    pending: Vec<LlamaToken>,
    generated: u32,
    text_bytes: Vec<u8>,
    token_logprobs: Vec<TokenLogprob>,
    timings: LlamaTimings,
}

/// What one slot put into a batch.
struct Member {
    slot: usize,
    tokens: usize,
    prompt: bool,
    /// The batch index of the logits to choose its next token from.
    logits: Option<i32>,
}

impl Engine<'_> {
    fn busy(&self) -> bool {
        self.slots.iter().any(|s| s.work.is_some())
    }

    fn admit(&mut self, job: Job) {
        match job {
            Job::CountTokens(request, reply) => {
                let count = self
                    .render_prompt(&request)
                    .map(|prompt| self.model.vocab().tokenize(prompt.as_bytes(), false, true).len());
                let _ = reply.send(count);
            }
            Job::Chat(request, reply) => {
                if let Err(e) = self.start(request, &reply) {
                    let _ = reply.send(Err(e));
                }
            }
        }
    }

    fn forget_cache(&mut self, slot: usize) {
        let slot = &mut self.slots[slot];
        let _ = self.ctx.clear_kv_cache_seq(Some(slot.seq as u32), None, None);
        slot.cached.clear();
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

    /// Puts `request` into the free slot whose KV cache shares the longest
    /// prefix with its prompt; at least the last prompt token is decoded
    /// again so that its logits exist.
    fn start(&mut self, request: ChatRequest, reply: &Reply) -> Result<(), LlmError> {
        let started = Instant::now();
        let prompt = self.render_prompt(&request)?;
        let tokens = self.model.vocab().tokenize(prompt.as_bytes(), false, true);
        if tokens.is_empty() {
            return Err(LlmError::Backend("the prompt is empty".into()));
        }
        let prompt_len = tokens.len() as u32;
        if prompt_len + 1 >= self.n_ctx {
            return Err(LlmError::ContextOverflow { prompt_tokens: prompt_len, context_size: self.n_ctx });
        }
        let (sampler, forward) = self.sampler(&request)?;
        let shared = |slot: &Slot| common_prefix(&slot.cached, &tokens);
        let Some((index, mut keep)) = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.work.is_none())
            .map(|(i, s)| (i, if self.config.prefix_reuse { shared(s) } else { 0 }))
            .max_by_key(|&(i, keep)| (keep, std::cmp::Reverse(i)))
        else {
            return Err(LlmError::Backend("no free sequence in the KV cache".into()));
        };
        keep = keep.min(tokens.len() - 1);
        // A longer prefix that another slot holds, or is reading as part
        // of its own prompt, is copied from it rather than decoded again.
        let elsewhere = self
            .slots
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != index && self.config.prefix_reuse)
            .map(|(i, s)| {
                let reading = s.work.as_ref().map_or(0, |w| common_prefix(&w.tokens, &tokens));
                (i, shared(s).max(reading).min(tokens.len() - 1))
            })
            .max_by_key(|&(i, shared)| (shared, std::cmp::Reverse(i)))
            .filter(|&(_, shared)| shared >= keep + MIN_COPIED_PREFIX);
        let mut waiting = None;
        if let Some((source, shared)) = elsewhere {
            if self.slots[source].cached.len() >= shared {
                keep = self.copy_prefix(source, index, shared)?;
            } else {
                waiting = Some((source, shared));
            }
        }
        if keep < self.slots[index].cached.len() {
            let seq = self.slots[index].seq as u32;
            let cleared = self
                .ctx
                .clear_kv_cache_seq(Some(seq), Some(keep as u32), None)
                .map_err(|e| LlmError::Backend(format!("KV cache: {e}")))?;
            if !cleared {
                self.forget_cache(index);
                keep = 0;
            }
            self.slots[index].cached.truncate(keep);
        }
        let timings =
            LlamaTimings { prompt_tokens: prompt_len, reused_prompt_tokens: keep as u32, ..Default::default() };
        self.slots[index].work = Some(Work {
            budget: request.max_tokens.min(self.n_ctx - prompt_len - 1),
            request,
            reply: reply.clone(),
            started,
            tokens,
            reused: keep,
            waiting,
            sampler,
            forward,
            pending: Vec::new(),
            generated: 0,
            text_bytes: Vec::new(),
            token_logprobs: Vec::new(),
            timings,
        });
        Ok(())
    }

    /// Copies the first `len` tokens of slot `from`'s KV cache into slot
    /// `to` (llama.cpp copies a whole sequence between streams; the copy
    /// is then cut); returns how many tokens `to` now holds.
    fn copy_prefix(&mut self, from: usize, to: usize, len: usize) -> Result<usize, LlmError> {
        let (source, target) = (self.slots[from].seq, self.slots[to].seq);
        let kv = |e| LlmError::Backend(format!("KV cache: {e}"));
        self.ctx.copy_kv_cache_seq(source, target, None, None).map_err(kv)?;
        self.slots[to].cached = self.slots[from].cached.clone();
        if !self.ctx.clear_kv_cache_seq(Some(target as u32), Some(len as u32), None).map_err(kv)? {
            self.forget_cache(to);
            return Ok(0);
        }
        self.slots[to].cached.truncate(len);
        Ok(len)
    }

    /// Slots waiting for another's prompt prefix copy it once it is read;
    /// a slot whose source no longer holds or reads that prefix (its
    /// request failed or was replaced) reads its prompt itself.
    fn end_waits(&mut self) {
        for index in 0..self.slots.len() {
            let Some((source, len)) = self.slots[index].work.as_ref().and_then(|w| w.waiting) else { continue };
            let tokens = self.slots[index].work.as_ref().map(|w| &w.tokens[..len]).unwrap_or_default();
            let src = &self.slots[source];
            let held = src.cached.len() >= len && src.cached[..len] == *tokens;
            let reading = src.work.as_ref().is_some_and(|w| w.tokens.starts_with(tokens));
            if !held && reading {
                continue;
            }
            let copied = if held { self.copy_prefix(source, index, len) } else { Ok(0) };
            match copied {
                Ok(copied) => {
                    let slot = &mut self.slots[index];
                    // Not copied: the slot reads its prompt after what it
                    // held when it started (its cache is unchanged).
                    if let Some(work) = slot.work.as_mut() {
                        work.waiting = None;
                        if copied > 0 {
                            work.reused = copied;
                            work.timings.reused_prompt_tokens = copied as u32;
                        }
                    }
                }
                Err(e) => self.fail(index, e),
            }
        }
    }

    /// One `llama_decode` over every busy slot: each generating slot's
    /// pending tokens first, then as much of the prompts still to be read
    /// as the batch holds; then each slot whose logits are ready chooses
    /// its next token. The decode time counts for every request in the
    /// batch.
    fn step(&mut self) {
        self.end_waits();
        let capacity = self.config.batch_size.max(1) as usize;
        self.batch.clear();
        let mut members: Vec<Member> = Vec::new();
        let mut added: Result<(), String> = Ok(());
        for generating in [true, false] {
            for (index, slot) in self.slots.iter().enumerate() {
                let Some(work) = &slot.work else { continue };
                let first = slot.cached.len();
                let (tokens, prompt_end) = if generating {
                    (&work.pending[..], None)
                } else if first < work.tokens.len() && work.waiting.is_none() {
                    (&work.tokens[first..], Some(work.tokens.len()))
                } else {
                    continue;
                };
                let room = capacity - self.batch.n_tokens() as usize;
                let take = if generating {
                    if tokens.is_empty() || tokens.len() > room {
                        continue;
                    }
                    tokens.len()
                } else {
                    tokens.len().min(room)
                };
                if take == 0 {
                    continue;
                }
                let mut logits = None;
                for (i, token) in tokens[..take].iter().enumerate() {
                    let pos = first + i;
                    let last = match prompt_end {
                        Some(end) => pos + 1 == end,
                        None => i + 1 == take,
                    };
                    if let Err(e) = self.batch.add(*token, pos as i32, &[slot.seq], last) {
                        added = Err(format!("batch: {e}"));
                    }
                    if last {
                        logits = Some(self.batch.n_tokens() - 1);
                    }
                }
                members.push(Member { slot: index, tokens: take, prompt: !generating, logits });
            }
        }
        if members.is_empty() {
            return;
        }
        let decode_started = Instant::now();
        let decoded = added.and_then(|()| {
            self.ctx.decode(&mut self.batch).map_err(|e| match members.iter().any(|m| m.prompt) {
                true => format!("llama.cpp could not read the prompt: {e}"),
                false => format!("llama.cpp decode failed: {e}"),
            })
        });
        let elapsed = ms(decode_started);
        let shared = u32::from(members.len() > 1);
        if let Err(e) = decoded {
            // A failed decode may leave the KV cache half-written.
            for member in &members {
                self.fail(member.slot, LlmError::Backend(e.clone()));
            }
            return;
        }
        for member in members {
            let slot = &mut self.slots[member.slot];
            let Some(work) = slot.work.as_mut() else { continue };
            work.timings.shared_decodes += shared;
            if member.prompt {
                let from = slot.cached.len();
                slot.cached.extend_from_slice(&work.tokens[from..from + member.tokens]);
                work.timings.prompt_decode_ms += elapsed;
            } else {
                slot.cached.append(&mut work.pending);
                work.timings.generation_decode_ms += elapsed;
            }
            if let Some(logits) = member.logits {
                match self.choose(member.slot, logits) {
                    Ok(Some(finish)) => self.finish(member.slot, finish),
                    Ok(None) => {}
                    Err(e) => self.fail(member.slot, e),
                }
            }
        }
    }

    /// Chooses slot `index`'s next token from the logits at `logits`:
    /// the reason generation ends, or `None` with the tokens to decode
    /// next in `pending`.
    fn choose(&mut self, index: usize, logits: i32) -> Result<Option<FinishReason>, LlmError> {
        let batch_size = self.config.batch_size.max(1) as usize;
        let model = self.model;
        let vocab = model.vocab();
        let ctx = &self.ctx;
        let work = self.slots[index].work.as_mut().ok_or_else(|| LlmError::Backend("an empty slot".into()))?;
        let request = &work.request;
        if work.generated >= work.budget {
            return Ok(Some(FinishReason::Length));
        }
        // The model's own distribution, read before the sampler chain
        // (grammar, temperature) sees the logits.
        let position = request.logprobs.map(|want| log_softmax_top(ctx.get_logits_ith(logits), want.top as usize));
        let sample_started = Instant::now();
        // `sample` also accepts the token in every sampler of the chain.
        let token = work.sampler.sample(ctx, logits);
        work.timings.sampling_ms += ms(sample_started);
        if let (Some((log_norm, top)), false) = (position, vocab.is_eog(token)) {
            let row = ctx.get_logits_ith(logits);
            let logit = row.get(token.0 as usize).copied().unwrap_or(f32::NEG_INFINITY);
            let piece = |t: LlamaToken| String::from_utf8_lossy(&vocab.token_to_piece(t, false, None)).into_owned();
            work.token_logprobs.push(TokenLogprob {
                token: piece(token),
                logprob: logit - log_norm,
                top: top
                    .into_iter()
                    .map(|(id, logprob)| TopLogprob { token: piece(LlamaToken::new(id as i32)), logprob })
                    .collect(),
            });
        }
        if vocab.is_eog(token) {
            return Ok(Some(FinishReason::Stop));
        }
        work.generated += 1;
        work.text_bytes.extend(vocab.token_to_piece(token, false, None));
        if cut_at_stop(&mut work.text_bytes, &request.stop) {
            return Ok(Some(FinishReason::Stop));
        }
        if work.generated >= work.budget {
            return Ok(Some(FinishReason::Length));
        }
        // The sampled token, then any the grammar now forces.
        let forced = match work.forward.as_mut() {
            // One batch holds the sampled token and what follows it.
            Some(matcher) => {
                forced_after(matcher, token, ((work.budget - work.generated) as usize).min(batch_size - 1))
            }
            None => Vec::new(),
        };
        if work.forward.as_ref().is_some_and(|m| m.is_error()) {
            work.forward = None;
        }
        if !forced.is_empty() {
            work.sampler.accept_many(&forced);
            for t in &forced {
                work.text_bytes.extend(vocab.token_to_piece(*t, false, None));
            }
            work.generated += forced.len() as u32;
            work.timings.forced_tokens += forced.len() as u32;
            if cut_at_stop(&mut work.text_bytes, &request.stop) {
                return Ok(Some(FinishReason::Stop));
            }
            if work.generated >= work.budget {
                return Ok(Some(FinishReason::Length));
            }
        }
        work.pending = std::iter::once(token).chain(forced).collect();
        Ok(None)
    }

    /// Answers slot `index`'s request; the slot keeps its KV cache.
    fn finish(&mut self, index: usize, finish_reason: FinishReason) {
        let Some(work) = self.slots[index].work.take() else { return };
        let mut timings = work.timings;
        timings.completion_tokens = work.generated;
        timings.total_ms = ms(work.started);
        let response = ChatResponse {
            text: String::from_utf8_lossy(&work.text_bytes).into_owned(),
            prompt_tokens: timings.prompt_tokens,
            completion_tokens: work.generated,
            finish_reason,
            model: self.id.clone(),
            endpoint: self.endpoint.clone(),
            reused_prompt_tokens: work.reused as u32,
            logprobs: work.request.logprobs.map(|_| work.token_logprobs),
        };
        let _ = work.reply.send(Ok((response, timings)));
    }

    /// Answers slot `index`'s request with `error` and forgets the slot's
    /// KV cache, which a failed request may have left half-written.
    fn fail(&mut self, index: usize, error: LlmError) {
        if let Some(work) = self.slots[index].work.take() {
            let _ = work.reply.send(Err(error));
        }
        self.forget_cache(index);
    }
}

/// How many tokens `a` and `b` share from the start.
fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(a, b)| a == b).count()
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
