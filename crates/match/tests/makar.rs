//! MAKAR's control flow with scripted fake models: the router's self-probe,
//! the critic loop (rejection then acceptance, the bound, the verbatim
//! check), reasoning/matching/supervision (approval, correction, failure),
//! exclusion polarity, citation flagging, MAKAR-Aug and MAKAR-Reason, the
//! retrieval agent over a real knowledge base built from knowledge/example,
//! and the online agent against a local HTTP server. Rendered prompts are
//! snapshot-tested.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use evident_llm::{ChatModel, ChatRequest, ChatResponse, FinishReason, LlmError, RepairPolicy, StructuredModel};
use evident_match::makar::{
    Augmentation, KnowledgeSource, LocalKnowledgeBase, MakarConfig, MakarMatcher, OnlineSearch, RoundJudge, Route,
    SupervisionVerdict, Variant,
};
use evident_match::zero_shot::{MatchError, NoteText};
use evident_match::{
    trial_verdict, CriteriaSet, Criterion, CriterionType, Decision, Determination, Eligibility, SentenceRef,
};
use serde_json::json;

mod support;
use support::Scripted;

const HBA1C: &str = "Any hemoglobin A1c (HbA1c) value between 6.5% and 9.5%.";

fn criterion(id: &str, criterion_type: CriterionType, text: &str) -> Criterion {
    Criterion {
        id: id.into(),
        criterion_type,
        text: text.into(),
        refined: None,
        pooling: None,
        window_months: None,
        structured: None,
        check: None,
    }
}

fn hba1c() -> Criterion {
    criterion("HBA1C", CriterionType::Inclusion, HBA1C)
}

/// Two notes; prompt-local sentence ids: old 0,1; new 2,3,4.
fn notes() -> Vec<NoteText> {
    let date = |d| Some(NaiveDate::from_ymd_opt(2024, 2, d).unwrap().and_hms_opt(0, 0, 0).unwrap());
    vec![
        NoteText {
            document_id: "old".into(),
            date: date(3),
            title: "old note".into(),
            sentences: vec![(0, "Chest X-ray.".into()), (1, "No acute findings.".into())],
        },
        NoteText {
            document_id: "new".into(),
            date: date(20),
            title: "new note".into(),
            sentences: vec![
                (0, "Ms. B. has type 2 diabetes since 2012.".into()),
                (1, "HbA1c 8.2% last week.".into()),
                (2, "She takes insulin glargine 28 units nightly.".into()),
            ],
        },
    ]
}

fn router(detailed_enough: bool, agent: &str) -> String {
    json!({"detailed_enough": detailed_enough, "agent": agent, "reason": "because"}).to_string()
}

fn augmented(original: &str, explanation: &str) -> String {
    json!({"original_criterion": original, "additional_explanation": explanation}).to_string()
}

fn critic(accepted: bool, feedback: &str) -> String {
    json!({"accepted": accepted, "feedback": feedback}).to_string()
}

fn reasoning(summary: &str) -> String {
    json!({"concepts": [{"concept": "HbA1c value", "finding": "8.2% [3]"}], "summary": summary}).to_string()
}

fn matching(decision: &str, evidence: &[i64]) -> String {
    json!({
        "medications_and_supplements": ["insulin glargine"],
        "rationale": "HbA1c 8.2% is in range",
        "decision": decision,
        "confidence": "high",
        "evidence": evidence
    })
    .to_string()
}

fn supervision(approved: bool, decision: &str, evidence: &[i64]) -> String {
    json!({"approved": approved, "decision": decision, "confidence": "medium", "reason": "checked the record", "evidence": evidence})
        .to_string()
}

fn s(items: &[String]) -> Vec<String> {
    items.to_vec()
}

