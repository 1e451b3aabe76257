//! Batch screening runs: many patients against one trial with one method,
//! every decision persisted as soon as it is made, resumable after a kill.
//!
//! A run is named by its definition (criteria set, method, retrieval
//! settings, model ids): the same command names the same run, so starting
//! it again resumes it. Work is split into tasks (one model-call group
//! each: a criterion, a note, or all criteria); each task's results are
//! stored in one transaction, and a task with stored results is never run
//! again. So a run killed at any point loses at most the tasks in flight
//! and never stores a decision twice. Tasks are worked on by `concurrency`
//! threads sharing one store connection (held only for reads and writes,
//! never across a model call), in order: a patient's tasks one after
//! another, so that threads work on the same patient at once (a model with
//! slots reads the patient's record once and copies it; see
//! `evident_llm::ChatModel::parallelism`).
//!
//! Checks: with [`ChecksMode::On`] a criterion with a reviewed check is
//! decided by the check alone and never shown to the model; with
//! [`ChecksMode::Both`] the model decides every criterion as well and the
//! report compares the two. Each patient's check decisions are one task
//! (`checks`), stored like any other, under the document id
//! [`CHECK_DOCUMENT`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use evident_llm::{Embedder, StructuredModel};
use evident_retrieve::{Mode, Retriever, RetrieverConfig};
use evident_store::{NewMatchResult, SectionFilter, Store};
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::checks::{evaluate, CheckOutcome, ChecksMode, CompiledCheck, FactNeeds, IfNoData, PatientFacts};
use crate::criteria::{CriteriaSet, CriterionType};
use crate::decision::{CriterionResult, Determination};
use crate::label_correction::LoadedCorrection;
use crate::makar::{
    apply_augmentations, Augmentation, KnowledgeSource, MakarConfig, MakarMatcher, OnlineSearch, Variant,
};
use crate::zero_shot::{MatchError, PatientRecord, Strategy, ZeroShotConfig, ZeroShotMatcher};

/// How a run decides criteria.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub enum Method {
    ZeroShot(Strategy),
    Makar(Variant),
}

impl From<Method> for String {
    fn from(m: Method) -> String {
        m.as_str().to_string()
    }
}

impl Method {
    pub const ALL: [Method; 11] = [
        Method::ZeroShot(Strategy::Acan),
        Method::ZeroShot(Strategy::Acin),
        Method::ZeroShot(Strategy::Ican),
        Method::ZeroShot(Strategy::Icin),
        Method::Makar(Variant::ALL[0]),
        Method::Makar(Variant::ALL[1]),
        Method::Makar(Variant::ALL[2]),
        Method::Makar(Variant::ALL[3]),
        Method::Makar(Variant::ALL[4]),
        Method::Makar(Variant::ALL[5]),
        Method::Makar(Variant::ALL[6]),
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Method::ZeroShot(s) => s.as_str(),
            Method::Makar(variant) => variant.as_str(),
        }
    }

    pub fn parse(text: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str().eq_ignore_ascii_case(text.trim()))
    }

    /// Whether the method augments criteria first (stored per trial).
    pub fn augments(self) -> bool {
        matches!(self, Method::Makar(variant) if variant.augments())
    }
}

/// Two-stage retrieval: keep only the top-k sections of the patient's
/// record for each task's query (the criterion, or all criteria for
/// ACAN/ACIN). `mode: None` shows whole notes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RetrievalSettings {
    pub mode: Option<Mode>,
    pub top_k: usize,
}

impl Default for RetrievalSettings {
    fn default() -> Self {
        RetrievalSettings { mode: None, top_k: 5 }
    }
}

