//! A study run that finished is read back from its `bundle.json` before
//! the database is opened or a model is asked, and says so to its
//! progress sink; a bundle made from other inputs is not read back.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use evident_app::study::{run, DatabaseHashRequest, Strategy, StudyRequest};
use evident_app::{Config, ModelChoice, ProgressEvent, Session};
use serde_json::json;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn a_finished_run_is_read_back_without_its_database() {
    let dir = tempfile::tempdir().unwrap();
    let session =
        Session::with_config(&dir.path().join("evident.db"), Config::parse("", Path::new("evident.toml")).unwrap());
    let task = repo().join("crates/rwe/tasks/lactate-hospital-mortality");
    // Nothing listens on port 9, and there is no database file: either,
    // reached, would fail the run.
    let model = ModelChoice::endpoint("http://127.0.0.1:9/v1", "judge-model");
    let model_id = evident_llm::ChatModel::model_id(&session.chat_model(&model, "probe", false).unwrap()).to_string();
    let out = dir.path().join("run");
    std::fs::create_dir_all(&out).unwrap();
    let bundle = |model: &str| {
        json!({
            "evident_version": env!("CARGO_PKG_VERSION"),
            "task_sha256": evident_rwe::bundle::sha256_file(&task.join("task.yaml")).unwrap(),
            "prompts_sha256": evident_rwe::bundle::prompts_sha256(),
            "strategy": "typed-read",
            "model": model,
            "database": {"url": "sqlite:missing.db"},
            "cohort_audit": null,
            "score": {"task": "lactate-hospital-mortality", "acc": 1.0, "rar": null, "smr": null, "success": true,
                      "success_screened": false, "complete": true, "steps": 4},
            "run": {"steps": [], "termination": "completed", "resumed_steps": 0, "prompt_tokens": 120,
                    "completion_tokens": 30},
        })
        .to_string()
    };
    std::fs::write(out.join("bundle.json"), bundle(&model_id)).unwrap();
    std::fs::write(out.join("report.html"), "<!DOCTYPE html>").unwrap();
    let request = StudyRequest {
        task: task.clone(),
        db: "sqlite:missing.db".into(),
        model,
        strategy: Strategy::TypedRead,
        out: out.clone(),
        max_steps: None,
        judge: Some(evident_app::study::JudgeStrategy::Paper),
        use_cache: false,
        seed: None,
        database_hash: DatabaseHashRequest::default(),
    };
    let events = Mutex::new(Vec::new());
    let sink = |event: ProgressEvent| events.lock().unwrap().push(event);
    let report = run(&session, &request, &sink).unwrap();
    assert!(report.from_bundle);
    assert_eq!(
        (report.task.as_str(), report.prompt_tokens, report.score.steps),
        ("lactate-hospital-mortality", 120, 4)
    );
    // No audit file was exported: not qualified.
    assert_eq!(report.cohort_qualified, Some(false));
    assert_eq!(
        events.lock().unwrap().clone(),
        [
            ProgressEvent::StudyStage {
                label: "lactate-hospital-mortality (typed-read)".into(),
                stage: "read back from its bundle".into()
            },
            ProgressEvent::StudyFinished
        ]
    );

    // Another model's bundle: the run starts, and stops at the database.
    std::fs::write(out.join("bundle.json"), bundle("another-model")).unwrap();
    events.lock().unwrap().clear();
    let error = run(&session, &request, &sink).unwrap_err().to_string();
    assert!(error.contains("missing.db"), "{error}");
    assert_eq!(events.lock().unwrap().clone(), [ProgressEvent::StudyFinished]);
}
