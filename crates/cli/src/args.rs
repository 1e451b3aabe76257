//! Argument groups more than one command takes (flattened into each
//! command's `Args`), and how each becomes an `evident_app` request: the
//! model to ask, the embedding model's folder, how to screen, and which
//! hash of a study database the evidence bundle carries.

use std::path::PathBuf;

use evident_app::screening::{parse_definitions, parse_method, parse_retrieval, ExemplarOptions, ScreeningOptions};
use evident_app::study::{DatabaseHashMode, DatabaseHashRequest, JudgeStrategy};
use evident_app::{EmbedderChoice, ModelChoice};
use evident_match::batch::Method;
use evident_match::exemplars::ExemplarMatch;

/// The model a command asks: embedded, or an OpenAI-compatible server.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// The model: a known model, a GGUF path, or a name under [llm.models].
    #[arg(long, conflicts_with = "endpoint")]
    pub model: Option<String>,
    /// An OpenAI-compatible base URL (vLLM, Ollama, llama.cpp server, a
    /// hosted API).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// The model name sent to --endpoint.
    #[arg(long, default_value = "default", requires = "endpoint")]
    pub endpoint_model: String,
    /// Allow patient text to reach a non-loopback endpoint.
    #[arg(long)]
    pub allow_remote: bool,
}

impl ModelArgs {
    pub fn choice(&self) -> ModelChoice {
        ModelChoice {
            model: self.model.clone(),
            endpoint: self.endpoint.clone(),
            endpoint_model: self.endpoint_model.clone(),
            allow_remote: self.allow_remote,
        }
    }
}

/// Where the embedding model comes from.
#[derive(clap::Args, Debug, Clone)]
pub struct EmbedderArgs {
    /// A folder holding model.safetensors, tokenizer.json and config.json
    /// (default: `[retrieval] model_dir` in evident.toml, else the cache
    /// folder that `evident models pull minilm-l6` fills).
    #[arg(long, env = "EVIDENT_EMBED_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,
}

impl EmbedderArgs {
    pub fn choice(&self) -> EmbedderChoice {
        EmbedderChoice { model_dir: self.model_dir.clone() }
    }
}

/// A `--strategy` or `--baseline` value, refused in the flag's own words.
pub fn method(flag: &str, text: &str) -> anyhow::Result<Method> {
    parse_method(text).map_err(|_| {
        anyhow::anyhow!(
            "{flag} {text:?} is not {}; use one of {}",
            if flag == "--baseline" { "a strategy" } else { "known" },
            Method::ALL.map(|m| m.as_str()).join(", ")
        )
    })
}

/// How to screen: method, retrieval, models. Shared by `match` and `eval`.
#[derive(clap::Args, Debug, Clone)]
pub struct ScreenArgs {
    /// acan, acin, ican, icin; the paper's MAKAR: makar, makar-aug, makar-reason, makar-zero-shot;
    /// Evident's MAKAR: makar-evident, makar-evident-aug, makar-evident-reason.
    #[arg(long, default_value = "ican")]
    pub strategy: String,
    /// Two-stage retrieval: none (whole notes), bm25, dense or hybrid.
    #[arg(long, default_value = "none")]
    pub retrieval: String,
    /// Sections kept per task by two-stage retrieval.
    #[arg(long, default_value_t = 5)]
    pub top_k: usize,
    /// Screening tasks worked on at once (useful against servers, and with
    /// the embedded model's `[llm] parallel` slots).
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// The matching model.
    #[command(flatten)]
    pub llm: ModelArgs,
    /// MAKAR: the model that augments criteria (criteria are not patient
    /// data, so it may be remote); default: the matching model.
    #[arg(long, conflicts_with = "augment_endpoint")]
    pub augment_model: Option<String>,
    #[arg(long)]
    pub augment_endpoint: Option<String>,
    #[arg(long, default_value = "default", requires = "augment_endpoint")]
    pub augment_endpoint_model: String,
    /// MAKAR: a knowledge base built with `evident kb index` for the retrieval agent.
    #[arg(long)]
    pub knowledge: Option<PathBuf>,
    /// MAKAR: a search endpoint (SearXNG JSON API) for the online search
    /// agent; without it online search is off.
    #[arg(long)]
    pub online_search: Option<String>,
    /// MAKAR: critic rounds at most per criterion.
    #[arg(long, default_value_t = 3)]
    pub max_critic_rounds: u32,
    /// Do not answer from (or add to) the model cache.
    #[arg(long)]
    pub no_cache: bool,
    /// An exemplar bank in the store (`evident exemplars import`): before
    /// each criterion the prompt shows its most similar exemplars (none of
    /// the patient screened) as worked examples.
    #[arg(long)]
    pub exemplars: Option<String>,
    /// Exemplars shown per criterion at most.
    #[arg(long, default_value_t = 3, requires = "exemplars")]
    pub exemplars_k: usize,
    /// Cosine similarity of criterion texts an exemplar needs at least.
    #[arg(long, default_value_t = 0.5, requires = "exemplars")]
    pub exemplars_min_similarity: f32,
    /// What exemplars are matched on: criterion (the criterion texts) or
    /// evidence (each criterion text with the sentences that decide it: an
    /// exemplar's adjudicated sentences, and the screened patient's two
    /// sentences most similar to the criterion).
    #[arg(long, default_value = "criterion", value_parser = ["criterion", "evidence"], requires = "exemplars")]
    pub exemplars_match: String,
    /// Label calibration: a MET or NOT MET that cites no sentence becomes
    /// NOT ENOUGH INFORMATION.
    #[arg(long)]
    pub calibrate: bool,
    /// Which definition of each criterion prompts show: refined (where the
    /// set gives one) or original (Wornow et al. Table 2).
    #[arg(long, default_value = "refined", value_parser = ["original", "refined"])]
    pub definitions: String,
    #[command(flatten)]
    pub embed_model: EmbedderArgs,
}

