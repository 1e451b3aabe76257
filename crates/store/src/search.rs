//! Sections as retrieval sees them: filtering by patient, kind, date range
//! and "most recent N documents"; BM25 ranking, within one patient scored
//! here over the patient's sections with FTS5's terms and formula (a port
//! of its porter/unicode61 tokenizer), over the whole store by FTS5 itself;
//! and the section embeddings that dense retrieval compares.

use chrono::NaiveDateTime;
use evident_model::DocKind;
use rusqlite::types::{Value, ValueRef};
use rusqlite::{params, params_from_iter};
use serde::Serialize;

use crate::read::parse_kind;
use crate::{format_date, parse_date, Result, Store, StoreError};

/// Which sections a query may return. The default matches every section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// Higher is better. For BM25 this is the negated value of FTS5's
    /// `bm25()` over the corpus the search ranks (see `Store::search_bm25`).
    pub score: f64,
}

const SECTION_COLUMNS: &str = "s.id, s.document_id, d.patient_id, d.kind, d.date, s.heading, s.start, s.end, s.text";

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
    pub(crate) fn document_condition(&self) -> (String, Vec<Value>) {
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
    let terms: Vec<String> = query_words(text).map(|t| format!("\"{t}\"")).collect();
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

/// The lower-cased words of a query: runs of letters and digits.
fn query_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase)
}

/// Non-ASCII sections are tokenized by FTS5 itself, this many at a time.
const FTS5_BATCH: usize = 512;

/// What BM25 takes of each section as [`Store::read_sections_into`] reads
/// them: the per-query scorer here and the in-memory index.
pub(crate) trait SectionSink {
    /// The next section, whose text and heading are ASCII.
    fn ascii(&mut self, columns: [&[u8]; 2]);
    /// The next section, whose terms [`SectionSink::terms`] gives later.
    fn placeholder(&mut self);
    /// The terms (per column: text, heading) of the section at `index`.
    fn terms(&mut self, index: usize, columns: &[Vec<String>]);
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
    /// porter/unicode61 terms, same formula, k1 = 1.2, b = 0.75). The cost
    /// depends on the size of the patient's record, not of the store.
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

