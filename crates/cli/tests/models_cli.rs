//! `evident models list|pull` through the binary, in an empty cache.

#[path = "llm_support.rs"]
mod support;

use support::{evident, run};

#[test]
fn list_shows_every_known_model_missing_in_an_empty_cache() {
    let cache = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) =
        run(evident().args(["--json", "models", "list"]).env("EVIDENT_CACHE_DIR", cache.path()));
    assert_eq!(code, 0, "{stderr}");
    let rows: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = rows.as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    for name in ["qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct", "gemma3-270m", "minilm-l6"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(rows.as_array().unwrap().iter().all(|r| r["present"] == false));
    let minilm = rows.as_array().unwrap().iter().find(|r| r["name"] == "minilm-l6").unwrap();
    assert_eq!(minilm["path"].as_str().unwrap(), cache.path().join("models/minilm-l6").to_str().unwrap());
}

#[test]
fn pull_of_an_unknown_model_names_the_known_ones() {
    let cache = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run(evident().args(["models", "pull", "gpt-5"]).env("EVIDENT_CACHE_DIR", cache.path()));
    assert_eq!(code, 2);
    assert!(stderr.contains("unknown model \"gpt-5\"") && stderr.contains("minilm-l6"), "{stderr}");
}

#[test]
fn chat_with_a_missing_model_says_how_to_pull_it() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run(evident()
        .args(["llm", "chat", "--model", "gemma3-270m", "hello"])
        .arg("--db")
        .arg(dir.path().join("e.db"))
        .env("EVIDENT_CACHE_DIR", cache.path()));
    assert_eq!(code, 2);
    assert!(stderr.contains("evident models pull gemma3-270m"), "{stderr}");
}
