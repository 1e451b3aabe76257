//! `evident study TASK --database URL [--strategy r|typed|typed-grounded|typed-read|both] [--out DIR]
//! [--database-hash cached|full|catalogue|none]`:
//! runs one observational-study task (a protocol with its questions and
//! gold answers) on a MIMIC-IV database with the study agent, audits the
//! cohort it exports, scores its answers and writes the evidence bundle.
//! Calls `evident_app::study::run` once per strategy.

use std::fmt;
use std::path::PathBuf;

use evident_app::study::{Strategy, StudyReport, StudyRequest};
use serde::Serialize;

use crate::args::{DatabaseHashArgs, ModelArgs};
use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The task: a task.yaml (with gold.json beside it) or its folder.
    pub task: PathBuf,
    /// The study database: sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE
    /// (`--db` is the global flag naming Evident's own store).
    #[arg(long)]
    pub database: String,
    /// r (RWEAgent as in RWE-bench: R only), typed (adds SQL and typed statistics tools),
    /// typed-grounded (typed, with answers only from computed results: fields by result key,
    /// choices after an effect or test), typed-read (typed-grounded, with each choice read from
    /// its computed result by Evident's rule where it can be), or both (r and typed).
    #[arg(long, default_value = "r", value_parser = ["r", "typed", "typed-grounded", "typed-read", "both"])]
    pub strategy: String,
    /// The run folder (workspace, steps.jsonl, bundle.json); running again resumes it.
    #[arg(long, default_value = "evident-study")]
    pub out: PathBuf,
    /// Steps at most (RWE-bench: 100).
    #[arg(long)]
    pub max_steps: Option<u32>,
    #[command(flatten)]
    pub judge: crate::args::JudgeArgs,
    #[command(flatten)]
    pub llm: ModelArgs,
    /// Do not serve answers from the model cache.
    #[arg(long)]
    pub no_cache: bool,
    /// The sampling seed (default: the model's own; the embedded model's is
    /// fixed, so a run at the paper's temperature 0.6 repeats until it changes).
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub database_hash: DatabaseHashArgs,
}

#[derive(Serialize)]
struct Reports(Vec<StudyReport>);

impl fmt::Display for Reports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        write!(f, "{}", text.join("\n\n"))
    }
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    let strategies = match args.strategy.as_str() {
        "both" => vec![Strategy::R, Strategy::Typed],
        name => vec![Strategy::from_name(name).unwrap_or(Strategy::R)],
    };
    let mut reports = Vec::new();
    for strategy in &strategies {
        let out = if strategies.len() > 1 { args.out.join(strategy.as_str()) } else { args.out.clone() };
        let request = StudyRequest {
            task: args.task.clone(),
            db: args.database.clone(),
            model: args.llm.choice(),
            strategy: *strategy,
            out,
            max_steps: args.max_steps,
            judge: args.judge.strategy(),
            use_cache: !args.no_cache,
            seed: args.seed,
            database_hash: args.database_hash.request(),
        };
        reports.push(evident_app::study::run(&ctx.session, &request, &ctx.bars())?);
    }
    ctx.print(&Reports(reports))?;
    Ok(Exit::Found)
}
