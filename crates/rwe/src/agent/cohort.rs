//! `build_cohort`, Evident's typed cohort builder (`--strategy typed` only;
//! not in RWE-bench): the agent states structured inclusion and exclusion
//! criteria of the common MIMIC-IV ICU cohort (ICU stays, the first per
//! patient, adults, a first-day laboratory value required; a drug exposure
//! and a death-within-N-days outcome as columns) and Evident writes the
//! SQL, runs it on the read-only connection, and writes the cohort audit
//! file, the attrition table and the SQL itself to the workspace. A model
//! that cannot write a correct SQL join can still state criteria; the
//! cohort it gets is built from the database, so it cannot hold a
//! fabricated patient.
//!
//! The definitions follow the development protocols: age at ICU admission
//! is `anchor_age` plus the calendar year of `intime` minus `anchor_year`;
//! the first ICU stay is the one with the earliest `intime` for the
//! subject; a laboratory value is the maximum `valuenum` of the item
//! charted from `hours_before` before to `hours_after` after `intime`,
//! matched by `subject_id`; a drug is any `prescriptions` row of the stay's
//! `hadm_id` whose name contains one of the given words (case-insensitive);
//! death within N days counts `dod` at most N days after the calendar date
//! of `intime`, and the follow-up is those days for a death within N days
//! and N (censored) otherwise.

use std::fmt::Write as _;
use std::path::Path;

use evident_db::{ReadOnlyConnection, Value as DbValue};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::audit::{ATTRITION_FILE, AUDIT_FILE};

/// The file the cohort's SQL is written to.
pub const COHORT_SQL_FILE: &str = "cohort.sql";

/// The criteria `build_cohort` last wrote the cohort file from (JSON), so
/// that a rebuild once the cohort is fixed keeps them ([`CohortSpec::within`]),
/// across a resumed run too. Removed when SQL writes the cohort file.
pub const COHORT_SPEC_FILE: &str = "cohort_spec.json";

/// JSON Schema of `build_cohort`'s parameters.
pub const PARAMS_SCHEMA: &str = r#"{"type": "object", "properties": {"min_age": {"type": "integer", "minimum": 0, "maximum": 120}, "first_icu_stay_only": {"type": "boolean"}, "labs": {"type": "array", "maxItems": 3, "items": {"type": "object", "properties": {"itemid": {"type": "integer", "minimum": 1, "maximum": 999999}, "name": {"type": "string", "maxLength": 32}, "required": {"type": "boolean"}}, "required": ["itemid", "name"], "additionalProperties": false}}, "drug": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 32}, "contains": {"type": "array", "minItems": 1, "maxItems": 10, "items": {"type": "string", "maxLength": 40}}}, "required": ["name", "contains"], "additionalProperties": false}, "death_within_days": {"type": "integer", "minimum": 1, "maximum": 3650}, "groups": {"type": "array", "maxItems": 2, "items": {"anyOf": [{"type": "object", "properties": {"name": {"type": "string", "maxLength": 32}, "column": {"type": "string", "maxLength": 32}, "at_least": {"type": "number"}}, "required": ["name", "column", "at_least"], "additionalProperties": false}, {"type": "object", "properties": {"name": {"type": "string", "maxLength": 32}, "column": {"type": "string", "maxLength": 32}, "above": {"type": "number"}}, "required": ["name", "column", "above"], "additionalProperties": false}]}}}, "required": [], "additionalProperties": false}"#;