fn rendered(requests: &[ChatRequest]) -> String {
    requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let msgs: Vec<String> =
                r.messages.iter().map(|m| format!("--- {} ---\n{}", m.role.as_str(), m.content)).collect();
            format!(
                "=== call {} (max_tokens {}, patient text {}) ===\n{}",
                i + 1,
                r.max_tokens,
                r.contains_patient_text,
                msgs.join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn config(variant: Variant) -> MakarConfig {
    MakarConfig { variant, ..MakarConfig::default() }
}

fn accepted_augmentation() -> Augmentation {
    let model = Scripted::new(&s(&[
        router(false, "self_augment"),
        augmented(HBA1C, "HbA1c is the average blood glucose of 2-3 months."),
        critic(true, "fine"),
    ]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Full), None);
    matcher.augment_criterion(&hba1c()).unwrap()
}

#[test]
fn router_as_is_skips_augmentation() {
    let model = Scripted::new(&s(&[router(true, "self_augment")]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Full), None);
    let a = matcher.augment_criterion(&hba1c()).unwrap();
    assert_eq!(a.route, Route::AsIs);
    assert_eq!((a.calls, a.rounds.len(), a.accepted, a.augmented.as_deref()), (1, 0, false, None));
    assert_eq!(a.text_for(&hba1c()), HBA1C);
    let requests = model.requests();
    assert!(!requests[0].contains_patient_text, "criteria requests carry no patient text");
    // Only self-augment is enabled: the schema's enum admits nothing else.
    assert_eq!(requests[0].json_schema.as_ref().unwrap()["properties"]["agent"]["enum"], json!(["self_augment"]));
    // apply: an unaugmented criterion shows its original text.
    let mut set = CriteriaSet { trial_id: "T".into(), title: String::new(), source: None, criteria: vec![hba1c()] };
    set.criteria[0].refined = Some("a human refinement".into());
    assert_eq!(matcher.apply(&set, &[a]).criteria[0].prompt_text(), HBA1C);
}

#[test]
fn critic_rejects_then_accepts_and_feedback_is_kept() {
    let model = Scripted::new(&s(&[
        router(false, "self_augment"),
        augmented(HBA1C, "HbA1c above 6.5% means diabetes."),
        critic(false, "Say that 6.5% to 9.5% is about 48 to 80 mmol/mol."),
        augmented(HBA1C, "- HbA1c: average glucose over 2-3 months.\n- 6.5% to 9.5% is about 48 to 80 mmol/mol."),
        critic(true, "Accurate and complete."),
    ]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Full), None);
    let a = matcher.augment_criterion(&hba1c()).unwrap();
    assert_eq!(a.route, Route::SelfAugment);
    assert!(a.accepted);
    assert_eq!(a.calls, 5);
    assert_eq!(a.rounds.len(), 2);
    assert_eq!((a.rounds[0].accepted, a.rounds[0].judge), (false, RoundJudge::Critic));
    assert_eq!(a.rounds[0].feedback, "Say that 6.5% to 9.5% is about 48 to 80 mmol/mol.");
    assert!(a.rounds[1].accepted);
    let text = a.accepted_text().unwrap();
    assert!(text.starts_with(&format!("Original Criterion: {HBA1C}\nAdditional Explanation: - HbA1c")), "{text}");
    // The second augmentation saw the first and the critic's feedback.
    let requests = model.requests();
    assert!(requests[3].messages[1].content.contains("Say that 6.5% to 9.5% is about 48 to 80 mmol/mol."));
    assert!(requests[3].messages[1].content.contains("HbA1c above 6.5% means diabetes."));
    assert!(requests.iter().all(|r| !r.contains_patient_text));
    insta::assert_snapshot!("makar_augmentation_prompts", rendered(&requests));
    // apply: the accepted augmentation becomes the prompt text.
    let set = CriteriaSet { trial_id: "T".into(), title: String::new(), source: None, criteria: vec![hba1c()] };
    assert_eq!(matcher.apply(&set, std::slice::from_ref(&a)).criteria[0].refined.as_deref(), Some(text));
    // Stored per trial and read back unchanged.
    let back: Augmentation = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
    assert_eq!(back, a);
}

#[test]
fn rejection_at_the_bound_keeps_the_last_augmentation_but_uses_the_original() {
    let model = Scripted::new(&s(&[
        router(false, "self_augment"),
        augmented(HBA1C, "first try"),
        critic(false, "inaccurate 1"),
        augmented(HBA1C, "second try"),
        critic(false, "inaccurate 2"),
    ]));
    let config = MakarConfig { max_critic_rounds: 2, ..config(Variant::Full) };
    let matcher = MakarMatcher::new(&model, &model, config, None);
    let a = matcher.augment_criterion(&hba1c()).unwrap();
    assert!(model.exhausted(), "exactly the scripted calls");
    assert!(!a.accepted);
    assert_eq!(a.rounds.iter().map(|r| r.feedback.as_str()).collect::<Vec<_>>(), ["inaccurate 1", "inaccurate 2"]);
    assert!(a.augmented.as_deref().unwrap().ends_with("second try"));
    assert_eq!(a.accepted_text(), None);
    assert_eq!(a.text_for(&hba1c()), HBA1C);
    let set = CriteriaSet { trial_id: "T".into(), title: String::new(), source: None, criteria: vec![hba1c()] };
    assert_eq!(matcher.apply(&set, &[a]).criteria[0].refined, None);
}

#[test]
fn the_verbatim_check_catches_a_paraphrased_original_without_asking_the_critic() {
    let paraphrase = "Any HbA1c value from 6.5% to 9.5%.";
    let model = Scripted::new(&s(&[
        router(false, "self_augment"),
        augmented(paraphrase, "explained"),
        // No critic call for the paraphrase: the next call is the re-augmentation.
        augmented(HBA1C, "explained"),
        critic(true, "ok"),
    ]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Full), None);
    let a = matcher.augment_criterion(&hba1c()).unwrap();
    assert!(model.exhausted());
    assert_eq!(a.calls, 4);
    assert_eq!((a.rounds[0].judge, a.rounds[0].accepted), (RoundJudge::VerbatimCheck, false));
    assert!(a.rounds[0].feedback.contains("not preserved verbatim"), "{}", a.rounds[0].feedback);
    assert!(a.accepted);
    assert!(model.requests()[2].messages[1].content.contains("not preserved verbatim"));
}

#[test]
fn a_critic_that_accepts_a_paraphrase_is_overruled() {
    // Every round paraphrases: the critic is never asked and nothing is accepted.
    let model = Scripted::new(&s(&[
        router(false, "self_augment"),
        augmented("HbA1c 6.5-9.5%", "x"),
        augmented("HbA1c 6.5-9.5%", "x"),
        augmented("HbA1c 6.5-9.5%", "x"),
    ]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Full), None);
    let a = matcher.augment_criterion(&hba1c()).unwrap();
    assert!(!a.accepted);
    assert_eq!(a.rounds.len(), 3);
    assert!(a.rounds.iter().all(|r| r.judge == RoundJudge::VerbatimCheck));
}

#[test]
fn supervision_approves_and_the_three_agents_share_the_record_prefix() {
    let aug = accepted_augmentation();
    let model = Scripted::new(&s(&[
        reasoning("HbA1c 8.2% is within 6.5-9.5%."),
        matching("MET", &[3]),
        supervision(true, "MET", &[3]),
    ]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Full), None);
    let notes = notes();
    let refs: Vec<&NoteText> = notes.iter().collect();
    let out = matcher.match_criterion(&hba1c(), Some(&aug), &refs).unwrap();
    assert_eq!(out.calls, 3);
    let Determination::Assessed(a) = &out.result.outcome else { panic!("{:?}", out.result) };
    assert_eq!(a.decision, Decision::Met);
    assert_eq!(a.evidence, [SentenceRef { document_id: "new".into(), ordinal: 1 }]);
    assert_eq!(out.result.label(), "included");
    assert!(out.trace.augmented);
    assert_eq!(out.trace.reasoning.as_ref().unwrap().summary, "HbA1c 8.2% is within 6.5-9.5%.");
    assert_eq!(out.trace.matching.as_ref().unwrap().decision, Decision::Met);
    assert!(matches!(out.trace.supervision, Some(SupervisionVerdict::Approved { .. })));
    let requests = model.requests();
    assert!(requests.iter().all(|r| r.contains_patient_text));
    assert!(requests.iter().all(|r| r.messages[0] == requests[0].messages[0]), "one system message for all three");
    let record_end = requests[0].messages[1].content.find("# Task").unwrap();
    for r in &requests[1..] {
        assert_eq!(r.messages[1].content[..record_end], requests[0].messages[1].content[..record_end]);
        assert!(r.messages[1].content.trim_end().ends_with(aug.accepted_text().unwrap()), "the criterion comes last");
    }
    // The matching agent saw the reasoning; the supervisor saw the decision.
    assert!(requests[1].messages[1].content.contains("HbA1c 8.2% is within 6.5-9.5%."));
    assert!(requests[2].messages[1].content.contains("Their decision: MET"));
    insta::assert_snapshot!("makar_reasoning_prompts", rendered(&requests));
}

#[test]
fn supervision_corrects_the_decision() {
    let model = Scripted::new(&s(&[reasoning("unclear"), matching("MET", &[2]), supervision(false, "NOT MET", &[3])]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Full), None);
    let notes = notes();
    let refs: Vec<&NoteText> = notes.iter().collect();
    let exclusion = criterion("a1c-high", CriterionType::Exclusion, "HbA1c above 10%.");
    let out = matcher.match_criterion(&exclusion, None, &refs).unwrap();
    let Determination::Assessed(a) = &out.result.outcome else { panic!() };
    assert_eq!(a.decision, Decision::NotMet);
    assert_eq!(out.result.label(), "not excluded");
    assert_eq!(a.evidence, [SentenceRef { document_id: "new".into(), ordinal: 1 }], "the supervisor's citations");
    assert!(
        a.rationale.contains("HbA1c 8.2% is in range") && a.rationale.contains("Supervision corrected MET to NOT MET")
    );
    assert_eq!(
        out.trace.matching.as_ref().unwrap().decision,
        Decision::Met,
        "the matching answer is kept in the trace"
    );
    assert!(matches!(
        &out.trace.supervision,
        Some(SupervisionVerdict::Corrected { decision: Decision::NotMet, reason, .. }) if reason == "checked the record"
    ));
    assert!(!out.trace.augmented);
}

#[test]
fn a_matching_answer_that_never_validates_is_a_failed_decision() {
    let bad = "the patient is probably eligible".to_string();
    let model = Scripted::new(&s(&[reasoning("r"), bad.clone(), bad.clone(), bad]));
    let config = MakarConfig { repair: RepairPolicy { repair_attempts: 2 }, ..config(Variant::Full) };
    let matcher = MakarMatcher::new(&model, &model, config, None);
    let notes = notes();
    let refs: Vec<&NoteText> = notes.iter().collect();
    let out = matcher.match_criterion(&hba1c(), None, &refs).unwrap();
    assert!(model.exhausted(), "no supervision call after a failure");
    assert_eq!(out.calls, 4);
    let Determination::Failed(f) = &out.result.outcome else { panic!("{:?}", out.result) };
    assert_eq!(f.raw_text, "the patient is probably eligible");
    assert!(f.errors.iter().all(|e| e.starts_with("matching agent:")), "{:?}", f.errors);
    assert_eq!(out.result.label(), "failed");
    assert!(out.trace.supervision.is_none());
}

#[test]
fn each_pipeline_failure_is_logged_against_the_model_that_gave_the_answer() {
    // The criteria model's router answer and the patient model's matching
    // answer never validate (no repair): each failure goes to its own
    // model's log, as each recording model stores it in its own run.
    let augmenter = Scripted::new(&s(&[
        "no route".to_string(),
        augmented(HBA1C, "HbA1c is the average blood glucose of 2-3 months."),
        critic(true, "fine"),
    ]));
    let patient_model = Scripted::new(&s(&[reasoning("r"), "probably eligible".to_string()]));
    let config = MakarConfig { repair: RepairPolicy { repair_attempts: 0 }, ..config(Variant::Full) };
    let matcher = MakarMatcher::new(&patient_model, &augmenter, config, None);
    let aug = matcher.augment_criterion(&hba1c()).unwrap();
    assert_eq!(aug.route, Route::SelfAugment, "a router failure falls back to self-augment");
    let notes = notes();
    let refs: Vec<&NoteText> = notes.iter().collect();
    let out = matcher.match_criterion(&hba1c(), Some(&aug), &refs).unwrap();
    assert_eq!(out.result.label(), "failed");
    assert!(augmenter.exhausted() && patient_model.exhausted());
    let raw_texts = |m: &Scripted| m.failures().into_iter().map(|f| f.raw_text).collect::<Vec<_>>();
    assert_eq!(raw_texts(&augmenter), ["no route"]);
    assert_eq!(raw_texts(&patient_model), ["probably eligible"]);
}

#[test]
fn an_exclusion_the_patient_meets_excludes_them_in_makar_reason() {
    let aug = accepted_augmentation();
    let model = Scripted::new(&s(&[
        reasoning("She takes insulin glargine."),
        json!({"medications_and_supplements": ["insulin glargine"], "rationale": "on insulin", "decision": "MET", "confidence": "high", "evidence": [4]}).to_string(),
        supervision(true, "MET", &[4]),
    ]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Reason), None);
    let insulin = criterion("insulin", CriterionType::Exclusion, "Insulin treatment within the last 3 months.");
    let notes = notes();
    let refs: Vec<&NoteText> = notes.iter().collect();
    // MAKAR-Reason ignores augmentations (here one for another criterion).
    let out = matcher.match_criterion(&insulin, Some(&aug), &refs).unwrap();
    assert!(!out.trace.augmented);
    assert_eq!(out.trace.criterion_text, "Insulin treatment within the last 3 months.");
    assert_eq!(out.result.decision(), Some(Decision::Met));
    assert_eq!(out.result.label(), "excluded");
    let set = CriteriaSet { trial_id: "T".into(), title: String::new(), source: None, criteria: vec![insulin] };
    assert_eq!(trial_verdict(&set, &[out.result]).eligibility, Eligibility::Excluded);
}

#[test]
fn a_matching_citation_outside_the_record_is_refused_by_the_schema_and_repaired() {
    // The matching schema bounds evidence ids by the last id shown, so an
    // id outside the record is invalid output: the repair answer is used.
    let model = Scripted::new(&s(&[
        reasoning("r"),
        matching("MET", &[3, 99]),
        matching("MET", &[3]),
        supervision(true, "MET", &[]),
    ]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Full), None);
    let notes = notes();
    let refs: Vec<&NoteText> = notes.iter().collect();
    let out = matcher.match_criterion(&hba1c(), None, &refs).unwrap();
    assert!(!out.result.is_flagged());
    let Determination::Assessed(a) = &out.result.outcome else { panic!() };
    assert_eq!(a.evidence.len(), 1);
    assert_eq!(model.requests().len(), 4, "reasoning, matching, its repair, supervision");
}

#[test]
fn a_corrected_decision_with_unresolved_citations_is_flagged() {
    let model = Scripted::new(&s(&[
        reasoning("r"),
        matching("MET", &[3]),
        supervision(false, "NOT ENOUGH INFORMATION", &[42]),
    ]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Full), None);
    let notes = notes();
    let refs: Vec<&NoteText> = notes.iter().collect();
    let out = matcher.match_criterion(&hba1c(), None, &refs).unwrap();
    assert_eq!(out.result.decision(), Some(Decision::NotEnoughInformation));
    assert_eq!(out.result.unresolved_citations, ["sentence id 42 was not in the prompt"]);
}

#[test]
fn makar_aug_runs_zero_shot_ican_on_the_augmented_criterion() {
    let aug = accepted_augmentation();
    let model = Scripted::new(&s(&[matching("MET", &[3])]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Aug), None);
    let notes = notes();
    let refs: Vec<&NoteText> = notes.iter().collect();
    let out = matcher.match_criterion(&hba1c(), Some(&aug), &refs).unwrap();
    assert_eq!(out.calls, 1);
    assert_eq!(out.result.decision(), Some(Decision::Met));
    assert!(out.trace.reasoning.is_none() && out.trace.supervision.is_none());
    let request = &model.requests()[0];
    assert!(
        request.messages[0].content.starts_with("You are an expert clinical research coordinator"),
        "the zero-shot prompt"
    );
    assert!(request.messages[1].content.contains(aug.accepted_text().unwrap()));
}

#[test]
fn a_stale_augmentation_is_not_used() {
    let aug = accepted_augmentation();
    let mut changed = hba1c();
    changed.text = "Any HbA1c value between 7% and 9%.".into();
    assert_eq!(aug.text_for(&changed), changed.text);
}

#[test]
fn online_search_is_refused_without_an_endpoint() {
    let model = Scripted::new::<&str>(&[]);
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Full), None);
    assert_eq!(matcher.enabled_routes(), [Route::SelfAugment]);
    let err = matcher.augment_with(&hba1c(), Route::OnlineSearch).unwrap_err();
    let MatchError::OnlineSearch(message) = &err else { panic!("{err:?}") };
    assert!(message.contains("online search is off") && message.contains("endpoint"), "{message}");
    let err = matcher.augment_with(&hba1c(), Route::Retrieval).unwrap_err();
    assert!(matches!(err, MatchError::Knowledge(_)), "{err:?}");
    assert!(model.requests().is_empty(), "nothing was asked");
    assert!(OnlineSearch::new("localhost:8888", std::time::Duration::from_secs(1)).is_err());
}

