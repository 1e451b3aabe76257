//! The batch runner over an in-memory store with a fake model: several
//! patients on several threads; a model that fails midway stops the run
//! with the finished tasks stored; starting again runs only the missing
//! tasks and ends with exactly one decision per patient and criterion;
//! note-level strategies pool per criterion; the report ranks patients and
//! shows cited sentences from the store.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use evident_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, StructuredModel};
use evident_match::batch::{run_batch, BatchConfig, BatchError, Method, Models, Progress, RetrievalSettings};
use evident_match::checks::ChecksMode;
use evident_match::makar::{MakarConfig, Variant};
use evident_match::report::{to_csv, to_html, trial_report};
use evident_match::zero_shot::{Strategy, ZeroShotConfig};
use evident_match::{CriteriaSet, Eligibility};
use evident_model::text::{split_sections, split_sentences};
use evident_model::{DocKind, Document, Patient};
use evident_store::Store;

/// Says MET when the prompt's criterion line mentions a word the record of
/// the patient holds ("insulin" or "diabetes"), citing sentence 0; fails
/// with a transient error on call number `fail_at` (1-based) if set.
struct Fake {
    calls: AtomicUsize,
    fail_at: Option<usize>,
}

impl ChatModel for Fake {
    fn model_id(&self) -> &str {
        "fake"
    }
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.fail_at == Some(n) {
            return Err(LlmError::Transient {
                endpoint: "fake".into(),
                message: "connection reset".into(),
                attempts: 3,
            });
        }
        let user = &request.messages.last().unwrap().content;
        let (record, criterion) = user.rsplit_once("criterion being assessed is:").expect("an IC prompt");
        let word = ["insulin", "diabetes"].into_iter().find(|w| criterion.to_lowercase().contains(w)).unwrap_or("");
        let met = !word.is_empty() && record.to_lowercase().contains(word);
        let text = serde_json::json!({
            "rationale": format!("looked for {word:?}"),
            "decision": if met { "MET" } else { "NOT MET" },
            "confidence": "high",
            "evidence": if met { vec![0] } else { vec![] },
            "medications_and_supplements": [],
        })
        .to_string();
        Ok(support::response(text, 10, 5, "fake"))
    }
}

const TRIAL: &str = r#"
trial_id: T-DM
criteria:
  - id: t2dm
    type: inclusion
    text: Type 2 diabetes mellitus.
  - id: adult
    type: inclusion
    text: Adult patient.
  - id: insulin
    type: exclusion
    text: Insulin treatment.
"#;

const PATIENTS: [(&str, &str); 5] = [
    ("A", "Type 2 diabetes on metformin. No insulin ever? She takes insulin glargine."),
    ("B", "Type 2 diabetes mellitus, diet controlled."),
    ("C", "Healthy adult, no chronic disease."),
    ("D", "Diabetes since 2001. Insulin pump."),
    ("E", "Asthma. Uses an inhaler."),
];

fn store() -> Mutex<Store> {
    let mut store = Store::open_in_memory().unwrap();
    let w = store.writer().unwrap();
    for (id, text) in PATIENTS {
        w.upsert_patient(&Patient {
            id: id.into(),
            source: "t".into(),
            birth_date: None,
            sex: None,
            display_name: None,
        })
        .unwrap();
        for (n, part) in text.split(". ").enumerate() {
            let doc = Document {
                id: format!("{id}-{n}"),
                patient_id: id.into(),
                kind: DocKind::ProgressNote,
                date: None,
                title: format!("note {n}"),
                source: "t".into(),
                source_id: format!("{id}-{n}"),
                text: part.into(),
            };
            w.put_document(&doc, &split_sections(part), &split_sentences(part)).unwrap();
        }
    }
    w.commit().unwrap();
    Mutex::new(store)
}

