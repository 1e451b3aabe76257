//! `evident match`: screens patients against one or more trials with one
//! method (zero-shot ACAN/ACIN/ICAN/ICIN, MAKAR, MAKAR-Aug, MAKAR-Reason),
//! storing each decision as it is made, and writes the report (HTML, JSON,
//! CSV). The same command resumes a killed run. The run summary gives
//! calls, tokens, cost and latency.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use evident_llm::{ChatModel, Embedder, RecordingModel};
use evident_match::batch::{run_batch, BatchConfig, BatchOutcome, Method, Models, Progress, RetrievalSettings};
use evident_match::makar::{KnowledgeSource, LocalKnowledgeBase, MakarConfig, OnlineSearch};
use evident_match::report::{self, eligibility_text, MatchReport};
use evident_match::zero_shot::ZeroShotConfig;
use evident_match::{criteria_from_ctgov_json, CriteriaSet};
use evident_retrieve::Mode;
use evident_store::SectionFilter;

use crate::commands::embed::{embed_with_progress, load_embedder, ModelArgs};
use crate::commands::llm::llm_config;
use crate::commands::Context;
use crate::Outcome;

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
    pub screen: ScreenOptions,
}

/// How to screen: method, retrieval, models. Shared with `evident eval`.
#[derive(clap::Args, Debug, Clone)]
pub struct ScreenOptions {
    /// acan, acin, ican, icin, makar, makar-aug or makar-reason.
    #[arg(long, default_value = "ican")]
    pub strategy: String,
    /// Two-stage retrieval: none (whole notes), bm25, dense or hybrid.
    #[arg(long, default_value = "none")]
    pub retrieval: String,
    /// Sections kept per task by two-stage retrieval.
    #[arg(long, default_value_t = 5)]
    pub top_k: usize,
    /// Patients worked on at once (useful against servers).
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// The matching model: a known model, a GGUF path, or a name under [llm.models].
    #[arg(long, conflicts_with = "endpoint")]
    pub model: Option<String>,
    /// An OpenAI-compatible base URL for the matching model.
    #[arg(long)]
    pub endpoint: Option<String>,
    #[arg(long, default_value = "default", requires = "endpoint")]
    pub endpoint_model: String,
    /// Allow patient text to reach a non-loopback endpoint.
    #[arg(long)]
    pub allow_remote: bool,
    /// MAKAR: the model that augments criteria (criteria are not patient
    /// data, so it may be remote); default: the matching model.
    #[arg(long, conflicts_with = "augment_endpoint")]
    pub augment_model: Option<String>,
    #[arg(long)]
    pub augment_endpoint: Option<String>,
    #[arg(long, default_value = "default", requires = "augment_endpoint")]
    pub augment_endpoint_model: String,
    /// MAKAR: a knowledge base built with `evident kb index` for the retrieval agent.
    #[arg(long)]
    pub knowledge: Option<PathBuf>,
    /// MAKAR: a search endpoint (SearXNG JSON API) for the online search
    /// agent; without it online search is off.
    #[arg(long)]
    pub online_search: Option<String>,
    /// MAKAR: critic rounds at most per criterion.
    #[arg(long, default_value_t = 3)]
    pub max_critic_rounds: u32,
    /// Do not answer from (or add to) the model cache.
    #[arg(long)]
    pub no_cache: bool,
    #[command(flatten)]
    pub embed_model: ModelArgs,
}

/// Reads a trial: an Evident criteria set, or a ClinicalTrials.gov study.
pub fn load_trial(path: &Path) -> anyhow::Result<CriteriaSet> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read trial file {}", path.display()))?;
    let looks_ctgov = path.extension().is_some_and(|e| e == "json") && text.contains("\"protocolSection\"");
    if looks_ctgov {
        return Ok(criteria_from_ctgov_json(&text, &path.display().to_string())?);
    }
    Ok(CriteriaSet::load(path)?)
}

fn parse_retrieval(text: &str) -> anyhow::Result<Option<Mode>> {
    match text.to_ascii_lowercase().as_str() {
        "none" => Ok(None),
        other => Ok(Some(other.parse::<Mode>().map_err(|e| anyhow::anyhow!("--retrieval: {e} (or none)"))?)),
    }
}

