//! The agent's control flow with a scripted model: the four phases in
//! order, citations resolved to stored text, the reference-date cutoff,
//! the plan's three attempts, the two synthesis attempts, blocked
//! duplicates, the negative cache and broadening, the early-finish repair,
//! the calculator's lookback window, and a prompt layout that keeps each
//! Phase III request an extension of the previous one.

mod support;

use evident_chart::bank::AnswerType;
use evident_chart::{
    ask, prompts, AgentConfig, ChartAnswer, CitedSource, Evidence, Method, Question, RecordView, SkillLibrary, ToolName,
};
use evident_llm::StructuredModel;
use serde_json::{json, Value};
use support::{day, scripted, store, Scripted, AS_OF};

const ASSESS: &str = r#"{"intent": "current metformin status", "hypotheses": ["on metformin"], "required_information": ["metformin administration"], "missing_information": ["metformin administration"], "complexity": "low", "skills": ["current-medication-status", "drug-synonyms"]}"#;

fn plan(steps: Value) -> String {
    json!({"steps": steps, "stop_conditions": ["metformin status found"]}).to_string()
}

fn step(n: u32, tool: &str, args: Value) -> Value {
    json!({"step": n, "objective": "find it", "tool": tool, "arguments": args, "evidence_requirements": ["a mention"], "stop_rule": "found"})
}

fn action(kind: &str, tool: Option<&str>, args: Value) -> String {
    let mut a = json!({"action": kind, "reason": "because", "still_missing": []});
    if let Some(t) = tool {
        a["tool"] = json!(t);
        a["arguments"] = args;
    }
    a.to_string()
}

fn run(model: &Scripted, method: Method, question: &str) -> ChartAnswer {
    run_typed(model, method, question, None)
}

/// [`run`] with the question's answer type stated.
fn run_typed(model: &Scripted, method: Method, question: &str, answer_type: Option<AnswerType>) -> ChartAnswer {
    let store = store();
    let view = RecordView::new(&store, "P1", day(AS_OF).date().and_hms_opt(23, 59, 59).unwrap());
    let skills = SkillLibrary::builtin().unwrap();
    // An ablation's or variant's switches; the comparators ignore the config.
    let config = method.agent_config(&AgentConfig::default()).unwrap_or_default();
    let q = Question {
        text: question,
        answer_type,
        method,
        skills: &skills,
        config: &config,
        patient: "female, 67 years".into(),
        embedder: None,
    };
    ask(StructuredModel::recorded(model), &prompts(None), &view, &q).unwrap()
}

#[test]
fn the_four_phases_answer_with_citations_that_resolve_to_stored_text() {
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "search_reports", json!({"query": "metformin"}))])),
        action("call_tool", Some("search_reports"), json!({"query": "metformin"})),
        action("finish", None, json!({})),
        "Answer: Yes\nReasoning: Metformin was started on 2023-01-20 [1].".to_string(),
    ]);
    let out = run(&model, Method::Agent, "Is the patient currently receiving metformin?");
    assert!(model.exhausted());
    assert_eq!(out.status, "answered");
    assert_eq!(out.answer.as_deref(), Some("Yes"));
    assert_eq!(out.citations.len(), 1);
    let c = &out.citations[0];
    assert!(c.supported);
    let Some(CitedSource::Text { document_id, text, sentence_ids, start, end, .. }) = &c.source else {
        panic!("{c:?}")
    };
    // The policy engine ranks the administration (d2) before the plan (d1),
    // and BM25 returns both; [1] is the first node retrieved.
    assert!(document_id == "d1" || document_id == "d2", "{document_id}");
    assert!(text.contains("etformin"));
    assert!(!sentence_ids.is_empty() && start < end);
    // d4 is after the reference date and is never retrieved.
    assert!(out.context.iter().all(|n| n.document_id() != Some("d4")), "{:?}", out.context);
    assert_eq!(out.retrieved_not_cited.len(), 1, "{:?}", out.retrieved_not_cited);
    // Skills: the model's, the keyword style, the base style, the policies.
    for id in [
        "current-medication-status",
        "drug-synonyms",
        "style-current-status",
        "style-base",
        "temporal-authority",
        "administered-over-planned",
    ] {
        assert!(out.trace.skills.iter().any(|s| s == id), "{id} missing from {:?}", out.trace.skills);
    }
    let policy = out.trace.policy.as_ref().unwrap();
    assert_eq!(policy.decision, evident_chart::policy::Decision::Select);
    assert_eq!(out.usage.calls, 5);
    assert_eq!((out.usage.prompt_tokens, out.usage.reused_prompt_tokens), (50, 15));

    // The workflow skills reach tool execution, the style skills synthesis.
    let requests = model.requests();
    assert!(requests[1].messages[0].content.contains("### current-medication-status"));
    assert!(!requests[1].messages[0].content.contains("### style-base"));
    assert!(requests[4].messages[1].content.contains("### style-base"));
    // Phase II and III form one conversation: each request extends the last.
    for pair in requests[1..4].windows(2) {
        assert!(pair[1].messages.starts_with(&pair[0].messages), "a Phase III request must extend the previous one");
    }
}

#[test]
fn nothing_after_the_reference_date_is_seen() {
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "search_reports", json!({"query": "zebrafish allergy"}))])),
        action("call_tool", Some("search_reports"), json!({"query": "zebrafish allergy"})),
        action("call_tool", Some("query_labs"), json!({"concepts": ["Albumin"]})),
        action("finish", None, json!({})),
        "Answer: Not documented\nReasoning: No allergy is documented.".to_string(),
    ]);
    let out = run(&model, Method::Agent, "Does the patient have a zebrafish allergy?");
    assert_eq!(out.trace.rounds[0].evidence_found, 0, "{:?}", out.trace.rounds[0]);
    // Albumin: the 2024-02-01 value is after the date; two remain.
    assert_eq!(out.trace.rounds[1].evidence_found, 2);
    assert!(out.context.iter().all(|n| n.date().unwrap() <= day("2024-01-01")));
}

#[test]
fn three_invalid_plans_end_in_a_recorded_pipeline_failure() {
    let model = scripted(&[ASSESS, "not json", r#"{"steps": []}"#, r#"{"steps": [{"step": 1}]}"#]);
    let out = run(&model, Method::Agent, "Is the patient receiving metformin?");
    assert!(model.exhausted());
    assert_eq!(out.status, "pipeline_failure");
    assert_eq!(out.trace.plan, None);
    let failures = model.failures();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].attempts, 3);
}

#[test]
fn two_malformed_answers_end_in_a_recorded_pipeline_failure() {
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "search_reports", json!({"query": "metformin"}))])),
        action("call_tool", Some("search_reports"), json!({"query": "metformin"})),
        action("finish", None, json!({})),
        "Yes, metformin.".to_string(),
        "The answer is yes".to_string(),
    ]);
    let out = run(&model, Method::Agent, "Is the patient receiving metformin?");
    assert_eq!(out.status, "pipeline_failure");
    assert_eq!(out.trace.synthesis_attempts, 2);
    assert_eq!(model.failures().len(), 1);
    // The repair prompt was appended to the first attempt.
    let last = model.requests().pop().unwrap();
    assert!(last.messages.last().unwrap().content.contains("not in the required format"));
}

#[test]
fn an_unsupported_citation_is_flagged_not_dropped() {
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "search_reports", json!({"query": "metformin"}))])),
        action("call_tool", Some("search_reports"), json!({"query": "metformin"})),
        action("finish", None, json!({})),
        "Answer: Yes\nReasoning: Started in January [1] and confirmed later [9].".to_string(),
    ]);
    let out = run(&model, Method::Agent, "Is the patient receiving metformin?");
    assert_eq!(out.citations.len(), 2);
    assert!(out.citations[0].supported);
    assert!(!out.citations[1].supported && out.citations[1].number == 9);
    assert_eq!(out.unsupported_citations, 1);
}

#[test]
fn duplicates_are_blocked_empty_queries_cached_and_searches_broadened() {
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "search_reports", json!({"query": "insulin pump"}))])),
        action("call_tool", Some("search_reports"), json!({"query": "insulin pump"})),
        action("call_tool", Some("search_reports"), json!({"query": "insulin pump"})),
        action(
            "call_tool",
            Some("search_reports"),
            json!({"query": "the insulin therapy", "scope": "range", "since": "2023-01-01"}),
        ),
        action(
            "call_tool",
            Some("search_reports"),
            json!({"query": "was the patient on metformin", "scope": "on_date", "date": "2020-01-01"}),
        ),
        action("call_tool", Some("search_reports"), json!({"query": "lactic acidosis pump", "scope": "most_recent"})),
        action("finish", None, json!({})),
        "Answer: Not documented\nReasoning: Nothing was found.".to_string(),
    ]);
    let out = run(&model, Method::Agent, "Has the patient used an insulin pump?");
    let rounds = &out.trace.rounds;
    // The repeated search is not blocked: after one empty result it runs
    // with k doubled (a different call); after two the query loses its
    // stopwords; after three the date limit goes.
    assert_eq!(rounds[1].action, "call_tool", "{:?}", rounds[1]);
    assert!(rounds[1].adjustments.iter().any(|a| a.contains("k 5 -> 10")), "{:?}", rounds[1]);
    assert!(rounds[2].adjustments.iter().any(|a| a.contains("keywords")), "{:?}", rounds[2]);
    assert!(rounds[2].adjustments.iter().all(|a| !a.contains("removed")), "{:?}", rounds[2]);
    assert!(rounds[3].adjustments.iter().any(|a| a.contains("scope removed")), "{:?}", rounds[3]);
    // Without its date limit, "metformin" is found.
    assert!(rounds[3].evidence_found > 0, "{:?}", rounds[3]);
    // "lactic acidosis" is only in the note after the reference date.
    assert_eq!(rounds[4].evidence_found, 0);
    assert_eq!(rounds[5].action, "finish");
}

#[test]
fn an_empty_search_repeated_by_the_plan_is_run_broadened_skipping_a_level_that_already_returned_nothing() {
    // A small model's plan repeats one search with a scope that excludes
    // everything (the most recent document, here the CT); each repeat runs
    // at the next broadening level, skipping a level whose call already
    // returned nothing, until the date limit goes and the search finds the
    // notes.
    let search = json!({"query": "metformin", "kind": "all", "scope": "on_date", "date": "2023-06-01"});
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "search_reports", search.clone()), step(2, "search_reports", search.clone())])),
        action("call_tool", Some("search_reports"), search.clone()),
        action("call_tool", Some("search_reports"), search.clone()),
        action("call_tool", Some("search_reports"), search.clone()),
        action("finish", None, json!({})),
        "Answer: Yes\nReasoning: Started [1].".to_string(),
    ]);
    let out = run(&model, Method::Agent, "Is the patient receiving metformin?");
    assert!(model.exhausted());
    let rounds = &out.trace.rounds;
    assert_eq!(rounds[0].evidence_found, 0, "{:?}", rounds[0]);
    assert_eq!(rounds[1].action, "call_tool", "{:?}", rounds[1]);
    assert_eq!(rounds[1].arguments.as_ref().unwrap()["k"], 10);
    assert_eq!(rounds[1].evidence_found, 0);
    // "metformin" has no stopword to lose: level two would repeat level
    // one's empty call, so level three runs at once.
    assert!(rounds[2].adjustments.iter().any(|a| a.contains("date removed")), "{:?}", rounds[2]);
    assert!(rounds[2].evidence_found >= 2, "{:?}", rounds[2]);
    assert!(out.context.iter().any(|n| n.text().contains("was started on 2023-01-20")));
    assert!(out.citations[0].supported);
}

