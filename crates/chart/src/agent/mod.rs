//! The agent, the paper's four phases over the `llm` traits and a
//! [`RecordView`]:
//!
//! - Phase I ([`assess`]): clinical intent, hypotheses, required and missing
//!   information, complexity, and skill ids chosen from the summaries;
//!   the library adds keyword-triggered style skills, the base style skill
//!   and the attached policy skills.
//! - Phase II ([`plan`]): a JSON plan of ordered steps and global stop
//!   conditions; three attempts (two repairs), then a recorded pipeline
//!   failure.
//! - Phase III ([`execute`]): at most eight rounds; each round the model
//!   calls a tool, advances or finishes against a structured memory state.
//!   Duplicate calls are blocked with a notice, empty report queries go to
//!   a negative cache, results are cached per run, repeated empty results
//!   broaden the next search (k doubled up to 30, then the query's
//!   keywords, then no date limit; applied before the duplicate check, so
//!   a repeated empty search runs broadened; then, Evident's and not the
//!   paper's, no kind filter), and a context budget ends
//!   retrieval early. A finish before the current step ran is sent back
//!   once. On a small model context (Evident's, not the paper's) the
//!   oldest round exchanges leave the prompt, then the last result and
//!   the memory show fewer items, before retrieval ends.
//! - Phase IV ([`synthesise`]): nodes de-duplicated and numbered, the policy
//!   engine's resolution, the style skills, two attempts at the two-line
//!   format, then a recorded pipeline failure; citations validated.
//!
//! Prompt layout: Phases II and III are one conversation (system prompt
//! with the baseline prompt, tools and workflow skills; the plan request;
//! the plan; then one exchange per round), so each request extends the
//! last one and the embedded model reuses its KV cache for the prefix.

mod assess;
mod execute;
mod plan;
mod synthesise;

use std::time::{Duration, Instant};

use chrono::NaiveDateTime;
use evident_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Message, PipelineFailure, Prompts, StructuredModel};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Mutex;

use crate::answer::TwoLine;
use crate::policy::{resolve_in, Resolution};
use crate::skills::{Selection, SkillLibrary};
use crate::tools::{Evidence, RecordView, ToolName};
use crate::{ChartError, Citation};

pub(crate) use assess::{assess, style_block};
pub(crate) use execute::execute;
pub use execute::yes_no_lookup;
pub use plan::question_names;
pub(crate) use plan::{agent_system, plan};
pub use synthesise::{context_items, recorded_yes};
pub(crate) use synthesise::{node_tokens, number_nodes, synthesise, ShownNode};

/// The chart prompts, compiled in; a prompts folder may override them.
pub const CHART_PROMPTS: &[(&str, &str)] = &[
    ("chart_baseline.prompt.md", include_str!("../../prompts/chart_baseline.prompt.md")),
    ("chart_assess.prompt.md", include_str!("../../prompts/chart_assess.prompt.md")),
    ("chart_agent_system.prompt.md", include_str!("../../prompts/chart_agent_system.prompt.md")),
    ("chart_plan.prompt.md", include_str!("../../prompts/chart_plan.prompt.md")),
    ("chart_plan_repair.prompt.md", include_str!("../../prompts/chart_plan_repair.prompt.md")),
    ("chart_step.prompt.md", include_str!("../../prompts/chart_step.prompt.md")),
    ("chart_step_reactive.prompt.md", include_str!("../../prompts/chart_step_reactive.prompt.md")),
    ("chart_synthesis.prompt.md", include_str!("../../prompts/chart_synthesis.prompt.md")),
    ("chart_answer_repair.prompt.md", include_str!("../../prompts/chart_answer_repair.prompt.md")),
    ("chart_llm_baseline.prompt.md", include_str!("../../prompts/chart_llm_baseline.prompt.md")),
];

