//! `evident kb`: the local knowledge base MAKAR's retrieval agent searches.
//! Being written; see issue 4.

use crate::commands::Context;
use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_ctx: &Context, _args: &Args) -> anyhow::Result<Outcome> {
    anyhow::bail!("evident kb is not built yet")
}
