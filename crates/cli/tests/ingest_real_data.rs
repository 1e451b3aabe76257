//! `evident ingest` on the real data in ../shared/data: the counts the
//! foundation issue promises, idempotent re-ingestion, and the project's
//! own example records.

mod common;

use common::{repo_root, shared_data, Sandbox};

fn documents_with_prefix(sandbox: &Sandbox, prefix: &str) -> usize {
    let store = sandbox.store();
    store
        .patients()
        .unwrap()
        .iter()
        .map(|p| store.documents(&p.patient.id).unwrap().iter().filter(|d| d.id.starts_with(prefix)).count())
        .sum()
}

#[test]
fn synthea_bulk_fhir_stores_13_patients_and_all_1215_notes() {
    let sandbox = Sandbox::new();
    let data = shared_data().join("synthea/sample-bulk-fhir-datasets-10-patients");
    sandbox.run(&["ingest", data.to_str().unwrap()]).ok();
    assert_eq!(sandbox.counts().patients, 13);
    assert_eq!(documents_with_prefix(&sandbox, "fhir:DocumentReference/"), 1215);
    // Structured resources became timeline documents too.
    assert!(documents_with_prefix(&sandbox, "fhir:medications:") > 0);
    assert!(documents_with_prefix(&sandbox, "fhir:conditions:") > 0);

    // Re-ingesting the same source changes nothing.
    let before = sandbox.counts();
    let again = sandbox.run(&["--json", "ingest", data.to_str().unwrap()]).ok().json();
    let inserted: u64 =
        again["units"].as_array().unwrap().iter().map(|u| u["documents_inserted"].as_u64().unwrap()).sum();
    assert_eq!(inserted, 0, "a second ingest inserts nothing");
    let after = sandbox.counts();
    assert_eq!(
        (before.documents, before.sections, before.sentences),
        (after.documents, after.sections, after.sentences)
    );
}

#[test]
fn synthea_bundles_store_observation_labs_mapped_to_concepts() {
    let sandbox = Sandbox::new();
    let data = shared_data().join("synthea/generated-sample-data-R4");
    sandbox.run(&["ingest", data.to_str().unwrap()]).ok();
    let counts = sandbox.counts();
    assert_eq!(counts.patients, 40);
    assert!(counts.labs > 1000, "{counts:?}");
    assert_eq!(counts.labs_unmapped, 0, "every Synthea laboratory LOINC code maps to a concept");
}

#[test]
fn mimic_demo_stores_100_patients_and_their_labevents() {
    let sandbox = Sandbox::new();
    let data = shared_data().join("mimic-iv-demo");
    let out = sandbox.run(&["ingest", data.to_str().unwrap()]).ok();
    assert!(
        out.stdout().contains("skipped") && out.stdout().contains("labevents rows without a value"),
        "{}",
        out.stdout()
    );
    let counts = sandbox.counts();
    assert_eq!(counts.patients, 100);
    // Rows of labevents.csv.gz that carry a value (value or valuenum).
    let with_value = count_mimic_labevents_with_value(&data.join("hosp/labevents.csv.gz"));
    assert_eq!(counts.labs as usize, with_value);
    let mapped = counts.labs - counts.labs_unmapped;
    assert!(mapped as f64 / counts.labs as f64 >= 0.95, "{counts:?}");
    if counts.labs_unmapped > 0 {
        assert!(out.stdout().contains("lab names not mapped to a concept"), "{}", out.stdout());
    }
    // A value the source masks as `___` while keeping `valuenum` is shown as
    // that number in the lab timeline lines (sodium and glucose on 2180-08-10 for 10000032
    // is one), so text readers see what checks read.
    let store = sandbox.store();
    let lines: Vec<String> = store
        .documents("10000032")
        .unwrap()
        .iter()
        .filter(|d| d.id.starts_with("mimic:labevents:"))
        .flat_map(|d| store.document(&d.id).unwrap().unwrap().text.lines().map(String::from).collect::<Vec<_>>())
        .collect();
    assert!(lines.len() > 100, "{}", lines.len());
    for shown in ["2180-08-10 12:00: Glucose (Blood): 155 mg/dL", "2180-08-10 12:00: Sodium (Blood): 124 mEq/L"] {
        assert!(
            lines.iter().any(|l| l.contains(shown)),
            "{shown}: {:?}",
            lines.iter().filter(|l| l.contains("2180-08-10")).collect::<Vec<_>>()
        );
    }
}

fn count_mimic_labevents_with_value(path: &std::path::Path) -> usize {
    let file = std::fs::File::open(path).unwrap();
    let mut reader = csv::Reader::from_reader(flate2::read::GzDecoder::new(file));
    let headers = reader.headers().unwrap().clone();
    let value = headers.iter().position(|h| h == "value").unwrap();
    let valuenum = headers.iter().position(|h| h == "valuenum").unwrap();
    reader
        .records()
        .map(|r| r.unwrap())
        .filter(|r| !r[value].trim().is_empty() || r[valuenum].trim().parse::<f64>().is_ok())
        .count()
}

#[test]
fn sigir_queries_store_59_patients() {
    let sandbox = Sandbox::new();
    let data = shared_data().join("trialgpt/dataset/sigir/queries.jsonl");
    sandbox.run(&["ingest", data.to_str().unwrap()]).ok();
    let counts = sandbox.counts();
    assert_eq!(counts.patients, 59);
    assert_eq!(counts.documents, 59);
    let patients = sandbox.run(&["--json", "patients"]).ok().json();
    assert_eq!(patients.as_array().unwrap().len(), 59);
}

#[test]
fn example_records_ingest_with_labs_and_show() {
    let sandbox = Sandbox::new();
    let examples = repo_root().join("examples");
    sandbox.run(&["ingest", examples.join("records").to_str().unwrap(), examples.join("fhir").to_str().unwrap()]).ok();
    let counts = sandbox.counts();
    assert_eq!(counts.patients, 4);
    // 5 HbA1c, 2 creatinine, 1 haemoglobin, and the 2 eGFR values the notes report.
    assert_eq!(counts.labs, 10);
    assert_eq!(counts.labs_unmapped, 0);
    let show = sandbox.run(&["show", "P003"]).ok().stdout();
    assert!(show.contains("Nephrology consult"), "{show}");
    let labs = sandbox.run(&["--json", "labs", "P001", "--concept", "hba1c"]).ok().json();
    let values: Vec<f64> = labs.as_array().unwrap().iter().map(|l| l["lab"]["value_num"].as_f64().unwrap()).collect();
    assert_eq!(values, vec![7.4, 8.2]);
    sandbox.run(&["labs", "P001", "--concept", "ferritin"]).fails_with(1, "0 value(s)");
    sandbox.run(&["show", "nobody"]).fails_with(2, "patient \"nobody\" is not in the store");
}

#[test]
fn a_dry_run_checks_everything_and_writes_nothing() {
    let sandbox = Sandbox::new();
    let data = shared_data().join("synthea/sample-bulk-fhir-datasets-10-patients");
    // Later files refer to the patients of Patient.000.ndjson, which a dry
    // run does not write: that must not count as a problem.
    let out = sandbox.run(&["--json", "ingest", "--dry-run", data.to_str().unwrap()]).ok().json();
    assert_eq!(out["dry_run"], true);
    let planned: u64 = out["units"].as_array().unwrap().iter().map(|u| u["documents_inserted"].as_u64().unwrap()).sum();
    assert!(planned >= 1215, "{planned}");
    assert_eq!(sandbox.counts().documents, 0);
}
