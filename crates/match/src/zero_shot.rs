//! The zero-shot matcher of Wornow et al. (2024): four prompting strategies
//! over a patient's notes, ACAN (all criteria, all notes: one call), ACIN
//! (all criteria, one call per note), ICAN (one call per criterion over all
//! notes) and ICIN (one call per note and criterion); note-level results of
//! ACIN/ICIN are pooled per criterion with the criterion's rule
//! ([`crate::decision::pool`]).
//!
//! Prompts are files (`prompts/zero_shot_*.prompt.md`, overridable). The
//! system message is fixed per strategy and the user message starts with
//! the record and ends with the criteria, so consecutive ICAN calls for one
//! patient share their whole prefix up to the criterion (the embedded
//! model's KV reuse skips it). Sentences are shown with prompt-local integer
//! ids; every cited id is mapped back to (document id, ordinal) and an id
//! that was not shown is kept as an unresolved citation, which flags the
//! decision. An answer that never validates is a failed decision.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::NaiveDateTime;
use evident_llm::{
    chat_json, ChatRequest, LlmError, Message, PromptError, Prompts, RepairPolicy, StructuredAnswer, StructuredModel,
};
use evident_store::Store;
use serde::Serialize;
use serde_json::{json, Value};

use crate::criteria::{CriteriaSet, Criterion};
use crate::decision::{
    pool, Assessment, Confidence, CriterionResult, Decision, DecisionFailure, Determination, SentenceRef,
};
use crate::exemplars::{calibrate, Exemplars, ShownExemplar};

/// The templates of this crate, with the model layer's repair prompt.
pub const MATCH_PROMPTS: &[(&str, &str)] = &[
    ("zero_shot_system.prompt.md", include_str!("../prompts/zero_shot_system.prompt.md")),
    ("zero_shot_user.prompt.md", include_str!("../prompts/zero_shot_user.prompt.md")),
    ("exemplars.prompt.md", include_str!("../prompts/exemplars.prompt.md")),
];

/// Built-in templates of this crate and of `evident_llm` (repair), with an
/// optional directory whose files override them by name.
pub fn match_prompts(override_dir: Option<&Path>) -> Prompts {
    let mut all: Vec<(&'static str, &'static str)> = MATCH_PROMPTS.to_vec();
    all.extend_from_slice(evident_llm::prompts::BUILTIN_PROMPTS);
    Prompts::new(&all, override_dir)
}

/// Wornow et al.'s prompting strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    Acan,
    Acin,
    Ican,
    Icin,
}

impl Strategy {
    pub fn all_criteria(self) -> bool {
        matches!(self, Strategy::Acan | Strategy::Acin)
    }
    pub fn individual_notes(self) -> bool {
        matches!(self, Strategy::Acin | Strategy::Icin)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Acan => "acan",
            Strategy::Acin => "acin",
            Strategy::Ican => "ican",
            Strategy::Icin => "icin",
        }
    }
    pub fn parse(text: &str) -> Option<Strategy> {
        [Strategy::Acan, Strategy::Acin, Strategy::Ican, Strategy::Icin]
            .into_iter()
            .find(|s| s.as_str().eq_ignore_ascii_case(text))
    }
}

/// One note as the matcher shows it: the stored sentences (all of them, or
/// those inside retrieved sections).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoteText {
    pub document_id: String,
    pub date: Option<NaiveDateTime>,
    pub title: String,
    /// (ordinal in the store, text).
    pub sentences: Vec<(i64, String)>,
}

/// A patient's notes, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PatientRecord {
    pub patient_id: String,
    pub notes: Vec<NoteText>,
}

impl PatientRecord {
    /// Every document of the patient with its stored sentences, oldest first
    /// (undated documents last, then by id).
    pub fn from_store(store: &Store, patient_id: &str) -> Result<PatientRecord, MatchError> {
        let mut docs = store.documents(patient_id).map_err(|e| MatchError::Store(e.to_string()))?;
        docs.sort_by(|a, b| (a.date.is_none(), a.date, &a.id).cmp(&(b.date.is_none(), b.date, &b.id)));
        let mut notes = Vec::new();
        for d in docs {
            let sentences = store
                .sentences(&d.id)
                .map_err(|e| MatchError::Store(e.to_string()))?
                .into_iter()
                .map(|s| (s.ordinal, s.text))
                .collect();
            notes.push(NoteText { document_id: d.id, date: d.date, title: d.title, sentences });
        }
        Ok(PatientRecord { patient_id: patient_id.to_string(), notes })
    }

