//! The zero-shot matcher end to end over an in-memory store with a scripted
//! fake model: rendered prompts (snapshots), call counts per strategy,
//! exclusion polarity, citation mapping and flagging, repair and failure,
//! pooling of note-level answers.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use evident_llm::ChatRequest;
use evident_match::zero_shot::{PatientRecord, Strategy, ZeroShotConfig, ZeroShotMatcher};
use evident_match::{trial_verdict, CriteriaSet, Decision, Determination, Eligibility, SentenceRef};
use evident_model::text::{split_sections, split_sentences};
use evident_model::{DocKind, Document, Patient};
use evident_store::Store;

mod support;
use support::Scripted;

const TRIAL: &str = r#"
trial_id: T-DM
title: test
criteria:
  - id: t2dm
    type: inclusion
    text: Type 2 diabetes mellitus.
  - id: insulin
    type: exclusion
    text: Insulin treatment within the last 3 months.
    pooling: most_recent
    window_months: 3
"#;

fn store() -> Store {
    let mut store = Store::open_in_memory().unwrap();
    let w = store.writer().unwrap();
    w.upsert_patient(&Patient {
        id: "P002".into(),
        source: "t".into(),
        birth_date: None,
        sex: Some("female".into()),
        display_name: None,
    })
    .unwrap();
    for (id, day, text) in [
        ("old", 3, "Chest X-ray. No acute findings."),
        ("new", 20, "Ms. B. has type 2 diabetes since 2012. She takes insulin glargine 28 units nightly. Metformin 850 mg t.i.d."),
    ] {
        let doc = Document {
            id: id.into(),
            patient_id: "P002".into(),
            kind: DocKind::ProgressNote,
            date: Some(NaiveDate::from_ymd_opt(2024, 2, day).unwrap().and_hms_opt(0, 0, 0).unwrap()),
            title: format!("{id} note"),
            source: "t".into(),
            source_id: id.into(),
            text: text.into(),
        };
        w.put_document(&doc, &split_sections(text), &split_sentences(text)).unwrap();
    }
    w.commit().unwrap();
    store
}

fn answer(decision: &str, evidence: &[i64]) -> String {
    serde_json::json!({
        "medications_and_supplements": ["insulin glargine", "metformin"],
        "rationale": "as the note says",
        "decision": decision,
        "confidence": "high",
        "evidence": evidence
    })
    .to_string()
}

fn run(strategy: Strategy, answers: &[&str]) -> (evident_match::zero_shot::PatientMatch, Scripted) {
    let set = CriteriaSet::from_yaml_str(TRIAL, "trial").unwrap();
    let store = store();
    let record = PatientRecord::from_store(&store, "P002").unwrap();
    let model = Scripted::new(answers);
    let matcher = ZeroShotMatcher::new(&model, ZeroShotConfig { strategy, ..ZeroShotConfig::default() }, None);
    let result = matcher.match_patient(&set, &record).unwrap();
    (result, model)
}

