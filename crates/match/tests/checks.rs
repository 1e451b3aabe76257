//! Checks over real stores: the example patients (notes, FHIR labs and
//! patients) against the example trial's reviewed checks, which must agree
//! with what the trial's comments say a careful reviewer decides; the
//! MIMIC-IV demo's timeline (ages from anchors, ICD codes, prescriptions,
//! with evidence spans that slice the stored text); unit conversion,
//! unreadable values, windows and most recent / any / all on written labs;
//! and hybrid screening with a fake model (checks on saves the model's
//! tasks; both shows a disagreement as needs review).

mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use chrono::{NaiveDate, NaiveDateTime};
use evident_ingest::{ingest, plan, Format, NoProgress};
use evident_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, StructuredModel};
use evident_match::batch::{run_batch, BatchConfig, Method, Models, RetrievalSettings};
use evident_match::checks::{evaluate, Check, ChecksMode, FactNeeds, PatientFacts, TimelineKind};
use evident_match::decision::Decision;
use evident_match::makar::MakarConfig;
use evident_match::report::{trial_report, DecidedBy};
use evident_match::zero_shot::{Strategy, ZeroShotConfig};
use evident_match::{CriteriaSet, Eligibility};
use evident_model::text::{split_sections, split_sentences};
use evident_model::{DocKind, Document, LabObservation, LabValue, Patient};
use evident_store::Store;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ingested(paths: &[PathBuf]) -> Store {
    let mut store = Store::open_in_memory().unwrap();
    let units = plan(paths, Format::Auto).unwrap();
    let report = ingest(&mut store, &units, false, &NoProgress).unwrap();
    for unit in &report.units {
        assert!(unit.problems.is_empty(), "{}: {:?}", unit.path.display(), unit.problems);
    }
    store
}

fn check(yaml: &str) -> evident_match::checks::CompiledCheck {
    serde_yaml::from_str::<Check>(yaml).unwrap().compile().unwrap()
}

