//! The GPT-4 reference row on the TrialGPT development annotations: GPT-4's
//! labels and sentence ids scored against the physicians with the same
//! metric code Evident's strategies use. Reads ../shared/data and fails if
//! it is missing. Prints the figures recorded in docs/evaluation.md.

use std::path::Path;

use evident_eval::{load_annotations, report_row, trialgpt::note_document_id};
use evident_match::{Assessment, Confidence, CriterionResult, Outcome, SentenceRef};

fn rows() -> Vec<evident_eval::AnnotationRow> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/trialgpt/criterion_annotations_dev.json");
    load_annotations(&path).unwrap_or_else(|e| panic!("{e}; the shared data must be present"))
}

#[test]
fn dev_split_shape() {
    let rows = rows();
    assert_eq!(rows.len(), 539);
    let patients: std::collections::BTreeSet<_> = rows.iter().map(|r| r.patient_id.as_str()).collect();
    assert_eq!(patients.len(), 27);
    // The first row's note has 9 numbered sentences, 0..=8.
    let s = rows[0].sentences();
    assert_eq!(s.len(), 9);
    assert_eq!(s[0].0, 0);
    assert!(s[0].1.starts_with("A 58-year-old African-American woman"));
    assert_eq!(rows[0].criteria_set().unwrap().criteria.len(), 1);
    let without_text: Vec<_> = rows.iter().filter(|r| r.criteria_set().is_none()).map(|r| r.annotation_id).collect();
    assert_eq!(without_text, [883]);
}

#[test]
fn gpt4_reference_row() {
    let rows = rows();
    let predictions: Vec<_> = rows.iter().map(|r| r.gpt4_prediction()).collect();
    let row = report_row(&predictions);
    let m = &row.metrics;
    println!("{}", serde_json::to_string_pretty(&row).unwrap());
    // Cross-check accuracy by direct string comparison of the raw labels.
    let agree = rows.iter().filter(|r| r.gpt4_eligibility == r.expert_eligibility).count();
    assert_eq!(m.accuracy, agree as f64 / rows.len() as f64);
    assert_eq!(m.failed, 0);
    assert!(row.accuracy.low <= m.accuracy && m.accuracy <= row.accuracy.high);
    // Deterministic: the same figures on a second run.
    assert_eq!(report_row(&predictions), row);
}

#[test]
fn evident_results_score_like_their_labels() {
    // Feeding GPT-4's answers through Evident's result type must give the
    // same numbers as scoring them directly.
    let rows = rows();
    let via_results: Vec<_> = rows
        .iter()
        .map(|r| {
            let doc = note_document_id(&r.patient_id);
            let result = CriterionResult {
                criterion_id: format!("annotation-{}", r.annotation_id),
                criterion_type: r.criterion_type,
                document_id: None,
                document_date: None,
                outcome: Outcome::Assessed(Assessment {
                    medications_and_supplements: vec![],
                    rationale: r.gpt4_explanation.clone(),
                    decision: r.gpt4_decision(),
                    confidence: Confidence::High,
                    evidence: r
                        .gpt4_sentence_ids()
                        .into_iter()
                        .map(|o| SentenceRef { document_id: doc.clone(), ordinal: o })
                        .collect(),
                }),
                unresolved_citations: vec![],
            };
            r.prediction_from(&result)
        })
        .collect();
    let direct: Vec<_> = rows.iter().map(|r| r.gpt4_prediction()).collect();
    assert_eq!(via_results, direct);
}
