//! Records as Evident stores them: patients, documents with their derived
//! sections and sentences, and lab observations. Offsets are byte offsets
//! into the document's UTF-8 text, so a span always slices out exactly the
//! stored text it names.

use chrono::NaiveDateTime;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::DocKind;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Patient {
    /// Evident's patient id: the source's own id (FHIR Patient.id, MIMIC
    /// subject_id, TREC topic id) so users can recognise it.
    pub id: String,
    /// Where the record came from (`fhir`, `mimic`, `n2c2`, `trialgpt`, `text`).
    pub source: String,
    pub birth_date: Option<chrono::NaiveDate>,
    /// Administrative sex as the source gives it (`female`, `male`, `F`, ...).
    pub sex: Option<String>,
    pub display_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// Unique across the store. Ingesters derive it from the source id so
    /// that re-ingesting the same source finds the same document.
    pub id: String,
    pub patient_id: String,
    pub kind: DocKind,
    pub date: Option<NaiveDateTime>,
    pub title: String,
    pub source: String,
    pub source_id: String,
    pub text: String,
}

impl Document {
    pub fn content_hash(&self) -> String {
        content_hash(&self.text)
    }
}

/// SHA-256 of the text, hex encoded: how re-ingestion tells an unchanged
/// document from an edited one.
pub fn content_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// A section of a document: `text[start..end]`, with the heading it starts
/// under (if any). Overlapping chunks of one long section have overlapping
/// spans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionSpan {
    pub heading: Option<String>,
    pub start: usize,
    pub end: usize,
}

/// A sentence: `text[start..end]` of its document. Its id within the
/// document is its position in document order, starting at 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentenceSpan {
    pub start: usize,
    pub end: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum LabValue {
    Numeric(f64),
    Text(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabObservation {
    pub patient_id: String,
    /// Canonical concept id from the lab catalogue; `None` when the name
    /// could not be mapped (kept, and counted, rather than dropped).
    pub concept_id: Option<String>,
    /// The name the source used.
    pub original_name: String,
    pub loinc: Option<String>,
    pub value: LabValue,
    /// Unit exactly as given by the source.
    pub unit: Option<String>,
    pub ref_low: Option<f64>,
    pub ref_high: Option<f64>,
    /// Reference range as the source wrote it, when it is not two numbers.
    pub ref_text: Option<String>,
    /// Abnormal flag as given by the source (`abnormal`, `H`, `L`, ...).
    pub flag: Option<String>,
    pub time: NaiveDateTime,
    pub source: String,
    pub source_id: String,
}
