//! Evident's cohort judge, beside the paper's (Figure 19, [`crate::audit`]):
//! the model is asked once per pass about every fact the cases share: is
//! an eligibility criterion of the definition about it, and if so which
//! sentence states it and what condition a case must meet ("age at_least
//! 18", "first_day_max_lactate is_number"). Evident then runs the checks
//! on every sampled case. A case is excluded when a check fails, and the
//! verdict names the criterion and the value that failed it.
//!
//! One model call per pass instead of one per case, and a decision a reviewer can
//! read line by line: the checks are stored with the report. A small
//! model that cannot compare a number with a threshold in a hundred
//! prompts (the paper's judge on the embedded 0.5B model excludes every
//! case) can name the fact and the threshold once. What it gets wrong is
//! visible in the checks, and a cue written into a case ("Meets all
//! criteria") cannot sway a check.
//!
//! How a check reads a value:
//! - a missing value (empty, `NA`, `NaN`, `null`, `None`, `n/a`, any case)
//!   leaves a comparison unevaluable (the paper's rule: an unevaluable
//!   criterion counts as met) and fails `is_number`;
//! - `at_least`, `above`, `at_most`, `below` and `is_number` need a
//!   number: any other text fails them;
//! - `equals` and `not_equals` compare numbers as numbers and anything
//!   else as trimmed, case-insensitive text.

use evident_llm::prompts::Prompts;
use evident_llm::{chat_json, ChatRequest, RepairPolicy, StructuredAnswer, StructuredModel};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::audit::{AuditError, Fact, IdColumn, JudgeVerdict};

/// Which judge screens a cohort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeStrategy {
    /// RWE-bench's judge: Figure 19's prompt, one model call per case.
    #[default]
    Paper,
    /// Evident's: the criteria compiled once into checks, run by Evident.
    Compiled,
}

impl JudgeStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            JudgeStrategy::Paper => "paper",
            JudgeStrategy::Compiled => "compiled",
        }
    }

    pub fn from_name(name: &str) -> Option<JudgeStrategy> {
        match name {
            "paper" => Some(JudgeStrategy::Paper),
            "compiled" => Some(JudgeStrategy::Compiled),
            _ => None,
        }
    }
}

/// How a check compares a case's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    AtLeast,
    Above,
    AtMost,
    Below,
    Equals,
    NotEquals,
    IsNumber,
}

impl Test {
    const ALL: [Test; 7] =
        [Test::AtLeast, Test::Above, Test::AtMost, Test::Below, Test::Equals, Test::NotEquals, Test::IsNumber];

    pub fn as_str(self) -> &'static str {
        match self {
            Test::AtLeast => "at_least",
            Test::Above => "above",
            Test::AtMost => "at_most",
            Test::Below => "below",
            Test::Equals => "equals",
            Test::NotEquals => "not_equals",
            Test::IsNumber => "is_number",
        }
    }

    fn numeric(self) -> bool {
        matches!(self, Test::AtLeast | Test::Above | Test::AtMost | Test::Below)
    }

    /// The condition in words, for a verdict's evidence.
    fn describe(self, value: &str) -> String {
        match self {
            Test::AtLeast => format!("at least {value}"),
            Test::Above => format!("above {value}"),
            Test::AtMost => format!("at most {value}"),
            Test::Below => format!("below {value}"),
            Test::Equals => format!("equal to {value}"),
            Test::NotEquals => format!("not {value}"),
            Test::IsNumber => "a recorded number".to_string(),
        }
    }
}

/// One criterion as a check: the condition a case must meet to stay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionCheck {
    pub criterion: String,
    pub fact: String,
    pub test: Test,
    #[serde(default)]
    pub value: String,
}

/// A check the model wrote that Evident does not run, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RejectedCheck {
    pub check: CriterionCheck,
    pub reason: String,
}

/// The criteria of one cohort definition as checks over named facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompiledCriteria {
    /// The checks Evident runs on each case.
    pub checks: Vec<CriterionCheck>,
    /// Checks the model wrote that cannot run (a numeric test without a
    /// number, a check on an identifier, a repeat).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<RejectedCheck>,
    /// The facts the model said no eligibility criterion is about, with
    /// the role it gave them (exposure, outcome, covariate, other).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_facts: Vec<FactRole>,
}

/// A fact that no eligibility criterion is about, and what it is instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactRole {
    pub fact: String,
    pub role: String,
}

/// Values written as any of these (any case) are missing.
const MISSING: &[&str] = &["", "na", "nan", "null", "none", "n/a"];

