//! `evident eval trialgpt`: runs a screening method on TrialGPT's
//! criterion-level annotations and scores it against the physicians,
//! beside GPT-4's answers on the same rows (writes eval.json and eval.md).
//! `evident eval chart --questions FILE --method M ...`: chart questions
//! scored against a question bank; `evident eval chart-bank --from DIR
//! --seed N --out FILE` generates one.
//! `evident eval n2c2 GOLD [--predicted DIR]`: the n2c2 2018 Track 1
//! metric of predicted XML, or of Evident's screening, against gold XML.
//! `evident eval rwe` and `evident eval cohort-judge`: RWE-bench's metrics
//! of the study agent, and the CohortEval check of its cohort judge.

use std::path::PathBuf;

use evident_app::evaluation::{N2c2Request, TrialgptRequest};
use evident_app::study::{EvalRequest as RweRequest, Strategy as RweStrategy};

use crate::args::{method, ModelArgs, ScreenArgs};
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
    /// RWE-bench's metrics (ACC, RAR, SMR, SR, CR, steps) of the study agent over a folder of tasks.
    Rwe(RweArgs),
    /// The CohortEval check of the cohort judge on a task with cohort_eval.yaml: sensitivity,
    /// specificity, PPV and NPV over true members, counterfactual and adversarial negatives.
    CohortJudge(CohortJudgeArgs),
    /// Chart questions: answer a question bank with each method, score as the myeloma paper does.
    Chart(ChartArgs),
    /// Generate a chart question bank from FHIR R4 bundles or a MIMIC-IV folder (templates, seed, the paper's deck draw).
    ChartBank(ChartBankArgs),
}

#[derive(clap::Args, Debug)]
struct ChartArgs {
    /// The question bank (JSONL), e.g. examples/chart/bank/dev.jsonl.
    #[arg(long)]
    questions: PathBuf,
    /// A method (repeat for several): agent, baseline, simple-rag,
    /// full-context (as much of the record as `[llm] context_size` holds),
    /// an ablation (agent-no-skills, ...) or any other method `evident ask
    /// --method` accepts.
    #[arg(long = "method", required = true)]
    methods: Vec<String>,
    /// Runs per question and method (the paper: 10); scores are averaged
    /// per question. Run 1 samples with the model's default seed, run r > 1
    /// with seed r. The agent decodes greedily unless --agent-temperature
    /// is given, so more than one run needs it.
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// The agent's (and its ablations') sampling temperature (default 0,
    /// greedy); the comparators sample at the paper's 0.2.
    #[arg(long)]
    agent_temperature: Option<f32>,
    /// Questions answered at once (useful against servers, and with the
    /// embedded model's `[llm] parallel` slots); answers with more than
    /// one can depend on which requests the model decoded together.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Where answers.jsonl, results.json and summary.md go; run the same
    /// command again to resume.
    #[arg(long, default_value = "evident-eval-chart")]
    out: PathBuf,
    /// A stratified subset of N questions instead of the whole file, one
    /// per patient: the bank's patients shuffled with --sample-seed, each
    /// giving its first question of the level due (1, 2, 3 in turn; gold
    /// answers are never read). With --limit K the first K of the subset:
    /// K patients, the levels in turn.
    #[arg(long)]
    sample: Option<usize>,
    /// The seed of --sample's patient shuffle.
    #[arg(long, default_value_t = 42, requires = "sample")]
    sample_seed: u64,
    /// Pass over the first N questions of the file (of the subset, with
    /// --sample) before --limit: `--sample 40 --skip 24` is the 16
    /// questions after a 24-question sample's.
    #[arg(long, default_value_t = 0)]
    skip: usize,
    /// Only the first N questions of the file (of the subset, with --sample).
    #[arg(long)]
    limit: Option<usize>,
    /// Bootstrap resamples for every interval and paired difference.
    #[arg(long, default_value_t = 10_000)]
    resamples: usize,
    /// The bootstrap's seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// A JSON file of criteria sets (the format of
    /// crates/chart/data/criteria_sets.json) added to the built-in ones.
    #[arg(long)]
    criteria: Option<PathBuf>,
    #[command(flatten)]
    llm: ModelArgs,
    /// Do not serve answers from the model cache.
    #[arg(long)]
    no_cache: bool,
}

