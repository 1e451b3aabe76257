//! The cohort audit (RWE-bench section 3.3). Before its first answer the
//! agent exports the final cohort as a CSV audit file: identifiers plus the
//! key criterion variables, one row per member. The audit then runs
//!
//! 1. rule checks: the file is non-empty, names its members by identifiers
//!    (`subject_id`, and `hadm_id` or `stay_id`), every identifier exists in
//!    the database (fabricated patients are caught), and the cohort has at
//!    most 50,000 rows;
//! 2. the LLM cohort judge with the paper's prompt (Figure 19), over up to
//!    100 rows sampled uniformly from the agent's own audit table: the
//!    exclusion rate is the share of judged rows the judge would exclude,
//!    and a rate above 0.8 marks the cohort unqualified. Evident's
//!    compiled judge ([`crate::compiled_judge`]) may take its place: the
//!    same rows, the same rate, decided by checks the model writes once.
//!
//! Every cohort also carries an [`Attrition`] table: each inclusion and
//! exclusion step with the number it removed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use evident_llm::prompts::Prompts;
use evident_llm::{chat_json, ChatRequest, LlmError, Message, RepairPolicy, StructuredAnswer, StructuredModel};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::compiled_judge::{common_facts, compile_criteria, CompiledCriteria, JudgeStrategy};

/// The file name the agent writes its final cohort to, in its workspace.
pub const AUDIT_FILE: &str = "cohort_audit.csv";
/// The largest cohort the rule checks accept.
pub const MAX_COHORT_ROWS: usize = 50_000;
/// How many rows the judge reads at most.
pub const JUDGE_SAMPLE: usize = 100;
/// Above this exclusion rate a cohort is unqualified (the paper's C).
pub const EXCLUSION_THRESHOLD: f64 = 0.8;

/// The templates of this crate, with the model layer's repair prompt.
pub const RWE_PROMPTS: &[(&str, &str)] = &[
    ("cohort_judge_system.prompt.md", include_str!("../prompts/cohort_judge_system.prompt.md")),
    ("cohort_judge_case.prompt.md", include_str!("../prompts/cohort_judge_case.prompt.md")),
    ("cohort_criteria_system.prompt.md", include_str!("../prompts/cohort_criteria_system.prompt.md")),
    ("cohort_criteria_facts.prompt.md", include_str!("../prompts/cohort_criteria_facts.prompt.md")),
];

/// Built-in templates of this crate and of `evident_llm`, with an optional
/// directory whose files override them by name.
pub fn rwe_prompts(override_dir: Option<&Path>) -> Prompts {
    let mut all: Vec<(&'static str, &'static str)> = RWE_PROMPTS.to_vec();
    all.extend_from_slice(evident_llm::prompts::BUILTIN_PROMPTS);
    Prompts::new(&all, override_dir)
}

/// The MIMIC-IV identifiers an audit file may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IdColumn {
    SubjectId,
    HadmId,
    StayId,
}

impl IdColumn {
    pub const ALL: [IdColumn; 3] = [IdColumn::SubjectId, IdColumn::HadmId, IdColumn::StayId];

    pub fn name(self) -> &'static str {
        match self {
            IdColumn::SubjectId => "subject_id",
            IdColumn::HadmId => "hadm_id",
            IdColumn::StayId => "stay_id",
        }
    }

    /// The table whose primary key this identifier is.
    pub fn table(self) -> &'static str {
        match self {
            IdColumn::SubjectId => "mimiciv_hosp.patients",
            IdColumn::HadmId => "mimiciv_hosp.admissions",
            IdColumn::StayId => "mimiciv_icu.icustays",
        }
    }
}

/// Answers whether identifiers exist in the study database.
pub trait IdentifierLookup {
    /// Which of `ids` exist as `column` in its table.
    fn existing(&mut self, column: IdColumn, ids: &[i64]) -> Result<BTreeSet<i64>, String>;
}

