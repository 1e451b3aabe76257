//! Iterative RAG (the longitudinal paper's main comparator: "subquery
//! rewriting, hybrid BM25 and dense retrieval fusion, cross-encoder
//! reranking, and a multi-round sufficiency loop"). The paper names the
//! parts, not their numbers; Evident's loop is:
//!
//! 1. The question is broken into up to [`MAX_SUBQUERIES`] sub-queries
//!    (256 tokens); the question itself is searched too.
//! 2. Each round, every query not searched before is searched by hybrid
//!    fusion (character-trigram BM25 and MiniLM cosine, weight 0.5); the
//!    union, less what was already kept, is reranked against the question
//!    (MiniLM cosine, in place of the cross-encoder; see [`super`]) and
//!    its best [`NEW_PER_ROUND`] join the evidence.
//! 3. Unless the loop must stop, the model judges the evidence so far
//!    (`{"sufficient", "missing", "queries"}`, 256 tokens): sufficient
//!    ends the loop; otherwise its new queries are the next round's.
//!
//! The loop stops when the evidence is judged sufficient, after
//! [`MAX_ROUNDS`] retrieval rounds, when a round adds nothing, when no new
//! query is left, when the evidence holds [`MAX_SECTIONS`] sections or
//! fills the context budget, or when the judgement never validates; the
//! trace says which. The evidence, in the order it was found, is answered
//! in one call (512 tokens).

use std::collections::BTreeSet;

use evident_llm::{chat_json, Message, RepairPolicy, StructuredAnswer};
use serde_json::{json, Value};

use super::{
    answer, answer_budget, embed_all, new_queries, node_tokens, queries_schema, request, round, write_queries,
    PatientSections, CANDIDATES_PER_QUERY, REWRITE_TOKENS,
};
use crate::agent::{self, Ctx, Memory, Produced, ShownNode, Trace};
use crate::ChartError;

/// Sub-queries in the first round at most.
pub const MAX_SUBQUERIES: usize = 4;
/// New queries the sufficiency judgement may ask for at most.
pub const MAX_FOLLOW_UP_QUERIES: usize = 3;
/// Retrieval rounds at most.
pub const MAX_ROUNDS: usize = 3;
/// Sections a round adds at most.
pub const NEW_PER_ROUND: usize = 8;
/// Sections the evidence holds at most (the advanced configuration's top 20).
pub const MAX_SECTIONS: usize = 20;
/// Characters of each section the sufficiency prompt shows.
const EXCERPT_CHARS: usize = 300;

