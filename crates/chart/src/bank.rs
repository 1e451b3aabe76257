//! The development question bank: its JSONL format, the question
//! templates (data, validated on load), and the generator that
//! instantiates them over structured records with the paper's deck draw.
//!
//! - A **bank line** is one JSON object: `id`, `patient`, `level` (1-3),
//!   `template`, `category`, `question`, `reference_date` (YYYY-MM-DD),
//!   `answer_type`, `gold_answer`, `gold_evidence` (the stored timeline
//!   lines the gold answer rests on). [`parse_bank`] reads a file and names
//!   the line and field of the first bad line.
//! - A **template** names a deterministic rule over the structured record
//!   (`rule` + `params`), its level, category and answer type; the rule
//!   code is here, the templates are `bank/templates.yaml`.
//! - **Generation** (the paper's "Clinical question bank: development and
//!   instantiation"): per patient, two Level 1, two Level 2 and one Level 3
//!   questions are drawn from a shuffled deck per level with a fixed seed;
//!   an exhausted deck is reshuffled, and a template that cannot be
//!   instantiated for the patient goes back into the deck, which is
//!   reshuffled. The reference date is the date of the patient's last
//!   document. A gold answer is derived from the structured resources
//!   ([`PatientFacts`]) and kept only when the stored timeline documents
//!   support it: every record it rests on appears in a document dated on or
//!   before the reference date, and an answer of absence ("No") holds only
//!   when no line of the relevant document kind mentions the terms.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use chrono::{NaiveDate, NaiveDateTime};
use evident_model::labs::LabCatalogue;
use evident_model::{DocKind, Document, LabObservation, LabValue, Patient};
use serde::{Deserialize, Serialize};
use serde_json::Value;

// ---------------------------------------------------------------------------
// The bank format
// ---------------------------------------------------------------------------

/// How an answer is compared with the gold answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerType {
    /// Yes / No / Not documented / Unclear (/ Never): the paper's format
    /// for a status on a date and for "is X documented" (Q01-Q03, Q17,
    /// Q18).
    YesNo,
    /// Yes / No / Unclear: the paper's format for whether something was
    /// ever done, given or diagnosed (Q04-Q16, Q19, Q20, Q43-Q45). There is
    /// no "Not documented": nothing in the record is "No".
    YesNoUnclear,
    /// One date, YYYY-MM-DD (or Not documented).
    Date,
    /// One category (a stage, a class) from the template's list.
    Category,
    /// One number (a score).
    Score,
    /// A list of dates; entry-level F1.
    DateList,
    /// A list of intervals `start–end` or `start–ongoing`; entry-level F1.
    IntervalList,
}

impl AnswerType {
    pub fn is_list(self) -> bool {
        matches!(self, AnswerType::DateList | AnswerType::IntervalList)
    }

    pub const ALL: [AnswerType; 7] = [
        AnswerType::YesNo,
        AnswerType::YesNoUnclear,
        AnswerType::Date,
        AnswerType::Category,
        AnswerType::Score,
        AnswerType::DateList,
        AnswerType::IntervalList,
    ];

    /// Reads `yes_no` (or `yes-no`), `yes_no_unclear`, `date`, `category`, `score`,
    /// `date_list`, `interval_list`.
    pub fn parse(text: &str) -> Option<AnswerType> {
        let t = text.trim().replace('-', "_");
        AnswerType::ALL.into_iter().find(|a| a.as_str() == t)
    }

    /// The answer schema as every method's answer prompt states it (the
    /// paper gives each question's answer schema with the question; the
    /// wording follows the schemas of the baseline prompt).
    pub fn schema(self) -> &'static str {
        match self {
            AnswerType::YesNo => "single choice: Yes / No / Not documented / Unclear",
            AnswerType::YesNoUnclear => "single choice: Yes / No / Unclear",
            AnswerType::Date => "one date: YYYY-MM-DD, or Not documented / Unclear",
            AnswerType::Category => "one category named in the question, or Not documented / Unclear",
            AnswerType::Score => "stage or score: <value>; <date of the inputs>; <source>, or Not documented / Unclear",
            AnswerType::DateList => "list of dates: a status, then the dates separated by \" | \", or Never / Not documented",
            AnswerType::IntervalList => {
                "list of intervals: a status, then start–end or start–ongoing entries separated by \" | \", or Never / Not documented"
            }
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AnswerType::YesNo => "yes_no",
            AnswerType::YesNoUnclear => "yes_no_unclear",
            AnswerType::Date => "date",
            AnswerType::Category => "category",
            AnswerType::Score => "score",
            AnswerType::DateList => "date_list",
            AnswerType::IntervalList => "interval_list",
        }
    }
}

/// The paper's five clinical task categories.
pub const CATEGORIES: [&str; 5] =
    ["single choice", "treatment intervals", "first occurrence", "staging", "eligibility"];

/// One stored line a gold answer rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoldEvidence {
    pub document_id: String,
    /// The source record, e.g. `MedicationRequest/abc`.
    pub record: String,
    /// The timeline line, verbatim.
    pub text: String,
}

/// One question of the bank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BankQuestion {
    pub id: String,
    pub patient: String,
    pub level: u8,
    pub template: String,
    pub category: String,
    pub question: String,
    pub reference_date: String,
    pub answer_type: AnswerType,
    pub gold_answer: String,
    pub gold_evidence: Vec<GoldEvidence>,
}

impl BankQuestion {
    /// False when the gold answer rests on no record (an answer of
    /// absence): then "never" and "not documented" are the same answer.
    pub fn record_has_it(&self) -> bool {
        !self.gold_evidence.is_empty()
    }
}

/// A bad line of a questions file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}: field `{field}` {message}")]
pub struct BankError {
    pub file: String,
    pub line: usize,
    pub field: String,
    pub message: String,
}

/// Parses a questions file (JSONL, blank lines allowed). The first bad
/// line is an error naming the file, the line and the field.
pub fn parse_bank(file: &Path, text: &str) -> Result<Vec<BankQuestion>, BankError> {
    let mut out: Vec<BankQuestion> = Vec::new();
    let mut ids: BTreeMap<String, usize> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let err = |field: &str, message: String| BankError {
            file: file.display().to_string(),
            line,
            field: field.to_string(),
            message,
        };
        let value: Value = serde_json::from_str(raw)
            .map_err(|e| err("(line)", format!("is not a JSON object ({e}); write one question per line")))?;
        let Some(obj) = value.as_object() else {
            return Err(err("(line)", "is not a JSON object; write one question per line".into()));
        };
        let string = |name: &str| -> Result<String, BankError> {
            match obj.get(name) {
                Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
                Some(Value::String(_)) => Err(err(name, "is empty".into())),
                Some(other) => Err(err(name, format!("must be a string, found {other}"))),
                None => Err(err(name, "is missing".into())),
            }
        };
        let id = string("id")?;
        if let Some(first) = ids.get(&id) {
            return Err(err("id", format!("{id:?} repeats the id of line {first}; ids must be unique")));
        }
        let level = match obj.get("level").and_then(Value::as_u64) {
            Some(l @ 1..=3) => l as u8,
            Some(l) => return Err(err("level", format!("is {l}; use 1, 2 or 3"))),
            None => return Err(err("level", "is missing or not a number; use 1, 2 or 3".into())),
        };
        let category = string("category")?;
        if !CATEGORIES.contains(&category.as_str()) {
            return Err(err("category", format!("is {category:?}; use one of {}", CATEGORIES.join(", "))));
        }
        let reference_date = string("reference_date")?;
        if NaiveDate::parse_from_str(&reference_date, "%Y-%m-%d").is_err() {
            return Err(err("reference_date", format!("is {reference_date:?}; write it as YYYY-MM-DD")));
        }
        let answer_type: AnswerType = serde_json::from_value(obj.get("answer_type").cloned().unwrap_or(Value::Null))
            .map_err(|_| {
                err(
                    "answer_type",
                    format!(
                        "is {}; use one of yes_no, date, category, score, date_list, interval_list",
                        obj.get("answer_type").map(|v| v.to_string()).unwrap_or_else(|| "missing".into())
                    ),
                )
            })?;
        let gold_evidence: Vec<GoldEvidence> =
            serde_json::from_value(obj.get("gold_evidence").cloned().unwrap_or(Value::Array(vec![])))
                .map_err(|e| err("gold_evidence", format!("is not a list of {{document_id, record, text}} ({e})")))?;
        let q = BankQuestion {
            id: id.clone(),
            patient: string("patient")?,
            level,
            template: string("template")?,
            category,
            question: string("question")?,
            reference_date,
            answer_type,
            gold_answer: string("gold_answer")?,
            gold_evidence,
        };
        ids.insert(id, line);
        out.push(q);
    }
    if out.is_empty() {
        return Err(BankError {
            file: file.display().to_string(),
            line: 0,
            field: "(file)".into(),
            message: "holds no question".into(),
        });
    }
    Ok(out)
}