/// The labevents itemids a protocol names ("itemid 50813"), in order.
pub fn protocol_itemids(text: &str) -> Vec<i64> {
    let mut ids = Vec::new();
    for part in text.split("itemid").skip(1) {
        let digits: String = part.trim_start().chars().take_while(char::is_ascii_digit).collect();
        if let Ok(id) = digits.parse::<i64>() {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    ids
}

/// `build_cohort`'s parameter schema for one protocol (Evident's typed
/// strategy): a laboratory criterion can name only an itemid the protocol
/// names, and there is none when it names none; the drug column is offered
/// only when the protocol mentions prescriptions. A small model fills every
/// property a schema offers, so a criterion the protocol does not have is
/// not offered.
pub fn params_schema_for(protocol_text: &str) -> Value {
    let mut schema: Value = serde_json::from_str(PARAMS_SCHEMA).expect("the build_cohort schema is valid JSON");
    let props = schema["properties"].as_object_mut().expect("the schema has properties");
    let itemids = protocol_itemids(protocol_text);
    if itemids.is_empty() {
        props.remove("labs");
    } else {
        props["labs"]["items"]["properties"]["itemid"] = serde_json::json!({"enum": itemids});
    }
    if !protocol_text.to_lowercase().contains("prescriptions") {
        props.remove("drug");
    }
    schema
}

/// `build_cohort`'s parameter schema for the grounded strategy
/// (`--strategy typed-grounded`, Evident's): [`params_schema_for`], and the
/// protocol's criteria the model may not leave out. A protocol that names a
/// laboratory itemid gets at least one laboratory criterion, each only its
/// itemid (Evident names the column after the item's label in
/// `d_labitems`, [`name_labs_by_label`], and stays without a value are
/// excluded, as every development protocol says); one whose outcome is a
/// death within N days gets `death_within_days` fixed to N, and one whose
/// outcome is not has no `death_within_days` at all. A group cuts
/// only one of `group_columns` (age and the protocol's lab columns; run 5
/// cut `hadm_id`), is named one of `group_names` where that is not empty
/// (a drug column one of `drug_names`), and there are no groups when that list is empty (the
/// environment empties it where no count or share needs one). In runs 2 and 4
/// the 0.5B model called `build_cohort {}` on the lactate and RDW tasks and
/// named the anion-gap column `lactate`.
pub fn grounded_params_schema_for(
    protocol_text: &str,
    group_columns: &[String],
    group_names: &[String],
    drug_names: &[String],
) -> Value {
    let mut schema = params_schema_for(protocol_text);
    let mut required = Vec::new();
    let props = schema["properties"].as_object_mut().expect("the schema has properties");
    if group_columns.is_empty() {
        props.remove("groups");
    } else if let Some(branches) = props["groups"]["items"]["anyOf"].as_array_mut() {
        for b in branches.iter_mut() {
            b["properties"]["column"] = serde_json::json!({"enum": group_columns});
        }
        // Each name with the columns it names (`high_rdw` cuts `rdw`), or
        // with every column where it names none (`older`).
        if !group_names.is_empty() {
            let cuts: Vec<Value> = branches.clone();
            branches.clear();
            for name in group_names {
                let words: Vec<&str> = name.split('_').collect();
                let named: Vec<&String> =
                    group_columns.iter().filter(|c| c.split('_').all(|w| words.contains(&w))).collect();
                let columns: Vec<&String> = if named.is_empty() { group_columns.iter().collect() } else { named };
                // The protocol's own cut where it gives one (`protocol_cut`).
                let given = protocol_cut(protocol_text, name);
                for cut in &cuts {
                    let mut b = cut.clone();
                    if let Some((kind, value)) = given {
                        if b["properties"].get(kind).is_none() {
                            continue;
                        }
                        b["properties"][kind] = serde_json::json!({"const": value});
                    }
                    b["properties"]["name"] = serde_json::json!({"const": name});
                    b["properties"]["column"] = serde_json::json!({"enum": columns});
                    branches.push(b);
                }
            }
        }
    }
    // No more groups than names (run 6 cut two named older).
    if let Some(groups) = props.get_mut("groups").filter(|_| !group_names.is_empty()) {
        groups["maxItems"] = Value::from(group_names.len());
    }
    if let Some(drug) = props.get_mut("drug").filter(|_| !drug_names.is_empty()) {
        drug["properties"]["name"] = serde_json::json!({"enum": drug_names});
    }
    if let Some(labs) = props.get_mut("labs") {
        let itemids = labs["items"]["properties"]["itemid"].clone();
        labs["items"] = serde_json::json!({
            "type": "object",
            "properties": {"itemid": itemids.clone()},
            "required": ["itemid"],
            "additionalProperties": false
        });
        labs["minItems"] = Value::from(1);
        labs["maxItems"] = Value::from(itemids.as_array().map_or(1, Vec::len));
        required.push("labs");
    }
    match protocol_death_days(protocol_text) {
        Some(days) => {
            props.insert("death_within_days".into(), serde_json::json!({"const": days}));
            required.push("death_within_days");
        }
        // Run 5 gave the lactate task, whose outcome is in-hospital death,
        // a death within 24 days (the protocol's twenty-four hours) and
        // counted its deaths from that column.
        None => {
            props.remove("death_within_days");
        }
    }
    schema["required"] = serde_json::json!(required);
    schema
}

/// The text of the protocol's `Exposure:` and `Groups:` paragraphs (each up
/// to the next `Label:` line), lower case, on one line.
fn exposure_text(methods: &str) -> String {
    let mut text = String::new();
    let mut inside = false;
    for line in methods.lines() {
        let trimmed = line.trim_start();
        if let Some(label) = label_of(trimmed) {
            inside = matches!(label, "Exposure" | "Groups" | "Exposures" | "Group");
        }
        if inside {
            text.push_str(&trimmed.to_lowercase());
            text.push(' ');
        }
    }
    text
}

fn label_of(line: &str) -> Option<&str> {
    line.split_once(':').map(|(l, _)| l).filter(|l| {
        !l.is_empty()
            && l.len() <= 40
            && l.starts_with(|c: char| c.is_ascii_uppercase())
            && l.chars().all(|c| c.is_ascii_alphabetic() || c == ' ' || c == '-')
    })
}

/// A number written in digits or in English words up to ninety-nine
/// ("sixty-five").
fn number_at(word: &str) -> Option<f64> {
    if let Ok(x) = word.trim_end_matches(['%', ',', '.']).parse::<f64>() {
        return Some(x);
    }
    const UNITS: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 8] = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"];
    let unit = |w: &str| UNITS.iter().position(|u| *u == w).map(|i| i as f64);
    let ten = |w: &str| TENS.iter().position(|t| *t == w).map(|i| (i as f64 + 2.0) * 10.0);
    match word.split_once('-') {
        Some((t, u)) => Some(ten(t)? + unit(u).filter(|u| *u < 10.0)?),
        None => unit(word).or_else(|| ten(word)),
    }
}

/// The cut the protocol gives a group named `name`, from the Exposure or
/// Groups sentence that holds every word of the name: "above N", "over N",
/// "more than N", "greater than N", "exceeding N", "> N" (`above`); "at
/// least N", "N or more" (or older, above, higher, greater, over), "N and
/// above", "greater than or equal to N", "≥ N", ">= N" (`at_least`). The
/// age task says "aged sixty-five years or more", the RDW task "a value
/// above 15.5 %"; run 6 cut older at 18 and high RDW at 15.5 inclusive.
pub fn protocol_cut(methods: &str, name: &str) -> Option<(&'static str, f64)> {
    let text = exposure_text(methods);
    let name_words: Vec<&str> = name.split('_').collect();
    for sentence in text.split(". ").flat_map(|s| s.split(';')).map(str::trim) {
        let words = cut_words(sentence);
        let holds = |w: &str| {
            words.iter().any(|x| {
                x.trim_matches(|c: char| !c.is_alphanumeric()).trim_end_matches('s') == w.trim_end_matches('s')
            })
        };
        if !name_words.iter().all(|w| holds(w)) {
            continue;
        }
        let word = |k: usize| words.get(k).map(String::as_str).unwrap_or("");
        // The first number within three words after position `k`.
        let number_after = |k: usize| (k + 1..k + 4).find_map(|j| words.get(j).and_then(|x| number_at(x)));
        for i in 0..words.len() {
            let w = word(i);
            let than = word(i + 1) == "than";
            let sign = matches!(w, "≥" | ">=");
            if sign || (matches!(w, "greater" | "more" | "higher") && than && word(i + 2) == "or") {
                let from = if sign { i } else { i + 4 };
                if let Some(x) = number_after(from) {
                    return Some(("at_least", x));
                }
            }
            if w == ">"
                || matches!(w, "above" | "over" | "exceeding" | "exceeds" | "exceed")
                || (matches!(w, "greater" | "more" | "higher") && than)
            {
                if let Some(x) = number_after(if than { i + 1 } else { i }) {
                    return Some(("above", x));
                }
            }
            if w == "least" && i > 0 && word(i - 1) == "at" {
                if let Some(x) = number_after(i) {
                    return Some(("at_least", x));
                }
            }
            if let Some(x) = number_at(w) {
                let rest = words[i + 1..].iter().take(4).map(String::as_str).collect::<Vec<_>>().join(" ");
                const AT_LEAST: [&str; 8] =
                    ["or more", "or older", "or above", "or higher", "or greater", "or over", "and above", "and over"];
                if AT_LEAST.iter().any(|t| rest.contains(t)) {
                    return Some(("at_least", x));
                }
            }
        }
    }
    None
}

/// A sentence's words, with a comparison sign split from the number it
/// stands before (`≥65` is `≥ 65`, `>15.5%` is `> 15.5%`).
fn cut_words(sentence: &str) -> Vec<String> {
    let mut words = Vec::new();
    for w in sentence.split_whitespace() {
        let sign = [">=", "≥", ">"].into_iter().find(|s| w.starts_with(s)).filter(|s| w.len() > s.len());
        match sign {
            Some(s) => {
                words.push(s.to_string());
                words.push(w[s.len()..].to_string());
            }
            None => words.push(w.to_string()),
        }
    }
    words
}

/// The words of the protocol's `Exposure:` and `Groups:` paragraphs (each
/// up to the next `Label:` line), lower case, a plural's `s` dropped.
pub fn protocol_exposure_words(methods: &str) -> Vec<String> {
    exposure_text(methods)
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| match w.strip_suffix('s') {
            Some(stem) if stem.len() >= 3 && !stem.ends_with('s') => stem.to_string(),
            _ => w.to_string(),
        })
        .collect()
}

