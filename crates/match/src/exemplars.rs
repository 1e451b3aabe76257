//! Exemplars at screening time: adjudicated criterion-level decisions (a
//! criterion, the patient sentences that decide it, the adjudicated label,
//! a short rationale) shown to the model as worked examples before it
//! decides a criterion. For each criterion the `k` most similar exemplars
//! by dense similarity of the criterion text (cosine of the embedder's
//! vectors), at least `min_similarity`, best first (ties by exemplar id),
//! so the same criterion always sees the same examples in the same order.
//! Optionally ([`ExemplarMatch::Evidence`]) the texts compared carry the
//! sentences that decide the criterion as well: an exemplar's adjudicated
//! sentences, and for the criterion screened the patient's
//! [`EVIDENCE_SENTENCES`] sentences most similar to it.
//!
//! Invariant: an exemplar from the patient being screened is never shown
//! (selection takes that patient's id and skips every exemplar of it), so
//! an evaluation over annotated patients is leave-one-patient-out.
//!
//! Calibration ([`calibrate`]) is separate: a decision that cites no
//! sentence may not be MET or NOT MET; it becomes NOT ENOUGH INFORMATION
//! and its rationale says what the model had answered.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use evident_llm::Embedder;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::criteria::CriterionType;
use crate::decision::{Assessment, Decision};
use crate::zero_shot::{MatchError, NoteText};

/// What exemplars are matched on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExemplarMatch {
    /// The criterion texts alone.
    #[default]
    Criterion,
    /// Each criterion text followed by the sentences that decide it: an
    /// exemplar's adjudicated sentences; for the criterion screened, the
    /// patient's [`EVIDENCE_SENTENCES`] sentences most similar to the
    /// criterion (of the notes its prompt shows).
    Evidence,
}

impl ExemplarMatch {
    pub const ALL: [ExemplarMatch; 2] = [ExemplarMatch::Criterion, ExemplarMatch::Evidence];

    pub fn as_str(self) -> &'static str {
        match self {
            ExemplarMatch::Criterion => "criterion",
            ExemplarMatch::Evidence => "evidence",
        }
    }

    pub fn parse(name: &str) -> Option<ExemplarMatch> {
        ExemplarMatch::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

/// The patient sentences most similar to a criterion that
/// [`ExemplarMatch::Evidence`] adds to it: about as many as an adjudicated
/// decision cites (most of the TrialGPT split's cite one or two).
pub const EVIDENCE_SENTENCES: usize = 2;

/// A criterion followed by the sentences that decide it: the text
/// [`ExemplarMatch::Evidence`] embeds, on both sides.
pub fn with_evidence(criterion_text: &str, sentences: &[&str]) -> String {
    let mut text = criterion_text.trim().to_string();
    for s in sentences {
        text.push('\n');
        text.push_str(s.trim());
    }
    text
}

/// One exemplar of a bank, with the vector of its criterion text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exemplar {
    /// The store's id: names the exemplar in reports.
    pub id: i64,
    /// Where it came from: `annotation`, `override` or `signoff`, and the reference.
    pub source: String,
    pub source_ref: String,
    /// The patient it is about (never shown to that patient's screening).
    pub patient_id: String,
    pub criterion_type: CriterionType,
    pub criterion_text: String,
    pub sentences: Vec<String>,
    pub label: Decision,
    pub rationale: String,
    #[serde(skip)]
    pub embedding: Vec<f32>,
}

/// An exemplar chosen for a criterion, as a prompt and a report see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShownExemplar {
    pub id: i64,
    pub source: String,
    pub source_ref: String,
    /// Cosine similarity of its criterion text to the screened criterion's
    /// (with the deciding sentences on both sides under
    /// [`ExemplarMatch::Evidence`]).
    pub similarity: f32,
    #[serde(skip_serializing, default)]
    pub criterion_type: Option<CriterionType>,
    #[serde(skip_serializing, default)]
    pub criterion_text: String,
    #[serde(skip_serializing, default)]
    pub sentences: Vec<String>,
    #[serde(skip_serializing, default)]
    pub label: Option<Decision>,
    #[serde(skip_serializing, default)]
    pub rationale: String,
}

