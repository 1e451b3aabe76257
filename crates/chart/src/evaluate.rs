//! Evaluation against a question bank, as the paper scores it: each
//! stored answer is scored (binary after normalisation, or list F1 with a
//! wrong status scoring 0); per-question scores are averaged over runs;
//! concordance gets a cluster-bootstrap interval over patients; methods are
//! compared by paired cluster bootstrap with the shift-to-null p-value and
//! Bonferroni (m = 6) within each stratum (overall, level, category,
//! record-length bin at the 33rd/67th/90th percentiles of record length in
//! characters). Running the questions is the application's job; this
//! module holds what is stored per answer ([`AnswerRecord`], with the
//! paper's review fields empty) and everything computed from it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::answer::normalise_answer;
use crate::bank::{AnswerType, BankQuestion};
use crate::scoring::{cluster_bootstrap, paired_difference, score_binary, score_list, Clustered, Interval};
use crate::{ChartAnswer, CitedSource};

/// Bonferroni's m: the paper's six headline pairwise comparisons.
pub const COMPARISONS: usize = 6;
/// Bootstrap resamples for every interval and paired difference.
pub const RESAMPLES: usize = 10_000;

/// The paper's error categories of an answer that diverges from the
/// reference, in its order; stored as the letter, and any other letter is
/// refused when answers are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorCategory {
    /// Annotation error: the answer is right, the reference wrong or incomplete.
    A,
    /// Acceptable or ambiguous: both are clinically defensible.
    B,
    /// Partially correct: the right concept, incomplete or imprecise details.
    C,
    /// Clinically insignificant error.
    D,
    /// Clinically significant error.
    E,
    /// Pipeline failure.
    F,
}

/// The paper's review of one answer, filled later by a reviewer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Review {
    /// The paper's error taxonomy (its supplement's six categories).
    pub error_category: Option<ErrorCategory>,
    pub clinically_significant: Option<bool>,
    /// 1 unsupported, 2 partially supported, 3 fully supported.
    pub citation_sufficiency: Option<u8>,
}

/// One stored answer: a question, a method, a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerRecord {
    pub question_id: String,
    pub patient: String,
    pub method: String,
    pub run: u32,
    /// `answered`, `pipeline_failure`, or `error` (the model refused the
    /// request, e.g. a prompt larger than its context).
    pub status: String,
    pub answer: Option<String>,
    pub reasoning: Option<String>,
    pub gold_answer: String,
    pub score: f64,
    pub citations: usize,
    pub unsupported_citations: usize,
    pub skills_selected: usize,
    pub tool_calls: usize,
    pub documents_retrieved: usize,
    pub documents_cited: usize,
    pub calls: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub reused_prompt_tokens: u64,
    pub wall_ms: u64,
    pub non_llm_ms: u64,
    /// The model run holding every call of this answer.
    pub model_run: String,
    /// The build that answered: the first 12 hex digits of the SHA-256 of
    /// the executable that ran the evaluation; absent in answers stored
    /// before it was recorded. A resumed evaluation whose answers come
    /// from more than one build says so ([`MethodSummary::builds`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    pub failure: Option<Vec<String>>,
    pub review: Review,
    /// The whole answer (citations, context, trace, usage) as `evident ask --json` gives it.
    pub result: serde_json::Value,
}

impl AnswerRecord {
    /// Scores and summarises one answer.
    pub fn new(question: &BankQuestion, method: &str, run: u32, answer: &ChartAnswer, model_run: &str) -> AnswerRecord {
        let score = match (&answer.status[..], &answer.answer) {
            ("answered", Some(text)) => score_answer(question, text),
            _ => 0.0,
        };
        let retrieved: BTreeSet<&str> = answer.context.iter().filter_map(|n| n.document_id()).collect();
        let mut cited: BTreeSet<&str> = BTreeSet::new();
        for c in answer.citations.iter().filter_map(|c| c.source.as_ref()) {
            cited_documents(c, &mut cited);
        }
        AnswerRecord {
            question_id: question.id.clone(),
            patient: question.patient.clone(),
            method: method.to_string(),
            run,
            status: answer.status.clone(),
            answer: answer.answer.clone(),
            reasoning: answer.reasoning.clone(),
            gold_answer: question.gold_answer.clone(),
            score,
            citations: answer.citations.len(),
            unsupported_citations: answer.unsupported_citations,
            skills_selected: answer.trace.skills.len(),
            tool_calls: answer.trace.rounds.iter().filter(|r| r.tool.is_some()).count(),
            documents_retrieved: retrieved.len(),
            documents_cited: cited.len(),
            calls: answer.usage.calls,
            prompt_tokens: answer.usage.prompt_tokens,
            completion_tokens: answer.usage.completion_tokens,
            reused_prompt_tokens: answer.usage.reused_prompt_tokens,
            wall_ms: answer.usage.wall_ms,
            non_llm_ms: answer.usage.non_llm_ms,
            model_run: model_run.to_string(),
            build: None,
            failure: answer.failure.clone(),
            review: Review::default(),
            result: serde_json::to_value(answer).unwrap_or(serde_json::Value::Null),
        }
    }
}

