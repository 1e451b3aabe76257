//! `evident criteria split` and `evident match` with reviewed checks,
//! driven as a user would, with no model call: pasted registry text (from a
//! file or standard input) becomes an editable criteria set; text with no
//! items is refused, saying which forms are accepted; a trial whose
//! criteria all carry reviewed checks is screened from the example
//! patients' stored data alone, and every decision says the check made it
//! and shows the values it read; checks by SNOMED CT, RxNorm and LOINC
//! code decide over a Synthea FHIR record as ingestion stored it; a check
//! that does not validate names its criterion and field.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{repo_root, Sandbox};
use serde_json::Value;

const PASTED: &str = "Inclusion Criteria:\n\n* Men and women aged 18 to 75 years\n* Type 2 diabetes with HbA1c 7.0-10.5%\n  * on a stable dose of metformin\n\nExclusion Criteria:\n\n1. Pregnancy or breast-feeding\n2. eGFR below 30 mL/min/1.73m2\n";

#[test]
fn split_writes_an_editable_set_from_pasted_text() {
    let sb = Sandbox::new();
    sb.write("NCT0001.txt", PASTED);
    sb.run(&["criteria", "split", "NCT0001.txt", "--out", "set.yaml"])
        .ok()
        .fails_with(0, "trial NCT0001 (eligibility text): 2 inclusion and 2 exclusion criteria written to set.yaml");
    let yaml = std::fs::read_to_string(sb.path().join("set.yaml")).unwrap();
    assert!(yaml.starts_with("# Criteria of trial NCT0001 read from NCT0001.txt"), "{yaml}");
    assert!(yaml.contains("text: Type 2 diabetes with HbA1c 7.0-10.5%; on a stable dose of metformin"), "{yaml}");
    // The written set reads back as an Evident set, with the same criteria.
    let again = sb.run(&["--json", "criteria", "split", "set.yaml"]).ok().json();
    assert_eq!(again["form"], "evident_set");
    let ids: Vec<&str> =
        again["set"]["criteria"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["inc-1", "inc-2", "exc-1", "exc-2"]);
    assert_eq!(again["set"]["criteria"][3]["type"], "exclusion");
    // An existing file may hold edits: never overwritten.
    sb.run(&["criteria", "split", "NCT0001.txt", "--out", "set.yaml"]).fails_with(2, "set.yaml already exists");
    sb.run(&["criteria", "compile", "NCT0001.txt", "--out", "set.yaml"]).fails_with(2, "set.yaml already exists");

    // Standard input, with the id and title from flags.
    let mut child = sb
        .cmd(&["criteria", "split", "-", "--trial-id", "NCT0002", "--title", "Pasted"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(PASTED.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(printed.contains("trial_id: NCT0002\ntitle: Pasted\nsource: standard input\n"), "{printed}");
}

#[test]
fn text_without_items_is_refused_saying_what_is_accepted() {
    let sb = Sandbox::new();
    sb.write("prose.txt", "This trial studies a once-weekly oral agent in adults.\n");
    for args in [&["criteria", "split", "prose.txt"][..], &["match", "--trial", "prose.txt", "--all"][..]] {
        sb.run(args)
            .fails_with(
                2,
                "prose.txt: no criteria: no criteria headings or items found; expected an Evident criteria set",
            )
            .fails_with(2, "\"Inclusion Criteria:\" / \"Exclusion Criteria:\" headings");
    }
    assert!(!sb.path().join("evident-report").exists());
}

const CHECKED: &str = r#"
trial_id: CHECKED
criteria:
  - id: age
    type: inclusion
    text: Age 18 to 75 years.
    check: {status: reviewed, age: {min: 18, max: 75}}
  - id: hba1c
    type: inclusion
    text: HbA1c between 7.0% and 10.5% (53 to 91 mmol/mol).
    check:
      status: reviewed
      lab: {concept: Hemoglobin A1c, unit: mmol/mol, between: [53, 91]}
  - id: egfr
    type: exclusion
    text: eGFR below 30 mL/min/1.73m2.
    check:
      status: reviewed
      lab: {concept: eGFR, unit: mL/min/1.73m2, below: 30}
"#;

fn examples() -> Sandbox {
    let sb = Sandbox::new();
    let root = repo_root();
    sb.run(&["ingest", root.join("examples/records").to_str().unwrap(), root.join("examples/fhir").to_str().unwrap()])
        .ok();
    sb
}

fn decisions(sb: &Sandbox, dir: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(sb.path().join(dir).join("decisions.json")).unwrap()).unwrap()
}

fn criterion<'a>(report: &'a Value, patient: &str, id: &str) -> &'a Value {
    let p = report["trials"][0]["patients"].as_array().unwrap().iter().find(|p| p["patient_id"] == patient).unwrap();
    p["criteria"].as_array().unwrap().iter().find(|c| c["criterion"]["id"] == id).unwrap()
}

