//! A synthetic screening run for the review service's load and fault
//! tests: `patients` made-up patients (one short note each, ingested
//! through the ingest job like any record) and one stored screening run
//! of a made-up trial with `criteria` free-text criteria, whose decisions
//! are written through the store's API (no model runs): each decision
//! cites a sentence of the patient's note. The labels are spread by a
//! fixed rule, so every worklist filter has patients. This is test data
//! and says so: the trial id is `SYNTHETIC-LOAD` and every rationale
//! begins "Synthetic decision".

use std::fmt::Write as _;
use std::path::Path;

use evident_match::decision::{Assessment, Confidence, CriterionResult, Decision, Determination, SentenceRef};
use evident_match::TrialNames;
use evident_store::NewMatchResult;

use crate::error::{input_error, AppError, Result};
use crate::progress::Silent;
use crate::records::{ingest, IngestRequest};
use crate::screening::{read_trial, TrialSource};
use crate::session::{lock, Session};

/// The synthetic run's id.
pub const SYNTHETIC_RUN: &str = "SYNTHETIC-LOAD-ican";

/// What was written.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SyntheticRun {
    pub run_id: String,
    pub patients: Vec<String>,
    pub criteria: Vec<String>,
}

/// Writes the synthetic patients (their note files go under `scratch`)
/// and the run into the session's store.
pub fn write_synthetic_run(
    session: &Session,
    scratch: &Path,
    patients: usize,
    criteria: usize,
) -> Result<SyntheticRun> {
    if patients == 0 || criteria == 0 {
        input_error!("a synthetic run needs at least one patient and one criterion");
    }
    let notes = scratch.join("synthetic-records");
    std::fs::create_dir_all(notes.join("notes")).map_err(|e| AppError::file(&notes, e))?;
    let mut manifest = String::from("patient_id,doc_id,kind,date,file,title\n");
    let ids: Vec<String> = (1..=patients).map(|i| format!("S{i:05}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let file = format!("notes/{id}.md");
        let _ = writeln!(manifest, "{id},{id}-note,progress note,2024-01-{:02},{file},Synthetic visit", 1 + i % 28);
        let mut text = String::from("# History\n");
        for c in 0..criteria {
            let _ = write!(text, "Synthetic finding number {c} for patient {id} was recorded at the visit. ");
        }
        text.push_str("\n\n# Plan\nContinue the synthetic plan and review in three months.\n");
        std::fs::write(notes.join(&file), text).map_err(|e| AppError::file(notes.join(&file), e))?;
    }
    std::fs::write(notes.join("manifest.csv"), manifest).map_err(|e| AppError::file(notes.join("manifest.csv"), e))?;
    let ingested = ingest(
        session,
        &IngestRequest { paths: vec![notes], format: evident_ingest::Format::Auto, dry_run: false },
        &Silent,
    )?;
    if let Some(refusal) = ingested.refusal() {
        return Err(AppError::Setup(format!("the synthetic records were refused: {refusal}")));
    }

    let mut yaml = String::from("trial_id: SYNTHETIC-LOAD\ntitle: \"Synthetic trial for the load test\"\ncriteria:\n");
    let criterion_ids: Vec<String> = (0..criteria).map(|c| format!("c{c:02}")).collect();
    for (c, id) in criterion_ids.iter().enumerate() {
        let kind = if c % 4 == 3 { "exclusion" } else { "inclusion" };
        let _ =
            writeln!(yaml, "  - id: {id}\n    type: {kind}\n    text: \"Synthetic finding number {c} is present.\"");
    }
    let source = TrialSource::Text { origin: "synthetic".into(), text: yaml };
    let (set, _) = read_trial(&source, &TrialNames::default())?;
    let definition = serde_json::json!({ "criteria": set, "method": "ican", "synthetic": true });
    let store = session.store()?;
    let mut st = lock(&store);
    st.begin_match_run(SYNTHETIC_RUN, &set.trial_id, "ican", &definition.to_string())?;
    for (p, patient) in ids.iter().enumerate() {
        let doc = format!("{patient}-note");
        let sentences = st.sentences(&doc)?;
        let mut rows = Vec::new();
        for (c, criterion) in set.criteria.iter().enumerate() {
            // Most criteria met; a few patients miss one, some lack information, some meet an exclusion.
            let decision = match (p + 3 * c) % 23 {
                0 => Decision::NotMet,
                1 | 2 => Decision::NotEnoughInformation,
                _ if criterion.criterion_type.as_str() == "exclusion" => {
                    if p % 11 == 0 {
                        Decision::Met
                    } else {
                        Decision::NotMet
                    }
                }
                _ => Decision::Met,
            };
            let evidence = sentences
                .get(c % sentences.len().max(1))
                .map(|s| vec![SentenceRef { document_id: doc.clone(), ordinal: s.ordinal }])
                .unwrap_or_default();
            let result = CriterionResult {
                criterion_id: criterion.id.clone(),
                criterion_type: criterion.criterion_type,
                document_id: None,
                document_date: None,
                outcome: Determination::Assessed(Assessment {
                    medications_and_supplements: Vec::new(),
                    rationale: format!("Synthetic decision for {} from finding {c}.", criterion.id),
                    decision,
                    confidence: Confidence::Medium,
                    evidence,
                }),
                unresolved_citations: Vec::new(),
            };
            rows.push(NewMatchResult {
                criterion_id: criterion.id.clone(),
                document_id: String::new(),
                result_json: serde_json::to_string(&result)?,
                trace_json: None,
            });
        }
        st.put_match_task(SYNTHETIC_RUN, patient, &format!("{patient}/all"), None, &rows)?;
    }
    st.finish_match_run(SYNTHETIC_RUN)?;
    Ok(SyntheticRun { run_id: SYNTHETIC_RUN.to_string(), patients: ids, criteria: criterion_ids })
}
