//! TrialGPT / TREC patient topics: `queries.jsonl`, one JSON object per
//! line with `_id` and `text`. Each becomes a patient with one document.

use std::path::Path;

use evident_model::{DocKind, Document, Patient};

use crate::{Batch, Problem};

pub(crate) fn read(path: &Path) -> (Batch, Vec<Problem>) {
    let mut batch = Batch::default();
    let mut problems = Vec::new();
    let text = match crate::problem::read_text(path) {
        Ok(t) => t,
        Err(problem) => {
            problems.push(problem);
            return (batch, problems);
        }
    };
    let hint = "each line must be a JSON object with string fields \"_id\" and \"text\"";
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let place = format!("line {}", i + 1);
        let value: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                problems.push(Problem::new(path, place, None, format!("is not valid JSON: {e}"), hint));
                continue;
            }
        };
        let field = |name: &str| value.get(name).and_then(|v| v.as_str()).map(str::trim).filter(|s| !s.is_empty());
        let (Some(id), Some(note)) = (field("_id"), field("text")) else {
            let missing = if field("_id").is_none() { "_id" } else { "text" };
            problems.push(Problem::new(path, place, Some(missing), "is missing or empty", hint));
            continue;
        };
        if batch.patients.iter().any(|p| p.id == id) {
            problems.push(Problem::new(
                path,
                place,
                Some("_id"),
                format!("= {id:?} appears twice"),
                "topic ids must be unique",
            ));
            continue;
        }
        batch.patients.push(Patient {
            id: id.into(),
            source: "trialgpt".into(),
            birth_date: None,
            sex: None,
            display_name: None,
        });
        batch.documents.push(Document {
            id: format!("trialgpt:{id}"),
            patient_id: id.into(),
            kind: DocKind::ProgressNote,
            date: None,
            title: "Patient description".into(),
            source: "trialgpt".into(),
            source_id: id.into(),
            text: note.into(),
        });
    }
    (batch, problems)
}
