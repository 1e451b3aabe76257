//! The two long example myeloma records (`examples/chart/myeloma-2`,
//! `examples/chart/myeloma-3`), ingested as `evident ingest` ingests them:
//! the staging calculators read the stored labs inside their 90-day window
//! (albumin stored in g/L converted explicitly), HCT-CI scores the
//! transplant assessment's comorbidities, and a whole question runs through
//! the agent's tools with a scripted model, its answer decoded the
//! constrained way (Evident's variant for the embedded model) with a
//! citation that resolves to the stored lab values.

mod support;

use std::path::Path;
use std::sync::Mutex;

use evident_chart::{
    ask, prompts, AgentConfig, CitedSource, Evidence, Method, Question, RecordView, SkillLibrary, ToolName,
};
use evident_llm::StructuredModel;
use evident_store::Store;
use serde_json::{json, Value};
use support::{day, scripted};

fn ingested(folder: &str) -> (tempfile::TempDir, Mutex<Store>) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("evident.db")).unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/chart").join(folder);
    let paths = [example.clone(), example.join("patient-and-labs.json")];
    let units = evident_ingest::plan(&paths, evident_ingest::Format::Auto).unwrap();
    let report = evident_ingest::ingest(&mut store, &units, false, &evident_ingest::NoProgress).unwrap();
    assert!(report.units.iter().all(|u| u.problems.is_empty()), "{report:?}");
    (dir, Mutex::new(store))
}

fn end_of(d: &str) -> chrono::NaiveDateTime {
    day(d).date().and_hms_opt(23, 59, 59).unwrap()
}

fn stage(view: &RecordView<'_>, calculator: &str, inputs: Value) -> String {
    let out = view.run(ToolName::Calculate, &json!({"calculator": calculator, "inputs": inputs})).unwrap();
    assert!(out.note.is_none(), "{calculator}: {:?}", out.note);
    let text = out.evidence[0].text();
    let value: Value = serde_json::from_str(text.split("; result ").nth(1).unwrap()).unwrap();
    value["stage"].as_str().map(str::to_string).unwrap_or_else(|| value["score"].to_string())
}

#[test]
fn the_second_record_stages_at_diagnosis_and_after_car_t() {
    let (_dir, store) = ingested("myeloma-2");
    // Diagnosis (labs of 2017-02-06): beta-2-microglobulin 6.2 mg/L, albumin
    // 30 g/L (3.0 g/dL once converted), LDH 310 > 225; FISH del(17p), 1q gain.
    let view = RecordView::new(&store, "MM002", end_of("2017-02-20"));
    assert_eq!(stage(&view, "iss", json!({})), "III");
    assert_eq!(stage(&view, "r-iss", json!({"del_17p": true, "t_4_14": false, "t_14_16": false})), "III");
    // R2-ISS: ISS III 1.5 + del(17p) 1 + high LDH 1 + 1q 0.5 = 4 -> IV.
    assert_eq!(stage(&view, "r2-iss", json!({"del_17p": true, "t_4_14": false, "gain_1q": true})), "IV");
    // After CAR-T (labs of 2024-02-20): 2.1 mg/L, 41 g/L, LDH 190.
    let view = RecordView::new(&store, "MM002", end_of("2024-03-05"));
    assert_eq!(stage(&view, "iss", json!({})), "I");
    assert_eq!(stage(&view, "r-iss", json!({"del_17p": true, "t_4_14": false, "t_14_16": false})), "II");
    // R2-ISS: 0 + del(17p) 1 + 1q 0.5 = 1.5 -> III.
    assert_eq!(stage(&view, "r2-iss", json!({"del_17p": true, "t_4_14": false, "gain_1q": true})), "III");
    // The transplant assessment: diabetes requiring medication 1 + prior solid tumour 3.
    let view = RecordView::new(&store, "MM002", end_of("2017-08-14"));
    assert_eq!(
        stage(&view, "hct-ci", json!({"diabetes_requiring_medication": true, "prior_solid_tumour": true})),
        "4.0"
    );
    // Nothing after the reference date: as of 2019-07-15 the last ISS labs
    // (2017-06-19) are outside the 90-day window.
    let view = RecordView::new(&store, "MM002", end_of("2019-07-15"));
    let out = view.run(ToolName::Calculate, &json!({"calculator": "iss"})).unwrap();
    assert!(out.evidence.is_empty() && out.note.unwrap().contains("within 90 days"));
}

