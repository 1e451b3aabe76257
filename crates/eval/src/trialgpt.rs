//! The TrialGPT criterion annotations (`criterion_annotations_dev.json`):
//! one row per patient x criterion with the patient note already split into
//! numbered sentences ("0. ...\n1. ..."), the criterion's text and type, the
//! physician's label and evidence sentence ids, and GPT-4's label,
//! explanation and sentence ids. Rows are turned into Evident inputs (a
//! one-note [`PatientRecord`] and a one-criterion [`CriteriaSet`]) and
//! predictions into [`Prediction`]s for [`crate::metrics`].

use std::collections::BTreeSet;
use std::path::Path;

use evident_match::zero_shot::{NoteText, PatientRecord};
use evident_match::{CriteriaSet, Criterion, CriterionResult, CriterionType, Decision, Determination};
use serde::Deserialize;

use crate::metrics::Prediction;
use crate::EvalError;

/// One annotation row, with the fields as the file names them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AnnotationRow {
    pub annotation_id: u64,
    pub patient_id: String,
    pub note: String,
    pub trial_id: String,
    pub trial_title: String,
    pub criterion_type: CriterionType,
    /// Missing (null) in one development row (annotation 883: a trial that
    /// lists no exclusion criteria).
    pub criterion_text: Option<String>,
    pub gpt4_explanation: String,
    pub explanation_correctness: String,
    /// A JSON list in a string, e.g. "[0, 1, 2]".
    pub gpt4_sentences: String,
    pub expert_sentences: String,
    pub gpt4_eligibility: String,
    pub expert_eligibility: String,
    pub training: bool,
}

/// The document id a row's note gets in Evident: one note per patient.
pub fn note_document_id(patient_id: &str) -> String {
    format!("{patient_id}-note")
}

impl AnnotationRow {
    /// The physician's label as a decision.
    pub fn expert_decision(&self) -> Decision {
        Decision::from_trialgpt_label(&self.expert_eligibility, self.criterion_type)
            .expect("labels are checked on load")
    }

    /// GPT-4's label as a decision.
    pub fn gpt4_decision(&self) -> Decision {
        Decision::from_trialgpt_label(&self.gpt4_eligibility, self.criterion_type).expect("labels are checked on load")
    }

    pub fn expert_sentence_ids(&self) -> BTreeSet<i64> {
        parse_ids(&self.expert_sentences).expect("ids are checked on load")
    }

    pub fn gpt4_sentence_ids(&self) -> BTreeSet<i64> {
        parse_ids(&self.gpt4_sentences).expect("ids are checked on load")
    }

    /// The note's sentences: (id, text) from its "N. text" lines. A line
    /// without a number continues the previous sentence.
    pub fn sentences(&self) -> Vec<(i64, String)> {
        let mut out: Vec<(i64, String)> = Vec::new();
        for line in self.note.lines() {
            let numbered = line.split_once(". ").and_then(|(n, rest)| n.trim().parse::<i64>().ok().map(|n| (n, rest)));
            match (numbered, out.last_mut()) {
                (Some((n, rest)), _) => out.push((n, rest.trim().to_string())),
                (None, Some(last)) if !line.trim().is_empty() => {
                    last.1.push(' ');
                    last.1.push_str(line.trim());
                }
                _ => {}
            }
        }
        out
    }

    /// The note as a one-document record; sentence ordinals are the
    /// annotation's sentence ids, so citations compare directly.
    pub fn patient_record(&self) -> PatientRecord {
        PatientRecord {
            patient_id: self.patient_id.clone(),
            notes: vec![NoteText {
                document_id: note_document_id(&self.patient_id),
                date: None,
                title: String::new(),
                sentences: self.sentences(),
            }],
        }
    }