impl AnswerRecord {
    /// A question the method could not answer at all because the model
    /// refused the request (the prompt did not fit its context): status
    /// `error`, score 0, counted with the pipeline failures, the message kept.
    pub fn error(question: &BankQuestion, method: &str, run: u32, message: &str) -> AnswerRecord {
        AnswerRecord {
            question_id: question.id.clone(),
            patient: question.patient.clone(),
            method: method.to_string(),
            run,
            status: "error".into(),
            answer: None,
            reasoning: None,
            gold_answer: question.gold_answer.clone(),
            score: 0.0,
            citations: 0,
            unsupported_citations: 0,
            skills_selected: 0,
            tool_calls: 0,
            documents_retrieved: 0,
            documents_cited: 0,
            calls: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            reused_prompt_tokens: 0,
            wall_ms: 0,
            non_llm_ms: 0,
            model_run: String::new(),
            build: None,
            failure: Some(vec![message.to_string()]),
            review: Review::default(),
            result: serde_json::Value::Null,
        }
    }
}

fn cited_documents<'a>(source: &'a CitedSource, out: &mut BTreeSet<&'a str>) {
    match source {
        CitedSource::Text { document_id, .. } => {
            out.insert(document_id);
        }
        CitedSource::Lab { source_id, .. } => {
            out.insert(source_id);
        }
        CitedSource::Calculation { used, .. } => used.iter().for_each(|u| cited_documents(u, out)),
        CitedSource::Patient { .. } => {}
    }
}

// ---------------------------------------------------------------------------
// Scoring one answer
// ---------------------------------------------------------------------------

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10 && b.iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() })
}

/// The YYYY-MM-DD dates and the word "ongoing" in `text`, in order.
fn date_tokens(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lower.len() {
        if lower.is_char_boundary(i) && lower.is_char_boundary((i + 10).min(lower.len())) && i + 10 <= lower.len() {
            let w = &lower[i..i + 10];
            if is_date(w) {
                out.push(w.to_string());
                i += 10;
                continue;
            }
        }
        if lower[i..].starts_with("ongoing") {
            out.push("ongoing".into());
            i += 7;
            continue;
        }
        i += lower[i..].chars().next().map_or(1, char::len_utf8);
    }
    out
}

/// A list answer in canonical form: an optional status, then entries of
/// dates (a date list) or `start–end` (an interval list) separated by
/// `|`. Entries may have been separated by `|`, `;`, `,` or new lines and
/// intervals written with `-`, `–`, `—` or "to"; other words are dropped.
fn canonical_list(text: &str, answer_type: AnswerType) -> String {
    let trimmed = text.trim();
    let (status, rest) = match trimmed.split_once(':') {
        Some((s, r)) if !s.chars().any(|c| c.is_ascii_digit()) && s.split_whitespace().count() <= 3 => {
            (Some(s.trim()), r)
        }
        _ => (None, trimmed),
    };
    let entries: Vec<String> = rest
        .split(['|', ';', ',', '\n'])
        .filter_map(|e| {
            let tokens = date_tokens(e);
            match answer_type {
                AnswerType::IntervalList if !tokens.is_empty() => Some(tokens[..tokens.len().min(2)].join("–")),
                _ => tokens.into_iter().find(|t| t != "ongoing"),
            }
        })
        .collect();
    if entries.is_empty() {
        return trimmed.to_string();
    }
    let list = entries.join(" | ");
    match status {
        Some(s) => format!("{s}: {list}"),
        None => list,
    }
}

const YES_NO: [&str; 7] = ["not documented", "yes", "no", "never", "unclear", "nd", "not applicable"];

/// The schema value an answer states, for comparison: the leading
/// yes/no option, the first date, the first number, or the category
/// (its first word, after a leading "stage" or "category").
pub fn answer_value(text: &str, answer_type: AnswerType) -> String {
    let n = normalise_answer(text);
    let words: Vec<&str> = n
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | ':' | '.'))
        .filter(|w| !w.is_empty())
        .collect();
    match answer_type {
        AnswerType::YesNo | AnswerType::YesNoUnclear => YES_NO
            .iter()
            .find(|o| {
                n == **o
                    || n.starts_with(&format!("{o} "))
                    || n.starts_with(&format!("{o},"))
                    || n.starts_with(&format!("{o}."))
                    || n.starts_with(&format!("{o}:"))
                    || n.starts_with(&format!("{o};"))
                    || n.starts_with(&format!("{o}("))
            })
            .map(|o| if *o == "nd" { "not documented".to_string() } else { o.to_string() })
            .unwrap_or(n),
        AnswerType::Date => date_tokens(&n).into_iter().find(|t| t != "ongoing").unwrap_or(n),
        AnswerType::Score => words.iter().find_map(|w| w.parse::<f64>().ok()).map(|v| format!("{v}")).unwrap_or(n),
        AnswerType::Category => {
            let skip = ["stage", "ckd", "category", "bmi", "class", "range", "the", "is", "glycaemic", "glycemic"];
            words.iter().find(|w| !skip.contains(w)).map(|w| w.to_string()).unwrap_or(n)
        }
        AnswerType::DateList | AnswerType::IntervalList => canonical_list(text, answer_type),
    }
}