    /// FTS5's own ranking over the whole store, then the filter.
    fn search_bm25_fts(&self, query: &str, filter: &SectionFilter, k: usize) -> Result<Vec<ScoredSection>> {
        let Some(fts) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let unfiltered = filter.patient_id.is_none()
            && filter.kinds.is_empty()
            && filter.since.is_none()
            && filter.until.is_none()
            && filter.most_recent_documents.is_none();
        let (condition, mut values) = filter.document_condition();
        // Without a filter, the top k is taken inside FTS5 before any join,
        // so only k rows are joined; with one, every match is joined and
        // filtered before the sort.
        let sql = if unfiltered {
            format!(
                "SELECT {SECTION_COLUMNS}, top.rank
                 FROM (SELECT rowid, rank FROM sections_fts WHERE sections_fts MATCH ? ORDER BY rank LIMIT {k}) top
                 JOIN sections s ON s.id = top.rowid
                 JOIN documents d ON d.id = s.document_id
                 ORDER BY top.rank"
            )
        } else {
            format!(
                "SELECT {SECTION_COLUMNS}, bm25(sections_fts) AS rank
                 FROM sections_fts JOIN sections s ON s.id = sections_fts.rowid
                 JOIN documents d ON d.id = s.document_id
                 WHERE sections_fts MATCH ? AND {condition}
                 ORDER BY rank LIMIT {k}"
            )
        };
        values.insert(0, Value::Text(fts));
        if unfiltered {
            values.truncate(1);
        }
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(params_from_iter(values), |r| Ok((section_from_row(r)?, r.get::<_, f64>(9)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (s, rank) = row?;
            out.push(ScoredSection { section: finish_section(s)?, score: -rank });
        }
        Ok(out)
    }

    /// BM25 over exactly the sections the filter admits, scored here from
    /// their text (see [`Store::search_bm25`]).
    pub(crate) fn search_bm25_scoped(
        &self,
        query: &str,
        filter: &SectionFilter,
        k: usize,
    ) -> Result<Vec<ScoredSection>> {
        let phrases = self.query_phrases(query)?;
        if phrases.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let mut scorer = bm25::Scorer::new(&phrases);
        let ids = self.read_sections_into(filter, &mut scorer)?;
        let best = scorer.top_k(k, &ids).into_iter().map(|(i, score)| (ids[i], score)).collect();
        self.scored_sections(best)
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

    /// Reads the text and heading of every section `filter` admits, in
    /// section id order, into `sink`: ASCII sections as bytes, the others
    /// tokenized by FTS5 itself afterwards. Returns the section ids in the
    /// order given to the sink.
    pub(crate) fn read_sections_into(&self, filter: &SectionFilter, sink: &mut impl SectionSink) -> Result<Vec<i64>> {
        let (condition, values) = filter.document_condition();
        let sql = format!(
            "SELECT s.id, s.text, coalesce(s.heading, '') FROM sections s JOIN documents d ON d.id = s.document_id
             WHERE {condition} ORDER BY s.id"
        );
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let mut rows = stmt.query(params_from_iter(values))?;
        let mut ids = Vec::new();
        let mut exact: Vec<(usize, String, String)> = Vec::new();
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let (ValueRef::Text(text), ValueRef::Text(heading)) = (row.get_ref(1)?, row.get_ref(2)?) else {
                return Err(StoreError::Corrupt(format!("section {id} has a text or heading that is not text")));
            };
            if text.is_ascii() && heading.is_ascii() {
                sink.ascii([text, heading]);
            } else {
                let utf8 = |b: &[u8]| {
                    String::from_utf8(b.to_vec())
                        .map_err(|_| StoreError::Corrupt(format!("section {id} is not valid UTF-8")))
                };
                exact.push((ids.len(), utf8(text)?, utf8(heading)?));
                sink.placeholder();
            }
            ids.push(id);
        }
        drop(rows);
        for batch in exact.chunks(FTS5_BATCH) {
            let texts: Vec<[&str; 2]> = batch.iter().map(|(_, t, h)| [t.as_str(), h.as_str()]).collect();
            for ((index, _, _), columns) in batch.iter().zip(self.fts5_terms(&texts)?) {
                sink.terms(*index, &columns);
            }
        }
        Ok(ids)
    }

    /// The query as FTS5 phrases: one per word of [`fts_query`], each the
    /// list of terms FTS5 would search for. Words that yield no term are
    /// dropped (in FTS5 they match nothing and add nothing to any score).
    pub(crate) fn query_phrases(&self, query: &str) -> Result<Vec<Vec<String>>> {
        let mut phrases = Vec::new();
        for word in query_words(query) {
            if word.is_ascii() {
                // An ASCII word of letters and digits is exactly one token.
                phrases.push(vec![terms::stem_string(word.as_bytes())]);
            } else {
                let mut columns = self.fts5_terms(&[[word.as_str(), ""]])?;
                let terms = std::mem::take(&mut columns[0][0]);
                if !terms.is_empty() {
                    phrases.push(terms);
                }
            }
        }
        Ok(phrases)
    }

    /// The terms FTS5 indexes for `text`, in order: lower-cased, diacritics
    /// removed, porter-stemmed, exactly as the `sections_fts` index holds
    /// them. ASCII text is tokenized in Rust; anything else by FTS5 itself.
    pub fn index_terms(&self, text: &str) -> Result<Vec<String>> {
        if text.is_ascii() {
            return Ok(terms::ascii_terms(text.as_bytes()));
        }
        let mut columns = self.fts5_terms(&[[text, ""]])?;
        Ok(std::mem::take(&mut columns[0][0]))
    }

    /// The FTS5 terms of each (text, heading) pair, per column in order,
    /// from a scratch FTS5 table in the connection's temp schema with the
    /// same tokenizer as `sections_fts`.
    pub(crate) fn fts5_terms(&self, rows: &[[&str; 2]]) -> Result<Vec<[Vec<String>; 2]>> {
        let conn = self.conn();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.evident_terms
                 USING fts5(text, heading, tokenize = 'porter unicode61');
             CREATE VIRTUAL TABLE IF NOT EXISTS temp.evident_terms_instance
                 USING fts5vocab(temp, evident_terms, instance);
             DELETE FROM temp.evident_terms;",
        )?;
        {
            let mut insert =
                conn.prepare_cached("INSERT INTO temp.evident_terms (rowid, text, heading) VALUES (?1, ?2, ?3)")?;
            for (i, [text, heading]) in rows.iter().enumerate() {
                insert.execute(params![i as i64, text, heading])?;
            }
        }
        let mut out: Vec<[Vec<(i64, String)>; 2]> = (0..rows.len()).map(|_| [Vec::new(), Vec::new()]).collect();
        {
            let mut stmt = conn.prepare_cached("SELECT term, doc, col, offset FROM temp.evident_terms_instance")?;
            let mut result = stmt.query([])?;
            while let Some(r) = result.next()? {
                let doc: i64 = r.get(1)?;
                let col = if r.get::<_, String>(2)? == "heading" { 1 } else { 0 };
                let slot = out.get_mut(doc as usize).ok_or_else(|| {
                    StoreError::Corrupt(format!("the scratch FTS5 table returned an unknown row {doc}"))
                })?;
                slot[col].push((r.get(3)?, r.get(0)?));
            }
        }
        conn.execute("DELETE FROM temp.evident_terms", [])?;
        Ok(out
            .into_iter()
            .map(|columns| {
                columns.map(|mut terms| {
                    terms.sort_by_key(|(offset, _)| *offset);
                    terms.into_iter().map(|(_, t)| t).collect()
                })
            })
            .collect())
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

    fn sections_where(
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

/// BM25 exactly as FTS5's `bm25()` computes it (k1 = 1.2, b = 0.75, IDF
/// `ln((N - n + 0.5) / (n + 0.5))` floored at 1e-6, one phrase per query
/// word, row length = tokens of text and heading), with the corpus being
/// the sections added to a [`Scorer`].
mod bm25 {
    use super::terms;

    const K1: f64 = 1.2;
    const B: f64 = 0.75;

    /// A single-term phrase and how much of it a token must share before
    /// it is worth stemming (see [`terms::CHANGED_TAIL`]).
    struct Target {
        term: Vec<u8>,
        prefix: usize,
    }

    pub(super) struct Scorer<'q> {
        phrases: &'q [Vec<String>],
        /// Distinct terms when every phrase is one term; `None` otherwise.
        targets: Option<Vec<Target>>,
        /// For each phrase, its index in `targets`.
        phrase_target: Vec<usize>,
        /// Tokens per section.
        lengths: Vec<u32>,
        /// Phrase frequencies, `phrases.len()` per section.
        freqs: Vec<u32>,
        counts: Vec<u32>,
        lower: Vec<u8>,
        stem: Vec<u8>,
    }

    impl<'q> Scorer<'q> {
        pub(super) fn new(phrases: &'q [Vec<String>]) -> Self {
            let mut targets: Vec<Target> = Vec::new();
            let mut phrase_target = Vec::new();
            let single = phrases.iter().all(|p| p.len() == 1);
            if single {
                for p in phrases {
                    let term = p[0].as_bytes();
                    let at = match targets.iter().position(|t| t.term == term) {
                        Some(at) => at,
                        None => {
                            let prefix = term.len().saturating_sub(terms::CHANGED_TAIL).max(1).min(term.len());
                            targets.push(Target { term: term.to_vec(), prefix });
                            targets.len() - 1
                        }
                    };
                    phrase_target.push(at);
                }
            }
            let n_targets = targets.len();
            Scorer {
                phrases,
                targets: single.then_some(targets),
                phrase_target,
                lengths: Vec::new(),
                freqs: Vec::new(),
                counts: vec![0; n_targets],
                lower: Vec::new(),
                stem: Vec::new(),
            }
        }
    }

    impl super::SectionSink for Scorer<'_> {
        /// Adds a section whose columns are all ASCII.
        fn ascii(&mut self, columns: [&[u8]; 2]) {
            if self.targets.is_none() {
                let terms: Vec<Vec<String>> = columns.iter().map(|c| terms::ascii_terms(c)).collect();
                self.lengths.push(0);
                self.freqs.extend(std::iter::repeat_n(0, self.phrases.len()));
                self.terms(self.lengths.len() - 1, &terms);
                return;
            }
            let targets = self.targets.as_ref().expect("checked above");
            self.counts.iter_mut().for_each(|c| *c = 0);
            let mut length = 0u32;
            for text in columns {
                length += terms::count_tokens(text);
                // Find each term's head where a token starts, and stem only
                // those tokens: a token can only stem to a term it shares
                // that head with.
                self.lower.clear();
                self.lower.extend(text.iter().map(u8::to_ascii_lowercase));
                let lower = std::str::from_utf8(&self.lower).expect("ASCII");
                for (t, target) in targets.iter().enumerate() {
                    let head = &target.term[..target.prefix];
                    let head = std::str::from_utf8(head).expect("ASCII");
                    for (at, _) in lower.match_indices(head) {
                        let bytes = lower.as_bytes();
                        if at > 0 && bytes[at - 1].is_ascii_alphanumeric() {
                            continue;
                        }
                        let end =
                            bytes[at..].iter().position(|b| !b.is_ascii_alphanumeric()).map_or(bytes.len(), |n| at + n);
                        let token = &bytes[at..end];
                        if token.len() < target.term.len() {
                            continue;
                        }
                        terms::stem(token, &mut self.stem);
                        if self.stem == target.term {
                            self.counts[t] += 1;
                        }
                    }
                }
            }
            self.lengths.push(length);
            for &t in &self.phrase_target {
                self.freqs.push(self.counts[t]);
            }
        }

        /// Adds a section whose terms will be given by `terms`.
        fn placeholder(&mut self) {
            self.lengths.push(0);
            self.freqs.extend(std::iter::repeat_n(0, self.phrases.len()));
        }

        /// Sets section `index`'s length and phrase frequencies from its
        /// terms, one list per column (phrases never span columns).
        fn terms(&mut self, index: usize, columns: &[Vec<String>]) {
            self.lengths[index] = columns.iter().map(|c| c.len() as u32).sum();
            let row = &mut self.freqs[index * self.phrases.len()..(index + 1) * self.phrases.len()];
            for (slot, phrase) in row.iter_mut().zip(self.phrases) {
                *slot = columns
                    .iter()
                    .map(|c| {
                        c.windows(phrase.len()).filter(|w| w.iter().zip(phrase).all(|(a, b)| a == b)).count() as u32
                    })
                    .sum();
            }
        }
    }

    impl Scorer<'_> {
        /// The best `k` sections that contain at least one phrase, as
        /// (index in insertion order, score), best first; ties in order of
        /// `ids` (one per section, in insertion order).
        pub(super) fn top_k(&self, k: usize, ids: &[i64]) -> Vec<(usize, f64)> {
            let n_rows = self.lengths.len();
            let n_phrases = self.phrases.len();
            if n_rows == 0 || n_phrases == 0 {
                return Vec::new();
            }
            let tokens: u64 = self.lengths.iter().map(|&l| u64::from(l)).sum();
            let avgdl = tokens as f64 / n_rows as f64;
            let idf: Vec<f64> = (0..n_phrases)
                .map(|p| {
                    let hits = (0..n_rows).filter(|r| self.freqs[r * n_phrases + p] > 0).count() as i64;
                    let idf = (((n_rows as i64 - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
                    if idf <= 0.0 {
                        1e-6
                    } else {
                        idf
                    }
                })
                .collect();
            let mut scored: Vec<(usize, f64)> = Vec::new();
            for r in 0..n_rows {
                let row = &self.freqs[r * n_phrases..(r + 1) * n_phrases];
                if row.iter().all(|&f| f == 0) {
                    continue;
                }
                let d = f64::from(self.lengths[r]);
                let mut score = 0.0;
                for (p, &f) in row.iter().enumerate() {
                    let f = f64::from(f);
                    score += idf[p] * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * d / avgdl)));
                }
                scored.push((r, score));
            }
            let order = |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(ids[a.0].cmp(&ids[b.0]));
            if scored.len() > k {
                scored.select_nth_unstable_by(k - 1, order);
                scored.truncate(k);
            }
            scored.sort_by(order);
            scored
        }
    }
}

/// A port of FTS5's `porter unicode61` tokenizer for ASCII text: tokens
/// are runs of ASCII letters and digits, lower-cased, then stemmed by the
/// porter rules exactly as `fts5_porter.c` applies them (tokens shorter
/// than 3 or longer than 64 bytes pass through unstemmed). Non-ASCII text
/// is left to FTS5 itself ([`Store::index_terms`]).
pub(crate) mod terms {
    const MAX_STEMMED: usize = 64;