fn example_pack() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../knowledge/example")
}

#[test]
fn the_retrieval_agent_uses_passages_from_the_example_knowledge_base() {
    let kb = LocalKnowledgeBase::in_memory().unwrap();
    let report = kb.index(&[example_pack()]).unwrap();
    assert!((8..=15).contains(&report.inserted), "{report:?}");
    let model = Scripted::new(&s(&[
        router(false, "retrieval"),
        augmented(HBA1C, "6.5% is the ADA threshold for diabetes."),
        critic(true, "ok"),
    ]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Full), None).with_knowledge(&kb);
    assert_eq!(matcher.enabled_routes(), [Route::Retrieval, Route::SelfAugment]);
    let a = matcher.augment_criterion(&hba1c()).unwrap();
    assert_eq!(a.route, Route::Retrieval);
    assert!(!a.sources.is_empty() && a.sources.len() <= 4);
    assert!(a.sources[0].source.starts_with("kb:example/hba1c.md"), "{:?}", a.sources);
    let requests = model.requests();
    assert_eq!(
        requests[0].json_schema.as_ref().unwrap()["properties"]["agent"]["enum"],
        json!(["retrieval", "self_augment"])
    );
    let prompt = &requests[1].messages[1].content;
    assert!(prompt.contains("from the knowledge base"));
    assert!(prompt.contains(&a.sources[0].text), "the passage is shown verbatim");
    assert!(prompt.contains("6.5% or higher: diagnostic of diabetes"));
}

