//! Screening: patients against trials with one method (Wornow et al.'s
//! zero-shot ACAN/ACIN/ICAN/ICIN, MAKAR and its ablations), every decision
//! stored as it is made. [`Screening`] opens what a screening needs (the
//! models, the embedder dense retrieval uses, MAKAR's knowledge base and
//! online search, the batch settings) once; the match job
//! ([`trials`](crate::screening::trials)) and the evaluations use it. A
//! killed screening resumes when started again with the same definition.

mod criteria;
mod trials;

use std::path::PathBuf;
use std::time::Duration;

use evident_llm::{Embedder, StructuredModel};
use evident_match::batch::{run_batch, BatchConfig, BatchSummary, Method, Models, RetrievalSettings};
use evident_match::label_correction::{CorrectionTable, LoadedCorrection, Screened};
use evident_match::makar::{KnowledgeSource, LocalKnowledgeBase, MakarConfig, OnlineSearch, Variant};
use evident_match::threshold::{LoadedThresholds, ThresholdTable};
use evident_match::zero_shot::ZeroShotConfig;
use evident_match::CriteriaSet;
use evident_recorder::RecordingModel;
use evident_retrieve::Mode;
use evident_store::SectionFilter;

pub use criteria::{
    compile_criteria, load_trial, read_trial, split_criteria, CompileReport, CompileRequest, SplitReport, SplitRequest,
    TrialSource,
};
pub use evident_match::checks::ChecksMode;
pub use evident_match::{CriteriaForm, TrialNames};
pub use trials::{screen_trials, write_report, PatientLine, ScreeningReport, TrialLine, TrialsRequest};

use crate::error::{input_error, AppError, Result};
use crate::exemplars::open_bank;
pub use crate::exemplars::ExemplarOptions;
use crate::models::{embed_missing, EmbedderChoice, ModelChoice};
use crate::progress::{screening_event, ProgressEvent, ProgressSink};
use crate::search::EMBED_BATCH;
use crate::session::{lock, Session, SharedStore};

/// How to screen: method, retrieval, models.
#[derive(Debug, Clone)]
pub struct ScreeningOptions {
    pub method: Method,
    /// Two-stage retrieval (`None`: whole notes).
    pub retrieval: Option<Mode>,
    /// Sections kept per task by two-stage retrieval.
    pub top_k: usize,
    /// Screening tasks worked on at once (useful against servers and the
    /// embedded model's `[llm] parallel` slots).
    pub concurrency: usize,
    /// The matching model.
    pub matching: ModelChoice,
    /// MAKAR: the model that augments criteria (criteria carry no patient
    /// text, so it may be remote); `None`: the matching model.
    pub augmenting: Option<ModelChoice>,
    /// MAKAR: a knowledge base for the retrieval agent.
    pub knowledge: Option<PathBuf>,
    /// MAKAR: a SearXNG JSON endpoint for the online search agent.
    pub online_search: Option<String>,
    /// MAKAR: critic rounds at most per criterion.
    pub max_critic_rounds: u32,
    /// Answer from (and add to) the model cache.
    pub use_cache: bool,
    pub embedder: EmbedderChoice,
    /// Whether reviewed checks decide criteria; `None`: on for a trial
    /// whose criteria carry reviewed checks, off otherwise.
    pub checks: Option<ChecksMode>,
    /// The date checks are evaluated at; `None`: each patient's most
    /// recent dated document.
    pub screening_date: Option<chrono::NaiveDate>,
    /// Worked examples from an exemplar bank before each criterion
    /// (zero-shot strategies and the paper's MAKAR matching agent).
    pub exemplars: Option<ExemplarOptions>,
    /// Label calibration: a MET or NOT MET citing no sentence becomes NOT
    /// ENOUGH INFORMATION (strategies whose decisions cite sentences).
    pub calibrate: bool,
    /// Which definition of a criterion prompts show (Wornow et al. Table 2).
    pub definitions: Definitions,
    /// A fitted label correction table (`evident eval trialgpt
    /// --save-correction`) applied to every model decision; refused when
    /// fitted for another strategy, model, or use of exemplars or calibration.
    pub label_correction: Option<PathBuf>,
    /// Ask the model for P(MET) at the answer (log-probabilities; the
    /// paper's C-A prompt only: `makar-zero-shot`, `makar-aug`) and keep it
    /// in each decision's trace.
    pub probabilities: bool,
    /// A fitted threshold table on P(MET) (`evident eval trialgpt
    /// --save-thresholds`) deciding every decision by its P(MET); turns
    /// `probabilities` on; refused when fitted for another strategy, model,
    /// or use of exemplars or calibration.
    pub thresholds: Option<PathBuf>,
}