/// The agent's audit file as read: a header and string cells, with the
/// CSV line of each row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditTable {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub lines: Vec<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("{path}: the cohort audit file cannot be read: {message}; write it as CSV with a header row")]
    Read { path: String, message: String },
    #[error("identifier lookup failed: {0}")]
    Lookup(String),
    #[error("cohort judge: {0}")]
    Judge(String),
    /// A model call failed or was refused (a non-loopback endpoint without
    /// the user's opt-in).
    #[error("cohort judge: {0}")]
    Model(#[from] LlmError),
}

impl AuditTable {
    pub fn read(path: &Path) -> Result<AuditTable, AuditError> {
        let origin = path.display().to_string();
        let err = |message: String| AuditError::Read { path: origin.clone(), message };
        let mut reader = csv::ReaderBuilder::new().flexible(false).from_path(path).map_err(|e| err(e.to_string()))?;
        let columns: Vec<String> =
            reader.headers().map_err(|e| err(e.to_string()))?.iter().map(|h| h.trim().to_string()).collect();
        let mut rows = Vec::new();
        let mut lines = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|e| err(e.to_string()))?;
            lines.push(record.position().map(|p| p.line()).unwrap_or(0));
            rows.push(record.iter().map(|c| c.trim().to_string()).collect());
        }
        Ok(AuditTable { columns, rows, lines })
    }

    fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.eq_ignore_ascii_case(name))
    }

    /// The named cells of one row, as the judge reads them.
    pub fn facts(&self, row: usize) -> Vec<Fact> {
        self.columns.iter().zip(&self.rows[row]).map(|(c, v)| Fact { name: c.clone(), value: v.clone() }).collect()
    }
}

/// One named value of a case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fact {
    pub name: String,
    pub value: String,
}

/// One rule check and what it found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleCheck {
    pub rule: String,
    pub passed: bool,
    pub detail: String,
}

/// The rule checks of one audit file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleReport {
    pub rows: usize,
    pub checks: Vec<RuleCheck>,
}

impl RuleReport {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }
}

/// Runs the rule checks. Content problems are failed checks; only a
/// failing database lookup is an error.
pub fn rule_checks(table: &AuditTable, lookup: &mut dyn IdentifierLookup) -> Result<RuleReport, AuditError> {
    let mut checks = Vec::new();
    let mut check =
        |rule: &str, passed: bool, detail: String| checks.push(RuleCheck { rule: rule.to_string(), passed, detail });
    let n = table.rows.len();
    check("non_empty", n > 0, format!("{n} rows"));
    check("size_limit", n <= MAX_COHORT_ROWS, format!("{n} rows; at most {MAX_COHORT_ROWS}"));
    let present: Vec<(IdColumn, usize)> =
        IdColumn::ALL.iter().filter_map(|&c| table.column(c.name()).map(|i| (c, i))).collect();
    let has_subject = present.iter().any(|(c, _)| *c == IdColumn::SubjectId);
    let has_record = present.iter().any(|(c, _)| *c != IdColumn::SubjectId);
    check(
        "identifiers",
        has_subject && has_record,
        if has_subject && has_record {
            format!("columns {}", present.iter().map(|(c, _)| c.name()).collect::<Vec<_>>().join(", "))
        } else {
            "need subject_id and hadm_id or stay_id, so each row names one hospital or ICU admission".to_string()
        },
    );
    for (column, index) in present {
        let mut ids = BTreeSet::new();
        let mut malformed = Vec::new();
        for (row, line) in table.rows.iter().zip(&table.lines) {
            match row[index].parse::<i64>() {
                Ok(id) => {
                    ids.insert(id);
                }
                Err(_) => malformed.push(format!("line {line}: {:?}", row[index])),
            }
        }
        let ids: Vec<i64> = ids.into_iter().collect();
        let found = lookup.existing(column, &ids).map_err(AuditError::Lookup)?;
        let missing: Vec<i64> = ids.iter().copied().filter(|id| !found.contains(id)).collect();
        let passed = malformed.is_empty() && missing.is_empty();
        let detail = if passed {
            format!("all {} distinct {} exist in {}", ids.len(), column.name(), column.table())
        } else {
            let mut parts = Vec::new();
            if !malformed.is_empty() {
                parts.push(format!("{} not integers ({})", malformed.len(), first_few(&malformed)));
            }
            if !missing.is_empty() {
                let shown: Vec<String> = missing.iter().map(i64::to_string).collect();
                parts.push(format!("{} not in {} ({})", missing.len(), column.table(), first_few(&shown)));
            }
            parts.join("; ")
        };
        check(&format!("{}_exists", column.name()), passed, detail);
    }
    Ok(RuleReport { rows: n, checks })
}

