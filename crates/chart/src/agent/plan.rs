//! Phase II: the plan, and the system prompt Phases II and III share.

use std::collections::BTreeSet;

use evident_llm::SchemaValidator;
use evident_model::DocKind;

use super::assess::{workflow_block, EXECUTION_SKILLS};
use super::*;
use crate::bank::AnswerType;
use crate::calculators::tables::NUMERIC_INPUTS;
use crate::calculators::Calculator;
use crate::tools::{question_keywords, MAX_K};

/// The Phase II/III system prompt; the skills in `summarised` show only
/// their summary (see [`plan`]).
pub(crate) fn agent_system(
    ctx: &Ctx<'_>,
    selection: &Selection,
    summarised: &BTreeSet<String>,
) -> Result<String, ChartError> {
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
            "workflow": workflow_block(ctx, selection, summarised),
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
    json!({"type": "object", "properties": argument_properties(vocabulary), "additionalProperties": false})
}

/// Every tool argument's schema, by name (see [`arguments_schema`]).
fn argument_properties(vocabulary: &Vocabulary) -> serde_json::Map<String, Value> {
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
    let properties = json!({
        "query": text(80), "kind": kinds,
        "scope": {"type": "string", "enum": ["all", "most_recent", "on_date", "range"]},
        "date": date, "since": date, "until": date,
        "k": {"type": "integer", "minimum": 1, "maximum": MAX_K},
        "concepts": {"type": "array", "items": one_of(&vocabulary.labs, 40), "maxItems": 4},
        "record": {"type": "string", "enum": ["medications", "conditions", "procedures"]},
        "calculator": {"type": "string", "enum": Calculator::ALL.map(|c| c.name())},
        "inputs": {"type": "object", "additionalProperties": {"type": ["number", "boolean"]}, "maxProperties": 6}});
    match properties {
        Value::Object(map) => map,
        _ => unreachable!("an object literal"),
    }
}

/// Evident's typed plan (on with [`AgentConfig::typed_plan`]): the
/// arguments one tool takes, with the record's enums; a filter-free
/// ablation loses the filters, as its system prompt does. A calculator's
/// arguments are one schema per calculator: its id and only its own
/// inputs, none required (the tool reads stored labs and names what is
/// still missing).
fn tool_arguments_schema(ctx: &Ctx<'_>, tool: ToolName, properties: &serde_json::Map<String, Value>) -> Value {
    if tool == ToolName::Calculate {
        return json!({"anyOf": plan_calculators(ctx).into_iter().map(calculator_arguments_schema).collect::<Vec<_>>()});
    }
    let mut schema = tool.schema();
    if !ctx.config.use_filters {
        strip_filters(&mut schema);
    }
    let accepted: serde_json::Map<String, Value> = schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, _)| properties.get(k).map(|p| (k.clone(), p.clone())))
        .collect();
    json!({"type": "object", "properties": accepted, "required": schema["required"].clone(), "additionalProperties": false})
}

/// A calculate call's arguments for one calculator.
fn calculator_arguments_schema(calculator: Calculator) -> Value {
    // No "maxProperties": llguidance takes it only when every listed
    // property is required; the listed inputs bound the object anyway.
    // The numbers the tool reads from the record are not offered: one the
    // call gives is never used (the embedded model typed a weight of 1 kg).
    let mut inputs = calculator.input_schema();
    if let Some(o) = inputs.as_object_mut() {
        o.remove("required");
    }
    if let Some(props) = inputs["properties"].as_object_mut() {
        props.retain(|k, _| !NUMERIC_INPUTS.contains(&k.as_str()));
    }
    json!({"type": "object", "properties": {"calculator": {"const": calculator.name()}, "inputs": inputs},
           "required": ["calculator"], "additionalProperties": false})
}