/// The paper's score of one answer: binary after normalisation for
/// single values, entry-level F1 for lists ("never" equals "not
/// documented" when the record holds no such thing).
pub fn score_answer(question: &BankQuestion, answer: &str) -> f64 {
    let t = question.answer_type;
    if t.is_list() {
        return score_list(&answer_value(answer, t), &answer_value(&question.gold_answer, t));
    }
    score_binary(&answer_value(answer, t), &answer_value(&question.gold_answer, t), question.record_has_it())
}

// ---------------------------------------------------------------------------
// Statistics over stored answers
// ---------------------------------------------------------------------------

/// Median and quartiles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Quartiles {
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

fn quartiles(values: impl IntoIterator<Item = f64>) -> Quartiles {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    Quartiles { median: quantile(&v, 0.5), q1: quantile(&v, 0.25), q3: quantile(&v, 0.75) }
}

/// What one method did over the whole bank.
#[derive(Debug, Clone, Serialize)]
pub struct MethodSummary {
    pub method: String,
    pub questions: usize,
    pub answers: usize,
    pub runs: u32,
    pub concordance: Interval,
    pub pipeline_failures: usize,
    pub pipeline_failure_rate: f64,
    /// Mean over questions of the run-to-run standard deviation of the
    /// score (0 with one run).
    pub mean_run_sd: f64,
    /// The standard deviation over runs of each run's concordance.
    pub run_concordance_sd: f64,
    pub citations: usize,
    pub unsupported_citations: usize,
    /// Supported citations / all citations.
    pub citation_validity: f64,
    /// Share of answered questions whose every citation resolves.
    pub answers_all_citations_valid: f64,
    pub skills_selected: Quartiles,
    pub tool_calls: Quartiles,
    pub documents_retrieved: Quartiles,
    pub documents_cited: Quartiles,
    pub prompt_tokens: Quartiles,
    pub completion_tokens: Quartiles,
    pub reused_prompt_tokens: Quartiles,
    pub wall_s: Quartiles,
    /// Share of wall time spent outside model calls.
    pub non_llm_share: f64,
    /// Answers per build that made them (`unrecorded` for answers stored
    /// without one): more than one means a resumed evaluation mixed builds.
    pub builds: BTreeMap<String, usize>,
}

/// A method's execution characteristics in one complexity level or over
/// all levels, over its answers (every run): a row of the paper's
/// Supplementary Table 8 (medians and IQRs; the paper reports skills,
/// tool calls and documents for its agent only, wall time for every
/// method).
#[derive(Debug, Clone, Serialize)]
pub struct Execution {
    pub method: String,
    /// "Level 1", "Level 2", "Level 3" or "Overall".
    pub stratum: String,
    pub answers: usize,
    pub skills_selected: Quartiles,
    pub tool_calls: Quartiles,
    pub documents_retrieved: Quartiles,
    pub documents_cited: Quartiles,
    /// Share of the answers that cite three documents or more (the
    /// paper's "of which ≥3 documents (%)").
    pub three_or_more_cited: f64,
    pub wall_s: Quartiles,
}

impl Execution {
    fn of(method: &str, stratum: String, answers: &[&AnswerRecord]) -> Execution {
        let q = |f: &dyn Fn(&AnswerRecord) -> f64| quartiles(answers.iter().map(|r| f(r)));
        Execution {
            method: method.to_string(),
            stratum,
            answers: answers.len(),
            skills_selected: q(&|r| r.skills_selected as f64),
            tool_calls: q(&|r| r.tool_calls as f64),
            documents_retrieved: q(&|r| r.documents_retrieved as f64),
            documents_cited: q(&|r| r.documents_cited as f64),
            three_or_more_cited: if answers.is_empty() {
                f64::NAN
            } else {
                answers.iter().filter(|r| r.documents_cited >= 3).count() as f64 / answers.len() as f64
            },
            wall_s: q(&|r| r.wall_ms as f64 / 1000.0),
        }
    }
}

/// One method's concordance in a stratum.
#[derive(Debug, Clone, Serialize)]
pub struct StratumMethod {
    pub method: String,
    pub questions: usize,
    pub patients: usize,
    pub concordance: Interval,
}

/// A paired comparison A - B in a stratum.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub questions: usize,
    pub patients: usize,
    pub difference: Interval,
    pub p_value: f64,
    pub p_bonferroni: f64,
}

/// Results in one stratum (overall, a level, a category, a length bin).
#[derive(Debug, Clone, Serialize)]
pub struct Stratum {
    pub kind: String,
    pub name: String,
    pub methods: Vec<StratumMethod>,
    pub comparisons: Vec<Comparison>,
}

/// Per-question mean and run-to-run SD.
#[derive(Debug, Clone, Serialize)]
pub struct QuestionResult {
    pub question_id: String,
    pub method: String,
    pub runs: usize,
    pub mean: f64,
    pub sd: f64,
}

/// The record-length bins' edges in characters.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LengthBins {
    pub p33: f64,
    pub p67: f64,
    pub p90: f64,
}

