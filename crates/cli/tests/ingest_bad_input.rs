//! Bad input to `evident ingest`: each case exits 2, names the file and the
//! place, and leaves the store exactly as it was.

mod common;

use common::{repo_root, shared_data, Sandbox};

/// A store that already holds the example records, so "unchanged" is checked
/// against real content, not an empty file.
fn seeded() -> (Sandbox, evident_store::StoreCounts) {
    let sandbox = Sandbox::new();
    sandbox.run(&["ingest", repo_root().join("examples/records").to_str().unwrap()]).ok();
    let counts = sandbox.counts();
    (sandbox, counts)
}

#[track_caller]
fn assert_unchanged(sandbox: &Sandbox, before: &evident_store::StoreCounts) {
    let after = sandbox.counts();
    assert_eq!(format!("{before:?}"), format!("{after:?}"), "the store changed");
}

#[test]
fn a_truncated_fhir_file_is_refused_whole() {
    let (sandbox, before) = seeded();
    let real =
        shared_data().join("synthea/generated-sample-data-R4/Ammie_Huels_ea186cb3-ccb1-4dfc-a92e-dc9286aaa2ce.json");
    let text = std::fs::read_to_string(real).unwrap();
    let path = sandbox.write("Ammie.json", &text[..text.len() * 2 / 3]);
    sandbox
        .run(&["ingest", path.to_str().unwrap()])
        .fails_with(2, "Ammie.json:line ")
        .fails_with(2, "may be truncated");
    assert_unchanged(&sandbox, &before);
}

#[test]
fn a_truncated_ndjson_line_names_its_line() {
    let (sandbox, before) = seeded();
    let real = shared_data().join("synthea/sample-bulk-fhir-datasets-10-patients/Patient.000.ndjson");
    let text = std::fs::read_to_string(real).unwrap();
    let path = sandbox.write("Patient.000.ndjson", &text[..text.len() - 200]);
    let lines = text.lines().count();
    sandbox.run(&["ingest", path.to_str().unwrap()]).fails_with(2, &format!("Patient.000.ndjson:line {lines}, column"));
    assert_unchanged(&sandbox, &before);
}

#[test]
fn a_manifest_missing_a_column_is_refused() {
    let (sandbox, before) = seeded();
    sandbox.write("notes/a.txt", "Some note.");
    let manifest = sandbox.write("manifest.csv", "patient_id,doc_id,date,file\nX1,d1,2024-01-01,notes/a.txt\n");
    sandbox
        .run(&["ingest", manifest.to_str().unwrap()])
        .fails_with(2, "manifest.csv:line 1: the header lacks column(s) kind");
    assert_unchanged(&sandbox, &before);
}

#[test]
fn a_mimic_table_missing_a_column_is_refused() {
    let (sandbox, before) = seeded();
    let path = sandbox.write("hosp/patients.csv", "subject_id,gender,anchor_age\n1,F,50\n");
    sandbox
        .run(&["ingest", "--format", "mimic", path.to_str().unwrap()])
        .fails_with(2, "patients.csv:line 1: the header lacks column(s) anchor_year, anchor_year_group, dod");
    assert_unchanged(&sandbox, &before);
}

#[test]
fn a_date_that_does_not_parse_names_line_and_field_and_nothing_of_the_file_lands() {
    let (sandbox, before) = seeded();
    sandbox.write("notes/a.txt", "First note.");
    sandbox.write("notes/b.txt", "Second note.");
    let manifest = sandbox.write(
        "manifest.csv",
        "patient_id,doc_id,kind,date,file\nX1,d1,progress note,2024-01-01,notes/a.txt\nX1,d2,progress note,31/02/2023,notes/b.txt\n",
    );
    sandbox
        .run(&["ingest", manifest.to_str().unwrap()])
        .fails_with(2, "manifest.csv:line 3: date = \"31/02/2023\" is not a date");
    assert_unchanged(&sandbox, &before);
}

#[test]
fn every_bad_record_is_reported_not_only_the_first() {
    let (sandbox, before) = seeded();
    sandbox.write("notes/a.txt", "First note.");
    let manifest = sandbox.write(
        "manifest.csv",
        "patient_id,doc_id,kind,date,file\nX1,d1,poem,2024-01-01,notes/a.txt\nX1,d2,progress note,2024-13-01,notes/a.txt\nX1,d3,progress note,2024-01-01,notes/missing.txt\n",
    );
    let out = sandbox.run(&["ingest", manifest.to_str().unwrap()]);
    let out = out.fails_with(2, "line 2: kind = \"poem\" is not a known document kind");
    let out = out.fails_with(2, "line 3: date = \"2024-13-01\"");
    out.fails_with(2, "line 4: file = \"notes/missing.txt\" cannot be read");
    assert_unchanged(&sandbox, &before);
}

#[test]
fn an_xml_file_that_is_not_n2c2_is_refused() {
    let (sandbox, before) = seeded();
    let path = sandbox.write(
        "record.xml",
        "<?xml version=\"1.0\"?>\n<ClinicalDocument>\n  <title>CDA</title>\n</ClinicalDocument>\n",
    );
    sandbox
        .run(&["ingest", path.to_str().unwrap()])
        .fails_with(2, "record.xml:line 2: the root element is <ClinicalDocument>, expected <PatientMatching>");
    assert_unchanged(&sandbox, &before);
}

#[test]
fn labs_for_unknown_patients_are_refused() {
    let sandbox = Sandbox::new();
    let path = repo_root().join("examples/fhir/example-labs.json");
    sandbox
        .run(&["ingest", path.to_str().unwrap()])
        .fails_with(2, "patient(s) referenced here are neither in this file nor in the store");
    assert_eq!(sandbox.counts().labs, 0);
}

#[test]
fn a_missing_path_is_an_error() {
    let sandbox = Sandbox::new();
    sandbox.run(&["ingest", "no/such/folder"]).fails_with(2, "no/such/folder: no such file or folder");
}