#[test]
fn reviewed_checks_decide_from_stored_data_with_their_evidence() {
    let sb = examples();
    let trial = sb.write("checked.yaml", CHECKED);
    let text = sb.run(&["match", "--trial", trial.to_str().unwrap(), "--all", "--out", "out"]).ok().stdout();
    assert!(
        text.contains(
            "checks (on): Reviewed checks made 12 decisions from stored data; 12 model tasks were not needed."
        ),
        "{text}"
    );
    assert!(text.contains("0 calls"), "no model call: {text}");
    let report = decisions(&sb, "out");
    let verdicts: Vec<(String, String)> = report["trials"][0]["patients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (p["patient_id"].as_str().unwrap().to_string(), p["verdict"]["eligibility"].as_str().unwrap().to_string())
        })
        .collect();
    let want = [("P001", "eligible"), ("P002", "needs_review"), ("P004", "not_eligible"), ("P003", "excluded")];
    assert_eq!(verdicts, want.map(|(p, e)| (p.to_string(), e.to_string())), "{report}");
    for p in report["trials"][0]["patients"].as_array().unwrap() {
        for c in p["criteria"].as_array().unwrap() {
            assert_eq!(c["decided_by"], "check", "{c}");
        }
    }
    let hba1c = criterion(&report, "P001", "hba1c");
    assert_eq!(hba1c["label"], "included");
    let labs = hba1c["check"]["labs"].as_array().unwrap();
    assert_eq!(labs.len(), 2);
    assert_eq!(
        (labs[1]["value"].as_str(), labs[1]["unit"].as_str(), labs[1]["used"].as_bool()),
        (Some("8.2"), Some("%"), Some(true))
    );
    assert!((labs[1]["converted"].as_f64().unwrap() - 66.11).abs() < 0.01, "8.2% is 66.1 mmol/mol");
    let egfr = criterion(&report, "P003", "egfr");
    assert_eq!(egfr["label"], "excluded");
    assert_eq!(egfr["check"]["labs"][0]["source_id"], "Observation/ex-obs-10");
    assert_eq!(criterion(&report, "P002", "egfr")["label"], "not enough information");
    let html = std::fs::read_to_string(sb.path().join("out/report.html")).unwrap();
    assert!(html.contains("by check"));
    assert!(html.contains("Lab value read by the check"));
    let csv = std::fs::read_to_string(sb.path().join("out/decisions.csv")).unwrap();
    assert!(csv.lines().skip(1).all(|l| l.ends_with(",check")), "{csv}");

    // Screened at an earlier date, P004's only HbA1c is in the future.
    sb.run(&["match", "--trial", trial.to_str().unwrap(), "--all", "--out", "early", "--screening-date", "2023-01-01"])
        .ok();
    let early = decisions(&sb, "early");
    let hba1c = criterion(&early, "P004", "hba1c");
    assert_eq!(hba1c["label"], "not enough information", "{hba1c}");
    assert_eq!(hba1c["check"]["screening_date"], "2023-01-01");
}

