//! `evident search` through the binary: every hit quotes text that is
//! byte-identical to the stored document at the span it names, in BM25,
//! dense and hybrid modes, on the project's example records and on the real
//! Synthea notes in ../shared/data; filters; exit codes 0, 1 and 2.
//! Dense tests need all-MiniLM-L6-v2 (`evident models pull minilm-l6`) and
//! fail without it.

mod common;

use common::{repo_root, shared_data, Sandbox};
use serde_json::Value;

fn examples() -> Sandbox {
    let sandbox = Sandbox::new();
    let root = repo_root();
    sandbox.run(&["ingest", root.join("examples/records").to_str().unwrap()]).ok();
    sandbox
}

/// Asserts every hit is the stored document's text at its span, for `patient`.
#[track_caller]
fn check_hits_verbatim(sandbox: &Sandbox, output: &Value, patient: &str) -> usize {
    let store = sandbox.store();
    let hits = output["hits"].as_array().expect("hits array");
    for hit in hits {
        let doc_id = hit["document_id"].as_str().unwrap();
        let doc = store.document(doc_id).unwrap().unwrap_or_else(|| panic!("document {doc_id} is stored"));
        assert_eq!(doc.patient_id, patient);
        assert_eq!(hit["patient_id"], patient);
        let (start, end) = (hit["start"].as_u64().unwrap() as usize, hit["end"].as_u64().unwrap() as usize);
        let quoted = hit["text"].as_str().unwrap();
        assert_eq!(quoted.as_bytes(), &doc.text.as_bytes()[start..end], "hit {hit}");
        assert!(hit["section_id"].as_i64().is_some());
        assert!(hit["kind"].as_str().is_some());
        assert!(hit["score"].as_f64().is_some());
    }
    let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "scores descend: {scores:?}");
    hits.len()
}

#[test]
fn bm25_hits_quote_the_stored_document_verbatim() {
    let sandbox = examples();
    let out = sandbox.run(&["--json", "search", "P001", "pneumonia chest x-ray", "-k", "3"]).ok().json();
    assert_eq!(out["mode"], "bm25");
    assert!(check_hits_verbatim(&sandbox, &out, "P001") >= 1);
    assert_eq!(out["hits"][0]["document_id"], "text:P001-ds-2023-06");
    assert_eq!(out["hits"][0]["kind"], "discharge_summary");
    assert!(out["hits"][0]["date"].as_str().unwrap().starts_with("2023-06-02"));

    // The text form names document, section, span and score, and quotes the text.
    let text = sandbox.run(&["search", "P001", "pneumonia chest x-ray", "-k", "1"]).ok().stdout();
    assert!(text.contains("text:P001-ds-2023-06") && text.contains("bytes ") && text.contains("score "), "{text}");
    assert!(text.contains("right lower lobe"), "{text}");
}

