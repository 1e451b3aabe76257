//! The shared real data that tests and benchmarks read, found in one place
//! and read by one loader: [`shared_data`] is `../shared/data` beside the
//! checkout (tests fail, naming the path, when it is missing), and
//! [`synthea_notes`] reads the clinical notes of a Synthea bulk FHIR export
//! (the base64 text attachments of its `DocumentReference` resources).
//! [`Scripted`] is the fake model the control-flow tests share.
//! Only tests, examples and benchmarks depend on this crate.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use base64::Engine;

mod scripted;
pub use scripted::Scripted;

/// `../shared/data` beside the checkout. Panics, naming the path, when it
/// is missing: the tests are meant to run on the real data.
pub fn shared_data() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    assert!(path.is_dir(), "{}: the shared data folder is missing; the tests read real data from it", path.display());
    path
}

/// The Synthea sample whose notes the tests use (10 patients' bulk export).
pub fn synthea_sample_dir() -> PathBuf {
    shared_data().join("synthea/sample-bulk-fhir-datasets-10-patients")
}

/// The sample's `DocumentReference.000.ndjson` (1,215 notes).
pub fn synthea_sample_notes_file() -> PathBuf {
    synthea_sample_dir().join("DocumentReference.000.ndjson")
}

/// One note: a text attachment of a `DocumentReference`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheaNote {
    /// The patient's FHIR id (`subject.reference` without `Patient/`).
    pub patient_id: String,
    /// The DocumentReference's id, with `#N` added when it has several attachments.
    pub document_id: String,
    /// The `date` element as written (e.g. `2019-02-17T11:20:33-05:00`), if any.
    pub date: Option<String>,
    /// The decoded note text.
    pub text: String,
}

/// Reads every base64 text attachment of an NDJSON file of
/// `DocumentReference` resources, in file order. Panics with the file and
/// line on anything it cannot read: it is for tests and benchmarks.
pub fn synthea_notes(path: &Path) -> Vec<SyntheaNote> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let place = format!("{}:{}", path.display(), i + 1);
        let line = line.unwrap_or_else(|e| panic!("{place}: {e}"));
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{place}: {e}"));
        let patient_id = value["subject"]["reference"].as_str().unwrap_or("Patient/unknown").replace("Patient/", "");
        let id = value["id"].as_str().unwrap_or_default().to_string();
        let date = value["date"].as_str().map(str::to_string);
        let attachments: Vec<&str> = value["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["attachment"]["data"].as_str())
            .collect();
        for (n, data) in attachments.iter().enumerate() {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap_or_else(|e| panic!("{place}: attachment {n} is not base64: {e}"));
            let text = String::from_utf8(bytes).unwrap_or_else(|e| panic!("{place}: attachment {n} is not UTF-8: {e}"));
            let document_id = if attachments.len() > 1 { format!("{id}#{n}") } else { id.clone() };
            out.push(SyntheaNote { patient_id: patient_id.clone(), document_id, date: date.clone(), text });
        }
    }
    out
}

/// The notes of the sample export ([`synthea_sample_notes_file`]).
pub fn synthea_sample_notes() -> Vec<SyntheaNote> {
    synthea_notes(&synthea_sample_notes_file())
}
