//! The `evident` binary: parses argv, opens an `evident_app::Session`
//! (store path and `evident.toml`), dispatches to one command module, and
//! turns the result into an exit code (0 ok, 1 nothing found, 2 error).
//! Command modules only parse, call one `evident_app` job and print; they
//! hold no domain logic of their own.

mod args;
mod commands;
mod output;
mod progress;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Evident: LLM agents over patient records that show their evidence.
#[derive(Parser, Debug)]
#[command(name = "evident", version, about, propagate_version = true)]
pub struct Cli {
    /// The Evident store (SQLite file).
    #[arg(long, global = true, env = "EVIDENT_DB", default_value = "./evident.db")]
    pub db: PathBuf,
    /// Configuration file; read if it exists.
    #[arg(long, global = true, env = "EVIDENT_CONFIG", default_value = "evident.toml")]
    pub config: PathBuf,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Ingest records (notes + manifest, FHIR R4, MIMIC-IV, n2c2 2018, TrialGPT queries).
    Ingest(commands::ingest::Args),
    /// List patients in the store.
    Patients(commands::patients::Args),
    /// Show one patient's documents and lab summary.
    Show(commands::show::Args),
    /// A patient's lab values, by canonical concept.
    Labs(commands::labs::Args),
    /// Search one patient's record (BM25, dense or hybrid).
    Search(commands::search::Args),
    /// Compute dense embeddings for stored sections.
    Embed(commands::embed::Args),
    /// List and fetch local models.
    Models(commands::models::Args),
    /// Talk to a model, or serve the embedded models over HTTP.
    Llm(commands::llm::Args),
    /// Model-call runs: calls, tokens, cost, latency, failures.
    Runs(commands::runs::Args),
    /// Screen patients against trials (zero-shot or MAKAR) and write the report.
    Match(commands::match_trials::Args),
    /// Score screening methods against expert labels (TrialGPT annotations, n2c2 2018).
    Eval(commands::eval::Args),
    /// Exemplar banks: adjudicated decisions shown to screening models as worked examples.
    Exemplars(commands::exemplars::Args),
    /// Statistics for observational studies.
    Stats(commands::stats::Args),
    /// Clinical databases for studies: load MIMIC-IV into SQLite or PostgreSQL, query read-only.
    Db(commands::db::Args),
    /// The local knowledge base that MAKAR's retrieval agent searches.
    Kb(commands::kb::Args),
    /// Ask a question about one patient's whole record; the answer cites stored text.
    Ask(commands::ask::Args),
    /// Trial criteria: split pasted eligibility text into a set; compile checks.
    Criteria(commands::criteria::Args),
    /// Run an observational-study task on a MIMIC-IV database and write its evidence bundle.
    Study(commands::study::Args),
    /// Serve the review UI and JSON API over the store (loopback by default).
    Serve(commands::serve::Args),
    /// Local accounts of the review service: add, list.
    Users(commands::users::Args),
}

/// The exit status of a command that succeeded: whether it found
/// anything. Errors are reported separately (exit code 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Found,
    NothingFound,
}

impl Exit {
    /// `Found` when `found`, else `NothingFound`.
    pub fn found_if(found: bool) -> Exit {
        if found {
            Exit::Found
        } else {
            Exit::NothingFound
        }
    }
}

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let cli = Cli::parse();
    match commands::run(&cli) {
        Ok(Exit::Found) => ExitCode::from(0),
        Ok(Exit::NothingFound) => ExitCode::from(1),
        Err(err) => {
            output::print_error(&err, cli.json);
            ExitCode::from(2)
        }
    }
}

/// A reader that stops early (`evident patients | head -1`) closes the pipe,
/// and printing then fails with EPIPE, which `println!` turns into a panic.
/// Exit quietly instead, with the status a shell gives a process ended by
/// SIGPIPE (128 + 13), as other Unix tools do.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info)
    }));
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every command's flags are consistent (no two arguments share an id,
    /// every `requires` and `conflicts_with` names a real one), including
    /// the groups flattened into several commands.
    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