/// The chart prompts with the model layer's (the JSON repair prompt).
pub fn prompts(override_dir: Option<&std::path::Path>) -> Prompts {
    static ALL: std::sync::OnceLock<Vec<(&'static str, &'static str)>> = std::sync::OnceLock::new();
    let all = ALL.get_or_init(|| CHART_PROMPTS.iter().chain(evident_llm::prompts::BUILTIN_PROMPTS).copied().collect());
    Prompts::new(all, override_dir)
}

/// Which parts of the agent run (the paper's ablations switch them off).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentConfig {
    pub max_rounds: usize,
    pub max_plan_steps: usize,
    /// The plan's token limit; on a model whose context is known, every
    /// plan request (and repair) leaves this much room for the plan or is
    /// shortened until it does. The default, 1,024, holds four steps of
    /// the typed plan, whose every string and input name is bounded.
    pub plan_tokens: u32,
    /// Tokens of context nodes after which retrieval ends.
    pub context_budget_tokens: usize,
    /// The model's own context in tokens, when known (the embedded
    /// model's `context_size`): no request is built larger than it.
    pub model_context_tokens: Option<usize>,
    pub use_skills: bool,
    pub all_skills: bool,
    pub use_filters: bool,
    pub use_calculators: bool,
    pub use_memory: bool,
    pub use_plan: bool,
    pub temperature: f32,
    pub seed: Option<u64>,
    /// Evident's variant for models whose decoding can be constrained (on
    /// with [`AgentConfig::with_model_context`], i.e. for the embedded
    /// model): the answer step decodes `{"answer", "reasoning"}` under a
    /// JSON schema whose reasoning pattern admits only the citation numbers
    /// the prompt shows, and the two lines are written from it. Off, the
    /// paper's free-text two lines.
    pub constrained_answer: bool,
    /// Evident's variant of the constrained answer step, not the default:
    /// the reasoning is decoded before the answer (`{"reasoning",
    /// "answer"}`), so the answer is read from what the reasoning said of
    /// the cited items. The paper's model writes the answer line first,
    /// and so does the default; the embedded model once cited the right
    /// item, reasoned from it, and had already answered the opposite
    /// (`6e7c2272-G05`). The two lines are shown in the paper's order
    /// either way. `--method agent-reasoning-first`; no effect without
    /// [`AgentConfig::constrained_answer`].
    pub reasoning_first: bool,
    /// Evident's last broadening level, beyond the paper's three: after a
    /// fourth empty report search in a row (or when the third level's call
    /// already returned nothing) the kind filter goes too, so a document
    /// stored under another kind than the model asked for is still found.
    /// The paper never drops the kind filter; off
    /// (`--method agent-paper-broadening`), its three levels only.
    pub broaden_kind: bool,
    /// Evident's broadening after irrelevant results, not the paper's:
    /// after a report search whose results name none of the question's
    /// subject words (`tools::subject_words`, `tools::names_subject`) the
    /// next search is broadened to the last level at once (keywords, no
    /// date limit, no kind filter when [`AgentConfig::broaden_kind`]):
    /// such results mean wrong words or filters, and doubling k would only
    /// fill the context budget with more of them. The results stay
    /// evidence, and the round's notice says so. The paper broadens after
    /// empty results only; off with `--method agent-paper-broadening`, as
    /// is the kind level. With it, a question asking for a date, dates or
    /// intervals whose context names none of its subject when retrieval
    /// ends has the subject looked up in the structured records
    /// (`execute::structured_lookup`).
    pub broaden_unnamed: bool,
    /// Evident's typed plan, not the paper's: each plan step's schema is
    /// its tool's (`tool` one of the tools, `arguments` only that tool's,
    /// a calculator id one of the loaded calculators, with only its own
    /// inputs), and a retrieval call whose arguments name a calculator
    /// (in the plan or in a round's action) is run as that calculator's
    /// call, said in the trace. Off (`--method agent-paper-plan`), one
    /// argument object shared by every tool, as before, and no rewrite.
    pub typed_plan: bool,
    /// Evident's whole-history scope, not the paper's: when the question
    /// asks for the first occurrence (its evidence order is earliest) or
    /// for a list of dates or intervals, a report or record call's
    /// `most_recent` scope, which sees one document, runs as `all`, said
    /// in the trace (the embedded model wrote `most_recent` into most of
    /// its plans, first-occurrence and list questions included). Off
    /// (`--method agent-paper-scope`), scopes run as the model wrote them.
    pub history_scope: bool,
    /// Evident's query expansion, not the paper's: a report search's
    /// query, and a structured record query's, gains the expansions the
    /// library's parsing skills list for its words (`expansions` in their
    /// front matter: "bmi" -> "body mass index", "anaemia" -> "anemia"),
    /// said in the trace, since BM25 and the record query match words and
    /// the records spell the terms out (the 0.5B model searched "bmi" and
    /// never found a "Body Mass Index" line; a conditions query for
    /// "anaemia" found no "Anemia (disorder)" line). The
    /// paper's parsing skills are text for the model only; off
    /// (`--method agent-paper-queries`) and in the no-skills ablation, the
    /// query runs as written. With it, also without skills, a query that
    /// holds no word (only dates or numbers: the 0.5B model searched
    /// "2020-09-07" for the statin criteria) takes the question's subject
    /// words instead; off with `--method agent-paper-queries`.
    pub expand_queries: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            max_rounds: 8,
            max_plan_steps: 4,
            plan_tokens: 1024,
            context_budget_tokens: 120_000,
            model_context_tokens: None,
            use_skills: true,
            all_skills: false,
            use_filters: true,
            use_calculators: true,
            use_memory: true,
            use_plan: true,
            temperature: 0.0,
            seed: None,
            constrained_answer: false,
            reasoning_first: false,
            broaden_kind: true,
            broaden_unnamed: true,
            typed_plan: true,
            history_scope: true,
            expand_queries: true,
        }
    }
}