/// The bank as JSONL, one question per line, in order.
pub fn to_jsonl(questions: &[BankQuestion]) -> String {
    questions.iter().map(|q| serde_json::to_string(q).expect("a question serialises") + "\n").collect()
}

/// A stratified evaluation subset of `n` questions, one per patient,
/// chosen by a fixed rule that reads only patients, levels and file order
/// (never a gold answer): the bank's patients, in order of first
/// appearance, are shuffled with SplitMix64 seeded by `seed`; walking them
/// in that order with the level due going 1, 2, 3, 1, 2, 3, ..., a patient
/// who has a question of the level due gives the first one (in file order)
/// and the next level becomes due; a patient who has none is passed over.
/// So any first `k` questions of the sample are `k` patients (clusters for
/// the bootstrap) and the levels in turn. Fewer than `n` questions when the
/// bank runs out of patients.
pub fn stratified_sample(questions: &[BankQuestion], n: usize, seed: u64) -> Vec<BankQuestion> {
    let mut patients: Vec<&str> = Vec::new();
    for q in questions {
        if !patients.contains(&q.patient.as_str()) {
            patients.push(&q.patient);
        }
    }
    Rng::new(seed).shuffle(&mut patients);
    let mut out = Vec::new();
    let mut due = 1u8;
    for patient in patients {
        if out.len() == n {
            break;
        }
        if let Some(q) = questions.iter().find(|q| q.patient == patient && q.level == due) {
            out.push(q.clone());
            due = due % 3 + 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Templates
// ---------------------------------------------------------------------------

/// The rule that derives a template's gold answer from the structured
/// record, with its parameters.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "rule", content = "params", rename_all = "snake_case")]
pub enum Rule {
    /// Slot `{medication}`: Yes when the latest request for it on or before
    /// the reference date is active, No when it is stopped.
    MedicationOnDate {},
    /// Yes when any request names one of `substances`, else No.
    MedicationClassEver { substances: Vec<String> },
    /// Yes when a condition names one of `terms` (none of `exclude`).
    ConditionEver {
        terms: Vec<String>,
        #[serde(default)]
        exclude: Vec<String>,
    },
    /// Yes when a procedure names one of `terms`.
    ProcedureEver { terms: Vec<String> },
    /// Yes when the last value of `loinc` within `window_days` is below the
    /// sex's threshold or a condition naming `terms` is active; No when
    /// that value is normal and no such condition is active; else Not documented.
    LowLabOrConditionOnDate {
        loinc: Vec<String>,
        window_days: i64,
        female_below: f64,
        male_below: f64,
        terms: Vec<String>,
    },
    /// Slot `{medication}`: the distinct dates of its requests (1 to `max_entries`).
    MedicationDates { max_entries: usize },
    /// Slot `{condition}`: onset–resolution (or –ongoing) intervals (1 to `max_entries`).
    ConditionIntervals { max_entries: usize },
    /// Slot `{condition}`: the first onset date.
    ConditionFirstDate {},
    /// Slot `{medication}`: the first request date.
    MedicationFirstDate {},
    /// The category of the last value of `loinc` within `window_days`:
    /// the first band whose `at_least` the value reaches (bands from high
    /// to low); Not documented when there is no value in the window.
    LabCategory {
        loinc: Vec<String>,
        window_days: i64,
        bands: Vec<Band>,
        #[serde(default)]
        adults_only: bool,
    },
    /// CHA2DS2-VASc from age, sex and conditions naming each component's
    /// terms; `require` (if not empty): only for patients with such a condition.
    Cha2ds2Vasc {
        heart_failure: Vec<String>,
        hypertension: Vec<String>,
        diabetes: Vec<String>,
        #[serde(default)]
        diabetes_exclude: Vec<String>,
        stroke: Vec<String>,
        vascular: Vec<String>,
        #[serde(default)]
        require: Vec<String>,
        /// Answer Yes/No: is the score at least this (men) / `female_at_least` (women)?
        #[serde(default)]
        male_at_least: Option<u32>,
        #[serde(default)]
        female_at_least: Option<u32>,
    },
    /// Yes when a condition names one of `terms` (none of `exclude`) and
    /// the last value of `loinc` within `window_days` is at least
    /// `at_least`; No when no such condition or the value is lower;
    /// Unclear when the condition is there but no value is in the window.
    ConditionAndLab {
        terms: Vec<String>,
        #[serde(default)]
        exclude: Vec<String>,
        loinc: Vec<String>,
        window_days: i64,
        at_least: f64,
    },
    /// Yes when age is within [`min_age`, `max_age`] and (a condition names
    /// `terms`, or a value of `loinc` within `window_days` reaches
    /// `at_least`); No otherwise.
    AgeAndConditionOrLab {
        min_age: i64,
        max_age: i64,
        terms: Vec<String>,
        #[serde(default)]
        exclude: Vec<String>,
        loinc: Vec<String>,
        window_days: i64,
        at_least: f64,
    },
}

/// One band of a lab category.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Band {
    pub label: String,
    pub at_least: f64,
}

impl Rule {
    /// The slot the rule fills in the question, if any.
    fn slot(&self) -> Option<&'static str> {
        match self {
            Rule::MedicationOnDate {} | Rule::MedicationDates { .. } | Rule::MedicationFirstDate {} => {
                Some("{medication}")
            }
            Rule::ConditionIntervals { .. } | Rule::ConditionFirstDate {} => Some("{condition}"),
            _ => None,
        }
    }

    fn answer_type(&self) -> AnswerType {
        match self {
            Rule::MedicationDates { .. } => AnswerType::DateList,
            Rule::ConditionIntervals { .. } => AnswerType::IntervalList,
            Rule::ConditionFirstDate {} | Rule::MedicationFirstDate {} => AnswerType::Date,
            Rule::LabCategory { .. } => AnswerType::Category,
            Rule::Cha2ds2Vasc { male_at_least: None, .. } => AnswerType::Score,
            _ => AnswerType::YesNo,
        }
    }
}

/// A question template.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Template {
    pub id: String,
    pub level: u8,
    pub category: String,
    /// The paper's template(s) this one adapts (Supplementary Table 2).
    pub adapts: String,
    /// The question, with `{date}` and the rule's slot as placeholders.
    pub question: String,
    /// The answer options. For a yes/no rule they choose the answer type:
    /// with "Not documented" [`AnswerType::YesNo`], else
    /// [`AnswerType::YesNoUnclear`] (the paper's two yes/no formats).
    pub answer_format: String,
    #[serde(flatten)]
    pub rule: Rule,
}

impl Template {
    pub fn answer_type(&self) -> AnswerType {
        match self.rule.answer_type() {
            AnswerType::YesNo if !self.answer_format.contains("Not documented") => AnswerType::YesNoUnclear,
            t => t,
        }
    }
}

/// The two yes/no answer formats a template may give.
const YES_NO_FORMATS: [&str; 2] = ["Yes / No / Not documented / Unclear", "Yes / No / Unclear"];

/// The built-in templates (general medicine, for FHIR records).
pub const BUILTIN_TEMPLATES: &str = include_str!("../bank/templates.yaml");

/// A templates file that does not validate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {place}: {message}")]
pub struct TemplateError {
    pub file: String,
    pub place: String,
    pub message: String,
}

