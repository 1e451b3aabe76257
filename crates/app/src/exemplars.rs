//! The exemplar bank: adjudicated criterion-level decisions that screening
//! shows a model as worked examples (`--exemplars BANK`). They enter a bank
//! from a TrialGPT-format annotation file (`evident exemplars import`: the
//! physician's label and evidence sentences) or from the review service
//! ([`record_review`]: a reviewer's override or a sign-off, with the
//! reviewer and the time, into the bank [`REVIEW_BANK`]). Each is stored
//! with the MiniLM vector of its criterion text; one recorded by a review
//! gets its vector the next time the bank is opened, so the review path
//! loads no model.
//!
//! An annotation row's patient is stored under the id the TrialGPT
//! evaluation gives the same patient (`trialgpt-dev:<topic>`), so screening
//! that patient never sees its own rows: the evaluation with exemplars is
//! leave-one-patient-out.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use evident_eval::load_annotations;
use evident_eval::run::store_patient_id;
use evident_llm::Embedder;
use evident_match::exemplars::{Exemplar, ExemplarBank, ExemplarMatch, Exemplars};
use evident_match::report::CriterionView;
use evident_match::{Criterion, CriterionResult, CriterionType, Decision, Determination};
use evident_store::{NewExemplar, Store};
use serde::Serialize;

use crate::error::{input_error, AppError, Result};
use crate::models::EmbedderChoice;
use crate::session::{lock, Session};

/// The bank reviewers' overrides and sign-offs go to.
pub const REVIEW_BANK: &str = "reviews";

/// Criteria embedded per call when a bank is built.
const EMBED_BATCH: usize = 32;

/// One import.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    /// A TrialGPT-format criterion annotation file.
    pub file: PathBuf,
    pub bank: String,
    pub embedder: EmbedderChoice,
}

/// What an import did.
#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    pub bank: String,
    pub file: PathBuf,
    /// Rows put (a row imported before is replaced, not added).
    pub imported: usize,
    /// Rows without criterion text (nothing to show a model).
    pub skipped_without_criterion: usize,
    /// Exemplars in the bank after the import.
    pub bank_size: usize,
    /// Exemplars per label in the file's rows imported.
    pub labels: std::collections::BTreeMap<String, usize>,
    pub embedder: String,
}

impl fmt::Display for ImportReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "imported {} exemplars from {} into bank {:?} ({} now; {} rows without criterion text skipped; vectors: {})",
            self.imported,
            self.file.display(),
            self.bank,
            self.bank_size,
            self.skipped_without_criterion,
            self.embedder
        )?;
        for (label, n) in &self.labels {
            writeln!(f, "  {label:<24} {n}")?;
        }
        Ok(())
    }
}

fn check_bank_name(bank: &str) -> Result<()> {
    if bank.trim().is_empty() || bank.chars().any(|c| c.is_control()) {
        input_error!("bank name {bank:?} is empty or has control characters; give a plain name such as trialgpt-dev");
    }
    Ok(())
}

