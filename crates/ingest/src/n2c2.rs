//! n2c2 2018 Track 1 XML: `<PatientMatching><TEXT>` holds all of one
//! patient's notes separated by a line of 100 asterisks, each with a
//! `Record date: YYYY-MM-DD` line; `<TAGS>` holds one empty element per
//! criterion with `met="met"` or `met="not met"`, kept as evaluation labels
//! (label set `n2c2-2018`) and never shown to a model.

use std::path::Path;

use evident_model::{DocKind, Document, Patient};
use quick_xml::events::Event;
use quick_xml::Reader as XmlReader;

use crate::dates::parse_datetime;
use crate::{Batch, EvaluationLabel, Format, IngestError, Problem, Reader, Unit};

pub const LABEL_SET: &str = "n2c2-2018";

pub(crate) fn units(path: &Path) -> Result<Vec<Unit>, IngestError> {
    let files = if path.is_dir() {
        crate::list_dir(path)
            .map_err(|e| IngestError::Input { path: path.into(), message: e.to_string() })?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "xml"))
            .collect()
    } else {
        vec![path.to_path_buf()]
    };
    Ok(files.into_iter().map(|path| Unit { path, format: Format::N2c2, reader: Reader::N2c2 }).collect())
}

/// The parts of one n2c2 file.
#[derive(Debug, Default)]
pub struct N2c2File {
    pub text: String,
    /// (criterion, "met" | "not met")
    pub tags: Vec<(String, String)>,
}

/// Parses the XML structure; errors name the line and what was expected.
pub fn parse(xml: &str) -> Result<N2c2File, String> {
    let mut reader = XmlReader::from_str(xml);
    let mut file = N2c2File::default();
    let mut path: Vec<String> = Vec::new();
    let mut saw_root = false;
    let line_of = |pos: u64| xml[..(pos as usize).min(xml.len())].matches('\n').count() + 1;
    loop {
        let pos = reader.buffer_position();
        let event = reader.read_event().map_err(|e| format!("line {}: malformed XML: {e}", line_of(pos)))?;
        match event {
            Event::Start(e) | Event::Empty(e) if path.is_empty() && !saw_root => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if name != "PatientMatching" {
                    return Err(format!(
                        "line {}: the root element is <{name}>, expected <PatientMatching>",
                        line_of(pos)
                    ));
                }
                saw_root = true;
                path.push(name);
            }
            Event::Start(e) => path.push(String::from_utf8_lossy(e.name().as_ref()).into_owned()),
            Event::Empty(e) if path.last().map(String::as_str) == Some("TAGS") => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                let met = e
                    .try_get_attribute("met")
                    .map_err(|err| format!("line {}: <{name}>: {err}", line_of(pos)))?
                    .ok_or_else(|| format!("line {}: <{name}> has no met attribute", line_of(pos)))?;
                let value = met.unescape_value().map_err(|err| format!("line {}: {err}", line_of(pos)))?.into_owned();
                if value != "met" && value != "not met" {
                    return Err(format!(
                        "line {}: <{name} met={value:?}>: expected \"met\" or \"not met\"",
                        line_of(pos)
                    ));
                }
                file.tags.push((name, value));
            }
            Event::End(_) => {
                path.pop();
            }
            Event::CData(t) if path.last().map(String::as_str) == Some("TEXT") => {
                file.text.push_str(&String::from_utf8_lossy(&t.into_inner()));
            }
            Event::Text(t) if path.last().map(String::as_str) == Some("TEXT") => {
                let decoded = t.decode().map_err(|e| format!("line {}: {e}", line_of(pos)))?;
                let unescaped =
                    quick_xml::escape::unescape(&decoded).map_err(|e| format!("line {}: {e}", line_of(pos)))?;
                file.text.push_str(&unescaped);
            }
            Event::GeneralRef(r) if path.last().map(String::as_str) == Some("TEXT") => {
                let name = String::from_utf8_lossy(&r.into_inner()).into_owned();
                let entity = format!("&{name};");
                let resolved =
                    quick_xml::escape::unescape(&entity).map_err(|e| format!("line {}: {e}", line_of(pos)))?;
                file.text.push_str(&resolved);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !saw_root {
        return Err("no <PatientMatching> root element: this is not an n2c2 2018 Track 1 file".into());
    }
    if file.text.trim().is_empty() {
        return Err("<TEXT> is missing or empty".into());
    }
    Ok(file)
}

/// Splits the TEXT into notes at lines of 100 asterisks.
pub fn split_notes(text: &str) -> Vec<&str> {
    let separator = "*".repeat(100);
    text.split(separator.as_str())
        .map(|n| n.trim_matches(['\n', '\r', ' ', '\t']))
        .filter(|n| !n.trim().is_empty())
        .collect()
}

fn record_date(note: &str) -> Option<chrono::NaiveDateTime> {
    note.lines().find_map(|l| l.trim().strip_prefix("Record date:")).and_then(|d| parse_datetime(d.trim()))
}

pub(crate) fn read(path: &Path) -> (Batch, Vec<Problem>) {
    let mut batch = Batch::default();
    let mut problems = Vec::new();
    let hint = "n2c2 2018 Track 1 files are <PatientMatching><TEXT>...</TEXT><TAGS>...</TAGS></PatientMatching>";
    let xml = match std::fs::read_to_string(path) {
        Ok(x) => x,
        Err(e) => {
            problems.push(Problem::new(path, "", None, format!("cannot read as UTF-8 text: {e}"), hint));
            return (batch, problems);
        }
    };
    let parsed = match parse(&xml) {
        Ok(p) => p,
        Err(message) => {
            let (place, message) = match message.split_once(": ") {
                Some((p, m)) if p.starts_with("line ") => (p.to_string(), m.to_string()),
                _ => (String::new(), message),
            };
            problems.push(Problem::new(path, place, None, message, hint));
            return (batch, problems);
        }
    };
    let patient_id = path.file_stem().and_then(|s| s.to_str()).unwrap_or("unknown").to_string();
    batch.patients.push(Patient {
        id: patient_id.clone(),
        source: "n2c2".into(),
        birth_date: None,
        sex: None,
        display_name: None,
    });
    for (i, note) in split_notes(&parsed.text).into_iter().enumerate() {
        let date = record_date(note);
        if date.is_none() {
            problems.push(Problem::new(
                path,
                format!("note {}", i + 1),
                Some("Record date"),
                "is missing or not YYYY-MM-DD",
                "each note needs a line 'Record date: YYYY-MM-DD'",
            ));
        }
        batch.documents.push(Document {
            id: format!("n2c2:{patient_id}:{i}"),
            patient_id: patient_id.clone(),
            kind: DocKind::ProgressNote,
            date,
            title: format!("Note {}", i + 1),
            source: "n2c2".into(),
            source_id: format!("{patient_id}:{i}"),
            text: note.to_string(),
        });
    }
    for (criterion, value) in parsed.tags {
        batch.labels.push(EvaluationLabel {
            patient_id: patient_id.clone(),
            label_set: LABEL_SET.into(),
            key: criterion,
            value,
        });
    }
    (batch, problems)
}
