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
//!   keywords, then no date limit), and a context budget ends retrieval
//!   early. A finish before the current step ran is sent back once.
//! - Phase IV ([`synthesise`]): nodes de-duplicated and numbered, the policy
//!   engine's resolution, the style skills, two attempts at the two-line
//!   format, then a recorded pipeline failure; citations validated.
//!
//! Prompt layout: Phases II and III are one conversation (system prompt
//! with the baseline prompt, tools and workflow skills; the plan request;
//! the plan; then one exchange per round), so each request extends the
//! last one and the embedded model reuses its KV cache for the prefix.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use chrono::NaiveDateTime;
use evident_llm::{
    chat_json, ChatModel, ChatRequest, ChatResponse, LlmError, Message, PipelineFailure, Prompts, RepairPolicy,
    StructuredAnswer, StructuredModel,
};
use evident_model::DocKind;
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Mutex;

use crate::answer::{parse_two_line, TwoLine};
use crate::policy::{resolve, Resolution};
use crate::skills::{Selection, SkillCategory, SkillLibrary};
use crate::tools::{keyword_subset, Evidence, RecordView, ToolFailure, ToolName, ToolOutput, DEFAULT_K, MAX_K};
use crate::{ChartError, Citation};

/// The chart prompts, compiled in; a prompts folder may override them.
pub const CHART_PROMPTS: &[(&str, &str)] = &[
    ("chart_baseline.prompt.md", include_str!("../prompts/chart_baseline.prompt.md")),
    ("chart_assess.prompt.md", include_str!("../prompts/chart_assess.prompt.md")),
    ("chart_agent_system.prompt.md", include_str!("../prompts/chart_agent_system.prompt.md")),
    ("chart_plan.prompt.md", include_str!("../prompts/chart_plan.prompt.md")),
    ("chart_step.prompt.md", include_str!("../prompts/chart_step.prompt.md")),
    ("chart_step_reactive.prompt.md", include_str!("../prompts/chart_step_reactive.prompt.md")),
    ("chart_synthesis.prompt.md", include_str!("../prompts/chart_synthesis.prompt.md")),
    ("chart_answer_repair.prompt.md", include_str!("../prompts/chart_answer_repair.prompt.md")),
    ("chart_llm_baseline.prompt.md", include_str!("../prompts/chart_llm_baseline.prompt.md")),
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
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            max_rounds: 8,
            max_plan_steps: 4,
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
        }
    }
}

impl AgentConfig {
    /// The budget for a model whose context holds `context_tokens`: never
    /// more than the paper's 120,000 tokens nor than what leaves room for
    /// the fixed prompts and the answer.
    pub fn with_model_context(mut self, context_tokens: usize) -> Self {
        let reserve = 2_000.min(context_tokens / 2);
        self.context_budget_tokens = self.context_budget_tokens.min(context_tokens.saturating_sub(reserve));
        self.model_context_tokens = Some(context_tokens);
        self
    }
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

/// Everything the agent did for one question.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Trace {
    pub assessment: Option<Assessment>,
    pub skills: Vec<String>,
    pub plan: Option<Plan>,
    pub rounds: Vec<Round>,
    pub stopped_because: String,
    pub context_tokens: usize,
    pub policy: Option<Resolution>,
    pub synthesis_attempts: u32,
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
    pub patient: String,
}

