//! The `[llm]` section of `evident.toml`, typed, and how a model name
//! becomes a [`ChatModel`]. Example:
//!
//! ```toml
//! [llm]
//! default_model = "qwen2.5-coder-0.5b-instruct"   # known model, GGUF path, or a name below
//! allow_remote = false        # patient text only to loopback endpoints
//! cache = true
//! repair_attempts = 2
//! threads = 2
//! context_size = 4096
//! fast_forward = true         # embedded model: batch the tokens a schema forces
//! parallel = 1                # embedded model: requests decoded together (slots)
//! prompts_dir = "prompts"     # overrides built-in templates of the same name
//!
//! [llm.models.vllm]
//! kind = "openai"
//! endpoints = ["http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"]
//! model = "Qwen/Qwen2.5-7B-Instruct"
//!
//! [llm.models.gpt4o]          # for text that is not patient data (criteria)
//! kind = "openai"
//! endpoints = ["https://api.openai.com/v1"]
//! model = "gpt-4o"
//! api_key_env = "OPENAI_API_KEY"
//!
//! [llm.prices."openai:gpt-4o"]
//! prompt_usd_per_million = 2.5
//! completion_usd_per_million = 10.0
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::chat::ChatModel;
use crate::error::LlmError;
use crate::price::{Price, PriceTable};
use crate::providers::openai_compat::{OpenAiChatModel, OpenAiConfig};
use crate::structured::RepairPolicy;

/// `[llm]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    #[serde(default)]
    pub default_model: Option<String>,
    #[serde(default)]
    pub allow_remote: bool,
    #[serde(default = "default_true")]
    pub cache: bool,
    #[serde(default = "default_repair_attempts")]
    pub repair_attempts: u32,
    #[serde(default)]
    pub threads: Option<u32>,
    #[serde(default = "default_context_size")]
    pub context_size: u32,
    /// The embedded model decodes the tokens a JSON schema forces in one
    /// batch ([`crate::providers::llama::LlamaConfig::fast_forward`]);
    /// `false` samples every token one at a time, as builds before it did.
    #[serde(default = "default_true")]
    pub fast_forward: bool,
    /// The embedded model answers this many concurrent requests at once,
    /// decoding them in one batch
    /// ([`crate::providers::llama::LlamaConfig::parallel`]); each takes
    /// its own `context_size` window of memory. 1: one at a time.
    #[serde(default = "default_parallel")]
    pub parallel: u32,
    #[serde(default)]
    pub prompts_dir: Option<PathBuf>,
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
    #[serde(default)]
    pub prices: PriceTable,
}

fn default_true() -> bool {
    true
}
fn default_parallel() -> u32 {
    1
}
fn default_repair_attempts() -> u32 {
    2
}
fn default_context_size() -> u32 {
    4096
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            default_model: None,
            allow_remote: false,
            cache: true,
            repair_attempts: default_repair_attempts(),
            threads: None,
            context_size: default_context_size(),
            fast_forward: true,
            parallel: default_parallel(),
            prompts_dir: None,
            models: BTreeMap::new(),
            prices: BTreeMap::new(),
        }
    }
}

/// `[llm.models.NAME]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ModelConfig {
    /// An OpenAI-compatible server (or a pool of them).
    Openai(OpenAiConfig),
    /// A local GGUF run by the embedded llama.cpp provider.
    Llama {
        /// A known model name or a GGUF path.
        model: String,
        #[serde(default)]
        threads: Option<u32>,
        #[serde(default)]
        context_size: Option<u32>,
    },
}

impl LlmConfig {
    /// Parses the `[llm]` table (any serde value: the CLI converts TOML).
    pub fn from_value(value: Option<serde_json::Value>) -> Result<Self, LlmError> {
        match value {
            None => Ok(LlmConfig::default()),
            Some(v) => serde_json::from_value(v).map_err(|e| LlmError::Unavailable(format!("evident.toml [llm]: {e}"))),
        }
    }

    pub fn repair_policy(&self) -> RepairPolicy {
        RepairPolicy { repair_attempts: self.repair_attempts }
    }

    pub fn price_for(&self, name: &str, model_id: &str) -> Option<Price> {
        self.prices.get(name).or_else(|| self.prices.get(model_id)).copied()
    }