    /// A stem differs from its token in at most this many trailing bytes,
    /// and never in the first, and is never longer: every porter rule
    /// rewrites a suffix, keeps a non-empty stem and does not lengthen the
    /// word, and the rewrites that survive the later steps add at most 2
    /// bytes past the part shared with the token ("ability" -> "able":
    /// "ab" + "le"; "studying" -> "studi"). Tested on every token of the
    /// Synthea notes.
    pub(super) const CHANGED_TAIL: usize = 2;

    /// How many tokens the ASCII `text` holds: runs of letters and digits.
    pub(crate) fn count_tokens(text: &[u8]) -> u32 {
        let mut n = 0;
        let mut previous = false;
        for &b in text {
            let alnum = b.is_ascii_alphanumeric();
            n += u32::from(alnum & !previous);
            previous = alnum;
        }
        n
    }

    pub(super) fn ascii_terms(text: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        let mut stem_buf = Vec::new();
        for raw in text.split(|b| !b.is_ascii_alphanumeric()).filter(|t| !t.is_empty()) {
            let token: Vec<u8> = raw.iter().map(u8::to_ascii_lowercase).collect();
            stem(&token, &mut stem_buf);
            out.push(String::from_utf8(stem_buf.clone()).expect("ASCII"));
        }
        out
    }

