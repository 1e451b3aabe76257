//! MAKAR's augmentation module: the router (self-probe, then the choice of
//! an enabled augmentation agent), the augmentation agents (self-augment,
//! retrieval over a knowledge source, online search) and the critic loop,
//! as in Algorithm 1 (lines 3-23) and the prompts of Appendix C-B/C-C1-C3.
//!
//! The loop is bounded: at most `max_critic_rounds` rounds, each one
//! augmentation and one check. Every round is checked deterministically
//! first (the augmented text must contain the original criterion exactly);
//! only a text that passes goes to the critic agent, so a paraphrased
//! original is rejected whatever the critic says. The feedback of every
//! round is kept and given to the next augmentation.

use evident_llm::{chat_json, ChatRequest, LlmError, Message, StructuredAnswer};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::knowledge::Passage;
use super::MakarMatcher;
use crate::criteria::{CriteriaSet, Criterion};
use crate::zero_shot::MatchError;

/// What the router chose for a criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// The router's self-probe found the criterion detailed enough: it is
    /// used as written, with no augmentation.
    AsIs,
    SelfAugment,
    Retrieval,
    OnlineSearch,
}

impl Route {
    /// The name the router prompt and its schema use.
    pub fn as_str(self) -> &'static str {
        match self {
            Route::AsIs => "as_is",
            Route::SelfAugment => "self_augment",
            Route::Retrieval => "retrieval",
            Route::OnlineSearch => "online_search",
        }
    }

    fn from_agent(name: &str) -> Option<Route> {
        [Route::SelfAugment, Route::Retrieval, Route::OnlineSearch].into_iter().find(|r| r.as_str() == name)
    }
}

/// Who judged a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoundJudge {
    /// The deterministic check that the original criterion is contained
    /// verbatim (the critic is not asked when it fails).
    VerbatimCheck,
    /// The critic agent.
    Critic,
    /// No judgement was possible: an answer (augmentation or critic) never
    /// validated against its schema after repair.
    PipelineFailure,
}

/// One round of the critic loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriticRound {
    /// The augmented criterion judged in this round (empty when the
    /// augmentation answer never validated).
    pub augmented: String,
    pub accepted: bool,
    pub judge: RoundJudge,
    /// The critic's feedback, the verbatim check's finding, or the
    /// validation errors; given to the next augmentation.
    pub feedback: String,
}

/// The augmentation of one criterion, stored per trial and reused for every
/// patient.
///
/// Which text matching uses: the augmented text only when the critic
/// finally accepted it ([`Augmentation::accepted_text`]); otherwise (the
/// router found the criterion detailed enough, the loop ended at its bound
/// without acceptance, or an answer never validated) the original criterion,
/// verbatim. The last augmentation is kept in `augmented` for review even
/// when it was not accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Augmentation {
    pub criterion_id: String,
    /// The criterion's text, verbatim, when it was augmented. An
    /// augmentation whose original differs from the criterion's current
    /// text is stale and is not used.
    pub original: String,
    pub route: Route,
    /// The router's one-sentence reason.
    pub router_reason: String,
    /// The last augmented criterion ("Original Criterion: ... / Additional
    /// Explanation: ..."); `None` for [`Route::AsIs`] or when no augmentation
    /// answer validated.
    pub augmented: Option<String>,
    /// Every critic round in order, with its feedback.
    pub rounds: Vec<CriticRound>,
    /// Whether the last round was accepted.
    pub accepted: bool,
    /// The knowledge-base passages or online results given to the
    /// augmentation agent.
    pub sources: Vec<Passage>,
    /// Model calls spent, repairs included.
    pub calls: u32,
    /// Answers that never validated (router, augmentation, critic), with
    /// what was done instead.
    #[serde(default)]
    pub failures: Vec<String>,
}

impl Augmentation {
    /// The augmented text when the critic accepted it, else `None` (match
    /// on the original criterion).
    pub fn accepted_text(&self) -> Option<&str> {
        if self.accepted {
            self.augmented.as_deref()
        } else {
            None
        }
    }

