//! Exemplars at screening time, with a scripted fake model and a fake
//! embedder over a batch of two patients: no exemplar of the patient being
//! screened ever reaches its prompt (zero-shot ICAN and the paper's MAKAR
//! matching agent), the others do, in a fixed place after the record, and
//! the stored decisions name the exemplars they saw; label calibration;
//! the rendered prompts with worked examples (snapshots).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use evident_llm::{ChatRequest, EmbedError, Embedder, StructuredModel};
use evident_match::batch::{run_batch, stored_results, BatchConfig, Method, Models, RetrievalSettings};
use evident_match::checks::ChecksMode;
use evident_match::exemplars::{Exemplar, ExemplarBank, ExemplarMatch, ExemplarSource, Exemplars};
use evident_match::makar::{MakarConfig, Variant};
use evident_match::report::{match_report, to_csv, to_html, trial_report};
use evident_match::zero_shot::{NoteText, Strategy, ZeroShotConfig};
use evident_match::{CriteriaSet, CriterionType, Decision, Determination};
use evident_model::text::{split_sections, split_sentences};
use evident_model::{DocKind, Document, Patient};
use evident_store::Store;
use serde_json::json;

mod support;
use support::Scripted;

const TRIAL: &str = r#"
trial_id: T-DM
title: test
criteria:
  - id: t2dm
    type: inclusion
    text: Type 2 diabetes mellitus.
"#;

/// One vector dimension per keyword: similarity is keyword overlap.
struct KeywordEmbedder;

impl Embedder for KeywordEmbedder {
    fn model_id(&self) -> &str {
        "keywords"
    }
    fn dimensions(&self) -> usize {
        3
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let t = t.to_lowercase();
                vec![f32::from(t.contains("diabetes")), f32::from(t.contains("insulin")), 0.1]
            })
            .collect())
    }
}

fn exemplar(id: i64, patient: &str, text: &str, sentence: &str, label: Decision) -> Exemplar {
    Exemplar {
        id,
        source: "annotation".into(),
        source_ref: format!("dev.json#{id}"),
        patient_id: patient.into(),
        criterion_type: CriterionType::Inclusion,
        criterion_text: text.into(),
        sentences: vec![sentence.into()],
        label,
        rationale: format!("rationale of exemplar {id}"),
        embedding: KeywordEmbedder.embed(&[text]).unwrap().remove(0),
    }
}

/// Exemplars of both patients, each marked by a sentence only it has.
fn bank(k: usize) -> Exemplars {
    let exemplars = vec![
        exemplar(1, "P1", "Diabetes mellitus type 2.", "MARK-OF-P1: HbA1c 8.1%.", Decision::Met),
        exemplar(2, "P2", "Known diabetes.", "MARK-OF-P2: no diabetes.", Decision::NotMet),
        exemplar(3, "P3", "Diabetes, any type.", "MARK-OF-P3: diet-controlled diabetes.", Decision::Met),
        exemplar(4, "P3", "Insulin use.", "MARK-OF-P3-INSULIN.", Decision::Met),
    ];
    let bank = ExemplarBank::new("test", exemplars, Box::new(KeywordEmbedder), k, 0.5, "content".into()).unwrap();
    Exemplars(Arc::new(bank))
}

fn store() -> Mutex<Store> {
    let mut store = Store::open_in_memory().unwrap();
    let w = store.writer().unwrap();
    for (p, text) in [("P1", "NOTE-OF-P1. Type 2 diabetes on metformin."), ("P2", "NOTE-OF-P2. No chronic illness.")] {
        w.upsert_patient(&Patient {
            id: p.into(),
            source: "t".into(),
            birth_date: None,
            sex: None,
            display_name: None,
        })
        .unwrap();
        let doc = Document {
            id: format!("{p}-note"),
            patient_id: p.into(),
            kind: DocKind::ProgressNote,
            date: None,
            title: "note".into(),
            source: "t".into(),
            source_id: p.into(),
            text: text.into(),
        };
        w.put_document(&doc, &split_sections(text), &split_sentences(text)).unwrap();
    }
    w.commit().unwrap();
    Mutex::new(store)
}