/// The N of an outcome "death ... within N days" on the protocol's
/// `Outcome:` line, if it has one.
pub fn protocol_death_days(protocol_text: &str) -> Option<i64> {
    let line = protocol_text.lines().find(|l| l.trim_start().starts_with("Outcome:"))?.to_lowercase();
    if !line.contains("death") {
        return None;
    }
    let after = line.split("within ").nth(1)?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    let rest = after[digits.len()..].trim_start();
    (rest.starts_with("days") || rest.starts_with("day ")).then(|| digits.parse().ok()).flatten()
}

/// Gives each laboratory criterion without a `name` the column name of its
/// item's label in `mimiciv_hosp.d_labitems` (`Anion Gap` becomes
/// `anion_gap`), after dropping a repeated itemid; an itemid with no label
/// is left for [`build_cohort`] to refuse.
pub fn name_labs_by_label(db: &mut ReadOnlyConnection, params: &mut Map<String, Value>) -> Result<(), String> {
    if let Some(labs) = params.get_mut("labs").and_then(Value::as_array_mut) {
        // The same itemid twice is one criterion (run 5 stated the anion gap's
        // twice, and the two same-named columns were refused).
        let mut seen = Vec::new();
        labs.retain(|lab| match lab.get("itemid").and_then(Value::as_i64) {
            Some(id) if seen.contains(&id) => false,
            Some(id) => {
                seen.push(id);
                true
            }
            None => true,
        });
    }
    // A group named twice is one group, the first (run 6 cut two groups
    // named older, which the builder refused as two columns of one name).
    if let Some(groups) = params.get_mut("groups").and_then(Value::as_array_mut) {
        let mut names = Vec::new();
        groups.retain(|g| match g.get("name").and_then(Value::as_str) {
            Some(n) if names.contains(&n.to_string()) => false,
            Some(n) => {
                names.push(n.to_string());
                true
            }
            None => true,
        });
    }
    let Some(labs) = params.get_mut("labs").and_then(Value::as_array_mut) else { return Ok(()) };
    for lab in labs.iter_mut().filter_map(Value::as_object_mut) {
        let Some(itemid) = lab.get("itemid").and_then(Value::as_i64).filter(|_| !lab.contains_key("name")) else {
            continue;
        };
        if let Some(label) = lab_label(db, itemid)? {
            lab.insert("name".into(), Value::from(label_column(&label)));
        }
    }
    Ok(())
}

/// The label of a laboratory item in `mimiciv_hosp.d_labitems`, `None`
/// where the itemid is not one.
pub fn lab_label(db: &mut ReadOnlyConnection, itemid: i64) -> Result<Option<String>, String> {
    let found = db
        .query(&format!("SELECT label FROM mimiciv_hosp.d_labitems WHERE itemid = {itemid}"))
        .map_err(|e| e.to_string())?;
    Ok(found.rows.first().and_then(|r| r.first()).map(DbValue::to_text))
}

