//! Gold answers: the correct option of every choice question and the value
//! of every field, as written by the task's independent reference analysis
//! (an R script beside the task file), validated against the task on load.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::task::{FieldKind, PvalueSign, Task};

/// The significance level RWE-bench scores p-values at (eq. 5).
pub const ALPHA: f64 = 0.05;

/// The reference answers of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gold {
    /// The task these answers belong to.
    pub task: String,
    /// What produced them (the reference script and its R version).
    pub produced_by: String,
    /// Choice question id to the correct option letter.
    pub choices: BTreeMap<String, String>,
    /// Field name to its reference value.
    pub fields: BTreeMap<String, f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum GoldError {
    #[error("{path}: cannot read the gold answers: {source}; run the task's reference.R to write them")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: not valid gold answers: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {field}: {message}")]
    Invalid { path: String, field: String, message: String },
}

/// Whether a reported p-value says p < [`ALPHA`]: `Some(true)` or
/// `Some(false)` when the number and its sign decide it, `None` when they do
/// not (`P < 0.2`, `P > 0.01`). A bound `P < 0.05` is significant.
pub fn significance(value: f64, sign: PvalueSign) -> Option<bool> {
    match sign {
        PvalueSign::Eq => Some(value < ALPHA),
        PvalueSign::Lt => (value <= ALPHA).then_some(true),
        PvalueSign::Le => (value < ALPHA).then_some(true),
        PvalueSign::Gt | PvalueSign::Ge => (value >= ALPHA).then_some(false),
    }
}