#[test]
fn filters_by_kind_date_and_recency() {
    let sandbox = examples();
    let docs = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["--json", "search", "P001", "metformin lisinopril"];
        all.extend_from_slice(args);
        let out = sandbox.run(&all).json();
        out["hits"]
            .as_array()
            .map(|h| h.iter().map(|h| h["document_id"].as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    let both = docs(&[]);
    assert!(
        both.contains(&"text:P001-hp-2024-01".to_string()) && both.contains(&"text:P001-ds-2023-06".to_string()),
        "{both:?}"
    );
    assert!(docs(&["--kind", "discharge"]).iter().all(|d| d == "text:P001-ds-2023-06"));
    assert!(docs(&["--since", "2024-01-01"]).iter().all(|d| d == "text:P001-hp-2024-01"));
    // --until with a plain date includes that whole day.
    assert!(docs(&["--until", "2023-06-02"]).iter().all(|d| d == "text:P001-ds-2023-06"));
    assert!(!docs(&["--until", "2023-06-02"]).is_empty());
    assert!(docs(&["--recent", "1"]).iter().all(|d| d == "text:P001-hp-2024-01"));
}

#[test]
fn exit_codes_for_nothing_found_and_bad_input() {
    let sandbox = examples();
    sandbox.run(&["search", "P001", "xylophone"]).fails_with(1, "no sections of patient P001");
    sandbox.run(&["search", "NOBODY", "metformin"]).fails_with(2, "patient \"NOBODY\" is not in the store");
    sandbox
        .run(&["search", "P001", "metformin", "--since", "31/02/2023"])
        .fails_with(2, "since \"31/02/2023\" is not a date");
    sandbox.run(&["search", "P001", "metformin", "--kind", "horoscope"]).fails_with(2, "unknown document kind");
    sandbox.run(&["search", "P001", "metformin", "--mode", "magic"]).fails_with(2, "magic");
    sandbox
        .run(&["search", "P001", "metformin", "--since", "2024-01-01", "--until", "2023-01-01"])
        .fails_with(2, "is after until");
}

#[test]
fn dense_search_without_the_model_says_how_to_get_it() {
    let sandbox = examples();
    let empty_cache = tempfile::tempdir().unwrap();
    let run = sandbox
        .cmd(&["search", "P001", "lung infection", "--mode", "dense"])
        .env("EVIDENT_CACHE_DIR", empty_cache.path())
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("evident models pull minilm-l6"), "{stderr}");
}

#[test]
fn dense_and_hybrid_embed_first_then_quote_verbatim() {
    let sandbox = examples();
    // No word of this query is in the discharge summary's pneumonia section.
    let first =
        sandbox.run(&["search", "P001", "lung infection treated with antibiotics", "--mode", "dense", "-k", "2"]).ok();
    assert!(
        first.stderr().contains("embedding"),
        "the first dense search embeds the patient's sections: {}",
        first.stderr()
    );
    let out = sandbox
        .run(&["--json", "search", "P001", "lung infection treated with antibiotics", "--mode", "dense", "-k", "2"])
        .ok();
    assert!(!out.stderr().contains("embedding"), "vectors are reused: {}", out.stderr());
    let out = out.json();
    assert_eq!(out["mode"], "dense");
    assert_eq!(check_hits_verbatim(&sandbox, &out, "P001"), 2);
    assert_eq!(out["hits"][0]["document_id"], "text:P001-ds-2023-06", "{out}");
    assert!(out["hits"][0]["dense_rank"] == 1);

    // Only P001's sections were embedded.
    let store = sandbox.store();
    let all = store.sections(&evident_store::SectionFilter::default()).unwrap().len();
    let missing =
        store.sections_missing_embedding("all-MiniLM-L6-v2", &evident_store::SectionFilter::default()).unwrap().len();
    let p001 = store.sections(&evident_store::SectionFilter::patient("P001")).unwrap().len();
    assert_eq!(all - missing, p001);

    for fusion in ["rrf", "weighted"] {
        let out = sandbox
            .run(&[
                "--json",
                "search",
                "P001",
                "pneumonia ceftriaxone amoxicillin",
                "--mode",
                "hybrid",
                "--fusion",
                fusion,
                "-k",
                "3",
            ])
            .ok()
            .json();
        assert_eq!(out["mode"], "hybrid");
        assert_eq!(check_hits_verbatim(&sandbox, &out, "P001"), 3);
        assert_eq!(out["hits"][0]["document_id"], "text:P001-ds-2023-06", "{fusion}: {out}");
    }
}

#[test]
fn synthea_notes_search_quotes_real_text_verbatim() {
    let sandbox = Sandbox::new();
    let data = shared_data().join("synthea/sample-bulk-fhir-datasets-10-patients");
    sandbox.run(&["ingest", data.to_str().unwrap()]).ok();
    let store = sandbox.store();
    let patients = store.patients().unwrap();
    let mut checked = 0;
    for p in patients.iter().take(4) {
        let id = &p.patient.id;
        let run = sandbox.run(&["--json", "search", id, "medications allergies history", "-k", "20"]);
        if run.code() == 1 {
            continue;
        }
        let out = run.ok().json();
        checked += check_hits_verbatim(&sandbox, &out, id);
    }
    assert!(checked >= 20, "checked {checked} hits");
}
