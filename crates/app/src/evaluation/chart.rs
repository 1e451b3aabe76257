//! Chart questions against a question bank.
//!
//! - [`generate_bank`]: instantiates the bank's templates over FHIR R4
//!   bundles (the structured resources for the gold answers, the timeline
//!   documents ingestion makes of them for the support check) with a seed,
//!   and writes the bank as JSONL (to a temporary file, then renamed).
//! - [`evaluate_chart`]: answers every question of a bank with each method
//!   and run through the chart job ([`crate::chart::ask`], one model run per
//!   answer), appends each answer to `answers.jsonl` in the output folder
//!   as soon as it is made (an interrupted evaluation resumes without
//!   repeating or duplicating a question/method/run), then scores them all
//!   and writes `results.json` and `summary.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use evident_chart::bank::{self, BankQuestion, GenerationReport, PatientFacts, PatientRecord, Template};
use evident_chart::evaluate::{self, AnswerRecord, Results};
use evident_chart::report::IndexEntry;
use evident_chart::Method;
use evident_llm::LlmError;
use serde::Serialize;

use crate::chart::AskRequest;
use crate::error::{input_error, AppError, Result};
use crate::models::ModelChoice;
use crate::progress::{ProgressEvent, ProgressSink};
use crate::session::{lock, Session};

use super::write_atomically;

/// The Synthea patients with notes, kept for independent evaluation.
const HELD_OUT: &str = "sample-bulk-fhir-datasets-10-patients";

/// Generate a development bank.
#[derive(Debug, Clone)]
pub struct BankRequest {
    /// FHIR R4 bundle files, or folders of them (`*.json`).
    pub from: Vec<PathBuf>,
    /// A templates file (default: the built-in templates).
    pub templates: Option<PathBuf>,
    pub seed: u64,
    pub out: PathBuf,
}

/// What the generator wrote.
#[derive(Debug, Serialize)]
pub struct BankResult {
    pub written: PathBuf,
    pub seed: u64,
    pub templates: usize,
    #[serde(flatten)]
    pub report: GenerationReport,
    /// Questions per level, template and gold answer (for the docs).
    pub per_level: BTreeMap<u8, usize>,
    pub per_template: BTreeMap<String, usize>,
    pub per_category: BTreeMap<String, usize>,
}

fn bundle_files(path: &Path) -> Result<Vec<PathBuf>> {
    if path.to_string_lossy().contains(HELD_OUT) {
        input_error!(
            "{} holds the Synthea patients with notes, which are kept for independent evaluation; build the development bank from other records (e.g. synthea/generated-sample-data-R4)",
            path.display()
        );
    }
    if !path.exists() {
        input_error!("{}: no such file or folder", path.display());
    }
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| AppError::file(path, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        input_error!("{}: no FHIR bundle (*.json) in this folder", path.display());
    }
    Ok(files)
}

/// The patients of a MIMIC-IV folder as the generator sees them: every
/// table read as ingestion reads it (a problem in any table is an error
/// naming it), then the facts and each patient's timeline documents.
fn mimic_records(path: &Path) -> Result<(Vec<PatientFacts>, Vec<Vec<evident_model::Document>>)> {
    let units = evident_ingest::plan(&[path.to_path_buf()], evident_ingest::Format::Mimic)?;
    let (mut patients, mut docs, mut labs) = (Vec::new(), Vec::new(), Vec::new());
    for unit in &units {
        let (batch, problems) = evident_ingest::read_unit(unit);
        if let Some(p) = problems.first() {
            input_error!("{}: {p}", unit.path.display());
        }
        patients.extend(batch.patients);
        docs.extend(batch.documents);
        labs.extend(batch.labs);
    }
    let facts = PatientFacts::from_mimic(&patients, &docs, &labs);
    let mut by_patient: BTreeMap<&str, Vec<evident_model::Document>> = BTreeMap::new();
    for d in &docs {
        by_patient.entry(d.patient_id.as_str()).or_default().push(d.clone());
    }
    let documents = facts.iter().map(|f| by_patient.remove(f.id.as_str()).unwrap_or_default()).collect();
    Ok((facts, documents))
}

