//! Structured output: every answer that should be JSON is validated against
//! its schema; an invalid answer gets a repair prompt; after the last attempt
//! the call ends as a [`PipelineFailure`] that keeps the raw text and is
//! recorded in the [`PipelineFailureLog`] the call was given (a
//! [`StructuredModel`] pairs a model with its log). Nothing is coerced: a
//! value is returned only if it validates as given.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::chat::ChatModel;
use crate::error::LlmError;
use crate::pipeline_failure::{NoPipelineFailureLog, PipelineFailure, PipelineFailureLog};
use crate::prompts::Prompts;
use crate::request::{ChatRequest, Message};

/// How many times an invalid answer is sent back for repair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairPolicy {
    /// Repair prompts after the first answer (0 = no repair).
    pub repair_attempts: u32,
}

impl Default for RepairPolicy {
    fn default() -> Self {
        RepairPolicy { repair_attempts: 2 }
    }
}

/// The result of a structured call.
#[derive(Debug, Clone, PartialEq)]
pub enum StructuredAnswer {
    Valid { value: Value, raw_text: String, attempts: u32 },
    PipelineFailure(PipelineFailure),
}

impl StructuredAnswer {
    pub fn value(&self) -> Option<&Value> {
        match self {
            StructuredAnswer::Valid { value, .. } => Some(value),
            StructuredAnswer::PipelineFailure(_) => None,
        }
    }
}

/// A compiled schema.
pub struct SchemaValidator {
    validator: jsonschema::Validator,
}

impl SchemaValidator {
    pub fn new(schema: &Value) -> Result<Self, LlmError> {
        let validator = jsonschema::validator_for(schema).map_err(|e| LlmError::InvalidSchema(e.to_string()))?;
        Ok(SchemaValidator { validator })
    }

    /// Parses `text` as JSON and validates it. The only leniency is removing
    /// surrounding whitespace and a Markdown code fence around the whole
    /// answer; anything else that is not the JSON value is an error.
    pub fn check(&self, text: &str) -> Result<Value, Vec<String>> {
        let body = strip_code_fence(text.trim());
        let value: Value = serde_json::from_str(body).map_err(|e| vec![format!("the answer is not JSON: {e}")])?;
        let errors: Vec<String> = self
            .validator
            .iter_errors(&value)
            .map(|e| {
                let path = e.instance_path.to_string();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("at {path}: {e}")
                }
            })
            .collect();
        if errors.is_empty() {
            Ok(value)
        } else {
            Err(errors)
        }
    }
}

fn strip_code_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else { return text };
    let Some(rest) = rest.strip_suffix("```") else { return text };
    // Drop an info string such as `json` on the opening line.
    match rest.find('\n') {
        Some(newline) => rest[newline + 1..].trim(),
        None => rest.trim(),
    }
}

/// A chat model and the log its pipeline failures go to: what a
/// structured call needs. Built from a model that is its own log (the
/// recorder's `RecordingModel`, whose failures land in its model run) with
/// [`StructuredModel::recorded`] or `From`, from two parts with
/// [`StructuredModel::new`], or, where no audit trail is kept, with
/// [`StructuredModel::unrecorded`]. A plain `ChatModel` does not convert:
/// dropping failures is always written out.
#[derive(Clone, Copy)]
pub struct StructuredModel<'a> {
    pub chat: &'a dyn ChatModel,
    pub failures: &'a dyn PipelineFailureLog,
}

impl<'a> StructuredModel<'a> {
    pub fn new(chat: &'a dyn ChatModel, failures: &'a dyn PipelineFailureLog) -> Self {
        StructuredModel { chat, failures }
    }

    /// A model that records its own pipeline failures.
    pub fn recorded<M: ChatModel + PipelineFailureLog>(model: &'a M) -> Self {
        StructuredModel { chat: model, failures: model }
    }

    /// A model whose pipeline failures are only returned, recorded nowhere.
    pub fn unrecorded(chat: &'a dyn ChatModel) -> Self {
        StructuredModel { chat, failures: &NoPipelineFailureLog }
    }

    pub fn model_id(&self) -> &'a str {
        self.chat.model_id()
    }
}

impl<'a, M: ChatModel + PipelineFailureLog> From<&'a M> for StructuredModel<'a> {
    fn from(model: &'a M) -> Self {
        StructuredModel::recorded(model)
    }
}