    /// The stem of one lower-cased ASCII token as a string.
    pub(super) fn stem_string(token: &[u8]) -> String {
        let mut out = Vec::new();
        stem(token, &mut out);
        String::from_utf8(out).expect("stems of ASCII tokens are ASCII")
    }

    fn is_vowel(c: u8, y_is_vowel: bool) -> bool {
        matches!(c, b'a' | b'e' | b'i' | b'o' | b'u') || (y_is_vowel && c == b'y')
    }

    /// Skips one vowel run and the consonant run after it; returns the
    /// index just past that consonant, or 0 if there is none.
    fn gobble_vc(stem: &[u8], prev_consonant: bool) -> usize {
        let mut consonant = prev_consonant;
        let mut i = 0;
        while i < stem.len() {
            consonant = !is_vowel(stem[i], consonant);
            if !consonant {
                break;
            }
            i += 1;
        }
        i += 1;
        while i < stem.len() {
            consonant = !is_vowel(stem[i], consonant);
            if consonant {
                return i + 1;
            }
            i += 1;
        }
        0
    }

    fn m_gt0(stem: &[u8]) -> bool {
        gobble_vc(stem, false) != 0
    }

    fn m_gt1(stem: &[u8]) -> bool {
        let n = gobble_vc(stem, false);
        n != 0 && gobble_vc(&stem[n..], true) != 0
    }