/// Parses and validates templates: ids unique, levels 1-3, a known
/// category, a known rule with its parameters, the placeholders the rule
/// fills, one of the paper's two yes/no formats for a yes/no rule, and
/// every level present.
pub fn load_templates(file: &str, text: &str) -> Result<Vec<Template>, TemplateError> {
    let err = |place: String, message: String| TemplateError { file: file.to_string(), place, message };
    let raw: Vec<serde_yaml::Value> = serde_yaml::from_str(text)
        .map_err(|e| err("(file)".into(), format!("is not a YAML list of templates ({e})")))?;
    let mut out: Vec<Template> = Vec::new();
    for (i, value) in raw.into_iter().enumerate() {
        let label = value.get("id").and_then(|v| v.as_str()).map(String::from).unwrap_or_else(|| format!("#{}", i + 1));
        let place = format!("template {label}");
        let t: Template = serde_yaml::from_value(value).map_err(|e| err(place.clone(), e.to_string()))?;
        if out.iter().any(|o| o.id == t.id) {
            return Err(err(place, "field `id` repeats an earlier template's id".into()));
        }
        if !(1..=3).contains(&t.level) {
            return Err(err(place, format!("field `level` is {}; use 1, 2 or 3", t.level)));
        }
        if !CATEGORIES.contains(&t.category.as_str()) {
            return Err(err(
                place,
                format!("field `category` is {:?}; use one of {}", t.category, CATEGORIES.join(", ")),
            ));
        }
        let mut placeholders: Vec<&str> = Vec::new();
        let mut rest = t.question.as_str();
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else { break };
            placeholders.push(&rest[open..open + close + 1]);
            rest = &rest[open + close + 1..];
        }
        for p in &placeholders {
            if *p != "{date}" && Some(*p) != t.rule.slot() {
                return Err(err(place, format!("field `question` has placeholder {p} that rule does not fill")));
            }
        }
        if let Some(slot) = t.rule.slot() {
            if !placeholders.contains(&slot) {
                return Err(err(place, format!("field `question` must contain {slot}, which the rule fills")));
            }
        }
        if t.rule.answer_type() == AnswerType::YesNo && !YES_NO_FORMATS.iter().any(|f| t.answer_format.starts_with(f)) {
            return Err(err(
                place,
                format!(
                    "field `answer_format` is {:?}; a yes/no rule's format starts with {:?} or {:?}",
                    t.answer_format, YES_NO_FORMATS[0], YES_NO_FORMATS[1]
                ),
            ));
        }
        let empty_list = match &t.rule {
            Rule::MedicationClassEver { substances } => substances.is_empty(),
            Rule::ConditionEver { terms, .. } | Rule::ProcedureEver { terms } => terms.is_empty(),
            Rule::LowLabOrConditionOnDate { loinc, .. }
            | Rule::ConditionAndLab { loinc, .. }
            | Rule::AgeAndConditionOrLab { loinc, .. } => loinc.is_empty(),
            Rule::LabCategory { loinc, bands, .. } => loinc.is_empty() || bands.is_empty(),
            _ => false,
        };
        if empty_list {
            return Err(err(place, "field `params` has an empty list; give at least one term, code or band".into()));
        }
        if let Rule::LabCategory { bands, .. } = &t.rule {
            if bands.windows(2).any(|w| w[0].at_least <= w[1].at_least) {
                return Err(err(place, "field `params.bands` must go from the highest `at_least` down".into()));
            }
        }
        out.push(t);
    }
    for level in 1..=3 {
        if !out.iter().any(|t| t.level == level) {
            return Err(err("(file)".into(), format!("has no Level {level} template; each level needs one")));
        }
    }
    Ok(out)
}

/// The built-in templates, parsed.
pub fn builtin_templates() -> Vec<Template> {
    load_templates("crates/chart/bank/templates.yaml", BUILTIN_TEMPLATES).expect("the built-in templates validate")
}

// ---------------------------------------------------------------------------
// Structured facts
// ---------------------------------------------------------------------------

/// One dated structured record.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    /// `ResourceType/id`, as the timeline lines cite it.
    pub record: String,
    pub name: String,
    pub time: NaiveDateTime,
    pub status: String,
    /// Conditions: the resolution date.
    pub end: Option<NaiveDate>,
    /// Observations: LOINC code and numeric value.
    pub code: Option<String>,
    pub value: Option<f64>,
}

/// What the structured resources say about one patient.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PatientFacts {
    pub id: String,
    pub female: Option<bool>,
    /// The birth date, or with `birth_latest` the earliest it can be.
    pub birth_date: Option<NaiveDate>,
    /// The latest the birth date can be, when it is known only within a
    /// range (MIMIC-IV's anchor age); `None`: `birth_date` is exact.
    pub birth_latest: Option<NaiveDate>,
    /// Diagnoses are coded per admission (MIMIC-IV's ICD codes), with no
    /// onset, resolution or clinical status: a rule that needs a
    /// condition's status or interval is not instantiated.
    pub conditions_without_status: bool,
    pub medications: Vec<Fact>,
    pub conditions: Vec<Fact>,
    pub procedures: Vec<Fact>,
    pub observations: Vec<Fact>,
}

fn fhir_time(text: &str) -> Option<NaiveDateTime> {
    let t = text.trim();
    if let Ok(dt) = chrono::DateTime::parse_from_rfc3339(t) {
        return Some(dt.naive_local());
    }
    if let Ok(dt) = NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S") {
        return Some(dt);
    }
    NaiveDate::parse_from_str(t.get(..10)?, "%Y-%m-%d").ok().and_then(|d| d.and_hms_opt(0, 0, 0))
}

fn text_at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str().filter(|s| !s.trim().is_empty())
}

fn concept(v: &Value, field: &str) -> Option<String> {
    let c = v.get(field)?;
    text_at(c, &["text"])
        .or_else(|| c.get("coding")?.as_array()?.iter().find_map(|x| text_at(x, &["display"])))
        .map(String::from)
}

impl PatientFacts {
    /// Reads the patients of a FHIR R4 bundle (transaction or collection),
    /// with the same names and dates ingestion uses for the timeline lines.
    pub fn from_fhir_bundle(bundle: &Value) -> Vec<PatientFacts> {
        let mut by_patient: BTreeMap<String, PatientFacts> = BTreeMap::new();
        let entries = bundle.get("entry").and_then(Value::as_array).cloned().unwrap_or_default();
        for e in &entries {
            let Some(r) = e.get("resource") else { continue };
            let (Some(kind), Some(id)) = (text_at(r, &["resourceType"]), text_at(r, &["id"])) else { continue };
            if kind == "Patient" {
                let p = by_patient.entry(id.to_string()).or_default();
                p.id = id.to_string();
                p.female = text_at(r, &["gender"]).map(|g| g == "female");
                p.birth_date = text_at(r, &["birthDate"]).and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok());
                continue;
            }
            let subject = text_at(r, &["subject", "reference"]).or_else(|| text_at(r, &["patient", "reference"]));
            let Some(patient) =
                subject.and_then(|s| s.strip_prefix("Patient/").or_else(|| s.strip_prefix("urn:uuid:")))
            else {
                continue;
            };
            let record = format!("{kind}/{id}");
            let status = |path: &[&str]| text_at(r, path).unwrap_or("unknown status").to_string();
            let fact = match kind {
                "MedicationRequest" => text_at(r, &["authoredOn"]).and_then(fhir_time).map(|time| Fact {
                    record,
                    name: concept(r, "medicationCodeableConcept")
                        .or_else(|| text_at(r, &["medicationReference", "display"]).map(String::from))
                        .unwrap_or_else(|| "unnamed medication".into()),
                    time,
                    status: status(&["status"]),
                    end: None,
                    code: None,
                    value: None,
                }),
                "Condition" => text_at(r, &["onsetDateTime"])
                    .or_else(|| text_at(r, &["recordedDate"]))
                    .or_else(|| text_at(r, &["onsetPeriod", "start"]))
                    .and_then(fhir_time)
                    .map(|time| Fact {
                        record,
                        name: concept(r, "code").unwrap_or_else(|| "unnamed condition".into()),
                        time,
                        status: r
                            .get("clinicalStatus")
                            .and_then(|c| c.get("coding"))
                            .and_then(Value::as_array)
                            .and_then(|cs| cs.iter().find_map(|c| text_at(c, &["code"])))
                            .unwrap_or("unknown status")
                            .to_string(),
                        end: text_at(r, &["abatementDateTime"]).and_then(fhir_time).map(|t| t.date()),
                        code: None,
                        value: None,
                    }),
                "Procedure" => text_at(r, &["performedDateTime"])
                    .or_else(|| text_at(r, &["performedPeriod", "start"]))
                    .and_then(fhir_time)
                    .map(|time| Fact {
                        record,
                        name: concept(r, "code").unwrap_or_else(|| "unnamed procedure".into()),
                        time,
                        status: status(&["status"]),
                        end: None,
                        code: None,
                        value: None,
                    }),
                "Observation" => text_at(r, &["effectiveDateTime"])
                    .or_else(|| text_at(r, &["effectivePeriod", "start"]))
                    .or_else(|| text_at(r, &["issued"]))
                    .and_then(fhir_time)
                    .map(|time| Fact {
                        record,
                        name: concept(r, "code").unwrap_or_else(|| "unnamed observation".into()),
                        time,
                        status: status(&["status"]),
                        end: None,
                        code: r
                            .get("code")
                            .and_then(|c| c.get("coding"))
                            .and_then(Value::as_array)
                            .and_then(|cs| {
                                cs.iter()
                                    .find(|c| text_at(c, &["system"]) == Some("http://loinc.org"))
                                    .and_then(|c| text_at(c, &["code"]))
                            })
                            .map(String::from),
                        value: r.get("valueQuantity").and_then(|q| q.get("value")).and_then(Value::as_f64),
                    }),
                _ => None,
            };
            let Some(fact) = fact else { continue };
            let p = by_patient.entry(patient.to_string()).or_default();
            p.id = patient.to_string();
            match kind {
                "MedicationRequest" => p.medications.push(fact),
                "Condition" => p.conditions.push(fact),
                "Procedure" => p.procedures.push(fact),
                _ => p.observations.push(fact),
            }
        }
        let mut out: Vec<PatientFacts> = by_patient.into_values().collect();
        for p in &mut out {
            for list in [&mut p.medications, &mut p.conditions, &mut p.procedures, &mut p.observations] {
                list.sort_by(|a, b| (a.time, &a.record).cmp(&(b.time, &b.record)));
            }
        }
        out
    }
}

