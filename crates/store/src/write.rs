//! The write side: one transaction that upserts patients and puts documents
//! (with their sections and sentences), labs and evaluation labels.
//! Re-putting an unchanged document or lab is a no-op, which is what makes
//! re-ingesting a source idempotent.

use evident_model::{Document, LabObservation, LabValue, Patient, SectionSpan, SentenceSpan};
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use crate::{format_date, Result, StoreError};

/// What putting a document did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PutEffect {
    Inserted,
    /// Same id and same content hash: nothing written.
    Unchanged,
    /// Same id, new content: the old document, its sections, sentences and
    /// embeddings were replaced.
    Replaced,
}

pub struct Writer<'c> {
    pub(crate) tx: Transaction<'c>,
}

impl<'c> Writer<'c> {
    pub(crate) fn begin(conn: &'c mut Connection) -> Result<Writer<'c>> {
        Ok(Writer { tx: conn.transaction()? })
    }

    pub fn commit(self) -> Result<()> {
        Ok(self.tx.commit()?)
    }

    /// Inserts the patient or fills in fields the stored row lacks.
    pub fn upsert_patient(&self, patient: &Patient) -> Result<()> {
        self.tx.execute(
            "INSERT INTO patients (id, source, birth_date, sex, display_name)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(id) DO UPDATE SET
                birth_date = coalesce(excluded.birth_date, birth_date),
                sex = coalesce(excluded.sex, sex),
                display_name = coalesce(excluded.display_name, display_name)",
            params![
                patient.id,
                patient.source,
                patient.birth_date.map(|d| d.to_string()),
                patient.sex,
                patient.display_name
            ],
        )?;
        Ok(())
    }

    /// Puts a document with the sections and sentences derived from its
    /// text. Spans are checked against the text: a span outside it or
    /// cutting a character is refused.
    pub fn put_document(
        &self,
        doc: &Document,
        sections: &[SectionSpan],
        sentences: &[SentenceSpan],
    ) -> Result<PutEffect> {
        let hash = doc.content_hash();
        let outcome = self.put_effect("documents", &doc.id, &hash)?;
        match outcome {
            PutEffect::Unchanged => return Ok(outcome),
            PutEffect::Replaced => {
                self.tx.execute("DELETE FROM documents WHERE id = ?1", [&doc.id])?;
            }
            PutEffect::Inserted => {}
        }
        for (start, end) in sections.iter().map(|s| (s.start, s.end)).chain(sentences.iter().map(|s| (s.start, s.end)))
        {
            check_span(&doc.text, start, end)
                .map_err(|why| StoreError::Invalid(format!("document {}: span {start}..{end} {why}", doc.id)))?;
        }
        self.tx.execute(
            "INSERT INTO documents (id, patient_id, kind, date, title, source, source_id, content_hash, text)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                doc.id,
                doc.patient_id,
                doc.kind.as_str(),
                doc.date.as_ref().map(format_date),
                doc.title,
                doc.source,
                doc.source_id,
                hash,
                doc.text
            ],
        )
        .map_err(|e| match e {
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => {
                StoreError::Invalid(format!(
                    "document {} (source {} id {}): patient {} is not in the store, or another document has the same source id",
                    doc.id, doc.source, doc.source_id, doc.patient_id
                ))
            }
            other => other.into(),
        })?;
        let mut insert_section = self.tx.prepare_cached(
            "INSERT INTO sections (document_id, ordinal, heading, start, end, text) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        for (ordinal, s) in sections.iter().enumerate() {
            insert_section.execute(params![
                doc.id,
                ordinal as i64,
                s.heading,
                s.start as i64,
                s.end as i64,
                &doc.text[s.start..s.end]
            ])?;
        }
        let mut insert_sentence = self
            .tx
            .prepare_cached("INSERT INTO sentences (document_id, ordinal, start, end) VALUES (?1, ?2, ?3, ?4)")?;
        for (ordinal, s) in sentences.iter().enumerate() {
            insert_sentence.execute(params![doc.id, ordinal as i64, s.start as i64, s.end as i64])?;
        }
        Ok(outcome)
    }

    /// Puts one lab observation; returns whether it was new or changed.
    /// What putting text with content hash `hash` under `id` into `table`
    /// (a table of documents with `id` and `content_hash` columns) does:
    /// nothing if the stored hash is the same, a replacement if it differs,
    /// an insertion if there is none. The caller deletes what it replaces.
    pub(crate) fn put_effect(&self, table: &'static str, id: &str, hash: &str) -> Result<PutEffect> {
        let sql = format!("SELECT content_hash FROM {table} WHERE id = ?1");
        let existing: Option<String> = self.tx.query_row(&sql, [id], |r| r.get(0)).optional()?;
        Ok(match existing {
            Some(stored) if stored == hash => PutEffect::Unchanged,
            Some(_) => PutEffect::Replaced,
            None => PutEffect::Inserted,
        })
    }

    pub fn put_lab(&self, lab: &LabObservation) -> Result<bool> {
        let (num, text) = match &lab.value {
            LabValue::Numeric(v) => (Some(*v), None),
            LabValue::Text(t) => (None, Some(t.as_str())),
        };
        let changed = self.tx.execute(
            "INSERT INTO labs (patient_id, concept_id, original_name, loinc, value_num, value_text, unit,
                               ref_low, ref_high, ref_text, flag, time, source, source_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
             ON CONFLICT(source, source_id) DO UPDATE SET
                patient_id = excluded.patient_id, concept_id = excluded.concept_id,
                original_name = excluded.original_name, loinc = excluded.loinc,
                value_num = excluded.value_num, value_text = excluded.value_text, unit = excluded.unit,
                ref_low = excluded.ref_low, ref_high = excluded.ref_high, ref_text = excluded.ref_text,
                flag = excluded.flag, time = excluded.time
             WHERE (patient_id, concept_id, original_name, loinc, value_num, value_text, unit,
                    ref_low, ref_high, ref_text, flag, time)
                IS NOT (excluded.patient_id, excluded.concept_id, excluded.original_name, excluded.loinc,
                        excluded.value_num, excluded.value_text, excluded.unit, excluded.ref_low,
                        excluded.ref_high, excluded.ref_text, excluded.flag, excluded.time)",
            params![
                lab.patient_id,
                lab.concept_id,
                lab.original_name,
                lab.loinc,
                num,
                text,
                lab.unit,
                lab.ref_low,
                lab.ref_high,
                lab.ref_text,
                lab.flag,
                format_date(&lab.time),
                lab.source,
                lab.source_id
            ],
        )?;
        Ok(changed > 0)
    }

    /// Puts an evaluation label (e.g. an n2c2 criterion tag) for a patient.
    pub fn put_label(&self, patient_id: &str, label_set: &str, key: &str, value: &str) -> Result<()> {
        self.tx.execute(
            "INSERT INTO eval_labels (patient_id, label_set, key, value) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(patient_id, label_set, key) DO UPDATE SET value = excluded.value",
            params![patient_id, label_set, key, value],
        )?;
        Ok(())
    }
}

pub(crate) fn check_span(text: &str, start: usize, end: usize) -> Result<(), &'static str> {
    if start > end || end > text.len() {
        return Err("is outside the text");
    }
    if !text.is_char_boundary(start) || !text.is_char_boundary(end) {
        return Err("cuts a UTF-8 character");
    }
    Ok(())
}