fn date(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

#[test]
fn the_example_trials_checks_agree_with_its_comments() {
    let store = ingested(&[repo().join("examples/records"), repo().join("examples/fhir")]);
    let set = CriteriaSet::load(&repo().join("examples/trials/t2dm-example.yaml")).unwrap();
    use Decision::{Met, NotEnoughInformation as Nei, NotMet};
    // From the comments at the top of the trial file.
    let expected = [
        ("P001", [("age", Met), ("hba1c", Met), ("egfr", NotMet)]),
        ("P002", [("age", Met), ("hba1c", Met), ("egfr", Nei)]),
        ("P003", [("age", Met), ("hba1c", Met), ("egfr", Met)]),
        ("P004", [("age", Met), ("hba1c", NotMet), ("egfr", Nei)]),
    ];
    let checked: Vec<&str> =
        set.criteria.iter().filter(|c| c.reviewed_check().is_some()).map(|c| c.id.as_str()).collect();
    assert_eq!(checked, ["age", "hba1c", "egfr"]);
    for (patient, decisions) in expected {
        let facts = PatientFacts::load(&store, patient).unwrap().unwrap();
        let at = facts.latest_document.unwrap();
        for (id, want) in decisions {
            let compiled = set.criterion(id).unwrap().reviewed_check().unwrap();
            let outcome = evaluate(&compiled, &facts, at);
            assert_eq!(outcome.decision, want, "{patient} {id}: {}", outcome.summary);
            // Deterministic.
            assert_eq!(evaluate(&compiled, &facts, at), outcome);
        }
    }
    // The evidence of P001's HbA1c: both values read, the newer one used.
    let facts = PatientFacts::load(&store, "P001").unwrap().unwrap();
    let hba1c = evaluate(&set.criterion("hba1c").unwrap().reviewed_check().unwrap(), &facts, date("2024-01-15"));
    let rows: Vec<(String, bool)> =
        hba1c.labs.iter().map(|l| (format!("{} {} {}", l.value, l.unit.as_deref().unwrap(), l.time), l.used)).collect();
    assert_eq!(
        rows,
        [("7.4 % 2023-07-12 08:30:00".to_string(), false), ("8.2 % 2024-01-10 08:10:00".to_string(), true)]
    );
    assert_eq!(hba1c.summary, "Most recent Hemoglobin A1c 8.2 % on 2024-01-10: ≥ 7 and ≤ 10.5 % holds.");
    let age = evaluate(&set.criterion("age").unwrap().reviewed_check().unwrap(), &facts, date("2024-01-15"));
    assert_eq!(age.summary, "Age 62 at 2024-01-15 (born 1961-09-20): within 18–75 years.");
    // Screened before the newer value existed, the older one decides.
    let earlier = evaluate(&set.criterion("hba1c").unwrap().reviewed_check().unwrap(), &facts, date("2023-12-01"));
    assert_eq!(earlier.labs.len(), 1);
    assert!(earlier.summary.starts_with("Most recent Hemoglobin A1c 7.4 %"), "{}", earlier.summary);
}

#[test]
fn mimic_demo_checks_read_ages_codes_and_prescriptions_from_the_timeline() {
    let mimic = evident_testdata::shared_data().join("mimic-iv-demo/hosp");
    let store = ingested(&[mimic]);
    let facts = PatientFacts::load(&store, "10000032").unwrap().unwrap();
    let at = date("2180-07-01");
    let span_is_stored = |s: &evident_match::checks::SentenceEvidence| {
        let doc = store.document(&s.document_id).unwrap().unwrap();
        assert_eq!(&doc.text[s.start..s.end], s.text, "evidence spans slice the stored text");
    };

    // Age 52 in anchor year 2180: 51 to 53 at a date in 2180.
    let adult = evaluate(&check("status: reviewed\nage: {min: 18}"), &facts, at);
    assert_eq!(adult.decision, Decision::Met, "{}", adult.summary);
    assert!(adult.sentences[0].text.contains("age 52 in anchor year 2180"));
    span_is_stored(&adult.sentences[0]);
    let boundary = evaluate(&check("status: reviewed\nage: {max: 52}"), &facts, at);
    assert_eq!(boundary.decision, Decision::NotEnoughInformation, "a year either way: {}", boundary.summary);
    let old = evaluate(&check("status: reviewed\nage: {min: 65}"), &facts, at);
    assert_eq!(old.decision, Decision::NotMet);

    // Cirrhosis (ICD-9 571.5) is coded at the May 2180 admission.
    let cirrhosis =
        evaluate(&check("status: reviewed\ndiagnosis: {present: true, codes: ['ICD-9:571.5']}"), &facts, at);
    assert_eq!(cirrhosis.decision, Decision::Met, "{}", cirrhosis.summary);
    assert!(cirrhosis.sentences.iter().all(|s| s.text.contains("ICD-9 5715")));
    cirrhosis.sentences.iter().for_each(span_is_stored);
    let by_name =
        evaluate(&check("status: reviewed\ndiagnosis: {present: true, names: [cirrhosis of liver]}"), &facts, at);
    assert_eq!(by_name.decision, Decision::Met);
    let absent = evaluate(
        &check("status: reviewed\ndiagnosis: {present: false, codes: ['ICD-10:E11', 'ICD-9:250']}"),
        &facts,
        at,
    );
    assert_eq!(absent.decision, Decision::Met, "no diabetes code: {}", absent.summary);
    let diabetes = evaluate(&check("status: reviewed\ndiagnosis: {present: true, codes: ['ICD-9:250']}"), &facts, at);
    assert_eq!(diabetes.decision, Decision::NotMet);
    // Before the first admission there is nothing to read.
    let before = evaluate(
        &check("status: reviewed\ndiagnosis: {present: false, codes: ['ICD-9:250']}"),
        &facts,
        date("2179-01-01"),
    );
    assert_eq!(before.decision, Decision::NotEnoughInformation, "{}", before.summary);

    let heparin = evaluate(
        &check("status: reviewed\nmedication: {present: true, names: [heparin], within_days: 90}"),
        &facts,
        at,
    );
    assert_eq!(heparin.decision, Decision::Met, "{}", heparin.summary);
    assert!(heparin.sentences.iter().all(|s| s.text.to_lowercase().contains("heparin")));
    heparin.sentences.iter().for_each(span_is_stored);

    // Screening loads only what a set's checks read; every check of the
    // MIMIC-IV demo set decides the same over those facts as over all of
    // them, for every patient.
    let set = CriteriaSet::load(&repo().join("criteria/mimic-iv-demo-checks.yaml")).unwrap();
    let checks: Vec<_> = set.criteria.iter().filter_map(|c| c.reviewed_check()).collect();
    let needs = FactNeeds::of(&checks);
    assert!(!needs.lab_concepts.is_empty() && needs.timeline.contains(&TimelineKind::Demographics));
    let mut decided = 0;
    for patient in store.patients().unwrap() {
        let id = &patient.patient.id;
        let all = PatientFacts::load(&store, id).unwrap().unwrap();
        let some = PatientFacts::load_needed(&store, id, &needs).unwrap().unwrap();
        assert!(some.labs.len() <= all.labs.len() && some.timeline.len() <= all.timeline.len());
        assert_eq!(some.latest_document, all.latest_document);
        let at = all.latest_document.unwrap();
        for check in &checks {
            assert_eq!(evaluate(check, &some, at), evaluate(check, &all, at), "{id}");
            decided += 1;
        }
    }
    assert_eq!(decided, 100 * checks.len());
}

#[test]
fn fhir_codes_stored_in_the_timeline_decide_code_checks() {
    // A Synthea R4 patient: hypertension (SNOMED 38341003) since 1984,
    // hydrochlorothiazide (RxNorm 316049) prescribed the same day, HbA1c
    // (LOINC 4548-4) 6.36% on 2020-07-03, the last of them.
    let bundle = evident_testdata::shared_data()
        .join("synthea/generated-sample-data-R4/Mario_Dietrich_43d017d3-9f9a-4660-8bf0-fc919ce6379b.json");
    let store = ingested(&[bundle]);
    let facts = PatientFacts::load(&store, "1fc53917-6bc1-4f87-9008-c91e94f0e188").unwrap().unwrap();
    let at = facts.latest_document.unwrap();
    let span_is_stored = |s: &evident_match::checks::SentenceEvidence| {
        let doc = store.document(&s.document_id).unwrap().unwrap();
        assert_eq!(&doc.text[s.start..s.end], s.text, "evidence spans slice the stored text");
    };

    let by_code =
        evaluate(&check("status: reviewed\ndiagnosis: {present: true, codes: ['SNOMED:38341003']}"), &facts, at);
    assert_eq!(by_code.decision, Decision::Met, "{}", by_code.summary);
    assert!(!by_code.sentences.is_empty());
    assert!(by_code.sentences.iter().all(|s| s.text.contains("[SNOMED 38341003]")), "{:?}", by_code.sentences);
    by_code.sentences.iter().for_each(span_is_stored);
    let by_name = evaluate(&check("status: reviewed\ndiagnosis: {present: true, names: [hypertension]}"), &facts, at);
    assert_eq!(by_name.decision, Decision::Met);
    // A code is matched whole: a prefix of it is another concept.
    let prefix =
        evaluate(&check("status: reviewed\ndiagnosis: {present: true, codes: ['SNOMED:3834100']}"), &facts, at);
    assert_eq!(prefix.decision, Decision::NotMet, "{}", prefix.summary);
    // Before the diagnosis, the code is absent from what could be read.
    let before = evaluate(
        &check("status: reviewed\ndiagnosis: {present: false, codes: ['SNOMED:38341003']}"),
        &facts,
        date("1984-05-31"),
    );
    assert_ne!(before.decision, Decision::NotMet, "{}", before.summary);

    let thiazide =
        evaluate(&check("status: reviewed\nmedication: {present: true, codes: ['RxNorm:316049']}"), &facts, at);
    assert_eq!(thiazide.decision, Decision::Met, "{}", thiazide.summary);
    assert!(thiazide.sentences.iter().all(|s| s.text.contains("RxNorm 316049")));
    thiazide.sentences.iter().for_each(span_is_stored);

    let hba1c = evaluate(&check("status: reviewed\nlab: {concept: 'LOINC:4548-4', unit: '%', below: 6.5}"), &facts, at);
    assert_eq!(hba1c.decision, Decision::Met, "{}", hba1c.summary);
    assert!(hba1c.summary.contains("6.3598") && hba1c.summary.contains("2020-07-03"), "{}", hba1c.summary);
}

/// A store with one patient and these creatinine rows: (day, value, unit,
/// upper limit of normal as stored).
fn creatinine_store(
    patient_id: &str,
    sex: Option<&str>,
    rows: Vec<(&str, LabValue, Option<&str>, Option<f64>)>,
) -> Store {
    let mut store = Store::open_in_memory().unwrap();
    let w = store.writer().unwrap();
    let patient = Patient {
        id: patient_id.into(),
        source: "t".into(),
        birth_date: None,
        sex: sex.map(String::from),
        display_name: None,
    };
    w.upsert_patient(&patient).unwrap();
    let concept = evident_model::labs::LabCatalogue::builtin().resolve_name("Creatinine").unwrap().id.clone();
    for (i, (day, value, unit, high)) in rows.into_iter().enumerate() {
        w.put_lab(&LabObservation {
            patient_id: patient_id.into(),
            concept_id: Some(concept.clone()),
            original_name: "Creatinine".into(),
            loinc: None,
            value,
            unit: unit.map(String::from),
            ref_low: None,
            ref_high: high,
            ref_text: None,
            flag: None,
            time: NaiveDateTime::parse_from_str(&format!("{day} 08:00"), "%Y-%m-%d %H:%M").unwrap(),
            source: "t".into(),
            source_id: format!("lab-{i}"),
        })
        .unwrap();
    }
    w.commit().unwrap();
    store
}

/// A patient with creatinine in three units and one text value.
fn lab_store() -> Store {
    let rows = vec![
        ("2024-01-01", LabValue::Numeric(150.0), Some("µmol/L"), None),
        ("2024-02-01", LabValue::Numeric(1.2), Some("mg/dL"), None),
        ("2024-03-01", LabValue::Numeric(2.0), Some("mg"), None),
        ("2024-03-02", LabValue::Text("hemolysed".into()), None, None),
    ];
    creatinine_store("L", Some("F"), rows)
}

#[test]
fn above_normal_compares_each_value_with_its_own_stored_range() {
    let store = creatinine_store(
        "R",
        None,
        vec![
            ("2024-01-01", LabValue::Numeric(1.1), Some("mg/dL"), Some(1.2)),
            ("2024-02-01", LabValue::Numeric(110.0), Some("µmol/L"), Some(106.0)),
            ("2024-03-01", LabValue::Numeric(1.4), Some("mg/dL"), None),
        ],
    );
    let facts = PatientFacts::load(&store, "R").unwrap().unwrap();
    let any = check("status: reviewed\nlab: {concept: Creatinine, unit: mg/dL, above_normal: true, select: any}");
    // 110 µmol/L is above its own range's 106 µmol/L.
    let outcome = evaluate(&any, &facts, date("2024-02-15"));
    assert_eq!(outcome.decision, Decision::Met, "{}", outcome.summary);
    assert!(outcome.summary.contains("upper limit of normal 1.2 mg/dL"), "{}", outcome.summary);
    // The latest value has no stored range: it cannot be read, never guessed.
    let latest = check("status: reviewed\nlab: {concept: Creatinine, unit: mg/dL, above_normal: true}");
    let outcome = evaluate(&latest, &facts, date("2024-03-15"));
    assert_eq!(outcome.decision, Decision::NotEnoughInformation, "{}", outcome.summary);
    assert!(!outcome.found_no_data(), "it read a value");
    let first = evaluate(&latest, &facts, date("2024-01-15"));
    assert_eq!(first.decision, Decision::NotMet, "1.1 is within its range: {}", first.summary);
    // A bound beside above_normal is refused.
    let both: Check =
        serde_yaml::from_str("status: reviewed\nlab: {concept: Creatinine, unit: mg/dL, above_normal: true, above: 1}")
            .unwrap();
    assert_eq!(both.compile().unwrap_err().field, "lab.above_normal");
}

#[test]
fn lab_checks_convert_units_and_never_read_what_they_cannot() {
    let store = lab_store();
    let facts = PatientFacts::load(&store, "L").unwrap().unwrap();
    let run = |yaml: &str, at: &str| evaluate(&check(yaml), &facts, date(at));
    let base = "status: reviewed\nlab: {concept: Creatinine, unit: mg/dL, at_most: 1.5";
    // The latest value is in an unknown unit: not read, so no decision.
    let latest = run(&format!("{base}}}"), "2024-03-01");
    assert_eq!(latest.decision, Decision::NotEnoughInformation, "{}", latest.summary);
    assert!(latest.summary.contains("cannot be read in mg/dL"), "{}", latest.summary);
    // At an earlier date the mg/dL value is the latest.
    assert_eq!(run(&format!("{base}}}"), "2024-02-15").decision, Decision::Met);
    // 150 µmol/L is 1.70 mg/dL.
    let first = run(&format!("{base}}}"), "2024-01-15");
    assert_eq!(first.decision, Decision::NotMet, "{}", first.summary);
    assert!((first.labs[0].converted.unwrap() - 1.6965).abs() < 0.001);
    assert!(first.summary.contains("150 µmol/L (= 1.7 mg/dL)"), "{}", first.summary);
    // The same check in µmol/L decides the same.
    let si = run("status: reviewed\nlab: {concept: creatinine, unit: umol/L, at_most: 132.6}", "2024-01-15");
    assert_eq!(si.decision, Decision::NotMet);
    // any / all over the readable values, with the unreadable ones honest.
    assert_eq!(run(&format!("{base}, select: any}}"), "2024-03-10").decision, Decision::Met);
    assert_eq!(run(&format!("{base}, select: all}}"), "2024-03-10").decision, Decision::NotMet);
    let all_low =
        run("status: reviewed\nlab: {concept: Creatinine, unit: mg/dL, at_most: 5, select: all}", "2024-03-10");
    assert_eq!(all_low.decision, Decision::NotEnoughInformation, "two values cannot be read: {}", all_low.summary);
    let none_high =
        run("status: reviewed\nlab: {concept: Creatinine, unit: mg/dL, above: 5, select: any}", "2024-03-10");
    assert_eq!(none_high.decision, Decision::NotEnoughInformation, "{}", none_high.summary);
    // Windows: nothing in the 10 days before 2024-01-25.
    let window = run(&format!("{base}, within_days: 10}}"), "2024-01-25");
    assert_eq!(window.decision, Decision::NotEnoughInformation);
    assert!(window.summary.contains("4 value(s) lie outside the window"), "{}", window.summary);
    assert_eq!(run(&format!("{base}, within_months: 1}}"), "2024-02-15").labs.len(), 1);
    // Sex from the patient row ("F").
    assert_eq!(run("status: reviewed\nsex: female", "2024-01-01").decision, Decision::Met);
    assert_eq!(run("status: reviewed\nsex: male", "2024-01-01").decision, Decision::NotMet);
    // No birth date and no anchor: age cannot be told.
    assert_eq!(run("status: reviewed\nage: {min: 18}", "2024-01-01").decision, Decision::NotEnoughInformation);
}

/// Answers MET to every criterion, citing nothing.
struct AlwaysMet {
    calls: AtomicUsize,
}

impl ChatModel for AlwaysMet {
    fn model_id(&self) -> &str {
        "always-met"
    }
    fn chat(&self, _request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let text = serde_json::json!({
            "rationale": "says met",
            "decision": "MET",
            "confidence": "high",
            "evidence": [],
            "medications_and_supplements": [],
        })
        .to_string();
        Ok(support::response(text, 10, 5, "always-met"))
    }
}

const HYBRID: &str = r#"
trial_id: HYBRID
criteria:
  - id: hba1c
    type: inclusion
    text: HbA1c at least 7.0%.
    check:
      status: reviewed
      lab: {concept: HbA1c, unit: '%', at_least: 7.0}
  - id: t2dm
    type: inclusion
    text: Type 2 diabetes.
  - id: sex
    type: inclusion
    text: Female.
    check:
      status: proposed
      sex: female
"#;

fn hybrid_store() -> Mutex<Store> {
    let mut store = Store::open_in_memory().unwrap();
    let w = store.writer().unwrap();
    for (id, hba1c) in [("H1", 8.1), ("H2", 5.6)] {
        w.upsert_patient(&Patient {
            id: id.into(),
            source: "t".into(),
            birth_date: None,
            sex: None,
            display_name: None,
        })
        .unwrap();
        let text = "Type 2 diabetes on metformin.";
        let doc = Document {
            id: format!("{id}-note"),
            patient_id: id.into(),
            kind: DocKind::ProgressNote,
            date: Some(NaiveDateTime::parse_from_str("2024-05-01 09:00", "%Y-%m-%d %H:%M").unwrap()),
            title: "note".into(),
            source: "t".into(),
            source_id: format!("{id}-note"),
            text: text.into(),
        };
        w.put_document(&doc, &split_sections(text), &split_sentences(text)).unwrap();
        w.put_lab(&LabObservation {
            patient_id: id.into(),
            concept_id: Some(evident_model::labs::LabCatalogue::builtin().resolve_name("HbA1c").unwrap().id.clone()),
            original_name: "HbA1c".into(),
            loinc: None,
            value: LabValue::Numeric(hba1c),
            unit: Some("%".into()),
            ref_low: None,
            ref_high: None,
            ref_text: None,
            flag: None,
            time: NaiveDateTime::parse_from_str("2024-04-20 08:00", "%Y-%m-%d %H:%M").unwrap(),
            source: "t".into(),
            source_id: format!("{id}-a1c"),
        })
        .unwrap();
    }
    w.commit().unwrap();
    Mutex::new(store)
}

fn screen(store: &Mutex<Store>, model: &AlwaysMet, checks: ChecksMode) -> evident_match::batch::BatchSummary {
    screen_set(store, model, checks, HYBRID)
}

fn screen_set(
    store: &Mutex<Store>,
    model: &AlwaysMet,
    checks: ChecksMode,
    yaml: &str,
) -> evident_match::batch::BatchSummary {
    let set = CriteriaSet::from_yaml_str(yaml, "hybrid").unwrap();
    let config = BatchConfig {
        method: Method::ZeroShot(Strategy::Ican),
        retrieval: RetrievalSettings::default(),
        concurrency: 1,
        zero_shot: ZeroShotConfig::default(),
        makar: MakarConfig::default(),
        run_name: None,
        checks,
        screening_date: None,
        label_correction: None,
        thresholds: None,
    };
    let model_run_id = store.lock().unwrap().begin_model_run("test").unwrap();
    let m = StructuredModel::unrecorded(model);
    let models = Models { matching: m, augmenting: m, embedder: None, model_run_id, knowledge: None, online: None };
    let patients = vec!["H1".to_string(), "H2".to_string()];
    run_batch(store, &set, &patients, &config, &models, None, &|_| {}).unwrap()
}

#[test]
fn checks_on_decide_without_the_model_and_both_shows_disagreements() {
    let set = CriteriaSet::from_yaml_str(HYBRID, "hybrid").unwrap();
    let patients = vec!["H1".to_string(), "H2".to_string()];

    // On: the reviewed check decides hba1c; t2dm and sex (its check is
    // only proposed) go to the model: 2 calls per patient instead of 3.
    let store = hybrid_store();
    let model = AlwaysMet { calls: AtomicUsize::new(0) };
    let on = screen(&store, &model, ChecksMode::On);
    assert_eq!(model.calls.load(Ordering::SeqCst), 4);
    assert_eq!((on.check_decisions, on.model_tasks_saved), (2, 2));
    assert_eq!(on.tasks_total, 6, "2 model tasks and 1 checks task per patient");
    let report = trial_report(&store.lock().unwrap(), &on.run_id, &set, &patients).unwrap();
    assert_eq!(report.check_decisions, 2);
    let h2 = report.patients.iter().find(|p| p.patient_id == "H2").unwrap();
    assert_eq!(h2.verdict.eligibility, Eligibility::NotEligible, "HbA1c 5.6% fails the check");
    let by: Vec<(&str, DecidedBy, &str)> =
        h2.criteria.iter().map(|c| (c.criterion.id.as_str(), c.decided_by, c.label.as_str())).collect();
    assert_eq!(
        by,
        [
            ("hba1c", DecidedBy::Check, "not included"),
            ("t2dm", DecidedBy::Model, "included"),
            ("sex", DecidedBy::Model, "included")
        ]
    );
    let check = h2.criteria[0].check.as_ref().unwrap();
    assert_eq!(check.labs.len(), 1);
    assert_eq!(check.labs[0].value, "5.6");
    // Started again: nothing left to do.
    let again = screen(&store, &model, ChecksMode::On);
    assert_eq!((again.run_id, again.tasks_run), (on.run_id, 0));
    assert_eq!(model.calls.load(Ordering::SeqCst), 4);

    // Both: the model decides every criterion too; it says MET for H2's
    // HbA1c where the check says NOT MET, so that criterion needs review.
    let store = hybrid_store();
    let model = AlwaysMet { calls: AtomicUsize::new(0) };
    let both = screen(&store, &model, ChecksMode::Both);
    assert_eq!(model.calls.load(Ordering::SeqCst), 6);
    assert_eq!(both.model_tasks_saved, 0);
    let report = trial_report(&store.lock().unwrap(), &both.run_id, &set, &patients).unwrap();
    let criterion = |p: &str| {
        let patient = report.patients.iter().find(|x| x.patient_id == p).unwrap();
        (patient.verdict.eligibility, patient.criteria[0].clone())
    };
    let (h1, agree) = criterion("H1");
    assert_eq!(
        (h1, agree.decided_by, agree.label.as_str()),
        (Eligibility::Eligible, DecidedBy::CheckAndModel, "included")
    );
    let (h2, disagree) = criterion("H2");
    assert_eq!(disagree.decided_by, DecidedBy::NeedsReview);
    assert_eq!(disagree.label, "needs review");
    assert_eq!(h2, Eligibility::NeedsReview);
    assert!(disagree.check.is_some() && disagree.model_result.is_some(), "both evidences are kept");
    assert_eq!(disagree.result.as_ref().unwrap().decision(), Some(Decision::NotEnoughInformation));
    let html = evident_match::report::to_html(&evident_match::report::match_report(vec![report]));
    assert!(html.contains("<span class=\"pill needs-review\">needs review</span>"));
    assert!(html.contains("by needs review") && html.contains("by check and model"));
}

/// HbA1c is stored for both patients; creatinine for neither. Both checks
/// leave the criterion to the text strategy when they find no data.
const DEFERRING: &str = r#"
trial_id: DEFERRING
criteria:
  - id: hba1c
    type: inclusion
    text: HbA1c at least 7.0%.
    check:
      status: reviewed
      if_no_data: text
      lab: {concept: HbA1c, unit: '%', at_least: 7.0}
  - id: creatinine
    type: exclusion
    text: Creatinine above 2.0 mg/dL in the past year.
    check:
      status: reviewed
      if_no_data: text
      lab: {concept: Creatinine, unit: mg/dL, above: 2.0, within_days: 365}
  - id: t2dm
    type: inclusion
    text: Type 2 diabetes.
"#;

#[test]
fn a_check_that_finds_no_data_leaves_the_criterion_to_the_model_when_it_says_so() {
    let set = CriteriaSet::from_yaml_str(DEFERRING, "deferring").unwrap();
    let patients = vec!["H1".to_string(), "H2".to_string()];
    let store = hybrid_store();
    let model = AlwaysMet { calls: AtomicUsize::new(0) };
    let on = screen_set(&store, &model, ChecksMode::On, DEFERRING);
    // Per patient: the HbA1c check decides; creatinine (no value) and t2dm
    // go to the model.
    assert_eq!(model.calls.load(Ordering::SeqCst), 4);
    assert_eq!(on.model_tasks_saved, 2);
    let report = trial_report(&store.lock().unwrap(), &on.run_id, &set, &patients).unwrap();
    for patient in &report.patients {
        let by: Vec<(&str, DecidedBy)> =
            patient.criteria.iter().map(|c| (c.criterion.id.as_str(), c.decided_by)).collect();
        assert_eq!(
            by,
            [("hba1c", DecidedBy::Check), ("creatinine", DecidedBy::ModelAfterCheck), ("t2dm", DecidedBy::Model)],
            "{}",
            patient.patient_id
        );
        let creatinine = &patient.criteria[1];
        assert_eq!(creatinine.result.as_ref().unwrap().decision(), Some(Decision::Met), "the model's answer stands");
        assert!(creatinine.check.as_ref().unwrap().found_no_data(), "the check's outcome is kept beside it");
    }
    // Resumed: the same plan, nothing to do.
    let again = screen_set(&store, &model, ChecksMode::On, DEFERRING);
    assert_eq!((again.run_id, again.tasks_run), (on.run_id, 0));
    assert_eq!(model.calls.load(Ordering::SeqCst), 4);
}