#[test]
fn an_action_missing_a_required_argument_takes_it_from_the_plan_step() {
    // The model's action names the step's tool but leaves out "record"
    // (and carries another tool's argument): the planned record is used.
    // The paper's plan schema (one argument object for every tool): under
    // Evident's typed plan a calculator in the arguments is a calculate
    // step (`a_calculator_named_in_retrieval_arguments_is_run_as_...`).
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "query_records", json!({"record": "conditions", "calculator": "iss"}))])),
        action("call_tool", Some("query_records"), json!({"query": "diabetes", "calculator": "iss"})),
        action("finish", None, json!({})),
        "Answer: Yes\nReasoning: Diabetes [1].".to_string(),
    ]);
    let out = run(&model, Method::AgentPaperPlan, "Has the patient been diagnosed with diabetes?");
    assert!(out.trace.plan_rewrites.is_empty(), "{:?}", out.trace.plan_rewrites);
    let r = &out.trace.rounds[0];
    assert_eq!(r.arguments.as_ref().unwrap(), &json!({"record": "conditions", "query": "diabetes"}), "{r:?}");
    assert!(r.adjustments.iter().any(|a| a.contains("record taken from the plan step")), "{r:?}");
    assert!(r.adjustments.iter().any(|a| a.contains("calculator dropped")), "{r:?}");
    assert!(r.notice.as_deref().is_none_or(|n| !n.contains("missing field")), "{r:?}");
}

#[test]
fn the_kind_filter_offers_all_first_and_the_plan_is_kept_compact() {
    // The paper's plan schema, whose one argument object lets a small
    // model fill every tool's arguments into every step.
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(
            1,
            "search_reports",
            json!({"query": "metformin", "record": "medications", "concepts": ["Albumin"]})
        )])),
        action("call_tool", Some("search_reports"), json!({"query": "metformin", "kind": "all"})),
        action("finish", None, json!({})),
        "Answer: Yes\nReasoning: Started [1].".to_string(),
    ]);
    let out = run(&model, Method::AgentPaperPlan, "Is the patient receiving metformin?");
    let requests = model.requests();
    let kinds = &requests[1].json_schema.as_ref().unwrap()["properties"]["steps"]["items"]["properties"]["arguments"]
        ["properties"]["kind"]["enum"];
    assert_eq!(kinds[0], "all", "{kinds}");
    assert!(kinds.as_array().unwrap().iter().any(|k| k == "progress_note"));
    // "all" is no filter: both metformin notes are found.
    assert!(out.trace.rounds[0].evidence_found >= 2, "{:?}", out.trace.rounds[0]);
    // Phase III sees the plan with only the arguments its tool takes.
    let plan_message = &requests[2].messages[2].content;
    assert!(plan_message.contains("metformin") && !plan_message.contains("concepts"), "{plan_message}");
}

/// The agent's conservative token estimate (crate-private there): every
/// digit a token, three characters a token for the rest, 8 per message.
fn estimate(messages: &[evident_llm::Message]) -> usize {
    messages
        .iter()
        .map(|m| {
            let digits = m.content.bytes().filter(u8::is_ascii_digit).count();
            digits + (m.content.len() - digits).div_ceil(3) + 8
        })
        .sum()
}

/// A model that plans one search, calls `search_reports` with each of
/// `calls` in turn, finishes and answers.
fn searches_then_finish(calls: &[Value]) -> Scripted {
    let mut answers = vec![ASSESS.to_string(), plan(json!([step(1, "search_reports", calls[0].clone())]))];
    answers.extend(calls.iter().map(|c| action("call_tool", Some("search_reports"), c.clone())));
    answers.push(action("finish", None, json!({})));
    answers.push("Answer: Yes\nReasoning: Started [1].".to_string());
    scripted(&answers)
}

/// The agent asked about metformin on patient P1 under `config`.
fn ask_with(model: &Scripted, config: &AgentConfig) -> ChartAnswer {
    let store = store();
    let view = RecordView::new(&store, "P1", day(AS_OF).date().and_hms_opt(23, 59, 59).unwrap());
    let skills = SkillLibrary::builtin().unwrap();
    let q = Question {
        text: "Is the patient receiving metformin?",
        answer_type: None,
        method: Method::Agent,
        skills: &skills,
        config,
        patient: "female, 67 years".into(),
        embedder: None,
    };
    ask(StructuredModel::recorded(model), &prompts(None), &view, &q).unwrap()
}

#[test]
fn on_a_small_context_older_rounds_leave_the_prompt_and_retrieval_goes_on() {
    let calls = [
        json!({"query": "metformin"}),
        json!({"query": "diabetes"}),
        json!({"query": "CT abdomen"}),
        json!({"query": "HbA1c"}),
    ];
    let script = || searches_then_finish(&calls);
    // Unlimited: every round's exchange stays, the last request is the longest.
    let wide = script();
    let out = ask_with(&wide, &AgentConfig::default());
    assert_eq!(out.trace.prompt_rounds_dropped, 0);
    let requests = wide.requests();
    let prefix = estimate(&requests[2].messages[..3]);
    let full = estimate(&requests[6].messages);
    // A context with room for the prefix and about two rounds, not five.
    let limit = prefix + 584 + (full - prefix) / 2;
    let narrow = script();
    let config = AgentConfig { model_context_tokens: Some(limit), plan_tokens: 200, ..AgentConfig::default() };
    let out = ask_with(&narrow, &config);
    assert!(narrow.exhausted(), "all four searches ran: {:?}", out.trace.stopped_because);
    assert!(out.trace.prompt_rounds_dropped >= 1, "{:?}", out.trace);
    let calls_made = out.trace.rounds.iter().filter(|r| r.action == "call_tool").count();
    assert_eq!(calls_made, 4);
    let requests = narrow.requests();
    for r in &requests[2..7] {
        // The prefix (system, plan request, plan) is always kept.
        assert_eq!(r.messages[..3], requests[2].messages[..3]);
        assert!(estimate(&r.messages) + 384 <= limit, "{} of {limit}", estimate(&r.messages));
    }
    // The memory state still lists what the dropped rounds found.
    let last = &requests[6].messages.last().unwrap().content;
    assert!(last.contains("Metformin") || last.contains("metformin"), "{last}");
}

#[test]
fn finishing_before_the_planned_step_ran_is_sent_back_once() {
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "search_reports", json!({"query": "metformin"}))])),
        action("finish", None, json!({})),
        // The model calls the planned tool without arguments: the plan's are used.
        action("call_tool", Some("search_reports"), json!({})),
        action("finish", None, json!({})),
        "Answer: Yes\nReasoning: Started [1].".to_string(),
    ]);
    let out = run(&model, Method::Agent, "Is the patient receiving metformin?");
    let rounds = &out.trace.rounds;
    assert_eq!(rounds[0].action, "finish (sent back)");
    assert!(rounds[1].adjustments.iter().any(|a| a.contains("arguments taken from the plan")));
    assert!(rounds[1].evidence_found > 0);
    assert_eq!(rounds[2].action, "finish");
}

#[test]
fn the_iss_calculator_reads_labs_inside_its_window_and_cites_them() {
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "calculate", json!({"calculator": "iss"}))])),
        action("call_tool", Some("calculate"), json!({"calculator": "iss"})),
        action("finish", None, json!({})),
        "Answer: I; 2023-11-20; labs\nReasoning: Beta-2-microglobulin 2.8 mg/L and albumin 3.9 g/dL give ISS I [1]."
            .to_string(),
    ]);
    let out = run(&model, Method::Agent, "What is the ISS stage?");
    let Some(CitedSource::Calculation { output, used, .. }) = &out.citations[0].source else {
        panic!("{:?}", out.citations)
    };
    assert_eq!(output["stage"], "I");
    assert_eq!(used.len(), 2, "beta-2-microglobulin and albumin of 2023-11-20");
}

/// The typed plan offered a calculator's inputs, and the embedded model
/// typed an albumin of 0.00001 g/dL beside the stored 3.9: the plan no
/// longer offers the numbers the tool reads, and one a call still gives is
/// not used; the stored value in the window is, and is cited.
#[test]
fn a_stored_lab_wins_over_an_iss_input_the_call_types() {
    let args = json!({"calculator": "iss", "inputs": {"albumin_g_dl": 0.00001, "beta2_microglobulin_mg_l": 9.0}});
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "calculate", json!({"calculator": "iss"}))])),
        action("call_tool", Some("calculate"), args),
        action("finish", None, json!({})),
        "Answer: I\nReasoning: Beta-2-microglobulin 2.8 mg/L and albumin 3.9 g/dL give ISS I [1].".to_string(),
    ]);
    let out = run(&model, Method::Agent, "What is the ISS stage?");
    let calc = out.trace.rounds.iter().find(|r| r.tool.as_deref() == Some("calculate")).expect("a calculator call");
    assert_eq!(calc.evidence_found, 1, "{:?}", calc.notice);
    let inputs = out
        .context
        .iter()
        .find_map(|e| match e {
            Evidence::Calculation { inputs, .. } => Some(inputs),
            _ => None,
        })
        .expect("the calculation is a context item");
    assert_eq!(inputs["albumin_g_dl"], 3.9);
    assert_eq!(inputs["beta2_microglobulin_mg_l"], 2.8);
    let Some(CitedSource::Calculation { output, used, .. }) = &out.citations[0].source else {
        panic!("{:?}", out.citations)
    };
    assert_eq!(output["stage"], "I");
    assert_eq!(used.len(), 2);
}

#[test]
fn the_llm_baseline_sees_no_record_and_full_context_sees_it_all_up_to_the_date() {
    let model = scripted(&["Answer: Not documented\nReasoning: No record was available."]);
    let out = run(&model, Method::Baseline, "Is the patient receiving metformin?");
    assert_eq!(out.usage.calls, 1);
    assert!(out.context.is_empty());
    assert!(!model.requests()[0].messages[1].content.contains("Metformin 500 mg"));
    assert_eq!(model.requests()[0].temperature, 0.2);

    let model = scripted(&["Answer: Yes\nReasoning: Started in January [1]."]);
    let out = run(&model, Method::FullContext, "Is the patient receiving metformin?");
    let prompt = &model.requests()[0].messages[1].content;
    assert!(prompt.contains("was started on 2023-01-20") && !prompt.contains("lactic acidosis"), "{prompt}");
    // Newest first: the 2023-11-20 labs before the 2023-06-01 CT.
    assert!(prompt.find("Albumin").unwrap() < prompt.find("CT abdomen").unwrap());
    assert!(out.citations[0].supported);
}

#[test]
fn a_repeated_plan_step_is_skipped_and_a_repeated_call_ends_a_step_that_ran() {
    let search = json!({"query": "metformin"});
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([
            step(1, "search_reports", search.clone()),
            step(2, "search_reports", search.clone()),
            step(3, "query_labs", json!({"concepts": ["Albumin"]}))
        ])),
        action("call_tool", Some("search_reports"), search.clone()),
        action("call_tool", Some("search_reports"), search.clone()),
        action("call_tool", Some("search_reports"), search.clone()),
        // Step 2 repeats step 1's call and is skipped: this is step 3.
        action("call_tool", Some("query_labs"), json!({"concepts": ["Albumin"]})),
        action("finish", None, json!({})),
        "Answer: Yes\nReasoning: Started [1].".to_string(),
    ]);
    let out = run(&model, Method::Agent, "Is the patient receiving metformin?");
    assert!(model.exhausted());
    let actions: Vec<(&str, Option<u32>)> = out.trace.rounds.iter().map(|r| (r.action.as_str(), r.plan_step)).collect();
    assert_eq!(
        actions,
        vec![
            ("call_tool", Some(1)),
            ("call_tool (blocked)", Some(1)),
            // Step 1's call ran: one repeat ends the step.
            ("advance (the step's call ran and was repeated)", Some(1)),
            // Step 3's call has not run: it takes two blocked calls.
            ("call_tool (blocked)", Some(3)),
            ("call_tool", Some(3)),
            ("finish", Some(3)),
        ]
    );
}

/// Bag-of-words vectors over hashed words: enough for dense retrieval to
/// prefer sections sharing the question's words.
struct WordHash;

