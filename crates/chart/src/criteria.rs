//! Criteria sets: eligibility criteria compiled into deterministic checks
//! (Evident's, not the myeloma paper's, whose agent judges eligibility
//! with the model). A set is data (`data/criteria_sets.json`, validated on
//! load): the phrases a question names it by, and a rule of all / any over
//! atoms (age, a documented condition, a lab value in a window, a
//! calculator's score). The agent's tools evaluate a set on the record at
//! the reference date ([`crate::RecordView::check_criteria`]) with
//! three-valued logic, so a missing value is "unknown" (Unclear), never a
//! guess; what each atom read is cited.
//!
//! The embedded 0.5B model, with the diabetes line, the LDL values and an
//! in-range age in front of its answer prompt, still answered a statin
//! question "No: does not have documented diabetes" (`ffd502c9-G34`): the
//! evidence reached it, the judgement did not.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use evident_model::labs::LabCatalogue;
use serde::Deserialize;

use crate::calculators::tables::UnitFactor;
use crate::calculators::Calculator;
use crate::tools::phrase_spans;

/// The sets shipped with Evident, embedded at compile time.
const BUILTIN_JSON: &str = include_str!("../data/criteria_sets.json");

/// The whole file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriteriaSets {
    #[serde(default)]
    pub about: Option<String>,
    pub version: u32,
    pub sets: Vec<CriteriaSet>,
}

/// One named set of criteria.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriteriaSet {
    pub id: String,
    pub title: String,
    /// The guideline the set follows or simplifies.
    pub source: String,
    /// Lower-case phrases; a question holding one (at word boundaries)
    /// names the set.
    pub named_by: Vec<String>,
    pub rule: Rule,
}

/// A rule: all or any of rules, or one criterion.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Rule {
    All(Vec<Rule>),
    Any(Vec<Rule>),
    Age(AgeRule),
    Sex(SexRule),
    Condition(ConditionRule),
    Lab(LabRule),
    Score(ScoreRule),
}

/// The stored sex: met where it is `is`, not met where it is the other,
/// unknown where the record gives none.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SexRule {
    pub label: String,
    pub is: Sex,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sex {
    Female,
    Male,
}

/// Whole years at the reference date, bounds inclusive.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgeRule {
    pub label: String,
    #[serde(default)]
    pub min: Option<i32>,
    #[serde(default)]
    pub max: Option<i32>,
}

/// A problem-list line on or before the reference date that holds one of
/// `marks` and none of `not` (lower case, matched in the lower-cased line,
/// outside its "without ..." phrases, as CHA2DS2-VASc's conditions are).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConditionRule {
    pub label: String,
    pub marks: Vec<String>,
    pub not: Vec<String>,
    /// Only a line whose condition is current on the reference date: not
    /// resolved (or inactive) then, by its own status and date.
    #[serde(default)]
    pub current: bool,
}

impl ConditionRule {
    pub fn shown_in(&self, lower: &str) -> bool {
        crate::calculators::tables::marks_shown(&self.marks, &self.not, lower)
    }
}

/// Which of a lab's values in the window decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LabValue {
    /// The newest value decides; no value is unknown.
    Last,
    /// A value past the threshold meets it; no such value does not.
    Any,
}

/// Values of a catalogue lab concept inside `within_days` before the
/// reference date, in one of `units` (each converted by its factor into
/// the unit of the thresholds).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabRule {
    pub label: String,
    pub concept: String,
    pub units: Vec<UnitFactor>,
    #[serde(default)]
    pub at_least: Option<f64>,
    #[serde(default)]
    pub below: Option<f64>,
    pub within_days: i64,
    pub value: LabValue,
}

impl LabRule {
    /// A value in the rule's unit, when its unit is one the rule knows.
    pub fn converted(&self, value: f64, unit: Option<&str>) -> Option<f64> {
        let unit = normalise_unit(unit?);
        self.units.iter().find(|u| u.unit == unit).map(|u| value * u.factor)
    }

