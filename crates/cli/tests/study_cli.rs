//! `evident study` end to end on the embedded model: the MIMIC-IV demo is
//! loaded into SQLite, the study agent takes one step in its sandboxed R
//! workspace, the bundle is written with the step, the database hash and
//! the score; running the same command again resumes the stored run and
//! repeats no step.

mod common;

use common::{repo_root, shared_data, Sandbox};

#[test]
fn a_study_step_on_the_embedded_model_writes_a_bundle_and_resumes() {
    let s = Sandbox::new();
    let demo = shared_data().join("mimic-iv-demo");
    s.run(&["db", "load", "mimic", demo.to_str().unwrap(), "--into", "sqlite:demo.db"]).ok();
    let task = repo_root().join("crates/rwe/tasks/lactate-hospital-mortality");
    let args = [
        "--json",
        "study",
        task.to_str().unwrap(),
        "--database",
        "sqlite:demo.db",
        "--max-steps",
        "1",
        "--no-judge",
        "--out",
        "run",
    ];
    let first = s.run(&args).ok().json();
    let report = &first[0];
    assert_eq!(report["task"], "lactate-hospital-mortality");
    assert_eq!(report["strategy"], "r");
    assert_eq!(report["steps"], 1, "{report:#}");
    assert_eq!(report["resumed_steps"], 0);
    let bundle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.path().join("run/bundle.json")).unwrap()).unwrap();
    let steps = bundle["run"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1);
    assert!(!steps[0]["output"].as_str().unwrap().is_empty());
    assert_eq!(bundle["database"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(bundle["task"]["id"], "lactate-hospital-mortality");
    assert!(s.path().join("run/workspace/db_connect.R").is_file());
    // Again: the stored step is replayed, not repeated.
    let again = s.run(&args).ok().json();
    assert_eq!(again[0]["resumed_steps"], 1);
    assert_eq!(again[0]["steps"], 1);
    assert_eq!(std::fs::read_to_string(s.path().join("run/steps.jsonl")).unwrap().lines().count(), 1);
}