/// Everything a screening needs, opened from the options: the store (shared
/// with the recording models), the models, the knowledge source, the
/// online search endpoint and the batch settings. One model run records
/// every call of the invocation.
pub struct Screening {
    pub store: Arc<Mutex<evident_store::Store>>,
    pub method: Method,
    pub batch: BatchConfig,
    pub model_run_id: String,
    pub prompts_dir: Option<PathBuf>,
    matching: RecordingModel,
    augmenting: Option<RecordingModel>,
    embedder: Option<evident_embed::MiniLmEmbedder>,
    knowledge: Option<LocalKnowledgeBase>,
    online: Option<OnlineSearch>,
}

impl Screening {
    /// Checks the options, embeds what dense retrieval will need for
    /// `patients`, opens the models and starts the model run `label`.
    pub fn open(
        ctx: &Context,
        opts: &ScreenOptions,
        mut store: evident_store::Store,
        patients: &[String],
        label: &str,
    ) -> anyhow::Result<Screening> {
        let method = Method::parse(&opts.strategy).ok_or_else(|| {
            anyhow::anyhow!(
                "--strategy {:?} is not known; use one of {}",
                opts.strategy,
                Method::ALL.map(|m| m.as_str()).join(", ")
            )
        })?;
        let retrieval = RetrievalSettings { mode: parse_retrieval(&opts.retrieval)?, top_k: opts.top_k };
        if retrieval.mode.is_some() && opts.top_k == 0 {
            anyhow::bail!("--top-k must be at least 1 with --retrieval {}", opts.retrieval);
        }
        if !method.augments() && (opts.knowledge.is_some() || opts.online_search.is_some()) {
            anyhow::bail!("--knowledge and --online-search are for --strategy makar or makar-aug");
        }
        let embedder = match retrieval.mode {
            Some(Mode::Dense | Mode::Hybrid) => {
                let embedder = load_embedder(ctx, &opts.embed_model)?;
                for p in patients {
                    let filter = SectionFilter { patient_id: Some(p.clone()), ..SectionFilter::default() };
                    if !store.sections_missing_embedding(embedder.model_id(), &filter)?.is_empty() {
                        embed_with_progress(&mut store, &embedder, &filter, 64, ctx.json())?;
                    }
                }
                Some(embedder)
            }
            _ => None,
        };
        let config = llm_config(ctx)?;
        let store = Arc::new(Mutex::new(store));
        let model_run_id = store.lock().unwrap().begin_model_run(label)?;
        let open = |model: &Option<String>, endpoint: &Option<String>, endpoint_model: &str, allow_remote: bool| {
            let (name, inner): (String, Arc<dyn ChatModel>) = match endpoint {
                Some(url) => (url.clone(), config.open_endpoint(url, endpoint_model, allow_remote)?),
                None => {
                    let name = model.clone().unwrap_or_else(|| config.default_model_name());
                    let m = config.open_chat_model(&name, allow_remote)?;
                    (name, m)
                }
            };
            let price = config.price_for(&name, inner.model_id());
            anyhow::Ok(
                RecordingModel::new(inner, store.clone(), &model_run_id)
                    .with_cache(config.cache && !opts.no_cache)
                    .with_price(price),
            )
        };
        let matching = open(&opts.model, &opts.endpoint, &opts.endpoint_model, opts.allow_remote)?;
        let separate_augmenter = opts.augment_model.is_some() || opts.augment_endpoint.is_some();
        let augmenting = if separate_augmenter && method.augments() {
            // Criteria only: augmentation requests carry no patient text.
            Some(open(&opts.augment_model, &opts.augment_endpoint, &opts.augment_endpoint_model, false)?)
        } else {
            None
        };
        let knowledge = match &opts.knowledge {
            Some(path) => Some(LocalKnowledgeBase::open(path)?),
            None => None,
        };
        let online = match &opts.online_search {
            Some(url) => Some(OnlineSearch::new(url, Duration::from_secs(30))?),
            None => None,
        };
        let batch = BatchConfig {
            method,
            retrieval,
            concurrency: opts.concurrency.max(1),
            zero_shot: ZeroShotConfig { repair: config.repair_policy(), ..ZeroShotConfig::default() },
            makar: MakarConfig {
                repair: config.repair_policy(),
                max_critic_rounds: opts.max_critic_rounds,
                ..MakarConfig::default()
            },
            run_name: None,
        };
        Ok(Screening {
            store,
            method,
            batch,
            model_run_id,
            prompts_dir: config.prompts_dir.clone(),
            matching,
            augmenting,
            embedder,
            knowledge,
            online,
        })
    }

