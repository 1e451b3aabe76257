//! Check compilation with a scripted model: a valid proposal is attached
//! marked proposed (and so decides nothing in screening), "none" leaves the
//! criterion without a check, a proposal that does not validate against the
//! lab catalogue's units is dropped with its reason, a criterion that has a
//! check keeps it without a call, and the request carries no patient text.
//! The rendered prompt is pinned.

mod support;

use evident_llm::{ChatRequest, RepairPolicy, StructuredModel};
use evident_match::checks::compile::{check_from_proposal, propose_checks, render_builtin, Compiled};
use evident_match::checks::CheckStatus;
use evident_match::CriteriaSet;
use serde_json::json;
use support::Scripted;

const TRIAL: &str = r#"
trial_id: C1
criteria:
  - id: hba1c
    type: inclusion
    text: HbA1c between 7.0% and 10.5% at the most recent measurement.
  - id: consent
    type: inclusion
    text: Able to give written informed consent.
  - id: creatinine
    type: exclusion
    text: Serum creatinine above 2.0 mg/dL.
  - id: age
    type: inclusion
    text: Age 18 or older.
    check: {status: reviewed, age: {min: 18}}
"#;

#[test]
fn proposals_are_validated_and_marked_proposed() {
    let set = CriteriaSet::from_yaml_str(TRIAL, "t").unwrap();
    let answers = [
        json!({"kind": "lab", "lab_concept": "Hemoglobin A1c", "unit": "%", "lower": 7.0, "lower_inclusive": true, "upper": 10.5, "upper_inclusive": true, "select": "most_recent"}),
        json!({"kind": "none"}),
        // "mmHg" is not a creatinine unit: dropped, never guessed.
        json!({"kind": "lab", "lab_concept": "Creatinine", "unit": "mmHg", "lower": 2.0, "lower_inclusive": false}),
    ]
    .map(|a| a.to_string());
    let model = Scripted::new(&answers);
    let outcome =
        propose_checks(StructuredModel::recorded(&model), &set, RepairPolicy::default(), None, &|_, _| {}).unwrap();
    assert!(model.exhausted());
    assert_eq!(outcome.calls, 3, "the criterion with a check costs no call");
    let what: Vec<(&str, &Compiled)> = outcome.criteria.iter().map(|(id, c)| (id.as_str(), c)).collect();
    assert_eq!(what[0], ("hba1c", &Compiled::Proposed));
    assert_eq!(what[1], ("consent", &Compiled::None));
    match what[2].1 {
        Compiled::Rejected { reason } => {
            assert!(reason.starts_with("lab.unit: \"mmHg\" is not a unit known for Creatinine"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(what[3], ("age", &Compiled::Kept));
    let hba1c = outcome.set.criterion("hba1c").unwrap();
    assert_eq!(hba1c.check.as_ref().unwrap().status, CheckStatus::Proposed);
    assert!(hba1c.reviewed_check().is_none(), "a proposed check decides nothing");
    assert!(outcome.set.criterion("creatinine").unwrap().check.is_none());
    // The written set loads and validates.
    let again = CriteriaSet::from_yaml_str(&outcome.set.to_yaml(), "again").unwrap();
    assert_eq!(again, outcome.set);
    for request in model.requests() {
        assert!(!request.contains_patient_text, "criteria only");
        assert!(request.json_schema.is_some(), "schema-constrained");
    }
}

#[test]
fn proposals_of_every_kind_become_checks() {
    let check = |v: serde_json::Value| check_from_proposal(&v);
    let age = check(json!({"kind": "age", "min_years": 18, "max_years": 75})).unwrap().unwrap();
    assert_eq!(age.age.unwrap().max, Some(75.0));
    let med = check(json!({"kind": "medication", "present": true, "names": ["metformin"], "within_months": 3}))
        .unwrap()
        .unwrap();
    assert_eq!(med.medication.unwrap().within_months, Some(3));
    let dx = check(json!({"kind": "diagnosis", "present": false, "codes": ["ICD-10:C50"]})).unwrap().unwrap();
    assert!(!dx.diagnosis.unwrap().present);
    assert!(check(json!({"kind": "none"})).unwrap().is_none());
    let e = check(json!({"kind": "age"})).unwrap_err();
    assert!(e.contains("needs min, max or both"), "{e}");
    let dx = check(json!({"kind": "diagnosis", "present": true, "codes": ["SNOMED:44054006"]})).unwrap().unwrap();
    assert_eq!(dx.diagnosis.unwrap().codes, ["SNOMED:44054006"]);
    let e = check(json!({"kind": "medication", "present": true, "codes": ["NDC:00904224461"]})).unwrap_err();
    assert!(e.contains("not kept in the store's timeline"), "{e}");
}

fn rendered(request: &ChatRequest) -> String {
    request
        .messages
        .iter()
        .map(|m| format!("--- {} ---\n{}", m.role.as_str(), m.content))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_compile_prompt() {
    let set = CriteriaSet::from_yaml_str(TRIAL, "t").unwrap();
    insta::assert_snapshot!("check_compile_prompt", rendered(&render_builtin(&set.criteria[2]).unwrap()));
}