#[derive(Debug, Clone)]
pub struct BatchConfig {
    pub method: Method,
    pub retrieval: RetrievalSettings,
    /// Tasks worked on at once (useful against servers and an embedded
    /// model with `[llm] parallel` slots).
    pub concurrency: usize,
    pub zero_shot: ZeroShotConfig,
    pub makar: MakarConfig,
    /// Names the run instead of the definition hash.
    pub run_name: Option<String>,
    /// Whether reviewed checks decide criteria.
    pub checks: ChecksMode,
    /// The date checks are evaluated at; `None`: each patient's most
    /// recent dated document.
    pub screening_date: Option<chrono::NaiveDate>,
    /// A fitted label correction applied to every model decision before it
    /// is stored ([`crate::label_correction`]); its trace keeps the model's label.
    pub label_correction: Option<std::sync::Arc<LoadedCorrection>>,
    /// A fitted threshold on P(MET) deciding every model decision that
    /// carries one ([`crate::threshold`]); its trace keeps the model's label.
    pub thresholds: Option<std::sync::Arc<crate::threshold::LoadedThresholds>>,
}

/// The document id under which check decisions are stored (a model's
/// patient-level result uses '', a note-level one the note's id).
pub const CHECK_DOCUMENT: &str = "#check";

/// The task key of a patient's check decisions.
const CHECK_TASK: &str = "checks";

/// A check's decision for one criterion of one patient, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct CheckResult {
    pub criterion_id: String,
    pub criterion_type: CriterionType,
    pub outcome: CheckOutcome,
    /// The check found no data and says the text strategy decides then
    /// ([`IfNoData::Text`]): the model's decision is the criterion's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
}

/// The models of a run. `augmenting` writes criteria augmentations (not
/// patient data, so it may be a different, remote model). Each comes with
/// the log its pipeline failures go to (`StructuredModel::recorded` of a
/// `RecordingModel`: the run that model records its calls in).
pub struct Models<'a> {
    pub matching: StructuredModel<'a>,
    pub augmenting: StructuredModel<'a>,
    pub embedder: Option<&'a dyn Embedder>,
    /// The model run (audit trail) the calls of this invocation go to.
    pub model_run_id: String,
    /// MAKAR's retrieval agent searches it when given.
    pub knowledge: Option<&'a dyn KnowledgeSource>,
    /// MAKAR's online search agent, off unless given.
    pub online: Option<&'a OnlineSearch>,
}

