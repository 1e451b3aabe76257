//! Observational studies (Evident's third job): one task (a protocol with
//! its questions and gold answers) on one database, run end to end by the
//! study agent ([`run`]), and RWE-bench's metrics over a folder of tasks
//! ([`evaluate`]). The work is `evident_rwe`'s: this module opens the
//! database, the workspace and the models, audits the cohort the agent
//! exported, scores the answers and writes the evidence bundle
//! (`bundle.json`) and its page (`report.html`).

use std::fmt;
use std::path::{Path, PathBuf};

use evident_rwe::agent::env::StudyEnv;
use evident_rwe::agent::{run_agent, study_prompts, AgentConfig, AgentError, AgentRun, StepStore};
pub use evident_rwe::agent::{Strategy, Termination};
use evident_rwe::audit::{
    judge_cohort, judge_database_facts, rule_checks, AuditError, AuditTable, CohortAudit, AUDIT_FILE,
};
use evident_rwe::bundle::{
    prompts_sha256, read_bundle, read_cohort_sql, sha256_file, write_bundle, Bundle, DatabaseInfo, StoredBundle,
};
use evident_rwe::cohort_eval::{build_cases, reference_cohort, CohortEvalSpec, SPEC_FILE as COHORT_EVAL_SPEC};
pub use evident_rwe::cohort_eval::{CaseCounts, JudgeCheck};
pub use evident_rwe::compiled_judge::JudgeStrategy;
use evident_rwe::database::r_database;
use evident_rwe::database_hash::{database_info, CachedDatabaseHash, DatabaseHashCache};
pub use evident_rwe::database_hash::{DatabaseHashMode, DatabaseHashRequest};
use evident_rwe::evident_db::{DatabaseUrl, DbError, QueryLimits, ReadOnlyConnection};
use evident_rwe::leak::refuse_leaks;
use evident_rwe::metrics::{aggregate_runs, run_metrics, RunsSummary};
use evident_rwe::report::{baseline_table, render_report, write_report, AttritionReport};
use evident_rwe::sandbox::{SandboxConfig, Workspace};
use evident_rwe::task::LoadedTask;
use evident_rwe::{score_task, AnswerSheet, Gold, Task, TaskScore};
use serde::Serialize;

use crate::error::AppError;
use crate::evaluation::chart::run_seed;
use crate::session::lock;
use crate::{ModelChoice, ProgressEvent, ProgressSink, Result, Session};

/// Run one study task.
#[derive(Debug, Clone)]
pub struct StudyRequest {
    /// A task file (`task.yaml`) or the folder holding it, with `gold.json` beside it.
    pub task: PathBuf,
    /// `sqlite:PATH` or `postgres://...`.
    pub db: String,
    pub model: ModelChoice,
    pub strategy: Strategy,
    /// The run folder: workspace, steps, bundle. Reused to resume.
    pub out: PathBuf,
    /// Override the paper's 100 steps.
    pub max_steps: Option<u32>,
    /// The cohort judge run after the rule checks (`None`: none).
    pub judge: Option<JudgeStrategy>,
    pub use_cache: bool,
    /// The sampling seed (`None`: the model's own; the embedded model's is
    /// fixed, so a run at the paper's temperature 0.6 repeats until the
    /// seed changes).
    pub seed: Option<u64>,
    /// Which hash of the database the bundle carries, and how long a
    /// content hash may run (default: the content hash cached per database
    /// state in the store, at most 10 minutes to compute).
    pub database_hash: DatabaseHashRequest,
}

/// What a study run produced.
#[derive(Debug, Clone, Serialize)]
pub struct StudyReport {
    pub task: String,
    pub strategy: Strategy,
    pub termination: Termination,
    pub steps: usize,
    pub resumed_steps: usize,
    /// The audit's verdict: `None` when the cohort passed the rule checks
    /// but the judge did not run (`--no-judge`), so it was not screened.
    pub cohort_qualified: Option<bool>,
    pub audit: Option<CohortAudit>,
    pub score: TaskScore,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The agent's time over all its steps (earlier processes included).
    pub elapsed_ms: u64,
    pub bundle: PathBuf,
    /// The run's `report.html`.
    pub report: PathBuf,
    /// The run had finished before: this report was read back from its
    /// `bundle.json`, and neither the agent nor the judge ran again.
    pub from_bundle: bool,
}

