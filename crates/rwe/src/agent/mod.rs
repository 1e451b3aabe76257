//! The study agent: RWEAgent as RWE-bench describes it (Appendix E.2,
//! Figure 17), in named modes. `Strategy::R` is the paper's: the agent
//! reaches the database only through R (no table-lookup actions) and
//! answers in Figure 17's format (Reflection, Research Plan and Status,
//! Fact Check, Thought, Action) with the paper's settings: memory
//! compression past 32,768 tokens with Figure 18's prompt, summarising from
//! the first input to the penultimate output; observations cut at 10,000
//! characters; temperature 0.6; 100 steps; 20 minutes per step (the R
//! sandbox's wall time); 2 hours per task; termination after more than 5
//! invalid outputs in one turn; a history that no longer fits the model's
//! context window ends the run too (recorded as a step, so the run's
//! answers are still scored). `Strategy::Typed` (Evident's) adds SQL and
//! typed statistics actions for models that cannot write R, and changes the
//! answer format: one JSON object `{"thought": ..., "action": {...}}`
//! decoded under the schema of the run's state
//! ([`actions::state_response_schema`]: only the open questions with their
//! value types, only the workspace tables' columns; grammar-constrained on
//! the embedded model, and checked after decoding), with a compact tool list and no Reflection / Plan /
//! Fact Check sections, so that a 4,096-token model has room to work; an
//! invalid answer goes back cut at 300 characters.
//! `Strategy::TypedGrounded` (Evident's, named apart so that `typed`'s
//! numbers stay comparable) is the typed strategy in which an answer can
//! only come from a computed result: its schema offers a field only as
//! `{"from_result": KEY}` over the results that can fill it, a choice only
//! after an effect or test, and no `submit_answers` while nothing can be
//! submitted, so the model must call a tool first. `Strategy::TypedRead`
//! (Evident's) is `typed-grounded` whose choice questions are answered as
//! the computed result reads ([`crate::reading`]) where a rule can read it.
//!
//! Evident's setting for small-context models (both strategies, when the
//! app knows the window): compression at min(32,768,
//! [`MEMORY_CONTEXT_FRACTION`] x the window), and an answer cap of what that
//! leaves of the window.
//!
//! Every step is appended to `steps.jsonl` in the run folder as soon as it
//! is done (the answer sheet after it included), so a killed run started
//! again replays the stored steps into its history and goes on from the
//! next step without repeating one.

pub mod actions;
pub mod adjustment;
pub mod cohort;
pub mod env;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use evident_llm::prompts::Prompts;
use evident_llm::{ChatModel, ChatRequest, LlmError, Message, Role};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::analysis::AnalysisOutput;
use crate::sheet::{RecordedAnswer, VisibleItem};
use crate::task::Task;
use actions::{parse_action, parse_typed_response, tools_desc};
use env::StudyEnv;

/// The templates of the agent, with the model layer's repair prompt.
pub const AGENT_PROMPTS: &[(&str, &str)] = &[
    ("rwe_agent_system.prompt.md", include_str!("../../prompts/rwe_agent_system.prompt.md")),
    ("rwe_agent_typed_system.prompt.md", include_str!("../../prompts/rwe_agent_typed_system.prompt.md")),
    (
        "rwe_agent_typed_grounded_system.prompt.md",
        include_str!("../../prompts/rwe_agent_typed_grounded_system.prompt.md"),
    ),
    ("rwe_agent_task.prompt.md", include_str!("../../prompts/rwe_agent_task.prompt.md")),
    ("rwe_memory_system.prompt.md", include_str!("../../prompts/rwe_memory_system.prompt.md")),
];

/// All templates of this crate (agent and cohort judge) and of `evident_llm`.
pub fn study_prompts(override_dir: Option<&Path>) -> Prompts {
    let mut all: Vec<(&'static str, &'static str)> = AGENT_PROMPTS.to_vec();
    all.extend_from_slice(crate::audit::RWE_PROMPTS);
    all.extend_from_slice(evident_llm::prompts::BUILTIN_PROMPTS);
    Prompts::new(&all, override_dir)
}