impl evident_llm::Embedder for WordHash {
    fn model_id(&self) -> &str {
        "word-hash"
    }
    fn dimensions(&self) -> usize {
        512
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, evident_llm::EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 512];
                for w in t.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 3) {
                    let h = w.bytes().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
                    v[(h % 512) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

#[test]
fn simple_rag_retrieves_densely_up_to_the_reference_date_in_one_call() {
    let store = store();
    let filter = evident_store::SectionFilter::patient("P1");
    evident_retrieve::embed_missing(&mut store.lock().unwrap(), &WordHash, &filter, 16, &mut |_, _| {}).unwrap();
    let view = RecordView::new(&store, "P1", day(AS_OF));
    let skills = SkillLibrary::builtin().unwrap();
    let config = AgentConfig::default();
    let model = scripted(&["Answer: Yes\nReasoning: Started on 2023-01-20 [1]."]);
    let q = Question {
        text: "Is the patient receiving metformin?",
        answer_type: None,
        method: Method::SimpleRag,
        skills: &skills,
        config: &config,
        patient: "female".into(),
        embedder: Some(&WordHash),
    };
    let out = ask(StructuredModel::recorded(&model), &prompts(None), &view, &q).unwrap();
    assert_eq!(out.usage.calls, 1);
    assert!(!out.context.is_empty());
    assert!(out.context.iter().all(|n| n.document_id() != Some("d4")), "nothing after the reference date");
    assert!(out.context[0].text().contains("etformin"), "{:?}", out.context[0]);
    assert!(out.citations[0].supported);
    assert_eq!(model.requests()[0].temperature, 0.2);
}

#[test]
fn phase_one_lists_the_skills_whose_keywords_the_question_has_first() {
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "calculate", json!({"calculator": "iss"}))])),
        action("call_tool", Some("calculate"), json!({"calculator": "iss"})),
        action("finish", None, json!({})),
        "Answer: I\nReasoning: ISS I [1].".to_string(),
    ]);
    run(&model, Method::Agent, "What is the ISS stage from albumin and beta-2-microglobulin?");
    let requests = model.requests();
    let prompt = &requests[0].messages[1].content;
    let at = |id: &str| prompt.find(&format!("- {id} (")).unwrap_or_else(|| panic!("{id} not listed: {prompt}"));
    // mm-staging (iss, albumin, beta-2-microglobulin) and the staging
    // skill (iss) come before the alphabetically first skills.
    assert!(at("mm-staging") < at("staging-score-calculation"), "{prompt}");
    assert!(at("staging-score-calculation") < at("clinical-abbreviations"), "{prompt}");
    let ids = &requests[0].json_schema.as_ref().unwrap()["properties"]["skills"]["items"]["enum"];
    assert_eq!(ids[0], "mm-staging", "{ids}");
}

#[test]
fn a_result_too_long_for_a_small_context_is_shown_in_part_and_kept_whole() {
    let calls = [json!({"query": "metformin diabetes CT follow-up"}), json!({"query": "HbA1c"})];
    let script = || searches_then_finish(&calls);
    let wide = script();
    let out = ask_with(&wide, &AgentConfig::default());
    let found = out.trace.rounds[0].evidence_found;
    assert!(found >= 3, "{:?}", out.trace.rounds[0]);
    let requests = wide.requests();
    // Round 2's request: prefix, round 1's exchange, and round 2's step
    // request carrying round 1's result.
    let prefix = estimate(&requests[3].messages[..3]);
    let step_request = estimate(&requests[3].messages[5..]);
    // Room for the prefix, the answer and all of that step request but
    // 40 tokens (less than one result line).
    assert!(step_request > 240, "{step_request}");
    let limit = prefix + 384 + step_request - 40;
    let narrow = script();
    // (The plan needs little room here: the scripted plan is one step.)
    let config = AgentConfig { model_context_tokens: Some(limit), plan_tokens: 200, ..AgentConfig::default() };
    let out = ask_with(&narrow, &config);
    assert!(narrow.exhausted(), "retrieval went on: {}", out.trace.stopped_because);
    assert!(out.trace.prompt_items_hidden >= 1, "{:?}", out.trace);
    let shown = narrow.requests()[3].messages.last().unwrap().content.clone();
    assert!(shown.contains("more items found; kept for the answer"), "{shown}");
    // Every item found is still a context node.
    assert!(out.context.len() >= found);
}

/// A plan that searches for the CT under the wrong kind (it is stored as
/// `radiology`, the model asks for `progress_note`) three times.
fn ct_under_the_wrong_kind(answer: &str) -> Scripted {
    three_searches(json!({"query": "CT abdomen", "kind": "progress_note"}), answer)
}

/// A plan of one search, the same search three times, finish, `answer`.
fn three_searches(search: Value, answer: &str) -> Scripted {
    three_searches_of("search_reports", search, answer)
}

/// [`three_searches`] with another tool.
fn three_searches_of(tool: &str, search: Value, answer: &str) -> Scripted {
    scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, tool, search.clone())])),
        action("call_tool", Some(tool), search.clone()),
        action("call_tool", Some(tool), search.clone()),
        action("call_tool", Some(tool), search.clone()),
        action("finish", None, json!({})),
        answer.to_string(),
    ])
}

#[test]
fn a_report_query_gains_the_parsing_skills_expansions_and_the_papers_runs_as_written() {
    let question = "Has the patient been diagnosed with DM?";
    let model = three_searches(json!({"query": "DM"}), "Answer: Yes\nReasoning: Diabetes [1].");
    let out = run(&model, Method::Agent, question);
    let first = &out.trace.rounds[0];
    assert_eq!(first.arguments.as_ref().unwrap()["query"], "DM diabetes mellitus", "{first:?}");
    assert!(first.adjustments.iter().any(|a| a.contains("query expanded for dm")), "{first:?}");
    assert!(first.evidence_found > 0, "the note says \"diabetes mellitus\", never \"DM\": {first:?}");
    assert!(out.context.iter().any(|n| n.document_id() == Some("d1")), "{:?}", out.context);

    let model = three_searches(json!({"query": "DM"}), "Answer: Not documented\nReasoning: Nothing found.");
    let out = run(&model, Method::AgentPaperQueries, question);
    let first = &out.trace.rounds[0];
    assert_eq!(first.arguments.as_ref().unwrap()["query"], "DM", "{first:?}");
    assert_eq!(first.evidence_found, 0, "{first:?}");
    let model = three_searches(json!({"query": "DM"}), "Answer: Not documented\nReasoning: Nothing found.");
    let out = run(&model, Method::AgentNoSkills, question);
    assert_eq!(out.trace.rounds[0].arguments.as_ref().unwrap()["query"], "DM", "no skills, no expansions");
}

/// The same for a structured record query: "anaemia" finds the problem
/// list's "Anemia (disorder)" line.
#[test]
fn a_record_query_gains_the_parsing_skills_expansions_and_the_papers_runs_as_written() {
    let store = store();
    support::add_problem_list(
        &store,
        "c1",
        "2020-05-01",
        "Conditions\n- 2020-05-01 10:00: Anemia (disorder) (active) [Condition/a1]\n",
    );
    let question = "Has the patient been diagnosed with anaemia?";
    let criteria = evident_chart::criteria::CriteriaSets::builtin();
    let lookup = json!({"record": "conditions", "query": "anaemia"});
    for (method, query, found) in [(Method::Agent, "anaemia anemia", 1), (Method::AgentPaperQueries, "anaemia", 0)] {
        let model = three_searches_of("query_records", lookup.clone(), "Answer: Yes\nReasoning: Anemia [1].");
        let out = ask_of_p1(&store, &model, question, Some(AnswerType::YesNoUnclear), method, criteria);
        let first = &out.trace.rounds[0];
        assert_eq!(first.arguments.as_ref().unwrap()["query"], query, "{method:?}: {first:?}");
        assert_eq!(first.evidence_found, found, "{method:?}: {first:?}");
    }
}

#[test]
fn evidents_last_broadening_level_drops_the_kind_filter_and_the_papers_never_does() {
    let run_with = |model: &Scripted, method: Method| run(model, method, "Has the patient had a CT of the abdomen?");

    // Evident's agent: k doubled after the first empty search; the keyword
    // and date levels would repeat that call (no stopword, no date limit),
    // so the third search runs without its kind filter and finds the CT.
    let model = ct_under_the_wrong_kind("Answer: Yes\nReasoning: CT abdomen on 2023-06-01 [1].");
    let out = run_with(&model, Method::Agent);
    let rounds = &out.trace.rounds;
    assert_eq!(rounds[1].arguments.as_ref().unwrap()["k"], 10, "{:?}", rounds[1]);
    assert_eq!(rounds[1].evidence_found, 0, "{:?}", rounds[1]);
    assert_eq!(rounds[2].action, "call_tool", "{:?}", rounds[2]);
    let args = rounds[2].arguments.as_ref().unwrap();
    assert!(args.get("kind").is_none(), "{args}");
    assert!(rounds[2].adjustments.iter().any(|a| a.contains("kind filter removed")), "{:?}", rounds[2]);
    assert!(rounds[2].evidence_found > 0, "{:?}", rounds[2]);
    assert!(out.context.iter().any(|n| n.document_id() == Some("d3")), "{:?}", out.context);
    assert!(out.citations[0].supported);
    assert_eq!(out.answer.as_deref(), Some("Yes"));

    // The paper's broadening keeps the kind filter: the third search is the
    // second's, blocked as a repeat of an empty call, and nothing is found.
    let model = ct_under_the_wrong_kind("Answer: Not documented\nReasoning: No CT was found.");
    let out = run_with(&model, Method::AgentPaperBroadening);
    let rounds = &out.trace.rounds;
    assert_eq!(rounds[2].action, "call_tool (blocked)", "{:?}", rounds[2]);
    assert_eq!(rounds[2].arguments.as_ref().unwrap()["kind"], "progress_note", "{:?}", rounds[2]);
    assert!(rounds.iter().all(|r| r.evidence_found == 0), "{rounds:?}");
    assert!(out.context.iter().all(|n| n.document_id() != Some("d3")), "{:?}", out.context);
}

#[test]
fn an_r_iss_call_without_cytogenetics_names_every_missing_input_and_keeps_the_labs_it_read() {
    // The R-ISS's cytogenetic flags are not in stored labs: a call without
    // them is told all three names at once (serde's error named only the
    // first), with the lab inputs already read, and the labs stay
    // citable; the call with the flags gives the stage.
    let flags = json!({"del_17p": false, "t_4_14": false, "t_14_16": false});
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "calculate", json!({"calculator": "r-iss"}))])),
        action("call_tool", Some("calculate"), json!({"calculator": "r-iss"})),
        action("call_tool", Some("calculate"), json!({"calculator": "r-iss", "inputs": flags})),
        action("finish", None, json!({})),
        "Answer: I\nReasoning: ISS I, normal LDH and standard-risk FISH give R-ISS I [3].".to_string(),
    ]);
    let out = run(&model, Method::Agent, "What is the R-ISS stage?");
    let first = &out.trace.rounds[0];
    let note = first.notice.as_deref().unwrap_or_default();
    for name in ["del_17p (true or false)", "t_4_14", "t_14_16", "ldh_high false", "albumin_g_dl 3.9"] {
        assert!(note.contains(name), "{name} not in {note:?}");
    }
    assert_eq!(first.evidence_found, 3, "{first:?}");
    let second = &out.trace.rounds[1];
    assert_eq!(second.evidence_found, 1, "{second:?}");
    let calc = out.context.iter().find_map(|n| match n {
        evident_chart::tools::Evidence::Calculation { output, .. } => Some(output.clone()),
        _ => None,
    });
    assert_eq!(calc.unwrap()["stage"], "I");
}

