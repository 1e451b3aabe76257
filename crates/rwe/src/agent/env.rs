//! The study environment: executes one [`Action`] and returns the
//! observation the agent reads. Files are confined to the run's workspace;
//! R runs in the sandbox; SQL goes through a read-only connection; typed
//! statistics call `evident-stats` on a CSV table the agent built; answers
//! go to the [`AnswerSheet`], gated on the cohort audit file.

use std::path::{Component, Path, PathBuf};

use evident_db::{ReadOnlyConnection, Value as DbValue};
use evident_stats::glm::{glm, lm, Family, GlmConfig, Predictor};
use evident_stats::propensity::{iptw_effect, matched_effect, Balance, Estimand, MatchConfig, OutcomeModel};
use evident_stats::survival::{coxph, kaplan_meier, logrank, ConfType, Ties};
use serde_json::{Map, Value};

use super::actions::{self, Action, CsvColumns, SchemaState, StatsTool};
use crate::analysis::{AnalysisOutput, EffectRow, KmGroup};
use crate::audit::{rule_checks, AuditTable, IdColumn, ATTRITION_FILE, AUDIT_FILE};
use crate::provenance::{self, AnswerBasis, ResultNumber, ResultValue};
use crate::sandbox::{truncate_chars, SandboxConfig, Workspace};
use crate::sheet::AnswerSheet;

/// What the agent sees after an action, and whether the run ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub text: String,
    pub finished: bool,
    /// What a typed statistics tool computed, as data for the report.
    pub analysis: Option<AnalysisOutput>,
    /// The numbers this step computed, citable by key in `submit_answers`
    /// (typed strategy, [`crate::provenance`]).
    pub results: Vec<ResultNumber>,
}

/// A study run's world: the answer sheet, the workspace and its sandbox,
/// and (for the typed strategy) a read-only database connection.
pub struct StudyEnv {
    pub sheet: AnswerSheet,
    workspace: Workspace,
    sandbox: SandboxConfig,
    db: Option<ReadOnlyConnection>,
    /// The structured output of the action being executed, if any.
    analysis: Option<AnalysisOutput>,
    /// The database's tables (schema.table), read once at the start.
    db_tables: Vec<String>,
    /// Every number a typed tool computed so far, by key (typed strategy).
    results: Vec<ResultNumber>,
    /// The text of each SQL or R action, for matching a typed answer to a
    /// number the agent computed there (typed strategy).
    observations: Vec<(u32, String)>,
    /// The results of the action being executed.
    new_results: Vec<(String, ResultValue)>,
    /// `--strategy typed-grounded`: an answer only from a computed result
    /// (a field as `{"from_result": KEY}`, a choice after an effect or test).
    grounded: bool,
    /// `typed-read`: choices as their results read ([`Self::set_reads`]).
    reads: bool,
    /// Grounded strategy: the actions in a row, other than
    /// `submit_answers`, taken while something could be submitted; at
    /// [`PASSES_BEFORE_SUBMIT`] only `submit_answers` is offered. Not
    /// stored with the steps: a resumed run starts it at 0.
    passed_up: u32,
    /// Grounded strategy: the actions in a row, while nothing could be
    /// submitted, that ran none of the tools the open questions need (nor
    /// `build_cohort`); at [`IDLE_BEFORE_COMPUTE`] only those are offered.
    /// Not stored with the steps, as `passed_up`.
    idle: u32,
    /// Actions in a row taken before any cohort existed (grounded): at
    /// [`IDLE_BEFORE_COMPUTE`], only `build_cohort` and `run_sql` are
    /// offered. Run 6's RDW task, its group refused twice, listed tables and
    /// files for 17 steps and never built its cohort.
    no_cohort: u32,
    /// Grounded strategy: the columns a `build_cohort` group may cut, age
    /// and the protocol's laboratory items' columns (named from their
    /// labels), read when the strategy is set.
    group_columns: Vec<String>,
    /// The names a grounded `build_cohort` group may take (empty: any).
    group_names: Vec<String>,
    /// The names a grounded `build_cohort` drug column may take (empty: any).
    drug_names: Vec<String>,
}

/// How many actions in a row the grounded strategy may take past answers
/// it could submit before only `submit_answers` is offered. In run 4 the
/// anion-gap task had the reference's odds ratio at step 4 and ran six
/// more regressions without answering.
pub const PASSES_BEFORE_SUBMIT: u32 = 2;

/// How many actions in a row the grounded strategy may take, with nothing
/// to submit, without running a tool the open questions need, before only
/// those tools (and `build_cohort`) are offered. In run 5 the anion-gap
/// task had only its choice left from step 5 and spent the ten steps to
/// its budget on SQL, R and table descriptions, never the logistic
/// regression the `[State]` line named.
pub const IDLE_BEFORE_COMPUTE: u32 = 3;

impl StudyEnv {
    pub fn new(
        sheet: AnswerSheet,
        workspace: Workspace,
        sandbox: SandboxConfig,
        mut db: Option<ReadOnlyConnection>,
    ) -> Self {
        let db_tables = db
            .as_mut()
            .and_then(|d| d.tables().ok())
            .map(|t| t.iter().map(|t| t.qualified_name()).collect())
            .unwrap_or_default();
        StudyEnv {
            sheet,
            workspace,
            sandbox,
            db,
            analysis: None,
            db_tables,
            results: Vec::new(),
            observations: Vec::new(),
            new_results: Vec::new(),
            grounded: false,
            reads: false,
            passed_up: 0,
            idle: 0,
            no_cohort: 0,
            group_columns: Vec::new(),
            group_names: Vec::new(),
            drug_names: Vec::new(),
        }
    }

    /// Makes answers grounded (`--strategy typed-grounded`, set by
    /// [`super::run_agent`] from the strategy): the schema offers a field
    /// only as `{"from_result": KEY}` over the results that can fill it and
    /// a choice only after an effect or test, and `submit_answers` refuses
    /// anything else. Without a database connection (`--strategy r`) it
    /// has no effect.
    pub fn set_grounded(&mut self, grounded: bool) {
        self.grounded = grounded;
        self.group_columns = vec!["age".to_string()];
        let task = self.sheet.task();
        let text = format!("{}\n{}", task.protocol.background, task.protocol.methods);
        if let Some(db) = self.db.as_mut().filter(|_| grounded) {
            for itemid in super::cohort::protocol_itemids(&text) {
                if let Ok(Some(label)) = super::cohort::lab_label(db, itemid) {
                    self.group_columns.push(super::cohort::label_column(&label));
                }
            }
        }
        // Groups only where a count or share names what no column the
        // builder writes carries (the age task's older, the RDW task's high):
        // offered to the lactate task, the model cut a group named female and
        // never built the cohort.
        let mut columns: Vec<String> =
            super::cohort::FIXED_COLUMNS.iter().map(|c| c.to_string()).chain(self.group_columns.clone()).collect();
        if let Some(n) = super::cohort::protocol_death_days(&text) {
            columns.push(format!("death_{n}d"));
        }
        let needs_group = |f: &&crate::task::FieldKind| {
            matches!(f, crate::task::FieldKind::Count { .. } | crate::task::FieldKind::Proportion { .. })
                && provenance::named_for(task, f.name())
                    .iter()
                    .any(|w| !columns.iter().any(|c| provenance::names_any(c, std::slice::from_ref(w))))
        };
        let fields: Vec<&crate::task::FieldKind> =
            task.questions.iter().flat_map(|q| &q.fields).filter(needs_group).collect();
        // A group is named for what its field counts, less deaths and the
        // cohort's size: `older`, `high_rdw` (runs 5 and 6 named the RDW
        // task's group `age`, refused each time), each word of it in the
        // protocol's Exposure or Groups text (not the statin task's
        // `matched`, which propensity matching counts). A group is a cut at
        // or above a value, so no name for the lower side (`normal_rdw`,
        // which the group's zeros are). Where the protocol has a drug
        // exposure, the names are the drug column's (`statin`) and there
        // are no groups: run 6 named both the drug and a creatinine group
        // `avastatin`.
        let exposure = super::cohort::protocol_exposure_words(&task.protocol.methods);
        let mut names: Vec<String> = Vec::new();
        for f in fields {
            let words: Vec<String> =
                provenance::named_for(task, f.name()).into_iter().filter(|w| w != "death").collect();
            let name = words.join("_");
            if !words.is_empty()
                && !words.iter().any(|w| provenance::LOWER_SIDE.contains(&w.as_str()))
                && words.iter().all(|w| exposure.contains(w))
                && !names.contains(&name)
            {
                names.push(name);
            }
        }
        let has_drug = super::cohort::params_schema_for(&text)["properties"].get("drug").is_some();
        self.drug_names = Vec::new();
        self.group_names = Vec::new();
        if names.is_empty() || has_drug {
            self.group_columns.clear();
            self.drug_names = names;
        } else {
            self.group_names = names;
        }
    }

    /// Whether answers must come from computed results ([`Self::set_grounded`]).
    pub fn is_grounded(&self) -> bool {
        self.grounded && self.traces_answers()
    }

