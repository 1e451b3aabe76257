//! Sections as retrieval sees them, one module per question: which
//! sections a query may see ([`filter`]), how FTS5 ranks the whole store
//! ([`fts5`]), how BM25 ranks a patient's sections ([`bm25`]: the terms,
//! the formula, the per-query scan and the in-memory index) and the vectors
//! dense retrieval compares ([`embeddings`]). This file holds what they
//! share: the section record, how it is read from SQL, and the entry point
//! [`Store::search_bm25`] that picks a ranking.

pub(crate) mod bm25;
mod embeddings;
mod filter;
pub(crate) mod fts5;

use chrono::NaiveDateTime;
use evident_model::DocKind;
use rusqlite::params_from_iter;
use rusqlite::types::Value;
use serde::Serialize;

pub use bm25::Bm25Index;
pub use filter::SectionFilter;

use crate::read::parse_kind;
use crate::{parse_date, Result, Store, StoreError};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SectionRecord {
    pub section_id: i64,
    pub document_id: String,
    pub patient_id: String,
    pub kind: DocKind,
    pub date: Option<NaiveDateTime>,
    pub heading: Option<String>,
    /// Byte offsets into the document's text: `text == document.text[start..end]`.
    pub start: usize,
    pub end: usize,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoredSection {
    pub section: SectionRecord,
    /// Higher is better. For BM25 this is the negated value of FTS5's
    /// `bm25()` over the corpus the search ranks (see `Store::search_bm25`).
    pub score: f64,
}

/// The columns [`section_from_row`] reads, from `sections s` joined with
/// `documents d`.
pub(crate) const SECTION_COLUMNS: &str =
    "s.id, s.document_id, d.patient_id, d.kind, d.date, s.heading, s.start, s.end, s.text";

/// A section row as read by SQL, its kind and date still text (parsed by
/// [`finish_section`], which can fail with the store's error).
pub(crate) type SectionRow = (SectionRecord, String, Option<String>);

pub(crate) fn section_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SectionRow> {
    Ok((
        SectionRecord {
            section_id: r.get(0)?,
            document_id: r.get(1)?,
            patient_id: r.get(2)?,
            kind: DocKind::Other,
            date: None,
            heading: r.get(5)?,
            start: r.get::<_, i64>(6)? as usize,
            end: r.get::<_, i64>(7)? as usize,
            text: r.get(8)?,
        },
        r.get(3)?,
        r.get(4)?,
    ))
}

pub(crate) fn finish_section((mut s, kind, date): SectionRow) -> Result<SectionRecord> {
    s.kind = parse_kind(&kind)?;
    s.date = date.as_deref().map(parse_date).transpose()?;
    Ok(s)
}

impl Store {
    /// The top `k` sections for `query` by BM25 among those the filter
    /// admits, best first; only sections containing at least one query word
    /// are returned.
    ///
    /// With a patient in the filter (what the report retrieval tool and the
    /// trial matcher always send), the sections the filter admits are the
    /// BM25 corpus: IDF and average length are computed over them, as
    /// rank_bm25 over one patient's record does, and the scores equal what
    /// FTS5's `bm25()` gives on a store holding only those sections (same
    /// porter/unicode61 terms, same formula with k1 = 1.2 and b = 0.75, both
    /// from `search/bm25/formula.rs`). The cost depends on the size of the
    /// patient's record, not of the store.
    ///
    /// Without a patient, FTS5 ranks the whole store with corpus-wide
    /// statistics.
    pub fn search_bm25(&self, query: &str, filter: &SectionFilter, k: usize) -> Result<Vec<ScoredSection>> {
        if filter.patient_id.is_some() {
            self.search_bm25_scoped(query, filter, k)
        } else {
            self.search_bm25_fts(query, filter, k)
        }
    }

    /// Every section the filter admits, in document date order.
    pub fn sections(&self, filter: &SectionFilter) -> Result<Vec<SectionRecord>> {
        self.sections_where(filter, "1", &[])
    }

    /// The sections the filter admits that also meet the SQL condition
    /// `extra` (on `s`, `d`), in document date order.
    pub(crate) fn sections_where(
        &self,
        filter: &SectionFilter,
        extra: &str,
        extra_values: &[Value],
    ) -> Result<Vec<SectionRecord>> {
        let (condition, mut values) = filter.document_condition();
        values.extend_from_slice(extra_values);
        let sql = format!(
            "SELECT {SECTION_COLUMNS} FROM sections s JOIN documents d ON d.id = s.document_id
             WHERE {condition} AND {extra}
             ORDER BY d.date IS NULL, d.date, d.id, s.ordinal"
        );
        let mut stmt = self.conn().prepare(&sql)?;
        let rows = stmt.query_map(params_from_iter(values), section_from_row)?;
        rows.map(|row| finish_section(row?)).collect()
    }

    /// The sections with these ids, in the given order, with their scores.
    pub(crate) fn scored_sections(&self, best: Vec<(i64, f64)>) -> Result<Vec<ScoredSection>> {
        if best.is_empty() {
            return Ok(Vec::new());
        }
        let wanted: Vec<i64> = best.iter().map(|(id, _)| *id).collect();
        let sql = format!(
            "SELECT {SECTION_COLUMNS} FROM sections s JOIN documents d ON d.id = s.document_id WHERE s.id IN ({})",
            vec!["?"; wanted.len()].join(",")
        );
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(params_from_iter(wanted.iter()), section_from_row)?;
        let mut by_id = std::collections::HashMap::new();
        for row in rows {
            let s = finish_section(row?)?;
            by_id.insert(s.section_id, s);
        }
        best.into_iter()
            .map(|(id, score)| {
                let section = by_id
                    .remove(&id)
                    .ok_or_else(|| StoreError::Corrupt(format!("section {id} vanished during a BM25 search")))?;
                Ok(ScoredSection { section, score })
            })
            .collect()
    }
}