/// A column name from a laboratory item's label: lower case, each run of
/// other characters one `_` (`Anion Gap` is `anion_gap`, `pO2` is `po2`),
/// `lab_` before one that would not start with a letter.
pub fn label_column(label: &str) -> String {
    let mut out = String::new();
    for c in label.trim().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    let out = out.trim_end_matches('_').to_string();
    match out.chars().next() {
        Some(c) if c.is_ascii_lowercase() && !FIXED_COLUMNS.contains(&out.as_str()) => out,
        _ => format!("lab_{out}"),
    }
}

/// A laboratory criterion: the first-day maximum of one `itemid`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabCriterion {
    pub itemid: i64,
    /// The column name in the cohort file.
    pub name: String,
    /// Stays without a value are excluded (default true).
    pub required: bool,
}

/// A drug exposure column (0/1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DrugExposure {
    pub name: String,
    pub contains: Vec<String>,
}

/// A 0/1 group column cut from a numeric one (`age` or a laboratory
/// column): 1 where `column` is at least `value` (`inclusive`) or above
/// it, 0 where it is less, empty where it is missing. The age task's
/// "older" (65 or more) and the RDW task's "high RDW" (above 15.5 %), which
/// a small model could not write in SQL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupColumn {
    pub name: String,
    pub column: String,
    pub value: f64,
    pub inclusive: bool,
}

/// The criteria `build_cohort` takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CohortSpec {
    pub min_age: i64,
    pub first_icu_stay_only: bool,
    pub labs: Vec<LabCriterion>,
    pub drug: Option<DrugExposure>,
    pub death_within_days: Option<i64>,
    pub groups: Vec<GroupColumn>,
    pub hours_before: i64,
    pub hours_after: i64,
}

/// A column name the agent gave: lower-case letters, digits and `_`,
/// starting with a letter, not one of the fixed columns.
fn column_name(raw: &str, what: &str) -> Result<String, String> {
    let name = raw.trim().to_ascii_lowercase().replace([' ', '-'], "_");
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok && FIXED_COLUMNS.contains(&name.as_str()) {
        // Run 5 named the RDW task's group "age" four times.
        Err(format!(
            "{what} {raw:?} is not a usable column name: the cohort already has a column {name}; give it a name of its own, for what it marks"
        ))
    } else if ok {
        Ok(name)
    } else {
        // No example name here: the 0.5B model copied one ("lactate") into a
        // drug criterion and built a cohort on the wrong prescriptions.
        Err(format!(
            "{what} {raw:?} is not a usable column name; use lower-case letters, digits and _, starting with a letter"
        ))
    }
}

/// The columns every cohort has.
pub const FIXED_COLUMNS: [&str; 9] = [
    "subject_id",
    "hadm_id",
    "stay_id",
    "intime",
    "age",
    "female",
    "hospital_expire_flag",
    "first_icu_stay",
    "days_to_death",
];

