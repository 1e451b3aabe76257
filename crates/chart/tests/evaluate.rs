//! An answer made by `ask` (with a scripted model) becomes a stored
//! evaluation record: scored against the bank's gold answer, with the
//! process counts of the paper's Table 8 and empty review fields; a
//! pipeline failure scores 0; the summary over stored records compares
//! methods by paired cluster bootstrap.

mod support;

use std::collections::BTreeMap;

use evident_chart::bank::{AnswerType, BankQuestion, GoldEvidence};
use evident_chart::evaluate::{summarise, AnswerRecord, ErrorCategory, Review};
use evident_chart::{ask, prompts, AgentConfig, ChartAnswer, Method, Question, RecordView, SkillLibrary};
use evident_llm::StructuredModel;
use serde_json::json;
use support::{day, scripted, store, Scripted, AS_OF};

fn question(id: &str, gold: &str) -> BankQuestion {
    BankQuestion {
        id: id.into(),
        patient: "P1".into(),
        level: 1,
        template: "G01".into(),
        category: "single choice".into(),
        question: "Is the patient receiving metformin on 2023-12-31?".into(),
        reference_date: AS_OF.into(),
        answer_type: AnswerType::YesNo,
        gold_answer: gold.into(),
        gold_evidence: vec![GoldEvidence { document_id: "d2".into(), record: "d2".into(), text: "Metformin".into() }],
    }
}

fn run(model: &Scripted, method: Method, q: &BankQuestion) -> ChartAnswer {
    let store = store();
    let view = RecordView::new(&store, "P1", day(AS_OF).date().and_hms_opt(23, 59, 59).unwrap());
    let skills = SkillLibrary::builtin().unwrap();
    let config = AgentConfig::default();
    let question = Question {
        text: &q.question,
        answer_type: Some(q.answer_type),
        method,
        skills: &skills,
        config: &config,
        patient: "female, 67 years".into(),
        embedder: None,
    };
    ask(StructuredModel::recorded(model), &prompts(None), &view, &question).unwrap()
}

#[test]
fn an_agent_answer_is_scored_and_counted() {
    let q = question("q1", "Yes");
    let model = scripted(&[
        json!({"intent": "metformin", "hypotheses": [], "required_information": ["metformin"], "missing_information": [], "complexity": "low", "skills": ["current-medication-status"]}).to_string(),
        json!({"steps": [{"step": 1, "objective": "find", "tool": "search_reports", "arguments": {"query": "metformin"}, "evidence_requirements": ["a mention"], "stop_rule": "found"}], "stop_conditions": ["found"]}).to_string(),
        json!({"action": "call_tool", "tool": "search_reports", "arguments": {"query": "metformin"}, "reason": "r", "still_missing": []}).to_string(),
        json!({"action": "finish", "reason": "r", "still_missing": []}).to_string(),
        "Answer: **Yes**.\nReasoning: Metformin was started on 2023-01-20 [1] and nothing stops it [7].".to_string(),
    ]);
    let answer = run(&model, Method::Agent, &q);
    let r = AnswerRecord::new(&q, "agent", 1, &answer, "run-1");
    assert_eq!((r.status.as_str(), r.score), ("answered", 1.0));
    assert_eq!((r.citations, r.unsupported_citations), (2, 1), "[7] names no context item");
    assert!(r.skills_selected >= 1);
    // The model's search, then the structured lookup's three record
    // queries (no structured record names metformin).
    assert_eq!(r.tool_calls, 4);
    assert!(r.documents_retrieved >= 1 && r.documents_cited == 1, "{r:?}");
    assert_eq!((r.calls, r.prompt_tokens, r.reused_prompt_tokens), (5, 50, 15));
    assert_eq!(r.review, Review::default());
    // Stored as a JSONL line and read back unchanged, review fields empty.
    let line = serde_json::to_string(&r).unwrap();
    assert!(line.contains(
        "\"review\":{\"error_category\":null,\"clinically_significant\":null,\"citation_sufficiency\":null}"
    ));
    let back: AnswerRecord = serde_json::from_str(&line).unwrap();
    assert_eq!(back, r);
    // A reviewer's category is the paper's letter (E: clinically
    // significant); a letter outside A-F is refused.
    let reviewed = line.replace("\"error_category\":null", "\"error_category\":\"E\"");
    let back: AnswerRecord = serde_json::from_str(&reviewed).unwrap();
    assert_eq!(back.review.error_category, Some(ErrorCategory::E));
    let wrong = line.replace("\"error_category\":null", "\"error_category\":\"G\"");
    assert!(serde_json::from_str::<AnswerRecord>(&wrong).is_err());
    // The same answer against a gold "No" scores 0.
    assert_eq!(AnswerRecord::new(&question("q2", "No"), "agent", 1, &answer, "run-1").score, 0.0);
}

#[test]
fn a_pipeline_failure_scores_zero_and_counts() {
    let q = question("q1", "Yes");
    let model = scripted(&["I think yes.", "Still not the format."]);
    let answer = run(&model, Method::Baseline, &q);
    let r = AnswerRecord::new(&q, "baseline", 1, &answer, "run-2");
    assert_eq!((r.status.as_str(), r.score), ("pipeline_failure", 0.0));
    assert!(r.failure.is_some());
    let ok = AnswerRecord { score: 1.0, method: "agent".into(), status: "answered".into(), ..r.clone() };
    let questions = vec![q];
    let results = summarise(
        &questions,
        &[ok, r],
        &["agent".to_string(), "baseline".to_string()],
        &BTreeMap::from([("P1".to_string(), 100)]),
        500,
        1,
    );
    assert_eq!(results.methods[1].pipeline_failures, 1);
    assert_eq!(results.methods[1].pipeline_failure_rate, 1.0);
    assert_eq!(results.strata[0].comparisons[0].difference.estimate, 1.0);
}