fn rendered(requests: &[ChatRequest]) -> String {
    requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let msgs: Vec<String> =
                r.messages.iter().map(|m| format!("--- {} ---\n{}", m.role.as_str(), m.content)).collect();
            format!("=== call {} (max_tokens {}) ===\n{}", i + 1, r.max_tokens, msgs.join("\n"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn ican_one_call_per_criterion_shared_prefix_and_exclusion_polarity() {
    // Sentences: old 0,1; new 2,3,4 (prompt-local ids, oldest note first).
    let (m, model) = run(Strategy::Ican, &[&answer("MET", &[2]), &answer("MET", &[3])]);
    let requests = model.requests();
    assert_eq!(m.calls, 2);
    // Same system message, and the user messages differ only at the end.
    assert_eq!(requests[0].messages[0], requests[1].messages[0]);
    let (a, b) = (&requests[0].messages[1].content, &requests[1].messages[1].content);
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    assert!(common > a.find("# Criterion").unwrap(), "the record and current date must be a shared prefix");
    // Wornow et al.'s prompt: the current date (the latest note's), the
    // criterion's name and definition, step by step, medications first.
    assert!(a.contains("# Current Date\n\nAssume that the current date is: 2024-02-20\n"), "{a}");
    assert!(a.contains("criterion being assessed is: \"t2dm: "), "{a}");
    assert!(a.contains("Think step by step, and justify your answer."));
    let schema = requests[0].json_schema.clone().unwrap();
    assert_eq!(
        schema["required"],
        serde_json::json!(["medications_and_supplements", "rationale", "decision", "confidence", "evidence"]),
        "medications come before the decision"
    );
    assert_eq!(schema["properties"].as_object().unwrap().keys().next().unwrap(), "medications_and_supplements");
    insta::assert_snapshot!("ican_prompts", rendered(&requests));
    // The patient meets the exclusion: excluded.
    let Determination::Assessed(a) = &m.results[1].outcome else { panic!() };
    assert_eq!(a.decision, Decision::Met);
    assert_eq!(a.evidence, [SentenceRef { document_id: "new".into(), ordinal: 1 }]);
    assert_eq!(m.results[1].label(), "excluded");
    let set = CriteriaSet::from_yaml_str(TRIAL, "trial").unwrap();
    assert_eq!(trial_verdict(&set, &m.results).eligibility, Eligibility::Excluded);
}

#[test]
fn acan_one_call_keyed_by_criterion() {
    let both = format!("{{\"t2dm\": {}, \"insulin\": {}}}", answer("MET", &[2]), answer("NOT MET", &[]));
    let (m, model) = run(Strategy::Acan, &[&both]);
    assert_eq!(m.calls, 1);
    insta::assert_snapshot!("acan_prompts", rendered(&model.requests()));
    let labels: Vec<_> = m.results.iter().map(|r| r.label()).collect();
    assert_eq!(labels, ["included", "not excluded"]);
    let schema = model.requests()[0].json_schema.clone().unwrap();
    assert_eq!(schema["required"], serde_json::json!(["t2dm", "insulin"]));
}

#[test]
fn icin_pools_notes_with_each_criterions_rule() {
    // Order: note old (t2dm, insulin), note new (t2dm, insulin).
    let (m, model) = run(
        Strategy::Icin,
        &[&answer("NOT ENOUGH INFORMATION", &[]), &answer("NOT MET", &[]), &answer("MET", &[0]), &answer("MET", &[1])],
    );
    assert_eq!(m.calls, 4);
    assert_eq!(m.note_results.len(), 4);
    insta::assert_snapshot!("icin_prompts", rendered(&model.requests()));
    // t2dm: max over notes -> MET; insulin: most recent note -> MET.
    assert_eq!(m.results.iter().map(|r| r.decision()).collect::<Vec<_>>(), [Some(Decision::Met), Some(Decision::Met)]);
    // Ids are per prompt: id 0 in the second note's prompt is its first sentence.
    let Determination::Assessed(a) = &m.results[0].outcome else { panic!() };
    assert_eq!(a.evidence, [SentenceRef { document_id: "new".into(), ordinal: 0 }]);
}

#[test]
fn acin_renders_each_note_with_all_criteria() {
    let a1 =
        format!("{{\"t2dm\": {}, \"insulin\": {}}}", answer("NOT ENOUGH INFORMATION", &[]), answer("NOT MET", &[]));
    let a2 = format!("{{\"t2dm\": {}, \"insulin\": {}}}", answer("MET", &[0]), answer("MET", &[1]));
    let (m, model) = run(Strategy::Acin, &[&a1, &a2]);
    assert_eq!(m.calls, 2);
    insta::assert_snapshot!("acin_prompts", rendered(&model.requests()));
    assert_eq!(m.results[1].label(), "excluded");
}

#[test]
fn a_citation_outside_the_prompt_is_refused_by_the_schema_and_repaired() {
    // Evidence ids are bounded by the last id shown, so a model cannot cite
    // a sentence it was not given: such an answer is invalid and repaired.
    let (m, model) = run(Strategy::Ican, &[&answer("MET", &[2, 99]), &answer("MET", &[2]), &answer("NOT MET", &[])]);
    assert_eq!(model.requests().len(), 3);
    assert!(model.requests()[1].messages.last().unwrap().content.contains("99"), "the repair prompt names the bad id");
    let Determination::Assessed(a) = &m.results[0].outcome else { panic!() };
    assert_eq!(a.evidence.len(), 1);
    assert!(!m.results[0].is_flagged() && !m.results[1].is_flagged());
}

#[test]
fn malformed_answer_is_repaired_then_becomes_a_failed_decision() {
    // Criterion 1: invalid, then repaired. Criterion 2: three invalid answers.
    let (m, model) = run(
        Strategy::Ican,
        &["not json", &answer("MET", &[2]), "{\"decision\": \"YES\"}", "```json\n{}\n```", &answer("maybe", &[])],
    );
    assert_eq!(model.requests().len(), 5);
    assert_eq!(m.results[0].decision(), Some(Decision::Met));
    assert!(model.requests()[1].messages.last().unwrap().content.contains("not valid JSON for the required schema"));
    let Determination::Failed(f) = &m.results[1].outcome else { panic!("expected a failed decision") };
    assert!(f.raw_text.contains("maybe"));
    assert!(!f.errors.is_empty());
    assert_eq!(m.results[1].label(), "failed");
    // Logged once, with the model's last answer (a recording model stores it in its run).
    let logged = model.failures();
    assert_eq!(logged.len(), 1);
    assert_eq!((logged[0].raw_text.as_str(), logged[0].attempts), (answer("maybe", &[]).as_str(), 3));
    let set = CriteriaSet::from_yaml_str(TRIAL, "trial").unwrap();
    let v = trial_verdict(&set, &m.results);
    assert_eq!((v.eligibility, v.counts.failed), (Eligibility::NeedsReview, 1));
}

#[test]
fn retrieval_restricts_to_sentences_inside_sections() {
    let store = store();
    let record = PatientRecord::from_store(&store, "P002").unwrap();
    let mut spans = BTreeMap::new();
    for doc in ["old", "new"] {
        for s in store.sentences(doc).unwrap() {
            spans.insert((doc.to_string(), s.ordinal), (s.start, s.end));
        }
    }
    let second = store.sentence("new", 1).unwrap().unwrap();
    let only = record.restrict_to_sections(&[("new".into(), second.start, second.end)], &spans);
    assert_eq!(only.notes.len(), 1);
    assert_eq!(only.notes[0].sentences, [(1, second.text.clone())]);
}

#[test]
fn citations_are_verified_against_the_store() {
    let store = store();
    let (m, _) = run(Strategy::Ican, &[&answer("MET", &[2]), &answer("MET", &[3])]);
    assert!(evident_match::zero_shot::verify_citations(&store, &m.results[0]).unwrap().is_empty());
    let mut forged = m.results[0].clone();
    if let Determination::Assessed(a) = &mut forged.outcome {
        a.evidence.push(SentenceRef { document_id: "new".into(), ordinal: 42 });
    }
    assert_eq!(
        evident_match::zero_shot::verify_citations(&store, &forged).unwrap(),
        ["sentence 42 of document new is not in the store"]
    );
}