fn config(method: Method, exemplars: Option<Exemplars>, calibrate: bool) -> BatchConfig {
    BatchConfig {
        method,
        retrieval: RetrievalSettings::default(),
        concurrency: 1,
        zero_shot: ZeroShotConfig { exemplars: exemplars.clone(), calibrate, ..ZeroShotConfig::default() },
        makar: MakarConfig { exemplars, ..MakarConfig::default() },
        run_name: None,
        checks: ChecksMode::Off,
        screening_date: None,
        label_correction: None,
        thresholds: None,
    }
}

fn run(store: &Mutex<Store>, model: &Scripted, cfg: &BatchConfig) -> String {
    let set = CriteriaSet::from_yaml_str(TRIAL, "trial").unwrap();
    let model_run_id = store.lock().unwrap().begin_model_run("test").unwrap();
    let model = StructuredModel::unrecorded(model);
    let models =
        Models { matching: model, augmenting: model, embedder: None, model_run_id, knowledge: None, online: None };
    let patients = vec!["P1".to_string(), "P2".to_string()];
    let done = AtomicUsize::new(0);
    let progress = |_| {
        done.fetch_add(1, Ordering::SeqCst);
    };
    run_batch(store, &set, &patients, cfg, &models, None, &progress).unwrap().run_id
}

fn answer(decision: &str, evidence: &[i64]) -> String {
    json!({
        "medications_and_supplements": [],
        "rationale": "as the note says",
        "decision": decision,
        "confidence": "high",
        "evidence": evidence
    })
    .to_string()
}

fn user_text(r: &ChatRequest) -> String {
    r.messages.iter().map(|m| m.content.clone()).collect::<Vec<_>>().join("\n")
}

/// The requests made for each patient (told apart by the note's marker).
fn by_patient(requests: &[ChatRequest]) -> (Vec<String>, Vec<String>) {
    let texts: Vec<String> = requests.iter().map(user_text).collect();
    let p1 = texts.iter().filter(|t| t.contains("NOTE-OF-P1")).cloned().collect();
    let p2 = texts.iter().filter(|t| t.contains("NOTE-OF-P2")).cloned().collect();
    (p1, p2)
}

