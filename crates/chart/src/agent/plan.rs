//! Phase II: the plan, and the system prompt Phases II and III share.

use evident_llm::{chat_json, RepairPolicy, StructuredAnswer};
use evident_model::DocKind;

use super::assess::workflow_block;
use super::*;
use crate::tools::{keyword_subset, MAX_K};

/// The Phase II/III system prompt.
pub(crate) fn agent_system(ctx: &Ctx<'_>, selection: &Selection) -> Result<String, ChartError> {
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
    let vocabulary = Vocabulary::of(ctx)?;
    let labs = vocabulary.labs;
    ctx.render(
        "chart_agent_system.prompt.md",
        json!({
            "baseline": ctx.baseline()?,
            "tools": tools,
            "kinds": if vocabulary.kinds.is_empty() {
                DocKind::ALL.map(|k| k.as_str()).join(", ")
            } else {
                format!("all (no filter), {}", vocabulary.kinds.join(", "))
            },
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
///
/// Evident's constraint on top: the document kinds and lab concepts are
/// enums of what this patient has up to the reference date (a search of a
/// kind the record lacks, or a lab name it does not know, was the embedded
/// model's commonest dead end), and dates must look like dates.
pub(super) fn arguments_schema(vocabulary: &Vocabulary) -> Value {
    let text = |n: u32| json!({"type": "string", "maxLength": n});
    let one_of = |names: &[String], fallback: u32| {
        if names.is_empty() {
            text(fallback)
        } else {
            json!({"type": "string", "enum": names})
        }
    };
    let date = json!({"type": "string", "pattern": "^[12][0-9]{3}-[01][0-9]-[0-3][0-9]$"});
    // "all" (no filter) comes first: with only the record's kinds in the
    // enum, a model that writes the optional "kind" at all had to filter,
    // and the embedded model took the first kind listed (lab_report on
    // Synthea records) for nearly every search.
    let kinds = if vocabulary.kinds.is_empty() {
        text(30)
    } else {
        json!({"type": "string", "enum": std::iter::once("all".to_string()).chain(vocabulary.kinds.iter().cloned()).collect::<Vec<_>>()})
    };
    json!({"type": "object", "properties": {
        "query": text(80), "kind": kinds,
        "scope": {"type": "string", "enum": ["all", "most_recent", "on_date", "range"]},
        "date": date, "since": date, "until": date,
        "k": {"type": "integer", "minimum": 1, "maximum": MAX_K},
        "concepts": {"type": "array", "items": one_of(&vocabulary.labs, 40), "maxItems": 4},
        "record": {"type": "string", "enum": ["medications", "conditions", "procedures"]},
        "calculator": {"type": "string", "enum": crate::calculators::Calculator::ALL.map(|c| c.name())},
        "inputs": {"type": "object", "additionalProperties": {"type": ["number", "boolean"]}, "maxProperties": 6}},
        "additionalProperties": false})
}

/// What the patient's record holds up to the reference date, for the
/// prompts and the argument schema.
pub(crate) struct Vocabulary {
    pub kinds: Vec<String>,
    pub labs: Vec<String>,
}

impl Vocabulary {
    pub(crate) fn of(ctx: &Ctx<'_>) -> Result<Vocabulary, ChartError> {
        let kinds = ctx.view.available_kinds()?.into_iter().map(|k| k.as_str().to_string()).collect();
        Ok(Vocabulary { kinds, labs: ctx.view.available_lab_concepts()? })
    }
}

/// Only the arguments `tool` accepts (the shared argument schema allows
/// every tool's); what was dropped is reported.
pub(super) fn arguments_for(tool: ToolName, args: &Value, adjustments: &mut Vec<String>) -> Value {
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

fn plan_schema(ctx: &Ctx<'_>, vocabulary: &Vocabulary) -> Value {
    let tools: Vec<&str> = ctx.allowed_tools().into_iter().map(ToolName::as_str).collect();
    json!({"type": "object", "properties": {
        "steps": {"type": "array", "minItems": 1, "maxItems": ctx.config.max_plan_steps, "items": {
            "type": "object", "properties": {
                "step": {"type": "integer", "minimum": 1},
                "objective": {"type": "string", "minLength": 1, "maxLength": 80},
                "tool": {"type": "string", "enum": tools},
                "arguments": arguments_schema(vocabulary),
                "evidence_requirements": short_list_schema(2),
                "stop_rule": {"type": "string", "maxLength": 60}},
            "required": ["step", "objective", "tool", "arguments", "evidence_requirements", "stop_rule"],
            "additionalProperties": false}},
        "stop_conditions": short_list_schema(2)},
        "required": ["steps", "stop_conditions"], "additionalProperties": false})
}

/// The plan's token limit: room for four full steps (the schema bounds
/// every string), within the model's context (see [`answer_room`]).
const PLAN_TOKENS: u32 = 1024;

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
    let request = ctx.request(messages.clone(), answer_room(ctx.config, &messages, PLAN_TOKENS));
    let schema = plan_schema(ctx, &Vocabulary::of(ctx)?);
    // Three attempts in all: the first and two repairs. A prompt that does
    // not fit the model's context is a recorded pipeline failure.
    let answer = match chat_json(ctx.model, &request, &schema, RepairPolicy { repair_attempts: 2 }, ctx.prompts) {
        Err(e @ LlmError::ContextOverflow { .. }) => return Ok(Err(overflow_failure(ctx, request, &e.into())?)),
        other => other?,
    };
    match answer {
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
            conversation.push(Message::assistant(compact_plan(&plan, &raw_text)));
            Ok(Ok((plan, conversation)))
        }
        StructuredAnswer::PipelineFailure(f) => Ok(Err(f)),
    }
}

/// The plan as the conversation keeps it for Phase III: each step with only
/// the arguments its tool takes (the shared argument schema lets a small
/// model fill every tool's arguments into every step, which cost a
/// 4,096-token context several hundred tokens each round). The raw answer
/// is kept when it is already no longer.
fn compact_plan(plan: &Plan, raw_text: &str) -> String {
    let steps: Vec<Value> = plan
        .steps
        .iter()
        .map(|s| {
            let arguments = match ToolName::parse(&s.tool) {
                Some(t) => arguments_for(t, &s.arguments, &mut vec![]),
                None => s.arguments.clone(),
            };
            json!({"step": s.step, "objective": s.objective, "tool": s.tool, "arguments": arguments,
                   "evidence_requirements": s.evidence_requirements, "stop_rule": s.stop_rule})
        })
        .collect();
    let compact = json!({"steps": steps, "stop_conditions": plan.stop_conditions}).to_string();
    if compact.len() < raw_text.len() {
        compact
    } else {
        raw_text.to_string()
    }
}
