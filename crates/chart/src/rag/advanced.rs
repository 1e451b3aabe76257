//! Advanced RAG (the longitudinal paper's Supplementary Methods,
//! "Comparator configurations"): the question rewritten into up to eight
//! focused retrieval queries (256 tokens), each searched by hybrid fusion
//! of character-trigram BM25 and dense scores (weight 0.5), the union
//! reranked against the question, the top 20 packed into the context
//! within the budget, answered in one call (512 tokens).
//!
//! Evident's choices: the question itself is searched beside the rewritten
//! queries (a small model's rewrites can miss what the question names);
//! each query contributes its [`CANDIDATES_PER_QUERY`] best fused
//! sections; the reranker is MiniLM's cosine, not bge-reranker-v2-m3 (see
//! [`super`]).

use std::collections::BTreeSet;

use serde_json::json;

use super::{answer, embed_all, new_queries, round, write_queries, PatientSections, CANDIDATES_PER_QUERY};
use crate::agent::{Ctx, Memory, Produced, Trace};
use crate::ChartError;

/// Rewritten queries at most (the paper: up to eight).
pub const MAX_QUERIES: usize = 8;
/// Sections kept after reranking (the paper: top 20).
pub const TOP_AFTER_RERANK: usize = 20;

pub(crate) fn run(ctx: &Ctx<'_>, embedder: &dyn evident_llm::Embedder) -> Result<Produced, ChartError> {
    let mut trace = Trace::default();
    let prompts = super::rag_prompts(ctx.prompts.override_dir());
    let rewritten = write_queries(ctx, &prompts, "chart_rag_rewrite.prompt.md", MAX_QUERIES)?;
    let mut seen = BTreeSet::from([ctx.question.to_lowercase()]);
    let (queries, reason) = match &rewritten {
        Some(raw) => {
            let q = new_queries(raw, MAX_QUERIES, &mut seen);
            let n = q.len();
            (q, format!("{n} rewritten queries (at most {MAX_QUERIES}) and the question"))
        }
        None => (vec![], "the rewrite never validated: the question alone is searched".to_string()),
    };
    let memory = Memory { query: ctx.question.to_string(), ..Memory::default() };
    trace.rounds.push(round(1, "rewrite", json!({"queries": queries}), queries.len(), 0, memory.clone(), reason));

    let sections = PatientSections::load(ctx, embedder)?;
    let mut texts = vec![ctx.question.to_string()];
    texts.extend(queries.iter().cloned());
    let vectors = if sections.len() == 0 { vec![] } else { embed_all(embedder, &texts)? };
    let mut candidates = BTreeSet::new();
    for (text, vector) in texts.iter().zip(&vectors) {
        candidates.extend(sections.hybrid(text, vector, CANDIDATES_PER_QUERY));
    }
    let reranked: Vec<usize> = match vectors.first() {
        Some(question_vector) => sections.rerank(question_vector, &candidates).into_iter().map(|(i, _)| i).collect(),
        None => vec![],
    };
    let kept: Vec<usize> = reranked.iter().copied().take(TOP_AFTER_RERANK).collect();
    let nodes: Vec<_> = kept.iter().map(|&i| sections.evidence(i)).collect();
    let memory = Memory {
        query: ctx.question.to_string(),
        evidence: nodes.iter().map(|n| n.header()).collect(),
        ..Memory::default()
    };
    trace.rounds.push(round(
        2,
        "retrieve",
        json!({"queries": texts, "fusion": "trigram BM25 + MiniLM cosine, weight 0.5", "rerank": "MiniLM cosine to the question"}),
        candidates.len(),
        nodes.len(),
        memory,
        format!("{} fused candidates from {} queries, reranked; top {TOP_AFTER_RERANK} kept", candidates.len(), texts.len()),
    ));
    answer(ctx, nodes, &mut trace, |fit, total| {
        format!("advanced RAG: {fit} of the {total} reranked sections fit the context")
    })
}