#[test]
fn the_typed_plan_gives_each_tool_its_own_arguments_and_calculators_as_an_enum() {
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "search_reports", json!({"query": "metformin"}))])),
        action("call_tool", Some("search_reports"), json!({"query": "metformin"})),
        action("finish", None, json!({})),
        "Answer: Yes\nReasoning: Started [1].".to_string(),
    ]);
    run(&model, Method::Agent, "Is the patient receiving metformin?");
    let schema = model.requests()[1].json_schema.clone().unwrap();
    let branches = schema["properties"]["steps"]["items"]["anyOf"].as_array().unwrap().clone();
    let branch = |tool: &str| {
        branches.iter().find(|b| b["properties"]["tool"]["const"] == tool).unwrap_or_else(|| panic!("{tool}")).clone()
    };
    for tool in ["search_reports", "query_labs", "query_records"] {
        let args = &branch(tool)["properties"]["arguments"];
        assert_eq!(args["additionalProperties"], false, "{tool}: {args}");
        assert!(args["properties"].get("calculator").is_none(), "{tool} must not take a calculator: {args}");
        assert!(args["properties"].get("inputs").is_none(), "{tool}: {args}");
    }
    let labs = branch("query_labs")["properties"]["arguments"]["properties"]["concepts"]["items"]["enum"].clone();
    assert!(labs.as_array().unwrap().iter().any(|c| c == "Albumin"), "{labs}");
    assert_eq!(branch("search_reports")["properties"]["arguments"]["properties"]["kind"]["enum"][0], "all");
    // A calculate step names one of the loaded calculators, with only its own inputs.
    let calculators = branch("calculate")["properties"]["arguments"]["anyOf"].as_array().unwrap().clone();
    let ids: Vec<&str> = calculators.iter().filter_map(|c| c["properties"]["calculator"]["const"].as_str()).collect();
    let loaded: Vec<&str> = evident_chart::calculators::Calculator::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(ids, loaded);
    let r_iss = calculators.iter().find(|c| c["properties"]["calculator"]["const"] == "r-iss").unwrap();
    assert!(r_iss["properties"]["inputs"]["properties"].get("del_17p").is_some(), "{r_iss}");
    assert_eq!(r_iss["properties"]["inputs"]["additionalProperties"], false);
    // The paper's plan: one argument object for every tool.
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "search_reports", json!({"query": "metformin"}))])),
        action("call_tool", Some("search_reports"), json!({"query": "metformin"})),
        action("finish", None, json!({})),
        "Answer: Yes\nReasoning: Started [1].".to_string(),
    ]);
    run(&model, Method::AgentPaperPlan, "Is the patient receiving metformin?");
    let schema = model.requests()[1].json_schema.clone().unwrap();
    assert!(schema["properties"]["steps"]["items"]["properties"]["arguments"]["properties"]
        .get("calculator")
        .is_some());
}

/// The typed plan offers a calculate step only when the question calls
/// for a calculator: the ones it names; all for a score question that names
/// none (or an unstated answer type); none for a yes/no question or one
/// asking for dates or intervals.
#[test]
fn the_typed_plan_offers_only_the_calculators_the_question_calls_for() {
    let calculators = |question: &str, answer_type: Option<AnswerType>| {
        let model = scripted(&[
            ASSESS.to_string(),
            plan(json!([step(1, "search_reports", json!({"query": "echocardiogram"}))])),
            action("call_tool", Some("search_reports"), json!({"query": "echocardiogram"})),
            action("finish", None, json!({})),
            "Answer: No\nReasoning: Nothing found.".to_string(),
        ]);
        run_typed(&model, Method::Agent, question, answer_type);
        let schema = model.requests()[1].json_schema.clone().unwrap();
        let steps = schema["properties"]["steps"]["items"]["anyOf"].as_array().unwrap().clone();
        steps.iter().find(|b| b["properties"]["tool"]["const"] == "calculate").map(|b| {
            b["properties"]["arguments"]["anyOf"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["properties"]["calculator"]["const"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        })
    };
    let echo = "Is there documented evidence that an echocardiogram has been performed?";
    assert_eq!(calculators(echo, Some(AnswerType::YesNo)), None);
    assert_eq!(calculators(echo, None).map(|c| c.len()), Some(evident_chart::calculators::Calculator::ALL.len()));
    let iss = "What is the ISS stage at diagnosis?";
    assert_eq!(calculators(iss, Some(AnswerType::Score)), Some(vec!["iss".to_string()]));
    assert_eq!(calculators(iss, Some(AnswerType::Category)), Some(vec!["iss".to_string()]), "named");
    assert_eq!(calculators("What is the stage?", Some(AnswerType::Score)).map(|c| c.len()), Some(10));
    // A question for dates or intervals gets none, though it names one.
    let obesity = "In which documented intervals was Body mass index 30+ - obesity (finding) active?";
    assert_eq!(calculators(obesity, Some(AnswerType::IntervalList)), None);
    assert_eq!(calculators("When was the BMI first above 30?", Some(AnswerType::Date)), None);
    assert_eq!(calculators("What is the BMI category?", Some(AnswerType::Category)), Some(vec!["bmi".to_string()]));
    let range = "Which glycaemic range (normal below 5.7%, prediabetes 5.7-6.4%, diabetes 6.5% or more) does the last HbA1c fall in?";
    assert_eq!(calculators(range, Some(AnswerType::Category)), Some(vec!["glycaemic-range".to_string()]));
    assert_eq!(calculators("What was the last HbA1c?", Some(AnswerType::Category)), None, "a value, not its range");
    let stage =
        "What is the CKD G stage (G1, G2, G3a, G3b, G4, G5) on 2021-01-23, from the last eGFR at most 90 days before?";
    assert_eq!(calculators(stage, Some(AnswerType::Category)), Some(vec!["ckd-g-stage".to_string()]));
    let computed = "What is the eGFR by CKD-EPI on 2021-01-23?";
    assert_eq!(calculators(computed, Some(AnswerType::Score)), Some(vec!["egfr-ckd-epi-2021".to_string()]));
}

#[test]
fn a_calculator_named_in_retrieval_arguments_is_run_as_the_calculator() {
    // What the embedded model did on the example myeloma records: the plan
    // step's tool is a retrieval tool and its arguments name the calculator.
    let script = || {
        scripted(&[
            ASSESS.to_string(),
            plan(json!([step(
                1,
                "query_labs",
                json!({"concepts": ["Albumin"], "calculator": "iss", "inputs": {"last_available": 20231231}})
            )])),
            // The action takes the step's tool and arguments.
            action("call_tool", None, json!({})),
            // A round's action names a calculator for a retrieval tool too.
            action(
                "call_tool",
                Some("query_records"),
                json!({"record": "conditions", "calculator": "r-iss",
                       "inputs": {"del_17p": false, "t_4_14": false, "t_14_16": false, "bogus": 1}}),
            ),
            action("finish", None, json!({})),
            "Answer: II\nReasoning: ISS II [1].".to_string(),
        ])
    };
    let model = script();
    let out = run(&model, Method::Agent, "What are the ISS and R-ISS stages?");
    assert!(model.exhausted());
    let typed = out.trace.plan.as_ref().unwrap();
    assert_eq!(typed.steps[0].tool, "calculate", "{typed:?}");
    assert_eq!(typed.steps[0].arguments, json!({"calculator": "iss"}), "{typed:?}");
    assert_eq!(out.trace.plan_rewrites.len(), 1, "{:?}", out.trace.plan_rewrites);
    assert!(out.trace.plan_rewrites[0].contains("query_labs arguments named the calculator iss"));
    let rounds: Vec<_> = out.trace.rounds.iter().filter(|r| r.action == "call_tool").collect();
    assert_eq!(rounds[0].tool.as_deref(), Some("calculate"), "{:?}", rounds[0]);
    assert_eq!(rounds[1].tool.as_deref(), Some("calculate"), "{:?}", rounds[1]);
    assert_eq!(
        rounds[1].arguments.as_ref().unwrap(),
        &json!({"calculator": "r-iss", "inputs": {"del_17p": false, "t_4_14": false, "t_14_16": false}})
    );
    assert!(rounds[1].adjustments.iter().any(|a| a.contains("query_records arguments named the calculator r-iss")));
    let calculations: Vec<String> = out
        .context
        .iter()
        .filter_map(|n| match n {
            evident_chart::Evidence::Calculation { calculator, output, .. } => Some(format!("{calculator} {output}")),
            _ => None,
        })
        .collect();
    assert_eq!(calculations.len(), 2, "{calculations:?}");
    assert!(calculations[0].starts_with("iss") && calculations[1].starts_with("r-iss"), "{calculations:?}");

    // A question for a date is read from the record: no calculator runs.
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "query_labs", json!({"concepts": ["Albumin"]}))])),
        action("call_tool", Some("query_labs"), json!({"concepts": ["Albumin"], "calculator": "bmi"})),
        action("finish", None, json!({})),
        "Answer: 2023-11-20\nReasoning: Measured [1].".to_string(),
    ]);
    let out = run_typed(&model, Method::Agent, "When was the BMI first above 30?", Some(AnswerType::Date));
    let calls: Vec<_> = out.trace.rounds.iter().filter(|r| r.action == "call_tool").collect();
    assert_eq!(calls[0].tool.as_deref(), Some("query_labs"), "{:?}", calls[0]);
    assert!(calls[0].adjustments.iter().any(|a| a.contains("a date is read from the record")), "{:?}", calls[0]);
    assert!(out.trace.rounds.iter().all(|r| r.tool.as_deref() != Some("calculate")), "{:?}", out.trace.rounds);

    // The paper's plan keeps the retrieval tool and drops the calculator.
    let model = script();
    let out = run(&model, Method::AgentPaperPlan, "What are the ISS and R-ISS stages?");
    assert_eq!(out.trace.plan.as_ref().unwrap().steps[0].tool, "query_labs");
    assert!(out.trace.plan_rewrites.is_empty());
    assert!(out.trace.rounds.iter().all(|r| r.tool.as_deref() != Some("calculate")), "{:?}", out.trace.rounds);
}

/// The agent with every skill selected (the unfiltered ablation) on a
/// context of `limit` tokens.
fn all_skills_with_context(model: &Scripted, limit: Option<usize>) -> ChartAnswer {
    let store = store();
    let view = RecordView::new(&store, "P1", day(AS_OF).date().and_hms_opt(23, 59, 59).unwrap());
    let skills = SkillLibrary::builtin().unwrap();
    let config = Method::AgentAllSkills
        .agent_config(&AgentConfig { model_context_tokens: limit, ..AgentConfig::default() })
        .unwrap();
    let q = Question {
        text: "Is the patient receiving metformin?",
        answer_type: None,
        method: Method::AgentAllSkills,
        skills: &skills,
        config: &config,
        patient: "female, 67 years".into(),
        embedder: None,
    };
    ask(StructuredModel::recorded(model), &prompts(None), &view, &q).unwrap()
}

