//! MAKAR's reasoning module (Algorithm 1, lines 24-38; Appendix C-C4/C-C5):
//! the reasoning agent analyses each concept of the criterion against the
//! record and writes a summary, the matching agent decides with the
//! zero-shot answer shape (decision, confidence, rationale, cited sentence
//! ids), and the supervision agent approves the decision or corrects it.
//! For MAKAR-Aug the same entry point runs the zero-shot ICAN matcher on the
//! augmented criterion instead.
//!
//! The three patient-facing agents share one system message and a user
//! message that starts with the record (rendered as the zero-shot matcher
//! renders it) and ends with the agent's task and the criterion, so the
//! three calls for a criterion, and the calls for the next criterion, share
//! the record prefix (the embedded model reuses its KV cache for it).
//!
//! Failures are never guessed over: a reasoning or matching answer that
//! never validates makes the result [`Determination::Failed`]. A supervision answer
//! that never validates leaves the (valid) matching answer standing, and the
//! trace says the decision went unsupervised.

use evident_llm::{chat_json, ChatRequest, LlmError, Message, StructuredAnswer};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::augment::Augmentation;
use super::{MakarMatcher, Variant};
use crate::criteria::{CriteriaSet, Criterion};
use crate::decision::{Assessment, Confidence, CriterionResult, Decision, DecisionFailure, Determination};
use crate::zero_shot::{
    assessment_schema, assessment_schema_for, parse_assessment, record_context, MatchError, NoteText, PatientRecord,
    Strategy, ZeroShotConfig, ZeroShotMatcher,
};

/// One concept of the criterion and what the record shows about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningConcept {
    pub concept: String,
    pub finding: String,
}

/// The reasoning agent's analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reasoning {
    pub concepts: Vec<ReasoningConcept>,
    pub summary: String,
}

/// What the supervision agent said about the matching agent's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum SupervisionVerdict {
    /// The decision stands. A rejection that names the same decision counts
    /// as approval (there is nothing to correct).
    Approved { reason: String },
    /// The decision was replaced by this one.
    Corrected { decision: Decision, confidence: Confidence, reason: String },
    /// The supervision answer never validated; the matching decision stands
    /// unsupervised.
    Failed { errors: Vec<String> },
}

/// How a MAKAR decision was reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MakarTrace {
    pub variant: Variant,
    /// The criterion text the agents were shown (augmented or original).
    pub criterion_text: String,
    /// Whether that text is an accepted augmentation.
    pub augmented: bool,
    /// The reasoning agent's analysis (not in MAKAR-Aug).
    pub reasoning: Option<Reasoning>,
    /// The matching agent's answer (for MAKAR-Aug, the zero-shot answer),
    /// before supervision.
    pub matching: Option<Assessment>,
    /// The supervision agent's verdict (not in MAKAR-Aug).
    pub supervision: Option<SupervisionVerdict>,
    /// The worked examples the matching agent was shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exemplars: Vec<crate::exemplars::ShownExemplar>,
    /// The model's probability of MET at its 0/1 answer (the paper's C-A
    /// zero-shot prompt: `makar-zero-shot`, `makar-aug`), from the
    /// log-probabilities of the answer's first token, when asked for
    /// ([`super::MakarConfig::probabilities`]); see [`crate::threshold`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_met: Option<f64>,
}

/// The result for one criterion of one patient, with its trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MakarResult {
    pub result: CriterionResult,
    pub trace: MakarTrace,
    /// Model calls spent, repairs included.
    pub calls: u32,
}

const FINDING_MAX: u64 = 500;
const CONCEPT_MAX: u64 = 200;
const SUMMARY_MAX: u64 = 1500;
const REASON_MAX: u64 = 1000;

fn reasoning_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "concepts": {
                "type": "array",
                "maxItems": 10,
                "items": {
                    "type": "object",
                    "properties": {
                        "concept": {"type": "string", "maxLength": CONCEPT_MAX},
                        "finding": {"type": "string", "maxLength": FINDING_MAX}
                    },
                    "required": ["concept", "finding"],
                    "additionalProperties": false
                }
            },
            "summary": {"type": "string", "maxLength": SUMMARY_MAX}
        },
        "required": ["concepts", "summary"],
        "additionalProperties": false
    })
}

fn supervision_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "decision": {"type": "string", "enum": ["MET", "NOT MET", "NOT ENOUGH INFORMATION", "NOT APPLICABLE"]},
            "confidence": {"type": "string", "enum": ["low", "medium", "high"]},
            "reason": {"type": "string", "maxLength": REASON_MAX},
            "evidence": {"type": "array", "maxItems": 8, "items": {"type": "integer", "minimum": 0}}
        },
        "required": ["approved", "decision", "confidence", "reason", "evidence"],
        "additionalProperties": false
    })
}