/// Which actions the agent has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// RWEAgent as in the paper: R only.
    R,
    /// Evident's: R plus SQL and typed statistics actions.
    Typed,
    /// Evident's typed strategy with grounded answers: the same actions,
    /// but `submit_answers` takes a field only as `{"from_result": KEY}`
    /// over the results that can fill it (never a typed number), a choice
    /// only once an effect or test has been computed, and is not offered
    /// while nothing can be submitted ([`env::StudyEnv::schema_state`]).
    #[serde(rename = "typed-grounded")]
    TypedGrounded,
    /// `typed-grounded`, and a choice question is answered as its computed
    /// result reads ([`crate::reading`]): once the relevant effects and
    /// tests read one way and exactly one option says so, the schema offers
    /// only that option. Evident's; it interprets the result for the model.
    #[serde(rename = "typed-read")]
    TypedRead,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::R => "r",
            Strategy::Typed => "typed",
            Strategy::TypedGrounded => "typed-grounded",
            Strategy::TypedRead => "typed-read",
        }
    }

    /// Evident's strategies (SQL and typed statistics, answers decoded
    /// under the run's schema); `R` is the paper's.
    pub fn is_typed(self) -> bool {
        matches!(self, Strategy::Typed | Strategy::TypedGrounded | Strategy::TypedRead)
    }

    /// The strategies whose answers come only from computed results.
    pub fn is_grounded(self) -> bool {
        matches!(self, Strategy::TypedGrounded | Strategy::TypedRead)
    }

    /// Every strategy by its name on the command line.
    pub const ALL: [Strategy; 4] = [Strategy::R, Strategy::Typed, Strategy::TypedGrounded, Strategy::TypedRead];

    /// The strategy named `name` (`r`, `typed`, `typed-grounded`, `typed-read`).
    pub fn from_name(name: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// The agent's budgets and sampling.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentConfig {
    pub strategy: Strategy,
    pub max_steps: u32,
    /// A turn ends the run when it gets more than this many invalid outputs.
    pub max_invalid_per_turn: u32,
    /// The paper's memory threshold (32,768 tokens).
    pub max_memory_tokens: usize,
    /// The chat model's context window in tokens, when known. Evident's
    /// setting: the history is compressed at min(`max_memory_tokens`,
    /// [`MEMORY_CONTEXT_FRACTION`] of this window), so a small-context model
    /// compresses before its window fills (the paper's threshold is never
    /// reached on a 4,096-token model). `None` keeps the paper's threshold.
    pub context_tokens: Option<usize>,
    pub temperature: f32,
    pub max_response_tokens: u32,
    pub task_time: Duration,
    pub seed: Option<u64>,
}

impl AgentConfig {
    /// RWE-bench's settings (section 3.1, Appendix E, G.1).
    pub fn paper(strategy: Strategy) -> AgentConfig {
        AgentConfig {
            strategy,
            max_steps: 100,
            max_invalid_per_turn: 5,
            max_memory_tokens: 32_768,
            context_tokens: None,
            temperature: 0.6,
            max_response_tokens: 4096,
            task_time: Duration::from_secs(2 * 3600),
            seed: None,
        }
    }
}

/// Evident's memory setting for small-context models: compress once the
/// history passes this fraction of the model's context window (the rest is
/// left for the answer and the next observation).
pub const MEMORY_CONTEXT_FRACTION: f64 = 0.75;

impl AgentConfig {
    /// The history size (estimated tokens) past which memory compression
    /// runs: the paper's 32,768, or [`MEMORY_CONTEXT_FRACTION`] of a smaller
    /// model's context window.
    pub fn memory_threshold(&self) -> usize {
        match self.context_tokens {
            Some(ctx) => self.max_memory_tokens.min((ctx as f64 * MEMORY_CONTEXT_FRACTION) as usize),
            None => self.max_memory_tokens,
        }
    }

