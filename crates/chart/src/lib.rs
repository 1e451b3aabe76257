//! Longitudinal chart questions: a clinician asks about one patient's whole
//! record and gets the paper's two-line answer (`Answer:` / `Reasoning:`)
//! whose every citation resolves to stored text or a stored lab value.
//!
//! - [`skills`]: the skill library as data (validated on load).
//! - [`calculators`]: ISS, R-ISS, R2-ISS, HCT-CI, Charlson, CHA2DS2-VASc,
//!   eGFR (CKD-EPI 2021), BMI, HbA1c glycaemic range, CKD G stage.
//! - [`conditions`]: phrases that name another condition than the word
//!   they end in ("pulmonary hypertension"), as data.
//! - [`criteria`]: eligibility criteria sets as data, evaluated on the
//!   record as deterministic checks (three-valued: Yes / No / Unclear).
//! - [`tools`]: report retrieval (BM25 with kind and date filters), lab
//!   query, structured records, calculators, all cut off at the reference
//!   date.
//! - [`policy`]: the deterministic policy engine (select/abstain/conflict).
//! - [`answer`]: the two-line format and citation numbers.
//! - `agent`: Phases I-IV.
//! - [`scoring`]: binary and list-F1 scoring against reference answers,
//!   cluster-bootstrap intervals and paired differences.
//! - [`bank`]: the question-bank format, the templates and the generator.
//! - [`evaluate`]: stored answers scored against a bank, with the paper's
//!   statistics per level, category and record-length bin.
//!
//! The entry point is [`ask`]: a question, a [`RecordView`] (store,
//! patient, reference date), a model and a [`Method`]; it returns a
//! [`ChartAnswer`] with the citations resolved, the retrieved-but-not-cited
//! documents, the trace and the usage. Methods: the agent (with its
//! ablations), the LLM baseline (no record), full context (every
//! document and lab, newest first, until the context is full) and simple
//! RAG (single-pass dense retrieval).

mod agent;
pub mod answer;
pub mod bank;
pub mod calculators;
pub mod conditions;
pub mod criteria;
pub mod evaluate;
pub mod policy;
mod rag;
pub mod report;
pub mod scoring;
pub mod skills;
pub mod tools;

use std::time::Instant;

use evident_llm::{LlmError, Message, PipelineFailure, PromptError, StructuredModel};
use evident_store::LabQuery;
use serde::Serialize;
use serde_json::json;

pub use agent::{
    context_items, prompts, question_names, recorded_yes, yes_no_lookup, AgentConfig, Assessment, Memory, Plan,
    PlanStep, Round, Trace, Usage, CHART_PROMPTS,
};
pub use answer::{parse_two_line, TwoLine};
pub use skills::{SkillError, SkillLibrary};
pub use tools::{Age, Evidence, RecordView, ToolName};

use agent::{Ctx, Metered, Produced};

/// Why a question could not be answered at all (a pipeline failure is not
/// an error: it is an answer with status `pipeline_failure`).
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error(transparent)]
    Store(#[from] evident_store::StoreError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Retrieve(#[from] evident_retrieve::RetrieveError),
    /// The method needs something it was not given.
    #[error("{0}")]
    Setup(String),
}

