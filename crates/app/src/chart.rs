//! The chart job: one question about one patient's whole record, answered
//! in the two-line format with citations that resolve to stored text
//! (`evident_chart`). The reference date defaults to the date of the
//! patient's last document; nothing dated after it is seen. Every model
//! call is recorded under a model run of its own; with an output folder
//! the answer's JSON and its HTML page (`evident_chart::report`) are
//! written there whole (each to a temporary file, then renamed).

use std::fmt;
use std::path::PathBuf;

use chrono::{NaiveDate, NaiveDateTime};
use evident_chart::bank::AnswerType;
use evident_chart::criteria::CriteriaSets;
use evident_chart::{AgentConfig, ChartAnswer, CitedSource, Method, Question, RecordView, SkillLibrary};
use evident_llm::StructuredModel;
use serde::Serialize;

use crate::error::{input_error, AppError, Result};
use crate::models::{embed_missing, EmbedderChoice, ModelChoice};
use crate::progress::Silent;
use crate::search::EMBED_BATCH;
use crate::session::{lock, Session};
use evident_store::SectionFilter;

/// One question.
#[derive(Debug, Clone)]
pub struct AskRequest {
    pub patient_id: String,
    pub question: String,
    /// The question's answer schema: yes_no, yes_no_unclear, date,
    /// category, score, date_list or interval_list (`None`: not stated).
    pub answer_type: Option<String>,
    /// The reference date, YYYY-MM-DD (default: the last document's date).
    pub as_of: Option<String>,
    /// agent, an ablation (agent-no-skills, ...), baseline or full-context.
    pub method: String,
    /// A folder of skill files added to the built-in library.
    pub skills_dir: Option<PathBuf>,
    /// A file of criteria sets (the built-in file's format) added to the
    /// built-in sets.
    pub criteria_file: Option<PathBuf>,
    pub model: ModelChoice,
    pub use_cache: bool,
    /// The agent's (and its ablations') sampling temperature; `None`:
    /// greedy (0). The comparators always sample at the paper's 0.2.
    pub temperature: Option<f32>,
    /// The sampling seed (`None`: the model's default; the embedded model's
    /// is fixed, so a sampled answer is reproducible either way).
    pub seed: Option<u64>,
    /// Where to write `answer.json` and `answer.html`.
    pub out_dir: Option<PathBuf>,
}

/// The answer and where it was written.
#[derive(Debug, Serialize)]
pub struct AskResult {
    /// The model run that holds every call.
    pub run: String,
    #[serde(flatten)]
    pub answer: ChartAnswer,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<PathBuf>,
    /// The answer's HTML page, beside `written`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<PathBuf>,
}

fn parse_method(text: &str) -> Result<Method> {
    if let Some(m) = Method::parse(text) {
        return Ok(m);
    }
    let known = Method::ALL.map(|m| m.as_str()).join(", ");
    input_error!("method {text:?} is unknown; use one of {known}")
}

pub(crate) fn parse_answer_type(text: &str) -> Result<AnswerType> {
    match AnswerType::parse(text) {
        Some(t) => Ok(t),
        None => {
            let known: Vec<&str> = AnswerType::ALL.iter().map(|t| t.as_str()).collect();
            input_error!("answer type {text:?} is unknown; use one of {}", known.join(", "))
        }
    }
}

fn parse_as_of(text: &str) -> Result<NaiveDateTime> {
    match NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d") {
        Ok(d) => Ok(d.and_hms_opt(23, 59, 59).expect("a valid time of day")),
        Err(_) => input_error!("reference date {text:?} is not a date; write it as YYYY-MM-DD"),
    }
}

/// The built-in criteria sets and a user's file of them, validated whole.
pub(crate) fn user_criteria(path: &std::path::Path) -> Result<CriteriaSets> {
    CriteriaSets::with_user_file(path).map_err(|e| AppError::Input(format!("criteria file {}: {e}", path.display())))
}

/// A sampling temperature in 0-2 (0: greedy).
pub(crate) fn checked_temperature(t: f32) -> Result<f32> {
    if !(0.0..=2.0).contains(&t) {
        input_error!("temperature {t} is outside 0-2; 0 is greedy decoding");
    }
    Ok(t)
}

