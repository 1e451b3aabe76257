//! The paper-exact MAKAR strategies (`makar`, `makar-aug`, `makar-reason`,
//! `makar-zero-shot`) with scripted fake models: every rendered prompt
//! holds the appendix's sentences verbatim (and is snapshot-tested), the
//! router has only the three agents, the critic's 0/1 loop re-augments
//! until it accepts (within the bound), the reasoning agent's insufficiency
//! rule, the matching agent's 0/1 mapped to MET / NOT MET, and supervision
//! approving or correcting.

use chrono::NaiveDate;
use evident_llm::ChatRequest;
use evident_match::batch::Method;
use evident_match::makar::{MakarConfig, MakarMatcher, RoundJudge, Route, SupervisionVerdict, Variant};
use evident_match::zero_shot::NoteText;
use evident_match::{Criterion, CriterionType, Decision, Determination};
use serde_json::json;

mod support;
use support::Scripted;

/// Appendix C of the MAKAR paper, verbatim (seed 000): the instruction
/// paragraph of each prompt (the lines "Patient EHR Data:…" and
/// "The Ctiterion:…" are where Evident fills in the record and criterion).
const C_A: &str = "You are an experienced physician tasked with determining whether a patient meets specific eligibility criteria for clinical trials. Below, I will provide multiple EHR records for a single patient along with one criterion. You must evaluate whether the patient satisfies the criterion. For each criterion, respond strictly with 1 if the criterion is met, or 0 if it is not met. If there is not enough information to make a determination, return 0. Respond with only 0 or 1; no reasoning or explanation is needed.";
const C_C1: &str = "You are a routing agent responsible for selecting the most appropriate augmentation agent to enrich a trial criterion with relevant, domain-specific information. You will receive one criterion as input. Based on its content, determine which augmentation agent to use.
**Retrieval Agent**: Use this agent if the criterion requires authoritative information from indexed medical databases like MedDRA and FDALabel.
**Online Search Agent**: Use this agent if the criterion needs supplementary knowledge from external online sources.
**Self-Augment Agent**: Use this agent if the criterion can be refined using the language model’s intrinsic medical knowledge.
Strictly respond with only one of the following labels indicating your choice: Retrieval, Online Search, or Self-Augment. No reasoning or explanation is needed—only return the label.";
const C_C2: &str = "You are an experienced physician tasked with reviewing the trial criterion to make it easy to follow for less-trained staff. Sometimes, the criterion may seem vague. If it is, please complement the criterion for clarity in plain English by: (1) defining any specialized medical terms, and (2) explaining vague phrases such as ‘normal levels’ by specifying normal ranges for different genders and age groups. You must keep the original criterion intact and add additional explanations only if you think they are necessary. Please ONLY return the revised criterion and use the following format:
Original Criterion: XXX
Additional Explanation: XXX";
const C_C3: &str = "You are a senior physician reviewing criteria revised by another physician. Make sure that (1) the original criterion is preserved, and (2) any additional explanations are accurate. For each criterion, respond strictly with **1** if both checks pass, or **0** if they do not. No reasoning or explanation is needed.";
const C_C4: &str = "You are a Principal Investigator (PI) in a clinical trial. You have multiple EHR records for one patient and a criterion with detailed explanation. Please perform a reasoning process to analyze why this patient meets or does not meet this trial criterion. If the information is not sufficient to make a determination, assume the patient does not meet the criterion.";
const C_C5: &str = "You are a Principal Investigator (PI) in a clinical trial and are tasked with determining whether a patient meets specific eligibility criteria. Below, I will provide multiple EHR records for one patient, one criterion, and a reasoning process from another PI. You must evaluate whether the patient meets the criterion. For each criterion, respond strictly with **1** if met or **0** if not met. Respond with 0 or 1 only; no reasoning or explanation is needed.";

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
            sentences: vec![(0, "Type 2 diabetes since 2012.".into()), (1, "HbA1c 8.2% last week.".into())],
        },
    ]
}