    /// Answer choice questions as their computed results read
    /// ([`crate::reading`], the `typed-read` strategy); only in a grounded run.
    pub fn set_reads(&mut self, reads: bool) {
        self.reads = reads;
    }

    /// How a choice question's results read now, in a `typed-read` run.
    fn reading(&self, id: &str) -> Option<crate::reading::ChoiceReading> {
        if !(self.reads && self.is_grounded()) {
            return None;
        }
        let task = self.sheet.task();
        let q = task.question(id).filter(|q| q.choice.is_some())?;
        crate::reading::read_choice(task, q, &self.results)
    }

    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    pub fn audit_file_present(&self) -> bool {
        self.workspace.root().join(AUDIT_FILE).is_file()
    }

    /// Whether answers are traced to the numbers tools produced: the typed
    /// strategy (the one with a database connection); `--strategy r` is the
    /// paper's and is left as it is.
    fn traces_answers(&self) -> bool {
        self.db.is_some()
    }

    /// The numbers typed tools computed so far, citable by key.
    pub fn results(&self) -> &[ResultNumber] {
        &self.results
    }

    /// Takes back what stored steps computed and showed (a resumed run), so
    /// their results stay citable and their numbers matchable.
    pub fn replay(&mut self, steps: &[super::StepRecord]) {
        for s in steps {
            self.results.extend(s.results.iter().cloned());
            if self.traces_answers() && own_computation(&s.action) {
                self.observations.push((s.step, s.observation.clone()));
            }
        }
    }

