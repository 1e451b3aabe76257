//! `evident eval trialgpt`: runs a screening method on TrialGPT's
//! criterion-level annotations and scores it against the physicians with
//! the metrics of `evident_eval` (accuracy in TrialGPT's labels and
//! collapsed, per-class P/R/F1, Cohen's kappa, evidence-sentence P/R/F1,
//! 95% bootstrap intervals over patients), beside GPT-4's answers on the
//! same rows, plus trial-level eligibility against the SIGIR relevance
//! labels and the run's calls, tokens, time and pipeline failures. Every
//! decision is stored, so an interrupted evaluation resumes.
//!
//! `evident eval n2c2 GOLD --predicted DIR`: the n2c2 2018 Track 1 metric
//! (per-criterion met / not-met F1, overall micro and macro F1) of one
//! folder of annotated XML against another.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use evident_eval::run::{labelled_results, load_qrels, pairs, predictions, store_notes, trial_level, TrialLevel};
use evident_eval::{compare, load_annotations, report_row, Comparison, Prediction, ReportRow};
use evident_match::batch::stored_results;
use evident_match::report::patient_level;
use evident_match::trial_verdict;
use serde_json::json;

use crate::commands::match_cmd::{ScreenOptions, Screening};
use crate::commands::Context;
use crate::Outcome;

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
    screen: ScreenOptions,
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
    screen: ScreenOptions,
}

/// The n2c2 2018 criteria as shipped in `criteria/n2c2-2018.yaml`.
const N2C2_CRITERIA: &str = include_str!("../../../../criteria/n2c2-2018.yaml");

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Outcome> {
    match &args.command {
        EvalCommand::Trialgpt(a) => trialgpt(ctx, a),
        EvalCommand::N2c2(a) => n2c2(ctx, a),
    }
}

fn trialgpt(ctx: &Context, args: &TrialgptArgs) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    if let Some(b) = &args.baseline {
        if evident_match::batch::Method::parse(b).is_none() {
            anyhow::bail!(
                "--baseline {b:?} is not a strategy; use one of {}",
                evident_match::batch::Method::ALL.map(|m| m.as_str()).join(", ")
            );
        }
    }
    let rows = load_annotations(&args.annotations)?;
    let mut all_pairs = pairs(&rows);
    let mut topics: Vec<String> = Vec::new();
    for p in &all_pairs {
        if !topics.contains(&p.topic) {
            topics.push(p.topic.clone());
        }
    }
    if let Some(n) = args.limit_patients {
        topics.truncate(n);
    }
    if !args.topics.is_empty() {
        if let Some(missing) = args.topics.iter().find(|t| !topics.contains(t)) {
            anyhow::bail!("--topics: {missing} has no annotated row in {}", args.annotations.display());
        }
        topics.retain(|t| args.topics.contains(t));
    }
    all_pairs.retain(|p| topics.contains(&p.topic));
    let qrels_path = args.qrels.clone().or_else(|| {
        let default = args.annotations.parent()?.join("dataset/sigir/qrels/test.tsv");
        default.is_file().then_some(default)
    });
    let qrels = match &qrels_path {
        Some(p) => Some(load_qrels(p)?),
        None => None,
    };

    let mut store = ctx.open_store()?;
    store_notes(&mut store, &rows).map_err(|e| anyhow::anyhow!("{}: {e}", args.annotations.display()))?;
    drop(store);
    let ours = evaluate(ctx, &args.screen, &all_pairs, qrels.as_ref())?;
    let baseline = match &args.baseline {
        Some(strategy) => {
            let opts = ScreenOptions { strategy: strategy.clone(), ..args.screen.clone() };
            Some(evaluate(ctx, &opts, &all_pairs, qrels.as_ref())?)
        }
        None => None,
    };

    let gpt4: Vec<Prediction> = all_pairs.iter().flat_map(|p| p.rows.iter().map(|r| r.gpt4_prediction())).collect();
    let expert_items: Vec<_> = all_pairs
        .iter()
        .filter_map(|pair| {
            let label = qrels.as_ref()?.get(&(pair.topic.clone(), pair.set.trial_id.clone()))?;
            let expert = trial_verdict(&pair.set, &labelled_results(pair, false)).eligibility;
            let gpt4 = trial_verdict(&pair.set, &labelled_results(pair, true)).eligibility;
            Some(((expert, *label), (gpt4, *label)))
        })
        .collect();
    let (expert_items, gpt4_items): (Vec<_>, Vec<_>) = expert_items.into_iter().unzip();
    let ours_row = report_row(&ours.predictions);
    let gpt4_row = report_row(&gpt4);
    let baseline_row = baseline.as_ref().map(|b| report_row(&b.predictions));
    let comparison = baseline.as_ref().map(|b| compare(&ours.predictions, &b.predictions));
    let trial = qrels.as_ref().map(|_| {
        json!({
            "qrels": qrels_path,
            "method": trial_level(&ours.trial_items),
            "baseline": baseline.as_ref().map(|b| trial_level(&b.trial_items)),
            "physician_labels": trial_level(&expert_items),
            "gpt4_labels": trial_level(&gpt4_items),
        })
    });
    let elapsed = started.elapsed().as_secs_f64();
    let result = json!({
        "annotations": args.annotations,
        "method": ours.method,
        "retrieval": ours.retrieval,
        "patients": topics.len(),
        "pairs": all_pairs.len(),
        "rows": ours.predictions.len(),
        "method_row": ours_row,
        "gpt4_row": gpt4_row,
        "baseline": baseline.as_ref().map(|b| json!({
            "method": b.method,
            "row": baseline_row,
            "usage": b.usage,
            "model_runs": b.model_runs,
            "runs": b.run_ids,
            "difference": comparison,
        })),
        "trial_level": trial,
        "usage": ours.usage,
        "model_runs": ours.model_runs,
        "wall_seconds_this_invocation": elapsed,
        "runs": ours.run_ids,
    });
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    std::fs::write(args.out.join("eval.json"), serde_json::to_string_pretty(&result)?)?;
    let mut md = markdown(&ours, &ours_row, &gpt4_row, &expert_items, &gpt4_items, topics.len());
    if let (Some(b), Some(b_row), Some(c)) = (&baseline, &baseline_row, &comparison) {
        md.push_str(&comparison_markdown(&ours, b, b_row, c));
    }
    std::fs::write(args.out.join("eval.md"), &md)?;
    if ctx.json() {
        crate::output::print_json(&result)?;
    } else {
        print!("{md}");
        println!("written: {} and {}", args.out.join("eval.md").display(), args.out.join("eval.json").display());
    }
    Ok(Outcome::Found)
}

