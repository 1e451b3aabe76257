//! Compilation: a model proposes, once per trial, a check for each
//! criterion that can be stated over structured data. The answer is
//! constrained by a JSON schema (the lab concept is one of the catalogue
//! concepts with a unit table), turned into a [`Check`] marked
//! [`CheckStatus::Proposed`] and validated like a hand-written one
//! ([`Check::compile`]); a proposal that does not validate is dropped with
//! its reason, and a criterion the model cannot state gets no check. A
//! criterion that already has a check keeps it. Proposed checks decide
//! nothing until a person marks them reviewed.
//!
//! Criteria carry no patient text, so the requests say so
//! (`contains_patient_text: false`).

use std::path::Path;

use evident_llm::{chat_json, ChatRequest, Message, Prompts, RepairPolicy, StructuredAnswer, StructuredModel};
use evident_model::labs::LabCatalogue;
use serde::Serialize;
use serde_json::{json, Value};

use super::units::UnitTable;
use super::{AgeCheck, Check, CheckStatus, EventCheck, LabCheck, Select, SexCheck};
use crate::criteria::{CriteriaSet, Criterion};
use crate::zero_shot::MatchError;

/// The templates of compilation.
pub const COMPILE_PROMPTS: &[(&str, &str)] = &[
    ("check_compile_system.prompt.md", include_str!("../../prompts/check_compile_system.prompt.md")),
    ("check_compile_user.prompt.md", include_str!("../../prompts/check_compile_user.prompt.md")),
];

fn prompts(override_dir: Option<&Path>) -> Prompts {
    let mut all: Vec<(&'static str, &'static str)> = COMPILE_PROMPTS.to_vec();
    all.extend_from_slice(evident_llm::prompts::BUILTIN_PROMPTS);
    Prompts::new(&all, override_dir)
}

/// The catalogue concepts a check can compare, with their units, sorted by name.
fn comparable_concepts() -> Vec<(String, Vec<String>)> {
    let table = UnitTable::builtin();
    let mut out: Vec<(String, Vec<String>)> = LabCatalogue::builtin()
        .concepts()
        .iter()
        .filter_map(|c| {
            table.concept(&c.id).map(|u| (c.name.clone(), u.units.iter().map(|u| u.name.clone()).collect()))
        })
        .collect();
    out.sort();
    out
}

/// The schema of a proposal: a kind and the fields of that kind.
pub fn proposal_schema() -> Value {
    let concepts: Vec<String> = comparable_concepts().into_iter().map(|(n, _)| n).collect();
    let number = json!({"type": "number"});
    let names = json!({"type": "array", "maxItems": 8, "items": {"type": "string", "maxLength": 60}});
    json!({
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": ["age", "sex", "lab", "diagnosis", "medication", "procedure", "none"]},
            "min_years": number,
            "max_years": number,
            "sex": {"type": "string", "enum": ["female", "male"]},
            "lab_concept": {"type": "string", "enum": concepts},
            "unit": {"type": "string", "maxLength": 30},
            "lower": number,
            "lower_inclusive": {"type": "boolean"},
            "upper": number,
            "upper_inclusive": {"type": "boolean"},
            "select": {"type": "string", "enum": ["most_recent", "any", "all"]},
            "within_months": {"type": "integer", "minimum": 1, "maximum": 1200},
            "present": {"type": "boolean"},
            "names": names,
            "codes": names,
        },
        "required": ["kind"],
        "additionalProperties": false
    })
}

/// What became of one criterion.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Compiled {
    /// It already had a check; left as it was.
    Kept,
    /// The model proposed a check that validates; it is in the set, proposed.
    Proposed,
    /// The model said the criterion cannot be stated over structured data.
    None,
    /// The model's proposal did not validate; the criterion has no check.
    Rejected { reason: String },
    /// The model's answer never matched the schema.
    Failed { errors: Vec<String> },
}

/// A criteria set with proposed checks, and what happened per criterion.
#[derive(Debug, Clone, Serialize)]
pub struct CompileOutcome {
    pub set: CriteriaSet,
    /// (criterion id, what became of it), in set order.
    pub criteria: Vec<(String, Compiled)>,
    pub calls: usize,
}