impl AgentConfig {
    /// The budget for a model whose context holds `context_tokens`: never
    /// more than the paper's 120,000 tokens nor than what leaves room for
    /// the fixed prompts and the answer. A model whose context is known is
    /// the embedded one, whose decoding is constrained: the answer step
    /// uses it too ([`AgentConfig::constrained_answer`]).
    pub fn with_model_context(mut self, context_tokens: usize) -> Self {
        let reserve = 2_000.min(context_tokens / 2);
        self.context_budget_tokens = self.context_budget_tokens.min(context_tokens.saturating_sub(reserve));
        self.model_context_tokens = Some(context_tokens);
        self.constrained_answer = true;
        self
    }
}

/// When the nodes do not all fit `budget_tokens` ([`number_nodes`] would
/// cut them), the results of a calculator the question names first (the
/// answer's basis: an encounter section found first had left no room for
/// the BMI calculation of a BMI-category question on a 4,096-token model,
/// `d5525459-G26`), then those that name the question's subject
/// (`tools::names_subject`), each group in retrieval order, so what is
/// cut is what does not name it (a search's unrelated lab reports had
/// filled a 4,096-token model's context before the broadened search found
/// the prescription asked about). Otherwise, or when none is either (a
/// synonym, a drug class), the order is unchanged.
pub(crate) fn subject_first(nodes: &[Evidence], question: &str, budget_tokens: usize) -> Vec<Evidence> {
    if nodes.iter().map(node_tokens).sum::<usize>() <= budget_tokens {
        return nodes.to_vec();
    }
    let named_result = |n: &Evidence| {
        matches!(n, Evidence::Calculation { calculator, .. }
            if crate::calculators::Calculator::from_name(calculator).is_some_and(|c| question_names(question, c)))
    };
    let words = crate::tools::subject_words(question);
    let (mut first, rest): (Vec<Evidence>, Vec<Evidence>) = nodes.iter().cloned().partition(named_result);
    let (named, rest): (Vec<Evidence>, Vec<Evidence>) =
        rest.into_iter().partition(|n| !words.is_empty() && crate::tools::names_subject(&words, &n.text()));
    first.extend(named);
    first.extend(rest);
    first
}

