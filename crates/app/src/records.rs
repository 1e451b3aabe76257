//! The record jobs: ingest files into the store, list patients, show one
//! patient's documents with a lab summary, and read a patient's lab values
//! by concept. Lab-selection rules (a concept by name, alias or LOINC code;
//! the latest value per concept) live here, not in a front end.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use chrono::NaiveDateTime;
use evident_ingest::{Format, IngestReport};
use evident_model::labs::LabCatalogue;
use evident_model::Patient;
use evident_store::{DocumentSummary, LabQuery, LabRecord, PatientSummary};
use serde::Serialize;

use crate::error::{input_error, Result};
use crate::progress::{IngestProgress, ProgressSink};
use crate::session::{lock, Session};

/// What to ingest.
#[derive(Debug, Clone)]
pub struct IngestRequest {
    /// Files or folders.
    pub paths: Vec<PathBuf>,
    pub format: Format,
    /// Read and check everything, write nothing.
    pub dry_run: bool,
}

/// What ingesting did, file by file, with every problem found. A file with
/// a problem was not written at all.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Ingested {
    pub report: IngestReport,
}

impl Ingested {
    /// A sentence for the user when some files were refused, else `None`.
    pub fn refusal(&self) -> Option<String> {
        let problems = self.report.problems().count();
        if problems == 0 {
            return None;
        }
        let files = self.report.units.iter().filter(|u| !u.problems.is_empty()).count();
        Some(format!(
            "{problems} problem(s) in {files} file(s); those files were not ingested and the store is unchanged for them"
        ))
    }

    /// Whether any unit held anything (patients, documents or labs).
    pub fn found_anything(&self) -> bool {
        self.report.units.iter().any(|u| {
            u.patients
                + u.documents_inserted
                + u.documents_replaced
                + u.documents_unchanged
                + u.labs_written
                + u.labs_unchanged
                > 0
        })
    }
}

/// Reads `request.paths` into the store, one transaction per file.
pub fn ingest(session: &Session, request: &IngestRequest, progress: &dyn ProgressSink) -> Result<Ingested> {
    let units = evident_ingest::plan(&request.paths, request.format)?;
    let store = session.store()?;
    let mut store = lock(&store);
    let report = evident_ingest::ingest(&mut store, &units, request.dry_run, &IngestProgress(progress))?;
    Ok(Ingested { report })
}

impl fmt::Display for Ingested {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let report = &self.report;
        let verb = if report.dry_run { "would write" } else { "wrote" };
        let mut unmapped_total = BTreeMap::<&str, usize>::new();
        for u in &report.units {
            let status = if !u.problems.is_empty() {
                format!("NOT INGESTED ({} problem(s))", u.problems.len())
            } else {
                format!(
                    "{verb} {} patient(s), {} new / {} changed / {} unchanged document(s), {} lab value(s) ({} unchanged, {} unmapped)",
                    u.patients,
                    u.documents_inserted,
                    u.documents_replaced,
                    u.documents_unchanged,
                    u.labs_written,
                    u.labs_unchanged,
                    u.labs_unmapped
                )
            };
            writeln!(f, "{}: {status}", u.path.display())?;
            for (reason, n) in &u.skipped {
                writeln!(f, "  skipped {n} {reason}")?;
            }
            for (name, n) in &u.unmapped_lab_names {
                *unmapped_total.entry(name).or_default() += n;
            }
        }
        if !unmapped_total.is_empty() {
            let rows: usize = unmapped_total.values().sum();
            writeln!(
                f,
                "lab names not mapped to a concept: {} name(s), {rows} value(s); most frequent:",
                unmapped_total.len()
            )?;
            let mut names: Vec<_> = unmapped_total.into_iter().collect();
            names.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            for (name, n) in names.iter().take(10) {
                writeln!(f, "  {n:>7}  {name}")?;
            }
        }
        Ok(())
    }
}

/// The patients in the store with document and lab counts.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct PatientList {
    pub patients: Vec<PatientSummary>,
}

pub fn patients(session: &Session) -> Result<PatientList> {
    let patients = session.with_store(|store| Ok(store.patients()?))?;
    Ok(PatientList { patients })
}

fn day(date: &Option<NaiveDateTime>) -> String {
    date.map(|d| d.date().to_string()).unwrap_or_else(|| "-".into())
}

impl fmt::Display for PatientList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<40} {:<9} {:<7} {:>9} {:>8}  {:<10}  {:<10}",
            "patient", "source", "sex", "documents", "labs", "first", "last"
        )?;
        for p in &self.patients {
            writeln!(
                f,
                "{:<40} {:<9} {:<7} {:>9} {:>8}  {:<10}  {:<10}",
                p.patient.id,
                p.patient.source,
                p.patient.sex.as_deref().unwrap_or("-"),
                p.documents,
                p.labs,
                day(&p.first_date),
                day(&p.last_date)
            )?;
        }
        writeln!(f, "{} patient(s)", self.patients.len())
    }
}

/// One row per lab concept (an unmapped name is its own row) with the
/// latest value.
#[derive(Debug, Serialize)]
pub struct LabSummary {
    pub concept_id: Option<String>,
    pub concept: String,
    pub count: usize,
    pub latest: LabRecord,
}

/// A patient's documents and lab summary.
#[derive(Debug, Serialize)]
pub struct PatientOverview {
    pub patient: Patient,
    pub documents: Vec<DocumentSummary>,
    pub labs: Vec<LabSummary>,
}