    /// Two-stage retrieval: keeps only the sentences inside the given
    /// sections (document id, byte start, byte end), e.g. the top-k hits of
    /// `evident_retrieve::Retriever::search`. `sentence_spans` gives each
    /// kept sentence's byte span, from `Store::sentences`. Notes left with
    /// no sentence are dropped.
    pub fn restrict_to_sections(
        &self,
        sections: &[(String, usize, usize)],
        sentence_spans: &BTreeMap<(String, i64), (usize, usize)>,
    ) -> PatientRecord {
        let notes = self
            .notes
            .iter()
            .filter_map(|n| {
                let kept: Vec<(i64, String)> = n
                    .sentences
                    .iter()
                    .filter(|(ordinal, _)| {
                        sentence_spans.get(&(n.document_id.clone(), *ordinal)).is_some_and(|(s, e)| {
                            sections.iter().any(|(doc, start, end)| *doc == n.document_id && s < end && e > start)
                        })
                    })
                    .cloned()
                    .collect();
                (!kept.is_empty()).then(|| NoteText { sentences: kept, ..n.clone() })
            })
            .collect();
        PatientRecord { patient_id: self.patient_id.clone(), notes }
    }
}

#[derive(Debug, Clone)]
pub struct ZeroShotConfig {
    pub strategy: Strategy,
    pub repair: RepairPolicy,
    /// Answer budget per criterion in one call (ACAN/ACIN multiply it).
    pub max_tokens_per_criterion: u32,
    /// The date most_recent pooling counts back from; the latest note when `None`.
    pub reference_date: Option<NaiveDateTime>,
    /// Worked examples shown before each criterion (none when `None`).
    pub exemplars: Option<Exemplars>,
    /// Label calibration: a MET or NOT MET citing no sentence becomes NOT
    /// ENOUGH INFORMATION ([`crate::exemplars::calibrate`]).
    pub calibrate: bool,
}

impl Default for ZeroShotConfig {
    fn default() -> Self {
        ZeroShotConfig {
            strategy: Strategy::Ican,
            repair: RepairPolicy::default(),
            max_tokens_per_criterion: 448,
            reference_date: None,
            exemplars: None,
            calibrate: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MatchError {
    /// The model call failed (transport, privacy, context); see the
    /// inner error for whether a retry can help.
    #[error("model call for {subject}: {source}")]
    Llm {
        /// Whose call it was: "patient P", or the augmentation of a
        /// criterion (criteria are not patient data).
        subject: String,
        source: LlmError,
    },
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error("store: {0}")]
    Store(String),
    /// The local knowledge base (MAKAR's retrieval agent) failed.
    #[error("knowledge base: {0}")]
    Knowledge(String),
    /// The online search endpoint (MAKAR's online agent) failed or is not configured.
    #[error("online search: {0}")]
    OnlineSearch(String),
    /// Choosing worked examples failed (embedding the criterion).
    #[error("exemplars: {0}")]
    Exemplars(String),
}

/// The results for one patient: one pooled result per criterion, in the
/// order of the set, and the note-level results they came from (ACIN/ICIN).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PatientMatch {
    pub patient_id: String,
    pub trial_id: String,
    pub strategy: Strategy,
    pub results: Vec<CriterionResult>,
    pub note_results: Vec<CriterionResult>,
    pub calls: u32,
    pub prompt_tokens_estimate: usize,
}

/// A rendered prompt and the map from its sentence ids to the record.
pub struct RenderedPrompt {
    pub request: ChatRequest,
    pub schema: Value,
    pub sentence_ids: BTreeMap<i64, SentenceRef>,
}

pub struct ZeroShotMatcher<'a> {
    model: StructuredModel<'a>,
    prompts: Prompts,
    config: ZeroShotConfig,
}

/// The rationale's length limit: enough for a few sentences of reasoning,
/// short enough that a small model cannot ramble for hundreds of tokens.
const MAX_STRING: u64 = 600;

