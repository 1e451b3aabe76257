//! `evident match` on the embedded default model, driven as a user would:
//! a batch over SIGIR patients against a TrialGPT-annotated trial, killed
//! with SIGKILL midway and started again (no decision lost or doubled,
//! earlier decisions kept, every citation resolving to stored text); an
//! exclusion a patient plainly meets puts the patient in "excluded" while a
//! control patient screened beside them, plainly without it, is not (the
//! criteria pasted as registry text); and bad input is refused with a
//! clear message.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{repo_root, shared_data, Sandbox};
use serde_json::Value;

fn ingest_sigir(sb: &Sandbox) {
    let queries = shared_data().join("trialgpt/dataset/sigir/queries.jsonl");
    sb.run(&["ingest", queries.to_str().unwrap(), "--format", "trialgpt"]).ok();
}

/// (patient, criterion) -> stored result JSON.
fn stored(sb: &Sandbox) -> BTreeMap<(String, String), String> {
    let store = sb.store();
    let mut out = BTreeMap::new();
    for run in store.match_runs().unwrap() {
        for r in store.match_results(&run.id).unwrap() {
            let previous = out.insert((r.patient_id.clone(), r.criterion_id.clone()), r.result_json);
            assert!(previous.is_none(), "decision stored twice: {} {}", r.patient_id, r.criterion_id);
        }
    }
    out
}

/// Every evidence entry of every decision in decisions.json shows stored
/// text, and no decision reports a citation problem.
fn assert_citations_resolve(report: &Value) -> usize {
    let mut cited = 0;
    for trial in report["trials"].as_array().unwrap() {
        for patient in trial["patients"].as_array().unwrap() {
            for c in patient["criteria"].as_array().unwrap() {
                assert_eq!(c["problems"], Value::Array(vec![]), "citation problem in {c}");
                let evidence = c["result"]["outcome"]["evidence"].as_array().cloned().unwrap_or_default();
                let shown: usize = c["evidence"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|e| e["passages"].as_array().unwrap().iter())
                    .flat_map(|p| p.as_array().unwrap().iter())
                    .filter(|s| s[2] == Value::Bool(true))
                    .inspect(|s| assert!(!s[1].as_str().unwrap().is_empty()))
                    .count();
                assert_eq!(shown, evidence.len(), "every cited sentence is shown from the store: {c}");
                cited += shown;
            }
        }
    }
    cited
}