    /// Executes `action` as step `step`; the observation is cut at the
    /// sandbox's observation limit. In the typed strategy the numbers a tool
    /// computed are kept under keys `"STEP:NAME"` and listed after its text.
    pub fn execute(&mut self, step: u32, action: &Action) -> Observation {
        let limit = self.sandbox.max_observation_chars;
        self.analysis = None;
        self.new_results.clear();
        if self.is_grounded() && !self.audit_file_present() {
            self.no_cohort += 1;
        }
        // Held to the tools the open questions need (the compute-only lever).
        let counted = self.is_grounded() && self.audit_file_present();
        let offerable = counted && self.something_offerable();
        let held = counted && self.idle >= IDLE_BEFORE_COMPUTE && !offerable;
        if counted {
            if offerable {
                self.idle = 0;
                match action {
                    Action::SubmitAnswers { .. } => self.passed_up = 0,
                    _ => self.passed_up += 1,
                }
            } else {
                let needed = self.tools_needed();
                match action {
                    // Decided once it has run: see below.
                    Action::BuildCohort { .. } => {}
                    a if needed.contains(&a.name()) => self.idle = 0,
                    _ => self.idle += 1,
                }
            }
        }
        // The same cohort built again computed nothing new (run 6's
        // anion-gap task rebuilt it every few steps between failing SQL, so
        // only the needed tools were never offered); a changed one may hold
        // the column an open question needs.
        let idle_rebuild = matches!(action, Action::BuildCohort { .. })
            && self.is_grounded()
            && self.audit_file_present()
            && !self.something_offerable();
        let cohort_before =
            if idle_rebuild { std::fs::read(self.workspace.root().join(AUDIT_FILE)).ok() } else { None };
        let (mut text, finished) = match self.dispatch(step, action) {
            Ok(done) => done,
            Err(message) => (format!("The action failed: {message}"), false),
        };
        if idle_rebuild {
            if cohort_before == std::fs::read(self.workspace.root().join(AUDIT_FILE)).ok() {
                self.idle += 1;
            } else {
                self.idle = 0;
            }
        }
        let mut results = Vec::new();
        if self.traces_answers() {
            results = std::mem::take(&mut self.new_results).into_iter().filter(|(_, v)| v.is_finite()).fold(
                Vec::<ResultNumber>::new(),
                |mut out, (name, value)| {
                    // A key is the result's name, with _2, _3, ... when an
                    // earlier result took it: no step number for a small
                    // model to copy as a value. The same value under the
                    // same name again (a column the grounded cohort's
                    // baseline already described) keeps its first key.
                    let same = |r: &ResultNumber| {
                        r.value == value
                            && (r.key == name
                                || r.key
                                    .strip_prefix(name.as_str())
                                    .and_then(|t| t.strip_prefix('_'))
                                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())))
                    };
                    if self.results.iter().chain(&out).any(same) {
                        return out;
                    }
                    let taken = |k: &str| self.results.iter().chain(&out).any(|r| r.key == k);
                    let mut key = name.clone();
                    let mut n = 2;
                    while taken(&key) {
                        key = format!("{name}_{n}");
                        n += 1;
                    }
                    out.push(ResultNumber { key, step, tool: action.name().to_string(), value });
                    out
                },
            );
            if own_computation(action.name()) {
                self.observations.push((step, text.clone()));
            }
            self.results.extend(results.iter().cloned());
            // A model that had to be held to the needed tool is held to the
            // answer it computed: run 7's anion-gap task computed its AUC
            // under the compute-only lever at step 18 and ran two more
            // regressions, to the step budget, without submitting it.
            if held && self.something_offerable() {
                self.passed_up = self.passed_up.max(PASSES_BEFORE_SUBMIT);
            }
            let note = provenance::results_note(&results);
            if !note.is_empty() {
                // After the tool's text, which is cut first so that the cut at
                // the limit never hides the list.
                let room = limit.saturating_sub(note.chars().count() + 1);
                text = format!("{}\n{}", truncate_chars(text.trim_end(), room), note.trim_end());
            }
        }
        Observation { text: truncate_chars(&text, limit), finished, analysis: self.analysis.take(), results }
    }

    fn dispatch(&mut self, step: u32, action: &Action) -> Result<(String, bool), String> {
        let done = |t: String| Ok((t, false));
        match action {
            Action::ListFiles { path } => {
                let dir = self.resolve(path)?;
                let mut names: Vec<String> = std::fs::read_dir(&dir)
                    .map_err(|e| format!("{path}: {e}"))?
                    .filter_map(|e| e.ok())
                    .map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        if e.path().is_dir() {
                            format!("{name}/")
                        } else {
                            name
                        }
                    })
                    .collect();
                names.sort();
                done(names.join("\n"))
            }
            Action::ReadFile { path } => {
                let file = self.resolve(path)?;
                done(std::fs::read_to_string(&file).map_err(|e| format!("{path}: {e}"))?)
            }
            Action::WriteFile { path, content } => {
                let file = self.resolve(path)?;
                // With a database connection (the typed strategy) the cohort
                // audit file comes from the database, never from typed text.
                let normal: PathBuf =
                    Path::new(path).components().filter(|c| !matches!(c, Component::CurDir)).collect();
                if self.db.is_some() && normal == Path::new(AUDIT_FILE) {
                    return Err(format!(
                        "{AUDIT_FILE} is written from the database: use build_cohort, or run_sql with save_as \"{AUDIT_FILE}\""
                    ));
                }
                if let Some(parent) = file.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| format!("{path}: {e}"))?;
                }
                std::fs::write(&file, content).map_err(|e| format!("{path}: {e}"))?;
                done(format!("Wrote {path} ({} bytes).", content.len()))
            }
            Action::ExecuteR { code } => {
                let run = self
                    .workspace
                    .run_code(&self.sandbox, &format!("step_{step:03}"), code)
                    .map_err(|e| e.to_string())?;
                done(run.observation(usize::MAX))
            }
            Action::ExecuteRScript { path } => {
                self.resolve(path)?;
                let run = self.workspace.run_script(&self.sandbox, path).map_err(|e| e.to_string())?;
                done(run.observation(usize::MAX))
            }
            Action::ListTables => {
                let db = self.db.as_mut().ok_or("no database connection in this strategy")?;
                let tables = db.tables().map_err(|e| e.to_string())?;
                done(tables.iter().map(|t| t.qualified_name()).collect::<Vec<_>>().join("\n"))
            }
            Action::DescribeTable { table } => {
                let db = self.db.as_mut().ok_or("no database connection in this strategy")?;
                let info = db.describe(table).map_err(|e| e.to_string())?;
                // One line: pretty-printed JSON cost the 4,096-token window twice
                // its tokens, and the characters/4 estimate behind memory
                // compression undercounts whitespace-heavy text.
                done(serde_json::to_string(&info).unwrap_or_default())
            }
            Action::BuildCohort { params } => {
                let grounded = self.is_grounded();
                let db = self.db.as_mut().ok_or("no database connection in this strategy")?;
                let mut params = params.clone();
                if grounded {
                    super::cohort::name_labs_by_label(db, &mut params)?;
                }
                let mut spec = super::cohort::CohortSpec::from_params(&params)?;
                let root = self.workspace.root().to_path_buf();
                // Each question is answered once, so once an answer is
                // recorded the bundle's answers must all come from one
                // cohort. Run 2 of typed-read's RDW task rebuilt its cohort
                // without the `high_rdw` group after three answers, and the
                // Cox model then took the continuous RDW. A cohort
                // `build_cohort` made keeps its criteria and takes the
                // request's new columns; one SQL made is checked as SQL is.
                let answered: Vec<String> = self.sheet.answers().keys().cloned().collect();
                let kept = if answered.is_empty() { None } else { read_cohort_file(&root.join(AUDIT_FILE)) };
                let mut note = String::new();
                if let (Some(_), Some(fixed)) = (&kept, read_cohort_spec(&root)) {
                    let (within, not_followed) = spec.within(&fixed);
                    spec = within;
                    if !not_followed.is_empty() {
                        note = format!(
                            "The cohort is fixed ({} {} answered from it), so its criteria and columns were kept: {}.\n",
                            answered.join(", "),
                            if answered.len() == 1 { "was" } else { "were" },
                            not_followed.join("; ")
                        );
                    }
                }
                let text = super::cohort::build_cohort_checked(db, &root, &spec, |header, records| match &kept {
                    Some(kept) => kept.admits(&answered, header, records),
                    None => Ok(()),
                })?;
                let text = note + &text;
                if let Some((rows, _)) = audit_summary(&root.join(AUDIT_FILE)) {
                    self.new_results.push(("stays".into(), ResultValue::Count { n: rows as u64 }));
                }
                if grounded {
                    self.new_results.extend(self.cohort_baseline());
                }
                done(text)
            }
            Action::RunSql { sql, save_as } => self.run_sql(sql, save_as.as_deref()).map(|t| (t, false)),
            Action::Statistics { tool, params } => {
                let (text, analysis, results) = statistics(*tool, params, |p| self.resolve(p))?;
                self.analysis = analysis;
                self.new_results = results;
                done(text)
            }
            Action::SubmitAnswers { answers } => self.submit(step, answers),
            Action::FinishTask => Ok(("The task is finished.".into(), true)),
        }
    }

    /// `submit_answers`. In the typed strategy a field's `{"from_result":
    /// KEY}` is resolved from the stored result, and every accepted answer
    /// gets its basis (the result, the tool output it matches, or
    /// unsupported), shown after "accepted".
    fn submit(&mut self, step: u32, answers: &[(String, Value)]) -> Result<(String, bool), String> {
        let present = self.audit_file_present();
        if !self.traces_answers() {
            let report = self.sheet.submit(step, present, answers).map_err(|e| e.to_string())?;
            return Ok((report.to_string(), self.sheet.is_complete()));
        }
        let mut items = Vec::new();
        let mut bases: Vec<(String, AnswerBasis)> = Vec::new();
        let mut refused = Vec::new();
        for (id, raw) in answers {
            if let Some(reason) = self.ungrounded(id, raw) {
                refused.push(format!("{id}: not recorded: {reason}"));
                continue;
            }
            let Some(key) = provenance::reference(raw) else {
                items.push((id.clone(), raw.clone()));
                let written = match raw {
                    Value::Number(n) => Some(n.to_string()),
                    Value::String(t) => Some(t.trim().trim_start_matches(['<', '=', '>']).trim().to_string()),
                    _ => None,
                };
                let basis = written.and_then(|w| {
                    let x = w.parse::<f64>().ok()?;
                    let (_, field) = self.sheet.task().field(id)?;
                    Some(provenance::literal_basis(
                        self.sheet.task(),
                        field,
                        (x, &w),
                        &self.results,
                        &self.observations,
                    ))
                });
                let task = self.sheet.task();
                let basis = match (task.question(id).filter(|q| q.choice.is_some()), basis, self.reading(id)) {
                    (Some(_), _, Some(r)) => Some(AnswerBasis::Read { option: r.option, keys: r.keys, why: r.why }),
                    (Some(q), ..) if self.is_grounded() => Some(provenance::choice_basis_for(task, q, &self.results)),
                    (Some(_), ..) => Some(provenance::choice_basis(&self.results)),
                    (None, b, _) => b,
                };
                bases.extend(basis.map(|b| (id.clone(), b)));
                continue;
            };
            let result = self.results.iter().find(|r| r.key == key);
            let resolved = match (self.sheet.task().field(id), result) {
                (Some((_, field)), Some(r)) => provenance::resolve(self.sheet.task(), field, &r.value)
                    .ok_or(format!("result {key} ({}) cannot fill {id}", r.value.describe())),
                (None, _) => Err(format!("{id} takes an option letter or a number, not a result")),
                (_, None) => Err(format!("no result {key}")),
            };
            match (resolved, result) {
                (Ok(x), Some(r)) => {
                    items.push((id.clone(), serde_json::json!(x)));
                    bases.push((
                        id.clone(),
                        AnswerBasis::FromResult { key: key.to_string(), step: r.step, tool: r.tool.clone() },
                    ));
                }
                (Err(e), _) => refused.push(format!("{id}: not recorded: {e}")),
                (Ok(_), None) => unreachable!("a resolved reference has its result"),
            }
        }
        let report = self.sheet.submit(step, present, &items).map_err(|e| e.to_string())?;
        let mut notes = std::collections::BTreeMap::new();
        for item in &report.items {
            if item.outcome != crate::sheet::SubmitOutcome::Accepted {
                continue;
            }
            if let Some((_, basis)) = bases.iter().find(|(id, _)| id == &item.id) {
                let value = match &self.sheet.answers()[&item.id].value {
                    crate::sheet::AnswerValue::Number(x) => format!("{x}, "),
                    crate::sheet::AnswerValue::Choice(_) => String::new(),
                };
                notes.insert(item.id.clone(), format!("{value}{}", basis.note()));
                self.sheet.set_basis(&item.id, basis.clone());
            }
        }
        let mut text = String::new();
        for line in report.to_string().lines() {
            let note = line.strip_suffix(": accepted").and_then(|id| notes.get(id));
            match note {
                Some(note) => text.push_str(&format!("{line} ({note})\n")),
                None => text.push_str(&format!("{line}\n")),
            }
        }
        for r in &refused {
            text.push_str(r);
            text.push('\n');
        }
        Ok((text.trim_end().to_string(), self.sheet.is_complete()))
    }

    /// Why the grounded strategy does not take `raw` for `id`: a field's
    /// typed number (it takes only `{"from_result": KEY}`), or a choice
    /// before any effect or test was computed. `None` when it may go to the
    /// sheet (and always outside the grounded strategy).
    fn ungrounded(&self, id: &str, raw: &Value) -> Option<String> {
        if !self.is_grounded() {
            return None;
        }
        let task = self.sheet.task();
        let tools = |q: &crate::task::Question| provenance::tools_for(task, q).join(" or ");
        if let Some(q) = task.question(id).filter(|q| q.choice.is_some()) {
            if let Some(r) = self.reading(id).filter(|r| raw.as_str().map(str::trim) != Some(r.option.as_str())) {
                return Some(format!("the computed results read as option {} ({})", r.option, r.why));
            }
            return (!provenance::choice_ready(task, q, &self.results)).then(|| {
                format!(
                    "a choice is answered once the effect or test of its question has been computed (compute it with {})",
                    tools(q)
                )
            });
        }
        let (q, field) = task.field(id)?;
        let Some(key) = provenance::reference(raw) else {
            return Some(format!(
                "a field takes only {{\"from_result\": KEY}}, a result a tool computed, not a typed number (compute it with {})",
                tools(q)
            ));
        };
        let relevant = provenance::relevant(task, id, field, &self.results);
        let fits = provenance::candidates(task, field, &self.results).contains(&key);
        (fits && !relevant.contains(&key)).then(|| match relevant.is_empty() {
            true => format!("result {key} is not about what {id} counts (compute it with {})", tools(q)),
            false => format!("result {key} is not about what {id} counts; use {}", relevant.join(" or ")),
        })
    }

    /// The tools that compute what the open questions still wait for
    /// ([`provenance::tools_for`] of each waiting question), in order.
    fn tools_needed(&self) -> Vec<&'static str> {
        let task = self.sheet.task();
        let mut tools = Vec::new();
        for id in self.grounded_gaps().0 {
            // A field needs its own tool; a choice its question's.
            let needs = match (task.field(&id), task.question(&id)) {
                (Some((q, f)), _) => provenance::tool_for_field(task, q, f).into_iter().collect(),
                (None, Some(q)) => provenance::tools_for(task, q),
                (None, None) => Vec::new(),
            };
            for t in needs {
                if !tools.contains(&t) {
                    tools.push(t);
                }
            }
        }
        tools
    }

    /// The grounded `build_cohort`'s baseline table, as results: each 0/1
    /// column's ones (in-hospital deaths, women, a group, a drug) and each
    /// continuous column's median and mean (age, a laboratory value), as
    /// `describe` gives them; not the follow-up times. Run 5's lactate task
    /// never described `hospital_expire_flag`, so its `n_deaths` waited to
    /// the step budget.
    fn cohort_baseline(&self) -> Vec<(String, ResultValue)> {
        let Some(table) = csv_columns(&self.workspace.root().join(AUDIT_FILE), AUDIT_FILE) else {
            return Vec::new();
        };
        let columns: Vec<Value> = table
            .numeric
            .iter()
            .filter(|c| c.as_str() != "days_to_death" && !c.starts_with("followup_"))
            .map(|c| Value::from(c.as_str()))
            .collect();
        let params = serde_json::json!({"file": AUDIT_FILE, "columns": columns});
        let Some(params) = params.as_object() else { return Vec::new() };
        match statistics(StatsTool::Describe, params, |p| self.resolve(p)) {
            Ok((_, _, results)) => results.into_iter().filter(|(key, _)| key != "rows").collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Whether the grounded strategy could submit something now.
    fn something_offerable(&self) -> bool {
        let (waiting, dead) = self.grounded_gaps();
        self.sheet.remaining().iter().any(|id| !waiting.contains(id) && !dead.contains(id))
    }

    /// The open ids the grounded strategy cannot offer yet, and those it
    /// never can: a field no result fills yet, a choice before any effect
    /// or test (`waiting`); a field no tool's result can ever fill
    /// (`dead`, [`provenance::fillable_by_a_tool`]).
    fn grounded_gaps(&self) -> (Vec<String>, Vec<String>) {
        let task = self.sheet.task();
        let (mut waiting, mut dead) = (Vec::new(), Vec::new());
        for id in self.sheet.remaining() {
            match task.field(&id) {
                Some((_, f)) if !provenance::fillable_by_a_tool(task, f) => dead.push(id),
                Some((_, f)) if provenance::relevant(task, &id, f, &self.results).is_empty() => waiting.push(id),
                None if !task.question(&id).is_some_and(|q| provenance::choice_ready(task, q, &self.results)) => {
                    waiting.push(id)
                }
                _ => {}
            }
        }
        (waiting, dead)
    }

    /// Evident's compact workspace state for the typed strategy, appended
    /// to each observation: the cohort audit file (rows and columns) or its
    /// absence, the questions still unanswered, and what to do next.
    pub fn state_note(&self) -> String {
        let audit = self.workspace.root().join(AUDIT_FILE);
        let remaining = self.sheet.remaining();
        let mut note = String::from("[State] ");
        match audit_summary(&audit) {
            None => {
                note.push_str(&format!(
                    "No {AUDIT_FILE} yet, so answers are refused. Next: build the cohort with build_cohort (criteria from the protocol's Population and Exposure), or run_sql with save_as \"{AUDIT_FILE}\"."
                ));
                if self.is_grounded() && self.no_cohort >= IDLE_BEFORE_COMPUTE {
                    note.push_str(&format!(
                        " {} actions without a cohort: only build_cohort and run_sql are offered now.",
                        self.no_cohort
                    ));
                }
            }
            Some((rows, columns)) if self.is_grounded() => {
                note.push_str(&format!("{AUDIT_FILE}: {rows} rows; columns {columns}. "));
                note.push_str(&self.grounded_note(&remaining));
            }
            Some((rows, columns)) => {
                note.push_str(&format!("{AUDIT_FILE}: {rows} rows; columns {columns}. "));
                let fillable: Vec<String> = remaining
                    .iter()
                    .filter_map(|id| {
                        let (_, f) = self.sheet.task().field(id)?;
                        let keys = provenance::candidates(self.sheet.task(), f, &self.results);
                        (!keys.is_empty()).then(|| format!("{id} ({})", keys.join(", ")))
                    })
                    .collect();
                // The open questions no result fills yet, by question, with
                // the tools that compute them.
                let task = self.sheet.task();
                let mut to_compute: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
                for id in &remaining {
                    let filled = fillable.iter().any(|f| f.starts_with(&format!("{id} (")));
                    let question = task.question(id).or_else(|| task.field(id).map(|(q, _)| q));
                    let Some(q) = question.filter(|_| !filled) else { continue };
                    let tools = provenance::tools_for(task, q);
                    match to_compute.iter_mut().find(|(_, t)| *t == tools) {
                        Some((ids, _)) => ids.push(id),
                        None => to_compute.push((vec![id], tools)),
                    }
                }
                let compute: Vec<String> = to_compute
                    .iter()
                    .filter(|(_, tools)| !tools.is_empty())
                    .map(|(ids, tools)| format!("{} with {}", ids.join(", "), tools.join(" or ")))
                    .collect();
                if remaining.is_empty() {
                    note.push_str("Every visible question is answered. Next: finish_task.");
                } else {
                    note.push_str(&format!("Unanswered: {}.", remaining.join(", ")));
                    if !fillable.is_empty() {
                        note.push_str(&format!(" Results can fill: {}.", truncate_chars(&fillable.join("; "), 700)));
                    }
                    if !compute.is_empty() {
                        note.push_str(&format!(" Compute on {AUDIT_FILE}: {}.", compute.join("; ")));
                    }
                    if !fillable.is_empty() {
                        note.push_str(
                            " Next: submit_answers, a field as {\"from_result\": KEY} with one of its results.",
                        );
                    } else {
                        let first = compute.first().map_or("a statistics tool", |c| c.as_str());
                        note.push_str(&format!(" Next: compute {first}, then submit_answers."));
                    }
                }
            }
        }
        note
    }

    /// The grounded strategy's part of the `[State]` line once the audit
    /// file exists: what can be submitted now (a field with the keys of the
    /// results that fill it, a choice once an effect or test exists), what
    /// to compute first and with which tool, the fields no tool's result can
    /// fill (they stay unanswered), and the next move: submit, compute
    /// (nothing can be submitted yet), or finish when only dead ends remain.
    fn grounded_note(&self, remaining: &[String]) -> String {
        if remaining.is_empty() {
            return "Every visible question is answered. Next: finish_task.".into();
        }
        let task = self.sheet.task();
        let (waiting, dead) = self.grounded_gaps();
        let columns =
            csv_columns(&self.workspace.root().join(AUDIT_FILE), AUDIT_FILE).map(|c| c.numeric).unwrap_or_default();
        let mut offered = Vec::new();
        let mut to_compute: Vec<(Vec<String>, Vec<&str>)> = Vec::new();
        for id in remaining {
            if dead.contains(id) {
                continue;
            }
            let field = task.field(id);
            if !waiting.contains(id) {
                offered.push(match field {
                    Some((_, f)) => format!("{id} ({})", provenance::relevant(task, id, f, &self.results).join(", ")),
                    None => format!("{id} (choice)"),
                });
                continue;
            }
            let Some(q) = task.question(id).or(field.map(|(q, _)| q)) else { continue };
            let mut tools = provenance::tools_for(task, q);
            if tools.is_empty() {
                tools.push(if field.is_some() { "a statistics tool" } else { "an effect or test" });
            }
            // A field waits for a result named for what it counts; where no
            // column of the cohort is, the cohort must be built again with
            // it (run 5's age task had no `older` column and stopped), and
            // so where the group it counts is not a column (the RDW task's
            // `rdw` column names n_high_rdw's "rdw", but only `high_rdw`
            // counts it: at 100 steps its run 1 answered one field, then
            // described and ran failing SQL and R for 20 steps).
            let words = provenance::named_for(task, id);
            let id = if field.is_some() && !words.is_empty() {
                let missing = !columns.iter().any(|c| provenance::names_any(c, &words))
                    || self.group_names.iter().any(|g| provenance::group_counts(g, &words) && !columns.contains(g));
                format!(
                    "{id} (named for {}{})",
                    words.join(" and "),
                    if missing {
                        format!("; no column of {AUDIT_FILE} is: build the cohort again with it")
                    } else {
                        String::new()
                    }
                )
            } else {
                id.clone()
            };
            match to_compute.iter_mut().find(|(_, t)| *t == tools) {
                Some((ids, _)) => ids.push(id),
                None => to_compute.push((vec![id], tools)),
            }
        }
        let compute: Vec<String> =
            to_compute.iter().map(|(ids, tools)| format!("{} with {}", ids.join(", "), tools.join(" or "))).collect();
        let mut note = format!("Unanswered: {}.", remaining.join(", "));
        if !offered.is_empty() {
            note.push_str(&format!(" Can submit now: {}.", truncate_chars(&offered.join("; "), 700)));
        }
        if !compute.is_empty() {
            note.push_str(&format!(" Compute on {AUDIT_FILE}: {}.", compute.join("; ")));
        }
        if !dead.is_empty() {
            let typed: Vec<String> = dead
                .iter()
                .map(|id| match task.field(id) {
                    Some((_, f)) => format!("{id} ({})", f.type_name()),
                    None => id.clone(),
                })
                .collect();
            note.push_str(&format!(
                " No tool's result can fill {}: left unanswered (answers here come only from computed results).",
                typed.join(", ")
            ));
        }
        if !offered.is_empty() && self.passed_up >= PASSES_BEFORE_SUBMIT {
            note.push_str(&format!(
                " {} actions in a row went past answers you can submit: only submit_answers is offered now.",
                self.passed_up
            ));
        } else if !offered.is_empty() {
            note.push_str(" Next: submit_answers, each field as {\"from_result\": KEY} with one of its keys.");
        } else if let Some(first) = compute.first() {
            note.push_str(&format!(
                " Nothing can be submitted yet: answers come only from computed results. Next: compute {first}."
            ));
            if self.idle >= IDLE_BEFORE_COMPUTE {
                let rebuild = if self.idle == IDLE_BEFORE_COMPUTE { " and build_cohort" } else { "" };
                note.push_str(&format!(
                    " {} actions in a row computed nothing these need: only {}{rebuild} are offered now.",
                    self.idle,
                    self.tools_needed().join(", ")
                ));
            }
        } else {
            note.push_str(" Nothing left that a result can fill. Next: finish_task.");
        }
        note
    }

    /// What Evident's typed schema follows ([`actions::SchemaState`]): the
    /// audit file's presence, the open answers, and the workspace's CSV
    /// tables (the cohort audit file first, then the others by name, at most
    /// [`MAX_SCHEMA_TABLES`]; the attrition table is not an analysis table).
    pub fn schema_state(&self) -> SchemaState {
        let root = self.workspace.root();
        let mut workspace_files: Vec<String> = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.ends_with(".partial"))
            .collect();
        workspace_files.sort();
        let mut files: Vec<&String> =
            workspace_files.iter().filter(|n| n.ends_with(".csv") && *n != ATTRITION_FILE).collect();
        files.sort_by_key(|n| (*n != AUDIT_FILE, (*n).clone()));
        let tables =
            files.iter().take(MAX_SCHEMA_TABLES).filter_map(|f| csv_columns(&root.join(f), f)).collect::<Vec<_>>();
        // A field that a stored result can fill also takes {"from_result": KEY};
        // in the grounded strategy it takes only that, and a field no result
        // fills yet or a choice before any effect or test is not offered.
        let task = self.sheet.task();
        let grounded = self.is_grounded();
        let (waiting, dead) = if grounded { self.grounded_gaps() } else { (Vec::new(), Vec::new()) };
        let open_answers: Vec<(String, Value)> = self
            .sheet
            .open_answer_schemas()
            .into_iter()
            .filter(|(id, _)| !waiting.contains(id) && !dead.contains(id))
            .filter_map(|(id, schema)| {
                let keys = match task.field(&id) {
                    Some((_, f)) if grounded => provenance::relevant(task, &id, f, &self.results),
                    Some((_, f)) => provenance::candidates(task, f, &self.results),
                    None => Vec::new(),
                };
                let schema = match (task.field(&id), self.reading(&id)) {
                    (_, Some(r)) => serde_json::json!({"type": "string", "enum": [r.option]}),
                    (Some(_), None) if grounded => provenance::reference_only(&keys)?,
                    (_, None) => provenance::with_reference(schema, &keys),
                };
                Some((id, schema))
            })
            .collect();
        let audit_present = self.audit_file_present();
        let remaining = self.sheet.remaining();
        let submit_only =
            grounded && audit_present && !open_answers.is_empty() && self.passed_up >= PASSES_BEFORE_SUBMIT;
        let compute_only = if grounded && !audit_present && self.no_cohort >= IDLE_BEFORE_COMPUTE {
            vec!["build_cohort".to_string(), "run_sql".to_string()]
        } else if grounded && audit_present && open_answers.is_empty() && self.idle >= IDLE_BEFORE_COMPUTE {
            let mut names: Vec<String> = self.tools_needed().into_iter().map(str::to_string).collect();
            // Past the threshold only an identical rebuild can have counted
            // (the needed tools reset it): no more rebuilding.
            if self.idle == IDLE_BEFORE_COMPUTE {
                names.push("build_cohort".into());
            }
            names
        } else {
            Vec::new()
        };
        SchemaState {
            roles: grounded.then(|| {
                actions::ColumnRoles::for_protocol(&format!("{}\n{}", task.protocol.background, task.protocol.methods))
            }),
            audit_present,
            grounded,
            group_columns: self.group_columns.clone(),
            group_names: self.group_names.clone(),
            drug_names: self.drug_names.clone(),
            submit_only,
            compute_only,
            open_answers,
            tables,
            db_tables: self.db_tables.clone(),
            workspace_files,
            finish_only: grounded
                && audit_present
                && !remaining.is_empty()
                && remaining.iter().all(|id| dead.contains(id)),
            no_finish: grounded && (!audit_present || remaining.iter().any(|id| !dead.contains(id))),
        }
    }

    /// The typed strategy's answer schema now, without the `excluded`
    /// actions ([`actions::state_response_schema`]).
    pub fn response_schema(&self, excluded: &[&str]) -> Value {
        actions::state_response_schema(self.sheet.task(), excluded, &self.schema_state())
    }

    /// A path of the workspace: relative, without `..`, and (once it
    /// exists) not leading outside through a link.
    fn resolve(&self, relative: &str) -> Result<PathBuf, String> {
        let path = Path::new(relative);
        if path.is_absolute() || path.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(format!("{relative}: use a path inside the workspace, relative to it, without .."));
        }
        let full = self.workspace.root().join(path);
        if let Ok(real) = full.canonicalize() {
            if !real.starts_with(self.workspace.root()) {
                return Err(format!("{relative}: leads outside the workspace"));
            }
        }
        Ok(full)
    }

    fn run_sql(&mut self, sql: &str, save_as: Option<&str>) -> Result<String, String> {
        let target = save_as.map(|name| self.resolve(name)).transpose()?;
        let db = self.db.as_mut().ok_or("no database connection in this strategy")?;
        let result = db.query(sql).map_err(|e| e.to_string())?;
        let mut text =
            format!("{} rows{}\n", result.rows.len(), if result.truncated { " (cut at the row limit)" } else { "" });
        let cell = |v: &DbValue| if matches!(v, DbValue::Null) { String::new() } else { v.to_text() };
        text.push_str(&result.columns.join(","));
        text.push('\n');
        for row in result.rows.iter().take(20) {
            text.push_str(&row.iter().map(cell).collect::<Vec<_>>().join(","));
            text.push('\n');
        }
        if result.rows.len() > 20 {
            text.push_str(&format!("... {} more rows\n", result.rows.len() - 20));
        }
        if let (Some(path), Some(name)) = (target, save_as) {
            // The cohort audit file is replaced only by a result that passes
            // the audit's rule checks; a failing one leaves it as it was.
            if normal_is_audit(name) {
                let table = AuditTable {
                    columns: result.columns.clone(),
                    rows: result.rows.iter().map(|r| r.iter().map(|v| cell(v).trim().to_string()).collect()).collect(),
                    lines: (2..).take(result.rows.len()).collect(),
                };
                // Once an answer is recorded the cohort is fixed, as for
                // `build_cohort`.
                let answered: Vec<String> = self.sheet.answers().keys().cloned().collect();
                if !answered.is_empty() {
                    if let Some(kept) = read_cohort_file(&path) {
                        kept.admits(&answered, &table.columns, &table.rows)
                            .map_err(|e| format!("{AUDIT_FILE} not saved: {e}"))?;
                    }
                }
                let report = rule_checks(&table, db).map_err(|e| format!("{AUDIT_FILE} not saved: {e}"))?;
                if result.truncated || !report.passed() {
                    let mut failed: Vec<String> = report
                        .checks
                        .iter()
                        .filter(|c| !c.passed)
                        .map(|c| format!("{} ({})", c.rule, c.detail))
                        .collect();
                    if result.truncated {
                        failed.push("complete (the result was cut at the row limit)".to_string());
                    }
                    let kept = if path.is_file() { "the existing file is unchanged" } else { "no file was written" };
                    let got: Vec<&str> = text.lines().take(2).collect();
                    return Err(format!(
                        "{AUDIT_FILE} not saved: the result fails the cohort audit's rule checks: {}; {kept}. The query gave {}",
                        failed.join("; "),
                        got.join(", columns ")
                    ));
                }
            }
            let partial = path.with_extension("csv.partial");
            let mut w = csv::Writer::from_path(&partial).map_err(|e| format!("{name}: {e}"))?;
            w.write_record(&result.columns).map_err(|e| e.to_string())?;
            for row in &result.rows {
                w.write_record(row.iter().map(cell)).map_err(|e| e.to_string())?;
            }
            w.flush().map_err(|e| e.to_string())?;
            drop(w);
            std::fs::rename(&partial, &path).map_err(|e| format!("{name}: {e}"))?;
            text.push_str(&format!("Saved all {} rows to {name}.", result.rows.len()));
            // The query that made the cohort file is the cohort's
            // definition, kept beside it for the bundle; `build_cohort`'s
            // criteria no longer made it.
            if normal_is_audit(name) {
                let definition = self.workspace.root().join(super::cohort::COHORT_SQL_FILE);
                std::fs::write(&definition, format!("{};\n", sql.trim().trim_end_matches(';')))
                    .map_err(|e| format!("{}: {e}", super::cohort::COHORT_SQL_FILE))?;
                let spec = self.workspace.root().join(super::cohort::COHORT_SPEC_FILE);
                if spec.is_file() {
                    std::fs::remove_file(&spec).map_err(|e| format!("{}: {e}", super::cohort::COHORT_SPEC_FILE))?;
                }
            }
        }
        Ok(text)
    }
}

