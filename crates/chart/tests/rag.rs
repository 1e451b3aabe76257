//! Advanced and iterative RAG's control flow with a scripted model and a
//! bag-of-words embedder: the paper's settings on every request (0.2
//! temperature, 256 tokens for queries, 512 for answers), the rewrite's
//! cap of eight queries, hybrid retrieval up to the reference date, the
//! top 20 after reranking, the sufficiency loop's stops (judged
//! sufficient, no new query, round limit, evidence full), citations
//! validated as for every method, and an answer prompt the model's context
//! refuses asked again with half the context, then recorded as a pipeline
//! failure. The prompts are pinned as snapshots.

mod support;

use std::sync::Mutex;

use chrono::NaiveDate;
use evident_chart::{ask, prompts, AgentConfig, ChartAnswer, Method, Question, RecordView, SkillLibrary};
use evident_llm::StructuredModel;
use evident_model::text::{split_sections, split_sentences};
use evident_model::{DocKind, Document, Patient};
use evident_store::Store;
use serde_json::json;
use support::{day, scripted, store, Scripted, AS_OF};

/// Bag-of-words vectors over hashed words: enough for dense retrieval to
/// prefer sections sharing the query's words.
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

fn embedded(store: Mutex<Store>, patient: &str) -> Mutex<Store> {
    let filter = evident_store::SectionFilter::patient(patient);
    evident_retrieve::embed_missing(&mut store.lock().unwrap(), &WordHash, &filter, 16, &mut |_, _| {}).unwrap();
    store
}

/// Patient P2: 40 one-section progress notes over 2022, each naming a
/// drug, so that retrieval always has more to find than a round keeps.
fn long_store() -> Mutex<Store> {
    let mut store = Store::open_in_memory().unwrap();
    let w = store.writer().unwrap();
    w.upsert_patient(&Patient {
        id: "P2".into(),
        source: "test".into(),
        birth_date: NaiveDate::from_ymd_opt(1950, 1, 1),
        sex: Some("male".into()),
        display_name: None,
    })
    .unwrap();
    let drugs = ["lenalidomide", "bortezomib", "dexamethasone", "daratumumab", "carfilzomib"];
    for i in 0..40 {
        let text = format!(
            "Visit {i}.\nMyeloma follow-up: {} given on cycle {i} day 1, tolerated; lenalidomide dose reviewed.\n",
            drugs[i % drugs.len()]
        );
        let date = NaiveDate::from_ymd_opt(2022, 1, 1).unwrap() + chrono::Days::new(7 * i as u64);
        let doc = Document {
            id: format!("n{i:02}"),
            patient_id: "P2".into(),
            kind: DocKind::ProgressNote,
            date: Some(date.and_hms_opt(9, 0, 0).unwrap()),
            title: format!("note {i}"),
            source: "test".into(),
            source_id: format!("n{i:02}"),
            text: text.clone(),
        };
        w.put_document(&doc, &split_sections(&text), &split_sentences(&text)).unwrap();
    }
    w.commit().unwrap();
    embedded(Mutex::new(store), "P2")
}

fn run_with(
    store: &Mutex<Store>,
    patient: &str,
    model: &Scripted,
    method: Method,
    question: &str,
    config: AgentConfig,
) -> ChartAnswer {
    ask_as(store, patient, StructuredModel::recorded(model), method, question, config)
}

/// [`run_with`] through any structured model.
fn ask_as(
    store: &Mutex<Store>,
    patient: &str,
    model: StructuredModel<'_>,
    method: Method,
    question: &str,
    config: AgentConfig,
) -> ChartAnswer {
    let as_of = if patient == "P1" { day(AS_OF) } else { day("2022-12-31") };
    let view = RecordView::new(store, patient, as_of.date().and_hms_opt(23, 59, 59).unwrap());
    let skills = SkillLibrary::builtin().unwrap();
    let q = Question {
        text: question,
        answer_type: None,
        method,
        skills: &skills,
        config: &config,
        patient: "female, 67 years".into(),
        embedder: Some(&WordHash),
    };
    ask(model, &prompts(None), &view, &q).unwrap()
}

fn queries(n: usize) -> String {
    json!({"queries": (0..n).map(|i| format!("metformin query {i}")).collect::<Vec<_>>()}).to_string()
}

const ANSWER: &str = "Answer: Yes\nReasoning: Metformin was started on 2023-01-20 [1].";