impl CohortSpec {
    /// The criteria from the action's parameters (defaults: adults, first
    /// ICU stay only, no laboratory or drug columns, no follow-up).
    pub fn from_params(params: &Map<String, Value>) -> Result<CohortSpec, String> {
        let int = |key: &str, default: i64| -> Result<i64, String> {
            match params.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(v) => v
                    .as_f64()
                    .filter(|x| x.fract() == 0.0 && *x >= 0.0)
                    .map(|x| x as i64)
                    .ok_or(format!("build_cohort: {key} must be a whole number, e.g. {default}")),
            }
        };
        let mut labs = Vec::new();
        if let Some(list) = params.get("labs") {
            let list = list.as_array().ok_or("build_cohort: labs must be a list of {\"itemid\", \"name\"}")?;
            for lab in list {
                let itemid = lab
                    .get("itemid")
                    .and_then(Value::as_i64)
                    .filter(|i| *i > 0)
                    .ok_or("build_cohort: each lab needs \"itemid\", a labevents itemid such as 50813")?;
                let name = column_name(lab.get("name").and_then(Value::as_str).unwrap_or(""), "lab name")?;
                let required = lab.get("required").and_then(Value::as_bool).unwrap_or(true);
                labs.push(LabCriterion { itemid, name, required });
            }
        }
        let drug = match params.get("drug") {
            None | Some(Value::Null) => None,
            Some(d) => {
                let name = column_name(d.get("name").and_then(Value::as_str).unwrap_or(""), "drug name")?;
                let contains: Vec<String> = d
                    .get("contains")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(|s| s.trim().to_lowercase()).collect())
                    .unwrap_or_default();
                let contains: Vec<String> = contains.into_iter().filter(|s| !s.is_empty()).collect();
                if contains.is_empty() {
                    return Err("build_cohort: drug needs \"contains\", the words of the drug names".into());
                }
                if contains.iter().any(|w| !w.chars().all(|c| c.is_alphanumeric() || c == ' ' || c == '-')) {
                    return Err("build_cohort: drug words use letters, digits, spaces and - only".into());
                }
                Some(DrugExposure { name, contains })
            }
        };
        let death = match params.get("death_within_days") {
            None | Some(Value::Null) => None,
            Some(_) => Some(int("death_within_days", 28)?).filter(|d| *d > 0),
        };
        let mut groups = Vec::new();
        if let Some(list) = params.get("groups") {
            let list = list
                .as_array()
                .ok_or("build_cohort: groups must be a list of {\"name\", \"column\", \"at_least\" or \"above\"}")?;
            for g in list {
                let name = column_name(g.get("name").and_then(Value::as_str).unwrap_or(""), "group name")?;
                let column = g.get("column").and_then(Value::as_str).unwrap_or("").trim().to_ascii_lowercase();
                let numeric: Vec<&str> = std::iter::once("age").chain(labs.iter().map(|l| l.name.as_str())).collect();
                if !numeric.contains(&column.as_str()) {
                    return Err(format!(
                        "build_cohort: group {name} cuts column {column:?}, which is not one of {}; nothing was written",
                        numeric.join(", ")
                    ));
                }
                let (value, inclusive) =
                    match (g.get("at_least").and_then(Value::as_f64), g.get("above").and_then(Value::as_f64)) {
                        (Some(v), None) => (v, true),
                        (None, Some(v)) => (v, false),
                        _ => {
                            return Err(format!(
                                "build_cohort: group {name} needs one of \"at_least\" or \"above\", a number"
                            ))
                        }
                    };
                if !value.is_finite() {
                    return Err(format!("build_cohort: group {name}'s cut is not a number"));
                }
                groups.push(GroupColumn { name, column, value, inclusive });
            }
        }
        // Each criterion's column and what it is, for a clash's message (the
        // 0.5B model named the statin task's creatinine lab "statin", like
        // the drug, three times in one run).
        let mut columns: Vec<(&str, String)> =
            labs.iter().map(|l| (l.name.as_str(), format!("the lab itemid {}", l.itemid))).collect();
        columns.extend(drug.iter().map(|d| (d.name.as_str(), "the drug".to_string())));
        columns.extend(groups.iter().map(|g| (g.name.as_str(), format!("the group cut from {}", g.column))));
        for (i, (name, what)) in columns.iter().enumerate() {
            if let Some((_, other)) = columns[i + 1..].iter().find(|(n, _)| n == name) {
                return Err(format!(
                    "build_cohort: {what} and {other} are both named \"{name}\", but each becomes a column and needs a name of its own: name a lab after what it measures and the drug after the drug"
                ));
            }
        }
        Ok(CohortSpec {
            min_age: int("min_age", 18)?,
            first_icu_stay_only: params.get("first_icu_stay_only").and_then(Value::as_bool).unwrap_or(true),
            labs,
            drug,
            death_within_days: death,
            groups,
            hours_before: 6,
            hours_after: 24,
        })
    }

    /// This request's additions to the criteria of a `fixed` cohort, and
    /// what of the request was not followed. Once an answer is recorded the
    /// stays and columns may not change, so a rebuild keeps the fixed
    /// cohort's eligibility (first stay, minimum age, required laboratory
    /// values and their window), its columns, its drug and its follow-up,
    /// and adds this request's new groups and laboratory columns (as
    /// columns, not criteria). Run 1 of typed-read's age task, its `older`
    /// group missing when its first answers were taken, rebuilt with
    /// `first_icu_stay_only: false`, was refused (140 stays, not 100) and
    /// never answered the two questions the group was for.
    pub fn within(&self, fixed: &CohortSpec) -> (CohortSpec, Vec<String>) {
        let mut kept = Vec::new();
        if self.first_icu_stay_only != fixed.first_icu_stay_only {
            kept.push(if fixed.first_icu_stay_only { "first ICU stay only" } else { "every ICU stay" }.to_string());
        }
        if self.min_age != fixed.min_age {
            kept.push(format!("age at ICU admission >= {}", fixed.min_age));
        }
        let mut spec = fixed.clone();
        for lab in &self.labs {
            match fixed.labs.iter().find(|l| l.name == lab.name) {
                Some(l) if l.itemid != lab.itemid => kept.push(format!("{} as itemid {}", l.name, l.itemid)),
                Some(_) => {}
                None if spec.column_names().contains(&lab.name.as_str()) => {
                    kept.push(format!("the column {} as it was", lab.name))
                }
                None => {
                    if lab.required {
                        kept.push(format!("{} as a column, not a criterion", lab.name));
                    }
                    spec.labs.push(LabCriterion { required: false, ..lab.clone() });
                }
            }
        }
        for lab in fixed.labs.iter().filter(|l| l.required && !self.labs.iter().any(|m| m.name == l.name)) {
            kept.push(format!("stays with a {} value only", lab.name));
        }
        match (&fixed.drug, &self.drug) {
            (Some(f), Some(d)) if f != d => kept.push(format!("the drug column {}", f.name)),
            (None, Some(d)) if spec.column_names().contains(&d.name.as_str()) => {
                kept.push(format!("the column {} as it was", d.name))
            }
            (None, Some(d)) => spec.drug = Some(d.clone()),
            _ => {}
        }
        match (fixed.death_within_days, self.death_within_days) {
            (Some(f), Some(d)) if f != d => kept.push(format!("death within {f} days")),
            (None, Some(d)) => spec.death_within_days = Some(d),
            _ => {}
        }
        for group in &self.groups {
            match fixed.groups.iter().find(|g| g.name == group.name) {
                Some(g) if g != group => kept.push(format!("the group {} as it was cut", g.name)),
                Some(_) => {}
                None if spec.column_names().contains(&group.name.as_str()) => {
                    kept.push(format!("the column {} as it was", group.name))
                }
                None => spec.groups.push(group.clone()),
            }
        }
        (spec, kept)
    }

    /// The names of the columns the criteria add to the fixed ones.
    fn column_names(&self) -> Vec<&str> {
        let labs = self.labs.iter().map(|l| l.name.as_str());
        let drug = self.drug.iter().map(|d| d.name.as_str());
        labs.chain(drug).chain(self.groups.iter().map(|g| g.name.as_str())).collect()
    }

    /// One row per ICU stay with every criterion variable (no filter).
    pub fn base_sql(&self, postgres: bool) -> String {
        let year = if postgres {
            "CAST(EXTRACT(YEAR FROM i.intime) AS INTEGER)".to_string()
        } else {
            "CAST(strftime('%Y', i.intime) AS INTEGER)".to_string()
        };
        let days_to_death = if postgres {
            "(CAST(p.dod AS DATE) - CAST(i.intime AS DATE))".to_string()
        } else {
            "CAST(ROUND(julianday(date(p.dod)) - julianday(date(i.intime))) AS INTEGER)".to_string()
        };
        let window = if postgres {
            format!(
                "l.charttime BETWEEN i.intime - INTERVAL '{} hours' AND i.intime + INTERVAL '{} hours'",
                self.hours_before, self.hours_after
            )
        } else {
            format!(
                "julianday(l.charttime) BETWEEN julianday(i.intime) - {} AND julianday(i.intime) + {}",
                self.hours_before as f64 / 24.0,
                self.hours_after as f64 / 24.0
            )
        };
        let mut sql = format!(
            "SELECT i.subject_id, i.hadm_id, i.stay_id, i.intime,\n  p.anchor_age + {year} - p.anchor_year AS age,\n  \
             CASE WHEN p.gender = 'F' THEN 1 ELSE 0 END AS female,\n  a.hospital_expire_flag,\n  \
             CASE WHEN i.intime = (SELECT min(j.intime) FROM mimiciv_icu.icustays j WHERE j.subject_id = i.subject_id) THEN 1 ELSE 0 END AS first_icu_stay,\n  \
             {days_to_death} AS days_to_death"
        );
        for lab in &self.labs {
            let _ = write!(
                sql,
                ",\n  (SELECT max(l.valuenum) FROM mimiciv_hosp.labevents l WHERE l.subject_id = i.subject_id AND l.itemid = {} AND l.valuenum IS NOT NULL AND {window}) AS {}",
                lab.itemid, lab.name
            );
        }
        if let Some(drug) = &self.drug {
            let words: Vec<String> =
                drug.contains.iter().map(|w| format!("lower(r.drug) LIKE '%{}%'", w.replace('\'', ""))).collect();
            let _ = write!(
                sql,
                ",\n  CASE WHEN EXISTS (SELECT 1 FROM mimiciv_hosp.prescriptions r WHERE r.hadm_id = i.hadm_id AND ({})) THEN 1 ELSE 0 END AS {}",
                words.join(" OR "),
                drug.name
            );
        }
        sql.push_str(
            "\nFROM mimiciv_icu.icustays i\nJOIN mimiciv_hosp.patients p ON p.subject_id = i.subject_id\nJOIN mimiciv_hosp.admissions a ON a.hadm_id = i.hadm_id",
        );
        sql
    }

    /// The cohort: the base query filtered by the criteria, in attrition order.
    pub fn cohort_sql(&self, postgres: bool) -> String {
        let mut filters = Vec::new();
        if self.first_icu_stay_only {
            filters.push("c.first_icu_stay = 1".to_string());
        }
        filters.push(format!("c.age >= {}", self.min_age));
        for lab in self.labs.iter().filter(|l| l.required) {
            filters.push(format!("c.{} IS NOT NULL", lab.name));
        }
        let groups: String = self
            .groups
            .iter()
            .map(|g| {
                let op = if g.inclusive { ">=" } else { ">" };
                format!(
                    ",\n  CASE WHEN c.{col} IS NULL THEN NULL WHEN c.{col} {op} {v} THEN 1 ELSE 0 END AS {name}",
                    col = g.column,
                    v = g.value,
                    name = g.name
                )
            })
            .collect();
        format!(
            "SELECT c.*{groups}\nFROM (\n{}\n) c\nWHERE {}\nORDER BY c.subject_id, c.stay_id",
            self.base_sql(postgres),
            filters.join("\n  AND ")
        )
    }
}

