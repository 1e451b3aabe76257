//! Store behaviour through its public API: idempotent puts, span checks,
//! BM25 with filters, embeddings, and reopening a file store.

use chrono::NaiveDate;
use evident_model::{DocKind, Document, LabObservation, LabValue, Patient, SectionSpan, SentenceSpan};
use evident_store::{LabQuery, PutEffect, SectionFilter, Store};

fn patient(id: &str) -> Patient {
    Patient { id: id.into(), source: "test".into(), birth_date: None, sex: Some("female".into()), display_name: None }
}

fn doc(id: &str, patient: &str, kind: DocKind, day: u32, text: &str) -> Document {
    Document {
        id: id.into(),
        patient_id: patient.into(),
        kind,
        date: Some(NaiveDate::from_ymd_opt(2020, 1, day).unwrap().and_hms_opt(0, 0, 0).unwrap()),
        title: id.into(),
        source: "test".into(),
        source_id: id.into(),
        text: text.into(),
    }
}

fn whole(text: &str) -> (Vec<SectionSpan>, Vec<SentenceSpan>) {
    (vec![SectionSpan { heading: None, start: 0, end: text.len() }], vec![SentenceSpan { start: 0, end: text.len() }])
}

fn seeded() -> Store {
    let mut store = Store::open_in_memory().unwrap();
    let w = store.writer().unwrap();
    w.upsert_patient(&patient("p1")).unwrap();
    w.upsert_patient(&patient("p2")).unwrap();
    for d in [
        doc("a", "p1", DocKind::ProgressNote, 1, "Patient reports chest pain radiating to the back."),
        doc("b", "p1", DocKind::Radiology, 5, "Chest X-ray: no acute findings."),
        doc("c", "p1", DocKind::ProgressNote, 9, "Diabetes well controlled, HbA1c 6.1%."),
        doc("d", "p2", DocKind::ProgressNote, 3, "Severe chest pains since Monday."),
    ] {
        let (sections, sentences) = whole(&d.text);
        assert_eq!(w.put_document(&d, &sections, &sentences).unwrap(), PutEffect::Inserted);
    }
    w.commit().unwrap();
    store
}

#[test]
fn putting_the_same_document_twice_changes_nothing() {
    let mut store = seeded();
    let before = store.counts().unwrap();
    let w = store.writer().unwrap();
    let d = doc("a", "p1", DocKind::ProgressNote, 1, "Patient reports chest pain radiating to the back.");
    let (sections, sentences) = whole(&d.text);
    assert_eq!(w.put_document(&d, &sections, &sentences).unwrap(), PutEffect::Unchanged);
    let edited = doc("a", "p1", DocKind::ProgressNote, 1, "Edited.");
    let (sections, sentences) = whole(&edited.text);
    assert_eq!(w.put_document(&edited, &sections, &sentences).unwrap(), PutEffect::Replaced);
    w.commit().unwrap();
    let after = store.counts().unwrap();
    assert_eq!(before.documents, after.documents);
    assert_eq!(before.sections, after.sections);
    assert_eq!(store.document("a").unwrap().unwrap().text, "Edited.");
}

#[test]
fn a_dropped_writer_leaves_the_store_unchanged() {
    let mut store = seeded();
    let before = store.counts().unwrap();
    {
        let w = store.writer().unwrap();
        w.upsert_patient(&patient("p3")).unwrap();
        let d = doc("e", "p3", DocKind::Other, 2, "Never committed.");
        let (sections, sentences) = whole(&d.text);
        w.put_document(&d, &sections, &sentences).unwrap();
    }
    assert_eq!(store.counts().unwrap().documents, before.documents);
    assert!(store.patient("p3").unwrap().is_none());
}

#[test]
fn spans_outside_the_text_or_inside_a_character_are_refused() {
    let mut store = seeded();
    let w = store.writer().unwrap();
    let d = doc("u", "p1", DocKind::Other, 2, "Schädel-MRT");
    let err = w.put_document(&d, &[SectionSpan { heading: None, start: 0, end: 4 }], &[]).unwrap_err();
    assert!(err.to_string().contains("cuts a UTF-8 character"), "{err}");
    let err = w.put_document(&d, &[], &[SentenceSpan { start: 0, end: 99 }]).unwrap_err();
    assert!(err.to_string().contains("outside the text"), "{err}");
}

