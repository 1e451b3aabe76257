//! One module per subcommand. Each defines its `Args` and a `run` that
//! calls one `evident_app` job, prints its result and returns an
//! [`Exit`](crate::Exit). No command module imports from another; what
//! several share lives in `crate::args`.

pub mod ask;
pub mod criteria;
pub mod db;
pub mod embed;
pub mod eval;
pub mod exemplars;
pub mod ingest;
pub mod kb;
pub mod labs;
pub mod llm;
pub mod match_trials;
pub mod models;
pub mod patients;
pub mod runs;
pub mod search;
pub mod serve;
pub mod show;
pub mod stats;
pub mod study;
pub mod users;

use evident_app::Session;

use crate::progress::Bars;
use crate::{Cli, Command, Exit};

pub fn run(cli: &Cli) -> anyhow::Result<Exit> {
    let session = Session::open(&cli.db, &cli.config)?;
    let ctx = Context { session, json: cli.json };
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
        Command::Db(args) => db::run(&ctx, args),
        Command::Kb(args) => kb::run(&ctx, args),
        Command::Match(args) => match_trials::run(&ctx, args),
        Command::Eval(args) => eval::run(&ctx, args),
        Command::Exemplars(args) => exemplars::run(&ctx, args),
        Command::Ask(args) => ask::run(&ctx, args),
        Command::Criteria(args) => criteria::run(&ctx, args),
        Command::Study(args) => study::run(&ctx, args),
        Command::Serve(args) => serve::run(&ctx, args),
        Command::Users(args) => users::run(&ctx, args),
    }
}

/// What every command may use: the session and the output mode.
pub struct Context {
    pub session: Session,
    /// `--json`: machine-readable output, no progress bars.
    pub json: bool,
}

impl Context {
    /// Progress bars for a job (hidden with `--json`).
    pub fn bars(&self) -> Bars {
        Bars::new(self.json)
    }

    /// Prints a job's result as text or JSON.
    pub fn print<T: serde::Serialize + std::fmt::Display>(&self, value: &T) -> anyhow::Result<()> {
        crate::output::print(value, self.json)
    }
}