/// One method's answers on the annotated pairs.
struct MethodEval {
    method: &'static str,
    retrieval: evident_match::batch::RetrievalSettings,
    predictions: Vec<Prediction>,
    /// (predicted eligibility, SIGIR relevance label) per labelled pair.
    trial_items: Vec<(evident_match::Eligibility, i64)>,
    /// What `model_runs` cost together.
    usage: evident_store::ModelRunSummary,
    /// The model runs that made the evaluated pairs' decisions.
    model_runs: Vec<String>,
    run_ids: Vec<String>,
}

/// Screens every pair with one method (resuming stored decisions) and
/// reads its answers back.
fn evaluate(
    ctx: &Context,
    opts: &ScreenOptions,
    all_pairs: &[evident_eval::run::Pair],
    qrels: Option<&BTreeMap<(String, String), i64>>,
) -> anyhow::Result<MethodEval> {
    let store = ctx.open_store()?;
    let patients: Vec<String> = all_pairs.iter().map(|p| p.patient_id.clone()).collect();
    let label = format!("eval trialgpt {}", opts.strategy);
    let screening = Screening::open(ctx, opts, store, &patients, &label)?;
    let mut run_ids = Vec::new();
    for (i, pair) in all_pairs.iter().enumerate() {
        let prefix =
            format!("{} {} x {} ({}/{})", opts.strategy, pair.topic, pair.set.trial_id, i + 1, all_pairs.len());
        // A model run per pair: the usage below counts the pairs evaluated
        // and no others screened in the same invocation.
        let pair_label = format!("{label}: {} x {}", pair.topic, pair.set.trial_id);
        let outcome =
            screening.screen_in_own_run(ctx, &pair.set, std::slice::from_ref(&pair.patient_id), &pair_label, &prefix);
        match outcome {
            Ok(o) => run_ids.push(o.run_id),
            Err(e) => {
                screening.finish()?;
                anyhow::bail!(
                    "evaluation of {} stopped at {} x {}: {e}. Decisions made so far are stored; run the same command again to resume.",
                    opts.strategy,
                    pair.topic,
                    pair.set.trial_id
                );
            }
        }
    }
    screening.finish()?;

    let st = screening.store.lock().unwrap();
    let mut predictions_out: Vec<Prediction> = Vec::new();
    let mut trial_items = Vec::new();
    for (pair, run_id) in all_pairs.iter().zip(&run_ids) {
        let stored: Vec<_> = stored_results(&st, run_id)?
            .into_iter()
            .filter(|p| p.patient_id == pair.patient_id)
            .flat_map(|p| p.stored)
            .collect();
        let results = patient_level(&pair.set, screening.method, &stored);
        predictions_out.extend(predictions(pair, &results));
        if let Some(label) = qrels.and_then(|q| q.get(&(pair.topic.clone(), pair.set.trial_id.clone()))) {
            trial_items.push((trial_verdict(&pair.set, &results).eligibility, *label));
        }
    }
    // The model runs that made the evaluated pairs' decisions (decisions
    // resumed from earlier invocations name theirs).
    let mut model_runs: Vec<String> = Vec::new();
    for (pair, run_id) in all_pairs.iter().zip(&run_ids) {
        for row in st.match_results(run_id)? {
            if row.patient_id == pair.patient_id {
                if let Some(m) = row.model_run_id {
                    if !model_runs.contains(&m) {
                        model_runs.push(m);
                    }
                }
            }
        }
    }
    let ids: Vec<&str> = model_runs.iter().map(String::as_str).collect();
    let usage = st.model_runs_summary(&screening.model_run_id, &label, &ids)?;
    drop(st);
    Ok(MethodEval {
        method: screening.method.as_str(),
        retrieval: screening.batch.retrieval,
        predictions: predictions_out,
        trial_items,
        usage,
        model_runs,
        run_ids,
    })
}