/// Which definition of a criterion prompts show: the refined one where the
/// set gives one (the default), or always the original text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Definitions {
    Original,
    #[default]
    Refined,
}

/// Parses `original` or `refined`.
pub fn parse_definitions(text: &str) -> Result<Definitions> {
    match text.trim().to_ascii_lowercase().as_str() {
        "original" => Ok(Definitions::Original),
        "refined" => Ok(Definitions::Refined),
        _ => input_error!("criteria definitions {text:?} are not known; use original or refined"),
    }
}

/// `set` as prompts will see it: with `Original`, every refined definition
/// is dropped, so prompts show the criterion as the trial states it.
pub fn with_definitions(set: &CriteriaSet, definitions: Definitions) -> CriteriaSet {
    let mut out = set.clone();
    if definitions == Definitions::Original {
        for c in &mut out.criteria {
            c.refined = None;
        }
    }
    out
}

impl Default for ScreeningOptions {
    fn default() -> Self {
        ScreeningOptions {
            method: Method::ZeroShot(evident_match::zero_shot::Strategy::Ican),
            retrieval: None,
            top_k: 5,
            concurrency: 1,
            matching: ModelChoice::default(),
            augmenting: None,
            knowledge: None,
            online_search: None,
            max_critic_rounds: 3,
            use_cache: true,
            embedder: EmbedderChoice::default(),
            checks: None,
            screening_date: None,
            exemplars: None,
            calibrate: false,
            definitions: Definitions::Refined,
            label_correction: None,
            probabilities: false,
            thresholds: None,
        }
    }
}

/// Parses a method name: Wornow et al.'s `acan`, `acin`, `ican`, `icin`;
/// the paper's MAKAR (`makar`, `makar-aug`, `makar-reason`,
/// `makar-zero-shot`); Evident's MAKAR (`makar-evident`,
/// `makar-evident-aug`, `makar-evident-reason`).
pub fn parse_method(text: &str) -> Result<Method> {
    match Method::parse(text) {
        Some(method) => Ok(method),
        None => {
            input_error!("strategy {text:?} is not known; use one of {}", Method::ALL.map(|m| m.as_str()).join(", "))
        }
    }
}

/// Parses a checks mode: `on`, `off` or `both`.
pub fn parse_checks(text: &str) -> Result<ChecksMode> {
    match ChecksMode::parse(text) {
        Some(mode) => Ok(mode),
        None => input_error!("checks {text:?} is not known; use on, off or both"),
    }
}

/// Parses a screening date (YYYY-MM-DD).
pub fn parse_screening_date(text: &str) -> Result<chrono::NaiveDate> {
    match chrono::NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d") {
        Ok(date) => Ok(date),
        Err(_) => input_error!("screening date {text:?} is not a date (expected YYYY-MM-DD)"),
    }
}

/// Parses a retrieval mode: `none` (whole notes), `bm25`, `dense` or `hybrid`.
pub fn parse_retrieval(text: &str) -> Result<Option<Mode>> {
    match text.to_ascii_lowercase().as_str() {
        "none" => Ok(None),
        other => match other.parse::<Mode>() {
            Ok(mode) => Ok(Some(mode)),
            Err(e) => input_error!("retrieval: {e} (or none)"),
        },
    }
}