#[test]
fn sigir_batch_resumes_after_kill_without_losing_or_doubling_decisions() {
    let sb = Sandbox::new();
    ingest_sigir(&sb);
    let trial = repo_root().join("criteria/trialgpt-NCT00163709.yaml");
    let args = [
        "match",
        "--trial",
        trial.to_str().unwrap(),
        "--patients",
        "sigir-201413,sigir-20141,sigir-20142",
        "--strategy",
        "ican",
        "--out",
        "out",
    ];
    let expected = 3 * 5;

    // Start, wait until some decisions are stored, then SIGKILL.
    let mut child =
        sb.cmd(&args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let started = Instant::now();
    loop {
        if sb.db().exists() && stored(&sb).len() >= 4 {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be killed");
        assert!(started.elapsed() < Duration::from_secs(900), "no decisions stored after 15 minutes");
        std::thread::sleep(Duration::from_millis(200));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before_kill = stored(&sb);
    assert!(before_kill.len() < expected, "killed after the run finished");
    assert!(!sb.path().join("out/report.html").exists(), "no report from a killed run");

    // Start again: it finishes, runs only what was missing, keeps the rest.
    let second = sb.run(&[&args[..], &["--json"]].concat()).ok();
    let summary = second.json();
    let run = &summary["trials"][0]["run"];
    assert_eq!(run["resumed"], true, "{summary}");
    assert_eq!(run["tasks_total"].as_u64(), Some(expected as u64));
    let skipped = run["tasks_skipped"].as_u64().unwrap() as usize;
    assert_eq!(skipped, before_kill.len(), "every stored decision is one finished task");
    assert_eq!(run["tasks_run"].as_u64().unwrap() as usize, expected - skipped);

    let after = stored(&sb);
    assert_eq!(after.len(), expected, "one decision per patient and criterion");
    for (key, json) in &before_kill {
        assert_eq!(after.get(key), Some(json), "decision {key:?} changed on resume");
    }

    // A third start finds nothing to do.
    let third = sb.run(&[&args[..], &["--json"]].concat()).ok().json();
    assert_eq!(third["trials"][0]["run"]["tasks_run"], 0, "{third}");

    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join("out/decisions.json")).unwrap()).unwrap();
    assert_citations_resolve(&report);
    let html = std::fs::read_to_string(sb.path().join("out/report.html")).unwrap();
    for p in ["sigir-201413", "sigir-20141", "sigir-20142", "NCT00163709"] {
        assert!(html.contains(p), "report names {p}");
    }
    let csv = std::fs::read_to_string(sb.path().join("out/decisions.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + expected, "one CSV row per decision");
}

/// The patient with this id in a `match --json` summary's first trial.
fn patient_in<'a>(summary: &'a Value, id: &str) -> &'a Value {
    summary["trials"][0]["patients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["patient_id"] == id)
        .unwrap_or_else(|| panic!("{id} is not in the summary: {summary}"))
}

/// The exclusion is pregnancy: the embedded 0.5B model answers MET to
/// "Currently treated with insulin." for every record, a man who takes no
/// medication included, so that exclusion cannot tell a model that reads
/// from one that answers MET to everything; pregnancy it decides correctly.
#[test]
fn a_patient_who_meets_an_exclusion_is_excluded() {
    let sb = Sandbox::new();
    sb.write(
        "notes/manifest.csv",
        "patient_id,doc_id,kind,date,file\nX1,x1-note,progress note,2024-03-01,x1.txt\nX2,x2-note,progress note,2024-03-01,x2.txt\n",
    );
    sb.write(
        "notes/x1.txt",
        "Prenatal visit.\nThe patient is a 28-year-old woman who is 24 weeks pregnant with her first child.\nHer pregnancy is progressing normally and the fetal heartbeat is strong.\nShe takes a prenatal vitamin every day.\n",
    );
    // The control: the exclusion is plainly absent. Without it a model that
    // answers MET to every criterion would pass this test.
    sb.write(
        "notes/x2.txt",
        "Progress note.\nThe patient is a 28-year-old woman seen for a sprained left ankle after a fall while jogging.\nHer pregnancy test today was negative.\nThe ankle is swollen; rest, ice and elevation advised.\n",
    );
    sb.run(&["ingest", "notes"]).ok();
    // The criteria as a coordinator pastes them from a registry.
    let trial = sb
        .write("pasted.txt", "Inclusion Criteria:\n\n* Age 18 years or older.\n\nExclusion Criteria:\n\n* Pregnant.\n");
    let args =
        ["--json", "match", "--trial", trial.to_str().unwrap(), "--trial-id", "EXCL-TEST", "--patients", "X1,X2"];
    let out = sb.run(&[&args[..], &["--out", "out"]].concat()).ok();
    let summary = out.json();
    assert_eq!(summary["trials"][0]["trial_id"], "EXCL-TEST", "{summary}");
    let pregnant = patient_in(&summary, "X1");
    assert_eq!(pregnant["counts"]["excluded"], 1, "{summary}");
    assert_eq!(pregnant["eligibility"], "excluded", "{summary}");
    let control = patient_in(&summary, "X2");
    assert_eq!(control["counts"]["excluded"], 0, "the control is not pregnant: {summary}");
    assert_ne!(control["eligibility"], "excluded", "the control is not pregnant: {summary}");
    let html = std::fs::read_to_string(sb.path().join("out/report.html")).unwrap();
    assert!(html.contains("<span class=\"pill excluded\">excluded</span>"), "the report says excluded");
}

#[test]
fn bad_input_is_refused_with_a_clear_message() {
    let sb = Sandbox::new();
    ingest_sigir(&sb);
    let trial = repo_root().join("criteria/trialgpt-NCT00163709.yaml");
    let t = trial.to_str().unwrap();
    sb.run(&["match", "--trial", t, "--patients", "nobody"]).fails_with(2, "patient \"nobody\" is not in the store");
    sb.run(&["match", "--trial", t, "--all", "--strategy", "best"]).fails_with(2, "--strategy \"best\" is not known");
    sb.run(&["match", "--trial", t, "--all", "--retrieval", "magic"]).fails_with(2, "unknown retrieval mode");
    let bad = sb.write("bad.yaml", "trial_id: T\ncriteria:\n  - id: a\n    type: maybe\n    text: x\n");
    sb.run(&["match", "--trial", bad.to_str().unwrap(), "--all"]).fails_with(2, "bad.yaml");
    let empty = sb.write("empty.txt", "Inclusion Criteria:\n\nExclusion Criteria:\n");
    sb.run(&["match", "--trial", empty.to_str().unwrap(), "--all"]).fails_with(
        2,
        "empty.txt: no criteria: the headings have no items under them; expected an Evident criteria set",
    );
    sb.run(&["match", "--trial", t, "--all", "--knowledge", "kb.db"])
        .fails_with(2, "a knowledge base and online search are for the augmenting strategies");
}

/// `evident criteria compile` on the embedded model: every check it writes
/// is marked proposed (so it decides nothing until reviewed), the written
/// set validates when read back, and the usage counts one call per
/// criterion without a check (none for the one that has a reviewed check).
#[test]
fn compile_writes_only_proposed_checks_that_validate() {
    let sb = Sandbox::new();
    sb.write(
        "trial.yaml",
        "trial_id: COMPILE-TEST\ncriteria:\n  - id: adult\n    type: inclusion\n    text: Age 18 years or older.\n  - id: consent\n    type: inclusion\n    text: Able to give written informed consent.\n  - id: female\n    type: inclusion\n    text: Women only.\n    check: {status: reviewed, sex: female}\n",
    );
    let out = sb.run(&["--json", "criteria", "compile", "trial.yaml", "--out", "checks.yaml"]).ok().json();
    assert_eq!(out["usage"]["calls"], 2, "{out}");
    assert_eq!(out["criteria"][2][1]["outcome"], "kept", "{out}");
    let yaml = std::fs::read_to_string(sb.path().join("checks.yaml")).unwrap();
    assert_eq!(yaml.matches("status: reviewed").count(), 1, "only the hand-written check is reviewed:\n{yaml}");
    let proposed = yaml.matches("status: proposed").count();
    let said_proposed = out["criteria"].as_array().unwrap().iter().filter(|c| c[1]["outcome"] == "proposed").count();
    assert_eq!(proposed, said_proposed, "{yaml}");
    let again = sb.run(&["--json", "criteria", "split", "checks.yaml"]).ok().json();
    assert_eq!(again["form"], "evident_set", "the written set validates");
}
