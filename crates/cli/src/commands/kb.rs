//! `evident kb`: the local knowledge base MAKAR's retrieval agent searches.
//! `evident kb index PATH... [--kb FILE]` indexes `.md`/`.txt` files and
//! folders into a knowledge-base store (all or nothing; every bad input is
//! reported); `evident kb search "query" [--kb FILE] [-k N]` shows the best
//! sections by BM25, as the retrieval agent would see them. The work is
//! done by `evident_match::makar::LocalKnowledgeBase`.

use std::path::PathBuf;

use evident_match::makar::LocalKnowledgeBase;

use crate::commands::Context;
use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: KbCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum KbCommand {
    /// Index .md and .txt documents (files or folders, searched recursively).
    Index {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The knowledge-base file (created if missing).
        #[arg(long = "kb", default_value = "./knowledge.db")]
        kb: PathBuf,
    },
    /// Search the knowledge base by BM25.
    Search {
        query: String,
        /// The knowledge-base file.
        #[arg(long = "kb", default_value = "./knowledge.db")]
        kb: PathBuf,
        /// Number of passages.
        #[arg(short = 'k', long = "top", default_value_t = 5)]
        k: usize,
    },
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Outcome> {
    match &args.command {
        KbCommand::Index { paths, kb } => index(ctx, paths, kb),
        KbCommand::Search { query, kb, k } => search(ctx, query, kb, *k),
    }
}

fn index(ctx: &Context, paths: &[PathBuf], kb: &std::path::Path) -> anyhow::Result<Outcome> {
    let base = LocalKnowledgeBase::open_or_create(kb)?;
    let report = base.index(paths)?;
    let total = base.document_ids()?.len();
    if ctx.json() {
        crate::output::print_json(&serde_json::json!({
            "kb": kb.display().to_string(),
            "inserted": report.inserted,
            "unchanged": report.unchanged,
            "replaced": report.replaced,
            "documents": total,
            "files": report.files.iter().map(|(id, path, outcome)| serde_json::json!({
                "id": id, "path": path.display().to_string(), "outcome": outcome,
            })).collect::<Vec<_>>(),
        }))?;
    } else {
        for (id, path, outcome) in &report.files {
            let outcome = serde_json::to_value(outcome)?.as_str().unwrap_or_default().to_string();
            println!("{outcome:<9} {id}  ({})", path.display());
        }
        println!(
            "{} new, {} unchanged, {} replaced; {} has {total} document(s)",
            report.inserted,
            report.unchanged,
            report.replaced,
            kb.display()
        );
    }
    Ok(Outcome::Found)
}

fn search(ctx: &Context, query: &str, kb: &std::path::Path, k: usize) -> anyhow::Result<Outcome> {
    if k == 0 {
        anyhow::bail!("-k 0 asks for no passages; give 1 or more");
    }
    let base = LocalKnowledgeBase::open(kb)?;
    let hits = base.search_hits(query, k)?;
    if ctx.json() {
        crate::output::print_json(&serde_json::json!({
            "kb": kb.display().to_string(),
            "query": query,
            "k": k,
            "hits": hits.iter().map(|h| serde_json::json!({
                "document_id": h.document_id,
                "heading": h.heading,
                "start": h.start,
                "end": h.end,
                "score": h.score,
                "text": h.text,
            })).collect::<Vec<_>>(),
        }))?;
    } else if hits.is_empty() {
        println!("nothing in {} matches {query:?}", kb.display());
    } else {
        for (i, hit) in hits.iter().enumerate() {
            let heading = hit.heading.as_deref().map(|h| format!("  [{h}]")).unwrap_or_default();
            println!(
                "{}. {}{heading}  bytes {}..{}  score {:.4}",
                i + 1,
                hit.document_id,
                hit.start,
                hit.end,
                hit.score
            );
            for line in hit.text.lines() {
                println!("   | {line}");
            }
            println!();
        }
    }
    Ok(if hits.is_empty() { Outcome::NothingFound } else { Outcome::Found })
}