/// Reads a label correction table and checks it against the screening's
/// strategy and levers (the model is checked once built).
fn open_correction(path: &std::path::Path, options: &ScreeningOptions) -> Result<LoadedCorrection> {
    let shown = path.display().to_string();
    let table = match CorrectionTable::load(path) {
        Ok(t) => t,
        Err(e) => input_error!("--label-correction {e}"),
    };
    let method = options.method;
    if matches!(method, Method::ZeroShot(s) if s.individual_notes()) {
        input_error!(
            "--label-correction: {} decides note by note and pools the notes; a correction table is fitted on patient-level decisions (use acan or ican)",
            method.as_str()
        );
    }
    let used = Screened {
        strategy: method.as_str(),
        model: &table.model,
        exemplars: options.exemplars.is_some(),
        calibrate: options.calibrate,
    };
    if let Err(e) = table.check_fits(&shown, used) {
        input_error!("--label-correction {e}");
    }
    Ok(LoadedCorrection { table, path: shown })
}

/// Reads a threshold table and checks it against the screening's strategy
/// and levers (the model is checked once built).
fn open_thresholds(path: &std::path::Path, options: &ScreeningOptions) -> Result<LoadedThresholds> {
    let shown = path.display().to_string();
    let table = match ThresholdTable::load(path) {
        Ok(t) => t,
        Err(e) => input_error!("--thresholds {e}"),
    };
    let used = Screened {
        strategy: options.method.as_str(),
        model: &table.model,
        exemplars: options.exemplars.is_some(),
        calibrate: options.calibrate,
    };
    if let Err(e) = table.check_fits(&shown, used) {
        input_error!("--thresholds {e}");
    }
    Ok(LoadedThresholds { table, path: shown })
}

/// Everything a screening needs, opened once: the models (recording into
/// one model run for the whole job), the embedder, the knowledge source,
/// the online search endpoint and the batch settings.
pub struct Screening {
    store: SharedStore,
    pub method: Method,
    pub batch: BatchConfig,
    /// The model run that records every call of the job.
    pub model_run_id: String,
    prompts_dir: Option<PathBuf>,
    matching: RecordingModel,
    augmenting: Option<RecordingModel>,
    embedder: Option<evident_embed::MiniLmEmbedder>,
    knowledge: Option<LocalKnowledgeBase>,
    online: Option<OnlineSearch>,
    /// The requested checks mode (`None`: decided per trial).
    checks: Option<ChecksMode>,
    definitions: Definitions,
}