/// Medications listed at most: the authors' list is unbounded and refined
/// definitions (DIETSUPP-2MOS) tell the model to go through it, so the
/// bound only stops a runaway list.
const MAX_MEDICATIONS: u64 = 40;

/// The JSON Schema of one assessment.
pub fn assessment_schema() -> Value {
    assessment_schema_for(None)
}

/// The schema of one assessment whose evidence ids are at most `max_id`
/// (the last sentence id shown), so constrained decoding cannot cite a
/// sentence that was not in the prompt. `None` leaves ids unbounded.
pub fn assessment_schema_for(max_id: Option<i64>) -> Value {
    let mut id = json!({"type": "integer", "minimum": 0});
    if let Some(max) = max_id {
        id["maximum"] = json!(max.max(0));
    }
    json!({
        "type": "object",
        "properties": {
            "medications_and_supplements": {"type": "array", "maxItems": MAX_MEDICATIONS, "items": {"type": "string", "maxLength": 60}},
            "rationale": {"type": "string", "maxLength": MAX_STRING},
            "decision": {"type": "string", "enum": ["MET", "NOT MET", "NOT ENOUGH INFORMATION", "NOT APPLICABLE"]},
            "confidence": {"type": "string", "enum": ["low", "medium", "high"]},
            "evidence": {"type": "array", "maxItems": 8, "items": id}
        },
        "required": ["medications_and_supplements", "rationale", "decision", "confidence", "evidence"],
        "additionalProperties": false
    })
}

