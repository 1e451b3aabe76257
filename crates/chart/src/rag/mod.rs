//! The retrieval comparators beyond simple RAG: [`advanced`] (query
//! rewriting into up to eight queries, hybrid fusion, reranking, top 20)
//! and [`iterative`] (sub-query rewriting, hybrid fusion, reranking and a
//! multi-round sufficiency loop), as the longitudinal paper's
//! "Comparator configurations" give them, over the same store, model,
//! baseline prompt, two-line answer and citation validation as the other
//! methods.
//!
//! What they share lives here:
//! - [`PatientSections`]: the patient's sections up to the reference date
//!   with their stored dense vectors and a character-trigram BM25 index
//!   (`evident_retrieve::trigram`, k1 = 1.2, b = 0.75), searched by
//!   weighted fusion of min-max normalised BM25 and cosine scores with
//!   weight 0.5 (`evident_retrieve::fusion::weighted_fusion`).
//! - Reranking. The paper reranks with the cross-encoder bge-reranker-v2-m3,
//!   which cannot be installed from the package registries this project
//!   reaches (no package ships its weights, and models cannot be fetched
//!   from a hub at run time). Evident reranks instead with the cosine
//!   between the original question's all-MiniLM-L6-v2 vector and each
//!   candidate's stored vector: a bi-encoder, so weaker than a
//!   cross-encoder, but the same model the dense retrieval uses and no new
//!   weights. The rewritten queries retrieve; the question itself ranks.
//! - The query-writing call: a prompt file, JSON `{"queries": [...]}` with
//!   at most N items (the schema says so, and the list is cut to N
//!   anyway), 256 tokens, the comparators' temperature 0.2; a call that
//!   never validates falls back to the question alone, recorded in the
//!   trace.

pub(crate) mod advanced;
pub(crate) mod iterative;

use std::collections::BTreeSet;

use evident_llm::{chat_json, ChatRequest, Message, Prompts, RepairPolicy, StructuredAnswer};
use evident_retrieve::dense::dot;
use evident_retrieve::fusion::weighted_fusion;
use evident_retrieve::trigram::TrigramBm25;
use evident_retrieve::RetrieveError;
use evident_store::{SectionFilter, SectionRecord};
use serde_json::{json, Value};

use crate::agent::{self, Ctx, Memory, Round};
use crate::policy::EvidenceOrder;
use crate::{ChartError, Evidence};

/// The prompts of the two comparators, compiled in; the chart prompts
/// folder (`[llm] prompts_dir`) may override them like any other.
pub const RAG_PROMPTS: &[(&str, &str)] = &[
    ("chart_rag_rewrite.prompt.md", include_str!("../../prompts/chart_rag_rewrite.prompt.md")),
    ("chart_rag_subqueries.prompt.md", include_str!("../../prompts/chart_rag_subqueries.prompt.md")),
    ("chart_rag_sufficiency.prompt.md", include_str!("../../prompts/chart_rag_sufficiency.prompt.md")),
];

/// The comparators' prompts, overridable from the folder `chart` prompts
/// use.
pub fn rag_prompts(override_dir: Option<&std::path::Path>) -> Prompts {
    Prompts::new(RAG_PROMPTS, override_dir)
}

/// Answer tokens (the paper: 512 for answers).
pub const ANSWER_TOKENS: u32 = 512;
/// Query-writing tokens (the paper: 256 for query generation).
pub const REWRITE_TOKENS: u32 = 256;
/// The weight of the dense score in hybrid fusion (the paper: 0.5).
pub const HYBRID_ALPHA: f64 = 0.5;
/// How deep each ranking goes before fusion (Evident's; the retrieval
/// crate's hybrid default).
pub const HYBRID_DEPTH: usize = 100;
/// Fused candidates each query contributes to reranking (Evident's; the
/// paper does not say).
pub const CANDIDATES_PER_QUERY: usize = 20;

/// The patient's sections up to the reference date, their stored vectors,
/// and a trigram BM25 index over their text (positions agree).
pub(crate) struct PatientSections {
    sections: Vec<SectionRecord>,
    vectors: Vec<Vec<f32>>,
    bm25: TrigramBm25,
}

