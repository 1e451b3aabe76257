//! BM25 ranking computed by Evident rather than by FTS5, so that the corpus
//! can be the sections a filter admits (one patient's record) instead of
//! the whole store, with FTS5's terms and formula so that the scores are
//! the ones FTS5 would give on a store holding only those sections.
//!
//! - [`terms`]: the terms FTS5's `porter unicode61` tokenizer indexes (a
//!   port of the tokenizer and the Porter stemmer for ASCII text).
//! - [`formula`]: k1, b, IDF and a term's score, defined once.
//! - [`scan`]: the per-query scan over the admitted sections.
//! - [`index`]: the in-memory [`Bm25Index`], built once and queried many
//!   times.
//!
//! Both rankers read the sections through [`Store::read_sections_into`].

pub(crate) mod formula;
mod index;
mod scan;
pub(crate) mod terms;

use rusqlite::params_from_iter;
use rusqlite::types::ValueRef;

pub use index::Bm25Index;

use super::SectionFilter;
use crate::{Result, Store, StoreError};

/// Non-ASCII sections are tokenized by FTS5 itself, this many at a time.
const FTS5_BATCH: usize = 512;

/// What BM25 takes of each section as [`Store::read_sections_into`] reads
/// them: the per-query scan and the in-memory index.
pub(crate) trait SectionSink {
    /// The next section, whose text and heading are ASCII.
    fn ascii(&mut self, columns: [&[u8]; 2]);
    /// The next section, whose terms [`SectionSink::terms`] gives later.
    fn placeholder(&mut self);
    /// The terms (per column: text, heading) of the section at `index`.
    fn terms(&mut self, index: usize, columns: &[Vec<String>]);
}

impl Store {
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
}

#[cfg(test)]
mod tests {
    use evident_model::{DocKind, Document, Patient, SectionSpan};

    use crate::{ScoredSection, SectionFilter, Store};

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
    /// per-patient ranking (the scan and the in-memory index) equals FTS5's
    /// bm25() on a store holding only that patient.
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
            // A term outside ASCII once had its head cut inside a
            // character ("β" after one byte) and panicked on ASCII sections.
            [
                "schädel läsion",
                "chest pain",
                "Hämoglobin größer",
                "pain pain",
                "SCHADEL",
                "mrt blutung 7",
                "chest β blocker",
                "nothing",
            ]
        {
            let scoped = both.search_bm25(query, &SectionFilter::patient("p1"), 20).unwrap();
            let reference = alone.search_bm25_fts(query, &SectionFilter::default(), 20).unwrap();
            let key = |r: &Vec<ScoredSection>| -> Vec<(String, usize, String)> {
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
    }
}
