//! `evident match`: screens patients against one or more trials with one
//! method (zero-shot ACAN/ACIN/ICAN/ICIN, MAKAR, MAKAR-Aug, MAKAR-Reason),
//! storing each decision as it is made, and writes the report (HTML, JSON,
//! CSV). The same command resumes a killed run. The run summary gives
//! calls, tokens, cost and latency.

use std::path::PathBuf;

use evident_app::screening::TrialsRequest;

use crate::args::ScreenArgs;
use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("who").required(true).args(["patients", "all"])))]
pub struct Args {
    /// Criteria files: Evident criteria sets (YAML/JSON) or ClinicalTrials.gov
    /// API v2 study JSON. Several trials rank trials for each patient.
    #[arg(long = "trial", required = true)]
    pub trials: Vec<PathBuf>,
    /// Patients to screen, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub patients: Vec<String>,
    /// Every patient in the store.
    #[arg(long)]
    pub all: bool,
    /// Where the report goes (report.html, decisions.json, decisions.csv).
    #[arg(long, default_value = "evident-report")]
    pub out: PathBuf,
    /// Name the run (default: derived from trial, method, settings and model).
    #[arg(long)]
    pub run: Option<String>,
    #[command(flatten)]
    pub screen: ScreenArgs,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    let request = TrialsRequest {
        trials: args.trials.clone(),
        patients: if args.all { None } else { Some(args.patients.clone()) },
        out: args.out.clone(),
        run_name: args.run.clone(),
        options: args.screen.options()?,
    };
    let report = evident_app::screening::screen_trials(&ctx.session, &request, &ctx.bars())?;
    ctx.print(&report)?;
    Ok(Exit::Found)
}
