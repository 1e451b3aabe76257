//! MIMIC-IV (`hosp/*.csv.gz`) and MIMIC-IV-Note (`note/discharge.csv.gz`,
//! `note/radiology.csv.gz`). Each table file is one unit: patients (with a
//! demographics document), admissions, labevents (labs via d_labitems, and
//! daily lab timeline documents), prescriptions, diagnoses_icd and
//! procedures_icd (with their dictionaries, as dated timeline documents),
//! and the notes when the user has them. Dictionary tables are read, never
//! stored.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use evident_model::labs::LabCatalogue;
use evident_model::{DocKind, Document, LabObservation, LabValue, Patient};

use crate::dates::{parse_datetime, EXPECTED};
use crate::timeline::Timeline;
use crate::{Batch, Format, IngestError, Problem, Reader, Unit};

const SOURCE: &str = "mimic";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Patients,
    Admissions,
    Labevents,
    Prescriptions,
    DiagnosesIcd,
    ProceduresIcd,
    NoteDischarge,
    NoteRadiology,
}

impl Table {
    /// In the order they must be ingested.
    const ALL: [Table; 8] = [
        Table::Patients,
        Table::Admissions,
        Table::Labevents,
        Table::Prescriptions,
        Table::DiagnosesIcd,
        Table::ProceduresIcd,
        Table::NoteDischarge,
        Table::NoteRadiology,
    ];

    fn file_stem(self) -> &'static str {
        match self {
            Table::Patients => "patients",
            Table::Admissions => "admissions",
            Table::Labevents => "labevents",
            Table::Prescriptions => "prescriptions",
            Table::DiagnosesIcd => "diagnoses_icd",
            Table::ProceduresIcd => "procedures_icd",
            Table::NoteDischarge => "discharge",
            Table::NoteRadiology => "radiology",
        }
    }

    fn from_file(path: &Path) -> Option<Table> {
        let name = path.file_name()?.to_str()?;
        let stem = name.strip_suffix(".csv.gz").or_else(|| name.strip_suffix(".csv"))?;
        Table::ALL.into_iter().find(|t| t.file_stem() == stem)
    }
}

/// Finds `<stem>.csv.gz` (or `.csv`) in the given folders.
fn find_table(dirs: &[PathBuf], stem: &str) -> Option<PathBuf> {
    dirs.iter().flat_map(|d| [d.join(format!("{stem}.csv.gz")), d.join(format!("{stem}.csv"))]).find(|p| p.is_file())
}

pub(crate) fn units(path: &Path) -> Result<Vec<Unit>, IngestError> {
    if path.is_file() {
        let table = Table::from_file(path).ok_or_else(|| IngestError::Input {
            path: path.into(),
            message: format!(
                "not a MIMIC-IV table this reader knows; expected one of {}",
                Table::ALL.map(|t| format!("{}.csv.gz", t.file_stem())).join(", ")
            ),
        })?;
        return Ok(vec![Unit { path: path.into(), format: Format::Mimic, reader: Reader::Mimic(table) }]);
    }
    let dirs = [path.join("hosp"), path.join("note"), path.to_path_buf()];
    let units: Vec<Unit> = Table::ALL
        .into_iter()
        .filter_map(|t| {
            find_table(&dirs, t.file_stem()).map(|p| Unit { path: p, format: Format::Mimic, reader: Reader::Mimic(t) })
        })
        .collect();
    if units.is_empty() {
        return Err(IngestError::Input {
            path: path.into(),
            message: "no MIMIC-IV tables found (looked in hosp/, note/ and the folder itself for patients.csv.gz, labevents.csv.gz, ...)".into(),
        });
    }
    Ok(units)
}

/// A CSV table with named columns, read whole (gzip or plain).
struct CsvTable {
    path: PathBuf,
    headers: Vec<String>,
    reader: csv::Reader<Box<dyn Read>>,
}