impl LengthBins {
    pub fn of(lengths: &BTreeMap<String, usize>) -> LengthBins {
        let mut v: Vec<f64> = lengths.values().map(|&x| x as f64).collect();
        v.sort_by(f64::total_cmp);
        LengthBins { p33: quantile(&v, 0.33), p67: quantile(&v, 0.67), p90: quantile(&v, 0.90) }
    }
    pub fn bin(&self, chars: usize) -> &'static str {
        let c = chars as f64;
        if c <= self.p33 {
            "Q1 (<= p33)"
        } else if c <= self.p67 {
            "Q2 (p33-p67)"
        } else if c <= self.p90 {
            "Q3 (p67-p90)"
        } else {
            "Q4 (> p90)"
        }
    }
}

/// Everything `results.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub questions: usize,
    pub patients: usize,
    pub resamples: usize,
    pub seed: u64,
    pub bonferroni_m: usize,
    pub length_bins: LengthBins,
    pub methods: Vec<MethodSummary>,
    pub strata: Vec<Stratum>,
    /// Per method, each level's execution characteristics, then overall.
    pub execution: Vec<Execution>,
    pub per_question: Vec<QuestionResult>,
}

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let sd = if xs.len() > 1 { (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() } else { 0.0 };
    (mean, sd)
}