impl ShownExemplar {
    /// The template context of one worked example.
    pub fn prompt_context(&self) -> Value {
        let label = self.label.unwrap_or(Decision::NotEnoughInformation);
        json!({
            "id": self.id,
            "type": self.criterion_type.map(|t| t.as_str()).unwrap_or("inclusion"),
            "criterion": self.criterion_text,
            "sentences": self.sentences,
            "decision": label.as_str(),
            // The paper's 0/1 answer: 1 when met; "not enough information" is 0 (C-A, C-C4).
            "bit": i64::from(label == Decision::Met),
            "rationale": self.rationale,
        })
    }
}

/// Chooses exemplars for a criterion.
pub trait ExemplarSource: Send + Sync {
    /// The exemplars for `criterion_text`, best first, none of `patient_id`;
    /// `notes` are the notes the criterion's prompt shows.
    fn select(
        &self,
        criterion_text: &str,
        patient_id: &str,
        notes: &[&NoteText],
    ) -> Result<Vec<ShownExemplar>, MatchError>;
    /// What names this source in a run's definition (bank, its content, k,
    /// minimum similarity, embedder): a changed bank makes a new run.
    fn definition(&self) -> Value;
}

/// A bank in memory with the embedder that made its vectors.
pub struct ExemplarBank {
    name: String,
    exemplars: Vec<Exemplar>,
    embedder: Box<dyn Embedder>,
    k: usize,
    min_similarity: f32,
    fingerprint: String,
    matching: ExemplarMatch,
    /// The vectors compared with a query, one per exemplar in order: the
    /// criterion's, or under [`ExemplarMatch::Evidence`] the criterion's
    /// with its sentences.
    vectors: Vec<Vec<f32>>,
    queries: Mutex<HashMap<String, Vec<f32>>>,
}

impl ExemplarBank {
    /// A bank of `exemplars` searched with `embedder`, whose vectors must be
    /// of the embedder's dimensions. `fingerprint` names the bank's content
    /// (e.g. a hash of its rows).
    pub fn new(
        name: &str,
        exemplars: Vec<Exemplar>,
        embedder: Box<dyn Embedder>,
        k: usize,
        min_similarity: f32,
        fingerprint: String,
    ) -> Result<ExemplarBank, String> {
        if let Some(e) = exemplars.iter().find(|e| e.embedding.len() != embedder.dimensions()) {
            return Err(format!(
                "exemplar {} has a vector of {} dimensions; the embedder {} makes {}",
                e.id,
                e.embedding.len(),
                embedder.model_id(),
                embedder.dimensions()
            ));
        }
        let vectors = exemplars.iter().map(|e| e.embedding.clone()).collect();
        Ok(ExemplarBank {
            name: name.to_string(),
            exemplars,
            embedder,
            k,
            min_similarity,
            fingerprint,
            matching: ExemplarMatch::Criterion,
            vectors,
            queries: Mutex::new(HashMap::new()),
        })
    }

    /// Matches on `matching`; under [`ExemplarMatch::Evidence`] embeds each
    /// exemplar's criterion with its sentences (one embedder call per 64).
    pub fn matching(mut self, matching: ExemplarMatch) -> Result<ExemplarBank, MatchError> {
        self.matching = matching;
        self.vectors = match matching {
            ExemplarMatch::Criterion => self.exemplars.iter().map(|e| e.embedding.clone()).collect(),
            ExemplarMatch::Evidence => {
                let texts: Vec<String> = self
                    .exemplars
                    .iter()
                    .map(|e| {
                        with_evidence(&e.criterion_text, &e.sentences.iter().map(String::as_str).collect::<Vec<_>>())
                    })
                    .collect();
                let mut vectors = Vec::with_capacity(texts.len());
                for chunk in texts.chunks(64) {
                    let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
                    vectors.extend(
                        self.embedder
                            .embed(&chunk)
                            .map_err(|e| MatchError::Exemplars(format!("embedding the exemplars' evidence: {e}")))?,
                    );
                }
                vectors
            }
        };
        Ok(self)
    }

    pub fn len(&self) -> usize {
        self.exemplars.len()
    }

