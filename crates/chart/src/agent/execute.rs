//! Phase III: tool execution against the memory state.

use std::collections::{BTreeMap, HashMap, HashSet};

use evident_llm::{chat_json, RepairPolicy, StructuredAnswer};

use super::plan::{arguments_for, arguments_schema, asks_for_dates, calculation_meant, calculator_named, Vocabulary};
use super::synthesise::{holds_yes_no_subject, YesNoSubject};
use super::*;
use crate::bank::AnswerType;
use crate::calculators::Calculator;
use crate::policy::EvidenceOrder;
use crate::question_names;
use crate::tools::{keyword_subset, names_subject, subject_words, ToolFailure, ToolOutput, DEFAULT_K, MAX_K};

/// An action's token limit: the schema's worst case (every string is
/// bounded) fits it.
const ACTION_TOKENS: u32 = 384;

/// The room a round needs beyond the conversation so far before its step
/// request is written: about 200 tokens of step request and the action.
/// Phase II leaves it after the plan, so Phase III can make its first call.
pub(super) const ROUND_ROOM: usize = 200 + ACTION_TOKENS as usize;

fn action_schema(ctx: &Ctx<'_>, vocabulary: &Vocabulary) -> Value {
    let tools: Vec<&str> = ctx.allowed_tools().into_iter().map(ToolName::as_str).collect();
    let properties = |actions: &[&str]| {
        json!({
            "action": {"type": "string", "enum": actions},
            "tool": {"type": "string", "enum": tools},
            "arguments": arguments_schema(vocabulary),
            "still_missing": short_list_schema(3),
            "reason": {"type": "string", "maxLength": 100}})
    };
    if ctx.config.use_plan {
        // A call without a tool runs the plan step's.
        return json!({"type": "object", "properties": properties(&["call_tool", "advance", "finish"]),
            "required": ["action", "reason"], "additionalProperties": false});
    }
    // Without a plan there is no step to take the tool from: a call names
    // its tool and arguments (the embedded model, reactive, sent
    // "call_tool" with neither for eight rounds).
    let finish = {
        let mut p = properties(&["finish"]);
        let map = p.as_object_mut().expect("an object");
        map.remove("tool");
        map.remove("arguments");
        p
    };
    json!({"anyOf": [
        {"type": "object", "properties": properties(&["call_tool"]),
         "required": ["action", "tool", "arguments", "reason"], "additionalProperties": false},
        {"type": "object", "properties": finish, "required": ["action", "reason"], "additionalProperties": false}]})
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
    /// Why this question needs the whole history, when it does and
    /// [`AgentConfig::history_scope`] is on ([`whole_history`]).
    whole_history: Option<&'static str>,
    /// The question's subject words, when
    /// [`AgentConfig::broaden_unnamed`] is on and it has any.
    subject: Option<Vec<String>>,
}