/// One plan step's schema with `arguments` as given.
fn step_schema(tool: Value, arguments: Value) -> Value {
    json!({"type": "object", "properties": {
        "step": {"type": "integer", "minimum": 1},
        "objective": {"type": "string", "minLength": 1, "maxLength": 80},
        "tool": tool,
        "arguments": arguments,
        "evidence_requirements": short_list_schema(2),
        "stop_rule": {"type": "string", "maxLength": 60}},
        "required": ["step", "objective", "tool", "arguments", "evidence_requirements", "stop_rule"],
        "additionalProperties": false})
}

/// Whether `question` names `calculator` (its usual label as a word, case
/// ignored; "ISS" inside "R-ISS" or "R2-ISS" does not count). The rewrite
/// of a retrieval call into a calculator call is made only then: the
/// embedded model also wrote `"calculator": "iss"` into report searches
/// of questions about a colon polyp.
pub fn question_names(question: &str, calculator: Calculator) -> bool {
    let labels: &[&str] = match calculator {
        Calculator::Iss => &["iss", "international staging system"],
        Calculator::RIss => &["r-iss", "revised iss"],
        Calculator::R2Iss => &["r2-iss"],
        Calculator::HctCi => &["hct-ci"],
        Calculator::Charlson => &["charlson"],
        Calculator::Cha2ds2Vasc => &["cha2ds2-vasc"],
        // A question for the G stage takes the record's eGFR: its "eGFR"
        // names the stage's source, not a computation from creatinine.
        Calculator::EgfrCkdEpi2021 if question_names(question, Calculator::CkdGStage) => &["ckd-epi"],
        Calculator::EgfrCkdEpi2021 => &["egfr", "ckd-epi"],
        Calculator::Bmi => &["bmi", "body mass index"],
        Calculator::CkdGStage => &["ckd g stage", "g stage", "gfr category", "ckd stage", "kdigo stage"],
        Calculator::GlycaemicRange => &[
            "glycaemic range",
            "glycemic range",
            "glycaemic category",
            "glycemic category",
            "hba1c range",
            "hba1c category",
            "a1c range",
            "a1c category",
        ],
    };
    let text = question.to_lowercase();
    let bytes = text.as_bytes();
    let boundary = |b: Option<&u8>| b.is_none_or(|b| !(b.is_ascii_alphanumeric() || *b == b'-'));
    labels.iter().any(|label| {
        text.match_indices(label).any(|(i, _)| {
            boundary(if i == 0 { None } else { bytes.get(i - 1) }) && boundary(bytes.get(i + label.len()))
        })
    })
}

/// The retrieval tool arguments that name a calculator (a small model's
/// way of planning one, seen on the embedded model: `query_labs` with
/// `"calculator": "r-iss"`): the calculator and the arguments of the
/// calculate call it stands for (its inputs kept where the calculator
/// takes them and they are numbers or flags).
pub(super) fn calculator_named(tool: ToolName, args: &Value) -> Option<(Calculator, Value)> {
    if tool == ToolName::Calculate {
        return None;
    }
    let calculator = Calculator::from_name(args.get("calculator")?.as_str()?)?;
    Some((calculator, calculator_call(calculator, args)))
}

