//! The knowledge base: reference documents a user indexes (Markdown or
//! plain text) and their sections, in their own tables
//! (`knowledge_documents`, `knowledge_sections`, migration 4) apart from
//! patient records, searched by FTS5's BM25 with the same `porter
//! unicode61` tokenizer as patient sections. Putting a document is
//! idempotent: the same id with the same text is left as it is, new text
//! replaces the old document and its sections. Puts go through a
//! [`Writer`], so a batch of documents lands whole or not at all.

use evident_model::{content_hash, SectionSpan};
use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use crate::search::fts5::fts_query;
use crate::write::check_span;
use crate::{PutEffect, Result, Store, StoreError, Writer};

/// A reference document of the knowledge base.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KnowledgeDocument {
    /// Unique in the knowledge base; the indexer derives it from the path
    /// so that indexing the same file again finds the same document.
    pub id: String,
    /// The file it was indexed from, as given; `None` for documents moved
    /// from a store written before the knowledge base had its own tables.
    pub path: Option<String>,
    pub title: String,
    pub text: String,
}

/// One knowledge section found by [`Store::search_knowledge`]. `text` is
/// byte-identical to the document's `text[start..end]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KnowledgeHit {
    pub document_id: String,
    pub section_id: i64,
    pub heading: Option<String>,
    /// Byte offsets into the document text.
    pub start: usize,
    pub end: usize,
    /// Higher is better: the negated FTS5 `bm25()` over all knowledge
    /// sections (the same figures as BM25 over a store holding only them).
    pub score: f64,
    pub text: String,
}

impl Writer<'_> {
    /// Puts a knowledge document with its sections. Spans are checked
    /// against the text: a span outside it or cutting a character is
    /// refused.
    pub fn put_knowledge_document(&self, doc: &KnowledgeDocument, sections: &[SectionSpan]) -> Result<PutEffect> {
        let hash = content_hash(&doc.text);
        let outcome = self.put_effect("knowledge_documents", &doc.id, &hash)?;
        match outcome {
            PutEffect::Unchanged => return Ok(outcome),
            PutEffect::Replaced => {
                // Sections first, so the FTS5 delete trigger sees each one.
                self.tx.execute("DELETE FROM knowledge_sections WHERE document_id = ?1", [&doc.id])?;
                self.tx.execute("DELETE FROM knowledge_documents WHERE id = ?1", [&doc.id])?;
            }
            PutEffect::Inserted => {}
        }
        for s in sections {
            check_span(&doc.text, s.start, s.end).map_err(|why| {
                StoreError::Invalid(format!("knowledge document {}: span {}..{} {why}", doc.id, s.start, s.end))
            })?;
        }
        self.tx.execute(
            "INSERT INTO knowledge_documents (id, path, title, content_hash, text) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![doc.id, doc.path, doc.title, hash, doc.text],
        )?;
        let mut insert = self.tx.prepare_cached(
            "INSERT INTO knowledge_sections (document_id, ordinal, heading, start, end, text)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        for (ordinal, s) in sections.iter().enumerate() {
            insert.execute(params![
                doc.id,
                ordinal as i64,
                s.heading,
                s.start as i64,
                s.end as i64,
                &doc.text[s.start..s.end]
            ])?;
        }
        Ok(outcome)
    }
}