/// What `build_cohort` did: the observation text.
pub fn build_cohort(db: &mut ReadOnlyConnection, workspace: &Path, spec: &CohortSpec) -> Result<String, String> {
    build_cohort_checked(db, workspace, spec, |_, _| Ok(()))
}

/// [`build_cohort`], with `check` given the cohort file's header and rows
/// before anything is written: an error from it writes nothing.
pub fn build_cohort_checked(
    db: &mut ReadOnlyConnection,
    workspace: &Path,
    spec: &CohortSpec,
    check: impl FnOnce(&[String], &[Vec<String>]) -> Result<(), String>,
) -> Result<String, String> {
    let postgres = db.agent_url().is_postgres();
    // Each laboratory item must exist, so a misread itemid fails here with
    // what to do instead of silently excluding every stay.
    let mut lab_labels = Vec::new();
    for lab in &spec.labs {
        match lab_label(db, lab.itemid)? {
            Some(label) => lab_labels.push(label),
            None => {
                return Err(format!(
                    "itemid {} is not a laboratory item (mimiciv_hosp.d_labitems); give the labevents itemid the protocol names, or leave labs out; nothing was written",
                    lab.itemid
                ))
            }
        }
    }
    let sql = spec.cohort_sql(postgres);
    let base = db.query(&spec.base_sql(postgres)).map_err(|e| e.to_string())?;
    let cohort = db.query(&sql).map_err(|e| e.to_string())?;
    if base.truncated || cohort.truncated {
        return Err(format!(
            "the stays do not fit the query row limit ({} rows); build this cohort with run_sql",
            db.limits().max_rows
        ));
    }
    // The attrition table, from the base rows in the cohort's filter order.
    let col = |name: &str| base.columns.iter().position(|c| c == name).expect("the base query has the column");
    let number = |row: &[DbValue], i: usize| row[i].as_f64();
    let mut rows: Vec<&Vec<DbValue>> = base.rows.iter().collect();
    let mut attrition = vec![("ICU stays in the database".to_string(), "source", rows.len())];
    if spec.first_icu_stay_only {
        let i = col("first_icu_stay");
        rows.retain(|r| number(r, i) == Some(1.0));
        attrition.push(("first ICU stay of each patient".into(), "inclusion", rows.len()));
    }
    let age = col("age");
    rows.retain(|r| number(r, age).is_some_and(|a| a >= spec.min_age as f64));
    attrition.push((format!("age at ICU admission >= {}", spec.min_age), "inclusion", rows.len()));
    for (lab, label) in spec.labs.iter().zip(&lab_labels).filter(|(l, _)| l.required) {
        let i = col(&lab.name);
        rows.retain(|r| number(r, i).is_some());
        attrition.push((
            format!(
                "excluded: no {} (itemid {}, {label}) from {} h before to {} h after ICU admission",
                lab.name, lab.itemid, spec.hours_before, spec.hours_after
            ),
            "exclusion",
            rows.len(),
        ));
    }
    if rows.len() != cohort.rows.len() {
        return Err(format!(
            "internal: the attrition ends at {} stays but the cohort query returned {}",
            rows.len(),
            cohort.rows.len()
        ));
    }
    let steps = || attrition.iter().map(|(s, _, n)| format!("{s}: {n}")).collect::<Vec<_>>().join("; ");
    if rows.is_empty() {
        return Err(format!(
            "these criteria leave no stay ({}); nothing was written; drop or correct the criterion that removes everyone",
            steps()
        ));
    }
    // A group that does not split the cohort carries nothing: a run at
    // f4b5bfb cut `older` at 18, the cohort's own minimum age, so every
    // stay was older.
    for g in &spec.groups {
        let Some(i) = cohort.columns.iter().position(|c| *c == g.name) else { continue };
        let ones = cohort.rows.iter().filter(|r| r[i].as_f64() == Some(1.0)).count();
        let zeros = cohort.rows.iter().filter(|r| r[i].as_f64() == Some(0.0)).count();
        if ones == 0 || zeros == 0 {
            let op = if g.inclusive { ">=" } else { ">" };
            return Err(format!(
                "group {} ({} {op} {}) is {} for all {} stays with a value, so it splits nothing; cut it at the value the protocol gives; nothing was written",
                g.name,
                g.column,
                g.value,
                if ones == 0 { 0 } else { 1 },
                ones + zeros
            ));
        }
    }
    if let Some(drug) = &spec.drug {
        let i = col(&drug.name);
        if !base.rows.iter().any(|r| number(r, i) == Some(1.0)) {
            return Err(format!(
                "no prescription name contains any of {:?}; list the drug names the protocol gives, or leave drug out; nothing was written",
                drug.contains
            ));
        }
    }
    // The cohort file: the query's columns, plus the follow-up columns.
    let cell = |v: &DbValue| if matches!(v, DbValue::Null) { String::new() } else { v.to_text() };
    let days = cohort.columns.iter().position(|c| c == "days_to_death").expect("the cohort has days_to_death");
    let mut header: Vec<String> = cohort.columns.clone();
    let death_cols = spec.death_within_days.map(|n| (format!("death_{n}d"), format!("followup_{n}d")));
    if let Some((death, follow)) = &death_cols {
        header.push(death.clone());
        header.push(follow.clone());
    }
    let records: Vec<Vec<String>> = cohort
        .rows
        .iter()
        .map(|row| {
            let mut record: Vec<String> = row.iter().map(cell).collect();
            if let Some(n) = spec.death_within_days {
                let died = row[days].as_f64().filter(|d| *d <= n as f64);
                record.push(if died.is_some() { "1" } else { "0" }.to_string());
                record.push(died.map(|d| d.max(0.0)).unwrap_or(n as f64).to_string());
            }
            record
        })
        .collect();
    check(&header, &records)?;
    let mut csv_text = Vec::new();
    {
        let mut w = csv::Writer::from_writer(&mut csv_text);
        w.write_record(&header).map_err(|e| e.to_string())?;
        for record in &records {
            w.write_record(record).map_err(|e| e.to_string())?;
        }
        w.flush().map_err(|e| e.to_string())?;
    }
    let mut attrition_text = String::from("step,kind,remaining\n");
    for (step, kind, n) in &attrition {
        let _ = writeln!(attrition_text, "\"{}\",{kind},{n}", step.replace('"', "'"));
    }
    let write =
        |name: &str, bytes: &[u8]| std::fs::write(workspace.join(name), bytes).map_err(|e| format!("{name}: {e}"));
    let spec_json = serde_json::to_vec_pretty(spec).map_err(|e| format!("{COHORT_SPEC_FILE}: {e}"))?;
    write(COHORT_SPEC_FILE, &spec_json)?;
    write(COHORT_SQL_FILE, format!("{sql};\n").as_bytes())?;
    write(ATTRITION_FILE, attrition_text.as_bytes())?;
    write(AUDIT_FILE, &csv_text)?;

    let mut text = format!(
        "Cohort built: {} stays ({} patients). Wrote {AUDIT_FILE} (the cohort audit file), {ATTRITION_FILE} and {COHORT_SQL_FILE}.\nAttrition:\n",
        cohort.rows.len(),
        {
            let s = cohort.columns.iter().position(|c| c == "subject_id").unwrap_or(0);
            let mut ids: Vec<String> = cohort.rows.iter().map(|r| cell(&r[s])).collect();
            ids.sort();
            ids.dedup();
            ids.len()
        }
    );
    for (step, _, n) in &attrition {
        let _ = writeln!(text, "- {step}: {n}");
    }
    let _ = writeln!(text, "Columns of {AUDIT_FILE}: {}", header.join(", "));
    let _ = writeln!(
        text,
        "female is 1 for women; hospital_expire_flag is 1 for in-hospital death{}{}.",
        match &death_cols {
            Some((death, follow)) =>
                format!("; {death} is 1 for death within the days; {follow} is the follow-up in days"),
            None => String::new(),
        },
        spec.groups
            .iter()
            .map(|g| format!(
                "; {} is 1 where {} {} {}",
                g.name,
                g.column,
                if g.inclusive { ">=" } else { ">" },
                g.value
            ))
            .collect::<String>()
    );
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> CohortSpec {
        CohortSpec::from_params(serde_json::from_str::<Value>(json).unwrap().as_object().unwrap()).unwrap()
    }

    #[test]
    fn a_rebuild_of_a_fixed_cohort_keeps_its_criteria_and_adds_new_columns() {
        let fixed = spec(
            r#"{"labs": [{"itemid": 50813, "name": "lactate"}], "drug": {"name": "statin", "contains": ["statin"]}, "death_within_days": 28}"#,
        );
        // The same request, or one that leaves things out, is the cohort as it was.
        assert_eq!(spec(r#"{"labs": [{"itemid": 50813, "name": "lactate"}]}"#).within(&fixed), (fixed.clone(), vec![]));
        let (within, kept) = spec(
            r#"{"min_age": 65, "first_icu_stay_only": false, "labs": [{"itemid": 50813, "name": "lactate"}, {"itemid": 50912, "name": "creatinine"}],
                "drug": {"name": "heparin", "contains": ["heparin"]}, "death_within_days": 365,
                "groups": [{"name": "older", "column": "age", "at_least": 65}, {"name": "statin", "column": "age", "above": 80}]}"#,
        )
        .within(&fixed);
        assert_eq!(
            kept,
            [
                "first ICU stay only",
                "age at ICU admission >= 18",
                "creatinine as a column, not a criterion",
                "the drug column statin",
                "death within 28 days",
                "the column statin as it was",
            ]
        );
        assert_eq!((within.min_age, within.first_icu_stay_only, within.death_within_days), (18, true, Some(28)));
        assert_eq!(within.drug, fixed.drug);
        let labs: Vec<(&str, bool)> = within.labs.iter().map(|l| (l.name.as_str(), l.required)).collect();
        assert_eq!(labs, [("lactate", true), ("creatinine", false)]);
        let groups: Vec<&str> = within.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(groups, ["older"]);
        // A fixed cohort without a follow-up or drug takes the request's.
        let bare = spec("{}");
        let (within, kept) =
            spec(r#"{"death_within_days": 28, "drug": {"name": "statin", "contains": ["statin"]}}"#).within(&bare);
        assert!(kept.is_empty(), "{kept:?}");
        assert_eq!((within.death_within_days, within.drug.map(|d| d.name)), (Some(28), Some("statin".to_string())));
    }

    #[test]
    fn reads_a_groups_cut_from_the_protocol() {
        let age = "Population: adults (age at least eighteen).\nGroups: older patients are those aged sixty-five years or more at ICU admission; the others are\nyounger.\nOutcome: in-hospital death.";
        assert_eq!(protocol_cut(age, "older"), Some(("at_least", 65.0)));
        let rdw = "Exposure: the maximum RDW (labevents itemid 51277, valuenum, %) charted from six hours before to\ntwenty-four hours after intime, matched by subject_id; high RDW means a value above 15.5 %.\nStays without such an RDW are excluded.\nOutcome: death.";
        assert_eq!(protocol_cut(rdw, "high_rdw"), Some(("above", 15.5)));
        assert_eq!(protocol_cut(rdw, "older"), None);
        // Other wordings of the same two cuts.
        let groups = |s: &str| format!("Groups: {s}\nOutcome: death.");
        for (text, cut) in [
            ("high lactate is a value exceeding 2 mmol/L", ("above", 2.0)),
            ("high lactate is lactate > 2", ("above", 2.0)),
            ("high lactate is lactate >2.0 mmol/L", ("above", 2.0)),
            ("high lactate is a value more than two", ("above", 2.0)),
            ("high lactate is a lactate greater than 2 mmol/L", ("above", 2.0)),
            ("high lactate is lactate ≥ 2", ("at_least", 2.0)),
            ("high lactate is lactate ≥2", ("at_least", 2.0)),
            ("high lactate is lactate >= 2", ("at_least", 2.0)),
            ("high lactate is a value greater than or equal to 2 mmol/L", ("at_least", 2.0)),
            ("high lactate is a value of 2 mmol/L or higher", ("at_least", 2.0)),
            ("high lactate is a value of 2 and above", ("at_least", 2.0)),
        ] {
            assert_eq!(protocol_cut(&groups(text), "high_lactate"), Some(cut), "{text}");
        }
        // A number before the group's sentence, or in another group's, is no cut.
        assert_eq!(protocol_cut(&groups("older patients are the others; high lactate is above 2"), "older"), None);
        assert_eq!(number_at("sixty-five"), Some(65.0));
        assert_eq!(number_at("eighteen"), Some(18.0));
        assert_eq!(number_at("15.5"), Some(15.5));
        assert_eq!(number_at("sixty-fifteen"), None);
    }
}