pub(crate) fn run(ctx: &Ctx<'_>, embedder: &dyn evident_llm::Embedder) -> Result<Produced, ChartError> {
    let mut trace = Trace::default();
    let prompts = super::rag_prompts(ctx.prompts.override_dir());
    let sections = PatientSections::load(ctx, embedder)?;
    let budget = answer_budget(ctx)?;
    let question_vector = embed_all(embedder, &[ctx.question.to_string()])?.remove(0);

    let mut seen = BTreeSet::from([ctx.question.to_lowercase()]);
    let mut queries = vec![ctx.question.to_string()];
    let sub = write_queries(ctx, &prompts, "chart_rag_subqueries.prompt.md", MAX_SUBQUERIES)?;
    let reason = match &sub {
        Some(raw) => {
            let q = new_queries(raw, MAX_SUBQUERIES, &mut seen);
            let reason = format!("{} sub-queries (at most {MAX_SUBQUERIES}) and the question", q.len());
            queries.extend(q);
            reason
        }
        None => "the sub-query rewrite never validated: the question alone is searched".to_string(),
    };
    let mut step = 1;
    let mut memory = Memory {
        query: ctx.question.to_string(),
        stop_conditions: vec![
            "the evidence is judged sufficient".into(),
            format!("{MAX_ROUNDS} retrieval rounds"),
            format!("{MAX_SECTIONS} sections or the context budget"),
        ],
        ..Memory::default()
    };
    trace.rounds.push(round(
        step,
        "rewrite",
        json!({"queries": queries[1..]}),
        queries.len() - 1,
        0,
        memory.clone(),
        reason,
    ));

    let mut kept: Vec<usize> = Vec::new();
    let mut tokens = 0usize;
    let mut searched: Vec<String> = Vec::new();
    let stopped = 'rounds: {
        for retrieval_round in 1..=MAX_ROUNDS {
            // Retrieve with this round's queries.
            let this_round = std::mem::take(&mut queries);
            let vectors = if sections.len() == 0 { vec![] } else { embed_all(embedder, &this_round)? };
            let mut candidates = BTreeSet::new();
            for (text, vector) in this_round.iter().zip(&vectors) {
                candidates.extend(sections.hybrid(text, vector, CANDIDATES_PER_QUERY));
            }
            for i in &kept {
                candidates.remove(i);
            }
            let found = candidates.len();
            let mut added = 0;
            let mut full = false;
            for (i, _) in sections.rerank(&question_vector, &candidates) {
                if added == NEW_PER_ROUND {
                    break;
                }
                let t = node_tokens(&sections.evidence(i));
                if kept.len() == MAX_SECTIONS || (tokens + t > budget && !kept.is_empty()) {
                    full = true;
                    break;
                }
                tokens += t;
                kept.push(i);
                added += 1;
            }
            searched.extend(this_round.iter().cloned());
            memory.evidence = kept.iter().map(|&i| sections.evidence(i).header()).collect();
            step += 1;
            trace.rounds.push(round(
                step,
                "retrieve",
                json!({"queries": this_round}),
                found,
                added,
                memory.clone(),
                format!("round {retrieval_round}: {found} new candidates reranked, {added} kept"),
            ));
            if added == 0 {
                break 'rounds format!("round {retrieval_round} found nothing new");
            }
            if full || kept.len() == MAX_SECTIONS {
                break 'rounds format!("the evidence is full ({} sections, about {tokens} tokens)", kept.len());
            }
            if retrieval_round == MAX_ROUNDS {
                break 'rounds format!("{MAX_ROUNDS} retrieval rounds done");
            }
            // Judge sufficiency.
            let Some(judgement) = judge(ctx, &prompts, &sections, &kept, &searched, retrieval_round)? else {
                step += 1;
                trace.rounds.push(round(
                    step,
                    "sufficiency",
                    json!({}),
                    0,
                    0,
                    memory.clone(),
                    "the judgement never validated".into(),
                ));
                break 'rounds "the sufficiency judgement never validated: answering with the evidence so far".into();
            };
            let sufficient = judgement["sufficient"].as_bool().unwrap_or(false);
            memory.still_missing = strings(&judgement["missing"]);
            queries = new_queries(&judgement["queries"], MAX_FOLLOW_UP_QUERIES, &mut seen);
            step += 1;
            trace.rounds.push(round(
                step,
                "sufficiency",
                json!({"sufficient": sufficient, "queries": queries}),
                0,
                0,
                memory.clone(),
                if sufficient { "sufficient".into() } else { format!("insufficient; {} new queries", queries.len()) },
            ));
            if sufficient {
                break 'rounds format!("the evidence was judged sufficient after round {retrieval_round}");
            }
            if queries.is_empty() {
                break 'rounds format!("insufficient after round {retrieval_round}, but no new query was given");
            }
        }
        unreachable!("the last round breaks out of the loop")
    };
    let nodes = kept.iter().map(|&i| sections.evidence(i)).collect();
    answer(ctx, nodes, &mut trace, |fit, total| {
        format!("iterative RAG: {stopped}; {fit} of {total} sections fit the context")
    })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(|x| x.as_str().map(str::to_string)).collect()
}

/// The sufficiency judgement over the evidence so far (one repair);
/// `None` when it never validated.
fn judge(
    ctx: &Ctx<'_>,
    prompts: &evident_llm::Prompts,
    sections: &PatientSections,
    kept: &[usize],
    searched: &[String],
    retrieval_round: usize,
) -> Result<Option<Value>, ChartError> {
    let shown: Vec<ShownNode> = kept
        .iter()
        .enumerate()
        .map(|(n, &i)| {
            let e = sections.evidence(i);
            let text: String =
                e.text().split_whitespace().collect::<Vec<_>>().join(" ").chars().take(EXCERPT_CHARS).collect();
            ShownNode { number: n + 1, header: e.header(), text }
        })
        .collect();
    let user = prompts.render(
        "chart_rag_sufficiency.prompt.md",
        json!({"question": ctx.question, "as_of": agent::date_of(ctx.view.as_of()), "round": retrieval_round,
               "max_rounds": MAX_ROUNDS, "searched": searched.join("; "), "nodes": shown,
               "max_queries": MAX_FOLLOW_UP_QUERIES}),
    )?;
    let schema = json!({"type": "object", "properties": {
            "sufficient": {"type": "boolean"},
            "missing": {"type": "array", "items": {"type": "string", "maxLength": 160}, "maxItems": 4},
            "queries": queries_schema(MAX_FOLLOW_UP_QUERIES)},
        "required": ["sufficient", "missing", "queries"], "additionalProperties": false});
    let system = ctx.prompts.render("chart_baseline.prompt.md", json!({}))?;
    let req = request(ctx, vec![Message::system(system), Message::user(user)], REWRITE_TOKENS);
    Ok(match chat_json(ctx.model, &req, &schema, RepairPolicy { repair_attempts: 1 }, ctx.prompts)? {
        StructuredAnswer::Valid { value, .. } => Some(value),
        StructuredAnswer::PipelineFailure(_) => None,
    })
}
