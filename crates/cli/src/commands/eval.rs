//! `evident eval trialgpt`: runs a screening method on TrialGPT's
//! criterion-level annotations and scores it against the physicians,
//! beside GPT-4's answers on the same rows (writes eval.json and eval.md).
//! `evident eval n2c2 GOLD [--predicted DIR]`: the n2c2 2018 Track 1
//! metric of predicted XML, or of Evident's screening, against gold XML.

use std::path::PathBuf;

use evident_app::evaluation::{N2c2Request, TrialgptRequest};

use crate::args::{method, ScreenArgs};
use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: EvalCommand,
}

#[derive(clap::Subcommand, Debug)]
enum EvalCommand {
    /// Score a method on TrialGPT's criterion-level annotations.
    Trialgpt(TrialgptArgs),
    /// Score n2c2 2018 Track 1 predictions against gold XML.
    N2c2(N2c2Args),
}

#[derive(clap::Args, Debug)]
struct TrialgptArgs {
    /// The annotation file (e.g. ../shared/data/trialgpt/criterion_annotations_dev.json).
    #[arg(long)]
    annotations: PathBuf,
    /// SIGIR relevance labels for the trial-level comparison (query-id,
    /// corpus-id, score); default: dataset/sigir/qrels/test.tsv beside the
    /// annotation file, when present.
    #[arg(long)]
    qrels: Option<PathBuf>,
    /// Only the first N annotated patients (in file order).
    #[arg(long, conflicts_with = "topics")]
    limit_patients: Option<usize>,
    /// Only these annotated patients (topic ids, comma-separated).
    #[arg(long, value_delimiter = ',')]
    topics: Vec<String>,
    /// Where eval.json and eval.md go.
    #[arg(long, default_value = "evident-eval")]
    out: PathBuf,
    /// Also run this strategy (same model and settings) and report the
    /// difference --strategy minus it, with a paired bootstrap over patients.
    #[arg(long)]
    baseline: Option<String>,
    #[command(flatten)]
    screen: ScreenArgs,
}

#[derive(clap::Args, Debug)]
struct N2c2Args {
    /// Folder of gold n2c2 XML files.
    gold: PathBuf,
    /// Folder of predicted XML files with the same names: score them
    /// instead of screening with Evident.
    #[arg(long)]
    predicted: Option<PathBuf>,
    /// The criteria set (default: the n2c2 2018 set shipped with Evident,
    /// criteria/n2c2-2018.yaml).
    #[arg(long)]
    criteria: Option<PathBuf>,
    #[command(flatten)]
    screen: ScreenArgs,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    match &args.command {
        EvalCommand::Trialgpt(a) => {
            let request = TrialgptRequest {
                annotations: a.annotations.clone(),
                qrels: a.qrels.clone(),
                limit_patients: a.limit_patients,
                topics: a.topics.clone(),
                out: a.out.clone(),
                baseline: a.baseline.as_deref().map(|b| method("--baseline", b)).transpose()?,
                options: a.screen.options()?,
            };
            ctx.print(&evident_app::evaluation::evaluate_trialgpt(&ctx.session, &request, &ctx.bars())?)?;
        }
        EvalCommand::N2c2(a) => {
            let request = N2c2Request {
                gold: a.gold.clone(),
                predicted: a.predicted.clone(),
                criteria: a.criteria.clone(),
                options: a.screen.options()?,
            };
            ctx.print(&evident_app::evaluation::evaluate_n2c2(&ctx.session, &request, &ctx.bars())?)?;
        }
    }
    Ok(Exit::Found)
}
