//! The LLM cohort judge with a scripted model: the rendered Figure 19
//! prompt is pinned, every sampled row gets one request built from the
//! agent's own audit row, the exclusion rate decides qualification at 0.8,
//! and an answer that never validates counts as unjudged.

mod support;

use std::path::Path;

use evident_llm::Role;
use evident_rwe::audit::{
    judge_cohort, judge_request, rule_checks, rwe_prompts, AuditTable, CohortAudit, IdColumn, KnownIdentifiers,
};
use evident_rwe::Task;
use support::scripted;

const EXCLUDE: &str = r#"{"unevaluable_criteria": [], "decision": "Exclude", "triggered_exclusion_criteria": ["Stays without such a lactate are excluded."], "evidence": "no lactate value"}"#;
const KEEP: &str = r#"{"unevaluable_criteria": [], "decision": "Do not exclude", "triggered_exclusion_criteria": [], "evidence": "N/A"}"#;

fn definition() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/lactate-hospital-mortality/task.yaml");
    Task::load(&path).unwrap().task.protocol.methods
}

fn audit_table(rows: usize) -> (tempfile::TempDir, AuditTable) {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("subject_id,hadm_id,stay_id,age,gender,lactate\n");
    for i in 0..rows {
        csv.push_str(&format!(
            "{},{},{},{},F,{}\n",
            10000000 + i,
            20000000 + i,
            30000000 + i,
            50 + i,
            1.5 + i as f64 / 10.0
        ));
    }
    let path = dir.path().join("cohort_audit.csv");
    std::fs::write(&path, csv).unwrap();
    let table = AuditTable::read(&path).unwrap();
    (dir, table)
}

#[test]
fn judge_prompt_is_figure_19_and_the_agents_row() {
    let (_dir, table) = audit_table(1);
    let request = judge_request(&rwe_prompts(None), &definition(), &table.facts(0)).unwrap();
    assert_eq!(request.messages[0].role, Role::System);
    assert!(request.contains_patient_text);
    let rendered: String =
        request.messages.iter().map(|m| format!("--- {:?}\n{}\n", m.role, m.content)).collect::<Vec<_>>().join("");
    insta::assert_snapshot!("cohort_judge_prompt", rendered);
}

#[test]
fn exclusion_rate_decides_qualification() {
    let (_dir, table) = audit_table(5);
    let prompts = rwe_prompts(None);
    // Four of five excluded: 0.8 is not above the threshold.
    let model = scripted(&[EXCLUDE, KEEP, EXCLUDE, EXCLUDE, EXCLUDE]);
    let report = judge_cohort(&model, &prompts, &definition(), &table, 1).unwrap();
    assert!(model.exhausted());
    assert_eq!((report.sampled, report.judged, report.excluded), (5, 5, 4));
    assert_eq!(report.exclusion_rate, Some(0.8));
    assert!(report.passed());
    // Each request carries its own row.
    let requests = model.requests();
    for (i, r) in requests.iter().enumerate() {
        assert!(r.messages[1].content.contains(&format!("subject_id: {}", 10000000 + i)), "{}", r.messages[1].content);
    }
    // All five excluded: unqualified.
    let model = scripted(&[EXCLUDE; 5]);
    let report = judge_cohort(&model, &prompts, &definition(), &table, 1).unwrap();
    assert_eq!(report.exclusion_rate, Some(1.0));
    assert!(!report.passed());
}

#[test]
fn unparseable_answers_are_unjudged_and_logged() {
    let (_dir, table) = audit_table(2);
    let prompts = rwe_prompts(None);
    // Row 1: three invalid answers (first try and two repairs); row 2: keep.
    let model = scripted(&["maybe", "{\"decision\": \"perhaps\"}", "no", KEEP]);
    let report = judge_cohort(&model, &prompts, &definition(), &table, 3).unwrap();
    assert_eq!((report.sampled, report.judged, report.excluded), (2, 1, 0));
    assert_eq!(report.cases[0].verdict, None);
    assert_eq!(model.failures().len(), 1);
    assert_eq!(report.exclusion_rate, Some(0.0));
}

#[test]
fn only_a_cohort_passing_rules_and_judge_is_qualified() {
    let (_dir, table) = audit_table(3);
    let mut ids = KnownIdentifiers::default();
    ids.0.insert(IdColumn::SubjectId, (10000000..10000003).collect());
    ids.0.insert(IdColumn::HadmId, (20000000..20000003).collect());
    ids.0.insert(IdColumn::StayId, (30000000..30000003).collect());
    let rules = rule_checks(&table, &mut ids).unwrap();
    assert!(rules.passed(), "{:?}", rules.checks);
    let model = scripted(&[KEEP, KEEP, EXCLUDE]);
    let judge = judge_cohort(&model, &rwe_prompts(None), &definition(), &table, 1).unwrap();
    assert!(CohortAudit { rules: rules.clone(), judge: Some(judge.clone()) }.qualified());
    assert!(!CohortAudit { rules: rules.clone(), judge: None }.qualified());
    ids.0.get_mut(&IdColumn::StayId).unwrap().remove(&30000001);
    let failing = rule_checks(&table, &mut ids).unwrap();
    assert!(!CohortAudit { rules: failing, judge: Some(judge) }.qualified());
}