impl PatientSections {
    /// Reads the sections of the view's patient dated up to its reference
    /// date. Every one must have a vector from `embedder` (the app embeds
    /// what is missing first), as simple RAG requires.
    pub(crate) fn load(ctx: &Ctx<'_>, embedder: &dyn evident_llm::Embedder) -> Result<Self, ChartError> {
        let filter = SectionFilter {
            patient_id: Some(ctx.view.patient_id().to_string()),
            until: Some(ctx.view.as_of()),
            ..SectionFilter::default()
        };
        let model = embedder.model_id();
        let stored = {
            let store = ctx.view.lock();
            let missing = store.sections_missing_embedding(model, &filter)?;
            if !missing.is_empty() {
                return Err(RetrieveError::MissingEmbeddings {
                    count: missing.len(),
                    model: model.to_string(),
                    patient: filter.patient_id.clone(),
                }
                .into());
            }
            store.section_embeddings(model, &filter)?
        };
        let (sections, vectors): (Vec<SectionRecord>, Vec<Vec<f32>>) = stored.into_iter().unzip();
        let bm25 = TrigramBm25::new(&sections.iter().map(|s| s.text.as_str()).collect::<Vec<_>>());
        Ok(PatientSections { sections, vectors, bm25 })
    }

    pub(crate) fn len(&self) -> usize {
        self.sections.len()
    }

    /// The best `k` sections for one query: trigram BM25 and cosine lists
    /// (each [`HYBRID_DEPTH`] deep), min-max normalised and fused with
    /// weight [`HYBRID_ALPHA`] on the dense side. Section positions, best
    /// first.
    pub(crate) fn hybrid(&self, query: &str, query_vector: &[f32], k: usize) -> Vec<usize> {
        let bm25: Vec<(i64, f64)> =
            self.bm25.top_k(query, HYBRID_DEPTH).into_iter().map(|(i, s)| (i as i64, s)).collect();
        let dense: Vec<(i64, f64)> =
            evident_retrieve::dense::top_k(query_vector, self.vectors.iter().map(Vec::as_slice), HYBRID_DEPTH)
                .into_iter()
                .map(|(i, s)| (i as i64, f64::from(s)))
                .collect();
        weighted_fusion(&bm25, &dense, HYBRID_ALPHA).into_iter().take(k).map(|(i, _)| i as usize).collect()
    }

    /// `candidates` ordered by the cosine between `question_vector` and
    /// their stored vectors, best first (ties: earlier position first).
    pub(crate) fn rerank(&self, question_vector: &[f32], candidates: &BTreeSet<usize>) -> Vec<(usize, f32)> {
        let mut scored: Vec<(usize, f32)> =
            candidates.iter().map(|&i| (i, dot(question_vector, &self.vectors[i]))).collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored
    }

    pub(crate) fn evidence(&self, i: usize) -> Evidence {
        let s = &self.sections[i];
        Evidence::Section {
            document_id: s.document_id.clone(),
            section_id: s.section_id,
            kind: s.kind,
            date: s.date,
            heading: s.heading.clone(),
            start: s.start,
            end: s.end,
            text: s.text.clone(),
        }
    }
}

/// Embeds `texts` in one call (the question first, then the queries).
pub(crate) fn embed_all(embedder: &dyn evident_llm::Embedder, texts: &[String]) -> Result<Vec<Vec<f32>>, ChartError> {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = embedder.embed(&refs).map_err(RetrieveError::from)?;
    if vectors.len() != texts.len() {
        return Err(ChartError::Setup(format!(
            "{} returned {} vectors for {} texts",
            embedder.model_id(),
            vectors.len(),
            texts.len()
        )));
    }
    Ok(vectors)
}

/// A comparator's request: its decoding settings and a token limit.
pub(crate) fn request(ctx: &Ctx<'_>, messages: Vec<Message>, max_tokens: u32) -> ChatRequest {
    let mut r = ChatRequest::new(messages).with_max_tokens(max_tokens);
    r.temperature = ctx.config.temperature;
    r.seed = ctx.config.seed;
    r
}

/// The JSON schema of a query list of at most `max` items.
pub(crate) fn queries_schema(max: usize) -> Value {
    json!({"type": "array", "items": {"type": "string", "maxLength": 160}, "maxItems": max})
}

/// Trimmed, non-empty, not in `seen` (case-insensitive), at most `max`;
/// adds what it keeps to `seen`.
pub(crate) fn new_queries(raw: &Value, max: usize, seen: &mut BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for q in raw.as_array().into_iter().flatten().filter_map(Value::as_str) {
        let q = q.split_whitespace().collect::<Vec<_>>().join(" ");
        if out.len() == max {
            break;
        }
        if !q.is_empty() && seen.insert(q.to_lowercase()) {
            out.push(q);
        }
    }
    out
}

