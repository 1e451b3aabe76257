//! Retrieval over a patient's sections, in three modes: BM25 (the store's
//! `search_bm25`: FTS5's porter-stemmed terms and bm25 formula, with the
//! patient's admitted sections as the corpus), dense (brute-force cosine between the
//! query vector and the stored section vectors of one [`Embedder`]) and
//! hybrid (reciprocal rank fusion, or a weighted fusion of min-max
//! normalised scores). Every [`Hit`] carries the document id, section id,
//! byte span and verbatim text, so callers can cite exactly what was found.
//!
//! Dense retrieval never embeds sections behind the caller's back: a
//! [`Retriever`] only reads the store. [`embed_missing`] computes and
//! stores the vectors that a filter's sections lack.

pub mod dense;
pub mod fusion;
pub mod trigram;

use std::collections::HashMap;

use chrono::NaiveDateTime;
use evident_llm::{EmbedError, Embedder};
use evident_model::DocKind;
use evident_store::{ScoredSection, SectionFilter, SectionRecord, Store, StoreError};
use serde::Serialize;

pub use fusion::RRF_K;

/// Which ranking a search uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Bm25,
    Dense,
    Hybrid,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "bm25" => Ok(Mode::Bm25),
            "dense" => Ok(Mode::Dense),
            "hybrid" => Ok(Mode::Hybrid),
            _ => Err(format!("unknown retrieval mode {s:?}; use bm25, dense or hybrid")),
        }
    }
}

/// How hybrid mode combines the BM25 and dense rankings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fusion {
    /// Reciprocal rank fusion with constant `k` (60 by convention).
    ReciprocalRank { k: f64 },
    /// `alpha * dense + (1 - alpha) * bm25` on min-max normalised scores.
    Weighted { alpha: f64 },
}

impl Default for Fusion {
    fn default() -> Self {
        Fusion::ReciprocalRank { k: RRF_K }
    }
}

#[derive(Debug, Clone)]
pub struct RetrieverConfig {
    pub mode: Mode,
    pub fusion: Fusion,
    /// How many candidates each ranking contributes to hybrid fusion; at
    /// least `k` is always used.
    pub hybrid_depth: usize,
}

impl Default for RetrieverConfig {
    fn default() -> Self {
        RetrieverConfig { mode: Mode::Bm25, fusion: Fusion::default(), hybrid_depth: 100 }
    }
}

/// One retrieved section. `text` is byte-identical to
/// `document.text[start..end]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub document_id: String,
    pub section_id: i64,
    pub patient_id: String,
    pub kind: DocKind,
    pub date: Option<NaiveDateTime>,
    pub heading: Option<String>,
    /// Byte offsets into the document text.
    pub start: usize,
    pub end: usize,
    /// Higher is better; the scale depends on the mode (negated FTS5 bm25,
    /// cosine, RRF or fused score).
    pub score: f64,
    /// 1-based rank in the BM25 list, when the section was in it.
    pub bm25_rank: Option<usize>,
    /// 1-based rank in the dense list, when the section was in it.
    pub dense_rank: Option<usize>,
    pub text: String,
}

impl Hit {
    fn new(section: SectionRecord, score: f64) -> Hit {
        Hit {
            document_id: section.document_id,
            section_id: section.section_id,
            patient_id: section.patient_id,
            kind: section.kind,
            date: section.date,
            heading: section.heading,
            start: section.start,
            end: section.end,
            score,
            bm25_rank: None,
            dense_rank: None,
            text: section.text,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RetrieveError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("{mode:?} retrieval needs an embedding model; load all-MiniLM-L6-v2 (`evident models pull minilm-l6`) or use BM25 retrieval")]
    NoEmbedder { mode: Mode },
    #[error(
        "{count} of the {scope} sections have no {model} vectors yet; embed {what} first",
        scope = patient.as_deref().map(|p| format!("patient {p}'s")).unwrap_or_else(|| "selected".into()),
        what = patient.as_deref().map(|p| format!("patient {p}'s sections")).unwrap_or_else(|| "the store's sections".into())
    )]
    MissingEmbeddings { count: usize, model: String, patient: Option<String> },
    #[error("section {section_id} has a {found}-dimensional {model} vector but the model makes {expected}; embed the sections again after deleting the store's embeddings for {model}")]
    DimensionMismatch { section_id: i64, model: String, found: usize, expected: usize },
}

/// Searches the store. Holds no state beyond its configuration, so one
/// retriever can serve many queries.
pub struct Retriever<'a> {
    store: &'a Store,
    embedder: Option<&'a dyn Embedder>,
    config: RetrieverConfig,
}

impl<'a> Retriever<'a> {
    pub fn new(store: &'a Store, config: RetrieverConfig) -> Self {
        Retriever { store, embedder: None, config }
    }

    /// Dense and hybrid modes need an embedder.
    pub fn with_embedder(mut self, embedder: &'a dyn Embedder) -> Self {
        self.embedder = Some(embedder);
        self
    }

    pub fn config(&self) -> &RetrieverConfig {
        &self.config
    }