#[test]
fn plan_requests_and_repairs_are_shortened_to_fit_a_small_context() {
    // A plan that is JSON but invalid (search_reports without its query,
    // an objective far over its 80 characters, as a plan cut at its token
    // limit is long), then a valid one.
    let mut long = step(1, "search_reports", json!({"k": 5}));
    long["objective"] = json!("find the metformin documentation ".repeat(70));
    let invalid = plan(json!([long]));
    let script = || {
        scripted(&[
            ASSESS.to_string(),
            invalid.clone(),
            plan(json!([step(1, "search_reports", json!({"query": "metformin"}))])),
            action("call_tool", Some("search_reports"), json!({"query": "metformin"})),
            action("finish", None, json!({})),
            "Answer: Yes\nReasoning: Started [1].".to_string(),
        ])
    };
    // Unlimited: every skill's instructions, the repair after the invalid plan.
    let wide = script();
    let out = all_skills_with_context(&wide, None);
    assert!(wide.exhausted());
    assert!(out.trace.prompt_shortened.is_empty());
    let full_plan_request = estimate(&wide.requests()[1].messages);
    let repair = &wide.requests()[2];
    assert_eq!(repair.messages.len(), 4, "plan request, invalid plan, repair");
    let errors = &repair.messages[3].content;
    assert!(errors.contains("query"), "the repair names the error: {errors}");
    assert!(!errors.contains("\"properties\""), "no second copy of the schema: {errors}");

    // Too small for every skill's instructions and a 1,024-token plan.
    let limit = full_plan_request + 1024 - 150;
    let narrow = script();
    let out = all_skills_with_context(&narrow, Some(limit));
    assert!(narrow.exhausted(), "{}", out.trace.stopped_because);
    assert_eq!(out.status, "answered");
    let requests = narrow.requests();
    // The plan request leaves room for the plan and Phase III's first
    // round (its system prompt and request are Phase III's prefix), a
    // repair for the plan.
    let plan_request = estimate(&requests[1].messages);
    assert!(plan_request + 1024 + 584 <= limit, "{plan_request} + 1024 + 584 of {limit}");
    assert!(estimate(&requests[2].messages) + 1024 <= limit, "{} + 1024 of {limit}", estimate(&requests[2].messages));
    assert!(out.trace.rounds.iter().any(|r| r.action == "call_tool"), "{:?}", out.trace);
    let shortened = &out.trace.prompt_shortened;
    assert!(
        shortened[0].starts_with("plan request: skill ") && shortened[0].contains("shown by its summary"),
        "{shortened:?}"
    );
    assert!(requests[1].messages[0].content.contains("summary only"));
    // The repair: first its copy of the invalid plan leaves, the errors stay.
    assert!(shortened.iter().any(|s| s.starts_with("plan repair 1: the invalid plan left out")), "{shortened:?}");
    assert!(requests[2].messages.iter().all(|m| m.role != evident_llm::Role::Assistant));
    assert!(requests[2].messages.last().unwrap().content.contains("That plan is not valid"));
    // The lowest-priority skills go first: not one the model chose.
    let first = shortened[0].trim_start_matches("plan request: skill ").split(' ').next().unwrap();
    assert!(first != "current-medication-status" && first != "drug-synonyms", "{first}");
    // Phase III keeps the shortened system prompt as its prefix.
    assert_eq!(requests[3].messages[0], requests[2].messages[0]);
}

#[test]
fn a_plan_request_that_cannot_fit_is_a_pipeline_failure_before_the_model_is_called() {
    let model = scripted(&[ASSESS]);
    let out = all_skills_with_context(&model, Some(1500));
    assert!(model.exhausted());
    assert_eq!(model.requests().len(), 1, "only the assessment was sent");
    assert_eq!(out.status, "pipeline_failure");
    let failures = model.failures();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].attempts, 0);
    assert!(failures[0].errors[0].contains("does not fit the model's context"), "{:?}", failures[0].errors);
    assert!(failures[0].errors[0].contains("every skill shown by its summary"), "{:?}", failures[0].errors);
    assert!(out.trace.stopped_because.contains("the model was not called"), "{}", out.trace.stopped_because);
    assert!(!out.trace.prompt_shortened.is_empty());
}

#[test]
fn a_calculator_already_called_lets_the_retrieval_call_run() {
    // The embedded model names the calculator in the action of every
    // step; once it has run, the step's own retrieval call runs.
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([
            step(1, "calculate", json!({"calculator": "iss"})),
            step(2, "query_labs", json!({"concepts": ["Albumin"]}))
        ])),
        action("call_tool", None, json!({})),
        action("call_tool", Some("query_labs"), json!({"concepts": ["Albumin"], "calculator": "iss"})),
        action("finish", None, json!({})),
        "Answer: II\nReasoning: ISS II [1].".to_string(),
    ]);
    let out = run(&model, Method::Agent, "What is the ISS stage?");
    assert!(model.exhausted(), "{:?}", out.trace.rounds);
    let calls: Vec<_> = out.trace.rounds.iter().filter(|r| r.action == "call_tool").collect();
    assert_eq!(calls.len(), 2, "{:?}", out.trace.rounds);
    assert_eq!(calls[0].tool.as_deref(), Some("calculate"));
    assert_eq!(calls[1].tool.as_deref(), Some("query_labs"), "{:?}", calls[1]);
    assert_eq!(calls[1].arguments.as_ref().unwrap(), &json!({"concepts": ["Albumin"]}));
    assert!(calls[1].adjustments.iter().any(|a| a.contains("already called")), "{:?}", calls[1]);
    assert_eq!(calls[1].evidence_found, 2, "{:?}", calls[1]);
}

#[test]
fn a_calculator_the_question_does_not_name_is_not_run() {
    // The embedded model wrote "calculator": "iss" into a report search
    // about a colon polyp: the search runs, the calculator does not.
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "search_reports", json!({"query": "metformin"}))])),
        action("call_tool", Some("search_reports"), json!({"query": "metformin", "calculator": "iss"})),
        action("finish", None, json!({})),
        "Answer: Yes\nReasoning: Started [1].".to_string(),
    ]);
    let out = run(&model, Method::Agent, "Is the patient receiving metformin?");
    let r = &out.trace.rounds[0];
    assert_eq!(r.tool.as_deref(), Some("search_reports"), "{r:?}");
    assert!(r.adjustments.iter().any(|a| a.contains("which the question does not name")), "{r:?}");
    assert!(r.evidence_found >= 1, "{r:?}");
}

#[test]
fn a_retrieval_call_naming_another_calculator_runs_the_one_the_question_names() {
    // The embedded model wrote "calculator": "r-iss" into every action of a
    // CHA2DS2-VASc question: the calculation meant is the question's.
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "query_records", json!({"record": "conditions", "calculator": "r-iss"}))])),
        action(
            "call_tool",
            Some("query_labs"),
            json!({"concepts": ["Albumin"], "calculator": "r-iss", "inputs": {"del_17p": true, "hypertension": true}}),
        ),
        action(
            "call_tool",
            Some("query_labs"),
            json!({"concepts": ["Albumin"], "calculator": "r-iss", "inputs": {"hypertension": true}}),
        ),
        action("finish", None, json!({})),
        "Answer: 1\nReasoning: Scored [1].".to_string(),
    ]);
    let out = run(&model, Method::Agent, "What is the CHA2DS2-VASc score on 2020-09-30?");
    assert!(model.exhausted(), "{:?}", out.trace.rounds);
    let planned = out.trace.plan.as_ref().unwrap();
    assert_eq!(planned.steps[0].arguments, json!({"calculator": "cha2ds2-vasc"}), "{planned:?}");
    let calls: Vec<_> = out.trace.rounds.iter().filter(|r| r.action == "call_tool").collect();
    assert_eq!(calls[0].tool.as_deref(), Some("calculate"), "{:?}", calls[0]);
    // Only the inputs the meant calculator takes are kept.
    assert_eq!(
        calls[0].arguments.as_ref().unwrap(),
        &json!({"calculator": "cha2ds2-vasc", "inputs": {"hypertension": true}}),
        "{:?}",
        calls[0]
    );
    assert!(calls[0].adjustments.iter().any(|a| a.contains("but the question names cha2ds2-vasc")), "{:?}", calls[0]);
    // Once made, the calculation is not made again: the lab query runs.
    assert_eq!(calls[1].tool.as_deref(), Some("query_labs"), "{:?}", calls[1]);
    // A question naming two calculators does not choose between them.
    let model = scripted(&[
        ASSESS.to_string(),
        plan(json!([step(1, "query_labs", json!({"concepts": ["Albumin"]}))])),
        action("call_tool", Some("query_labs"), json!({"concepts": ["Albumin"], "calculator": "cha2ds2-vasc"})),
        action("finish", None, json!({})),
        "Answer: II\nReasoning: Staged [1].".to_string(),
    ]);
    let out = run(&model, Method::Agent, "What are the ISS and R-ISS stages?");
    let r = &out.trace.rounds[0];
    assert_eq!(r.tool.as_deref(), Some("query_labs"), "{r:?}");
    assert!(r.adjustments.iter().any(|a| a.contains("which the question does not name")), "{r:?}");
}

#[test]
fn a_question_names_a_calculator_by_its_own_label_only() {
    use evident_chart::calculators::Calculator;
    let names = |q: &str| -> Vec<&str> {
        Calculator::ALL.into_iter().filter(|c| evident_chart::question_names(q, *c)).map(|c| c.name()).collect()
    };
    assert_eq!(names("R2-ISS stage on 2017-02-20 (labs ≤90 days)?"), ["r2-iss"]);
    assert_eq!(names("R-ISS stage at diagnosis?"), ["r-iss"]);
    assert_eq!(names("What is the ISS stage?"), ["iss"]);
    assert_eq!(names("What is the CHA2DS2-VASc score on 2020-09-30?"), ["cha2ds2-vasc"]);
    assert!(names("When was Polyp of colon first documented?").is_empty());
    assert!(names("Was a mission statement documented?").is_empty());
}

/// CHA2DS2-VASc's conditions come from the stored problem list, dated on
/// or before the reference date, each cited: the embedded model called the
/// calculator with age and sex only, and a documented hypertension never
/// counted. Prediabetes is not diabetes; a heart failure listed after the
/// reference date is not seen.
#[test]
fn cha2ds2_vasc_reads_its_conditions_from_the_stored_problem_list_never_from_the_call() {
    let store = store();
    let text = "Conditions on 2023-05-01\n\
        - 2023-05-01 10:00: Essential hypertension (disorder) (active) [SNOMED 59621000] [Condition/h1]\n\
        - 2023-05-01 10:00: Prediabetes (finding) (active) [SNOMED 714628002] [Condition/p1]\n";
    let later = "Conditions on 2024-02-01\n- 2024-02-01 10:00: Chronic congestive heart failure (disorder) (active) [Condition/f1]\n";
    {
        let mut guard = store.lock().unwrap();
        let w = guard.writer().unwrap();
        for (id, date, text) in [("pl1", "2023-05-01", text), ("pl2", "2024-02-01", later)] {
            support::put_document(&w, id, evident_model::DocKind::ProblemList, date, text);
        }
        w.commit().unwrap();
    }
    let view = RecordView::new(&store, "P1", day(AS_OF));
    let out = view.run(ToolName::Calculate, &json!({"calculator": "cha2ds2-vasc"})).unwrap();
    let Evidence::Calculation { inputs, output, used, .. } = &out.evidence[0] else { panic!("{:?}", out.evidence) };
    // P1: female, 67 on 2023-12-31 (age 65-74: 1), hypertension 1.
    assert_eq!(inputs["hypertension"], true, "{inputs}");
    assert!(inputs.get("diabetes").is_none_or(|d| d == false), "prediabetes does not count: {inputs}");
    assert!(inputs.get("congestive_heart_failure").is_none_or(|d| d == false), "listed after the reference date");
    assert_eq!(output["score"], 3.0, "female 1 + age 65-74 1 + hypertension 1: {output}");
    let cited: Vec<String> = used.iter().map(Evidence::text).collect();
    assert!(cited.iter().any(|t| t.contains("Essential hypertension") && t.contains("Condition/h1")), "{cited:?}");
    assert!(!cited.iter().any(|t| t.contains("Prediabetes")), "{cited:?}");

    // The call's conditions are not used: on a MIMIC-IV patient the model
    // called it with conditions no record shows, and scored 8 for the
    // record's 5. The list decides each one, both ways.
    let asserted = json!({"calculator": "cha2ds2-vasc", "inputs": {
        "hypertension": false, "diabetes": true, "stroke_tia_thromboembolism": true, "vascular_disease": true}});
    let out = view.run(ToolName::Calculate, &asserted).unwrap();
    let Evidence::Calculation { inputs, output, .. } = &out.evidence[0] else { panic!("{:?}", out.evidence) };
    assert_eq!(output["score"], 3.0, "the record's score, not the call's: {output}");
    assert_eq!(inputs["hypertension"], true, "{inputs}");
    for absent in ["diabetes", "stroke_tia_thromboembolism", "vascular_disease", "congestive_heart_failure"] {
        assert_eq!(inputs[absent], false, "{absent}: {inputs}");
    }
    let note = out.note.as_deref().unwrap_or_default();
    for set_aside in ["diabetes", "stroke_tia_thromboembolism", "vascular_disease"] {
        assert!(note.contains(&format!("the call's {set_aside} true is not used")), "{note}");
    }
    assert!(note.contains("no problem-list entry on or before 2023-12-31"), "{note}");

    // Before the problem list's date the notes are read: d1 affirms type 2
    // diabetes; hypertension is nowhere in them.
    let before = RecordView::new(&store, "P1", day("2023-04-30"));
    let out = before.run(ToolName::Calculate, &asserted).unwrap();
    let Evidence::Calculation { inputs, output, used, .. } = &out.evidence[0] else { panic!("{:?}", out.evidence) };
    assert_eq!(output["score"], 3.0, "female 1 + age 67 1 + diabetes 1: {output}");
    assert_eq!((&inputs["diabetes"], &inputs["hypertension"]), (&json!(true), &json!(false)), "{inputs}");
    assert!(used.iter().any(|e| e.document_id() == Some("d1")), "{used:?}");
    let note = out.note.as_deref().unwrap_or_default();
    assert!(
        note.contains("the call's stroke_tia_thromboembolism true is not used: the record has no problem list"),
        "{note}"
    );
    assert!(!note.contains("diabetes"), "the notes show it: {note}");
}