impl Ctx<'_> {
    fn request(&self, messages: Vec<Message>, max_tokens: u32) -> ChatRequest {
        let mut r = ChatRequest::new(messages).with_max_tokens(max_tokens);
        r.temperature = self.config.temperature;
        r.seed = self.config.seed;
        r
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

fn string_list_schema() -> Value {
    short_list_schema(6)
}

/// A list of at most `n` short strings (the embedded model otherwise
/// writes until its token limit).
fn short_list_schema(n: usize) -> Value {
    json!({"type": "array", "items": {"type": "string", "maxLength": 120}, "maxItems": n})
}

/// Phase I.
pub(crate) fn assess(ctx: &Ctx<'_>) -> Result<Assessment, ChartError> {
    let selectable: Vec<Value> = ctx
        .skills
        .selectable()
        .map(|s| json!({"id": s.id, "category": format!("{:?}", s.category).to_lowercase(), "summary": s.summary}))
        .collect();
    let ids: Vec<&str> = ctx.skills.selectable().map(|s| s.id.as_str()).collect();
    let schema = json!({"type": "object", "properties": {
        "intent": {"type": "string", "maxLength": 200},
        "hypotheses": string_list_schema(),
        "required_information": string_list_schema(),
        "missing_information": string_list_schema(),
        "complexity": {"type": "string", "enum": ["low", "medium", "high"]},
        "skills": {"type": "array", "items": {"type": "string", "enum": ids}, "maxItems": 6}},
        "required": ["intent", "required_information", "missing_information", "complexity", "skills"],
        "additionalProperties": false});
    let user = ctx.render(
        "chart_assess.prompt.md",
        json!({"question": ctx.question, "as_of": ctx.as_of(), "skills": selectable}),
    )?;
    let request = ctx.request(vec![Message::system(ctx.baseline()?), Message::user(user)], 384);
    let answer = chat_json(ctx.model, &request, &schema, RepairPolicy { repair_attempts: 1 }, ctx.prompts)?;
    let mut a = match answer {
        StructuredAnswer::Valid { value, .. } => Assessment {
            intent: value["intent"].as_str().unwrap_or_default().to_string(),
            hypotheses: strings(&value, "hypotheses"),
            required_information: strings(&value, "required_information"),
            missing_information: strings(&value, "missing_information"),
            complexity: value["complexity"].as_str().unwrap_or_default().to_string(),
            chosen_skills: strings(&value, "skills"),
            ..Assessment::default()
        },
        StructuredAnswer::PipelineFailure(_) => Assessment { failed: true, ..Assessment::default() },
    };
    a.selection =
        if ctx.config.all_skills { ctx.skills.select_all() } else { ctx.skills.select(ctx.question, &a.chosen_skills) };
    Ok(a)
}

fn workflow_block(ctx: &Ctx<'_>, selection: &Selection) -> String {
    if !ctx.config.use_skills {
        return String::new();
    }
    ctx.skills.render(selection, &[SkillCategory::Workflow, SkillCategory::Parsing])
}

fn style_block(ctx: &Ctx<'_>, selection: &Selection) -> String {
    if !ctx.config.use_skills {
        return String::new();
    }
    ctx.skills.render(selection, &[SkillCategory::Style, SkillCategory::Policy])
}

/// The Phase II/III system prompt.
fn agent_system(ctx: &Ctx<'_>, selection: &Selection) -> Result<String, ChartError> {
    let tools: Vec<Value> = ctx
        .allowed_tools()
        .into_iter()
        .map(|t| {
            let mut schema = t.schema();
            if !ctx.config.use_filters {
                strip_filters(&mut schema);
            }
            let args: Vec<String> = schema["properties"]
                .as_object()
                .map(|p| {
                    let required: Vec<&str> = schema["required"]
                        .as_array()
                        .map(|r| r.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    p.keys().map(|k| if required.contains(&k.as_str()) { k.clone() } else { format!("{k}?") }).collect()
                })
                .unwrap_or_default();
            json!({"name": t.as_str(), "description": t.description(), "schema": args.join(", ")})
        })
        .collect();
    let labs = ctx.view.available_lab_concepts()?;
    ctx.render(
        "chart_agent_system.prompt.md",
        json!({
            "baseline": ctx.baseline()?,
            "tools": tools,
            "kinds": DocKind::ALL.map(|k| k.as_str()).join(", "),
            "calculators": crate::calculators::Calculator::ALL.map(|c| c.name()).join(", "),
            "labs": if labs.is_empty() { "none".to_string() } else { labs.join(", ") },
            "as_of": ctx.as_of(),
            "workflow": workflow_block(ctx, selection),
        }),
    )
}

/// The "no type and date filters" ablation: the tools lose those arguments.
fn strip_filters(schema: &mut Value) {
    if let Some(props) = schema["properties"].as_object_mut() {
        for key in ["kind", "scope", "date", "since", "until"] {
            props.remove(key);
        }
    }
}

/// The arguments of any tool as one object with known, optional
/// properties (each tool checks its own on the call). Known properties
/// keep constrained decoding fast and the arguments short.
fn arguments_schema() -> Value {
    let text = |n: u32| json!({"type": "string", "maxLength": n});
    json!({"type": "object", "properties": {
        "query": text(80), "kind": text(30),
        "scope": {"type": "string", "enum": ["all", "most_recent", "on_date", "range"]},
        "date": text(10), "since": text(10), "until": text(10),
        "k": {"type": "integer", "minimum": 1, "maximum": MAX_K},
        "concepts": {"type": "array", "items": text(40), "maxItems": 4},
        "record": {"type": "string", "enum": ["medications", "conditions", "procedures"]},
        "calculator": {"type": "string", "enum": crate::calculators::Calculator::ALL.map(|c| c.name())},
        "inputs": {"type": "object", "additionalProperties": {"type": ["number", "boolean"]}}},
        "additionalProperties": false})
}

/// Only the arguments `tool` accepts (the shared argument schema allows
/// every tool's); what was dropped is reported.
fn arguments_for(tool: ToolName, args: &Value, adjustments: &mut Vec<String>) -> Value {
    let schema = tool.schema();
    let Some(accepted) = schema["properties"].as_object() else { return args.clone() };
    let Some(given) = args.as_object() else { return args.clone() };
    let mut kept = serde_json::Map::new();
    for (k, v) in given {
        if accepted.contains_key(k) {
            kept.insert(k.clone(), v.clone());
        } else {
            adjustments.push(format!("argument {k} dropped ({} does not take it)", tool.as_str()));
        }
    }
    Value::Object(kept)
}

/// The question's content words (stopwords and answer words out), shown
/// to the planner as candidate search words.
fn question_keywords(question: &str) -> String {
    let cleaned: String = question.chars().map(|c| if c.is_alphanumeric() || c == '-' { c } else { ' ' }).collect();
    let words = keyword_subset(&crate::tools::sanitise_query(&cleaned));
    const QUESTION_WORDS: &[&str] =
        &["currently", "receiving", "ever", "received", "does", "do", "how", "many", "who", "whether"];
    words.split_whitespace().filter(|w| !QUESTION_WORDS.contains(w)).collect::<Vec<_>>().join(" ")
}

fn plan_schema(ctx: &Ctx<'_>) -> Value {
    let tools: Vec<&str> = ctx.allowed_tools().into_iter().map(ToolName::as_str).collect();
    json!({"type": "object", "properties": {
        "steps": {"type": "array", "minItems": 1, "maxItems": ctx.config.max_plan_steps, "items": {
            "type": "object", "properties": {
                "step": {"type": "integer", "minimum": 1},
                "objective": {"type": "string", "minLength": 1, "maxLength": 120},
                "tool": {"type": "string", "enum": tools},
                "arguments": arguments_schema(),
                "evidence_requirements": short_list_schema(3),
                "stop_rule": {"type": "string", "maxLength": 120}},
            "required": ["step", "objective", "tool", "arguments", "evidence_requirements", "stop_rule"],
            "additionalProperties": false}},
        "stop_conditions": short_list_schema(3)},
        "required": ["steps", "stop_conditions"], "additionalProperties": false})
}

/// Phase II; returns the plan and the conversation so far (system, plan
/// request, the plan as the assistant's answer), which Phase III extends.
pub(crate) fn plan(
    ctx: &Ctx<'_>,
    assessment: &Assessment,
) -> Result<Result<(Plan, Vec<Message>), PipelineFailure>, ChartError> {
    let system = agent_system(ctx, &assessment.selection)?;
    let summary = json!({"intent": assessment.intent, "required": assessment.required_information,
        "missing": assessment.missing_information, "complexity": assessment.complexity});
    let user = ctx.render(
        "chart_plan.prompt.md",
        json!({"question": ctx.question, "as_of": ctx.as_of(), "keywords": question_keywords(ctx.question),
               "assessment": summary.to_string(), "max_steps": ctx.config.max_plan_steps}),
    )?;
    let messages = vec![Message::system(system), Message::user(user)];
    let request = ctx.request(messages.clone(), 512);
    // Three attempts in all: the first and two repairs.
    match chat_json(ctx.model, &request, &plan_schema(ctx), RepairPolicy { repair_attempts: 2 }, ctx.prompts)? {
        StructuredAnswer::Valid { value, raw_text, attempts } => {
            let steps = value["steps"]
                .as_array()
                .expect("validated")
                .iter()
                .map(|s| PlanStep {
                    step: s["step"].as_u64().unwrap_or(0) as u32,
                    objective: s["objective"].as_str().unwrap_or_default().to_string(),
                    tool: s["tool"].as_str().unwrap_or_default().to_string(),
                    arguments: s["arguments"].clone(),
                    evidence_requirements: strings(s, "evidence_requirements"),
                    stop_rule: s["stop_rule"].as_str().unwrap_or_default().to_string(),
                })
                .collect();
            let plan = Plan { steps, stop_conditions: strings(&value, "stop_conditions"), attempts };
            let mut conversation = messages;
            conversation.push(Message::assistant(raw_text));
            Ok(Ok((plan, conversation)))
        }
        StructuredAnswer::PipelineFailure(f) => Ok(Err(f)),
    }
}

fn action_schema(ctx: &Ctx<'_>) -> Value {
    let tools: Vec<&str> = ctx.allowed_tools().into_iter().map(ToolName::as_str).collect();
    let actions: Vec<&str> =
        if ctx.config.use_plan { vec!["call_tool", "advance", "finish"] } else { vec!["call_tool", "finish"] };
    json!({"type": "object", "properties": {
        "action": {"type": "string", "enum": actions},
        "tool": {"type": "string", "enum": tools},
        "arguments": arguments_schema(),
        "still_missing": short_list_schema(4),
        "reason": {"type": "string", "maxLength": 160}},
        "required": ["action", "reason"], "additionalProperties": false})
}

/// State of Phase III across rounds.
#[derive(Default)]
struct Execution {
    nodes: Vec<Evidence>,
    keys: HashSet<String>,
    seen_calls: HashSet<String>,
    negative: HashSet<String>,
    cache: HashMap<String, ToolOutput>,
    consecutive_empty: usize,
    tokens: usize,
}

impl Execution {
    fn add(&mut self, evidence: &[Evidence]) -> usize {
        let mut added = 0;
        for e in evidence {
            if self.keys.insert(e.key()) {
                self.tokens += e.tokens();
                self.nodes.push(e.clone());
                added += 1;
            }
        }
        added
    }
}

fn canonical(v: &Value) -> String {
    // serde_json keeps insertion order; sort keys for identity.
    match v {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, String> = map.iter().map(|(k, v)| (k, canonical(v))).collect();
            format!("{{{}}}", sorted.iter().map(|(k, v)| format!("{k:?}:{v}")).collect::<Vec<_>>().join(","))
        }
        other => other.to_string(),
    }
}

/// The model-facing text of a tool output: each item shortened.
fn result_text(output: &ToolOutput, first_id: usize) -> String {
    let mut lines: Vec<String> = output
        .evidence
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let text: String = e.text().split_whitespace().collect::<Vec<_>>().join(" ");
            let short: String = text.chars().take(300).collect();
            format!(
                "E{} ({}) {}{}",
                first_id + i,
                e.header(),
                short,
                if short.len() < text.len() { " ..." } else { "" }
            )
        })
        .collect();
    if let Some(note) = &output.note {
        lines.push(format!("note: {note}"));
    }
    if lines.is_empty() {
        lines.push("nothing found".into());
    }
    lines.join("\n")
}