#[test]
fn knowledge_base_search_finds_the_right_definitions() {
    let kb = LocalKnowledgeBase::in_memory().unwrap();
    kb.index(&[example_pack()]).unwrap();
    for (query, expected) in [
        ("eGFR below 30 mL/min/1.73m2", "kb:example/kidney-function-ckd-egfr.md"),
        ("Diagnosis of ketoacidosis in the past year.", "kb:example/ketoacidosis.md"),
        ("Current alcohol use over weekly recommended limits.", "kb:example/alcohol-use-limits.md"),
        ("Drug abuse, current or past.", "kb:example/drug-abuse.md"),
        ("Serum creatinine > upper limit of normal.", "kb:example/serum-creatinine.md"),
    ] {
        let hits = kb.search(query, 3).unwrap();
        assert!(
            hits[0].source.starts_with(expected),
            "{query}: {:?}",
            hits.iter().map(|h| &h.source).collect::<Vec<_>>()
        );
    }
}

#[test]
fn indexing_reports_every_bad_input_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty.md"), "  \n").unwrap();
    std::fs::write(dir.path().join("table.csv"), "a,b\n").unwrap();
    std::fs::write(dir.path().join("latin1.txt"), b"caf\xe9").unwrap();
    let kb = LocalKnowledgeBase::in_memory().unwrap();
    let paths = [
        example_pack(),
        dir.path().join("empty.md"),
        dir.path().join("table.csv"),
        dir.path().join("latin1.txt"),
        dir.path().join("missing.md"),
    ];
    let MatchError::Knowledge(message) = kb.index(&paths).unwrap_err() else { panic!() };
    assert!(message.starts_with("4 problem(s); nothing was indexed"), "{message}");
    for needle in [
        "empty.md: the file is empty",
        "table.csv: not a .md or .txt file",
        "latin1.txt: not UTF-8",
        "missing.md: no such file",
    ] {
        assert!(message.contains(needle), "{needle} in {message}");
    }
    assert!(kb.document_ids().unwrap().is_empty());
    // Indexing twice changes nothing.
    let first = kb.index(&[example_pack()]).unwrap();
    let again = kb.index(&[example_pack()]).unwrap();
    assert_eq!((again.inserted, again.unchanged), (0, first.inserted));
}

