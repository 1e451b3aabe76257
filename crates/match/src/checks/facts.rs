//! What checks read of one patient, loaded from the store once: the
//! patient row (birth date, sex), every lab observation, and the sentences
//! of the timeline documents ingestion made from structured records
//! (FHIR Conditions, MedicationRequests and Procedures; MIMIC-IV
//! diagnoses_icd, prescriptions, procedures_icd and patients), each with its
//! document, date and byte span, so that evidence cites stored text.
//!
//! Timeline documents are recognised by their source (`fhir`, `mimic`) and
//! the record-type name that starts their source id (`conditions:P1:2024-01-10`),
//! as `evident_ingest`'s timeline names them; the tests ingest real FHIR and
//! MIMIC-IV files to keep the two in step.

use chrono::{NaiveDate, NaiveDateTime};
use evident_model::Patient;
use evident_store::{LabQuery, LabRecord, Store, StoreError};
use serde::Serialize;

/// What a timeline document records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TimelineKind {
    Diagnosis,
    Medication,
    Procedure,
    Demographics,
}

impl TimelineKind {
    /// The kind of a timeline document from its source and source id.
    pub fn of_document(source: &str, source_id: &str) -> Option<TimelineKind> {
        let name = source_id.split(':').next()?;
        match (source, name) {
            ("fhir", "conditions") | ("mimic", "diagnoses_icd") => Some(TimelineKind::Diagnosis),
            ("fhir", "medications") | ("mimic", "prescriptions") => Some(TimelineKind::Medication),
            ("fhir", "procedures") | ("mimic", "procedures_icd") => Some(TimelineKind::Procedure),
            ("mimic", "demographics") => Some(TimelineKind::Demographics),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TimelineKind::Diagnosis => "diagnosis",
            TimelineKind::Medication => "medication",
            TimelineKind::Procedure => "procedure",
            TimelineKind::Demographics => "demographics",
        }
    }
}

/// One sentence of a timeline document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineSentence {
    pub kind: TimelineKind,
    pub document_id: String,
    pub ordinal: i64,
    pub start: usize,
    pub end: usize,
    pub text: String,
    /// The document's date (one document per record type and day).
    pub date: NaiveDateTime,
}

/// Everything a check may read of one patient.
#[derive(Debug, Clone)]
pub struct PatientFacts {
    pub patient: Patient,
    /// In time order.
    pub labs: Vec<LabRecord>,
    pub timeline: Vec<TimelineSentence>,
    /// The date of the most recent dated document of any kind: the
    /// screening date when none is given.
    pub latest_document: Option<NaiveDate>,
}

impl PatientFacts {
    /// Loads a patient's facts; `None` when the patient is not in the store.
    pub fn load(store: &Store, patient_id: &str) -> Result<Option<PatientFacts>, StoreError> {
        let Some(patient) = store.patient(patient_id)? else { return Ok(None) };
        let labs = store.labs(&LabQuery { patient_id: patient_id.to_string(), concept_ids: None, since: None })?;
        let mut timeline = Vec::new();
        let mut latest_document = None;
        for doc in store.documents(patient_id)? {
            if let Some(d) = doc.date {
                latest_document = latest_document.max(Some(d.date()));
            }
            let (Some(kind), Some(date)) = (TimelineKind::of_document(&doc.source, &doc.source_id), doc.date) else {
                continue;
            };
            for s in store.sentences(&doc.id)? {
                timeline.push(TimelineSentence {
                    kind,
                    document_id: s.document_id,
                    ordinal: s.ordinal,
                    start: s.start,
                    end: s.end,
                    text: s.text,
                    date,
                });
            }
        }
        Ok(Some(PatientFacts { patient, labs, timeline, latest_document }))
    }

    /// Whether the patient has any timeline record of this kind.
    pub fn has_timeline(&self, kind: TimelineKind) -> bool {
        self.timeline.iter().any(|s| s.kind == kind)
    }
}
