//! The calculators' tables as data (`crates/chart/data/calculator_tables.json`):
//! the weighted items of HCT-CI, Charlson, CHA2DS2-VASc and R2-ISS, their
//! age points and groups, the problem-list phrases that mark
//! CHA2DS2-VASc's conditions, and how a record's text writes each numeric
//! input (its names and units). The formulas stay in code
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

/// The calculators' numeric inputs but age (which the stored patient
/// gives); each needs a measurement. Listed here rather than read from the
/// input schemas, which HCT-CI's and Charlson's build from these tables. A
/// test checks the list against the schemas.
pub const NUMERIC_INPUTS: [&str; 7] = [
    "beta2_microglobulin_mg_l",
    "albumin_g_dl",
    "creatinine_mg_dl",
    "weight_kg",
    "height_m",
    "hba1c_percent",
    "egfr_ml_min_1_73m2",
];

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
    /// Whether a lower-cased problem-list line shows this condition. What
    /// follows "without" up to the next comma, semicolon or bracket shows
    /// nothing (ICD-9's "Occlusion and stenosis of carotid artery without
    /// mention of cerebral infarction" is no stroke).
    pub fn shown_in(&self, lower: &str) -> bool {
        marks_shown(&self.marks, &self.not, lower)
    }

    /// Whether a lower-cased passage of a note affirms this condition: in
    /// one of its clauses (to the next `.`, `;` or line break) a mark that
    /// no negation cue (`negations`, whole words) precedes, outside the
    /// clause's "without ..." phrases, with none of `not` in the clause.
    /// "Type 2 diabetes on metformin; hypertension on ramipril" affirms
    /// both; "No arrhythmia, no cardiac disease" and "family history of
    /// stroke" affirm nothing.
    pub fn affirmed_in(&self, lower: &str, negations: &[String]) -> bool {
        lower.split(['.', ';', '\n']).any(|clause| {
            let clause = without_negations(clause);
            !self.not.iter().any(|n| clause.contains(n.as_str()))
                && self
                    .marks
                    .iter()
                    .any(|m| clause.match_indices(m.as_str()).any(|(at, _)| !cue_before(&clause[..at], negations)))
        })
    }
}

/// Whether one of `cues` occurs, as whole words, in `prefix`.
fn cue_before(prefix: &str, cues: &[String]) -> bool {
    let words: String = prefix.chars().map(|c| if c.is_alphanumeric() || c == '/' { c } else { ' ' }).collect();
    let words = format!(" {} ", words.split_whitespace().collect::<Vec<_>>().join(" "));
    cues.iter().any(|c| words.contains(&format!(" {c} ")))
}

/// Whether a lower-cased line holds one of `marks` and none of `not`
/// outside its "without ..." phrases (to the next `,`, `;`, `(` or `[`).
pub(crate) fn marks_shown(marks: &[String], not: &[String], lower: &str) -> bool {
    let affirmed = without_negations(lower);
    marks.iter().any(|m| affirmed.contains(m.as_str())) && !not.iter().any(|n| affirmed.contains(n.as_str()))
}

/// `lower` with each "without ..." phrase (to the next `,`, `;`, `(` or
/// `[`) cut out.
fn without_negations(lower: &str) -> String {
    let mut kept = String::new();
    let mut rest = lower;
    while let Some(at) = rest.find("without ").filter(|&i| i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric()) {
        kept.push_str(&rest[..at]);
        let after = &rest[at..];
        let end = after.find([',', ';', '(', '[']).unwrap_or(after.len());
        rest = &after[end..];
    }
    kept.push_str(rest);
    kept
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
    /// Words that, before a condition's mark in a note's clause, deny it
    /// or give it to someone else (read only where the record has no
    /// problem list; [`Condition::affirmed_in`]).
    pub negations: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct R2IssTable {
    pub source: String,
    pub iss_points: Vec<StagePoints>,
    pub items: Vec<Item>,
    pub groups: Vec<StageGroup>,
}

/// Ranges of a measured value, each from its lower bound on (the last
/// group whose `from` the value reaches): HbA1c's glycaemic ranges.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangesTable {
    pub source: String,
    pub groups: Vec<RiskGroup>,
}

impl RangesTable {
    /// The group `value` falls in.
    pub fn group_of(&self, value: f64) -> &str {
        let group = self.groups.iter().rev().find(|g| value >= g.from).unwrap_or(&self.groups[0]);
        &group.name
    }
}

/// A unit a measurement may be written in, and the factor and offset that
/// turn a value in it into the input's own unit (value x factor +
/// offset; an offset for IFCC HbA1c in mmol/mol, whose master equation
/// to NGSP per cent is linear, not proportional).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitFactor {
    pub unit: String,
    pub factor: f64,
    #[serde(default)]
    pub offset: f64,
}