/// A SearXNG-like server: answers every request with `body` and sends the
/// query strings it saw back through the returned channel.
fn searx(status: u16, body: &'static str) -> (String, std::sync::mpsc::Receiver<String>, std::thread::JoinHandle<()>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let addr = server.server_addr().to_ip().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        if let Ok(request) = server.recv() {
            tx.send(request.url().to_string()).unwrap();
            let header = tiny_http::Header::from_bytes(&b"Content-Type"[..], &b"application/json"[..]).unwrap();
            let _ =
                request.respond(tiny_http::Response::from_string(body).with_status_code(status).with_header(header));
        }
    });
    (format!("http://{addr}/search"), rx, handle)
}

#[test]
fn the_online_agent_queries_a_searxng_endpoint() {
    let (endpoint, seen, server) = searx(
        200,
        r#"{"query": "x", "results": [
            {"title": "HbA1c test", "url": "https://example.org/a1c", "content": "An HbA1c of 6.5% or more indicates diabetes."},
            {"title": "empty", "url": "https://example.org/empty", "content": ""},
            {"title": "Ranges", "url": "https://example.org/ranges", "content": "Normal is below 5.7%."}
        ]}"#,
    );
    let online = OnlineSearch::new(&endpoint, std::time::Duration::from_secs(10)).unwrap();
    let model = Scripted::new(&s(&[router(false, "online_search"), augmented(HBA1C, "explained"), critic(true, "ok")]));
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Full), None).with_online_search(&online);
    let a = matcher.augment_criterion(&hba1c()).unwrap();
    server.join().unwrap();
    let url = seen.recv().unwrap();
    assert!(
        url.starts_with("/search?")
            && url.contains("format=json")
            && url.contains("q=Any+hemoglobin") | url.contains("q=Any%20hemoglobin"),
        "{url}"
    );
    assert_eq!(a.route, Route::OnlineSearch);
    let sources: Vec<&str> = a.sources.iter().map(|p| p.source.as_str()).collect();
    assert_eq!(
        sources,
        ["https://example.org/a1c (HbA1c test)", "https://example.org/ranges (Ranges)"],
        "results without text are skipped"
    );
    let prompt = &model.requests()[1].messages[1].content;
    assert!(prompt.contains("found online") && prompt.contains("An HbA1c of 6.5% or more indicates diabetes."));
}