/// The inputs a finished run's bundle must have been made from to answer
/// a rerun in its place.
struct RunInputs<'a> {
    task_sha256: &'a str,
    strategy: Strategy,
    model: &'a str,
    database_url: &'a str,
    judge: Option<JudgeStrategy>,
    max_steps: u32,
}

/// Whether `stored` answers a run with `inputs`: made by this version of
/// Evident with the same prompts from the same task file, strategy, model
/// and database; judged by the judge asked for, if any, when the rules
/// passed;
/// and not cut short by a step budget smaller than the one asked for now.
/// `Err` says why not.
fn answers_rerun(stored: &StoredBundle, inputs: &RunInputs) -> std::result::Result<(), &'static str> {
    if stored.evident_version != env!("CARGO_PKG_VERSION") || stored.prompts_sha256 != prompts_sha256() {
        return Err("made by another version of Evident or its prompts");
    }
    if stored.task_sha256 != inputs.task_sha256 {
        return Err("made from another version of the task file");
    }
    if stored.strategy != inputs.strategy || stored.model != inputs.model {
        return Err("made with another strategy or model");
    }
    if stored.database.url != inputs.database_url {
        return Err("made on another database");
    }
    if let (Some(asked), Some(audit)) = (inputs.judge, &stored.cohort_audit) {
        if audit.rules.passed() && audit.judge.as_ref().map(|j| j.strategy) != Some(asked) {
            return Err("its cohort was not judged by this judge");
        }
    }
    if stored.run.termination == Termination::StepBudget && (stored.run.steps.len() as u64) < inputs.max_steps as u64 {
        return Err("it stopped at a smaller step budget");
    }
    Ok(())
}

/// The report of a run that finished before, read back from `out`'s
/// bundle, when that bundle answers a run with `inputs` (and its page is
/// still there).
fn finished_run(out: &Path, inputs: &RunInputs) -> Option<StudyReport> {
    let stored = read_bundle(out)?;
    answers_rerun(&stored, inputs).ok()?;
    let report = out.join("report.html");
    if !report.is_file() {
        return None;
    }
    let qualified = stored.cohort_audit.as_ref().map_or(Some(false), CohortAudit::qualified);
    Some(StudyReport {
        task: stored.score.task.clone(),
        strategy: stored.strategy,
        termination: stored.run.termination,
        steps: stored.run.steps.len(),
        resumed_steps: stored.run.resumed_steps,
        cohort_qualified: qualified,
        audit: stored.cohort_audit,
        score: stored.score,
        prompt_tokens: stored.run.prompt_tokens,
        completion_tokens: stored.run.completion_tokens,
        elapsed_ms: stored.run.steps.iter().map(|st| st.elapsed_ms).sum(),
        bundle: out.join("bundle.json"),
        report,
        from_bundle: true,
    })
}

/// An agent's error as the user should read it: a model call that failed
/// or was refused stays the model layer's error (so the command line can
/// say which flag lets patient data reach a remote endpoint).
fn agent_error(e: AgentError) -> AppError {
    match e {
        AgentError::Model(e) => AppError::Llm(e),
        e => AppError::Setup(e.to_string()),
    }
}

/// The cohort judge's error as the user should read it (as [`agent_error`]).
fn audit_error(e: AuditError) -> AppError {
    match e {
        AuditError::Model(e) => AppError::Llm(e),
        e => AppError::Setup(e.to_string()),
    }
}

/// A database error as the user should read it: their input (a URL that
/// does not parse or connect) or the setup.
fn db_error(e: DbError) -> AppError {
    if e.is_input() {
        AppError::Input(e.to_string())
    } else {
        AppError::Setup(e.to_string())
    }
}

fn load_task(path: &Path) -> Result<(LoadedTask, Gold)> {
    let file = if path.is_dir() { path.join("task.yaml") } else { path.to_path_buf() };
    let loaded = Task::load(&file).map_err(|e| AppError::Input(e.to_string()))?;
    let gold = Gold::load(&loaded.dir().join("gold.json"), &loaded.task).map_err(|e| AppError::Input(e.to_string()))?;
    // A task whose text states a gold value measures nothing: refused.
    refuse_leaks(&loaded.task, &gold, &loaded.path.display().to_string())
        .map_err(|e| AppError::Input(e.to_string()))?;
    Ok((loaded, gold))
}

