//! The controlled vocabulary of document kinds and the synonym map that
//! resolves source-specific kind names (FHIR LOINC document types, MIMIC
//! note types, free-text manifests) to it.

use serde::{Deserialize, Serialize};

/// Canonical document kinds. Retrieval filters and evidence policies speak
/// only these, whatever the source called the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    DischargeSummary,
    ProgressNote,
    Radiology,
    Pathology,
    LabReport,
    MedicationList,
    Consult,
    Procedure,
    /// Diagnoses and conditions, as coded problem lists become text.
    ProblemList,
    Other,
}

impl DocKind {
    pub const ALL: [DocKind; 10] = [
        DocKind::DischargeSummary,
        DocKind::ProgressNote,
        DocKind::Radiology,
        DocKind::Pathology,
        DocKind::LabReport,
        DocKind::MedicationList,
        DocKind::Consult,
        DocKind::Procedure,
        DocKind::ProblemList,
        DocKind::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::DischargeSummary => "discharge_summary",
            DocKind::ProgressNote => "progress_note",
            DocKind::Radiology => "radiology",
            DocKind::Pathology => "pathology",
            DocKind::LabReport => "lab_report",
            DocKind::MedicationList => "medication_list",
            DocKind::Consult => "consult",
            DocKind::Procedure => "procedure",
            DocKind::ProblemList => "problem_list",
            DocKind::Other => "other",
        }
    }

    /// Resolves a kind name from any source. Returns `None` for names the
    /// synonym map does not know, so callers can report them instead of
    /// silently filing the document under `other`.
    pub fn resolve(name: &str) -> Option<DocKind> {
        let key: String = name
            .trim()
            .to_lowercase()
            .chars()
            .map(|c| if c.is_alphanumeric() { c } else { ' ' })
            .collect::<String>()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if let Some(kind) = DocKind::ALL.iter().find(|k| k.as_str().replace('_', " ") == key) {
            return Some(*kind);
        }
        SYNONYMS.iter().find(|(s, _)| *s == key).map(|(_, k)| *k)
    }
}

impl std::fmt::Display for DocKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for DocKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DocKind::resolve(s).ok_or_else(|| {
            format!("unknown document kind {s:?}; use one of: {}", DocKind::ALL.map(|k| k.as_str()).join(", "))
        })
    }
}

/// Source-specific names, already lower-cased with punctuation turned into
/// single spaces (the form `resolve` compares).
const SYNONYMS: &[(&str, DocKind)] = &[
    // Discharge summaries (MIMIC-IV-Note "DS", LOINC 18842-5).
    ("discharge", DocKind::DischargeSummary),
    ("ds", DocKind::DischargeSummary),
    ("discharge note", DocKind::DischargeSummary),
    ("discharge summarization note", DocKind::DischargeSummary),
    ("18842 5", DocKind::DischargeSummary),
    ("arztbrief", DocKind::DischargeSummary),
    ("entlassbrief", DocKind::DischargeSummary),
    // Progress notes (Synthea's DocumentReference type LOINC 34117-2 is a
    // "History and physical note"; 11506-3 is a progress note).
    ("progress", DocKind::ProgressNote),
    ("progress notes", DocKind::ProgressNote),
    ("11506 3", DocKind::ProgressNote),
    ("34117 2", DocKind::ProgressNote),
    ("history and physical note", DocKind::ProgressNote),
    ("history and physical", DocKind::ProgressNote),
    ("h p", DocKind::ProgressNote),
    ("clinical note", DocKind::ProgressNote),
    ("note", DocKind::ProgressNote),
    ("case report", DocKind::ProgressNote),
    ("patient summary", DocKind::ProgressNote),
    ("nursing note", DocKind::ProgressNote),
    ("physician note", DocKind::ProgressNote),
    ("verlaufsbericht", DocKind::ProgressNote),
    // Radiology (MIMIC-IV-Note "RR", "AR").
    ("rr", DocKind::Radiology),
    ("ar", DocKind::Radiology),
    ("radiology report", DocKind::Radiology),
    ("imaging", DocKind::Radiology),
    ("18748 4", DocKind::Radiology),
    ("diagnostic imaging study", DocKind::Radiology),
    ("befund radiologie", DocKind::Radiology),
    // Pathology.
    ("pathology report", DocKind::Pathology),
    ("11526 1", DocKind::Pathology),
    ("histology", DocKind::Pathology),
    ("cytology", DocKind::Pathology),
    ("bone marrow", DocKind::Pathology),
    ("pathologie", DocKind::Pathology),
    // Laboratory.
    ("lab", DocKind::LabReport),
    ("labs", DocKind::LabReport),
    ("laboratory", DocKind::LabReport),
    ("laboratory report", DocKind::LabReport),
    ("11502 2", DocKind::LabReport),
    ("labor", DocKind::LabReport),
    // Medications.
    ("medications", DocKind::MedicationList),
    ("medication", DocKind::MedicationList),
    ("prescriptions", DocKind::MedicationList),
    ("10160 0", DocKind::MedicationList),
    ("medication list", DocKind::MedicationList),
    // Consults.
    ("consultation", DocKind::Consult),
    ("consult note", DocKind::Consult),
    ("11488 4", DocKind::Consult),
    ("konsil", DocKind::Consult),
    // Procedures.
    ("procedures", DocKind::Procedure),
    ("procedure note", DocKind::Procedure),
    ("operative note", DocKind::Procedure),
    ("28570 0", DocKind::Procedure),
    ("op bericht", DocKind::Procedure),
    // Problem lists.
    ("conditions", DocKind::ProblemList),
    ("diagnoses", DocKind::ProblemList),
    ("problems", DocKind::ProblemList),
    ("11450 4", DocKind::ProblemList),
    // Everything else that is known to be "other".
    ("encounters", DocKind::Other),
    ("admissions", DocKind::Other),
    ("timeline", DocKind::Other),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(name: &str, expected: Option<DocKind>) {
        assert_eq!(DocKind::resolve(name), expected, "{name:?}");
    }

    #[test]
    fn canonical_names_resolve_to_themselves() {
        for kind in DocKind::ALL {
            check(kind.as_str(), Some(kind));
        }
    }

    #[test]
    fn synonyms_resolve() {
        check("DS", Some(DocKind::DischargeSummary));
        check("Discharge Summary", Some(DocKind::DischargeSummary));
        check("34117-2", Some(DocKind::ProgressNote));
        check("RR", Some(DocKind::Radiology));
        check("  Radiology-Report ", Some(DocKind::Radiology));
        check("Op-Bericht", Some(DocKind::Procedure));
        check("poetry", None);
    }

    #[test]
    fn synonym_table_is_normalised() {
        for (name, _) in SYNONYMS {
            assert!(DocKind::resolve(name).is_some());
            assert!(!name.contains(['-', '_', '.']), "{name} is not normalised");
        }
    }
}