    /// The text to show for `criterion`: the accepted augmentation when it
    /// belongs to this criterion and is not stale, else the original text.
    pub fn text_for<'c>(&'c self, criterion: &'c Criterion) -> &'c str {
        match self.accepted_text() {
            Some(text) if self.criterion_id == criterion.id && self.original == criterion.text => text,
            _ => &criterion.text,
        }
    }
}

/// The augmented criterion in the layout of Appendix C-B.
pub fn augmented_text(original: &str, explanation: &str) -> String {
    format!("Original Criterion: {}\nAdditional Explanation: {}", original.trim(), explanation.trim())
}

/// The deterministic half of the critic: the augmented text must contain
/// the original criterion exactly. Returns the feedback when it does not.
pub fn verbatim_problem(original: &str, augmented: &str) -> Option<String> {
    if augmented.contains(original) {
        None
    } else {
        Some(format!(
            "The original criterion was not preserved verbatim. Copy it character for character into original_criterion: {original}"
        ))
    }
}

const ROUTER_REASON_MAX: u64 = 300;
const ORIGINAL_MAX: u64 = 4000;
const EXPLANATION_MAX: u64 = 2500;
const FEEDBACK_MAX: u64 = 800;

fn router_schema(routes: &[Route]) -> Value {
    let agents: Vec<&str> = routes.iter().map(|r| r.as_str()).collect();
    json!({
        "type": "object",
        "properties": {
            "detailed_enough": {"type": "boolean"},
            "agent": {"type": "string", "enum": agents},
            "reason": {"type": "string", "maxLength": ROUTER_REASON_MAX}
        },
        "required": ["detailed_enough", "agent", "reason"],
        "additionalProperties": false
    })
}

fn augment_schema(original_len: usize) -> Value {
    // Room for the original copied exactly, whatever its length.
    let original_max = ORIGINAL_MAX.max(original_len as u64 + 50);
    json!({
        "type": "object",
        "properties": {
            "original_criterion": {"type": "string", "maxLength": original_max},
            "additional_explanation": {"type": "string", "maxLength": EXPLANATION_MAX}
        },
        "required": ["original_criterion", "additional_explanation"],
        "additionalProperties": false
    })
}

fn critic_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "accepted": {"type": "boolean"},
            "feedback": {"type": "string", "maxLength": FEEDBACK_MAX}
        },
        "required": ["accepted", "feedback"],
        "additionalProperties": false
    })
}