/// The dated lines of a timeline document: (time, text, record), read
/// by the structured-record tool's line parser.
fn timeline_lines(doc: &Document) -> impl Iterator<Item = (NaiveDateTime, String, String)> + '_ {
    doc.text.lines().skip(1).filter_map(|line| {
        let (text, record) = crate::tools::timeline_line(line)?;
        let clock = line.trim().strip_prefix("- ")?.get(..16)?;
        let time = NaiveDateTime::parse_from_str(clock, "%Y-%m-%d %H:%M").ok()?;
        Some((time, text, record))
    })
}

/// `Sex F; age 52 in anchor year 2180 ...` (MIMIC-IV's demographics line):
/// female, and the earliest and latest birth dates the anchor age allows.
fn mimic_demographics(text: &str) -> Option<(bool, NaiveDate, NaiveDate)> {
    let female = text.strip_prefix("Sex ")?.starts_with('F');
    let anchor = evident_model::age::AnchorAge::parse(text)?;
    // Over 89 there is no earliest birth date; the oldest age assumed is
    // the calculators' bound.
    let (earliest, latest) = anchor.birth_window()?;
    let oldest = || NaiveDate::from_ymd_opt(anchor.year - evident_model::age::OLDEST_AGE - 1, 1, 1);
    Some((female, earliest.or_else(oldest)?, latest))
}

