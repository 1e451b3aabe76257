//! The exemplar bank (migration 7): adjudicated criterion-level decisions
//! with the vector of their criterion text, grouped into named banks.
//! Putting an exemplar whose (bank, source, source reference) is stored
//! already replaces it, so importing a file again changes nothing and a
//! reviewer's later override of the same decision supersedes the earlier
//! one. Puts go through a [`Writer`], so an import lands whole or not at all.

use rusqlite::params;
use serde::Serialize;

use crate::{Result, Store, StoreError, Writer};

/// Where an exemplar came from.
pub const EXEMPLAR_SOURCES: [&str; 3] = ["annotation", "override", "signoff"];

/// An exemplar to put.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewExemplar {
    pub bank: String,
    /// `annotation`, `override` or `signoff`.
    pub source: String,
    /// Unique within (bank, source): the file and annotation id, or the
    /// run, patient and criterion of a reviewed decision.
    pub source_ref: String,
    pub patient_id: String,
    pub trial_id: String,
    pub criterion_id: String,
    /// `inclusion` or `exclusion`.
    pub criterion_type: String,
    pub criterion_text: String,
    /// The relevant patient sentences, verbatim.
    pub sentences: Vec<String>,
    /// `MET`, `NOT MET`, `NOT ENOUGH INFORMATION` or `NOT APPLICABLE`.
    pub label: String,
    pub rationale: String,
    /// The reviewer who decided it (`None` for an annotation file).
    pub reviewer: Option<String>,
    /// When it was decided or imported (RFC 3339).
    pub decided_at: String,
    /// The model that made `embedding`; `None` (and `embedding` empty)
    /// until the exemplar is embedded.
    pub embedding_model: Option<String>,
    pub embedding: Vec<f32>,
}

/// A stored exemplar.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExemplarRecord {
    pub id: i64,
    #[serde(flatten)]
    pub exemplar: NewExemplar,
}

impl Writer<'_> {
    /// Puts one exemplar (replacing the row with the same bank, source and
    /// source reference); returns its id.
    pub fn put_exemplar(&self, e: &NewExemplar) -> Result<i64> {
        if !EXEMPLAR_SOURCES.contains(&e.source.as_str()) {
            return Err(StoreError::Invalid(format!(
                "exemplar {}: source {:?} is not one of {}",
                e.source_ref,
                e.source,
                EXEMPLAR_SOURCES.join(", ")
            )));
        }
        if e.embedding.is_empty() != e.embedding_model.is_none() {
            return Err(StoreError::Invalid(format!(
                "exemplar {}: an embedding and its model go together",
                e.source_ref
            )));
        }
        let sentences = serde_json::to_string(&e.sentences).expect("strings serialise");
        let blob: Option<Vec<u8>> =
            e.embedding_model.as_ref().map(|_| e.embedding.iter().flat_map(|x| x.to_le_bytes()).collect());
        self.tx.execute(
            "DELETE FROM exemplars WHERE bank = ?1 AND source = ?2 AND source_ref = ?3",
            params![e.bank, e.source, e.source_ref],
        )?;
        self.tx.execute(
            "INSERT INTO exemplars (bank, source, source_ref, patient_id, trial_id, criterion_id, criterion_type,
                 criterion_text, sentences_json, label, rationale, reviewer, decided_at, embedding_model, embedding)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            params![
                e.bank,
                e.source,
                e.source_ref,
                e.patient_id,
                e.trial_id,
                e.criterion_id,
                e.criterion_type,
                e.criterion_text,
                sentences,
                e.label,
                e.rationale,
                e.reviewer,
                e.decided_at,
                e.embedding_model,
                blob
            ],
        )?;
        Ok(self.tx.last_insert_rowid())
    }
}

