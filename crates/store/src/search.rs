//! Sections as retrieval sees them: filtering by patient, kind, date range
//! and "most recent N documents", BM25 ranking through FTS5 (porter
//! stemming), and the section embeddings that dense retrieval compares.

use chrono::NaiveDateTime;
use evident_model::DocKind;
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter};
use serde::Serialize;

use crate::read::parse_kind;
use crate::{format_date, parse_date, Result, Store, StoreError};

/// Which sections a query may return. The default matches every section.
#[derive(Debug, Clone, Default)]
pub struct SectionFilter {
    pub patient_id: Option<String>,
    /// Only documents of these kinds; empty for all kinds.
    pub kinds: Vec<DocKind>,
    /// Only documents dated at or after this time (undated documents are excluded).
    pub since: Option<NaiveDateTime>,
    /// Only documents dated at or before this time (undated documents are excluded).
    pub until: Option<NaiveDateTime>,
    /// Only the N most recent documents that pass the other filters.
    pub most_recent_documents: Option<usize>,
}

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
    /// Higher is better. For BM25 this is the negated FTS5 `bm25()` value.
    pub score: f64,
}

const SECTION_COLUMNS: &str =
    "s.id, s.document_id, d.patient_id, d.kind, d.date, s.heading, s.start, s.end, s.text";

fn section_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(SectionRecord, String, Option<String>)> {
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

fn finish_section((mut s, kind, date): (SectionRecord, String, Option<String>)) -> Result<SectionRecord> {
    s.kind = parse_kind(&kind)?;
    s.date = date.as_deref().map(parse_date).transpose()?;
    Ok(s)
}

impl SectionFilter {
    pub fn patient(id: impl Into<String>) -> SectionFilter {
        SectionFilter { patient_id: Some(id.into()), ..SectionFilter::default() }
    }

    /// The SQL condition on `d` (documents) and its parameters.
    fn document_condition(&self) -> (String, Vec<Value>) {
        let mut clauses = Vec::new();
        let mut values = Vec::new();
        if let Some(p) = &self.patient_id {
            clauses.push("d.patient_id = ?".to_string());
            values.push(Value::Text(p.clone()));
        }
        if !self.kinds.is_empty() {
            clauses.push(format!("d.kind IN ({})", vec!["?"; self.kinds.len()].join(",")));
            values.extend(self.kinds.iter().map(|k| Value::Text(k.as_str().to_string())));
        }
        if let Some(since) = &self.since {
            clauses.push("d.date >= ?".to_string());
            values.push(Value::Text(format_date(since)));
        }
        if let Some(until) = &self.until {
            clauses.push("d.date <= ?".to_string());
            values.push(Value::Text(format_date(until)));
        }
        let mut condition = if clauses.is_empty() { "1".to_string() } else { clauses.join(" AND ") };
        if let Some(n) = self.most_recent_documents {
            condition = format!(
                "d.id IN (SELECT d.id FROM documents d WHERE {condition} ORDER BY d.date IS NULL, d.date DESC, d.id LIMIT {n})"
            );
        }
        (condition, values)
    }
}

/// Turns free text into an FTS5 query: each word becomes a quoted term,
/// any of which may match. FTS5 operators in the input are never
/// interpreted, so a query cannot be malformed.
pub(crate) fn fts_query(text: &str) -> Option<String> {
    let terms: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(|t| format!("\"{}\"", t.to_lowercase()))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

impl Store {
    /// The top `k` sections for `query` by BM25 among those the filter
    /// admits. Corpus statistics (IDF, average length) are over the whole
    /// store, as FTS5 keeps them.
    pub fn search_bm25(&self, query: &str, filter: &SectionFilter, k: usize) -> Result<Vec<ScoredSection>> {
        let Some(fts) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let (condition, mut values) = filter.document_condition();
        let sql = format!(
            "SELECT {SECTION_COLUMNS}, bm25(sections_fts) AS rank
             FROM sections_fts JOIN sections s ON s.id = sections_fts.rowid
             JOIN documents d ON d.id = s.document_id
             WHERE sections_fts MATCH ? AND {condition}
             ORDER BY rank LIMIT {k}"
        );
        values.insert(0, Value::Text(fts));
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(params_from_iter(values), |r| Ok((section_from_row(r)?, r.get::<_, f64>(9)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (s, rank) = row?;
            out.push(ScoredSection { section: finish_section(s)?, score: -rank });
        }
        Ok(out)
    }

    /// Every section the filter admits, in document date order.
    pub fn sections(&self, filter: &SectionFilter) -> Result<Vec<SectionRecord>> {
        self.sections_where(filter, "1", &[])
    }

    /// Sections the filter admits that have no vector from `model` yet.
    pub fn sections_missing_embedding(&self, model: &str, filter: &SectionFilter) -> Result<Vec<SectionRecord>> {
        self.sections_where(
            filter,
            "NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.section_id = s.id AND e.model = ?)",
            &[Value::Text(model.to_string())],
        )
    }

    fn sections_where(&self, filter: &SectionFilter, extra: &str, extra_values: &[Value]) -> Result<Vec<SectionRecord>> {
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

    /// Stores vectors for sections, replacing any earlier vector from the
    /// same model. All vectors of one call must have the same length.
    pub fn put_embeddings(&mut self, model: &str, items: &[(i64, Vec<f32>)]) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO embeddings (section_id, model, dims, vector) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(section_id, model) DO UPDATE SET dims = excluded.dims, vector = excluded.vector",
            )?;
            for (section_id, vector) in items {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                stmt.execute(params![section_id, model, vector.len() as i64, bytes])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The sections the filter admits that have a vector from `model`,
    /// with that vector.
    pub fn section_embeddings(&self, model: &str, filter: &SectionFilter) -> Result<Vec<(SectionRecord, Vec<f32>)>> {
        let (condition, mut values) = filter.document_condition();
        values.push(Value::Text(model.to_string()));
        let sql = format!(
            "SELECT {SECTION_COLUMNS}, e.dims, e.vector
             FROM sections s JOIN documents d ON d.id = s.document_id
             JOIN embeddings e ON e.section_id = s.id
             WHERE {condition} AND e.model = ?
             ORDER BY d.date IS NULL, d.date, d.id, s.ordinal"
        );
        let mut stmt = self.conn().prepare(&sql)?;
        let rows = stmt.query_map(params_from_iter(values), |r| {
            Ok((section_from_row(r)?, r.get::<_, i64>(9)?, r.get::<_, Vec<u8>>(10)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (s, dims, bytes) = row?;
            if bytes.len() != dims as usize * 4 {
                return Err(StoreError::Corrupt(format!(
                    "embedding of section {} has {} bytes for {dims} dimensions",
                    s.0.section_id,
                    bytes.len()
                )));
            }
            let vector = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            out.push((finish_section(s)?, vector));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::fts_query;

    #[test]
    fn fts_query_quotes_every_word_and_drops_operators() {
        assert_eq!(fts_query("HbA1c > 6.5%").as_deref(), Some("\"hba1c\" OR \"6\" OR \"5\""));
        assert_eq!(fts_query("NOT (chest AND pain)*").as_deref(), Some("\"not\" OR \"chest\" OR \"and\" OR \"pain\""));
        assert_eq!(fts_query(" -- "), None);
    }
}
