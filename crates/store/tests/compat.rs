//! Store files written by older builds still open, at the latest schema,
//! with everything in them readable and unchanged (after tantivy's
//! `compat_tests`). The fixtures in `tests/fixtures` were written at schema
//! version 4 before the migrations were renumbered (see its README): a
//! patient store with one of every record, and a knowledge base laid out
//! as the pseudo-patient `knowledge-base`. Each test opens a copy, never
//! the fixture itself.

use std::path::{Path, PathBuf};

use chrono::{NaiveDate, NaiveDateTime};
use evident_model::DocKind;
use evident_store::{LabQuery, SectionFilter, Store, StoreError};

const RUN: &str = "run-20261124T110201-0c98be";
const WRITTEN_AT: &str = "2026-11-24T11:02:01.141Z";

/// A copy of the fixture `name` in a fresh temporary folder.
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::copy(&fixture, &path).unwrap_or_else(|e| panic!("{}: {e}", fixture.display()));
    (dir, path)
}

fn at(text: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").unwrap()
}

/// Everything in the file as text: user_version, then every schema entry
/// and every row of every table (shadow tables of FTS5 included), sorted.
fn snapshot(path: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    let mut out = vec![format!("user_version {version}")];
    let mut schema = conn.prepare("SELECT type, name, coalesce(sql, '') FROM sqlite_master ORDER BY name").unwrap();
    let entries: Vec<(String, String, String)> =
        schema.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect();
    for (kind, name, sql) in entries {
        out.push(format!("{kind} {name}: {sql}"));
        let virtual_table = sql.starts_with("CREATE VIRTUAL TABLE");
        if kind != "table" || virtual_table {
            continue;
        }
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{name}\"")).unwrap();
        let columns = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |r| {
                Ok((0..columns).map(|i| format!("{:?}", r.get_ref(i).unwrap())).collect::<Vec<_>>().join(" | "))
            })
            .unwrap()
            .map(|r| format!("{name}: {}", r.unwrap()))
            .collect();
        rows.sort();
        out.extend(rows);
    }
    out
}

