//! The read side for records: patients, documents, sentences, labs, labels.

use std::collections::BTreeMap;
use std::str::FromStr;

use chrono::NaiveDateTime;
use evident_model::{DocKind, Document, Patient};
use rusqlite::{params, OptionalExtension, Row};
use serde::Serialize;

use crate::{format_date, parse_date, Result, Store, StoreError};

#[derive(Debug, Clone, Serialize)]
pub struct PatientSummary {
    #[serde(flatten)]
    pub patient: Patient,
    pub documents: i64,
    pub labs: i64,
    pub first_date: Option<NaiveDateTime>,
    pub last_date: Option<NaiveDateTime>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DocumentSummary {
    pub id: String,
    pub kind: DocKind,
    pub date: Option<NaiveDateTime>,
    pub title: String,
    pub source: String,
    pub source_id: String,
    pub bytes: i64,
    pub sections: i64,
    pub sentences: i64,
}

/// A sentence with its document's provenance and date
/// ([`Store::dated_sentences`]).
#[derive(Debug, Clone)]
pub struct DatedSentence {
    pub sentence: SentenceRecord,
    pub source: String,
    pub source_id: String,
    pub date: NaiveDateTime,
}

#[derive(Debug, Clone, Serialize)]
pub struct SentenceRecord {
    pub document_id: String,
    /// The sentence id within its document.
    pub ordinal: i64,
    pub start: usize,
    pub end: usize,
    pub text: String,
}

#[derive(Debug, Clone, Default)]
pub struct LabQuery {
    pub patient_id: String,
    /// Only these concepts; `None` for all (including unmapped names).
    pub concept_ids: Option<Vec<String>>,
    pub since: Option<NaiveDateTime>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LabRecord {
    pub concept_id: Option<String>,
    pub original_name: String,
    pub loinc: Option<String>,
    pub value_num: Option<f64>,
    pub value_text: Option<String>,
    pub unit: Option<String>,
    pub ref_low: Option<f64>,
    pub ref_high: Option<f64>,
    pub ref_text: Option<String>,
    pub flag: Option<String>,
    pub time: NaiveDateTime,
    pub source: String,
    pub source_id: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct StoreCounts {
    pub patients: i64,
    pub documents: i64,
    pub sections: i64,
    pub sentences: i64,
    pub labs: i64,
    pub labs_unmapped: i64,
    pub eval_labels: i64,
    pub embeddings: i64,
}

fn optional_date(text: Option<String>) -> Result<Option<NaiveDateTime>> {
    text.as_deref().map(parse_date).transpose()
}

pub(crate) fn parse_kind(text: &str) -> Result<DocKind> {
    DocKind::from_str(text).map_err(StoreError::Corrupt)
}

fn patient_from_row(row: &Row<'_>) -> rusqlite::Result<(Patient, Option<String>)> {
    let birth: Option<String> = row.get("birth_date")?;
    Ok((
        Patient {
            id: row.get("id")?,
            source: row.get("source")?,
            birth_date: None,
            sex: row.get("sex")?,
            display_name: row.get("display_name")?,
        },
        birth,
    ))
}

fn with_birth_date((mut patient, birth): (Patient, Option<String>)) -> Result<Patient> {
    patient.birth_date = birth
        .map(|b| chrono::NaiveDate::from_str(&b).map_err(|e| StoreError::Corrupt(format!("birth date {b:?}: {e}"))))
        .transpose()?;
    Ok(patient)
}

impl Store {
    pub fn counts(&self) -> Result<StoreCounts> {
        let count = |sql: &str| -> Result<i64> { Ok(self.conn().query_row(sql, [], |r| r.get(0))?) };
        Ok(StoreCounts {
            patients: count("SELECT count(*) FROM patients")?,
            documents: count("SELECT count(*) FROM documents")?,
            sections: count("SELECT count(*) FROM sections")?,
            sentences: count("SELECT count(*) FROM sentences")?,
            labs: count("SELECT count(*) FROM labs")?,
            labs_unmapped: count("SELECT count(*) FROM labs WHERE concept_id IS NULL")?,
            eval_labels: count("SELECT count(*) FROM eval_labels")?,
            embeddings: count("SELECT count(*) FROM embeddings")?,
        })
    }

    pub fn patients(&self) -> Result<Vec<PatientSummary>> {
        let mut stmt = self.conn().prepare(
            "SELECT p.*,
                (SELECT count(*) FROM documents d WHERE d.patient_id = p.id) AS n_docs,
                (SELECT count(*) FROM labs l WHERE l.patient_id = p.id) AS n_labs,
                (SELECT min(date) FROM documents d WHERE d.patient_id = p.id) AS first_date,
                (SELECT max(date) FROM documents d WHERE d.patient_id = p.id) AS last_date
             FROM patients p ORDER BY p.id",
        )?;
        let rows = stmt.query_map([], |row| {
            Ok((
                patient_from_row(row)?,
                row.get::<_, i64>("n_docs")?,
                row.get::<_, i64>("n_labs")?,
                row.get::<_, Option<String>>("first_date")?,
                row.get::<_, Option<String>>("last_date")?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (p, documents, labs, first, last) = row?;
            out.push(PatientSummary {
                patient: with_birth_date(p)?,
                documents,
                labs,
                first_date: optional_date(first)?,
                last_date: optional_date(last)?,
            });
        }
        Ok(out)
    }

    pub fn patient(&self, id: &str) -> Result<Option<Patient>> {
        let row = self.conn().query_row("SELECT * FROM patients WHERE id = ?1", [id], patient_from_row).optional()?;
        row.map(with_birth_date).transpose()
    }

    /// A patient's documents in date order (undated last).
    pub fn documents(&self, patient_id: &str) -> Result<Vec<DocumentSummary>> {
        let mut stmt = self.conn().prepare(
            "SELECT d.id, d.kind, d.date, d.title, d.source, d.source_id, length(CAST(d.text AS BLOB)),
                (SELECT count(*) FROM sections s WHERE s.document_id = d.id),
                (SELECT count(*) FROM sentences s WHERE s.document_id = d.id)
             FROM documents d WHERE d.patient_id = ?1
             ORDER BY d.date IS NULL, d.date, d.id",
        )?;
        let rows = stmt.query_map([patient_id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, i64>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, i64>(8)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, kind, date, title, source, source_id, bytes, sections, sentences) = row?;
            out.push(DocumentSummary {
                id,
                kind: parse_kind(&kind)?,
                date: optional_date(date)?,
                title,
                source,
                source_id,
                bytes,
                sections,
                sentences,
            });
        }
        Ok(out)
    }

    pub fn document(&self, id: &str) -> Result<Option<Document>> {
        let row = self
            .conn()
            .query_row(
                "SELECT id, patient_id, kind, date, title, source, source_id, text FROM documents WHERE id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, Option<String>>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, String>(6)?,
                        r.get::<_, String>(7)?,
                    ))
                },
            )
            .optional()?;
        let Some((id, patient_id, kind, date, title, source, source_id, text)) = row else {
            return Ok(None);
        };
        Ok(Some(Document {
            id,
            patient_id,
            kind: parse_kind(&kind)?,
            date: optional_date(date)?,
            title,
            source,
            source_id,
            text,
        }))
    }

    /// All sentences of a document, in order, with their text.
    pub fn sentences(&self, document_id: &str) -> Result<Vec<SentenceRecord>> {
        self.sentence_rows(document_id, None)
    }

    /// One sentence by its id, if the document has it.
    pub fn sentence(&self, document_id: &str, ordinal: i64) -> Result<Option<SentenceRecord>> {
        Ok(self.sentence_rows(document_id, Some(ordinal))?.pop())
    }

    /// Sentences of a document (all, or the one with `ordinal`), with the
    /// text sliced from the stored document at their byte span.
    fn sentence_rows(&self, document_id: &str, ordinal: Option<i64>) -> Result<Vec<SentenceRecord>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT s.ordinal, s.start, s.end, substr(CAST(d.text AS BLOB), s.start + 1, s.end - s.start)
             FROM sentences s JOIN documents d ON d.id = s.document_id
             WHERE s.document_id = ?1 AND (?2 IS NULL OR s.ordinal = ?2) ORDER BY s.ordinal",
        )?;
        let rows = stmt.query_map(params![document_id, ordinal], |r| {
            Ok(SentenceRecord {
                document_id: document_id.to_string(),
                ordinal: r.get(0)?,
                start: r.get::<_, i64>(1)? as usize,
                end: r.get::<_, i64>(2)? as usize,
                text: String::from_utf8_lossy(&r.get::<_, Vec<u8>>(3)?).into_owned(),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The date of a patient's most recent dated document, if any.
    pub fn latest_document_date(&self, patient_id: &str) -> Result<Option<NaiveDateTime>> {
        let latest: Option<String> =
            self.conn()
                .query_row("SELECT max(date) FROM documents WHERE patient_id = ?1", [patient_id], |r| r.get(0))?;
        optional_date(latest)
    }

    /// Every sentence of a patient's dated documents whose source and
    /// source-id prefix are one of `origins` (`("mimic", "prescriptions:")`),
    /// with its document's source, source id and date, in document date
    /// order: one query for the documents and one per document for the
    /// spans, each document's text read once (what `documents` +
    /// `sentences` do with a query per sentence).
    pub fn dated_sentences(&self, patient_id: &str, origins: &[(&str, &str)]) -> Result<Vec<DatedSentence>> {
        if origins.is_empty() {
            return Ok(Vec::new());
        }
        let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
        let like = |s: &str| quote(&format!("{}%", s.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")));
        let filter: Vec<String> = origins
            .iter()
            .map(|(source, prefix)| {
                format!("(source = {} AND source_id LIKE {} ESCAPE '\\')", quote(source), like(prefix))
            })
            .collect();
        let mut docs = self.conn().prepare_cached(&format!(
            "SELECT id, source, source_id, date, text FROM documents
             WHERE patient_id = ?1 AND date IS NOT NULL AND ({}) ORDER BY date, id",
            filter.join(" OR ")
        ))?;
        let mut spans = self
            .conn()
            .prepare_cached("SELECT ordinal, start, end FROM sentences WHERE document_id = ?1 ORDER BY ordinal")?;
        let rows = docs.query_map([patient_id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, source, source_id, date, text) = row?;
            let date = parse_date(&date)?;
            let bytes = text.as_bytes();
            let sentences = spans.query_map([&id], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as usize, r.get::<_, i64>(2)? as usize))
            })?;
            for s in sentences {
                let (ordinal, start, end) = s?;
                let slice = bytes.get(start..end).unwrap_or_default();
                out.push(DatedSentence {
                    sentence: SentenceRecord {
                        document_id: id.clone(),
                        ordinal,
                        start,
                        end,
                        text: String::from_utf8_lossy(slice).into_owned(),
                    },
                    source: source.clone(),
                    source_id: source_id.clone(),
                    date,
                });
            }
        }
        Ok(out)
    }

    /// A patient's labs in time order.
    pub fn labs(&self, query: &LabQuery) -> Result<Vec<LabRecord>> {
        let mut sql = String::from(
            "SELECT concept_id, original_name, loinc, value_num, value_text, unit, ref_low, ref_high,
                    ref_text, flag, time, source, source_id
             FROM labs WHERE patient_id = ?1 AND (?2 IS NULL OR time >= ?2)",
        );
        if let Some(ids) = &query.concept_ids {
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let list: Vec<String> = ids.iter().map(|id| format!("'{}'", id.replace('\'', "''"))).collect();
            sql.push_str(&format!(" AND concept_id IN ({})", list.join(",")));
        }
        sql.push_str(" ORDER BY time, id");
        let mut stmt = self.conn().prepare(&sql)?;
        let since = query.since.as_ref().map(format_date);
        let rows = stmt.query_map(params![query.patient_id, since], |r| {
            Ok((
                LabRecord {
                    concept_id: r.get(0)?,
                    original_name: r.get(1)?,
                    loinc: r.get(2)?,
                    value_num: r.get(3)?,
                    value_text: r.get(4)?,
                    unit: r.get(5)?,
                    ref_low: r.get(6)?,
                    ref_high: r.get(7)?,
                    ref_text: r.get(8)?,
                    flag: r.get(9)?,
                    time: NaiveDateTime::default(),
                    source: r.get(11)?,
                    source_id: r.get(12)?,
                },
                r.get::<_, String>(10)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (mut lab, time) = row?;
            lab.time = parse_date(&time)?;
            out.push(lab);
        }
        Ok(out)
    }

    /// Evaluation labels of one set for every patient that has them:
    /// patient id -> key -> value.
    pub fn labels(&self, label_set: &str) -> Result<BTreeMap<String, BTreeMap<String, String>>> {
        let mut stmt = self
            .conn()
            .prepare("SELECT patient_id, key, value FROM eval_labels WHERE label_set = ?1 ORDER BY patient_id, key")?;
        let rows = stmt.query_map([label_set], |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?)))?;
        let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for row in rows {
            let (patient, key, value) = row?;
            out.entry(patient).or_default().insert(key, value);
        }
        Ok(out)
    }
}