/// The facts the cases have in common (present in at least half of
/// them), in the order they first appear, each described by the kind of
/// value it holds: what the compiler is shown. Identifiers and dates are
/// left out (no criterion is a check on an identifier, and the tests do
/// not compare dates); so is a fact only a few cases carry (a reviewer's
/// note). The description is "a number" (when nine in ten of its distinct
/// values are numbers), "text", or either with its values when a case
/// holds one of at most three ("a number: 0 or 1"), so the model sees how
/// a fact is written but no one case's values.
pub fn common_facts(cases: &[Vec<Fact>]) -> Vec<Fact> {
    let mut names: Vec<(String, usize, Vec<String>)> = Vec::new();
    for case in cases {
        for fact in case.iter().filter(|f| !is_identifier(&f.name)) {
            let i = match names.iter().position(|(n, _, _)| *n == fact.name) {
                Some(i) => i,
                None => {
                    names.push((fact.name.clone(), 0, Vec::new()));
                    names.len() - 1
                }
            };
            names[i].1 += 1;
            let value = fact.value.trim();
            if !is_missing(value) && !names[i].2.iter().any(|v| v == value) {
                names[i].2.push(value.to_string());
            }
        }
    }
    names
        .into_iter()
        .filter(|(_, count, values)| 2 * count >= cases.len() && !values.iter().any(|v| is_date(v)))
        .map(|(name, _, mut values)| {
            // A number when nine in ten of its values are (a stray word
            // such as "none charted" does not make it text).
            let numbers = values.iter().filter(|v| number(v).is_some()).count();
            let numeric = numbers > 0 && 10 * numbers >= 9 * values.len();
            let kind = if numeric { "a number" } else { "text" };
            let value = if (1..=3).contains(&values.len()) {
                if numeric {
                    values.sort_by(|a, b| number(a).partial_cmp(&number(b)).unwrap_or(std::cmp::Ordering::Equal));
                } else {
                    values.sort();
                }
                format!("{kind}: {}", values.join(" or "))
            } else {
                kind.to_string()
            };
            Fact { name, value }
        })
        .collect()
}

fn is_identifier(name: &str) -> bool {
    IdColumn::ALL.iter().any(|c| c.name().eq_ignore_ascii_case(name))
}

/// `YYYY-MM-DD`, with or without a time after it.
fn is_date(value: &str) -> bool {
    let b = value.as_bytes();
    b.len() >= 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-' && b[7] == b'-'
}

fn is_missing(value: &str) -> bool {
    MISSING.iter().any(|m| value.trim().eq_ignore_ascii_case(m))
}

/// The definition's sentences, the criteria a check may name: whitespace
/// collapsed, split after a full stop that a capital letter follows.
pub fn definition_sentences(definition: &str) -> Vec<String> {
    let text = definition.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut sentences = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for w in chars.windows(3) {
        if w[0].1 == '.' && w[1].1 == ' ' && w[2].1.is_uppercase() {
            sentences.push(text[start..w[1].0].to_string());
            start = w[2].0;
        }
    }
    if start < text.len() {
        sentences.push(text[start..].to_string());
    }
    sentences
}

/// The JSON schema of the compiler's answer about one fact: its role
/// first; for an eligibility criterion, the sentence of the definition
/// that states it (so the test is chosen after it), a test, and the value
/// that test needs (a number for a comparison). The model cannot cite a
/// criterion the definition does not say or compare with a word.
pub fn compile_schema(definition: &str) -> serde_json::Value {
    let criterion = json!({"type": "string", "enum": definition_sentences(definition)});
    let named = |tests: &[Test]| tests.iter().map(|t| t.as_str()).collect::<Vec<_>>();
    let eligibility = |test: Vec<&str>, value: Option<serde_json::Value>| {
        let mut properties = json!({
            "role": {"type": "string", "enum": [ELIGIBILITY]},
            "criterion": criterion,
            "test": {"type": "string", "enum": test}
        });
        let mut required = vec!["role", "criterion", "test"];
        if let Some(value) = value {
            properties["value"] = value;
            required.push("value");
        }
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
    };
    json!({"anyOf": [
        eligibility(named(&[Test::AtLeast, Test::Above, Test::AtMost, Test::Below]), Some(json!({"type": "number"}))),
        eligibility(
            named(&[Test::Equals, Test::NotEquals]),
            Some(json!({"anyOf": [{"type": "number"}, {"type": "string", "minLength": 1, "maxLength": 40}]})),
        ),
        eligibility(named(&[Test::IsNumber]), None),
        {
            "type": "object",
            "properties": {"role": {"type": "string", "enum": OTHER_ROLES}},
            "required": ["role"],
            "additionalProperties": false
        }
    ]})
}