fn config(variant: Variant) -> MakarConfig {
    MakarConfig { variant, ..MakarConfig::default() }
}

fn text(t: &str) -> String {
    json!(t).to_string()
}

fn user(r: &ChatRequest) -> &str {
    assert_eq!(r.messages.len(), 1, "the paper's prompts are one message");
    &r.messages[0].content
}

fn rendered(requests: &[ChatRequest]) -> String {
    requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                "=== call {} (max_tokens {}, patient text {}, schema {}) ===\n{}",
                i + 1,
                r.max_tokens,
                r.contains_patient_text,
                r.json_schema.as_ref().map(|s| s.to_string()).unwrap_or_default(),
                user(r)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

const AUGMENTED: &str = "Original Criterion: Any hemoglobin A1c (HbA1c) value between 6.5% and 9.5%.\nAdditional Explanation: HbA1c reflects average blood glucose over 2-3 months.";

#[test]
fn strategy_names_parse() {
    for (name, variant) in [
        ("makar", Variant::Paper),
        ("makar-aug", Variant::PaperAug),
        ("makar-reason", Variant::PaperReason),
        ("makar-zero-shot", Variant::PaperZeroShot),
        ("makar-evident", Variant::Full),
        ("makar-evident-aug", Variant::Aug),
        ("makar-evident-reason", Variant::Reason),
    ] {
        assert_eq!(Variant::parse(name), Some(variant));
        assert_eq!(Method::parse(name), Some(Method::Makar(variant)));
        assert_eq!(Method::Makar(variant).as_str(), name);
    }
    assert!(Method::Makar(Variant::Paper).augments() && Method::Makar(Variant::PaperAug).augments());
    assert!(!Method::Makar(Variant::PaperReason).augments() && !Method::Makar(Variant::PaperZeroShot).augments());
}

#[test]
fn augmentation_router_has_three_labels_and_the_critic_loop_re_augments_until_accepted() {
    let model = Scripted::new(&[
        text("Self-Augment"),
        text("Any HbA1c between 6.5 and 9.5."),
        "0".to_string(),
        text(AUGMENTED),
        "1".to_string(),
    ]);
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Paper), None);
    let a = matcher.augment_criterion(&hba1c()).unwrap();
    assert!(model.exhausted());
    assert_eq!(a.route, Route::SelfAugment);
    assert!(a.accepted);
    assert_eq!(a.accepted_text(), Some(AUGMENTED));
    assert_eq!(a.rounds.len(), 2);
    assert!(a.rounds.iter().all(|r| r.judge == RoundJudge::Critic));
    assert_eq!((a.rounds[0].accepted, a.rounds[1].accepted), (false, true));
    assert_eq!(a.calls, 5);
    let requests = model.requests();
    assert!(requests.iter().all(|r| !r.contains_patient_text), "criteria only");
    // The router's answer is one of the three labels: no "detailed enough" exit.
    assert_eq!(
        requests[0].json_schema,
        Some(json!({"type": "string", "enum": ["Retrieval", "Online Search", "Self-Augment"]}))
    );
    assert!(user(&requests[0]).starts_with(C_C1));
    assert!(user(&requests[0]).ends_with(&format!("The Criterion: {HBA1C}")));
    assert!(!user(&requests[0]).contains("detailed"));
    assert!(user(&requests[1]).starts_with(C_C2) && user(&requests[1]).ends_with(HBA1C));
    assert!(!user(&requests[1]).contains("rejected"), "the first augmentation is the appendix prompt alone");
    assert!(user(&requests[2]).starts_with(C_C3));
    assert_eq!(requests[2].json_schema, Some(json!({"type": "integer", "enum": [0, 1]})));
    // Re-augmentation sees the rejected revision.
    assert!(user(&requests[3]).starts_with(C_C2));
    assert!(user(&requests[3]).contains("rejected your previous revision:\nAny HbA1c between 6.5 and 9.5."));
    insta::assert_snapshot!("makar_paper_augmentation_prompts", rendered(&requests));
}