pub fn show(session: &Session, patient_id: &str) -> Result<PatientOverview> {
    session.with_store(|store| {
        let patient = store.patient(patient_id)?.ok_or_else(|| session.unknown_patient(patient_id))?;
        let documents = store.documents(&patient.id)?;
        let labs = store.labs(&LabQuery { patient_id: patient.id.clone(), ..LabQuery::default() })?;
        Ok(PatientOverview { patient, documents, labs: summarise_labs(labs) })
    })
}

/// The latest value per concept, in concept-name order.
fn summarise_labs(labs: Vec<LabRecord>) -> Vec<LabSummary> {
    let catalogue = LabCatalogue::builtin();
    let mut by_concept: BTreeMap<String, LabSummary> = BTreeMap::new();
    for lab in labs {
        let concept = match &lab.concept_id {
            Some(id) => catalogue.get(id).map(|c| c.name.clone()).unwrap_or_else(|| id.clone()),
            None => format!("{} (unmapped)", lab.original_name),
        };
        let entry = by_concept.entry(concept.clone()).or_insert_with(|| LabSummary {
            concept_id: lab.concept_id.clone(),
            concept,
            count: 0,
            latest: lab.clone(),
        });
        entry.count += 1;
        if lab.time >= entry.latest.time {
            entry.latest = lab;
        }
    }
    by_concept.into_values().collect()
}

fn lab_value(lab: &LabRecord) -> String {
    lab.value_num.map(|v| v.to_string()).or_else(|| lab.value_text.clone()).unwrap_or_default()
}

impl fmt::Display for PatientOverview {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let patient = &self.patient;
        writeln!(f, "patient {} (source {})", patient.id, patient.source)?;
        if let Some(name) = &patient.display_name {
            writeln!(f, "  name: {name}")?;
        }
        if let Some(sex) = &patient.sex {
            writeln!(f, "  sex: {sex}")?;
        }
        if let Some(birth) = &patient.birth_date {
            writeln!(f, "  born: {birth}")?;
        }
        writeln!(f, "\n{} document(s):", self.documents.len())?;
        writeln!(f, "  {:<10}  {:<17}  {:>9}  {:<44}  title", "date", "kind", "sentences", "id")?;
        for d in &self.documents {
            let date = d.date.map(|d| d.date().to_string()).unwrap_or_else(|| "-".into());
            writeln!(f, "  {date:<10}  {:<17}  {:>9}  {:<44}  {}", d.kind.as_str(), d.sentences, d.id, d.title)?;
        }
        writeln!(f, "\nlabs: {} concept(s)", self.labs.len())?;
        for s in &self.labs {
            writeln!(
                f,
                "  {:<40} n={:<5} latest {} {} on {}",
                s.concept,
                s.count,
                lab_value(&s.latest),
                s.latest.unit.as_deref().unwrap_or(""),
                s.latest.time.date()
            )?;
        }
        Ok(())
    }
}

/// Which lab values to read.
#[derive(Debug, Clone, Default)]
pub struct LabRequest {
    pub patient_id: String,
    /// A concept name, alias or LOINC code (e.g. "creatinine", "HbA1c", "2160-0").
    pub concept: Option<String>,
    /// Only values at or after this date (YYYY-MM-DD).
    pub since: Option<String>,
}

/// One lab value with the canonical concept it maps to.
#[derive(Debug, Serialize)]
pub struct LabRow {
    pub concept: Option<String>,
    pub lab: LabRecord,
}

/// A patient's lab values in time order.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct LabValues {
    pub rows: Vec<LabRow>,
}

pub fn labs(session: &Session, request: &LabRequest) -> Result<LabValues> {
    let catalogue = LabCatalogue::builtin();
    let concept_ids = match &request.concept {
        None => None,
        Some(name) => {
            let found: Vec<_> = match catalogue.resolve(name, Some(name.as_str())) {
                Some(c) => vec![c],
                None => catalogue.find(name),
            };
            if found.is_empty() {
                input_error!(
                    "concept {name:?} matches no lab concept; try a common name such as \"creatinine\" or a LOINC code"
                );
            }
            Some(found.iter().map(|c| c.id.clone()).collect())
        }
    };
    let since = match &request.since {
        None => None,
        Some(text) => match evident_ingest::parse_datetime(text) {
            Some(t) => Some(t),
            None => input_error!("since {text:?} is not a date (expected YYYY-MM-DD)"),
        },
    };
    let labs = session.with_store(|store| {
        session.require_patient(store, &request.patient_id)?;
        Ok(store.labs(&LabQuery { patient_id: request.patient_id.clone(), concept_ids, since })?)
    })?;
    let rows = labs
        .into_iter()
        .map(|lab| {
            let concept = lab.concept_id.as_deref().and_then(|id| catalogue.get(id)).map(|c| c.name.clone());
            LabRow { concept, lab }
        })
        .collect();
    Ok(LabValues { rows })
}

impl fmt::Display for LabValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for row in &self.rows {
            let l = &row.lab;
            let range = match (l.ref_low, l.ref_high, &l.ref_text) {
                (Some(lo), Some(hi), _) => format!(" (ref {lo}-{hi})"),
                (_, _, Some(t)) => format!(" (ref {t})"),
                _ => String::new(),
            };
            let flag = l.flag.as_deref().map(|f| format!(" [{f}]")).unwrap_or_default();
            writeln!(
                f,
                "{}  {:<28} {:<32} {} {}{range}{flag}",
                l.time.format("%Y-%m-%d %H:%M"),
                row.concept.as_deref().unwrap_or("(unmapped)"),
                l.original_name,
                lab_value(l),
                l.unit.as_deref().unwrap_or("")
            )?;
        }
        writeln!(f, "{} value(s)", self.rows.len())
    }
}