/// How a question is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// The agent, Phases I-IV.
    Agent,
    /// Ablations of the agent (the paper's Supplementary Table 5).
    AgentNoSkills,
    AgentAllSkills,
    AgentNoFilters,
    AgentNoCalculators,
    AgentNoMemory,
    AgentReactive,
    /// The agent with the paper's broadening only (k, keywords, date
    /// limit, after empty results): Evident's last level, no kind filter,
    /// and its broadening after results that do not name the subject,
    /// switched off.
    AgentPaperBroadening,
    /// The agent with the paper's plan schema: one argument object shared
    /// by every tool and no calculator rewrite (Evident's typed plan,
    /// [`AgentConfig::typed_plan`], switched off).
    AgentPaperPlan,
    /// The agent with the paper's temporal scopes as the model writes them
    /// (Evident's whole-history scope, [`AgentConfig::history_scope`],
    /// switched off).
    AgentPaperScope,
    /// The agent with the model's report queries as written (Evident's
    /// query expansion from the parsing skills,
    /// [`AgentConfig::expand_queries`], switched off).
    AgentPaperQueries,
    /// The agent with its constrained answer decoded reasoning first
    /// ([`AgentConfig::reasoning_first`], Evident's variant, off by
    /// default).
    AgentReasoningFirst,
    /// The LLM baseline: no record at all.
    Baseline,
    /// Every document and lab value, newest first, until the context is full.
    FullContext,
    /// Single-pass dense retrieval of the question (top 10 sections), no
    /// rewriting or reranking.
    SimpleRag,
    /// Up to eight rewritten queries, hybrid trigram-BM25 and dense
    /// retrieval, reranking, top 20 (`rag::advanced`).
    AdvancedRag,
    /// Sub-queries, hybrid retrieval, reranking and a multi-round
    /// sufficiency loop (`rag::iterative`).
    IterativeRag,
}

impl Method {
    pub const ALL: [Method; 17] = [
        Method::Agent,
        Method::AgentNoSkills,
        Method::AgentAllSkills,
        Method::AgentNoFilters,
        Method::AgentNoCalculators,
        Method::AgentNoMemory,
        Method::AgentReactive,
        Method::AgentPaperBroadening,
        Method::AgentPaperPlan,
        Method::AgentPaperScope,
        Method::AgentPaperQueries,
        Method::AgentReasoningFirst,
        Method::Baseline,
        Method::FullContext,
        Method::SimpleRag,
        Method::AdvancedRag,
        Method::IterativeRag,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Agent => "agent",
            Method::AgentNoSkills => "agent-no-skills",
            Method::AgentAllSkills => "agent-all-skills",
            Method::AgentNoFilters => "agent-no-filters",
            Method::AgentNoCalculators => "agent-no-calculators",
            Method::AgentNoMemory => "agent-no-memory",
            Method::AgentReactive => "agent-reactive",
            Method::AgentPaperBroadening => "agent-paper-broadening",
            Method::AgentPaperPlan => "agent-paper-plan",
            Method::AgentPaperScope => "agent-paper-scope",
            Method::AgentPaperQueries => "agent-paper-queries",
            Method::AgentReasoningFirst => "agent-reasoning-first",
            Method::Baseline => "baseline",
            Method::FullContext => "full-context",
            Method::SimpleRag => "simple-rag",
            Method::AdvancedRag => "advanced-rag",
            Method::IterativeRag => "iterative-rag",
        }
    }

    pub fn parse(text: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == text.trim())
    }

    /// The agent configuration this method runs with (agent methods only).
    pub fn agent_config(self, base: &AgentConfig) -> Option<AgentConfig> {
        let mut c = base.clone();
        match self {
            Method::Agent => {}
            Method::AgentNoSkills => c.use_skills = false,
            Method::AgentAllSkills => c.all_skills = true,
            Method::AgentNoFilters => c.use_filters = false,
            Method::AgentNoCalculators => c.use_calculators = false,
            Method::AgentNoMemory => c.use_memory = false,
            Method::AgentReactive => c.use_plan = false,
            Method::AgentPaperBroadening => {
                c.broaden_kind = false;
                c.broaden_unnamed = false;
            }
            Method::AgentPaperPlan => c.typed_plan = false,
            Method::AgentPaperScope => c.history_scope = false,
            Method::AgentPaperQueries => c.expand_queries = false,
            Method::AgentReasoningFirst => c.reasoning_first = true,
            Method::Baseline | Method::FullContext | Method::SimpleRag | Method::AdvancedRag | Method::IterativeRag => {
                return None
            }
        }
        Some(c)
    }
}