impl CsvTable {
    fn open(path: &Path) -> Result<CsvTable, Problem> {
        let file = std::fs::File::open(path)
            .map_err(|e| Problem::new(path, "", None, format!("cannot open: {e}"), "check the path"))?;
        let input: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
            Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file)))
        } else {
            Box::new(std::io::BufReader::new(file))
        };
        let mut reader = csv::ReaderBuilder::new().from_reader(input);
        let headers = reader
            .headers()
            .map_err(|e| {
                Problem::new(path, "line 1", None, format!("unreadable header: {e}"), "is this a (gzipped) CSV file?")
            })?
            .iter()
            .map(String::from)
            .collect();
        Ok(CsvTable { path: path.into(), headers, reader })
    }

    /// Indices of the named columns, or one problem naming all missing ones.
    fn columns<const N: usize>(&self, names: [&str; N]) -> Result<[usize; N], Problem> {
        let missing: Vec<&str> = names.iter().copied().filter(|n| !self.headers.iter().any(|h| h == n)).collect();
        if !missing.is_empty() {
            return Err(Problem::new(
                &self.path,
                "line 1",
                None,
                format!("the header lacks column(s) {}", missing.join(", ")),
                format!("this MIMIC-IV table needs columns {}", names.join(", ")),
            ));
        }
        Ok(names.map(|n| self.headers.iter().position(|h| h == n).unwrap()))
    }

    /// Calls `f(line, record)` for each row; unreadable rows become problems.
    fn for_each(&mut self, problems: &mut Vec<Problem>, mut f: impl FnMut(u64, &csv::StringRecord, &mut Vec<Problem>)) {
        let mut record = csv::StringRecord::new();
        loop {
            match self.reader.read_record(&mut record) {
                Ok(true) => {
                    let line = record.position().map(|p| p.line()).unwrap_or(0);
                    f(line, &record, problems);
                }
                Ok(false) => break,
                Err(e) => {
                    let line = e.position().map(|p| p.line()).unwrap_or(0);
                    problems.push(Problem::new(
                        &self.path,
                        format!("line {line}"),
                        None,
                        format!("malformed CSV row: {e}"),
                        "the file may be truncated or not CSV",
                    ));
                    if !matches!(e.kind(), csv::ErrorKind::UnequalLengths { .. }) {
                        break;
                    }
                }
            }
        }
    }
}

/// Reads a dictionary table into key -> value.
fn dictionary(path: &Path, key: &[&str], value: &[&str], problems: &mut Vec<Problem>) -> HashMap<String, Vec<String>> {
    let mut map = HashMap::new();
    let mut table = match CsvTable::open(path) {
        Ok(t) => t,
        Err(p) => {
            problems.push(p);
            return map;
        }
    };
    let names: Vec<&str> = key.iter().chain(value).copied().collect();
    let missing: Vec<&str> = names.iter().copied().filter(|n| !table.headers.iter().any(|h| h == n)).collect();
    if !missing.is_empty() {
        problems.push(Problem::new(
            path,
            "line 1",
            None,
            format!("the header lacks column(s) {}", missing.join(", ")),
            "use the MIMIC-IV dictionary table as distributed",
        ));
        return map;
    }
    let idx: Vec<usize> = names.iter().map(|n| table.headers.iter().position(|h| h == n).unwrap()).collect();
    let (key_idx, value_idx) = idx.split_at(key.len());
    table.for_each(problems, |_, r, _| {
        let k = key_idx.iter().map(|&i| r.get(i).unwrap_or("")).collect::<Vec<_>>().join("|");
        map.insert(k, value_idx.iter().map(|&i| r.get(i).unwrap_or("").to_string()).collect());
    });
    map
}

fn sibling(path: &Path, stem: &str) -> Result<PathBuf, Problem> {
    let dir = path.parent().unwrap_or(Path::new("."));
    find_table(&[dir.to_path_buf()], stem).ok_or_else(|| {
        Problem::new(
            path,
            "",
            None,
            format!("needs its dictionary {stem}.csv.gz beside it"),
            "keep the MIMIC-IV hosp/ folder whole",
        )
    })
}

/// Parses a datetime column; an empty one is `Ok(None)`.
fn time_field(
    path: &Path,
    line: u64,
    field: &str,
    text: &str,
    problems: &mut Vec<Problem>,
) -> Result<Option<chrono::NaiveDateTime>, ()> {
    if text.is_empty() {
        return Ok(None);
    }
    match parse_datetime(text) {
        Some(t) => Ok(Some(t)),
        None => {
            problems.push(Problem::new(
                path,
                format!("line {line}"),
                Some(field),
                format!("= {text:?} is not a date ({EXPECTED})"),
                "MIMIC-IV dates are YYYY-MM-DD HH:MM:SS",
            ));
            Err(())
        }
    }
}