/// MIMIC-IV gives an age in an anchor year, not a birth date. The
/// calculator is scored where every age the anchor allows gives one result
/// (the age shown as that range, the demographics line cited), and not
/// where the range straddles an age band; before the line's date the line
/// is not seen.
#[test]
fn an_anchor_age_scores_a_calculator_only_where_every_age_it_allows_agrees() {
    use evident_model::{DocKind, Patient};
    let mut store = evident_store::Store::open_in_memory().unwrap();
    {
        let w = store.writer().unwrap();
        let patient = Patient {
            id: "P2".into(),
            source: "mimic".into(),
            birth_date: None,
            sex: Some("M".into()),
            display_name: None,
        };
        w.upsert_patient(&patient).unwrap();
        let text = "Demographics\n- 2150-01-01 00:00: Sex M; age 70 in anchor year 2150 (real years 2014 - 2016) [patients/P2]\n";
        support::put_document_of(&w, "P2", "mimic:demographics:P2", DocKind::Other, "2150-01-01", text);
        // CHA2DS2-VASc reads its conditions from a problem list (none here).
        let list = "Diagnoses\n- 2140-01-01 00:00: ICD-10 K219: Gastro-esophageal reflux disease without esophagitis [diagnoses_icd/P2/1]\n";
        support::put_document_of(&w, "P2", "mimic:diagnoses:P2", DocKind::ProblemList, "2140-01-01", list);
        w.commit().unwrap();
    }
    let store = std::sync::Mutex::new(store);
    let score = |on: &str| {
        let view = RecordView::new(&store, "P2", day(on));
        view.run(ToolName::Calculate, &json!({"calculator": "cha2ds2-vasc", "inputs": {"age_years": 30}})).unwrap()
    };
    // Aged 70 at some time in 2150 (born 2079-01-02 to 2080-12-31): 71 to
    // 73 in mid 2152, all 65-74 (1 point).
    let out = score("2152-06-01");
    let Evidence::Calculation { inputs, output, used, .. } = &out.evidence[0] else { panic!("{out:?}") };
    assert_eq!(inputs["age_years"], "71-73", "the call's 30 is not used: {inputs}");
    assert_eq!(output["score"], 1.0, "{output}");
    assert!(used.iter().any(|e| e.text().contains("age 70 in anchor year 2150")), "{used:?}");
    // 74 to 76 in mid 2155: 1 or 2 points, so no score.
    let out = score("2155-06-01");
    assert!(!out.evidence.iter().any(|e| matches!(e, Evidence::Calculation { .. })), "{out:?}");
    let note = out.note.unwrap();
    assert!(note.contains("74-76") && note.contains("differs"), "{note}");
    // Before the demographics line's date the record gives no age, so the
    // call's stands, as it does wherever the store has none.
    let out = score("2149-06-01");
    let Evidence::Calculation { inputs, .. } = &out.evidence[0] else { panic!("{out:?}") };
    assert_eq!(inputs["age_years"], 30, "{inputs}");
}

/// A first-occurrence question whose plan searches the most recent
/// document only.
fn first_metformin_most_recent() -> Scripted {
    let assess = r#"{"intent": "first metformin mention", "hypotheses": [], "required_information": ["metformin"], "missing_information": [], "complexity": "low", "skills": ["first-occurrence"]}"#;
    let search = json!({"query": "metformin", "scope": "most_recent"});
    scripted(&[
        assess.to_string(),
        plan(json!([step(1, "search_reports", search.clone())])),
        action("call_tool", Some("search_reports"), search),
        action("finish", None, json!({})),
        "Answer: 2023-01-10\nReasoning: Metformin was planned on 2023-01-10 [1].".to_string(),
    ])
}

#[test]
fn a_first_occurrence_question_searches_the_whole_history_and_the_papers_scope_does_not() {
    let question = "When was metformin first documented?";
    let out = run(&first_metformin_most_recent(), Method::Agent, question);
    let call = &out.trace.rounds[0];
    assert_eq!(call.arguments.as_ref().unwrap()["scope"], "all", "{call:?}");
    assert!(call.adjustments.iter().any(|a| a.contains("scope most_recent -> all")), "{call:?}");
    let documents: Vec<_> = out.context.iter().filter_map(|n| n.document_id()).collect();
    assert!(documents.contains(&"d1") && documents.contains(&"d2"), "{documents:?}");

    // The paper's method runs the scope as written: the most recent
    // document only (the CT of 2023-06-01), which does not mention it.
    let out = run(&first_metformin_most_recent(), Method::AgentPaperScope, question);
    let call = &out.trace.rounds[0];
    assert_eq!(call.arguments.as_ref().unwrap()["scope"], "most_recent", "{call:?}");
    assert_eq!(call.evidence_found, 0, "{call:?}");

    // A question about the present keeps its most recent scope.
    let out = run(&first_metformin_most_recent(), Method::Agent, "Is the patient receiving metformin?");
    assert_eq!(out.trace.rounds[0].arguments.as_ref().unwrap()["scope"], "most_recent");
}

#[test]
fn a_record_query_keeps_the_entries_holding_the_most_query_words() {
    // Thirty-two later tablet prescriptions, and the penicillin line first.
    let store = store();
    {
        let mut s = store.lock().unwrap();
        let w = s.writer().unwrap();
        support::put_document(
            &w,
            "m0",
            evident_model::DocKind::MedicationList,
            "2009-11-17",
            "Medications on 2009-11-17\n- 2009-11-17 19:20: Penicillin V Potassium 500 MG Oral Tablet (stopped) [MedicationRequest/p0]\n",
        );
        for i in 0..32 {
            let date = format!("2010-{:02}-{:02}", i / 28 + 1, i % 28 + 1);
            let text = format!("Medications on {date}\n- {date} 10:00: Acetaminophen 325 MG Oral Tablet (stopped) [MedicationRequest/a{i}]\n");
            support::put_document(&w, &format!("m{}", i + 1), evident_model::DocKind::MedicationList, &date, &text);
        }
        w.commit().unwrap();
    }
    let view = RecordView::new(&store, "P1", day(AS_OF));
    let args = json!({"record": "medications", "query": "penicillin v potassium 500 mg oral tablet"});
    let out = view.run(ToolName::QueryRecords, &args).unwrap();
    assert_eq!(out.evidence.len(), 30, "at most thirty entries");
    assert!(out.evidence[0].text().contains("Penicillin"), "{:?}", out.evidence[0]);
    // Among entries holding as many words, the newest come first.
    assert!(out.evidence[1].text().contains("2010-02-04"), "{:?}", out.evidence[1]);
}

#[test]
fn results_that_do_not_name_the_subject_broaden_the_next_search_and_the_papers_broadening_does_not() {
    let model = || {
        three_searches(
            json!({"query": "CT abdomen diabetes", "kind": "progress_note"}),
            "Answer: Yes\nReasoning: CT abdomen on 2023-06-01 [1].",
        )
    };
    let question = "Has the patient had a CT of the abdomen?";
    // The diabetes notes match the query but do not name a CT of the
    // abdomen: the repeated search runs broadened to the last level at
    // once, without its kind filter.
    let out = run(&model(), Method::Agent, question);
    let rounds = &out.trace.rounds;
    assert!(rounds[0].evidence_found > 0, "{:?}", rounds[0]);
    assert!(
        rounds[0].notice.as_deref().is_some_and(|n| n.contains("no result names \"ct abdomen\"")),
        "{:?}",
        rounds[0]
    );
    assert!(rounds[1].adjustments.iter().any(|a| a.contains("kind filter removed")), "{:?}", rounds[1]);
    assert!(rounds[1].evidence_found > 0 && rounds[1].notice.is_none(), "{:?}", rounds[1]);
    assert!(out.context.iter().any(|n| n.document_id() == Some("d3")), "{:?}", out.context);

    // The paper's broadening follows empty results only: the repeated
    // search is blocked and the CT is never found.
    let out = run(&model(), Method::AgentPaperBroadening, question);
    let rounds = &out.trace.rounds;
    assert_eq!(rounds[1].action, "call_tool (blocked)", "{:?}", rounds[1]);
    assert!(rounds[0].notice.is_none(), "{:?}", rounds[0]);
    assert!(out.context.iter().all(|n| n.document_id() != Some("d3")), "{:?}", out.context);
}

/// The fixture with vital signs: an observation timeline of 2023-10-01
/// (weight 82.5 kg, height 170 cm) and a note of 2023-12-01 that writes a
/// newer weight in prose.
fn store_with_vitals() -> std::sync::Mutex<evident_store::Store> {
    let store = store();
    {
        let mut s = store.lock().unwrap();
        let w = s.writer().unwrap();
        support::put_document(
            &w,
            "v1",
            evident_model::DocKind::Other,
            "2023-10-01",
            "Observations 2023-10-01\n- 2023-10-01 09:00: Body Weight: 82.5 kg [Observation/w1]\n- 2023-10-01 09:00: Body Height: 170 cm [Observation/h1]\n",
        );
        support::put_document(
            &w,
            "v2",
            evident_model::DocKind::ProgressNote,
            "2023-12-01",
            "Vitals.\nWeight loss of 2 kg since October. Weight 80.5 kg today.\n",
        );
        w.commit().unwrap();
    }
    store
}

/// A question that names one calculator ends retrieval with it run on the
/// record when the model never called it (`d5525459-G26`: the plan searched
/// and answered "Not documented" beside a BMI); not in the no-calculators
/// ablation, and not twice.
#[test]
fn a_question_naming_a_calculator_gets_it_run_when_retrieval_ends() {
    let store = store_with_vitals();
    let question = "What is the adult BMI category (underweight, normal, overweight, obese) on 2023-12-31, from the last BMI at most 365 days before?";
    let criteria = evident_chart::criteria::CriteriaSets::builtin();
    let answer = "Answer: overweight\nReasoning: BMI 27.9 [1].";
    let ask_with = |method: Method, search: Value| {
        let model = three_searches_of("search_reports", search, answer);
        ask_of_p1(&store, &model, question, Some(AnswerType::Category), method, criteria)
    };
    let out = ask_with(Method::Agent, json!({"query": "CT"}));
    let checks: Vec<_> = out.trace.rounds.iter().filter(|r| r.action.starts_with("calculator check")).collect();
    assert_eq!(checks.len(), 1, "{:?}", out.trace.rounds);
    assert_eq!(checks[0].evidence_found, 1, "{:?}", checks[0]);
    let bmi = out.context.iter().find_map(|n| match n {
        Evidence::Calculation { calculator, output, .. } if calculator == "bmi" => Some(output.clone()),
        _ => None,
    });
    assert_eq!(bmi.expect("the BMI calculation is a context item")["reported"], 27.9);
    assert!(matches!(out.context[0], Evidence::Calculation { .. }), "in front: {:?}", out.context[0]);

    let out = ask_with(Method::AgentNoCalculators, json!({"query": "CT"}));
    assert!(out.trace.rounds.iter().all(|r| !r.action.starts_with("calculator check")), "{:?}", out.trace.rounds);

    // The model called it: no second run.
    let model = three_searches_of("calculate", json!({"calculator": "bmi"}), answer);
    let out = ask_of_p1(&store, &model, question, Some(AnswerType::Category), Method::Agent, criteria);
    assert!(out.trace.rounds.iter().any(|r| r.tool.as_deref() == Some("calculate")), "{:?}", out.trace.rounds);
    assert!(out.trace.rounds.iter().all(|r| !r.action.starts_with("calculator check")), "{:?}", out.trace.rounds);
}