/// Token and time accounting over every call of one question.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Usage {
    pub calls: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub reused_prompt_tokens: u64,
    pub wall_ms: u64,
    pub llm_ms: u64,
    /// Wall time outside model calls.
    pub non_llm_ms: u64,
}

/// A model that counts what its calls cost.
pub(crate) struct Metered<'a> {
    inner: &'a dyn ChatModel,
    usage: Mutex<(Usage, Duration)>,
}

impl<'a> Metered<'a> {
    pub(crate) fn new(inner: &'a dyn ChatModel) -> Self {
        Metered { inner, usage: Mutex::new((Usage::default(), Duration::ZERO)) }
    }

    pub(crate) fn usage(&self, wall: Duration) -> Usage {
        let (mut u, llm) = self.usage.lock().unwrap_or_else(|e| e.into_inner()).clone();
        u.wall_ms = wall.as_millis() as u64;
        u.llm_ms = llm.as_millis() as u64;
        u.non_llm_ms = wall.saturating_sub(llm).as_millis() as u64;
        u
    }
}

impl ChatModel for Metered<'_> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn parallelism(&self) -> usize {
        self.inner.parallelism()
    }
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let start = Instant::now();
        let out = self.inner.chat(request);
        let elapsed = start.elapsed();
        let mut guard = self.usage.lock().unwrap_or_else(|e| e.into_inner());
        guard.1 += elapsed;
        guard.0.calls += 1;
        if let Ok(r) = &out {
            guard.0.prompt_tokens += r.prompt_tokens as u64;
            guard.0.completion_tokens += r.completion_tokens as u64;
            guard.0.reused_prompt_tokens += r.reused_prompt_tokens as u64;
        }
        out
    }
}

/// Phase I's output.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Assessment {
    pub intent: String,
    pub hypotheses: Vec<String>,
    pub required_information: Vec<String>,
    pub missing_information: Vec<String>,
    pub complexity: String,
    pub chosen_skills: Vec<String>,
    pub selection: Selection,
    /// Set when the assessment never validated (the agent goes on with
    /// keyword-selected skills only).
    pub failed: bool,
}

/// One planned step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanStep {
    pub step: u32,
    pub objective: String,
    pub tool: String,
    pub arguments: Value,
    pub evidence_requirements: Vec<String>,
    pub stop_rule: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Plan {
    pub steps: Vec<PlanStep>,
    pub stop_conditions: Vec<String>,
    pub attempts: u32,
}

/// The memory state carried between rounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Memory {
    pub query: String,
    /// One line per evidence item found so far.
    pub evidence: Vec<String>,
    pub still_missing: Vec<String>,
    pub stop_conditions: Vec<String>,
}

/// One round of Phase III.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Round {
    pub round: usize,
    pub plan_step: Option<u32>,
    pub action: String,
    pub tool: Option<String>,
    pub arguments: Option<Value>,
    /// What the agent changed in the call (broadening, planned arguments).
    pub adjustments: Vec<String>,
    pub notice: Option<String>,
    pub evidence_found: usize,
    pub new_evidence: usize,
    pub cached: bool,
    pub memory: Memory,
    pub reason: String,
}

impl Round {
    /// A round that called no tool (or one whose call the caller fills in
    /// with struct update syntax), with the memory state after it.
    pub(crate) fn bare(round: usize, step: Option<&PlanStep>, action: &str, memory: &Memory, reason: &str) -> Round {
        Round {
            round,
            plan_step: step.map(|s| s.step),
            action: action.into(),
            tool: None,
            arguments: None,
            adjustments: vec![],
            notice: None,
            evidence_found: 0,
            new_evidence: 0,
            cached: false,
            memory: memory.clone(),
            reason: reason.into(),
        }
    }
}