    pub fn passes(&self, value: f64) -> bool {
        self.at_least.is_none_or(|t| value >= t) && self.below.is_none_or(|t| value < t)
    }
}

/// A unit as the rules write it: lower case, without spaces, braces and
/// underscores ("mL/min/{1.73_m2}" is "ml/min/1.73m2").
pub fn normalise_unit(unit: &str) -> String {
    unit.chars().filter(|c| !(c.is_whitespace() || matches!(c, '{' | '}' | '_'))).flat_map(char::to_lowercase).collect()
}

/// A calculator's score at least `at_least` (or `at_least_female` for a
/// woman, where given).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreRule {
    pub label: String,
    pub calculator: String,
    pub at_least: f64,
    #[serde(default)]
    pub at_least_female: Option<f64>,
}

/// A criterion's or a rule's outcome, in three-valued (Kleene) logic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    Met,
    NotMet,
    Unknown,
}

impl Truth {
    pub fn of(met: bool) -> Truth {
        if met {
            Truth::Met
        } else {
            Truth::NotMet
        }
    }

    /// All must be met: one not met decides, else one unknown does.
    pub fn all(truths: impl IntoIterator<Item = Truth>) -> Truth {
        let truths: Vec<Truth> = truths.into_iter().collect();
        if truths.contains(&Truth::NotMet) {
            Truth::NotMet
        } else if truths.contains(&Truth::Unknown) {
            Truth::Unknown
        } else {
            Truth::Met
        }
    }

    /// One must be met: one met decides, else one unknown does.
    pub fn any(truths: impl IntoIterator<Item = Truth>) -> Truth {
        let truths: Vec<Truth> = truths.into_iter().collect();
        if truths.contains(&Truth::Met) {
            Truth::Met
        } else if truths.contains(&Truth::Unknown) {
            Truth::Unknown
        } else {
            Truth::NotMet
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Truth::Met => "met",
            Truth::NotMet => "not met",
            Truth::Unknown => "unknown",
        }
    }

    /// The answer of the paper's Yes / No / Unclear schema.
    pub fn answer(self) -> &'static str {
        match self {
            Truth::Met => "Yes",
            Truth::NotMet => "No",
            Truth::Unknown => "Unclear",
        }
    }
}

impl Rule {
    /// The atoms (every rule but all / any), in the file's order.
    pub fn atoms(&self) -> Vec<&Rule> {
        match self {
            Rule::All(rules) | Rule::Any(rules) => rules.iter().flat_map(Rule::atoms).collect(),
            atom => vec![atom],
        }
    }

    /// An atom's label (none for all / any).
    pub fn label(&self) -> Option<&str> {
        match self {
            Rule::All(_) | Rule::Any(_) => None,
            Rule::Age(a) => Some(&a.label),
            Rule::Sex(s) => Some(&s.label),
            Rule::Condition(c) => Some(&c.label),
            Rule::Lab(l) => Some(&l.label),
            Rule::Score(s) => Some(&s.label),
        }
    }

    /// The atoms whose outcomes decide the rule's outcome, `truth` giving
    /// each atom's, in the file's order: of an "all" that is met, or an
    /// "any" that is not, every part; otherwise the parts whose outcome is
    /// the rule's (an "all" not met by the parts not met, an "any" met by
    /// the parts met, either unknown by the parts unknown); an "all" that
    /// a sex criterion fails is decided by it alone (the rest is the other
    /// sex's). A check's reasoning states these, not the criteria that
    /// changed nothing.
    pub fn deciding(&self, truth: &impl Fn(&Rule) -> Truth) -> Vec<&Rule> {
        let outcome = |rule: &Rule| rule.evaluate(&mut |atom| Ok::<_, ()>(truth(atom))).unwrap_or(Truth::Unknown);
        match self {
            Rule::All(rules) | Rule::Any(rules) => {
                let own = outcome(self);
                if matches!(self, Rule::All(_)) && own == Truth::NotMet {
                    let other_sex = rules.iter().find(|r| matches!(r, Rule::Sex(_)) && truth(r) == Truth::NotMet);
                    if let Some(sex) = other_sex {
                        return vec![sex];
                    }
                }
                let every = matches!((self, own), (Rule::All(_), Truth::Met) | (Rule::Any(_), Truth::NotMet));
                rules.iter().filter(|r| every || outcome(r) == own).flat_map(|r| r.deciding(truth)).collect()
            }
            atom => vec![atom],
        }
    }