/// Generates the bank.
pub fn generate_bank(request: &BankRequest) -> Result<BankResult> {
    let templates: Vec<Template> = match &request.templates {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| AppError::file(path, e))?;
            bank::load_templates(&path.display().to_string(), &text).map_err(|e| AppError::Input(e.to_string()))?
        }
        None => bank::builtin_templates(),
    };
    if request.from.is_empty() {
        input_error!("no records to build the bank from; give FHIR bundle files or folders, or a MIMIC-IV folder");
    }
    let mut facts: Vec<PatientFacts> = Vec::new();
    let mut documents: Vec<Vec<evident_model::Document>> = Vec::new();
    for path in &request.from {
        if path.is_dir() && evident_ingest::detect(path)? == evident_ingest::Format::Mimic {
            let (mimic_facts, mimic_documents) = mimic_records(path)?;
            facts.extend(mimic_facts);
            documents.extend(mimic_documents);
            continue;
        }
        for file in bundle_files(path)? {
            let text = std::fs::read_to_string(&file).map_err(|e| AppError::file(&file, e))?;
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| AppError::Input(format!("{}: is not a JSON FHIR bundle ({e})", file.display())))?;
            let units = evident_ingest::plan(std::slice::from_ref(&file), evident_ingest::Format::Fhir)?;
            let mut docs = Vec::new();
            for unit in &units {
                let (batch, problems) = evident_ingest::read_unit(unit);
                if let Some(p) = problems.first() {
                    input_error!("{}: {p}", file.display());
                }
                docs.extend(batch.documents);
            }
            for f in PatientFacts::from_fhir_bundle(&value) {
                documents.push(docs.iter().filter(|d| d.patient_id == f.id).cloned().collect());
                facts.push(f);
            }
        }
    }
    let records: Vec<PatientRecord<'_>> =
        facts.iter().zip(&documents).map(|(f, d)| PatientRecord { facts: f, documents: d }).collect();
    let (questions, report) = bank::generate(&templates, &records, request.seed);
    write_atomically(&request.out, bank::to_jsonl(&questions).as_bytes())?;
    let mut result = BankResult {
        written: request.out.clone(),
        seed: request.seed,
        templates: templates.len(),
        report,
        per_level: BTreeMap::new(),
        per_template: BTreeMap::new(),
        per_category: BTreeMap::new(),
    };
    for q in &questions {
        *result.per_level.entry(q.level).or_default() += 1;
        *result.per_template.entry(q.template.clone()).or_default() += 1;
        *result.per_category.entry(q.category.clone()).or_default() += 1;
    }
    Ok(result)
}

impl fmt::Display for BankResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} questions for {} patients from {} templates (seed {}), written to {}",
            self.report.questions,
            self.report.patients,
            self.templates,
            self.seed,
            self.written.display()
        )?;
        let levels: Vec<String> = self.per_level.iter().map(|(l, n)| format!("Level {l}: {n}")).collect();
        writeln!(f, "{}", levels.join(", "))?;
        let cats: Vec<String> = self.per_category.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        writeln!(f, "{}", cats.join(", "))?;
        let ts: Vec<String> = self.per_template.iter().map(|(t, n)| format!("{t} {n}")).collect();
        writeln!(f, "per template: {}", ts.join(", "))?;
        writeln!(f, "{} draws put back (template not instantiable for the patient)", self.report.redraws)?;
        if !self.report.short.is_empty() {
            writeln!(f, "{} patient-levels got fewer questions than 2 + 2 + 1", self.report.short.len())?;
        }
        Ok(())
    }
}

/// Evaluate methods on a bank.
#[derive(Debug, Clone)]
pub struct ChartEvalRequest {
    pub questions: PathBuf,
    pub methods: Vec<String>,
    pub runs: u32,
    pub out: PathBuf,
    /// A stratified subset of N questions ([`bank::stratified_sample`],
    /// seeded by `sample_seed`) instead of the whole file; `limit` then
    /// keeps the subset's first questions.
    pub sample: Option<usize>,
    pub sample_seed: u64,
    /// Pass over the first N questions of the file (of the subset, with
    /// `sample`) before `limit` applies, so a subset can be answered in
    /// chunks or its later questions kept apart from its first.
    pub skip: usize,
    /// Only the first N questions of the file (of the subset, with `sample`).
    pub limit: Option<usize>,
    pub model: ModelChoice,
    /// Serve the first run's answers from the model cache (later runs never are).
    pub use_cache: bool,
    pub resamples: usize,
    pub seed: u64,
    /// A file of criteria sets added to the built-in ones, for every question.
    pub criteria_file: Option<PathBuf>,
    /// The agent's (and its ablations') sampling temperature ([`AskRequest::temperature`]).
    pub agent_temperature: Option<f32>,
    /// Questions answered at once (useful against servers and the embedded
    /// model's `[llm] parallel` slots); 1: one after another, in order.
    pub concurrency: usize,
}