/// Everything the agent did for one question.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Trace {
    pub assessment: Option<Assessment>,
    pub skills: Vec<String>,
    pub plan: Option<Plan>,
    pub rounds: Vec<Round>,
    pub stopped_because: String,
    /// Earlier round exchanges left out of later prompts to fit the
    /// model's context (the memory state keeps their evidence).
    pub prompt_rounds_dropped: usize,
    /// Times a round's request was fitted to the model's context by
    /// showing fewer result items or memory lines (all stay context nodes).
    pub prompt_items_hidden: usize,
    /// How Phase II's requests were shortened to fit the model's context
    /// (a repair without its copy of the invalid plan, skills shown by
    /// their summaries), one line each, in order.
    pub prompt_shortened: Vec<String>,
    /// Plan steps rewritten by Evident's typed plan (a retrieval step
    /// whose arguments named a calculator, made that calculator's step).
    pub plan_rewrites: Vec<String>,
    pub context_tokens: usize,
    pub policy: Option<Resolution>,
    pub synthesis_attempts: u32,
    /// Where the reasoning was written by Evident rather than the model
    /// (from a calculation or criteria check the question names, or from
    /// the record's entries that gave a Yes or a date answer), what it was
    /// written from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_from: Option<String>,
}

/// What a method produced for one question, before citations are resolved.
pub(crate) struct Produced {
    pub nodes: Vec<Evidence>,
    pub outcome: Result<(TwoLine, String), PipelineFailure>,
    pub trace: Trace,
}

pub(crate) struct Ctx<'a> {
    pub model: StructuredModel<'a>,
    pub prompts: &'a Prompts,
    pub view: &'a RecordView<'a>,
    pub skills: &'a SkillLibrary,
    pub config: &'a AgentConfig,
    pub question: &'a str,
    /// The question's answer schema, when the asker gave it.
    pub answer_type: Option<crate::bank::AnswerType>,
    pub patient: String,
}

impl Ctx<'_> {
    fn request(&self, messages: Vec<Message>, max_tokens: u32) -> ChatRequest {
        let mut r = ChatRequest::new(messages).with_max_tokens(max_tokens);
        r.temperature = self.config.temperature;
        r.seed = self.config.seed;
        r
    }

    /// The answer schema line the answer prompts show, when given.
    pub(crate) fn answer_schema(&self) -> Option<&'static str> {
        self.answer_type.map(crate::bank::AnswerType::schema)
    }

    fn as_of(&self) -> String {
        self.view.as_of().format("%Y-%m-%d").to_string()
    }

    fn render(&self, name: &str, context: Value) -> Result<String, ChartError> {
        Ok(self.prompts.render(name, context)?)
    }

    fn baseline(&self) -> Result<String, ChartError> {
        self.render("chart_baseline.prompt.md", json!({}))
    }

    fn allowed_tools(&self) -> Vec<ToolName> {
        ToolName::ALL.into_iter().filter(|t| self.config.use_calculators || *t != ToolName::Calculate).collect()
    }
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v[key].as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// A list of at most `n` short strings (the embedded model otherwise
/// writes until its token limit; the bounds keep every structured answer's
/// worst case inside its token limit, so constrained decoding always ends
/// in valid JSON).
fn short_list_schema(n: usize) -> Value {
    json!({"type": "array", "items": {"type": "string", "maxLength": 60}, "maxItems": n})
}

/// A conservative token estimate for messages, plus the chat template's
/// few tokens each (see [`estimate_text_tokens`]).
pub(crate) fn estimate_tokens(messages: &[Message]) -> usize {
    messages.iter().map(|m| estimate_text_tokens(&m.content) + 8).sum()
}

