//! The calculators' tables as data (`crates/chart/data/calculator_tables.json`):
//! the weighted items of HCT-CI, Charlson, CHA2DS2-VASc and R2-ISS, their
//! age points and groups, and the problem-list phrases that mark
//! CHA2DS2-VASc's conditions. The formulas stay in code
//! ([`super::calculate`]); what a clinician would check against a
//! publication is here, each table with its source.
//!
//! A table is validated as a whole when it is read: every problem is
//! reported with the place it is in (`charlson.supersedes[1].mild`) and
//! what to change. The built-in file is checked by a test, so a broken edit
//! fails CI, not a patient's question.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde::Deserialize;

use super::Stage;

/// The tables shipped with Evident, embedded at compile time.
const BUILTIN_JSON: &str = include_str!("../../data/calculator_tables.json");

/// The boolean inputs CHA2DS2-VASc's typed input has; its table must weigh
/// exactly these.
const CHA2DS2_VASC_INPUTS: [&str; 6] = [
    "congestive_heart_failure",
    "hypertension",
    "diabetes",
    "stroke_tia_thromboembolism",
    "vascular_disease",
    "female",
];

/// The boolean inputs R2-ISS's typed input has besides the ISS labs.
const R2_ISS_INPUTS: [&str; 4] = ["del_17p", "ldh_high", "t_4_14", "gain_1q"];

/// A present-or-absent item and the points it adds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Item {
    pub name: String,
    pub points: f64,
}

/// Points from an age on: the highest band whose `from` the age reaches.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgeBand {
    pub from: f64,
    pub points: f64,
}

/// A risk group from a score on.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RiskGroup {
    pub name: String,
    pub from: f64,
}

/// A severe form that, when present, keeps its mild form from counting.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Supersedes {
    pub severe: String,
    pub mild: String,
}

/// A CHA2DS2-VASc input as the stored problem list names it: phrases that
/// mark it (lower case, matched inside a condition line) and phrases that
/// do not count (prediabetes is not diabetes).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    pub input: String,
    pub marks: Vec<String>,
    pub not: Vec<String>,
}

