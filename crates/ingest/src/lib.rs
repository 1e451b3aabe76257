//! Ingestion: readers for real record formats turn files into a [`Batch`]
//! of patients, documents, labs and evaluation labels, collecting every
//! problem they meet rather than stopping at the first. A file (the unit of
//! ingestion) is written in one store transaction only if it has no
//! problems, so a malformed file leaves the store exactly as it was.
//!
//! Formats: a folder of notes with a manifest ([`text`]), FHIR R4 bundles
//! and bulk ndjson ([`fhir`]), MIMIC-IV `hosp/` and MIMIC-IV-Note
//! ([`mimic`]), n2c2 2018 Track 1 XML ([`n2c2`]) and TrialGPT/TREC
//! `queries.jsonl` ([`trialgpt`]).

mod dates;
pub mod fhir;
pub mod mimic;
pub mod n2c2;
mod problem;
pub mod text;
mod timeline;
pub mod trialgpt;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use evident_model::{Document, LabObservation, Patient, SectionSpan, SentenceSpan};
use evident_store::{PutEffect, Store, StoreError};
use serde::Serialize;

pub use dates::parse_datetime;
pub use problem::Problem;

/// The formats `evident ingest --format` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Auto,
    Text,
    Fhir,
    Mimic,
    N2c2,
    Trialgpt,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "auto" => Format::Auto,
            "text" => Format::Text,
            "fhir" => Format::Fhir,
            "mimic" => Format::Mimic,
            "n2c2" => Format::N2c2,
            "trialgpt" => Format::Trialgpt,
            other => return Err(format!("unknown format {other:?}; use auto, text, fhir, mimic, n2c2 or trialgpt")),
        })
    }
}

/// One evaluation label: a reference answer kept apart from anything a
/// model sees (e.g. n2c2's `ASP-FOR-MI = met` for patient 101).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvaluationLabel {
    pub patient_id: String,
    /// The labelled dataset, e.g. `n2c2-2018`.
    pub label_set: String,
    /// What is labelled, e.g. a criterion id.
    pub key: String,
    pub value: String,
}

/// Everything one unit of input yields, before it is written.
#[derive(Debug, Default)]
pub struct Batch {
    pub patients: Vec<Patient>,
    pub documents: Vec<Document>,
    pub labs: Vec<LabObservation>,
    /// Evaluation labels, e.g. n2c2 criterion tags.
    pub labels: Vec<EvaluationLabel>,
    /// Lab names that did not map to a canonical concept, with counts.
    pub unmapped_lab_names: BTreeMap<String, usize>,
    /// Source rows deliberately not ingested, with the reason (e.g. lab rows without a value).
    pub skipped: BTreeMap<String, usize>,
}

/// One unit of ingestion: a file (or, for notes with a manifest, the
/// manifest and the notes it names), read by one reader.
#[derive(Debug, Clone)]
pub struct Unit {
    pub path: PathBuf,
    pub format: Format,
    pub(crate) reader: Reader,
}

#[derive(Debug, Clone)]
pub(crate) enum Reader {
    TextManifest,
    FhirBundle,
    FhirNdjson,
    Mimic(mimic::Table),
    N2c2,
    Trialgpt,
}

/// What ingesting one unit did.
#[derive(Debug, Default, Serialize)]
pub struct UnitReport {
    pub path: PathBuf,
    pub format: Option<Format>,
    pub patients: usize,
    pub documents_inserted: usize,
    pub documents_replaced: usize,
    pub documents_unchanged: usize,
    pub labs_written: usize,
    pub labs_unchanged: usize,
    pub labs_unmapped: usize,
    pub labels: usize,
    pub unmapped_lab_names: BTreeMap<String, usize>,
    pub skipped: BTreeMap<String, usize>,
    pub problems: Vec<Problem>,
    /// False when problems kept this unit out of the store, or on a dry run.
    pub written: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct IngestReport {
    pub dry_run: bool,
    pub units: Vec<UnitReport>,
}

impl IngestReport {
    pub fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.units.iter().flat_map(|u| u.problems.iter())
    }
    pub fn has_problems(&self) -> bool {
        self.problems().next().is_some()
    }
}