#[test]
fn critic_that_never_accepts_leaves_the_original_criterion() {
    let model =
        Scripted::new(&[text("Self-Augment"), text(AUGMENTED), "0".to_string(), text(AUGMENTED), "0".to_string()]);
    let matcher =
        MakarMatcher::new(&model, &model, MakarConfig { max_critic_rounds: 2, ..config(Variant::Paper) }, None);
    let a = matcher.augment_criterion(&hba1c()).unwrap();
    assert!(model.exhausted());
    assert!(!a.accepted);
    assert_eq!(a.accepted_text(), None);
    assert_eq!(a.text_for(&hba1c()), HBA1C);
}

#[test]
fn an_augmentation_that_never_validates_is_not_asked_again_in_the_same_words() {
    // The answer is a number where free text is due, in the first answer
    // and both repairs: the round fails, and the next round would send the
    // same greedy request, so the loop ends (the original criterion is used).
    let model = Scripted::new(&[text("Self-Augment"), "42".into(), "42".into(), "42".into()]).failing_when_exhausted();
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Paper), None);
    let a = matcher.augment_criterion(&hba1c()).unwrap();
    assert!(model.exhausted());
    assert_eq!(model.requests().len(), 4, "router, one augmentation and its two repairs; no second round");
    assert_eq!(a.rounds.len(), 1);
    assert_eq!(a.rounds[0].judge, RoundJudge::PipelineFailure);
    assert!(!a.accepted);
    assert_eq!(a.text_for(&hba1c()), HBA1C);
    assert!(a.failures.iter().any(|f| f.contains("not asked again")), "{:?}", a.failures);
}

#[test]
fn router_choosing_a_disabled_agent_falls_back_to_self_augmentation_and_says_so() {
    let model = Scripted::new(&[text("Retrieval"), text(AUGMENTED), "1".to_string()]);
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Paper), None);
    let a = matcher.augment_criterion(&hba1c()).unwrap();
    assert_eq!(a.route, Route::SelfAugment);
    assert_eq!(a.router_reason, "Retrieval");
    assert!(a.failures.iter().any(|f| f.contains("chose Retrieval")), "{:?}", a.failures);
}

fn accepted() -> evident_match::makar::Augmentation {
    let model = Scripted::new(&[text("Self-Augment"), text(AUGMENTED), "1".to_string()]);
    MakarMatcher::new(&model, &model, config(Variant::Paper), None).augment_criterion(&hba1c()).unwrap()
}

#[test]
fn reasoning_matching_supervision_approve() {
    let aug = accepted();
    let model = Scripted::new(&[text("HbA1c 8.2% is within the range."), "1".to_string(), "1".to_string()]);
    let matcher = MakarMatcher::new(&model, &model, config(Variant::Paper), None);
    let notes = notes();
    let refs: Vec<&NoteText> = notes.iter().collect();
    let out = matcher.match_criterion(&hba1c(), Some(&aug), &refs).unwrap();
    assert!(model.exhausted());
    assert_eq!(out.calls, 3);
    let Determination::Assessed(a) = &out.result.outcome else { panic!("{:?}", out.result) };
    assert_eq!(a.decision, Decision::Met);
    assert_eq!(a.rationale, "HbA1c 8.2% is within the range.");
    assert!(a.evidence.is_empty(), "the paper's agents cite nothing");
    assert!(out.trace.augmented);
    assert!(matches!(out.trace.supervision, Some(SupervisionVerdict::Approved { .. })));
    let requests = model.requests();
    assert!(requests.iter().all(|r| r.contains_patient_text));
    let reasoning = user(&requests[0]);
    assert!(reasoning.starts_with(C_C4), "{reasoning}");
    assert!(reasoning.contains("Patient EHR Data:\n"));
    assert!(reasoning.contains("HbA1c 8.2% last week."));
    assert!(reasoning.ends_with(&format!("The Detailed Criterion: {AUGMENTED}")));
    let matching = user(&requests[1]);
    assert!(matching.starts_with(C_C5));
    assert!(matching.ends_with("The Reasoning Process: HbA1c 8.2% is within the range."));
    assert!(matching.contains(&format!("The Criterion: {AUGMENTED}")));
    assert!(user(&requests[2]).ends_with("The Other PI's Decision: 1"));
    assert!(user(&requests[2]).contains("assume the patient does not meet the criterion"));
    insta::assert_snapshot!("makar_paper_reasoning_prompts", rendered(&requests));
}

