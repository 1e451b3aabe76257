//! The retrieval jobs: search one patient's record (BM25, dense or
//! hybrid, with kind, date and most-recent filters), and compute the dense
//! vectors stored sections lack. Dense and hybrid searches first embed what
//! the search can see and has no vectors yet; the rest of the store is
//! left for the embedding job.

use std::fmt;
use std::time::Instant;

use chrono::{NaiveDate, NaiveDateTime};
use evident_llm::Embedder;
use evident_model::DocKind;
use evident_retrieve::{Fusion, Hit, Mode, Retriever, RetrieverConfig, RRF_K};
use evident_store::SectionFilter;
use serde::Serialize;

use crate::error::{input_error, Result};
use crate::models::{embed_missing, EmbedderChoice};
use crate::progress::{ProgressEvent, ProgressSink};
use crate::session::{lock, Session};

/// Sections embedded and stored per batch.
pub const EMBED_BATCH: usize = 64;

/// How hybrid search fuses its two rankings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FusionKind {
    /// Reciprocal rank fusion (k = 60).
    #[default]
    ReciprocalRank,
    /// Weighted min-max scores; the weight is the request's `alpha`.
    Weighted,
}

/// One search.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub patient_id: String,
    pub query: String,
    /// Only documents of these kinds (none: every kind).
    pub kinds: Vec<DocKind>,
    /// Only documents dated on or after this date (YYYY-MM-DD or a timestamp).
    pub since: Option<String>,
    /// Only documents dated on or before this date (a plain date includes the whole day).
    pub until: Option<String>,
    /// Only the N most recent documents (after the other filters).
    pub recent: Option<usize>,
    pub mode: Mode,
    pub fusion: FusionKind,
    /// Weight of the dense score in weighted fusion (default: `[retrieval]
    /// alpha`, else 0.5).
    pub alpha: Option<f64>,
    /// Number of hits.
    pub k: usize,
    pub embedder: EmbedderChoice,
}

/// The hits of a search, best first.
#[derive(Debug, Serialize)]
pub struct SearchResults {
    #[serde(rename = "patient")]
    pub patient_id: String,
    pub query: String,
    pub mode: Mode,
    pub fusion: Option<Fusion>,
    pub k: usize,
    pub hits: Vec<Hit>,
}

/// `YYYY-MM-DD` (start or end of that day) or a full timestamp.
fn parse_date(name: &str, text: &str, end_of_day: bool) -> Result<NaiveDateTime> {
    let text = text.trim();
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        let time = if end_of_day { date.and_hms_opt(23, 59, 59) } else { date.and_hms_opt(0, 0, 0) };
        return Ok(time.expect("valid time of day"));
    }
    for format in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(t);
        }
    }
    input_error!("{name} {text:?} is not a date (expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS)")
}

