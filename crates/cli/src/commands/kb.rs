//! `evident kb`: the local knowledge base MAKAR's retrieval agent searches.
//! `evident kb index PATH... [--kb FILE]` indexes `.md`/`.txt` files and
//! folders (all or nothing; every bad input is reported); `evident kb
//! search "query" [--kb FILE] [-k N]` shows the best sections by BM25, as
//! the retrieval agent would see them.

use std::path::PathBuf;

use crate::commands::Context;
use crate::Exit;

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

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    match &args.command {
        KbCommand::Index { paths, kb } => {
            ctx.print(&evident_app::knowledge::index(kb, paths)?)?;
            Ok(Exit::Found)
        }
        KbCommand::Search { query, kb, k } => {
            let passages = evident_app::knowledge::search(kb, query, *k)?;
            ctx.print(&passages)?;
            Ok(Exit::found_if(!passages.hits.is_empty()))
        }
    }
}
