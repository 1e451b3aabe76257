//! `evident match`: screens patients against one or more trials with one
//! method (zero-shot ACAN/ACIN/ICAN/ICIN, MAKAR, MAKAR-Aug, MAKAR-Reason),
//! storing each decision as it is made, and writes the report (HTML, JSON,
//! CSV). The same command resumes a killed run. The run summary gives
//! calls, tokens, cost and latency.

use std::path::PathBuf;

use evident_app::screening::{parse_checks, parse_screening_date, TrialNames, TrialsRequest};

use crate::args::ScreenArgs;
use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("who").required(true).args(["patients", "all"])))]
pub struct Args {
    /// Criteria files: Evident criteria sets (YAML/JSON), ClinicalTrials.gov
    /// API v2 study JSON, or eligibility text pasted from a registry (`-`:
    /// standard input). Several trials rank trials for each patient.
    #[arg(long = "trial", required = true)]
    pub trials: Vec<PathBuf>,
    /// The trial id of criteria given as text (default: the file name).
    #[arg(long)]
    pub trial_id: Option<String>,
    /// The title of criteria given as text.
    #[arg(long)]
    pub title: Option<String>,
    /// Whether reviewed checks over the structured record decide their
    /// criteria: on, off, or both (the model decides too; disagreements
    /// need review). Default: on where the criteria carry reviewed checks.
    #[arg(long)]
    pub checks: Option<String>,
    /// The date checks are evaluated at, YYYY-MM-DD (default: each
    /// patient's most recent dated document).
    #[arg(long)]
    pub screening_date: Option<String>,
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
    /// A fitted label correction table (Evident's, not a paper's; written by
    /// `evident eval trialgpt --label-correction --save-correction FILE`):
    /// each model decision is relabelled by the physicians' most frequent
    /// label for its criterion type and predicted label; the report shows
    /// both labels. Refused when fitted for another strategy or model.
    #[arg(long, value_name = "FILE")]
    pub label_correction: Option<PathBuf>,
    /// A fitted threshold table on P(MET) (Evident's, not a paper's;
    /// written by `evident eval trialgpt --threshold-calibration
    /// --save-thresholds FILE`; makar-zero-shot, makar-aug): the model is
    /// asked for log-probabilities at its 0/1 answer and each decision is
    /// MET when P(MET) reaches its criterion type's threshold; the trace
    /// keeps P(MET) and the model's label. Refused when fitted for another
    /// strategy, model or levers.
    #[arg(long, value_name = "FILE", conflicts_with = "label_correction")]
    pub thresholds: Option<PathBuf>,
    #[command(flatten)]
    pub screen: ScreenArgs,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    let mut options = args.screen.options()?;
    options.checks =
        args.checks.as_deref().map(parse_checks).transpose().map_err(|e| anyhow::anyhow!("--checks: {e}"))?;
    options.screening_date = args
        .screening_date
        .as_deref()
        .map(parse_screening_date)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--screening-date: {e}"))?;
    options.label_correction = args.label_correction.clone();
    options.thresholds = args.thresholds.clone();
    let stdin = if args.trials.iter().any(|t| t.as_os_str() == "-") { Some(read_stdin()?) } else { None };
    let request = TrialsRequest {
        trials: args.trials.clone(),
        stdin,
        names: TrialNames { trial_id: args.trial_id.clone(), title: args.title.clone() },
        patients: if args.all { None } else { Some(args.patients.clone()) },
        out: args.out.clone(),
        run_name: args.run.clone(),
        options,
    };
    let report = evident_app::screening::screen_trials(&ctx.session, &request, &ctx.bars())?;
    ctx.print(&report)?;
    Ok(Exit::Found)
}

fn read_stdin() -> anyhow::Result<String> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .map_err(|e| anyhow::anyhow!("cannot read the criteria from standard input: {e}"))?;
    Ok(text)
}