/// The schema for all criteria at once: one required key per criterion id.
pub fn all_criteria_schema(criteria: &[&Criterion], max_id: Option<i64>) -> Value {
    let properties: serde_json::Map<String, Value> =
        criteria.iter().map(|c| (c.id.clone(), assessment_schema_for(max_id))).collect();
    let required: Vec<&str> = criteria.iter().map(|c| c.id.as_str()).collect();
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

impl<'a> ZeroShotMatcher<'a> {
    /// A matcher asking `model`; its pipeline failures go to the model's
    /// log (a `RecordingModel` records them in its run).
    pub fn new(
        model: impl Into<StructuredModel<'a>>,
        config: ZeroShotConfig,
        prompt_override_dir: Option<&Path>,
    ) -> Self {
        ZeroShotMatcher { model: model.into(), prompts: match_prompts(prompt_override_dir), config }
    }

    pub fn config(&self) -> &ZeroShotConfig {
        &self.config
    }

    /// Renders the request for some notes and criteria (one criterion for
    /// IC*, all for AC*).
    /// The current date shown is the configured reference date, else the
    /// latest date of the notes shown.
    pub fn render(&self, notes: &[&NoteText], criteria: &[&Criterion]) -> Result<RenderedPrompt, MatchError> {
        let current = current_date(self.config.reference_date, notes.iter().copied());
        self.render_at(notes, criteria, current)
    }

    /// Renders with the given current date (Wornow et al. anchor every
    /// prompt at the patient's most recent record date, also when one note
    /// is shown, so "in the past 6 months" has a reference).
    pub fn render_at(
        &self,
        notes: &[&NoteText],
        criteria: &[&Criterion],
        current_date: Option<NaiveDateTime>,
    ) -> Result<RenderedPrompt, MatchError> {
        self.render_with(notes, criteria, current_date, &[])
    }

    /// Renders with worked examples, shown after the record and the current
    /// date and before the criterion: consecutive calls for one patient
    /// still share the whole record as their prefix.
    pub fn render_with(
        &self,
        notes: &[&NoteText],
        criteria: &[&Criterion],
        current_date: Option<NaiveDateTime>,
        exemplars: &[ShownExemplar],
    ) -> Result<RenderedPrompt, MatchError> {
        let all_criteria = self.config.strategy.all_criteria();
        let (shown, sentence_ids) = record_context(notes);
        let criteria_ctx: Vec<Value> = criteria
            .iter()
            .map(|c| json!({"id": c.id, "type": c.criterion_type.as_str(), "text": c.prompt_text()}))
            .collect();
        let ctx = json!({
            "all_criteria": all_criteria,
            "notes": shown,
            "criteria": criteria_ctx,
            "current_date": current_date.map(|d| d.format("%Y-%m-%d").to_string()),
            "exemplars": exemplars.iter().map(ShownExemplar::prompt_context).collect::<Vec<_>>(),
            "binary": false,
        });
        let system = self.prompts.render("zero_shot_system.prompt.md", &ctx)?;
        let user = self.prompts.render("zero_shot_user.prompt.md", &ctx)?;
        let max_id = sentence_ids.keys().next_back().copied();
        let schema = if all_criteria { all_criteria_schema(criteria, max_id) } else { assessment_schema_for(max_id) };
        let max_tokens = self.config.max_tokens_per_criterion.saturating_mul(criteria.len().max(1) as u32);
        let request = ChatRequest::new(vec![Message::system(system), Message::user(user)]).with_max_tokens(max_tokens);
        Ok(RenderedPrompt { request, schema, sentence_ids })
    }

    /// Asks the model about `criteria` over `notes` and returns one result
    /// per criterion (failed results when the answer never validated).
    /// The worked examples each criterion's call showed go to `seen`.
    #[allow(clippy::too_many_arguments)]
    fn assess(
        &self,
        patient_id: &str,
        notes: &[&NoteText],
        criteria: &[&Criterion],
        current: Option<NaiveDateTime>,
        calls: &mut u32,
        prompt_chars: &mut usize,
        seen: &mut BTreeMap<String, Vec<ShownExemplar>>,
    ) -> Result<Vec<CriterionResult>, MatchError> {
        let mut shown: Vec<ShownExemplar> = Vec::new();
        if let Some(bank) = &self.config.exemplars {
            for c in criteria {
                let chosen = bank.select(c.prompt_text(), patient_id, notes)?;
                for e in &chosen {
                    if !shown.iter().any(|s| s.id == e.id) {
                        shown.push(e.clone());
                    }
                }
                seen.insert(c.id.clone(), chosen);
            }
        }
        let rendered = self.render_with(notes, criteria, current, &shown)?;
        *prompt_chars += rendered.request.messages.iter().map(|m| m.content.len()).sum::<usize>();
        *calls += 1;
        let outcome = chat_json(self.model, &rendered.request, &rendered.schema, self.config.repair, &self.prompts)
            .map_err(|source| MatchError::Llm { subject: format!("patient {patient_id}"), source })?;
        let (document_id, document_date) = match notes {
            [one] if self.config.strategy.individual_notes() => (Some(one.document_id.clone()), one.date),
            _ => (None, None),
        };
        let base = |c: &Criterion, outcome: Determination, unresolved: Vec<String>| CriterionResult {
            criterion_id: c.id.clone(),
            criterion_type: c.criterion_type,
            document_id: document_id.clone(),
            document_date,
            outcome,
            unresolved_citations: unresolved,
        };
        Ok(match outcome {
            StructuredAnswer::PipelineFailure(f) => criteria
                .iter()
                .map(|c| {
                    base(
                        c,
                        Determination::Failed(DecisionFailure {
                            errors: f.errors.clone(),
                            raw_text: f.raw_text.clone(),
                        }),
                        vec![],
                    )
                })
                .collect(),
            StructuredAnswer::Valid { value, .. } => criteria
                .iter()
                .map(|c| {
                    let v = if self.config.strategy.all_criteria() { &value[c.id.as_str()] } else { &value };
                    let (mut assessment, unresolved) = parse_assessment(v, &rendered.sentence_ids);
                    if self.config.calibrate {
                        calibrate(&mut assessment);
                    }
                    base(c, Determination::Assessed(assessment), unresolved)
                })
                .collect(),
        })
    }

    /// The units of work for one patient: one model call each (before
    /// repair), in the order that lets consecutive calls share their
    /// prefix (notes outer, criteria inner).
    pub fn tasks(&self, set: &CriteriaSet, record: &PatientRecord) -> Vec<Task> {
        let note_groups: Vec<Option<String>> = if self.config.strategy.individual_notes() {
            record.notes.iter().map(|n| Some(n.document_id.clone())).collect()
        } else {
            vec![None]
        };
        let criterion_groups: Vec<Vec<String>> = if self.config.strategy.all_criteria() {
            vec![set.criteria.iter().map(|c| c.id.clone()).collect()]
        } else {
            set.criteria.iter().map(|c| vec![c.id.clone()]).collect()
        };
        note_groups
            .iter()
            .flat_map(|doc| {
                criterion_groups.iter().map(|ids| Task { document_id: doc.clone(), criterion_ids: ids.clone() })
            })
            .collect()
    }

    /// Runs one task over `record` (the whole record, or what two-stage
    /// retrieval kept of it for this task). Returns one result per
    /// criterion of the task; note-level for ACIN/ICIN.
    pub fn run_task(&self, set: &CriteriaSet, record: &PatientRecord, task: &Task) -> Result<TaskOutput, MatchError> {
        let criteria: Vec<&Criterion> =
            task.criterion_ids.iter().filter_map(|id| set.criteria.iter().find(|c| &c.id == id)).collect();
        let notes: Vec<&NoteText> = match &task.document_id {
            Some(doc) => record.notes.iter().filter(|n| &n.document_id == doc).collect(),
            None => record.notes.iter().collect(),
        };
        if self.config.strategy.individual_notes() && notes.is_empty() {
            // Retrieval kept nothing of this note: the note says nothing
            // about these criteria, so no call is made.
            let results = criteria
                .iter()
                .map(|c| CriterionResult {
                    criterion_id: c.id.clone(),
                    criterion_type: c.criterion_type,
                    document_id: task.document_id.clone(),
                    document_date: record_note_date(record, task.document_id.as_deref()),
                    outcome: Determination::Assessed(Assessment {
                        medications_and_supplements: vec![],
                        rationale: "No passage of this note was retrieved for the criterion.".into(),
                        decision: Decision::NotEnoughInformation,
                        confidence: Confidence::Low,
                        evidence: vec![],
                    }),
                    unresolved_citations: vec![],
                })
                .collect();
            return Ok(TaskOutput { results, calls: 0, prompt_chars: 0, exemplars: BTreeMap::new() });
        }
        let mut calls = 0;
        let mut prompt_chars = 0;
        let mut exemplars = BTreeMap::new();
        let current = current_date(self.config.reference_date, record.notes.iter());
        let results =
            self.assess(&record.patient_id, &notes, &criteria, current, &mut calls, &mut prompt_chars, &mut exemplars)?;
        Ok(TaskOutput { results, calls, prompt_chars, exemplars })
    }

    /// Pools note-level results into one result per criterion (ACIN/ICIN);
    /// patient-level results are returned as they are, in the set's order.
    pub fn patient_results(&self, set: &CriteriaSet, raw: &[CriterionResult]) -> Vec<CriterionResult> {
        set.criteria
            .iter()
            .filter_map(|c| {
                let of_criterion: Vec<CriterionResult> =
                    raw.iter().filter(|r| r.criterion_id == c.id).cloned().collect();
                if self.config.strategy.individual_notes() {
                    pool(&of_criterion, c.pooling_or_default(), c.window_months, self.config.reference_date)
                } else {
                    of_criterion.into_iter().next()
                }
            })
            .collect()
    }

    /// Runs the configured strategy for one patient over a criteria set.
    pub fn match_patient(&self, set: &CriteriaSet, record: &PatientRecord) -> Result<PatientMatch, MatchError> {
        let mut calls = 0;
        let mut prompt_chars = 0;
        let mut raw = Vec::new();
        for task in self.tasks(set, record) {
            let out = self.run_task(set, record, &task)?;
            calls += out.calls;
            prompt_chars += out.prompt_chars;
            raw.extend(out.results);
        }
        let results = self.patient_results(set, &raw);
        let note_results = if self.config.strategy.individual_notes() { raw } else { Vec::new() };
        Ok(PatientMatch {
            patient_id: record.patient_id.clone(),
            trial_id: set.trial_id.clone(),
            strategy: self.config.strategy,
            results,
            note_results,
            calls,
            prompt_tokens_estimate: prompt_chars / 4,
        })
    }
}

/// `reference` when set, else the latest date among `notes`.
fn current_date<'n>(
    reference: Option<NaiveDateTime>,
    notes: impl Iterator<Item = &'n NoteText>,
) -> Option<NaiveDateTime> {
    reference.or_else(|| notes.filter_map(|n| n.date).max())
}

