//! Retrieval through a real (in-memory) store: BM25, dense and hybrid modes,
//! filters, span fidelity, and `embed_missing` idempotence. Dense tests use
//! a small deterministic bag-of-words embedder so they check the plumbing;
//! one test uses the real all-MiniLM-L6-v2 to show semantic matching.

use std::collections::BTreeSet;

use chrono::NaiveDate;
use evident_llm::{EmbedError, Embedder};
use evident_model::text::{split_sections, split_sentences};
use evident_model::{DocKind, Document, Patient};
use evident_retrieve::{embed_missing, Fusion, Mode, RetrieveError, Retriever, RetrieverConfig};
use evident_store::{SectionFilter, Store};

/// Hashes lower-cased words into 64 buckets and normalises: texts sharing
/// words get high cosine. Counts its calls to check idempotence.
struct BagOfWords {
    calls: std::sync::atomic::AtomicUsize,
}

impl BagOfWords {
    fn new() -> Self {
        BagOfWords { calls: 0.into() }
    }
}

impl Embedder for BagOfWords {
    fn model_id(&self) -> &str {
        "test-bag-of-words"
    }
    fn dimensions(&self) -> usize {
        64
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.calls.fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; 64];
                for w in t.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2) {
                    let h = w.to_lowercase().bytes().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
                    v[(h % 64) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                v.iter_mut().for_each(|x| *x /= n);
                v
            })
            .collect())
    }
}

const NOTES: &[(&str, &str, DocKind, &str, &str)] = &[
    (
        "p1",
        "d1",
        DocKind::DischargeSummary,
        "2021-03-01",
        "History of Present Illness:\nThe patient presented with crushing chest pain radiating to the left arm. \
         Troponin was elevated and ECG showed ST elevation in the inferior leads, consistent with acute myocardial infarction. \
         He underwent emergent cardiac catheterisation with a stent placed in the right coronary artery.\n\n\
         Medications:\nAspirin 81 mg daily, clopidogrel 75 mg daily, atorvastatin 80 mg nightly, metoprolol 25 mg b.i.d. \
         The patient was counselled on adherence and smoking cessation and will follow up in cardiology clinic.\n",
    ),
    (
        "p1",
        "d2",
        DocKind::Radiology,
        "2022-06-10",
        "Findings:\nCT of the chest shows a 1.5 cm spiculated nodule in the right upper lobe. No pleural effusion. \
         No mediastinal lymphadenopathy. The heart size is normal and there is no pericardial effusion seen today.\n\n\
         Impression:\nSpiculated right upper lobe nodule, suspicious for primary lung malignancy. Recommend PET-CT and \
         tissue sampling given the smoking history of the patient.\n",
    ),
    (
        "p1",
        "d3",
        DocKind::LabReport,
        "2023-01-05",
        "Results:\nHemoglobin A1c 8.2 percent, fasting glucose 182 mg/dL, creatinine 1.4 mg/dL with eGFR of 52. \
         Lipid panel: LDL cholesterol 64 mg/dL on atorvastatin, HDL 41 mg/dL, triglycerides 150 mg/dL in this sample.\n",
    ),
    (
        "p2",
        "d4",
        DocKind::ProgressNote,
        "2022-02-02",
        "Assessment:\nChest pain on exertion, likely stable angina. Stress test scheduled next week. \
         Continue aspirin and start a beta blocker; the patient agrees with this plan and understands the warning signs.\n",
    ),
];

fn store() -> Store {
    let mut store = Store::open_in_memory().unwrap();
    let w = store.writer().unwrap();
    for pid in ["p1", "p2"] {
        w.upsert_patient(&Patient {
            id: pid.into(),
            source: "test".into(),
            birth_date: None,
            sex: None,
            display_name: None,
        })
        .unwrap();
    }
    for (pid, did, kind, date, text) in NOTES {
        let doc = Document {
            id: did.to_string(),
            patient_id: pid.to_string(),
            kind: *kind,
            date: Some(NaiveDate::parse_from_str(date, "%Y-%m-%d").unwrap().and_hms_opt(0, 0, 0).unwrap()),
            title: did.to_string(),
            source: "test".into(),
            source_id: did.to_string(),
            text: text.to_string(),
        };
        w.put_document(&doc, &split_sections(text), &split_sentences(text)).unwrap();
    }
    w.commit().unwrap();
    store
}