/// JSON Schemas of the augmentation-side answers, for inspection and tests.
pub fn schemas(routes: &[Route]) -> [(&'static str, Value); 3] {
    [("router", router_schema(routes)), ("augment", augment_schema(0)), ("critic", critic_schema())]
}

impl MakarMatcher<'_> {
    /// One structured call to the augmentation model. Requests carry no
    /// patient text. Counts the call and its repairs.
    fn ask_criteria_model(
        &self,
        criterion: &Criterion,
        template: &str,
        ctx: &Value,
        schema: &Value,
        max_tokens: u32,
        calls: &mut u32,
    ) -> Result<StructuredAnswer, MatchError> {
        let system = self.prompts.render("makar_criteria_system.prompt.md", ctx)?;
        let user = self.prompts.render(template, ctx)?;
        let request = ChatRequest::new(vec![Message::system(system), Message::user(user)])
            .with_max_tokens(max_tokens)
            .without_patient_text();
        let outcome = chat_json(self.augment_model, &request, schema, self.config.repair, &self.prompts)
            .map_err(|source| llm_error(criterion, source))?;
        *calls += match &outcome {
            StructuredAnswer::Valid { attempts, .. } => *attempts,
            StructuredAnswer::PipelineFailure(f) => f.attempts,
        };
        Ok(outcome)
    }

    /// Runs the augmentation module for one criterion: router, the chosen
    /// agent, and the critic loop.
    pub fn augment_criterion(&self, criterion: &Criterion) -> Result<Augmentation, MatchError> {
        if self.config.variant.paper() {
            return self.augment_criterion_paper(criterion);
        }
        let routes = self.enabled_routes();
        let mut calls = 0;
        let mut failures = Vec::new();
        let base_ctx = json!({
            "criterion": criterion.text,
            "criterion_type": criterion.criterion_type.as_str(),
            "agents": routes.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
        });
        let routed = self.ask_criteria_model(
            criterion,
            "makar_router.prompt.md",
            &base_ctx,
            &router_schema(&routes),
            self.config.max_tokens_router,
            &mut calls,
        )?;
        let (route, router_reason) = match routed {
            StructuredAnswer::Valid { value, .. } => {
                let reason = value["reason"].as_str().unwrap_or_default().to_string();
                if value["detailed_enough"].as_bool() == Some(true) {
                    (Route::AsIs, reason)
                } else {
                    // The schema's enum admits only enabled agents, so the
                    // name always parses; a disabled agent is refused below.
                    let route =
                        Route::from_agent(value["agent"].as_str().unwrap_or_default()).unwrap_or(Route::SelfAugment);
                    (route, reason)
                }
            }
            StructuredAnswer::PipelineFailure(f) => {
                failures.push(format!("router answer never validated ({}); self-augment used", f.errors.join("; ")));
                (Route::SelfAugment, String::new())
            }
        };
        let mut augmentation = Augmentation {
            criterion_id: criterion.id.clone(),
            original: criterion.text.clone(),
            route,
            router_reason,
            augmented: None,
            rounds: Vec::new(),
            accepted: false,
            sources: Vec::new(),
            calls,
            failures,
        };
        if route != Route::AsIs {
            self.run_agent(criterion, &mut augmentation)?;
        }
        Ok(augmentation)
    }

    /// Skips the router and augments with the given agent (for a user who
    /// names the agent, and for tests). A disabled agent is refused:
    /// [`MatchError::Knowledge`] for retrieval without a knowledge source,
    /// [`MatchError::OnlineSearch`] for online search without an endpoint.
    /// [`Route::AsIs`] returns the criterion unaugmented.
    pub fn augment_with(&self, criterion: &Criterion, route: Route) -> Result<Augmentation, MatchError> {
        let mut augmentation = Augmentation {
            criterion_id: criterion.id.clone(),
            original: criterion.text.clone(),
            route,
            router_reason: "chosen by the caller".into(),
            augmented: None,
            rounds: Vec::new(),
            accepted: false,
            sources: Vec::new(),
            calls: 0,
            failures: Vec::new(),
        };
        if route != Route::AsIs {
            self.run_agent(criterion, &mut augmentation)?;
        }
        Ok(augmentation)
    }

    fn run_agent(&self, criterion: &Criterion, augmentation: &mut Augmentation) -> Result<(), MatchError> {
        augmentation.sources = self.gather_sources(criterion, augmentation.route)?;
        self.critic_loop(criterion, augmentation)
    }

    /// The passages an agent augments from: none for self-augment.
    pub(crate) fn gather_sources(&self, criterion: &Criterion, route: Route) -> Result<Vec<Passage>, MatchError> {
        match route {
            Route::AsIs | Route::SelfAugment => Ok(Vec::new()),
            Route::Retrieval => {
                let knowledge = self.knowledge.ok_or_else(|| {
                    MatchError::Knowledge(format!(
                        "criterion {}: the retrieval agent needs a knowledge base; index one with `evident kb index` and pass it",
                        criterion.id
                    ))
                })?;
                knowledge.search(&criterion.text, self.config.knowledge_top_k)
            }
            Route::OnlineSearch => {
                let online = self.online.ok_or_else(|| {
                    MatchError::OnlineSearch(format!(
                        "criterion {}: online search is off; configure a search endpoint (SearXNG JSON) to enable it",
                        criterion.id
                    ))
                })?;
                online.search(&criterion.text, self.config.online_top_k)
            }
        }
    }

    fn critic_loop(&self, criterion: &Criterion, a: &mut Augmentation) -> Result<(), MatchError> {
        let rounds = self.config.max_critic_rounds.max(1);
        let source_kind = a.route.as_str();
        let mut previous: Option<String> = None;
        let mut feedback = String::new();
        for _ in 0..rounds {
            let ctx = json!({
                "criterion": criterion.text,
                "criterion_type": criterion.criterion_type.as_str(),
                "sources": a.sources,
                "source_kind": source_kind,
                "previous": previous,
                "feedback": feedback,
            });
            let mut calls = 0;
            let answer = self.ask_criteria_model(
                criterion,
                "makar_augment.prompt.md",
                &ctx,
                &augment_schema(criterion.text.len()),
                self.config.max_tokens_augment,
                &mut calls,
            )?;
            a.calls += calls;
            let augmented = match answer {
                StructuredAnswer::Valid { value, .. } => augmented_text(
                    value["original_criterion"].as_str().unwrap_or_default(),
                    value["additional_explanation"].as_str().unwrap_or_default(),
                ),
                StructuredAnswer::PipelineFailure(f) => {
                    let errors = f.errors.join("; ");
                    a.failures.push(format!("augmentation answer never validated ({errors})"));
                    a.rounds.push(CriticRound {
                        augmented: String::new(),
                        accepted: false,
                        judge: RoundJudge::PipelineFailure,
                        feedback: format!("The answer was not valid JSON of the requested shape: {errors}"),
                    });
                    feedback = a.rounds.last().expect("just pushed").feedback.clone();
                    continue;
                }
            };
            a.augmented = Some(augmented.clone());
            let round = match verbatim_problem(&criterion.text, &augmented) {
                Some(problem) => CriticRound {
                    augmented: augmented.clone(),
                    accepted: false,
                    judge: RoundJudge::VerbatimCheck,
                    feedback: problem,
                },
                None => {
                    let ctx = json!({
                        "criterion": criterion.text,
                        "criterion_type": criterion.criterion_type.as_str(),
                        "revised": augmented,
                    });
                    let mut calls = 0;
                    let verdict = self.ask_criteria_model(
                        criterion,
                        "makar_critic.prompt.md",
                        &ctx,
                        &critic_schema(),
                        self.config.max_tokens_critic,
                        &mut calls,
                    )?;
                    a.calls += calls;
                    match verdict {
                        StructuredAnswer::Valid { value, .. } => CriticRound {
                            augmented: augmented.clone(),
                            accepted: value["accepted"].as_bool() == Some(true),
                            judge: RoundJudge::Critic,
                            feedback: value["feedback"].as_str().unwrap_or_default().to_string(),
                        },
                        StructuredAnswer::PipelineFailure(f) => {
                            let errors = f.errors.join("; ");
                            a.failures.push(format!("critic answer never validated ({errors}); round not accepted"));
                            CriticRound {
                                augmented: augmented.clone(),
                                accepted: false,
                                judge: RoundJudge::PipelineFailure,
                                feedback: "The reviewer's verdict could not be read; revise the criterion again, keeping the original exactly.".into(),
                            }
                        }
                    }
                }
            };
            let accepted = round.accepted;
            feedback = round.feedback.clone();
            a.rounds.push(round);
            if accepted {
                a.accepted = true;
                return Ok(());
            }
            previous = Some(augmented);
        }
        a.accepted = false;
        Ok(())
    }

    /// Augments every criterion of a set, in order (criteria with a
    /// structured form, such as age or sex, too: their text is what the
    /// matcher shows).
    pub fn augment(&self, set: &CriteriaSet) -> Result<Vec<Augmentation>, MatchError> {
        set.criteria.iter().map(|c| self.augment_criterion(c)).collect()
    }
}

fn llm_error(criterion: &Criterion, source: LlmError) -> MatchError {
    MatchError::Llm { subject: format!("the augmentation of criterion {}", criterion.id), source }
}
