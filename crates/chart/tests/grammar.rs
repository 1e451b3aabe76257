//! Every JSON schema the agent sends is one the embedded model's grammar
//! compiler (llguidance, as `evident_llm`'s llama provider uses it)
//! accepts: the assessment, the typed and the paper's plan, and the
//! round action, and the answer step's under each answer type. (A `maxProperties` beside listed properties passed the
//! scripted tests and was refused by llguidance on the first real call.)

mod support;

use evident_chart::bank::AnswerType;
use evident_chart::{ask, prompts, AgentConfig, Method, Question, RecordView, SkillLibrary};
use evident_llm::StructuredModel;
use serde_json::json;
use support::{day, scripted, store, AS_OF};

fn schemas(method: Method, answer_type: Option<AnswerType>) -> Vec<serde_json::Value> {
    let assess = json!({"intent": "ISS stage", "hypotheses": [], "required_information": [], "missing_information": [],
                        "complexity": "low", "skills": ["mm-staging"]});
    let plan = json!({"steps": [{"step": 1, "objective": "stage", "tool": "calculate", "arguments": {"calculator": "iss"},
                      "evidence_requirements": [], "stop_rule": "done"}], "stop_conditions": []});
    let finish = json!({"action": "finish", "reason": "done"});
    // The embedded model's answer step is constrained JSON too.
    // (The paper's Yes / No / Unclear has no "Not documented".)
    let unknown = if answer_type == Some(AnswerType::YesNoUnclear) { "Unclear" } else { "Not documented" };
    let answer = json!({"answer": unknown, "reasoning": "Nothing was found."});
    let mut answers = vec![assess.to_string()];
    if method != Method::AgentReactive {
        answers.push(plan.to_string());
        // A finish before the planned step ran is sent back once.
        answers.push(finish.to_string());
    }
    answers.push(finish.to_string());
    answers.push(answer.to_string());
    // The ISS the calculator check computes from the fixture's labs when
    // retrieval ends makes "Not documented" no answer: its repair.
    answers.push(answer.to_string());
    let model = scripted(&answers);
    let store = store();
    let view = RecordView::new(&store, "P1", day(AS_OF));
    let skills = SkillLibrary::builtin().unwrap();
    // The embedded model's configuration (a known context).
    let config = method.agent_config(&AgentConfig::default().with_model_context(32_768)).unwrap();
    let q = Question {
        text: "What is the ISS stage?",
        answer_type,
        method,
        skills: &skills,
        config: &config,
        patient: "female, 67 years".into(),
        embedder: None,
    };
    ask(StructuredModel::recorded(&model), &prompts(None), &view, &q).unwrap();
    model.requests().into_iter().filter_map(|r| r.json_schema).collect()
}

#[test]
fn every_schema_the_agent_sends_compiles_for_the_embedded_model() {
    let env = toktrie::ApproximateTokEnv::single_byte_env();
    let factory = llguidance::ParserFactory::new_simple(&env).unwrap();
    // The answer step's schema follows the question's answer type.
    let typed = AnswerType::ALL.into_iter().map(|t| (Method::Agent, Some(t)));
    let methods = [Method::Agent, Method::AgentPaperPlan, Method::AgentReactive, Method::AgentNoFilters];
    for (method, answer_type) in methods.into_iter().map(|m| (m, None)).chain(typed) {
        let schemas = schemas(method, answer_type);
        assert!(schemas.len() >= 3, "{method:?}: {}", schemas.len());
        for schema in schemas {
            let grammar = llguidance::api::TopLevelGrammar::from_json_schema(schema.clone());
            if let Err(e) = factory.create_parser(grammar) {
                panic!("{method:?}: llguidance refuses {schema}: {e}");
            }
        }
    }
}

/// The reasoning-first variant's answer step decodes the reasoning before
/// the answer: its schema lists it first, and the grammar the embedded
/// model decodes under accepts an object that opens with the reasoning and
/// refuses one that opens with the answer (the default, the other way
/// round).
#[test]
fn the_reasoning_first_variant_decodes_the_reasoning_before_the_answer() {
    let answer_step = |method| schemas(method, Some(AnswerType::YesNo)).pop().unwrap();
    let first = answer_step(Method::AgentReasoningFirst);
    let keys: Vec<&String> = first["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["reasoning", "answer"], "{first}");
    assert!(accepts(&first, r#"{"reasoning": "Nothing"#));
    assert!(!accepts(&first, r#"{"answer": "No"#));
    let default = answer_step(Method::Agent);
    assert!(accepts(&default, r#"{"answer": "No"#));
    assert!(!accepts(&default, r#"{"reasoning": "Nothing"#));
}

/// Without a plan (the reactive ablation) a call has no step to take its
/// tool from, so the round's action names its tool and arguments; with a
/// plan a call may leave the tool to the step. (The embedded model,
/// reactive, sent "call_tool" with no tool for eight rounds.)
#[test]
fn a_reactive_call_names_its_tool() {
    let action_of = |method| {
        schemas(method, None).into_iter().find(|s| s.to_string().contains("call_tool")).expect("a round's action")
    };
    let reactive = action_of(Method::AgentReactive);
    assert!(!accepts(&reactive, r#"{"action": "call_tool", "reason": "x"}"#), "{reactive}");
    assert!(accepts(&reactive, r#"{"action": "call_tool", "tool": "search_reports", "arguments": {"query": "bmi"}"#));
    assert!(accepts(&reactive, r#"{"action": "finish", "reason": "done"}"#));
    assert!(!accepts(&reactive, r#"{"action": "advance""#), "no plan, no step to advance");
    let planned = action_of(Method::Agent);
    assert!(accepts(&planned, r#"{"action": "call_tool", "reason": "x"}"#), "{planned}");
}

/// Whether the grammar llguidance compiles from `schema` lets a decoder
/// write `text` (byte by byte) from the start.
fn accepts(schema: &serde_json::Value, text: &str) -> bool {
    let env = toktrie::ApproximateTokEnv::single_byte_env();
    let factory = llguidance::ParserFactory::new_simple(&env).unwrap();
    let grammar = llguidance::api::TopLevelGrammar::from_json_schema(schema.clone());
    let mut matcher = llguidance::Matcher::new(factory.create_parser(grammar));
    let bytes: Vec<u32> = text.bytes().map(u32::from).collect();
    matcher.validate_tokens(&bytes).unwrap() == bytes.len()
}