fn doc_text(did: &str) -> &'static str {
    NOTES.iter().find(|n| n.1 == did).unwrap().4
}

fn retriever<'a>(store: &'a Store, mode: Mode, embedder: &'a dyn Embedder) -> Retriever<'a> {
    Retriever::new(store, RetrieverConfig { mode, ..RetrieverConfig::default() }).with_embedder(embedder)
}

fn embed_all(store: &mut Store, embedder: &dyn Embedder) -> usize {
    embed_missing(store, embedder, &SectionFilter::default(), 2, &mut |_, _| {}).unwrap()
}

#[test]
fn bm25_finds_the_section_and_quotes_it_verbatim() {
    let store = store();
    let embedder = BagOfWords::new();
    let hits =
        retriever(&store, Mode::Bm25, &embedder).search("spiculated nodule", &SectionFilter::patient("p1"), 5).unwrap();
    assert!(!hits.is_empty());
    assert_eq!(hits[0].document_id, "d2");
    assert_eq!(hits[0].kind, DocKind::Radiology);
    assert_eq!(hits[0].bm25_rank, Some(1));
    for hit in &hits {
        assert_eq!(hit.text, &doc_text(&hit.document_id)[hit.start..hit.end]);
        assert!(hit.text.to_lowercase().contains("spiculated") || hit.text.to_lowercase().contains("nodule"));
    }
    // Scores are descending.
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
}

#[test]
fn filters_restrict_patient_kind_and_dates() {
    let store = store();
    let embedder = BagOfWords::new();
    let r = retriever(&store, Mode::Bm25, &embedder);
    let docs = |filter: SectionFilter| -> BTreeSet<String> {
        r.search("chest", &filter, 50).unwrap().into_iter().map(|h| h.document_id).collect()
    };
    assert_eq!(docs(SectionFilter::patient("p1")), ["d1", "d2"].map(String::from).into());
    assert_eq!(docs(SectionFilter::patient("p2")), ["d4"].map(String::from).into());
    let radiology = SectionFilter { kinds: vec![DocKind::Radiology], ..SectionFilter::patient("p1") };
    assert_eq!(docs(radiology), ["d2"].map(String::from).into());
    let since = SectionFilter {
        since: Some(NaiveDate::from_ymd_opt(2022, 1, 1).unwrap().and_hms_opt(0, 0, 0).unwrap()),
        ..SectionFilter::patient("p1")
    };
    assert_eq!(docs(since), ["d2"].map(String::from).into());
    let recent = SectionFilter { most_recent_documents: Some(2), ..SectionFilter::patient("p1") };
    assert_eq!(docs(recent), ["d2"].map(String::from).into());
}

#[test]
fn dense_needs_vectors_and_says_whose_to_embed() {
    let store = store();
    let embedder = BagOfWords::new();
    let err =
        retriever(&store, Mode::Dense, &embedder).search("chest pain", &SectionFilter::patient("p1"), 3).unwrap_err();
    assert!(matches!(err, RetrieveError::MissingEmbeddings { .. }), "{err:?}");
    assert!(err.to_string().contains("embed patient p1's sections first"), "{err}");
    let no_model = Retriever::new(&store, RetrieverConfig { mode: Mode::Dense, ..RetrieverConfig::default() })
        .search("chest pain", &SectionFilter::patient("p1"), 3)
        .unwrap_err();
    assert!(matches!(no_model, RetrieveError::NoEmbedder { .. }));
}

#[test]
fn embed_missing_is_idempotent_and_per_filter() {
    let mut store = store();
    let embedder = BagOfWords::new();
    let total = store.sections(&SectionFilter::default()).unwrap().len();
    let p2 = store.sections(&SectionFilter::patient("p2")).unwrap().len();
    let first = embed_missing(&mut store, &embedder, &SectionFilter::patient("p2"), 8, &mut |_, _| {}).unwrap();
    assert_eq!(first, p2);
    assert_eq!(embed_all(&mut store, &embedder), total - p2);
    let calls = embedder.calls.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(embed_all(&mut store, &embedder), 0);
    assert_eq!(embedder.calls.load(std::sync::atomic::Ordering::SeqCst), calls, "nothing re-embedded");
}