/// Evident's store as the cache of database content hashes
/// (`database_hashes`, migration 8).
struct StoreHashCache<'a>(&'a Session);

impl DatabaseHashCache for StoreHashCache<'_> {
    fn get(&mut self, state_key: &str) -> std::result::Result<Option<CachedDatabaseHash>, String> {
        let store = self.0.store().map_err(|e| e.to_string())?;
        let record = lock(&store).database_hash(state_key).map_err(|e| e.to_string())?;
        Ok(record.map(|r| CachedDatabaseHash {
            state_key: r.state_key,
            database: r.database,
            method: r.method,
            sha256: r.sha256,
            timeout_ms: r.timeout_ms.map(|t| t.max(0) as u64),
            tables: r.tables.max(0) as u64,
            elapsed_ms: r.elapsed_ms.max(0) as u64,
            evident_version: r.evident_version,
            computed_at: r.computed_at,
        }))
    }

    fn put(&mut self, entry: &CachedDatabaseHash) -> std::result::Result<(), String> {
        let store = self.0.store().map_err(|e| e.to_string())?;
        let record = evident_store::DatabaseHashRecord {
            state_key: entry.state_key.clone(),
            database: entry.database.clone(),
            method: entry.method.clone(),
            sha256: entry.sha256.clone(),
            timeout_ms: entry.timeout_ms.map(|t| t as i64),
            tables: entry.tables as i64,
            elapsed_ms: entry.elapsed_ms as i64,
            evident_version: entry.evident_version.clone(),
            computed_at: entry.computed_at.clone(),
        };
        let written = lock(&store).put_database_hash(&record).map_err(|e| e.to_string());
        written
    }
}

/// The hash of the study database at `db` a bundle would carry: the
/// SQLite files', or for PostgreSQL the content hash cached in the store
/// for the database's current state, computed (and cached) when there is
/// none, or the catalogue's (`evident db hash`; every study run calls it
/// when it writes its bundle). Fails only on a URL that does not parse;
/// a hash that could not be computed is recorded as such, with why.
pub fn database_hash(session: &Session, db: &str, request: &DatabaseHashRequest) -> Result<DatabaseInfo> {
    let url = DatabaseUrl::parse(db).map_err(db_error)?;
    Ok(database_info(&url, request, &mut StoreHashCache(session)))
}

/// Runs (or resumes) one task end to end and writes `bundle.json` in the
/// run folder, reporting its stages to `progress`. A run that finished
/// before is read back from its bundle ([`StudyReport::from_bundle`]).
pub fn run(session: &Session, request: &StudyRequest, progress: &dyn ProgressSink) -> Result<StudyReport> {
    run_as(session, request, None, progress)
}

/// [`run`], its progress under `label` (default: the task and strategy),
/// ended with [`ProgressEvent::StudyFinished`] however it ends.
fn run_as(
    session: &Session,
    request: &StudyRequest,
    label: Option<String>,
    progress: &dyn ProgressSink,
) -> Result<StudyReport> {
    let result = run_stages(session, request, label, progress);
    progress.report(ProgressEvent::StudyFinished);
    result
}

