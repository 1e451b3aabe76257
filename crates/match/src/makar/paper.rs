//! MAKAR exactly as the paper gives it (seed paper 000, Appendix C and
//! Algorithm 1): the strategies `makar`, `makar-aug`, `makar-reason` and
//! `makar-zero-shot`. Every prompt is the appendix text, verbatim, as a file
//! (`prompts/makar_paper_*.prompt.md`); the only changes are the record and
//! criterion filled in where the appendix writes "…", and "Criterion" where
//! the appendix misspells it "Ctiterion".
//!
//! - Router (C-C1): one of the three labels Retrieval, Online Search,
//!   Self-Augment; there is no "detailed enough" answer (the prompt has
//!   none, although Algorithm 1, line 5, mentions one). An agent that is not
//!   enabled here (retrieval without a knowledge base, online search without
//!   an endpoint) falls back to self-augmentation, and the augmentation
//!   records that.
//! - Augmentation (C-C2, the same prompt as C-B) answers free text in the
//!   "Original Criterion: … / Additional Explanation: …" layout. Evident
//!   additions, outside the appendix's sentences: the retrieved passages
//!   when the router chose retrieval or online search (the paper gives no
//!   prompt for them), and, on a re-augmentation, the rejected revision
//!   (Algorithm 1, line 20, "Re-augment(C_orig, feedback)"; the critic's
//!   only feedback is its 0).
//! - Critic (C-C3) answers 1 (accept) or 0 (reject); the loop repeats until
//!   it accepts, bounded here by `max_critic_rounds`; an augmentation never
//!   accepted within the bound is not used (matching sees the original).
//!   An augmentation whose answer never validates (e.g. it loops to the
//!   token limit) ends the loop when decoding is deterministic: the next
//!   round would be the same request and the same answer.
//! - Reasoning (C-C4), with the insufficiency rule, answers free text.
//! - Matching (C-C5) answers 1 or 0; 1 becomes MET and 0 NOT MET (for an
//!   exclusion, MET means the patient has the excluding condition, as
//!   everywhere in Evident). The paper never answers NOT ENOUGH INFORMATION.
//! - Supervision (Algorithm 1, lines 33-37) has no prompt in the paper; ours
//!   is written in C-C5's words and answers 1 or 0: the matching answer
//!   again approves it, the other answer corrects it.
//!
//! The paper's agents give no confidence and cite no sentences: decisions
//! carry confidence "medium" (a placeholder, not a model output), no
//! evidence, and the reasoning agent's text as the rationale.
//!
//! Answers are constrained by JSON Schema like every other answer in
//! Evident: a 0/1 answer is the JSON number, a label or a free text is a
//! JSON string.

use evident_llm::{chat_json, ChatRequest, Message, StructuredAnswer};
use evident_llm::{chat_json_with_logprobs, StructuredLogprobs, TokenLogprob, MAX_TOP_LOGPROBS};
use serde_json::{json, Value};

use super::augment::{Augmentation, CriticRound, RoundJudge, Route};
use super::reason::{MakarResult, MakarTrace, Reasoning, SupervisionVerdict};
use super::{MakarMatcher, Variant};
use crate::criteria::Criterion;
use crate::decision::{Assessment, Confidence, CriterionResult, Decision, DecisionFailure, Determination};
use crate::zero_shot::{record_context, MatchError, NoteText};

/// The paper's templates, by agent.
pub const PAPER_PROMPTS: &[(&str, &str)] = &[
    ("makar_paper_record.prompt.md", include_str!("../../prompts/makar_paper_record.prompt.md")),
    ("makar_paper_zero_shot.prompt.md", include_str!("../../prompts/makar_paper_zero_shot.prompt.md")),
    ("makar_paper_router.prompt.md", include_str!("../../prompts/makar_paper_router.prompt.md")),
    ("makar_paper_augment.prompt.md", include_str!("../../prompts/makar_paper_augment.prompt.md")),
    ("makar_paper_critic.prompt.md", include_str!("../../prompts/makar_paper_critic.prompt.md")),
    ("makar_paper_reasoning.prompt.md", include_str!("../../prompts/makar_paper_reasoning.prompt.md")),
    ("makar_paper_matching.prompt.md", include_str!("../../prompts/makar_paper_matching.prompt.md")),
    ("makar_paper_supervision.prompt.md", include_str!("../../prompts/makar_paper_supervision.prompt.md")),
];