#[test]
fn a_version_4_patient_store_opens_at_the_latest_schema_with_everything_in_it() {
    let (_dir, path) = copy_of("store-v4.db");
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), Store::latest_schema_version());
    assert_eq!(Store::latest_schema_version(), 8);

    let patients = store.patients().unwrap();
    assert_eq!(patients.len(), 1);
    let p = &patients[0].patient;
    assert_eq!(
        (p.id.as_str(), p.source.as_str(), p.birth_date, p.sex.as_deref(), p.display_name.as_deref()),
        ("p-fixture", "fhir", NaiveDate::from_ymd_opt(1962, 5, 17), Some("female"), Some("Fixture Patient"))
    );
    assert_eq!((patients[0].documents, patients[0].labs), (2, 3));

    let documents = store.documents("p-fixture").unwrap();
    let summary: Vec<_> = documents
        .iter()
        .map(|d| {
            (d.id.as_str(), d.kind, d.date, d.title.as_str(), d.source_id.as_str(), d.bytes, d.sections, d.sentences)
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "doc-1",
                DocKind::ProgressNote,
                Some(at("2023-04-02 09:30:00")),
                "Clinic visit",
                "DocumentReference/doc-1",
                638,
                2,
                11
            ),
            (
                "doc-2",
                DocKind::Radiology,
                Some(at("2023-05-11 14:05:00")),
                "MRT Schädel",
                "DocumentReference/doc-2",
                289,
                1,
                6
            ),
        ]
    );
    let doc2 = store.document("doc-2").unwrap().unwrap();
    assert!(doc2.text.starts_with("Befund: Schädel-MRT ohne Blutung."), "{}", doc2.text);
    assert_eq!(doc2.content_hash(), "2366d1fb01442269364584860ad297e4bdf786a4b81fa9962af1e0ad6b1a464a");

    let sentence = store.sentence("doc-1", 3).unwrap().unwrap();
    assert_eq!((sentence.start, sentence.end, sentence.text.as_str()), (191, 210, "She denies syncope."));
    let sentence = store.sentence("doc-2", 1).unwrap().unwrap();
    assert_eq!(
        (sentence.start, sentence.end, sentence.text.as_str()),
        (35, 75, "Läsion im Marklager, größer als 2019.")
    );
    let spans: Vec<(usize, usize)> = store.sentences("doc-2").unwrap().iter().map(|s| (s.start, s.end)).collect();
    assert_eq!(spans, [(0, 34), (35, 75), (77, 88), (89, 122), (123, 242), (243, 288)]);

    let labs = store.labs(&LabQuery { patient_id: "p-fixture".into(), ..LabQuery::default() }).unwrap();
    let mut labs: Vec<_> = labs
        .iter()
        .map(|l| {
            (
                l.source_id.as_str(),
                l.concept_id.as_deref(),
                l.loinc.as_deref(),
                l.value_num,
                l.value_text.as_deref(),
                l.unit.as_deref(),
                (l.ref_low, l.ref_high, l.ref_text.as_deref(), l.flag.as_deref()),
                l.time,
            )
        })
        .collect();
    labs.sort_by_key(|l| l.0);
    assert_eq!(
        labs,
        [
            (
                "obs-1",
                Some("hba1c"),
                Some("4548-4"),
                Some(8.1),
                None,
                Some("%"),
                (None, None, None, None),
                at("2023-03-15 08:00:00")
            ),
            (
                "obs-2",
                Some("creatinine"),
                None,
                Some(1.4),
                None,
                Some("mg/dL"),
                (Some(0.6), Some(1.1), None, Some("H")),
                at("2023-03-15 08:00:00")
            ),
            (
                "obs-3",
                None,
                None,
                None,
                Some("trace"),
                None,
                (None, None, Some("negative"), None),
                at("2023-04-02 10:00:00")
            ),
        ]
    );
    let labels = store.labels("n2c2-2018").unwrap();
    assert_eq!(labels["p-fixture"]["HBA1C"], "met");

    let vectors: Vec<(i64, String, Vec<f32>)> = store
        .section_embeddings("fixture-embedder", &SectionFilter::patient("p-fixture"))
        .unwrap()
        .into_iter()
        .map(|(s, v)| (s.section_id, s.document_id, v))
        .collect();
    assert_eq!(
        vectors,
        [
            (1, "doc-1".to_string(), vec![1.0, 0.5, -1.0]),
            (2, "doc-1".to_string(), vec![2.0, 1.0, -1.0]),
            (3, "doc-2".to_string(), vec![3.0, 1.5, -1.0])
        ]
    );
    assert!(store.sections_missing_embedding("fixture-embedder", &SectionFilter::default()).unwrap().is_empty());

    // BM25 over the patient (the scan, non-ASCII query word included) and
    // over the whole store (FTS5) give the figures FTS5 gave at version 4.
    let expected = [("doc-2", 0, "0.543144995393"), ("doc-1", 338, "0.514653625942"), ("doc-1", 0, "0.478775371616")];
    for filter in [SectionFilter::patient("p-fixture"), SectionFilter::default()] {
        let hits = store.search_bm25("syncope angina Schädel", &filter, 5).unwrap();
        let found: Vec<(&str, usize, String)> = hits
            .iter()
            .map(|h| (h.section.document_id.as_str(), h.section.start, format!("{:.12}", h.score)))
            .collect();
        let expected: Vec<(&str, usize, String)> = expected.iter().map(|(d, s, x)| (*d, *s, x.to_string())).collect();
        assert_eq!(found, expected, "{filter:?}");
    }

    let runs = store.model_runs().unwrap();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(
        (run.id.as_str(), run.label.as_str(), run.started_at.as_str(), run.finished_at.as_deref()),
        (RUN, "fixture run", WRITTEN_AT, Some(WRITTEN_AT))
    );
    assert_eq!(
        (run.calls, run.cache_hits, run.pipeline_failures, run.prompt_tokens, run.completion_tokens),
        (1, 0, 1, 120, 30)
    );
    assert_eq!(
        (run.cost_usd, run.latency_max_ms, run.models.clone()),
        (0.0015, Some(412.5), vec!["fixture-model".into()])
    );
    let calls = store.model_calls(RUN).unwrap();
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(
        (
            call.model.as_str(),
            call.endpoint.as_str(),
            call.cache_key.as_str(),
            call.cache_hit,
            call.contains_patient_text
        ),
        ("fixture-model", "http://127.0.0.1:8080/v1", "cafe01", false, true)
    );
    assert_eq!(call.request_json, r#"{"messages":[{"role":"user","content":"Is HbA1c above 6.5%?"}]}"#);
    let answer = r#"{"content":"{\"label\":\"met\"}","finish_reason":"stop"}"#;
    assert_eq!((call.response_json.as_deref(), call.error.as_deref()), (Some(answer), None));
    assert_eq!(store.cached_model_response("cafe01").unwrap().as_deref(), Some(answer));
    let failures = store.pipeline_failures(RUN).unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!(
        (failures[0].raw_text.as_str(), failures[0].errors_json.as_str(), failures[0].attempts),
        ("not json at all", r#"["expected value at line 1 column 1"]"#, 2)
    );

    let match_run = store.match_run("match-fixture").unwrap().unwrap();
    assert_eq!(
        (match_run.trial_id.as_str(), match_run.method.as_str(), match_run.definition_json.as_str()),
        ("n2c2-2018", "acan", r#"{"method":"acan","k":5}"#)
    );
    assert_eq!((match_run.results, match_run.patients, match_run.finished_at.as_deref()), (1, 1, Some(WRITTEN_AT)));
    assert_eq!(store.match_model_runs("match-fixture").unwrap(), [RUN]);
    let results = store.match_results("match-fixture").unwrap();
    assert_eq!(results.len(), 1);
    let r = &results[0];
    assert_eq!(
        (r.patient_id.as_str(), r.task_key.as_str(), r.criterion_id.as_str(), r.document_id.as_str()),
        ("p-fixture", "p-fixture/HBA1C", "HBA1C", "")
    );
    assert_eq!(r.result_json, r#"{"label":"met","citations":[{"document_id":"doc-1","sentence":3}]}"#);
    assert_eq!((r.trace_json.as_deref(), r.model_run_id.as_deref()), (Some(r#"{"rounds":1}"#), Some(RUN)));
    assert_eq!(
        store.match_tasks_done("match-fixture", "p-fixture").unwrap().into_iter().collect::<Vec<_>>(),
        ["p-fixture/HBA1C"]
    );
    assert_eq!(
        store.criteria_augmentation("n2c2-2018", "abc123", "HBA1C", "fixture-model").unwrap().as_deref(),
        Some(r#"{"terms":["glycated hemoglobin"]}"#)
    );
    // A patient store holds no knowledge documents.
    assert!(store.knowledge_document_ids().unwrap().is_empty());
}

#[test]
fn a_version_4_knowledge_base_moves_into_the_knowledge_tables() {
    let (_dir, path) = copy_of("knowledge-v4.db");
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), Store::latest_schema_version());
    let ids = store.knowledge_document_ids().unwrap();
    assert_eq!(ids.len(), 13);
    assert_eq!(
        (ids[0].as_str(), ids[12].as_str()),
        ("kb:example/alcohol-use-limits.md", "kb:example/type-2-diabetes.md")
    );
    let hba1c = store.knowledge_document("kb:example/hba1c.md").unwrap().unwrap();
    assert_eq!((hba1c.title.as_str(), hba1c.path.as_deref()), ("Hemoglobin A1c (HbA1c)", None));
    let shipped =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../knowledge/example/hba1c.md"));
    assert_eq!(hba1c.text.len(), 1094);
    if let Ok(shipped) = shipped {
        // Unless the pack was edited since: the file as it was indexed.
        if evident_model::content_hash(&shipped) == "fda5a6d5ef3a00528619d57a5f277be198444c81737d90c211cc6c470e8f726a" {
            assert_eq!(hba1c.text, shipped);
        }
    }

    // The pseudo-patient and everything it owned are gone.
    assert!(store.patients().unwrap().is_empty());
    let counts = store.counts().unwrap();
    assert_eq!((counts.documents, counts.sections, counts.sentences), (0, 0, 0));

    // The same sections, spans, section ids and scores as FTS5 gave over
    // the pseudo-patient's sections at version 4.
    let hits = store.search_knowledge("glycated hemoglobin", 5).unwrap();
    let found: Vec<_> = hits
        .iter()
        .map(|h| {
            (h.document_id.as_str(), h.section_id, h.heading.as_deref(), h.start, h.end, format!("{:.12}", h.score))
        })
        .collect();
    assert_eq!(
        found,
        [
            ("kb:example/hba1c.md", 17, Some("Hemoglobin A1c (HbA1c)"), 0, 641, "6.853934335136".to_string()),
            ("kb:example/hba1c.md", 18, Some("Units"), 643, 1093, "2.391739363932".to_string()),
        ]
    );
    assert_eq!(hits[1].text, hba1c.text[643..1093]);
    assert!(hits[1].text.starts_with("## Units"), "{}", hits[1].text);
    let egfr = store.search_knowledge("eGFR below 30", 1).unwrap();
    assert_eq!(egfr[0].document_id, "kb:example/kidney-function-ckd-egfr.md");
}

#[test]
fn opening_a_migrated_store_again_changes_nothing() {
    for name in ["store-v4.db", "knowledge-v4.db"] {
        let (_dir, path) = copy_of(name);
        drop(Store::open(&path).unwrap());
        let first = snapshot(&path);
        assert_eq!(first[0], format!("user_version {}", Store::latest_schema_version()), "{name}");
        drop(Store::open(&path).unwrap());
        assert_eq!(snapshot(&path), first, "{name}: the second open changed the file");
    }
}

#[test]
fn a_store_newer_than_this_build_is_refused() {
    let (_dir, path) = copy_of("store-v4.db");
    let newer = Store::latest_schema_version() + 1;
    rusqlite::Connection::open(&path).unwrap().pragma_update(None, "user_version", newer).unwrap();
    let before = snapshot(&path);
    match Store::open(&path) {
        Err(StoreError::TooNew { found, supported }) => {
            assert_eq!((found, supported), (newer, Store::latest_schema_version()))
        }
        Err(other) => panic!("refused for the wrong reason: {other}"),
        Ok(_) => panic!("a store at schema version {newer} was opened"),
    }
    assert_eq!(snapshot(&path), before, "a refused store is left as it was");
}