    fn m_eq1(stem: &[u8]) -> bool {
        let n = gobble_vc(stem, false);
        n != 0 && gobble_vc(&stem[n..], true) == 0
    }

    /// Ends consonant-vowel-consonant, the last not w, x or y.
    fn o_star(stem: &[u8]) -> bool {
        match stem.last() {
            None | Some(b'w' | b'x' | b'y') => false,
            Some(_) => {
                let mut mask = 0u32;
                let mut consonant = false;
                for &c in stem {
                    consonant = !is_vowel(c, consonant);
                    mask = (mask << 1) + u32::from(consonant);
                }
                mask & 7 == 5
            }
        }
    }

    fn m_gt1_and_s_or_t(stem: &[u8]) -> bool {
        matches!(stem.last(), Some(b's' | b't')) && m_gt1(stem)
    }

    fn has_vowel(stem: &[u8]) -> bool {
        stem.iter().enumerate().any(|(i, &c)| is_vowel(c, i > 0))
    }

    type Cond = fn(&[u8]) -> bool;

    /// Applies the first rule whose suffix the word ends with (the word
    /// longer than the suffix): if its condition holds on the rest, the
    /// suffix is replaced. Returns the index of the rule that replaced.
    fn apply(buf: &mut Vec<u8>, rules: &[(&str, Cond, &str)]) -> Option<usize> {
        let n = buf.len();
        for (i, (suffix, cond, output)) in rules.iter().enumerate() {
            let suffix = suffix.as_bytes();
            if n > suffix.len() && buf.ends_with(suffix) {
                let stem = n - suffix.len();
                if cond(&buf[..stem]) {
                    buf.truncate(stem);
                    buf.extend_from_slice(output.as_bytes());
                    return Some(i);
                }
                return None;
            }
        }
        None
    }

