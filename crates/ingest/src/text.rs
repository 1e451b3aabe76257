//! A folder of `.txt`/`.md` notes described by a manifest (`manifest.csv`
//! or `manifest.jsonl`) with columns `patient_id, doc_id, kind, date, file`
//! and optionally `title`. The manifest and the notes it names are one unit:
//! they are written together or not at all.

use std::path::{Path, PathBuf};

use evident_model::{DocKind, Document, Patient};

use crate::dates::{parse_datetime, EXPECTED};
use crate::{Batch, Format, IngestError, Problem, Reader, Unit};

const COLUMNS: [&str; 5] = ["patient_id", "doc_id", "kind", "date", "file"];

pub fn find_manifest(dir: &Path) -> Option<PathBuf> {
    ["manifest.csv", "manifest.jsonl"].iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

pub(crate) fn units(path: &Path) -> Result<Vec<Unit>, IngestError> {
    let manifest = if path.is_dir() {
        find_manifest(path).ok_or_else(|| IngestError::Input {
            path: path.into(),
            message: "no manifest.csv or manifest.jsonl in this folder; write one with columns patient_id, doc_id, kind, date, file".into(),
        })?
    } else {
        path.to_path_buf()
    };
    Ok(vec![Unit { path: manifest, format: Format::Text, reader: Reader::TextManifest }])
}

/// One manifest row, with the place it came from for error messages.
struct Row {
    place: String,
    fields: std::collections::BTreeMap<String, String>,
}

fn read_rows(manifest: &Path, problems: &mut Vec<Problem>) -> Vec<Row> {
    let is_jsonl = manifest.extension().is_some_and(|e| e == "jsonl");
    let text = match std::fs::read_to_string(manifest) {
        Ok(t) => t,
        Err(e) => {
            problems.push(Problem::new(
                manifest,
                "",
                None,
                format!("cannot read: {e}"),
                "check the path and permissions",
            ));
            return Vec::new();
        }
    };
    let mut rows = Vec::new();
    if is_jsonl {
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let place = format!("line {}", i + 1);
            match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(line) {
                Ok(obj) => {
                    let fields = obj
                        .into_iter()
                        .map(|(k, v)| (k, v.as_str().map(String::from).unwrap_or_else(|| v.to_string())))
                        .collect();
                    rows.push(Row { place, fields });
                }
                Err(e) => problems.push(Problem::new(
                    manifest,
                    place,
                    None,
                    format!("is not a JSON object: {e}"),
                    "write one JSON object per line",
                )),
            }
        }
        for row in &rows {
            for column in COLUMNS {
                if !row.fields.contains_key(column) {
                    problems.push(Problem::new(
                        manifest,
                        row.place.clone(),
                        Some(column),
                        "is missing",
                        format!("every line needs {}", COLUMNS.join(", ")),
                    ));
                }
            }
        }
        return rows;
    }
    let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(text.as_bytes());
    let headers = match reader.headers() {
        Ok(h) => h.iter().map(|h| h.trim().to_string()).collect::<Vec<_>>(),
        Err(e) => {
            problems.push(Problem::new(
                manifest,
                "line 1",
                None,
                format!("unreadable header: {e}"),
                "the first line must name the columns",
            ));
            return Vec::new();
        }
    };
    let missing: Vec<&str> = COLUMNS.iter().copied().filter(|c| !headers.iter().any(|h| h == c)).collect();
    if !missing.is_empty() {
        problems.push(Problem::new(
            manifest,
            "line 1",
            None,
            format!("the header lacks column(s) {}", missing.join(", ")),
            format!("the manifest needs columns {} (title is optional)", COLUMNS.join(", ")),
        ));
        return Vec::new();
    }
    for (i, record) in reader.records().enumerate() {
        let place = format!("line {}", i + 2);
        match record {
            Ok(record) => {
                let fields = headers.iter().cloned().zip(record.iter().map(|v| v.trim().to_string())).collect();
                rows.push(Row { place, fields });
            }
            Err(e) => problems.push(Problem::new(
                manifest,
                place,
                None,
                format!("malformed CSV row: {e}"),
                "every row needs the same number of fields as the header",
            )),
        }
    }
    rows
}

pub(crate) fn read(manifest: &Path) -> (Batch, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut batch = Batch::default();
    let rows = read_rows(manifest, &mut problems);
    let dir = manifest.parent().unwrap_or(Path::new("."));
    let mut seen_docs = std::collections::BTreeSet::new();
    for row in rows {
        let get = |k: &str| row.fields.get(k).map(String::as_str).unwrap_or("");
        let mut bad = |field: &str, message: String, hint: &str| {
            problems.push(Problem::new(manifest, row.place.clone(), Some(field), message, hint));
        };
        let patient_id = get("patient_id");
        let doc_id = get("doc_id");
        if patient_id.is_empty() {
            bad("patient_id", "is empty".into(), "give every note a patient id");
        }
        if doc_id.is_empty() {
            bad("doc_id", "is empty".into(), "give every note a unique doc id");
        } else if !seen_docs.insert(doc_id.to_string()) {
            bad("doc_id", format!("= {doc_id:?} appears twice"), "doc ids must be unique within the manifest");
        }
        let kind = match DocKind::resolve(get("kind")) {
            Some(k) => Some(k),
            None => {
                bad(
                    "kind",
                    format!("= {:?} is not a known document kind", get("kind")),
                    &format!("use one of: {}", DocKind::ALL.map(|k| k.as_str()).join(", ")),
                );
                None
            }
        };
        let date = match get("date") {
            "" => None,
            text => match parse_datetime(text) {
                Some(d) => Some(d),
                None => {
                    bad("date", format!("= {text:?} is not a date ({EXPECTED})"), "write dates as YYYY-MM-DD");
                    None
                }
            },
        };
        let file = get("file");
        let note_path = dir.join(file);
        let text = if file.is_empty() {
            bad("file", "is empty".into(), "name the note file, relative to the manifest");
            None
        } else {
            match std::fs::read(&note_path) {
                Ok(bytes) => match String::from_utf8(bytes) {
                    Ok(t) => Some(t),
                    Err(_) => {
                        bad("file", format!("= {file:?} is not UTF-8 text"), "convert the note to UTF-8");
                        None
                    }
                },
                Err(e) => {
                    bad(
                        "file",
                        format!("= {file:?} cannot be read ({e})"),
                        "paths are relative to the manifest's folder",
                    );
                    None
                }
            }
        };
        if let (Some(kind), Some(text)) = (kind, text) {
            if patient_id.is_empty() || doc_id.is_empty() {
                continue;
            }
            if !batch.patients.iter().any(|p: &Patient| p.id == patient_id) {
                batch.patients.push(Patient {
                    id: patient_id.to_string(),
                    source: "text".into(),
                    birth_date: None,
                    sex: row.fields.get("sex").filter(|s| !s.is_empty()).cloned(),
                    display_name: None,
                });
            }
            let title = row.fields.get("title").filter(|t| !t.is_empty()).cloned().unwrap_or_else(|| file.to_string());
            batch.documents.push(Document {
                id: format!("text:{doc_id}"),
                patient_id: patient_id.to_string(),
                kind,
                date,
                title,
                source: "text".into(),
                source_id: doc_id.to_string(),
                text,
            });
        }
    }
    (batch, problems)
}