#[test]
fn an_endpoint_that_does_not_speak_searxng_json_gets_a_clear_error() {
    let (endpoint, _seen, server) = searx(403, "Forbidden");
    let online = OnlineSearch::new(&endpoint, std::time::Duration::from_secs(10)).unwrap();
    let MatchError::OnlineSearch(message) = online.search("HbA1c", 3).unwrap_err() else { panic!() };
    server.join().unwrap();
    assert!(message.contains("HTTP 403") && message.contains("json format"), "{message}");
    let (endpoint, _seen, server) = searx(200, "<html>not json</html>");
    let online = OnlineSearch::new(&endpoint, std::time::Duration::from_secs(10)).unwrap();
    let MatchError::OnlineSearch(message) = online.search("HbA1c", 3).unwrap_err() else { panic!() };
    server.join().unwrap();
    assert!(message.contains("not SearXNG JSON"), "{message}");
}

#[test]
fn one_matcher_serves_many_threads() {
    fn shared<T: Sync + Send>() {}
    shared::<MakarMatcher<'static>>();
    shared::<LocalKnowledgeBase>();
    shared::<OnlineSearch>();
    // Concurrent use: eight threads share one matcher and one model that
    // answers by the task in the prompt (order across threads is arbitrary).
    struct ByTask;
    impl ChatModel for ByTask {
        fn model_id(&self) -> &str {
            "by-task"
        }
        fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
            let prompt = &request.messages[1].content;
            let text = if prompt.contains("# Task: reasoning") {
                reasoning("r")
            } else if prompt.contains("# Task: matching") {
                matching("MET", &[3])
            } else {
                supervision(true, "MET", &[3])
            };
            Ok(ChatResponse {
                text,
                prompt_tokens: 0,
                completion_tokens: 0,
                finish_reason: FinishReason::Stop,
                model: "by-task".into(),
                endpoint: "test".into(),
                reused_prompt_tokens: 0,
                logprobs: None,
            })
        }
    }
    let model = ByTask;
    let model = StructuredModel::unrecorded(&model);
    let matcher = MakarMatcher::new(model, model, config(Variant::Reason), None);
    let notes = notes();
    let refs: Vec<&NoteText> = notes.iter().collect();
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            (0..8).map(|_| scope.spawn(|| matcher.match_criterion(&hba1c(), None, &refs).unwrap())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(outcomes.iter().all(|o| o.calls == 3 && o.result.decision() == Some(Decision::Met)));
}