impl PatientFacts {
    /// Reads MIMIC-IV patients from what ingestion made of the demo's
    /// tables: the demographics, prescriptions and ICD diagnosis and
    /// procedure timeline documents, and the lab rows (each a fact under
    /// the LOINC codes of its catalogue concept), with the names and dates
    /// the timeline lines show. Where MIMIC-IV differs from FHIR the facts
    /// say so: the age is known within about a year (an anchor age in an
    /// anchor year), diagnoses carry no status (`conditions_without_status`),
    /// and a prescription's status on the patient's reference date (the
    /// last document's) comes from its stop time on the line: `active` when
    /// it stops after that day, `stopped` when before, unknown on the day.
    pub fn from_mimic(patients: &[Patient], documents: &[Document], labs: &[LabObservation]) -> Vec<PatientFacts> {
        let catalogue = LabCatalogue::builtin();
        let mut by_patient: BTreeMap<String, PatientFacts> = BTreeMap::new();
        for p in patients {
            by_patient.insert(
                p.id.clone(),
                PatientFacts { id: p.id.clone(), conditions_without_status: true, ..PatientFacts::default() },
            );
        }
        let mut reference: BTreeMap<&str, NaiveDate> = BTreeMap::new();
        for d in documents {
            if let Some(t) = d.date {
                let r = reference.entry(d.patient_id.as_str()).or_insert(t.date());
                *r = (*r).max(t.date());
            }
        }
        let fact = |record: &str, name: &str, time: NaiveDateTime, status: &str| Fact {
            record: record.to_string(),
            name: name.to_string(),
            time,
            status: status.to_string(),
            end: None,
            code: None,
            value: None,
        };
        for d in documents.iter().filter(|d| d.source == "mimic") {
            let Some(p) = by_patient.get_mut(&d.patient_id) else { continue };
            let table = d.source_id.split(':').next().unwrap_or("");
            for (time, text, record) in timeline_lines(d) {
                match table {
                    "demographics" => {
                        if let Some((female, earliest, latest)) = mimic_demographics(&text) {
                            p.female = Some(female);
                            p.birth_date = Some(earliest);
                            p.birth_latest = Some(latest);
                        }
                    }
                    "prescriptions" => {
                        let (name, stop) = match text.as_str().rsplit_once(" (until ") {
                            Some((name, until)) => (
                                name,
                                until
                                    .strip_suffix(')')
                                    .and_then(|u| NaiveDateTime::parse_from_str(u, "%Y-%m-%d %H:%M").ok()),
                            ),
                            None => (text.as_str(), None),
                        };
                        let on = reference.get(d.patient_id.as_str()).copied();
                        let status = match (stop, on) {
                            (Some(stop), Some(on)) if stop.date() > on => "active",
                            (Some(stop), Some(on)) if stop.date() < on => "stopped",
                            _ => "unknown status",
                        };
                        p.medications.push(fact(&record, name, time, status));
                    }
                    "diagnoses_icd" | "procedures_icd" => {
                        // `ICD-9 5715: Cirrhosis of liver ... (#3 of admission 2xxxxxxx)`
                        let Some((_, title)) = text.split_once(": ") else { continue };
                        let name = title.rsplit_once(" (#").map_or(title, |(t, _)| t);
                        let list = if table == "diagnoses_icd" { &mut p.conditions } else { &mut p.procedures };
                        list.push(fact(&record, name, time, "unknown status"));
                    }
                    _ => {}
                }
            }
        }
        for lab in labs {
            let (Some(p), Some(concept), LabValue::Numeric(value)) = (
                by_patient.get_mut(&lab.patient_id),
                lab.concept_id.as_deref().and_then(|id| catalogue.get(id)),
                &lab.value,
            ) else {
                continue;
            };
            for code in &concept.loinc {
                p.observations.push(Fact {
                    record: lab.source_id.clone(),
                    name: concept.name.clone(),
                    time: lab.time,
                    status: "final".into(),
                    end: None,
                    code: Some(code.clone()),
                    value: Some(*value),
                });
            }
        }
        let mut out: Vec<PatientFacts> = by_patient.into_values().collect();
        for p in &mut out {
            for list in [&mut p.medications, &mut p.conditions, &mut p.procedures, &mut p.observations] {
                list.sort_by(|a, b| (a.time, &a.record).cmp(&(b.time, &b.record)));
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------
// Generation
// ---------------------------------------------------------------------------

/// SplitMix64, seeded: the deck shuffles and slot choices.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Fisher-Yates.
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// One patient's record as the generator sees it: the structured facts
/// and the stored timeline documents.
pub struct PatientRecord<'a> {
    pub facts: &'a PatientFacts,
    pub documents: &'a [Document],
}

/// How many questions per level the deck draw takes (the paper's 2 + 2 + 1).
pub const PER_LEVEL: [(u8, usize); 3] = [(1, 2), (2, 2), (3, 1)];

/// What the generator did, beside the questions.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GenerationReport {
    pub patients: usize,
    pub questions: usize,
    /// Patients who got fewer than 2 + 2 + 1 questions (no template of a
    /// level could be instantiated), with the level.
    pub short: Vec<(String, u8)>,
    /// Draws put back because the template could not be instantiated.
    pub redraws: usize,
}

/// Instantiates `templates` for each record (in the order given) with the
/// paper's deck draw and `seed`.
pub fn generate(
    templates: &[Template],
    records: &[PatientRecord<'_>],
    seed: u64,
) -> (Vec<BankQuestion>, GenerationReport) {
    let mut rng = Rng::new(seed);
    let mut report = GenerationReport::default();
    let mut decks: BTreeMap<u8, Vec<usize>> = BTreeMap::new();
    let mut out = Vec::new();
    for record in records {
        let Some(reference) = record.documents.iter().filter_map(|d| d.date).max().map(|t| t.date()) else {
            continue;
        };
        report.patients += 1;
        for (level, wanted) in PER_LEVEL {
            let of_level: Vec<usize> = (0..templates.len()).filter(|&i| templates[i].level == level).collect();
            let mut tried: BTreeSet<usize> = BTreeSet::new();
            let mut got = 0;
            while got < wanted && tried.len() < of_level.len() {
                let deck = decks.entry(level).or_default();
                if deck.is_empty() {
                    deck.extend(&of_level);
                    rng.shuffle(deck);
                }
                let card = deck.pop().expect("a refilled deck has cards");
                if !tried.insert(card) {
                    // Already drawn for this patient: back into the deck
                    // for later patients.
                    deck.insert(0, card);
                    if deck.iter().all(|c| tried.contains(c)) {
                        // Only this patient's drawn cards remain: a fresh
                        // deck on top of them.
                        let mut fresh: Vec<usize> = of_level.iter().copied().filter(|c| !tried.contains(c)).collect();
                        rng.shuffle(&mut fresh);
                        deck.extend(fresh);
                    }
                    continue;
                }
                match instantiate(&templates[card], record, reference, &mut rng) {
                    Some(mut q) => {
                        q.id = format!("{}-{}", short_id(&record.facts.id), templates[card].id);
                        out.push(q);
                        got += 1;
                    }
                    None => {
                        report.redraws += 1;
                        deck.push(card);
                        rng.shuffle(deck);
                    }
                }
            }
            if got < wanted {
                report.short.push((record.facts.id.clone(), level));
            }
        }
    }
    report.questions = out.len();
    (out, report)
}

fn short_id(patient: &str) -> String {
    patient.chars().take(8).collect()
}

fn mentions(name: &str, terms: &[String], exclude: &[String]) -> bool {
    let n = name.to_lowercase();
    terms.iter().any(|t| n.contains(&t.to_lowercase())) && !exclude.iter().any(|t| n.contains(&t.to_lowercase()))
}

/// Finds the timeline line citing `record` in a document dated on or before `reference`.
fn evidence(record: &PatientRecord<'_>, reference: NaiveDate, id: &str) -> Option<GoldEvidence> {
    let tag = format!("[{id}]");
    record.documents.iter().filter(|d| d.date.is_some_and(|t| t.date() <= reference)).find_map(|d| {
        d.text.lines().find(|l| l.contains(&tag)).map(|l| GoldEvidence {
            document_id: d.id.clone(),
            record: id.to_string(),
            text: l.trim().to_string(),
        })
    })
}

/// True when no line of a document of `kind` (on or before `reference`)
/// mentions the terms: the text agrees that the record holds none.
fn text_silent(
    record: &PatientRecord<'_>,
    reference: NaiveDate,
    kind: DocKind,
    terms: &[String],
    exclude: &[String],
) -> bool {
    !record
        .documents
        .iter()
        .filter(|d| d.kind == kind && d.date.is_some_and(|t| t.date() <= reference))
        .any(|d| d.text.lines().skip(1).any(|l| mentions(l, terms, exclude)))
}

/// All evidence for the facts, or None when one is not in the text.
fn all_evidence(record: &PatientRecord<'_>, reference: NaiveDate, facts: &[&Fact]) -> Option<Vec<GoldEvidence>> {
    let mut out: Vec<GoldEvidence> = Vec::new();
    for f in facts {
        let e = evidence(record, reference, &f.record)?;
        if !out.contains(&e) {
            out.push(e);
        }
    }
    Some(out)
}

fn until(facts: &[Fact], reference: NaiveDate) -> impl Iterator<Item = &Fact> {
    facts.iter().filter(move |f| f.time.date() <= reference)
}

fn last_value<'f>(facts: &'f [Fact], loinc: &[String], reference: NaiveDate, window_days: i64) -> Option<&'f Fact> {
    until(facts, reference)
        .filter(|f| f.code.as_ref().is_some_and(|c| loinc.contains(c)) && f.value.is_some())
        .filter(|f| (reference - f.time.date()).num_days() <= window_days)
        .last()
}

/// What `decide` says of the patient's age in whole years on `reference`,
/// when every age the record allows gives the same answer (one age from a
/// birth date; a range from MIMIC-IV's anchor age); `None` otherwise.
fn by_age<T: PartialEq>(facts: &PatientFacts, reference: NaiveDate, decide: impl Fn(i64) -> T) -> Option<T> {
    let earliest = facts.birth_date?;
    let latest = facts.birth_latest.unwrap_or(earliest);
    let oldest = i64::from(reference.years_since(earliest)?);
    let youngest = reference.years_since(latest).map_or(0, i64::from);
    let answer = decide(oldest);
    (youngest..oldest).all(|age| decide(age) == answer).then_some(answer)
}

/// The slot's candidate values: distinct names on or before the reference date.
fn names(facts: &[Fact], reference: NaiveDate) -> Vec<String> {
    until(facts, reference).map(|f| f.name.clone()).collect::<BTreeSet<_>>().into_iter().collect()
}

/// A gold answer and the stored lines it rests on.
type Derived = (String, Vec<GoldEvidence>);

/// The gold answer and evidence, or None when the template cannot be
/// instantiated for this record (or the text does not support the answer).
fn derive(rule: &Rule, slot: Option<&str>, record: &PatientRecord<'_>, reference: NaiveDate) -> Option<Derived> {
    let f = record.facts;
    let matching = |list: &'_ [Fact], terms: &[String], exclude: &[String]| -> Vec<Fact> {
        until(list, reference).filter(|x| mentions(&x.name, terms, exclude)).cloned().collect()
    };
    match rule {
        Rule::MedicationOnDate {} => {
            let name = slot?;
            let last = until(&f.medications, reference).filter(|m| m.name == name).last()?;
            let answer = match last.status.as_str() {
                "active" => "Yes",
                "stopped" | "completed" | "cancelled" => "No",
                _ => return None,
            };
            Some((answer.into(), all_evidence(record, reference, &[last])?))
        }
        Rule::MedicationClassEver { substances } => yes_no(
            record,
            reference,
            matching(&f.medications, substances, &[]),
            DocKind::MedicationList,
            substances,
            &[],
        ),
        Rule::ConditionEver { terms, exclude } => {
            yes_no(record, reference, matching(&f.conditions, terms, exclude), DocKind::ProblemList, terms, exclude)
        }
        Rule::ProcedureEver { terms } => {
            yes_no(record, reference, matching(&f.procedures, terms, &[]), DocKind::Procedure, terms, &[])
        }
        Rule::LowLabOrConditionOnDate { loinc, window_days, female_below, male_below, terms } => {
            let female = f.female?;
            let coded = matching(&f.conditions, terms, &[]);
            // Without a status a coded diagnosis says nothing of the
            // reference date: only a low value decides, and a record that
            // codes the condition is not asked.
            if f.conditions_without_status && !coded.is_empty() {
                let lab = last_value(&f.observations, loinc, reference, *window_days);
                let threshold = if female { *female_below } else { *male_below };
                let low = lab.filter(|l| l.value.is_some_and(|v| v < threshold))?;
                return Some(("Yes".into(), all_evidence(record, reference, &[low])?));
            }
            let active: Vec<Fact> =
                coded.into_iter().filter(|c| c.end.is_none_or(|e| e > reference) && c.status != "resolved").collect();
            let lab = last_value(&f.observations, loinc, reference, *window_days);
            let threshold = if female { *female_below } else { *male_below };
            let low = lab.filter(|l| l.value.is_some_and(|v| v < threshold));
            if let Some(l) = low {
                return Some(("Yes".into(), all_evidence(record, reference, &[l])?));
            }
            if let Some(c) = active.last() {
                return Some(("Yes".into(), all_evidence(record, reference, &[c])?));
            }
            match lab {
                Some(l) => Some(("No".into(), all_evidence(record, reference, &[l])?)),
                None => None,
            }
        }
        Rule::MedicationDates { max_entries } => {
            let name = slot?;
            let facts: Vec<&Fact> = until(&f.medications, reference).filter(|m| m.name == name).collect();
            let dates: BTreeSet<NaiveDate> = facts.iter().map(|m| m.time.date()).collect();
            if dates.is_empty() || dates.len() > *max_entries {
                return None;
            }
            let list: Vec<String> = dates.iter().map(|d| d.to_string()).collect();
            Some((list.join(" | "), all_evidence(record, reference, &facts)?))
        }
        Rule::ConditionIntervals { max_entries } => {
            if f.conditions_without_status {
                return None;
            }
            let name = slot?;
            let facts: Vec<&Fact> = until(&f.conditions, reference).filter(|c| c.name == name).collect();
            let intervals: BTreeSet<String> = facts
                .iter()
                .map(|c| match c.end.filter(|e| *e <= reference) {
                    Some(e) => format!("{}–{e}", c.time.date()),
                    None => format!("{}–ongoing", c.time.date()),
                })
                .collect();
            if intervals.is_empty() || intervals.len() > *max_entries {
                return None;
            }
            Some((intervals.into_iter().collect::<Vec<_>>().join(" | "), all_evidence(record, reference, &facts)?))
        }
        Rule::ConditionFirstDate {} => {
            let first = until(&f.conditions, reference).find(|c| Some(c.name.as_str()) == slot)?;
            Some((first.time.date().to_string(), all_evidence(record, reference, &[first])?))
        }
        Rule::MedicationFirstDate {} => {
            let first = until(&f.medications, reference).find(|c| Some(c.name.as_str()) == slot)?;
            Some((first.time.date().to_string(), all_evidence(record, reference, &[first])?))
        }
        Rule::LabCategory { loinc, window_days, bands, adults_only } => {
            if *adults_only && by_age(f, reference, |age| age < 18)? {
                return None;
            }
            match last_value(&f.observations, loinc, reference, *window_days) {
                Some(l) => {
                    let v = l.value?;
                    let band = bands.iter().find(|b| v >= b.at_least)?;
                    Some((band.label.clone(), all_evidence(record, reference, &[l])?))
                }
                // No value in the window: Not documented, only if the text
                // agrees that none is there.
                None => None,
            }
        }
        Rule::Cha2ds2Vasc {
            heart_failure,
            hypertension,
            diabetes,
            diabetes_exclude,
            stroke,
            vascular,
            require,
            male_at_least,
            female_at_least,
        } => {
            let female = f.female?;
            if by_age(f, reference, |age| age < 18)? {
                return None;
            }
            let required = matching(&f.conditions, require, &[]);
            if !require.is_empty() && required.is_empty() {
                return None;
            }
            let mut used: Vec<Fact> = required;
            let age_points = by_age(f, reference, |age| match age {
                75.. => 2,
                65..=74 => 1,
                _ => 0,
            })?;
            let mut score = age_points + u32::from(female);
            for (terms, exclude, points) in [
                (heart_failure, &vec![], 1),
                (hypertension, &vec![], 1),
                (diabetes, diabetes_exclude, 1),
                (stroke, &vec![], 2),
                (vascular, &vec![], 1),
            ] {
                let found = matching(&f.conditions, terms, exclude);
                if let Some(c) = found.first() {
                    score += points;
                    used.push(c.clone());
                } else if !text_silent(record, reference, DocKind::ProblemList, terms, exclude) {
                    return None;
                }
            }
            let refs: Vec<&Fact> = used.iter().collect();
            let evidence = all_evidence(record, reference, &refs)?;
            let answer = match (male_at_least, female_at_least) {
                (Some(m), Some(w)) => {
                    let threshold = if female { *w } else { *m };
                    if score >= threshold { "Yes" } else { "No" }.to_string()
                }
                _ => score.to_string(),
            };
            Some((answer, evidence))
        }
        Rule::ConditionAndLab { terms, exclude, loinc, window_days, at_least } => {
            let found = matching(&f.conditions, terms, exclude);
            let Some(c) = found.first() else {
                return text_silent(record, reference, DocKind::ProblemList, terms, exclude)
                    .then(|| ("No".to_string(), vec![]));
            };
            match last_value(&f.observations, loinc, reference, *window_days) {
                Some(l) => {
                    let answer = if l.value? >= *at_least { "Yes" } else { "No" };
                    Some((answer.into(), all_evidence(record, reference, &[c, l])?))
                }
                None => Some(("Unclear".into(), all_evidence(record, reference, &[c])?)),
            }
        }
        Rule::AgeAndConditionOrLab { min_age, max_age, terms, exclude, loinc, window_days, at_least } => {
            if by_age(f, reference, |age| age < 18)? {
                return None;
            }
            if by_age(f, reference, |age| age < *min_age || age > *max_age)? {
                return Some(("No".into(), vec![]));
            }
            let found = matching(&f.conditions, terms, exclude);
            if let Some(c) = found.first() {
                return Some(("Yes".into(), all_evidence(record, reference, &[c])?));
            }
            if !text_silent(record, reference, DocKind::ProblemList, terms, exclude) {
                return None;
            }
            let high = until(&f.observations, reference)
                .filter(|o| o.code.as_ref().is_some_and(|c| loinc.contains(c)))
                .filter(|o| (reference - o.time.date()).num_days() <= *window_days)
                .find(|o| o.value.is_some_and(|v| v >= *at_least));
            match high {
                Some(l) => Some(("Yes".into(), all_evidence(record, reference, &[l])?)),
                None => Some(("No".into(), vec![])),
            }
        }
    }
}

