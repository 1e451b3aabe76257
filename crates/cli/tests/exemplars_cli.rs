//! `evident exemplars import` and screening with exemplars, through the
//! binary: the TrialGPT development annotations become a bank (MiniLM
//! vectors; importing again replaces, never adds), then `eval trialgpt
//! --exemplars --calibrate` on one patient with the embedded model runs
//! leave-one-patient-out (no exemplar of that patient in any decision's
//! trace), reports the paired difference against plain ICAN and the label
//! confusion; matching on the deciding sentences (`--exemplars-match
//! evidence`) keeps it leave-one-patient-out; bad input exits 2 naming what
//! to fix.

mod common;

use std::collections::BTreeMap;

use common::{shared_data, Sandbox};
use serde_json::Value;

fn annotations() -> String {
    shared_data().join("trialgpt/criterion_annotations_dev.json").to_str().unwrap().to_string()
}

/// annotation id -> topic, from the file.
fn topics() -> BTreeMap<u64, String> {
    let rows: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(annotations()).unwrap()).unwrap();
    rows.iter().map(|r| (r["annotation_id"].as_u64().unwrap(), r["patient_id"].as_str().unwrap().to_string())).collect()
}

#[test]
fn import_then_evaluate_leave_one_patient_out_with_calibration() {
    let sb = Sandbox::new();
    let imported = sb.run(&["--json", "exemplars", "import", &annotations(), "--bank", "dev"]).ok().json();
    assert_eq!(imported["imported"], 538, "every row with criterion text: {imported}");
    assert_eq!(imported["skipped_without_criterion"], 1, "annotation 883 has none");
    assert_eq!(imported["bank_size"], 538);
    assert_eq!(imported["labels"]["NOT MET"], 274, "12 not included + 262 not excluded");
    let again = sb.run(&["--json", "exemplars", "import", &annotations(), "--bank", "dev"]).ok().json();
    assert_eq!(again["bank_size"], 538, "importing again replaces the rows");
    let stored = sb.store().exemplars("dev").unwrap();
    let row43 = stored.iter().find(|e| e.exemplar.source_ref.ends_with("#43")).unwrap();
    assert_eq!(row43.exemplar.patient_id, "trialgpt-dev:sigir-20143");
    assert_eq!(row43.exemplar.embedding.len(), 384, "MiniLM's vector");
    let listed = sb.run(&["exemplars", "list"]).ok().stdout();
    assert!(listed.contains("dev") && listed.contains("538 exemplars"), "{listed}");

    let args = [
        "--json",
        "eval",
        "trialgpt",
        "--annotations",
        &annotations(),
        "--topics",
        "sigir-20143",
        "--strategy",
        "ican",
        "--exemplars",
        "dev",
        "--exemplars-k",
        "2",
        "--calibrate",
        "--out",
        "eval",
    ];
    let result = sb.run(&args).ok().json();
    assert_eq!(result["rows"], 6);
    assert_eq!(result["exemplars"]["leave_one_patient_out"], true);
    assert_eq!(result["baseline"]["method"], "ican", "the same strategy without exemplars: {result}");
    assert!(result["baseline"]["difference"]["accuracy"].is_object());
    let confusion: u64 = result["label_confusion"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|row| row.as_object().unwrap().values())
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(confusion, 6, "every row once in the confusion");
    let md = std::fs::read_to_string(sb.path().join("eval/eval.md")).unwrap();
    assert!(md.contains("Label confusion") && md.contains("leave one patient out"), "{md}");

    // A decision names the exemplars it saw (it has no trace when none was
    // close enough); none is sigir-20143's own.
    assert!(exemplars_shown(&sb, &result, "sigir-20143") > 0, "some exemplar was close enough to be shown");
    for run in result["runs"].as_array().unwrap() {
        for r in sb.store().match_results(run.as_str().unwrap()).unwrap() {
            // Calibration: nothing MET or NOT MET without a cited sentence.
            let result: Value = serde_json::from_str(&r.result_json).unwrap();
            if result["outcome"]["status"] == "assessed" {
                let decision = result["outcome"]["decision"].as_str().unwrap();
                let cited = !result["outcome"]["evidence"].as_array().unwrap().is_empty();
                assert!(cited || !matches!(decision, "MET" | "NOT MET"), "{result}");
            }
        }
    }
}

/// The exemplars the decisions of an evaluation's runs saw, after checking
/// that none is `topic`'s own.
fn exemplars_shown(sb: &Sandbox, result: &Value, topic: &str) -> usize {
    let topics = topics();
    let mut seen = 0;
    for run in result["runs"].as_array().unwrap() {
        for r in sb.store().match_results(run.as_str().unwrap()).unwrap() {
            let trace: Value = r.trace_json.as_deref().map(|t| serde_json::from_str(t).unwrap()).unwrap_or_default();
            for e in trace["exemplars"].as_array().into_iter().flatten() {
                let id: u64 = e["source_ref"].as_str().unwrap().rsplit('#').next().unwrap().parse().unwrap();
                assert_ne!(topics[&id], topic, "the patient's own row {id} was shown");
                seen += 1;
            }
        }
    }
    seen
}

/// Matching on evidence, with the paper's one-call C-A prompt: the
/// evaluation says what was matched, and still no exemplar of the patient
/// screened is shown.
#[test]
fn exemplars_matched_on_the_deciding_sentences_are_still_never_the_patients_own() {
    let sb = Sandbox::new();
    sb.run(&["exemplars", "import", &annotations(), "--bank", "dev"]).ok();
    let args = [
        "--json",
        "eval",
        "trialgpt",
        "--annotations",
        &annotations(),
        "--topics",
        "sigir-20143",
        "--strategy",
        "makar-zero-shot",
        "--exemplars",
        "dev",
        "--exemplars-match",
        "evidence",
        "--out",
        "eval",
    ];
    let result = sb.run(&args).ok().json();
    assert_eq!(result["rows"], 6);
    assert_eq!(result["exemplars"]["match"], "evidence", "{result}");
    let md = std::fs::read_to_string(sb.path().join("eval/eval.md")).unwrap();
    assert!(md.contains("matched on the criterion texts with the sentences that decide them"), "{md}");
    assert!(exemplars_shown(&sb, &result, "sigir-20143") > 0, "some exemplar was close enough to be shown");
}

#[test]
fn bad_exemplar_options_are_refused_before_any_screening() {
    let sb = Sandbox::new();
    let base = ["eval", "trialgpt", "--annotations", &annotations(), "--topics", "sigir-20143"];
    let with = |extra: &[&str]| -> Vec<String> { base.iter().chain(extra).map(|s| s.to_string()).collect() };
    let run = |args: Vec<String>| sb.run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    run(with(&["--exemplars", "nosuch"])).fails_with(2, "no exemplar bank \"nosuch\"");
    run(with(&["--exemplars", "nosuch", "--exemplars-k", "0"])).fails_with(2, "--exemplars-k must be at least 1");
    run(with(&["--exemplars", "nosuch", "--exemplars-match", "nearest"])).fails_with(2, "nearest");
    run(with(&["--strategy", "makar", "--calibrate"]))
        .fails_with(2, "calibration is for strategies whose decisions cite sentences");
    run(with(&["--strategy", "makar-evident", "--exemplars", "x"])).fails_with(2, "not by makar-evident");
    sb.run(&["exemplars", "import", "missing.json"]).fails_with(2, "missing.json");
    assert_eq!(sb.store().exemplar_banks().unwrap(), vec![], "nothing written");
}