/// Where a citation points.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CitedSource {
    /// Stored text: a section (or one structured line) of a document.
    Text {
        document_id: String,
        section_id: Option<i64>,
        /// The sentences inside the cited span.
        sentence_ids: Vec<i64>,
        start: usize,
        end: usize,
        /// `document.text[start..end]`, read back from the store.
        text: String,
        date: Option<String>,
    },
    /// A stored lab value.
    Lab { concept: String, name: String, value: String, unit: Option<String>, time: String, source_id: String },
    /// A calculator result; `used` are the stored values it read.
    Calculation { calculator: String, output: serde_json::Value, used: Vec<CitedSource> },
    /// The patient's stored demographics a calculator read (age at the
    /// reference date, sex), read back from the store.
    Patient { patient_id: String, birth_date: Option<String>, sex: Option<String>, text: String },
}

/// One `[n]` of the reasoning.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Citation {
    pub number: usize,
    /// False when `n` names no context node (a possibly hallucinated
    /// citation): kept and flagged, never dropped.
    pub supported: bool,
    pub source: Option<CitedSource>,
}

impl Citation {
    fn resolve(view: &RecordView<'_>, number: usize, nodes: &[Evidence]) -> Result<Citation, ChartError> {
        let Some(node) = number.checked_sub(1).and_then(|i| nodes.get(i)) else {
            return Ok(Citation { number, supported: false, source: None });
        };
        let source = view.resolve(node)?;
        Ok(Citation { number, supported: source.is_some(), source })
    }
}

impl RecordView<'_> {
    /// Reads a node back from the store: its text at its span (which must
    /// equal what the model was shown), the sentences inside it; a lab
    /// value by its source id. `None` if it no longer resolves.
    fn resolve(&self, node: &Evidence) -> Result<Option<CitedSource>, ChartError> {
        let store = self.lock();
        Ok(match node {
            Evidence::Section { document_id, section_id, start, end, text, date, .. }
            | Evidence::Entry { document_id, sentence_id: section_id, start, end, text, date, .. } => {
                let is_section = matches!(node, Evidence::Section { .. });
                let Some(doc) = store.document(document_id)? else { return Ok(None) };
                let Some(stored) = doc.text.get(*start..*end) else { return Ok(None) };
                if stored.trim() != text.trim() {
                    return Ok(None);
                }
                let sentence_ids = store
                    .sentences(document_id)?
                    .into_iter()
                    .filter(|s| s.start < *end && s.end > *start)
                    .map(|s| s.ordinal)
                    .collect();
                Some(CitedSource::Text {
                    document_id: document_id.clone(),
                    section_id: is_section.then_some(*section_id),
                    sentence_ids,
                    start: *start,
                    end: *end,
                    text: stored.to_string(),
                    date: date.map(agent::date_of),
                })
            }
            Evidence::Lab { concept, original_name, value, unit, time, source_id, .. } => {
                let labs =
                    store.labs(&LabQuery { patient_id: self.patient_id().to_string(), ..LabQuery::default() })?;
                labs.iter().any(|l| &l.source_id == source_id && l.time == *time).then(|| CitedSource::Lab {
                    concept: concept.clone(),
                    name: original_name.clone(),
                    value: value.clone(),
                    unit: unit.clone(),
                    time: time.format("%Y-%m-%d %H:%M").to_string(),
                    source_id: source_id.clone(),
                })
            }
            Evidence::Calculation { calculator, output, used, .. } => {
                drop(store);
                let mut sources = Vec::new();
                for u in used {
                    match self.resolve(u)? {
                        Some(s) => sources.push(s),
                        None => return Ok(None),
                    }
                }
                Some(CitedSource::Calculation { calculator: calculator.clone(), output: output.clone(), used: sources })
            }
            Evidence::Patient { patient_id, birth_date, sex, as_of } => {
                let stored = store.patient(patient_id)?;
                stored.filter(|p| &p.birth_date == birth_date && &p.sex == sex).map(|p| CitedSource::Patient {
                    patient_id: p.id,
                    birth_date: p.birth_date.map(|d| d.to_string()),
                    text: tools::patient_text(p.birth_date, p.sex.as_deref(), *as_of),
                    sex: p.sex,
                })
            }
        })
    }
}

/// A document the method retrieved but the answer does not cite.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievedDocument {
    pub document_id: String,
    pub date: Option<String>,
    pub kind: String,
}