    pub fn models(&self) -> Models<'_> {
        Models {
            matching: &self.matching,
            augmenting: self.augmenting.as_ref().map(|m| m as &dyn ChatModel).unwrap_or(&self.matching),
            embedder: self.embedder.as_ref().map(|e| e as &dyn Embedder),
            model_run_id: self.model_run_id.clone(),
            knowledge: self.knowledge.as_ref().map(|k| k as &dyn KnowledgeSource),
            online: self.online.as_ref(),
        }
    }

    /// Screens `patients` against one trial with a progress bar; the
    /// model calls go to this invocation's model run.
    pub fn screen(
        &self,
        ctx: &Context,
        set: &CriteriaSet,
        patients: &[String],
        run_name: Option<String>,
        bar_prefix: &str,
    ) -> Result<BatchOutcome, evident_match::batch::BatchError> {
        self.screen_with(ctx, set, patients, run_name, bar_prefix, &self.models())
    }

    /// Screens `patients` against one trial with its model calls in a model
    /// run of their own, labelled `label` and finished here, so that what
    /// this screening cost can be told apart from the rest of the
    /// invocation (the run id is then on every decision it makes).
    pub fn screen_in_own_run(
        &self,
        ctx: &Context,
        set: &CriteriaSet,
        patients: &[String],
        label: &str,
        bar_prefix: &str,
    ) -> anyhow::Result<BatchOutcome> {
        let run_id = self.store.lock().unwrap().begin_model_run(label)?;
        let matching = self.matching.in_run(&run_id);
        let augmenting = self.augmenting.as_ref().map(|m| m.in_run(&run_id));
        let models = Models {
            matching: &matching,
            augmenting: augmenting.as_ref().map(|m| m as &dyn ChatModel).unwrap_or(&matching),
            model_run_id: run_id.clone(),
            ..self.models()
        };
        let outcome = self.screen_with(ctx, set, patients, None, bar_prefix, &models);
        self.store.lock().unwrap().finish_model_run(&run_id)?;
        Ok(outcome?)
    }

    fn screen_with(
        &self,
        ctx: &Context,
        set: &CriteriaSet,
        patients: &[String],
        run_name: Option<String>,
        bar_prefix: &str,
        models: &Models<'_>,
    ) -> Result<BatchOutcome, evident_match::batch::BatchError> {
        let cfg = BatchConfig { run_name, ..self.batch.clone() };
        let bar = progress_bar(ctx.json(), bar_prefix);
        let on_progress = |p: Progress| match p {
            Progress::Planned { total, done } => {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            }
            Progress::Augmenting { criterion, of } => bar.set_message(format!("augmenting criterion {criterion}/{of}")),
            Progress::TaskDone => {
                bar.set_message("");
                bar.inc(1);
            }
        };
        let result = run_batch(&self.store, set, patients, &cfg, models, self.prompts_dir.as_deref(), &on_progress);
        bar.finish_and_clear();
        result
    }

    /// Ends the model run of this invocation.
    pub fn finish(&self) -> anyhow::Result<()> {
        self.store.lock().unwrap().finish_model_run(&self.model_run_id)?;
        Ok(())
    }
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Outcome> {
    let trials: Vec<CriteriaSet> = args.trials.iter().map(|p| load_trial(p)).collect::<anyhow::Result<_>>()?;
    let store = ctx.open_store()?;
    let patients: Vec<String> =
        if args.all { store.patients()?.into_iter().map(|p| p.patient.id).collect() } else { args.patients.clone() };
    if patients.is_empty() {
        anyhow::bail!("no patients to screen: the store {} is empty; ingest records first", ctx.cli.db.display());
    }
    for p in &patients {
        if store.patient(p)?.is_none() {
            anyhow::bail!("patient {p:?} is not in the store {}; `evident patients` lists them", ctx.cli.db.display());
        }
    }
    let label = format!("match {}", args.screen.strategy);
    let screening = Screening::open(ctx, &args.screen, store, &patients, &label)?;
    let mut outcomes: Vec<(CriteriaSet, BatchOutcome)> = Vec::new();
    let mut failure = None;
    for (i, set) in trials.iter().enumerate() {
        let run_name =
            args.run.as_ref().map(|r| if trials.len() > 1 { format!("{r}-{}", set.trial_id) } else { r.clone() });
        let prefix = format!("{} ({}/{})", set.trial_id, i + 1, trials.len());
        match screening.screen(ctx, set, &patients, run_name, &prefix) {
            Ok(outcome) => outcomes.push((set.clone(), outcome)),
            Err(e) => {
                failure = Some(anyhow::anyhow!(
                    "screening for trial {} stopped: {e}. Decisions made so far are stored; run the same command again to resume.",
                    set.trial_id
                ));
                break;
            }
        }
    }
    screening.finish()?;
    if let Some(e) = failure {
        return Err(e);
    }

    let st = screening.store.lock().unwrap();
    let mut trial_reports = Vec::new();
    for (set, outcome) in &outcomes {
        trial_reports.push(report::trial_report(&st, &outcome.run_id, set, &patients)?);
    }
    let report = report::match_report(trial_reports);
    write_report(&report, &args.out)?;
    print_summary(ctx, &report, &outcomes, &args.out)?;
    Ok(Outcome::Found)
}