/// On the embedded model (the constrained answer step), where the answer
/// step's schema admits one answer and Evident writes its reasoning (here
/// from the BMI calculation), no model is asked for the two lines: the
/// answer is the calculation's, the reasoning Evident's, the trace says
/// so and no model text is stored; likewise a score the named calculator
/// gives. Where the schema admits more (the no-calculators ablation), the
/// model is asked as before.
#[test]
fn an_answer_the_calculation_decides_is_written_without_asking_the_model() {
    let store = store_with_vitals();
    let question = "What is the adult BMI category (underweight, normal, overweight, obese) on 2023-12-31, from the last BMI at most 365 days before?";
    let criteria = evident_chart::criteria::CriteriaSets::builtin();
    let answer = json!({"answer": "obese", "reasoning": "BMI [1]."}).to_string();
    let embedded = |method: Method| method.agent_config(&AgentConfig::default().with_model_context(32_768)).unwrap();
    let model = three_searches_of("calculate", json!({"calculator": "bmi"}), &answer);
    let out = ask_of_p1_with(
        &store,
        &model,
        question,
        Some(AnswerType::Category),
        Method::Agent,
        criteria,
        &embedded(Method::Agent),
    );
    assert_eq!(out.answer.as_deref(), Some("overweight"), "{:?}", out.failure);
    let reasoning = out.reasoning.unwrap();
    assert!(reasoning.starts_with("bmi gives 27.9 kg/m2 (overweight) [1]"), "{reasoning}");
    assert_eq!(out.trace.synthesis_attempts, 0);
    let from = out.trace.reasoning_from.unwrap_or_default();
    assert!(from.starts_with("the calculation [1]") && from.contains("no model was asked"), "{from}");
    assert_eq!(out.raw_text, "");
    assert!(out.citations.iter().all(|c| c.supported) && out.citations.len() == 1, "{:?}", out.citations);
    let requests = model.requests();
    assert!(requests.len() >= 3, "assessment, plan, actions: {}", requests.len());
    let answer_step =
        |r: &evident_llm::ChatRequest| r.json_schema.as_ref().is_some_and(|s| s["properties"]["reasoning"].is_object());
    assert!(!requests.iter().any(answer_step));

    // A score the calculator the question names gives: the baseline
    // prompt's "<value>; <date of the inputs>; <source>", no model asked.
    let iss = "What is the ISS stage on 2023-12-31?";
    let model = three_searches_of("calculate", json!({"calculator": "iss"}), &answer);
    let config = embedded(Method::Agent);
    let out = ask_of_p1_with(&store, &model, iss, Some(AnswerType::Score), Method::Agent, criteria, &config);
    let stage = out.answer.unwrap_or_default();
    assert!(stage.starts_with("I; 20") && stage.ends_with("; iss calculation"), "{stage}");
    assert_eq!(out.trace.synthesis_attempts, 0);
    assert!(out.reasoning.unwrap_or_default().starts_with("iss gives I [1]"));
    assert!(!model.requests().iter().any(answer_step));

    let model = three_searches_of("search_reports", json!({"query": "weight"}), &answer);
    let method = Method::AgentNoCalculators;
    let out = ask_of_p1_with(&store, &model, question, Some(AnswerType::Category), method, criteria, &embedded(method));
    assert!(out.trace.synthesis_attempts >= 1, "{:?}", out.failure);
    assert_eq!(out.trace.reasoning_from, None);
    assert!(model.requests().last().is_some_and(answer_step));
}

/// The embedded model called the BMI calculator with a weight of 1 kg and a
/// height of 1 m, cited to nothing. Numbers the call gives are never used:
/// the newest weight and height on or before the reference date are read
/// from the record (prose cited as its section, a timeline line as its
/// entry); an input the record does not give is named, not taken from the call.
#[test]
fn a_calculators_numbers_come_from_the_record_never_from_the_call() {
    let store = store_with_vitals();
    let view = RecordView::new(&store, "P1", day(AS_OF).date().and_hms_opt(23, 59, 59).unwrap());
    let bmi = json!({"calculator": "bmi", "inputs": {"weight_kg": 1, "height_m": 1}});
    let out = view.run(ToolName::Calculate, &bmi).unwrap();
    let [Evidence::Calculation { inputs, output, used, .. }] = out.evidence.as_slice() else { panic!("{out:?}") };
    assert_eq!(inputs["weight_kg"], 80.5, "the note of 2023-12-01 is newer than the observation");
    assert!((inputs["height_m"].as_f64().unwrap() - 1.70).abs() < 1e-9, "{inputs}");
    assert_eq!(output["reported"], 27.9, "{output}");
    assert!(matches!(&used[0], Evidence::Section { document_id, .. } if document_id == "v2"), "{used:?}");
    assert!(matches!(&used[1], Evidence::Entry { record, .. } if record == "Observation/h1"), "{used:?}");

    // Before the note, the observation's weight counts.
    let view = RecordView::new(&store, "P1", day("2023-11-01"));
    let out = view.run(ToolName::Calculate, &bmi).unwrap();
    let [Evidence::Calculation { inputs, .. }] = out.evidence.as_slice() else { panic!("{out:?}") };
    assert_eq!(inputs["weight_kg"], 82.5);

    // No creatinine anywhere: eGFR is not computable, and the call's value
    // is named as not used.
    let egfr = json!({"calculator": "egfr-ckd-epi-2021", "inputs": {"creatinine_mg_dl": 1.0}});
    let out = view.run(ToolName::Calculate, &egfr).unwrap();
    assert!(out.evidence.iter().all(|e| !matches!(e, Evidence::Calculation { .. })), "{out:?}");
    let note = out.note.unwrap_or_default();
    assert!(note.contains("not computable") && note.contains("creatinine_mg_dl"), "{note}");
    assert!(note.contains("the call's 1.0 is not used"), "{note}");

    // ISS: the stored labs win over the call's numbers, as before.
    let view = RecordView::new(&store, "P1", day(AS_OF));
    let iss = json!({"calculator": "iss", "inputs": {"albumin_g_dl": 0.00001, "beta2_microglobulin_mg_l": 9.0}});
    let out = view.run(ToolName::Calculate, &iss).unwrap();
    let [Evidence::Calculation { inputs, .. }] = out.evidence.as_slice() else { panic!("{out:?}") };
    assert_eq!((inputs["albumin_g_dl"].as_f64(), inputs["beta2_microglobulin_mg_l"].as_f64()), (Some(3.9), Some(2.8)));
}

/// The 0.5B model searched "2020-09-07" for the statin criteria: a report
/// query without a word takes the question's subject words (Evident's);
/// the paper's runs the query as written.
#[test]
fn a_query_of_dates_alone_takes_the_questions_subject_words() {
    let question = "Was metformin started?";
    let model = three_searches(json!({"query": "2023-12-31"}), "Answer: Yes\nReasoning: Started [1].");
    let out = run(&model, Method::Agent, question);
    let first = &out.trace.rounds[0];
    assert_eq!(first.arguments.as_ref().unwrap()["query"], "metformin started", "{first:?}");
    assert!(first.adjustments.iter().any(|a| a.contains("holds no word")), "{first:?}");
    assert!(first.evidence_found > 0, "{first:?}");

    let model = three_searches(json!({"query": "2023-12-31"}), "Answer: No\nReasoning: Nothing found.");
    let out = run(&model, Method::AgentPaperQueries, question);
    assert_eq!(out.trace.rounds[0].arguments.as_ref().unwrap()["query"], "2023-12-31");
}

/// Asks `question` of P1 in `store` with a model that searches "CT" three
/// times and answers `answer`.
fn ask_after_three_ct_searches(
    store: &std::sync::Mutex<evident_store::Store>,
    question: &str,
    answer_type: AnswerType,
    method: Method,
    answer: &str,
) -> ChartAnswer {
    let builtin = evident_chart::criteria::CriteriaSets::builtin();
    ask_after_three_ct_searches_with(store, question, Some(answer_type), method, answer, builtin)
}

/// The same with the given criteria sets, and the answer type possibly unstated.
fn ask_after_three_ct_searches_with(
    store: &std::sync::Mutex<evident_store::Store>,
    question: &str,
    answer_type: Option<AnswerType>,
    method: Method,
    answer: &str,
    criteria: &evident_chart::criteria::CriteriaSets,
) -> ChartAnswer {
    let model = three_searches(json!({"query": "CT"}), answer);
    ask_of_p1(store, &model, question, answer_type, method, criteria)
}

/// Asks `question` of P1 in `store` with `model`.
fn ask_of_p1(
    store: &std::sync::Mutex<evident_store::Store>,
    model: &Scripted,
    question: &str,
    answer_type: Option<AnswerType>,
    method: Method,
    criteria: &evident_chart::criteria::CriteriaSets,
) -> ChartAnswer {
    let config = method.agent_config(&AgentConfig::default()).unwrap_or_default();
    ask_of_p1_with(store, model, question, answer_type, method, criteria, &config)
}

fn ask_of_p1_with(
    store: &std::sync::Mutex<evident_store::Store>,
    model: &Scripted,
    question: &str,
    answer_type: Option<AnswerType>,
    method: Method,
    criteria: &evident_chart::criteria::CriteriaSets,
    config: &AgentConfig,
) -> ChartAnswer {
    let view = RecordView::new(store, "P1", day(AS_OF)).with_criteria(criteria);
    let skills = SkillLibrary::builtin().unwrap();
    let q = Question {
        text: question,
        answer_type,
        method,
        skills: &skills,
        config,
        patient: "female, 67 years".into(),
        embedder: None,
    };
    ask(StructuredModel::recorded(model), &prompts(None), &view, &q).unwrap()
}

/// A dates question whose searches found only lines that do not name its
/// subject ends with the subject looked up in the structured records; the
/// paper's broadening does not.
#[test]
fn a_dates_question_whose_context_never_names_the_subject_looks_it_up_in_the_structured_records() {
    let store = store();
    support::add_problem_list(
        &store,
        "c1",
        "2019-03-04",
        "Conditions\n- 2019-03-04 10:00: Polyp of colon (resolved, resolved 2019-06-01) [Condition/c1]\n",
    );
    let question = "When was Polyp of colon first documented?";
    let ask_with = |method: Method| {
        ask_after_three_ct_searches(
            &store,
            question,
            AnswerType::Date,
            method,
            "Answer: Not documented\nReasoning: Nothing.",
        )
    };
    let out = ask_with(Method::Agent);
    let lookups: Vec<_> = out.trace.rounds.iter().filter(|r| r.action.starts_with("structured lookup")).collect();
    assert_eq!(lookups.len(), 3, "medications, conditions, procedures: {:?}", out.trace.rounds);
    assert_eq!(lookups[1].evidence_found, 1, "{:?}", lookups[1]);
    assert!(out.context.iter().any(|n| n.document_id() == Some("c1")), "{:?}", out.context);

    let out = ask_with(Method::AgentPaperBroadening);
    assert!(out.trace.rounds.iter().all(|r| !r.action.starts_with("structured lookup")), "{:?}", out.trace.rounds);
    assert!(out.context.iter().all(|n| n.document_id() != Some("c1")));
}