    const STEP2: &[(&str, Cond, &str)] = &[
        ("ational", m_gt0, "ate"),
        ("tional", m_gt0, "tion"),
        ("enci", m_gt0, "ence"),
        ("anci", m_gt0, "ance"),
        ("izer", m_gt0, "ize"),
        ("logi", m_gt0, "log"),
        ("bli", m_gt0, "ble"),
        ("alli", m_gt0, "al"),
        ("entli", m_gt0, "ent"),
        ("eli", m_gt0, "e"),
        ("ousli", m_gt0, "ous"),
        ("ization", m_gt0, "ize"),
        ("ation", m_gt0, "ate"),
        ("ator", m_gt0, "ate"),
        ("alism", m_gt0, "al"),
        ("iveness", m_gt0, "ive"),
        ("fulness", m_gt0, "ful"),
        ("ousness", m_gt0, "ous"),
        ("aliti", m_gt0, "al"),
        ("iviti", m_gt0, "ive"),
        ("biliti", m_gt0, "ble"),
    ];

    const STEP3: &[(&str, Cond, &str)] = &[
        ("ical", m_gt0, "ic"),
        ("ness", m_gt0, ""),
        ("icate", m_gt0, "ic"),
        ("iciti", m_gt0, "ic"),
        ("ful", m_gt0, ""),
        ("ative", m_gt0, ""),
        ("alize", m_gt0, "al"),
    ];

    const STEP4: &[(&str, Cond, &str)] = &[
        ("al", m_gt1, ""),
        ("ance", m_gt1, ""),
        ("ence", m_gt1, ""),
        ("er", m_gt1, ""),
        ("ic", m_gt1, ""),
        ("able", m_gt1, ""),
        ("ible", m_gt1, ""),
        ("ant", m_gt1, ""),
        ("ement", m_gt1, ""),
        ("ment", m_gt1, ""),
        ("ent", m_gt1, ""),
        ("ion", m_gt1_and_s_or_t, ""),
        ("ou", m_gt1, ""),
        ("ism", m_gt1, ""),
        ("ate", m_gt1, ""),
        ("iti", m_gt1, ""),
        ("ous", m_gt1, ""),
        ("ive", m_gt1, ""),
        ("ize", m_gt1, ""),
    ];

    const STEP1B: &[(&str, Cond, &str)] = &[("eed", m_gt0, "ee"), ("ed", has_vowel, ""), ("ing", has_vowel, "")];

    fn always(_: &[u8]) -> bool {
        true
    }

    const STEP1B2: &[(&str, Cond, &str)] = &[("at", always, "ate"), ("bl", always, "ble"), ("iz", always, "ize")];

    /// Writes the porter stem of the lower-cased ASCII `token` to `out`.
    pub(crate) fn stem(token: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(token);
        if token.len() > MAX_STEMMED || token.len() < 3 {
            return;
        }
        let buf = out;
        // Step 1a.
        let n = buf.len();
        if buf[n - 1] == b's' {
            if buf[n - 2] == b'e' {
                if (n > 4 && buf[n - 4] == b's' && buf[n - 3] == b's') || (n > 3 && buf[n - 3] == b'i') {
                    buf.truncate(n - 2);
                } else {
                    buf.truncate(n - 1);
                }
            } else if buf[n - 2] != b's' {
                buf.truncate(n - 1);
            }
        }
        // Step 1b; only the "ed" and "ing" removals go on to 1b2.
        if matches!(apply(buf, STEP1B), Some(1 | 2)) && apply(buf, STEP1B2).is_none() {
            let n = buf.len();
            let c = buf[n - 1];
            if !is_vowel(c, false) && !matches!(c, b'l' | b's' | b'z') && n >= 2 && c == buf[n - 2] {
                buf.truncate(n - 1);
            } else if m_eq1(buf) && o_star(buf) {
                buf.push(b'e');
            }
        }
        // Step 1c.
        let n = buf.len();
        if buf[n - 1] == b'y' && has_vowel(&buf[..n - 1]) {
            buf[n - 1] = b'i';
        }
        // Steps 2 to 4.
        apply(buf, STEP2);
        apply(buf, STEP3);
        apply(buf, STEP4);
        // Step 5a.
        let n = buf.len();
        if buf[n - 1] == b'e' {
            let rest = &buf[..n - 1];
            if m_gt1(rest) || (m_eq1(rest) && !o_star(rest)) {
                buf.truncate(n - 1);
            }
        }
        // Step 5b.
        let n = buf.len();
        if n > 1 && buf[n - 1] == b'l' && buf[n - 2] == b'l' && m_gt1(&buf[..n - 1]) {
            buf.truncate(n - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use evident_model::text::split_sections;
    use evident_model::{DocKind, Document, Patient, SectionSpan};

    use super::{fts_query, terms, SectionFilter};
    use crate::Store;

    #[test]
    fn fts_query_quotes_every_word_and_drops_operators() {
        assert_eq!(fts_query("HbA1c > 6.5%").as_deref(), Some("\"hba1c\" OR \"6\" OR \"5\""));
        assert_eq!(fts_query("NOT (chest AND pain)*").as_deref(), Some("\"not\" OR \"chest\" OR \"and\" OR \"pain\""));
        assert_eq!(fts_query(" -- "), None);
    }

    fn base64_decode(text: &str) -> Vec<u8> {
        let value = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        };
        let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=' && !c.is_ascii_whitespace()).map(value).collect();
        let mut out = Vec::new();
        for chunk in digits.chunks(4) {
            let bits = chunk.iter().enumerate().fold(0u32, |acc, (i, &d)| acc | (u32::from(d) << (18 - 6 * i)));
            out.extend_from_slice(&bits.to_be_bytes()[1..chunk.len()]);
        }
        out
    }

    /// Every note text of the Synthea sample (../shared/data, required).
    fn synthea_notes() -> Vec<String> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/data/synthea/sample-bulk-fhir-datasets-10-patients/DocumentReference.000.ndjson"
        );
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}; the shared data is required"));
        let mut notes = Vec::new();
        for line in text.lines() {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            for content in value["content"].as_array().into_iter().flatten() {
                if let Some(data) = content["attachment"]["data"].as_str() {
                    notes.push(String::from_utf8(base64_decode(data)).unwrap());
                }
            }
        }
        assert!(notes.len() > 1000, "expected the 1,215 Synthea notes, found {}", notes.len());
        notes
    }