    /// The answer's token cap: the paper's, or on a small-context model the
    /// part of the window the memory threshold leaves.
    pub fn response_tokens(&self) -> u32 {
        match self.context_tokens {
            Some(ctx) if ctx > self.memory_threshold() => {
                self.max_response_tokens.min((ctx - self.memory_threshold()) as u32)
            }
            _ => self.max_response_tokens,
        }
    }
}

/// One stored step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub step: u32,
    /// The model's valid answer (or its last invalid one when the turn ended the run).
    pub output: String,
    pub action: String,
    pub observation: String,
    /// The answer sheet after the step.
    pub answers: BTreeMap<String, RecordedAnswer>,
    /// The memory summary that replaced the history before this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    pub invalid_outputs: u32,
    /// Answers of this turn that repeated the previous step's action and
    /// were asked again (Evident's loop guard, typed strategy).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repeats_refused: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub elapsed_ms: u64,
    /// The run ended with this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination: Option<Termination>,
    /// What a typed statistics tool computed in this step, as data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<AnalysisOutput>,
    /// The numbers this step computed, citable in `submit_answers` as
    /// `{"from_result": KEY}` (typed strategy, [`crate::provenance`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<crate::provenance::ResultNumber>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// The agent called finish_task.
    Finished,
    /// Every visible question is answered.
    Completed,
    StepBudget,
    TimeLimit,
    /// More than the allowed invalid outputs in one turn.
    InvalidOutputs,
    /// The history no longer fits the model's context window (the way a
    /// small local model loses the thread long before the paper's
    /// 32,768-token memory threshold).
    ContextFull,
}

/// Evident's loop guard for the typed strategy: an answer whose action is
/// identical to one of the last [`REPEAT_WINDOW`] steps' is not run; the
/// turn asks again under a schema without that action, at most this many
/// times.
pub const MAX_REPEATS: usize = 2;

/// Evident's loop guard for the typed strategy, second part: an action
/// that failed in each of the last two steps is not offered for the next
/// answer (its schema leaves it out), so the agent must try something else.
fn failed_twice(steps: &[StepRecord]) -> Option<&'static str> {
    let [.., a, b] = steps else { return None };
    let failed = |s: &StepRecord| s.observation.starts_with(FAILED_PREFIX);
    (a.action == b.action && failed(a) && failed(b))
        .then(|| actions::action_names(Strategy::Typed).into_iter().find(|n| *n == b.action))
        .flatten()
}

/// Evident's loop guard for the grounded strategy, third part: an
/// exploring action (SQL, R, a table's description, a file read) that has
/// failed [`MAX_FAILURES`] times in the run is not offered again. Run 7's
/// statin task spent 6 of its 14 steps on SQL that selected from
/// `mimiciv_hosp.*`, failing twice in a row three times over.
fn failed_often(steps: &[StepRecord]) -> Vec<&'static str> {
    EXPLORING.into_iter().filter(|name| failures_of(steps, name) >= MAX_FAILURES).collect()
}

/// How many of `steps` ran action `name` and failed.
fn failures_of(steps: &[StepRecord], name: &str) -> usize {
    steps.iter().filter(|s| s.action == name && s.observation.starts_with(FAILED_PREFIX)).count()
}

/// The actions [`failed_often`] may leave out: never the cohort builder,
/// a statistics tool, or answering.
const EXPLORING: [&str; 4] = ["run_sql", "execute_r_script", "describe_table", "read_file"];

/// How many failures of one exploring action a grounded run allows.
pub const MAX_FAILURES: usize = 4;

/// How an observation of a failed action starts ([`env::StudyEnv::execute`]).
const FAILED_PREFIX: &str = "The action failed:";

/// How many of the latest steps the loop guard compares an answer with.
pub const REPEAT_WINDOW: usize = 3;

/// Whether one of the last [`REPEAT_WINDOW`] steps took exactly `action`
/// (the typed strategy's stored answers, parsed again).
fn repeats_recent(steps: &[StepRecord], action: &actions::Action) -> bool {
    steps
        .iter()
        .rev()
        .take(REPEAT_WINDOW)
        .any(|s| parse_typed_response(&s.output, Strategy::Typed).is_ok_and(|a| &a == action))
}

