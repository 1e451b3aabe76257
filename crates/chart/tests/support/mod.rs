//! What the agent tests share: a scripted fake model (replays answers in
//! order, records every request and every pipeline failure logged against
//! it) and a small patient record in an in-memory store. Control flow only;
//! the real embedded model is exercised by the CLI test `ask_cli`.
#![allow(dead_code)]

use std::sync::Mutex;

use chrono::{NaiveDate, NaiveDateTime};
use evident_model::labs::LabCatalogue;
use evident_model::text::{split_sections, split_sentences};
use evident_model::{DocKind, Document, LabObservation, LabValue, Patient};
use evident_store::Store;
pub use evident_testdata::Scripted;

/// A scripted model reporting 10 prompt tokens (3 reused) and 2 completion
/// tokens per call.
pub fn scripted<S: AsRef<str>>(answers: &[S]) -> Scripted {
    Scripted::new(answers).with_usage(10, 2, 3)
}

pub fn day(d: &str) -> NaiveDateTime {
    NaiveDate::parse_from_str(d, "%Y-%m-%d").unwrap().and_hms_opt(9, 0, 0).unwrap()
}

/// Writes one document of patient P1, split into sections and sentences.
pub fn put_document(w: &evident_store::Writer<'_>, id: &str, kind: DocKind, date: &str, text: &str) {
    put_document_of(w, "P1", id, kind, date, text);
}

/// Writes one document of `patient`, split into sections and sentences.
pub fn put_document_of(w: &evident_store::Writer<'_>, patient: &str, id: &str, kind: DocKind, date: &str, text: &str) {
    let doc = Document {
        id: id.into(),
        patient_id: patient.into(),
        kind,
        date: Some(day(date)),
        title: id.into(),
        source: "test".into(),
        source_id: id.into(),
        text: text.into(),
    };
    w.put_document(&doc, &split_sections(text), &split_sentences(text)).unwrap();
}

/// Adds one problem-list document (timeline lines) to a fixture store.
pub fn add_problem_list(store: &Mutex<Store>, id: &str, date: &str, text: &str) {
    let mut s = store.lock().unwrap();
    let w = s.writer().unwrap();
    put_document(&w, id, DocKind::ProblemList, date, text);
    w.commit().unwrap();
}

/// The fixture with diabetes on the problem list since 2020-05-01
/// (`Condition/d1`), for the criteria checks.
pub fn store_with_diabetes() -> Mutex<Store> {
    let store = store();
    add_problem_list(&store, "c1", "2020-05-01", "Conditions\n- 2020-05-01 10:00: Diabetes (active) [Condition/d1]\n");
    store
}

/// The reference date of the fixture: one document lies after it.
pub const AS_OF: &str = "2023-12-31";

/// Patient P1: diabetes, metformin planned then started, a CT, labs for
/// ISS inside the 90-day window, and a note after the reference date that
/// must never be seen.
pub fn store() -> Mutex<Store> {
    let mut store = Store::open_in_memory().unwrap();
    let w = store.writer().unwrap();
    w.upsert_patient(&Patient {
        id: "P1".into(),
        source: "test".into(),
        birth_date: NaiveDate::from_ymd_opt(1956, 4, 2),
        sex: Some("female".into()),
        display_name: None,
    })
    .unwrap();
    for (id, kind, date, text) in [
        ("d1", DocKind::ProgressNote, "2023-01-10", "Assessment.\nType 2 diabetes mellitus, newly diagnosed. Plan to start metformin 500 mg twice daily.\n"),
        ("d2", DocKind::ProgressNote, "2023-02-15", "Follow-up.\nMetformin 500 mg twice daily was started on 2023-01-20 and is well tolerated. HbA1c is improving.\n"),
        ("d3", DocKind::Radiology, "2023-06-01", "CT abdomen.\nNo acute findings. No osteolytic lesions.\n"),
        ("d4", DocKind::ProgressNote, "2024-03-01", "Follow-up.\nMetformin discontinued because of lactic acidosis. Zebrafish allergy noted.\n"),
    ] {
        put_document(&w, id, kind, date, text);
    }
    let catalogue = LabCatalogue::builtin();
    for (i, (name, value, unit, low, high, date)) in [
        ("Albumin", 3.9, "g/dL", Some(3.5), Some(5.2), "2023-11-20"),
        ("Beta-2-microglobulin", 2.8, "mg/L", None, Some(2.4), "2023-11-20"),
        ("Lactate dehydrogenase", 180.0, "U/L", Some(120.0), Some(246.0), "2023-11-20"),
        ("Albumin", 3.1, "g/dL", Some(3.5), Some(5.2), "2023-01-05"),
        ("Albumin", 2.0, "g/dL", Some(3.5), Some(5.2), "2024-02-01"),
    ]
    .into_iter()
    .enumerate()
    {
        w.put_lab(&LabObservation {
            patient_id: "P1".into(),
            concept_id: Some(catalogue.resolve_name(name).unwrap().id.clone()),
            original_name: name.into(),
            loinc: None,
            value: LabValue::Numeric(value),
            unit: Some(unit.into()),
            ref_low: low,
            ref_high: high,
            ref_text: None,
            flag: None,
            time: day(date),
            source: "test".into(),
            source_id: format!("lab{i}"),
        })
        .unwrap();
    }
    w.commit().unwrap();
    Mutex::new(store)
}