fn first_few(items: &[String]) -> String {
    let shown: Vec<&str> = items.iter().take(5).map(String::as_str).collect();
    let more = items.len().saturating_sub(5);
    if more > 0 {
        format!("{}, and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// The judge's answer for one case (Figure 19's output object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeVerdict {
    pub unevaluable_criteria: Vec<String>,
    pub decision: String,
    pub triggered_exclusion_criteria: Vec<String>,
    pub evidence: String,
}

impl JudgeVerdict {
    pub fn excludes(&self) -> bool {
        self.decision == "Exclude"
    }
}

/// The JSON schema every judge answer is held to.
pub fn judge_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "unevaluable_criteria": {"type": "array", "items": {"type": "string"}},
            "decision": {"type": "string", "enum": ["Exclude", "Do not exclude"]},
            "triggered_exclusion_criteria": {"type": "array", "items": {"type": "string"}},
            "evidence": {"type": "string"}
        },
        "required": ["unevaluable_criteria", "decision", "triggered_exclusion_criteria", "evidence"],
        "additionalProperties": false
    })
}

/// The judge's request for one case: the Figure 19 system prompt, then the
/// cohort definition and the case's facts.
pub fn judge_request(prompts: &Prompts, definition: &str, facts: &[Fact]) -> Result<ChatRequest, AuditError> {
    let messages = definition_messages(
        prompts,
        ["cohort_judge_system.prompt.md", "cohort_judge_case.prompt.md"],
        definition,
        facts,
    )?;
    Ok(ChatRequest::new(messages).with_max_tokens(512))
}

/// A judge's two messages: the system template, then the user template
/// rendered with the trimmed cohort definition and the facts (both judges
/// lay out their requests so).
pub(crate) fn definition_messages(
    prompts: &Prompts,
    [system, user]: [&str; 2],
    definition: &str,
    facts: &[Fact],
) -> Result<Vec<Message>, AuditError> {
    let render =
        |name: &str, ctx: serde_json::Value| prompts.render(name, ctx).map_err(|e| AuditError::Judge(e.to_string()));
    let system = render(system, json!({}))?;
    let user = render(user, json!({"definition": definition.trim(), "facts": facts}))?;
    Ok(vec![Message::system(system), Message::user(user)])
}

/// The judge's verdict on one case; `None` when no answer validated
/// against the schema (after the model layer's repairs). `seed`, when
/// given, is passed to the model (the runs of the judge check differ by it).
pub fn judge_case<'m>(
    model: impl Into<StructuredModel<'m>>,
    prompts: &Prompts,
    definition: &str,
    facts: &[Fact],
    seed: Option<u64>,
) -> Result<Option<JudgeVerdict>, AuditError> {
    let mut request = judge_request(prompts, definition, facts)?;
    request.seed = seed;
    let answer = chat_json(model.into(), &request, &judge_schema(), RepairPolicy::default(), prompts)?;
    match answer {
        StructuredAnswer::Valid { value, .. } => {
            Ok(Some(serde_json::from_value(value).map_err(|e| AuditError::Judge(e.to_string()))?))
        }
        StructuredAnswer::PipelineFailure(_) => Ok(None),
    }
}

/// One sampled row and what the judge made of it (`None`: no valid answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseJudgement {
    pub line: u64,
    pub verdict: Option<JudgeVerdict>,
}