/// The router's labels (C-C1), in the prompt's order.
pub const ROUTER_LABELS: [&str; 3] = ["Retrieval", "Online Search", "Self-Augment"];

const TEXT_MAX: u64 = 4000;

fn binary_schema() -> Value {
    json!({"type": "integer", "enum": [0, 1]})
}

fn text_schema(max: u64) -> Value {
    json!({"type": "string", "maxLength": max})
}

fn router_schema() -> Value {
    json!({"type": "string", "enum": ROUTER_LABELS})
}

fn route_of(label: &str) -> Route {
    match label {
        "Retrieval" => Route::Retrieval,
        "Online Search" => Route::OnlineSearch,
        _ => Route::SelfAugment,
    }
}

/// The label a 0/1 answer stands for.
pub fn decision_of(bit: i64) -> Decision {
    if bit == 1 {
        Decision::Met
    } else {
        Decision::NotMet
    }
}

fn bit_of(decision: Decision) -> i64 {
    i64::from(decision == Decision::Met)
}

fn attempts(outcome: &StructuredAnswer) -> u32 {
    match outcome {
        StructuredAnswer::Valid { attempts, .. } => *attempts,
        StructuredAnswer::PipelineFailure(f) => f.attempts,
    }
}

impl MakarMatcher<'_> {
    /// Renders one of the paper's single-message prompts.
    pub fn render_paper(&self, template: &str, ctx: &Value, max_tokens: u32) -> Result<ChatRequest, MatchError> {
        let user = self.prompts.render(&format!("makar_paper_{template}.prompt.md"), ctx)?;
        Ok(ChatRequest::new(vec![Message::user(user.trim_end().to_string())]).with_max_tokens(max_tokens))
    }

    fn ask_paper_criteria(
        &self,
        criterion: &Criterion,
        template: &str,
        ctx: &Value,
        schema: &Value,
        max_tokens: u32,
        calls: &mut u32,
    ) -> Result<StructuredAnswer, MatchError> {
        let request = self.render_paper(template, ctx, max_tokens)?.without_patient_text();
        let outcome =
            chat_json(self.augment_model, &request, schema, self.config.repair, &self.prompts).map_err(|source| {
                MatchError::Llm { subject: format!("the augmentation of criterion {}", criterion.id), source }
            })?;
        *calls += attempts(&outcome);
        Ok(outcome)
    }

    /// The paper's augmentation module for one criterion (Algorithm 1,
    /// lines 3-23 without the "detailed enough" exit).
    pub fn augment_criterion_paper(&self, criterion: &Criterion) -> Result<Augmentation, MatchError> {
        let mut calls = 0;
        let mut failures = Vec::new();
        let ctx = json!({"criterion": criterion.text});
        let routed = self.ask_paper_criteria(
            criterion,
            "router",
            &ctx,
            &router_schema(),
            self.config.max_tokens_router,
            &mut calls,
        )?;
        let (mut route, label) = match routed {
            StructuredAnswer::Valid { value, .. } => {
                let label = value.as_str().unwrap_or_default().to_string();
                (route_of(&label), label)
            }
            StructuredAnswer::PipelineFailure(f) => {
                failures.push(format!("router answer never validated ({}); self-augment used", f.errors.join("; ")));
                (Route::SelfAugment, String::new())
            }
        };
        let enabled = self.enabled_routes();
        if !enabled.contains(&route) {
            failures.push(format!("the router chose {label}, which is not enabled here; self-augment used"));
            route = Route::SelfAugment;
        }
        let mut a = Augmentation {
            criterion_id: criterion.id.clone(),
            original: criterion.text.clone(),
            route,
            router_reason: label,
            augmented: None,
            rounds: Vec::new(),
            accepted: false,
            sources: Vec::new(),
            calls,
            failures,
        };
        a.sources = self.gather_sources(criterion, route)?;
        let mut previous: Option<String> = None;
        for _ in 0..self.config.max_critic_rounds.max(1) {
            let ctx = json!({
                "criterion": criterion.text,
                "sources": a.sources,
                "source_kind": route.as_str(),
                "previous": previous,
            });
            let mut calls = 0;
            let answer = self.ask_paper_criteria(
                criterion,
                "augment",
                &ctx,
                &text_schema(TEXT_MAX),
                self.config.max_tokens_augment,
                &mut calls,
            )?;
            a.calls += calls;
            let augmented = match answer {
                StructuredAnswer::Valid { value, .. } => value.as_str().unwrap_or_default().trim().to_string(),
                StructuredAnswer::PipelineFailure(f) => {
                    let errors = f.errors.join("; ");
                    a.failures.push(format!("augmentation answer never validated ({errors})"));
                    a.rounds.push(CriticRound {
                        augmented: String::new(),
                        accepted: false,
                        judge: RoundJudge::PipelineFailure,
                        feedback: errors,
                    });
                    // The next round would send this very request again (no
                    // new revision to show), and a deterministic request
                    // repeats its answer: on the embedded model an answer
                    // that loops to the token limit looped in every round.
                    if self.render_paper("augment", &ctx, self.config.max_tokens_augment)?.is_deterministic() {
                        a.failures.push("not asked again: the same deterministic request repeats its answer".into());
                        break;
                    }
                    continue;
                }
            };
            a.augmented = Some(augmented.clone());
            let ctx = json!({"criterion": criterion.text, "revised": augmented});
            let mut calls = 0;
            let verdict = self.ask_paper_criteria(
                criterion,
                "critic",
                &ctx,
                &binary_schema(),
                self.config.max_tokens_critic,
                &mut calls,
            )?;
            a.calls += calls;
            let round = match verdict {
                StructuredAnswer::Valid { value, .. } => CriticRound {
                    augmented: augmented.clone(),
                    accepted: value.as_i64() == Some(1),
                    judge: RoundJudge::Critic,
                    feedback: value.to_string(),
                },
                StructuredAnswer::PipelineFailure(f) => {
                    let errors = f.errors.join("; ");
                    a.failures.push(format!("critic answer never validated ({errors}); round not accepted"));
                    CriticRound {
                        augmented: augmented.clone(),
                        accepted: false,
                        judge: RoundJudge::PipelineFailure,
                        feedback: errors,
                    }
                }
            };
            let accepted = round.accepted;
            a.rounds.push(round);
            if accepted {
                a.accepted = true;
                return Ok(a);
            }
            previous = Some(augmented);
        }
        Ok(a)
    }

    /// The paper's reasoning module, or C-A zero-shot matching, for one
    /// criterion (Algorithm 1, lines 24-38).
    pub(crate) fn match_criterion_paper(
        &self,
        criterion: &Criterion,
        criterion_text: &str,
        notes: &[&NoteText],
        mut trace: MakarTrace,
    ) -> Result<MakarResult, MatchError> {
        let variant = self.config.variant;
        let (shown, _) = record_context(notes);
        let mut calls = 0;
        let result = |outcome: Determination| CriterionResult {
            criterion_id: criterion.id.clone(),
            criterion_type: criterion.criterion_type,
            document_id: None,
            document_date: None,
            outcome,
            unresolved_citations: Vec::new(),
        };
        let failed = |f: evident_llm::PipelineFailure, agent: &str| {
            let errors = f.errors.iter().map(|e| format!("{agent} agent: {e}")).collect();
            Determination::Failed(DecisionFailure { errors, raw_text: f.raw_text })
        };
        let assessment = |decision: Decision, rationale: String| Assessment {
            medications_and_supplements: Vec::new(),
            rationale,
            decision,
            confidence: Confidence::Medium,
            evidence: Vec::new(),
        };
        let exemplars: Vec<Value> =
            trace.exemplars.iter().map(crate::exemplars::ShownExemplar::prompt_context).collect();
        let mut ctx = json!({"notes": shown, "criterion": criterion_text, "exemplars": exemplars, "binary": true});

        if matches!(variant, Variant::PaperAug | Variant::PaperZeroShot) {
            let mut request = self.render_paper("zero_shot", &ctx, self.config.max_tokens_matching)?;
            if self.config.probabilities {
                request = request.with_logprobs(MAX_TOP_LOGPROBS);
            }
            let answer = self.ask_paper_patient_logprobs(&request, &binary_schema(), notes, &mut calls)?;
            if let (StructuredAnswer::Valid { .. }, Some(tokens)) = (&answer.answer, &answer.logprobs) {
                trace.p_met = p_met_of_binary(tokens);
            }
            return Ok(match answer.answer {
                StructuredAnswer::Valid { value, .. } => {
                    let a = assessment(decision_of(value.as_i64().unwrap_or(0)), String::new());
                    trace.matching = Some(a.clone());
                    MakarResult { result: result(Determination::Assessed(a)), trace, calls }
                }
                StructuredAnswer::PipelineFailure(f) => {
                    MakarResult { result: result(failed(f, "zero-shot matching")), trace, calls }
                }
            });
        }

        // Reasoning agent (C-C4); the worked examples are the matching
        // agent's only.
        let reasoning_ctx = json!({"notes": ctx["notes"], "criterion": criterion_text});
        let request = self.render_paper("reasoning", &reasoning_ctx, self.config.max_tokens_reasoning)?;
        let reasoning = match self.ask_paper_patient(&request, &text_schema(TEXT_MAX), notes, &mut calls)? {
            StructuredAnswer::Valid { value, .. } => value.as_str().unwrap_or_default().trim().to_string(),
            StructuredAnswer::PipelineFailure(f) => {
                return Ok(MakarResult { result: result(failed(f, "reasoning")), trace, calls });
            }
        };
        trace.reasoning = Some(Reasoning { concepts: Vec::new(), summary: reasoning.clone() });

        // Matching agent (C-C5).
        ctx["reasoning"] = json!(reasoning);
        let request = self.render_paper("matching", &ctx, self.config.max_tokens_matching)?;
        let matched = match self.ask_paper_patient(&request, &binary_schema(), notes, &mut calls)? {
            StructuredAnswer::Valid { value, .. } => decision_of(value.as_i64().unwrap_or(0)),
            StructuredAnswer::PipelineFailure(f) => {
                return Ok(MakarResult { result: result(failed(f, "matching")), trace, calls });
            }
        };
        trace.matching = Some(assessment(matched, reasoning.clone()));

        // Supervision (Algorithm 1, lines 33-37).
        ctx["decision"] = json!(bit_of(matched));
        let request = self.render_paper("supervision", &ctx, self.config.max_tokens_supervision)?;
        let (decision, verdict) = match self.ask_paper_patient(&request, &binary_schema(), notes, &mut calls)? {
            StructuredAnswer::Valid { value, .. } => {
                let supervised = decision_of(value.as_i64().unwrap_or(0));
                if supervised == matched {
                    (matched, SupervisionVerdict::Approved { reason: String::new() })
                } else {
                    let reason = format!("supervision answered {}", bit_of(supervised));
                    (
                        supervised,
                        SupervisionVerdict::Corrected { decision: supervised, confidence: Confidence::Medium, reason },
                    )
                }
            }
            StructuredAnswer::PipelineFailure(f) => (matched, SupervisionVerdict::Failed { errors: f.errors }),
        };
        trace.supervision = Some(verdict);
        Ok(MakarResult { result: result(Determination::Assessed(assessment(decision, reasoning))), trace, calls })
    }

    fn ask_paper_patient(
        &self,
        request: &ChatRequest,
        schema: &Value,
        notes: &[&NoteText],
        calls: &mut u32,
    ) -> Result<StructuredAnswer, MatchError> {
        self.ask_paper_patient_logprobs(request, schema, notes, calls).map(|a| a.answer)
    }

    fn ask_paper_patient_logprobs(
        &self,
        request: &ChatRequest,
        schema: &Value,
        notes: &[&NoteText],
        calls: &mut u32,
    ) -> Result<StructuredLogprobs, MatchError> {
        let outcome = chat_json_with_logprobs(self.match_model, request, schema, self.config.repair, &self.prompts)
            .map_err(|source| {
                let subject = match notes.first() {
                    Some(n) => format!("the record of document {}", n.document_id),
                    None => "an empty record".to_string(),
                };
                MatchError::Llm { subject, source }
            })?;
        *calls += attempts(&outcome.answer);
        Ok(outcome)
    }
}

/// P(MET) of a 0/1 answer: at the answer's first token, the model's
/// probability of "1" renormalised over "0" and "1" (the two answers the
/// prompt allows; the JSON grammar makes the first token the digit). A
/// digit missing from the listed alternatives is given the lowest listed
/// log-probability, an upper bound on its own. `None` when the first
/// token lists neither digit.
pub fn p_met_of_binary(tokens: &[TokenLogprob]) -> Option<f64> {
    let first = tokens.first()?;
    let (one, zero) = (first.logprob_of("1"), first.logprob_of("0"));
    if one.is_none() && zero.is_none() {
        return None;
    }
    let floor = first.top.iter().map(|t| t.logprob).chain([first.logprob]).fold(f32::INFINITY, f32::min);
    let (one, zero) = (f64::from(one.unwrap_or(floor)), f64::from(zero.unwrap_or(floor)));
    let max = one.max(zero);
    let (e1, e0) = ((one - max).exp(), (zero - max).exp());
    Some(e1 / (e1 + e0))
}