fn config(strategy: Strategy, concurrency: usize) -> BatchConfig {
    BatchConfig {
        method: Method::ZeroShot(strategy),
        retrieval: RetrievalSettings::default(),
        concurrency,
        zero_shot: ZeroShotConfig::default(),
        makar: MakarConfig { variant: Variant::Full, ..MakarConfig::default() },
        run_name: None,
        checks: ChecksMode::Off,
        screening_date: None,
        label_correction: None,
        thresholds: None,
    }
}

fn run(
    store: &Mutex<Store>,
    model: &Fake,
    cfg: &BatchConfig,
) -> Result<evident_match::batch::BatchSummary, BatchError> {
    let set = CriteriaSet::from_yaml_str(TRIAL, "trial").unwrap();
    let model_run_id = store.lock().unwrap().begin_model_run("test").unwrap();
    let model = StructuredModel::unrecorded(model);
    let models =
        Models { matching: model, augmenting: model, embedder: None, model_run_id, knowledge: None, online: None };
    let patients: Vec<String> = PATIENTS.iter().map(|(p, _)| p.to_string()).collect();
    let done = AtomicUsize::new(0);
    let progress = |p: Progress| {
        if p == Progress::TaskDone {
            done.fetch_add(1, Ordering::SeqCst);
        }
    };
    let out = run_batch(store, &set, &patients, cfg, &models, None, &progress);
    if let Ok(o) = &out {
        assert_eq!(done.load(Ordering::SeqCst), o.tasks_run, "one progress event per task run");
    }
    out
}

#[test]
fn a_failure_midway_keeps_finished_tasks_and_a_rerun_completes_without_doubles() {
    let store = store();
    let cfg = config(Strategy::Ican, 3);
    let failing = Fake { calls: AtomicUsize::new(0), fail_at: Some(7) };
    let err = run(&store, &failing, &cfg).unwrap_err();
    assert!(err.to_string().contains("connection reset"), "{err}");
    assert!(err.to_string().starts_with("model call for patient "), "{err}");
    let run_id = store.lock().unwrap().match_runs().unwrap()[0].id.clone();
    let stored_after_failure = store.lock().unwrap().match_results(&run_id).unwrap().len();
    assert!((1..15).contains(&stored_after_failure), "some but not all tasks stored: {stored_after_failure}");
    assert!(store.lock().unwrap().match_run(&run_id).unwrap().unwrap().finished_at.is_none());

    let healthy = Fake { calls: AtomicUsize::new(0), fail_at: None };
    let out = run(&store, &healthy, &cfg).unwrap();
    assert!(out.resumed);
    assert_eq!(out.tasks_total, 15);
    assert_eq!(out.tasks_skipped, stored_after_failure);
    assert_eq!(out.tasks_run, 15 - stored_after_failure);
    assert_eq!(healthy.calls.load(Ordering::SeqCst), 15 - stored_after_failure, "only missing tasks reach the model");

    let st = store.lock().unwrap();
    let results = st.match_results(&run_id).unwrap();
    assert_eq!(results.len(), 15);
    let mut keys: Vec<(String, String)> =
        results.iter().map(|r| (r.patient_id.clone(), r.criterion_id.clone())).collect();
    keys.dedup();
    assert_eq!(keys.len(), 15, "one decision per patient and criterion");
    assert!(st.match_run(&run_id).unwrap().unwrap().finished_at.is_some());

    // The report: A and D take insulin (excluded), B has diabetes and no
    // insulin, C and E have no diabetes (not eligible).
    let set = CriteriaSet::from_yaml_str(TRIAL, "trial").unwrap();
    let patients: Vec<String> = PATIENTS.iter().map(|(p, _)| p.to_string()).collect();
    let report = trial_report(&st, &run_id, &set, &patients).unwrap();
    let by: Vec<(&str, Eligibility)> =
        report.patients.iter().map(|p| (p.patient_id.as_str(), p.verdict.eligibility)).collect();
    assert_eq!(
        by,
        [
            ("B", Eligibility::NotEligible),
            ("C", Eligibility::NotEligible),
            ("E", Eligibility::NotEligible),
            ("A", Eligibility::Excluded),
            ("D", Eligibility::Excluded),
        ],
        "ranked: not eligible (B scores 0.5 - 1, ahead of C and E at -1), then excluded"
    );
    let a = report.patients.iter().find(|p| p.patient_id == "A").unwrap();
    let insulin = a.criteria.iter().find(|c| c.criterion.id == "insulin").unwrap();
    assert_eq!(insulin.label, "excluded");
    let cited: Vec<&str> = insulin
        .evidence
        .iter()
        .flat_map(|e| e.passages.iter().flatten())
        .filter(|s| s.2)
        .map(|s| s.1.as_str())
        .collect();
    assert_eq!(cited, ["Type 2 diabetes on metformin"], "sentence 0 of the first note, from the store");
    assert!(insulin.problems.is_empty());
    let csv = to_csv(&evident_match::report::match_report(vec![report.clone()]));
    assert_eq!(csv.lines().count(), 16);
    let html = to_html(&evident_match::report::match_report(vec![report]));
    assert!(html.contains("<mark title=\"sentence 0\">Type 2 diabetes on metformin</mark>"));
}