/// The judge's pass over a cohort.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeReport {
    pub model: String,
    /// Which judge (reports written before Evident had two: the paper's).
    #[serde(default)]
    pub strategy: JudgeStrategy,
    /// The compiled judge's checks (`None` for the paper's judge, or when
    /// the model's answer never validated: every case is then unjudged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiled: Option<CompiledCriteria>,
    pub sampled: usize,
    pub judged: usize,
    pub excluded: usize,
    /// `excluded / judged`; `None` when no case was judged.
    pub exclusion_rate: Option<f64>,
    pub cases: Vec<CaseJudgement>,
}

impl JudgeReport {
    /// Qualified when some case was judged and the rate is at most 0.8.
    pub fn passed(&self) -> bool {
        self.exclusion_rate.is_some_and(|r| r <= EXCLUSION_THRESHOLD)
    }
}

/// Up to `k` distinct row indices of `n`, uniformly at random for `seed`
/// (a partial Fisher-Yates shuffle on SplitMix64), in ascending order.
pub fn sample_rows(n: usize, k: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut idx: Vec<usize> = (0..n).collect();
    let k = k.min(n);
    for i in 0..k {
        let j = i + (next() % (n - i) as u64) as usize;
        idx.swap(i, j);
    }
    let mut chosen = idx[..k].to_vec();
    chosen.sort_unstable();
    chosen
}

/// Judges up to [`JUDGE_SAMPLE`] rows of the agent's audit table against
/// the cohort definition (the protocol's population and criteria).
pub fn judge_cohort<'m>(
    model: impl Into<StructuredModel<'m>>,
    strategy: JudgeStrategy,
    prompts: &Prompts,
    definition: &str,
    table: &AuditTable,
    seed: u64,
) -> Result<JudgeReport, AuditError> {
    let model: StructuredModel<'m> = model.into();
    let rows = sample_rows(table.rows.len(), JUDGE_SAMPLE, seed);
    let facts: Vec<Vec<Fact>> = rows.iter().map(|&row| table.facts(row)).collect();
    let pass = judge_pass(model, strategy, prompts, definition, &facts, None)?;
    let lines = rows.iter().map(|&row| table.lines[row]);
    Ok(JudgeReport::of_pass(model.model_id(), strategy, lines, pass))
}

/// What one judge pass over cases made of them: a verdict per case (in
/// order; `None`: unjudged) and, for the compiled judge, its checks.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgePass {
    pub verdicts: Vec<Option<JudgeVerdict>>,
    pub compiled: Option<CompiledCriteria>,
}

/// Judges each case's facts with `strategy`: the paper's judge asks the
/// model about every case ([`judge_cases`]); the compiled judge asks it
/// once for checks over the facts the cases share and runs them
/// ([`crate::compiled_judge`]). `seed` goes to every model call.
pub fn judge_pass(
    model: StructuredModel<'_>,
    strategy: JudgeStrategy,
    prompts: &Prompts,
    definition: &str,
    cases: &[Vec<Fact>],
    seed: Option<u64>,
) -> Result<JudgePass, AuditError> {
    match strategy {
        JudgeStrategy::Paper => {
            Ok(JudgePass { verdicts: judge_cases(model, prompts, definition, cases, seed)?, compiled: None })
        }
        JudgeStrategy::Compiled => {
            let compiled = compile_criteria(model, prompts, definition, &common_facts(cases), seed)?;
            let verdicts = cases.iter().map(|facts| compiled.as_ref().and_then(|c| c.apply(facts))).collect();
            Ok(JudgePass { verdicts, compiled })
        }
    }
}