/// The steps file of a run: one JSON record per line, appended and synced
/// after each step.
#[derive(Debug, Clone)]
pub struct StepStore {
    path: PathBuf,
}

impl StepStore {
    pub fn new(run_dir: &Path) -> StepStore {
        StepStore { path: run_dir.join("steps.jsonl") }
    }

    /// The stored steps; a last line cut by a kill is ignored.
    pub fn load(&self) -> std::io::Result<Vec<StepRecord>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut steps = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<StepRecord>(line) {
                Ok(r) => steps.push(r),
                Err(_) => break,
            }
        }
        Ok(steps)
    }

    pub fn append(&self, record: &StepRecord) -> std::io::Result<()> {
        let mut line = serde_json::to_string(record).map_err(std::io::Error::other)?;
        line.push('\n');
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
        f.write_all(line.as_bytes())?;
        f.sync_data()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("model call failed: {0}")]
    Model(#[from] LlmError),
    #[error("the run's steps file: {0}")]
    Store(#[from] std::io::Error),
    #[error("prompt: {0}")]
    Prompt(String),
}

/// A finished (or resumed-and-finished) run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRun {
    pub steps: Vec<StepRecord>,
    pub termination: Termination,
    /// Steps read back from an earlier process rather than run now.
    pub resumed_steps: usize,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// The first user message: the protocol, the workspace and the questions
/// visible at the start; `grounded` (`--strategy typed-grounded`) says
/// that fields take results by key, never typed numbers.
pub fn task_message(
    prompts: &Prompts,
    task: &Task,
    visible: &[VisibleItem],
    files: &[String],
    grounded: bool,
) -> Result<String, AgentError> {
    let questions: Vec<serde_json::Value> =
        visible.iter().map(|v| serde_json::to_value(v).unwrap_or_default()).collect();
    prompts
        .render(
            "rwe_agent_task.prompt.md",
            json!({
                "title": task.title,
                "background": task.protocol.background.trim(),
                "methods": task.protocol.methods.trim(),
                "files": files.join(", "),
                "questions": questions,
                "grounded": grounded,
            }),
        )
        .map_err(|e| AgentError::Prompt(e.to_string()))
}

/// The history's size in tokens: the model's own count (its tokenizer and
/// chat template, the embedded model) where it gives one, else characters
/// / 4 (which undercounts whitespace-heavy text such as pretty JSON).
fn history_tokens(model: &dyn ChatModel, messages: &[Message]) -> usize {
    model
        .count_tokens(messages)
        .unwrap_or_else(|| messages.iter().map(|m| m.content.chars().count()).sum::<usize>() / 4)
}

/// How many times one turn of the typed strategies cuts an observation to
/// fit the model's context before the run ends as context-full.
pub const MAX_OBSERVATION_CUTS: u32 = 3;

/// Cuts the longest observation after the first input (at least 800
/// characters) to half its characters, in the turn and in the history the
/// next turns start from; false when there is none to cut.
fn cut_longest_observation(turn: &mut [Message], messages: &mut [Message]) -> bool {
    let Some((i, chars)) = turn
        .iter()
        .enumerate()
        .skip(2)
        .filter(|(_, m)| m.role == Role::User)
        .map(|(i, m)| (i, m.content.chars().count()))
        .max_by_key(|(_, chars)| *chars)
        .filter(|(_, chars)| *chars >= 800)
    else {
        return false;
    };
    let cut = crate::sandbox::truncate_chars(&turn[i].content, chars / 2)
        + " (the observation was cut to fit the model's context)";
    if let Some(m) = messages.get_mut(i).filter(|m| m.content == turn[i].content) {
        m.content = cut.clone();
    }
    turn[i].content = cut;
    true
}

/// Replaces the history from the first input to the penultimate agent
/// output with the memory summary (Appendix E.2); the last exchange stays.
fn compress(messages: &mut Vec<Message>, summary: &str) {
    // Layout: system, first input, then (agent output, observation) pairs.
    let n = messages.len();
    if n < 6 {
        return;
    }
    let last_output = n - 2;
    let penultimate_observation = &messages[last_output - 1].content;
    let memory = Message::user(format!(
        "Memory of your work so far (a summary of the earlier history):\n{summary}\n\n{penultimate_observation}"
    ));
    let tail: Vec<Message> = messages[last_output..].to_vec();
    messages.truncate(1);
    messages.push(memory);
    messages.extend(tail);
}

/// The memory model's summary of everything but the system prompt and the
/// last exchange.
fn summarise(
    memory_model: &dyn ChatModel,
    prompts: &Prompts,
    messages: &[Message],
) -> Result<(String, u64, u64), AgentError> {
    let system =
        prompts.render("rwe_memory_system.prompt.md", json!({})).map_err(|e| AgentError::Prompt(e.to_string()))?;
    let history: Vec<String> = messages[1..messages.len() - 2]
        .iter()
        .map(|m| match m.role {
            Role::Assistant => format!("Scientist:\n{}", m.content),
            _ => format!("Environment:\n{}", m.content),
        })
        .collect();
    let request =
        ChatRequest::new(vec![Message::system(system), Message::user(history.join("\n\n"))]).with_max_tokens(2048);
    let response = memory_model.chat(&request)?;
    Ok((response.text, u64::from(response.prompt_tokens), u64::from(response.completion_tokens)))
}

/// Runs (or resumes) the agent on `env` until it finishes or a budget ends it.
pub fn run_agent(
    model: &dyn ChatModel,
    memory_model: &dyn ChatModel,
    env: &mut StudyEnv,
    prompts: &Prompts,
    config: &AgentConfig,
    store: &StepStore,
    auxiliary_files: &[String],
) -> Result<AgentRun, AgentError> {
    let system_prompt = match config.strategy {
        Strategy::R => "rwe_agent_system.prompt.md",
        Strategy::Typed => "rwe_agent_typed_system.prompt.md",
        Strategy::TypedGrounded | Strategy::TypedRead => "rwe_agent_typed_grounded_system.prompt.md",
    };
    let system = prompts
        .render(system_prompt, json!({"tools_desc": tools_desc(config.strategy)}))
        .map_err(|e| AgentError::Prompt(e.to_string()))?;
    // The typed strategy (Evident's) decodes its answer under the action
    // schema; the paper's R strategy answers in Figure 17's free text.
    let typed = config.strategy.is_typed();
    // The grounded variant's answers come only from computed results.
    env.set_grounded(config.strategy.is_grounded());
    env.set_reads(config.strategy == Strategy::TypedRead);
    let first = task_message(
        prompts,
        env.sheet.task(),
        &env.sheet.visible_at_start(),
        auxiliary_files,
        config.strategy.is_grounded(),
    )?;
    let mut messages = vec![Message::system(system), Message::user(first)];

    // Replay what an earlier process stored.
    let mut steps = store.load()?;
    let resumed_steps = steps.len();
    for r in &steps {
        if let Some(summary) = &r.memory {
            compress(&mut messages, summary);
        }
        messages.push(Message::assistant(r.output.clone()));
        messages.push(Message::user(format!("Observation: {}", r.observation)));
    }
    if let Some(last) = steps.last() {
        env.sheet = env.sheet.with_answers(last.answers.clone());
    }
    env.replay(&steps);
    let totals = |steps: &[StepRecord]| {
        (steps.iter().map(|s| s.prompt_tokens).sum(), steps.iter().map(|s| s.completion_tokens).sum())
    };
    if let Some(termination) = steps.last().and_then(|s| s.termination) {
        let (p, c) = totals(&steps);
        return Ok(AgentRun { steps, termination, resumed_steps, prompt_tokens: p, completion_tokens: c });
    }
    let earlier_ms: u64 = steps.iter().map(|s| s.elapsed_ms).sum();
    let started = Instant::now();

    let termination = loop {
        let step = steps.len() as u32 + 1;
        if step > config.max_steps {
            break Termination::StepBudget;
        }
        if Duration::from_millis(earlier_ms) + started.elapsed() >= config.task_time {
            break Termination::TimeLimit;
        }
        let step_start = Instant::now();
        let (mut prompt_tokens, mut completion_tokens) = (0u64, 0u64);
        let mut memory = None;
        let mut memory_overflow = None;
        if messages.len() >= 6 && history_tokens(model, &messages) > config.memory_threshold() {
            match summarise(memory_model, prompts, &messages) {
                Ok((summary, p, c)) => {
                    prompt_tokens += p;
                    completion_tokens += c;
                    compress(&mut messages, &summary);
                    memory = Some(summary);
                }
                Err(AgentError::Model(e @ LlmError::ContextOverflow { .. })) => memory_overflow = Some(e.to_string()),
                Err(e) => return Err(e),
            }
        }
        // One turn: ask until a valid action, at most max_invalid + 1 times.
        let mut turn = messages.clone();
        let mut invalid = 0u32;
        let mut cuts = 0u32;
        let mut repeats: Vec<&'static str> = Vec::new();
        let mut blocked: Vec<&'static str> =
            if typed { failed_twice(&steps).into_iter().collect() } else { Vec::new() };
        if env.is_grounded() {
            for name in failed_often(&steps) {
                if !blocked.contains(&name) {
                    blocked.push(name);
                }
            }
        }
        // Evident's typed schema follows the run's state: the protocol's
        // cohort criteria, the open questions, the workspace's tables.
        let mut request_schema = typed.then(|| env.response_schema(&blocked));
        let parsed = loop {
            if let Some(problem) = memory_overflow.take() {
                break Err((String::new(), format!("the memory summary did not fit: {problem}"), true));
            }
            let mut request = ChatRequest::new(turn.clone()).with_max_tokens(config.response_tokens());
            request.temperature = config.temperature;
            request.seed = config.seed;
            request.json_schema = request_schema.clone();
            let response = match model.chat(&request) {
                Ok(r) => r,
                // Evident's (typed): the longest observation is cut in half
                // and the turn asks again, up to MAX_OBSERVATION_CUTS times.
                // Run 6's anion-gap task read the 100-row cohort file (7,219
                // characters) and its next prompt, 9,128 tokens, ended the run
                // on the 8,192-token embedded model.
                Err(LlmError::ContextOverflow { .. }) if typed && cuts < MAX_OBSERVATION_CUTS => {
                    if !cut_longest_observation(&mut turn, &mut messages) {
                        break Err((String::new(), "the prompt does not fit the model's context".into(), true));
                    }
                    cuts += 1;
                    continue;
                }
                Err(e @ LlmError::ContextOverflow { .. }) => break Err((String::new(), e.to_string(), true)),
                Err(e) => return Err(e.into()),
            };
            prompt_tokens += u64::from(response.prompt_tokens);
            completion_tokens += u64::from(response.completion_tokens);
            let parsed = match config.strategy {
                Strategy::R => parse_action(&response.text, config.strategy),
                Strategy::Typed | Strategy::TypedGrounded | Strategy::TypedRead => {
                    parse_typed_response(&response.text, config.strategy).and_then(|a| match &request_schema {
                        Some(s) => actions::check_typed_answer(&response.text, s).map(|()| a),
                        None => Ok(a),
                    })
                }
            };
            match parsed {
                // Evident's loop guard (typed): the previous step's action
                // again, identical, is not run; the turn asks once more under
                // a schema without that action, so the answer moves on.
                Ok(action) if typed && repeats.len() < MAX_REPEATS && repeats_recent(&steps, &action) => {
                    let name = action.name();
                    repeats.push(name);
                    let excluded: Vec<&str> = blocked.iter().chain(&repeats).copied().collect();
                    request_schema = Some(env.response_schema(&excluded));
                    turn.push(Message::assistant(crate::sandbox::truncate_chars(&response.text, 300)));
                    turn.push(Message::user(format!(
                        "This repeats one of your last actions exactly ({name} with the same parameters), which would give the same result; it was not run. Take a different action; {name} is not available for this answer.\n{}",
                        env.state_note()
                    )));
                }
                Ok(action) => break Ok((response.text, action)),
                Err(problem) => {
                    invalid += 1;
                    if invalid > config.max_invalid_per_turn {
                        break Err((response.text, problem, false));
                    }
                    // The typed strategy's invalid answer is usually one cut at
                    // the token cap: only its start goes back, so the retry fits.
                    let shown = match config.strategy {
                        Strategy::R => response.text,
                        Strategy::Typed | Strategy::TypedGrounded | Strategy::TypedRead => {
                            crate::sandbox::truncate_chars(&response.text, 300)
                        }
                    };
                    turn.push(Message::assistant(shown));
                    let format = match config.strategy {
                        Strategy::R => "Respond in the required format, ending with Action: and one JSON action.",
                        Strategy::Typed | Strategy::TypedGrounded | Strategy::TypedRead => {
                            "Respond with one JSON object {\"thought\": ..., \"action\": {\"action\": NAME, \"params\": {...}}}."
                        }
                    };
                    let mut message = format!("Invalid response: {problem}. {format}");
                    // The grounded strategy's answers wait for results: an
                    // answer it could not submit is told what can be, and
                    // what to compute first.
                    if env.is_grounded() && problem.starts_with("submit_answers") {
                        message = format!("{message}\n{}", env.state_note());
                    }
                    turn.push(Message::user(message));
                }
            }
        };
        let (output, action_name, observation, termination, analysis, results) = match parsed {
            Ok((output, action)) => {
                let mut obs = env.execute(step, &action);
                if typed && !obs.finished && !matches!(action, actions::Action::FinishTask) {
                    let again = steps
                        .last()
                        .is_some_and(|l| l.action == action.name() && l.observation.starts_with(FAILED_PREFIX))
                        && obs.text.starts_with(FAILED_PREFIX);
                    let failures =
                        failures_of(&steps, action.name()) + usize::from(obs.text.starts_with(FAILED_PREFIX));
                    if env.is_grounded() && EXPLORING.contains(&action.name()) && failures == MAX_FAILURES {
                        obs.text.push_str(&format!(
                            "\n{} has failed {MAX_FAILURES} times in this run; it is not offered again.",
                            action.name()
                        ));
                    } else if again {
                        obs.text.push_str(&format!(
                            "\n{} failed twice in a row; your next answer cannot use it.",
                            action.name()
                        ));
                    }
                    obs.text = format!("{}\n{}", obs.text, env.state_note());
                }
                let termination = if matches!(action, actions::Action::FinishTask) {
                    Some(Termination::Finished)
                } else if obs.finished {
                    Some(Termination::Completed)
                } else {
                    None
                };
                (output, action.name().to_string(), obs.text, termination, obs.analysis, obs.results)
            }
            Err((output, problem, false)) => (
                output,
                "(invalid output)".to_string(),
                format!("Invalid response: {problem}"),
                Some(Termination::InvalidOutputs),
                None,
                Vec::new(),
            ),
            Err((output, problem, true)) => (
                output,
                "(context full)".to_string(),
                format!("The run ends: {problem}"),
                Some(Termination::ContextFull),
                None,
                Vec::new(),
            ),
        };
        let record = StepRecord {
            step,
            output,
            action: action_name,
            observation,
            answers: env.sheet.answers().clone(),
            memory,
            invalid_outputs: invalid,
            repeats_refused: repeats.len() as u32,
            prompt_tokens,
            completion_tokens,
            elapsed_ms: step_start.elapsed().as_millis() as u64,
            termination,
            analysis,
            results,
        };
        store.append(&record)?;
        messages.push(Message::assistant(record.output.clone()));
        messages.push(Message::user(format!("Observation: {}", record.observation)));
        steps.push(record);
        if let Some(t) = termination {
            break t;
        }
    };
    let (p, c) = totals(&steps);
    Ok(AgentRun { steps, termination, resumed_steps, prompt_tokens: p, completion_tokens: c })
}
