//! The threshold on P(MET) from `evident eval trialgpt` to `evident match`,
//! as a user runs it, over the OpenAI-compatible provider: the evaluation
//! asks for log-probabilities, fits the thresholds and writes the table;
//! `match --thresholds` loads and applies it (the stored trace keeps the
//! model's P(MET), its label and the threshold); a malformed table and a
//! table fitted for another strategy are refused with exit 2.
//!
//! The model is a scripted OpenAI-compatible endpoint on loopback, served by
//! this test: it answers 1 to every criterion, with log-probabilities for
//! "1" and "0" that depend on the criterion's text, so the test needs no
//! real model and the expected labels follow from the table written.

mod common;

use common::{repo_root, shared_data, Sandbox};
use serde_json::{json, Value};

/// The scripted P("1") for a prompt: 0.55 to 0.95 by the prompt's length.
fn p_one(prompt: &str) -> f64 {
    0.55 + 0.1 * (prompt.len() % 5) as f64
}

/// A scripted endpoint (`common::scripted_endpoint`) that answers "1",
/// with the log-probabilities [`p_one`] gives where the request asks for them.
fn scripted_endpoint() -> String {
    common::scripted_endpoint(|request| {
        let prompt = request["messages"][0]["content"].as_str().unwrap_or_default();
        let p = p_one(prompt);
        let mut choice = json!({"message": {"role": "assistant", "content": "1"}, "finish_reason": "stop"});
        if request["logprobs"] == true {
            choice["logprobs"] = json!({"content": [{"token": "1", "logprob": p.ln(), "top_logprobs": [
                {"token": "1", "logprob": p.ln()}, {"token": "0", "logprob": (1.0 - p).ln()}]}]});
        }
        choice
    })
}

#[test]
fn thresholds_are_fitted_written_applied_by_match_and_refused_when_malformed_or_for_another_strategy() {
    let sb = Sandbox::new();
    let endpoint = scripted_endpoint();
    let annotations = shared_data().join("trialgpt/criterion_annotations_dev.json");

    let eval = [
        "eval",
        "trialgpt",
        "--annotations",
        annotations.to_str().unwrap(),
        "--limit-patients",
        "3",
        "--strategy",
        "makar-zero-shot",
        "--endpoint",
        &endpoint,
        "--threshold-calibration",
        "--save-thresholds",
        "fitted/thresholds.json",
        "--out",
        "eval",
    ];
    let out = sb.run(&eval).ok();
    assert!(out.stdout().contains("Threshold on P(MET) (Evident's, not a paper's)"), "{}", out.stdout());
    assert!(out.stdout().contains("Rows with a P(MET): 49 of 49"), "{}", out.stdout());
    assert!(out.stdout().contains("| label correction (leave one patient out) | 49 |"), "{}", out.stdout());
    let table: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join("fitted/thresholds.json")).unwrap()).unwrap();
    assert_eq!(table["format"], "evident-threshold-calibration");
    assert_eq!(table["strategy"], "makar-zero-shot");
    assert_eq!(table["fitted_on"]["rows"], 49, "{table}");
    let threshold = |ty: &str| {
        table["thresholds"].as_array().unwrap().iter().find(|t| t["criterion_type"] == ty).unwrap()["threshold"]
            .as_f64()
            .unwrap()
    };
    let eval_json: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join("eval/eval.json")).unwrap()).unwrap();
    assert_eq!(eval_json["threshold_calibration"]["summary"]["rows_with_probability"], 49);

    // Screen a patient with the table.
    let queries = shared_data().join("trialgpt/dataset/sigir/queries.jsonl");
    sb.run(&["ingest", queries.to_str().unwrap(), "--format", "trialgpt"]).ok();
    let trial = repo_root().join("criteria/trialgpt-NCT00163709.yaml");
    let trial = trial.to_str().unwrap();
    let screen = |table: &str, strategy: &str| {
        sb.run(&[
            "match",
            "--trial",
            trial,
            "--patients",
            "sigir-20141",
            "--strategy",
            strategy,
            "--endpoint",
            &endpoint,
            "--thresholds",
            table,
            "--out",
            "out",
        ])
    };
    let out = screen("fitted/thresholds.json", "makar-zero-shot").ok();
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join("out/decisions.json")).unwrap()).unwrap();
    let run_id = report["trials"][0]["run_id"].as_str().unwrap().to_string();
    let results = sb.store().match_results(&run_id).unwrap();
    assert_eq!(results.len(), 5, "{}", out.stdout());
    for r in results {
        let result: Value = serde_json::from_str(&r.result_json).unwrap();
        let trace: Value = serde_json::from_str(r.trace_json.as_deref().unwrap()).unwrap();
        let ty = result["criterion_type"].as_str().unwrap();
        let p = trace["p_met"].as_f64().unwrap();
        let applied = &trace["threshold"];
        assert_eq!(applied["model_decision"], "MET", "the model's label is kept: {trace}");
        assert_eq!(applied["threshold"].as_f64().unwrap(), threshold(ty), "{trace}");
        let expected = if p >= threshold(ty) { "MET" } else { "NOT MET" };
        assert_eq!(result["outcome"]["decision"], expected, "P(MET) {p}: {result}");
        assert_eq!(applied["decision"], expected);
    }
    // The report says the threshold was applied, and shows it beside each decision.
    let relabelled = report["trials"][0]["patients"][0]["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["threshold"]["changed"] == true)
        .count();
    assert_eq!(report["trials"][0]["thresholds"]["decisions"], 5, "{}", report["trials"][0]["thresholds"]);
    assert_eq!(report["trials"][0]["thresholds"]["relabelled"], relabelled);
    assert!(out
        .stdout()
        .contains(&format!("threshold on P(MET) applied from fitted/thresholds.json: {relabelled} of 5")));
    let csv = std::fs::read_to_string(sb.path().join("out/decisions.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",model_decision,label_correction,threshold,decided_by"), "{csv}");
    assert!(csv.matches("threshold 0.").count() >= 5, "{csv}");
    let html = std::fs::read_to_string(sb.path().join("out/report.html")).unwrap();
    assert!(html.contains("Threshold on P(MET) applied"), "the trial's header says so");
    assert_eq!(html.matches("Threshold on P(MET): model MET").count(), 5, "one line per decision");

    // A malformed table: exit 2, naming the file and the field.
    let mut bad = table.clone();
    bad["thresholds"][0]["threshold"] = json!(2.0);
    sb.write("bad.json", &serde_json::to_string_pretty(&bad).unwrap());
    screen("bad.json", "makar-zero-shot")
        .fails_with(2, "bad.json: field thresholds[0].threshold: expected a number from 0 to 1");
    // A table fitted for makar-zero-shot is refused for another strategy.
    screen("fitted/thresholds.json", "makar-aug").fails_with(
        2,
        "fitted/thresholds.json: this table was fitted for strategy \"makar-zero-shot\", but this screening uses \"makar-aug\"",
    );
    // A strategy without a 0/1 answer has no P(MET).
    screen("fitted/thresholds.json", "ican").fails_with(2, "P(MET) from log-probabilities is read at");
}