fn run_stages(
    session: &Session,
    request: &StudyRequest,
    label: Option<String>,
    progress: &dyn ProgressSink,
) -> Result<StudyReport> {
    let (loaded, gold) = load_task(&request.task)?;
    let task = loaded.task.clone();
    let url = DatabaseUrl::parse(&request.db).map_err(db_error)?;
    let mut config = AgentConfig::paper(request.strategy);
    if let Some(steps) = request.max_steps {
        config.max_steps = steps;
    }
    config.seed = request.seed;
    // The embedded model's window: memory compression at a fraction of it
    // when that is below the paper's 32,768 tokens (Evident's setting).
    if request.model.endpoint.is_none() {
        config.context_tokens = Some(session.config().llm.context_size as usize);
    }
    let label = label.unwrap_or_else(|| format!("{} ({})", task.id, request.strategy.as_str()));
    let stage = |stage: &str| progress.report(ProgressEvent::StudyStage { label: label.clone(), stage: stage.into() });
    let task_sha256 = sha256_file(&loaded.path).map_err(|cause| AppError::File { path: loaded.path.clone(), cause })?;
    let run_id = session.begin_model_run(&format!("study {} ({})", task.id, request.strategy.as_str()))?;
    let model = session.chat_model(&request.model, &run_id, request.use_cache)?;
    let model_id = evident_llm::ChatModel::model_id(&model).to_string();
    let inputs = RunInputs {
        task_sha256: &task_sha256,
        strategy: request.strategy,
        model: &model_id,
        database_url: &url.redacted(),
        judge: request.judge,
        max_steps: config.max_steps,
    };
    // A finished run is read back before the database is opened (a
    // PostgreSQL run would make its read-only role for nothing).
    if let Some(report) = finished_run(&request.out, &inputs) {
        stage("read back from its bundle");
        session.finish_model_run(&run_id)?;
        return Ok(report);
    }
    let limits = QueryLimits { max_rows: 50_001, ..QueryLimits::default() };
    let mut conn = ReadOnlyConnection::connect(&url, limits.clone()).map_err(db_error)?;
    std::fs::create_dir_all(&request.out).map_err(|cause| AppError::File { path: request.out.clone(), cause })?;
    let r_db = r_database(conn.agent_url()).map_err(db_error)?;
    let aux: Vec<PathBuf> = task.auxiliary_files.iter().map(|f| loaded.dir().join(f)).collect();
    let workspace =
        Workspace::create(&request.out.join("workspace"), r_db, &aux).map_err(|e| AppError::Setup(e.to_string()))?;
    let typed_db = match request.strategy {
        Strategy::Typed | Strategy::TypedGrounded | Strategy::TypedRead => {
            Some(ReadOnlyConnection::connect(&url, limits).map_err(db_error)?)
        }
        Strategy::R => None,
    };
    let mut env =
        StudyEnv::new(AnswerSheet::new(task.clone(), gold.clone()), workspace, SandboxConfig::default(), typed_db);
    stage("the agent (stored steps are replayed)");
    let prompts = study_prompts(None);
    let store = StepStore::new(&request.out);
    let run: AgentRun = run_agent(&model, &model, &mut env, &prompts, &config, &store, &task.auxiliary_files)
        .map_err(|e| AppError::Interrupted { what: format!("study {}", task.id), cause: Box::new(agent_error(e)) })?;

    let audit_path = env.workspace().root().join(AUDIT_FILE);
    let mut audit_table = None;
    let audit = if audit_path.is_file() {
        let table = AuditTable::read(&audit_path).map_err(|e| AppError::Input(e.to_string()))?;
        let rules = rule_checks(&table, &mut conn).map_err(|e| AppError::Setup(e.to_string()))?;
        let (judge, database_judge) = match request.judge {
            Some(strategy) if rules.passed() => {
                stage(&format!("the cohort judge ({})", strategy.as_str()));
                let definition = &task.protocol.methods;
                (
                    Some(judge_cohort(&model, strategy, &prompts, definition, &table, 1).map_err(audit_error)?),
                    Some(
                        judge_database_facts(&model, strategy, &prompts, definition, &table, &mut conn, 1)
                            .map_err(audit_error)?,
                    ),
                )
            }
            _ => (None, None),
        };
        audit_table = Some(table);
        Some(CohortAudit { rules, judge, database_judge })
    } else {
        None
    };
    session.finish_model_run(&run_id)?;
    // No audit file: nothing to screen, so the cohort is not qualified.
    let qualified = audit.as_ref().map_or(Some(false), CohortAudit::qualified);
    let score = score_task(&task, &gold, env.sheet.answers(), run.steps.len() as u32, qualified);
    let attrition = AttritionReport::read(env.workspace().root(), audit_table.as_ref().map(|t| t.rows.len()));
    let baseline = audit_table.as_ref().map(baseline_table).unwrap_or_default();
    let bundle = Bundle {
        evident_version: env!("CARGO_PKG_VERSION"),
        task: &task,
        task_sha256,
        prompts_sha256: prompts_sha256(),
        strategy: request.strategy,
        model: model_id,
        database: database_info(&url, &request.database_hash, &mut StoreHashCache(session)),
        cohort_audit: audit.as_ref(),
        cohort_sql: read_cohort_sql(env.workspace().root()),
        attrition: &attrition,
        baseline: &baseline,
        answers: env.sheet.answers(),
        score: &score,
        run: &run,
    };
    let bundle_path =
        write_bundle(&request.out, &bundle).map_err(|cause| AppError::File { path: request.out.clone(), cause })?;
    let report_path = write_report(&request.out, &render_report(&bundle, &gold))
        .map_err(|cause| AppError::File { path: request.out.clone(), cause })?;
    Ok(StudyReport {
        task: task.id.clone(),
        strategy: request.strategy,
        termination: run.termination,
        steps: run.steps.len(),
        resumed_steps: run.resumed_steps,
        cohort_qualified: qualified,
        audit,
        score,
        prompt_tokens: run.prompt_tokens,
        completion_tokens: run.completion_tokens,
        elapsed_ms: run.steps.iter().map(|st| st.elapsed_ms).sum(),
        bundle: bundle_path,
        report: report_path,
        from_bundle: false,
    })
}

