//! P(MET) from log-probabilities at the paper's 0/1 zero-shot answer, and a
//! threshold table deciding by it (Evident's lever, `crate::threshold`):
//! control flow with a scripted model that gives log-probabilities.

mod support;

use std::sync::Mutex;

use evident_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, StructuredModel, TokenLogprob, TopLogprob};
use evident_match::batch::{run_batch, stored_results, BatchConfig, Method, Models, RetrievalSettings};
use evident_match::checks::ChecksMode;
use evident_match::makar::paper::p_met_of_binary;
use evident_match::makar::{MakarConfig, Variant};
use evident_match::threshold::{LoadedThresholds, ThresholdTable};
use evident_match::zero_shot::ZeroShotConfig;
use evident_match::{CriteriaSet, Decision, Determination};
use evident_model::text::{split_sections, split_sentences};
use evident_model::{DocKind, Document, Patient};
use evident_store::Store;

/// Answers "1" to every criterion; P("1") 0.7 for the insulin criterion and
/// 0.9 otherwise, given only when asked for.
struct Leaning {
    seen: Mutex<Vec<ChatRequest>>,
}

impl ChatModel for Leaning {
    fn model_id(&self) -> &str {
        "leaning"
    }
    fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.seen.lock().unwrap().push(request.clone());
        let p: f32 = if request.messages[0].content.ends_with("Insulin treatment.") { 0.7 } else { 0.9 };
        let mut response = support::response("1".into(), 10, 1, "leaning");
        response.logprobs = request.logprobs.map(|_| {
            vec![TokenLogprob {
                token: "1".into(),
                logprob: p.ln(),
                top: vec![
                    TopLogprob { token: "1".into(), logprob: p.ln() },
                    TopLogprob { token: "0".into(), logprob: (1.0 - p).ln() },
                ],
            }]
        });
        Ok(response)
    }
}

const TRIAL: &str = r#"
trial_id: T-DM
criteria:
  - id: t2dm
    type: inclusion
    text: Type 2 diabetes mellitus.
  - id: insulin
    type: exclusion
    text: Insulin treatment.
"#;

fn store() -> Mutex<Store> {
    let mut store = Store::open_in_memory().unwrap();
    let w = store.writer().unwrap();
    let patient = Patient { id: "A".into(), source: "t".into(), birth_date: None, sex: None, display_name: None };
    w.upsert_patient(&patient).unwrap();
    let text = "Type 2 diabetes on metformin.";
    let doc = Document {
        id: "A-0".into(),
        patient_id: "A".into(),
        kind: DocKind::ProgressNote,
        date: None,
        title: "note".into(),
        source: "t".into(),
        source_id: "A-0".into(),
        text: text.into(),
    };
    w.put_document(&doc, &split_sections(text), &split_sentences(text)).unwrap();
    w.commit().unwrap();
    Mutex::new(store)
}

fn config(probabilities: bool, thresholds: Option<LoadedThresholds>) -> BatchConfig {
    BatchConfig {
        method: Method::Makar(Variant::PaperZeroShot),
        retrieval: RetrievalSettings::default(),
        concurrency: 1,
        zero_shot: ZeroShotConfig::default(),
        makar: MakarConfig { variant: Variant::PaperZeroShot, probabilities, ..MakarConfig::default() },
        run_name: None,
        checks: ChecksMode::Off,
        screening_date: None,
        label_correction: None,
        thresholds: thresholds.map(std::sync::Arc::new),
    }
}

/// Runs the batch; (run id, criterion id -> (stored decision, trace)).
fn run(
    store: &Mutex<Store>,
    model: &Leaning,
    cfg: &BatchConfig,
) -> (String, Vec<(String, Decision, serde_json::Value)>) {
    let set = CriteriaSet::from_yaml_str(TRIAL, "trial").unwrap();
    let model_run_id = store.lock().unwrap().begin_model_run("test").unwrap();
    let m = StructuredModel::unrecorded(model);
    let models = Models { matching: m, augmenting: m, embedder: None, model_run_id, knowledge: None, online: None };
    let out = run_batch(store, &set, &["A".to_string()], cfg, &models, None, &|_| {}).unwrap();
    let st = store.lock().unwrap();
    let patient = stored_results(&st, &out.run_id).unwrap().remove(0);
    let rows = patient
        .stored
        .iter()
        .map(|r| {
            let Determination::Assessed(a) = &r.outcome else { panic!("assessed") };
            (r.criterion_id.clone(), a.decision, patient.traces[&r.criterion_id].clone())
        })
        .collect();
    (out.run_id, rows)
}