/// JSON Schemas of the patient-facing answers, for inspection and tests.
pub fn schemas() -> [(&'static str, Value); 3] {
    [("reasoning", reasoning_schema()), ("matching", assessment_schema()), ("supervision", supervision_schema())]
}

/// Names the record in errors (the matcher is given notes, not a patient id).
fn record_name(notes: &[&NoteText]) -> String {
    match notes.first() {
        Some(n) => format!("the record of document {}", n.document_id),
        None => "an empty record".to_string(),
    }
}

impl MakarMatcher<'_> {
    /// Renders the request of one patient-facing agent (`reasoning`,
    /// `matching` or `supervision`); `extra` adds the agent's inputs to the
    /// template context.
    pub fn render_agent(
        &self,
        agent: &str,
        criterion: &Criterion,
        criterion_text: &str,
        notes: &[&NoteText],
        extra: Value,
        max_tokens: u32,
    ) -> Result<ChatRequest, MatchError> {
        let (shown, _) = record_context(notes);
        let mut ctx = json!({
            "notes": shown,
            "criterion": criterion_text,
            "criterion_type": criterion.criterion_type.as_str(),
        });
        if let (Some(ctx), Value::Object(extra)) = (ctx.as_object_mut(), extra) {
            ctx.extend(extra);
        }
        let system = self.prompts.render("makar_system.prompt.md", &ctx)?;
        let user = self.prompts.render(&format!("makar_{agent}.prompt.md"), &ctx)?;
        Ok(ChatRequest::new(vec![Message::system(system), Message::user(user)]).with_max_tokens(max_tokens))
    }

    fn ask_match_model(
        &self,
        request: &ChatRequest,
        schema: &Value,
        notes: &[&NoteText],
        calls: &mut u32,
    ) -> Result<StructuredAnswer, MatchError> {
        let outcome = chat_json(self.match_model, request, schema, self.config.repair, &self.prompts)
            .map_err(|source: LlmError| MatchError::Llm { subject: record_name(notes), source })?;
        *calls += match &outcome {
            StructuredAnswer::Valid { attempts, .. } => *attempts,
            StructuredAnswer::PipelineFailure(f) => f.attempts,
        };
        Ok(outcome)
    }

    /// Decides one criterion over `notes` with the configured variant.
    /// `augmentation` is used only when it belongs to this criterion, was
    /// accepted by the critic and is not stale; MAKAR-Reason ignores it.
    pub fn match_criterion(
        &self,
        criterion: &Criterion,
        augmentation: Option<&Augmentation>,
        notes: &[&NoteText],
    ) -> Result<MakarResult, MatchError> {
        self.match_criterion_for(None, criterion, augmentation, notes)
    }

    /// As [`Self::match_criterion`], for the patient `patient_id`: with
    /// exemplars configured, the paper's matching agent and zero-shot
    /// prompt are shown the exemplars chosen for the criterion, none of
    /// this patient. Without a patient id no exemplar is shown.
    pub fn match_criterion_for(
        &self,
        patient_id: Option<&str>,
        criterion: &Criterion,
        augmentation: Option<&Augmentation>,
        notes: &[&NoteText],
    ) -> Result<MakarResult, MatchError> {
        let variant = self.config.variant;
        let criterion_text = match (variant, augmentation) {
            (Variant::Reason | Variant::PaperReason | Variant::PaperZeroShot, _) | (_, None) => criterion.text.as_str(),
            (_, Some(a)) => a.text_for(criterion),
        };
        let augmented = criterion_text != criterion.text;
        let mut trace = MakarTrace {
            variant,
            criterion_text: criterion_text.to_string(),
            augmented,
            reasoning: None,
            matching: None,
            supervision: None,
            exemplars: Vec::new(),
            p_met: None,
        };
        if variant.paper() {
            if let (Some(bank), Some(patient)) = (&self.config.exemplars, patient_id) {
                trace.exemplars = bank.select(criterion_text, patient, notes)?;
            }
            return self.match_criterion_paper(criterion, criterion_text, notes, trace);
        }
        if variant == Variant::Aug {
            return self.match_zero_shot(criterion, criterion_text, notes, trace);
        }
        let mut calls = 0;
        let result = |outcome: Determination, unresolved: Vec<String>| CriterionResult {
            criterion_id: criterion.id.clone(),
            criterion_type: criterion.criterion_type,
            document_id: None,
            document_date: None,
            outcome,
            unresolved_citations: unresolved,
        };
        let failed = |f: evident_llm::PipelineFailure, agent: &str| {
            let errors = f.errors.iter().map(|e| format!("{agent} agent: {e}")).collect();
            Determination::Failed(DecisionFailure { errors, raw_text: f.raw_text })
        };
        let (_, ids) = record_context(notes);

        // Reasoning agent.
        let request = self.render_agent(
            "reasoning",
            criterion,
            criterion_text,
            notes,
            json!({}),
            self.config.max_tokens_reasoning,
        )?;
        let reasoning = match self.ask_match_model(&request, &reasoning_schema(), notes, &mut calls)? {
            StructuredAnswer::Valid { value, .. } => Reasoning {
                concepts: value["concepts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| ReasoningConcept {
                        concept: c["concept"].as_str().unwrap_or_default().to_string(),
                        finding: c["finding"].as_str().unwrap_or_default().to_string(),
                    })
                    .collect(),
                summary: value["summary"].as_str().unwrap_or_default().to_string(),
            },
            StructuredAnswer::PipelineFailure(f) => {
                return Ok(MakarResult { result: result(failed(f, "reasoning"), vec![]), trace, calls });
            }
        };
        trace.reasoning = Some(reasoning.clone());

        // Matching agent.
        let request = self.render_agent(
            "matching",
            criterion,
            criterion_text,
            notes,
            json!({"concepts": reasoning.concepts, "summary": reasoning.summary}),
            self.config.max_tokens_matching,
        )?;
        let matching_value = match self.ask_match_model(
            &request,
            &assessment_schema_for(ids.keys().next_back().copied()),
            notes,
            &mut calls,
        )? {
            StructuredAnswer::Valid { value, .. } => value,
            StructuredAnswer::PipelineFailure(f) => {
                return Ok(MakarResult { result: result(failed(f, "matching"), vec![]), trace, calls });
            }
        };
        let (matched, matched_unresolved) = parse_assessment(&matching_value, &ids);
        trace.matching = Some(matched.clone());

        // Supervision agent: sees the matching answer with the prompt-local
        // ids it cited.
        let request = self.render_agent(
            "supervision",
            criterion,
            criterion_text,
            notes,
            json!({
                "decision": matched.decision.as_str(),
                "confidence": matching_value["confidence"],
                "rationale": matched.rationale,
                "evidence": matching_value["evidence"],
            }),
            self.config.max_tokens_supervision,
        )?;
        let (final_assessment, unresolved, verdict) = match self.ask_match_model(
            &request,
            &supervision_schema(),
            notes,
            &mut calls,
        )? {
            StructuredAnswer::Valid { value, .. } => {
                let reason = value["reason"].as_str().unwrap_or_default().to_string();
                let decision =
                    value["decision"].as_str().and_then(Decision::parse).expect("schema enforces the decision enum");
                if value["approved"].as_bool() == Some(true) || decision == matched.decision {
                    (matched, matched_unresolved, SupervisionVerdict::Approved { reason })
                } else {
                    let corrected = json!({
                        "medications_and_supplements": matching_value["medications_and_supplements"],
                        "rationale": format!("{}\nSupervision corrected {} to {}: {reason}", matched.rationale, matched.decision.as_str(), decision.as_str()),
                        "decision": decision.as_str(),
                        "confidence": value["confidence"],
                        "evidence": value["evidence"],
                    });
                    let (assessment, unresolved) = parse_assessment(&corrected, &ids);
                    let verdict = SupervisionVerdict::Corrected { decision, confidence: assessment.confidence, reason };
                    (assessment, unresolved, verdict)
                }
            }
            StructuredAnswer::PipelineFailure(f) => {
                (matched, matched_unresolved, SupervisionVerdict::Failed { errors: f.errors })
            }
        };
        trace.supervision = Some(verdict);
        Ok(MakarResult { result: result(Determination::Assessed(final_assessment), unresolved), trace, calls })
    }

    /// MAKAR-Aug: the zero-shot ICAN matcher on the (augmented) criterion.
    fn match_zero_shot(
        &self,
        criterion: &Criterion,
        criterion_text: &str,
        notes: &[&NoteText],
        mut trace: MakarTrace,
    ) -> Result<MakarResult, MatchError> {
        let mut shown = criterion.clone();
        shown.refined = (criterion_text != criterion.text).then(|| criterion_text.to_string());
        let set = CriteriaSet { trial_id: String::new(), title: String::new(), source: None, criteria: vec![shown] };
        let record =
            PatientRecord { patient_id: record_name(notes), notes: notes.iter().map(|n| (*n).clone()).collect() };
        let config = ZeroShotConfig {
            strategy: Strategy::Ican,
            repair: self.config.repair,
            max_tokens_per_criterion: self.config.max_tokens_matching,
            reference_date: None,
            // This path (MakarMatcher's own MAKAR-Aug) knows no patient id.
            exemplars: None,
            calibrate: false,
        };
        let matcher = ZeroShotMatcher::new(self.match_model, config, self.prompt_override_dir.as_deref());
        let mut matched = matcher.match_patient(&set, &record)?;
        let result = matched.results.pop().expect("one criterion gives one result");
        if let Determination::Assessed(a) = &result.outcome {
            trace.matching = Some(a.clone());
        }
        Ok(MakarResult { result, trace, calls: matched.calls })
    }
}