/// Answers the question.
pub fn ask(session: &Session, request: &AskRequest) -> Result<AskResult> {
    if request.question.trim().is_empty() {
        input_error!("the question is empty; ask something about the patient's record");
    }
    let method = parse_method(&request.method)?;
    let answer_type = request.answer_type.as_deref().map(parse_answer_type).transpose()?;
    let skills = match &request.skills_dir {
        Some(dir) => SkillLibrary::with_user_dir(dir),
        None => SkillLibrary::builtin(),
    }
    .map_err(|e| AppError::Input(format!("skill file {e}")))?;
    let criteria = request.criteria_file.as_deref().map(user_criteria).transpose()?;
    let explicit_as_of = request.as_of.as_deref().map(parse_as_of).transpose()?;
    let store = session.store()?;
    let (as_of, patient) = {
        let guard = lock(&store);
        let Some(patient) = guard.patient(&request.patient_id)? else {
            return Err(session.unknown_patient(&request.patient_id));
        };
        let as_of = match explicit_as_of {
            Some(t) => t,
            None => {
                let last = guard.documents(&request.patient_id)?.iter().filter_map(|d| d.date).max();
                match last {
                    Some(t) => t.date().and_hms_opt(23, 59, 59).expect("a valid time of day"),
                    None => input_error!(
                        "patient {} has no dated document, so there is no default reference date; give one",
                        request.patient_id
                    ),
                }
            }
        };
        (as_of, patient)
    };
    let view = RecordView::new(&store, request.patient_id.clone(), as_of);
    let view = match &criteria {
        Some(sets) => view.with_criteria(sets),
        None => view,
    };
    let mut description = Vec::new();
    if let Some(sex) = &patient.sex {
        description.push(sex.clone());
    }
    // A birth date's age, or MIMIC-IV's anchor age as the range it allows.
    if let Some(age) = view.age()? {
        description.push(format!("{} years old on the reference date", age.words()));
    }
    let mut config = AgentConfig::default();
    if request.model.endpoint.is_none() {
        config = config.with_model_context(session.config().llm.context_size as usize);
    }
    if let Some(t) = request.temperature {
        config.temperature = checked_temperature(t)?;
    }
    config.seed = request.seed;
    let prompts = evident_chart::prompts(session.config().llm.prompts_dir.as_deref());
    let run_id = session.begin_model_run(&format!("chart ask {} {}", method.as_str(), request.patient_id))?;
    let model = session.chat_model(&request.model, &run_id, request.use_cache)?;
    // The RAG comparators read section vectors: embed what the patient lacks first.
    let embedder = match method {
        Method::SimpleRag | Method::AdvancedRag | Method::IterativeRag => {
            let embedder = session.embedder(&EmbedderChoice::default())?;
            let filter = SectionFilter::patient(request.patient_id.clone());
            embed_missing(&store, &embedder, &filter, EMBED_BATCH, &Silent)?;
            Some(embedder)
        }
        _ => None,
    };
    let question = Question {
        text: request.question.trim(),
        answer_type,
        method,
        skills: &skills,
        config: &config,
        patient: if description.is_empty() { "unknown".into() } else { description.join(", ") },
        embedder: embedder.as_ref().map(|e| e as &dyn evident_llm::Embedder),
    };
    let answered = evident_chart::ask(StructuredModel::recorded(&model), &prompts, &view, &question);
    session.finish_model_run(&run_id)?;
    let answer = answered?;
    let mut result = AskResult { run: run_id, answer, written: None, page: None };
    if let Some(dir) = &request.out_dir {
        let html = {
            let guard = lock(&store);
            let documents = evident_chart::report::documents_for(&result.answer, &guard)?;
            evident_chart::report::answer_page(&result.answer, &documents)
        };
        std::fs::create_dir_all(dir).map_err(|e| AppError::file(dir, e))?;
        let path = dir.join("answer.json");
        let partial = dir.join("answer.json.partial");
        let page = dir.join("answer.html");
        let page_partial = dir.join("answer.html.partial");
        std::fs::write(&partial, serde_json::to_vec_pretty(&result)?).map_err(|e| AppError::file(&partial, e))?;
        std::fs::write(&page_partial, html).map_err(|e| AppError::file(&page_partial, e))?;
        std::fs::rename(&partial, &path).map_err(|e| AppError::file(&path, e))?;
        std::fs::rename(&page_partial, &page).map_err(|e| AppError::file(&page, e))?;
        result.written = Some(path);
        result.page = Some(page);
    }
    Ok(result)
}

fn describe(source: &CitedSource) -> String {
    match source {
        CitedSource::Text { document_id, section_id, sentence_ids, start, end, text, date } => {
            let short: String = text.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(240).collect();
            format!(
                "{document_id} ({}){} sentences {:?} bytes {start}..{end}: \"{short}\"",
                date.as_deref().unwrap_or("undated"),
                section_id.map(|s| format!(" section {s}")).unwrap_or_default(),
                sentence_ids
            )
        }
        CitedSource::Lab { name, value, unit, time, source_id, .. } => {
            format!(
                "lab {name} = {value}{} on {time} ({source_id})",
                unit.as_ref().map(|u| format!(" {u}")).unwrap_or_default()
            )
        }
        CitedSource::Calculation { calculator, output, used } => {
            let inputs: Vec<String> = used.iter().map(describe).collect();
            format!("{calculator} -> {output}; from {}", inputs.join("; "))
        }
        CitedSource::Patient { patient_id, text, .. } => format!("{text} (stored patient {patient_id})"),
    }
}

impl fmt::Display for AskResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.answer;
        match (&a.answer, &a.reasoning) {
            (Some(answer), Some(reasoning)) => {
                writeln!(f, "Answer: {answer}")?;
                writeln!(f, "Reasoning: {reasoning}")?;
            }
            _ => {
                writeln!(
                    f,
                    "No valid answer (pipeline failure): {}",
                    a.failure.clone().unwrap_or_default().join("; ")
                )?;
            }
        }
        if !a.citations.is_empty() {
            writeln!(f)?;
        }
        for c in &a.citations {
            match &c.source {
                Some(s) => writeln!(f, "[{}] {}", c.number, describe(s))?,
                None => writeln!(f, "[{}] UNSUPPORTED: no context item has this number", c.number)?,
            }
        }
        if !a.retrieved_not_cited.is_empty() {
            let ids: Vec<&str> = a.retrieved_not_cited.iter().map(|d| d.document_id.as_str()).collect();
            writeln!(f, "\nRetrieved, not cited: {}", ids.join(", "))?;
        }
        writeln!(
            f,
            "\n{} as of {}, method {}; {} model calls, {} prompt tokens ({} reused), {} completion tokens, {:.1} s",
            a.patient,
            a.as_of,
            a.method.as_str(),
            a.usage.calls,
            a.usage.prompt_tokens,
            a.usage.reused_prompt_tokens,
            a.usage.completion_tokens,
            a.usage.wall_ms as f64 / 1000.0
        )?;
        if let Some(path) = &self.written {
            writeln!(f, "written to {}", path.display())?;
        }
        if let Some(path) = &self.page {
            writeln!(f, "page: {}", path.display())?;
        }
        Ok(())
    }
}