    /// The row's criterion as a one-criterion set (id `annotation-N`);
    /// `None` when the row has no criterion text (nothing to ask a model;
    /// score such a row as a failure, or leave it out for every predictor).
    pub fn criteria_set(&self) -> Option<CriteriaSet> {
        let text = self.criterion_text.as_deref().filter(|t| !t.trim().is_empty())?;
        Some(CriteriaSet {
            trial_id: self.trial_id.clone(),
            title: self.trial_title.clone(),
            source: Some("TrialGPT criterion annotations".into()),
            criteria: vec![Criterion {
                id: format!("annotation-{}", self.annotation_id),
                criterion_type: self.criterion_type,
                text: text.to_string(),
                refined: None,
                pooling: None,
                window_months: None,
                structured: None,
                check: None,
            }],
        })
    }

    /// GPT-4's answer against the physician.
    pub fn gpt4_prediction(&self) -> Prediction {
        Prediction {
            patient_id: self.patient_id.clone(),
            criterion_type: self.criterion_type,
            gold: self.expert_decision(),
            predicted: Some(self.gpt4_decision()),
            gold_evidence: self.expert_sentence_ids(),
            predicted_evidence: self.gpt4_sentence_ids(),
        }
    }

    /// An Evident result for this row against the physician. Citations of
    /// other documents are ignored (there are none for a one-note record).
    pub fn prediction_from(&self, result: &CriterionResult) -> Prediction {
        self.prediction_for(result, &note_document_id(&self.patient_id))
    }

    /// As [`Self::prediction_from`], for a record whose note has document id `doc`.
    pub fn prediction_for(&self, result: &CriterionResult, doc: &str) -> Prediction {
        let (predicted, predicted_evidence) = match &result.outcome {
            Determination::Assessed(a) => {
                (Some(a.decision), a.evidence.iter().filter(|e| e.document_id == *doc).map(|e| e.ordinal).collect())
            }
            Determination::Failed(_) => (None, BTreeSet::new()),
        };
        Prediction {
            patient_id: self.patient_id.clone(),
            criterion_type: self.criterion_type,
            gold: self.expert_decision(),
            predicted,
            gold_evidence: self.expert_sentence_ids(),
            predicted_evidence,
        }
    }
}

fn parse_ids(text: &str) -> Result<BTreeSet<i64>, String> {
    serde_json::from_str::<Vec<i64>>(text).map(|v| v.into_iter().collect()).map_err(|e| format!("{text:?}: {e}"))
}

/// Reads and checks the annotation file: every label must be a TrialGPT
/// label of the row's criterion type and every sentence id list must parse
/// and the physician's ids must name sentences of the note. All problems are reported together.
pub fn load_annotations(path: &Path) -> Result<Vec<AnnotationRow>, EvalError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| EvalError::Io { path: origin.clone(), source })?;
    let rows: Vec<AnnotationRow> =
        serde_json::from_str(&text).map_err(|e| EvalError::Format { path: origin.clone(), message: e.to_string() })?;
    let mut problems = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        for (field, label) in [("expert_eligibility", &r.expert_eligibility), ("gpt4_eligibility", &r.gpt4_eligibility)]
        {
            if Decision::from_trialgpt_label(label, r.criterion_type).is_none() {
                problems.push(format!(
                    "row {i}: {field} {label:?} is not a label for an {} criterion",
                    r.criterion_type.as_str()
                ));
            }
        }
        let sentence_ids: BTreeSet<i64> = r.sentences().into_iter().map(|(n, _)| n).collect();
        // GPT-4's ids are a prediction and may be wrong; only the physician's
        // must name sentences of the note.
        if let Err(e) = parse_ids(&r.gpt4_sentences) {
            problems.push(format!("row {i}: gpt4_sentences {e}"));
        }
        match parse_ids(&r.expert_sentences) {
            Err(e) => problems.push(format!("row {i}: expert_sentences {e}")),
            Ok(ids) => {
                if let Some(bad) = ids.iter().find(|id| !sentence_ids.contains(id)) {
                    problems
                        .push(format!("row {i}: expert_sentences cites sentence {bad}, which the note does not have"));
                }
            }
        }
    }
    if !problems.is_empty() {
        return Err(EvalError::Format { path: origin, message: problems.join("; ") });
    }
    Ok(rows)
}