/// One query-writing call: `template` rendered with the question, the
/// reference date and `max_queries`, answered as `{"queries": [...]}`.
/// `None` when the answer never validated (one repair).
pub(crate) fn write_queries(
    ctx: &Ctx<'_>,
    prompts: &Prompts,
    template: &str,
    max_queries: usize,
) -> Result<Option<Value>, ChartError> {
    let schema = json!({"type": "object", "properties": {"queries": queries_schema(max_queries)},
        "required": ["queries"], "additionalProperties": false});
    let user = prompts.render(
        template,
        json!({"question": ctx.question, "as_of": agent::date_of(ctx.view.as_of()), "max_queries": max_queries}),
    )?;
    let system = ctx.prompts.render("chart_baseline.prompt.md", json!({}))?;
    let req = request(ctx, vec![Message::system(system), Message::user(user)], REWRITE_TOKENS);
    Ok(match chat_json(ctx.model, &req, &schema, RepairPolicy { repair_attempts: 1 }, ctx.prompts)? {
        StructuredAnswer::Valid { value, .. } => Some(value["queries"].clone()),
        StructuredAnswer::PipelineFailure(_) => None,
    })
}

/// A trace round for a comparator step (the agent's [`Round`] shape, so
/// the report and the JSON show every method's steps alike).
pub(crate) fn round(
    number: usize,
    action: &str,
    arguments: Value,
    found: usize,
    added: usize,
    memory: Memory,
    reason: String,
) -> Round {
    Round {
        round: number,
        plan_step: None,
        action: action.into(),
        tool: (action == "retrieve").then(|| "hybrid_search".to_string()),
        arguments: Some(arguments),
        adjustments: vec![],
        notice: None,
        evidence_found: found,
        new_evidence: added,
        cached: false,
        memory,
        reason,
    }
}

/// Tokens a node takes in the synthesis prompt, as `agent::number_nodes`
/// counts them.
pub(crate) use agent::node_tokens;

/// The synthesis every retrieval comparator shares: the baseline prompt,
/// the synthesis prompt with the numbered nodes that fit the context, two
/// attempts at the two-line answer. As for the agent, should the model's
/// context still overflow (the estimate is conservative), what was shown
/// shrinks by half ([`agent::halved`]), twice, and then the question is a
/// recorded pipeline failure.
pub(crate) fn answer(
    ctx: &Ctx<'_>,
    nodes: Vec<Evidence>,
    trace: &mut agent::Trace,
    describe: impl Fn(usize, usize) -> String,
) -> Result<agent::Produced, ChartError> {
    let total = nodes.len();
    let render = |shown: &[agent::ShownNode]| {
        ctx.prompts.render(
            "chart_synthesis.prompt.md",
            json!({"question": ctx.question, "as_of": agent::date_of(ctx.view.as_of()), "patient": ctx.patient, "answer_schema": ctx.answer_schema(), "nodes": shown}),
        )
    };
    let system = ctx.prompts.render("chart_baseline.prompt.md", json!({}))?;
    let mut budget = answer_budget(ctx)?;
    let mut halved = String::new();
    for shrink in 0..3 {
        let (kept, shown) = agent::number_nodes(&nodes, budget);
        trace.context_tokens = kept.iter().map(Evidence::tokens).sum();
        trace.stopped_because = describe(kept.len(), total) + &halved;
        let user = render(&shown)?;
        let order = EvidenceOrder::MostRecent;
        match agent::synthesise(ctx, system.clone(), user.clone(), &kept, ANSWER_TOKENS, &[], order, trace) {
            Ok(outcome) => return Ok(agent::Produced { nodes: kept, outcome, trace: std::mem::take(trace) }),
            Err(e) if agent::is_overflow(&e) && shrink < 2 => {
                halved.push_str(&format!("; synthesis context halved after: {e}"));
                budget = agent::halved(budget, &kept);
            }
            Err(e) if agent::is_overflow(&e) => {
                let request = request(ctx, vec![Message::system(system), Message::user(user)], ANSWER_TOKENS);
                let failure = agent::overflow_failure(ctx, request, &e)?;
                trace.stopped_because.push_str(&format!("; synthesis context still too large: {e}"));
                return Ok(agent::Produced { nodes: kept, outcome: Err(failure), trace: std::mem::take(trace) });
            }
            Err(e) => return Err(e),
        }
    }
    unreachable!("the third attempt returns")
}

/// The tokens left for context nodes in the synthesis prompt.
pub(crate) fn answer_budget(ctx: &Ctx<'_>) -> Result<usize, ChartError> {
    let system = ctx.prompts.render("chart_baseline.prompt.md", json!({}))?;
    let user = ctx.prompts.render(
        "chart_synthesis.prompt.md",
        json!({"question": ctx.question, "as_of": agent::date_of(ctx.view.as_of()), "patient": ctx.patient, "answer_schema": ctx.answer_schema(), "nodes": []}),
    )?;
    Ok(agent::node_budget(ctx.config, &[Message::system(system), Message::user(user)], ANSWER_TOKENS as usize))
}
