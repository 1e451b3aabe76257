//! `evident llm chat` with the embedded default model: a schema-constrained
//! answer through the binary, the cache (a rerun makes 0 model calls, shown
//! by `evident runs show`), `--no-cache`, and trace export with redaction.

#[path = "llm_support.rs"]
mod support;

use serde_json::Value;
use support::{evident, run, temp_db};

const MODEL: &str = evident_llm::models::DEFAULT_CHAT_MODEL;

fn chat(db: &std::path::Path, schema: &std::path::Path, extra: &[&str]) -> Value {
    let (code, stdout, stderr) = run(evident()
        .arg("--db")
        .arg(db)
        .args(["--json", "llm", "chat", "--model", MODEL, "--max-tokens", "64", "--schema"])
        .arg(schema)
        .args(extra)
        .arg("Note: 67-year-old woman, metformin 500 mg twice daily, HbA1c 8.1%. Does she have diabetes?"));
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

fn show(db: &std::path::Path, run_id: &str) -> Value {
    let (code, stdout, stderr) = run(evident().arg("--db").arg(db).args(["--json", "runs", "show", run_id]));
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn schema_answer_then_cached_rerun_then_no_cache() {
    support::pulled_gguf(MODEL);
    let (dir, db) = temp_db();
    let schema = dir.path().join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","properties":{"diabetes":{"type":"boolean"},"evidence":{"type":"string","maxLength":120}},"required":["diabetes","evidence"],"additionalProperties":false}"#,
    )
    .unwrap();

    let first = chat(&db, &schema, &[]);
    assert!(first["value"]["diabetes"].is_boolean(), "{first}");
    let run1 = first["run"].as_str().unwrap().to_string();
    let s1 = show(&db, &run1);
    assert_eq!(s1["run"]["model_calls"], 1, "{s1}");
    assert_eq!(s1["run"]["cache_hits"], 0);
    assert!(s1["run"]["prompt_tokens"].as_u64().unwrap() > 20);

    let second = chat(&db, &schema, &[]);
    assert_eq!(second["value"], first["value"]);
    let s2 = show(&db, second["run"].as_str().unwrap());
    assert_eq!(s2["run"]["model_calls"], 0, "a rerun costs no model calls: {s2}");
    assert_eq!(s2["run"]["cache_hits"], 1);

    let third = chat(&db, &schema, &["--no-cache"]);
    let s3 = show(&db, third["run"].as_str().unwrap());
    assert_eq!((s3["run"]["model_calls"].as_u64(), s3["run"]["cache_hits"].as_u64()), (Some(1), Some(0)));

    // The trace keeps the full request; redaction hides the note text.
    let (code, plain, _) = run(evident().arg("--db").arg(&db).args(["runs", "export", &run1]));
    assert_eq!(code, 0);
    assert!(plain.contains("metformin"));
    let (code, redacted, _) = run(evident().arg("--db").arg(&db).args(["runs", "export", &run1, "--redact"]));
    assert_eq!(code, 0);
    assert!(!redacted.contains("metformin") && redacted.contains("[redacted:"), "{redacted}");

    let (code, list, _) = run(evident().arg("--db").arg(&db).args(["runs", "list"]));
    assert_eq!(code, 0);
    assert_eq!(list.lines().filter(|l| l.starts_with("run-")).count(), 3, "{list}");
}