fn record_note_date(record: &PatientRecord, document_id: Option<&str>) -> Option<NaiveDateTime> {
    record.notes.iter().find(|n| Some(n.document_id.as_str()) == document_id).and_then(|n| n.date)
}

/// One unit of work of the zero-shot matcher: some criteria over the whole
/// record (`document_id` `None`) or over one note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Task {
    pub document_id: Option<String>,
    pub criterion_ids: Vec<String>,
}

impl Task {
    /// A key naming the task within one patient's run (stable across runs).
    pub fn key(&self) -> String {
        format!("d:{}|c:{}", self.document_id.as_deref().unwrap_or("*"), self.criterion_ids.join(","))
    }
}

/// What one task produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskOutput {
    pub results: Vec<CriterionResult>,
    /// Model calls made (repairs are counted by the recorder, not here).
    pub calls: u32,
    pub prompt_chars: usize,
    /// Per criterion id, the worked examples its call showed (empty without exemplars).
    pub exemplars: BTreeMap<String, Vec<ShownExemplar>>,
}

/// The notes as prompt templates see them (`date`, `title`, `sentences`
/// with prompt-local integer `id` and whitespace-collapsed `text`), and the
/// map from those ids back to the record. Ids count from 0 across notes.
pub fn record_context(notes: &[&NoteText]) -> (Vec<Value>, BTreeMap<i64, SentenceRef>) {
    let mut sentence_ids = BTreeMap::new();
    let mut next = 0i64;
    let shown = notes
        .iter()
        .map(|n| {
            let sentences: Vec<Value> = n
                .sentences
                .iter()
                .map(|(ordinal, text)| {
                    let id = next;
                    next += 1;
                    sentence_ids.insert(id, SentenceRef { document_id: n.document_id.clone(), ordinal: *ordinal });
                    json!({"id": id, "text": text.split_whitespace().collect::<Vec<_>>().join(" ")})
                })
                .collect();
            json!({
                "date": n.date.map(|d| d.format("%Y-%m-%d").to_string()),
                "title": n.title,
                "sentences": sentences,
            })
        })
        .collect();
    (shown, sentence_ids)
}