#[test]
fn the_third_record_stages_with_standard_risk_and_a_high_ldh() {
    let (_dir, store) = ingested("myeloma-3");
    let view = RecordView::new(&store, "MM003", end_of("2018-06-04"));
    assert_eq!(stage(&view, "iss", json!({})), "II");
    assert_eq!(stage(&view, "r-iss", json!({"del_17p": false, "t_4_14": false, "t_14_16": false})), "II");
    assert_eq!(stage(&view, "r2-iss", json!({"del_17p": false, "t_4_14": false, "gain_1q": false})), "II");
    // 2024-02-01: ISS I, but LDH 240 > 225: R-ISS II, R2-ISS 1 point -> II.
    let view = RecordView::new(&store, "MM003", end_of("2024-02-12"));
    assert_eq!(stage(&view, "iss", json!({})), "I");
    assert_eq!(stage(&view, "r-iss", json!({"del_17p": false, "t_4_14": false, "t_14_16": false})), "II");
    assert_eq!(stage(&view, "r2-iss", json!({"del_17p": false, "t_4_14": false, "gain_1q": false})), "II");
    // The kind filter sees the kinds this record has, and nothing later.
    let kinds = view.available_kinds().unwrap();
    assert!(kinds.iter().any(|k| k.as_str() == "discharge_summary"), "{kinds:?}");
}