impl Gold {
    /// Reads `gold.json` and validates it against `task`.
    pub fn load(path: &Path, task: &Task) -> Result<Gold, GoldError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| GoldError::Io { path: origin.clone(), source })?;
        Gold::from_json_str(&text, task, &origin)
    }

    pub fn from_json_str(text: &str, task: &Task, origin: &str) -> Result<Gold, GoldError> {
        let gold: Gold = serde_json::from_str(text)
            .map_err(|e| GoldError::Parse { path: origin.to_string(), message: e.to_string() })?;
        gold.validate(task, origin)?;
        Ok(gold)
    }

    /// Every choice and field of the task has a gold answer, nothing else
    /// does, and each value is possible for its type; a p-value's
    /// significance must be decided by its number and sign.
    pub fn validate(&self, task: &Task, origin: &str) -> Result<(), GoldError> {
        let invalid = |field: String, message: String| GoldError::Invalid { path: origin.to_string(), field, message };
        if self.task != task.id {
            return Err(invalid("task".into(), format!("is {:?} but the task is {:?}", self.task, task.id)));
        }
        for q in &task.questions {
            if let Some(choice) = &q.choice {
                match self.choices.get(&q.id) {
                    None => return Err(invalid(format!("choices.{}", q.id), "is missing".into())),
                    Some(letter) if !choice.options.contains_key(letter) => {
                        return Err(invalid(format!("choices.{}", q.id), format!("{letter:?} is not an option")))
                    }
                    Some(_) => {}
                }
            }
        }
        if let Some(extra) = self.choices.keys().find(|id| task.question(id).and_then(|q| q.choice.as_ref()).is_none())
        {
            return Err(invalid(format!("choices.{extra}"), "is not a choice question of the task".into()));
        }
        if let Some(extra) = self.fields.keys().find(|name| task.field(name).is_none()) {
            return Err(invalid(format!("fields.{extra}"), "is not a field of the task".into()));
        }
        for (_, field) in task.fields() {
            let name = field.name();
            let at = format!("fields.{name}");
            let Some(&v) = self.fields.get(name) else {
                return Err(invalid(at, "is missing".into()));
            };
            if !v.is_finite() {
                return Err(invalid(at, format!("is {v}; gold values are finite numbers")));
            }
            let problem = match field {
                FieldKind::Count { .. } if v < 0.0 || v.fract() != 0.0 => Some(format!("{v} is not a count")),
                FieldKind::Proportion { base, .. } if v < 0.0 || v > f64::from(*base) => {
                    Some(format!("{v} is outside [0, {base}]"))
                }
                FieldKind::Auc { .. } if !(0.0..=1.0).contains(&v) => Some(format!("{v} is outside [0, 1]")),
                FieldKind::Pvalue { sign, .. } => {
                    if !(0.0..=1.0).contains(&v) {
                        Some(format!("{v} is outside [0, 1]"))
                    } else if significance(v, *sign).is_none() {
                        Some(format!("P {} {v} does not say whether P < {ALPHA}; use a bound that does", sign.as_str()))
                    } else {
                        None
                    }
                }
                FieldKind::Ratio { ci_low, ci_high, .. } => {
                    let (lo, hi) = (self.fields.get(ci_low).copied(), self.fields.get(ci_high).copied());
                    match (lo, hi) {
                        (Some(lo), Some(hi)) if v <= 0.0 || lo <= 0.0 || !(lo <= v && v <= hi) => {
                            Some(format!("ratio {v} with CI {lo}-{hi}: need 0 < low <= ratio <= high"))
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some(message) = problem {
                return Err(invalid(at, message));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::tests::GOOD;

    fn task() -> Task {
        Task::from_yaml_str(GOOD, "t.yaml").unwrap()
    }

    const GOLD: &str = r#"{"task": "lactate-demo", "produced_by": "test",
        "choices": {"q_lactate": "A"},
        "fields": {"n_patients": 74, "n_deaths": 11, "or_lactate": 1.5, "or_low": 1.1, "or_high": 2.0, "p_lactate": 0.01}}"#;

    #[test]
    fn significance_follows_number_and_sign() {
        assert_eq!(significance(0.049, PvalueSign::Eq), Some(true));
        assert_eq!(significance(0.05, PvalueSign::Eq), Some(false));
        assert_eq!(significance(0.001, PvalueSign::Lt), Some(true));
        assert_eq!(significance(0.05, PvalueSign::Lt), Some(true));
        assert_eq!(significance(0.05, PvalueSign::Le), None);
        assert_eq!(significance(0.2, PvalueSign::Lt), None);
        assert_eq!(significance(0.05, PvalueSign::Gt), Some(false));
        assert_eq!(significance(0.01, PvalueSign::Gt), None);
    }

    #[test]
    fn good_gold_loads() {
        let gold = Gold::from_json_str(GOLD, &task(), "gold.json").unwrap();
        assert_eq!(gold.choices["q_lactate"], "A");
        assert_eq!(gold.fields["n_deaths"], 11.0);
    }

    #[test]
    fn bad_gold_is_named() {
        let t = task();
        let check = |from: &str, to: &str, expected: &str| {
            let e = Gold::from_json_str(&GOLD.replace(from, to), &t, "gold.json").unwrap_err().to_string();
            assert!(e.contains(expected), "{e}\n  expected: {expected}");
        };
        check("\"A\"", "\"E\"", "gold.json: choices.q_lactate: \"E\" is not an option");
        check("\"q_lactate\": \"A\"", "\"q_other\": \"A\"", "choices.q_lactate: is missing");
        check("\"n_deaths\": 11,", "", "fields.n_deaths: is missing");
        check("\"n_deaths\": 11,", "\"n_deaths\": 11, \"extra\": 1,", "fields.extra: is not a field");
        check("\"n_deaths\": 11", "\"n_deaths\": 11.5", "fields.n_deaths: 11.5 is not a count");
        check("\"or_low\": 1.1", "\"or_low\": 1.6", "fields.or_lactate: ratio 1.5 with CI 1.6-2");
        check("\"p_lactate\": 0.01", "\"p_lactate\": 1.2", "fields.p_lactate: 1.2 is outside [0, 1]");
        check("lactate-demo", "other", "task: is \"other\"");
    }

    #[test]
    fn ambiguous_bound_is_refused() {
        let t =
            Task::from_yaml_str(&GOOD.replace("mode: exact, sign: \"=\"", "mode: bound, sign: \"<\""), "t").unwrap();
        let e = Gold::from_json_str(&GOLD.replace("0.01}", "0.2}"), &t, "gold.json").unwrap_err().to_string();
        assert!(e.contains("P < 0.2 does not say whether P < 0.05"), "{e}");
        assert!(Gold::from_json_str(&GOLD.replace("0.01}", "0.001}"), &t, "gold.json").is_ok());
    }
}