fn interval(i: &evident_eval::Interval) -> String {
    format!("{:.3} ({:.3}-{:.3})", i.estimate, i.low, i.high)
}

fn table_row(name: &str, r: &ReportRow, rows: usize) -> String {
    let m = &r.metrics;
    format!(
        "| {name} | {rows} | {} | {} | {} | {:.3} | {:.3} / {:.3} / {:.3} ({:.3}-{:.3}) | {} |\n",
        interval(&r.accuracy),
        interval(&r.accuracy_collapsed),
        interval(&r.kappa),
        m.kappa_collapsed,
        m.evidence_precision,
        m.evidence_recall,
        m.evidence_f1,
        r.evidence_f1.low,
        r.evidence_f1.high,
        m.failed
    )
}

fn markdown(
    ours: &MethodEval,
    ours_row: &ReportRow,
    gpt4: &ReportRow,
    expert: &[(evident_match::Eligibility, i64)],
    gpt4_trial: &[(evident_match::Eligibility, i64)],
    patients: usize,
) -> String {
    let method = ours.method;
    let rows = ours.predictions.len();
    let mut md = String::new();
    let _ = writeln!(md, "# TrialGPT criterion annotations: {method}\n");
    let _ = writeln!(md, "{rows} rows, {patients} patients; 95% intervals by bootstrap over patients.\n");
    md.push_str("| predictor | rows | accuracy (95% CI) | collapsed accuracy (95% CI) | kappa (95% CI) | collapsed kappa | evidence P / R / F1 (F1 95% CI) | failures |\n");
    md.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    md.push_str(&table_row(&format!("Evident {method}"), ours_row, rows));
    md.push_str(&table_row("GPT-4 (same rows)", gpt4, rows));
    let _ = writeln!(md, "\nPer class ({method}), precision / recall / F1 (support):");
    for (label, c) in &ours_row.metrics.per_class {
        let _ = writeln!(md, "- {label}: {:.3} / {:.3} / {:.3} ({})", c.precision, c.recall, c.f1, c.support);
    }
    if !ours.trial_items.is_empty() {
        md.push_str(
            "\nTrial level (annotated criteria only) against the SIGIR relevance labels (2 eligible, 1 excluded):\n\n",
        );
        md.push_str(
            "| labels from | pairs | accuracy | predicted -> relevance label counts |\n| --- | --- | --- | --- |\n",
        );
        md.push_str(&trial_line(&format!("Evident {method}"), &trial_level(&ours.trial_items)));
        md.push_str(&trial_line("GPT-4", &trial_level(gpt4_trial)));
        md.push_str(&trial_line("physicians", &trial_level(expert)));
    }
    let _ = writeln!(md, "\nUsage: {}", evident_match::report::usage_text(&ours.usage));
    md
}