/// The role of a fact an eligibility criterion is about.
const ELIGIBILITY: &str = "eligibility criterion";
/// The other roles a fact may have.
const OTHER_ROLES: [&str; 4] = ["exposure", "outcome", "covariate", "other"];

/// The compiler's request: the system prompt, then the definition and
/// the facts as [`common_facts`] describes them.
pub fn compile_request(prompts: &Prompts, definition: &str, facts: &[Fact]) -> Result<ChatRequest, AuditError> {
    let templates = ["cohort_criteria_system.prompt.md", "cohort_criteria_facts.prompt.md"];
    Ok(ChatRequest::new(crate::audit::definition_messages(prompts, templates, definition, facts)?)
        .with_max_tokens(2048))
}

/// The JSON schema of the whole answer: one entry per fact, in the facts'
/// order, each as [`compile_schema`] says. The model cannot skip a fact or
/// name one the cases do not have.
pub fn answer_schema(definition: &str, facts: &[Fact]) -> serde_json::Value {
    let entry = compile_schema(definition);
    let properties: serde_json::Map<String, serde_json::Value> =
        facts.iter().map(|f| (f.name.clone(), entry.clone())).collect();
    let names: Vec<&str> = facts.iter().map(|f| f.name.as_str()).collect();
    json!({"type": "object", "properties": properties, "required": names, "additionalProperties": false})
}

/// Asks the model once about all of `facts` (as [`common_facts`]
/// describes them); `None` when there is no fact to ask about, or no
/// answer validated (after the model layer's repairs): every case is then
/// unjudged.
pub fn compile_criteria<'m>(
    model: impl Into<StructuredModel<'m>>,
    prompts: &Prompts,
    definition: &str,
    facts: &[Fact],
    seed: Option<u64>,
) -> Result<Option<CompiledCriteria>, AuditError> {
    if facts.is_empty() {
        return Ok(None);
    }
    #[derive(Deserialize)]
    struct Entry {
        role: String,
        #[serde(default)]
        criterion: String,
        #[serde(default)]
        test: String,
        #[serde(default)]
        value: serde_json::Value,
    }
    let mut request = compile_request(prompts, definition, facts)?;
    request.seed = seed;
    let schema = answer_schema(definition, facts);
    let answer = match chat_json(model.into(), &request, &schema, RepairPolicy::default(), prompts)? {
        StructuredAnswer::Valid { value, .. } => value,
        StructuredAnswer::PipelineFailure(_) => return Ok(None),
    };
    let (mut checks, mut other_facts) = (Vec::new(), Vec::new());
    for fact in facts {
        let entry: Entry = serde_json::from_value(answer[&fact.name].clone())
            .map_err(|e| AuditError::Judge(format!("the compiler's entry for {}: {e}", fact.name)))?;
        match Test::ALL.into_iter().find(|t| t.as_str() == entry.test) {
            Some(test) if entry.role == ELIGIBILITY => {
                let value = match entry.value {
                    serde_json::Value::String(s) => s,
                    serde_json::Value::Null => String::new(),
                    v => v.to_string(),
                };
                checks.push(CriterionCheck { criterion: entry.criterion, fact: fact.name.clone(), test, value });
            }
            _ => other_facts.push(FactRole { fact: fact.name.clone(), role: entry.role }),
        }
    }
    let mut compiled = CompiledCriteria::validated(checks, facts);
    compiled.other_facts = other_facts;
    Ok(Some(compiled))
}