#[test]
fn ican_never_shows_a_patient_its_own_exemplars_and_the_decision_names_those_it_saw() {
    let store = store();
    let model = Scripted::new(&[answer("MET", &[1]), answer("NOT MET", &[0])]);
    let run_id = run(&store, &model, &config(Method::ZeroShot(Strategy::Ican), Some(bank(2)), false));
    let (p1, p2) = by_patient(&model.requests());
    assert_eq!((p1.len(), p2.len()), (1, 1));
    assert!(!p1[0].contains("MARK-OF-P1"), "P1 saw its own exemplar:\n{}", p1[0]);
    assert!(p1[0].contains("MARK-OF-P2") && p1[0].contains("MARK-OF-P3:"), "{}", p1[0]);
    assert!(!p2[0].contains("MARK-OF-P2"), "P2 saw its own exemplar:\n{}", p2[0]);
    assert!(p2[0].contains("MARK-OF-P1") && p2[0].contains("MARK-OF-P3:"), "{}", p2[0]);
    assert!(!p1[0].contains("MARK-OF-P3-INSULIN"), "below the minimum similarity");
    // A fixed place: after the record, before the criterion.
    let (record, examples, criterion) = (
        p1[0].find("NOTE-OF-P1").unwrap(),
        p1[0].find("# Worked examples").unwrap(),
        p1[0].find("# Criterion").unwrap(),
    );
    assert!(record < examples && examples < criterion);

    let stored = stored_results(&store.lock().unwrap(), &run_id).unwrap();
    let seen = |patient: &str| -> Vec<i64> {
        let p = stored.iter().find(|p| p.patient_id == patient).unwrap();
        p.traces["t2dm"]["exemplars"].as_array().unwrap().iter().map(|e| e["id"].as_i64().unwrap()).collect()
    };
    assert_eq!(seen("P1"), vec![2, 3]);
    assert_eq!(seen("P2"), vec![1, 3]);

    // The report names them: in decisions.json, the CSV's last column and the HTML.
    let set = CriteriaSet::from_yaml_str(TRIAL, "trial").unwrap();
    let patients = vec!["P1".to_string(), "P2".to_string()];
    let report = trial_report(&store.lock().unwrap(), &run_id, &set, &patients).unwrap();
    let shown = |patient: &str| -> Vec<i64> {
        let p = report.patients.iter().find(|p| p.patient_id == patient).unwrap();
        p.criteria[0].exemplars.iter().map(|e| e.id).collect()
    };
    assert_eq!((shown("P1"), shown("P2")), (vec![2, 3], vec![1, 3]));
    let json = serde_json::to_value(&report).unwrap();
    let first = &json["patients"][0]["criteria"][0]["exemplars"][0];
    assert!(first["id"].is_i64() && first["source_ref"].is_string() && first["similarity"].is_f64(), "{first}");
    assert!(first.get("criterion_text").is_none(), "the report names exemplars, it does not copy them: {first}");
    let all = match_report(vec![report]);
    let csv = to_csv(&all);
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with(",failure,exemplars,model_decision,label_correction,threshold,decided_by"),
        "{csv}"
    );
    let p1_row = csv.lines().find(|l| l.contains(",P1,")).unwrap();
    // Then the label correction and threshold columns, empty without a table.
    assert!(
        p1_row.ends_with(",#2 annotation dev.json#2 (1.000); #3 annotation dev.json#3 (1.000),,,,model"),
        "{p1_row}"
    );
    let html = to_html(&all);
    assert!(html.contains("2 worked examples shown"), "{html}");
    assert!(html.contains("<li>#1 annotation dev.json#1 (1.000)</li>"), "{html}");
}

#[test]
fn matching_on_evidence_prefers_the_exemplar_whose_sentences_resemble_the_record() {
    // One criterion three times, told apart by the deciding sentences; the
    // third is the screened patient's own.
    let exemplars = vec![
        exemplar(1, "P1", "Diabetes.", "Diet-controlled diabetes.", Decision::NotMet),
        exemplar(2, "P2", "Diabetes.", "Diabetes on insulin.", Decision::Met),
        exemplar(3, "P9", "Diabetes.", "Diabetes on insulin glargine.", Decision::Met),
    ];
    let bank = |matching| {
        ExemplarBank::new("test", exemplars.clone(), Box::new(KeywordEmbedder), 3, 0.5, "content".into())
            .unwrap()
            .matching(matching)
            .unwrap()
    };
    let note = NoteText {
        document_id: "P9-note".into(),
        date: None,
        title: "note".into(),
        sentences: vec![(0, "Lives alone.".into()), (1, "Takes insulin nightly.".into())],
    };
    let ids = |bank: &ExemplarBank, notes: &[&NoteText]| -> Vec<i64> {
        bank.select("Diabetes.", "P9", notes).unwrap().iter().map(|e| e.id).collect()
    };
    let (by_criterion, by_evidence) = (bank(ExemplarMatch::Criterion), bank(ExemplarMatch::Evidence));
    assert_eq!(ids(&by_criterion, &[&note]), vec![1, 2], "equal criteria tie by id; P9's own is never shown");
    assert_eq!(ids(&by_evidence, &[&note]), vec![2, 1], "the record's insulin sentence matches exemplar 2's");
    assert_eq!(ids(&by_evidence, &[]), vec![1, 2], "without sentences the criterion alone is the query");
    // The choice names a new run only when it is not the default.
    assert_eq!(by_criterion.definition().get("match"), None);
    assert_eq!(by_evidence.definition()["match"], "evidence");
}