/// The calculate call for `calculator` that retrieval arguments stand for:
/// their inputs kept where the calculator takes them and they are numbers
/// or flags.
pub(super) fn calculator_call(calculator: Calculator, args: &Value) -> Value {
    let takes = calculator.input_schema();
    let inputs: serde_json::Map<String, Value> = args
        .get("inputs")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(k, v)| takes["properties"].get(k.as_str()).is_some() && (v.is_number() || v.is_boolean()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut call = json!({"calculator": calculator.name()});
    if !inputs.is_empty() {
        call["inputs"] = Value::Object(inputs);
    }
    call
}

/// The calculate call meant by retrieval arguments that name a calculator,
/// given the question: that calculator where the question names it, else
/// the one calculator the question names (the embedded model wrote
/// `"calculator": "r-iss"` into every action of a CHA2DS2-VASc question:
/// the calculator enum's first entries), else none.
pub(super) fn calculation_meant(tool: ToolName, args: &Value, question: &str) -> Option<(Calculator, Value)> {
    let (named, call) = calculator_named(tool, args)?;
    if question_names(question, named) {
        return Some((named, call));
    }
    let mut asked = Calculator::ALL.into_iter().filter(|c| question_names(question, *c));
    let only = asked.next()?;
    asked.next().is_none().then(|| (only, calculator_call(only, args)))
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

/// The plan's schema. The paper's (`agent-paper-plan`): every step's
/// `tool` one of the tools and its `arguments` one object with every
/// tool's arguments. Evident's typed plan: each step one of the tools'
/// step schemas, so `arguments` holds only what its `tool` takes (a
/// decoding under the schema cannot put a calculator id into a retrieval
/// tool's arguments) and a calculate step's `calculator` is one of the
/// loaded calculators with only its own inputs.
fn plan_schema(ctx: &Ctx<'_>, vocabulary: &Vocabulary) -> Value {
    let items = if ctx.config.typed_plan {
        json!({"anyOf": typed_steps(ctx, vocabulary).into_iter().map(|(_, s)| s).collect::<Vec<_>>()})
    } else {
        let tools: Vec<&str> = ctx.allowed_tools().into_iter().map(ToolName::as_str).collect();
        step_schema(json!({"type": "string", "enum": tools}), arguments_schema(vocabulary))
    };
    json!({"type": "object", "properties": {
        "steps": {"type": "array", "minItems": 1, "maxItems": ctx.config.max_plan_steps, "items": items},
        "stop_conditions": short_list_schema(2)},
        "required": ["steps", "stop_conditions"], "additionalProperties": false})
}

/// The typed plan's step schema of each allowed tool; a calculate step
/// only when the question calls for a calculator ([`plan_calculators`]).
fn typed_steps(ctx: &Ctx<'_>, vocabulary: &Vocabulary) -> Vec<(ToolName, Value)> {
    let properties = argument_properties(vocabulary);
    let calculators = plan_calculators(ctx);
    ctx.allowed_tools()
        .into_iter()
        .filter(|t| *t != ToolName::Calculate || !calculators.is_empty())
        .map(|t| (t, step_schema(json!({"const": t.as_str()}), tool_arguments_schema(ctx, t, &properties))))
        .collect()
}

/// The calculators a typed plan may call: none for a question asking for
/// a date, dates or intervals (a calculator gives a value, never a date;
/// "Body mass index 30+ - obesity (finding)" names the BMI calculator in
/// an intervals question); else those the question names; when it names
/// none, every one if the question asks for a score or its answer type is
/// not given, and none for a yes/no or category question. A 0.5B plan for "is there documented evidence that an
/// echocardiogram has been performed?" added an ISS step and typed an
/// albumin of hundreds of digits until its token limit, three times, a
/// pipeline failure (docs/evaluation.md, `f9aef24a-G13`).
pub(crate) fn plan_calculators(ctx: &Ctx<'_>) -> Vec<Calculator> {
    let named: Vec<Calculator> = Calculator::ALL.into_iter().filter(|&c| question_names(ctx.question, c)).collect();
    match ctx.answer_type {
        Some(t) if asks_for_dates(t) => Vec::new(),
        _ if !named.is_empty() => named,
        None | Some(AnswerType::Score) => Calculator::ALL.to_vec(),
        Some(_) => Vec::new(),
    }
}

/// Whether an answer type asks for a date, dates or intervals.
pub(crate) fn asks_for_dates(t: AnswerType) -> bool {
    matches!(t, AnswerType::Date | AnswerType::DateList | AnswerType::IntervalList)
}

/// At most this many validation errors, each cut to [`ERROR_CHARS`], go
/// into a repair turn (an enum's error lists every allowed value).
const MAX_ERRORS: usize = 6;
const ERROR_CHARS: usize = 240;

/// Phase II; returns the plan and the conversation so far (system, plan
/// request, the plan as the assistant's answer), which Phase III extends.
///
/// Three attempts in all (the first and two repairs), then a recorded
/// pipeline failure. A repair turn carries the validation errors only (the
/// plan request already says what a plan is, and the schema constrains
/// decoding), after the invalid answer. On a model with a known context,
/// each request is fitted before it is sent, deterministically: a repair
/// first leaves out its copy of the invalid answer (the errors stay), then
/// the workflow and parsing skills show their summaries instead of their
/// instructions, lowest priority first ([`SkillLibrary::by_priority`]);
/// every shortening is listed in [`Trace::prompt_shortened`]. A request
/// that still does not fit is a recorded pipeline failure that says so,
/// and the model is not called.
pub(crate) fn plan(
    ctx: &Ctx<'_>,
    assessment: &Assessment,
    trace: &mut Trace,
) -> Result<Result<(Plan, Vec<Message>), PipelineFailure>, ChartError> {
    let selection = &assessment.selection;
    let summary = json!({"intent": assessment.intent, "required": assessment.required_information,
        "missing": assessment.missing_information, "complexity": assessment.complexity});
    let user = ctx.render(
        "chart_plan.prompt.md",
        json!({"question": ctx.question, "as_of": ctx.as_of(), "keywords": question_keywords(ctx.question),
               "assessment": summary.to_string(), "max_steps": ctx.config.max_plan_steps}),
    )?;
    let vocabulary = Vocabulary::of(ctx)?;
    let schema = plan_schema(ctx, &vocabulary);
    let validator = SchemaValidator::new(&schema)?;
    let typed = if ctx.config.typed_plan { Some(typed_steps(ctx, &vocabulary)) } else { None };
    let mut lowest_first = if ctx.config.use_skills {
        ctx.skills.by_priority(selection, &EXECUTION_SKILLS, ctx.question, &assessment.chosen_skills)
    } else {
        vec![]
    };
    lowest_first.reverse();
    let mut summarised = BTreeSet::new();
    let mut last: Option<(String, Vec<String>)> = None;
    const ATTEMPTS: u32 = 3;
    for attempt in 1..=ATTEMPTS {
        let label = if attempt == 1 { "plan request".to_string() } else { format!("plan repair {}", attempt - 1) };
        // The plan request's system prompt and request stay Phase III's
        // prefix: it leaves room for the plan and a first round too.
        let extra = if attempt == 1 { super::execute::ROUND_ROOM } else { 0 };
        let fitted = Fitting { ctx, selection, user: &user, lowest_first: &lowest_first, label: &label, extra };
        let messages = match fitted.fit(last.as_ref(), &mut summarised, &mut trace.prompt_shortened)? {
            Ok(m) => m,
            Err((why, messages)) => {
                let failure = PipelineFailure {
                    model: ctx.model.model_id().to_string(),
                    raw_text: last.map(|(raw, _)| raw).unwrap_or_default(),
                    errors: vec![why.clone()],
                    attempts: attempt - 1,
                    request: ctx.request(messages, ctx.config.plan_tokens),
                };
                ctx.model.failures.record_pipeline_failure(&failure)?;
                trace.stopped_because = format!("{why} (pipeline failure; the model was not called)");
                return Ok(Err(failure));
            }
        };
        let mut request = ctx.request(messages.clone(), answer_room(ctx.config, &messages, ctx.config.plan_tokens));
        request.json_schema = Some(schema.clone());
        let response = match ctx.model.chat.chat(&request) {
            Err(e @ LlmError::ContextOverflow { .. }) => {
                trace.stopped_because = format!("the {label} overflowed the model's context (pipeline failure)");
                return Ok(Err(overflow_failure(ctx, request, &e.into())?));
            }
            other => other?,
        };
        let checked = match &typed {
            Some(steps) => {
                check_typed(&validator, steps, &response.text, attempt, ctx.question, &mut trace.plan_rewrites)
            }
            None => validator.check(&response.text),
        };
        match checked {
            Ok(value) => {
                let plan = Plan {
                    steps: plan_steps(&value),
                    stop_conditions: strings(&value, "stop_conditions"),
                    attempts: attempt,
                };
                let raw = if ctx.config.typed_plan { value.to_string() } else { response.text.clone() };
                let conversation =
                    vec![messages[0].clone(), Message::user(user), Message::assistant(compact_plan(&plan, &raw))];
                return Ok(Ok((plan, conversation)));
            }
            Err(mut errors) => {
                if !response.is_complete() {
                    errors.insert(
                        0,
                        format!(
                            "the answer was cut off at the token limit after {} tokens, before it was complete; \
                             keep every text field short and the plan to few steps",
                            response.completion_tokens
                        ),
                    );
                }
                if attempt == ATTEMPTS {
                    let failure = PipelineFailure {
                        model: ctx.model.model_id().to_string(),
                        raw_text: response.text,
                        errors,
                        attempts: attempt,
                        request,
                    };
                    ctx.model.failures.record_pipeline_failure(&failure)?;
                    trace.stopped_because = "the plan never validated in three attempts (pipeline failure)".into();
                    return Ok(Err(failure));
                }
                last = Some((response.text, errors));
            }
        }
    }
    unreachable!("the last attempt returns")
}

fn plan_steps(value: &Value) -> Vec<PlanStep> {
    value["steps"]
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
        .collect()
}

/// Validation of a typed plan. First, a retrieval step whose arguments
/// name a calculator becomes that calculator's step (Evident's rewrite,
/// listed in `rewrites`; a model decoding under the typed schema cannot
/// write one, a model that does not can). Then the schema; a step that
/// does not validate is explained against its own tool's schema (the
/// validator's own error for a step is only that it matches none).
fn check_typed(
    validator: &SchemaValidator,
    steps: &[(ToolName, Value)],
    text: &str,
    attempt: u32,
    question: &str,
    rewrites: &mut Vec<String>,
) -> Result<Value, Vec<String>> {
    let mut value = match validator.check(text) {
        Ok(v) => return Ok(v),
        // Not JSON at all: nothing to rewrite or explain.
        Err(e) if e.len() == 1 && e[0].starts_with("the answer is not JSON") => return Err(e),
        Err(_) => serde_json::from_str::<Value>(strip_fence(text)).map_err(|e| vec![e.to_string()])?,
    };
    let mut rewritten = vec![];
    if let Some(items) = value["steps"].as_array_mut() {
        for (i, step) in items.iter_mut().enumerate() {
            let Some(tool) = step["tool"].as_str().and_then(ToolName::parse) else { continue };
            if !steps.iter().any(|(t, _)| *t == ToolName::Calculate) {
                continue;
            }
            if let Some((calculator, call)) = calculation_meant(tool, &step["arguments"], question) {
                rewritten.push(format!(
                    "plan attempt {attempt}, step {}: {} arguments named the calculator {}; made a calculate step \
                     (Evident's rewrite, not the paper's)",
                    i + 1,
                    tool.as_str(),
                    calculator.name()
                ));
                step["tool"] = json!("calculate");
                step["arguments"] = call;
            }
        }
    }
    let errors = match validator.check(&value.to_string()) {
        Ok(v) => {
            rewrites.extend(rewritten);
            return Ok(v);
        }
        Err(e) => e,
    };
    rewrites.extend(rewritten);
    let mut out: Vec<String> = errors.into_iter().filter(|e| !e.starts_with("at /steps/")).collect();
    let names: Vec<&str> = steps.iter().map(|(t, _)| t.as_str()).collect();
    for (i, step) in value["steps"].as_array().into_iter().flatten().enumerate() {
        let tool = step["tool"].as_str().unwrap_or_default();
        let Some((t, schema)) = steps.iter().find(|(t, _)| t.as_str() == tool) else {
            out.push(format!("step {}: \"tool\" must be one of {}", i + 1, names.join(", ")));
            continue;
        };
        // A calculate step is explained against its named calculator's schema.
        let specific = match (t, step["arguments"]["calculator"].as_str().and_then(Calculator::from_name)) {
            (ToolName::Calculate, Some(c)) => {
                step_schema(json!({"const": "calculate"}), calculator_arguments_schema(c))
            }
            (ToolName::Calculate, None) => {
                out.push(format!(
                    "step {}: a calculate step's \"calculator\" must be one of {}",
                    i + 1,
                    Calculator::ALL.map(|c| c.name()).join(", ")
                ));
                continue;
            }
            _ => schema.clone(),
        };
        if let Err(es) =
            SchemaValidator::new(&specific).map_err(|e| vec![e.to_string()]).and_then(|v| v.check(&step.to_string()))
        {
            out.extend(es.into_iter().map(|e| format!("step {}: {e}", i + 1)));
        }
    }
    Err(out)
}

fn strip_fence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else { return t };
    let Some(rest) = rest.strip_suffix("```") else { return t };
    match rest.find('\n') {
        Some(n) => rest[n + 1..].trim(),
        None => rest.trim(),
    }
}

/// One plan request to fit into the model's context.
struct Fitting<'a> {
    ctx: &'a Ctx<'a>,
    selection: &'a Selection,
    user: &'a str,
    lowest_first: &'a [String],
    label: &'a str,
    /// Room beyond the plan's (the plan request's: Phase III's first round).
    extra: usize,
}