impl Condition {
    /// Whether a lower-cased problem-list line shows this condition.
    pub fn shown_in(&self, lower: &str) -> bool {
        self.marks.iter().any(|m| lower.contains(m.as_str())) && !self.not.iter().any(|n| lower.contains(n.as_str()))
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StagePoints {
    pub stage: Stage,
    pub points: f64,
}

/// A stage for scores up to and including `up_to`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageGroup {
    pub stage: Stage,
    pub up_to: f64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HctCiTable {
    pub source: String,
    pub items: Vec<Item>,
    pub risk_groups: Vec<RiskGroup>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CharlsonTable {
    pub source: String,
    pub items: Vec<Item>,
    pub supersedes: Vec<Supersedes>,
    pub age_points: Vec<AgeBand>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cha2ds2VascTable {
    pub source: String,
    pub items: Vec<Item>,
    pub age_points: Vec<AgeBand>,
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct R2IssTable {
    pub source: String,
    pub iss_points: Vec<StagePoints>,
    pub items: Vec<Item>,
    pub groups: Vec<StageGroup>,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalculatorTables {
    #[serde(default)]
    pub about: Option<String>,
    pub version: u32,
    pub hct_ci: HctCiTable,
    pub charlson: CharlsonTable,
    pub cha2ds2_vasc: Cha2ds2VascTable,
    pub r2_iss: R2IssTable,
}

#[derive(Debug, thiserror::Error)]
pub enum TablesError {
    #[error("calculator tables are not valid JSON of the tables' shape: {0}; fix the file (see crates/chart/data/calculator_tables.json for the format)")]
    Json(#[from] serde_json::Error),
    #[error("calculator tables have {} problem(s):\n  {}", .0.len(), .0.join("\n  "))]
    Invalid(Vec<String>),
}

impl CalculatorTables {
    /// The built-in tables, read and validated once.
    pub fn builtin() -> &'static CalculatorTables {
        static BUILTIN: OnceLock<CalculatorTables> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            CalculatorTables::from_json(BUILTIN_JSON)
                .unwrap_or_else(|e| panic!("the built-in data/calculator_tables.json is invalid: {e}"))
        })
    }

    /// Reads and validates tables; every problem is reported, each with
    /// its place in the file.
    pub fn from_json(json: &str) -> Result<CalculatorTables, TablesError> {
        let tables: CalculatorTables = serde_json::from_str(json)?;
        let problems = tables.problems();
        if problems.is_empty() {
            Ok(tables)
        } else {
            Err(TablesError::Invalid(problems))
        }
    }

    fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let (h, c, v, r) = (&self.hct_ci, &self.charlson, &self.cha2ds2_vasc, &self.r2_iss);
        for (table, source) in
            [("hct_ci", &h.source), ("charlson", &c.source), ("cha2ds2_vasc", &v.source), ("r2_iss", &r.source)]
        {
            if source.trim().is_empty() {
                p.push(format!("{table}.source is empty; name the publication the table follows"));
            }
        }
        check_items(&mut p, "hct_ci", &h.items);
        check_items(&mut p, "charlson", &c.items);
        check_items(&mut p, "cha2ds2_vasc", &v.items);
        check_items(&mut p, "r2_iss", &r.items);
        check_inputs(&mut p, "cha2ds2_vasc", &v.items, &CHA2DS2_VASC_INPUTS);
        check_inputs(&mut p, "r2_iss", &r.items, &R2_ISS_INPUTS);

        if h.risk_groups.first().map(|g| g.from) != Some(0.0) {
            p.push("hct_ci.risk_groups: the first group must start from 0, so every score has a group".into());
        }
        for (i, pair) in h.risk_groups.windows(2).enumerate() {
            if pair[1].from <= pair[0].from {
                p.push(format!(
                    "hct_ci.risk_groups[{}].from: {} does not follow {}; order groups by rising score",
                    i + 1,
                    pair[1].from,
                    pair[0].from
                ));
            }
        }
        for (i, g) in h.risk_groups.iter().enumerate() {
            if g.name.trim().is_empty() {
                p.push(format!("hct_ci.risk_groups[{i}].name is empty"));
            }
        }

        let charlson_names: BTreeSet<&str> = c.items.iter().map(|i| i.name.as_str()).collect();
        for (i, s) in c.supersedes.iter().enumerate() {
            for (field, name) in [("severe", &s.severe), ("mild", &s.mild)] {
                if !charlson_names.contains(name.as_str()) {
                    p.push(format!("charlson.supersedes[{i}].{field}: {name:?} is not one of charlson's items"));
                }
            }
            if s.severe == s.mild {
                p.push(format!("charlson.supersedes[{i}]: {:?} cannot supersede itself", s.severe));
            }
        }
        check_bands(&mut p, "charlson.age_points", &c.age_points);
        check_bands(&mut p, "cha2ds2_vasc.age_points", &v.age_points);

        let mut seen = BTreeSet::new();
        for (i, cond) in v.conditions.iter().enumerate() {
            let at = format!("cha2ds2_vasc.conditions[{i}]");
            if cond.input == "female" || !CHA2DS2_VASC_INPUTS.contains(&cond.input.as_str()) {
                p.push(format!("{at}.input: {:?} is not a condition CHA2DS2-VASc weighs", cond.input));
            }
            if !seen.insert(cond.input.as_str()) {
                p.push(format!("{at}.input: {:?} has phrases twice; merge them", cond.input));
            }
            if cond.marks.is_empty() {
                p.push(format!("{at}.marks is empty; a condition needs a phrase that shows it"));
            }
            for (field, phrases) in [("marks", &cond.marks), ("not", &cond.not)] {
                for (j, phrase) in phrases.iter().enumerate() {
                    if phrase.trim().is_empty() || *phrase != phrase.to_lowercase() || phrase.trim() != phrase {
                        p.push(format!("{at}.{field}[{j}]: {phrase:?} must be a non-empty lower-case phrase without outer spaces (lines are matched lower-cased)"));
                    }
                }
            }
            for phrase in &cond.not {
                if cond.marks.contains(phrase) {
                    p.push(format!("{at}: {phrase:?} is both a mark and not one"));
                }
            }
        }

        for (i, s) in r.iss_points.iter().enumerate() {
            if !matches!(s.stage, Stage::II | Stage::III) {
                p.push(format!("r2_iss.iss_points[{i}].stage: ISS has points for II and III only, not {:?}", s.stage));
            }
            if !(s.points.is_finite() && s.points > 0.0) {
                p.push(format!("r2_iss.iss_points[{i}].points: {} must be a positive number", s.points));
            }
        }
        let stages: Vec<Stage> = r.groups.iter().map(|g| g.stage).collect();
        if stages != [Stage::I, Stage::II, Stage::III, Stage::IV] {
            p.push(format!("r2_iss.groups: the stages must be I, II, III and IV in that order, not {stages:?}"));
        }
        for (i, pair) in r.groups.windows(2).enumerate() {
            if pair[1].up_to <= pair[0].up_to {
                p.push(format!(
                    "r2_iss.groups[{}].up_to: {} does not follow {}; order groups by rising score",
                    i + 1,
                    pair[1].up_to,
                    pair[0].up_to
                ));
            }
        }
        let most =
            r.iss_points.iter().map(|s| s.points).fold(0.0, f64::max) + r.items.iter().map(|i| i.points).sum::<f64>();
        if r.groups.last().is_some_and(|g| g.up_to < most) {
            p.push(format!(
                "r2_iss.groups: the last group ends at {} but a patient can score {most}",
                r.groups.last().map_or(0.0, |g| g.up_to)
            ));
        }
        p
    }
}

/// Items: snake-case names, each once, and positive points.
fn check_items(p: &mut Vec<String>, table: &str, items: &[Item]) {
    if items.is_empty() {
        p.push(format!("{table}.items is empty"));
    }
    let mut seen = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        let snake = !item.name.is_empty()
            && item.name.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_');
        if !snake {
            p.push(format!(
                "{table}.items[{i}].name: {:?} must be snake case (a-z, 0-9, _): it is the calculator's input field",
                item.name
            ));
        }
        if !seen.insert(item.name.as_str()) {
            p.push(format!("{table}.items[{i}].name: {:?} appears twice", item.name));
        }
        if !(item.points.is_finite() && item.points > 0.0) {
            p.push(format!("{table}.items[{i}].points: {} must be a positive number", item.points));
        }
    }
}

/// A table whose items are a typed input's fields must weigh exactly those.
fn check_inputs(p: &mut Vec<String>, table: &str, items: &[Item], inputs: &[&str]) {
    let names: BTreeSet<&str> = items.iter().map(|i| i.name.as_str()).collect();
    let wanted: BTreeSet<&str> = inputs.iter().copied().collect();
    for extra in names.difference(&wanted) {
        p.push(format!(
            "{table}.items: {extra:?} is not an input of the calculator; its inputs are {}",
            inputs.join(", ")
        ));
    }
    for missing in wanted.difference(&names) {
        p.push(format!("{table}.items: the input {missing:?} has no points; add it"));
    }
}

/// Age bands: rising ages, rising positive points.
fn check_bands(p: &mut Vec<String>, at: &str, bands: &[AgeBand]) {
    for (i, b) in bands.iter().enumerate() {
        if !(b.from.is_finite() && (0.0..=120.0).contains(&b.from)) {
            p.push(format!("{at}[{i}].from: {} is not an age from 0 to 120", b.from));
        }
        if !(b.points.is_finite() && b.points > 0.0) {
            p.push(format!("{at}[{i}].points: {} must be a positive number", b.points));
        }
    }
    for (i, pair) in bands.windows(2).enumerate() {
        if pair[1].from <= pair[0].from || pair[1].points <= pair[0].points {
            p.push(format!("{at}[{}]: ages and points must both rise from band to band", i + 1));
        }
    }
}

/// The points of the highest band `age` reaches; 0 below the first.
pub fn age_points(bands: &[AgeBand], age: f64) -> f64 {
    bands.iter().filter(|b| age >= b.from).map(|b| b.points).fold(0.0, f64::max)
}
