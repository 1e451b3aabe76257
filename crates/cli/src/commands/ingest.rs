//! `evident ingest`.

use crate::commands::Context;
use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_ctx: &Context, _args: &Args) -> anyhow::Result<Outcome> {
    anyhow::bail!("`evident ingest` is not built yet")
}