/// The answer to one question.
#[derive(Debug, Clone, Serialize)]
pub struct ChartAnswer {
    pub patient: String,
    pub question: String,
    pub as_of: String,
    pub method: Method,
    /// `answered` or `pipeline_failure`.
    pub status: String,
    pub answer: Option<String>,
    pub reasoning: Option<String>,
    /// The model's last text, exactly as written.
    pub raw_text: String,
    pub citations: Vec<Citation>,
    pub unsupported_citations: usize,
    pub retrieved_not_cited: Vec<RetrievedDocument>,
    /// The numbered context the answer could cite.
    pub context: Vec<Evidence>,
    pub trace: Trace,
    pub usage: Usage,
    pub failure: Option<Vec<String>>,
}

/// What [`ask`] needs besides the record view.
pub struct Question<'a> {
    pub text: &'a str,
    /// The question's answer schema (the paper gives it with the question;
    /// every method's answer prompt states it, and Evident's constrained
    /// answer step decodes the answer under it). `None`: not stated; a
    /// question that names a criteria set is then taken as Yes / No /
    /// Unclear, the answer its check gives.
    pub answer_type: Option<bank::AnswerType>,
    pub method: Method,
    pub skills: &'a SkillLibrary,
    pub config: &'a AgentConfig,
    /// A one-line patient description for the prompts (sex, age).
    pub patient: String,
    /// The dense retriever's embedder (simple RAG only).
    pub embedder: Option<&'a dyn evident_llm::Embedder>,
}

/// Answers one question about the record in `view` with `model`.
pub fn ask(
    model: StructuredModel<'_>,
    prompts: &evident_llm::Prompts,
    view: &RecordView<'_>,
    question: &Question<'_>,
) -> Result<ChartAnswer, ChartError> {
    let start = Instant::now();
    let metered = Metered::new(model.chat);
    let metered_model = StructuredModel::new(&metered, model.failures);
    let config = question.method.agent_config(question.config).unwrap_or_else(|| {
        // The comparators' decoding, as the paper gives it.
        AgentConfig { temperature: 0.2, ..question.config.clone() }
    });
    let ctx = Ctx {
        model: metered_model,
        prompts,
        view,
        skills: question.skills,
        config: &config,
        question: question.text,
        answer_type: question
            .answer_type
            .or_else(|| view.criteria().named_in(question.text).map(|_| bank::AnswerType::YesNoUnclear)),
        patient: question.patient.clone(),
    };
    let produced = match question.method {
        Method::Baseline => llm_baseline(&ctx)?,
        Method::FullContext => full_context(&ctx)?,
        Method::SimpleRag => {
            let Some(embedder) = question.embedder else {
                return Err(ChartError::Setup("simple RAG needs an embedder for dense retrieval".into()));
            };
            simple_rag(&ctx, embedder)?
        }
        Method::AdvancedRag | Method::IterativeRag => {
            let Some(embedder) = question.embedder else {
                return Err(ChartError::Setup(format!(
                    "{} needs an embedder for hybrid retrieval and reranking",
                    question.method.as_str()
                )));
            };
            if question.method == Method::AdvancedRag {
                rag::advanced::run(&ctx, embedder)?
            } else {
                rag::iterative::run(&ctx, embedder)?
            }
        }
        _ => agent::run_agent(&ctx)?,
    };
    let Produced { nodes, outcome, trace } = produced;
    let (status, answer, reasoning, raw_text, citations, failure) = match outcome {
        Ok((two, raw)) => {
            let citations = agent::cite(view, &two, &nodes)?;
            ("answered", Some(two.answer), Some(two.reasoning), raw, citations, None)
        }
        Err(PipelineFailure { raw_text, errors, .. }) => {
            ("pipeline_failure", None, None, raw_text, vec![], Some(errors))
        }
    };
    let cited_docs: std::collections::BTreeSet<String> = citations
        .iter()
        .filter_map(|c| match &c.source {
            Some(CitedSource::Text { document_id, .. }) => Some(document_id.clone()),
            _ => None,
        })
        .collect();
    let mut retrieved_not_cited: Vec<RetrievedDocument> = Vec::new();
    for n in &nodes {
        let Some(id) = n.document_id() else { continue };
        if cited_docs.contains(id) || retrieved_not_cited.iter().any(|d| d.document_id == id) {
            continue;
        }
        let kind = match n {
            Evidence::Section { kind, .. } => kind.as_str().to_string(),
            _ => "record".to_string(),
        };
        retrieved_not_cited.push(RetrievedDocument {
            document_id: id.to_string(),
            date: n.date().map(agent::date_of),
            kind,
        });
    }
    Ok(ChartAnswer {
        patient: view.patient_id().to_string(),
        question: question.text.to_string(),
        as_of: agent::date_of(view.as_of()),
        method: question.method,
        status: status.into(),
        answer,
        reasoning,
        raw_text,
        unsupported_citations: citations.iter().filter(|c| !c.supported).count(),
        citations,
        retrieved_not_cited,
        context: nodes,
        trace,
        usage: metered.usage(start.elapsed()),
        failure,
    })
}

