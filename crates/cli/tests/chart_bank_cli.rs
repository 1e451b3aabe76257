//! The development question bank as a user builds and checks it, with no
//! model: `evident eval chart-bank` regenerates the committed banks
//! byte for byte from the 40 Synthea R4 bundles and from the MIMIC-IV demo
//! with seed 42, refuses the
//! held-out Synthea patients with notes, and `evident eval chart` refuses
//! a bad questions file, an unknown method and a patient not in the store
//! with exit 2, naming the place, with nothing written.

mod common;

use common::{repo_root, shared_data, Sandbox};

#[test]
fn the_committed_development_bank_regenerates_with_its_seed() {
    let sb = Sandbox::new();
    let data = shared_data().join("synthea/generated-sample-data-R4");
    let run = sb
        .run(&["--json", "eval", "chart-bank", "--from", data.to_str().unwrap(), "--seed", "42", "--out", "bank.jsonl"])
        .ok();
    let out = run.json();
    assert_eq!(out["patients"], 40, "{out}");
    let generated = std::fs::read_to_string(sb.path().join("bank.jsonl")).unwrap();
    let committed = std::fs::read_to_string(repo_root().join("examples/chart/bank/dev.jsonl")).unwrap();
    assert!(generated == committed, "regenerating with seed 42 must reproduce examples/chart/bank/dev.jsonl");
    // Another seed draws another bank.
    sb.run(&["eval", "chart-bank", "--from", data.to_str().unwrap(), "--seed", "7", "--out", "other.jsonl"]).ok();
    assert_ne!(std::fs::read_to_string(sb.path().join("other.jsonl")).unwrap(), committed);
}

#[test]
fn the_committed_mimic_bank_regenerates_with_its_seed() {
    let sb = Sandbox::new();
    let data = shared_data().join("mimic-iv-demo");
    let out = sb
        .run(&[
            "--json",
            "eval",
            "chart-bank",
            "--from",
            data.to_str().unwrap(),
            "--seed",
            "42",
            "--out",
            "mimic.jsonl",
        ])
        .ok()
        .json();
    assert_eq!(out["patients"], 100, "{out}");
    let generated = std::fs::read_to_string(sb.path().join("mimic.jsonl")).unwrap();
    let committed = std::fs::read_to_string(repo_root().join("examples/chart/bank/dev-mimic.jsonl")).unwrap();
    assert!(generated == committed, "regenerating with seed 42 must reproduce examples/chart/bank/dev-mimic.jsonl");
    // What MIMIC-IV cannot say is not asked: no condition intervals (its
    // diagnoses have no onset or resolution) and no BMI category (no BMI
    // among its lab results).
    for line in committed.lines() {
        let q: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(!["G22", "G26"].contains(&q["template"].as_str().unwrap()), "{q}");
        for e in q["gold_evidence"].as_array().unwrap() {
            assert!(e["document_id"].as_str().unwrap().starts_with("mimic:"), "{e}");
        }
    }
}

#[test]
fn the_held_out_patients_with_notes_are_refused() {
    let sb = Sandbox::new();
    let held_out = shared_data().join("synthea/sample-bulk-fhir-datasets-10-patients");
    sb.run(&["eval", "chart-bank", "--from", held_out.to_str().unwrap(), "--out", "bank.jsonl"])
        .fails_with(2, "independent evaluation");
    assert!(!sb.path().join("bank.jsonl").exists());
}

#[test]
fn bad_evaluation_input_exits_2_naming_the_place() {
    let sb = Sandbox::new();
    let committed = std::fs::read_to_string(repo_root().join("examples/chart/bank/dev.jsonl")).unwrap();
    let first = committed.lines().next().unwrap();
    let mut bad: serde_json::Value = serde_json::from_str(first).unwrap();
    bad["id"] = "other".into();
    bad["level"] = 4.into();
    sb.write("bad.jsonl", &format!("{first}\n{bad}\n"));
    sb.run(&["eval", "chart", "--questions", "bad.jsonl", "--method", "baseline", "--out", "out"])
        .fails_with(2, "bad.jsonl:2: field `level`");
    assert!(!sb.path().join("out").exists(), "nothing written");
    sb.write("one.jsonl", &format!("{first}\n"));
    sb.run(&["eval", "chart", "--questions", "one.jsonl", "--method", "oracle", "--out", "out"])
        .fails_with(2, "method \"oracle\" is unknown");
    sb.run(&["eval", "chart", "--questions", "one.jsonl", "--method", "baseline", "--out", "out"])
        .fails_with(2, "one.jsonl:1: field `patient`");
    assert!(!sb.path().join("out").exists(), "nothing written");
    sb.run(&["eval", "chart", "--questions", "one.jsonl", "--method", "baseline", "--sample", "0", "--out", "out"])
        .fails_with(2, "--sample 0 selects no question");
    sb.run(&["eval", "chart", "--questions", "one.jsonl", "--method", "baseline", "--skip", "1", "--out", "out"])
        .fails_with(2, "--skip 1 leaves no question: the file holds 1");
    let runs = ["eval", "chart", "--questions", "one.jsonl", "--method", "baseline", "--method", "agent-no-skills"];
    sb.run(&[&runs[..], &["--runs", "3", "--out", "out"]].concat()).fails_with(
        2,
        "--runs 3 with agent-no-skills: the agent decodes greedily, so its runs would all be the same; give --agent-temperature",
    );
    sb.run(&[&runs[..], &["--runs", "3", "--agent-temperature", "3", "--out", "out"]].concat())
        .fails_with(2, "temperature 3 is outside 0-2");
    sb.run(&[
        "eval",
        "chart",
        "--questions",
        "one.jsonl",
        "--method",
        "baseline",
        "--sample-seed",
        "3",
        "--out",
        "out",
    ])
    .fails_with(2, "--sample");
    assert!(!sb.path().join("out").exists(), "nothing written");
}