/// Phase III: runs the rounds, extending `conversation`.
pub(crate) fn execute(
    ctx: &Ctx<'_>,
    plan: &Plan,
    assessment: &Assessment,
    mut conversation: Vec<Message>,
    trace: &mut Trace,
) -> Result<Vec<Evidence>, ChartError> {
    let mut state = Execution::default();
    let mut memory = Memory {
        query: ctx.question.to_string(),
        evidence: vec![],
        still_missing: assessment.missing_information.clone(),
        stop_conditions: plan.stop_conditions.clone(),
    };
    let mut step_index = 0usize;
    let mut step_ran = false;
    let mut finish_repaired = false;
    let mut notice: Option<String> = None;
    let mut last_result: Option<Value> = None;
    let mut blocked_in_step = 0usize;
    let mut checked_step = usize::MAX;
    let schema = action_schema(ctx);
    trace.stopped_because = format!("the {}-round limit", ctx.config.max_rounds);
    for round in 1..=ctx.config.max_rounds {
        if state.tokens > ctx.config.context_budget_tokens {
            trace.stopped_because =
                format!("the context budget ({} of {} tokens)", state.tokens, ctx.config.context_budget_tokens);
            break;
        }
        // The next exchange (prompt and answer) must fit the model's context.
        if let Some(limit) = ctx.config.model_context_tokens {
            let used = estimate_tokens(&conversation) + 500;
            if used > limit {
                trace.stopped_because = format!("the model's context ({used} of {limit} tokens estimated)");
                break;
            }
        }
        // A planned call identical to one already made is skipped (a
        // small model's plan often repeats a step), and two blocked calls
        // in a row end the step; both show in the trace.
        if ctx.config.use_plan && blocked_in_step >= 2 {
            let s = plan.steps.get(step_index);
            let r = round_record(
                round,
                s,
                "advance (after two blocked calls)",
                None,
                None,
                vec![],
                None,
                0,
                0,
                false,
                &memory,
                "",
            );
            trace.rounds.push(r);
            step_index += 1;
            step_ran = false;
            blocked_in_step = 0;
        }
        // (Only on arriving at a step: the current step may make more calls.)
        while ctx.config.use_plan
            && step_index != checked_step
            && plan.steps.get(step_index).is_some_and(|s| {
                ToolName::parse(&s.tool).is_some_and(|t| {
                    let args = arguments_for(t, &s.arguments, &mut vec![]);
                    state.seen_calls.contains(&format!("{}:{}", t.as_str(), canonical(&args)))
                })
            })
        {
            step_index += 1;
            step_ran = false;
        }
        checked_step = step_index;
        if ctx.config.use_plan && step_index >= plan.steps.len() && !plan.steps.is_empty() {
            trace.stopped_because = "every plan step done".into();
            break;
        }
        let step = if ctx.config.use_plan { plan.steps.get(step_index) } else { None };
        let shown_memory = if ctx.config.use_memory { serde_json::to_string(&memory)? } else { "(not kept)".into() };
        let step_json = step.map(
            |s| json!({"step": s.step, "objective": s.objective, "tool": s.tool, "arguments": s.arguments.to_string()}),
        );
        let prompt_name = if ctx.config.use_plan { "chart_step.prompt.md" } else { "chart_step_reactive.prompt.md" };
        let user = ctx.render(
            prompt_name,
            json!({"notice": notice.take(), "result": last_result.take(), "memory": shown_memory, "step": step_json,
                   "steps": plan.steps.len(), "round": round, "max_rounds": ctx.config.max_rounds, "question": ctx.question}),
        )?;
        conversation.push(Message::user(user));
        let request = ctx.request(conversation.clone(), 256);
        let answer = chat_json(ctx.model, &request, &schema, RepairPolicy { repair_attempts: 1 }, ctx.prompts)?;
        let (action, raw) = match answer {
            StructuredAnswer::Valid { value, raw_text, .. } => (value, raw_text),
            StructuredAnswer::PipelineFailure(f) => {
                trace.rounds.push(round_record(
                    round,
                    step,
                    "invalid",
                    None,
                    None,
                    vec![],
                    None,
                    0,
                    0,
                    false,
                    &memory,
                    &f.errors.join("; "),
                ));
                trace.stopped_because = "an action that never validated (recorded as a pipeline failure)".into();
                break;
            }
        };
        conversation.push(Message::assistant(raw));
        if let Some(missing) = action["still_missing"].as_array() {
            memory.still_missing = missing.iter().filter_map(|m| m.as_str().map(str::to_string)).collect();
        }
        let reason = action["reason"].as_str().unwrap_or_default().to_string();
        let kind = action["action"].as_str().unwrap_or_default().to_string();
        match kind.as_str() {
            "finish" => {
                let planned_left = ctx.config.use_plan && step.is_some() && !step_ran;
                if planned_left && !finish_repaired {
                    finish_repaired = true;
                    let n = notice.insert(format!(
                        "step {} has not run yet: call its tool ({}) or choose \"advance\" to skip it explicitly",
                        step.map(|s| s.step).unwrap_or(0),
                        step.map(|s| s.tool.as_str()).unwrap_or("")
                    ));
                    let n = n.clone();
                    trace.rounds.push(round_record(
                        round,
                        step,
                        "finish (sent back)",
                        None,
                        None,
                        vec![],
                        Some(n),
                        0,
                        0,
                        false,
                        &memory,
                        &reason,
                    ));
                    continue;
                }
                trace.rounds.push(round_record(
                    round,
                    step,
                    "finish",
                    None,
                    None,
                    vec![],
                    None,
                    0,
                    0,
                    false,
                    &memory,
                    &reason,
                ));
                trace.stopped_because = "the model finished".into();
                break;
            }
            "advance" => {
                step_index += 1;
                step_ran = false;
                blocked_in_step = 0;
                finish_repaired = false;
                trace.rounds.push(round_record(
                    round,
                    step,
                    "advance",
                    None,
                    None,
                    vec![],
                    None,
                    0,
                    0,
                    false,
                    &memory,
                    &reason,
                ));
                if ctx.config.use_plan && step_index >= plan.steps.len() {
                    trace.stopped_because = "every plan step done".into();
                    break;
                }
            }
            _ => {
                let mut adjustments = Vec::new();
                let tool_name = action["tool"].as_str().map(str::to_string).or_else(|| {
                    let t = step.map(|s| s.tool.clone());
                    if t.is_some() {
                        adjustments.push("tool taken from the plan step".to_string());
                    }
                    t
                });
                let Some(tool) = tool_name.as_deref().and_then(ToolName::parse) else {
                    let n = format!(
                        "\"call_tool\" needs a \"tool\", one of {}",
                        ctx.allowed_tools().iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
                    );
                    trace.rounds.push(round_record(
                        round,
                        step,
                        "call_tool",
                        tool_name.clone(),
                        None,
                        adjustments,
                        Some(n.clone()),
                        0,
                        0,
                        false,
                        &memory,
                        &reason,
                    ));
                    notice = Some(n);
                    continue;
                };
                let mut args = match action.get("arguments") {
                    Some(a) if a.as_object().is_some_and(|o| !o.is_empty()) => a.clone(),
                    _ => match step.filter(|s| s.tool == tool.as_str()) {
                        Some(s) => {
                            adjustments.push("arguments taken from the plan step".to_string());
                            s.arguments.clone()
                        }
                        None => json!({}),
                    },
                };
                args = arguments_for(tool, &args, &mut adjustments);
                if !ctx.config.use_filters {
                    if let Some(o) = args.as_object_mut() {
                        for key in ["kind", "scope", "date", "since", "until"] {
                            o.remove(key);
                        }
                    }
                }
                let identity = format!("{}:{}", tool.as_str(), canonical(&args));
                if state.seen_calls.contains(&identity) || state.negative.contains(&identity) {
                    let n = if state.negative.contains(&identity) {
                        format!("{} {} already returned nothing; change the query or its scope", tool.as_str(), args)
                    } else {
                        format!("{} {} was already called; its result is above; do something else", tool.as_str(), args)
                    };
                    trace.rounds.push(round_record(
                        round,
                        step,
                        "call_tool (blocked)",
                        Some(tool.as_str().into()),
                        Some(args),
                        adjustments,
                        Some(n.clone()),
                        0,
                        0,
                        false,
                        &memory,
                        &reason,
                    ));
                    notice = Some(n);
                    blocked_in_step += 1;
                    continue;
                }
                state.seen_calls.insert(identity.clone());
                blocked_in_step = 0;
                // Broadening after repeated empty report searches.
                if tool == ToolName::SearchReports && state.consecutive_empty > 0 {
                    broaden(&mut args, state.consecutive_empty, &mut adjustments);
                }
                let cache_key = format!("{}:{}", tool.as_str(), canonical(&args));
                let (output, cached) = match state.cache.get(&cache_key) {
                    Some(o) => (o.clone(), true),
                    None => {
                        let o = match ctx.view.run(tool, &args) {
                            Ok(o) => o,
                            Err(ToolFailure::Refused(e)) => ToolOutput { evidence: vec![], note: Some(e.0) },
                            Err(ToolFailure::Store(e)) => return Err(e.into()),
                        };
                        state.cache.insert(cache_key, o.clone());
                        (o, false)
                    }
                };
                step_ran = true;
                if tool == ToolName::SearchReports {
                    if output.evidence.is_empty() {
                        state.consecutive_empty += 1;
                        state.negative.insert(identity);
                    } else {
                        state.consecutive_empty = 0;
                    }
                }
                let first_id = state.nodes.len() + 1;
                let added = state.add(&output.evidence);
                for e in state.nodes.iter().skip(first_id - 1) {
                    let text: String = e.text().chars().take(80).collect();
                    memory.evidence.push(format!(
                        "{} ({}): {}",
                        tool.as_str(),
                        e.header(),
                        text.split_whitespace().collect::<Vec<_>>().join(" ")
                    ));
                }
                last_result = Some(
                    json!({"tool": tool.as_str(), "arguments": args.to_string(), "text": result_text(&output, first_id)}),
                );
                trace.rounds.push(round_record(
                    round,
                    step,
                    "call_tool",
                    Some(tool.as_str().into()),
                    Some(args),
                    adjustments,
                    output.note.clone(),
                    output.evidence.len(),
                    added,
                    cached,
                    &memory,
                    &reason,
                ));
            }
        }
    }
    trace.context_tokens = state.tokens;
    Ok(state.nodes)
}