/// MAKAR's agents are given notes, not a patient id; a failed call still
/// names its patient (MAKAR-Reason: the first call is patient A's
/// reasoning agent), and a failed augmentation names its criterion.
#[test]
fn a_failed_makar_call_names_its_patient_or_criterion() {
    for (variant, want) in [
        (Variant::Reason, "model call for patient A: "),
        (Variant::Full, "model call for the augmentation of criterion t2dm: "),
    ] {
        let store = store();
        let mut cfg = config(Strategy::Ican, 1);
        cfg.method = Method::Makar(variant);
        let failing = Fake { calls: AtomicUsize::new(0), fail_at: Some(1) };
        let err = run(&store, &failing, &cfg).unwrap_err().to_string();
        assert!(err.starts_with(want), "{variant:?}: {err}");
    }
}

#[test]
fn icin_stores_note_level_results_and_pools_them() {
    let store = store();
    let model = Fake { calls: AtomicUsize::new(0), fail_at: None };
    let out = run(&store, &model, &config(Strategy::Icin, 2)).unwrap();
    // A has 2 notes, B 1, C 1, D 2, E 2: 8 notes x 3 criteria.
    assert_eq!(out.tasks_total, 24);
    let st = store.lock().unwrap();
    let set = CriteriaSet::from_yaml_str(TRIAL, "trial").unwrap();
    let report = trial_report(&st, &out.run_id, &set, &["A".to_string()]).unwrap();
    let insulin = report.patients[0].criteria.iter().find(|c| c.criterion.id == "insulin").unwrap();
    assert_eq!(insulin.note_results.len(), 2);
    assert_eq!(insulin.label, "excluded", "max pooling: one note with insulin is enough");
    // Same definition: a second run is the same run, with nothing to do.
    drop(st);
    let again = run(&store, &model, &config(Strategy::Icin, 2)).unwrap();
    assert_eq!((again.run_id, again.tasks_run), (out.run_id, 0));
}