#[test]
fn advanced_rag_rewrites_retrieves_hybrid_reranks_and_answers_with_the_papers_settings() {
    let store = embedded(store(), "P1");
    let model = scripted(&[queries(8), ANSWER.to_string()]);
    let out = run_with(
        &store,
        "P1",
        &model,
        Method::AdvancedRag,
        "Is the patient receiving metformin?",
        AgentConfig::default(),
    );
    assert!(model.exhausted());
    assert_eq!(out.usage.calls, 2);
    let requests = model.requests();
    assert_eq!((requests[0].temperature, requests[0].max_tokens), (0.2, 256), "the rewrite");
    assert_eq!(requests[0].json_schema.as_ref().unwrap()["properties"]["queries"]["maxItems"], 8);
    assert_eq!((requests[1].temperature, requests[1].max_tokens), (0.2, 512), "the answer");
    // The same baseline prompt as every method.
    assert_eq!(requests[1].messages[0].content, prompts(None).render("chart_baseline.prompt.md", json!({})).unwrap());
    let rounds = &out.trace.rounds;
    assert_eq!(rounds[0].action, "rewrite");
    assert_eq!(rounds[1].action, "retrieve");
    assert_eq!(
        rounds[1].arguments.as_ref().unwrap()["queries"].as_array().unwrap().len(),
        9,
        "the question and 8 rewrites"
    );
    assert!(!out.context.is_empty() && out.context.len() <= 20);
    assert!(out.context.iter().all(|n| n.document_id() != Some("d4")), "nothing after the reference date");
    assert!(out.context[0].text().contains("etformin"), "{:?}", out.context[0]);
    assert_eq!(out.status, "answered");
    assert!(out.citations[0].supported);
}

#[test]
fn advanced_rag_never_searches_more_than_eight_rewrites() {
    let store = embedded(store(), "P1");
    // Twelve queries break the schema; the repair's eight are used, with
    // duplicates of each other and of the question dropped.
    let eight = json!({"queries": ["metformin", "Metformin ", "diabetes", "is the patient receiving metformin?", "hba1c", "glucose", "tablet", "biguanide"]});
    let model = scripted(&[queries(12), eight.to_string(), ANSWER.to_string()]);
    let out = run_with(
        &store,
        "P1",
        &model,
        Method::AdvancedRag,
        "Is the patient receiving metformin?",
        AgentConfig::default(),
    );
    assert!(model.exhausted());
    let searched = out.trace.rounds[1].arguments.as_ref().unwrap()["queries"].as_array().unwrap().clone();
    assert_eq!(searched.len(), 7, "the question and six distinct rewrites: {searched:?}");
    // A rewrite that never validates leaves the question alone.
    let model = scripted(&[queries(12), queries(12), ANSWER.to_string()]);
    let out = run_with(
        &store,
        "P1",
        &model,
        Method::AdvancedRag,
        "Is the patient receiving metformin?",
        AgentConfig::default(),
    );
    assert!(out.trace.rounds[0].reason.contains("never validated"), "{:?}", out.trace.rounds[0]);
    assert_eq!(out.trace.rounds[1].arguments.as_ref().unwrap()["queries"].as_array().unwrap().len(), 1);
    assert_eq!(out.status, "answered");
}

#[test]
fn advanced_rag_keeps_the_top_twenty_of_a_long_record() {
    let store = long_store();
    let model = scripted(&[queries(3), ANSWER.to_string()]);
    let out =
        run_with(&store, "P2", &model, Method::AdvancedRag, "Has lenalidomide been given?", AgentConfig::default());
    assert_eq!(out.context.len(), 20, "{}", out.trace.stopped_because);
    assert!(out.trace.rounds[1].evidence_found > 20);
}

fn judgement(sufficient: bool, queries: &[&str]) -> String {
    json!({"sufficient": sufficient, "missing": if sufficient { vec![] } else { vec!["dates"] }, "queries": queries})
        .to_string()
}