fn trial_line(name: &str, t: &TrialLevel) -> String {
    format!("| {name} | {} | {:.3} | {} |\n", t.pairs, t.accuracy, confusion_text(&t.confusion))
}

/// The baseline's row and the paired differences `method - baseline`.
fn comparison_markdown(ours: &MethodEval, base: &MethodEval, base_row: &ReportRow, c: &Comparison) -> String {
    let (a, b) = (ours.method, base.method);
    let rows = base.predictions.len();
    let mut md = String::new();
    let _ = writeln!(md, "\n## {a} against {b} on the same rows\n");
    md.push_str("| predictor | rows | accuracy (95% CI) | collapsed accuracy (95% CI) | kappa (95% CI) | collapsed kappa | evidence P / R / F1 (F1 95% CI) | failures |\n");
    md.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    md.push_str(&table_row(&format!("Evident {b}"), base_row, rows));
    let _ = writeln!(
        md,
        "\nDifference {a} - {b}, 95% interval by a paired bootstrap over patients (both methods' rows of each drawn patient), and the share of replicates above zero:\n"
    );
    md.push_str("| metric | difference (95% CI) | replicates > 0 |\n| --- | --- | --- |\n");
    for (name, d) in [
        ("accuracy", &c.accuracy),
        ("collapsed accuracy", &c.accuracy_collapsed),
        ("kappa", &c.kappa),
        ("evidence F1", &c.evidence_f1),
    ] {
        let _ = writeln!(
            md,
            "| {name} | {:+.3} ({:+.3} to {:+.3}) | {:.3} |",
            d.estimate, d.low, d.high, d.share_above_zero
        );
    }
    if !base.trial_items.is_empty() {
        md.push_str("\nTrial level:\n\n| labels from | pairs | accuracy | predicted -> relevance label counts |\n| --- | --- | --- | --- |\n");
        md.push_str(&trial_line(&format!("Evident {b}"), &trial_level(&base.trial_items)));
    }
    let _ = writeln!(md, "\nUsage ({b}): {}", evident_match::report::usage_text(&base.usage));
    md
}