    /// The rule's outcome from its atoms' outcomes, by `atom`.
    pub fn evaluate<E>(&self, atom: &mut impl FnMut(&Rule) -> Result<Truth, E>) -> Result<Truth, E> {
        match self {
            Rule::All(rules) => {
                let truths = rules.iter().map(|r| r.evaluate(atom)).collect::<Result<Vec<_>, E>>()?;
                Ok(Truth::all(truths))
            }
            Rule::Any(rules) => {
                let truths = rules.iter().map(|r| r.evaluate(atom)).collect::<Result<Vec<_>, E>>()?;
                Ok(Truth::any(truths))
            }
            leaf => atom(leaf),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CriteriaError {
    #[error("criteria sets are not valid JSON of the sets' shape: {0}; fix the file (see crates/chart/data/criteria_sets.json for the format)")]
    Json(#[from] serde_json::Error),
    #[error("cannot read the criteria file: {0}")]
    Read(std::io::Error),
    #[error("criteria sets have {} problem(s):\n  {}", .0.len(), .0.join("\n  "))]
    Invalid(Vec<String>),
}

impl CriteriaSets {
    /// The built-in sets, read and validated once.
    pub fn builtin() -> &'static CriteriaSets {
        static BUILTIN: OnceLock<CriteriaSets> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            CriteriaSets::from_json(BUILTIN_JSON)
                .unwrap_or_else(|e| panic!("the built-in data/criteria_sets.json is invalid: {e}"))
        })
    }

    /// Reads and validates sets; every problem is reported, each with its
    /// place in the file.
    pub fn from_json(json: &str) -> Result<CriteriaSets, CriteriaError> {
        let sets: CriteriaSets = serde_json::from_str(json)?;
        let problems = sets.problems();
        if problems.is_empty() {
            Ok(sets)
        } else {
            Err(CriteriaError::Invalid(problems))
        }
    }

    /// The built-in sets and a user's file of sets in the same format. The
    /// file is validated on its own (places are the file's) and against the
    /// built-in sets: an id or a phrase one of them has is a problem. The
    /// user's sets come first, so they are matched first.
    pub fn with_user_file(path: &std::path::Path) -> Result<CriteriaSets, CriteriaError> {
        let text = std::fs::read_to_string(path).map_err(CriteriaError::Read)?;
        let user = CriteriaSets::from_json(&text)?;
        let builtin = CriteriaSets::builtin();
        let mut problems = Vec::new();
        for (i, set) in user.sets.iter().enumerate() {
            if builtin.get(&set.id).is_some() {
                problems.push(format!("sets[{i}].id: {:?} is a built-in set's id; choose another", set.id));
            }
            for (j, phrase) in set.named_by.iter().enumerate() {
                if let Some(other) = builtin.sets.iter().find(|b| b.named_by.contains(phrase)) {
                    problems.push(format!(
                        "sets[{i}].named_by[{j}]: {phrase:?} names the built-in set {:?} too; choose a phrase only this set has",
                        other.id
                    ));
                }
            }
        }
        if !problems.is_empty() {
            return Err(CriteriaError::Invalid(problems));
        }
        let mut sets = user.sets;
        sets.extend(builtin.sets.iter().cloned());
        Ok(CriteriaSets { about: user.about, version: user.version, sets })
    }

    pub fn get(&self, id: &str) -> Option<&CriteriaSet> {
        self.sets.iter().find(|s| s.id == id.trim())
    }

    /// The set a question names: the first whose phrase the lower-cased
    /// question holds at word boundaries.
    pub fn named_in(&self, question: &str) -> Option<&CriteriaSet> {
        let lowered = question.to_lowercase();
        self.sets.iter().find(|s| s.named_by.iter().any(|p| !phrase_spans(&lowered, p).is_empty()))
    }

    fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let mut ids = BTreeSet::new();
        let mut phrases = BTreeSet::new();
        for (i, set) in self.sets.iter().enumerate() {
            let at = format!("sets[{i}]");
            let id_ok =
                !set.id.is_empty() && set.id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !id_ok {
                p.push(format!("{at}.id: {:?} must be lower-case letters, digits and hyphens", set.id));
            }
            if Calculator::from_name(&set.id).is_some() {
                p.push(format!("{at}.id: {:?} is a calculator's name; choose another", set.id));
            }
            if !ids.insert(set.id.as_str()) {
                p.push(format!("{at}.id: {:?} is used twice", set.id));
            }
            for (field, text) in [("title", &set.title), ("source", &set.source)] {
                if text.trim().is_empty() {
                    p.push(format!("{at}.{field} is empty"));
                }
            }
            if set.named_by.is_empty() {
                p.push(format!("{at}.named_by is empty; a question could never name the set"));
            }
            for (j, phrase) in set.named_by.iter().enumerate() {
                if !lower_phrase(phrase) {
                    p.push(format!("{at}.named_by[{j}]: {phrase:?} must be a non-empty lower-case phrase without outer spaces (questions are matched lower-cased)"));
                }
                if !phrases.insert(phrase.as_str()) {
                    p.push(format!("{at}.named_by[{j}]: {phrase:?} names another set too"));
                }
            }
            check_rule(&mut p, &format!("{at}.rule"), &set.rule);
            let mut labels = BTreeSet::new();
            for atom in set.rule.atoms() {
                let label = atom.label().unwrap_or_default();
                if label.trim().is_empty() {
                    p.push(format!("{at}.rule: a criterion has an empty label; name what it checks"));
                } else if !labels.insert(label) {
                    p.push(format!(
                        "{at}.rule: the label {label:?} is used twice; labels name the criteria in the result"
                    ));
                }
            }
        }
        p
    }
}