impl std::fmt::Debug for StructuredModel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StructuredModel").field("model_id", &self.chat.model_id()).finish_non_exhaustive()
    }
}

/// Asks `model` for JSON valid against `schema` (also set on the request so
/// providers can constrain decoding), repairing up to the policy's limit.
/// A transport error is returned as `Err`; an answer that stays invalid is
/// `Ok(PipelineFailure)` after it has been recorded in `model.failures`
/// (a failure to record it is an `Err`).
pub fn chat_json<'m>(
    model: impl Into<StructuredModel<'m>>,
    request: &ChatRequest,
    schema: &Value,
    policy: RepairPolicy,
    prompts: &Prompts,
) -> Result<StructuredAnswer, LlmError> {
    chat_json_with_logprobs(model, request, schema, policy, prompts).map(|answer| answer.answer)
}

/// A structured answer and the per-token log-probabilities of the answer
/// that validated (when the request asked for them and the provider gave
/// them; a repaired answer's are the repair's, a failure has none).
#[derive(Debug, Clone)]
pub struct StructuredLogprobs {
    pub answer: StructuredAnswer,
    pub logprobs: Option<Vec<crate::request::TokenLogprob>>,
}

/// [`chat_json`], also returning the log-probabilities of the valid answer
/// (ask for them with [`ChatRequest::with_logprobs`]).
pub fn chat_json_with_logprobs<'m>(
    model: impl Into<StructuredModel<'m>>,
    request: &ChatRequest,
    schema: &Value,
    policy: RepairPolicy,
    prompts: &Prompts,
) -> Result<StructuredLogprobs, LlmError> {
    let model: StructuredModel<'m> = model.into();
    let validator = SchemaValidator::new(schema)?;
    let schema_text = serde_json::to_string_pretty(schema)
        .map_err(|e| LlmError::InvalidSchema(format!("cannot be written out for the repair prompt: {e}")))?;
    let first = request;
    let mut request = request.clone();
    request.json_schema = Some(schema.clone());
    let mut attempts = 0;
    loop {
        attempts += 1;
        let response = model.chat.chat(&request)?;
        match validator.check(&response.text) {
            Ok(value) => {
                let answer = StructuredAnswer::Valid { value, raw_text: response.text, attempts };
                return Ok(StructuredLogprobs { answer, logprobs: response.logprobs });
            }
            Err(mut errors) => {
                let cut_off = !response.is_complete();
                if cut_off {
                    let cut = format!(
                        "the answer was cut off at the token limit after {} tokens, before it was complete; \
                         keep every text field short",
                        response.completion_tokens
                    );
                    errors.insert(0, cut);
                }
                if attempts > policy.repair_attempts {
                    let failure = PipelineFailure {
                        model: model.model_id().to_string(),
                        raw_text: response.text,
                        errors,
                        attempts,
                        request,
                    };
                    model.failures.record_pipeline_failure(&failure)?;
                    return Ok(StructuredLogprobs {
                        answer: StructuredAnswer::PipelineFailure(failure),
                        logprobs: None,
                    });
                }
                let render = |name: &str, context: Value| {
                    prompts.render(name, context).map_err(|e| LlmError::Backend(e.to_string()))
                };
                if cut_off {
                    // A cut-off answer is asked again from the first
                    // request with a short note: the half answer and the
                    // schema would add hundreds of tokens (they made the
                    // chart comparators' repairs overflow a 4,096-token
                    // context) and the request already carries the schema
                    // for decoding. The attempt number keeps a second note
                    // from repeating the first request word for word.
                    let note = render(
                        "repair_cut_off.prompt.md",
                        json!({"completion_tokens": response.completion_tokens, "attempt": attempts + 1,
                               "attempts": policy.repair_attempts + 1}),
                    )?;
                    request.messages = first.messages.clone();
                    request.messages.push(Message::user(note));
                } else {
                    let repair = render("repair.prompt.md", json!({"errors": errors, "schema": schema_text}))?;
                    request.messages.push(Message::assistant(response.text));
                    request.messages.push(Message::user(repair));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{ChatResponse, FinishReason};
    use std::sync::Mutex;

    /// A model that replays scripted answers and remembers what it was asked.
    struct Scripted {
        answers: Mutex<Vec<String>>,
        seen: Mutex<Vec<ChatRequest>>,
        failures: Mutex<Vec<PipelineFailure>>,
    }

    impl Scripted {
        fn new(answers: &[&str]) -> Self {
            Scripted {
                answers: Mutex::new(answers.iter().rev().map(|s| s.to_string()).collect()),
                seen: Mutex::new(Vec::new()),
                failures: Mutex::new(Vec::new()),
            }
        }
    }

    impl ChatModel for Scripted {
        fn model_id(&self) -> &str {
            "scripted"
        }
        fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
            self.seen.lock().unwrap().push(request.clone());
            let text = self.answers.lock().unwrap().pop().expect("script exhausted");
            // "CUT:" scripts an answer cut off at the token limit.
            let (text, finish_reason) = match text.strip_prefix("CUT:") {
                Some(cut) => (cut.to_string(), FinishReason::Length),
                None => (text, FinishReason::Stop),
            };
            Ok(ChatResponse {
                text,
                prompt_tokens: 1,
                completion_tokens: 1,
                finish_reason,
                model: "scripted".into(),
                endpoint: "test".into(),
                reused_prompt_tokens: 0,
                logprobs: None,
            })
        }
    }

    impl PipelineFailureLog for Scripted {
        fn record_pipeline_failure(&self, failure: &PipelineFailure) -> Result<(), LlmError> {
            self.failures.lock().unwrap().push(failure.clone());
            Ok(())
        }
    }

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {"age": {"type": "integer", "minimum": 0}},
            "required": ["age"],
            "additionalProperties": false
        })
    }

    fn run(answers: &[&str], attempts: u32) -> (StructuredAnswer, Scripted) {
        let model = Scripted::new(answers);
        let request = ChatRequest::new(vec![Message::user("How old?")]);
        let outcome =
            chat_json(&model, &request, &schema(), RepairPolicy { repair_attempts: attempts }, &Prompts::builtin(None))
                .unwrap();
        (outcome, model)
    }

    #[test]
    fn valid_first_answer_needs_one_call() {
        let (outcome, model) = run(&["{\"age\": 71}"], 2);
        assert_eq!(outcome.value(), Some(&json!({"age": 71})));
        assert_eq!(model.seen.lock().unwrap().len(), 1);
        assert_eq!(model.seen.lock().unwrap()[0].json_schema, Some(schema()));
    }

    #[test]
    fn code_fence_is_accepted_but_nothing_else_around_json() {
        let (outcome, _) = run(&["```json\n{\"age\": 3}\n```"], 0);
        assert_eq!(outcome.value(), Some(&json!({"age": 3})));
        let (outcome, _) = run(&["The answer: {\"age\": 3}"], 0);
        assert!(matches!(outcome, StructuredAnswer::PipelineFailure(_)));
    }

    #[test]
    fn invalid_answer_is_repaired_with_errors_in_the_prompt() {
        let (outcome, model) = run(&["{\"age\": \"71\"}", "{\"age\": 71}"], 2);
        match outcome {
            StructuredAnswer::Valid { value, attempts, .. } => {
                assert_eq!(value, json!({"age": 71}));
                assert_eq!(attempts, 2);
            }
            other => panic!("expected valid, got {other:?}"),
        }
        let seen = model.seen.lock().unwrap();
        let repair = &seen[1].messages;
        assert_eq!(repair.len(), 3);
        assert_eq!(repair[1].content, "{\"age\": \"71\"}");
        assert!(repair[2].content.contains("/age"), "{}", repair[2].content);
    }

    #[test]
    fn a_cut_off_answer_is_named_as_such_in_the_repair_and_the_failure() {
        let (outcome, model) = run(&["CUT:{\"age\": 7", "CUT:{\"ag"], 1);
        let StructuredAnswer::PipelineFailure(failure) = outcome else { panic!("expected a pipeline failure") };
        assert!(failure.errors[0].contains("cut off at the token limit"), "{:?}", failure.errors);
        let seen = model.seen.lock().unwrap();
        let repair = &seen[1].messages;
        assert!(repair.last().unwrap().content.contains("cut off at the token limit"), "{repair:?}");
    }

    #[test]
    fn a_cut_off_answer_is_asked_again_from_the_first_request_without_the_half_answer_or_the_schema() {
        let (outcome, model) = run(&["CUT:{\"age\": 7", "{\"age\": \"7\"}", "CUT:{\"ag", "{\"age\": 7}"], 3);
        assert_eq!(outcome.value(), Some(&json!({"age": 7})));
        let seen = model.seen.lock().unwrap();
        let first = &seen[0].messages;
        // After the cut: the first request and one short note, no more.
        assert_eq!(seen[1].messages.len(), first.len() + 1);
        assert_eq!(seen[1].messages[..first.len()], first[..]);
        let note = &seen[1].messages[first.len()].content;
        assert!(note.contains("after 1 tokens") && note.contains("attempt 2 of 4"), "{note}");
        assert!(!note.contains("\"properties\""), "the note carries no schema: {note}");
        assert!(seen[1].messages.iter().all(|m| m.content != "{\"age\": 7"), "the half answer is not sent back");
        // An invalid (complete) answer is repaired as before: answer and schema.
        assert_eq!(seen[2].messages.len(), first.len() + 3);
        assert!(seen[2].messages.last().unwrap().content.contains("\"properties\""));
        // A second cut starts from the first request again, with a note of its own.
        assert_eq!(seen[3].messages.len(), first.len() + 1);
        assert!(seen[3].messages.last().unwrap().content.contains("attempt 4 of 4"));
        assert!(seen.iter().all(|r| r.json_schema.is_some()), "every request carries the schema for decoding");
    }

    #[test]
    fn last_invalid_answer_becomes_a_pipeline_failure_with_raw_text() {
        let (outcome, model) = run(&["nope", "{\"age\": -1}", "{\"age\": 1.5}"], 2);
        let StructuredAnswer::PipelineFailure(failure) = outcome else { panic!("expected a pipeline failure") };
        assert_eq!(failure.raw_text, "{\"age\": 1.5}");
        assert_eq!(failure.attempts, 3);
        assert!(!failure.errors.is_empty());
        assert_eq!(model.failures.lock().unwrap().len(), 1);
    }

    /// A log that refuses every failure, as a store that cannot be written.
    struct FullDisk;

    impl PipelineFailureLog for FullDisk {
        fn record_pipeline_failure(&self, _failure: &PipelineFailure) -> Result<(), LlmError> {
            Err(LlmError::Store("disk full".into()))
        }
    }

    #[test]
    fn a_failure_goes_to_the_log_paired_with_the_model_and_nowhere_else() {
        let model = Scripted::new(&["nope"]);
        let log = Scripted::new(&[]);
        let request = ChatRequest::new(vec![Message::user("How old?")]);
        let policy = RepairPolicy { repair_attempts: 0 };
        let prompts = Prompts::builtin(None);
        let outcome = chat_json(StructuredModel::new(&model, &log), &request, &schema(), policy, &prompts).unwrap();
        assert!(matches!(outcome, StructuredAnswer::PipelineFailure(_)));
        assert_eq!(log.failures.lock().unwrap()[0].raw_text, "nope");
        assert!(model.failures.lock().unwrap().is_empty());

        let unrecorded = Scripted::new(&["still nope"]);
        let outcome =
            chat_json(StructuredModel::unrecorded(&unrecorded), &request, &schema(), policy, &prompts).unwrap();
        let StructuredAnswer::PipelineFailure(failure) = outcome else { panic!("expected a pipeline failure") };
        assert_eq!(failure.raw_text, "still nope");
        assert!(unrecorded.failures.lock().unwrap().is_empty());
    }

    #[test]
    fn a_failure_the_log_cannot_record_fails_the_call() {
        let model = Scripted::new(&["nope"]);
        let request = ChatRequest::new(vec![Message::user("How old?")]);
        let err = chat_json(
            StructuredModel::new(&model, &FullDisk),
            &request,
            &schema(),
            RepairPolicy { repair_attempts: 0 },
            &Prompts::builtin(None),
        )
        .unwrap_err();
        assert!(matches!(&err, LlmError::Store(m) if m == "disk full"), "{err}");
    }

    #[test]
    fn invalid_schema_is_reported() {
        let model = Scripted::new(&[]);
        let err = chat_json(
            &model,
            &ChatRequest::new(vec![]),
            &json!({"type": "no-such-type"}),
            RepairPolicy::default(),
            &Prompts::builtin(None),
        )
        .unwrap_err();
        assert!(matches!(err, LlmError::InvalidSchema(_)));
    }
}