impl fmt::Display for StudyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "task {} ({} strategy): {:?} after {} steps",
            self.task,
            self.strategy.as_str(),
            self.termination,
            self.steps
        )?;
        if self.from_bundle {
            writeln!(f, "read back from its bundle: this run had finished, and nothing was run again")?;
        }
        match &self.audit {
            None => writeln!(f, "cohort audit: no cohort_audit.csv was exported")?,
            Some(a) => {
                for c in &a.rules.checks {
                    writeln!(f, "  rule {}: {} ({})", c.rule, if c.passed { "passed" } else { "FAILED" }, c.detail)?;
                }
                if let Some(j) = &a.judge {
                    writeln!(
                        f,
                        "  judge ({}): {} of {} judged rows excluded",
                        j.strategy.as_str(),
                        j.excluded,
                        j.judged
                    )?;
                }
                let cohort = match self.cohort_qualified {
                    Some(true) => "qualified",
                    Some(false) => "not qualified",
                    None => "not screened (the rules passed; the judge did not run)",
                };
                writeln!(f, "cohort: {cohort}")?;
            }
        }
        let pct = |x: Option<f64>| x.map(|v| format!("{:.0}%", 100.0 * v)).unwrap_or_else(|| "-".into());
        writeln!(
            f,
            "ACC {}  RAR {}  SMR {}  success {}  complete {}",
            pct(self.score.acc),
            pct(self.score.rar),
            pct(self.score.smr),
            self.score.success,
            self.score.complete
        )?;
        writeln!(f, "tokens: {} prompt, {} completion", self.prompt_tokens, self.completion_tokens)?;
        writeln!(f, "bundle: {}", self.bundle.display())?;
        write!(f, "report: {}", self.report.display())
    }
}

/// RWE-bench's metrics over a folder of tasks.
#[derive(Debug, Clone)]
pub struct EvalRequest {
    /// A folder whose subfolders hold `task.yaml` and `gold.json`.
    pub tasks: PathBuf,
    pub db: String,
    pub model: ModelChoice,
    pub strategy: Strategy,
    pub runs: u32,
    /// Run folders go under `out/run-N/TASK`.
    pub out: PathBuf,
    pub max_steps: Option<u32>,
    pub judge: Option<JudgeStrategy>,
    pub use_cache: bool,
    /// As [`StudyRequest::database_hash`]; with the default, the database
    /// is read once for all runs and tasks.
    pub database_hash: DatabaseHashRequest,
}

/// The evaluation: every task score of every run, and the summary.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    pub strategy: Strategy,
    pub runs: Vec<Vec<StudyReport>>,
    pub summary: RunsSummary,
}