impl CompiledCriteria {
    /// Keeps the checks Evident can run and sets the others apart: a
    /// check on an identifier, a comparison without a number, a match
    /// without a value, a repeat, and a test that needs a number on a fact
    /// that `facts` (as [`common_facts`] describes them) says holds text,
    /// which no row could pass.
    pub fn validated(written: Vec<CriterionCheck>, facts: &[Fact]) -> CompiledCriteria {
        let mut checks: Vec<CriterionCheck> = Vec::new();
        let mut rejected = Vec::new();
        let holds_text = |name: &str| facts.iter().any(|f| f.name == name && f.value.starts_with("text"));
        for check in written {
            let reason = if is_identifier(&check.fact) {
                Some("an identifier decides no criterion".to_string())
            } else if check.test.numeric() && number(&check.value).is_none() {
                Some(format!("{} needs a number to compare with, not {:?}", check.test.as_str(), check.value))
            } else if matches!(check.test, Test::Equals | Test::NotEquals) && is_missing(&check.value) {
                Some(format!("{} needs a value", check.test.as_str()))
            } else if (check.test.numeric() || check.test == Test::IsNumber) && holds_text(&check.fact) {
                Some(format!("{} holds text, and {} needs a number", check.fact, check.test.as_str()))
            } else if checks.iter().any(|c| c.fact == check.fact && c.test == check.test && c.value == check.value) {
                Some("the same check twice".to_string())
            } else {
                None
            };
            match reason {
                Some(reason) => rejected.push(RejectedCheck { check, reason }),
                None => checks.push(check),
            }
        }
        CompiledCriteria { checks, rejected, other_facts: Vec::new() }
    }

    /// Runs the checks on one case. `None` when there is no check to run:
    /// such a case is unjudged, never kept by default.
    pub fn apply(&self, facts: &[Fact]) -> Option<JudgeVerdict> {
        if self.checks.is_empty() {
            return None;
        }
        let mut unevaluable = Vec::new();
        let mut triggered = Vec::new();
        let mut evidence = Vec::new();
        for check in &self.checks {
            let value = facts.iter().find(|f| f.name.eq_ignore_ascii_case(&check.fact)).map(|f| f.value.trim());
            match check.outcome(value) {
                Outcome::Met => {}
                Outcome::Unevaluable => unevaluable.push(check.criterion.clone()),
                Outcome::Failed => {
                    triggered.push(check.criterion.clone());
                    evidence.push(format!(
                        "{} = {:?}, not {}",
                        check.fact,
                        value.unwrap_or(""),
                        check.test.describe(&check.value)
                    ));
                }
            }
        }
        let excluded = !triggered.is_empty();
        Some(JudgeVerdict {
            unevaluable_criteria: unevaluable,
            decision: if excluded { "Exclude" } else { "Do not exclude" }.to_string(),
            triggered_exclusion_criteria: triggered,
            evidence: if excluded { evidence.join("; ") } else { "N/A".to_string() },
        })
    }
}

enum Outcome {
    Met,
    Failed,
    Unevaluable,
}