#[derive(clap::Args, Debug)]
struct ChartBankArgs {
    /// FHIR R4 bundle files or folders of them, or a MIMIC-IV folder (hosp/), repeatable, e.g.
    /// ../shared/data/synthea/generated-sample-data-R4 or ../shared/data/mimic-iv-demo.
    #[arg(long = "from", required = true)]
    from: Vec<PathBuf>,
    /// A templates file (default: the built-in templates, crates/chart/bank/templates.yaml).
    #[arg(long)]
    templates: Option<PathBuf>,
    /// The deck draw's seed (the paper: 42).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The bank to write (JSONL).
    #[arg(long)]
    out: PathBuf,
}

#[derive(clap::Args, Debug)]
struct CohortJudgeArgs {
    /// The task folder (task.yaml, gold.json, cohort_eval.yaml), e.g. crates/rwe/tasks/lactate-hospital-mortality.
    task: PathBuf,
    /// The study database: sqlite:PATH (the reference cohort's SQL is SQLite's).
    #[arg(long)]
    database: String,
    /// Judge runs (RWE-bench: 3).
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// True members (RWE-bench: 100; fewer when the reference cohort is smaller).
    #[arg(long, default_value_t = 100)]
    members: usize,
    /// Counterfactual negatives (RWE-bench: 30).
    #[arg(long, default_value_t = 30)]
    counterfactuals: usize,
    /// Adversarial negatives, built on the counterfactual ones (RWE-bench: 10).
    #[arg(long, default_value_t = 10)]
    adversarial: usize,
    /// Seed of the case sampling.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// paper (Figure 19's prompt on every case) or compiled (Evident's: the criteria written
    /// once as checks over the cases' facts, run by Evident).
    #[arg(long, default_value = "paper", value_parser = crate::args::JUDGE_NAMES)]
    judge: String,
    /// The judge model.
    #[command(flatten)]
    llm: ModelArgs,
    /// Do not serve answers from the model cache.
    #[arg(long)]
    no_cache: bool,
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
    /// Evident's label correction (not a paper's): relabel each patient's
    /// decisions by the physicians' most frequent label on the other
    /// patients' rows with the same criterion type and predicted label
    /// (leave one patient out); without --baseline, the baseline is the
    /// same decisions uncorrected.
    #[arg(long)]
    label_correction: bool,
    /// Write the label correction fitted on all the evaluated patients'
    /// rows (not leave one patient out) to FILE (JSON), for `evident match
    /// --label-correction FILE`.
    #[arg(long, value_name = "FILE", requires = "label_correction")]
    save_correction: Option<PathBuf>,
    /// Evident's threshold on P(MET) (not a paper's; makar-zero-shot,
    /// makar-aug): ask the model for log-probabilities at its 0/1 answer
    /// and decide each patient's rows by the per-type threshold that
    /// maximises accuracy on the other patients' rows; printed beside the
    /// model's own answers, the label correction and the majority-by-type
    /// rule, each with a paired bootstrap over patients.
    #[arg(long, conflicts_with = "label_correction")]
    threshold_calibration: bool,
    /// Write the thresholds fitted on all the evaluated patients' rows (not
    /// leave one patient out) to FILE (JSON), for `evident match --thresholds FILE`.
    #[arg(long, value_name = "FILE", requires = "threshold_calibration")]
    save_thresholds: Option<PathBuf>,
    #[command(flatten)]
    screen: ScreenArgs,
}