/// Progress callbacks, so the CLI can draw a bar without this crate
/// knowing about terminals.
pub trait Progress {
    fn start_unit(&self, _unit: &Unit, _index: usize, _total: usize) {}
    fn documents_written(&self, _done: usize, _total: usize) {}
}

pub struct NoProgress;
impl Progress for NoProgress {}

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{path}: {message}")]
    Input { path: PathBuf, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Plans the units for the given paths: detects formats, expands folders,
/// and orders units so that patients are written before what refers to them.
pub fn plan(paths: &[PathBuf], format: Format) -> Result<Vec<Unit>, IngestError> {
    let mut units = Vec::new();
    for path in paths {
        if !path.exists() {
            return Err(IngestError::Input { path: path.clone(), message: "no such file or folder".into() });
        }
        let format = if format == Format::Auto { detect(path)? } else { format };
        let found = match format {
            Format::Text => text::units(path)?,
            Format::Fhir => fhir::units(path)?,
            Format::Mimic => mimic::units(path)?,
            Format::N2c2 => n2c2::units(path)?,
            Format::Trialgpt => vec![Unit { path: path.clone(), format, reader: Reader::Trialgpt }],
            Format::Auto => unreachable!("detect never answers auto"),
        };
        units.extend(found);
    }
    Ok(units)
}

/// Guesses the format of a file or folder from names and a peek at content.
pub fn detect(path: &Path) -> Result<Format, IngestError> {
    let unknown = |why: &str| IngestError::Input {
        path: path.to_path_buf(),
        message: format!("cannot tell the format ({why}); name the format (text, fhir, mimic, n2c2 or trialgpt)"),
    };
    if path.is_dir() {
        if path.join("hosp").is_dir() || path.join("patients.csv.gz").is_file() || path.join("note").is_dir() {
            return Ok(Format::Mimic);
        }
        if text::find_manifest(path).is_some() {
            return Ok(Format::Text);
        }
        let names = list_dir(path).map_err(|e| IngestError::Input { path: path.into(), message: e.to_string() })?;
        let has = |ext: &str| names.iter().any(|p| p.extension().is_some_and(|e| e == ext));
        if has("ndjson") || has("json") {
            return Ok(Format::Fhir);
        }
        if has("xml") {
            return Ok(Format::N2c2);
        }
        return Err(unknown("no manifest, hosp/ folder, .ndjson, .json or .xml files inside"));
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_lowercase();
    if name.ends_with(".ndjson") {
        return Ok(Format::Fhir);
    }
    if name.ends_with(".jsonl") {
        if name.starts_with("manifest") {
            return Ok(Format::Text);
        }
        return Ok(Format::Trialgpt);
    }
    if name.ends_with(".json") {
        return Ok(Format::Fhir);
    }
    if name.ends_with(".xml") {
        return Ok(Format::N2c2);
    }
    if name.starts_with("manifest") && name.ends_with(".csv") {
        return Ok(Format::Text);
    }
    if name.ends_with(".csv.gz") || name.ends_with(".csv") {
        return Ok(Format::Mimic);
    }
    Err(unknown("unrecognised file name"))
}

pub(crate) fn list_dir(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(path)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    names.sort();
    Ok(names)
}

/// Reads one unit into a batch and its problems.
pub fn read_unit(unit: &Unit) -> (Batch, Vec<Problem>) {
    match &unit.reader {
        Reader::TextManifest => text::read(&unit.path),
        Reader::FhirBundle => fhir::read_bundle(&unit.path),
        Reader::FhirNdjson => fhir::read_ndjson(&unit.path),
        Reader::Mimic(table) => mimic::read(&unit.path, *table),
        Reader::N2c2 => n2c2::read(&unit.path),
        Reader::Trialgpt => trialgpt::read(&unit.path),
    }
}

/// Sections and sentences for a document, computed once at ingestion.
pub fn segment(doc: &Document) -> (Vec<SectionSpan>, Vec<SentenceSpan>) {
    (evident_model::text::split_sections(&doc.text), evident_model::text::split_sentences(&doc.text))
}

/// Ingests the units in order. Each unit is read completely; if it has any
/// problem, nothing of it is written; otherwise it is written in one
/// transaction (unless `dry_run`).
pub fn ingest(
    store: &mut Store,
    units: &[Unit],
    dry_run: bool,
    progress: &dyn Progress,
) -> Result<IngestReport, IngestError> {
    let mut report = IngestReport { dry_run, units: Vec::new() };
    // Patients of earlier clean units in this run: on a dry run they are not
    // in the store, yet later units may refer to them.
    let mut earlier_patients = BTreeSet::new();
    for (index, unit) in units.iter().enumerate() {
        progress.start_unit(unit, index, units.len());
        let (batch, mut problems) = read_unit(unit);
        check_patients_exist(store, unit, &batch, &earlier_patients, &mut problems)?;
        if problems.is_empty() {
            earlier_patients.extend(batch.patients.iter().map(|p| p.id.clone()));
        }
        let mut unit_report = UnitReport {
            path: unit.path.clone(),
            format: Some(unit.format),
            patients: batch.patients.len(),
            labs_unmapped: batch.labs.iter().filter(|l| l.concept_id.is_none()).count(),
            labels: batch.labels.len(),
            unmapped_lab_names: batch.unmapped_lab_names.clone(),
            skipped: batch.skipped.clone(),
            ..UnitReport::default()
        };
        if problems.is_empty() && !dry_run {
            write_batch(store, &batch, &mut unit_report, progress)?;
            unit_report.written = true;
        } else if problems.is_empty() {
            unit_report.documents_inserted = batch.documents.len();
            unit_report.labs_written = batch.labs.len();
        }
        unit_report.problems = problems;
        report.units.push(unit_report);
    }
    Ok(report)
}

/// Every document, lab and label must name a patient that is in this batch
/// or already in the store.
fn check_patients_exist(
    store: &Store,
    unit: &Unit,
    batch: &Batch,
    earlier: &BTreeSet<String>,
    problems: &mut Vec<Problem>,
) -> Result<(), IngestError> {
    let in_batch: BTreeSet<&str> = batch.patients.iter().map(|p| p.id.as_str()).collect();
    let referenced: BTreeSet<&str> = batch
        .documents
        .iter()
        .map(|d| d.patient_id.as_str())
        .chain(batch.labs.iter().map(|l| l.patient_id.as_str()))
        .chain(batch.labels.iter().map(|l| l.patient_id.as_str()))
        .collect();
    let mut missing = Vec::new();
    for id in referenced.difference(&in_batch) {
        if !earlier.contains(*id) && store.patient(id)?.is_none() {
            missing.push(*id);
        }
    }
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(5).copied().collect();
        problems.push(Problem::new(
            &unit.path,
            "",
            None,
            format!(
                "{} patient(s) referenced here are neither in this file nor in the store (e.g. {})",
                missing.len(),
                shown.join(", ")
            ),
            "ingest the patients first (for FHIR bulk data, the Patient ndjson; for MIMIC-IV, hosp/patients.csv.gz)",
        ));
    }
    Ok(())
}

fn write_batch(
    store: &mut Store,
    batch: &Batch,
    report: &mut UnitReport,
    progress: &dyn Progress,
) -> Result<(), IngestError> {
    let writer = store.writer()?;
    for patient in &batch.patients {
        writer.upsert_patient(patient)?;
    }
    let total = batch.documents.len();
    for (i, doc) in batch.documents.iter().enumerate() {
        let (sections, sentences) = segment(doc);
        match writer.put_document(doc, &sections, &sentences)? {
            PutEffect::Inserted => report.documents_inserted += 1,
            PutEffect::Replaced => report.documents_replaced += 1,
            PutEffect::Unchanged => report.documents_unchanged += 1,
        }
        if i % 64 == 63 || i + 1 == total {
            progress.documents_written(i + 1, total);
        }
    }
    for lab in &batch.labs {
        if writer.put_lab(lab)? {
            report.labs_written += 1;
        } else {
            report.labs_unchanged += 1;
        }
    }
    for label in &batch.labels {
        writer.put_label(&label.patient_id, &label.label_set, &label.key, &label.value)?;
    }
    writer.commit()?;
    Ok(())
}