impl Store {
    /// Every exemplar of `bank`, oldest first.
    pub fn exemplars(&self, bank: &str) -> Result<Vec<ExemplarRecord>> {
        let mut stmt = self.conn().prepare(
            "SELECT id, bank, source, source_ref, patient_id, trial_id, criterion_id, criterion_type, criterion_text,
                    sentences_json, label, rationale, reviewer, decided_at, embedding_model, embedding
             FROM exemplars WHERE bank = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([bank], |row| {
            let sentences: String = row.get(9)?;
            let blob: Option<Vec<u8>> = row.get(15)?;
            Ok((
                sentences,
                blob,
                ExemplarRecord {
                    id: row.get(0)?,
                    exemplar: NewExemplar {
                        bank: row.get(1)?,
                        source: row.get(2)?,
                        source_ref: row.get(3)?,
                        patient_id: row.get(4)?,
                        trial_id: row.get(5)?,
                        criterion_id: row.get(6)?,
                        criterion_type: row.get(7)?,
                        criterion_text: row.get(8)?,
                        sentences: Vec::new(),
                        label: row.get(10)?,
                        rationale: row.get(11)?,
                        reviewer: row.get(12)?,
                        decided_at: row.get(13)?,
                        embedding_model: row.get(14)?,
                        embedding: Vec::new(),
                    },
                },
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (sentences, blob, mut record) = row?;
            record.exemplar.sentences = serde_json::from_str(&sentences)
                .map_err(|e| StoreError::Corrupt(format!("exemplar {}: sentences: {e}", record.id)))?;
            let blob = blob.unwrap_or_default();
            if blob.len() % 4 != 0 {
                return Err(StoreError::Corrupt(format!("exemplar {}: embedding of {} bytes", record.id, blob.len())));
            }
            record.exemplar.embedding =
                blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            out.push(record);
        }
        Ok(out)
    }

    /// Sets the vector of exemplar `id` (one made by `model`).
    pub fn set_exemplar_embedding(&self, id: i64, model: &str, embedding: &[f32]) -> Result<()> {
        let blob: Vec<u8> = embedding.iter().flat_map(|x| x.to_le_bytes()).collect();
        let n = self.conn().execute(
            "UPDATE exemplars SET embedding_model = ?2, embedding = ?3 WHERE id = ?1",
            params![id, model, blob],
        )?;
        if n == 0 {
            return Err(StoreError::Invalid(format!("no exemplar {id}")));
        }
        Ok(())
    }

    /// The banks and how many exemplars each holds, by name.
    pub fn exemplar_banks(&self) -> Result<Vec<(String, usize)>> {
        let mut stmt = self.conn().prepare("SELECT bank, COUNT(*) FROM exemplars GROUP BY bank ORDER BY bank")?;
        let rows = stmt.query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)? as usize)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exemplar(source_ref: &str, label: &str) -> NewExemplar {
        NewExemplar {
            bank: "b".into(),
            source: "annotation".into(),
            source_ref: source_ref.into(),
            patient_id: "p1".into(),
            trial_id: "t".into(),
            criterion_id: "c".into(),
            criterion_type: "inclusion".into(),
            criterion_text: "Age over 18".into(),
            sentences: vec!["A 40-year-old man.".into()],
            label: label.into(),
            rationale: "He is 40.".into(),
            reviewer: None,
            decided_at: "2026-01-01T00:00:00Z".into(),
            embedding_model: Some("m".into()),
            embedding: vec![0.5, -1.25, 3.0],
        }
    }

    #[test]
    fn an_exemplar_reads_back_as_put_and_the_same_reference_replaces_it() {
        let mut store = Store::open_in_memory().unwrap();
        let w = store.writer().unwrap();
        w.put_exemplar(&exemplar("f#1", "MET")).unwrap();
        w.put_exemplar(&exemplar("f#2", "NOT MET")).unwrap();
        w.put_exemplar(&exemplar("f#1", "NOT ENOUGH INFORMATION")).unwrap();
        w.commit().unwrap();
        let got = store.exemplars("b").unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].exemplar, exemplar("f#2", "NOT MET"));
        assert_eq!(got[1].exemplar.label, "NOT ENOUGH INFORMATION");
        assert_eq!(store.exemplar_banks().unwrap(), vec![("b".to_string(), 2)]);
        assert!(store.exemplars("other").unwrap().is_empty());
    }

    #[test]
    fn an_exemplar_without_a_vector_gets_one_later() {
        let mut store = Store::open_in_memory().unwrap();
        let w = store.writer().unwrap();
        let id =
            w.put_exemplar(&NewExemplar { embedding_model: None, embedding: vec![], ..exemplar("r", "MET") }).unwrap();
        w.commit().unwrap();
        assert_eq!(store.exemplars("b").unwrap()[0].exemplar.embedding_model, None);
        store.set_exemplar_embedding(id, "m2", &[1.0, 2.0]).unwrap();
        let got = &store.exemplars("b").unwrap()[0].exemplar;
        assert_eq!((got.embedding_model.as_deref(), got.embedding.clone()), (Some("m2"), vec![1.0, 2.0]));
    }

    #[test]
    fn a_bad_source_or_label_is_refused() {
        let mut store = Store::open_in_memory().unwrap();
        let w = store.writer().unwrap();
        let bad = NewExemplar { source: "guess".into(), ..exemplar("f#1", "MET") };
        assert!(w.put_exemplar(&bad).unwrap_err().to_string().contains("source \"guess\""));
        assert!(w.put_exemplar(&exemplar("f#1", "maybe")).is_err(), "the label CHECK constraint");
    }
}