#[test]
fn an_r2_iss_question_runs_through_the_tools_and_cites_the_stored_labs() {
    let (_dir, store) = ingested("myeloma-2");
    let view = RecordView::new(&store, "MM002", end_of("2017-02-20"));
    let skills = SkillLibrary::builtin().unwrap();
    // The embedded model's configuration: a 4,096-token context and the
    // constrained answer step.
    let config = AgentConfig::default().with_model_context(4096);
    assert!(config.constrained_answer);
    let inputs = json!({"del_17p": true, "t_4_14": false, "gain_1q": true});
    let model = scripted(&[
        json!({"intent": "R2-ISS", "hypotheses": [], "required_information": ["labs", "FISH"],
               "missing_information": ["labs"], "complexity": "medium", "skills": ["mm-staging"]})
        .to_string(),
        json!({"steps": [{"step": 1, "objective": "stage", "tool": "calculate",
               "arguments": {"calculator": "r2-iss", "inputs": inputs},
               "evidence_requirements": ["labs within 90 days"], "stop_rule": "computed"}], "stop_conditions": []})
        .to_string(),
        json!({"action": "call_tool", "tool": "calculate", "arguments": {"calculator": "r2-iss", "inputs": inputs},
               "reason": "planned"})
        .to_string(),
        json!({"action": "finish", "reason": "computed"}).to_string(),
        json!({"answer": "IV", "reasoning": "Beta-2-microglobulin 6.2 mg/L, albumin 3.0 g/dL, high LDH, del(17p) and 1q gain give 4 points [1]."})
        .to_string(),
    ]);
    let q = Question {
        text: "What is the R2-ISS stage at diagnosis (labs within 90 days)?",
        answer_type: None,
        method: Method::Agent,
        skills: &skills,
        config: &config,
        patient: "female, 55 years old on the reference date".into(),
        embedder: None,
    };
    let out = ask(StructuredModel::recorded(&model), &prompts(None), &view, &q).unwrap();
    assert_eq!(out.status, "answered", "{:?}", out.failure);
    assert_eq!(out.answer.as_deref(), Some("IV"));
    // The answer step was constrained: its citation pattern names only the
    // items shown (one calculation).
    let requests = model.requests();
    let schema = requests.last().unwrap().json_schema.clone().expect("the answer step carries a schema");
    let pattern = schema["properties"]["reasoning"]["pattern"].as_str().unwrap();
    assert!(pattern.contains("(?:1)"), "{pattern}");
    // Every request fits the model's context by the agent's estimate.
    for r in &requests {
        let chars: usize = r.messages.iter().map(|m| m.content.len()).sum();
        assert!(chars / 4 + r.max_tokens as usize <= 4096, "{chars} characters and {} answer tokens", r.max_tokens);
    }
    let Some(CitedSource::Calculation { output, used, .. }) = &out.citations[0].source else {
        panic!("{:?}", out.citations)
    };
    assert_eq!(output["stage"], "IV");
    assert_eq!(output["points"], 4.0);
    let values: Vec<&str> = used
        .iter()
        .map(|u| match u {
            CitedSource::Lab { value, .. } => value.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(values.len(), 3, "beta-2-microglobulin, albumin and LDH: {values:?}");
    assert!(values.contains(&"30"), "albumin as stored, in g/L: {values:?}");
}

#[test]
fn a_calculators_age_and_sex_come_from_the_stored_patient_and_are_cited() {
    let (_dir, store) = ingested("myeloma-2");
    // MM002: born 1961-06-15, female; 55 on 2017-02-20.
    let view = RecordView::new(&store, "MM002", end_of("2017-02-20"));
    let out = view.run(ToolName::Calculate, &json!({"calculator": "cha2ds2-vasc", "inputs": {"hypertension": true}}));
    let out = out.unwrap();
    assert!(out.note.is_none(), "{:?}", out.note);
    let text = out.evidence[0].text();
    assert!(text.contains("\"age_years\":55") && text.contains("\"female\":true"), "{text}");
    // No problem list: the consult's "type 2 diabetes on metformin;
    // hypertension on ramipril" gives both conditions, cited.
    assert!(text.contains("\"score\":3.0"), "female 1 + hypertension 1 + diabetes 1: {text}");
    assert!(text.contains("\"diabetes\":true") && text.contains("\"hypertension\":true"), "{text}");
    assert!(text.contains("stroke_tia_thromboembolism\":false"), "{text}");
    let Evidence::Calculation { used, .. } = &out.evidence[0] else { panic!("{:?}", out.evidence) };
    assert!(used.iter().any(|e| e.text().contains("hypertension on ramipril")), "the consult is cited: {used:?}");
    // The stored age and sex win over ones the call gives (the embedded
    // model was seen inventing them).
    let out = view.run(
        ToolName::Calculate,
        &json!({"calculator": "cha2ds2-vasc", "inputs": {"age_years": 80, "female": false, "hypertension": true}}),
    );
    let text = out.unwrap().evidence[0].text();
    assert!(text.contains("\"age_years\":55") && text.contains("\"female\":true"), "{text}");
    assert!(text.contains("\"score\":3.0"), "{text}");

    // Through the agent: the calculation's citation resolves to the stored demographics.
    let skills = SkillLibrary::builtin().unwrap();
    let config = AgentConfig::default().with_model_context(4096);
    let inputs = json!({"hypertension": true});
    let model = scripted(&[
        json!({"intent": "CHA2DS2-VASc", "hypotheses": [], "required_information": ["age", "sex"],
               "missing_information": [], "complexity": "low", "skills": ["mm-staging"]})
        .to_string(),
        json!({"steps": [{"step": 1, "objective": "score", "tool": "calculate",
               "arguments": {"calculator": "cha2ds2-vasc", "inputs": inputs},
               "evidence_requirements": ["age and sex"], "stop_rule": "computed"}], "stop_conditions": []})
        .to_string(),
        json!({"action": "call_tool", "tool": "calculate",
               "arguments": {"calculator": "cha2ds2-vasc", "inputs": inputs}, "reason": "planned"})
        .to_string(),
        json!({"action": "finish", "reason": "computed"}).to_string(),
        json!({"answer": "3", "reasoning": "Female, 55, with hypertension and diabetes: CHA2DS2-VASc 3 [1]."})
            .to_string(),
    ]);
    let q = Question {
        text: "What is the CHA2DS2-VASc score?",
        answer_type: None,
        method: Method::Agent,
        skills: &skills,
        config: &config,
        patient: "female, 55 years old on the reference date".into(),
        embedder: None,
    };
    let out = ask(StructuredModel::recorded(&model), &prompts(None), &view, &q).unwrap();
    assert_eq!(out.status, "answered", "{:?}", out.failure);
    // The answer is the calculation's: the reasoning is written from it.
    assert_eq!(
        out.reasoning.as_deref(),
        Some("cha2ds2-vasc gives 3 [1], from the record: female, age 55 years, hypertension, diabetes."),
        "{:?}",
        out.trace
    );
    let Some(CitedSource::Calculation { output, used, .. }) = &out.citations[0].source else {
        panic!("{:?}", out.citations)
    };
    assert_eq!(output["score"], 3.0);
    match used.as_slice() {
        [CitedSource::Patient { patient_id, birth_date, sex, text }, CitedSource::Text { text: consult, .. }] => {
            assert!(consult.contains("type 2 diabetes on metformin; hypertension on ramipril"), "{consult}");
            assert_eq!(patient_id, "MM002");
            assert_eq!(birth_date.as_deref(), Some("1961-06-15"));
            assert_eq!(sex.as_deref(), Some("female"));
            assert_eq!(text, "patient: born 1961-06-15, age 55 on 2017-02-20; sex female");
        }
        other => panic!("{other:?}"),
    }
}