impl UnitFactor {
    /// A value in this unit, in the input's own unit.
    pub fn convert(&self, value: f64) -> f64 {
        value * self.factor + self.offset
    }
}

/// How a record's text writes one numeric calculator input: the names
/// that introduce it (lower case), phrases in which a name does not count
/// (birth weight is not weight), the units it may be written in, and how
/// far back a value still counts (none: any time before the reference
/// date).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    pub input: String,
    pub names: Vec<String>,
    pub not: Vec<String>,
    pub units: Vec<UnitFactor>,
    pub lookback_days: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasurementsTable {
    pub source: String,
    /// Words that may stand between a name and its number ("albumin was
    /// 3.9 g/dL", "creatinine in serum or plasma: 1.1 mg/dL").
    pub gap_words: Vec<String>,
    pub inputs: Vec<Measurement>,
}

/// The most words a gap may hold ("creatinine [mass/volume] in serum or
/// plasma: 1.1 mg/dL" has six).
const MAX_GAP_WORDS: usize = 6;

impl MeasurementsTable {
    /// The measurement of a calculator input, if the table has one.
    pub fn of(&self, input: &str) -> Option<&Measurement> {
        self.inputs.iter().find(|m| m.input == input)
    }

    /// The value, in the input's unit, that a sentence gives `m`: the first
    /// name (outside a `not` phrase) followed, after at most six gap words
    /// and punctuation, by a number and one of the units. `None` when the
    /// sentence does not write it so ("weight loss of 5 kg", "albumin not
    /// measured").
    pub fn read(&self, m: &Measurement, sentence: &str) -> Option<f64> {
        let mut lower = sentence.to_lowercase();
        for phrase in &m.not {
            // Blank out the phrase, keeping byte offsets.
            while let Some(at) = lower.find(phrase.as_str()) {
                lower.replace_range(at..at + phrase.len(), &" ".repeat(phrase.len()));
            }
        }
        let mut names: Vec<&str> = m.names.iter().map(String::as_str).collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        let mut units: Vec<&UnitFactor> = m.units.iter().collect();
        units.sort_by_key(|u| std::cmp::Reverse(u.unit.len()));
        let mut from = 0;
        while from < lower.len() {
            let (at, name) =
                names.iter().filter_map(|n| lower[from..].find(n).map(|i| (from + i, *n))).min_by_key(|(i, _)| *i)?;
            from = at + name.len();
            let starts_word = !lower[..at].chars().next_back().is_some_and(char::is_alphanumeric);
            if !starts_word {
                continue;
            }
            if let Some(v) = self.value_after(&lower[from..], &units) {
                return Some(v);
            }
        }
        None
    }