fn table() -> ThresholdTable {
    let text = serde_json::json!({
        "format": "evident-threshold-calibration", "version": 1, "strategy": "makar-zero-shot",
        "model": "leaning", "exemplars": null, "calibrate": false,
        "fitted_on": {"source": "test", "annotations": "a.json", "patients": 2, "rows": 10,
                      "command": "test", "created_at": "2026-11-25T00:00:00Z", "evident": "0"},
        "thresholds": [{"criterion_type": "exclusion", "threshold": 0.8, "rows": 10, "correct": 8, "correct_at_argmax": 4}],
    });
    ThresholdTable::parse(&text.to_string(), "t.json").unwrap()
}

#[test]
fn p_met_is_recorded_only_when_asked_and_the_table_decides_by_it() {
    let store = store();
    let model = Leaning { seen: Mutex::new(Vec::new()) };

    // Not asked: the requests are as before and no trace has a P(MET).
    let (plain_run, plain) = run(&store, &model, &config(false, None));
    assert!(model.seen.lock().unwrap().iter().all(|r| r.logprobs.is_none()));
    assert!(plain.iter().all(|(_, d, t)| *d == Decision::Met && t.get("p_met").is_none()), "{plain:?}");

    // Asked: a run of its own; every request asks, every trace has P(MET).
    let (asked_run, asked) = run(&store, &model, &config(true, None));
    assert_ne!(asked_run, plain_run, "asking for P(MET) is part of the run's definition");
    let seen = model.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    assert!(seen[2..].iter().all(|r| r.logprobs.map(|l| l.top) == Some(20)));
    let p = |rows: &[(String, Decision, serde_json::Value)], id: &str| {
        rows.iter().find(|r| r.0 == id).map(|r| r.2["p_met"].as_f64().unwrap()).unwrap()
    };
    assert!((p(&asked, "insulin") - 0.7).abs() < 1e-5 && (p(&asked, "t2dm") - 0.9).abs() < 1e-5, "{asked:?}");
    assert!(asked.iter().all(|(_, d, _)| *d == Decision::Met), "the model's own answers are unchanged");

    // With the table: the exclusion's 0.7 is below its 0.8 and becomes NOT
    // MET; the inclusion keeps 0.5 (the table has none) and stays MET.
    let loaded = LoadedThresholds { table: table(), path: "t.json".into() };
    let (thresholded_run, decided) = run(&store, &model, &config(true, Some(loaded)));
    assert_ne!(thresholded_run, asked_run, "the table's content is part of the run's definition");
    let insulin = decided.iter().find(|r| r.0 == "insulin").unwrap();
    assert_eq!(insulin.1, Decision::NotMet);
    assert_eq!(insulin.2["threshold"]["model_decision"], "MET");
    assert_eq!(insulin.2["threshold"]["threshold"], 0.8);
    assert_eq!(insulin.2["threshold"]["changed"], true);
    let t2dm = decided.iter().find(|r| r.0 == "t2dm").unwrap();
    assert_eq!((t2dm.1, &t2dm.2["threshold"]["changed"]), (Decision::Met, &serde_json::json!(false)));
}

#[test]
fn p_met_of_a_binary_answer_renormalises_over_the_two_digits() {
    let token = |top: &[(&str, f32)]| TokenLogprob {
        token: top[0].0.into(),
        logprob: top[0].1,
        top: top.iter().map(|(t, l)| TopLogprob { token: (*t).into(), logprob: *l }).collect(),
    };
    // 0.6 and 0.2 of the mass (the rest elsewhere): 0.75.
    let p = p_met_of_binary(&[token(&[("1", 0.6f32.ln()), ("0", 0.2f32.ln()), ("{", 0.1f32.ln())])]).unwrap();
    assert!((p - 0.75).abs() < 1e-6, "{p}");
    // "0" not listed: given the lowest listed log-probability (0.1), an upper bound.
    let p = p_met_of_binary(&[token(&[("1", 0.6f32.ln()), ("{", 0.1f32.ln())])]).unwrap();
    assert!((p - 0.6 / 0.7).abs() < 1e-6, "{p}");
    assert_eq!(p_met_of_binary(&[token(&[("{", -0.1)])]), None);
    assert_eq!(p_met_of_binary(&[]), None);
}
