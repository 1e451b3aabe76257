//! Running Evident's matchers on the TrialGPT criterion annotations. Each
//! annotated patient's note is stored as one document whose sentences are
//! the note's numbered sentences (sentence ordinal = the annotation's
//! sentence id, so citations compare directly with the physician's), under
//! a patient id of its own (`trialgpt-dev:<topic>`) so it never mixes with
//! the same topic ingested from `queries.jsonl`. Rows are grouped into
//! (patient, trial) pairs, each a criteria set of its rows' criteria; the
//! batch runner then screens each pair, storing every decision, so an
//! evaluation resumes like any run.

use std::collections::BTreeMap;

use evident_match::{CriteriaSet, Criterion, CriterionResult};
use evident_model::{DocKind, Document, Patient, SectionSpan, SentenceSpan};
use evident_store::Store;

use crate::metrics::Prediction;
use crate::trialgpt::AnnotationRow;

/// Prefix of the store patient ids of annotated notes.
pub const PATIENT_PREFIX: &str = "trialgpt-dev:";

/// The store patient id of an annotated topic.
pub fn store_patient_id(topic: &str) -> String {
    format!("{PATIENT_PREFIX}{topic}")
}

/// The store document id of an annotated topic's note.
pub fn store_document_id(topic: &str) -> String {
    format!("{PATIENT_PREFIX}{topic}:note")
}

/// One patient and one trial, with the annotated rows between them.
#[derive(Debug, Clone)]
pub struct Pair {
    pub topic: String,
    pub patient_id: String,
    /// The rows' criteria (id `annotation-N`), in file order.
    pub set: CriteriaSet,
    /// The rows that can be asked (rows without criterion text are left
    /// out, for every predictor alike).
    pub rows: Vec<AnnotationRow>,
}

/// Groups rows into pairs, in file order of first appearance. A pair
/// whose rows all lack criterion text is dropped.
pub fn pairs(rows: &[AnnotationRow]) -> Vec<Pair> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut grouped: BTreeMap<(String, String), Vec<AnnotationRow>> = BTreeMap::new();
    for r in rows {
        let key = (r.patient_id.clone(), r.trial_id.clone());
        if !grouped.contains_key(&key) {
            order.push(key.clone());
        }
        grouped.entry(key).or_default().push(r.clone());
    }
    order
        .into_iter()
        .map(|key| {
            let rows: Vec<AnnotationRow> = grouped
                .remove(&key)
                .expect("grouped above")
                .into_iter()
                .filter(|r| r.criteria_set().is_some())
                .collect();
            let criteria: Vec<Criterion> =
                rows.iter().filter_map(|r| r.criteria_set()).flat_map(|s| s.criteria).collect();
            Pair {
                topic: key.0.clone(),
                patient_id: store_patient_id(&key.0),
                set: CriteriaSet {
                    trial_id: key.1.clone(),
                    title: rows[0].trial_title.clone(),
                    source: Some("TrialGPT criterion annotations".into()),
                    criteria,
                },
                rows,
            }
        })
        .filter(|p| !p.rows.is_empty())
        .collect()
}

/// The note text as stored and its sentence spans: the numbered lines
/// without their "N. " prefix, joined by newlines, so sentence `i` of the
/// store is the annotation's sentence `i`. Errors when the numbering is not
/// 0, 1, 2, ...
pub fn note_document(row: &AnnotationRow) -> Result<(String, Vec<SentenceSpan>), String> {
    let mut text = String::new();
    let mut spans = Vec::new();
    for (i, (id, sentence)) in row.sentences().into_iter().enumerate() {
        if id != i as i64 {
            return Err(format!(
                "annotation {}: the note's sentence {i} is numbered {id}; sentences must be numbered 0, 1, 2, ...",
                row.annotation_id
            ));
        }
        if !text.is_empty() {
            text.push('\n');
        }
        let start = text.len();
        text.push_str(&sentence);
        spans.push(SentenceSpan { start, end: text.len() });
    }
    Ok((text, spans))
}

