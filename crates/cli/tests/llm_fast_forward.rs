//! Fast-forward on the default embedded model: under a JSON schema the
//! tokens the grammar forces (keys, the rest of an enum value) are decoded
//! in one batch, in the model's own tokenisation, and the answer is still
//! valid against the schema; with `fast_forward` off, or where the
//! request asks for log-probabilities, every token is sampled.

#[path = "llm_support.rs"]
mod support;

use evident_llm::providers::llama::{LlamaChatModel, LlamaConfig};
use evident_llm::{ChatRequest, Message, SchemaValidator};
use serde_json::json;

fn model(fast_forward: bool) -> LlamaChatModel {
    let path = support::pulled_gguf(evident_llm::models::DEFAULT_CHAT_MODEL);
    let mut config = LlamaConfig::new(path);
    config.fast_forward = fast_forward;
    LlamaChatModel::load(config).unwrap()
}

#[test]
fn forced_tokens_are_batched_and_the_answer_stays_valid() {
    let schema = json!({"type": "object", "properties": {
        "unevaluable_criteria": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 40}},
        "decision": {"type": "string", "enum": ["Include", "Exclude"]},
        "evidence": {"type": "string", "maxLength": 80}},
        "required": ["unevaluable_criteria", "decision", "evidence"], "additionalProperties": false});
    let request = ChatRequest::new(vec![
        Message::system("You check one patient against a study's criteria. Answer in JSON."),
        Message::user("Criteria: adults admitted to the ICU. Patient: 64-year-old man, first ICU stay 2180-03-02."),
    ])
    .with_max_tokens(120)
    .with_schema(schema.clone());
    let validator = SchemaValidator::new(&schema).unwrap();

    let on = model(true);
    let (answer, timings) = on.chat_with_timings(&request).unwrap();
    validator.check(&answer.text).unwrap_or_else(|e| panic!("{e:?}: {}", answer.text));
    // At least the three keys and their punctuation are forced.
    assert!(timings.forced_tokens >= 6, "{timings:?}: {}", answer.text);
    assert!(timings.forced_tokens <= answer.completion_tokens, "{timings:?}");
    // Log-probabilities need every token's own distribution: none forced.
    let (with_logprobs, timings) = on.chat_with_timings(&request.clone().with_logprobs(2)).unwrap();
    assert_eq!(timings.forced_tokens, 0);
    let logprobs = with_logprobs.logprobs.expect("asked for");
    assert_eq!(logprobs.len(), with_logprobs.completion_tokens as usize);
    drop(on);

    let off = model(false);
    let (answer, timings) = off.chat_with_timings(&request).unwrap();
    validator.check(&answer.text).unwrap_or_else(|e| panic!("{e:?}: {}", answer.text));
    assert_eq!(timings.forced_tokens, 0);
}