/// A statistics tool's text for the agent, its numbers as data for the
/// report, and its citable results (name, value).
type ToolOutput = (String, Option<AnalysisOutput>, Vec<(String, ResultValue)>);

/// The actions whose text holds numbers the agent computed itself (its SQL
/// and R): a typed answer equal to one of them is supported. Other texts
/// (attrition lines, table descriptions, the state line) are not: their
/// numbers are not results of the study.
fn own_computation(action: &str) -> bool {
    matches!(action, "run_sql" | "execute_r" | "execute_r_script")
}

/// The most CSV tables the typed schema offers the statistics tools.
pub const MAX_SCHEMA_TABLES: usize = 6;

/// A CSV table's numeric and 0/1 columns ([`CsvColumns`]), if it reads.
fn csv_columns(path: &Path, file: &str) -> Option<CsvColumns> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_path(path).ok()?;
    let headers: Vec<String> = reader.headers().ok()?.iter().map(str::to_string).collect();
    // Per column: any cell filled, all filled cells numbers, all 0/1, a 0
    // seen, a 1 seen; the least and greatest number.
    let mut seen = vec![(false, true, true, false, false); headers.len()];
    let mut range = vec![(f64::INFINITY, f64::NEG_INFINITY); headers.len()];
    for record in reader.records().flatten() {
        for ((cell, s), r) in record.iter().zip(seen.iter_mut()).zip(range.iter_mut()) {
            let cell = cell.trim();
            if cell.is_empty() || cell.eq_ignore_ascii_case("NA") {
                continue;
            }
            s.0 = true;
            let x = cell.parse::<f64>().ok().filter(|x| x.is_finite());
            if let Some(x) = x {
                *r = (r.0.min(x), r.1.max(x));
            }
            match x {
                None => (s.1, s.2) = (false, false),
                Some(0.0) => s.3 = true,
                Some(1.0) => s.4 = true,
                Some(_) => s.2 = false,
            }
        }
    }
    let identifiers = IdColumn::ALL.map(IdColumn::name);
    let mut table = CsvColumns { file: file.to_string(), ..CsvColumns::default() };
    for ((h, (filled, numeric, zero_one, zero, one)), (low, high)) in headers.iter().zip(seen).zip(range) {
        // A column with one value carries nothing a tool can use.
        if !filled || !numeric || low == high || identifiers.contains(&h.to_ascii_lowercase().as_str()) {
            continue;
        }
        table.numeric.push(h.clone());
        if zero_one && zero && one {
            table.binary.push(h.clone());
        }
    }
    Some(table)
}