#[test]
fn the_papers_matching_agent_never_sees_the_patients_own_exemplars() {
    let store = store();
    // Per patient: reasoning (text), matching (0/1), supervision (0/1).
    let script = [r#""reasoning""#, "1", "1", r#""reasoning""#, "0", "0"];
    let model = Scripted::new(&script);
    let run_id = run(&store, &model, &config(Method::Makar(Variant::PaperReason), Some(bank(3)), false));
    let texts: Vec<String> = model.requests().iter().map(user_text).collect();
    assert_eq!(texts.len(), 6);
    for t in &texts {
        let own = if t.contains("NOTE-OF-P1") { "MARK-OF-P1" } else { "MARK-OF-P2" };
        assert!(!t.contains(own), "a patient's own exemplar reached its prompt:\n{t}");
        // Only the matching agent (C-C5) is shown worked examples.
        assert_eq!(t.contains("# Worked examples"), t.contains("The Reasoning Process:"), "{t}");
    }
    let p1_matching = texts.iter().find(|t| t.contains("NOTE-OF-P1") && t.contains("Worked examples")).unwrap();
    assert!(p1_matching.contains("Answer: 0") && p1_matching.contains("Answer: 1"), "{p1_matching}");
    let stored = stored_results(&store.lock().unwrap(), &run_id).unwrap();
    let p2 = stored.iter().find(|p| p.patient_id == "P2").unwrap();
    let ids: Vec<i64> =
        p2.traces["t2dm"]["exemplars"].as_array().unwrap().iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, vec![1, 3]);
    let set = CriteriaSet::from_yaml_str(TRIAL, "trial").unwrap();
    let report = trial_report(&store.lock().unwrap(), &run_id, &set, &["P2".to_string()]).unwrap();
    let shown: Vec<i64> = report.patients[0].criteria[0].exemplars.iter().map(|e| e.id).collect();
    assert_eq!(shown, vec![1, 3], "the report reads them from MAKAR's trace too");
}

#[test]
fn calibration_turns_an_uncited_met_into_not_enough_information_and_names_a_new_run() {
    let store = store();
    let model = Scripted::new(&[answer("MET", &[]), answer("NOT MET", &[0])]);
    let calibrated = run(&store, &model, &config(Method::ZeroShot(Strategy::Ican), None, true));
    let stored = stored_results(&store.lock().unwrap(), &calibrated).unwrap();
    let decision = |patient: &str| match &stored.iter().find(|p| p.patient_id == patient).unwrap().stored[0].outcome {
        Determination::Assessed(a) => (a.decision, a.rationale.clone()),
        other => panic!("{other:?}"),
    };
    let (d1, why) = decision("P1");
    assert_eq!(d1, Decision::NotEnoughInformation);
    assert!(why.starts_with("[calibrated: the model answered MET citing no sentence]"), "{why}");
    assert_eq!(decision("P2").0, Decision::NotMet, "a cited NOT MET stays");

    let model = Scripted::new(&[answer("MET", &[]), answer("NOT MET", &[0])]);
    let plain = run(&store, &model, &config(Method::ZeroShot(Strategy::Ican), None, false));
    assert_ne!(plain, calibrated, "calibration is part of the run's definition");
    let model = Scripted::new(&[answer("MET", &[]), answer("NOT MET", &[0])]);
    let with_bank = run(&store, &model, &config(Method::ZeroShot(Strategy::Ican), Some(bank(2)), false));
    assert!(![plain.clone(), calibrated].contains(&with_bank), "so is the bank");
}

#[test]
fn prompts_with_worked_examples() {
    let store = store();
    let model = Scripted::new(&[answer("MET", &[1]), answer("NOT MET", &[0])]);
    run(&store, &model, &config(Method::ZeroShot(Strategy::Ican), Some(bank(2)), false));
    let ican = user_text(&model.requests()[0]);
    let store = self::store();
    let model = Scripted::new(&[r#""reasoning""#, "1", "1", r#""reasoning""#, "0", "0"]);
    run(&store, &model, &config(Method::Makar(Variant::PaperReason), Some(bank(2)), false));
    let requests = model.requests();
    let matching = requests.iter().map(user_text).find(|t| t.contains("Worked examples")).unwrap();
    insta::assert_snapshot!("ican_with_exemplars", ican);
    insta::assert_snapshot!("makar_paper_matching_with_exemplars", matching);
}