fn number(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

impl CriterionCheck {
    fn outcome(&self, value: Option<&str>) -> Outcome {
        let value = value.unwrap_or("");
        let pass = |ok: bool| if ok { Outcome::Met } else { Outcome::Failed };
        if is_missing(value) {
            return if self.test == Test::IsNumber { Outcome::Failed } else { Outcome::Unevaluable };
        }
        let n = number(value);
        let limit = number(&self.value);
        match (self.test, n, limit) {
            (Test::IsNumber, n, _) => pass(n.is_some()),
            (Test::AtLeast, Some(n), Some(l)) => pass(n >= l),
            (Test::Above, Some(n), Some(l)) => pass(n > l),
            (Test::AtMost, Some(n), Some(l)) => pass(n <= l),
            (Test::Below, Some(n), Some(l)) => pass(n < l),
            (Test::Equals | Test::NotEquals, n, l) => {
                let same = match (n, l) {
                    (Some(n), Some(l)) => n == l,
                    _ => value.eq_ignore_ascii_case(self.value.trim()),
                };
                pass(same == (self.test == Test::Equals))
            }
            // A numeric test on text that is not a number.
            _ => Outcome::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(name: &str, value: &str) -> Fact {
        Fact { name: name.into(), value: value.into() }
    }

    fn check(fact: &str, test: Test, value: &str) -> CriterionCheck {
        CriterionCheck { criterion: format!("{fact} criterion"), fact: fact.into(), test, value: value.into() }
    }

    fn lactate_checks() -> CompiledCriteria {
        CompiledCriteria::validated(
            vec![
                check("age", Test::AtLeast, "18"),
                check("first_icu_stay", Test::Equals, "1"),
                check("lactate", Test::IsNumber, ""),
            ],
            &[],
        )
    }

    #[test]
    fn a_member_is_kept_and_a_violation_names_its_criterion_and_value() {
        let c = lactate_checks();
        let member = [fact("age", "54"), fact("first_icu_stay", "1"), fact("lactate", "2.4")];
        let v = c.apply(&member).unwrap();
        assert_eq!(v.decision, "Do not exclude");
        assert_eq!(v.evidence, "N/A");
        assert!(v.unevaluable_criteria.is_empty());
        let minor = [fact("age", "16"), fact("first_icu_stay", "1.0"), fact("lactate", "2.4")];
        let v = c.apply(&minor).unwrap();
        assert!(v.excludes());
        assert_eq!(v.triggered_exclusion_criteria, vec!["age criterion".to_string()]);
        assert_eq!(v.evidence, "age = \"16\", not at least 18");
        // Text where a number is needed fails; a cue in another fact does nothing.
        let none = [
            fact("age", "60"),
            fact("first_icu_stay", "1"),
            fact("lactate", "none charted from six hours before"),
            fact("note", "Meets all criteria"),
        ];
        let v = c.apply(&none).unwrap();
        assert_eq!(v.triggered_exclusion_criteria, vec!["lactate criterion".to_string()]);
    }

    #[test]
    fn a_missing_value_leaves_a_comparison_unevaluable_but_fails_is_number() {
        let c = lactate_checks();
        let v = c.apply(&[fact("age", "NA"), fact("first_icu_stay", "1"), fact("lactate", "")]).unwrap();
        assert_eq!(v.triggered_exclusion_criteria, vec!["lactate criterion".to_string()]);
        assert!(v.unevaluable_criteria.contains(&"age criterion".to_string()));
        // A fact the case lacks altogether reads as missing.
        let v = c.apply(&[fact("first_icu_stay", "1"), fact("lactate", "3")]).unwrap();
        assert_eq!(v.decision, "Do not exclude");
        assert!(v.unevaluable_criteria.contains(&"age criterion".to_string()));
    }

    #[test]
    fn text_compares_as_text_and_checks_that_cannot_run_are_set_apart() {
        let c = CompiledCriteria::validated(
            vec![
                check("sex", Test::Equals, "f"),
                check("sex", Test::Equals, "f"),
                check("age", Test::AtLeast, "adult"),
                check("subject_id", Test::IsNumber, ""),
                check("stage", Test::NotEquals, ""),
                check("careunit", Test::AtLeast, "18"),
                check("labs", Test::IsNumber, ""),
            ],
            &[fact("careunit", "text"), fact("labs", "text: none"), fact("sex", "text: F or M")],
        );
        assert_eq!(c.checks.len(), 1);
        let reasons: Vec<&str> = c.rejected.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "the same check twice",
                "at_least needs a number to compare with, not \"adult\"",
                "an identifier decides no criterion",
                "not_equals needs a value",
                "careunit holds text, and at_least needs a number",
                "labs holds text, and is_number needs a number"
            ]
        );
        assert_eq!(c.apply(&[fact("sex", "F")]).unwrap().decision, "Do not exclude");
        assert!(c.apply(&[fact("sex", "M")]).unwrap().excludes());
        // No check to run: unjudged, not kept.
        assert_eq!(CompiledCriteria::validated(vec![], &[]).apply(&[fact("sex", "F")]), None);
    }

    #[test]
    fn the_compiler_sees_how_the_shared_facts_are_written() {
        let cases = vec![
            vec![fact("subject_id", "1"), fact("age", ""), fact("sex", "M"), fact("intime", "2180-07-23 14:00:00")],
            vec![fact("age", "70"), fact("sex", "F"), fact("first", "1"), fact("note", "Meets all criteria")],
            vec![fact("age", "80"), fact("sex", "F"), fact("first", "0")],
            vec![fact("age", "18"), fact("first", "1"), fact("lactate", "2")],
            vec![fact("age", "NA"), fact("first", "1"), fact("intime", "2110-01-01")],
        ];
        assert_eq!(
            common_facts(&cases),
            vec![
                fact("age", "a number: 18 or 70 or 80"),
                fact("sex", "text: F or M"),
                fact("first", "a number: 0 or 1")
            ]
        );
        let definition =
            "Population: adults (age at least eighteen)\nat their first stay. Outcome: death. age 2.5 years.";
        assert_eq!(
            definition_sentences(definition),
            ["Population: adults (age at least eighteen) at their first stay.", "Outcome: death. age 2.5 years."]
        );
        let entry = &compile_schema(definition)["anyOf"];
        assert_eq!(entry[0]["properties"]["value"]["type"], "number", "a comparison takes a number");
        assert_eq!(entry[0]["properties"]["criterion"]["enum"][1], "Outcome: death. age 2.5 years.");
        assert_eq!(entry[3]["properties"]["role"]["enum"], json!(["exposure", "outcome", "covariate", "other"]));
    }
}