/// Imports a TrialGPT-format annotation file: one exemplar per row with
/// criterion text (the physician's label and evidence sentences; as the
/// rationale, GPT-4's explanation where the physicians judged it correct
/// and GPT-4's label agrees with theirs, else none). All rows land in one
/// transaction, or none.
pub fn import(session: &Session, request: &ImportRequest) -> Result<ImportReport> {
    check_bank_name(&request.bank)?;
    let rows = load_annotations(&request.file)?;
    let file_name =
        request.file.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "annotations".into());
    let decided_at = chrono::Utc::now().to_rfc3339();
    let mut new = Vec::new();
    let mut skipped = 0;
    let mut labels = std::collections::BTreeMap::new();
    for row in &rows {
        let Some(text) = row.criterion_text.as_deref().filter(|t| !t.trim().is_empty()) else {
            skipped += 1;
            continue;
        };
        let sentences = row.sentences();
        let cited: Vec<String> = row
            .expert_sentence_ids()
            .iter()
            .filter_map(|id| sentences.iter().find(|(n, _)| n == id).map(|(_, s)| s.clone()))
            .collect();
        let label = row.expert_decision();
        let rationale = if row.explanation_correctness == "Correct" && row.gpt4_decision() == label {
            row.gpt4_explanation.trim().to_string()
        } else {
            String::new()
        };
        *labels.entry(label.as_str().to_string()).or_insert(0) += 1;
        new.push(NewExemplar {
            bank: request.bank.clone(),
            source: "annotation".into(),
            source_ref: format!("{file_name}#{}", row.annotation_id),
            patient_id: store_patient_id(&row.patient_id),
            trial_id: row.trial_id.clone(),
            criterion_id: format!("annotation-{}", row.annotation_id),
            criterion_type: row.criterion_type.as_str().into(),
            criterion_text: text.trim().to_string(),
            sentences: cited,
            label: label.as_str().into(),
            rationale,
            reviewer: None,
            decided_at: decided_at.clone(),
            embedding_model: None,
            embedding: Vec::new(),
        });
    }
    let embedder = session.embedder(&request.embedder)?;
    for chunk in new.chunks_mut(EMBED_BATCH) {
        let texts: Vec<&str> = chunk.iter().map(|e| e.criterion_text.as_str()).collect();
        let vectors = embedder.embed(&texts)?;
        for (e, v) in chunk.iter_mut().zip(vectors) {
            e.embedding_model = Some(embedder.model_id().to_string());
            e.embedding = v;
        }
    }
    let bank_size = session.with_store(|store| {
        let w = store.writer()?;
        for e in &new {
            w.put_exemplar(e)?;
        }
        w.commit()?;
        Ok(store.exemplars(&request.bank)?.len())
    })?;
    Ok(ImportReport {
        bank: request.bank.clone(),
        file: request.file.clone(),
        imported: new.len(),
        skipped_without_criterion: skipped,
        bank_size,
        labels,
        embedder: embedder.model_id().to_string(),
    })
}

/// How screening uses a bank.
#[derive(Debug, Clone, PartialEq)]
pub struct ExemplarOptions {
    pub bank: String,
    /// Exemplars shown per criterion at most.
    pub k: usize,
    /// Cosine similarity of the criterion texts at least.
    pub min_similarity: f32,
    /// What is matched: the criterion texts, or each with the sentences
    /// that decide it.
    pub matching: ExemplarMatch,
}

/// Opens a bank for screening: its exemplars with vectors from the
/// screening's embedder (those without one, or with another model's, are
/// embedded now and the vectors stored).
pub(crate) fn open_bank(session: &Session, options: &ExemplarOptions, choice: &EmbedderChoice) -> Result<Exemplars> {
    if options.k == 0 {
        input_error!("--exemplars-k must be at least 1 with --exemplars (or leave --exemplars out)");
    }
    if !(-1.0..=1.0).contains(&options.min_similarity) {
        input_error!("the minimum similarity {} is not a cosine similarity in [-1, 1]", options.min_similarity);
    }
    let store = session.store()?;
    let records = lock(&store).exemplars(&options.bank)?;
    if records.is_empty() {
        let banks = lock(&store).exemplar_banks()?;
        let known = if banks.is_empty() {
            "the store has none; import one with `evident exemplars import FILE --bank NAME`".to_string()
        } else {
            format!("the store has {}", banks.iter().map(|(b, n)| format!("{b} ({n})")).collect::<Vec<_>>().join(", "))
        };
        input_error!("no exemplar bank {:?}: {known}", options.bank);
    }
    let embedder = session.embedder(choice)?;
    let model = embedder.model_id().to_string();
    let stale: Vec<usize> = (0..records.len())
        .filter(|&i| records[i].exemplar.embedding_model.as_deref() != Some(model.as_str()))
        .collect();
    let mut records = records;
    for chunk in stale.chunks(EMBED_BATCH) {
        let texts: Vec<&str> = chunk.iter().map(|&i| records[i].exemplar.criterion_text.as_str()).collect();
        let vectors = embedder.embed(&texts)?;
        let st = lock(&store);
        for (&i, v) in chunk.iter().zip(vectors) {
            st.set_exemplar_embedding(records[i].id, &model, &v)?;
            records[i].exemplar.embedding = v;
            records[i].exemplar.embedding_model = Some(model.clone());
        }
    }
    let mut exemplars = Vec::new();
    for r in &records {
        let e = &r.exemplar;
        let Some(label) = Decision::parse(&e.label) else {
            return Err(AppError::Setup(format!("exemplar {} has the label {:?}", r.id, e.label)));
        };
        let criterion_type =
            if e.criterion_type == "exclusion" { CriterionType::Exclusion } else { CriterionType::Inclusion };
        exemplars.push(Exemplar {
            id: r.id,
            source: e.source.clone(),
            source_ref: e.source_ref.clone(),
            patient_id: e.patient_id.clone(),
            criterion_type,
            criterion_text: e.criterion_text.clone(),
            sentences: e.sentences.clone(),
            label,
            rationale: e.rationale.clone(),
            embedding: e.embedding.clone(),
        });
    }
    // The bank's content names the runs that use it: a changed bank is a new run.
    let content: Vec<_> = records
        .iter()
        .map(|r| (r.id, &r.exemplar.criterion_text, &r.exemplar.label, &r.exemplar.sentences, &r.exemplar.rationale))
        .collect();
    let fingerprint = evident_match::batch::json_hash(&content)?;
    let bank =
        ExemplarBank::new(&options.bank, exemplars, Box::new(embedder), options.k, options.min_similarity, fingerprint)
            .map_err(AppError::Setup)?
            .matching(options.matching)
            .map_err(|e| AppError::Setup(e.to_string()))?;
    Ok(Exemplars(Arc::new(bank)))
}