pub(crate) fn read(path: &Path, table: Table) -> (Batch, Vec<Problem>) {
    let mut batch = Batch::default();
    let mut problems = Vec::new();
    let mut csv = match CsvTable::open(path) {
        Ok(t) => t,
        Err(p) => return (batch, vec![p]),
    };
    let result = match table {
        Table::Patients => patients(&mut csv, &mut batch, &mut problems),
        Table::Admissions => admissions(&mut csv, &mut batch, &mut problems),
        Table::Labevents => labevents(&mut csv, &mut batch, &mut problems),
        Table::Prescriptions => prescriptions(&mut csv, &mut batch, &mut problems),
        Table::DiagnosesIcd => icd(&mut csv, &mut batch, &mut problems, IcdKind::Diagnoses),
        Table::ProceduresIcd => icd(&mut csv, &mut batch, &mut problems, IcdKind::Procedures),
        Table::NoteDischarge | Table::NoteRadiology => notes(&mut csv, &mut batch, &mut problems),
    };
    if let Err(p) = result {
        problems.insert(0, p);
    }
    (batch, problems)
}

fn patients(csv: &mut CsvTable, batch: &mut Batch, problems: &mut Vec<Problem>) -> Result<(), Problem> {
    let [subject, gender, age, year, group, dod] =
        csv.columns(["subject_id", "gender", "anchor_age", "anchor_year", "anchor_year_group", "dod"])?;
    let path = csv.path.clone();
    let mut demographics = Timeline::new(SOURCE, "demographics", "Demographics", DocKind::Other);
    csv.for_each(problems, |line, r, problems| {
        let id = r[subject].to_string();
        if id.is_empty() {
            problems.push(Problem::new(
                &path,
                format!("line {line}"),
                Some("subject_id"),
                "is empty",
                "every row needs a subject_id",
            ));
            return;
        }
        let Ok(anchor_year) = r[year].parse::<i32>() else {
            problems.push(Problem::new(
                &path,
                format!("line {line}"),
                Some("anchor_year"),
                format!("= {:?} is not a year", &r[year]),
                "expected a number such as 2153",
            ));
            return;
        };
        let Ok(death) = time_field(&path, line, "dod", &r[dod], problems) else { return };
        let mut text = evident_model::age::AnchorAge::line(&r[gender], &r[age], anchor_year, &r[group]);
        if let Some(d) = death {
            text.push_str(&format!("; date of death {}", d.date()));
        }
        let at = chrono::NaiveDate::from_ymd_opt(anchor_year, 1, 1).and_then(|d| d.and_hms_opt(0, 0, 0));
        if let Some(at) = at {
            demographics.push(&id, at, text, format!("patients/{id}"));
        }
        batch.patients.push(Patient {
            id,
            source: SOURCE.into(),
            birth_date: None,
            sex: Some(r[gender].to_string()),
            display_name: None,
        });
    });
    batch.documents.extend(demographics.into_documents());
    Ok(())
}

fn admissions(csv: &mut CsvTable, batch: &mut Batch, problems: &mut Vec<Problem>) -> Result<(), Problem> {
    let [subject, hadm, admit, disch, kind, location, disch_location, insurance] = csv.columns([
        "subject_id",
        "hadm_id",
        "admittime",
        "dischtime",
        "admission_type",
        "admission_location",
        "discharge_location",
        "insurance",
    ])?;
    let path = csv.path.clone();
    let mut timeline = Timeline::new(SOURCE, "admissions", "Admissions", DocKind::Other);
    csv.for_each(problems, |line, r, problems| {
        let Ok(Some(admitted)) = time_field(&path, line, "admittime", &r[admit], problems) else {
            if r[admit].is_empty() {
                problems.push(Problem::new(
                    &path,
                    format!("line {line}"),
                    Some("admittime"),
                    "is empty",
                    "every admission needs an admittime",
                ));
            }
            return;
        };
        let Ok(discharged) = time_field(&path, line, "dischtime", &r[disch], problems) else { return };
        let mut text = format!("Admitted ({}) from {}", &r[kind], &r[location]);
        if let Some(d) = discharged {
            text.push_str(&format!("; discharged {} to {}", d.format("%Y-%m-%d %H:%M"), &r[disch_location]));
        }
        if !r[insurance].is_empty() {
            text.push_str(&format!("; insurance {}", &r[insurance]));
        }
        timeline.push(&r[subject], admitted, text, format!("admissions/{}", &r[hadm]));
    });
    batch.documents.extend(timeline.into_documents());
    Ok(())
}