    /// The best `k` sections for `query` among those `filter` admits.
    pub fn search(&self, query: &str, filter: &SectionFilter, k: usize) -> Result<Vec<Hit>, RetrieveError> {
        if k == 0 {
            return Ok(Vec::new());
        }
        match self.config.mode {
            Mode::Bm25 => Ok(self
                .bm25(query, filter, k)?
                .into_iter()
                .enumerate()
                .map(|(i, s)| Hit { bm25_rank: Some(i + 1), ..Hit::new(s.section, s.score) })
                .collect()),
            Mode::Dense => Ok(self
                .dense(query, filter, k)?
                .into_iter()
                .enumerate()
                .map(|(i, s)| Hit { dense_rank: Some(i + 1), ..Hit::new(s.section, s.score) })
                .collect()),
            Mode::Hybrid => self.hybrid(query, filter, k),
        }
    }

    fn bm25(&self, query: &str, filter: &SectionFilter, k: usize) -> Result<Vec<ScoredSection>, RetrieveError> {
        Ok(self.store.search_bm25(query, filter, k)?)
    }

    fn dense(&self, query: &str, filter: &SectionFilter, k: usize) -> Result<Vec<ScoredSection>, RetrieveError> {
        let embedder = self.embedder.ok_or(RetrieveError::NoEmbedder { mode: self.config.mode })?;
        let model = embedder.model_id();
        let missing = self.store.sections_missing_embedding(model, filter)?;
        if !missing.is_empty() {
            return Err(RetrieveError::MissingEmbeddings {
                count: missing.len(),
                model: model.to_string(),
                patient: filter.patient_id.clone(),
            });
        }
        let query_vector = embedder
            .embed(&[query])?
            .pop()
            .ok_or_else(|| EmbedError::Failed(format!("the embedder returned no vector for the query {query:?}")))?;
        let stored = self.store.section_embeddings(model, filter)?;
        for (section, vector) in &stored {
            if vector.len() != query_vector.len() {
                return Err(RetrieveError::DimensionMismatch {
                    section_id: section.section_id,
                    model: model.to_string(),
                    found: vector.len(),
                    expected: query_vector.len(),
                });
            }
        }
        let best = dense::top_k(&query_vector, stored.iter().map(|(_, v)| v.as_slice()), k);
        let mut stored: Vec<Option<SectionRecord>> = stored.into_iter().map(|(s, _)| Some(s)).collect();
        Ok(best
            .into_iter()
            .map(|(i, score)| ScoredSection {
                section: stored[i].take().expect("top_k returns distinct indices"),
                score: f64::from(score),
            })
            .collect())
    }

    fn hybrid(&self, query: &str, filter: &SectionFilter, k: usize) -> Result<Vec<Hit>, RetrieveError> {
        let depth = self.config.hybrid_depth.max(k);
        let bm25 = self.bm25(query, filter, depth)?;
        let dense = self.dense(query, filter, depth)?;
        let bm25_list: Vec<(i64, f64)> = bm25.iter().map(|s| (s.section.section_id, s.score)).collect();
        let dense_list: Vec<(i64, f64)> = dense.iter().map(|s| (s.section.section_id, s.score)).collect();
        let fused = match self.config.fusion {
            Fusion::ReciprocalRank { k: rrf_k } => fusion::reciprocal_rank_fusion(&[&bm25_list, &dense_list], rrf_k),
            Fusion::Weighted { alpha } => fusion::weighted_fusion(&bm25_list, &dense_list, alpha),
        };
        let bm25_rank: HashMap<i64, usize> = bm25_list.iter().enumerate().map(|(i, (id, _))| (*id, i + 1)).collect();
        let dense_rank: HashMap<i64, usize> = dense_list.iter().enumerate().map(|(i, (id, _))| (*id, i + 1)).collect();
        let mut sections: HashMap<i64, SectionRecord> = HashMap::new();
        for s in bm25.into_iter().chain(dense) {
            sections.entry(s.section.section_id).or_insert(s.section);
        }
        Ok(fused
            .into_iter()
            .take(k)
            .map(|(id, score)| {
                let section = sections.remove(&id).expect("fused ids come from the two lists");
                Hit {
                    bm25_rank: bm25_rank.get(&id).copied(),
                    dense_rank: dense_rank.get(&id).copied(),
                    ..Hit::new(section, score)
                }
            })
            .collect())
    }
}

/// Computes and stores the vectors that the sections admitted by `filter`
/// lack for `embedder`, `batch_size` sections at a time (each batch is
/// stored before the next is embedded, so an interrupted run keeps its
/// progress). `progress(done, total)` is called after every batch. Returns
/// how many sections were embedded; 0 when nothing was missing, which makes
/// the call idempotent.
pub fn embed_missing(
    store: &mut Store,
    embedder: &dyn Embedder,
    filter: &SectionFilter,
    batch_size: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<usize, RetrieveError> {
    let model = embedder.model_id().to_string();
    let missing = store.sections_missing_embedding(&model, filter)?;
    let total = missing.len();
    progress(0, total);
    let mut done = 0;
    for batch in missing.chunks(batch_size.max(1)) {
        let texts: Vec<&str> = batch.iter().map(|s| s.text.as_str()).collect();
        let vectors = embedder.embed(&texts)?;
        if vectors.len() != batch.len() {
            return Err(EmbedError::Failed(format!(
                "{} returned {} vectors for {} texts",
                model,
                vectors.len(),
                batch.len()
            ))
            .into());
        }
        let items: Vec<(i64, Vec<f32>)> = batch.iter().map(|s| s.section_id).zip(vectors).collect();
        store.put_embeddings(&model, &items)?;
        done += batch.len();
        progress(done, total);
    }
    Ok(done)
}
