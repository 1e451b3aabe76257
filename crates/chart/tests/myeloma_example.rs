//! The project's example myeloma record (`examples/chart/myeloma`), ingested
//! as a user would ingest it, runs the calculators end to end: the agent's
//! calculator tool reads the staging labs ingestion stored (inside the
//! 90-day window of the reference date), and the answer's citation resolves
//! to those stored lab values. A scripted model drives the control flow;
//! the point is the record, the tools and the calculators.

mod support;

use std::path::Path;
use std::sync::Mutex;

use evident_chart::calculators::Calculator;
use evident_chart::{ask, prompts, AgentConfig, CitedSource, Method, Question, RecordView, SkillLibrary, ToolName};
use evident_llm::StructuredModel;
use evident_store::Store;
use serde_json::json;
use support::{day, scripted};

fn ingested() -> (tempfile::TempDir, Mutex<Store>) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("evident.db")).unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/chart/myeloma");
    // The notes (the folder's manifest) and the FHIR bundle with the patient and labs.
    let paths = [example.clone(), example.join("patient-and-labs.json")];
    let units = evident_ingest::plan(&paths, evident_ingest::Format::Auto).unwrap();
    let report = evident_ingest::ingest(&mut store, &units, false, &evident_ingest::NoProgress).unwrap();
    assert!(report.units.iter().all(|u| u.problems.is_empty()), "{report:?}");
    (dir, Mutex::new(store))
}

#[test]
fn the_example_record_stages_with_the_stored_labs_inside_their_window() {
    let (_dir, store) = ingested();
    let as_of = day("2024-01-22").date().and_hms_opt(23, 59, 59).unwrap();
    let view = RecordView::new(&store, "MM001", as_of);
    // R-ISS from the stored labs of 2024-01-08 and the FISH report's t(4;14).
    let out = view
        .run(
            ToolName::Calculate,
            &json!({"calculator": "r-iss", "inputs": {"del_17p": false, "t_4_14": true, "t_14_16": false}}),
        )
        .unwrap();
    let calc = &out.evidence[0];
    let text = calc.text();
    assert!(text.contains("\"stage\":\"II\""), "{text}");
    // R2-ISS: ISS I (0) + high LDH (260 > 225: 1) + t(4;14) (1) = 2 -> III.
    let out = view
        .run(
            ToolName::Calculate,
            &json!({"calculator": "r2-iss", "inputs": {"del_17p": false, "t_4_14": true, "gain_1q": false}}),
        )
        .unwrap();
    assert!(out.evidence[0].text().contains("\"stage\":\"III\""), "{}", out.evidence[0].text());
    // As of 2019-07-01 the diagnosis labs (2019-03-14) are 109 days old: missing.
    let view = RecordView::new(&store, "MM001", day("2019-07-01"));
    let out = view.run(ToolName::Calculate, &json!({"calculator": "iss"})).unwrap();
    assert!(out.evidence.is_empty());
    assert!(out.note.unwrap().contains("within 90 days"), "the answer says the value is outside its window");
    assert_eq!(Calculator::Iss.lookback_days(), Some(90));
}

#[test]
fn an_iss_question_on_the_example_cites_the_stored_lab_values() {
    let (_dir, store) = ingested();
    let view = RecordView::new(&store, "MM001", day("2024-01-22").date().and_hms_opt(23, 59, 59).unwrap());
    let skills = SkillLibrary::builtin().unwrap();
    let config = AgentConfig::default();
    let model = scripted(&[
        json!({"intent": "ISS stage", "hypotheses": [], "required_information": ["beta-2-microglobulin", "albumin"],
               "missing_information": ["beta-2-microglobulin", "albumin"], "complexity": "medium", "skills": ["mm-staging"]})
        .to_string(),
        json!({"steps": [{"step": 1, "objective": "stage", "tool": "calculate", "arguments": {"calculator": "iss"},
               "evidence_requirements": ["labs within 90 days"], "stop_rule": "stage computed"}], "stop_conditions": ["stage computed"]})
        .to_string(),
        json!({"action": "call_tool", "tool": "calculate", "arguments": {"calculator": "iss"}, "reason": "planned"}).to_string(),
        json!({"action": "finish", "reason": "computed"}).to_string(),
        "Answer: I; 2024-01-08; labs\nReasoning: Beta-2-microglobulin 2.9 mg/L and albumin 3.9 g/dL give ISS I [1].".to_string(),
    ]);
    let q = Question {
        text: "ISS stage on 2024-01-22 calculated from albumin and beta-2-microglobulin (last labs within 90 days)?",
        answer_type: None,
        method: Method::Agent,
        skills: &skills,
        config: &config,
        patient: "male, 69 years old on the reference date".into(),
        embedder: None,
    };
    let out = ask(StructuredModel::recorded(&model), &prompts(None), &view, &q).unwrap();
    assert!(out.trace.skills.contains(&"mm-staging".to_string()));
    let Some(CitedSource::Calculation { output, used, .. }) = &out.citations[0].source else {
        panic!("{:?}", out.citations)
    };
    assert_eq!(output["stage"], "I");
    let values: Vec<(&str, &str)> = used
        .iter()
        .map(|u| match u {
            CitedSource::Lab { name, value, .. } => (name.as_str(), value.as_str()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(values.len(), 2, "{values:?}");
    assert!(values.iter().any(|(_, v)| *v == "2.9") && values.iter().any(|(_, v)| *v == "3.9"), "{values:?}");
}