/// Computes the results from the stored answers. `methods` gives the
/// order; `record_chars` is each patient's record length in characters
/// up to the reference date.
pub fn summarise(
    questions: &[BankQuestion],
    records: &[AnswerRecord],
    methods: &[String],
    record_chars: &BTreeMap<String, usize>,
    resamples: usize,
    seed: u64,
) -> Results {
    let bins = LengthBins::of(record_chars);
    // (question, method) -> scores over runs.
    let mut scores: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
    for r in records {
        scores.entry((r.question_id.as_str(), r.method.as_str())).or_default().push(r.score);
    }
    let mut per_question = Vec::new();
    let mut means: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for ((q, m), xs) in &scores {
        let (mean, sd) = mean_sd(xs);
        means.insert((q, m), mean);
        per_question.push(QuestionResult {
            question_id: q.to_string(),
            method: m.to_string(),
            runs: xs.len(),
            mean,
            sd,
        });
    }
    let clustered = |subset: &[&BankQuestion], method: &str| -> Clustered {
        let mut c: Clustered = BTreeMap::new();
        for q in subset {
            if let Some(x) = means.get(&(q.id.as_str(), method)) {
                c.entry(q.patient.clone()).or_default().push(*x);
            }
        }
        c
    };
    let mut strata_defs: Vec<(String, String, Vec<&BankQuestion>)> =
        vec![("overall".into(), "all".into(), questions.iter().collect())];
    for level in 1..=3u8 {
        let s: Vec<&BankQuestion> = questions.iter().filter(|q| q.level == level).collect();
        if !s.is_empty() {
            strata_defs.push(("level".into(), format!("Level {level}"), s));
        }
    }
    for cat in crate::bank::CATEGORIES {
        let s: Vec<&BankQuestion> = questions.iter().filter(|q| q.category == cat).collect();
        if !s.is_empty() {
            strata_defs.push(("category".into(), cat.to_string(), s));
        }
    }
    for bin in ["Q1 (<= p33)", "Q2 (p33-p67)", "Q3 (p67-p90)", "Q4 (> p90)"] {
        let s: Vec<&BankQuestion> =
            questions.iter().filter(|q| bins.bin(record_chars.get(&q.patient).copied().unwrap_or(0)) == bin).collect();
        if !s.is_empty() {
            strata_defs.push(("record length".into(), bin.to_string(), s));
        }
    }
    let mut strata = Vec::new();
    for (kind, name, subset) in strata_defs {
        let mut stratum = Stratum { kind, name, methods: vec![], comparisons: vec![] };
        for m in methods {
            let c = clustered(&subset, m);
            let n: usize = c.values().map(Vec::len).sum();
            if n == 0 {
                continue;
            }
            stratum.methods.push(StratumMethod {
                method: m.clone(),
                questions: n,
                patients: c.len(),
                concordance: cluster_bootstrap(&c, resamples, seed),
            });
        }
        for (i, a) in methods.iter().enumerate() {
            for b in &methods[i + 1..] {
                // Only questions both methods answered.
                let both: Vec<&BankQuestion> = subset
                    .iter()
                    .copied()
                    .filter(|q| {
                        means.contains_key(&(q.id.as_str(), a.as_str()))
                            && means.contains_key(&(q.id.as_str(), b.as_str()))
                    })
                    .collect();
                if both.is_empty() {
                    continue;
                }
                let (ca, cb) = (clustered(&both, a), clustered(&both, b));
                let mut d = paired_difference(&ca, &cb, resamples, seed, COMPARISONS);
                if ca.len() < 2 || (d.difference.low == d.difference.high && d.difference.estimate != 0.0) {
                    // One patient, or patients whose differences are all the
                    // same: every resample gives the same difference, the
                    // bootstrap has no spread and says nothing about p (the
                    // shift-to-null p would be 0 for any non-zero difference).
                    d.p_value = f64::NAN;
                    d.p_bonferroni = f64::NAN;
                }
                stratum.comparisons.push(Comparison {
                    a: a.clone(),
                    b: b.clone(),
                    questions: both.len(),
                    patients: ca.len(),
                    difference: d.difference,
                    p_value: d.p_value,
                    p_bonferroni: d.p_bonferroni,
                });
            }
        }
        strata.push(stratum);
    }
    let overall: Vec<&BankQuestion> = questions.iter().collect();
    let method_summaries = methods
        .iter()
        .map(|m| {
            let rs: Vec<&AnswerRecord> = records.iter().filter(|r| &r.method == m).collect();
            let c = clustered(&overall, m);
            let runs: BTreeSet<u32> = rs.iter().map(|r| r.run).collect();
            let run_means: Vec<f64> = runs
                .iter()
                .map(|run| {
                    let xs: Vec<f64> = rs.iter().filter(|r| r.run == *run).map(|r| r.score).collect();
                    xs.iter().sum::<f64>() / xs.len().max(1) as f64
                })
                .collect();
            let sds: Vec<f64> = per_question.iter().filter(|p| &p.method == m).map(|p| p.sd).collect();
            let answered: Vec<&&AnswerRecord> = rs.iter().filter(|r| r.status == "answered").collect();
            let citations: usize = rs.iter().map(|r| r.citations).sum();
            let unsupported: usize = rs.iter().map(|r| r.unsupported_citations).sum();
            let failures = rs.iter().filter(|r| r.status != "answered").count();
            let wall: u64 = rs.iter().map(|r| r.wall_ms).sum();
            let q = |f: &dyn Fn(&AnswerRecord) -> f64| quartiles(rs.iter().map(|r| f(r)));
            MethodSummary {
                method: m.clone(),
                questions: c.values().map(Vec::len).sum(),
                answers: rs.len(),
                runs: runs.len() as u32,
                concordance: cluster_bootstrap(&c, resamples, seed),
                pipeline_failures: failures,
                pipeline_failure_rate: failures as f64 / rs.len().max(1) as f64,
                mean_run_sd: if sds.is_empty() { f64::NAN } else { sds.iter().sum::<f64>() / sds.len() as f64 },
                run_concordance_sd: if run_means.is_empty() { f64::NAN } else { mean_sd(&run_means).1 },
                citations,
                unsupported_citations: unsupported,
                citation_validity: if citations == 0 {
                    f64::NAN
                } else {
                    (citations - unsupported) as f64 / citations as f64
                },
                answers_all_citations_valid: answered.iter().filter(|r| r.unsupported_citations == 0).count() as f64
                    / answered.len().max(1) as f64,
                skills_selected: q(&|r| r.skills_selected as f64),
                tool_calls: q(&|r| r.tool_calls as f64),
                documents_retrieved: q(&|r| r.documents_retrieved as f64),
                documents_cited: q(&|r| r.documents_cited as f64),
                prompt_tokens: q(&|r| r.prompt_tokens as f64),
                completion_tokens: q(&|r| r.completion_tokens as f64),
                reused_prompt_tokens: q(&|r| r.reused_prompt_tokens as f64),
                wall_s: q(&|r| r.wall_ms as f64 / 1000.0),
                non_llm_share: if wall == 0 {
                    f64::NAN
                } else {
                    rs.iter().map(|r| r.non_llm_ms).sum::<u64>() as f64 / wall as f64
                },
                builds: rs.iter().fold(BTreeMap::new(), |mut builds, r| {
                    *builds.entry(r.build.clone().unwrap_or_else(|| "unrecorded".into())).or_insert(0) += 1;
                    builds
                }),
            }
        })
        .collect();
    let levels: BTreeMap<&str, u8> = questions.iter().map(|q| (q.id.as_str(), q.level)).collect();
    let mut execution = Vec::new();
    for m in methods {
        let rs: Vec<&AnswerRecord> = records.iter().filter(|r| &r.method == m).collect();
        for level in 1..=3u8 {
            let at: Vec<&AnswerRecord> =
                rs.iter().copied().filter(|r| levels.get(r.question_id.as_str()) == Some(&level)).collect();
            if !at.is_empty() {
                execution.push(Execution::of(m, format!("Level {level}"), &at));
            }
        }
        if !rs.is_empty() {
            execution.push(Execution::of(m, "Overall".into(), &rs));
        }
    }
    Results {
        questions: questions.len(),
        patients: questions.iter().map(|q| &q.patient).collect::<BTreeSet<_>>().len(),
        resamples,
        seed,
        bonferroni_m: COMPARISONS,
        length_bins: bins,
        methods: method_summaries,
        strata,
        execution,
        per_question,
    }
}

fn pct(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else {
        format!("{:.1}", 100.0 * x)
    }
}

fn p_text(p: f64, patients: usize) -> String {
    if p.is_nan() && patients < 2 {
        "- (one patient)".into()
    } else if p.is_nan() {
        "- (no spread)".into()
    } else {
        format!("{p:.4}")
    }
}

