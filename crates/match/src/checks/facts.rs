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

use super::{CompiledCheck, Predicate};

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
    pub const ALL: [TimelineKind; 4] =
        [TimelineKind::Diagnosis, TimelineKind::Medication, TimelineKind::Procedure, TimelineKind::Demographics];

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

    /// The (source, source-id prefix) of this kind's timeline documents:
    /// the inverse of [`TimelineKind::of_document`].
    pub fn origins(self) -> &'static [(&'static str, &'static str)] {
        match self {
            TimelineKind::Diagnosis => &[("fhir", "conditions:"), ("mimic", "diagnoses_icd:")],
            TimelineKind::Medication => &[("fhir", "medications:"), ("mimic", "prescriptions:")],
            TimelineKind::Procedure => &[("fhir", "procedures:"), ("mimic", "procedures_icd:")],
            TimelineKind::Demographics => &[("mimic", "demographics:")],
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

/// What a set of checks reads of a patient: the lab concepts and the
/// timeline kinds they name. Loading only these is what makes screening
/// many patients fast (a MIMIC-IV patient has about 1,000 lab values, of
/// which a trial's checks read a few concepts).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FactNeeds {
    /// Canonical lab concept ids.
    pub lab_concepts: Vec<String>,
    pub timeline: Vec<TimelineKind>,
}

impl FactNeeds {
    /// What `checks` read.
    pub fn of<'a>(checks: impl IntoIterator<Item = &'a CompiledCheck>) -> FactNeeds {
        let mut needs = FactNeeds::default();
        for check in checks {
            match &check.predicate {
                // A MIMIC-IV patient's age is in its demographics line.
                Predicate::Age { .. } => needs.add_kind(TimelineKind::Demographics),
                Predicate::Sex(_) => {}
                Predicate::Lab(lab) => {
                    if !needs.lab_concepts.contains(&lab.concept_id) {
                        needs.lab_concepts.push(lab.concept_id.clone());
                    }
                }
                Predicate::Event(event) => needs.add_kind(event.kind),
            }
        }
        needs
    }

    fn add_kind(&mut self, kind: TimelineKind) {
        if !self.timeline.contains(&kind) {
            self.timeline.push(kind);
        }
    }
}

impl PatientFacts {
    /// Loads all of a patient's facts; `None` when the patient is not in
    /// the store.
    pub fn load(store: &Store, patient_id: &str) -> Result<Option<PatientFacts>, StoreError> {
        Self::load_some(store, patient_id, None)
    }

    /// Loads what `needs` names of a patient's facts (and the patient row);
    /// checks whose needs these are decide exactly as over all the facts.
    pub fn load_needed(store: &Store, patient_id: &str, needs: &FactNeeds) -> Result<Option<PatientFacts>, StoreError> {
        Self::load_some(store, patient_id, Some(needs))
    }

    fn load_some(
        store: &Store,
        patient_id: &str,
        needs: Option<&FactNeeds>,
    ) -> Result<Option<PatientFacts>, StoreError> {
        let Some(patient) = store.patient(patient_id)? else { return Ok(None) };
        let labs = match needs {
            Some(n) if n.lab_concepts.is_empty() => Vec::new(),
            _ => store.labs(&LabQuery {
                patient_id: patient_id.to_string(),
                concept_ids: needs.map(|n| n.lab_concepts.clone()),
                since: None,
            })?,
        };
        let kinds: &[TimelineKind] = match needs {
            Some(n) => &n.timeline,
            None => &TimelineKind::ALL,
        };
        let origins: Vec<(&str, &str)> = kinds.iter().flat_map(|k| k.origins().iter().copied()).collect();
        let mut timeline = Vec::new();
        for s in store.dated_sentences(patient_id, &origins)? {
            let Some(kind) = TimelineKind::of_document(&s.source, &s.source_id) else { continue };
            let sentence = s.sentence;
            timeline.push(TimelineSentence {
                kind,
                document_id: sentence.document_id,
                ordinal: sentence.ordinal,
                start: sentence.start,
                end: sentence.end,
                text: sentence.text,
                date: s.date,
            });
        }
        let latest_document = store.latest_document_date(patient_id)?.map(|d| d.date());
        Ok(Some(PatientFacts { patient, labs, timeline, latest_document }))
    }

    /// Whether the patient has any timeline record of this kind.
    pub fn has_timeline(&self, kind: TimelineKind) -> bool {
        self.timeline.iter().any(|s| s.kind == kind)
    }
}
