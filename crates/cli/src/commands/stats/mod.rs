//! `evident stats`: parses the subcommand, hands one request to
//! `evident_app::stats::run` (which reads the CSV, runs the estimator and
//! writes any plot) and prints its report as text or, with `--json`, JSON.
//! The clap definitions are in [`subcommands`]; [`request`] turns them into
//! the job's request.

mod request;
mod subcommands;

pub use subcommands::StatsCommand;

use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: StatsCommand,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    let report = evident_app::stats::run(&request::stats_request(&args.command))?;
    ctx.print(&report)?;
    Ok(Exit::Found)
}