#[derive(clap::Args, Debug)]
struct RweArgs {
    /// A folder of task folders (task.yaml and gold.json each), e.g. crates/rwe/tasks.
    #[arg(long)]
    tasks: PathBuf,
    /// The study database: sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE.
    #[arg(long)]
    database: String,
    /// r (RWEAgent as in RWE-bench), typed, typed-grounded (typed, with answers only from
    /// computed results), or typed-read (typed-grounded, with each choice read from its
    /// computed result by Evident's rule where it can be).
    #[arg(long, default_value = "r", value_parser = ["r", "typed", "typed-grounded", "typed-read"])]
    strategy: String,
    /// Runs per task (RWE-bench: 3); the table shows mean and standard error over runs.
    /// Run 1 samples with the model's own seed, run r > 1 with seed r.
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// Where each run's folders go (run-N/TASK).
    #[arg(long, default_value = "evident-eval-rwe")]
    out: PathBuf,
    #[arg(long)]
    max_steps: Option<u32>,
    #[command(flatten)]
    judge: crate::args::JudgeArgs,
    /// The agent's and the judge's model.
    #[command(flatten)]
    llm: ModelArgs,
    /// Do not serve answers from the model cache.
    #[arg(long)]
    no_cache: bool,
    #[command(flatten)]
    database_hash: crate::args::DatabaseHashArgs,
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
                label_correction: a.label_correction,
                save_correction: a.save_correction.clone(),
                threshold_calibration: a.threshold_calibration,
                save_thresholds: a.save_thresholds.clone(),
            };
            ctx.print(&evident_app::evaluation::evaluate_trialgpt(&ctx.session, &request, &ctx.bars())?)?;
        }
        EvalCommand::Rwe(a) => {
            let request = RweRequest {
                tasks: a.tasks.clone(),
                db: a.database.clone(),
                model: a.llm.choice(),
                strategy: RweStrategy::from_name(&a.strategy).unwrap_or(RweStrategy::R),
                runs: a.runs,
                out: a.out.clone(),
                max_steps: a.max_steps,
                judge: a.judge.strategy(),
                use_cache: !a.no_cache,
                database_hash: a.database_hash.request(),
            };
            ctx.print(&evident_app::study::evaluate(&ctx.session, &request, &ctx.bars())?)?;
        }
        EvalCommand::CohortJudge(a) => {
            let request = evident_app::study::JudgeCheckRequest {
                task: a.task.clone(),
                db: a.database.clone(),
                model: a.llm.choice(),
                strategy: crate::args::judge_strategy(&a.judge),
                runs: a.runs,
                counts: evident_app::study::CaseCounts {
                    members: a.members,
                    counterfactual: a.counterfactuals,
                    adversarial: a.adversarial,
                },
                seed: a.seed,
                use_cache: !a.no_cache,
            };
            ctx.print(&evident_app::study::check_judge(&ctx.session, &request)?)?;
        }
        EvalCommand::Chart(a) => {
            let request = evident_app::evaluation::chart::ChartEvalRequest {
                questions: a.questions.clone(),
                methods: a.methods.clone(),
                runs: a.runs,
                out: a.out.clone(),
                sample: a.sample,
                sample_seed: a.sample_seed,
                skip: a.skip,
                limit: a.limit,
                model: a.llm.choice(),
                use_cache: !a.no_cache,
                resamples: a.resamples,
                seed: a.seed,
                criteria_file: a.criteria.clone(),
                agent_temperature: a.agent_temperature,
                concurrency: a.concurrency,
            };
            ctx.print(&evident_app::evaluation::chart::evaluate_chart(&ctx.session, &request, &ctx.bars())?)?;
        }
        EvalCommand::ChartBank(a) => {
            let request = evident_app::evaluation::chart::BankRequest {
                from: a.from.clone(),
                templates: a.templates.clone(),
                seed: a.seed,
                out: a.out.clone(),
            };
            ctx.print(&evident_app::evaluation::chart::generate_bank(&request)?)?;
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