/// Whether a workspace path names the cohort audit file.
fn normal_is_audit(name: &str) -> bool {
    let normal: PathBuf = Path::new(name).components().filter(|c| !matches!(c, Component::CurDir)).collect();
    normal == Path::new(AUDIT_FILE)
}

/// The cohort file answers were recorded from: its header and stays.
struct KeptCohort {
    header: Vec<String>,
    stays: Vec<String>,
}

/// The criteria `build_cohort` last wrote the cohort file from, if it did.
fn read_cohort_spec(root: &Path) -> Option<super::cohort::CohortSpec> {
    let text = std::fs::read(root.join(super::cohort::COHORT_SPEC_FILE)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// The cohort file's header and its `stay_id` column (or, without one, its
/// rows whole), if it reads.
fn read_cohort_file(path: &Path) -> Option<KeptCohort> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_path(path).ok()?;
    let header: Vec<String> = reader.headers().ok()?.iter().map(str::to_string).collect();
    let stay = header.iter().position(|h| h == "stay_id");
    let stays = reader
        .records()
        .filter_map(Result::ok)
        .map(|r| match stay {
            Some(i) => r.get(i).unwrap_or_default().to_string(),
            None => r.iter().collect::<Vec<_>>().join(","),
        })
        .collect();
    Some(KeptCohort { header, stays })
}

impl KeptCohort {
    /// A cohort built again after `answered` were recorded may add columns
    /// but must keep every column and hold the same stays.
    fn admits(&self, answered: &[String], header: &[String], records: &[Vec<String>]) -> Result<(), String> {
        let dropped: Vec<&str> = self.header.iter().filter(|h| !header.contains(h)).map(String::as_str).collect();
        let stays: Vec<String> = match header.iter().position(|h| h == "stay_id") {
            Some(i) if self.header.iter().any(|h| h == "stay_id") => {
                records.iter().map(|r| r.get(i).cloned().unwrap_or_default()).collect()
            }
            _ => records.iter().map(|r| r.join(",")).collect(),
        };
        let change = if !dropped.is_empty() {
            format!("drop the column{} {}", if dropped.len() == 1 { "" } else { "s" }, dropped.join(", "))
        } else if stays != self.stays {
            format!("hold {} stays, not the same {}", stays.len(), self.stays.len())
        } else {
            return Ok(());
        };
        Err(format!(
            "the cohort is fixed: {} {} answered from {AUDIT_FILE} ({} stays) and each question is answered once, so the other answers must come from the same cohort; this one would {change}; nothing was written. Compute on {AUDIT_FILE} as it is (columns: {})",
            answered.join(", "),
            if answered.len() == 1 { "was" } else { "were" },
            self.stays.len(),
            self.header.join(", ")
        ))
    }
}

/// The rows and the header of a CSV file, if it reads.
fn audit_summary(path: &Path) -> Option<(usize, String)> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_path(path).ok()?;
    let header = reader.headers().ok()?.iter().collect::<Vec<_>>().join(", ");
    Some((reader.records().filter(|r| r.is_ok()).count(), header))
}

