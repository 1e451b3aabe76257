//! One module per subcommand. Each defines its `Args` and a `run` that
//! returns an [`Outcome`](crate::Outcome) or an error for the user.

pub mod embed;
pub mod eval_cmd;
pub mod ingest;
pub mod kb;
pub mod labs;
pub mod llm;
pub mod match_cmd;
pub mod models;
pub mod patients;
pub mod runs;
pub mod search;
pub mod show;
pub mod stats;

use crate::{Cli, Command, Outcome};

pub fn run(cli: &Cli) -> anyhow::Result<Outcome> {
    let config = crate::config::Config::load(&cli.config)?;
    let ctx = Context { cli, config };
    match &cli.command {
        Command::Ingest(args) => ingest::run(&ctx, args),
        Command::Patients(args) => patients::run(&ctx, args),
        Command::Show(args) => show::run(&ctx, args),
        Command::Labs(args) => labs::run(&ctx, args),
        Command::Search(args) => search::run(&ctx, args),
        Command::Embed(args) => embed::run(&ctx, args),
        Command::Models(args) => models::run(&ctx, args),
        Command::Llm(args) => llm::run(&ctx, args),
        Command::Runs(args) => runs::run(&ctx, args),
        Command::Stats(args) => stats::run(&ctx, args),
        Command::Kb(args) => kb::run(&ctx, args),
        Command::Match(args) => match_cmd::run(&ctx, args),
        Command::Eval(args) => eval_cmd::run(&ctx, args),
    }
}

/// What every command may use: the parsed global flags and the config.
pub struct Context<'a> {
    pub cli: &'a Cli,
    pub config: crate::config::Config,
}

impl Context<'_> {
    pub fn json(&self) -> bool {
        self.cli.json
    }

    /// Opens (creating and migrating if needed) the store named by `--db`.
    pub fn open_store(&self) -> anyhow::Result<evident_store::Store> {
        let path = &self.cli.db;
        evident_store::Store::open(path).map_err(|e| anyhow::anyhow!("cannot open store {}: {e}", path.display()))
    }
}
