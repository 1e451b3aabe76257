//! The agent's tools: typed functions with JSON schemas over one patient's
//! stored record, all cut off at the reference date (`as_of`): nothing
//! dated after it is seen, and undated documents are not seen either
//! (they cannot be shown to precede it).
//!
//! - `search_reports`: BM25 over the patient's sections (the store's BM25,
//!   k1 = 1.2, b = 0.75, as in the paper's report tool) with a document
//!   kind filter (canonical kinds and the synonym map) and a temporal scope
//!   (all / most recent / on a date / a range); answer-schema tokens are
//!   stripped from the query.
//! - `query_labs`: values of canonical lab concepts, most recent first, 5
//!   per concept by default, with unit and reference range as stored.
//! - `query_records`: structured medications, conditions and procedures,
//!   read from the timeline documents ingestion made of FHIR and MIMIC-IV
//!   records; each entry cites its stored sentence.
//! - `calculate`: the deterministic calculators; every numeric input but
//!   age is read from the record (a stored lab, else a sentence that writes
//!   it with a unit) inside its lookback window, and age (at the reference
//!   date) and sex from the stored patient, each cited; a number the call
//!   gives is never used.
//!
//! Every result is a list of [`Evidence`] items that can be cited.

mod age;
mod calculate;
mod criteria;
mod labs;
mod query;
mod reports;
mod structured;
pub use age::Age;
pub(crate) use structured::{timeline_entries, timeline_line};

pub use query::{
    keyword_subset, names_subject, phrase_spans, question_keywords, sanitise_query, subject_words, subject_words_in,
};
pub(crate) use query::{outside_parentheses, STOPWORDS};
use std::collections::BTreeSet;
use std::sync::Mutex;

use chrono::{NaiveDate, NaiveDateTime};
use evident_model::age::{age_on, AnchorAge};
use evident_model::labs::LabCatalogue;
use evident_model::DocKind;
use evident_store::{LabQuery, LabRecord, SectionFilter, Store};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::calculators::{calculate, latest_within, Calculator, CalculatorTables};
use crate::criteria::CriteriaSets;

/// Default results per report query and the broadening cap.
pub const DEFAULT_K: usize = 5;
pub const MAX_K: usize = 30;
/// Default values per lab concept.
pub const DEFAULT_LAB_LIMIT: usize = 5;

/// The tools by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolName {
    SearchReports,
    QueryLabs,
    QueryRecords,
    Calculate,
}

impl ToolName {
    pub const ALL: [ToolName; 4] =
        [ToolName::SearchReports, ToolName::QueryLabs, ToolName::QueryRecords, ToolName::Calculate];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::SearchReports => "search_reports",
            ToolName::QueryLabs => "query_labs",
            ToolName::QueryRecords => "query_records",
            ToolName::Calculate => "calculate",
        }
    }

    pub fn parse(name: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|t| t.as_str() == name.trim())
    }

    pub fn description(self) -> &'static str {
        match self {
            ToolName::SearchReports => "BM25 search of the patient's reports; optional kind filter and temporal scope",
            ToolName::QueryLabs => {
                "values of the patient's lab concepts, most recent first, with unit and reference range"
            }
            ToolName::QueryRecords => "structured medications, conditions or procedures with dates",
            ToolName::Calculate => {
                "a deterministic clinical calculator (stage or score); it reads lab values, weight, height, age and \
                 sex from the record itself; give only findings it asks for"
            }
        }
    }

    /// The JSON schema of the tool's arguments.
    pub fn schema(self) -> Value {
        let scope = json!({"type": "string", "enum": ["all", "most_recent", "on_date", "range"]});
        let date = json!({"type": "string", "description": "YYYY-MM-DD"});
        match self {
            ToolName::SearchReports => json!({"type": "object", "properties": {
                "query": {"type": "string", "minLength": 1},
                "kind": {"type": "string", "description": "a document kind, e.g. radiology, discharge_summary, progress_note"},
                "scope": scope, "date": date, "since": date, "until": date,
                "k": {"type": "integer", "minimum": 1, "maximum": MAX_K}},
                "required": ["query"], "additionalProperties": false}),
            ToolName::QueryLabs => json!({"type": "object", "properties": {
                "concepts": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "scope": scope, "date": date, "since": date, "until": date,
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
                "required": ["concepts"], "additionalProperties": false}),
            ToolName::QueryRecords => json!({"type": "object", "properties": {
                "record": {"type": "string", "enum": ["medications", "conditions", "procedures"]},
                "query": {"type": "string"},
                "scope": scope, "date": date, "since": date, "until": date},
                "required": ["record"], "additionalProperties": false}),
            ToolName::Calculate => json!({"type": "object", "properties": {
                "calculator": {"type": "string", "enum": Calculator::ALL.map(|c| c.name())},
                "inputs": {"type": "object"}},
                "required": ["calculator"], "additionalProperties": false}),
        }
    }
}