/// [`judge_case`] on each case's facts (`seed` passed to each), sent from
/// as many threads as the model answers at once
/// ([`evident_llm::ChatModel::parallelism`]; one: in order on this
/// thread); the verdicts in the cases' order. The first error ends the
/// pass (cases already sent are answered first).
pub fn judge_cases(
    model: StructuredModel<'_>,
    prompts: &Prompts,
    definition: &str,
    cases: &[Vec<Fact>],
    seed: Option<u64>,
) -> Result<Vec<Option<JudgeVerdict>>, AuditError> {
    let judge = |facts: &Vec<Fact>| judge_case(model, prompts, definition, facts, seed);
    let workers = model.chat.parallelism().clamp(1, cases.len().max(1));
    if workers == 1 {
        return cases.iter().map(judge).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
    let verdicts = std::sync::Mutex::new((0..cases.len()).map(|_| None).collect::<Vec<_>>());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while !failed.load(std::sync::atomic::Ordering::SeqCst) {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(facts) = cases.get(i) else { break };
                    let verdict = judge(facts);
                    failed.fetch_or(verdict.is_err(), std::sync::atomic::Ordering::SeqCst);
                    verdicts.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(verdict);
                }
            });
        }
    });
    // In order: the first error (by case) is the one returned.
    verdicts.into_inner().unwrap_or_else(|e| e.into_inner()).into_iter().flatten().collect()
}

impl JudgeReport {
    /// The counts of a judge pass's verdicts on the sampled rows (at
    /// these audit-file lines).
    fn of_pass(model: &str, strategy: JudgeStrategy, lines: impl Iterator<Item = u64>, pass: JudgePass) -> JudgeReport {
        let cases: Vec<CaseJudgement> =
            lines.zip(pass.verdicts).map(|(line, verdict)| CaseJudgement { line, verdict }).collect();
        let judged = cases.iter().filter(|c| c.verdict.is_some()).count();
        let excluded = cases.iter().filter(|c| c.verdict.as_ref().is_some_and(JudgeVerdict::excludes)).count();
        JudgeReport {
            model: model.to_string(),
            strategy,
            compiled: pass.compiled,
            sampled: cases.len(),
            judged,
            excluded,
            exclusion_rate: (judged > 0).then(|| excluded as f64 / judged as f64),
            cases,
        }
    }
}

/// Judges the same sampled rows as [`judge_cohort`] (same `seed`), but on
/// Evident's own facts about each row, assembled from the database by its
/// identifiers ([`crate::database::database_facts`]) instead of the agent's
/// columns: a second, separate check that does not trust the agent's table.
pub fn judge_database_facts<'m>(
    model: impl Into<StructuredModel<'m>>,
    strategy: JudgeStrategy,
    prompts: &Prompts,
    definition: &str,
    table: &AuditTable,
    conn: &mut evident_db::ReadOnlyConnection,
    seed: u64,
) -> Result<JudgeReport, AuditError> {
    let model: StructuredModel<'m> = model.into();
    let id = |row: usize, c: IdColumn| table.column(c.name()).and_then(|i| table.rows[row][i].parse::<i64>().ok());
    let rows = sample_rows(table.rows.len(), JUDGE_SAMPLE, seed);
    let mut facts = Vec::new();
    for &row in &rows {
        facts.push(
            crate::database::database_facts(
                conn,
                id(row, IdColumn::SubjectId),
                id(row, IdColumn::HadmId),
                id(row, IdColumn::StayId),
            )
            .map_err(AuditError::Lookup)?,
        );
    }
    let pass = judge_pass(model, strategy, prompts, definition, &facts, None)?;
    let lines = rows.iter().map(|&row| table.lines[row]);
    Ok(JudgeReport::of_pass(model.model_id(), strategy, lines, pass))
}

/// The audit's verdict: rules, then the judge (run only when the rules
/// pass) on the agent's table, as in the paper; beside it, the judge on
/// Evident's facts from the database, reported separately (it does not
/// decide qualification).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CohortAudit {
    pub rules: RuleReport,
    pub judge: Option<JudgeReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database_judge: Option<JudgeReport>,
}

impl CohortAudit {
    /// Qualified: every rule passed and the judge excluded at most 80 %.
    /// `Some(false)` when a rule failed (the judge is then not run);
    /// `None` when the rules passed but the judge did not run
    /// (`--no-judge`): the screening was never made, so it is unknown.
    pub fn qualified(&self) -> Option<bool> {
        if !self.rules.passed() {
            return Some(false);
        }
        self.judge.as_ref().map(JudgeReport::passed)
    }
}