/// A conservative token estimate for a text: every digit one token (the
/// Qwen tokenizers split numbers into digits, and records are full of
/// dates and values) and three characters a token for the rest (English
/// clinical text and JSON average about four with those tokenizers).
pub(crate) fn estimate_text_tokens(text: &str) -> usize {
    let digits = text.bytes().filter(u8::is_ascii_digit).count();
    digits + (text.len() - digits).div_ceil(3)
}

/// The token limit for an answer after `messages`: `wanted`, or less when
/// the model's context has less room left (never under 256, the
/// shortest structured answer; a prompt that leaves less overflows and is
/// handled as an overflow).
pub(crate) fn answer_room(config: &AgentConfig, messages: &[Message], wanted: u32) -> u32 {
    match config.model_context_tokens {
        Some(limit) => (limit.saturating_sub(estimate_tokens(messages)) as u32).clamp(256, wanted.max(256)),
        None => wanted,
    }
}

/// Whether an error is the model's context overflowing (the estimate was
/// short): the agent then stops or shrinks instead of failing the question.
pub(crate) fn is_overflow(e: &ChartError) -> bool {
    matches!(e, ChartError::Llm(LlmError::ContextOverflow { .. }))
}

/// A request that could not be sent because it overflowed the model's
/// context, recorded as a pipeline failure (the question is answered
/// "not found", never silently).
pub(crate) fn overflow_failure(
    ctx: &Ctx<'_>,
    request: ChatRequest,
    error: &ChartError,
) -> Result<PipelineFailure, ChartError> {
    let failure = PipelineFailure {
        model: ctx.model.model_id().to_string(),
        raw_text: String::new(),
        errors: vec![error.to_string()],
        attempts: 1,
        request,
    };
    ctx.model.failures.record_pipeline_failure(&failure)?;
    Ok(failure)
}

/// The tokens left for context items in a prompt whose fixed parts are
/// `fixed`, leaving room for an answer of `answer_tokens`.
pub(crate) fn node_budget(config: &AgentConfig, fixed: &[Message], answer_tokens: usize) -> usize {
    match config.model_context_tokens {
        Some(limit) => {
            config.context_budget_tokens.min(limit.saturating_sub(estimate_tokens(fixed) + answer_tokens + 100))
        }
        None => config.context_budget_tokens,
    }
}