/// One citable piece of evidence a tool returned.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Evidence {
    /// A stored section of a document.
    Section {
        document_id: String,
        section_id: i64,
        kind: DocKind,
        date: Option<NaiveDateTime>,
        heading: Option<String>,
        /// Byte span into the document's text.
        start: usize,
        end: usize,
        text: String,
    },
    /// A stored lab value.
    Lab {
        concept: String,
        original_name: String,
        value: String,
        unit: Option<String>,
        reference_range: Option<String>,
        flag: Option<String>,
        time: NaiveDateTime,
        source_id: String,
    },
    /// A structured record's line in a timeline document (one sentence).
    Entry {
        record: String,
        document_id: String,
        date: Option<NaiveDateTime>,
        sentence_id: i64,
        start: usize,
        end: usize,
        text: String,
    },
    /// A calculator's result, with the stored values it used.
    Calculation { calculator: String, inputs: Value, output: Value, used: Vec<Evidence> },
    /// The patient's stored demographics (birth date, sex) as a calculator
    /// read them: the age at the reference date and the sex it used.
    Patient { patient_id: String, birth_date: Option<NaiveDate>, sex: Option<String>, as_of: NaiveDateTime },
}

impl Evidence {
    /// Identity for de-duplication: sections by section id (as the paper
    /// de-duplicates context nodes), labs by source id, entries by
    /// sentence, calculations by their inputs.
    pub fn key(&self) -> String {
        match self {
            Evidence::Section { section_id, .. } => format!("section:{section_id}"),
            Evidence::Lab { source_id, .. } => format!("lab:{source_id}"),
            Evidence::Entry { document_id, sentence_id, .. } => format!("entry:{document_id}#{sentence_id}"),
            Evidence::Calculation { calculator, inputs, .. } => format!("calc:{calculator}:{inputs}"),
            Evidence::Patient { patient_id, .. } => format!("patient:{patient_id}"),
        }
    }

    pub fn date(&self) -> Option<NaiveDateTime> {
        match self {
            Evidence::Section { date, .. } | Evidence::Entry { date, .. } => *date,
            Evidence::Lab { time, .. } => Some(*time),
            Evidence::Calculation { used, .. } => used.iter().filter_map(Evidence::date).max(),
            Evidence::Patient { .. } => None,
        }
    }

    pub fn document_id(&self) -> Option<&str> {
        match self {
            Evidence::Section { document_id, .. } | Evidence::Entry { document_id, .. } => Some(document_id),
            _ => None,
        }
    }

    /// The text the model reads for this item.
    pub fn text(&self) -> String {
        match self {
            Evidence::Section { text, .. } | Evidence::Entry { text, .. } => text.clone(),
            Evidence::Lab { original_name, value, unit, reference_range, flag, .. } => {
                let mut s = format!("{original_name}: {value}");
                if let Some(u) = unit {
                    s.push_str(&format!(" {u}"));
                }
                if let Some(r) = reference_range {
                    s.push_str(&format!(" (reference {r})"));
                }
                if let Some(f) = flag {
                    s.push_str(&format!(" [{f}]"));
                }
                s
            }
            Evidence::Calculation { calculator, inputs, output, .. } => {
                format!("{calculator} calculator: inputs {inputs}; result {output}")
            }
            Evidence::Patient { birth_date, sex, as_of, .. } => patient_text(*birth_date, sex.as_deref(), *as_of),
        }
    }

    /// A one-line header: kind and date.
    pub fn header(&self) -> String {
        let date = self.date().map(|d| d.format("%Y-%m-%d").to_string()).unwrap_or_else(|| "undated".into());
        match self {
            Evidence::Section { kind, heading, .. } => {
                format!("{kind}, {date}{}", heading.as_ref().map(|h| format!(", {h}")).unwrap_or_default())
            }
            Evidence::Lab { .. } => format!("lab, {date}"),
            Evidence::Entry { record, .. } => format!("record {}, {date}", record.split('/').next().unwrap_or(record)),
            Evidence::Calculation { .. } if self.date().is_some() => format!("calculation, inputs up to {date}"),
            Evidence::Calculation { .. } => "calculation".to_string(),
            Evidence::Patient { .. } => "patient demographics".to_string(),
        }
    }

    /// A rough token count (4 characters a token), for the context budget.
    pub fn tokens(&self) -> usize {
        (self.text().len() + self.header().len()).div_ceil(4) + 4
    }
}

impl From<evident_store::SectionRecord> for Evidence {
    fn from(s: evident_store::SectionRecord) -> Evidence {
        Evidence::Section {
            document_id: s.document_id,
            section_id: s.section_id,
            kind: s.kind,
            date: s.date,
            heading: s.heading,
            start: s.start,
            end: s.end,
            text: s.text,
        }
    }
}

/// What a tool call returned: evidence, or a note for the model (an error
/// in its arguments, or nothing found).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolOutput {
    pub evidence: Vec<Evidence>,
    pub note: Option<String>,
}

/// A call the tool refuses: the model gets the message and may retry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