/// Stores every annotated topic's note (one transaction; idempotent).
/// Returns the number of notes stored or already present.
pub fn store_notes(store: &mut Store, rows: &[AnnotationRow]) -> Result<usize, String> {
    let mut notes: BTreeMap<&str, &AnnotationRow> = BTreeMap::new();
    for r in rows {
        if let Some(other) = notes.get(r.patient_id.as_str()) {
            if other.note != r.note {
                return Err(format!(
                    "annotations {} and {} give topic {} different notes",
                    other.annotation_id, r.annotation_id, r.patient_id
                ));
            }
        }
        notes.insert(&r.patient_id, r);
    }
    let writer = store.writer().map_err(|e| e.to_string())?;
    for (topic, row) in &notes {
        let (text, sentences) = note_document(row)?;
        let patient_id = store_patient_id(topic);
        writer
            .upsert_patient(&Patient {
                id: patient_id.clone(),
                source: "trialgpt-annotations".into(),
                birth_date: None,
                sex: None,
                display_name: None,
            })
            .map_err(|e| e.to_string())?;
        let doc = Document {
            id: store_document_id(topic),
            patient_id,
            kind: DocKind::ProgressNote,
            date: None,
            title: "Patient description".into(),
            source: "trialgpt-annotations".into(),
            source_id: topic.to_string(),
            text: text.clone(),
        };
        let sections = evident_model::text::split_sections(&text);
        let sections =
            if sections.is_empty() { vec![SectionSpan { heading: None, start: 0, end: text.len() }] } else { sections };
        writer.put_document(&doc, &sections, &sentences).map_err(|e| e.to_string())?;
    }
    writer.commit().map_err(|e| e.to_string())?;
    Ok(notes.len())
}

/// Scores a pair's patient-level results against its rows: one prediction
/// per row (a row with no stored result counts as failed).
pub fn predictions(pair: &Pair, results: &[CriterionResult]) -> Vec<Prediction> {
    let doc = store_document_id(&pair.topic);
    pair.rows
        .iter()
        .map(|row| {
            let id = format!("annotation-{}", row.annotation_id);
            match results.iter().find(|r| r.criterion_id == id) {
                Some(result) => row.prediction_for(result, &doc),
                None => Prediction { predicted: None, predicted_evidence: Default::default(), ..row.gpt4_prediction() },
            }
        })
        .collect()
}

/// SIGIR relevance labels: (topic, trial) -> 0 not relevant, 1 excluded, 2 eligible.
pub fn load_qrels(path: &std::path::Path) -> Result<BTreeMap<(String, String), i64>, crate::EvalError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| crate::EvalError::Io { path: origin.clone(), source })?;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if i == 0 && line.starts_with("query-id") || line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let parsed = match fields.as_slice() {
            [q, c, s] => s.trim().parse::<i64>().ok().map(|s| ((q.to_string(), c.to_string()), s)),
            _ => None,
        };
        let Some((key, score)) = parsed else {
            return Err(crate::EvalError::Format {
                path: origin,
                message: format!("line {}: expected query-id<TAB>corpus-id<TAB>score (0, 1 or 2)", i + 1),
            });
        };
        out.insert(key, score);
    }
    Ok(out)
}

/// Trial-level eligibility of annotated pairs against the relevance labels.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TrialLevel {
    /// Pairs that have a relevance label.
    pub pairs: usize,
    /// Predicted eligibility -> relevance label -> pairs.
    pub confusion: BTreeMap<String, BTreeMap<i64, usize>>,
    /// Agreement when eligible and needs-review count as "eligible" (2) and
    /// not eligible and excluded as "excluded" (1).
    pub accuracy: f64,
}