    /// The model a command uses when none is named.
    pub fn default_model_name(&self) -> String {
        self.default_model.clone().unwrap_or_else(|| crate::models::DEFAULT_CHAT_MODEL.to_string())
    }

    /// Builds the chat model called `name` (a configured name, a known model,
    /// or a GGUF path). `allow_remote` adds to the config's own setting.
    pub fn open_chat_model(&self, name: &str, allow_remote: bool) -> Result<Arc<dyn ChatModel>, LlmError> {
        match self.models.get(name) {
            Some(ModelConfig::Openai(config)) => {
                let mut config = config.clone();
                config.allow_remote |= allow_remote || self.allow_remote;
                Ok(Arc::new(OpenAiChatModel::new(config)?))
            }
            Some(ModelConfig::Llama { model, threads, context_size }) => {
                self.open_local(model, threads.or(self.threads), context_size.unwrap_or(self.context_size))
            }
            None => self.open_local(name, self.threads, self.context_size),
        }
    }

    /// A chat model at an OpenAI-compatible `endpoint` URL.
    pub fn open_endpoint(
        &self,
        endpoint: &str,
        model: &str,
        allow_remote: bool,
    ) -> Result<Arc<dyn ChatModel>, LlmError> {
        let mut config = OpenAiConfig::new(endpoint, model);
        config.allow_remote = allow_remote || self.allow_remote;
        Ok(Arc::new(OpenAiChatModel::new(config)?))
    }

    #[cfg(feature = "llama")]
    fn open_local(
        &self,
        name_or_path: &str,
        threads: Option<u32>,
        context_size: u32,
    ) -> Result<Arc<dyn ChatModel>, LlmError> {
        Ok(Arc::new(self.open_llama(name_or_path, threads, context_size)?))
    }

    /// The embedded model `name_or_path` with the config's settings.
    #[cfg(feature = "llama")]
    pub fn open_llama(
        &self,
        name_or_path: &str,
        threads: Option<u32>,
        context_size: u32,
    ) -> Result<crate::providers::llama::LlamaChatModel, LlmError> {
        let path = crate::models::resolve_gguf(name_or_path).map_err(|e| LlmError::Unavailable(e.to_string()))?;
        let mut config = crate::providers::llama::LlamaConfig::new(path);
        config.threads = threads;
        config.context_size = context_size;
        config.fast_forward = self.fast_forward;
        config.parallel = self.parallel.max(1);
        crate::providers::llama::LlamaChatModel::load(config)
    }

    #[cfg(not(feature = "llama"))]
    fn open_local(
        &self,
        name_or_path: &str,
        _threads: Option<u32>,
        _context_size: u32,
    ) -> Result<Arc<dyn ChatModel>, LlmError> {
        Err(LlmError::Unavailable(format!(
            "{name_or_path}: this evident was built without the embedded llama.cpp model (feature `llama`); \
             configure an OpenAI-compatible endpoint under [llm.models] or open one by its URL"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_models_prices_and_defaults() {
        let config = LlmConfig::from_value(Some(json!({
            "default_model": "pool",
            "models": {
                "pool": {"kind": "openai", "endpoints": ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"], "model": "m"},
                "local": {"kind": "llama", "model": "gemma3-270m", "threads": 1}
            },
            "prices": {"pool": {"prompt_usd_per_million": 1.0, "completion_usd_per_million": 2.0}}
        })))
        .unwrap();
        assert!(config.cache);
        assert_eq!(config.repair_attempts, 2);
        match &config.models["pool"] {
            ModelConfig::Openai(c) => assert_eq!(c.endpoints.len(), 2),
            other => panic!("{other:?}"),
        }
        assert!(config.price_for("pool", "openai:m").is_some());
        assert_eq!(config.open_chat_model("pool", false).unwrap().model_id(), "openai:m");
    }

    #[test]
    fn unknown_keys_are_refused_with_their_name() {
        let err = LlmConfig::from_value(Some(json!({"alow_remote": true}))).unwrap_err();
        assert!(err.to_string().contains("alow_remote"), "{err}");
        let err = LlmConfig::from_value(Some(
            json!({"models": {"x": {"kind": "openai", "endpoints": [], "model": "m", "timeout": 3}}}),
        ))
        .unwrap_err();
        assert!(err.to_string().contains("timeout"), "{err}");
    }
}