fn ci(i: &Interval) -> String {
    format!("{} [{}–{}]", pct(i.estimate), pct(i.low), pct(i.high))
}

fn quart(q: &Quartiles) -> String {
    if q.median.is_nan() {
        "-".into()
    } else {
        format!("{:.1} ({:.1}–{:.1})", q.median, q.q1, q.q3)
    }
}

/// The summary as Markdown tables (what `evident eval chart` prints).
pub fn render(results: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} questions, {} patients; cluster bootstrap over patients, {} resamples; Bonferroni m = {}; record-length bins at {:.0} / {:.0} / {:.0} characters\n",
        results.questions, results.patients, results.resamples, results.bonferroni_m, results.length_bins.p33, results.length_bins.p67, results.length_bins.p90
    );
    let _ = writeln!(s, "| Method | Questions | Runs | Concordance % [95% CI] | Run SD (pp) | Pipeline failures | Citations valid % | Skills | Tool calls | Docs retrieved | Docs cited | Prompt tokens | Reused | Completion | Wall s | Outside model % |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for m in &results.methods {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} ({}%) | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            m.method,
            m.questions,
            m.runs,
            ci(&m.concordance),
            pct(m.mean_run_sd),
            m.pipeline_failures,
            pct(m.pipeline_failure_rate),
            pct(m.citation_validity),
            quart(&m.skills_selected),
            quart(&m.tool_calls),
            quart(&m.documents_retrieved),
            quart(&m.documents_cited),
            quart(&m.prompt_tokens),
            quart(&m.reused_prompt_tokens),
            quart(&m.completion_tokens),
            quart(&m.wall_s),
            pct(m.non_llm_share),
        );
    }
    for m in results.methods.iter().filter(|m| m.builds.len() > 1) {
        let counts: Vec<String> = m.builds.iter().map(|(build, n)| format!("{build} ({n})")).collect();
        let _ = writeln!(
            s,
            "\nThe answers of {} come from {} builds: {}; a resumed evaluation mixed them.",
            m.method,
            m.builds.len(),
            counts.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "\n| Stratum | {} |",
        results.methods.iter().map(|m| m.method.as_str()).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(s, "|---|{}", "---|".repeat(results.methods.len()));
    for st in &results.strata {
        let cells: Vec<String> = results
            .methods
            .iter()
            .map(|m| match st.methods.iter().find(|x| x.method == m.method) {
                Some(x) => format!("{} (n={})", ci(&x.concordance), x.questions),
                None => "-".into(),
            })
            .collect();
        let _ = writeln!(s, "| {}: {} | {} |", st.kind, st.name, cells.join(" | "));
    }
    if !results.execution.is_empty() {
        let _ = writeln!(
            s,
            "\nExecution by complexity level (the paper's Supplementary Table 8; median (IQR) over answers):\n"
        );
        let _ = writeln!(s, "| Method | Stratum | Answers | Skills | Tool calls | Docs retrieved | Docs cited | Of which ≥3 docs % | Wall s |");
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
        for e in &results.execution {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                e.method,
                e.stratum,
                e.answers,
                quart(&e.skills_selected),
                quart(&e.tool_calls),
                quart(&e.documents_retrieved),
                quart(&e.documents_cited),
                pct(e.three_or_more_cited),
                quart(&e.wall_s),
            );
        }
    }
    let comparisons: Vec<(&Stratum, &Comparison)> =
        results.strata.iter().flat_map(|st| st.comparisons.iter().map(move |c| (st, c))).collect();
    if !comparisons.is_empty() {
        let _ = writeln!(s, "\n| Stratum | A vs B | Questions | Diff A-B (pp) [95% CI] | Raw p | Bonferroni p |");
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for (st, c) in comparisons {
            let _ = writeln!(
                s,
                "| {}: {} | {} vs {} | {} | {} | {} | {} |",
                st.kind,
                st.name,
                c.a,
                c.b,
                c.questions,
                ci(&c.difference),
                p_text(c.p_value, c.patients),
                p_text(c.p_bonferroni, c.patients)
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: &str, patient: &str, level: u8, t: AnswerType, gold: &str, has: bool) -> BankQuestion {
        BankQuestion {
            id: id.into(),
            patient: patient.into(),
            level,
            template: "G01".into(),
            category: if t.is_list() { "treatment intervals" } else { "single choice" }.into(),
            question: "?".into(),
            reference_date: "2020-01-01".into(),
            answer_type: t,
            gold_answer: gold.into(),
            gold_evidence: if has {
                vec![crate::bank::GoldEvidence { document_id: "d".into(), record: "r".into(), text: "t".into() }]
            } else {
                vec![]
            },
        }
    }

    #[test]
    fn answers_are_reduced_to_their_schema_value() {
        let yes = q("a", "p", 1, AnswerType::YesNo, "Yes", true);
        assert_eq!(score_answer(&yes, "**Yes**, listed as active."), 1.0);
        assert_eq!(score_answer(&yes, "No."), 0.0);
        assert_eq!(score_answer(&yes, "Yesterday"), 0.0);
        let no = q("b", "p", 1, AnswerType::YesNo, "No", false);
        assert_eq!(score_answer(&no, "No"), 1.0);
        let never = q("b2", "p", 2, AnswerType::YesNo, "Not documented", false);
        assert_eq!(score_answer(&never, "Never"), 1.0);
        let never_but_there = q("b3", "p", 2, AnswerType::YesNo, "Not documented", true);
        assert_eq!(score_answer(&never_but_there, "Never"), 0.0);
        let date = q("c", "p", 2, AnswerType::Date, "2019-03-04", true);
        assert_eq!(score_answer(&date, "2019-03-04 (Condition list)"), 1.0);
        assert_eq!(score_answer(&date, "2019-03-05"), 0.0);
        let cat = q("d", "p", 2, AnswerType::Category, "G3a", true);
        assert_eq!(score_answer(&cat, "Stage G3a (eGFR 52 on 2020-01-01)"), 1.0);
        assert_eq!(score_answer(&cat, "G3b"), 0.0);
        let score = q("e", "p", 3, AnswerType::Score, "3", true);
        assert_eq!(score_answer(&score, "3 points (age 68, female, hypertension)"), 1.0);
        assert_eq!(score_answer(&score, "Score: 4"), 0.0);
    }

    #[test]
    fn lists_score_entry_f1_in_any_separator() {
        let intervals = q("a", "p", 2, AnswerType::IntervalList, "2019-01-01–2019-02-01 | 2020-05-05–ongoing", true);
        assert_eq!(score_answer(&intervals, "2019-01-01 - 2019-02-01; 2020-05-05 to ongoing"), 1.0);
        let half = score_answer(&intervals, "2020-05-05–ongoing");
        assert!((half - 2.0 / 3.0).abs() < 1e-12, "{half}");
        assert_eq!(score_answer(&intervals, "Not documented"), 0.0);
        let dates = q("b", "p", 2, AnswerType::DateList, "2019-01-01 | 2019-06-01", true);
        assert_eq!(score_answer(&dates, "2019-01-01 (20 mg), 2019-06-01 (20 mg)"), 1.0);
        // A wrong status scores 0 whatever the entries.
        assert_eq!(
            score_list(&canonical_list("Planned: 2019-01-01", AnswerType::DateList), "Administered: 2019-01-01"),
            0.0
        );
    }

    fn record(qid: &str, patient: &str, method: &str, run: u32, score: f64) -> AnswerRecord {
        AnswerRecord {
            question_id: qid.into(),
            patient: patient.into(),
            method: method.into(),
            run,
            status: if score >= 0.0 { "answered" } else { "pipeline_failure" }.into(),
            answer: Some("x".into()),
            reasoning: None,
            gold_answer: "x".into(),
            score: score.max(0.0),
            citations: 2,
            unsupported_citations: usize::from(score < 0.5),
            skills_selected: 3,
            tool_calls: 2,
            documents_retrieved: 5,
            documents_cited: 1,
            calls: 4,
            prompt_tokens: 1000,
            completion_tokens: 50,
            reused_prompt_tokens: 400,
            wall_ms: 2000,
            non_llm_ms: 20,
            model_run: "run".into(),
            build: None,
            failure: None,
            review: Review::default(),
            result: serde_json::Value::Null,
        }
    }

    #[test]
    fn results_average_runs_stratify_and_compare_methods() {
        let questions: Vec<BankQuestion> = (0..8)
            .map(|i| q(&format!("q{i}"), &format!("p{}", i / 2), 1 + (i % 3) as u8, AnswerType::YesNo, "Yes", true))
            .collect();
        let methods = vec!["agent".to_string(), "baseline".to_string()];
        let mut records = Vec::new();
        for qu in &questions {
            // agent: right in run 1, right in run 2 except q0; baseline: wrong, one failure.
            records.push(record(&qu.id, &qu.patient, "agent", 1, 1.0));
            records.push(record(&qu.id, &qu.patient, "agent", 2, if qu.id == "q0" { 0.0 } else { 1.0 }));
            records.push(record(&qu.id, &qu.patient, "baseline", 1, if qu.id == "q7" { -1.0 } else { 0.0 }));
        }
        let chars: BTreeMap<String, usize> = (0..4).map(|i| (format!("p{i}"), 1000 * (i + 1))).collect();
        let r = summarise(&questions, &records, &methods, &chars, 2000, 42);
        let agent = &r.methods[0];
        assert_eq!((agent.questions, agent.answers, agent.runs), (8, 16, 2));
        assert!((agent.concordance.estimate - 7.5 / 8.0).abs() < 1e-12);
        let q0 = r.per_question.iter().find(|p| p.question_id == "q0" && p.method == "agent").unwrap();
        assert_eq!((q0.mean, q0.runs), (0.5, 2));
        assert!((q0.sd - 0.5f64.sqrt()).abs() < 1e-12);
        let baseline = &r.methods[1];
        assert_eq!((baseline.pipeline_failures, baseline.concordance.estimate), (1, 0.0));
        assert_eq!(baseline.citation_validity, 0.5);
        let overall = &r.strata[0];
        assert_eq!(overall.name, "all");
        let c = &overall.comparisons[0];
        assert_eq!((c.a.as_str(), c.b.as_str(), c.questions), ("agent", "baseline", 8));
        assert!((c.difference.estimate - 7.5 / 8.0).abs() < 1e-12);
        assert!(c.p_value < 0.01 && c.p_bonferroni <= 1.0);
        assert!(r.strata.iter().any(|s| s.kind == "level" && s.name == "Level 3"));
        // A stratum with one patient has no p-value.
        let one: Vec<BankQuestion> = questions.iter().filter(|q| q.patient == "p0").cloned().collect();
        let r1 = summarise(&one, &records, &methods, &chars, 500, 42);
        assert!(r1.strata[0].comparisons[0].p_value.is_nan());
        assert!(render(&r1).contains("- (one patient)"));
        // Patients whose differences are all the same: no spread, no p.
        let same: Vec<BankQuestion> = questions.iter().filter(|q| q.id == "q1" || q.id == "q3").cloned().collect();
        let r2 = summarise(&same, &records, &methods, &chars, 500, 42);
        let c2 = &r2.strata[0].comparisons[0];
        assert_eq!(c2.patients, 2, "{c2:?}");
        assert!(c2.difference.estimate != 0.0 && c2.p_value.is_nan(), "{c2:?}");
        assert!(render(&r2).contains("- (no spread)"));
        let bins: Vec<&str> = r.strata.iter().filter(|s| s.kind == "record length").map(|s| s.name.as_str()).collect();
        assert!(bins.len() >= 3, "{bins:?}");
        let table = render(&r);
        assert!(table.contains("| agent | 8 | 2 | 93.8"), "{table}");
        assert!(table.contains("agent vs baseline"));
        assert!(!table.contains("builds"), "one build (unrecorded) says nothing: {table}");
    }

    #[test]
    fn execution_is_counted_per_level_with_the_share_citing_three_documents() {
        // Level 1: q0 (cites 1 document), q1 (cites 3); level 3: q2 (cites 4), two runs.
        let questions: Vec<BankQuestion> = [1u8, 1, 3]
            .iter()
            .enumerate()
            .map(|(i, &level)| q(&format!("q{i}"), "p0", level, AnswerType::YesNo, "Yes", true))
            .collect();
        let cited = [1usize, 3, 4];
        let records: Vec<AnswerRecord> = questions
            .iter()
            .enumerate()
            .flat_map(|(i, qu)| {
                (1..=if i == 2 { 2 } else { 1 }).map(move |run| AnswerRecord {
                    documents_cited: cited[i],
                    wall_ms: 1000 * (i as u64 + 1),
                    ..record(&qu.id, &qu.patient, "agent", run, 1.0)
                })
            })
            .collect();
        let chars = BTreeMap::from([("p0".to_string(), 1000)]);
        let r = summarise(&questions, &records, &["agent".to_string()], &chars, 100, 1);
        let rows: Vec<(&str, usize, f64)> =
            r.execution.iter().map(|e| (e.stratum.as_str(), e.answers, e.three_or_more_cited)).collect();
        assert_eq!(
            rows,
            [("Level 1", 2, 0.5), ("Level 3", 2, 1.0), ("Overall", 4, 0.75)],
            "no Level 2 row: none asked"
        );
        let level1 = &r.execution[0];
        assert_eq!((level1.documents_cited.median, level1.wall_s.median), (2.0, 1.5));
        let table = render(&r);
        assert!(table.contains("| agent | Level 1 | 2 | 3.0 (3.0–3.0) | 2.0 (2.0–2.0) | 5.0 (5.0–5.0) | 2.0 (1.5–2.5) | 50.0 | 1.5 (1.2–1.8) |"), "{table}");
        assert!(table.contains("| agent | Overall | 4 |"), "{table}");
    }

    #[test]
    fn answers_from_more_than_one_build_are_counted_and_said() {
        let questions: Vec<BankQuestion> =
            (0..3).map(|i| q(&format!("q{i}"), "p0", 1, AnswerType::YesNo, "Yes", true)).collect();
        let records: Vec<AnswerRecord> = questions
            .iter()
            .enumerate()
            .map(|(i, qu)| AnswerRecord {
                build: (i > 0).then(|| "0123456789ab".to_string()),
                ..record(&qu.id, &qu.patient, "agent", 1, 1.0)
            })
            .collect();
        let chars = BTreeMap::from([("p0".to_string(), 1000)]);
        let r = summarise(&questions, &records, &["agent".to_string()], &chars, 100, 1);
        assert_eq!(r.methods[0].builds, BTreeMap::from([("0123456789ab".into(), 2), ("unrecorded".into(), 1)]));
        assert!(
            render(&r).contains("The answers of agent come from 2 builds: 0123456789ab (2), unrecorded (1)"),
            "{}",
            render(&r)
        );
        // A stored line without the field still reads; one with it keeps it.
        let line = serde_json::to_string(&records[1]).unwrap();
        assert!(line.contains(r#""build":"0123456789ab""#));
        let old = serde_json::to_string(&records[0]).unwrap();
        assert!(!old.contains("build"));
        assert_eq!(serde_json::from_str::<AnswerRecord>(&old).unwrap().build, None);
    }
}
