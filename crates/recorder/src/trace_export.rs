//! A model run read back as one JSON value ([`export_trace`]): its summary,
//! every call with request and response, and its pipeline failures,
//! optionally with note text redacted so traces can be shared for
//! debugging.

use evident_store::Store;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::error::RecorderError;

fn redacted(text: &str) -> Value {
    let digest = hex::encode(Sha256::digest(text.as_bytes()));
    Value::String(format!("[redacted: {} chars, sha256 {}]", text.chars().count(), &digest[..12]))
}

/// Parses a stored JSON column; a damaged one is an error naming the run
/// and the row, never a silent `null`.
fn stored_json(run_id: &str, what: impl FnOnce() -> String, text: &str) -> Result<Value, RecorderError> {
    serde_json::from_str(text).map_err(|source| RecorderError::CorruptRecord {
        run_id: run_id.to_string(),
        what: what(),
        source,
    })
}

/// Replaces message contents and the answer text by their length and a
/// hash prefix.
fn redact_call(request: &mut Value, response: &mut Value) {
    if let Some(messages) = request.get_mut("messages").and_then(Value::as_array_mut) {
        for m in messages {
            if let Some(content) = m.get("content").and_then(Value::as_str).map(str::to_string) {
                m["content"] = redacted(&content);
            }
        }
    }
    if let Some(text) = response.get("text").and_then(Value::as_str).map(str::to_string) {
        response["text"] = redacted(&text);
    }
}

/// A run's summary, calls and pipeline failures as one JSON value. With
/// `redact_note_text`, message contents and answers of calls that carried
/// patient text (and the raw text of failures) are replaced by their length
/// and a hash prefix.
pub fn export_trace(store: &Store, run_id: &str, redact_note_text: bool) -> Result<Value, RecorderError> {
    let summary = store.model_run(run_id)?.ok_or_else(|| RecorderError::UnknownRun(run_id.to_string()))?;
    let mut calls = Vec::new();
    for call in store.model_calls(run_id)? {
        let mut request = stored_json(run_id, || format!("request of call {}", call.id), &call.request_json)?;
        let mut response = match call.response_json.as_deref() {
            Some(text) => stored_json(run_id, || format!("response of call {}", call.id), text)?,
            None => Value::Null,
        };
        if redact_note_text && call.contains_patient_text {
            redact_call(&mut request, &mut response);
        }
        calls.push(json!({
            "id": call.id,
            "started_at": call.started_at,
            "model": call.model,
            "endpoint": call.endpoint,
            "cache_hit": call.cache_hit,
            "prompt_tokens": call.prompt_tokens,
            "completion_tokens": call.completion_tokens,
            "latency_ms": call.latency_ms,
            "cost_usd": call.cost_usd,
            "contains_patient_text": call.contains_patient_text,
            "request": request,
            "response": response,
            "error": call.error,
        }));
    }
    let mut failures = Vec::new();
    for f in store.pipeline_failures(run_id)? {
        let errors = stored_json(run_id, || format!("errors of pipeline failure {}", f.id), &f.errors_json)?;
        let raw = if redact_note_text { redacted(&f.raw_text) } else { Value::String(f.raw_text) };
        failures.push(json!({
            "id": f.id,
            "model": f.model,
            "raw_text": raw,
            "errors": errors,
            "attempts": f.attempts,
            "created_at": f.created_at,
        }));
    }
    Ok(json!({"run": summary, "calls": calls, "pipeline_failures": failures, "redacted": redact_note_text}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording_model::tests::setup;
    use crate::RecordingModel;
    use evident_llm::{ChatModel, ChatRequest, Message, PipelineFailure, PipelineFailureLog};

    #[test]
    fn trace_export_redacts_note_text_only_when_asked() {
        let (inner, store) = setup();
        let run = store.lock().unwrap().begin_model_run("r").unwrap();
        let m = RecordingModel::new(inner, store.clone(), &run);
        m.chat(&ChatRequest::new(vec![Message::user("Mr Smith has diabetes")])).unwrap();
        m.chat(&ChatRequest::new(vec![Message::user("criterion text")]).without_patient_text()).unwrap();
        m.record_pipeline_failure(&PipelineFailure {
            model: "counting".into(),
            raw_text: "Mr Smith {".into(),
            errors: vec!["not JSON".into()],
            attempts: 3,
            request: ChatRequest::new(vec![]),
        })
        .unwrap();
        let store = store.lock().unwrap();
        let plain = export_trace(&store, &run, false).unwrap().to_string();
        assert!(plain.contains("Mr Smith has diabetes"));
        let redacted = export_trace(&store, &run, true).unwrap().to_string();
        assert!(!redacted.contains("Smith"), "{redacted}");
        assert!(redacted.contains("criterion text"));
        assert!(redacted.contains("[redacted: 21 chars"));
        assert_eq!(store.model_run(&run).unwrap().unwrap().pipeline_failures, 1);
    }

    #[test]
    fn an_unknown_run_is_an_error_naming_it() {
        let (_, store) = setup();
        let err = export_trace(&store.lock().unwrap(), "no-such-run", false).unwrap_err();
        assert_eq!(err.to_string(), "no model run \"no-such-run\" in this store");
    }
}