impl ScreenArgs {
    pub fn options(&self) -> anyhow::Result<ScreeningOptions> {
        let matching = self.llm.choice();
        let augmenting = (self.augment_model.is_some() || self.augment_endpoint.is_some()).then(|| ModelChoice {
            model: self.augment_model.clone(),
            endpoint: self.augment_endpoint.clone(),
            endpoint_model: self.augment_endpoint_model.clone(),
            allow_remote: false,
        });
        let exemplars_match = ExemplarMatch::parse(&self.exemplars_match).ok_or_else(|| {
            anyhow::anyhow!("--exemplars-match: {:?} is neither criterion nor evidence", self.exemplars_match)
        })?;
        Ok(ScreeningOptions {
            method: method("--strategy", &self.strategy)?,
            retrieval: parse_retrieval(&self.retrieval)?,
            top_k: self.top_k,
            concurrency: self.concurrency,
            matching,
            augmenting,
            knowledge: self.knowledge.clone(),
            online_search: self.online_search.clone(),
            max_critic_rounds: self.max_critic_rounds,
            use_cache: !self.no_cache,
            embedder: self.embed_model.choice(),
            // `match` sets these from its own flags; evaluations leave them.
            checks: None,
            screening_date: None,
            exemplars: self.exemplars.as_ref().map(|bank| ExemplarOptions {
                bank: bank.clone(),
                k: self.exemplars_k,
                min_similarity: self.exemplars_min_similarity,
                matching: exemplars_match,
            }),
            calibrate: self.calibrate,
            definitions: parse_definitions(&self.definitions)?,
            // `match` sets it from its own flag (`eval trialgpt`'s
            // --label-correction is a switch that fits one).
            label_correction: None,
            // `eval trialgpt --threshold-calibration` and `match --thresholds` set it.
            probabilities: false,
            thresholds: None,
        })
    }
}

/// Which hash of the study database the evidence bundle carries. Shared by
/// `study` and `eval rwe`.
#[derive(clap::Args, Debug, Clone)]
pub struct DatabaseHashArgs {
    /// cached (every row's content hash, computed once per database state and kept in the
    /// store: later runs on the unchanged database reuse it), full (read every row now),
    /// catalogue (tables, columns and estimated row counts only: seconds on any database) or
    /// none. A SQLite database is hashed by its files whatever this says, except none.
    #[arg(long, default_value = "cached", value_parser = DatabaseHashMode::NAMES)]
    pub database_hash: String,
    /// Seconds a content hash may run; one that does not finish leaves the catalogue hash in
    /// the bundle, saying so (0: no limit; `evident db hash URL` computes it once for all).
    #[arg(long, default_value_t = 600)]
    pub database_hash_timeout: u64,
}

impl DatabaseHashArgs {
    pub fn request(&self) -> DatabaseHashRequest {
        hash_request(&self.database_hash, self.database_hash_timeout)
    }
}

/// `--database-hash` and its timeout in seconds (0: none) as a request.
pub fn hash_request(mode: &str, timeout_seconds: u64) -> DatabaseHashRequest {
    DatabaseHashRequest {
        mode: DatabaseHashMode::from_name(mode).unwrap_or_default(),
        timeout: (timeout_seconds > 0).then(|| std::time::Duration::from_secs(timeout_seconds)),
    }
}

/// The cohort judge names `--judge` takes.
pub const JUDGE_NAMES: [&str; 2] = ["paper", "compiled"];

/// Which cohort judge screens a study's cohort after the rule checks.
/// Shared by `study` and `eval rwe`.
#[derive(clap::Args, Debug, Clone)]
pub struct JudgeArgs {
    /// paper (RWE-bench's judge: Figure 19's prompt, one model call per sampled row) or
    /// compiled (Evident's: the model writes the protocol's criteria once as checks over the
    /// rows' facts, and Evident runs them on every sampled row).
    #[arg(long, default_value = "paper", value_parser = JUDGE_NAMES)]
    pub judge: String,
    /// Skip the cohort judge (the rule checks still run).
    #[arg(long, conflicts_with = "judge")]
    pub no_judge: bool,
}

impl JudgeArgs {
    pub fn strategy(&self) -> Option<JudgeStrategy> {
        (!self.no_judge).then(|| judge_strategy(&self.judge))
    }
}

/// A `--judge` name (checked by clap) as the strategy.
pub fn judge_strategy(name: &str) -> JudgeStrategy {
    JudgeStrategy::from_name(name).unwrap_or_default()
}