/// Runs every task `runs` times and computes ACC, RAR, SMR, SR, SR after
/// screening, CR and steps (macro within tasks, then across tasks; mean
/// and standard error over runs).
pub fn evaluate(session: &Session, request: &EvalRequest, progress: &dyn ProgressSink) -> Result<EvalReport> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&request.tasks)
        .map_err(|cause| AppError::File { path: request.tasks.clone(), cause })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("task.yaml").is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(AppError::Input(format!(
            "{}: no task folders (a folder with task.yaml and gold.json)",
            request.tasks.display()
        )));
    }
    let mut runs = Vec::new();
    let run_count = request.runs.max(1);
    for r in 1..=run_count {
        let mut reports = Vec::new();
        for (i, dir) in dirs.iter().enumerate() {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let study = StudyRequest {
                task: dir.clone(),
                db: request.db.clone(),
                model: request.model.clone(),
                strategy: request.strategy,
                out: request.out.join(format!("run-{r}")).join(&name),
                max_steps: request.max_steps,
                judge: request.judge,
                use_cache: request.use_cache,
                seed: run_seed(r),
                database_hash: request.database_hash,
            };
            let label = format!(
                "{name} ({}, run {r} of {run_count}, task {} of {})",
                request.strategy.as_str(),
                i + 1,
                dirs.len()
            );
            reports.push(run_as(session, &study, Some(label), progress)?);
        }
        runs.push(reports);
    }
    let per_run: Vec<_> =
        runs.iter().map(|rs| run_metrics(&rs.iter().map(|r| r.score.clone()).collect::<Vec<_>>())).collect();
    Ok(EvalReport { strategy: request.strategy, summary: aggregate_runs(&per_run), runs })
}

impl fmt::Display for EvalReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cell = |m: &Option<evident_rwe::MetricSummary>, pct: bool| match m {
            None => "-".to_string(),
            Some(m) => {
                let k = if pct { 100.0 } else { 1.0 };
                match m.se {
                    Some(se) => format!("{:.1} ± {:.1}", k * m.mean, k * se),
                    None => format!("{:.1}", k * m.mean),
                }
            }
        };
        let s = &self.summary;
        writeln!(f, "| run | task | ended | steps | tokens (prompt + completion) | agent time | cohort audit | ACC | RAR | SMR | success |")?;
        writeln!(f, "| ---: | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |")?;
        let pct = |x: Option<f64>| x.map(|v| format!("{:.0}%", 100.0 * v)).unwrap_or_else(|| "-".into());
        for (i, run) in self.runs.iter().enumerate() {
            for r in run {
                let audit = match &r.audit {
                    None => "no audit file".to_string(),
                    Some(a) if !a.rules.passed() => {
                        let failed: Vec<&str> =
                            a.rules.checks.iter().filter(|c| !c.passed).map(|c| c.rule.as_str()).collect();
                        format!("rules failed ({})", failed.join(", "))
                    }
                    Some(a) => match &a.judge {
                        None => "rules passed, not judged".to_string(),
                        Some(j) => format!(
                            "rules passed, {} judge {} ({} of {} excluded)",
                            j.strategy.as_str(),
                            if j.passed() { "passed" } else { "failed" },
                            j.excluded,
                            j.judged
                        ),
                    },
                };
                writeln!(
                    f,
                    "| {} | {} | {:?}{} | {} | {} + {} | {:.0} s | {} | {} | {} | {} | {} |",
                    i + 1,
                    r.task,
                    r.termination,
                    if r.from_bundle { " (read back)" } else { "" },
                    r.steps,
                    r.prompt_tokens,
                    r.completion_tokens,
                    r.elapsed_ms as f64 / 1000.0,
                    audit,
                    pct(r.score.acc),
                    pct(r.score.rar),
                    pct(r.score.smr),
                    r.score.success
                )?;
            }
        }
        writeln!(f)?;
        writeln!(f, "| strategy | ACC | RAR | SMR | SR | SR screened | CR | steps |")?;
        writeln!(f, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")?;
        write!(
            f,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            self.strategy.as_str(),
            cell(&s.acc, true),
            cell(&s.rar, true),
            cell(&s.smr, true),
            cell(&s.sr, true),
            cell(&s.sr_screened, true),
            cell(&s.cr, true),
            cell(&s.steps, false)
        )
    }
}