fn yes_no(
    record: &PatientRecord<'_>,
    reference: NaiveDate,
    found: Vec<Fact>,
    kind: DocKind,
    terms: &[String],
    exclude: &[String],
) -> Option<Derived> {
    match found.first() {
        Some(first) => Some(("Yes".into(), all_evidence(record, reference, &[first])?)),
        None => text_silent(record, reference, kind, terms, exclude).then(|| ("No".to_string(), vec![])),
    }
}

fn instantiate(
    template: &Template,
    record: &PatientRecord<'_>,
    reference: NaiveDate,
    rng: &mut Rng,
) -> Option<BankQuestion> {
    let candidates: Vec<Option<String>> = match template.rule.slot() {
        Some("{medication}") => names(&record.facts.medications, reference).into_iter().map(Some).collect(),
        Some(_) => names(&record.facts.conditions, reference).into_iter().map(Some).collect(),
        None => vec![None],
    };
    // Slot values whose answer the text supports; one chosen with the seed.
    let usable: Vec<(Option<String>, Derived)> = candidates
        .into_iter()
        .filter_map(|slot| derive(&template.rule, slot.as_deref(), record, reference).map(|d| (slot, d)))
        .collect();
    if usable.is_empty() {
        return None;
    }
    let (slot, (gold_answer, gold_evidence)) = usable[rng.below(usable.len())].clone();
    let mut question = template.question.replace("{date}", &reference.to_string());
    if let (Some(s), Some(value)) = (template.rule.slot(), &slot) {
        question = question.replace(s, value);
    }
    Some(BankQuestion {
        id: String::new(),
        patient: record.facts.id.clone(),
        level: template.level,
        template: template.id.clone(),
        category: template.category.clone(),
        question,
        reference_date: reference.to_string(),
        answer_type: template.answer_type(),
        gold_answer,
        gold_evidence,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(v: Value) -> String {
        v.to_string()
    }

    fn good() -> Value {
        serde_json::json!({"id": "q1", "patient": "p1", "level": 1, "template": "G01", "category": "single choice",
            "question": "Is it?", "reference_date": "2020-01-02", "answer_type": "yes_no", "gold_answer": "Yes",
            "gold_evidence": [{"document_id": "d1", "record": "Condition/1", "text": "- x [Condition/1]"}]})
    }

    #[test]
    fn a_bank_round_trips_and_bad_lines_name_line_and_field() {
        let q = parse_bank(Path::new("b.jsonl"), &format!("{}\n\n", line(good()))).unwrap();
        assert_eq!(q.len(), 1);
        assert!(q[0].record_has_it());
        assert_eq!(parse_bank(Path::new("b.jsonl"), &to_jsonl(&q)).unwrap(), q);
        let bad = |mutate: &dyn Fn(&mut Value)| {
            let mut v = good();
            mutate(&mut v);
            let text = format!("{}\n{}\n", line(good()).replace("q1", "q0"), line(v));
            parse_bank(Path::new("b.jsonl"), &text).unwrap_err()
        };
        let e = bad(&|v| v["level"] = serde_json::json!(4));
        assert_eq!((e.line, e.field.as_str()), (2, "level"));
        assert!(e.to_string().starts_with("b.jsonl:2: field `level`"), "{e}");
        assert_eq!(bad(&|v| v["reference_date"] = serde_json::json!("02.01.2020")).field, "reference_date");
        assert_eq!(bad(&|v| v["answer_type"] = serde_json::json!("free")).field, "answer_type");
        assert_eq!(bad(&|v| v["category"] = serde_json::json!("other")).field, "category");
        assert_eq!(
            bad(&|v| v.as_object_mut().unwrap().remove("gold_answer").map(|_| ()).unwrap()).field,
            "gold_answer"
        );
        assert_eq!(bad(&|v| v["gold_evidence"] = serde_json::json!("d1")).field, "gold_evidence");
        let e = parse_bank(Path::new("b.jsonl"), &format!("{}\n{}\n", line(good()), line(good()))).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "id"));
        let e = parse_bank(Path::new("b.jsonl"), "{\"id\": \n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "(line)"));
    }

    #[test]
    fn the_builtin_templates_validate_and_bad_ones_say_where() {
        let t = builtin_templates();
        for level in 1..=3 {
            assert!(t.iter().any(|x| x.level == level));
        }
        let bad = "- id: X1\n  level: 1\n  category: single choice\n  adapts: Q01\n  question: Is {drug} given?\n  answer_format: Yes / No\n  rule: condition_ever\n  params: {terms: [a]}\n";
        let e = load_templates("t.yaml", bad).unwrap_err();
        assert!(e.to_string().contains("template X1") && e.message.contains("{drug}"), "{e}");
        let unknown = bad.replace("condition_ever", "made_up").replace("{drug}", "it");
        let e = load_templates("t.yaml", &unknown).unwrap_err();
        assert!(e.message.contains("made_up"), "{e}");
        let missing = bad.replace("{terms: [a]}", "{}").replace("{drug}", "it");
        assert!(load_templates("t.yaml", &missing).unwrap_err().message.contains("terms"));
        let format = bad.replace("{drug}", "it");
        let e = load_templates("t.yaml", &format).unwrap_err();
        assert!(e.message.contains("answer_format") && e.message.contains("Yes / No / Unclear"), "{e}");
    }

    #[test]
    fn a_yes_no_template_without_not_documented_asks_yes_no_unclear() {
        let t = builtin_templates();
        let answer_type = |id: &str| t.iter().find(|x| x.id == id).unwrap().answer_type();
        // The paper's formats: Q01-Q03 and Q17 offer "not documented",
        // Q04-Q16 do not.
        assert_eq!(answer_type("G01"), AnswerType::YesNo, "receiving a drug on a date");
        assert_eq!(answer_type("G08"), AnswerType::YesNo, "is renal failure documented");
        assert_eq!(answer_type("G13"), AnswerType::YesNoUnclear, "documented evidence of an echocardiogram");
        assert_eq!(answer_type("G34"), AnswerType::YesNoUnclear, "eligibility, with a justification");
        assert_eq!(answer_type("G21"), AnswerType::DateList);
        for t in AnswerType::ALL {
            assert_eq!(AnswerType::parse(t.as_str()), Some(t));
        }
    }

    fn day(s: &str) -> NaiveDateTime {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap().and_hms_opt(9, 0, 0).unwrap()
    }

    fn fact(record: &str, name: &str, time: &str, status: &str) -> Fact {
        Fact {
            record: record.into(),
            name: name.into(),
            time: day(time),
            status: status.into(),
            end: None,
            code: None,
            value: None,
        }
    }

    fn doc(id: &str, kind: DocKind, date: &str, lines: &[&str]) -> Document {
        Document {
            id: id.into(),
            patient_id: "p1".into(),
            kind,
            date: Some(day(date)),
            title: id.into(),
            source: "fhir".into(),
            source_id: id.into(),
            text: format!("Title\n{}\n", lines.join("\n")),
        }
    }

    #[test]
    fn gold_answers_come_from_facts_and_need_the_text() {
        let facts = PatientFacts {
            id: "p1".into(),
            female: Some(true),
            birth_date: NaiveDate::from_ymd_opt(1950, 1, 1),
            medications: vec![
                fact("MedicationRequest/m1", "Simvastatin 20 MG", "2019-01-01", "stopped"),
                fact("MedicationRequest/m2", "Simvastatin 20 MG", "2020-01-01", "active"),
            ],
            conditions: vec![fact("Condition/c1", "Hypertension", "2018-05-05", "active")],
            ..PatientFacts::default()
        };
        let docs = vec![
            doc(
                "m-2019",
                DocKind::MedicationList,
                "2019-01-01",
                &["- 2019-01-01 09:00: Simvastatin 20 MG (stopped) [MedicationRequest/m1]"],
            ),
            doc(
                "m-2020",
                DocKind::MedicationList,
                "2020-01-01",
                &["- 2020-01-01 09:00: Simvastatin 20 MG (active) [MedicationRequest/m2]"],
            ),
            doc(
                "c-2018",
                DocKind::ProblemList,
                "2018-05-05",
                &["- 2018-05-05 09:00: Hypertension (active) [Condition/c1]"],
            ),
        ];
        let record = PatientRecord { facts: &facts, documents: &docs };
        let reference = NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
        let on = derive(&Rule::MedicationOnDate {}, Some("Simvastatin 20 MG"), &record, reference).unwrap();
        assert_eq!(on.0, "Yes");
        assert_eq!(on.1[0].document_id, "m-2020");
        let before = derive(
            &Rule::MedicationOnDate {},
            Some("Simvastatin 20 MG"),
            &record,
            NaiveDate::from_ymd_opt(2019, 6, 1).unwrap(),
        );
        assert_eq!(before.unwrap().0, "No");
        let dates =
            derive(&Rule::MedicationDates { max_entries: 12 }, Some("Simvastatin 20 MG"), &record, reference).unwrap();
        assert_eq!((dates.0.as_str(), dates.1.len()), ("2019-01-01 | 2020-01-01", 2));
        let ht = Rule::ConditionEver { terms: vec!["hypertension".into()], exclude: vec![] };
        assert_eq!(derive(&ht, None, &record, reference).unwrap().0, "Yes");
        let af = Rule::ConditionEver { terms: vec!["atrial fibrillation".into()], exclude: vec![] };
        assert_eq!(derive(&af, None, &record, reference).unwrap(), ("No".into(), vec![]));
        // The condition is in the facts but not in the stored text: dropped.
        let without_text = PatientRecord { facts: &facts, documents: &docs[..2] };
        assert!(derive(&ht, None, &without_text, reference).is_none());
        // Absence the text contradicts is not kept either.
        let mut noisy = docs.clone();
        noisy.push(doc(
            "c-2019",
            DocKind::ProblemList,
            "2019-02-02",
            &["- 2019-02-02 09:00: Atrial fibrillation noted [Encounter/e]"],
        ));
        let noisy_record = PatientRecord { facts: &facts, documents: &noisy };
        assert!(derive(&af, None, &noisy_record, reference).is_none());
        let intervals =
            derive(&Rule::ConditionIntervals { max_entries: 3 }, Some("Hypertension"), &record, reference).unwrap();
        assert_eq!(intervals.0, "2018-05-05–ongoing");
    }

    #[test]
    fn the_deck_draw_is_two_two_one_and_reproducible() {
        let templates = builtin_templates();
        let facts: Vec<PatientFacts> = (0..6)
            .map(|i| PatientFacts {
                id: format!("patient-{i}"),
                female: Some(i % 2 == 0),
                birth_date: NaiveDate::from_ymd_opt(1940 + i, 3, 3),
                medications: vec![fact(
                    &format!("MedicationRequest/m{i}"),
                    "Simvastatin 20 MG",
                    "2019-01-01",
                    "active",
                )],
                conditions: vec![fact(&format!("Condition/c{i}"), "Hypertension", "2018-05-05", "active")],
                ..PatientFacts::default()
            })
            .collect();
        let docs: Vec<Vec<Document>> = (0..6)
            .map(|i| {
                vec![
                    doc(
                        "m",
                        DocKind::MedicationList,
                        "2019-01-01",
                        &[&format!("- x: Simvastatin 20 MG (active) [MedicationRequest/m{i}]")],
                    ),
                    doc(
                        "c",
                        DocKind::ProblemList,
                        "2018-05-05",
                        &[&format!("- x: Hypertension (active) [Condition/c{i}]")],
                    ),
                ]
            })
            .collect();
        let records: Vec<PatientRecord> =
            facts.iter().zip(&docs).map(|(f, d)| PatientRecord { facts: f, documents: d }).collect();
        let (a, report) = generate(&templates, &records, 42);
        let (b, _) = generate(&templates, &records, 42);
        assert_eq!(a, b, "same seed, same bank");
        assert_eq!(report.patients, 6);
        for f in &facts {
            let levels: Vec<u8> = a.iter().filter(|q| q.patient == f.id).map(|q| q.level).collect();
            assert_eq!(levels.iter().filter(|l| **l == 1).count(), 2, "{levels:?}");
            assert_eq!(levels.iter().filter(|l| **l == 2).count(), 2, "{levels:?}");
            assert!(levels.iter().filter(|l| **l == 3).count() <= 1);
            let templates: BTreeSet<&str> =
                a.iter().filter(|q| q.patient == f.id).map(|q| q.template.as_str()).collect();
            assert_eq!(templates.len(), levels.len(), "no template twice for one patient");
        }
        let (c, _) = generate(&templates, &records, 7);
        assert_ne!(a, c, "another seed draws another bank");
    }

    fn date(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn mimic_ages_decide_only_where_the_anchor_range_agrees() {
        let (female, earliest, latest) =
            mimic_demographics("Sex F; age 52 in anchor year 2180 (real years 2014 - 2016)").unwrap();
        assert!(female);
        assert_eq!((earliest, latest), (date("2127-01-01"), date("2128-12-31")));
        let facts = PatientFacts { birth_date: Some(earliest), birth_latest: Some(latest), ..PatientFacts::default() };
        // 51 to 53 in mid 2180.
        let on = date("2180-07-01");
        assert_eq!(by_age(&facts, on, |age| age >= 18), Some(true));
        assert_eq!(by_age(&facts, on, |age| age >= 52), None, "52 is inside the range");
        assert_eq!(by_age(&facts, on, |age| age >= 65), Some(false));
        // Over 89 (anchor age 91): 89 at the youngest, no bound but the
        // calculators' 120 at the oldest.
        let (_, earliest, latest) =
            mimic_demographics("Sex M; age 91 in anchor year 2150 (real years 2008 - 2010)").unwrap();
        assert_eq!((earliest, latest), (date("2029-01-01"), date("2060-12-31")));
        let over = PatientFacts { birth_date: Some(earliest), birth_latest: Some(latest), ..PatientFacts::default() };
        assert_eq!(by_age(&over, date("2150-06-01"), |age| age >= 75), Some(true));
        assert_eq!(by_age(&over, date("2150-06-01"), |age| age >= 90), None, "89 is possible");
        let exact = PatientFacts { birth_date: Some(date("1960-03-01")), ..PatientFacts::default() };
        assert_eq!(by_age(&exact, date("2025-02-28"), |age| age), Some(64));
        assert_eq!(by_age(&exact, date("2025-03-01"), |age| age), Some(65));
    }

    #[test]
    fn mimic_prescription_status_comes_from_the_stop_time_on_the_line() {
        let doc = |day: &str, lines: &[&str]| Document {
            id: format!("mimic:prescriptions:p1:{day}"),
            patient_id: "p1".into(),
            kind: DocKind::MedicationList,
            date: Some(date(day).and_hms_opt(8, 0, 0).unwrap()),
            title: "Prescriptions".into(),
            source: "mimic".into(),
            source_id: format!("prescriptions:p1:{day}"),
            text: format!("Prescriptions on {day}\n{}\n", lines.join("\n")),
        };
        let docs = [
            doc("2180-01-01", &["- 2180-01-01 08:00: Heparin 5000 UNIT SC (until 2180-01-03 10:00) [prescriptions/1]"]),
            doc("2180-01-05", &["- 2180-01-05 08:00: Lisinopril 10 mg PO (until 2180-02-01 10:00) [prescriptions/2]"]),
            doc("2180-01-10", &["- 2180-01-10 08:00: Aspirin 81 mg PO (until 2180-01-10 20:00) [prescriptions/3]"]),
        ];
        let patient =
            Patient { id: "p1".into(), source: "mimic".into(), birth_date: None, sex: None, display_name: None };
        let facts = PatientFacts::from_mimic(&[patient], &docs, &[]);
        let status: Vec<(&str, &str)> =
            facts[0].medications.iter().map(|m| (m.name.as_str(), m.status.as_str())).collect();
        // The reference date is the last document's, 2180-01-10.
        assert_eq!(
            status,
            [
                ("Heparin 5000 UNIT SC", "stopped"),
                ("Lisinopril 10 mg PO", "active"),
                ("Aspirin 81 mg PO", "unknown status")
            ]
        );
        assert!(facts[0].conditions_without_status);
    }

    fn bank_of(patients: usize, per_level: [usize; 3]) -> Vec<BankQuestion> {
        let mut out = Vec::new();
        for p in 0..patients {
            for (i, &k) in per_level.iter().enumerate() {
                for j in 0..k {
                    let mut q: BankQuestion = serde_json::from_value(good()).unwrap();
                    q.id = format!("p{p}-l{}-{j}", i + 1);
                    q.patient = format!("p{p}");
                    q.level = i as u8 + 1;
                    out.push(q);
                }
            }
        }
        out
    }

    #[test]
    fn the_stratified_sample_is_fixed_by_its_seed_and_never_reads_gold_answers() {
        let bank = bank_of(20, [2, 2, 1]);
        let sample = stratified_sample(&bank, 13, 42);
        let ids: Vec<&str> = sample.iter().map(|q| q.id.as_str()).collect();
        // One question per patient, the levels in turn, each the patient's first of its level.
        assert_eq!(sample.len(), 13);
        let levels: Vec<u8> = sample.iter().map(|q| q.level).collect();
        assert_eq!(levels, [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1], "{ids:?}");
        let patients: BTreeSet<&str> = sample.iter().map(|q| q.patient.as_str()).collect();
        assert_eq!(patients.len(), 13, "{ids:?}");
        assert!(sample.iter().all(|q| q.id.ends_with("-0")), "{ids:?}");
        // The same seed, the same sample, whatever the gold answers say.
        let mut regolded = bank.clone();
        for q in &mut regolded {
            q.gold_answer = "No".into();
            q.gold_evidence.clear();
        }
        let again: Vec<String> = stratified_sample(&regolded, 13, 42).into_iter().map(|q| q.id).collect();
        assert_eq!(again, ids);
        let other: Vec<String> = stratified_sample(&bank, 13, 7).into_iter().map(|q| q.id).collect();
        assert_ne!(other, ids, "another seed, other patients");
        // A patient without a question of the level due is passed over; a
        // bank too small gives what it has.
        let mut short = bank_of(2, [1, 1, 0]);
        short.extend(bank_of(1, [0, 0, 1]).into_iter().map(|mut q| {
            q.patient = "p9".into();
            q
        }));
        let got = stratified_sample(&short, 30, 1);
        assert!(got.len() <= 3 && got.windows(2).all(|w| w[1].level == w[0].level % 3 + 1), "{got:?}");
        assert!(got.iter().all(|q| q.level != 3 || q.patient == "p9"));
        assert_eq!(stratified_sample(&bank, 40, 42).len(), 20, "one per patient at most");
        assert!(stratified_sample(&bank, 0, 42).is_empty());
    }
}