/// A phrase matched against lower-cased text: non-empty, lower case, no
/// outer spaces.
fn lower_phrase(s: &str) -> bool {
    !s.trim().is_empty() && s == s.to_lowercase() && s.trim() == s
}

fn check_rule(p: &mut Vec<String>, at: &str, rule: &Rule) {
    match rule {
        Rule::All(rules) | Rule::Any(rules) => {
            let kind = if matches!(rule, Rule::All(_)) { "all" } else { "any" };
            if rules.is_empty() {
                p.push(format!("{at}.{kind} is empty; give it at least one rule"));
            }
            for (i, r) in rules.iter().enumerate() {
                check_rule(p, &format!("{at}.{kind}[{i}]"), r);
            }
        }
        Rule::Age(a) => {
            if a.min.is_none() && a.max.is_none() {
                p.push(format!("{at}.age: give min, max or both"));
            }
            for bound in [a.min, a.max].into_iter().flatten() {
                if !(0..=130).contains(&bound) {
                    p.push(format!("{at}.age: {bound} is not an age in years"));
                }
            }
            if let (Some(lo), Some(hi)) = (a.min, a.max) {
                if lo > hi {
                    p.push(format!("{at}.age: min {lo} is above max {hi}"));
                }
            }
        }
        Rule::Condition(c) => {
            if c.marks.is_empty() {
                p.push(format!("{at}.condition.marks is empty; a condition needs a phrase that shows it"));
            }
            for (field, list) in [("marks", &c.marks), ("not", &c.not)] {
                for (j, phrase) in list.iter().enumerate() {
                    if !lower_phrase(phrase) {
                        p.push(format!("{at}.condition.{field}[{j}]: {phrase:?} must be a non-empty lower-case phrase without outer spaces (lines are matched lower-cased)"));
                    }
                }
            }
            for (j, phrase) in c.not.iter().enumerate() {
                if !c.marks.iter().any(|m| phrase.contains(m.as_str())) {
                    p.push(format!(
                        "{at}.condition.not[{j}]: {phrase:?} holds no mark, so it never matters; remove it or add its mark"
                    ));
                }
            }
        }
        Rule::Lab(l) => {
            if LabCatalogue::builtin().resolve_name(&l.concept).is_none() {
                p.push(format!(
                    "{at}.lab.concept: {:?} is not a lab concept of the catalogue (crates/model/data/lab_concepts.json)",
                    l.concept
                ));
            }
            if l.units.is_empty() {
                p.push(format!("{at}.lab.units is empty; give the units values may be in"));
            }
            for (j, u) in l.units.iter().enumerate() {
                if u.unit != normalise_unit(&u.unit) || u.unit.is_empty() {
                    p.push(format!("{at}.lab.units[{j}].unit: {:?} must be written as {:?} (lower case, no spaces, braces or underscores)", u.unit, normalise_unit(&u.unit)));
                }
                if !(u.factor.is_finite() && u.factor > 0.0) {
                    p.push(format!("{at}.lab.units[{j}].factor: {} must be a positive number", u.factor));
                }
            }
            if l.at_least.is_none() && l.below.is_none() {
                p.push(format!("{at}.lab: give at_least, below or both"));
            }
            if [l.at_least, l.below].into_iter().flatten().any(|t| !t.is_finite()) {
                p.push(format!("{at}.lab: thresholds must be finite numbers"));
            }
            if l.within_days <= 0 {
                p.push(format!("{at}.lab.within_days: {} must be positive", l.within_days));
            }
        }
        Rule::Sex(_) => {}
        Rule::Score(s) => {
            if Calculator::from_name(&s.calculator).is_none() {
                let known = Calculator::ALL.map(|c| c.name()).join(", ");
                p.push(format!("{at}.score.calculator: {:?} is unknown; use one of {known}", s.calculator));
            }
            if [Some(s.at_least), s.at_least_female].into_iter().flatten().any(|t| !t.is_finite()) {
                p.push(format!("{at}.score: thresholds must be finite numbers"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Truth::{Met, NotMet, Unknown};

    /// A check's deciding criteria: the anaemia set (any of the problem
    /// list, a woman's haemoglobin, a man's) met by the problem list is
    /// decided by it alone; not met for a man, by each part, the women's
    /// limit by the sex criterion only; the statin set (age and any of
    /// diabetes or LDL) met, by the age and the diabetes; unknown, by the
    /// unknown part.
    #[test]
    fn a_checks_result_is_decided_by_the_criteria_that_give_it() {
        let sets = CriteriaSets::builtin();
        let labels = |set: &str, statuses: &[(&str, Truth)]| -> Vec<String> {
            let truth = |atom: &Rule| {
                let label = atom.label().unwrap_or_default();
                statuses.iter().find(|(l, _)| label.starts_with(l)).map_or(Truth::Unknown, |(_, t)| *t)
            };
            let rule = &sets.get(set).unwrap().rule;
            rule.deciding(&truth).into_iter().filter_map(Rule::label).map(String::from).collect()
        };
        let anaemia = "clinically-relevant-anaemia";
        let man = [("female", NotMet), ("male", Met)];
        let documented = [&man[..], &[("current anaemia", Met), ("last haemoglobin", NotMet)]].concat();
        assert_eq!(labels(anaemia, &documented), ["current anaemia on the problem list"]);
        let none = [&man[..], &[("current anaemia", NotMet), ("last haemoglobin", NotMet)]].concat();
        assert_eq!(
            labels(anaemia, &none),
            ["current anaemia on the problem list", "female", "last haemoglobin within 90 days below 13 g/dL (men)"]
        );
        let statin = [("age", Met), ("documented diabetes", Met), ("LDL", NotMet)];
        assert_eq!(labels("statin-criteria", &statin), ["age 40-75 years", "documented diabetes"]);
        let unclear = [("age", Met), ("documented diabetes", NotMet), ("LDL", Unknown)];
        assert_eq!(labels("statin-criteria", &unclear), ["LDL cholesterol of at least 190 mg/dL within 365 days"]);
    }

    #[test]
    fn the_builtin_sets_validate() {
        let sets = CriteriaSets::builtin();
        assert_eq!(
            sets.sets.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            ["statin-criteria", "metformin-eligibility", "af-anticoagulation", "clinically-relevant-anaemia"]
        );
        let named = |q: &str| sets.named_in(q).map(|s| s.id.as_str());
        let anaemia =
            "Is clinically relevant anaemia present on 2020-01-15 (documented, or haemoglobin below 12 g/dL)?";
        assert_eq!(named(anaemia), Some("clinically-relevant-anaemia"));
    }

    #[test]
    fn all_and_any_are_kleene() {
        assert_eq!(Truth::all([Met, Met]), Met);
        assert_eq!(Truth::all([Met, Unknown]), Unknown);
        assert_eq!(Truth::all([Unknown, NotMet]), NotMet);
        assert_eq!(Truth::any([NotMet, NotMet]), NotMet);
        assert_eq!(Truth::any([NotMet, Unknown]), Unknown);
        assert_eq!(Truth::any([Unknown, Met]), Met);
        assert_eq!([Met, NotMet, Unknown].map(Truth::answer), ["Yes", "No", "Unclear"]);
    }

    #[test]
    fn a_rule_evaluates_its_atoms_in_order_and_combines_them() {
        let statin = &CriteriaSets::builtin().get("statin-criteria").unwrap().rule;
        let labels: Vec<&str> = statin.atoms().iter().filter_map(|a| a.label()).collect();
        assert_eq!(
            labels,
            ["age 40-75 years", "documented diabetes", "LDL cholesterol of at least 190 mg/dL within 365 days"]
        );
        let outcome = |truths: [Truth; 3]| {
            let mut next = truths.into_iter();
            statin.evaluate(&mut |_| Ok::<_, ()>(next.next().unwrap())).unwrap()
        };
        assert_eq!(outcome([Met, Met, NotMet]), Met, "in range with diabetes");
        assert_eq!(outcome([Met, NotMet, Met]), Met, "in range with a high LDL");
        assert_eq!(outcome([NotMet, Met, Met]), NotMet, "out of range");
        assert_eq!(outcome([Unknown, Met, NotMet]), Unknown, "no birth date");
        assert_eq!(outcome([Met, NotMet, NotMet]), NotMet);
    }

    #[test]
    fn a_question_names_a_set_by_its_phrases_at_word_boundaries() {
        let sets = CriteriaSets::builtin();
        let named = |q: &str| sets.named_in(q).map(|s| s.id.as_str());
        assert_eq!(
            named("Does the patient meet the statin criteria on 2020-09-07, that is, age 40-75 years ..."),
            Some("statin-criteria")
        );
        assert_eq!(named("Is the patient eligible for metformin on 2018-01-25?"), Some("metformin-eligibility"));
        assert_eq!(
            named("Is oral anticoagulation indicated on 2020-01-01 for the documented atrial fibrillation?"),
            Some("af-anticoagulation")
        );
        assert_eq!(named("Is the patient on a statin?"), None);
        assert_eq!(named("Is the patient eligible for metformins?"), None, "a longer word is not the phrase");
    }

    #[test]
    fn units_are_compared_as_written_without_spaces_braces_or_case() {
        assert_eq!(normalise_unit("mL/min/{1.73_m2}"), "ml/min/1.73m2");
        assert_eq!(normalise_unit(" mg/dL "), "mg/dl");
        let Rule::All(rules) = &CriteriaSets::builtin().get("metformin-eligibility").unwrap().rule else { panic!() };
        let Rule::Lab(egfr) = &rules[1] else { panic!() };
        assert_eq!(egfr.converted(45.0, Some("mL/min/{1.73_m2}")), Some(45.0));
        assert_eq!(egfr.converted(45.0, Some("mg/dL")), None);
        assert!(egfr.passes(30.0) && !egfr.passes(29.9));
    }

    #[test]
    fn every_problem_of_a_bad_file_is_named_with_its_place() {
        let bad = r#"{"version": 1, "sets": [
          {"id": "iss", "title": "t", "source": "", "named_by": ["Statin"], "rule": {"all": [
            {"age": {"label": "a", "min": 80, "max": 40}},
            {"condition": {"label": "a", "marks": ["diabetes"], "not": ["asthma"]}},
            {"lab": {"label": "l", "concept": "no such lab", "units": [{"unit": "mg/dL", "factor": 0}], "within_days": 0, "value": "last"}},
            {"any": []},
            {"score": {"label": "s", "calculator": "apache", "at_least": 2}}
          ]}}]}"#;
        let Err(CriteriaError::Invalid(problems)) = CriteriaSets::from_json(bad) else { panic!("should not validate") };
        let text = problems.join("\n");
        for needle in [
            "sets[0].id: \"iss\" is a calculator's name",
            "sets[0].source is empty",
            "sets[0].named_by[0]: \"Statin\" must be a non-empty lower-case phrase",
            "sets[0].rule.all[0].age: min 80 is above max 40",
            "sets[0].rule.all[1].condition.not[0]: \"asthma\" holds no mark",
            "sets[0].rule.all[2].lab.concept: \"no such lab\" is not a lab concept",
            "sets[0].rule.all[2].lab.units[0].unit: \"mg/dL\" must be written as \"mg/dl\"",
            "sets[0].rule.all[2].lab.units[0].factor: 0 must be a positive number",
            "sets[0].rule.all[2].lab: give at_least, below or both",
            "sets[0].rule.all[2].lab.within_days: 0 must be positive",
            "sets[0].rule.all[3].any is empty",
            "sets[0].rule.all[4].score.calculator: \"apache\" is unknown",
            "sets[0].rule: the label \"a\" is used twice",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
        assert!(matches!(CriteriaSets::from_json("{\"version\": 1}"), Err(CriteriaError::Json(_))));
    }

    #[test]
    fn a_users_file_adds_sets_before_the_built_in_ones_and_may_not_take_their_ids_or_phrases() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("local.json");
        let set = |id: &str, phrase: &str| {
            format!(
                r#"{{"id": "{id}", "title": "t", "source": "local protocol", "named_by": ["{phrase}"],
                    "rule": {{"age": {{"label": "age 18 or over", "min": 18}}}}}}"#
            )
        };
        let file = |sets: &[String]| format!(r#"{{"version": 1, "sets": [{}]}}"#, sets.join(","));
        std::fs::write(&path, file(&[set("adult-check", "adult criteria")])).unwrap();
        let sets = CriteriaSets::with_user_file(&path).unwrap();
        assert_eq!(sets.sets[0].id, "adult-check");
        assert_eq!(sets.named_in("Does she meet the adult criteria?").unwrap().id, "adult-check");
        assert_eq!(sets.named_in("Does he meet the statin criteria?").unwrap().id, "statin-criteria");
        assert_eq!(sets.sets.len(), CriteriaSets::builtin().sets.len() + 1);

        std::fs::write(&path, file(&[set("statin-criteria", "adult criteria"), set("mine", "statin criteria")]))
            .unwrap();
        let Err(CriteriaError::Invalid(problems)) = CriteriaSets::with_user_file(&path) else { panic!() };
        let text = problems.join("\n");
        assert!(text.contains("sets[0].id: \"statin-criteria\" is a built-in set's id"), "{text}");
        assert!(
            text.contains("sets[1].named_by[0]: \"statin criteria\" names the built-in set \"statin-criteria\""),
            "{text}"
        );

        let missing = dir.path().join("none.json");
        assert!(matches!(CriteriaSets::with_user_file(&missing), Err(CriteriaError::Read(_))));
    }
}