/// The sampling seed of run `run`: the model's default for the first (so
/// a one-run evaluation answers as `evident ask` does), `run` for the others.
/// The embedded model's default seed is fixed, so without a seed per run
/// every run of a sampling method would repeat the first.
pub fn run_seed(run: u32) -> Option<u64> {
    (run > 1).then_some(u64::from(run))
}

/// What the evaluation wrote and found.
#[derive(Debug, Serialize)]
pub struct ChartEvaluation {
    /// Answers made by this invocation (the rest were stored by earlier ones).
    pub new_answers: usize,
    pub stored_answers: usize,
    pub answers_file: PathBuf,
    pub results_file: PathBuf,
    /// `index.html`: every scored answer, linked to its page.
    pub index_file: PathBuf,
    pub results: Results,
    #[serde(skip)]
    pub table: String,
}

impl fmt::Display for ChartEvaluation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.table)?;
        writeln!(
            f,
            "\n{} answers stored ({} new) in {}; results in {}; pages from {}",
            self.stored_answers,
            self.new_answers,
            self.answers_file.display(),
            self.results_file.display(),
            self.index_file.display()
        )
    }
}

/// Reads the answers stored so far. A last line cut short by an
/// interruption is dropped (and the file truncated to the lines before it);
/// a bad line before the last is an error naming it.
fn read_answers(path: &Path) -> Result<Vec<AnswerRecord>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(AppError::file(path, e)),
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut good_bytes = 0usize;
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            good_bytes += line.len() + 1;
            continue;
        }
        match serde_json::from_str::<AnswerRecord>(line) {
            Ok(r) => {
                out.push(r);
                good_bytes += line.len() + 1;
            }
            Err(_) if i + 1 == lines.len() => {
                let file = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| AppError::file(path, e))?;
                file.set_len(good_bytes as u64).map_err(|e| AppError::file(path, e))?;
            }
            Err(e) => input_error!(
                "{}:{}: is not a stored answer ({e}); remove the line or use another output folder",
                path.display(),
                i + 1
            ),
        }
    }
    Ok(out)
}

/// Appends one answer as one line, written whole and flushed.
fn append(file: &mut std::fs::File, path: &Path, record: &AnswerRecord) -> Result<()> {
    let mut line = serde_json::to_string(record)?;
    line.push('\n');
    file.write_all(line.as_bytes()).and_then(|_| file.flush()).map_err(|e| AppError::file(path, e))
}