/// Numeric columns of a workspace CSV, rows with a missing or non-numeric
/// value in any of them dropped.
fn read_columns(path: &Path, names: &[String]) -> Result<(Vec<Vec<f64>>, usize), String> {
    let mut reader = csv::Reader::from_path(path).map_err(|e| e.to_string())?;
    let headers = reader.headers().map_err(|e| e.to_string())?.clone();
    let idx: Vec<usize> = names
        .iter()
        .map(|n| {
            headers
                .iter()
                .position(|h| h == n)
                .ok_or(format!("no column {n:?}; the columns are {}", headers.iter().collect::<Vec<_>>().join(", ")))
        })
        .collect::<Result<_, _>>()?;
    let mut cols = vec![Vec::new(); names.len()];
    let mut dropped = 0;
    for record in reader.records() {
        let record = record.map_err(|e| e.to_string())?;
        let values: Option<Vec<f64>> = idx
            .iter()
            .map(|&i| record.get(i).and_then(|v| v.trim().parse::<f64>().ok()).filter(|v| v.is_finite()))
            .collect();
        match values {
            Some(v) => v.into_iter().zip(cols.iter_mut()).for_each(|(x, c)| c.push(x)),
            None => dropped += 1,
        }
    }
    Ok((cols, dropped))
}

fn names(params: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    match params.get(key) {
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => {
            a.iter().map(|v| v.as_str().map(str::to_string).ok_or(format!("{key} must list column names"))).collect()
        }
        _ => Err(format!("the parameter {key:?} is missing")),
    }
}

fn name(params: &Map<String, Value>, key: &str) -> Result<String, String> {
    params.get(key).and_then(Value::as_str).map(str::to_string).ok_or(format!("the parameter {key:?} is missing"))
}

