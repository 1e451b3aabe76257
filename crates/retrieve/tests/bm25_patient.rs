//! The per-patient BM25 path against a straightforward reference on real
//! data: for every patient of the Synthea sample (../shared/data, required),
//! searching that patient in a store of all 13 patients must give the same
//! sections with the same scores, in the same order, as FTS5's own bm25()
//! over a store that holds only that patient's (filtered) documents.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use evident_model::text::split_sections;
use evident_model::{DocKind, Document, Patient};
use evident_store::{ScoredSection, SectionFilter, Store};

const QUERIES: &[&str] = &[
    "chest pain",
    "shortness of breath",
    "hypertension",
    "diabetes mellitus type 2",
    "hemoglobin a1c",
    "metformin",
    "chronic kidney disease",
    "acute bronchitis",
    "viral sinusitis",
    "smoking history",
    "lisinopril 10 mg oral tablet",
    "influenza vaccine",
    "allergy to penicillin",
    "prediabetes",
    "obesity body mass index",
    "depression screening",
    "medication review due",
    "stress",
    "full-time employment",
    "no known allergies",
    "acetaminophen 325 mg",
    "patient patient history",
    "the of and",
];

struct Note {
    patient: String,
    id: String,
    date: chrono::NaiveDateTime,
    text: String,
}

/// The sample's notes with made-up ids (`n0`, `n1`, ...) and dates spread
/// over 2000-2019, both derived from the note's place in the file.
fn notes() -> Vec<Note> {
    let out: Vec<Note> = evident_testdata::synthea_sample_notes()
        .into_iter()
        .enumerate()
        .map(|(i, note)| Note {
            patient: note.patient_id,
            id: format!("n{i}"),
            date: NaiveDate::from_ymd_opt(2000 + (i % 20) as i32, 1 + (i % 12) as u32, 1)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap(),
            text: note.text,
        })
        .collect();
    assert_eq!(out.len(), 1215, "the Synthea sample has 1,215 notes");
    out
}

fn store_of<'a>(notes: impl IntoIterator<Item = &'a Note>) -> Store {
    let mut store = Store::open_in_memory().unwrap();
    let w = store.writer().unwrap();
    for n in notes {
        w.upsert_patient(&Patient {
            id: n.patient.clone(),
            source: "test".into(),
            birth_date: None,
            sex: None,
            display_name: None,
        })
        .unwrap();
        let doc = Document {
            id: n.id.clone(),
            patient_id: n.patient.clone(),
            kind: DocKind::ProgressNote,
            date: Some(n.date),
            title: n.id.clone(),
            source: "test".into(),
            source_id: n.id.clone(),
            text: n.text.clone(),
        };
        w.put_document(&doc, &split_sections(&n.text), &[]).unwrap();
    }
    w.commit().unwrap();
    store
}

/// (document, start, score to 1e-9 relative), in rank order.
fn key(hits: &[ScoredSection]) -> Vec<(String, usize, i64)> {
    hits.iter().map(|h| (h.section.document_id.clone(), h.section.start, (h.score * 1e9).round() as i64)).collect()
}

/// Equal rankings: same scores in the same order; sections that tie may
/// come in any order.
fn assert_same_ranking(scoped: &[ScoredSection], reference: &[ScoredSection], what: &str) {
    let (a, b) = (key(scoped), key(reference));
    assert_eq!(a.len(), b.len(), "{what}: {} hits against {}", a.len(), b.len());
    assert_eq!(
        a.iter().map(|x| x.2).collect::<Vec<_>>(),
        b.iter().map(|x| x.2).collect::<Vec<_>>(),
        "{what}: scores differ"
    );
    let mut sa = a.clone();
    let mut sb = b.clone();
    sa.sort();
    sb.sort();
    assert_eq!(sa, sb, "{what}: different sections");
}

#[test]
fn per_patient_bm25_equals_fts5_over_the_patient_alone_on_synthea() {
    let notes = notes();
    let all = store_of(&notes);
    let mut by_patient: BTreeMap<&str, Vec<&Note>> = BTreeMap::new();
    for n in &notes {
        by_patient.entry(n.patient.as_str()).or_default().push(n);
    }
    assert_eq!(by_patient.len(), 13);
    let since = NaiveDate::from_ymd_opt(2010, 1, 1).unwrap().and_hms_opt(0, 0, 0).unwrap();
    let mut compared = 0;
    for (patient, own) in &by_patient {
        let alone = store_of(own.iter().copied());
        let alone_recent = store_of(own.iter().copied().filter(|n| n.date >= since));
        let filter = SectionFilter::patient(*patient);
        let recent = SectionFilter { since: Some(since), ..SectionFilter::patient(*patient) };
        for q in QUERIES {
            // Every match (no cut-off ties), then the top 10.
            let scoped = all.search_bm25(q, &filter, 100_000).unwrap();
            let reference = alone.search_bm25(q, &SectionFilter::default(), 100_000).unwrap();
            assert_same_ranking(&scoped, &reference, &format!("{patient} {q:?}"));
            let top = all.search_bm25(q, &filter, 10).unwrap();
            assert_eq!(
                key(&top),
                key(&scoped)[..top.len()].to_vec(),
                "{patient} {q:?}: top 10 is the head of the full ranking"
            );
            let scoped = all.search_bm25(q, &recent, 100_000).unwrap();
            let reference = alone_recent.search_bm25(q, &SectionFilter::default(), 100_000).unwrap();
            assert_same_ranking(&scoped, &reference, &format!("{patient} {q:?} since 2010"));
            compared += reference.len();
        }
    }
    assert!(compared > 10_000, "only {compared} ranked sections compared");
}

/// The in-memory index gives what the store's search gives: per patient
/// (with and without a date filter) and over the whole store, where the
/// reference is FTS5's own bm25().
#[test]
fn in_memory_index_equals_store_search_on_synthea() {
    let notes = notes();
    let all = store_of(&notes);
    let since = NaiveDate::from_ymd_opt(2010, 1, 1).unwrap().and_hms_opt(0, 0, 0).unwrap();
    let mut patients: Vec<&str> = notes.iter().map(|n| n.patient.as_str()).collect();
    patients.sort();
    patients.dedup();
    let mut filters = vec![SectionFilter::default()];
    for p in patients {
        filters.push(SectionFilter::patient(p));
        filters.push(SectionFilter { since: Some(since), ..SectionFilter::patient(p) });
    }
    let mut compared = 0;
    for filter in &filters {
        let index = all.bm25_index(filter).unwrap();
        assert_eq!(index.sections(), all.sections(filter).unwrap().len(), "{filter:?}");
        for q in QUERIES {
            let reference = all.search_bm25(q, filter, 100_000).unwrap();
            let indexed = all.search_bm25_index(&index, q, 100_000).unwrap();
            assert_same_ranking(&indexed, &reference, &format!("{filter:?} {q:?}"));
            // The top 10 is the head of the full ranking, ties by section id
            // as in the store's search.
            let top = all.search_bm25_index(&index, q, 10).unwrap();
            let top_ref = all.search_bm25(q, filter, 10).unwrap();
            assert_same_ranking(&top, &top_ref, &format!("{filter:?} {q:?} top 10"));
            assert_eq!(key(&top), key(&indexed)[..top.len()].to_vec(), "{filter:?} {q:?}");
            compared += reference.len();
        }
    }
    assert!(compared > 20_000, "only {compared} ranked sections compared");
}