/// Reads a schema-valid assessment and maps its evidence ids; ids that were
/// not shown are returned as unresolved citations.
pub fn parse_assessment(v: &Value, ids: &BTreeMap<i64, SentenceRef>) -> (Assessment, Vec<String>) {
    let strings = |key: &str| -> Vec<String> {
        v[key].as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
    };
    let decision = v["decision"].as_str().and_then(Decision::parse).expect("schema enforces the decision enum");
    let confidence = match v["confidence"].as_str() {
        Some("low") => Confidence::Low,
        Some("medium") => Confidence::Medium,
        _ => Confidence::High,
    };
    let mut evidence = Vec::new();
    let mut unresolved = Vec::new();
    for id in v["evidence"].as_array().into_iter().flatten().filter_map(Value::as_i64) {
        match ids.get(&id) {
            Some(r) if !evidence.contains(r) => evidence.push(r.clone()),
            Some(_) => {}
            None => unresolved.push(format!("sentence id {id} was not in the prompt")),
        }
    }
    (
        Assessment {
            medications_and_supplements: strings("medications_and_supplements"),
            rationale: v["rationale"].as_str().unwrap_or_default().to_string(),
            decision,
            confidence,
            evidence,
        },
        unresolved,
    )
}

/// Checks that every cited sentence exists in the store with the text it
/// had; returns one message per citation that does not resolve. The report
/// shows cited sentences verbatim from the store through the same lookup.
pub fn verify_citations(store: &Store, result: &CriterionResult) -> Result<Vec<String>, MatchError> {
    let mut problems = Vec::new();
    if let Determination::Assessed(a) = &result.outcome {
        for e in &a.evidence {
            let found = store.sentence(&e.document_id, e.ordinal).map_err(|err| MatchError::Store(err.to_string()))?;
            if found.is_none() {
                problems.push(format!("sentence {} of document {} is not in the store", e.ordinal, e.document_id));
            }
        }
    }
    Ok(problems)
}