/// The full agent for one question.
pub(crate) fn run_agent(ctx: &Ctx<'_>) -> Result<Produced, ChartError> {
    let mut trace = Trace::default();
    let assessment = assess(ctx)?;
    trace.skills = if ctx.config.use_skills { assessment.selection.ids.clone() } else { vec![] };
    trace.assessment = Some(assessment.clone());
    let (plan, conversation) = if ctx.config.use_plan {
        match plan(ctx, &assessment, &mut trace)? {
            Ok(p) => p,
            Err(failure) => {
                // `plan` says why in `stopped_because`.
                return Ok(Produced { nodes: vec![], outcome: Err(failure), trace });
            }
        }
    } else {
        let system = agent_system(ctx, &assessment.selection, &Default::default())?;
        let task = format!("Question: {}\nReference date: {}\nPatient: {}", ctx.question, ctx.as_of(), ctx.patient);
        (Plan::default(), vec![Message::system(system), Message::user(task), Message::assistant("Ready.")])
    };
    trace.plan = Some(plan.clone());
    let nodes = execute(ctx, &plan, &assessment, conversation, &mut trace)?;
    let style = style_block(ctx, &assessment.selection);
    let style_answers = ctx.skills.style_answers(&assessment.selection, ctx.question);
    let order = ctx.skills.evidence_order(&assessment.selection, ctx.question);
    let plan_summary = trace
        .rounds
        .iter()
        .filter(|r| r.action == "call_tool")
        .map(|r| {
            format!(
                "{} {} -> {} items",
                r.tool.clone().unwrap_or_default(),
                r.arguments.clone().unwrap_or_default(),
                r.evidence_found
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let render = |shown: &[ShownNode], resolution: Option<&Resolution>| {
        ctx.render(
            "chart_synthesis.prompt.md",
            json!({
                "question": ctx.question, "as_of": ctx.as_of(), "patient": ctx.patient,
                "answer_schema": ctx.answer_schema(),
                "plan_summary": plan_summary,
                "requirements": assessment.required_information.join("; "),
                "nodes": shown,
                "policy": resolution.map(|r| json!({"decision": r.decision, "selected": format!("{:?}", r.selected), "note": r.note})),
                "style": style,
            }),
        )
    };
    // The prompt without context items (and room for the policy line)
    // decides how many items fit the model's context.
    let fixed = vec![Message::system(ctx.baseline()?), Message::user(render(&[], None)? + &" ".repeat(300))];
    let mut budget = node_budget(ctx.config, &fixed, 512);
    // The estimate is conservative; should the model's context still
    // overflow, what was shown shrinks by half (twice), then the question
    // is a recorded pipeline failure rather than an error.
    for shrink in 0..3 {
        let (kept, shown) = number_nodes(&subject_first(&nodes, ctx.question, budget), budget);
        let resolution = resolve_in(&kept, order);
        trace.policy = Some(resolution.clone());
        let user = render(&shown, Some(&resolution))?;
        match synthesise(ctx, ctx.baseline()?, user.clone(), &kept, 512, &style_answers, order, &mut trace) {
            Ok(Ok((two, raw))) => {
                return Ok(Produced { nodes: kept, outcome: Ok((two, raw)), trace });
            }
            Ok(outcome) => return Ok(Produced { nodes: kept, outcome, trace }),
            Err(e) if is_overflow(&e) && shrink < 2 => {
                trace.stopped_because.push_str(&format!("; synthesis context halved after: {e}"));
                budget = halved(budget, &kept);
            }
            Err(e) if is_overflow(&e) => {
                let request = ctx.request(vec![Message::system(ctx.baseline()?), Message::user(user)], 512);
                let failure = overflow_failure(ctx, request, &e)?;
                return Ok(Produced { nodes: kept, outcome: Err(failure), trace });
            }
            Err(e) => return Err(e),
        }
    }
    unreachable!("the third shrink returns")
}

/// The context budget after a synthesis prompt overflowed the model's
/// context: half of what was shown, counted as the budget counts
/// ([`node_tokens`]), which may be far less than the budget (on an
/// endpoint whose context is unknown the budget is the 120,000 default,
/// and halving it would show the same items again).
pub(crate) fn halved(budget: usize, shown: &[Evidence]) -> usize {
    budget.min(shown.iter().map(node_tokens).sum()) / 2
}

/// A validated citation list for `two` over `nodes`.
pub(crate) fn cite(view: &RecordView<'_>, two: &TwoLine, nodes: &[Evidence]) -> Result<Vec<Citation>, ChartError> {
    two.cited.iter().map(|&n| Citation::resolve(view, n, nodes)).collect()
}

pub(crate) fn date_of(t: NaiveDateTime) -> String {
    t.format("%Y-%m-%d").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overflow_halves_what_was_shown_not_a_budget_far_larger() {
        let item = Evidence::Patient {
            patient_id: "P1".into(),
            birth_date: None,
            sex: Some("female".into()),
            as_of: chrono::NaiveDate::from_ymd_opt(2024, 1, 1).unwrap().and_hms_opt(0, 0, 0).unwrap(),
        };
        let shown = vec![item.clone(), item.clone(), item];
        let tokens: usize = shown.iter().map(node_tokens).sum();
        // An endpoint's default budget: halving it would show the same items again.
        assert_eq!(halved(120_000, &shown), tokens / 2);
        // A budget smaller than what was shown (a first item shortened to fit) halves itself.
        assert_eq!(halved(tokens - 10, &shown), (tokens - 10) / 2);
        assert_eq!(halved(1_000, &[]), 0);
    }
}