pub fn trial_level(items: &[(evident_match::Eligibility, i64)]) -> TrialLevel {
    use evident_match::Eligibility;
    let mut confusion: BTreeMap<String, BTreeMap<i64, usize>> = BTreeMap::new();
    let mut agree = 0;
    for (e, label) in items {
        let name = match e {
            Eligibility::Eligible => "eligible",
            Eligibility::NeedsReview => "needs review",
            Eligibility::NotEligible => "not eligible",
            Eligibility::Excluded => "excluded",
        };
        *confusion.entry(name.to_string()).or_default().entry(*label).or_default() += 1;
        let predicted = match e {
            Eligibility::Eligible | Eligibility::NeedsReview => 2,
            Eligibility::NotEligible | Eligibility::Excluded => 1,
        };
        if predicted == *label {
            agree += 1;
        }
    }
    TrialLevel {
        pairs: items.len(),
        confusion,
        accuracy: if items.is_empty() { 0.0 } else { agree as f64 / items.len() as f64 },
    }
}

/// A pair's results as the physicians (or GPT-4) labelled them: one
/// patient-level result per row, for trial-level comparisons.
pub fn labelled_results(pair: &Pair, gpt4: bool) -> Vec<CriterionResult> {
    use evident_match::{Assessment, Confidence, Determination};
    pair.rows
        .iter()
        .map(|row| CriterionResult {
            criterion_id: format!("annotation-{}", row.annotation_id),
            criterion_type: row.criterion_type,
            document_id: None,
            document_date: None,
            outcome: Determination::Assessed(Assessment {
                medications_and_supplements: vec![],
                rationale: String::new(),
                decision: if gpt4 { row.gpt4_decision() } else { row.expert_decision() },
                confidence: Confidence::High,
                evidence: vec![],
            }),
            unresolved_citations: vec![],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trialgpt::load_annotations;

    fn dev_rows() -> Vec<AnnotationRow> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/trialgpt/criterion_annotations_dev.json");
        load_annotations(&path).expect("the TrialGPT development split is at ../shared/data")
    }

    #[test]
    fn pairs_cover_every_askable_row_once() {
        let rows = dev_rows();
        let pairs = pairs(&rows);
        assert_eq!(pairs.len(), 54);
        let asked: usize = pairs.iter().map(|p| p.rows.len()).sum();
        assert_eq!(asked, 538, "539 rows, one without criterion text");
        for p in &pairs {
            assert_eq!(p.set.criteria.len(), p.rows.len());
            assert!(p.set.validate("dev").is_ok());
        }
    }

    #[test]
    fn stored_notes_keep_the_annotation_sentence_ids() {
        let rows = dev_rows();
        let mut store = Store::open_in_memory().unwrap();
        assert_eq!(store_notes(&mut store, &rows).unwrap(), 27);
        assert_eq!(store_notes(&mut store, &rows).unwrap(), 27, "idempotent");
        for row in rows.iter().take(40) {
            let stored = store.sentences(&store_document_id(&row.patient_id)).unwrap();
            let given = row.sentences();
            assert_eq!(stored.len(), given.len());
            for (s, (id, text)) in stored.iter().zip(&given) {
                assert_eq!((s.ordinal, s.text.as_str()), (*id, text.as_str()));
            }
        }
    }

    #[test]
    fn physician_labels_reproduce_most_relevance_labels() {
        // A check of the trial-level plumbing on the gold labels themselves:
        // the annotated criteria are a subset of each trial's, so agreement
        // is high but need not be perfect.
        let rows = dev_rows();
        let qrels = load_qrels(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/data/trialgpt/dataset/sigir/qrels/test.tsv"),
        )
        .unwrap();
        let items: Vec<_> = pairs(&rows)
            .iter()
            .filter_map(|p| {
                let label = *qrels.get(&(p.topic.clone(), p.set.trial_id.clone()))?;
                Some((evident_match::trial_verdict(&p.set, &labelled_results(p, false)).eligibility, label))
            })
            .collect();
        let t = trial_level(&items);
        assert_eq!(t.pairs, 54);
        assert!(t.accuracy > 0.5 && t.accuracy <= 1.0, "{t:?}");
    }
}