#[test]
fn a_document_for_an_unknown_patient_is_refused() {
    let mut store = seeded();
    let w = store.writer().unwrap();
    let d = doc("x", "nobody", DocKind::Other, 2, "Text.");
    let (sections, sentences) = whole(&d.text);
    let err = w.put_document(&d, &sections, &sentences).unwrap_err();
    assert!(err.to_string().contains("patient nobody is not in the store"), "{err}");
}

#[test]
fn bm25_respects_patient_kind_date_and_recency_filters() {
    let store = seeded();
    let ids = |filter: &SectionFilter| -> Vec<String> {
        store.search_bm25("chest pain", filter, 10).unwrap().into_iter().map(|h| h.section.document_id).collect()
    };
    // Porter stemming: "pains" matches "pain".
    assert_eq!(ids(&SectionFilter::patient("p2")), vec!["d"]);
    let mut all_p1 = ids(&SectionFilter::patient("p1"));
    all_p1.sort();
    assert_eq!(all_p1, vec!["a", "b"]);
    assert_eq!(ids(&SectionFilter { kinds: vec![DocKind::Radiology], ..SectionFilter::patient("p1") }), vec!["b"]);
    let since = NaiveDate::from_ymd_opt(2020, 1, 4).unwrap().and_hms_opt(0, 0, 0);
    assert_eq!(ids(&SectionFilter { since, ..SectionFilter::patient("p1") }), vec!["b"]);
    // The two most recent p1 documents are b and c; only b mentions chest.
    assert_eq!(ids(&SectionFilter { most_recent_documents: Some(2), ..SectionFilter::patient("p1") }), vec!["b"]);
    let hits = store.search_bm25("chest pain", &SectionFilter::patient("p1"), 10).unwrap();
    assert_eq!(hits[0].section.document_id, "a", "the section with both words ranks first");
    assert!(hits[0].score > hits[1].score);
}

#[test]
fn embeddings_round_trip_and_missing_ones_are_listed() {
    let mut store = seeded();
    let filter = SectionFilter::patient("p1");
    let missing = store.sections_missing_embedding("m", &filter).unwrap();
    assert_eq!(missing.len(), 3);
    store.put_embeddings("m", &[(missing[0].section_id, vec![0.5, -0.25])]).unwrap();
    assert_eq!(store.sections_missing_embedding("m", &filter).unwrap().len(), 2);
    let stored = store.section_embeddings("m", &filter).unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].1, vec![0.5, -0.25]);
    assert!(store.section_embeddings("other", &filter).unwrap().is_empty());
}

#[test]
fn labs_are_idempotent_and_filtered_by_concept() {
    let mut store = seeded();
    let lab = |id: &str, concept: Option<&str>, value: f64| LabObservation {
        patient_id: "p1".into(),
        concept_id: concept.map(String::from),
        original_name: "Creatinine".into(),
        loinc: None,
        value: LabValue::Numeric(value),
        unit: Some("mg/dL".into()),
        ref_low: Some(0.5),
        ref_high: Some(1.2),
        ref_text: None,
        flag: None,
        time: NaiveDate::from_ymd_opt(2020, 1, 2).unwrap().and_hms_opt(8, 0, 0).unwrap(),
        source: "test".into(),
        source_id: id.into(),
    };
    let w = store.writer().unwrap();
    assert!(w.put_lab(&lab("l1", Some("creat"), 1.0)).unwrap());
    assert!(!w.put_lab(&lab("l1", Some("creat"), 1.0)).unwrap());
    assert!(w.put_lab(&lab("l2", None, 2.0)).unwrap());
    w.commit().unwrap();
    let q = LabQuery { patient_id: "p1".into(), concept_ids: Some(vec!["creat".into()]), since: None };
    assert_eq!(store.labs(&q).unwrap().len(), 1);
    assert_eq!(store.counts().unwrap().labs_unmapped, 1);
}

#[test]
fn a_file_store_reopens_at_the_latest_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evident.db");
    {
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), Store::latest_schema_version());
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.counts().unwrap().patients, 0);
}