#[test]
fn iterative_rag_stops_when_the_evidence_is_judged_sufficient() {
    let store = embedded(store(), "P1");
    let model = scripted(&[queries(2), judgement(true, &[]), ANSWER.to_string()]);
    let out = run_with(
        &store,
        "P1",
        &model,
        Method::IterativeRag,
        "Is the patient receiving metformin?",
        AgentConfig::default(),
    );
    assert!(model.exhausted());
    let actions: Vec<&str> = out.trace.rounds.iter().map(|r| r.action.as_str()).collect();
    assert_eq!(actions, ["rewrite", "retrieve", "sufficiency"]);
    assert!(out.trace.stopped_because.contains("judged sufficient"), "{}", out.trace.stopped_because);
    let requests = model.requests();
    assert_eq!(requests[1].max_tokens, 256, "the sufficiency judgement");
    assert!(requests[1].messages[1].content.contains("[1] ("), "the evidence so far is shown");
    assert_eq!((requests[2].temperature, requests[2].max_tokens), (0.2, 512));
    assert!(out.context.iter().all(|n| n.document_id() != Some("d4")));
    assert!(out.citations[0].supported);
}

#[test]
fn iterative_rag_follows_new_queries_until_the_round_limit_or_the_evidence_is_full() {
    let store = long_store();
    let model = scripted(&[
        queries(4),
        judgement(false, &["bortezomib cycle"]),
        judgement(false, &["carfilzomib"]),
        ANSWER.to_string(),
    ]);
    let out =
        run_with(&store, "P2", &model, Method::IterativeRag, "Has lenalidomide been given?", AgentConfig::default());
    assert!(model.exhausted(), "two judgements: none after the last round");
    let retrievals: Vec<usize> =
        out.trace.rounds.iter().filter(|r| r.action == "retrieve").map(|r| r.new_evidence).collect();
    assert_eq!(retrievals.len(), 3, "{:?}", out.trace.rounds);
    assert_eq!(retrievals[..2], [8, 8], "each round keeps at most eight new sections");
    assert_eq!(out.context.len(), 20, "the evidence holds at most 20 sections");
    assert!(out.trace.stopped_because.contains("full"), "{}", out.trace.stopped_because);
    // Round two searched only the new query.
    assert_eq!(out.trace.rounds[3].arguments.as_ref().unwrap()["queries"], json!(["bortezomib cycle"]));
    // No section is kept twice.
    let mut keys: Vec<String> = out.context.iter().map(|n| n.key()).collect();
    keys.dedup();
    assert_eq!(keys.len(), 20);
}

#[test]
fn iterative_rag_stops_without_a_new_query_and_when_the_budget_is_spent() {
    let store = long_store();
    // Insufficient, but the only query offered was searched already.
    let model = scripted(&[queries(1), judgement(false, &["Has lenalidomide been given?"]), ANSWER.to_string()]);
    let out =
        run_with(&store, "P2", &model, Method::IterativeRag, "Has lenalidomide been given?", AgentConfig::default());
    assert!(model.exhausted());
    assert!(out.trace.stopped_because.contains("no new query"), "{}", out.trace.stopped_because);

    // Insufficient with a new query, but the record holds nothing more.
    let small = embedded(support::store(), "P1");
    let model = scripted(&[queries(2), judgement(false, &["hba1c trend"]), ANSWER.to_string()]);
    let out = run_with(
        &small,
        "P1",
        &model,
        Method::IterativeRag,
        "Is the patient receiving metformin?",
        AgentConfig::default(),
    );
    assert!(model.exhausted());
    assert!(out.trace.stopped_because.contains("found nothing new"), "{}", out.trace.stopped_because);

    // A 150-token budget fills in the first round: no judgement is asked for.
    let config = AgentConfig { context_budget_tokens: 150, ..AgentConfig::default() };
    let model = scripted(&[queries(2), ANSWER.to_string()]);
    let out = run_with(&store, "P2", &model, Method::IterativeRag, "Has lenalidomide been given?", config);
    assert!(model.exhausted());
    assert!(out.trace.stopped_because.contains("full"), "{}", out.trace.stopped_because);
    let kept = out.trace.rounds[1].new_evidence;
    assert!((1..8).contains(&kept), "{kept}");
    assert!(out.context.iter().map(|n| (n.text().len() + n.header().len()).div_ceil(3) + 6).sum::<usize>() <= 150);
}

#[test]
fn a_comparator_without_an_embedder_is_a_setup_error() {
    let store = store();
    let view = RecordView::new(&store, "P1", day(AS_OF));
    let skills = SkillLibrary::builtin().unwrap();
    let config = AgentConfig::default();
    let model = scripted(&[ANSWER]);
    for method in [Method::AdvancedRag, Method::IterativeRag] {
        let q = Question {
            text: "q?",
            answer_type: None,
            method,
            skills: &skills,
            config: &config,
            patient: "x".into(),
            embedder: None,
        };
        let err = ask(StructuredModel::recorded(&model), &prompts(None), &view, &q).unwrap_err();
        assert!(err.to_string().contains("needs an embedder"), "{err}");
    }
    assert_eq!(Method::parse("advanced-rag"), Some(Method::AdvancedRag));
    assert_eq!(Method::parse("iterative-rag"), Some(Method::IterativeRag));
}

