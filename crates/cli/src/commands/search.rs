//! `evident search PATIENT "query"`: BM25, dense or hybrid retrieval over
//! one patient's sections, with kind, date and most-recent filters. Each
//! hit prints its document id, section id, byte span, score, date, kind and
//! the verbatim section text. Dense and hybrid modes first embed any of the
//! patient's sections that lack vectors.

use chrono::{NaiveDate, NaiveDateTime};
use evident_llm::Embedder;
use evident_model::DocKind;
use evident_retrieve::{Fusion, Hit, Mode, Retriever, RetrieverConfig, RRF_K};
use evident_store::SectionFilter;

use crate::commands::embed::{embed_with_progress, load_embedder, ModelArgs, RetrievalConfig};
use crate::commands::Context;
use crate::Outcome;

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
    #[arg(long, default_value = "bm25", value_parser = ["bm25", "dense", "hybrid"])]
    pub mode: String,
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
    pub model: ModelArgs,
}

fn parse_kind(text: &str) -> Result<DocKind, String> {
    text.parse()
}

/// `YYYY-MM-DD` (start or end of that day) or a full timestamp.
fn parse_date(flag: &str, text: &str, end_of_day: bool) -> anyhow::Result<NaiveDateTime> {
    let text = text.trim();
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let time = if end_of_day { date.and_hms_opt(23, 59, 59) } else { date.and_hms_opt(0, 0, 0) };
        return Ok(time.expect("valid time of day"));
    }
    for format in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(t);
        }
    }
    anyhow::bail!("{flag} {text:?} is not a date (expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS)")
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Outcome> {
    let mode: Mode = args.mode.parse().map_err(anyhow::Error::msg)?;
    let settings = RetrievalConfig::from_context(ctx)?;
    let alpha = args.alpha.or(settings.alpha).unwrap_or(0.5);
    if !(0.0..=1.0).contains(&alpha) {
        anyhow::bail!("--alpha {alpha} is outside 0..=1 (it is the weight of the dense score)");
    }
    let fusion = match args.fusion.as_str() {
        "weighted" => Fusion::Weighted { alpha },
        _ => Fusion::ReciprocalRank { k: RRF_K },
    };
    let filter = SectionFilter {
        patient_id: Some(args.patient.clone()),
        kinds: args.kinds.clone(),
        since: args.since.as_deref().map(|t| parse_date("--since", t, false)).transpose()?,
        until: args.until.as_deref().map(|t| parse_date("--until", t, true)).transpose()?,
        most_recent_documents: args.recent,
    };
    if let (Some(since), Some(until)) = (filter.since, filter.until) {
        if since > until {
            anyhow::bail!("--since {since} is after --until {until}; nothing can match");
        }
    }

    let mut store = ctx.open_store()?;
    if store.patient(&args.patient)?.is_none() {
        anyhow::bail!(
            "patient {:?} is not in the store {}; `evident patients` lists them",
            args.patient,
            ctx.cli.db.display()
        );
    }
    let embedder = match mode {
        Mode::Bm25 => None,
        Mode::Dense | Mode::Hybrid => {
            let embedder = load_embedder(ctx, &args.model)?;
            // Embed only what this search can see; the rest of the store is
            // left for `evident embed`.
            let missing = store.sections_missing_embedding(embedder.model_id(), &filter)?.len();
            if missing > 0 {
                if !ctx.json() {
                    eprintln!(
                        "embedding {missing} section(s) of patient {} first (`evident embed --all` does the whole store)",
                        args.patient
                    );
                }
                embed_with_progress(&mut store, &embedder, &filter, 64, ctx.json())?;
            }
            Some(embedder)
        }
    };

    let config = RetrieverConfig { mode, fusion, ..RetrieverConfig::default() };
    let mut retriever = Retriever::new(&store, config);
    if let Some(embedder) = &embedder {
        retriever = retriever.with_embedder(embedder);
    }
    let hits = retriever.search(&args.query, &filter, args.k)?;

    if ctx.json() {
        crate::output::print_json(&serde_json::json!({
            "patient": args.patient,
            "query": args.query,
            "mode": mode,
            "fusion": (mode == Mode::Hybrid).then_some(fusion),
            "k": args.k,
            "hits": hits,
        }))?;
    } else if hits.is_empty() {
        println!("no sections of patient {} match {:?}", args.patient, args.query);
    } else {
        for (i, hit) in hits.iter().enumerate() {
            print_hit(i + 1, hit);
        }
    }
    Ok(if hits.is_empty() { Outcome::NothingFound } else { Outcome::Found })
}

fn print_hit(rank: usize, hit: &Hit) {
    let date = hit.date.map(|d| d.format("%Y-%m-%d").to_string()).unwrap_or_else(|| "undated".into());
    println!(
        "{rank}. {}  {}  {date}  section {}  bytes {}..{}  score {:.4}",
        hit.document_id, hit.kind, hit.section_id, hit.start, hit.end, hit.score
    );
    if let Some(heading) = &hit.heading {
        println!("   [{heading}]");
    }
    for line in hit.text.lines() {
        println!("   | {line}");
    }
    println!();
}