impl Execution {
    /// Adds the items not yet held in front of those held, in their order:
    /// a deterministic lookup's few short lines must not be the items a
    /// small context cuts (the embedded model's answer prompt held one
    /// lab report section, and the diabetes line found for a statin
    /// question was cut).
    fn add_first(&mut self, evidence: &[Evidence]) -> usize {
        let held = std::mem::take(&mut self.nodes);
        let added = self.add(evidence);
        self.nodes.extend(held);
        added
    }

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
    let subject = Some(subject_words(ctx.question)).filter(|w| ctx.config.broaden_unnamed && !w.is_empty());
    let mut state = Execution { whole_history: whole_history(ctx, assessment), subject, ..Execution::default() };
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
    let schema = action_schema(ctx, &Vocabulary::of(ctx)?);
    // The shared prefix (system, plan request, plan) is never dropped.
    let keep = conversation.len();
    trace.stopped_because = format!("the {}-round limit", ctx.config.max_rounds);
    for round in 1..=ctx.config.max_rounds {
        if state.tokens > ctx.config.context_budget_tokens {
            trace.stopped_because =
                format!("the context budget ({} of {} tokens)", state.tokens, ctx.config.context_budget_tokens);
            break;
        }
        // The next exchange (prompt and answer) must fit the model's context
        // (the round's own prompt is checked again once written, below).
        if let Some(limit) = ctx.config.model_context_tokens {
            trace.prompt_rounds_dropped += make_room(&mut conversation, keep, 0, ROUND_ROOM, limit);
            let used = estimate_tokens(&conversation) + ROUND_ROOM;
            if used > limit {
                trace.stopped_because = format!("the model's context ({used} of {limit} tokens estimated)");
                break;
            }
        }
        // A planned call identical to one already made is skipped (a
        // small model's plan often repeats a step), and two blocked calls
        // in a row end the step, or one once the step's call has run (the
        // embedded model repeated a step's call until two were blocked, so
        // three rounds went to each step and a four-step plan never
        // reached its last step); both show in the trace.
        if ctx.config.use_plan && (blocked_in_step >= 2 || (blocked_in_step >= 1 && step_ran)) {
            let s = plan.steps.get(step_index);
            let r = Round::bare(
                round,
                s,
                if step_ran {
                    "advance (the step's call ran and was repeated)"
                } else {
                    "advance (after two blocked calls)"
                },
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
                    let args = call_arguments(ctx, t, Some(&s.arguments), Some(s), &state, &mut vec![]);
                    state.seen_calls.contains(&identity_of(t, &args))
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
        let step_json = step.map(
            |s| json!({"step": s.step, "objective": s.objective, "tool": s.tool, "arguments": s.arguments.to_string()}),
        );
        let prompt_name = if ctx.config.use_plan { "chart_step.prompt.md" } else { "chart_step_reactive.prompt.md" };
        // On a small context the round's request is fitted: older rounds
        // leave first; then the last result shows fewer of its items and
        // the memory fewer of its evidence lines (every item stays a
        // context node for the answer); only then does retrieval end.
        let notice_now = notice.take();
        let mut result_now = last_result.take();
        let result_lines: Vec<String> = result_now
            .as_ref()
            .and_then(|r| r["text"].as_str())
            .map(|t| t.lines().map(str::to_string).collect())
            .unwrap_or_default();
        let mut shown_lines = result_lines.len();
        let mut memory_now = memory.clone();
        let mut memory_kept = memory.evidence.len();
        let mut overflow = None;
        loop {
            let shown_memory =
                if ctx.config.use_memory { serde_json::to_string(&memory_now)? } else { "(not kept)".into() };
            let user = ctx.render(
                prompt_name,
                json!({"notice": notice_now, "result": result_now, "memory": shown_memory, "step": step_json,
                       "steps": plan.steps.len(), "round": round, "max_rounds": ctx.config.max_rounds, "question": ctx.question}),
            )?;
            conversation.push(Message::user(user));
            let Some(limit) = ctx.config.model_context_tokens else { break };
            trace.prompt_rounds_dropped += make_room(&mut conversation, keep, 1, ACTION_TOKENS as usize, limit);
            let used = estimate_tokens(&conversation) + ACTION_TOKENS as usize;
            if used <= limit {
                break;
            }
            conversation.pop();
            if shown_lines > 1 {
                shown_lines /= 2;
                let mut text = result_lines[..shown_lines].join("\n");
                text.push_str(&format!(
                    "\n({} more items found; kept for the answer, not shown here)",
                    result_lines.len() - shown_lines
                ));
                if let Some(r) = result_now.as_mut() {
                    r["text"] = json!(text);
                }
                trace.prompt_items_hidden += 1;
            } else if memory_kept > 1 {
                memory_kept /= 2;
                let n = memory.evidence.len();
                memory_now.evidence = std::iter::once(format!("({} earlier items not shown)", n - memory_kept))
                    .chain(memory.evidence[n - memory_kept..].iter().cloned())
                    .collect();
                trace.prompt_items_hidden += 1;
            } else {
                overflow = Some(format!("the model's context ({used} of {limit} tokens estimated)"));
                break;
            }
        }
        if let Some(reason) = overflow {
            trace.stopped_because = reason;
            break;
        }
        let request = ctx.request(conversation.clone(), ACTION_TOKENS);
        // Should the estimate be short and the context overflow (the
        // action or its repair), retrieval ends there: the evidence so far
        // goes to synthesis, as when the budget is reached.
        let answer = match chat_json(ctx.model, &request, &schema, RepairPolicy { repair_attempts: 1 }, ctx.prompts) {
            Err(e @ LlmError::ContextOverflow { .. }) => {
                trace.stopped_because = format!("the model's context overflowed: {e}");
                break;
            }
            other => other?,
        };
        let (action, raw) = match answer {
            StructuredAnswer::Valid { value, raw_text, .. } => (value, raw_text),
            StructuredAnswer::PipelineFailure(f) => {
                trace.rounds.push(Round::bare(round, step, "invalid", &memory, &f.errors.join("; ")));
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
                    trace.rounds.push(Round {
                        notice: Some(n),
                        ..Round::bare(round, step, "finish (sent back)", &memory, &reason)
                    });
                    continue;
                }
                trace.rounds.push(Round::bare(round, step, "finish", &memory, &reason));
                trace.stopped_because = "the model finished".into();
                break;
            }
            "advance" => {
                step_index += 1;
                step_ran = false;
                blocked_in_step = 0;
                finish_repaired = false;
                trace.rounds.push(Round::bare(round, step, "advance", &memory, &reason));
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
                let Some(mut tool) = tool_name.as_deref().and_then(ToolName::parse) else {
                    let n = format!(
                        "\"call_tool\" needs a \"tool\", one of {}",
                        ctx.allowed_tools().iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
                    );
                    trace.rounds.push(Round {
                        tool: tool_name.clone(),
                        adjustments,
                        notice: Some(n.clone()),
                        ..Round::bare(round, step, "call_tool", &memory, &reason)
                    });
                    notice = Some(n);
                    continue;
                };
                // Evident's typed plan: a retrieval call whose arguments
                // name a calculator is that calculator's call, unless that
                // call was already made: then the retrieval call runs as
                // asked, without the calculator (the embedded model named
                // the calculator in every later step's action, and each
                // rewritten call was blocked as a repeat, so the planned
                // lab and record queries never ran).
                let mut given = action.get("arguments").cloned();
                if ctx.config.typed_plan && ctx.config.use_calculators {
                    if let Some((named, _)) = given.as_ref().and_then(|a| calculator_named(tool, a)) {
                        let dated = ctx.answer_type.is_some_and(asks_for_dates);
                        match given.as_ref().and_then(|a| calculation_meant(tool, a, ctx.question)) {
                            _ if dated => adjustments.push(format!(
                                "{} arguments named the calculator {}; a date is read from the record, not \
                                 computed: not run",
                                tool.as_str(),
                                named.name()
                            )),
                            None => adjustments.push(format!(
                                "{} arguments named the calculator {}, which the question does not name: not run",
                                tool.as_str(),
                                named.name()
                            )),
                            Some((calculator, call)) => {
                                if calculator != named {
                                    adjustments.push(format!(
                                        "{} arguments named the calculator {}, but the question names {}: that one \
                                         is meant",
                                        tool.as_str(),
                                        named.name(),
                                        calculator.name()
                                    ));
                                }
                                let calc_args =
                                    call_arguments(ctx, ToolName::Calculate, Some(&call), step, &state, &mut vec![]);
                                if state.seen_calls.contains(&identity_of(ToolName::Calculate, &calc_args)) {
                                    adjustments.push(format!(
                                        "{} arguments named the calculator {}, already called with those inputs: the \
                                         {} call runs without it",
                                        tool.as_str(),
                                        calculator.name(),
                                        tool.as_str()
                                    ));
                                } else {
                                    adjustments.push(format!(
                                        "{} arguments named the calculator {}: run as a calculate call (Evident's \
                                         rewrite, not the paper's)",
                                        tool.as_str(),
                                        calculator.name()
                                    ));
                                    tool = ToolName::Calculate;
                                    given = Some(call);
                                }
                            }
                        }
                    }
                }
                let args = call_arguments(ctx, tool, given.as_ref(), step, &state, &mut adjustments);
                let identity = identity_of(tool, &args);
                if state.seen_calls.contains(&identity) || state.negative.contains(&identity) {
                    let n = if state.negative.contains(&identity) {
                        format!("{} {} already returned nothing; change the query or its scope", tool.as_str(), args)
                    } else {
                        format!("{} {} was already called; its result is above; do something else", tool.as_str(), args)
                    };
                    trace.rounds.push(Round {
                        tool: Some(tool.as_str().into()),
                        arguments: Some(args),
                        adjustments,
                        notice: Some(n.clone()),
                        ..Round::bare(round, step, "call_tool (blocked)", &memory, &reason)
                    });
                    notice = Some(n);
                    blocked_in_step += 1;
                    continue;
                }
                state.seen_calls.insert(identity.clone());
                blocked_in_step = 0;
                let cache_key = identity.clone();
                let (output, cached) = match state.cache.get(&cache_key) {
                    Some(o) => (o.clone(), true),
                    None => {
                        let o = run_tool(ctx, tool, &args)?;
                        state.cache.insert(cache_key, o.clone());
                        (o, false)
                    }
                };
                step_ran = true;
                // Evident's (`AgentConfig::broaden_unnamed`): after results
                // that name none of the question's subject the next search
                // is broadened to the last level, said in the round's notice.
                let unnamed = state.subject.as_ref().filter(|words| {
                    !output.evidence.is_empty() && !output.evidence.iter().any(|e| names_subject(words, &e.text()))
                });
                let unnamed_note = unnamed.map(|words| {
                    format!(
                        "no result names {:?}: the next search is broadened to the last level (Evident's, not the \
                         paper's)",
                        words.join(" ")
                    )
                });
                if tool == ToolName::SearchReports {
                    if output.evidence.is_empty() {
                        state.consecutive_empty += 1;
                        state.negative.insert(identity);
                    } else if unnamed_note.is_some() {
                        // Wrong words or filters, not too few results: more
                        // of the same would only fill the context budget.
                        state.consecutive_empty = if ctx.config.broaden_kind { 4 } else { 3 };
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
                trace.rounds.push(Round {
                    tool: Some(tool.as_str().into()),
                    arguments: Some(args),
                    adjustments,
                    notice: output.note.clone().or(unnamed_note),
                    evidence_found: output.evidence.len(),
                    new_evidence: added,
                    cached,
                    ..Round::bare(round, step, "call_tool", &memory, &reason)
                });
            }
        }
    }
    structured_lookup(ctx, &mut state, &memory, trace)?;
    criteria_lookup(ctx, &mut state, &memory, trace)?;
    criteria_check(ctx, &mut state, &memory, trace)?;
    calculator_check(ctx, &mut state, &memory, trace)?;
    trace.context_tokens = state.tokens;
    Ok(state.nodes)
}

/// Runs a tool; a refused call becomes a note for the model, a store error
/// ends the question.
fn run_tool(ctx: &Ctx<'_>, tool: ToolName, args: &Value) -> Result<ToolOutput, ChartError> {
    match ctx.view.run(tool, args) {
        Ok(o) => Ok(o),
        Err(ToolFailure::Refused(e)) => Ok(ToolOutput { evidence: vec![], note: Some(e.0) }),
        Err(ToolFailure::Store(e)) => Err(e.into()),
    }
}

/// Evident's (`AgentConfig::broaden_unnamed`): when a question asking for a
/// date, dates or intervals ends retrieval with nothing in context that
/// names its subject, the subject is looked up in the structured
/// medications, conditions and procedures, and the entries that name it
/// join the context, each call a round of the trace. The embedded model
/// searched the reports for "Body mass index 30+ - obesity (finding)";
/// the five best sections were vital-sign lines, and the condition's own
/// line of 1981 never reached the answer (`0f49d2d0-G22`).
fn structured_lookup(
    ctx: &Ctx<'_>,
    state: &mut Execution,
    memory: &Memory,
    trace: &mut Trace,
) -> Result<(), ChartError> {
    let Some(words) = state.subject.clone() else { return Ok(()) };
    if matches!(ctx.answer_type, Some(AnswerType::YesNo | AnswerType::YesNoUnclear)) {
        return yes_no_structured_lookup(ctx, state, memory, trace);
    }
    let dated = matches!(ctx.answer_type, Some(AnswerType::Date | AnswerType::DateList | AnswerType::IntervalList));
    if !dated || state.nodes.iter().any(|n| names_subject(&words, &n.text())) {
        return Ok(());
    }
    for record in ["medications", "conditions", "procedures"] {
        let args = json!({"record": record, "query": words.join(" "), "scope": "all"});
        let identity = identity_of(ToolName::QueryRecords, &args);
        if !state.seen_calls.insert(identity) {
            continue;
        }
        let output = run_tool(ctx, ToolName::QueryRecords, &args)?;
        let naming: Vec<Evidence> = output.evidence.into_iter().filter(|e| names_subject(&words, &e.text())).collect();
        let action = "structured lookup (nothing in context named the subject; Evident's, not the paper's)";
        add_looked_up((state, memory, trace), args, &naming, action);
    }
    Ok(())
}

/// Puts what a structured lookup's record query found in front of the
/// context, a `query_records` round of the trace named `action`.
fn add_looked_up(
    (state, memory, trace): (&mut Execution, &Memory, &mut Trace),
    args: Value,
    found: &[Evidence],
    action: &str,
) {
    let added = state.add_first(found);
    trace.rounds.push(Round {
        tool: Some(ToolName::QueryRecords.as_str().into()),
        arguments: Some(args),
        evidence_found: found.len(),
        new_evidence: added,
        ..Round::bare(trace.rounds.len() + 1, None, action, memory, "")
    });
}

/// The action of a yes/no structured lookup's rounds in the trace.
pub(crate) const YES_NO_LOOKUP: &str =
    "structured lookup (the context did not answer Yes by the record rule; Evident's, not the paper's)";

/// The yes/no half of [`structured_lookup`]: when the context at the end
/// of retrieval does not answer the question "Yes" by the record rule
/// ([`recorded_yes`], with the parsing skills where the agent expands
/// queries), the subject is looked up in the structured records
/// ([`yes_no_lookup`]) and the entries that hold it join the context in
/// front, each call a round of the trace. The embedded model searched the
/// reports for "patient eligibility assessment" when asked "Is the patient
/// receiving Leucovorin 100 MG Injection on 2020-11-30?", found nothing,
/// and answered "No" beside an active prescription it never saw
/// (`720b9118-G01`).
fn yes_no_structured_lookup(
    ctx: &Ctx<'_>,
    state: &mut Execution,
    memory: &Memory,
    trace: &mut Trace,
) -> Result<(), ChartError> {
    let skills = (ctx.config.use_skills && ctx.config.expand_queries).then_some(ctx.skills);
    if recorded_yes(ctx.question, &context_items(&state.nodes), skills) {
        return Ok(());
    }
    for (args, holding) in yes_no_lookup(ctx.view, ctx.question, skills)? {
        state.seen_calls.insert(identity_of(ToolName::QueryRecords, &args));
        add_looked_up((state, memory, trace), args, &holding, YES_NO_LOOKUP);
    }
    Ok(())
}

/// Evident's structured lookup for a yes/no question, not the paper's:
/// for the medications, the conditions and the procedures, the
/// `query_records` call for the subject's words as the yes/no record rule
/// reads them ([`recorded_yes`]: without the asking verbs and dates),
/// expanded from the parsing `skills` when given ("statin" to its
/// substances), over every date up to the view's reference date; with
/// each call, the entries it returns that hold the subject as the rule
/// reads it. Nothing for a question the rule reads no subject in.
pub fn yes_no_lookup(
    view: &RecordView<'_>,
    question: &str,
    skills: Option<&SkillLibrary>,
) -> Result<Vec<(Value, Vec<Evidence>)>, ChartError> {
    let Some(subject) = YesNoSubject::of(question, skills) else { return Ok(vec![]) };
    let words = subject.words().join(" ");
    let query = skills.and_then(|s| s.expand_query(&words)).map_or(words, |(expanded, _)| expanded);
    let mut calls = Vec::new();
    for record in ["medications", "conditions", "procedures"] {
        let args = json!({"record": record, "query": query, "scope": "all"});
        let output = match view.run(ToolName::QueryRecords, &args) {
            Ok(o) => o,
            Err(ToolFailure::Refused(_)) => ToolOutput { evidence: vec![], note: None },
            Err(ToolFailure::Store(e)) => return Err(e.into()),
        };
        let holding = output.evidence.into_iter().filter(|e| holds_yes_no_subject(&subject, &e.text())).collect();
        calls.push((args, holding));
    }
    Ok(calls)
}

/// The workflow skill whose keywords mark a question of criteria.
const ELIGIBILITY_SKILL: &str = "eligibility-assessment";

/// Evident's (`AgentConfig::broaden_unnamed`, with skills): a question the
/// eligibility skill's keywords trigger ends retrieval with the record's
/// answer to each criterion the question names in the record's own terms
/// in context: the problem-list entries whose condition it names
/// (`RecordView::conditions_named_in`) and the newest values of the lab
/// concepts it names (`RecordView::lab_concepts_named_in`), each call a
/// round of the trace. The embedded model's one search for the statin
/// criteria ("age 40-75 years with documented diabetes, or an LDL
/// cholesterol of at least 190 mg/dL") found lab reports without LDL and
/// never the diabetes line (`ffd502c9-G34`).
fn criteria_lookup(ctx: &Ctx<'_>, state: &mut Execution, memory: &Memory, trace: &mut Trace) -> Result<(), ChartError> {
    if !(ctx.config.broaden_unnamed && ctx.config.use_skills && ctx.skills.triggers(ELIGIBILITY_SKILL, ctx.question)) {
        return Ok(());
    }
    let action =
        "criteria lookup (what the record holds for each criterion the question names; Evident's, not the paper's)";
    let conditions = ctx.view.conditions_named_in(ctx.question)?;
    if !conditions.is_empty() {
        let added = state.add_first(&conditions);
        let args = json!({"record": "conditions", "named_in": "the question"});
        let r = Round {
            tool: Some(ToolName::QueryRecords.as_str().into()),
            arguments: Some(args),
            evidence_found: conditions.len(),
            new_evidence: added,
            ..Round::bare(trace.rounds.len() + 1, None, action, memory, "")
        };
        trace.rounds.push(r);
    }
    let concepts = ctx.view.lab_concepts_named_in(ctx.question)?;
    if !concepts.is_empty() {
        let args = json!({"concepts": concepts, "limit": 3});
        if state.seen_calls.insert(identity_of(ToolName::QueryLabs, &args)) {
            let output = run_tool(ctx, ToolName::QueryLabs, &args)?;
            let added = state.add_first(&output.evidence);
            let r = Round {
                tool: Some(ToolName::QueryLabs.as_str().into()),
                arguments: Some(args),
                notice: output.note,
                evidence_found: output.evidence.len(),
                new_evidence: added,
                ..Round::bare(trace.rounds.len() + 1, None, action, memory, "")
            };
            trace.rounds.push(r);
        }
    }
    Ok(())
}

/// Evident's (with [`AgentConfig::use_calculators`]): a question that names
/// a criteria set ([`crate::criteria::CriteriaSets::named_in`]) ends retrieval with the
/// set's check on the record in front of the context, a calculate round of
/// the trace; the answer step then holds a Yes / No / Unclear answer to
/// the check's result. With the diabetes line, the LDL values and an
/// in-range age in front of its answer prompt, the embedded model still
/// answered a statin question "No" (`ffd502c9-G34`).
fn criteria_check(ctx: &Ctx<'_>, state: &mut Execution, memory: &Memory, trace: &mut Trace) -> Result<(), ChartError> {
    if !ctx.config.use_calculators {
        return Ok(());
    }
    let Some(set) = ctx.view.criteria().named_in(ctx.question) else { return Ok(()) };
    let args = json!({"calculator": set.id});
    let action = "criteria check (the criteria set the question names, on the record; Evident's, not the paper's)";
    calculate_in_front((ctx, state, memory, trace), args, action, |o| o.evidence.len())
}

/// Runs a calculate call of Evident's own once (not again when it ran)
/// and puts what it returns in front of the context, a round of the trace
/// named `action`; `found` counts what the round reports found.
fn calculate_in_front(
    (ctx, state, memory, trace): (&Ctx<'_>, &mut Execution, &Memory, &mut Trace),
    args: Value,
    action: &str,
    found: fn(&ToolOutput) -> usize,
) -> Result<(), ChartError> {
    if !state.seen_calls.insert(identity_of(ToolName::Calculate, &args)) {
        return Ok(());
    }
    let output = run_tool(ctx, ToolName::Calculate, &args)?;
    let evidence_found = found(&output);
    let added = state.add_first(&output.evidence);
    trace.rounds.push(Round {
        tool: Some(ToolName::Calculate.as_str().into()),
        arguments: Some(args),
        notice: output.note,
        evidence_found,
        new_evidence: added,
        ..Round::bare(trace.rounds.len() + 1, None, action, memory, "")
    });
    Ok(())
}

/// Evident's (with [`AgentConfig::use_calculators`]): a question that
/// names one calculator ([`question_names`]; not a date question) and
/// whose context holds no result of it ends retrieval with that
/// calculator run on the record, its inputs read from the store as every
/// call's are, in front of the context, a calculate round of the trace.
/// The embedded model's plan for "What is the adult BMI category ... on
/// 2018-01-25, from the last BMI at most 365 days before?" never called
/// the BMI calculator, and it answered "Not documented" beside a BMI of
/// 27.5 seven weeks before (`d5525459-G26`, gold Overweight). A result the
/// record cannot give (a missing input) adds its note and nothing else.
fn calculator_check(
    ctx: &Ctx<'_>,
    state: &mut Execution,
    memory: &Memory,
    trace: &mut Trace,
) -> Result<(), ChartError> {
    if !ctx.config.use_calculators || ctx.answer_type.is_some_and(asks_for_dates) {
        return Ok(());
    }
    let named: Vec<Calculator> = Calculator::ALL.into_iter().filter(|&c| question_names(ctx.question, c)).collect();
    let [calculator] = named.as_slice() else { return Ok(()) };
    let computed = state
        .nodes
        .iter()
        .any(|n| matches!(n, Evidence::Calculation { calculator: c, .. } if c.as_str() == calculator.name()));
    if computed {
        return Ok(());
    }
    let args = json!({"calculator": calculator.name()});
    let action = "calculator check (the calculator the question names, on the record; Evident's, not the paper's)";
    let results = |o: &ToolOutput| o.evidence.iter().filter(|e| matches!(e, Evidence::Calculation { .. })).count();
    calculate_in_front((ctx, state, memory, trace), args, action, results)
}

/// Drops the oldest round exchanges (a request and its answer, after the
/// first `keep` messages and before the last `tail`) until `extra` more
/// tokens fit the model's context of `limit`; returns how many exchanges
/// went. The memory state, sent every round, keeps what they found, and
/// the prefix stays, so the KV cache is still reused for it. Without this
/// a 4,096-token model ran out of context after one round.
fn make_room(conversation: &mut Vec<Message>, keep: usize, tail: usize, extra: usize, limit: usize) -> usize {
    let mut dropped = 0;
    while estimate_tokens(conversation) + extra > limit && conversation.len() >= keep + 2 + tail {
        conversation.drain(keep..keep + 2);
        dropped += 1;
    }
    dropped
}

/// A call's identity (tool and canonical arguments), for duplicates, the
/// negative cache and the result cache.
fn identity_of(tool: ToolName, args: &Value) -> String {
    format!("{}:{}", tool.as_str(), canonical(args))
}

/// The arguments a call runs with: the model's (the plan step's when it
/// gave none), completed from the plan step's when the call is the step's
/// tool (a small model's action often echoes only part of the planned
/// arguments, e.g. a `query_records` call without its required `record`),
/// reduced to what the tool takes, without filters in the no-filters
/// ablation, a report or record query expanded from the parsing skills
/// ([`AgentConfig::expand_queries`]), and broadened after empty report
/// searches. Broadening comes
/// before the duplicate check: a repeated search after an empty result is
/// run broadened rather than blocked, and a broadening level whose call
/// already returned nothing gives way to the next level.
fn call_arguments(
    ctx: &Ctx<'_>,
    tool: ToolName,
    given: Option<&Value>,
    step: Option<&PlanStep>,
    state: &Execution,
    adjustments: &mut Vec<String>,
) -> Value {
    let planned = step.filter(|s| s.tool == tool.as_str()).map(|s| arguments_for(tool, &s.arguments, &mut vec![]));
    let mut args = match given {
        Some(a) if a.as_object().is_some_and(|o| !o.is_empty()) => {
            let mut args = arguments_for(tool, a, adjustments);
            if let (Some(o), Some(Value::Object(p))) = (args.as_object_mut(), &planned) {
                for (k, v) in p {
                    if !o.contains_key(k) {
                        adjustments.push(format!("argument {k} taken from the plan step"));
                        o.insert(k.clone(), v.clone());
                    }
                }
            }
            args
        }
        _ => match planned {
            Some(p) => {
                adjustments.push("arguments taken from the plan step".to_string());
                p
            }
            None => json!({}),
        },
    };
    if !ctx.config.use_filters {
        if let Some(o) = args.as_object_mut() {
            for key in ["kind", "scope", "date", "since", "until"] {
                o.remove(key);
            }
        }
    }
    if let (Some(why), Some(o)) = (state.whole_history, args.as_object_mut()) {
        if o.get("scope").and_then(Value::as_str) == Some("most_recent") {
            o.insert("scope".into(), json!("all"));
            adjustments.push(format!("scope most_recent -> all: {why} (Evident's, not the paper's)"));
        }
    }
    if tool == ToolName::SearchReports && ctx.config.expand_queries {
        let query = args.get("query").and_then(Value::as_str).unwrap_or_default().to_string();
        let subject = subject_words(ctx.question);
        if !has_word(&query) && !subject.is_empty() {
            if let Some(o) = args.as_object_mut() {
                o.insert("query".into(), json!(subject.join(" ")));
                adjustments.push(format!(
                    "query {query:?} holds no word: the question's subject words used (Evident's, not the paper's)"
                ));
            }
        }
    }
    let queried = matches!(tool, ToolName::SearchReports | ToolName::QueryRecords);
    if queried && ctx.config.expand_queries && ctx.config.use_skills {
        let query = args.get("query").and_then(Value::as_str).unwrap_or_default();
        if let (Some((expanded, words)), Some(o)) = (ctx.skills.expand_query(query), args.as_object_mut()) {
            o.insert("query".into(), json!(expanded));
            adjustments.push(format!(
                "query expanded for {} from the parsing skills (Evident's, not the paper's)",
                words.join(", ")
            ));
        }
    }
    if tool == ToolName::SearchReports && state.consecutive_empty > 0 {
        let last = if ctx.config.broaden_kind { 4 } else { 3 };
        for level in state.consecutive_empty.min(last)..=last {
            let mut candidate = args.clone();
            let mut notes = vec![];
            broaden(&mut candidate, level, &mut notes);
            let id = identity_of(tool, &candidate);
            if level == last || !(state.negative.contains(&id) || state.seen_calls.contains(&id)) {
                adjustments.extend(notes);
                args = candidate;
                break;
            }
        }
    }
    args
}

/// Whether a query holds a word beside its dates and numbers.
fn has_word(query: &str) -> bool {
    query.chars().any(char::is_alphabetic)
}

/// Why a question needs the whole history, with Evident's
/// [`AgentConfig::history_scope`]: it asks for the first occurrence (a
/// triggered workflow skill orders its evidence earliest first) or for a
/// list of dates or intervals.
fn whole_history(ctx: &Ctx<'_>, assessment: &Assessment) -> Option<&'static str> {
    if !ctx.config.history_scope {
        return None;
    }
    if matches!(ctx.answer_type, Some(AnswerType::DateList | AnswerType::IntervalList)) {
        return Some("the question asks for every date");
    }
    let order = ctx.skills.evidence_order(&assessment.selection, ctx.question);
    (order == EvidenceOrder::Earliest).then_some("the question asks for the first occurrence")
}

/// The paper's broadening: after one empty result k doubles (cap 30),
/// after two the query is cut to its keywords, after three the temporal
/// scope goes. Level four is Evident's, not the paper's (reached only with
/// [`AgentConfig::broaden_kind`]): the kind filter goes too; "all" is no
/// filter and stays, so that level adds nothing to a search without one.
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
    if empties >= 4 {
        if let Some(o) = args.as_object_mut() {
            if o.get("kind").is_some_and(|k| k.as_str() != Some("all")) {
                o.remove("kind");
                adjustments.push("kind filter removed (Evident's broadening, not the paper's)".to_string());
            }
        }
    }
}