/// The proposal in an answer as a check (status proposed), or why not.
pub fn check_from_proposal(value: &Value) -> Result<Option<Check>, String> {
    let s = |k: &str| value.get(k).and_then(Value::as_str);
    let f = |k: &str| value.get(k).and_then(Value::as_f64);
    let b = |k: &str| value.get(k).and_then(Value::as_bool);
    let list = |k: &str| -> Vec<String> {
        value.get(k).and_then(Value::as_array).map_or(Vec::new(), |a| {
            a.iter().filter_map(Value::as_str).map(str::to_string).filter(|t| !t.trim().is_empty()).collect()
        })
    };
    let months = value.get("within_months").and_then(Value::as_u64).map(|m| m as u32);
    let mut check = Check::age(None, None, CheckStatus::Proposed);
    check.age = None;
    match s("kind").unwrap_or("none") {
        "none" => return Ok(None),
        "age" => check.age = Some(AgeCheck { min: f("min_years"), max: f("max_years") }),
        "sex" => {
            check.sex = Some(match s("sex") {
                Some("female") => SexCheck::Female,
                Some("male") => SexCheck::Male,
                _ => return Err("a sex check without a sex".into()),
            })
        }
        "lab" => {
            let (lower, upper) = (f("lower"), f("upper"));
            let lower_inclusive = b("lower_inclusive").unwrap_or(true);
            let upper_inclusive = b("upper_inclusive").unwrap_or(true);
            check.lab = Some(LabCheck {
                concept: s("lab_concept").ok_or("a lab check without a lab_concept")?.to_string(),
                unit: s("unit").ok_or("a lab check without a unit")?.to_string(),
                above: lower.filter(|_| !lower_inclusive),
                at_least: lower.filter(|_| lower_inclusive),
                below: upper.filter(|_| !upper_inclusive),
                at_most: upper.filter(|_| upper_inclusive),
                between: None,
                above_normal: false,
                select: match s("select") {
                    Some("any") => Select::Any,
                    Some("all") => Select::All,
                    _ => Select::MostRecent,
                },
                within_days: None,
                within_months: months,
            });
        }
        kind @ ("diagnosis" | "medication" | "procedure") => {
            let event = EventCheck {
                present: b("present").unwrap_or(true),
                codes: list("codes"),
                names: list("names"),
                within_days: None,
                within_months: months,
            };
            match kind {
                "diagnosis" => check.diagnosis = Some(event),
                "medication" => check.medication = Some(event),
                _ => check.procedure = Some(event),
            }
        }
        other => return Err(format!("unknown kind {other:?}")),
    }
    match check.compile() {
        Ok(_) => Ok(Some(check)),
        Err(p) if p.field.is_empty() => Err(p.message),
        Err(p) => Err(format!("{}: {}", p.field, p.message)),
    }
}

/// Asks `model` for a check for every criterion of `set` that has none.
pub fn propose_checks(
    model: StructuredModel<'_>,
    set: &CriteriaSet,
    repair: RepairPolicy,
    prompt_override_dir: Option<&Path>,
    progress: &dyn Fn(usize, usize),
) -> Result<CompileOutcome, MatchError> {
    let prompts = prompts(prompt_override_dir);
    let schema = proposal_schema();
    let concepts: Vec<Value> =
        comparable_concepts().into_iter().map(|(name, units)| json!({"name": name, "units": units})).collect();
    let mut out = set.clone();
    let mut criteria = Vec::new();
    let mut calls = 0;
    for (i, criterion) in set.criteria.iter().enumerate() {
        progress(i + 1, set.criteria.len());
        if criterion.check.is_some() {
            criteria.push((criterion.id.clone(), Compiled::Kept));
            continue;
        }
        let request = render(&prompts, &concepts, criterion)?;
        calls += 1;
        let answer = chat_json(model, &request, &schema, repair, &prompts)
            .map_err(|source| MatchError::Llm { subject: format!("criterion {}", criterion.id), source })?;
        let compiled = match answer {
            StructuredAnswer::Valid { value, .. } => match check_from_proposal(&value) {
                Ok(Some(check)) => {
                    out.criteria[i].check = Some(check);
                    Compiled::Proposed
                }
                Ok(None) => Compiled::None,
                Err(reason) => Compiled::Rejected { reason },
            },
            StructuredAnswer::PipelineFailure(f) => Compiled::Failed { errors: f.errors },
        };
        criteria.push((criterion.id.clone(), compiled));
    }
    Ok(CompileOutcome { set: out, criteria, calls })
}

/// The request for one criterion (criteria text only: no patient text).
pub fn render(prompts: &Prompts, concepts: &[Value], criterion: &Criterion) -> Result<ChatRequest, MatchError> {
    let ctx = json!({
        "concepts": concepts,
        "criterion": {"id": criterion.id, "type": criterion.criterion_type.as_str(), "text": criterion.prompt_text()},
    });
    let system = prompts.render("check_compile_system.prompt.md", &ctx)?;
    let user = prompts.render("check_compile_user.prompt.md", &ctx)?;
    let mut request = ChatRequest::new(vec![Message::system(system), Message::user(user)]).with_max_tokens(256);
    request.contains_patient_text = false;
    Ok(request)
}

/// The request for one criterion with the built-in prompts (for snapshots).
pub fn render_builtin(criterion: &Criterion) -> Result<ChatRequest, MatchError> {
    let concepts: Vec<Value> =
        comparable_concepts().into_iter().map(|(name, units)| json!({"name": name, "units": units})).collect();
    render(&prompts(None), &concepts, criterion)
}