/// Runs one typed statistics tool: the text the agent reads and, for the
/// tools the report draws, the same numbers as data.
fn statistics(
    tool: StatsTool,
    params: &Map<String, Value>,
    resolve: impl Fn(&str) -> Result<PathBuf, String>,
) -> Result<ToolOutput, String> {
    let file = name(params, "file")?;
    let path = resolve(&file)?;
    let err = |e: evident_stats::StatsError| e.to_string();
    let dropped_note =
        |d: usize| if d > 0 { format!(" ({d} rows with a missing value dropped)") } else { String::new() };
    match tool {
        StatsTool::Describe => {
            // Each column on its own: one that is missing or holds no
            // number (a text column) is named with the reason, and the
            // others are still described; the call fails only when none is.
            let cols = names(params, "columns")?;
            let mut out = String::new();
            let mut described = 0;
            let rows = csv::Reader::from_path(&path).map_err(|e| e.to_string())?.records().flatten().count();
            let mut results = vec![("rows".to_string(), ResultValue::Count { n: rows as u64 })];
            for c in &cols {
                let summary = read_columns(&path, std::slice::from_ref(c)).and_then(|(v, dropped)| {
                    if v[0].is_empty() {
                        return Err("no numeric value in any row (a text column?)".to_string());
                    }
                    evident_stats::describe::summarize(&v[0]).map(|s| (s, dropped)).map_err(err)
                });
                match summary {
                    Ok((s, dropped)) => {
                        described += 1;
                        let values = read_columns(&path, std::slice::from_ref(c)).map(|(v, _)| v).unwrap_or_default();
                        let ones = values[0].iter().filter(|x| **x == 1.0).count() as u64;
                        let zero_one = values[0].iter().all(|x| *x == 0.0 || *x == 1.0);
                        results.push((
                            c.clone(),
                            if zero_one {
                                ResultValue::Binary { ones, n: s.n as u64 }
                            } else {
                                ResultValue::Continuous { n: s.n as u64, median: s.median, mean: s.mean }
                            },
                        ));
                        out.push_str(&format!(
                            "{c}: n {} (missing {dropped}), mean {:.4}, sd {:.4}, median {:.4}, q1 {:.4}, q3 {:.4}, min {:.4}, max {:.4}\n",
                            s.n, s.mean, s.sd, s.median, s.q1, s.q3, s.min, s.max
                        ));
                    }
                    Err(e) => out.push_str(&format!("{c}: not described: {e}\n")),
                }
            }
            if described == 0 {
                return Err(out.trim_end().to_string());
            }
            Ok((out, None, results))
        }
        StatsTool::LinearRegression => {
            let predictors = names(params, "predictors")?;
            let all: Vec<String> =
                std::iter::once(name(params, "outcome")?).chain(predictors.iter().cloned()).collect();
            let (cols, dropped) = read_columns(&path, &all)?;
            let x: Vec<Predictor> =
                predictors.iter().zip(&cols[1..]).map(|(n, v)| Predictor { name: n, values: v }).collect();
            let fit = lm(&cols[0], &x, None, 0.95).map_err(err)?;
            let mut out = format!(
                "n = {}{}; R-squared {:.6}, adjusted {:.6}; residual SD {:.6}\nterm, coefficient (difference), 95% CI (t), p-value\n",
                fit.n,
                dropped_note(dropped),
                fit.r_squared,
                fit.adj_r_squared,
                fit.sigma
            );
            for c in &fit.coefficients {
                out.push_str(&format!(
                    "{}, {:.6}, {:.6} to {:.6}, {:.6e}\n",
                    c.term, c.estimate, c.conf_low, c.conf_high, c.p_value
                ));
            }
            Ok((out, None, Vec::new()))
        }
        StatsTool::PropensityMatching | StatsTool::Iptw => propensity_tool(tool, params, &file, &path),
        StatsTool::LogisticRegression | StatsTool::PoissonRegression | StatsTool::CoxRegression => {
            let predictors = names(params, "predictors")?;
            let offset = match (tool, params.get("offset")) {
                (StatsTool::PoissonRegression, Some(Value::String(o))) => Some(o.clone()),
                _ => None,
            };
            let mut lead: Vec<String> = if tool == StatsTool::CoxRegression {
                vec![name(params, "time")?, name(params, "event")?]
            } else {
                vec![name(params, "outcome")?]
            };
            lead.extend(offset.iter().cloned());
            let all: Vec<String> = lead.iter().chain(&predictors).cloned().collect();
            let (cols, dropped) = read_columns(&path, &all)?;
            let x: Vec<Predictor> =
                predictors.iter().zip(&cols[lead.len()..]).map(|(n, v)| Predictor { name: n, values: v }).collect();
            let (coefficients, header, n, effect) = match tool {
                StatsTool::LogisticRegression => {
                    let fit =
                        glm(&cols[0], &x, Family::Binomial, &GlmConfig { conf_level: 0.95, ..GlmConfig::default() })
                            .map_err(err)?;
                    (fit.coefficients, "odds ratio", fit.n, "odds_ratio")
                }
                StatsTool::PoissonRegression => {
                    let config = GlmConfig {
                        conf_level: 0.95,
                        offset: offset.as_ref().map(|_| cols[1].as_slice()),
                        ..GlmConfig::default()
                    };
                    let fit = glm(&cols[0], &x, Family::Poisson, &config).map_err(err)?;
                    (fit.coefficients, "rate ratio", fit.n, "rate_ratio")
                }
                _ => {
                    let fit = coxph(&cols[0], &cols[1], &x, None, Ties::Efron, 0.95).map_err(err)?;
                    (fit.coefficients, "hazard ratio (Efron ties)", fit.n, "hazard_ratio")
                }
            };
            let mut out = format!("n = {n}{}\nterm, {header}, 95% CI (Wald), p-value\n", dropped_note(dropped));
            let mut terms = Vec::new();
            for c in coefficients.iter().filter(|c| c.term != "(Intercept)") {
                let (lo, hi) = c.exp_conf();
                out.push_str(&format!("{}, {:.6}, {:.6}-{:.6}, {:.6e}\n", c.term, c.exp_estimate(), lo, hi, c.p_value));
                terms.push(EffectRow {
                    term: c.term.clone(),
                    ratio: c.exp_estimate(),
                    conf_low: lo,
                    conf_high: hi,
                    p_value: c.p_value,
                });
            }
            let results = terms
                .iter()
                .map(|t| {
                    let value = ResultValue::Effect {
                        effect: effect.to_string(),
                        ratio: t.ratio,
                        conf_low: t.conf_low,
                        conf_high: t.conf_high,
                        p_value: t.p_value,
                    };
                    let short = match effect {
                        "odds_ratio" => "OR",
                        "hazard_ratio" => "HR",
                        _ => "RR",
                    };
                    (format!("{short} {}", t.term), value)
                })
                .collect();
            let analysis = AnalysisOutput::Regression {
                tool: tool.name().to_string(),
                effect: header.to_string(),
                file,
                n,
                terms,
            };
            Ok((out, Some(analysis), results))
        }
        StatsTool::KaplanMeierLogrank => {
            let cols_wanted = vec![name(params, "time")?, name(params, "event")?, name(params, "group")?];
            let (cols, dropped) = read_columns(&path, &cols_wanted)?;
            let test = logrank(&cols[0], &cols[1], &cols[2], None).map_err(err)?;
            let mut out =
                format!("n = {}{}\ngroup, n, observed events, expected events\n", cols[0].len(), dropped_note(dropped));
            let mut results = Vec::new();
            for (i, g) in test.groups.iter().enumerate() {
                let n = cols[2].iter().filter(|v| *v == g).count();
                out.push_str(&format!("{g}, {n}, {}, {:.4}\n", test.observed[i], test.expected[i]));
                let group = &cols_wanted[2];
                results.push((format!("n {group}={g}"), ResultValue::Count { n: n as u64 }));
                results.push((format!("events {group}={g}"), ResultValue::Count { n: test.observed[i] as u64 }));
            }
            let events: f64 = test.observed.iter().sum();
            results.push(("events".to_string(), ResultValue::Count { n: events as u64 }));
            results.push((
                "log-rank p".to_string(),
                ResultValue::Test { test: "log-rank".into(), p_value: test.test.p_value },
            ));
            out.push_str(&format!(
                "log-rank chi-square {:.4} on {} df, p-value {:.6e}\n",
                test.test.statistic, test.test.df, test.test.p_value
            ));
            let curves =
                kaplan_meier(&cols[0], &cols[1], Some(cols[2].as_slice()), ConfType::Log, 0.95).map_err(err)?;
            let [time, event, group]: [String; 3] = cols_wanted.try_into().unwrap_or_default();
            let analysis = AnalysisOutput::KaplanMeier {
                file,
                time,
                event,
                group,
                curves: curves.iter().map(KmGroup::from_curve).collect(),
                chi_square: test.test.statistic,
                df: test.test.df as usize,
                p_value: test.test.p_value,
            };
            Ok((out, Some(analysis), results))
        }
        StatsTool::RocAuc => {
            let (outcome, predictor) = (name(params, "outcome")?, name(params, "predictor")?);
            let (cols, dropped) = read_columns(&path, &[outcome.clone(), predictor.clone()])?;
            let key = format!("AUC {predictor}");
            let auc = evident_stats::roc::auc_delong(&cols[0], &cols[1], 0.95).map_err(err)?;
            let analysis = AnalysisOutput::RocAuc {
                file,
                outcome,
                predictor,
                auc: auc.auc,
                conf_low: auc.conf_low,
                conf_high: auc.conf_high,
                cases: auc.n_cases,
                controls: auc.n_controls,
            };
            let text = format!(
                "AUC {:.6} (95% CI DeLong {:.6}-{:.6}); {} cases, {} controls; higher values {} cases{}\n",
                auc.auc,
                auc.conf_low,
                auc.conf_high,
                auc.n_cases,
                auc.n_controls,
                if auc.cases_higher { "indicate" } else { "do not indicate" },
                dropped_note(dropped)
            );
            Ok((text, Some(analysis), vec![(key, ResultValue::Auc { auc: auc.auc })]))
        }
        StatsTool::FisherTest => {
            let (row, column) = (name(params, "row")?, name(params, "column")?);
            let (cols, dropped) = read_columns(&path, &[row.clone(), column.clone()])?;
            let count =
                |r: f64, c: f64| cols[0].iter().zip(&cols[1]).filter(|(a, b)| **a == r && **b == c).count() as u64;
            let (a, b, c, d) = (count(1.0, 1.0), count(1.0, 0.0), count(0.0, 1.0), count(0.0, 0.0));
            let f = evident_stats::htest::fisher_test(a, b, c, d, 0.95).map_err(err)?;
            // The table's shares both ways, and the test as an odds ratio.
            let share = |ones: u64, n: u64| ResultValue::Binary { ones, n };
            let results = vec![
                (
                    // Named for its table, so the grounded strategy can tell a
                    // test of the question's exposure from another.
                    format!("Fisher OR {row} by {column}"),
                    ResultValue::Effect {
                        effect: "odds_ratio".into(),
                        ratio: f.odds_ratio,
                        conf_low: f.conf_low,
                        conf_high: f.conf_high,
                        p_value: f.p_value,
                    },
                ),
                (format!("{column}=1 if {row}=1"), share(a, a + b)),
                (format!("{column}=1 if {row}=0"), share(c, c + d)),
                (format!("{row}=1 if {column}=1"), share(a, a + c)),
                (format!("{row}=1 if {column}=0"), share(b, b + d)),
            ];
            Ok((
                format!(
                "table [[{a}, {b}], [{c}, {d}]] (row 1/0 by column 1/0); p-value {:.6e}; odds ratio {:.6} (95% CI {:.6}-{:.6}){}\n",
                f.p_value,
                f.odds_ratio,
                f.conf_low,
                f.conf_high,
                dropped_note(dropped)
            ),
                None,
                results,
            ))
        }
    }
}