/// The LLM baseline: patient id, question, reference date and the answer
/// schema (the baseline prompt); no record.
fn llm_baseline(ctx: &Ctx<'_>) -> Result<Produced, ChartError> {
    let mut trace = Trace { stopped_because: "no record is read".into(), ..Trace::default() };
    let user = ctx.prompts.render(
        "chart_llm_baseline.prompt.md",
        json!({
            "patient_id": ctx.view.patient_id(), "as_of": agent::date_of(ctx.view.as_of()),
            "question": ctx.question, "answer_schema": ctx.answer_schema(),
        }),
    )?;
    let outcome = agent::synthesise(
        ctx,
        ctx.prompts.render("chart_baseline.prompt.md", json!({}))?,
        user,
        &[],
        512,
        &[],
        policy::EvidenceOrder::MostRecent,
        &mut trace,
    )?;
    Ok(Produced { nodes: vec![], outcome, trace })
}

/// Full context: every section and lab value up to the reference date,
/// newest first, until the context budget is full.
fn full_context(ctx: &Ctx<'_>) -> Result<Produced, ChartError> {
    let mut nodes = ctx.view.everything()?;
    nodes.sort_by_key(|n| std::cmp::Reverse(n.date()));
    rag::answer(ctx, nodes, &mut Trace::default(), |kept, total| {
        format!("{kept} of {total} items fit the context budget")
    })
}

/// Sections simple RAG retrieves.
pub const SIMPLE_RAG_K: usize = 10;

/// Simple RAG: the question embedded once, the top sections by cosine
/// similarity among the patient's sections up to the reference date (their
/// vectors must be stored), answered in one call.
fn simple_rag(ctx: &Ctx<'_>, embedder: &dyn evident_llm::Embedder) -> Result<Produced, ChartError> {
    let filter = evident_store::SectionFilter {
        patient_id: Some(ctx.view.patient_id().to_string()),
        until: Some(ctx.view.as_of()),
        ..evident_store::SectionFilter::default()
    };
    let hits = {
        let store = ctx.view.lock();
        let config = evident_retrieve::RetrieverConfig { mode: evident_retrieve::Mode::Dense, ..Default::default() };
        evident_retrieve::Retriever::new(&store, config).with_embedder(embedder).search(
            ctx.question,
            &filter,
            SIMPLE_RAG_K,
        )?
    };
    let nodes: Vec<Evidence> = hits
        .into_iter()
        .map(|h| Evidence::Section {
            document_id: h.document_id,
            section_id: h.section_id,
            kind: h.kind,
            date: h.date,
            heading: h.heading,
            start: h.start,
            end: h.end,
            text: h.text,
        })
        .collect();
    rag::answer(ctx, nodes, &mut Trace::default(), |kept, total| {
        format!("dense top {SIMPLE_RAG_K}: {kept} of {total} sections fit the context")
    })
}

/// Messages are re-exported for tests that script a model.
pub type ChatMessage = Message;
