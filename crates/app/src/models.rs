//! Every model a job uses is built here, so the same rules hold whichever
//! front end asks: chat models come from the `[llm]` configuration (an
//! embedded GGUF, a configured server, or an OpenAI-compatible endpoint),
//! always wrapped in the recorder (audit trail, cache, price), and the
//! privacy guard is part of every HTTP provider: a request that carries
//! patient text goes to a non-loopback endpoint only when the user allowed
//! it. The MiniLM embedder comes from the folder the request, the
//! configuration or the model cache names.

use std::path::PathBuf;
use std::sync::Arc;

use evident_embed::{EmbedderConfig, MiniLmEmbedder};
use evident_llm::{ChatModel, Embedder};
use evident_recorder::RecordingModel;
use evident_store::SectionFilter;

use crate::error::{AppError, Result};
use crate::progress::{ProgressEvent, ProgressSink};
use crate::session::{lock, Session, SharedStore};

/// Which chat model a job uses. `model` and `endpoint` exclude each other;
/// with neither, the configured default model is used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    /// A known model, a GGUF path, or a name under `[llm.models]`.
    pub model: Option<String>,
    /// An OpenAI-compatible base URL.
    pub endpoint: Option<String>,
    /// The model name sent to `endpoint`.
    pub endpoint_model: String,
    /// Patient text may reach a non-loopback endpoint.
    pub allow_remote: bool,
}

impl Default for ModelChoice {
    fn default() -> Self {
        ModelChoice { model: None, endpoint: None, endpoint_model: "default".into(), allow_remote: false }
    }
}

impl ModelChoice {
    /// Whether answers may come from (and go to) the model cache. The cache
    /// knows a model by its id, and an endpoint's id is the model name sent
    /// to it: under the unnamed "default" (which a llama.cpp server
    /// ignores, answering with whatever weights it loaded), two servers'
    /// or two loads' answers would share one id, so they are never cached.
    /// Name the model (`endpoint_model`) to cache its answers.
    pub fn cacheable(&self) -> bool {
        self.endpoint.is_none() || self.endpoint_model != ModelChoice::default().endpoint_model
    }

    /// The embedded or configured model called `name`.
    pub fn named(name: impl Into<String>) -> ModelChoice {
        ModelChoice { model: Some(name.into()), ..ModelChoice::default() }
    }

    /// A model behind an OpenAI-compatible `endpoint`.
    pub fn endpoint(url: impl Into<String>, model: impl Into<String>) -> ModelChoice {
        ModelChoice { endpoint: Some(url.into()), endpoint_model: model.into(), ..ModelChoice::default() }
    }

    /// Whether the choice names a model at all (else the default is meant).
    pub fn is_set(&self) -> bool {
        self.model.is_some() || self.endpoint.is_some()
    }
}

/// Where the embedding model is: a folder, or else the configured or
/// cached one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmbedderChoice {
    /// A folder holding model.safetensors, tokenizer.json and config.json.
    pub model_dir: Option<PathBuf>,
}

impl Session {
    /// Builds the chat model `choice` names, recording its calls into the
    /// model run `run_id` (cached unless `use_cache` is false, or the
    /// choice is an endpoint whose model is not named: see
    /// [`ModelChoice::cacheable`]).
    pub fn chat_model(&self, choice: &ModelChoice, run_id: &str, use_cache: bool) -> Result<RecordingModel> {
        let llm = &self.config().llm;
        let (name, inner) = self.provider(choice)?;
        let price = llm.price_for(&name, inner.model_id());
        let cache = llm.cache && use_cache && choice.cacheable();
        Ok(RecordingModel::new(inner, self.store()?, run_id).with_cache(cache).with_price(price))
    }

    /// The provider behind `choice`, unrecorded; only this module and the
    /// model server use it. Opened once per session and then shared.
    fn provider(&self, choice: &ModelChoice) -> Result<(String, Arc<dyn ChatModel>)> {
        let key = format!("{choice:?}");
        // Held while opening, so that threads asking at once load it once.
        let mut providers = self.providers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(opened) = providers.get(&key) {
            return Ok(opened.clone());
        }
        let opened = self.open_provider(choice)?;
        providers.insert(key, opened.clone());
        Ok(opened)
    }

    fn open_provider(&self, choice: &ModelChoice) -> Result<(String, Arc<dyn ChatModel>)> {
        let llm = &self.config().llm;
        match (&choice.model, &choice.endpoint) {
            (Some(model), Some(endpoint)) => {
                Err(AppError::Input(format!("name either a model ({model}) or an endpoint ({endpoint}), not both")))
            }
            (_, Some(url)) => Ok((url.clone(), llm.open_endpoint(url, &choice.endpoint_model, choice.allow_remote)?)),
            (model, None) => {
                let name = model.clone().unwrap_or_else(|| llm.default_model_name());
                let opened = llm.open_chat_model(&name, choice.allow_remote)?;
                Ok((name, opened))
            }
        }
    }

    /// The local chat models to serve over HTTP, by name (default: the
    /// default model). Serving is not recorded: the caller of the server
    /// records its own calls.
    pub fn local_chat_models(&self, names: &[String]) -> Result<Vec<(String, Arc<dyn ChatModel>)>> {
        let llm = &self.config().llm;
        let names = if names.is_empty() { vec![llm.default_model_name()] } else { names.to_vec() };
        names
            .into_iter()
            .map(|name| {
                let model = llm.open_chat_model(&name, false)?;
                Ok((name, model))
            })
            .collect()
    }

    /// Starts a model run (the audit trail of one job's calls).
    pub fn begin_model_run(&self, label: &str) -> Result<String> {
        Ok(lock(&self.store()?).begin_model_run(label)?)
    }

    /// Ends a model run.
    pub fn finish_model_run(&self, run_id: &str) -> Result<()> {
        Ok(lock(&self.store()?).finish_model_run(run_id)?)
    }

    /// all-MiniLM-L6-v2 from `choice`'s folder, else `[retrieval]
    /// model_dir`, else the model cache.
    pub fn embedder(&self, choice: &EmbedderChoice) -> Result<MiniLmEmbedder> {
        let dir = choice
            .model_dir
            .clone()
            .or_else(|| self.config().retrieval.model_dir.clone())
            .unwrap_or_else(evident_embed::default_model_dir);
        Ok(MiniLmEmbedder::load(&dir, EmbedderConfig::default())?)
    }
}

/// Embeds the sections `filter` admits that have no vectors from
/// `embedder` yet, reporting progress. Returns how many were embedded.
pub fn embed_missing(
    store: &SharedStore,
    embedder: &dyn Embedder,
    filter: &SectionFilter,
    batch_size: usize,
    progress: &dyn ProgressSink,
) -> Result<usize> {
    let mut store = lock(store);
    let done = evident_retrieve::embed_missing(&mut store, embedder, filter, batch_size, &mut |done, total| {
        progress.report(ProgressEvent::Embedding { done, total })
    });
    progress.report(ProgressEvent::EmbeddingFinished);
    Ok(done?)
}