fn labevents(csv: &mut CsvTable, batch: &mut Batch, problems: &mut Vec<Problem>) -> Result<(), Problem> {
    let [id_col, subject, item, chart, value, valuenum, uom, low, high, flag] = csv.columns([
        "labevent_id",
        "subject_id",
        "itemid",
        "charttime",
        "value",
        "valuenum",
        "valueuom",
        "ref_range_lower",
        "ref_range_upper",
        "flag",
    ])?;
    let path = csv.path.clone();
    let items = dictionary(&sibling(&path, "d_labitems")?, &["itemid"], &["label", "fluid"], problems);
    let catalogue = LabCatalogue::builtin();
    let mut lines = Timeline::new(SOURCE, "labevents", "Laboratory results", DocKind::LabReport);
    let number = |text: &str| -> Option<f64> { text.trim().parse::<f64>().ok().filter(|v| v.is_finite()) };
    csv.for_each(problems, |line, r, problems| {
        let raw_value = r[value].trim();
        let num = number(&r[valuenum]);
        if raw_value.is_empty() && num.is_none() {
            *batch.skipped.entry("labevents rows without a value".into()).or_default() += 1;
            return;
        }
        let Some(entry) = items.get(&r[item]) else {
            problems.push(Problem::new(
                &path,
                format!("line {line}"),
                Some("itemid"),
                format!("= {} is not in d_labitems", &r[item]),
                "use the d_labitems table of the same MIMIC-IV release",
            ));
            return;
        };
        let (label, fluid) = (entry[0].as_str(), entry[1].as_str());
        let loinc: Option<String> = None;
        let Ok(Some(time)) = time_field(&path, line, "charttime", &r[chart], problems) else {
            if r[chart].is_empty() {
                problems.push(Problem::new(
                    &path,
                    format!("line {line}"),
                    Some("charttime"),
                    "is empty",
                    "every lab event needs a charttime",
                ));
            }
            return;
        };
        let concept = catalogue.resolve_mimic(label, fluid).or_else(|| catalogue.resolve(label, loinc.as_deref()));
        if concept.is_none() {
            *batch.unmapped_lab_names.entry(format!("{label} ({fluid})")).or_default() += 1;
        }
        let lab_value = match num {
            Some(v) => LabValue::Numeric(v),
            None => LabValue::Text(raw_value.to_string()),
        };
        let unit = Some(r[uom].trim().to_string()).filter(|u| !u.is_empty());
        let (ref_low, ref_high) = (number(&r[low]), number(&r[high]));
        let flag_value = Some(r[flag].trim().to_string()).filter(|f| !f.is_empty());
        let record = format!("labevents/{}", &r[id_col]);
        // The text value is empty, or masked as `___` by de-identification
        // while `valuenum` keeps the number (6% of the demo's rows): the line
        // shows the number, so text readers see what checks read.
        let shown_value = if raw_value.is_empty() || raw_value == "___" {
            num.map(|v| v.to_string()).unwrap_or_else(|| raw_value.to_string())
        } else {
            raw_value.to_string()
        };
        lines.push(
            &r[subject],
            time,
            format!(
                "{label} ({fluid}): {shown_value}{}{}{}",
                unit.as_deref().map(|u| format!(" {u}")).unwrap_or_default(),
                crate::fhir::range_text(ref_low, ref_high, None),
                flag_value.as_deref().map(|f| format!(" [{f}]")).unwrap_or_default()
            ),
            record.clone(),
        );
        batch.labs.push(LabObservation {
            patient_id: r[subject].to_string(),
            concept_id: concept.map(|c| c.id.clone()),
            original_name: label.to_string(),
            loinc,
            value: lab_value,
            unit,
            ref_low,
            ref_high,
            ref_text: None,
            flag: flag_value,
            time,
            source: SOURCE.into(),
            source_id: record,
        });
    });
    batch.documents.extend(lines.into_documents());
    Ok(())
}