impl Screening {
    /// Checks the options, embeds what dense retrieval will need for
    /// `patients`, opens the models and starts the model run `label`.
    pub fn open(
        session: &Session,
        options: &ScreeningOptions,
        patients: &[String],
        label: &str,
        progress: &dyn ProgressSink,
    ) -> Result<Screening> {
        let method = options.method;
        let retrieval = RetrievalSettings { mode: options.retrieval, top_k: options.top_k };
        if let (Some(mode), 0) = (retrieval.mode, options.top_k) {
            input_error!("top_k must be at least 1 with {mode:?} retrieval");
        }
        if !method.augments() && (options.knowledge.is_some() || options.online_search.is_some()) {
            input_error!(
                "a knowledge base and online search are for the augmenting strategies (makar, makar-aug, makar-evident, makar-evident-aug)"
            );
        }
        if options.calibrate && !matches!(method, Method::ZeroShot(_) | Method::Makar(Variant::Aug)) {
            input_error!(
                "calibration is for strategies whose decisions cite sentences (acan, acin, ican, icin, makar-evident-aug); {} cites none or decides in several agents",
                method.as_str()
            );
        }
        if options.thresholds.is_some() && options.label_correction.is_some() {
            input_error!("--thresholds and --label-correction are two levers for the same lean; use one");
        }
        let probabilities = options.probabilities || options.thresholds.is_some();
        if probabilities && !matches!(method, Method::Makar(Variant::PaperZeroShot | Variant::PaperAug)) {
            input_error!(
                "P(MET) from log-probabilities is read at the paper's 0/1 zero-shot answer (makar-zero-shot, makar-aug), not by {}",
                method.as_str()
            );
        }
        if options.exemplars.is_some() && matches!(method, Method::Makar(Variant::Full | Variant::Reason)) {
            input_error!(
                "exemplars are shown by the zero-shot strategies and the paper's MAKAR matching agent (acan, acin, ican, icin, makar, makar-aug, makar-reason, makar-zero-shot, makar-evident-aug), not by {}",
                method.as_str()
            );
        }
        // A table for another strategy or levers is refused before any
        // model is loaded; its model is checked once the model is built.
        let correction = options.label_correction.as_deref().map(|p| open_correction(p, options)).transpose()?;
        let thresholds = options.thresholds.as_deref().map(|p| open_thresholds(p, options)).transpose()?;
        let exemplars = options.exemplars.as_ref().map(|o| open_bank(session, o, &options.embedder)).transpose()?;
        let store = session.store()?;
        let embedder = match retrieval.mode {
            Some(Mode::Dense | Mode::Hybrid) => {
                let embedder = session.embedder(&options.embedder)?;
                for p in patients {
                    let filter = SectionFilter::patient(p.clone());
                    if !lock(&store).sections_missing_embedding(embedder.model_id(), &filter)?.is_empty() {
                        embed_missing(&store, &embedder, &filter, EMBED_BATCH, progress)?;
                    }
                }
                Some(embedder)
            }
            _ => None,
        };
        let model_run_id = session.begin_model_run(label)?;
        let matching = session.chat_model(&options.matching, &model_run_id, options.use_cache)?;
        if let Some(c) = &correction {
            let used = Screened {
                strategy: method.as_str(),
                model: evident_llm::ChatModel::model_id(&matching),
                exemplars: options.exemplars.is_some(),
                calibrate: options.calibrate,
            };
            if let Err(e) = c.table.check_fits(&c.path, used) {
                lock(&store).finish_model_run(&model_run_id)?;
                input_error!("--label-correction {e}");
            }
        }
        if let Some(t) = &thresholds {
            let used = Screened {
                strategy: method.as_str(),
                model: evident_llm::ChatModel::model_id(&matching),
                exemplars: options.exemplars.is_some(),
                calibrate: options.calibrate,
            };
            if let Err(e) = t.table.check_fits(&t.path, used) {
                lock(&store).finish_model_run(&model_run_id)?;
                input_error!("--thresholds {e}");
            }
        }
        let augmenting = match &options.augmenting {
            // Criteria only: augmentation requests carry no patient text.
            Some(choice) if method.augments() => {
                let choice = ModelChoice { allow_remote: false, ..choice.clone() };
                Some(session.chat_model(&choice, &model_run_id, options.use_cache)?)
            }
            _ => None,
        };
        let knowledge = options.knowledge.as_deref().map(LocalKnowledgeBase::open).transpose()?;
        let online =
            options.online_search.as_deref().map(|url| OnlineSearch::new(url, Duration::from_secs(30))).transpose()?;
        let repair = session.config().llm.repair_policy();
        let batch = BatchConfig {
            method,
            retrieval,
            concurrency: options.concurrency.max(1),
            zero_shot: ZeroShotConfig {
                repair,
                exemplars: exemplars.clone(),
                calibrate: options.calibrate,
                ..ZeroShotConfig::default()
            },
            makar: MakarConfig {
                repair,
                max_critic_rounds: options.max_critic_rounds,
                exemplars,
                probabilities,
                ..MakarConfig::default()
            },
            run_name: None,
            checks: ChecksMode::Off,
            screening_date: options.screening_date,
            label_correction: correction.map(std::sync::Arc::new),
            thresholds: thresholds.map(std::sync::Arc::new),
        };
        Ok(Screening {
            store,
            method,
            batch,
            model_run_id,
            prompts_dir: session.config().llm.prompts_dir.clone(),
            matching,
            augmenting,
            embedder,
            knowledge,
            online,
            checks: options.checks,
            definitions: options.definitions,
        })
    }

    /// The checks mode for a trial: as requested, or on where the trial
    /// carries reviewed checks.
    pub fn checks_for(&self, set: &CriteriaSet) -> ChecksMode {
        self.checks.unwrap_or(if set.has_reviewed_checks() { ChecksMode::On } else { ChecksMode::Off })
    }

    /// The matching model's id.
    pub fn matching_model_id(&self) -> &str {
        evident_llm::ChatModel::model_id(&self.matching)
    }