#[test]
fn supervision_corrects_and_zero_maps_to_not_met_for_an_exclusion() {
    let model = Scripted::new(&[text("No information on ketoacidosis."), "1".to_string(), "0".to_string()]);
    let matcher = MakarMatcher::new(&model, &model, config(Variant::PaperReason), None);
    let notes = notes();
    let refs: Vec<&NoteText> = notes.iter().collect();
    let exclusion = criterion("keto", CriterionType::Exclusion, "Diagnosis of ketoacidosis in the past year.");
    let out = matcher.match_criterion(&exclusion, None, &refs).unwrap();
    let Determination::Assessed(a) = &out.result.outcome else { panic!() };
    assert_eq!(a.decision, Decision::NotMet);
    assert_eq!(out.result.label(), "not excluded");
    assert_eq!(out.trace.matching.as_ref().unwrap().decision, Decision::Met);
    assert!(
        matches!(out.trace.supervision, Some(SupervisionVerdict::Corrected { decision: Decision::NotMet, .. })),
        "{:?}",
        out.trace.supervision
    );
}

#[test]
fn makar_reason_ignores_augmentations_and_zero_shot_is_one_call_of_prompt_c_a() {
    let aug = accepted();
    let notes = notes();
    let refs: Vec<&NoteText> = notes.iter().collect();

    let model = Scripted::new(&[text("r"), "0".to_string(), "0".to_string()]);
    let matcher = MakarMatcher::new(&model, &model, config(Variant::PaperReason), None);
    let out = matcher.match_criterion(&hba1c(), Some(&aug), &refs).unwrap();
    assert!(!out.trace.augmented);
    assert!(user(&model.requests()[0]).ends_with(&format!("The Detailed Criterion: {HBA1C}")));

    let model = Scripted::new(&["0"]);
    let matcher = MakarMatcher::new(&model, &model, config(Variant::PaperZeroShot), None);
    let out = matcher.match_criterion(&hba1c(), Some(&aug), &refs).unwrap();
    assert_eq!(out.calls, 1);
    let Determination::Assessed(a) = &out.result.outcome else { panic!() };
    assert_eq!(a.decision, Decision::NotMet);
    let prompt = user(&model.requests()[0]).to_string();
    assert!(prompt.starts_with(C_A));
    assert!(prompt.ends_with(&format!("The Criterion: {HBA1C}")), "zero-shot uses the original criterion");

    let model = Scripted::new(&["1"]);
    let matcher = MakarMatcher::new(&model, &model, config(Variant::PaperAug), None);
    let out = matcher.match_criterion(&hba1c(), Some(&aug), &refs).unwrap();
    let Determination::Assessed(a) = &out.result.outcome else { panic!() };
    assert_eq!(a.decision, Decision::Met);
    assert!(out.trace.augmented);
    let aug_prompt = user(&model.requests()[0]).to_string();
    assert!(aug_prompt.starts_with(C_A) && aug_prompt.ends_with(&format!("The Criterion: {AUGMENTED}")));
    insta::assert_snapshot!("makar_paper_zero_shot_prompt", prompt);
}

#[test]
fn augmentations_of_the_two_flavours_are_stored_apart() {
    let model = Scripted::new(&[""; 0]);
    let paper = MakarMatcher::new(&model, &model, config(Variant::Paper), None);
    let evident = MakarMatcher::new(&model, &model, config(Variant::Full), None);
    assert_ne!(paper.augmentation_key("m"), evident.augmentation_key("m"));
    assert_eq!(evident.augmentation_key("m"), "m", "Evident's stored augmentations keep their key");
}