/// The CohortEval check of the cohort judge on one development task.
#[derive(Debug, Clone)]
pub struct JudgeCheckRequest {
    /// A task folder holding `task.yaml`, `gold.json` and `cohort_eval.yaml`.
    pub task: PathBuf,
    /// The study database the reference cohort is read from.
    pub db: String,
    pub model: ModelChoice,
    pub strategy: JudgeStrategy,
    pub runs: u32,
    pub counts: CaseCounts,
    pub seed: u64,
    pub use_cache: bool,
}

/// Builds the reference cohort, the counterfactual and adversarial cases,
/// and measures the judge on them (positive class: an eligible member).
pub fn check_judge(session: &Session, request: &JudgeCheckRequest) -> Result<JudgeCheck> {
    let (loaded, gold) = load_task(&request.task)?;
    let task = &loaded.task;
    let spec_path = loaded.dir().join(COHORT_EVAL_SPEC);
    if !spec_path.is_file() {
        return Err(AppError::Input(format!(
            "{}: no {COHORT_EVAL_SPEC}; the judge check needs the task's reference cohort and counterfactual edits",
            loaded.dir().display()
        )));
    }
    let spec = CohortEvalSpec::load(&spec_path).map_err(AppError::Input)?;
    if spec.task != task.id {
        return Err(AppError::Input(format!(
            "{}: task {:?} does not match the task beside it ({:?})",
            spec_path.display(),
            spec.task,
            task.id
        )));
    }
    let url = DatabaseUrl::parse(&request.db).map_err(db_error)?;
    let mut conn = ReadOnlyConnection::connect(&url, QueryLimits { max_rows: 50_001, ..QueryLimits::default() })
        .map_err(db_error)?;
    let table =
        reference_cohort(&mut conn, &spec).map_err(|e| AppError::Input(format!("{}: {e}", loaded.dir().display())))?;
    let expected = gold.fields.get(&spec.size_field).copied().ok_or_else(|| {
        AppError::Input(format!("{}: size_field {:?} is not a gold field", spec_path.display(), spec.size_field))
    })?;
    if table.rows.len() as f64 != expected {
        return Err(AppError::Input(format!(
            "{}: reference_sql returns {} rows but the R reference's {} is {expected}; fix the SQL",
            spec_path.display(),
            table.rows.len(),
            spec.size_field
        )));
    }
    let cases = build_cases(&table, &spec, request.counts, request.seed)
        .map_err(|e| AppError::Input(format!("{}: {e}", spec_path.display())))?;
    let run_id = session.begin_model_run(&format!("cohort judge check {}", task.id))?;
    let model = session.chat_model(&request.model, &run_id, request.use_cache)?;
    let prompts = study_prompts(None);
    let check = evident_rwe::cohort_eval::check_judge(
        &model,
        request.strategy,
        &prompts,
        &task.id,
        &task.protocol.methods,
        table.rows.len(),
        request.counts,
        cases,
        request.runs,
        &mut |_, _| {},
    )
    .map_err(|e| AppError::Interrupted {
        what: format!("cohort judge check {}", task.id),
        cause: Box::new(audit_error(e)),
    })?;
    session.finish_model_run(&run_id)?;
    Ok(check)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `--no-judge` run never screened its cohorts: the summary row shows
    /// SR after screening as "-" (as any unmeasured cell), not as 0.0.
    #[test]
    fn sr_screened_without_the_judge_prints_as_not_measured() {
        let run = |sr_screened| evident_rwe::RunMetrics {
            tasks: 1,
            acc: Some(1.0),
            rar: None,
            smr: Some(0.0),
            sr: 0.0,
            sr_screened,
            cr: 1.0,
            steps: 4.0,
        };
        let table = |runs: &[evident_rwe::RunMetrics]| {
            EvalReport { strategy: Strategy::Typed, runs: Vec::new(), summary: aggregate_runs(runs) }.to_string()
        };
        let summary_row = |text: String| text.lines().last().unwrap().to_string();
        assert_eq!(summary_row(table(&[run(None)])), "| typed | 100.0 | - | 0.0 | 0.0 | - | 100.0 | 4.0 |");
        assert_eq!(summary_row(table(&[run(Some(0.0))])), "| typed | 100.0 | - | 0.0 | 0.0 | 0.0 | 100.0 | 4.0 |");
    }

    /// A finished run's bundle answers a rerun made from the same inputs
    /// (so `eval rwe` resumed asks neither the agent nor the judge again),
    /// and no rerun whose inputs differ.
    #[test]
    fn a_finished_bundle_answers_only_a_rerun_of_the_same_inputs() {
        use evident_rwe::agent::AgentRun;
        use evident_rwe::audit::{RuleCheck, RuleReport};
        use evident_rwe::bundle::StoredDatabase;
        let rules = RuleReport {
            rows: 3,
            checks: vec![RuleCheck { rule: "non_empty".into(), passed: true, detail: "3 rows".into() }],
        };
        let stored = StoredBundle {
            evident_version: env!("CARGO_PKG_VERSION").into(),
            task_sha256: "a".repeat(64),
            prompts_sha256: prompts_sha256(),
            strategy: Strategy::TypedRead,
            model: "qwen".into(),
            database: StoredDatabase { url: "sqlite:demo.db".into() },
            cohort_audit: Some(CohortAudit { rules, judge: None, database_judge: None }),
            score: TaskScore {
                task: "t".into(),
                acc: Some(1.0),
                rar: None,
                smr: None,
                success: true,
                success_screened: None,
                complete: true,
                steps: 0,
            },
            run: AgentRun {
                steps: Vec::new(),
                termination: Termination::Completed,
                resumed_steps: 0,
                prompt_tokens: 0,
                completion_tokens: 0,
            },
        };
        let task = "a".repeat(64);
        let inputs = || RunInputs {
            task_sha256: &task,
            strategy: Strategy::TypedRead,
            model: "qwen",
            database_url: "sqlite:demo.db",
            judge: None,
            max_steps: 100,
        };
        assert_eq!(answers_rerun(&stored, &inputs()), Ok(()));
        let other_task = "b".repeat(64);
        assert!(answers_rerun(&stored, &RunInputs { task_sha256: &other_task, ..inputs() }).is_err());
        assert!(answers_rerun(&stored, &RunInputs { strategy: Strategy::Typed, ..inputs() }).is_err());
        assert!(answers_rerun(&stored, &RunInputs { model: "llama", ..inputs() }).is_err());
        assert!(answers_rerun(&stored, &RunInputs { database_url: "sqlite:other.db", ..inputs() }).is_err());
        // The rules passed but the judge never ran: a judged rerun judges.
        let judged_by = |s| RunInputs { judge: Some(s), ..inputs() };
        assert_eq!(
            answers_rerun(&stored, &judged_by(JudgeStrategy::Paper)),
            Err("its cohort was not judged by this judge")
        );
        // Judged by the paper's judge: a rerun with the compiled judge judges again.
        let mut judged = stored.clone();
        judged.cohort_audit.as_mut().unwrap().judge = Some(evident_rwe::audit::JudgeReport {
            model: "qwen".into(),
            strategy: JudgeStrategy::Paper,
            compiled: None,
            sampled: 0,
            judged: 0,
            excluded: 0,
            exclusion_rate: None,
            cases: Vec::new(),
        });
        assert_eq!(answers_rerun(&judged, &judged_by(JudgeStrategy::Paper)), Ok(()));
        assert_eq!(answers_rerun(&judged, &inputs()), Ok(()), "a run without the judge takes a judged bundle");
        assert!(answers_rerun(&judged, &judged_by(JudgeStrategy::Compiled)).is_err());
        let mut older = stored.clone();
        older.prompts_sha256 = "0".repeat(64);
        assert!(answers_rerun(&older, &inputs()).is_err());
        // Cut short by its step budget: a larger budget goes on; the same does not.
        let mut cut = stored.clone();
        cut.run.termination = Termination::StepBudget;
        cut.run.steps = Vec::new();
        assert!(answers_rerun(&cut, &RunInputs { max_steps: 1, ..inputs() }).is_err());
        assert_eq!(answers_rerun(&cut, &RunInputs { max_steps: 0, ..inputs() }), Ok(()));
    }

    #[test]
    fn evaluation_runs_after_the_first_sample_with_their_own_seed() {
        assert_eq!((1..=3).map(run_seed).collect::<Vec<_>>(), [None, Some(2), Some(3)]);
    }
}