    /// The store the screening writes to.
    pub fn store(&self) -> &SharedStore {
        &self.store
    }

    fn models(&self) -> Models<'_> {
        Models {
            matching: StructuredModel::recorded(&self.matching),
            augmenting: StructuredModel::recorded(self.augmenting.as_ref().unwrap_or(&self.matching)),
            embedder: self.embedder.as_ref().map(|e| e as &dyn Embedder),
            model_run_id: self.model_run_id.clone(),
            knowledge: self.knowledge.as_ref().map(|k| k as &dyn KnowledgeSource),
            online: self.online.as_ref(),
        }
    }

    /// Screens `patients` against one trial; the model calls go to the
    /// job's model run. `label` names it in progress events.
    pub fn screen(
        &self,
        set: &CriteriaSet,
        patients: &[String],
        run_name: Option<String>,
        label: &str,
        progress: &dyn ProgressSink,
    ) -> Result<BatchSummary> {
        self.screen_with(set, patients, run_name, label, &self.models(), progress)
    }

    /// Screens `patients` against one trial with its model calls in a model
    /// run of their own, labelled `run_label` and finished here, so that
    /// what this screening cost can be told apart from the rest of the job
    /// (the run id is then on every decision it makes).
    pub fn screen_in_own_run(
        &self,
        set: &CriteriaSet,
        patients: &[String],
        run_label: &str,
        label: &str,
        progress: &dyn ProgressSink,
    ) -> Result<BatchSummary> {
        let run_id = lock(&self.store).begin_model_run(run_label)?;
        let matching = self.matching.in_run(&run_id);
        let augmenting = self.augmenting.as_ref().map(|m| m.in_run(&run_id));
        let models = Models {
            matching: StructuredModel::recorded(&matching),
            augmenting: StructuredModel::recorded(augmenting.as_ref().unwrap_or(&matching)),
            model_run_id: run_id.clone(),
            ..self.models()
        };
        let outcome = self.screen_with(set, patients, None, label, &models, progress);
        lock(&self.store).finish_model_run(&run_id)?;
        outcome
    }

    fn screen_with(
        &self,
        set: &CriteriaSet,
        patients: &[String],
        run_name: Option<String>,
        label: &str,
        models: &Models<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<BatchSummary> {
        let set = &with_definitions(set, self.definitions);
        let config = BatchConfig { run_name, checks: self.checks_for(set), ..self.batch.clone() };
        progress.report(ProgressEvent::ScreeningStarted { label: label.to_string() });
        let on_progress = |p| progress.report(screening_event(p));
        let result = run_batch(&self.store, set, patients, &config, models, self.prompts_dir.as_deref(), &on_progress);
        progress.report(ProgressEvent::ScreeningFinished);
        Ok(result?)
    }

    /// Ends the job's model run.
    pub fn finish(&self) -> Result<()> {
        lock(&self.store).finish_model_run(&self.model_run_id)?;
        Ok(())
    }
}

/// The error for a screening that stopped part way: what it decided is
/// stored, and the same job started again resumes.
pub(crate) fn stopped(what: &str, error: AppError) -> AppError {
    AppError::Interrupted { what: what.to_string(), cause: Box::new(error) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wornow et al.'s Table 2: the n2c2 set's refined definitions, or the
    /// original criteria.
    #[test]
    fn original_definitions_show_the_criteria_as_stated() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../criteria/n2c2-2018.yaml");
        let set = CriteriaSet::load(&path).unwrap();
        let refined = with_definitions(&set, parse_definitions("refined").unwrap());
        let original = with_definitions(&set, parse_definitions("Original").unwrap());
        let diet =
            |s: &CriteriaSet| s.criteria.iter().find(|c| c.id == "DIETSUPP-2MOS").unwrap().prompt_text().to_string();
        assert!(diet(&refined).contains("go through the list of medications"), "{}", diet(&refined));
        assert_eq!(diet(&original), "Taken a dietary supplement (excluding vitamin D) in the past 2 months.");
        assert!(original.criteria.iter().all(|c| c.prompt_text() == c.text));
        assert!(parse_definitions("both").unwrap_err().to_string().contains("use original or refined"));
    }
}
