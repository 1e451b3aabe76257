//! 50 varied clinical prompts to the default embedded model, each with a
//! JSON Schema, exactly as `evident llm chat --schema` asks them (the
//! json_answer prompt, constrained decoding, validation, repair): every
//! answer must be valid against its schema, with no pipeline failure.

#[path = "llm_support.rs"]
mod support;

use evident_llm::{chat_json, ChatRequest, LlmConfig, Message, Prompts, StructuredAnswer, StructuredModel};
use serde_json::{json, Value};

const NOTES: [&str; 10] = [
    "72-year-old man with COPD, 40 pack-years, quit smoking 2015. FEV1 48% predicted. On tiotropium.",
    "45-year-old woman, type 2 diabetes since 2010, HbA1c 9.2% (2023-03-01). Metformin 1 g twice daily, insulin glargine 20 units.",
    "Stage III colon adenocarcinoma, resected 2022-05; completed 6 cycles FOLFOX. CEA 2.1 ng/mL. ECOG 1.",
    "58-year-old man, NYHA class III heart failure, LVEF 30%. Sacubitril/valsartan, carvedilol, spironolactone. Creatinine 1.6 mg/dL.",
    "Pregnant, 28 weeks gestation, gestational diabetes on diet control. No known drug allergies.",
    "History of ischemic stroke 2019 with residual left hemiparesis. Atrial fibrillation on apixaban 5 mg twice daily.",
    "Multiple myeloma, IgG kappa, diagnosed 2021; received VRd then autologous transplant 2022. Now on lenalidomide maintenance.",
    "34-year-old woman with relapsing-remitting multiple sclerosis on ocrelizumab. Denies tobacco and alcohol.",
    "eGFR 24 mL/min/1.73m2, chronic kidney disease stage 4, on hemodialysis evaluation. Hypertension on amlodipine.",
    "Allergic to penicillin (anaphylaxis). Community-acquired pneumonia treated with levofloxacin. Current smoker, 1 pack/day.",
];

fn tasks() -> Vec<(&'static str, Value)> {
    vec![
        (
            "Is the patient eligible for a trial that requires age 18 to 75 and no history of stroke?",
            json!({"type": "object", "properties": {
                "decision": {"type": "string", "enum": ["eligible", "not eligible", "unknown"]},
                "evidence": {"type": "string", "maxLength": 160}},
                "required": ["decision", "evidence"], "additionalProperties": false}),
        ),
        (
            "What is the patient's age in years, if stated?",
            json!({"type": "object", "properties": {
                "age_years": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 120}, {"type": "null"}]}},
                "required": ["age_years"], "additionalProperties": false}),
        ),
        (
            "List the current medications.",
            json!({"type": "object", "properties": {
                "medications": {"type": "array", "maxItems": 6, "items": {"type": "string", "maxLength": 60}}},
                "required": ["medications"], "additionalProperties": false}),
        ),
        (
            "Is the patient a current smoker?",
            json!({"type": "object", "properties": {
                "current_smoker": {"type": "string", "enum": ["yes", "no", "unknown"]},
                "quote": {"type": "string", "maxLength": 120}},
                "required": ["current_smoker", "quote"], "additionalProperties": false}),
        ),
        (
            "Which diagnoses are documented?",
            json!({"type": "object", "properties": {
                "diagnoses": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {
                    "name": {"type": "string", "maxLength": 80},
                    "confirmed": {"type": "boolean"}},
                    "required": ["name", "confirmed"], "additionalProperties": false}}},
                "required": ["diagnoses"], "additionalProperties": false}),
        ),
    ]
}

#[test]
fn fifty_of_fifty_clinical_prompts_are_schema_valid() {
    let model_name = evident_llm::models::DEFAULT_CHAT_MODEL;
    support::pulled_gguf(model_name);
    let config = LlmConfig::default();
    let model = config.open_chat_model(model_name, false).unwrap();
    let prompts = Prompts::builtin(None);
    let mut failures = Vec::new();
    let mut repaired = 0;
    for note in NOTES {
        for (question, schema) in tasks() {
            let question = format!("Clinical note:\n{note}\n\nQuestion: {question}");
            let text = prompts
                .render(
                    "json_answer.prompt.md",
                    json!({"question": question, "schema": serde_json::to_string_pretty(&schema).unwrap()}),
                )
                .unwrap();
            let request = ChatRequest::new(vec![Message::user(text)]).with_max_tokens(160);
            match chat_json(StructuredModel::unrecorded(&*model), &request, &schema, config.repair_policy(), &prompts)
                .unwrap()
            {
                StructuredAnswer::Valid { attempts, .. } => repaired += usize::from(attempts > 1),
                StructuredAnswer::PipelineFailure(f) => {
                    failures.push(format!("{question}: {:?} -> {}", f.errors, f.raw_text))
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of 50 failed:\n{}", failures.len(), failures.join("\n"));
    eprintln!("50 of 50 valid ({repaired} needed a repair prompt)");
}
