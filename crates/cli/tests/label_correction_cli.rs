//! The label correction from `evident eval trialgpt` to `evident match`, as
//! a user runs it: the evaluation fits and writes the table, `match
//! --label-correction` loads and applies it (the stored decision keeps the
//! model's label and the corrected one; the report shows both and names the
//! table's file), a malformed table is refused with exit 2 naming the field,
//! and a table fitted for another strategy is refused.
//!
//! The model is a scripted OpenAI-compatible endpoint on loopback, served by
//! this test: it answers MET to every criterion, the lean the correction
//! undoes, so the test needs no real model and the expected labels follow
//! from the table the evaluation wrote.

mod common;

use common::{repo_root, shared_data, Sandbox};
use serde_json::{json, Value};

/// A scripted endpoint (`common::scripted_endpoint`) whose every answer is
/// an assessment with the decision MET.
fn scripted_endpoint() -> String {
    common::scripted_endpoint(|_| {
        let answer = json!({
            "medications_and_supplements": [],
            "rationale": "scripted: the record is taken to meet the criterion",
            "decision": "MET",
            "confidence": "low",
            "evidence": [],
        });
        json!({"message": {"role": "assistant", "content": answer.to_string()}, "finish_reason": "stop"})
    })
}

#[test]
fn a_fitted_table_is_written_applied_by_match_and_refused_when_malformed_or_for_another_strategy() {
    let sb = Sandbox::new();
    let endpoint = scripted_endpoint();
    let annotations = shared_data().join("trialgpt/criterion_annotations_dev.json");

    // Fit on the first 3 annotated patients (49 rows) and write the table.
    let eval = [
        "eval",
        "trialgpt",
        "--annotations",
        annotations.to_str().unwrap(),
        "--limit-patients",
        "3",
        "--strategy",
        "ican",
        "--endpoint",
        &endpoint,
        "--label-correction",
        "--save-correction",
        "fitted/table.json",
        "--out",
        "eval",
    ];
    let out = sb.run(&eval).ok();
    assert!(out.stdout().contains("fitted/table.json"), "{}", out.stdout());
    let table: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join("fitted/table.json")).unwrap()).unwrap();
    assert_eq!(table["format"], "evident-label-correction");
    assert_eq!(table["version"], 1);
    assert_eq!(table["strategy"], "ican");
    assert_eq!(table["fitted_on"]["rows"], 49, "{table}");
    assert_eq!(table["fitted_on"]["patients"], 3, "{table}");
    // Every answer was MET: one cell per criterion type, holding all its rows.
    let cells = table["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{table}");
    assert!(cells.iter().all(|c| c["predicted"] == "MET"), "{table}");
    let rows: u64 = cells.iter().map(|c| c["rows"].as_u64().unwrap()).sum();
    assert_eq!(rows, 49);
    let corrected =
        |ty: &str| cells.iter().find(|c| c["criterion_type"] == ty).unwrap()["corrected"].as_str().unwrap().to_string();
    // The physicians' most common label for an exclusion is NOT MET.
    assert_eq!(corrected("exclusion"), "NOT MET", "{table}");

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
            "--label-correction",
            table,
            "--out",
            "out",
        ])
    };
    let out = screen("fitted/table.json", "ican").ok();
    assert!(out.stdout().contains("label correction applied from fitted/table.json"), "{}", out.stdout());
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join("out/decisions.json")).unwrap()).unwrap();
    let trial_report = &report["trials"][0];
    assert_eq!(trial_report["label_correction"]["table"], "fitted/table.json", "{trial_report}");
    let criteria = trial_report["patients"][0]["criteria"].as_array().unwrap();
    assert_eq!(criteria.len(), 5);
    let mut relabelled = 0;
    for c in criteria {
        let ty = c["criterion"]["type"].as_str().unwrap();
        let applied = &c["label_correction"];
        assert_eq!(applied["model_decision"], "MET", "the model's label is kept: {c}");
        assert_eq!(applied["corrected"], corrected(ty).as_str(), "{c}");
        assert_eq!(
            c["result"]["outcome"]["decision"],
            corrected(ty).as_str(),
            "the decision carries the corrected label"
        );
        relabelled += usize::from(applied["changed"] == true);
    }
    assert!(relabelled >= 4, "the 4 exclusions are relabelled");
    assert_eq!(trial_report["label_correction"]["relabelled"], relabelled);
    // The store keeps both labels: the corrected one in the result, the
    // model's in the trace.
    let store = sb.store();
    let run_id = trial_report["run_id"].as_str().unwrap();
    let results = store.match_results(run_id).unwrap();
    assert_eq!(results.len(), 5);
    for r in results {
        let result: Value = serde_json::from_str(&r.result_json).unwrap();
        let trace: Value = serde_json::from_str(r.trace_json.as_deref().unwrap()).unwrap();
        assert_eq!(trace["label_correction"]["model_decision"], "MET", "{trace}");
        assert_eq!(result["outcome"]["decision"], trace["label_correction"]["corrected"], "{result}");
    }
    let html = std::fs::read_to_string(sb.path().join("out/report.html")).unwrap();
    assert!(
        html.contains("Label correction applied</b> from <code>fitted/table.json</code>"),
        "the report names the file"
    );
    assert!(html.contains("model MET -&gt; corrected NOT MET"), "the report shows both labels");
    let csv = std::fs::read_to_string(sb.path().join("out/decisions.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",model_decision,label_correction,threshold,decided_by"), "{csv}");
    assert!(csv.lines().skip(1).all(|l| l.ends_with(",model")), "{csv}");
    assert!(csv.contains(",MET,\"model MET -> corrected NOT MET (table fitted/table.json;"), "{csv}");

    // A malformed table: exit 2, naming the file and the field.
    let mut bad = table.clone();
    bad["cells"][1]["predicted"] = json!("PROBABLY");
    sb.write("bad.json", &serde_json::to_string_pretty(&bad).unwrap());
    screen("bad.json", "ican").fails_with(2, "bad.json: field cells[1].predicted: \"PROBABLY\" is not a label");
    let mut bad = table.clone();
    bad.as_object_mut().unwrap().remove("model");
    sb.write("bad.json", &serde_json::to_string_pretty(&bad).unwrap());
    screen("bad.json", "ican").fails_with(2, "bad.json: field model: missing");
    sb.write("bad.json", "{\"format\": ");
    screen("bad.json", "ican").fails_with(2, "bad.json: the label correction table is not JSON");

    // A table fitted for ican is refused for another strategy.
    screen("fitted/table.json", "acan").fails_with(
        2,
        "fitted/table.json: this table was fitted for strategy \"ican\", but this screening uses \"acan\"",
    );
    screen("fitted/table.json", "icin").fails_with(2, "icin decides note by note");
}
