//! Structured records (medications, conditions, procedures, encounters,
//! observations, MIMIC-IV rows) become readable, dated timeline documents
//! so that text tools — search, the matcher, the chart agent — see them.
//! One document per patient, record type and calendar day; each line keeps
//! the id of the record it came from, e.g. `[MedicationRequest/abc]`.

use std::collections::BTreeMap;

use chrono::NaiveDateTime;
use evident_model::{DocKind, Document};

pub(crate) struct Line {
    pub patient_id: String,
    pub time: NaiveDateTime,
    pub text: String,
    /// The record's id in its source, e.g. `MedicationRequest/abc` or `labevents/172061`.
    pub record: String,
}

/// Collects lines of one record type and turns them into documents.
pub(crate) struct Timeline {
    pub source: &'static str,
    /// Short name used in document ids, e.g. `medications`.
    pub name: &'static str,
    /// Title stem, e.g. `Medications`.
    pub title: &'static str,
    pub kind: DocKind,
    pub lines: Vec<Line>,
}

impl Timeline {
    pub fn new(source: &'static str, name: &'static str, title: &'static str, kind: DocKind) -> Timeline {
        Timeline { source, name, title, kind, lines: Vec::new() }
    }

    pub fn push(&mut self, patient_id: &str, time: NaiveDateTime, text: String, record: String) {
        self.lines.push(Line { patient_id: patient_id.to_string(), time, text, record });
    }

    /// One document per patient and day, lines in time order (input order
    /// breaks ties, so diagnosis sequence numbers keep their order).
    pub fn into_documents(self) -> Vec<Document> {
        let mut groups: BTreeMap<(String, chrono::NaiveDate), Vec<Line>> = BTreeMap::new();
        for line in self.lines {
            groups.entry((line.patient_id.clone(), line.time.date())).or_default().push(line);
        }
        groups
            .into_iter()
            .map(|((patient_id, day), mut lines)| {
                lines.sort_by_key(|l| l.time);
                let mut text = format!("{} on {day}\n", self.title);
                for line in &lines {
                    let clock = line.time.format("%H:%M");
                    text.push_str(&format!("- {day} {clock}: {} [{}]\n", line.text.trim(), line.record));
                }
                let source_id = format!("{}:{patient_id}:{day}", self.name);
                Document {
                    id: format!("{}:{source_id}", self.source),
                    patient_id,
                    kind: self.kind,
                    date: Some(lines[0].time),
                    title: format!("{} {day}", self.title),
                    source: self.source.to_string(),
                    source_id,
                    text,
                }
            })
            .collect()
    }
}