impl Store {
    /// The ids of the knowledge documents, sorted.
    pub fn knowledge_document_ids(&self) -> Result<Vec<String>> {
        let mut stmt = self.conn().prepare_cached("SELECT id FROM knowledge_documents ORDER BY id")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn knowledge_document(&self, id: &str) -> Result<Option<KnowledgeDocument>> {
        Ok(self
            .conn()
            .query_row("SELECT id, path, title, text FROM knowledge_documents WHERE id = ?1", [id], |r| {
                Ok(KnowledgeDocument { id: r.get(0)?, path: r.get(1)?, title: r.get(2)?, text: r.get(3)? })
            })
            .optional()?)
    }

    /// The best `k` knowledge sections for `query` by BM25, best first
    /// (ties by section id); only sections holding a query word. Each word
    /// of the query is a term any of which may match, as in
    /// [`Store::search_bm25`].
    pub fn search_knowledge(&self, query: &str, k: usize) -> Result<Vec<KnowledgeHit>> {
        let Some(fts) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let mut stmt = self.conn().prepare_cached(
            "SELECT s.id, s.document_id, s.heading, s.start, s.end, s.text, top.rank
             FROM (SELECT rowid, bm25(knowledge_sections_fts) AS rank FROM knowledge_sections_fts
                   WHERE knowledge_sections_fts MATCH ?1 ORDER BY rank, rowid LIMIT ?2) top
             JOIN knowledge_sections s ON s.id = top.rowid
             ORDER BY top.rank, s.id",
        )?;
        let rows = stmt.query_map(params![fts, k as i64], |r| {
            Ok(KnowledgeHit {
                section_id: r.get(0)?,
                document_id: r.get(1)?,
                heading: r.get(2)?,
                start: r.get::<_, i64>(3)? as usize,
                end: r.get::<_, i64>(4)? as usize,
                text: r.get(5)?,
                score: -r.get::<_, f64>(6)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

#[cfg(test)]
mod tests {
    use evident_model::{DocKind, Document, Patient, SectionSpan};

    use super::KnowledgeDocument;
    use crate::{PutEffect, SectionFilter, Store};

    const GLUCOSE: &str = "# Glucose\n\nFasting plasma glucose of 126 mg/dL or more is diagnostic of diabetes.\n\n\
        ## Hypoglycemia\n\nGlucose below 70 mg/dL is low; below 54 mg/dL is clinically significant.\n";
    const KIDNEY: &str = "# Kidney\n\nAn eGFR below 60 for three months is chronic kidney disease.\n\n\
        ## Stages\n\nStage 4 is an eGFR of 15 to 29; stage 5 is below 15, kidney failure.\n";
    const HEART: &str = "# Heart\n\nMyocardial infarction raises troponin. Chest pain at rest is unstable angina.\n";

    /// One section per paragraph, headed by its first line when that is a
    /// Markdown heading.
    fn split_sections(text: &str) -> Vec<SectionSpan> {
        text.split_inclusive("\n\n")
            .scan(0, |at, part| {
                let heading =
                    part.lines().next().and_then(|l| l.strip_prefix('#')).map(|h| h.trim_start_matches('#').trim());
                let span =
                    SectionSpan { heading: heading.map(str::to_string), start: *at, end: *at + part.trim_end().len() };
                *at += part.len();
                Some(span)
            })
            .collect()
    }

    fn document(id: &str, text: &str) -> KnowledgeDocument {
        KnowledgeDocument { id: id.into(), path: Some(format!("{id}.md")), title: id.into(), text: text.into() }
    }

    fn knowledge_base(documents: &[(&str, &str)]) -> Store {
        let mut store = Store::open_in_memory().unwrap();
        let w = store.writer().unwrap();
        for (id, text) in documents {
            w.put_knowledge_document(&document(id, text), &split_sections(text)).unwrap();
        }
        w.commit().unwrap();
        store
    }

    /// The same documents as an old knowledge base laid them out: one
    /// pseudo-patient's documents in the patient tables.
    fn as_patient_documents(documents: &[(&str, &str)]) -> Store {
        let mut store = Store::open_in_memory().unwrap();
        let w = store.writer().unwrap();
        let patient = Patient { id: "kb".into(), source: "kb".into(), birth_date: None, sex: None, display_name: None };
        w.upsert_patient(&patient).unwrap();
        for (id, text) in documents {
            let doc = Document {
                id: id.to_string(),
                patient_id: "kb".into(),
                kind: DocKind::Other,
                date: None,
                title: id.to_string(),
                source: "kb".into(),
                source_id: id.to_string(),
                text: text.to_string(),
            };
            w.put_document(&doc, &split_sections(text), &[]).unwrap();
        }
        w.commit().unwrap();
        store
    }

    /// Knowledge search gives the sections, order and scores that the BM25
    /// of patient search gives over the same sections as one patient's.
    #[test]
    fn search_equals_patient_bm25_over_the_same_sections() {
        let documents = [("kb:glucose.md", GLUCOSE), ("kb:kidney.md", KIDNEY), ("kb:heart.md", HEART)];
        let knowledge = knowledge_base(&documents);
        let patient = as_patient_documents(&documents);
        for query in ["eGFR below 30", "glucose below 70 mg/dL", "chest pain troponin", "stage 5 kidney", "zzz", ""] {
            let found = knowledge.search_knowledge(query, 4).unwrap();
            let reference = patient.search_bm25(query, &SectionFilter::patient("kb"), 4).unwrap();
            let key: Vec<(String, usize, usize, String)> =
                found.iter().map(|h| (h.document_id.clone(), h.start, h.end, format!("{:.12}", h.score))).collect();
            let expected: Vec<(String, usize, usize, String)> = reference
                .iter()
                .map(|h| (h.section.document_id.clone(), h.section.start, h.section.end, format!("{:.12}", h.score)))
                .collect();
            assert_eq!(key, expected, "query {query:?}");
            for hit in &found {
                let text = documents.iter().find(|(id, _)| *id == hit.document_id).unwrap().1;
                assert_eq!(hit.text, text[hit.start..hit.end]);
            }
        }
        let top = knowledge.search_knowledge("eGFR of stage 4", 1).unwrap();
        assert_eq!((top[0].document_id.as_str(), top[0].heading.as_deref()), ("kb:kidney.md", None));
        assert_eq!(
            &KIDNEY[top[0].start..top[0].end],
            "Stage 4 is an eGFR of 15 to 29; stage 5 is below 15, kidney failure."
        );
        // Knowledge is not patient data: no patient search sees it.
        assert!(knowledge.search_bm25("eGFR", &SectionFilter::default(), 5).unwrap().is_empty());
    }

    #[test]
    fn putting_is_inserted_then_unchanged_then_replaced() {
        let mut store = knowledge_base(&[("kb:heart.md", HEART)]);
        let w = store.writer().unwrap();
        let outcomes = [
            w.put_knowledge_document(&document("kb:heart.md", HEART), &split_sections(HEART)).unwrap(),
            w.put_knowledge_document(&document("kb:heart.md", KIDNEY), &split_sections(KIDNEY)).unwrap(),
        ];
        w.commit().unwrap();
        assert_eq!(outcomes, [PutEffect::Unchanged, PutEffect::Replaced]);
        assert_eq!(store.knowledge_document_ids().unwrap(), ["kb:heart.md"]);
        assert_eq!(store.knowledge_document("kb:heart.md").unwrap().unwrap().text, KIDNEY);
        // The old sections are gone from the index, the new ones are in it.
        assert!(store.search_knowledge("troponin", 5).unwrap().is_empty());
        assert_eq!(store.search_knowledge("eGFR", 5).unwrap().len(), 2, "two paragraphs of KIDNEY name eGFR");
    }

    #[test]
    fn a_bad_span_is_refused_and_a_dropped_writer_writes_nothing() {
        let mut store = Store::open_in_memory().unwrap();
        let w = store.writer().unwrap();
        w.put_knowledge_document(&document("kb:glucose.md", GLUCOSE), &split_sections(GLUCOSE)).unwrap();
        let bad = [SectionSpan { heading: None, start: 0, end: HEART.len() + 1 }];
        let err = w.put_knowledge_document(&document("kb:heart.md", HEART), &bad).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("knowledge document kb:heart.md: span 0..{} is outside the text", HEART.len() + 1)
        );
        drop(w);
        assert!(store.knowledge_document_ids().unwrap().is_empty());
        assert!(store.search_knowledge("glucose", 5).unwrap().is_empty());
    }
}