fn prescriptions(csv: &mut CsvTable, batch: &mut Batch, problems: &mut Vec<Problem>) -> Result<(), Problem> {
    let [subject, pharmacy, start, stop, drug, dose, dose_unit, route] = csv.columns([
        "subject_id",
        "pharmacy_id",
        "starttime",
        "stoptime",
        "drug",
        "dose_val_rx",
        "dose_unit_rx",
        "route",
    ])?;
    let path = csv.path.clone();
    let mut timeline = Timeline::new(SOURCE, "prescriptions", "Prescriptions", DocKind::MedicationList);
    csv.for_each(problems, |line, r, problems| {
        let Ok(started) = time_field(&path, line, "starttime", &r[start], problems) else { return };
        let Some(started) = started else {
            *batch.skipped.entry("prescriptions without a starttime".into()).or_default() += 1;
            return;
        };
        let Ok(stopped) = time_field(&path, line, "stoptime", &r[stop], problems) else { return };
        let mut text = r[drug].to_string();
        if !r[dose].is_empty() {
            text.push_str(&format!(" {} {}", &r[dose], &r[dose_unit]));
        }
        if !r[route].is_empty() {
            text.push_str(&format!(" {}", &r[route]));
        }
        if let Some(s) = stopped {
            text.push_str(&format!(" (until {})", s.format("%Y-%m-%d %H:%M")));
        }
        timeline.push(&r[subject], started, text, format!("prescriptions/{}", &r[pharmacy]));
    });
    batch.documents.extend(timeline.into_documents());
    Ok(())
}

#[derive(Clone, Copy)]
enum IcdKind {
    Diagnoses,
    Procedures,
}

fn icd(csv: &mut CsvTable, batch: &mut Batch, problems: &mut Vec<Problem>, kind: IcdKind) -> Result<(), Problem> {
    let path = csv.path.clone();
    let (dictionary_stem, name, title, doc_kind) = match kind {
        IcdKind::Diagnoses => ("d_icd_diagnoses", "diagnoses_icd", "Diagnoses (ICD)", DocKind::ProblemList),
        IcdKind::Procedures => ("d_icd_procedures", "procedures_icd", "Procedures (ICD)", DocKind::Procedure),
    };
    let [subject, hadm, seq, code, version] =
        csv.columns(["subject_id", "hadm_id", "seq_num", "icd_code", "icd_version"])?;
    let chartdate = csv.headers.iter().position(|h| h == "chartdate");
    let titles = dictionary(&sibling(&path, dictionary_stem)?, &["icd_code", "icd_version"], &["long_title"], problems);
    // Diagnoses carry no date of their own: they are dated at admission.
    let admissions = match kind {
        IcdKind::Diagnoses => dictionary(&sibling(&path, "admissions")?, &["hadm_id"], &["admittime"], problems),
        IcdKind::Procedures => HashMap::new(),
    };
    let mut timeline = Timeline::new(SOURCE, name, title, doc_kind);
    csv.for_each(problems, |line, r, problems| {
        let date_text = match (kind, chartdate) {
            (IcdKind::Procedures, Some(i)) => r[i].to_string(),
            _ => match admissions.get(&r[hadm]) {
                Some(v) => v[0].clone(),
                None => {
                    problems.push(Problem::new(
                        &path,
                        format!("line {line}"),
                        Some("hadm_id"),
                        format!("= {} is not in admissions", &r[hadm]),
                        "ingest the matching admissions table",
                    ));
                    return;
                }
            },
        };
        let Ok(Some(time)) = time_field(&path, line, "date", &date_text, problems) else { return };
        let key = format!("{}|{}", &r[code], &r[version]);
        let long_title = titles.get(&key).map(|v| v[0].as_str()).unwrap_or("(code not in dictionary)");
        let text = format!("ICD-{} {}: {long_title} (#{} of admission {})", &r[version], &r[code], &r[seq], &r[hadm]);
        timeline.push(&r[subject], time, text, format!("{name}/{}/{}", &r[hadm], &r[seq]));
    });
    batch.documents.extend(timeline.into_documents());
    Ok(())
}

fn notes(csv: &mut CsvTable, batch: &mut Batch, problems: &mut Vec<Problem>) -> Result<(), Problem> {
    let [note_id, subject, note_type, chart, text] =
        csv.columns(["note_id", "subject_id", "note_type", "charttime", "text"])?;
    let path = csv.path.clone();
    csv.for_each(problems, |line, r, problems| {
        let Ok(time) = time_field(&path, line, "charttime", &r[chart], problems) else { return };
        let Some(kind) = DocKind::resolve(&r[note_type]) else {
            problems.push(Problem::new(
                &path,
                format!("line {line}"),
                Some("note_type"),
                format!("= {:?} is not a known note type", &r[note_type]),
                "expected DS, RR or AR",
            ));
            return;
        };
        batch.documents.push(Document {
            id: format!("mimic-note:{}", &r[note_id]),
            patient_id: r[subject].to_string(),
            kind,
            date: time,
            title: format!("{} {}", kind.as_str().replace('_', " "), &r[note_id]),
            source: "mimic-note".into(),
            source_id: r[note_id].to_string(),
            text: r[text].to_string(),
        });
    });
    Ok(())
}
