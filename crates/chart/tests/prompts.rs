//! Every prompt the agent sends, rendered for one scripted question and
//! pinned as a snapshot, so a prompt change shows in a diff: Phase I's
//! assessment, Phase II's system prompt (baseline prompt, tools, lab
//! concepts, workflow skills) and plan request, a Phase III round, the
//! Phase IV synthesis (context items, policy, style skills); and the LLM
//! baseline's prompt.

mod support;

use evident_chart::bank::AnswerType;
use evident_chart::{ask, prompts, AgentConfig, Method, Question, RecordView, SkillLibrary};
use evident_llm::StructuredModel;
use serde_json::json;
use support::{day, scripted, store, Scripted, AS_OF};

fn rendered(model: &Scripted) -> String {
    let mut out = String::new();
    for (i, request) in model.requests().iter().enumerate() {
        // Each request repeats its predecessor's messages; show only the new ones.
        out.push_str(&format!(
            "=== request {} (temperature {}, max_tokens {})\n",
            i + 1,
            request.temperature,
            request.max_tokens
        ));
        for m in &request.messages {
            out.push_str(&format!("--- {}\n{}\n", m.role.as_str(), m.content));
        }
    }
    out
}

fn run(method: Method, answers: &[String]) -> String {
    run_typed(method, None, answers)
}

fn run_typed(method: Method, answer_type: Option<AnswerType>, answers: &[String]) -> String {
    let model = scripted(answers);
    let store = store();
    let view = RecordView::new(&store, "P1", day(AS_OF));
    let skills = SkillLibrary::builtin().unwrap();
    let config = AgentConfig::default();
    let q = Question {
        text: "Is the patient currently receiving metformin?",
        answer_type,
        method,
        skills: &skills,
        config: &config,
        patient: "female, 67 years".into(),
        embedder: None,
    };
    ask(StructuredModel::recorded(&model), &prompts(None), &view, &q).unwrap();
    rendered(&model)
}

#[test]
fn agent_prompts() {
    let answers = vec![
        json!({"intent": "current metformin status", "hypotheses": [], "required_information": ["metformin administration"],
               "missing_information": ["metformin administration"], "complexity": "low", "skills": ["current-medication-status"]})
        .to_string(),
        json!({"steps": [{"step": 1, "objective": "find metformin", "tool": "search_reports", "arguments": {"query": "metformin"},
               "evidence_requirements": ["a mention"], "stop_rule": "found"}], "stop_conditions": ["found"]})
        .to_string(),
        json!({"action": "call_tool", "tool": "search_reports", "arguments": {"query": "metformin"}, "reason": "planned"}).to_string(),
        json!({"action": "finish", "reason": "found"}).to_string(),
        "Answer: Yes\nReasoning: Started on 2023-01-20 [1].".to_string(),
    ];
    insta::assert_snapshot!(run(Method::Agent, &answers));
}

#[test]
fn agent_plan_repair_prompt() {
    let assess = json!({"intent": "current metformin status", "hypotheses": [], "required_information": [],
        "missing_information": [], "complexity": "low", "skills": []})
    .to_string();
    let plan = |args: serde_json::Value| {
        json!({"steps": [{"step": 1, "objective": "find metformin", "tool": "search_reports", "arguments": args,
               "evidence_requirements": [], "stop_rule": "found"}], "stop_conditions": []})
        .to_string()
    };
    let answers = vec![
        assess,
        plan(json!({"k": 5})),
        plan(json!({"query": "metformin"})),
        json!({"action": "finish", "reason": "found"}).to_string(),
        json!({"action": "finish", "reason": "found"}).to_string(),
        "Answer: Not documented\nReasoning: Nothing found.".to_string(),
    ];
    let rendered = run(Method::Agent, &answers);
    // Only the repair request's last turn: the rest is pinned above.
    let repair = rendered.split("=== request 3").nth(1).unwrap().split("=== request 4").next().unwrap();
    let turn = repair.rsplit("--- user\n").next().unwrap();
    insta::assert_snapshot!(turn);
}

#[test]
fn llm_baseline_prompt() {
    insta::assert_snapshot!(run(Method::Baseline, &["Answer: Not documented\nReasoning: No record.".to_string()]));
}

/// The paper gives every method the question's answer schema: stated under
/// the question in the assessment and in every answer prompt, and absent
/// when the asker gave none.
#[test]
fn the_answer_schema_is_stated_under_the_question() {
    let line = "Answer schema: single choice: Yes / No / Not documented / Unclear";
    let baseline = "Answer: No\nReasoning: No record.".to_string();
    let prompt = run_typed(Method::Baseline, Some(AnswerType::YesNo), std::slice::from_ref(&baseline));
    assert!(prompt.contains(&format!("Question: Is the patient currently receiving metformin?\n{line}\n")), "{prompt}");
    assert!(!run(Method::Baseline, &[baseline]).contains("Answer schema:"));
    let answers = vec![
        json!({"intent": "current metformin status", "hypotheses": [], "required_information": [],
               "missing_information": [], "complexity": "low", "skills": []})
        .to_string(),
        json!({"steps": [{"step": 1, "objective": "find metformin", "tool": "search_reports", "arguments": {"query": "metformin"},
               "evidence_requirements": [], "stop_rule": "found"}], "stop_conditions": []})
        .to_string(),
        json!({"action": "call_tool", "tool": "search_reports", "arguments": {"query": "metformin"}, "reason": "planned"}).to_string(),
        json!({"action": "finish", "reason": "found"}).to_string(),
        "Answer: Yes\nReasoning: Started on 2023-01-20 [1].".to_string(),
    ];
    let agent = run_typed(Method::Agent, Some(AnswerType::Date), &answers);
    let date = "Answer schema: one date: YYYY-MM-DD, or Not documented / Unclear";
    // The assessment (request 1) and the synthesis (the last request).
    assert!(agent.split("=== request 2").next().unwrap().contains(date), "{agent}");
    assert!(agent.rsplit("=== request").next().unwrap().contains(date), "{agent}");
}