fn progress_bar(quiet: bool, prefix: &str) -> indicatif::ProgressBar {
    if quiet {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} tasks {elapsed_precise} (eta {eta}) {msg}",
        )
        .expect("the template is valid")
        .progress_chars("=> "),
    );
    bar.set_prefix(prefix.to_string());
    bar
}

/// Writes report.html, decisions.json and decisions.csv into `dir`, each
/// through a temporary file so a reader never sees half a report.
pub fn write_report(report: &MatchReport, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create the report folder {}", dir.display()))?;
    let write = |name: &str, text: String| -> anyhow::Result<()> {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, dir.join(name)).with_context(|| format!("cannot write {}", dir.join(name).display()))?;
        Ok(())
    };
    write("report.html", report::to_html(report))?;
    write("decisions.json", serde_json::to_string_pretty(report)?)?;
    write("decisions.csv", report::to_csv(report))?;
    Ok(())
}

fn print_summary(
    ctx: &Context,
    report: &MatchReport,
    outcomes: &[(CriteriaSet, BatchOutcome)],
    out: &Path,
) -> anyhow::Result<()> {
    if ctx.json() {
        let trials: Vec<serde_json::Value> = report
            .trials
            .iter()
            .zip(outcomes)
            .map(|(t, (_, o))| {
                serde_json::json!({
                    "trial_id": t.trial.trial_id,
                    "run": o,
                    "usage": t.usage,
                    "patients": t.patients.iter().map(|p| serde_json::json!({
                        "patient_id": p.patient_id,
                        "eligibility": p.verdict.eligibility,
                        "matching_score": p.verdict.matching_score,
                        "counts": p.verdict.counts,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        crate::output::print_json(&serde_json::json!({"report": out.join("report.html"), "trials": trials}))?;
        return Ok(());
    }
    for (t, (_, o)) in report.trials.iter().zip(outcomes) {
        println!(
            "trial {} ({}), run {}: {} patients, {} tasks ({} run now, {} from earlier invocations)",
            t.trial.trial_id, t.method, o.run_id, o.patients, o.tasks_total, o.tasks_run, o.tasks_skipped
        );
        for p in &t.patients {
            let c = &p.verdict.counts;
            println!(
                "  {:<16} {:<13} score {:>5.2}  inclusion {}/{}/{} exclusion {}/{}/{} (met/not met/unknown){}{}",
                p.patient_id,
                eligibility_text(p.verdict.eligibility),
                p.verdict.matching_score,
                c.included,
                c.not_included,
                c.inclusion_unknown,
                c.excluded,
                c.not_excluded,
                c.exclusion_unknown,
                if c.failed > 0 { format!(", {} failed", c.failed) } else { String::new() },
                if c.flagged > 0 { format!(", {} flagged citations", c.flagged) } else { String::new() },
            );
        }
        if let Some(u) = &t.usage {
            println!("  usage: {}", report::usage_text(u));
        }
    }
    println!("report: {}", out.join("report.html").display());
    Ok(())
}