fn confusion_text(c: &BTreeMap<String, BTreeMap<i64, usize>>) -> String {
    c.iter()
        .map(|(pred, by)| {
            let parts: Vec<String> = by.iter().map(|(l, n)| format!("{l}: {n}")).collect();
            format!("{pred} ({})", parts.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// File name -> criterion -> met.
type N2c2Tags = BTreeMap<String, BTreeMap<String, bool>>;

/// Reads every `.xml` of a folder: file name -> tags (criterion -> met).
fn n2c2_tags(dir: &Path) -> anyhow::Result<N2c2Tags> {
    let mut out = BTreeMap::new();
    let entries = std::fs::read_dir(dir).with_context(|| format!("cannot read the folder {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_none_or(|e| !e.eq_ignore_ascii_case("xml")) {
            continue;
        }
        let xml = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let file = evident_ingest::n2c2::parse(&xml).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let mut tags = BTreeMap::new();
        for (criterion, value) in file.tags {
            let met = match value.as_str() {
                "met" => true,
                "not met" => false,
                other => anyhow::bail!(
                    "{}: tag {criterion} has met={other:?}; expected \"met\" or \"not met\"",
                    path.display()
                ),
            };
            tags.insert(criterion, met);
        }
        let name = path.file_name().expect("a file").to_string_lossy().into_owned();
        out.insert(name, tags);
    }
    if out.is_empty() {
        anyhow::bail!("{} holds no .xml files", dir.display());
    }
    Ok(out)
}

fn n2c2(ctx: &Context, args: &N2c2Args) -> anyhow::Result<Outcome> {
    let gold = n2c2_tags(&args.gold)?;
    let (predicted, failures) = match &args.predicted {
        Some(dir) => (n2c2_tags(dir)?, 0),
        None => n2c2_screen(ctx, args)?,
    };
    let mut pairs = Vec::new();
    for (file, gold_tags) in &gold {
        let Some(pred_tags) = predicted.get(file) else {
            anyhow::bail!("{} has no prediction for {file}", args.gold.display());
        };
        for (criterion, gold_met) in gold_tags {
            // A criterion without a prediction (a failed decision) is scored wrong.
            let predicted_met = pred_tags.get(criterion).copied().unwrap_or(!*gold_met);
            pairs.push(evident_eval::N2c2Pair { criterion_id: criterion.clone(), gold_met: *gold_met, predicted_met });
        }
    }
    let metrics = evident_eval::n2c2_metrics(&pairs);
    if ctx.json() {
        crate::output::print_json(
            &json!({"metrics": metrics, "files": gold.len(), "judgements": pairs.len(), "failed_decisions": failures}),
        )?;
        return Ok(Outcome::Found);
    }
    println!("{} files, {} judgements, {failures} failed decisions (scored wrong)", gold.len(), pairs.len());
    println!("{:<16} {:>8} {:>8}", "criterion", "met F1", "not F1");
    for (criterion, c) in &metrics.per_criterion {
        println!("{criterion:<16} {:>8.4} {:>8.4}", c.f1_met, c.f1_not_met);
    }
    println!("overall micro F1 {:.4}, macro F1 {:.4}", metrics.overall_micro_f1, metrics.overall_macro_f1);
    Ok(Outcome::Found)
}

/// Ingests the gold files (their text; the tags stay evaluation labels),
/// screens each patient with the criteria set, and returns file name ->
/// criterion -> predicted met (MET is met; NOT MET, NOT ENOUGH INFORMATION
/// and NOT APPLICABLE are not met, as the challenge is binary), with the
/// number of failed decisions (left out, so scored wrong).
fn n2c2_screen(ctx: &Context, args: &N2c2Args) -> anyhow::Result<(N2c2Tags, usize)> {
    let set = match &args.criteria {
        Some(path) => evident_match::CriteriaSet::load(path)?,
        None => evident_match::CriteriaSet::from_yaml_str(N2C2_CRITERIA, "criteria/n2c2-2018.yaml")?,
    };
    let units = evident_ingest::plan(std::slice::from_ref(&args.gold), evident_ingest::Format::N2c2)?;
    let mut store = ctx.open_store()?;
    let report = evident_ingest::ingest(&mut store, &units, false, &NoProgress)?;
    let problems: Vec<String> = report.problems().map(|p| p.to_string()).collect();
    if !problems.is_empty() {
        anyhow::bail!("{}: {}", args.gold.display(), problems.join("; "));
    }
    let files: Vec<(String, String)> = units
        .iter()
        .map(|u| {
            let name = u.path.file_name().expect("a file").to_string_lossy().into_owned();
            let patient = u.path.file_stem().expect("a file").to_string_lossy().into_owned();
            (name, patient)
        })
        .collect();
    let patients: Vec<String> = files.iter().map(|(_, p)| p.clone()).collect();
    let label = format!("eval n2c2 {}", args.screen.strategy);
    let screening = Screening::open(ctx, &args.screen, store, &patients, &label)?;
    let outcome = screening.screen(ctx, &set, &patients, None, "n2c2");
    screening.finish()?;
    let outcome = outcome
        .map_err(|e| anyhow::anyhow!("{e}. Decisions made so far are stored; run the same command again to resume."))?;
    let st = screening.store.lock().unwrap();
    let stored = stored_results(&st, &outcome.run_id)?;
    let mut out = BTreeMap::new();
    let mut failures = 0;
    for (file, patient) in files {
        let results: Vec<_> =
            stored.iter().filter(|p| p.patient_id == patient).flat_map(|p| p.stored.clone()).collect();
        let mut tags = BTreeMap::new();
        for r in patient_level(&set, screening.method, &results) {
            match r.decision() {
                Some(d) => {
                    tags.insert(r.criterion_id.clone(), d == evident_match::Decision::Met);
                }
                None => failures += 1,
            }
        }
        out.insert(file, tags);
    }
    Ok((out, failures))
}

struct NoProgress;
impl evident_ingest::Progress for NoProgress {}