/// A label correction table relabels the model's decisions before they are
/// stored, keeps the model's label in the trace, and names a run of its
/// own: the uncorrected run's decisions are never reused for it.
#[test]
fn a_label_correction_makes_its_own_run_and_keeps_the_models_label() {
    use evident_match::label_correction::{CorrectionTable, LoadedCorrection};
    let store = store();
    let model = Fake { calls: AtomicUsize::new(0), fail_at: None };
    let plain = run(&store, &model, &config(Strategy::Ican, 1)).unwrap();
    // The fake answers MET to the insulin exclusion for A and D; a table
    // fitted for it says such an answer is NOT MET.
    let table = serde_json::json!({
        "format": "evident-label-correction", "version": 1, "strategy": "ican", "model": "fake",
        "exemplars": null, "calibrate": false, "min_rows": 5,
        "fitted_on": {"source": "test", "annotations": "a.json", "patients": 3, "rows": 6,
                      "command": "test", "created_at": "2026-11-25T00:00:00Z", "evident": "0"},
        "cells": [{"criterion_type": "exclusion", "predicted": "MET", "rows": 6,
                   "physicians": {"MET": 1, "NOT MET": 5}, "corrected": "NOT MET"}],
    });
    let table = CorrectionTable::parse(&table.to_string(), "t.json").unwrap();
    let cfg = BatchConfig {
        label_correction: Some(std::sync::Arc::new(LoadedCorrection { table, path: "t.json".into() })),
        ..config(Strategy::Ican, 1)
    };
    let corrected = run(&store, &model, &cfg).unwrap();
    assert_ne!(corrected.run_id, plain.run_id, "a corrected run is a run of its own");
    assert!(!corrected.resumed);
    assert_eq!(corrected.tasks_run, 15, "no decision of the uncorrected run is reused");

    let st = store.lock().unwrap();
    let set = CriteriaSet::from_yaml_str(TRIAL, "trial").unwrap();
    let patients: Vec<String> = PATIENTS.iter().map(|(p, _)| p.to_string()).collect();
    let report = trial_report(&st, &corrected.run_id, &set, &patients).unwrap();
    let a = report.patients.iter().find(|p| p.patient_id == "A").unwrap();
    assert_ne!(a.verdict.eligibility, Eligibility::Excluded, "A's insulin MET became NOT MET");
    let insulin = a.criteria.iter().find(|c| c.criterion.id == "insulin").unwrap();
    let applied = insulin.label_correction.as_ref().unwrap();
    assert_eq!((applied.model_decision.as_str(), applied.corrected.as_str()), ("MET", "NOT MET"));
    assert_eq!(insulin.result.as_ref().unwrap().decision().unwrap().as_str(), "NOT MET");
    // A criterion whose cell the table lacks keeps the model's label.
    let t2dm = a.criteria.iter().find(|c| c.criterion.id == "t2dm").unwrap();
    assert!(!t2dm.label_correction.as_ref().unwrap().changed);
    assert_eq!(report.label_correction.as_ref().unwrap().relabelled, 2, "A's and D's insulin");
    // The uncorrected run still says MET.
    let plain_report = trial_report(&st, &plain.run_id, &set, &patients).unwrap();
    let a = plain_report.patients.iter().find(|p| p.patient_id == "A").unwrap();
    assert_eq!(a.verdict.eligibility, Eligibility::Excluded);
    assert!(plain_report.label_correction.is_none());
}

/// Answers NOT MET after a short wait, counting the calls in flight.
struct Overlapping {
    in_flight: AtomicUsize,
    most: AtomicUsize,
}

impl ChatModel for Overlapping {
    fn model_id(&self) -> &str {
        "overlapping"
    }
    fn chat(&self, _: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(150));
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let text = serde_json::json!({"rationale": "-", "decision": "NOT MET", "confidence": "low",
            "evidence": [], "medications_and_supplements": []});
        Ok(support::response(text.to_string(), 10, 5, "overlapping"))
    }
}

/// Concurrency is over tasks, not patients: one patient's criteria go to
/// the model at once (a model with slots reads the record once).
#[test]
fn one_patients_tasks_run_at_once() {
    let store = store();
    let set = CriteriaSet::from_yaml_str(TRIAL, "trial").unwrap();
    let model_run_id = store.lock().unwrap().begin_model_run("test").unwrap();
    let overlapping = Overlapping { in_flight: AtomicUsize::new(0), most: AtomicUsize::new(0) };
    let model = StructuredModel::unrecorded(&overlapping);
    let models =
        Models { matching: model, augmenting: model, embedder: None, model_run_id, knowledge: None, online: None };
    let out = run_batch(&store, &set, &["A".to_string()], &config(Strategy::Ican, 3), &models, None, &|_| {}).unwrap();
    assert_eq!(out.tasks_run, 3);
    let most = overlapping.most.load(Ordering::SeqCst);
    assert!(most >= 2, "patient A's three criteria went one at a time ({most} in flight at most)");
}
