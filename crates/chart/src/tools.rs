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
//! - `calculate`: the deterministic calculators; ISS-family lab inputs the
//!   call leaves out are taken from stored labs within the 90-day lookback.
//!
//! Every result is a list of [`Evidence`] items that can be cited.

use std::collections::BTreeSet;
use std::sync::Mutex;

use chrono::{NaiveDate, NaiveDateTime};
use evident_model::labs::LabCatalogue;
use evident_model::DocKind;
use evident_store::{LabQuery, LabRecord, SectionFilter, Store};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::calculators::{calculate, latest_within, Calculator};

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
            ToolName::Calculate => "a deterministic clinical calculator (stage or score) on given or stored inputs",
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
        }
    }

    pub fn date(&self) -> Option<NaiveDateTime> {
        match self {
            Evidence::Section { date, .. } | Evidence::Entry { date, .. } => *date,
            Evidence::Lab { time, .. } => Some(*time),
            Evidence::Calculation { used, .. } => used.iter().filter_map(Evidence::date).max(),
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
            Evidence::Calculation { .. } => format!("calculation, inputs up to {date}"),
        }
    }

    /// A rough token count (4 characters a token), for the context budget.
    pub fn tokens(&self) -> usize {
        (self.text().len() + self.header().len()).div_ceil(4) + 4
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

/// Answer-schema words the model sometimes puts into a query.
const SCHEMA_TOKENS: &[&str] =
    &["not documented", "answer:", "reasoning:", "yes/no", "unclear", "never", "yes", "no", "nd"];

/// The query without answer-schema tokens and citation markers.
pub fn sanitise_query(query: &str) -> String {
    let lowered = query.to_lowercase();
    let mut text = lowered.clone();
    for token in SCHEMA_TOKENS.iter().filter(|t| t.contains(' ') || t.contains(':') || t.contains('/')) {
        text = text.replace(token, " ");
    }
    text.split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|w| !w.is_empty())
        .filter(|w| !SCHEMA_TOKENS.contains(w))
        .filter(|w| !(w.starts_with('[') && w.ends_with(']') && w[1..w.len() - 1].chars().all(|c| c.is_ascii_digit())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Common words dropped when a query is reduced to its keywords after
/// repeated empty results.
const STOPWORDS: &[&str] = &[
    "the",
    "a",
    "an",
    "of",
    "in",
    "on",
    "for",
    "to",
    "and",
    "or",
    "with",
    "was",
    "is",
    "were",
    "has",
    "have",
    "had",
    "patient",
    "patients",
    "any",
    "documented",
    "documentation",
    "evidence",
    "report",
    "reports",
    "did",
    "does",
    "what",
    "which",
    "when",
    "there",
    "been",
    "be",
    "by",
    "at",
    "from",
    "their",
    "his",
    "her",
    "date",
    "dates",
];

/// The keyword subset of a query (stopwords out).
pub fn keyword_subset(query: &str) -> String {
    query
        .split_whitespace()
        .filter(|w| !STOPWORDS.contains(&w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase().as_str()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One patient's record as the tools see it: the store, the patient and
/// the reference date.
pub struct RecordView<'s> {
    store: &'s Mutex<Store>,
    patient_id: String,
    as_of: NaiveDateTime,
}

impl<'s> RecordView<'s> {
    pub fn new(store: &'s Mutex<Store>, patient_id: impl Into<String>, as_of: NaiveDateTime) -> Self {
        RecordView { store, patient_id: patient_id.into(), as_of }
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

    fn search_reports(&self, a: &ReportArgs) -> Result<ToolOutput, ToolFailure> {
        let query = sanitise_query(&a.query);
        if query.trim().is_empty() {
            return Err(ToolError(format!(
                "query {:?} has no search words left once answer words are removed",
                a.query
            ))
            .into());
        }
        let kinds = match a.kind.as_deref().map(str::trim).filter(|k| !k.is_empty() && *k != "all" && *k != "any") {
            None => vec![],
            Some(k) => match DocKind::resolve(k) {
                Some(kind) => vec![kind],
                None => {
                    let known = DocKind::ALL.map(|k| k.as_str()).join(", ");
                    return Err(ToolError(format!("kind {k:?} is unknown; use one of {known}")).into());
                }
            },
        };
        let window = self.window(&TimeArgs {
            scope: a.scope.clone(),
            date: a.date.clone(),
            since: a.since.clone(),
            until: a.until.clone(),
        })?;
        let filter = SectionFilter {
            patient_id: Some(self.patient_id.clone()),
            kinds,
            since: window.since,
            until: Some(window.until),
            most_recent_documents: window.most_recent.then_some(1),
        };
        let k = a.k.unwrap_or(DEFAULT_K).clamp(1, MAX_K);
        let hits = self.lock().search_bm25(&query, &filter, k)?;
        let evidence: Vec<Evidence> = hits
            .into_iter()
            .map(|h| Evidence::Section {
                document_id: h.section.document_id,
                section_id: h.section.section_id,
                kind: h.section.kind,
                date: h.section.date,
                heading: h.section.heading,
                start: h.section.start,
                end: h.section.end,
                text: h.section.text,
            })
            .collect();
        let note = evidence.is_empty().then(|| format!("no report matches {query:?} in that scope"));
        Ok(ToolOutput { evidence, note })
    }

    /// Every section and lab value up to the reference date (full context).
    pub fn everything(&self) -> Result<Vec<Evidence>, evident_store::StoreError> {
        let filter = SectionFilter {
            patient_id: Some(self.patient_id.clone()),
            until: Some(self.as_of),
            ..SectionFilter::default()
        };
        let store = self.lock();
        let mut out: Vec<Evidence> = store
            .sections(&filter)?
            .into_iter()
            .map(|s| Evidence::Section {
                document_id: s.document_id,
                section_id: s.section_id,
                kind: s.kind,
                date: s.date,
                heading: s.heading,
                start: s.start,
                end: s.end,
                text: s.text,
            })
            .collect();
        let catalogue = LabCatalogue::builtin();
        let labs = store.labs(&LabQuery { patient_id: self.patient_id.clone(), ..LabQuery::default() })?;
        for l in labs.into_iter().filter(|l| l.time <= self.as_of) {
            let name = l.concept_id.as_deref().and_then(|id| catalogue.get(id)).map(|c| c.name.clone());
            let name = name.unwrap_or_else(|| l.original_name.clone());
            out.push(lab_evidence(&name, l));
        }
        Ok(out)
    }

    /// The canonical lab concepts the patient has values for up to the
    /// reference date, by name (what the prompt lists).
    pub fn available_lab_concepts(&self) -> Result<Vec<String>, evident_store::StoreError> {
        let labs = self.lock().labs(&LabQuery { patient_id: self.patient_id.clone(), ..LabQuery::default() })?;
        let catalogue = LabCatalogue::builtin();
        let names: BTreeSet<String> = labs
            .iter()
            .filter(|l| l.time <= self.as_of)
            .filter_map(|l| l.concept_id.as_deref().and_then(|id| catalogue.get(id)).map(|c| c.name.clone()))
            .collect();
        Ok(names.into_iter().collect())
    }

    fn labs_of(&self, concept_id: &str) -> Result<Vec<LabRecord>, evident_store::StoreError> {
        let labs = self.lock().labs(&LabQuery {
            patient_id: self.patient_id.clone(),
            concept_ids: Some(vec![concept_id.to_string()]),
            since: None,
        })?;
        Ok(labs.into_iter().filter(|l| l.time <= self.as_of).collect())
    }

    fn query_labs(&self, a: &LabArgs) -> Result<ToolOutput, ToolFailure> {
        let window = self.window(&TimeArgs {
            scope: a.scope.clone(),
            date: a.date.clone(),
            since: a.since.clone(),
            until: a.until.clone(),
        })?;
        let limit = if window.most_recent { 1 } else { a.limit.unwrap_or(DEFAULT_LAB_LIMIT) };
        let catalogue = LabCatalogue::builtin();
        let mut evidence = Vec::new();
        let mut unknown = Vec::new();
        for name in &a.concepts {
            let Some(concept) = catalogue.resolve_name(name) else {
                unknown.push(name.clone());
                continue;
            };
            let mut values: Vec<LabRecord> = self
                .labs_of(&concept.id)?
                .into_iter()
                .filter(|l| l.time <= window.until && window.since.is_none_or(|s| l.time >= s))
                .collect();
            values.reverse();
            evidence.extend(values.into_iter().take(limit).map(|l| lab_evidence(&concept.name, l)));
        }
        let mut notes = Vec::new();
        if !unknown.is_empty() {
            notes.push(format!("unknown lab concepts {unknown:?}; use names from the patient's list"));
        }
        if evidence.is_empty() {
            notes.push("no values in that scope".to_string());
        }
        Ok(ToolOutput { evidence, note: (!notes.is_empty()).then(|| notes.join("; ")) })
    }

    fn query_records(&self, a: &RecordArgs) -> Result<ToolOutput, ToolFailure> {
        let kind = match a.record.as_str() {
            "medications" => DocKind::MedicationList,
            "conditions" => DocKind::ProblemList,
            "procedures" => DocKind::Procedure,
            other => {
                return Err(ToolError(format!("record {other:?} is not medications, conditions or procedures")).into())
            }
        };
        let window = self.window(&TimeArgs {
            scope: a.scope.clone(),
            date: a.date.clone(),
            since: a.since.clone(),
            until: a.until.clone(),
        })?;
        let words: Vec<String> = a
            .query
            .as_deref()
            .map(sanitise_query)
            .unwrap_or_default()
            .split_whitespace()
            .filter(|w| w.len() > 2 && !STOPWORDS.contains(w))
            .map(str::to_string)
            .collect();
        let store = self.lock();
        let mut documents: Vec<_> = store
            .documents(&self.patient_id)?
            .into_iter()
            .filter(|d| d.kind == kind)
            .filter(|d| d.date.is_some_and(|t| t <= window.until && window.since.is_none_or(|s| t >= s)))
            .collect();
        documents.reverse();
        let mut evidence = Vec::new();
        for doc in &documents {
            for sentence in store.sentences(&doc.id)? {
                let Some((text, record)) = timeline_line(&sentence.text) else { continue };
                let lower = text.to_lowercase();
                if !words.is_empty() && !words.iter().any(|w| lower.contains(w.as_str())) {
                    continue;
                }
                evidence.push(Evidence::Entry {
                    record,
                    document_id: doc.id.clone(),
                    date: doc.date,
                    sentence_id: sentence.ordinal,
                    start: sentence.start,
                    end: sentence.end,
                    text: sentence.text.trim().to_string(),
                });
            }
            if window.most_recent && !evidence.is_empty() {
                break;
            }
        }
        evidence.truncate(MAX_K);
        let note = evidence.is_empty().then(|| format!("no {} entries match in that scope", a.record));
        Ok(ToolOutput { evidence, note })
    }

    fn calculate(&self, a: &CalcArgs) -> Result<ToolOutput, ToolFailure> {
        let Some(calculator) = Calculator::from_name(&a.calculator) else {
            let known = Calculator::ALL.map(|c| c.name()).join(", ");
            return Err(ToolError(format!("calculator {:?} is unknown; use one of {known}", a.calculator)).into());
        };
        let mut inputs = a.inputs.clone().unwrap_or_else(|| json!({}));
        if !inputs.is_object() {
            return Err(ToolError("inputs must be a JSON object".into()).into());
        }
        let mut used = Vec::new();
        let mut missing = Vec::new();
        if matches!(calculator, Calculator::Iss | Calculator::RIss | Calculator::R2Iss) {
            let days = calculator.lookback_days().expect("the ISS family has a lookback");
            for (field, concept, to_unit) in
                [("beta2_microglobulin_mg_l", "Beta-2-microglobulin", "mg/L"), ("albumin_g_dl", "Albumin", "g/dL")]
            {
                if inputs.get(field).is_some() {
                    continue;
                }
                match self.latest_lab(concept, days)? {
                    Some((lab, value)) => match convert(value, lab_unit(&lab), to_unit) {
                        Some(v) => {
                            inputs[field] = json!(v);
                            used.push(lab);
                        }
                        None => {
                            missing.push(format!("{concept} (unit {:?} cannot be read as {to_unit})", lab_unit(&lab)))
                        }
                    },
                    None => missing.push(format!("{concept} within {days} days before {}", self.as_of.date())),
                }
            }
            if calculator != Calculator::Iss && inputs.get("ldh_high").is_none() {
                match self.latest_lab("Lactate dehydrogenase", days)? {
                    Some((lab, value)) => match lab_high(&lab, value) {
                        Some(high) => {
                            inputs["ldh_high"] = json!(high);
                            used.push(lab);
                        }
                        None => missing.push("LDH upper limit of normal (no reference range stored)".into()),
                    },
                    None => {
                        missing.push(format!("Lactate dehydrogenase within {days} days before {}", self.as_of.date()))
                    }
                }
            }
        }
        if !missing.is_empty() {
            return Ok(ToolOutput {
                evidence: used,
                note: Some(format!("{} not computable: missing {}", calculator.name(), missing.join("; "))),
            });
        }
        let output = calculate(calculator, &inputs).map_err(|e| ToolError(e.to_string()))?;
        Ok(ToolOutput {
            evidence: vec![Evidence::Calculation { calculator: calculator.name().into(), inputs, output, used }],
            note: None,
        })
    }

    /// The latest numeric value of a concept within `days` before the
    /// reference date, as lab evidence and its number.
    fn latest_lab(&self, concept: &str, days: i64) -> Result<Option<(Evidence, f64)>, ToolFailure> {
        let catalogue = LabCatalogue::builtin();
        let Some(c) = catalogue.resolve_name(concept) else { return Ok(None) };
        let values: Vec<(NaiveDateTime, LabRecord)> =
            self.labs_of(&c.id)?.into_iter().filter(|l| l.value_num.is_some()).map(|l| (l.time, l)).collect();
        Ok(latest_within(&values, self.as_of, days).map(|(_, l)| {
            let v = l.value_num.expect("filtered to numeric values");
            (lab_evidence(&c.name, l), v)
        }))
    }
}

fn lab_unit(e: &Evidence) -> &str {
    match e {
        Evidence::Lab { unit, .. } => unit.as_deref().unwrap_or(""),
        _ => "",
    }
}

/// Whether an LDH value is above its stored upper limit.
fn lab_high(e: &Evidence, value: f64) -> Option<bool> {
    match e {
        Evidence::Lab { reference_range: Some(r), .. } => {
            let high: f64 = r.rsplit(['-', '–', ' ']).find_map(|p| p.trim().parse().ok())?;
            Some(value > high)
        }
        _ => None,
    }
}

/// Unit conversion for the two units the ISS family reads (the store never
/// converts; a calculator reading a value in another unit does, explicitly).
fn convert(value: f64, from: &str, to: &str) -> Option<f64> {
    let from = from.trim().to_lowercase().replace(' ', "");
    match (from.as_str(), to) {
        ("mg/l", "mg/L") | ("g/dl", "g/dL") => Some(value),
        ("ug/ml" | "µg/ml" | "μg/ml", "mg/L") => Some(value),
        ("g/l", "g/dL") => Some(value / 10.0),
        ("", _) => None,
        _ => None,
    }
}

fn lab_evidence(concept: &str, l: LabRecord) -> Evidence {
    let value = match (l.value_num, &l.value_text) {
        (Some(v), _) => format!("{v}"),
        (None, Some(t)) => t.clone(),
        (None, None) => String::new(),
    };
    let reference_range = match (l.ref_low, l.ref_high, &l.ref_text) {
        (Some(lo), Some(hi), _) => Some(format!("{lo}-{hi}")),
        (None, Some(hi), _) => Some(format!("<{hi}")),
        (Some(lo), None, _) => Some(format!(">{lo}")),
        (None, None, Some(t)) => Some(t.clone()),
        _ => None,
    };
    Evidence::Lab {
        concept: concept.to_string(),
        original_name: l.original_name,
        value,
        unit: l.unit,
        reference_range,
        flag: l.flag,
        time: l.time,
        source_id: l.source_id,
    }
}

/// A timeline line `- 2020-01-02 10:00: text [Resource/id]` as (text, record).
fn timeline_line(sentence: &str) -> Option<(String, String)> {
    let line = sentence.trim().strip_prefix("- ")?;
    let open = line.rfind('[')?;
    let record = line[open + 1..].strip_suffix(']')?.to_string();
    if !record.contains('/') {
        return None;
    }
    let body = line[..open].trim();
    let text = body.split_once(": ").map(|(_, t)| t).unwrap_or(body);
    Some((text.to_string(), record))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_lose_answer_schema_tokens() {
        assert_eq!(sanitise_query("Answer: Yes/No metformin [3] not documented"), "metformin");
        assert_eq!(sanitise_query("dialysis yes no unclear"), "dialysis");
        assert_eq!(keyword_subset("Was the patient given metformin"), "given metformin");
    }

    #[test]
    fn timeline_lines_parse() {
        assert_eq!(
            timeline_line("- 2020-01-02 10:00: metformin 500 MG Oral Tablet (active) [MedicationRequest/abc]"),
            Some(("metformin 500 MG Oral Tablet (active)".into(), "MedicationRequest/abc".into()))
        );
        assert_eq!(timeline_line("Medications on 2020-01-02"), None);
    }

    #[test]
    fn unit_conversion_is_explicit() {
        assert_eq!(convert(38.0, "g/L", "g/dL"), Some(3.8));
        assert_eq!(convert(3.8, "g/dL", "g/dL"), Some(3.8));
        assert_eq!(convert(3.8, "mmol/L", "g/dL"), None);
    }
}