#[test]
fn dense_ranks_by_cosine_and_matches_a_naive_scan() {
    let mut store = store();
    let embedder = BagOfWords::new();
    embed_all(&mut store, &embedder);
    let filter = SectionFilter::patient("p1");
    let query = "clopidogrel metoprolol catheterisation";
    let hits = retriever(&store, Mode::Dense, &embedder).search(query, &filter, 3).unwrap();
    let q = embedder.embed(&[query]).unwrap().remove(0);
    let mut naive: Vec<(i64, f32)> = store
        .section_embeddings(embedder.model_id(), &filter)
        .unwrap()
        .into_iter()
        .map(|(s, v)| (s.section_id, q.iter().zip(&v).map(|(a, b)| a * b).sum()))
        .collect();
    naive.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let got: Vec<i64> = hits.iter().map(|h| h.section_id).collect();
    let want: Vec<i64> = naive.iter().take(3).map(|(id, _)| *id).collect();
    assert_eq!(got, want);
    assert!((hits[0].score - f64::from(naive[0].1)).abs() < 1e-6);
    assert_eq!(hits[0].document_id, "d1");
    for hit in &hits {
        assert_eq!(hit.patient_id, "p1");
        assert_eq!(hit.text, &doc_text(&hit.document_id)[hit.start..hit.end]);
    }
}

#[test]
fn hybrid_fuses_both_rankings() {
    let mut store = store();
    let embedder = BagOfWords::new();
    embed_all(&mut store, &embedder);
    let filter = SectionFilter::patient("p1");
    let query = "spiculated nodule smoking";
    for fusion in [Fusion::ReciprocalRank { k: 60.0 }, Fusion::Weighted { alpha: 0.5 }] {
        let r = Retriever::new(&store, RetrieverConfig { mode: Mode::Hybrid, fusion, hybrid_depth: 10 })
            .with_embedder(&embedder);
        let hits = r.search(query, &filter, 4).unwrap();
        assert!(!hits.is_empty());
        assert_eq!(hits[0].document_id, "d2", "{fusion:?}");
        assert!(hits[0].bm25_rank.is_some() && hits[0].dense_rank.is_some());
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
        let ids: BTreeSet<i64> = hits.iter().map(|h| h.section_id).collect();
        assert_eq!(ids.len(), hits.len(), "no duplicates");
    }
    // Weighted fusion at alpha = 0 is BM25's order (over the BM25 list).
    let bm25: Vec<i64> = retriever(&store, Mode::Bm25, &embedder)
        .search(query, &filter, 2)
        .unwrap()
        .iter()
        .map(|h| h.section_id)
        .collect();
    let alpha0: Vec<i64> = Retriever::new(
        &store,
        RetrieverConfig { mode: Mode::Hybrid, fusion: Fusion::Weighted { alpha: 0.0 }, hybrid_depth: 10 },
    )
    .with_embedder(&embedder)
    .search(query, &filter, 2)
    .unwrap()
    .iter()
    .map(|h| h.section_id)
    .collect();
    assert_eq!(alpha0, bm25);
}

#[test]
fn minilm_finds_paraphrases_bm25_cannot() {
    let dir = evident_embed::default_model_dir();
    let minilm = evident_embed::MiniLmEmbedder::load(&dir, evident_embed::EmbedderConfig::default())
        .unwrap_or_else(|e| panic!("{e}\nrun `evident models pull minilm-l6` before the tests"));
    let mut store = store();
    embed_all(&mut store, &minilm);
    let filter = SectionFilter::patient("p1");
    // No word of the query occurs in the notes' MI section.
    let query = "heart attack";
    let bm25 = retriever(&store, Mode::Bm25, &minilm).search(query, &filter, 3).unwrap();
    assert!(bm25.iter().all(|h| h.document_id != "d1"), "BM25 should not match: {bm25:?}");
    let dense = retriever(&store, Mode::Dense, &minilm).search(query, &filter, 1).unwrap();
    assert_eq!(dense[0].document_id, "d1", "{dense:?}");
    assert!(dense[0].text.contains("myocardial infarction"));
}