/// Progress of a run, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Planned: `total` tasks, of which `done` were stored by earlier runs.
    Planned { total: usize, done: usize },
    /// Criteria augmentation of `criterion` (of `of`).
    Augmenting { criterion: usize, of: usize },
    /// One more task stored.
    TaskDone,
}

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error(transparent)]
    Match(#[from] MatchError),
    #[error("store: {0}")]
    Store(#[from] evident_store::StoreError),
    #[error("retrieval for patient {patient_id}: {message}")]
    Retrieval { patient_id: String, message: String },
    #[error("patient {0} is not in the store; ingest the patient's records first or check the id")]
    UnknownPatient(String),
    #[error("stored result of run {run_id} is not readable: {message}")]
    Corrupt { run_id: String, message: String },
    /// A prompt override that exists but cannot be read: the run would
    /// otherwise be named (and its prompts rendered) as if it were absent.
    #[error("{}: this prompt override cannot be read ({source}); make it a readable UTF-8 file or remove it", path.display())]
    PromptOverride {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A value that names a run could not be written as JSON to be hashed.
    #[error("cannot write {what} as JSON to hash it: {source}")]
    Hash {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

/// What one invocation did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchSummary {
    pub run_id: String,
    /// Whether the run existed (this invocation resumed it).
    pub resumed: bool,
    pub tasks_total: usize,
    /// Tasks done by earlier invocations.
    pub tasks_skipped: usize,
    pub tasks_run: usize,
    pub patients: usize,
    /// Whether checks decided criteria, and how.
    pub checks: ChecksMode,
    /// Patient-criterion decisions made by reviewed checks (all patients).
    pub check_decisions: usize,
    /// Model tasks (model-call groups) the checks made unnecessary.
    pub model_tasks_saved: usize,
}

/// sha256 (hex) of a value's canonical JSON. A value that cannot be
/// written is an error, never the hash of nothing (which every such value
/// would share).
pub fn json_hash(value: &impl Serialize) -> Result<String, serde_json::Error> {
    let bytes = serde_json::to_vec(value)?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// sha256 of every prompt template a run may render: the built-in ones
/// and, where an override directory has a file of the same name, that
/// file's contents. A changed prompt makes a new run, never a mixed one.
/// An override file that exists but cannot be read is an error naming it
/// (fingerprinting the built-in instead would name the run after a prompt
/// it does not use).
pub fn prompts_fingerprint(prompt_dir: Option<&std::path::Path>) -> Result<String, BatchError> {
    let mut hasher = Sha256::new();
    let builtins = crate::zero_shot::MATCH_PROMPTS
        .iter()
        .chain(crate::makar::MAKAR_PROMPTS)
        .chain(evident_llm::prompts::BUILTIN_PROMPTS);
    for (name, source) in builtins {
        let overridden = match prompt_dir {
            Some(dir) => read_prompt_override(&dir.join(name))?,
            None => None,
        };
        hasher.update(name.as_bytes());
        hasher.update([0u8]);
        hasher.update(overridden.as_deref().unwrap_or(source).as_bytes());
        hasher.update([0u8]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The text of the override at `path`; `None` when there is none.
fn read_prompt_override(path: &std::path::Path) -> Result<Option<String>, BatchError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(BatchError::PromptOverride { path: path.to_path_buf(), source }),
    }
}

/// The definition that names a run; hashing it gives the run id.
pub fn run_definition(
    set: &CriteriaSet,
    config: &BatchConfig,
    models: &Models,
    prompt_dir: Option<&std::path::Path>,
) -> Result<Value, BatchError> {
    let mut definition = json!({
        "prompts": prompts_fingerprint(prompt_dir)?,
        "criteria": set,
        "method": config.method.as_str(),
        "retrieval": config.retrieval,
        "matching_model": models.matching.model_id(),
        "augmenting_model": config.method.augments().then(|| models.augmenting.model_id()),
        "max_critic_rounds": config.method.augments().then_some(config.makar.max_critic_rounds),
        "evident": env!("CARGO_PKG_VERSION"),
    });
    // Runs without checks keep the definition (and so the id) they had
    // before checks existed.
    if config.checks != ChecksMode::Off {
        definition["checks"] = json!(config.checks.as_str());
        definition["screening_date"] = json!(config.screening_date.map(|d| d.to_string()));
    }
    // Likewise runs without exemplars or calibration.
    let exemplars = match config.method {
        Method::ZeroShot(_) | Method::Makar(Variant::Aug) => config.zero_shot.exemplars.as_ref(),
        Method::Makar(_) => config.makar.exemplars.as_ref(),
    };
    if let Some(bank) = exemplars {
        definition["exemplars"] = bank.0.definition();
    }
    if config.zero_shot.calibrate {
        definition["calibrate"] = json!(true);
    }
    // Likewise runs that do not ask for P(MET) (other requests, other answers' traces).
    if config.makar.probabilities && matches!(config.method, Method::Makar(Variant::PaperZeroShot | Variant::PaperAug))
    {
        definition["probabilities"] = json!(true);
    }
    // The table's content, not its file name, names the run.
    if let Some(c) = &config.label_correction {
        definition["label_correction"] = json!(c.table.fingerprint());
    }
    if let Some(t) = &config.thresholds {
        definition["thresholds"] = json!(t.table.fingerprint());
    }
    Ok(definition)
}

/// The run id: the given name, or `<trial>-<method>-<first 10 hex of the definition hash>`.
pub fn run_id(set: &CriteriaSet, config: &BatchConfig, definition: &Value) -> Result<String, BatchError> {
    match &config.run_name {
        Some(name) => Ok(name.clone()),
        None => {
            let hash =
                json_hash(definition).map_err(|source| BatchError::Hash { what: "the run definition", source })?;
            Ok(format!("{}-{}-{}", set.trial_id, config.method.as_str(), &hash[..10]))
        }
    }
}

/// Augments every criterion of `set` (MAKAR, MAKAR-Aug), reusing stored
/// augmentations of the same criteria set and augmenting model.
pub fn augmentations(
    store: &Mutex<Store>,
    makar: &MakarMatcher,
    set: &CriteriaSet,
    augmenting_model: &str,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Vec<Augmentation>, BatchError> {
    let hash = json_hash(set).map_err(|source| BatchError::Hash { what: "the criteria set", source })?;
    let mut out = Vec::new();
    for (i, criterion) in set.criteria.iter().enumerate() {
        progress(Progress::Augmenting { criterion: i + 1, of: set.criteria.len() });
        let stored = lock(store).criteria_augmentation(&set.trial_id, &hash, &criterion.id, augmenting_model)?;
        if let Some(json) = stored {
            let aug: Augmentation = serde_json::from_str(&json).map_err(|e| BatchError::Corrupt {
                run_id: format!("augmentation of {} in trial {}", criterion.id, set.trial_id),
                message: e.to_string(),
            })?;
            out.push(aug);
            continue;
        }
        let aug = makar.augment_criterion(criterion)?;
        let json = serde_json::to_string(&aug).expect("augmentations serialise");
        lock(store).put_criteria_augmentation(&set.trial_id, &hash, &criterion.id, augmenting_model, &json)?;
        out.push(aug);
    }
    Ok(out)
}

fn lock(store: &Mutex<Store>) -> std::sync::MutexGuard<'_, Store> {
    store.lock().unwrap_or_else(|e| e.into_inner())
}

/// The matcher a run uses, built once per run.
enum Engine<'a> {
    ZeroShot { matcher: ZeroShotMatcher<'a>, set: CriteriaSet },
    Makar { matcher: MakarMatcher<'a>, augmentations: Vec<Augmentation> },
}

/// One unit of work.
struct PlannedTask {
    key: String,
    document_id: Option<String>,
    criterion_ids: Vec<String>,
}

struct PlannedPatient {
    record: PatientRecord,
    tasks: Vec<PlannedTask>,
    /// The check decisions to store, when they are not stored yet.
    checks: Option<Vec<CheckResult>>,
}

/// The criteria whose reviewed checks run in this mode.
fn checked_criteria(set: &CriteriaSet, mode: ChecksMode) -> Vec<(String, CriterionType, CompiledCheck)> {
    if mode == ChecksMode::Off {
        return Vec::new();
    }
    set.criteria.iter().filter_map(|c| c.reviewed_check().map(|k| (c.id.clone(), c.criterion_type, k))).collect()
}

/// Every check of `checked` decided for one patient.
fn decide_checks(
    checked: &[(String, CriterionType, CompiledCheck)],
    facts: &PatientFacts,
    screening_date: Option<chrono::NaiveDate>,
) -> Vec<CheckResult> {
    let date = screening_date.or(facts.latest_document);
    checked
        .iter()
        .map(|(id, ty, check)| {
            let outcome = match date {
                Some(d) => evaluate(check, facts, d),
                None => CheckOutcome::undated(),
            };
            let deferred = check.if_no_data == IfNoData::Text && outcome.found_no_data();
            CheckResult { criterion_id: id.clone(), criterion_type: *ty, outcome, deferred }
        })
        .collect()
}

/// Runs (or resumes) a batch. Returns when every task of every patient is
/// stored, or at the first error (tasks stored so far stay stored).
pub fn run_batch(
    store: &Mutex<Store>,
    set: &CriteriaSet,
    patients: &[String],
    config: &BatchConfig,
    models: &Models,
    prompt_dir: Option<&std::path::Path>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<BatchSummary, BatchError> {
    let definition = run_definition(set, config, models, prompt_dir)?;
    let run_id = run_id(set, config, &definition)?;
    let resumed = lock(store).begin_match_run(
        &run_id,
        &set.trial_id,
        config.method.as_str(),
        &serde_json::to_string(&definition).expect("definitions serialise"),
    )?;
    lock(store).link_match_model_run(&run_id, &models.model_run_id)?;

    // With checks on, the model never sees a criterion a reviewed check
    // decides. A check that leaves the criterion to the text strategy when
    // it finds no data keeps it in the model's set; each patient's tasks
    // then drop the criteria the check did decide for that patient.
    let checked = checked_criteria(set, config.checks);
    let needs = FactNeeds::of(checked.iter().map(|(_, _, check)| check));
    let full_set = set;
    let model_set = if config.checks == ChecksMode::On {
        let mut reduced = set.clone();
        reduced
            .criteria
            .retain(|c| !checked.iter().any(|(id, _, check)| id == &c.id && check.if_no_data == IfNoData::Abstain));
        reduced
    } else {
        set.clone()
    };
    let set = &model_set;

    let engine = match config.method {
        Method::ZeroShot(strategy) => Engine::ZeroShot {
            matcher: ZeroShotMatcher::new(
                models.matching,
                ZeroShotConfig { strategy, ..config.zero_shot.clone() },
                prompt_dir,
            ),
            set: set.clone(),
        },
        Method::Makar(variant) => {
            let mut makar = MakarMatcher::new(
                models.matching,
                models.augmenting,
                MakarConfig { variant, ..config.makar.clone() },
                prompt_dir,
            );
            if let Some(k) = models.knowledge {
                makar = makar.with_knowledge(k);
            }
            if let Some(o) = models.online {
                makar = makar.with_online_search(o);
            }
            let augs = if config.method.augments() {
                augmentations(store, &makar, set, &makar.augmentation_key(models.augmenting.model_id()), progress)?
            } else {
                Vec::new()
            };
            if variant == Variant::Aug {
                Engine::ZeroShot {
                    matcher: ZeroShotMatcher::new(
                        models.matching,
                        ZeroShotConfig { strategy: Strategy::Ican, ..config.zero_shot.clone() },
                        prompt_dir,
                    ),
                    set: apply_augmentations(set, &augs),
                }
            } else {
                Engine::Makar { matcher: makar, augmentations: augs }
            }
        }
    };

    // Plan: every patient's record and tasks, minus those already stored.
    let mut planned = Vec::new();
    let (mut total, mut skipped, mut saved) = (0, 0, 0);
    for patient_id in patients {
        let st = lock(store);
        if st.patient(patient_id)?.is_none() {
            return Err(BatchError::UnknownPatient(patient_id.clone()));
        }
        let record = PatientRecord::from_store(&st, patient_id)?;
        let done = st.match_tasks_done(&run_id, patient_id)?;
        // Deterministic over the same store, so a resumed run plans the
        // same tasks (the decisions are stored once, below).
        let decided = match checked.is_empty() {
            true => Vec::new(),
            false => match PatientFacts::load_needed(&st, patient_id, &needs)? {
                Some(facts) => decide_checks(&checked, &facts, config.screening_date),
                None => Vec::new(),
            },
        };
        drop(st);
        let mut tasks = if set.criteria.is_empty() { Vec::new() } else { plan_tasks(&engine, set, &record) };
        if config.checks == ChecksMode::On {
            let by_check: BTreeSet<&str> =
                decided.iter().filter(|c| !c.deferred).map(|c| c.criterion_id.as_str()).collect();
            tasks.retain(|t| !t.criterion_ids.iter().all(|id| by_check.contains(id.as_str())));
        }
        if config.checks == ChecksMode::On && !checked.is_empty() {
            saved += count_tasks(&engine, full_set, &record).saturating_sub(tasks.len());
        }
        let all = tasks.len();
        let todo: Vec<PlannedTask> = tasks.into_iter().filter(|t| !done.contains(&t.key)).collect();
        total += all;
        skipped += all - todo.len();
        if !checked.is_empty() {
            total += 1;
            if done.contains(CHECK_TASK) {
                skipped += 1;
            }
        }
        let checks = (!checked.is_empty() && !done.contains(CHECK_TASK)).then_some(decided);
        planned.push(PlannedPatient { record, tasks: todo, checks });
    }
    progress(Progress::Planned { total, done: skipped });

    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let ran = AtomicUsize::new(0);
    let first_error: Mutex<Option<BatchError>> = Mutex::new(None);
    // Each patient's checks (one task), then its model tasks.
    let items: Vec<(&PlannedPatient, Option<&PlannedTask>)> = planned
        .iter()
        .flat_map(|p| p.checks.iter().map(move |_| (p, None)).chain(p.tasks.iter().map(move |t| (p, Some(t)))))
        .collect();
    let workers = config.concurrency.max(1).min(items.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while !failed.load(Ordering::SeqCst) {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(&(patient, task)) = items.get(i) else { break };
                    let outcome = match (task, &patient.checks) {
                        (Some(task), _) => run_task(store, &engine, set, config, models, &run_id, patient, task),
                        (None, Some(checks)) => store_checks(store, &run_id, &patient.record.patient_id, checks),
                        (None, None) => Ok(()),
                    };
                    match outcome {
                        Ok(()) => {
                            ran.fetch_add(1, Ordering::SeqCst);
                            progress(Progress::TaskDone);
                        }
                        Err(e) => {
                            failed.store(true, Ordering::SeqCst);
                            first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                            break;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    lock(store).finish_match_run(&run_id)?;
    Ok(BatchSummary {
        run_id,
        resumed,
        tasks_total: total,
        tasks_skipped: skipped,
        tasks_run: ran.into_inner(),
        patients: patients.len(),
        checks: config.checks,
        check_decisions: checked.len() * patients.len(),
        model_tasks_saved: saved,
    })
}

/// Stores one patient's check decisions as one task.
fn store_checks(
    store: &Mutex<Store>,
    run_id: &str,
    patient_id: &str,
    checks: &[CheckResult],
) -> Result<(), BatchError> {
    let rows: Vec<NewMatchResult> = checks
        .iter()
        .map(|c| NewMatchResult {
            criterion_id: c.criterion_id.clone(),
            document_id: CHECK_DOCUMENT.to_string(),
            result_json: serde_json::to_string(c).expect("check results serialise"),
            trace_json: None,
        })
        .collect();
    lock(store).put_match_task(run_id, patient_id, CHECK_TASK, None, &rows)?;
    Ok(())
}

/// How many tasks the engine would plan for `set` (to count what checks save).
fn count_tasks(engine: &Engine, set: &CriteriaSet, record: &PatientRecord) -> usize {
    match engine {
        Engine::ZeroShot { matcher, .. } => matcher.tasks(set, record).len(),
        Engine::Makar { .. } => set.criteria.len(),
    }
}

fn plan_tasks(engine: &Engine, set: &CriteriaSet, record: &PatientRecord) -> Vec<PlannedTask> {
    match engine {
        Engine::ZeroShot { matcher, set } => matcher
            .tasks(set, record)
            .into_iter()
            .map(|t| PlannedTask { key: t.key(), document_id: t.document_id, criterion_ids: t.criterion_ids })
            .collect(),
        Engine::Makar { .. } => set
            .criteria
            .iter()
            .map(|c| PlannedTask { key: format!("c:{}", c.id), document_id: None, criterion_ids: vec![c.id.clone()] })
            .collect(),
    }
}

/// The query two-stage retrieval uses for a task: the criteria's prompt text.
fn task_query(set: &CriteriaSet, task: &PlannedTask) -> String {
    task.criterion_ids
        .iter()
        .filter_map(|id| set.criteria.iter().find(|c| &c.id == id))
        .map(|c| c.prompt_text())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The record a task is shown: all of it, or the top-k sections.
fn record_for_task(
    store: &Mutex<Store>,
    set: &CriteriaSet,
    retrieval: RetrievalSettings,
    embedder: Option<&dyn Embedder>,
    record: &PatientRecord,
    task: &PlannedTask,
) -> Result<PatientRecord, BatchError> {
    let Some(mode) = retrieval.mode else { return Ok(record.clone()) };
    let err = |message: String| BatchError::Retrieval { patient_id: record.patient_id.clone(), message };
    let st = lock(store);
    let mut retriever = Retriever::new(&st, RetrieverConfig { mode, ..RetrieverConfig::default() });
    if let Some(e) = embedder {
        retriever = retriever.with_embedder(e);
    }
    let filter = SectionFilter { patient_id: Some(record.patient_id.clone()), ..SectionFilter::default() };
    let hits = retriever.search(&task_query(set, task), &filter, retrieval.top_k).map_err(|e| err(e.to_string()))?;
    let sections: Vec<(String, usize, usize)> = hits.iter().map(|h| (h.document_id.clone(), h.start, h.end)).collect();
    let docs: BTreeSet<&str> = sections.iter().map(|(d, _, _)| d.as_str()).collect();
    let mut spans = BTreeMap::new();
    for doc in docs {
        for s in st.sentences(doc)? {
            spans.insert((s.document_id.clone(), s.ordinal), (s.start, s.end));
        }
    }
    Ok(record.restrict_to_sections(&sections, &spans))
}

#[allow(clippy::too_many_arguments)]
fn run_task(
    store: &Mutex<Store>,
    engine: &Engine,
    set: &CriteriaSet,
    config: &BatchConfig,
    models: &Models,
    run_id: &str,
    patient: &PlannedPatient,
    task: &PlannedTask,
) -> Result<(), BatchError> {
    let shown =
        record_for_task(store, engine_set(engine, set), config.retrieval, models.embedder, &patient.record, task)?;
    let results: Vec<(CriterionResult, Option<Value>)> = match engine {
        Engine::ZeroShot { matcher, set } => {
            let t = crate::zero_shot::Task {
                document_id: task.document_id.clone(),
                criterion_ids: task.criterion_ids.clone(),
            };
            let out = matcher.run_task(set, &shown, &t)?;
            // The worked examples a decision saw are its trace.
            out.results
                .into_iter()
                .map(|r| {
                    let trace =
                        out.exemplars.get(&r.criterion_id).filter(|e| !e.is_empty()).map(|e| json!({"exemplars": e}));
                    (r, trace)
                })
                .collect()
        }
        Engine::Makar { matcher, augmentations } => {
            let mut out = Vec::new();
            for id in &task.criterion_ids {
                let criterion = set.criteria.iter().find(|c| &c.id == id).expect("tasks name criteria of the set");
                let aug = augmentations.iter().find(|a| &a.criterion_id == id);
                let notes: Vec<_> = shown.notes.iter().collect();
                // MAKAR's agents see notes, not the patient's id: name the
                // patient in a failed call here.
                let patient_id = Some(patient.record.patient_id.as_str());
                let outcome = matcher.match_criterion_for(patient_id, criterion, aug, &notes).map_err(|e| match e {
                    MatchError::Llm { source, .. } => {
                        MatchError::Llm { subject: format!("patient {}", patient.record.patient_id), source }
                    }
                    other => other,
                })?;
                let trace = serde_json::to_value(&outcome.trace).expect("traces serialise");
                out.push((outcome.result, Some(trace)));
            }
            out
        }
    };
    let results = match &config.label_correction {
        Some(c) => results.into_iter().map(|(r, trace)| correct(c, r, trace)).collect(),
        None => results,
    };
    let results: Vec<(CriterionResult, Option<Value>)> = match &config.thresholds {
        Some(t) => results.into_iter().map(|(r, trace)| threshold(t, r, trace)).collect(),
        None => results,
    };
    let rows: Vec<NewMatchResult> = results
        .into_iter()
        .map(|(r, trace)| NewMatchResult {
            criterion_id: r.criterion_id.clone(),
            document_id: r.document_id.clone().unwrap_or_default(),
            result_json: serde_json::to_string(&r).expect("results serialise"),
            trace_json: trace.map(|t| t.to_string()),
        })
        .collect();
    lock(store).put_match_task(run_id, &patient.record.patient_id, &task.key, Some(&models.model_run_id), &rows)?;
    Ok(())
}

/// A model decision through the label correction: the corrected label in
/// the result, what was done (the model's label included) in the trace's
/// `label_correction`. A failed decision stays failed and records nothing.
fn correct(
    correction: &LoadedCorrection,
    mut result: CriterionResult,
    trace: Option<Value>,
) -> (CriterionResult, Option<Value>) {
    let criterion_type = result.criterion_type;
    let Determination::Assessed(assessment) = &mut result.outcome else { return (result, trace) };
    let applied = serde_json::to_value(correction.apply(criterion_type, assessment)).expect("corrections serialise");
    let trace = match trace {
        Some(Value::Object(mut map)) => {
            map.insert("label_correction".into(), applied);
            Value::Object(map)
        }
        Some(other) => json!({"trace": other, "label_correction": applied}),
        None => json!({"label_correction": applied}),
    };
    (result, Some(trace))
}

/// A model decision through the threshold on its P(MET) (the trace's
/// `p_met`): the thresholded label in the result, what was done in the
/// trace's `threshold`. A failed decision stays failed and records nothing.
fn threshold(
    thresholds: &crate::threshold::LoadedThresholds,
    mut result: CriterionResult,
    trace: Option<Value>,
) -> (CriterionResult, Option<Value>) {
    let criterion_type = result.criterion_type;
    let Determination::Assessed(assessment) = &mut result.outcome else { return (result, trace) };
    let p_met = trace.as_ref().and_then(|t| t.get("p_met")).and_then(Value::as_f64);
    let applied =
        serde_json::to_value(thresholds.apply(criterion_type, p_met, assessment)).expect("thresholds serialise");
    let trace = match trace {
        Some(Value::Object(mut map)) => {
            map.insert("threshold".into(), applied);
            Value::Object(map)
        }
        Some(other) => json!({"trace": other, "threshold": applied}),
        None => json!({"threshold": applied}),
    };
    (result, Some(trace))
}

/// The criteria the engine decides (augmented for MAKAR-Aug).
fn engine_set<'s>(engine: &'s Engine, original: &'s CriteriaSet) -> &'s CriteriaSet {
    match engine {
        Engine::ZeroShot { set, .. } => set,
        Engine::Makar { .. } => original,
    }
}

/// A stored run read back: per patient, the note-level and patient-level
/// results and agent traces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredPatientResults {
    pub patient_id: String,
    /// As stored: patient-level results, or note-level ones (ACIN/ICIN).
    pub stored: Vec<CriterionResult>,
    /// criterion id -> agent trace (MAKAR).
    pub traces: BTreeMap<String, Value>,
    /// criterion id -> the check's decision.
    pub checks: BTreeMap<String, CheckResult>,
}

/// Reads every stored result of a run, grouped by patient.
pub fn stored_results(store: &Store, run_id: &str) -> Result<Vec<StoredPatientResults>, BatchError> {
    let mut by_patient: BTreeMap<String, StoredPatientResults> = BTreeMap::new();
    for row in store.match_results(run_id)? {
        let entry = by_patient.entry(row.patient_id.clone()).or_insert_with(|| StoredPatientResults {
            patient_id: row.patient_id.clone(),
            stored: Vec::new(),
            traces: BTreeMap::new(),
            checks: BTreeMap::new(),
        });
        if row.document_id == CHECK_DOCUMENT {
            let check: CheckResult = serde_json::from_str(&row.result_json)
                .map_err(|e| BatchError::Corrupt { run_id: run_id.to_string(), message: e.to_string() })?;
            entry.checks.insert(row.criterion_id.clone(), check);
            continue;
        }
        let result: CriterionResult = serde_json::from_str(&row.result_json)
            .map_err(|e| BatchError::Corrupt { run_id: run_id.to_string(), message: e.to_string() })?;
        if let Some(trace) = row.trace_json {
            let value: Value = serde_json::from_str(&trace)
                .map_err(|e| BatchError::Corrupt { run_id: run_id.to_string(), message: e.to_string() })?;
            entry.traces.insert(row.criterion_id.clone(), value);
        }
        entry.stored.push(result);
    }
    Ok(by_patient.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_override_changes_the_fingerprint_and_a_missing_one_does_not() {
        let builtin = prompts_fingerprint(None).unwrap();
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(prompts_fingerprint(Some(dir.path())).unwrap(), builtin, "an empty override directory");
        std::fs::write(dir.path().join("repair.prompt.md"), "fix: {{ errors | length }}").unwrap();
        assert_ne!(prompts_fingerprint(Some(dir.path())).unwrap(), builtin);
    }

    #[test]
    fn an_override_that_cannot_be_read_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("repair.prompt.md");
        // Latin-1 "é": the file exists but is not UTF-8 text.
        std::fs::write(&path, b"r\xe9parer {{ errors }}").unwrap();
        let err = prompts_fingerprint(Some(dir.path())).unwrap_err();
        assert!(matches!(&err, BatchError::PromptOverride { path: p, .. } if p == &path), "{err}");
        assert!(err.to_string().starts_with(&format!("{}: this prompt override cannot be read", path.display())));
    }
}
