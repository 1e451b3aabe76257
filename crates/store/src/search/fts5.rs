//! FTS5 itself: free text turned into a safe FTS5 query, BM25 ranking of
//! the whole store by FTS5's `bm25()` over `sections_fts` (then the
//! filter), and FTS5's own tokenizer run on arbitrary text through a
//! scratch table (what the BM25 code asks for the terms of non-ASCII text,
//! and what tests compare the Rust tokenizer with).

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter};

use super::{finish_section, section_from_row, ScoredSection, SectionFilter, SECTION_COLUMNS};
use crate::{Result, Store, StoreError};

/// Turns free text into an FTS5 query: each word becomes a quoted term,
/// any of which may match. FTS5 operators in the input are never
/// interpreted, so a query cannot be malformed.
pub(crate) fn fts_query(text: &str) -> Option<String> {
    let terms: Vec<String> = query_words(text).map(|t| format!("\"{t}\"")).collect();
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

/// The lower-cased words of a query: runs of letters and digits.
pub(crate) fn query_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase)
}

impl Store {
    /// FTS5's own ranking over the whole store, then the filter.
    pub(crate) fn search_bm25_fts(&self, query: &str, filter: &SectionFilter, k: usize) -> Result<Vec<ScoredSection>> {
        let Some(fts) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let unfiltered = filter.admits_everything();
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