    /// The Rust tokenizer gives exactly FTS5's terms (same order, same
    /// stems) on every section of the real notes, and every stem keeps the
    /// token's head as the scorer's prefilter assumes.
    #[test]
    fn rust_terms_equal_fts5_terms_on_the_synthea_notes() {
        let store = Store::open_in_memory().unwrap();
        let notes = synthea_notes();
        let mut texts: Vec<&str> = Vec::new();
        for note in &notes {
            for s in split_sections(note) {
                texts.push(&note[s.start..s.end]);
            }
        }
        let rows: Vec<[&str; 2]> = texts.iter().map(|t| [*t, ""]).collect();
        let exact = store.fts5_terms(&rows).unwrap();
        let mut tokens = 0;
        for (text, columns) in texts.iter().zip(&exact) {
            assert!(text.is_ascii());
            assert_eq!(terms::ascii_terms(text.as_bytes()), columns[0], "terms of {text:?}");
            tokens += columns[0].len();
            for raw in text.split(|c: char| !c.is_ascii_alphanumeric()).filter(|t| !t.is_empty()) {
                let token = raw.to_ascii_lowercase();
                let stem = terms::stem_string(token.as_bytes());
                let shared = token.bytes().zip(stem.bytes()).take_while(|(a, b)| a == b).count();
                assert!(stem.len() <= token.len(), "{token} -> {stem}");
                assert!(shared >= 1 && shared + terms::CHANGED_TAIL >= stem.len(), "{token} -> {stem}");
            }
        }
        assert!(tokens > 100_000, "only {tokens} tokens compared");
    }

    #[test]
    fn porter_edge_cases_match_fts5() {
        let store = Store::open_in_memory().unwrap();
        let words = "aed aing ied ies sses ss caresses ponies ties cats feed agreed plastered bled motoring sing \
            conflated troubled sized hopping tanned falling hissing fizzed failing filing happy sky relational \
            conditional rational valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli \
            vietnamization predication operator feudalism decisiveness hopefulness callousness formaliti \
            sensitiviti sensibiliti triplicate formative formalize electriciti electrical hopeful goodness revival \
            allowance inference airliner gyroscopic adjustable defensible irritant replacement adjustment dependent \
            adoption homologou communism activate angulariti homologous effective bowdlerize probate rate cease \
            controll roll generalizations oscillators yyy qwertyuiopasdfghjklzxcvbnmqwertyuiopasdfghjklzxcvbnmqwertyuiopqq";
        let exact = store.fts5_terms(&[[words, ""]]).unwrap();
        assert_eq!(terms::ascii_terms(words.as_bytes()), exact[0][0]);
    }