pub fn search(session: &Session, request: &SearchRequest, progress: &dyn ProgressSink) -> Result<SearchResults> {
    let alpha = request.alpha.or(session.config().retrieval.alpha).unwrap_or(0.5);
    if !(0.0..=1.0).contains(&alpha) {
        input_error!("alpha {alpha} is outside 0..=1 (it is the weight of the dense score)");
    }
    let fusion = match request.fusion {
        FusionKind::Weighted => Fusion::Weighted { alpha },
        FusionKind::ReciprocalRank => Fusion::ReciprocalRank { k: RRF_K },
    };
    let filter = SectionFilter {
        patient_id: Some(request.patient_id.clone()),
        kinds: request.kinds.clone(),
        since: request.since.as_deref().map(|t| parse_date("since", t, false)).transpose()?,
        until: request.until.as_deref().map(|t| parse_date("until", t, true)).transpose()?,
        most_recent_documents: request.recent,
    };
    if let (Some(since), Some(until)) = (filter.since, filter.until) {
        if since > until {
            input_error!("since {since} is after until {until}; nothing can match");
        }
    }
    let store = session.store()?;
    session.require_patient(&lock(&store), &request.patient_id)?;
    let embedder = match request.mode {
        Mode::Bm25 => None,
        Mode::Dense | Mode::Hybrid => {
            let embedder = session.embedder(&request.embedder)?;
            let missing = lock(&store).sections_missing_embedding(embedder.model_id(), &filter)?.len();
            if missing > 0 {
                let patient = Some(request.patient_id.clone());
                progress.report(ProgressEvent::EmbeddingNeeded { sections: missing, patient });
                embed_missing(&store, &embedder, &filter, EMBED_BATCH, progress)?;
            }
            Some(embedder)
        }
    };
    let store = lock(&store);
    let config = RetrieverConfig { mode: request.mode, fusion, ..RetrieverConfig::default() };
    let mut retriever = Retriever::new(&store, config);
    if let Some(embedder) = &embedder {
        retriever = retriever.with_embedder(embedder);
    }
    let hits = retriever.search(&request.query, &filter, request.k)?;
    Ok(SearchResults {
        patient_id: request.patient_id.clone(),
        query: request.query.clone(),
        mode: request.mode,
        fusion: (request.mode == Mode::Hybrid).then_some(fusion),
        k: request.k,
        hits,
    })
}

impl fmt::Display for SearchResults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.hits.is_empty() {
            return writeln!(f, "no sections of patient {} match {:?}", self.patient_id, self.query);
        }
        for (i, hit) in self.hits.iter().enumerate() {
            let date = hit.date.map(|d| d.format("%Y-%m-%d").to_string()).unwrap_or_else(|| "undated".into());
            writeln!(
                f,
                "{}. {}  {}  {date}  section {}  bytes {}..{}  score {:.4}",
                i + 1,
                hit.document_id,
                hit.kind,
                hit.section_id,
                hit.start,
                hit.end,
                hit.score
            )?;
            if let Some(heading) = &hit.heading {
                writeln!(f, "   [{heading}]")?;
            }
            for line in hit.text.lines() {
                writeln!(f, "   | {line}")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// Which sections to embed.
#[derive(Debug, Clone, Default)]
pub struct EmbedRequest {
    /// Only this patient's sections; none: the whole store.
    pub patient_id: Option<String>,
    pub embedder: EmbedderChoice,
    /// Sections per stored batch.
    pub batch_size: usize,
}

/// What the embedding job did.
#[derive(Debug, Serialize)]
pub struct Embedded {
    pub model: String,
    #[serde(rename = "patient")]
    pub patient_id: Option<String>,
    /// Sections in scope.
    pub sections: usize,
    /// Embedded now.
    pub embedded: usize,
    pub already_embedded: usize,
    pub seconds: f64,
}

/// Computes and stores the vectors that the sections in scope lack.
/// Running it again embeds nothing.
pub fn embed(session: &Session, request: &EmbedRequest, progress: &dyn ProgressSink) -> Result<Embedded> {
    let store = session.store()?;
    let filter = match &request.patient_id {
        Some(patient) => {
            session.require_patient(&lock(&store), patient)?;
            SectionFilter::patient(patient.clone())
        }
        None => SectionFilter::default(),
    };
    let total = lock(&store).sections(&filter)?.len();
    let embedder = session.embedder(&request.embedder)?;
    let started = Instant::now();
    let embedded = embed_missing(&store, &embedder, &filter, request.batch_size, progress)?;
    Ok(Embedded {
        model: embedder.model_id().to_string(),
        patient_id: request.patient_id.clone(),
        sections: total,
        embedded,
        already_embedded: total - embedded,
        seconds: started.elapsed().as_secs_f64(),
    })
}

impl fmt::Display for Embedded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: embedded {} section(s), {} already had vectors ({:.1} s)",
            self.model, self.embedded, self.already_embedded, self.seconds
        )
    }
}