fn balance_lines(out: &mut String, balance: &[Balance], after: &str) {
    out.push_str(&format!("covariate, SMD before, SMD {after}\n"));
    for b in balance {
        out.push_str(&format!("{}, {:.4}, {:.4}\n", b.covariate, b.smd_before, b.smd_after));
    }
}

/// Propensity score matching or IPTW on a workspace CSV: the text the
/// agent reads and, for a logistic outcome model, the odds ratio as data.
fn propensity_tool(
    tool: StatsTool,
    params: &Map<String, Value>,
    file: &str,
    path: &Path,
) -> Result<ToolOutput, String> {
    let err = |e: evident_stats::StatsError| e.to_string();
    let treatment = name(params, "treatment")?;
    let outcome = name(params, "outcome")?;
    let covariates = names(params, "covariates")?;
    let model = match params.get("outcome_model").and_then(Value::as_str) {
        None => OutcomeModel::Logistic,
        Some(m) => m.parse::<OutcomeModel>().map_err(|e| e.to_string())?,
    };
    let all: Vec<String> = [outcome.clone(), treatment.clone()].into_iter().chain(covariates.iter().cloned()).collect();
    let (cols, dropped) = read_columns(path, &all)?;
    let x: Vec<Predictor> = covariates.iter().zip(&cols[2..]).map(|(n, v)| Predictor { name: n, values: v }).collect();
    let mut out = format!("n = {}", cols[0].len());
    if dropped > 0 {
        out.push_str(&format!(" ({dropped} rows with a missing value dropped)"));
    }
    out.push('\n');
    let mut results = Vec::new();
    let (effect, what) = match tool {
        StatsTool::PropensityMatching => {
            let caliper = match params.get("caliper") {
                None | Some(Value::Null) => 0.2,
                Some(v) => v.as_f64().filter(|c| *c > 0.0).ok_or("caliper must be a positive number of SDs")?,
            };
            let config = MatchConfig { caliper_sd: Some(caliper), ..MatchConfig::default() };
            let m = matched_effect(&cols[0], &cols[1], &x, &config, model, 0.95).map_err(err)?;
            let treated = cols[1].iter().filter(|t| **t == 1.0).count();
            let count = |n: usize| ResultValue::Count { n: n as u64 };
            results.push((format!("{treatment}=1"), count(treated)));
            results.push((format!("{treatment}=0"), count(cols[1].len() - treated)));
            results.push(("matched pairs".to_string(), count(m.matching.n_treated_matched)));
            out.push_str(&format!(
                "1:1 nearest-neighbour matching on the logit of the propensity score, caliper {caliper} SD ({:.4}), without replacement: {} of {treated} treated matched to {} controls ({} units)\n",
                m.matching.caliper.unwrap_or(f64::NAN),
                m.matching.n_treated_matched,
                m.matching.n_controls_matched,
                m.n_matched
            ));
            balance_lines(&mut out, &m.balance, "after matching");
            // The matched set's events, and the model-based (Wald) interval
            // that `glm(y ~ t, data = matched)` reports, beside the robust one.
            let keep: Vec<usize> = (0..cols[0].len()).filter(|&i| m.matching.weights[i] > 0.0).collect();
            let pick = |v: &[f64]| keep.iter().map(|&i| v[i]).collect::<Vec<f64>>();
            let (y, t, w) = (pick(&cols[0]), pick(&cols[1]), pick(&m.matching.weights));
            let tx = [Predictor { name: treatment.as_str(), values: &t }];
            let wald = match model {
                OutcomeModel::Logistic => {
                    out.push_str(&format!("outcome events in the matched sample: {}\n", y.iter().sum::<f64>()));
                    results.push(("matched events".to_string(), count(y.iter().sum::<f64>() as usize)));
                    glm(&y, &tx, Family::Binomial, &GlmConfig { weights: Some(&w), ..GlmConfig::default() })
                        .ok()
                        .map(|f| f.coefficients[1].clone())
                        .map(|c| (c.estimate.exp(), c.conf_low.exp(), c.conf_high.exp(), c.p_value))
                }
                OutcomeModel::Linear => lm(&y, &tx, Some(&w), 0.95)
                    .ok()
                    .map(|f| f.coefficients[1].clone())
                    .map(|c| (c.estimate, c.conf_low, c.conf_high, c.p_value)),
            };
            if let (Some((est, lo, hi, p)), OutcomeModel::Logistic) = (wald, model) {
                let value = ResultValue::Effect {
                    effect: "odds_ratio".into(),
                    ratio: est,
                    conf_low: lo,
                    conf_high: hi,
                    p_value: p,
                };
                results.push((format!("OR {treatment} (matched, Wald)"), value));
            }
            if let Some((est, lo, hi, p)) = wald {
                out.push_str(&format!(
                    "model-based (Wald) on the matched sample: estimate {est:.6}, 95% CI {lo:.6} to {hi:.6}, p-value {p:.6e}\n"
                ));
            }
            (m.effect, "matched sample (ATT of the matched treated), robust HC0 SE")
        }
        _ => {
            let estimand = match params.get("estimand").and_then(Value::as_str) {
                None => Estimand::Ate,
                Some(e) => e.parse::<Estimand>().map_err(|e| e.to_string())?,
            };
            let w = iptw_effect(&cols[0], &cols[1], &x, estimand, model, 0.95).map_err(err)?;
            let (lo, hi) =
                w.weights.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(*v), b.max(*v)));
            out.push_str(&format!(
                "inverse probability of treatment weights for the {}: min {lo:.4}, max {hi:.4}, sum {:.4}\n",
                if estimand == Estimand::Ate { "ATE" } else { "ATT" },
                w.weights.iter().sum::<f64>()
            ));
            balance_lines(&mut out, &w.balance, "weighted");
            (
                w.effect,
                if estimand == Estimand::Ate { "IPTW (ATE), robust HC0 SE" } else { "IPTW (ATT), robust HC0 SE" },
            )
        }
    };
    let analysis = match model {
        OutcomeModel::Logistic => {
            let (ratio, lo, hi) = (effect.estimate.exp(), effect.conf_low.exp(), effect.conf_high.exp());
            let value = ResultValue::Effect {
                effect: "odds_ratio".into(),
                ratio,
                conf_low: lo,
                conf_high: hi,
                p_value: effect.p_value,
            };
            let how = if tool == StatsTool::PropensityMatching { "matched, robust" } else { "IPTW" };
            results.insert(0, (format!("OR {treatment} ({how})"), value));
            out.push_str(&format!(
                "{treatment} on {outcome}: odds ratio {ratio:.6}, 95% CI {lo:.6}-{hi:.6}, p-value {:.6e} ({what})\n",
                effect.p_value
            ));
            Some(AnalysisOutput::Regression {
                tool: tool.name().to_string(),
                effect: format!("odds ratio, {what}"),
                file: file.to_string(),
                n: cols[0].len(),
                terms: vec![EffectRow {
                    term: treatment.clone(),
                    ratio,
                    conf_low: lo,
                    conf_high: hi,
                    p_value: effect.p_value,
                }],
            })
        }
        OutcomeModel::Linear => {
            out.push_str(&format!(
                "{treatment} on {outcome}: mean difference {:.6}, 95% CI {:.6} to {:.6}, p-value {:.6e} ({what})\n",
                effect.estimate, effect.conf_low, effect.conf_high, effect.p_value
            ));
            None
        }
    };
    Ok((out, analysis, results))
}