/// Whether an attrition step adds a requirement or removes a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// The source population the cohort starts from.
    Source,
    Inclusion,
    Exclusion,
}

/// One row of an attrition table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttritionStep {
    pub kind: StepKind,
    pub description: String,
    /// Units left after the step.
    pub remaining: u64,
    /// Units the step removed.
    pub removed: u64,
}

/// A cohort's attrition table (OHDSI CohortMethod's): the source
/// population, then each inclusion and exclusion step with the number it
/// removed. Counts never increase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attrition {
    steps: Vec<AttritionStep>,
}

impl Attrition {
    /// Starts from the source population.
    pub fn new(description: &str, count: u64) -> Attrition {
        Attrition {
            steps: vec![AttritionStep {
                kind: StepKind::Source,
                description: description.to_string(),
                remaining: count,
                removed: 0,
            }],
        }
    }

    /// Adds a step that leaves `remaining` units; refused when it would add units.
    pub fn step(&mut self, kind: StepKind, description: &str, remaining: u64) -> Result<&mut Self, String> {
        let before = self.remaining();
        if kind == StepKind::Source {
            return Err("the source population is the first step only".into());
        }
        if remaining > before {
            return Err(format!("step {description:?} leaves {remaining} of {before}; a step cannot add units"));
        }
        self.steps.push(AttritionStep {
            kind,
            description: description.to_string(),
            remaining,
            removed: before - remaining,
        });
        Ok(self)
    }

    pub fn remaining(&self) -> u64 {
        self.steps.last().map(|s| s.remaining).unwrap_or(0)
    }

    pub fn steps(&self) -> &[AttritionStep] {
        &self.steps
    }
}

impl fmt::Display for Attrition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "| step | kind | removed | remaining |")?;
        writeln!(f, "| --- | --- | ---: | ---: |")?;
        for s in &self.steps {
            let kind = match s.kind {
                StepKind::Source => "source",
                StepKind::Inclusion => "inclusion",
                StepKind::Exclusion => "exclusion",
            };
            let removed = if s.kind == StepKind::Source { String::new() } else { s.removed.to_string() };
            writeln!(f, "| {} | {kind} | {removed} | {} |", s.description, s.remaining)?;
        }
        Ok(())
    }
}

/// The file the agent writes its attrition table to, in its workspace.
pub const ATTRITION_FILE: &str = "attrition.csv";

impl Attrition {
    /// Reads the agent's attrition table: a CSV with the columns `step` (what
    /// the step did) and `remaining` (units left after it), and optionally
    /// `kind` (`source`, `inclusion` or `exclusion`; a missing kind is
    /// `source` on the first row and `exclusion` after it). The first row is
    /// the source population. The error names the line and what to fix.
    pub fn read_csv(path: &Path) -> Result<Attrition, String> {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut reader =
            csv::ReaderBuilder::new().flexible(false).from_path(path).map_err(|e| format!("{name}: {e}"))?;
        let headers: Vec<String> = reader
            .headers()
            .map_err(|e| format!("{name}: {e}"))?
            .iter()
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        let col = |want: &str| headers.iter().position(|h| h == want);
        let (Some(step_col), Some(remaining_col)) = (col("step"), col("remaining")) else {
            return Err(format!(
                "{name}: needs the columns step and remaining (found {}); one row per step, the source population first",
                headers.join(", ")
            ));
        };
        let kind_col = col("kind");
        let mut attrition: Option<Attrition> = None;
        for record in reader.records() {
            let record = record.map_err(|e| format!("{name}: {e}"))?;
            let line = record.position().map(|p| p.line()).unwrap_or(0);
            let description = record.get(step_col).unwrap_or("").trim();
            let cell = record.get(remaining_col).unwrap_or("").trim();
            let remaining: u64 = cell
                .parse::<f64>()
                .ok()
                .filter(|v| *v >= 0.0 && v.fract() == 0.0)
                .map(|v| v as u64)
                .ok_or(format!("{name} line {line}: remaining {cell:?} is not a count"))?;
            let kind = match kind_col.map(|i| record.get(i).unwrap_or("").trim().to_ascii_lowercase()) {
                None => None,
                Some(k) if k.is_empty() => None,
                Some(k) if k == "source" => Some(StepKind::Source),
                Some(k) if k == "inclusion" => Some(StepKind::Inclusion),
                Some(k) if k == "exclusion" => Some(StepKind::Exclusion),
                Some(k) => return Err(format!("{name} line {line}: kind {k:?}; use source, inclusion or exclusion")),
            };
            match attrition.as_mut() {
                None => {
                    if kind.is_some_and(|k| k != StepKind::Source) {
                        return Err(format!("{name} line {line}: the first row is the source population"));
                    }
                    attrition = Some(Attrition::new(description, remaining));
                }
                Some(a) => {
                    a.step(kind.unwrap_or(StepKind::Exclusion), description, remaining)
                        .map_err(|e| format!("{name} line {line}: {e}"))?;
                }
            }
        }
        attrition.ok_or(format!("{name}: no rows; one row per step, the source population first"))
    }
}