/// Runs the evaluation.
pub fn evaluate_chart(
    session: &Session,
    request: &ChartEvalRequest,
    progress: &dyn ProgressSink,
) -> Result<ChartEvaluation> {
    let text = std::fs::read_to_string(&request.questions).map_err(|e| AppError::file(&request.questions, e))?;
    let mut questions =
        bank::parse_bank(&request.questions, &text).map_err(|e| AppError::Input(format!("questions file {e}")))?;
    if let Some(n) = request.sample {
        if n == 0 {
            input_error!("--sample 0 selects no question; give the subset's size (e.g. 24) or leave it out");
        }
        questions = bank::stratified_sample(&questions, n, request.sample_seed);
    }
    if request.skip > 0 {
        if request.skip >= questions.len() {
            input_error!(
                "--skip {} leaves no question: the {} holds {}",
                request.skip,
                if request.sample.is_some() { "subset" } else { "file" },
                questions.len()
            );
        }
        questions.drain(..request.skip);
    }
    if let Some(n) = request.limit {
        questions.truncate(n);
    }
    if request.methods.is_empty() {
        input_error!("no method; name at least one");
    }
    let known = Method::ALL.map(|m| m.as_str()).join(", ");
    let mut methods: Vec<String> = Vec::new();
    for m in &request.methods {
        let Some(parsed) = Method::parse(m) else { input_error!("method {m:?} is unknown; use one of {known}") };
        let name = parsed.as_str().to_string();
        if !methods.contains(&name) {
            methods.push(name);
        }
    }
    if request.runs == 0 {
        input_error!("runs is 0; use at least 1");
    }
    if let Some(t) = request.agent_temperature {
        crate::chart::checked_temperature(t)?;
    }
    // Greedy decoding gives the same answer every run: repeating it would
    // spend hours to report a run-to-run spread of zero.
    if request.runs > 1 && request.agent_temperature.is_none_or(|t| t == 0.0) {
        let greedy: Vec<&str> = methods
            .iter()
            .filter(|m| Method::parse(m).and_then(|m| m.agent_config(&Default::default())).is_some())
            .map(String::as_str)
            .collect();
        if !greedy.is_empty() {
            input_error!(
                "--runs {} with {}: the agent decodes greedily, so its runs would all be the same; give --agent-temperature (above 0) to sample, or run once",
                request.runs,
                greedy.join(", ")
            );
        }
    }
    // A bad criteria file stops the evaluation before its first answer.
    if let Some(path) = &request.criteria_file {
        crate::chart::user_criteria(path)?;
    }
    // Every patient must be stored, and the record lengths are read now.
    let store = session.store()?;
    let mut record_chars: BTreeMap<String, usize> = BTreeMap::new();
    {
        let guard = lock(&store);
        let line_of: BTreeMap<String, usize> = text
            .lines()
            .enumerate()
            .filter_map(|(i, l)| {
                let v: serde_json::Value = serde_json::from_str(l).ok()?;
                v.get("id")?.as_str().map(|id| (id.to_string(), i + 1))
            })
            .collect();
        for q in &questions {
            if record_chars.contains_key(&q.patient) {
                continue;
            }
            if guard.patient(&q.patient)?.is_none() {
                input_error!(
                    "{}:{}: field `patient`: {:?} is not in the store {}; ingest the bank's records first",
                    request.questions.display(),
                    line_of.get(&q.id).copied().unwrap_or(0),
                    q.patient,
                    session.db_path().display()
                );
            }
            let until = chrono::NaiveDate::parse_from_str(&q.reference_date, "%Y-%m-%d")
                .expect("parse_bank checked the date")
                .and_hms_opt(23, 59, 59)
                .expect("a valid time");
            let mut chars = 0;
            for d in guard.documents(&q.patient)?.iter().filter(|d| d.date.is_some_and(|t| t <= until)) {
                chars += guard.document(&d.id)?.map_or(0, |doc| doc.text.chars().count());
            }
            record_chars.insert(q.patient.clone(), chars);
        }
    }
    std::fs::create_dir_all(&request.out).map_err(|e| AppError::file(&request.out, e))?;
    let answers_file = request.out.join("answers.jsonl");
    let mut stored = read_answers(&answers_file)?;
    let done: BTreeSet<(String, String, u32)> =
        stored.iter().map(|r| (r.question_id.clone(), r.method.clone(), r.run)).collect();
    let mut todo: Vec<(&BankQuestion, &String, u32)> = Vec::new();
    for run in 1..=request.runs {
        for method in &methods {
            for q in &questions {
                if !done.contains(&(q.id.clone(), method.clone(), run)) {
                    todo.push((q, method, run));
                }
            }
        }
    }
    let total = questions.len() * methods.len() * request.runs as usize;
    progress.report(ProgressEvent::ScreeningStarted { label: format!("chart evaluation: {}", methods.join(", ")) });
    progress.report(ProgressEvent::ScreeningPlanned { total, done: total - todo.len() });
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&answers_file)
        .map_err(|e| AppError::file(&answers_file, e))?;
    let build = if todo.is_empty() { None } else { build_id() };
    // One question, method and run: its record, or the error that ends
    // the evaluation.
    let answer_one = |q: &BankQuestion, method: &String, run: u32| -> Result<AnswerRecord> {
        let ask = AskRequest {
            patient_id: q.patient.clone(),
            question: q.question.clone(),
            answer_type: Some(q.answer_type.as_str().to_string()),
            as_of: Some(q.reference_date.clone()),
            method: method.clone(),
            skills_dir: None,
            criteria_file: request.criteria_file.clone(),
            model: request.model.clone(),
            use_cache: request.use_cache && run == 1,
            temperature: request.agent_temperature,
            seed: run_seed(run),
            out_dir: Some(request.out.join(page_dir(&q.id, method, run))),
        };
        match crate::chart::ask(session, &ask) {
            Ok(answered) => Ok(AnswerRecord {
                build: build.clone(),
                ..AnswerRecord::new(q, method, run, &answered.answer, &answered.run)
            }),
            // A prompt the model cannot take is this method's failure on
            // this question, not a reason to stop: stored, scored 0.
            Err(
                e @ (AppError::Llm(LlmError::ContextOverflow { .. })
                | AppError::Chart(evident_chart::ChartError::Llm(LlmError::ContextOverflow { .. }))),
            ) => Ok(AnswerRecord { build: build.clone(), ..AnswerRecord::error(q, method, run, &e.to_string()) }),
            Err(e @ (AppError::Input(_) | AppError::NotFound(_) | AppError::Setup(_))) => Err(e),
            Err(e) => Err(AppError::Interrupted {
                what: format!("the chart evaluation (question {}, method {method}, run {run})", q.id),
                cause: Box::new(e),
            }),
        }
    };
    // Each answer is appended as soon as it is made, so a killed
    // evaluation resumes after it; with more than one worker the file's
    // order is the order answers finished in.
    let written = Mutex::new((file, Vec::<AnswerRecord>::new()));
    let keep = |record: AnswerRecord| -> Result<()> {
        let mut guard = written.lock().unwrap_or_else(|e| e.into_inner());
        let (file, new) = &mut *guard;
        append(file, &answers_file, &record)?;
        new.push(record);
        progress.report(ProgressEvent::TaskDone);
        Ok(())
    };
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<AppError>> = Mutex::new(None);
    let work = || {
        while failed.lock().unwrap_or_else(|e| e.into_inner()).is_none() {
            let Some(&(q, method, run)) = todo.get(next.fetch_add(1, Ordering::SeqCst)) else { break };
            if let Err(e) = answer_one(q, method, run).and_then(keep) {
                failed.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
            }
        }
    };
    let workers = request.concurrency.clamp(1, todo.len().max(1));
    if workers == 1 {
        work();
    } else {
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(work);
            }
        });
    }
    progress.report(ProgressEvent::ScreeningFinished);
    if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let new = written.into_inner().unwrap_or_else(|e| e.into_inner()).1;
    let new_answers = new.len();
    stored.extend(new);
    // Scores are recomputed from the stored answer text, so a stored
    // answer is scored by the current rules and the current bank.
    let by_id: BTreeMap<&str, &BankQuestion> = questions.iter().map(|q| (q.id.as_str(), q)).collect();
    let scored: Vec<AnswerRecord> = stored
        .into_iter()
        .filter(|r| methods.contains(&r.method) && r.run <= request.runs)
        .filter_map(|mut r| {
            let q = by_id.get(r.question_id.as_str())?;
            r.score = match (&r.status[..], &r.answer) {
                ("answered", Some(a)) => evaluate::score_answer(q, a),
                _ => 0.0,
            };
            Some(r)
        })
        .collect();
    let results = evaluate::summarise(&questions, &scored, &methods, &record_chars, request.resamples, request.seed);
    let table = evaluate::render(&results);
    let results_file = request.out.join("results.json");
    write_atomically(&results_file, &serde_json::to_vec_pretty(&results)?)?;
    write_atomically(&request.out.join("summary.md"), table.as_bytes())?;
    // The index of every scored answer, each linked to its page (the
    // answer, its reasoning, the cited passages highlighted, the
    // retrieved-but-not-cited documents and the trace).
    let entries: Vec<IndexEntry> = scored
        .iter()
        .filter_map(|r| {
            let q = by_id.get(r.question_id.as_str())?;
            let page = page_dir(&r.question_id, &r.method, r.run).join("answer.html");
            let href = if request.out.join(&page).is_file() {
                page.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
            } else {
                String::new()
            };
            Some(IndexEntry {
                id: if request.runs > 1 { format!("{} (run {})", r.question_id, r.run) } else { r.question_id.clone() },
                patient: r.patient.clone(),
                method: r.method.clone(),
                level: Some(format!("Level {}", q.level)),
                category: Some(q.category.clone()),
                question: q.question.clone(),
                answer: r.answer.clone(),
                status: r.status.clone(),
                gold: Some(q.gold_answer.clone()),
                score: Some(r.score),
                href,
            })
        })
        .collect();
    let index = request.out.join("index.html");
    write_atomically(&index, evident_chart::report::index_page("Chart evaluation", &entries).as_bytes())?;
    Ok(ChartEvaluation {
        new_answers,
        stored_answers: scored.len(),
        answers_file,
        results_file,
        index_file: index,
        results,
        table,
    })
}

/// The folder of one answer's page and JSON under an evaluation's output:
/// `pages/QUESTION-METHOD-rRUN`, the question id reduced to letters,
/// digits, `.`, `_` and `-`.
fn page_dir(question: &str, method: &str, run: u32) -> PathBuf {
    let safe: String = question
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    Path::new("pages").join(format!("{safe}-{method}-r{run}"))
}

/// This build's id: the first 12 hex digits of the SHA-256 of the running
/// executable (`None` when it cannot be read).
fn build_id() -> Option<String> {
    use sha2::{Digest, Sha256};
    let mut file = std::fs::File::open(std::env::current_exe().ok()?).ok()?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).ok()?;
    Some(hex::encode(hasher.finalize())[..12].to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_first_run_keeps_the_default_seed_and_each_later_run_has_its_own() {
        let seeds: Vec<Option<u64>> = (1..=4).map(super::run_seed).collect();
        assert_eq!(seeds, [None, Some(2), Some(3), Some(4)]);
    }
}
