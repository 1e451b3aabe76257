//! The model flags every command that asks about patients takes
//! (`--model`, `--endpoint`, `--endpoint-model`, `--allow-remote`):
//! the studies' evaluations take them too, so the cohort judge answers
//! from an OpenAI-compatible server (a larger model on another machine's
//! GPU is measured with the same command); an endpoint off this machine is
//! refused without `--allow-remote` before any patient fact is sent; and
//! an endpoint's answers are cached only under a named model.
//!
//! The servers are scripted on loopback (`common::scripted_endpoint`).

mod common;

use common::{repo_root, shared_data, Sandbox};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use serde_json::json;

/// The judge keeps every case ("Do not exclude"), so the measures follow
/// from the cases the check builds.
#[test]
fn the_cohort_judge_asks_an_openai_compatible_endpoint_and_refuses_a_remote_one() {
    let s = Sandbox::new();
    let demo = shared_data().join("mimic-iv-demo");
    s.run(&["db", "load", "mimic", demo.to_str().unwrap(), "--into", "sqlite:demo.db"]).ok();
    let keep = json!({
        "unevaluable_criteria": [],
        "decision": "Do not exclude",
        "triggered_exclusion_criteria": [],
        "evidence": "N/A",
    });
    let endpoint = common::scripted_endpoint(
        move |_| json!({"message": {"role": "assistant", "content": keep.to_string()}, "finish_reason": "stop"}),
    );
    let task = repo_root().join("crates/rwe/tasks/lactate-hospital-mortality");
    let task = task.to_str().unwrap();
    let check = |endpoint: &str, more: &[&str]| {
        s.run(
            &[
                "--json",
                "eval",
                "cohort-judge",
                task,
                "--database",
                "sqlite:demo.db",
                "--runs",
                "1",
                "--members",
                "4",
                "--counterfactuals",
                "2",
                "--adversarial",
                "1",
                "--endpoint",
                endpoint,
                "--endpoint-model",
                "judge-on-a-gpu",
            ]
            .iter()
            .chain(more)
            .copied()
            .collect::<Vec<_>>(),
        )
    };
    let report = check(&endpoint, &[]).ok().json();
    assert_eq!(report["task"], "lactate-hospital-mortality");
    assert!(report["model"].as_str().unwrap().contains("judge-on-a-gpu"), "{report:#}");
    // 4 members and 2 + 1 negatives, every one kept.
    assert_eq!(report["runs"][0].as_array().unwrap().len(), 7, "{report:#}");
    assert_eq!(report["sensitivity"]["mean"], 1.0, "{report:#}");
    assert_eq!(report["specificity"]["mean"], 0.0, "{report:#}");

    // Off this machine (TEST-NET-1, never routed), the cache aside:
    // refused before anything is sent.
    let refused = check("http://192.0.2.1:8000/v1", &["--no-cache"])
        .fails_with(2, "refusing to send patient text to non-loopback endpoint http://192.0.2.1:8000/v1");
    // (--json: the error is the JSON on standard output.)
    assert!(refused.stdout().contains("pass --allow-remote if this is intended"), "{}", refused.stdout());

    // The study agent's own calls are held to the same rule.
    let refused = s
        .run(&[
            "study",
            task,
            "--database",
            "sqlite:demo.db",
            "--endpoint",
            "http://192.0.2.1:8000/v1",
            "--no-cache",
            "--max-steps",
            "1",
            "--no-judge",
            "--out",
            "study",
        ])
        .fails_with(2, "refusing to send patient text to non-loopback endpoint http://192.0.2.1:8000/v1");
    assert!(refused.stderr().contains("pass --allow-remote if this is intended"), "{}", refused.stderr());
}

/// An endpoint's answers are cached under the model name sent to it. The
/// unnamed "default" (which a llama.cpp server ignores, answering with
/// whatever weights it loaded) is never cached: two servers' or two loads'
/// answers would share it.
#[test]
fn an_unnamed_endpoint_model_is_never_answered_from_the_cache() {
    let s = Sandbox::new();
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let endpoint = common::scripted_endpoint(move |_| {
        counter.fetch_add(1, SeqCst);
        json!({"message": {"role": "assistant", "content": "Fine."}, "finish_reason": "stop"})
    });
    let chat = |more: &[&str]| {
        let args = [&["llm", "chat", "How are you?", "--endpoint", endpoint.as_str()], more].concat();
        assert_eq!(s.run(&args).ok().stdout().trim(), "Fine.");
    };
    chat(&[]);
    chat(&[]);
    assert_eq!(asked.load(SeqCst), 2, "unnamed: asked both times");
    chat(&["--endpoint-model", "qwen2.5-72b"]);
    chat(&["--endpoint-model", "qwen2.5-72b"]);
    assert_eq!(asked.load(SeqCst), 3, "named: the second answer is the cache's");
}