/// A yes/no question whose context does not answer it "Yes" by the record
/// rule ends with its subject looked up in the structured records: the
/// entries that hold it (not another drug's of the same dose and form)
/// go in front of the context; the paper's broadening does not.
#[test]
fn a_yes_no_question_whose_context_does_not_answer_it_looks_the_subject_up_in_the_structured_records() {
    let store = store();
    {
        let mut s = store.lock().unwrap();
        let w = s.writer().unwrap();
        support::put_document(
            &w,
            "m1",
            evident_model::DocKind::MedicationList,
            "2017-12-23",
            "Medications\n- 2017-12-23 07:21: Leucovorin 100 MG Injection (active) [RxNorm 1803932] [MedicationRequest/l1]\n- 2017-12-23 07:21: Oxaliplatin 100 MG Injection (active) [MedicationRequest/o1]\n",
        );
        w.commit().unwrap();
    }
    let ask_with = |question: &str, method: Method| {
        ask_after_three_ct_searches(&store, question, AnswerType::YesNo, method, "Answer: Yes\nReasoning: Active [1].")
    };
    let lookups = |out: &ChartAnswer| -> Vec<(usize, usize)> {
        let rounds = out.trace.rounds.iter().filter(|r| r.action.starts_with("structured lookup"));
        rounds.map(|r| (r.evidence_found, r.new_evidence)).collect()
    };
    let leucovorin = "Is the patient receiving Leucovorin 100 MG Injection on 2020-11-30?";
    let out = ask_with(leucovorin, Method::Agent);
    assert_eq!(lookups(&out), [(1, 1), (0, 0), (0, 0)], "medications, conditions, procedures: {:?}", out.trace.rounds);
    assert!(out.context[0].text().contains("Leucovorin"), "{:?}", out.context);
    assert!(out.context.iter().all(|n| !n.text().contains("Oxaliplatin")), "{:?}", out.context);

    let warfarin = "Is the patient receiving Warfarin 5 MG Oral Tablet on 2020-11-30?";
    assert_eq!(lookups(&ask_with(warfarin, Method::Agent)), [(0, 0); 3], "nothing holds it");

    let out = ask_with(leucovorin, Method::AgentPaperBroadening);
    assert!(lookups(&out).is_empty(), "{:?}", out.trace.rounds);
    assert!(out.context.iter().all(|n| n.document_id() != Some("m1")));
}

/// A criteria question ends retrieval with what the record holds for each
/// criterion it names in the record's terms: the problem-list entries of
/// the conditions it names and the newest values of the labs it names;
/// the paper's broadening (and with it this lookup) is off in
/// `agent-paper-broadening`.
#[test]
fn a_criteria_question_gets_the_conditions_and_labs_it_names() {
    let store = store();
    support::add_problem_list(&store, "c1", "2020-05-01", "Conditions\n- 2020-05-01 10:00: Prediabetes (active) [Condition/p1]\n- 2020-05-01 10:00: Essential hypertension (active) [Condition/h1]\n");
    let question =
        "Is the patient eligible on 2023-12-31, that is, documented prediabetes and an albumin of at least 3.5 g/dL?";
    let ask_with = |method: Method| {
        let answer = "Answer: Yes\nReasoning: Both criteria are met [1].";
        ask_after_three_ct_searches(&store, question, AnswerType::YesNoUnclear, method, answer)
    };
    let out = ask_with(Method::Agent);
    let lookups: Vec<_> = out.trace.rounds.iter().filter(|r| r.action.starts_with("criteria lookup")).collect();
    assert_eq!(lookups.len(), 2, "{:?}", out.trace.rounds);
    assert_eq!(lookups[0].evidence_found, 1, "prediabetes, not hypertension: {:?}", lookups[0]);
    assert_eq!(lookups[1].arguments.as_ref().unwrap()["concepts"], json!(["Albumin"]), "{:?}", lookups[1]);
    let entry = out.context.iter().any(|n| matches!(n, Evidence::Entry { record, .. } if record == "Condition/p1"));
    assert!(entry, "{:?}", out.context);
    let albumin = out.context.iter().any(|n| matches!(n, Evidence::Lab { value, .. } if value == "3.9"));
    assert!(albumin, "the newest albumin on or before the date: {:?}", out.context);
    // The lookup's short lines come before the searches' sections, so a
    // small context cuts the sections first.
    let first_section = out.context.iter().position(|n| matches!(n, Evidence::Section { .. })).unwrap();
    let last_lookup =
        out.context.iter().rposition(|n| matches!(n, Evidence::Entry { .. } | Evidence::Lab { .. })).unwrap();
    assert!(last_lookup < first_section, "{:?}", out.context);

    let out = ask_with(Method::AgentPaperBroadening);
    assert!(out.trace.rounds.iter().all(|r| !r.action.starts_with("criteria lookup")), "{:?}", out.trace.rounds);
}

/// A question that names a criteria set ends retrieval with the set's
/// check on the record in front of the context (a calculate round of the
/// trace: age from the stored patient, diabetes from the problem list);
/// without the calculators (`agent-no-calculators`) there is no check.
#[test]
fn a_question_naming_a_criteria_set_gets_its_check_first() {
    let store = support::store_with_diabetes();
    let question = "Does the patient meet the statin criteria on 2023-12-31, that is, age 40-75 years with documented \
                    diabetes, or an LDL cholesterol of at least 190 mg/dL within 365 days?";
    let ask_with = |method: Method| {
        let answer = "Answer: Yes\nReasoning: The criteria are met [1].";
        ask_after_three_ct_searches(&store, question, AnswerType::YesNoUnclear, method, answer)
    };
    let out = ask_with(Method::Agent);
    let checks: Vec<_> = out.trace.rounds.iter().filter(|r| r.action.starts_with("criteria check")).collect();
    assert_eq!(checks.len(), 1, "{:?}", out.trace.rounds);
    assert_eq!(checks[0].arguments.as_ref().unwrap(), &json!({"calculator": "statin-criteria"}));
    let Evidence::Calculation { calculator, output, used, .. } = &out.context[0] else { panic!("{:?}", out.context) };
    assert_eq!(calculator, "statin-criteria");
    assert_eq!(output["result"], "Yes", "67 years old with diabetes: {output}");
    assert!(used.iter().any(|e| matches!(e, Evidence::Entry { record, .. } if record == "Condition/d1")), "{used:?}");

    let out = ask_with(Method::AgentNoCalculators);
    assert!(out.trace.rounds.iter().all(|r| !r.action.starts_with("criteria check")), "{:?}", out.trace.rounds);
    assert!(!out.context.iter().any(|n| matches!(n, Evidence::Calculation { .. })), "{:?}", out.context);
}

/// A user's criteria set (`--criteria FILE`) is named, checked and
/// answered as a built-in one is: a question naming it without an answer
/// type is taken as Yes / No / Unclear, and the check comes first.
#[test]
fn a_users_criteria_set_is_checked_when_a_question_names_it() {
    let store = support::store_with_diabetes();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("local.json");
    let set = r#"{"version": 1, "sets": [{"id": "diabetes-review", "title": "Annual diabetes review",
        "source": "a local protocol", "named_by": ["annual diabetes review criteria"],
        "rule": {"all": [{"age": {"label": "age 60 or over", "min": 60}},
                         {"condition": {"label": "documented diabetes", "marks": ["diabetes"], "not": ["prediabetes"]}}]}}]}"#;
    std::fs::write(&file, set).unwrap();
    let sets = evident_chart::criteria::CriteriaSets::with_user_file(&file).unwrap();
    let question = "Does the patient meet the annual diabetes review criteria on 2023-12-31?";
    let answer = "Answer: Yes\nReasoning: The criteria are met [1].";
    let out = ask_after_three_ct_searches_with(&store, question, None, Method::Agent, answer, &sets);
    let checks: Vec<_> = out.trace.rounds.iter().filter(|r| r.action.starts_with("criteria check")).collect();
    assert_eq!(checks.len(), 1, "{:?}", out.trace.rounds);
    assert_eq!(checks[0].arguments.as_ref().unwrap(), &json!({"calculator": "diabetes-review"}));
    let Evidence::Calculation { calculator, output, .. } = &out.context[0] else { panic!("{:?}", out.context) };
    assert_eq!(calculator, "diabetes-review");
    assert_eq!(output["result"], "Yes", "67 years old with diabetes: {output}");
    assert_eq!(out.answer.as_deref(), Some("Yes"));
    // Without the file the same question names no set.
    let builtin = evident_chart::criteria::CriteriaSets::builtin();
    let out = ask_after_three_ct_searches_with(&store, question, None, Method::Agent, answer, builtin);
    assert!(out.trace.rounds.iter().all(|r| !r.action.starts_with("criteria check")), "{:?}", out.trace.rounds);
}

/// An answer of absence whose searches found nothing at all is reasoned
/// by Evident from the searches: what was searched (the reports, the
/// medications, conditions and procedures, a class with its substances)
/// and that nothing was found; the answer stays the model's. Where
/// something was found, or no structured lookup ran (the paper's
/// broadening), the model's reasoning stays.
#[test]
fn an_absence_answer_whose_searches_found_nothing_is_reasoned_from_the_searches() {
    let store = store();
    let criteria = evident_chart::criteria::CriteriaSets::builtin();
    let ask_answering = |question: &str, query: &str, method: Method, reasoning: &str| {
        let answer = json!({"answer": "No", "reasoning": reasoning});
        let model = three_searches(json!({"query": query}), &answer.to_string());
        let config = method.agent_config(&AgentConfig::default().with_model_context(32_768)).unwrap();
        ask_of_p1_with(&store, &model, question, Some(AnswerType::YesNo), method, criteria, &config)
    };
    let ask_with = |question: &str, query: &str, method: Method| {
        ask_answering(question, query, method, "The patient did not receive dialysis before any search.")
    };
    let out = ask_with("Has the patient received dialysis?", "dialysis", Method::Agent);
    assert_eq!(out.answer.as_deref(), Some("No"), "{:?}", out.failure);
    assert_eq!(
        out.reasoning.as_deref(),
        Some(
            "The record up to 2023-12-31 has nothing on dialysis: the report search \"dialysis\" found nothing, \
             and no medication, condition or procedure entry names dialysis."
        )
    );
    let from = out.trace.reasoning_from.unwrap_or_default();
    assert!(from.starts_with("the searches, which found nothing (Evident's"), "{from}");
    assert!(out.raw_text.contains("before any search"), "the model's own is kept: {}", out.raw_text);

    let out = ask_with("Has the patient received at least one statin?", "statin", Method::Agent);
    let reasoning = out.reasoning.unwrap_or_default();
    assert!(reasoning.starts_with("The record up to 2023-12-31 has nothing on statin:"), "{reasoning}");
    assert!(reasoning.contains("entry names statin, nor any of atorvastatin, "), "{reasoning}");

    // Something found (the CT report), though nothing names dialysis.
    let cited = "The CT report does not mention dialysis [1].";
    let out = ask_answering("Has the patient received dialysis?", "CT", Method::Agent, cited);
    assert!(out.context.iter().any(|n| n.document_id() == Some("d3")), "{:?}", out.context);
    assert_eq!(out.reasoning.as_deref(), Some(cited), "{:?}", out.failure);
    // No structured lookup: the searches cannot be spoken for.
    let out = ask_with("Has the patient received dialysis?", "dialysis", Method::AgentPaperBroadening);
    assert_eq!(out.reasoning.as_deref(), Some("The patient did not receive dialysis before any search."));
    assert_eq!(out.trace.reasoning_from, None);
}