    /// A number and unit after a name, past at most six gap words.
    fn value_after(&self, rest: &str, units: &[&UnitFactor]) -> Option<f64> {
        if rest.chars().next().is_some_and(char::is_alphanumeric) {
            return None; // the name ran on into a longer word
        }
        let mut s = rest;
        let mut words = 0;
        loop {
            s = s.trim_start_matches(|c: char| !c.is_alphanumeric());
            let word_len = s.find(|c: char| !c.is_alphanumeric()).unwrap_or(s.len());
            let word = &s[..word_len];
            if word.is_empty() {
                return None;
            }
            if word.starts_with(|c: char| c.is_ascii_digit()) {
                break;
            }
            if words == MAX_GAP_WORDS || !self.gap_words.iter().any(|g| g == word) {
                return None;
            }
            words += 1;
            s = &s[word_len..];
        }
        let number_len = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let number: f64 = s[..number_len].trim_end_matches('.').parse().ok()?;
        let after = s[number_len..].trim_start();
        let unit = units.iter().find(|u| {
            after.starts_with(u.unit.as_str())
                && !after[u.unit.len()..].chars().next().is_some_and(char::is_alphanumeric)
        })?;
        Some(unit.convert(number))
    }
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
    pub glycaemic_range: RangesTable,
    pub ckd_g_stage: RangesTable,
    pub measurements: MeasurementsTable,
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
        let (g, k) = (&self.glycaemic_range, &self.ckd_g_stage);
        for (table, source) in [
            ("hct_ci", &h.source),
            ("charlson", &c.source),
            ("cha2ds2_vasc", &v.source),
            ("r2_iss", &r.source),
            ("glycaemic_range", &g.source),
            ("ckd_g_stage", &k.source),
        ] {
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

        check_groups(&mut p, "hct_ci.risk_groups", &h.risk_groups, "score");
        check_groups(&mut p, "glycaemic_range.groups", &g.groups, "value");
        check_groups(&mut p, "ckd_g_stage.groups", &k.groups, "value");

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

        if v.negations.is_empty() {
            p.push("cha2ds2_vasc.negations is empty; a note's \"no hypertension\" would count".into());
        }
        for (j, cue) in v.negations.iter().enumerate() {
            let words = cue.split_whitespace().collect::<Vec<_>>().join(" ");
            if cue.is_empty()
                || *cue != cue.to_lowercase()
                || words != *cue
                || cue.chars().any(|c| !(c.is_alphanumeric() || c == '/' || c == ' '))
            {
                p.push(format!("cha2ds2_vasc.negations[{j}]: {cue:?} must be lower-case words (letters, digits or /) separated by single spaces"));
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
        check_measurements(&mut p, &self.measurements);
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

/// Measurements: exactly the calculators' numeric inputs but age (which
/// the stored patient gives), each once, with lower-case names, `not`
/// phrases that hold a name (else they never matter), units with positive
/// factors, and a positive lookback where one is given.
fn check_measurements(p: &mut Vec<String>, m: &MeasurementsTable) {
    let numeric: BTreeSet<String> = NUMERIC_INPUTS.iter().map(|s| s.to_string()).collect();
    if m.source.trim().is_empty() {
        p.push("measurements.source is empty; say where the names and units come from".into());
    }
    let lower_phrase = |s: &str| !s.trim().is_empty() && s == s.to_lowercase() && s.trim() == s;
    for (i, w) in m.gap_words.iter().enumerate() {
        if !lower_phrase(w) || !w.chars().all(char::is_alphanumeric) {
            p.push(format!("measurements.gap_words[{i}]: {w:?} must be one lower-case word"));
        }
    }
    let mut seen = BTreeSet::new();
    for (i, x) in m.inputs.iter().enumerate() {
        let at = format!("measurements.inputs[{i}]");
        if !numeric.contains(&x.input) {
            p.push(format!(
                "{at}.input: {:?} is not a numeric calculator input; those are {}",
                x.input,
                numeric.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        if !seen.insert(x.input.as_str()) {
            p.push(format!("{at}.input: {:?} appears twice; merge them", x.input));
        }
        if x.names.is_empty() {
            p.push(format!("{at}.names is empty; a measurement needs a name that introduces it"));
        }
        for (field, phrases) in [("names", &x.names), ("not", &x.not)] {
            for (j, phrase) in phrases.iter().enumerate() {
                if !lower_phrase(phrase) {
                    p.push(format!("{at}.{field}[{j}]: {phrase:?} must be a non-empty lower-case phrase without outer spaces (sentences are matched lower-cased)"));
                }
            }
        }
        for (j, phrase) in x.not.iter().enumerate() {
            if !x.names.iter().any(|n| phrase.contains(n.as_str())) {
                p.push(format!("{at}.not[{j}]: {phrase:?} holds none of the names, so it never matters"));
            }
        }
        if x.units.is_empty() {
            p.push(format!("{at}.units is empty; name the units a value may be written in"));
        }
        for (j, u) in x.units.iter().enumerate() {
            if !lower_phrase(&u.unit) || u.unit.contains(' ') {
                p.push(format!("{at}.units[{j}].unit: {:?} must be lower case without spaces", u.unit));
            }
            if !(u.factor.is_finite() && u.factor > 0.0) {
                p.push(format!("{at}.units[{j}].factor: {} must be a positive number", u.factor));
            }
            if !u.offset.is_finite() {
                p.push(format!("{at}.units[{j}].offset: {} must be a finite number", u.offset));
            }
        }
        if x.lookback_days.is_some_and(|d| d <= 0) {
            p.push(format!("{at}.lookback_days: must be a positive number of days, or null for no limit"));
        }
    }
    for missing in numeric.iter().filter(|n| !seen.contains(n.as_str())) {
        p.push(format!(
            "measurements.inputs: the numeric input {missing:?} has no measurement; add its names and units, or the model would type it"
        ));
    }
}

/// Groups from a lower bound on: the first from 0 (so every value has a
/// group), bounds rising, names given.
fn check_groups(p: &mut Vec<String>, place: &str, groups: &[RiskGroup], what: &str) {
    if groups.first().map(|g| g.from) != Some(0.0) {
        p.push(format!("{place}: the first group must start from 0, so every {what} has a group"));
    }
    for (i, pair) in groups.windows(2).enumerate() {
        if pair[1].from <= pair[0].from {
            p.push(format!(
                "{place}[{}].from: {} does not follow {}; order groups by rising {what}",
                i + 1,
                pair[1].from,
                pair[0].from
            ));
        }
    }
    for (i, g) in groups.iter().enumerate() {
        if g.name.trim().is_empty() {
            p.push(format!("{place}[{i}].name is empty"));
        }
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