impl Fitting<'_> {
    /// The request's messages, shortened until they fit with room for the
    /// plan (see [`plan`]); or why they cannot, with the shortest request.
    #[allow(clippy::type_complexity)]
    fn fit(
        &self,
        repair: Option<&(String, Vec<String>)>,
        summarised: &mut BTreeSet<String>,
        notes: &mut Vec<String>,
    ) -> Result<Result<Vec<Message>, (String, Vec<Message>)>, ChartError> {
        let ctx = self.ctx;
        let repair_text = match repair {
            Some((_, errors)) => {
                let shown: Vec<String> = errors
                    .iter()
                    .take(MAX_ERRORS)
                    .map(|e| {
                        let cut: String = e.chars().take(ERROR_CHARS).collect();
                        if cut.len() < e.len() {
                            cut + " ..."
                        } else {
                            cut
                        }
                    })
                    .collect();
                let calculators = if ctx.config.use_calculators {
                    Calculator::ALL.map(|c| c.name()).join(", ")
                } else {
                    String::new()
                };
                Some(ctx.render(
                    "chart_plan_repair.prompt.md",
                    json!({"errors": shown, "more": errors.len().saturating_sub(MAX_ERRORS), "calculators": calculators}),
                )?)
            }
            None => None,
        };
        let mut with_answer = repair.is_some();
        loop {
            let system = Message::system(agent_system(ctx, self.selection, summarised)?);
            let messages = match (repair, &repair_text) {
                (Some((raw, _)), Some(text)) if with_answer => {
                    vec![
                        system,
                        Message::user(self.user),
                        Message::assistant(raw.as_str()),
                        Message::user(text.as_str()),
                    ]
                }
                (Some(_), Some(text)) => vec![system, Message::user(format!("{}\n\n{text}", self.user))],
                _ => vec![system, Message::user(self.user)],
            };
            let Some(limit) = ctx.config.model_context_tokens else { return Ok(Ok(messages)) };
            let room = ctx.config.plan_tokens;
            let needed = estimate_tokens(&messages) + room as usize + self.extra;
            if needed <= limit {
                return Ok(Ok(messages));
            }
            let over = if self.extra > 0 {
                format!(
                    "{needed} of {limit} tokens estimated, with room for a {room}-token plan and a first round of {}",
                    self.extra
                )
            } else {
                format!("{needed} of {limit} tokens estimated, with room for a {room}-token plan")
            };
            if with_answer {
                with_answer = false;
                notes.push(format!("{}: the invalid plan left out, its errors kept ({over})", self.label));
                continue;
            }
            match self.lowest_first.iter().find(|id| !summarised.contains(*id)) {
                Some(id) => {
                    notes.push(format!("{}: skill {id} shown by its summary ({over})", self.label));
                    summarised.insert(id.clone());
                }
                None => {
                    let why = format!(
                        "the {} does not fit the model's context ({over}) even with every skill shown by its summary{}",
                        self.label,
                        if repair.is_some() { " and the invalid plan left out" } else { "" }
                    );
                    return Ok(Err((why, messages)));
                }
            }
        }
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