    pub fn is_empty(&self) -> bool {
        self.exemplars.is_empty()
    }

    /// The vectors of `texts` (the embedder asked once for those not seen
    /// before).
    fn vectors_of(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MatchError> {
        let missing: Vec<&str> = {
            let seen = self.queries.lock().unwrap_or_else(|p| p.into_inner());
            let mut missing: Vec<&str> = texts.iter().copied().filter(|t| !seen.contains_key(*t)).collect();
            missing.sort_unstable();
            missing.dedup();
            missing
        };
        if !missing.is_empty() {
            let vectors = self
                .embedder
                .embed(&missing)
                .map_err(|e| MatchError::Exemplars(format!("embedding a criterion: {e}")))?;
            let mut seen = self.queries.lock().unwrap_or_else(|p| p.into_inner());
            for (t, v) in missing.into_iter().zip(vectors) {
                seen.insert(t.to_string(), v);
            }
        }
        let seen = self.queries.lock().unwrap_or_else(|p| p.into_inner());
        Ok(texts.iter().map(|t| seen.get(*t).cloned().unwrap_or_default()).collect())
    }

    /// The text a query embeds: the criterion, and under
    /// [`ExemplarMatch::Evidence`] the sentences of `notes` most similar to
    /// it, best first (ties in record order).
    fn query_text(&self, criterion_text: &str, notes: &[&NoteText]) -> Result<String, MatchError> {
        if self.matching == ExemplarMatch::Criterion {
            return Ok(criterion_text.to_string());
        }
        let sentences: Vec<&str> = notes.iter().flat_map(|n| n.sentences.iter().map(|(_, s)| s.as_str())).collect();
        if sentences.is_empty() {
            return Ok(criterion_text.to_string());
        }
        let mut texts = vec![criterion_text];
        texts.extend(&sentences);
        let vectors = self.vectors_of(&texts)?;
        let mut scored: Vec<(f32, usize)> =
            vectors[1..].iter().enumerate().map(|(i, v)| (cosine(&vectors[0], v), i)).collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let best: Vec<&str> = scored.iter().take(EVIDENCE_SENTENCES).map(|&(_, i)| sentences[i]).collect();
        Ok(with_evidence(criterion_text, &best))
    }
}

/// Cosine similarity (0 when either vector is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// The `k` exemplars most similar to `query`, at least `min_similarity`,
/// none of `patient_id`, best first (ties by id).
pub fn nearest(
    exemplars: &[Exemplar],
    query: &[f32],
    patient_id: &str,
    k: usize,
    min_similarity: f32,
) -> Vec<ShownExemplar> {
    let vectors: Vec<&[f32]> = exemplars.iter().map(|e| e.embedding.as_slice()).collect();
    nearest_by(exemplars, &vectors, query, patient_id, k, min_similarity)
}

/// [`nearest`] with `vectors[i]` standing for `exemplars[i]`.
fn nearest_by(
    exemplars: &[Exemplar],
    vectors: &[&[f32]],
    query: &[f32],
    patient_id: &str,
    k: usize,
    min_similarity: f32,
) -> Vec<ShownExemplar> {
    let mut scored: Vec<(f32, &Exemplar)> = exemplars
        .iter()
        .zip(vectors)
        .filter(|(e, _)| e.patient_id != patient_id)
        .map(|(e, v)| (cosine(query, v), e))
        .filter(|(s, _)| *s >= min_similarity)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
    scored
        .into_iter()
        .take(k)
        .map(|(similarity, e)| ShownExemplar {
            id: e.id,
            source: e.source.clone(),
            source_ref: e.source_ref.clone(),
            similarity,
            criterion_type: Some(e.criterion_type),
            criterion_text: e.criterion_text.clone(),
            sentences: e.sentences.clone(),
            label: Some(e.label),
            rationale: e.rationale.clone(),
        })
        .collect()
}

impl ExemplarSource for ExemplarBank {
    fn select(
        &self,
        criterion_text: &str,
        patient_id: &str,
        notes: &[&NoteText],
    ) -> Result<Vec<ShownExemplar>, MatchError> {
        if self.k == 0 || self.exemplars.is_empty() {
            return Ok(Vec::new());
        }
        let text = self.query_text(criterion_text, notes)?;
        let query = self.vectors_of(&[text.as_str()])?.remove(0);
        let vectors: Vec<&[f32]> = self.vectors.iter().map(Vec::as_slice).collect();
        Ok(nearest_by(&self.exemplars, &vectors, &query, patient_id, self.k, self.min_similarity))
    }

