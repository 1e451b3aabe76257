//! `evident embed [--patient P | --all]`: computes the all-MiniLM-L6-v2
//! vectors that stored sections lack, with a progress bar, and stores them.
//! Running it again embeds nothing. Also holds the model loading that
//! `evident search` shares: `--model-dir`, else `[retrieval] model_dir` in
//! `evident.toml`, else the cache folder `evident models pull` fills.

use std::path::PathBuf;
use std::time::Instant;

use evident_embed::{EmbedderConfig, MiniLmEmbedder};
use evident_llm::Embedder;
use evident_store::{SectionFilter, Store};

use crate::commands::Context;
use crate::Outcome;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["patient", "all"])))]
pub struct Args {
    /// Only this patient's sections.
    #[arg(long)]
    pub patient: Option<String>,
    /// Every section in the store.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Sections per stored batch.
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
}

/// Where the embedding model comes from.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// A folder holding model.safetensors, tokenizer.json and config.json
    /// (default: `[retrieval] model_dir` in evident.toml, else the cache
    /// folder that `evident models pull minilm-l6` fills).
    #[arg(long, env = "EVIDENT_EMBED_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,
}

/// `[retrieval]` in evident.toml.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrievalConfig {
    /// Folder of the embedding model.
    pub model_dir: Option<PathBuf>,
    /// Default fusion weight of the dense score in `--fusion weighted`.
    pub alpha: Option<f64>,
}

impl RetrievalConfig {
    pub fn from_context(ctx: &Context) -> anyhow::Result<RetrievalConfig> {
        match &ctx.config.retrieval {
            None => Ok(RetrievalConfig::default()),
            Some(value) => {
                value.clone().try_into().map_err(|e| anyhow::anyhow!("{}: [retrieval]: {e}", ctx.cli.config.display()))
            }
        }
    }
}

/// Loads all-MiniLM-L6-v2 from the folder the flags and config name.
pub fn load_embedder(ctx: &Context, args: &ModelArgs) -> anyhow::Result<MiniLmEmbedder> {
    let dir = match &args.model_dir {
        Some(dir) => dir.clone(),
        None => RetrievalConfig::from_context(ctx)?.model_dir.unwrap_or_else(evident_embed::default_model_dir),
    };
    Ok(MiniLmEmbedder::load(&dir, EmbedderConfig::default())?)
}

/// Embeds what `filter`'s sections lack, showing a progress bar on a
/// terminal. Returns how many sections were embedded.
pub fn embed_with_progress(
    store: &mut Store,
    embedder: &dyn Embedder,
    filter: &SectionFilter,
    batch_size: usize,
    quiet: bool,
) -> anyhow::Result<usize> {
    let bar = if quiet { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(0) };
    bar.set_style(
        indicatif::ProgressStyle::with_template("embedding {bar:40} {pos}/{len} sections ({per_sec}, eta {eta})")
            .expect("the template is valid"),
    );
    let done = evident_retrieve::embed_missing(store, embedder, filter, batch_size, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    Ok(done)
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Outcome> {
    let mut store = ctx.open_store()?;
    let filter = match &args.patient {
        Some(patient) => {
            if store.patient(patient)?.is_none() {
                anyhow::bail!(
                    "patient {patient:?} is not in the store {}; `evident patients` lists them",
                    ctx.cli.db.display()
                );
            }
            SectionFilter::patient(patient.clone())
        }
        None => SectionFilter::default(),
    };
    let total = store.sections(&filter)?.len();
    let embedder = load_embedder(ctx, &args.model)?;
    let started = Instant::now();
    let embedded = embed_with_progress(&mut store, &embedder, &filter, args.batch_size, ctx.json())?;
    let seconds = started.elapsed().as_secs_f64();
    if ctx.json() {
        crate::output::print_json(&serde_json::json!({
            "model": embedder.model_id(),
            "patient": args.patient,
            "sections": total,
            "embedded": embedded,
            "already_embedded": total - embedded,
            "seconds": seconds,
        }))?;
    } else {
        println!(
            "{}: embedded {embedded} section(s), {} already had vectors ({seconds:.1} s)",
            embedder.model_id(),
            total - embedded
        );
    }
    Ok(if total == 0 { Outcome::NothingFound } else { Outcome::Found })
}
