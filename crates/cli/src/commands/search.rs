//! `evident search PATIENT "query"`: BM25, dense or hybrid retrieval over
//! one patient's sections, with kind, date and most-recent filters. Each
//! hit prints its document id, section id, byte span, score, date, kind and
//! the verbatim section text. Dense and hybrid modes first embed any of the
//! patient's sections that lack vectors.

use evident_app::search::{FusionKind, SearchRequest};
use evident_model::DocKind;
use evident_retrieve::Mode;

use crate::args::EmbedderArgs;
use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    pub patient: String,
    pub query: String,
    /// Only documents of this kind (repeatable; synonyms such as "discharge" work).
    #[arg(long = "kind", value_parser = parse_kind)]
    pub kinds: Vec<DocKind>,
    /// Only documents dated on or after this date (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS).
    #[arg(long)]
    pub since: Option<String>,
    /// Only documents dated on or before this date (a plain date includes the whole day).
    #[arg(long)]
    pub until: Option<String>,
    /// Only the N most recent documents (after the other filters).
    #[arg(long)]
    pub recent: Option<usize>,
    #[arg(long, default_value = "bm25", value_parser = parse_mode)]
    pub mode: Mode,
    /// Hybrid fusion: reciprocal rank fusion (k = 60) or weighted min-max scores.
    #[arg(long, default_value = "rrf", value_parser = ["rrf", "weighted"])]
    pub fusion: String,
    /// Weight of the dense score in `--fusion weighted` (0..=1; default 0.5
    /// or `[retrieval] alpha`).
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Number of hits.
    #[arg(short = 'k', long = "top", default_value_t = 10)]
    pub k: usize,
    #[command(flatten)]
    pub model: EmbedderArgs,
}

fn parse_kind(text: &str) -> Result<DocKind, String> {
    text.parse()
}

fn parse_mode(text: &str) -> Result<Mode, String> {
    text.parse()
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    let request = SearchRequest {
        patient_id: args.patient.clone(),
        query: args.query.clone(),
        kinds: args.kinds.clone(),
        since: args.since.clone(),
        until: args.until.clone(),
        recent: args.recent,
        mode: args.mode,
        fusion: if args.fusion == "weighted" { FusionKind::Weighted } else { FusionKind::ReciprocalRank },
        alpha: args.alpha,
        k: args.k,
        embedder: args.model.choice(),
    };
    let results = evident_app::search::search(&ctx.session, &request, &ctx.bars())?;
    ctx.print(&results)?;
    Ok(Exit::found_if(!results.hits.is_empty()))
}