    fn definition(&self) -> Value {
        let mut definition = json!({
            "bank": self.name,
            "content": self.fingerprint,
            "k": self.k,
            "min_similarity": self.min_similarity,
            "embedder": self.embedder.model_id(),
        });
        // Named only when not the default, so runs made before the choice
        // existed keep their ids.
        if self.matching != ExemplarMatch::Criterion {
            definition["match"] = json!(self.matching.as_str());
        }
        definition
    }
}

/// A shareable exemplar source in a matcher's configuration.
#[derive(Clone)]
pub struct Exemplars(pub Arc<dyn ExemplarSource>);

impl fmt::Debug for Exemplars {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Exemplars({})", self.0.definition())
    }
}

impl Exemplars {
    pub fn select(
        &self,
        criterion_text: &str,
        patient_id: &str,
        notes: &[&NoteText],
    ) -> Result<Vec<ShownExemplar>, MatchError> {
        self.0.select(criterion_text, patient_id, notes)
    }
}

/// Label calibration: a MET or NOT MET that cites no sentence becomes NOT
/// ENOUGH INFORMATION, its rationale prefixed with what the model answered.
/// Returns whether it changed the assessment.
pub fn calibrate(assessment: &mut Assessment) -> bool {
    if !assessment.evidence.is_empty() || !matches!(assessment.decision, Decision::Met | Decision::NotMet) {
        return false;
    }
    assessment.rationale = format!(
        "[calibrated: the model answered {} citing no sentence] {}",
        assessment.decision.as_str(),
        assessment.rationale
    );
    assessment.decision = Decision::NotEnoughInformation;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::{Confidence, SentenceRef};

    fn ex(id: i64, patient: &str, v: Vec<f32>) -> Exemplar {
        Exemplar {
            id,
            source: "annotation".into(),
            source_ref: format!("f#{id}"),
            patient_id: patient.into(),
            criterion_type: CriterionType::Inclusion,
            criterion_text: format!("criterion {id}"),
            sentences: vec![],
            label: Decision::Met,
            rationale: String::new(),
            embedding: v,
        }
    }

    #[test]
    fn nearest_skips_the_screened_patient_and_keeps_k_above_the_minimum_best_first() {
        let bank = vec![
            ex(1, "p1", vec![1.0, 0.0]),
            ex(2, "p2", vec![0.9, 0.1]),
            ex(3, "p3", vec![0.0, 1.0]),
            ex(4, "p2", vec![1.0, 0.0]),
        ];
        let got: Vec<i64> = nearest(&bank, &[1.0, 0.0], "p1", 5, 0.5).iter().map(|s| s.id).collect();
        assert_eq!(got, vec![4, 2], "p1's exemplar is never shown; p3's is below the minimum");
        let got: Vec<i64> = nearest(&bank, &[1.0, 0.0], "p9", 2, -1.0).iter().map(|s| s.id).collect();
        assert_eq!(got, vec![1, 4], "ties by id");
    }

    #[test]
    fn calibration_turns_an_uncited_met_or_not_met_into_not_enough_information() {
        let mut a = Assessment {
            medications_and_supplements: vec![],
            rationale: "r".into(),
            decision: Decision::Met,
            confidence: Confidence::High,
            evidence: vec![],
        };
        assert!(calibrate(&mut a));
        assert_eq!(a.decision, Decision::NotEnoughInformation);
        assert!(a.rationale.starts_with("[calibrated: the model answered MET"));
        let mut cited = Assessment {
            decision: Decision::NotMet,
            evidence: vec![SentenceRef { document_id: "d".into(), ordinal: 1 }],
            ..a.clone()
        };
        assert!(!calibrate(&mut cited));
        assert_eq!(cited.decision, Decision::NotMet);
        let mut nei = a.clone();
        assert!(!calibrate(&mut nei));
    }
}