    fn store_with(documents: &[(&str, &str, DocKind, &str)]) -> Store {
        let mut store = Store::open_in_memory().unwrap();
        let w = store.writer().unwrap();
        for (patient, id, kind, text) in documents {
            w.upsert_patient(&Patient {
                id: patient.to_string(),
                source: "test".into(),
                birth_date: None,
                sex: None,
                display_name: None,
            })
            .unwrap();
            let doc = Document {
                id: id.to_string(),
                patient_id: patient.to_string(),
                kind: *kind,
                date: None,
                title: id.to_string(),
                source: "test".into(),
                source_id: id.to_string(),
                text: text.to_string(),
            };
            let sections: Vec<SectionSpan> = text
                .split_inclusive("\n\n")
                .scan(0, |at, part| {
                    let span = SectionSpan { heading: Some(format!("Teil {id}")), start: *at, end: *at + part.len() };
                    *at += part.len();
                    Some(span)
                })
                .collect();
            w.put_document(&doc, &sections, &[]).unwrap();
        }
        w.commit().unwrap();
        store
    }

    /// Non-ASCII sections and query words take FTS5's own terms; the
    /// per-patient ranking equals FTS5's bm25() on a store holding only
    /// that patient.
    #[test]
    fn scoped_bm25_equals_fts5_on_a_store_of_the_patient_alone_with_non_ascii_text() {
        let p1 = [
            (
                "p1",
                "a",
                DocKind::Radiology,
                "Schädel-MRT: keine Blutung.\n\nBefund: Läsion im Schädel, größer als zuvor.",
            ),
            (
                "p1",
                "b",
                DocKind::ProgressNote,
                "Patient reports chest pain.\n\nChest pains worse on exertion; pain score 7.",
            ),
            (
                "p1",
                "c",
                DocKind::LabReport,
                "Kreatinin erhöht. Hämoglobin 9.1 g/dL.\n\nNo chest findings. Schadel normal.",
            ),
        ];
        let p2 = [("p2", "d", DocKind::ProgressNote, "Chest pain and Schädel trauma.\n\nPain pain pain.")];
        let both = store_with(&[&p1[..], &p2[..]].concat());
        let alone = store_with(&p1);
        let index = both.bm25_index(&SectionFilter::patient("p1")).unwrap();
        for query in
            ["schädel läsion", "chest pain", "Hämoglobin größer", "pain pain", "SCHADEL", "mrt blutung 7", "nothing"]
        {
            let scoped = both.search_bm25(query, &SectionFilter::patient("p1"), 20).unwrap();
            let reference = alone.search_bm25_fts(query, &SectionFilter::default(), 20).unwrap();
            let key = |r: &Vec<super::ScoredSection>| -> Vec<(String, usize, String)> {
                r.iter().map(|h| (h.section.document_id.clone(), h.section.start, format!("{:.12}", h.score))).collect()
            };
            assert_eq!(key(&scoped), key(&reference), "query {query:?}");
            let indexed = both.search_bm25_index(&index, query, 20).unwrap();
            assert_eq!(key(&indexed), key(&reference), "query {query:?} through the in-memory index");
            if query != "nothing" {
                assert!(!scoped.is_empty(), "query {query:?} found nothing");
            }
        }
        let kinds =
            SectionFilter { kinds: vec![DocKind::Radiology, DocKind::LabReport], ..SectionFilter::patient("p1") };
        let alone_kinds = store_with(&[p1[0], p1[2]]);
        let scoped = both.search_bm25("schädel chest", &kinds, 20).unwrap();
        let reference = alone_kinds.search_bm25_fts("schädel chest", &SectionFilter::default(), 20).unwrap();
        assert_eq!(
            scoped
                .iter()
                .map(|h| (&h.section.document_id, h.section.start, (h.score * 1e9).round()))
                .collect::<Vec<_>>(),
            reference
                .iter()
                .map(|h| (&h.section.document_id, h.section.start, (h.score * 1e9).round()))
                .collect::<Vec<_>>()
        );
        assert_eq!(both.index_terms("Größer Schädel-MRTs").unwrap(), vec!["großer", "schadel", "mrt"]);
        assert_eq!(both.index_terms("Running pains").unwrap(), vec!["run", "pain"]);
    }
}