/// A store error while running a tool (not the model's fault).
#[derive(Debug, thiserror::Error)]
pub enum ToolFailure {
    #[error(transparent)]
    Refused(#[from] ToolError),
    #[error(transparent)]
    Store(#[from] evident_store::StoreError),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimeArgs {
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    date: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    until: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportArgs {
    query: String,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    date: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    k: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct LabArgs {
    concepts: Vec<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    date: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordArgs {
    record: String,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    date: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    until: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CalcArgs {
    calculator: String,
    #[serde(default)]
    inputs: Option<Value>,
}

/// The time window a call asks for, already clipped to the reference date.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Window {
    since: Option<NaiveDateTime>,
    until: NaiveDateTime,
    most_recent: bool,
}

fn parse_day(field: &str, text: &str) -> Result<NaiveDate, ToolError> {
    let t = text.trim();
    NaiveDate::parse_from_str(t.get(..10).unwrap_or(t), "%Y-%m-%d")
        .map_err(|_| ToolError(format!("{field} {text:?} is not a date; write YYYY-MM-DD")))
}

fn start_of(d: NaiveDate) -> NaiveDateTime {
    d.and_hms_opt(0, 0, 0).expect("midnight exists")
}

fn end_of(d: NaiveDate) -> NaiveDateTime {
    d.and_hms_opt(23, 59, 59).expect("23:59:59 exists")
}

/// The demographics line: birth date, the age it gives at `as_of`, sex.
pub fn patient_text(birth_date: Option<NaiveDate>, sex: Option<&str>, as_of: NaiveDateTime) -> String {
    let born = match birth_date {
        Some(b) => format!("born {b}, age {} on {}", age_on(b, as_of.date()), as_of.date()),
        None => "birth date not recorded".to_string(),
    };
    format!("patient: {born}; sex {}", sex.unwrap_or("not recorded"))
}

/// One patient's record as the tools see it: the store, the patient and
/// the reference date.
pub struct RecordView<'s> {
    store: &'s Mutex<Store>,
    patient_id: String,
    as_of: NaiveDateTime,
    criteria: &'s CriteriaSets,
}

impl<'s> RecordView<'s> {
    /// A view with the built-in criteria sets.
    pub fn new(store: &'s Mutex<Store>, patient_id: impl Into<String>, as_of: NaiveDateTime) -> Self {
        RecordView { store, patient_id: patient_id.into(), as_of, criteria: CriteriaSets::builtin() }
    }

    /// The same view with other criteria sets (a user's, with the built-in
    /// ones: [`CriteriaSets::with_user_file`]).
    pub fn with_criteria(self, criteria: &'s CriteriaSets) -> Self {
        RecordView { criteria, ..self }
    }

    /// The criteria sets a question can name and `calculate` can run.
    pub fn criteria(&self) -> &'s CriteriaSets {
        self.criteria
    }

    pub fn patient_id(&self) -> &str {
        &self.patient_id
    }

    pub fn as_of(&self) -> NaiveDateTime {
        self.as_of
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'s, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs a tool on JSON arguments.
    pub fn run(&self, tool: ToolName, args: &Value) -> Result<ToolOutput, ToolFailure> {
        fn typed<T: serde::de::DeserializeOwned>(tool: ToolName, args: &Value) -> Result<T, ToolError> {
            serde_json::from_value(args.clone()).map_err(|e| {
                ToolError(format!("{} arguments {args}: {e}; the schema is {}", tool.as_str(), tool.schema()))
            })
        }
        match tool {
            ToolName::SearchReports => self.search_reports(&typed(tool, args)?),
            ToolName::QueryLabs => self.query_labs(&typed(tool, args)?),
            ToolName::QueryRecords => self.query_records(&typed(tool, args)?),
            ToolName::Calculate => self.calculate(&typed(tool, args)?),
        }
    }

    fn window(&self, t: &TimeArgs) -> Result<Window, ToolError> {
        let scope = t.scope.as_deref().unwrap_or(if t.date.is_some() {
            "on_date"
        } else if t.since.is_some() || t.until.is_some() {
            "range"
        } else {
            "all"
        });
        let clip = |until: NaiveDateTime| until.min(self.as_of);
        match scope {
            "all" => Ok(Window { since: None, until: self.as_of, most_recent: false }),
            "most_recent" => Ok(Window { since: None, until: self.as_of, most_recent: true }),
            "on_date" => {
                let Some(date) = &t.date else {
                    return Err(ToolError("scope on_date needs a date (YYYY-MM-DD)".into()));
                };
                let d = parse_day("date", date)?;
                Ok(Window { since: Some(start_of(d)), until: clip(end_of(d)), most_recent: false })
            }
            "range" => {
                let since = t.since.as_deref().map(|s| parse_day("since", s)).transpose()?.map(start_of);
                let until = t.until.as_deref().map(|s| parse_day("until", s)).transpose()?.map(end_of);
                Ok(Window { since, until: clip(until.unwrap_or(self.as_of)), most_recent: false })
            }
            other => Err(ToolError(format!("scope {other:?} is not all, most_recent, on_date or range"))),
        }
    }
}