fn rendered(model: &Scripted) -> String {
    let mut out = String::new();
    for (i, request) in model.requests().iter().enumerate() {
        out.push_str(&format!(
            "=== request {} (temperature {}, max_tokens {})\n",
            i + 1,
            request.temperature,
            request.max_tokens
        ));
        // The system prompt is the baseline prompt, pinned by the prompts test.
        for m in request.messages.iter().skip(1) {
            out.push_str(&format!("--- {}\n{}\n", m.role.as_str(), m.content));
        }
    }
    out
}

#[test]
fn rag_prompts() {
    let store = embedded(store(), "P1");
    let model = scripted(&[queries(2), ANSWER.to_string()]);
    run_with(&store, "P1", &model, Method::AdvancedRag, "Is the patient receiving metformin?", AgentConfig::default());
    insta::assert_snapshot!("advanced_rag_prompts", rendered(&model));
    let model = scripted(&[queries(2), judgement(true, &[]), ANSWER.to_string()]);
    run_with(&store, "P1", &model, Method::IterativeRag, "Is the patient receiving metformin?", AgentConfig::default());
    assert!(model.exhausted());
    insta::assert_snapshot!("iterative_rag_prompts", rendered(&model));
}

/// A scripted model behind a context of `limit` characters for answer
/// prompts (512 tokens to answer; a rewrite's 256 always fits): a longer
/// one is refused, unanswered, as the embedded model refuses a prompt
/// longer than its context.
struct Narrow {
    inner: Scripted,
    limit: usize,
}

impl evident_llm::ChatModel for Narrow {
    fn model_id(&self) -> &str {
        "narrow"
    }
    fn chat(&self, request: &evident_llm::ChatRequest) -> Result<evident_llm::ChatResponse, evident_llm::LlmError> {
        let chars: usize = request.messages.iter().map(|m| m.content.len()).sum();
        if request.max_tokens == 512 && chars > self.limit {
            return Err(evident_llm::LlmError::ContextOverflow {
                prompt_tokens: chars as u32,
                context_size: self.limit as u32,
            });
        }
        self.inner.chat(request)
    }
}

fn ask_narrow(model: &Narrow, store: &Mutex<Store>) -> ChartAnswer {
    let model = StructuredModel::new(model, &model.inner);
    ask_as(store, "P2", model, Method::AdvancedRag, "Has lenalidomide been given?", AgentConfig::default())
}

/// A comparator's answer prompt that the model's context still refuses
/// (the estimate is conservative) is sent again with half the context, as the
/// agent's is; refused three times, the question is a recorded pipeline
/// failure, not an error.
#[test]
fn a_comparators_answer_that_overflows_the_context_is_asked_again_with_half() {
    let store = long_store();
    let wide = scripted(&[queries(3), ANSWER.to_string()]);
    run_with(&store, "P2", &wide, Method::AdvancedRag, "Has lenalidomide been given?", AgentConfig::default());
    let size = |r: &evident_llm::ChatRequest| r.messages.iter().map(|m| m.content.len()).sum::<usize>();
    let answer = size(&wide.requests()[1]);
    assert_eq!(wide.requests()[1].max_tokens, 512);

    let model = Narrow { inner: scripted(&[queries(3), ANSWER.to_string()]), limit: answer * 3 / 4 };
    let out = ask_narrow(&model, &store);
    assert_eq!(out.status, "answered", "{}", out.trace.stopped_because);
    assert!(out.context.len() < 20, "{}", out.context.len());
    assert!(
        out.trace.stopped_because.contains("; synthesis context halved after: prompt of"),
        "{}",
        out.trace.stopped_because
    );
    assert!(model.inner.exhausted());

    let model = Narrow { inner: scripted(&[queries(3)]), limit: 0 };
    let out = ask_narrow(&model, &store);
    assert_eq!(out.status, "pipeline_failure", "{}", out.trace.stopped_because);
    assert!(out.trace.stopped_because.contains("synthesis context still too large"), "{}", out.trace.stopped_because);
    assert_eq!(model.inner.failures().len(), 1);
}