/// An in-memory lookup over known identifiers (tests, and cohorts checked
/// against a list exported from the database).
#[derive(Debug, Clone, Default)]
pub struct KnownIdentifiers(pub BTreeMap<IdColumn, BTreeSet<i64>>);

impl IdentifierLookup for KnownIdentifiers {
    fn existing(&mut self, column: IdColumn, ids: &[i64]) -> Result<BTreeSet<i64>, String> {
        let known = self.0.get(&column);
        Ok(ids.iter().copied().filter(|id| known.is_some_and(|k| k.contains(id))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(csv: &str) -> AuditTable {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(AUDIT_FILE);
        std::fs::write(&path, csv).unwrap();
        AuditTable::read(&path).unwrap()
    }

    fn known() -> KnownIdentifiers {
        KnownIdentifiers(
            [
                (IdColumn::SubjectId, [10000032, 10001217, 10002428].into()),
                (IdColumn::StayId, [39553978, 37067082, 38875437].into()),
            ]
            .into(),
        )
    }

    fn failed(report: &RuleReport) -> Vec<(&str, &str)> {
        report.checks.iter().filter(|c| !c.passed).map(|c| (c.rule.as_str(), c.detail.as_str())).collect()
    }

    #[test]
    fn a_real_cohort_passes_the_rules() {
        let t = table("subject_id,stay_id,age,lactate\n10000032,39553978,52,2.1\n10001217,37067082,55,1.4\n");
        let r = rule_checks(&t, &mut known()).unwrap();
        assert!(r.passed(), "{:?}", r.checks);
        assert_eq!(r.rows, 2);
    }

    #[test]
    fn fabricated_patients_are_caught() {
        let t = table("subject_id,stay_id\n10000032,39553978\n99999999,37067082\n10002428,30000001\nabc,38875437\n");
        let r = rule_checks(&t, &mut known()).unwrap();
        assert_eq!(
            failed(&r),
            vec![
                ("subject_id_exists", "1 not integers (line 5: \"abc\"); 1 not in mimiciv_hosp.patients (99999999)"),
                ("stay_id_exists", "1 not in mimiciv_icu.icustays (30000001)"),
            ]
        );
    }

    #[test]
    fn empty_and_identifier_free_files_fail() {
        let r = rule_checks(&table("subject_id,stay_id\n"), &mut known()).unwrap();
        assert_eq!(failed(&r), vec![("non_empty", "0 rows")]);
        let r = rule_checks(&table("subject_id,age\n10000032,52\n"), &mut known()).unwrap();
        assert_eq!(failed(&r)[0].0, "identifiers");
        let r = rule_checks(&table("patient,age\nx,52\n"), &mut known()).unwrap();
        assert_eq!(failed(&r)[0].0, "identifiers");
    }

    #[test]
    fn oversized_cohorts_fail() {
        let mut csv = String::from("subject_id,stay_id\n");
        for _ in 0..=MAX_COHORT_ROWS {
            csv.push_str("10000032,39553978\n");
        }
        let r = rule_checks(&table(&csv), &mut known()).unwrap();
        assert_eq!(failed(&r), vec![("size_limit", "50001 rows; at most 50000")]);
    }

    #[test]
    fn unreadable_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cohort_audit.csv");
        std::fs::write(&path, "subject_id,stay_id\n1,2\n3\n").unwrap();
        let e = AuditTable::read(&path).unwrap_err().to_string();
        assert!(e.contains("cohort_audit.csv: the cohort audit file cannot be read"), "{e}");
        assert!(AuditTable::read(&dir.path().join("none.csv")).is_err());
    }

    #[test]
    fn sampling_is_uniform_distinct_and_reproducible() {
        assert_eq!(sample_rows(5, 100, 1), vec![0, 1, 2, 3, 4]);
        let a = sample_rows(1000, 100, 7);
        assert_eq!(a.len(), 100);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(a, sample_rows(1000, 100, 7));
        assert_ne!(a, sample_rows(1000, 100, 8));
        // Each row is drawn with probability k/n: over many seeds, the first
        // and last deciles are hit about equally often.
        let (mut low, mut high) = (0, 0);
        for seed in 0..200 {
            for i in sample_rows(1000, 100, seed) {
                low += usize::from(i < 100);
                high += usize::from(i >= 900);
            }
        }
        assert!((1700..2300).contains(&low) && (1700..2300).contains(&high), "{low} {high}");
    }

    #[test]
    fn the_agents_attrition_file_is_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ATTRITION_FILE);
        let read = |text: &str| {
            std::fs::write(&path, text).unwrap();
            Attrition::read_csv(&path)
        };
        let a = read("step,remaining\nICU stays,140\nfirst stay per patient,100\nno lactate,74\n").unwrap();
        assert_eq!(
            a.steps().iter().map(|s| (s.kind, s.removed)).collect::<Vec<_>>(),
            vec![(StepKind::Source, 0), (StepKind::Exclusion, 40), (StepKind::Exclusion, 26)]
        );
        let a = read("kind,step,remaining\nsource,ICU stays,140\ninclusion,adults,130.0\n").unwrap();
        assert_eq!(a.steps()[1].kind, StepKind::Inclusion);
        assert_eq!(read("step,n\na,1\n").unwrap_err(), "attrition.csv: needs the columns step and remaining (found step, n); one row per step, the source population first");
        assert_eq!(
            read("step,remaining\na,10\nb,12\n").unwrap_err(),
            "attrition.csv line 3: step \"b\" leaves 12 of 10; a step cannot add units"
        );
        assert_eq!(
            read("step,remaining\na,ten\n").unwrap_err(),
            "attrition.csv line 2: remaining \"ten\" is not a count"
        );
        assert!(read("step,remaining\n").unwrap_err().contains("no rows"));
        assert!(read("kind,step,remaining\nexclusion,a,1\n").unwrap_err().contains("the first row is the source"));
    }

    #[test]
    fn attrition_counts_what_each_step_removed() {
        let mut a = Attrition::new("ICU stays in MIMIC-IV", 140);
        a.step(StepKind::Inclusion, "first ICU stay per patient", 100).unwrap();
        a.step(StepKind::Exclusion, "no first-day lactate", 74).unwrap();
        assert_eq!(a.remaining(), 74);
        assert_eq!(a.steps()[2].removed, 26);
        assert!(a.step(StepKind::Exclusion, "bad", 80).unwrap_err().contains("cannot add units"));
        insta::assert_snapshot!(a.to_string(), @r"
        | step | kind | removed | remaining |
        | --- | --- | ---: | ---: |
        | ICU stays in MIMIC-IV | source |  | 140 |
        | first ICU stay per patient | inclusion | 40 | 100 |
        | no first-day lactate | exclusion | 26 | 74 |
        ");
    }
}
