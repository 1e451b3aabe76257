//! `evident runs list|show|export`: what model-call runs cost (calls,
//! cache hits, tokens, cost, latency percentiles, failures) and their full
//! trace, optionally with note text redacted.

use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: RunsCommand,
}

#[derive(clap::Subcommand, Debug)]
enum RunsCommand {
    /// All runs, newest first.
    List,
    /// One run's summary and calls (`latest` for the newest).
    Show { run: String },
    /// One run's full trace as JSON.
    Export {
        run: String,
        /// Replace message and answer text of calls that carried patient text.
        #[arg(long)]
        redact: bool,
    },
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    match &args.command {
        RunsCommand::List => {
            let list = evident_app::runs::list(&ctx.session)?;
            ctx.print(&list)?;
            Ok(Exit::found_if(!list.runs.is_empty()))
        }
        RunsCommand::Show { run } => {
            ctx.print(&evident_app::runs::show(&ctx.session, run)?)?;
            Ok(Exit::Found)
        }
        RunsCommand::Export { run, redact } => {
            crate::output::print_json(&evident_app::runs::export(&ctx.session, run, *redact)?)?;
            Ok(Exit::Found)
        }
    }
}
