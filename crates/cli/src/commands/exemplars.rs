//! `evident exemplars`: the exemplar bank screening shows as worked
//! examples (`--exemplars BANK`). `evident exemplars import FILE --bank
//! NAME` reads a TrialGPT-format criterion annotation file (the
//! physician's label and evidence sentences per row) and stores each row
//! with the MiniLM vector of its criterion text; `evident exemplars list`
//! shows the banks. Reviewers' overrides and sign-offs enter the bank
//! `reviews` by themselves.

use std::path::PathBuf;

use evident_app::exemplars::{ImportRequest, REVIEW_BANK};

use crate::args::EmbedderArgs;
use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: ExemplarsCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum ExemplarsCommand {
    /// Import a TrialGPT-format criterion annotation file into a bank (all rows or none).
    Import {
        /// E.g. ../shared/data/trialgpt/criterion_annotations_dev.json.
        file: PathBuf,
        /// The bank's name (importing the same file again replaces its rows).
        #[arg(long, default_value = "trialgpt-dev")]
        bank: String,
        #[command(flatten)]
        embed_model: EmbedderArgs,
    },
    /// The banks in the store and their sizes.
    List,
}

/// The banks, for printing.
#[derive(serde::Serialize)]
struct Banks {
    banks: Vec<(String, usize)>,
}

impl std::fmt::Display for Banks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.banks.is_empty() {
            writeln!(f, "no exemplar banks (overrides and sign-offs go to {REVIEW_BANK:?})")?;
        }
        for (bank, n) in &self.banks {
            writeln!(f, "{bank:<24} {n} exemplars")?;
        }
        Ok(())
    }
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    match &args.command {
        ExemplarsCommand::Import { file, bank, embed_model } => {
            let request = ImportRequest { file: file.clone(), bank: bank.clone(), embedder: embed_model.choice() };
            ctx.print(&evident_app::exemplars::import(&ctx.session, &request)?)?;
            Ok(Exit::Found)
        }
        ExemplarsCommand::List => {
            let banks = Banks { banks: evident_app::exemplars::banks(&ctx.session)? };
            let found = !banks.banks.is_empty();
            ctx.print(&banks)?;
            Ok(Exit::found_if(found))
        }
    }
}