/// A conservative token estimate for messages (3.5 characters a token, for
/// clinical text and JSON, plus the chat template's few tokens each).
pub(crate) fn estimate_tokens(messages: &[Message]) -> usize {
    messages.iter().map(|m| (m.content.len() * 2).div_ceil(7) + 8).sum()
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

/// The paper's broadening: after one empty result k doubles (cap 30),
/// after two the query is cut to its keywords, after three the temporal
/// scope goes.
fn broaden(args: &mut Value, empties: usize, adjustments: &mut Vec<String>) {
    let k = args["k"].as_u64().unwrap_or(DEFAULT_K as u64) as usize;
    let doubled = (k * 2).min(MAX_K);
    args["k"] = json!(doubled);
    adjustments.push(format!("k {k} -> {doubled} after an empty result"));
    if empties >= 2 {
        if let Some(q) = args["query"].as_str() {
            let reduced = keyword_subset(q);
            if !reduced.is_empty() && reduced != q {
                adjustments.push(format!("query reduced to its keywords {reduced:?}"));
                args["query"] = json!(reduced);
            }
        }
    }
    if empties >= 3 {
        if let Some(o) = args.as_object_mut() {
            for key in ["scope", "date", "since", "until"] {
                if o.remove(key).is_some() {
                    adjustments.push(format!("{key} removed"));
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn round_record(
    round: usize,
    step: Option<&PlanStep>,
    action: &str,
    tool: Option<String>,
    arguments: Option<Value>,
    adjustments: Vec<String>,
    notice: Option<String>,
    evidence_found: usize,
    new_evidence: usize,
    cached: bool,
    memory: &Memory,
    reason: &str,
) -> Round {
    Round {
        round,
        plan_step: step.map(|s| s.step),
        action: action.into(),
        tool,
        arguments,
        adjustments,
        notice,
        evidence_found,
        new_evidence,
        cached,
        memory: memory.clone(),
        reason: reason.into(),
    }
}

/// A numbered node as the synthesis prompt shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ShownNode {
    pub number: usize,
    pub header: String,
    pub text: String,
}

/// Numbers the nodes (de-duplicated by key; sections by section id) and
/// shortens them to fit `budget_tokens` in all, newest first kept whole.
pub(crate) fn number_nodes(nodes: &[Evidence], budget_tokens: usize) -> (Vec<Evidence>, Vec<ShownNode>) {
    let mut seen = BTreeSet::new();
    let unique: Vec<Evidence> = nodes.iter().filter(|n| seen.insert(n.key())).cloned().collect();
    let mut used = 0usize;
    let mut kept = Vec::new();
    let mut shown = Vec::new();
    for n in unique {
        let t = (n.text().len() + n.header().len()).div_ceil(3) + 6;
        if used + t > budget_tokens && !kept.is_empty() {
            break;
        }
        used += t;
        kept.push(n.clone());
        shown.push(ShownNode {
            number: kept.len(),
            header: n.header(),
            text: n.text().split_whitespace().collect::<Vec<_>>().join(" "),
        });
    }
    (kept, shown)
}

/// Phase IV (and every comparator's answer step): asks for the two-line
/// answer, repairing once, then records a pipeline failure.
pub(crate) fn synthesise(
    ctx: &Ctx<'_>,
    system: String,
    user: String,
    max_tokens: u32,
    trace: &mut Trace,
) -> Result<Result<(TwoLine, String), PipelineFailure>, ChartError> {
    let mut messages = vec![Message::system(system), Message::user(user)];
    let mut last_error = String::new();
    for attempt in 1..=2u32 {
        let request = ctx.request(messages.clone(), max_tokens);
        let response = ctx.model.chat.chat(&request)?;
        trace.synthesis_attempts = attempt;
        match parse_two_line(&response.text) {
            Ok(two) => return Ok(Ok((two, response.text))),
            Err(e) => {
                last_error = e.0.clone();
                if attempt == 2 {
                    let failure = PipelineFailure {
                        model: ctx.model.model_id().to_string(),
                        raw_text: response.text,
                        errors: vec![last_error.clone()],
                        attempts: 2,
                        request,
                    };
                    ctx.model.failures.record_pipeline_failure(&failure)?;
                    return Ok(Err(failure));
                }
                messages.push(Message::assistant(response.text));
                messages.push(Message::user(ctx.render("chart_answer_repair.prompt.md", json!({"error": e.0}))?));
            }
        }
    }
    unreachable!("the loop returns on its second attempt ({last_error})")
}

/// The full agent for one question.
pub(crate) fn run_agent(ctx: &Ctx<'_>) -> Result<Produced, ChartError> {
    let mut trace = Trace::default();
    let assessment = assess(ctx)?;
    trace.skills = if ctx.config.use_skills { assessment.selection.ids.clone() } else { vec![] };
    trace.assessment = Some(assessment.clone());
    let (plan, conversation) = if ctx.config.use_plan {
        match plan(ctx, &assessment)? {
            Ok(p) => p,
            Err(failure) => {
                trace.stopped_because = "the plan never validated in three attempts (pipeline failure)".into();
                return Ok(Produced { nodes: vec![], outcome: Err(failure), trace });
            }
        }
    } else {
        let system = agent_system(ctx, &assessment.selection)?;
        let task = format!("Question: {}\nReference date: {}\nPatient: {}", ctx.question, ctx.as_of(), ctx.patient);
        (Plan::default(), vec![Message::system(system), Message::user(task), Message::assistant("Ready.")])
    };
    trace.plan = Some(plan.clone());
    let nodes = execute(ctx, &plan, &assessment, conversation, &mut trace)?;
    let style = style_block(ctx, &assessment.selection);
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
    let (nodes, shown) = number_nodes(&nodes, node_budget(ctx.config, &fixed, 512));
    let resolution = resolve(&nodes);
    trace.policy = Some(resolution.clone());
    let user = render(&shown, Some(&resolution))?;
    let outcome = synthesise(ctx, ctx.baseline()?, user, 512, &mut trace)?;
    Ok(Produced { nodes, outcome, trace })
}

/// A validated citation list for `two` over `nodes`.
pub(crate) fn cite(view: &RecordView<'_>, two: &TwoLine, nodes: &[Evidence]) -> Result<Vec<Citation>, ChartError> {
    two.cited.iter().map(|&n| Citation::resolve(view, n, nodes)).collect()
}

pub(crate) fn date_of(t: NaiveDateTime) -> String {
    t.format("%Y-%m-%d").to_string()
}