/// A set given on standard input (`--trial -`) is read by its content.
#[test]
fn a_trial_on_standard_input_is_screened() {
    let sb = examples();
    let mut child = sb
        .cmd(&["--json", "match", "--trial", "-", "--patients", "P003", "--out", "stdin-report"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(CHECKED.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["trials"][0]["trial_id"], "CHECKED", "{summary}");
    assert_eq!(summary["trials"][0]["patients"][0]["eligibility"], "excluded", "P003's eGFR is 24: {summary}");
    assert_eq!(summary["trials"][0]["run"]["check_decisions"], 3, "{summary}");
}

#[test]
fn bad_checks_and_flags_are_refused_naming_the_place() {
    let sb = examples();
    let bad = sb.write(
        "bad.yaml",
        "trial_id: BAD\ncriteria:\n  - id: hba1c\n    type: inclusion\n    text: HbA1c at least 7%.\n    check: {status: reviewed, lab: {concept: HbA1c, unit: mg/dL, at_least: 7}}\n",
    );
    sb.run(&["match", "--trial", bad.to_str().unwrap(), "--all"]).fails_with(
        2,
        "bad.yaml: criteria[0].check.lab.unit: criterion \"hba1c\": \"mg/dL\" is not a unit known for Hemoglobin A1c (known: %, mmol/mol)",
    );
    let trial = sb.write("checked.yaml", CHECKED);
    let t = trial.to_str().unwrap();
    sb.run(&["match", "--trial", t, "--all", "--checks", "maybe"])
        .fails_with(2, "--checks: checks \"maybe\" is not known; use on, off or both");
    sb.run(&["match", "--trial", t, "--all", "--screening-date", "2024-13-01"])
        .fails_with(2, "--screening-date: screening date \"2024-13-01\" is not a date (expected YYYY-MM-DD)");
    sb.run(&["match", "--trial", t, "--trial", t, "--all", "--trial-id", "X"])
        .fails_with(2, "a trial id or title can be given for one trial only");
}

/// A Synthea R4 patient screened by checks that name SNOMED CT, RxNorm and
/// LOINC codes: the codes ingestion stored with the FHIR resources decide,
/// and each decision shows the stored line that carries its code.
const CODED: &str = r#"trial_id: CODED-1
title: Checks by code over a FHIR record
criteria:
  - id: htn
    type: inclusion
    text: Essential hypertension.
    check:
      status: reviewed
      diagnosis: {present: true, codes: ["SNOMED:38341003"]}
  - id: thiazide
    type: inclusion
    text: Treated with hydrochlorothiazide 25 mg.
    check:
      status: reviewed
      medication: {present: true, codes: ["RxNorm:316049"]}
  - id: diabetes
    type: exclusion
    text: Diabetes mellitus type 2.
    check:
      status: reviewed
      diagnosis: {present: true, codes: ["SNOMED:44054006"]}
  - id: hba1c
    type: inclusion
    text: HbA1c below 6.5%.
    check:
      status: reviewed
      lab: {concept: "LOINC:4548-4", unit: "%", below: 6.5}
"#;

#[test]
fn code_lists_decide_over_a_fhir_record_as_stored() {
    let sb = Sandbox::new();
    let bundle = common::shared_data()
        .join("synthea/generated-sample-data-R4/Mario_Dietrich_43d017d3-9f9a-4660-8bf0-fc919ce6379b.json");
    sb.run(&["ingest", bundle.to_str().unwrap()]).ok();
    let trial = sb.write("coded.yaml", CODED);
    let text = sb.run(&["match", "--trial", trial.to_str().unwrap(), "--all", "--out", "out"]).ok().stdout();
    assert!(text.contains("0 calls"), "no model call: {text}");
    let report = decisions(&sb, "out");
    let patient = "1fc53917-6bc1-4f87-9008-c91e94f0e188";
    let evidence = |id: &str| -> Vec<String> {
        criterion(&report, patient, id)["check"]["sentences"]
            .as_array()
            .map(|s| s.iter().map(|s| s["text"].as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    assert_eq!(criterion(&report, patient, "htn")["label"], "included");
    assert!(evidence("htn").iter().all(|t| t.contains("[SNOMED 38341003]")) && !evidence("htn").is_empty());
    assert_eq!(criterion(&report, patient, "thiazide")["label"], "included");
    assert!(evidence("thiazide").iter().any(|t| t.contains("Hydrochlorothiazide") && t.contains("[RxNorm 316049]")));
    // No type 2 diabetes code in the record (prediabetes is another code):
    // the conditions read are shown.
    assert_eq!(criterion(&report, patient, "diabetes")["label"], "not excluded");
    assert!(evidence("diabetes").iter().all(|t| !t.contains("44054006")));
    assert_eq!(criterion(&report, patient, "hba1c")["label"], "included");
    let labs = criterion(&report, patient, "hba1c")["check"]["labs"].as_array().unwrap().clone();
    assert!(
        labs.iter().any(|l| l["used"] == true && l["time"].as_str().unwrap().starts_with("2020-07-03")),
        "{labs:?}"
    );
}