/// What a review decided about one criterion of one patient, for the bank.
#[derive(Debug, Clone)]
pub struct ReviewedDecision<'a> {
    /// `override` or `signoff`.
    pub source: &'a str,
    pub run_id: &'a str,
    pub patient_id: &'a str,
    pub trial_id: &'a str,
    pub criterion: &'a Criterion,
    /// The patient sentences the decision rests on (the model's cited ones).
    pub sentences: Vec<String>,
    pub decision: Decision,
    /// The reviewer's reason, or the model's rationale a sign-off accepted.
    pub rationale: &'a str,
    pub reviewer: &'a str,
}

/// A reviewed decision of `view` (a criterion of a patient's review): the
/// sentences are those the decision cited.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reviewed<'a>(
    trial_id: &'a str,
    run_id: &'a str,
    view: &'a CriterionView,
    source: &'a str,
    decision: Decision,
    rationale: &'a str,
    reviewer: &'a str,
    patient_id: &'a str,
) -> ReviewedDecision<'a> {
    let sentences = view
        .evidence
        .iter()
        .flat_map(|d| d.passages.iter().flatten())
        .filter(|(_, _, cited)| *cited)
        .map(|(_, text, _)| text.clone())
        .collect();
    ReviewedDecision {
        source,
        run_id,
        patient_id,
        trial_id,
        criterion: &view.criterion,
        sentences,
        decision,
        rationale,
        reviewer,
    }
}

/// The model's rationale of a result (empty when it failed).
pub(crate) fn rationale_of(result: &CriterionResult) -> String {
    match &result.outcome {
        Determination::Assessed(a) => a.rationale.clone(),
        Determination::Failed(_) => String::new(),
    }
}

/// Records a reviewed decision in [`REVIEW_BANK`] (replacing the one
/// recorded for the same run, patient and criterion by the same kind of
/// review). It gets its vector the next time the bank is opened.
pub fn record_review(store: &mut Store, reviewed: &ReviewedDecision<'_>) -> Result<()> {
    let c = reviewed.criterion;
    let e = NewExemplar {
        bank: REVIEW_BANK.into(),
        source: reviewed.source.into(),
        source_ref: format!("{}/{}/{}", reviewed.run_id, reviewed.patient_id, c.id),
        patient_id: reviewed.patient_id.into(),
        trial_id: reviewed.trial_id.into(),
        criterion_id: c.id.clone(),
        criterion_type: c.criterion_type.as_str().into(),
        criterion_text: c.text.clone(),
        sentences: reviewed.sentences.clone(),
        label: reviewed.decision.as_str().into(),
        rationale: reviewed.rationale.trim().to_string(),
        reviewer: Some(reviewed.reviewer.to_string()),
        decided_at: chrono::Utc::now().to_rfc3339(),
        embedding_model: None,
        embedding: Vec::new(),
    };
    let w = store.writer()?;
    w.put_exemplar(&e)?;
    w.commit()?;
    Ok(())
}

/// The banks in the store and their sizes.
pub fn banks(session: &Session) -> Result<Vec<(String, usize)>> {
    session.with_store(|store| Ok(store.exemplar_banks()?))
}
