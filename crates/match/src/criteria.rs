//! Criteria sets: Evident's own file format for a trial's eligibility
//! criteria (YAML or JSON), its types, and validation on load. A criteria set
//! names the trial and lists criteria, each with an id unique in the set, a
//! type (inclusion or exclusion), the original text, an optional refined
//! definition (used in prompts when present, as in Wornow et al. Table S5),
//! and an optional note-pooling rule with its time window (Table S1).

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::checks::{Check, CheckStatus, CompiledCheck};

/// Whether a criterion must hold (inclusion) or must not hold (exclusion).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CriterionType {
    Inclusion,
    Exclusion,
}

impl CriterionType {
    pub fn as_str(self) -> &'static str {
        match self {
            CriterionType::Inclusion => "inclusion",
            CriterionType::Exclusion => "exclusion",
        }
    }
}

/// How note-level decisions become one patient-level decision (Wornow et al.
/// Appendix C, Table S1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    /// MET if any note is MET (an event anywhere in the history).
    Max,
    /// MET only if every note is MET (e.g. ENGLISH: one note saying otherwise wins).
    Min,
    /// The decision of the most recent dated note within the window.
    MostRecent,
}

/// A criterion that the trial states as structured data rather than text
/// (ClinicalTrials.gov `minimumAge`, `maximumAge`, `sex`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Structured {
    MinimumAge {
        years: f64,
    },
    MaximumAge {
        years: f64,
    },
    /// `female` or `male` (a trial open to all sexes has no such criterion).
    Sex {
        sex: String,
    },
}

/// One eligibility criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criterion {
    /// Unique within its set; used in decisions, reports and resumable runs.
    pub id: String,
    #[serde(rename = "type")]
    pub criterion_type: CriterionType,
    /// The criterion as the trial states it (kept verbatim).
    pub text: String,
    /// A clarified definition; prompts use it when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refined: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooling: Option<Pooling>,
    /// The window of `most_recent` pooling, in months before the reference date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_months: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Structured>,
    /// A predicate over the structured record that decides the criterion
    /// (once reviewed) instead of a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
}

impl Criterion {
    /// The text a prompt should show: the refined definition when present.
    pub fn prompt_text(&self) -> &str {
        self.refined.as_deref().unwrap_or(&self.text)
    }

    /// The criterion's check when it is reviewed (only reviewed checks
    /// decide criteria), compiled. Sets are validated on load, so a loaded
    /// set's checks compile.
    pub fn reviewed_check(&self) -> Option<CompiledCheck> {
        self.check.as_ref().filter(|c| c.status == CheckStatus::Reviewed).and_then(|c| c.compile().ok())
    }

    /// The pooling rule, `max` when unset.
    pub fn pooling_or_default(&self) -> Pooling {
        self.pooling.unwrap_or(Pooling::Max)
    }
}

/// A trial and its criteria.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CriteriaSet {
    pub trial_id: String,
    #[serde(default)]
    pub title: String,
    /// Where the criteria came from (a URL, a file, a paper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    pub criteria: Vec<Criterion>,
}

/// A criteria-set file could not be read, parsed or validated.
#[derive(Debug, thiserror::Error)]
pub enum CriteriaError {
    #[error("{path}: cannot read the criteria file: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: not a valid criteria set: {message}; see criteria/n2c2-2018.yaml for the format")]
    Parse { path: String, message: String },
    #[error("{path}: {field}: {message}")]
    Invalid { path: String, field: String, message: String },
    /// A text in none of the accepted forms (or with no items).
    #[error("{path}: no criteria: {message}")]
    Unrecognised { path: String, message: String },
    #[error("{path}: not a ClinicalTrials.gov API v2 study: {message}")]
    ClinicalTrialsGov { path: String, message: String },
}

impl CriteriaSet {
    /// Reads a criteria set from a `.yaml`/`.yml` or `.json` file and
    /// validates it. Any other extension is tried as YAML (a superset of JSON).
    pub fn load(path: &Path) -> Result<CriteriaSet, CriteriaError> {
        let origin = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| CriteriaError::Io { path: origin.clone(), source })?;
        let is_json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if is_json {
            CriteriaSet::from_json_str(&text, &origin)
        } else {
            CriteriaSet::from_yaml_str(&text, &origin)
        }
    }

    /// Parses and validates YAML; `origin` names the input in errors.
    pub fn from_yaml_str(text: &str, origin: &str) -> Result<CriteriaSet, CriteriaError> {
        let set: CriteriaSet = serde_yaml::from_str(text)
            .map_err(|e| CriteriaError::Parse { path: origin.to_string(), message: e.to_string() })?;
        set.validate(origin)?;
        Ok(set)
    }

    /// Parses and validates JSON; `origin` names the input in errors.
    pub fn from_json_str(text: &str, origin: &str) -> Result<CriteriaSet, CriteriaError> {
        let set: CriteriaSet = serde_json::from_str(text)
            .map_err(|e| CriteriaError::Parse { path: origin.to_string(), message: e.to_string() })?;
        set.validate(origin)?;
        Ok(set)
    }

    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).expect("a criteria set always serialises")
    }

    /// Checks the invariants every consumer relies on: a trial id, at least
    /// one criterion, unique non-empty ids, non-empty text, and a window only
    /// (and always) with `most_recent` pooling.
    pub fn validate(&self, origin: &str) -> Result<(), CriteriaError> {
        let invalid = |field: String, message: &str| CriteriaError::Invalid {
            path: origin.to_string(),
            field,
            message: message.to_string(),
        };
        if self.trial_id.trim().is_empty() {
            return Err(invalid("trial_id".into(), "is empty; give the trial's id (e.g. its NCT number)"));
        }
        if self.criteria.is_empty() {
            return Err(invalid("criteria".into(), "is empty; a criteria set needs at least one criterion"));
        }
        let mut seen = BTreeSet::new();
        for (i, c) in self.criteria.iter().enumerate() {
            let field = |name: &str| format!("criteria[{i}].{name}");
            if c.id.trim().is_empty() {
                return Err(invalid(field("id"), "is empty; every criterion needs an id"));
            }
            if !seen.insert(c.id.as_str()) {
                return Err(invalid(field("id"), &format!("{:?} is used twice; ids must be unique in a set", c.id)));
            }
            if c.text.trim().is_empty() {
                return Err(invalid(field("text"), &format!("criterion {:?} has no text", c.id)));
            }
            if c.refined.as_deref().is_some_and(|r| r.trim().is_empty()) {
                return Err(invalid(field("refined"), "is empty; remove it or give a definition"));
            }
            match (c.pooling, c.window_months) {
                (Some(Pooling::MostRecent), None) => {
                    return Err(invalid(
                        field("window_months"),
                        "is missing; most_recent pooling needs a window in months",
                    ))
                }
                (Some(Pooling::MostRecent), Some(0)) => {
                    return Err(invalid(field("window_months"), "is 0; the window must be at least one month"))
                }
                (Some(Pooling::Max | Pooling::Min) | None, Some(_)) => {
                    return Err(invalid(
                        field("window_months"),
                        "is set but pooling is not most_recent; remove it or set pooling: most_recent",
                    ))
                }
                _ => {}
            }
            if let Some(Structured::MinimumAge { years } | Structured::MaximumAge { years }) = &c.structured {
                if !years.is_finite() || *years < 0.0 {
                    return Err(invalid(field("structured.years"), "must be a non-negative number of years"));
                }
            }
            if let Some(check) = &c.check {
                if let Err(p) = check.compile() {
                    let name = if p.field.is_empty() { "check".to_string() } else { format!("check.{}", p.field) };
                    return Err(invalid(field(&name), &format!("criterion {:?}: {}", c.id, p.message)));
                }
            }
        }
        Ok(())
    }

    pub fn criterion(&self, id: &str) -> Option<&Criterion> {
        self.criteria.iter().find(|c| c.id == id)
    }

    pub fn inclusions(&self) -> impl Iterator<Item = &Criterion> {
        self.criteria.iter().filter(|c| c.criterion_type == CriterionType::Inclusion)
    }

    /// Whether any criterion carries a reviewed check.
    pub fn has_reviewed_checks(&self) -> bool {
        self.criteria.iter().any(|c| c.check.as_ref().is_some_and(|k| k.status == CheckStatus::Reviewed))
    }

    pub fn exclusions(&self) -> impl Iterator<Item = &Criterion> {
        self.criteria.iter().filter(|c| c.criterion_type == CriterionType::Exclusion)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
trial_id: T1
title: A trial
criteria:
  - id: age
    type: inclusion
    text: Age 18 to 75 years.
  - id: supp
    type: exclusion
    text: Dietary supplement in the past 2 months.
    refined: Any dietary supplement except vitamin D in the past 2 months.
    pooling: most_recent
    window_months: 2
"#;

    fn error(text: &str) -> String {
        CriteriaSet::from_yaml_str(text, "t.yaml").unwrap_err().to_string()
    }

    #[test]
    fn good_set_loads_with_types_and_pooling() {
        let set = CriteriaSet::from_yaml_str(GOOD, "t.yaml").unwrap();
        assert_eq!(set.criteria.len(), 2);
        assert_eq!(set.criteria[1].criterion_type, CriterionType::Exclusion);
        assert_eq!(set.criteria[1].pooling, Some(Pooling::MostRecent));
        assert_eq!(set.criteria[1].prompt_text(), "Any dietary supplement except vitamin D in the past 2 months.");
        assert_eq!(set.criteria[0].prompt_text(), "Age 18 to 75 years.");
        // Round trip through YAML and JSON.
        let again = CriteriaSet::from_yaml_str(&set.to_yaml(), "again").unwrap();
        assert_eq!(again, set);
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(CriteriaSet::from_json_str(&json, "j").unwrap(), set);
    }

    #[test]
    fn errors_name_the_file_and_field() {
        let dup = GOOD.replace("id: supp", "id: age");
        assert_eq!(error(&dup), "t.yaml: criteria[1].id: \"age\" is used twice; ids must be unique in a set");
        let no_window = GOOD.replace("    window_months: 2\n", "");
        assert!(
            error(&no_window).starts_with("t.yaml: criteria[1].window_months: is missing"),
            "{}",
            error(&no_window)
        );
        let stray_window = GOOD.replace("pooling: most_recent", "pooling: max");
        assert!(error(&stray_window).contains("criteria[1].window_months: is set but pooling is not most_recent"));
        let bad_type = GOOD.replace("type: exclusion", "type: exclude");
        let e = error(&bad_type);
        assert!(e.starts_with("t.yaml: not a valid criteria set") && e.contains("exclude"), "{e}");
        let typo = GOOD.replace("refined:", "refind:");
        assert!(error(&typo).contains("refind"), "{}", error(&typo));
        let empty_text = GOOD.replace("text: Age 18 to 75 years.", "text: ' '");
        assert!(error(&empty_text).contains("criteria[0].text: criterion \"age\" has no text"));
        let no_trial = GOOD.replace("trial_id: T1", "trial_id: ''");
        assert!(error(&no_trial).starts_with("t.yaml: trial_id: is empty"));
    }

    #[test]
    fn load_reports_missing_file_with_its_path() {
        let e = CriteriaSet::load(Path::new("/nonexistent/c.yaml")).unwrap_err().to_string();
        assert!(e.starts_with("/nonexistent/c.yaml: cannot read"), "{e}");
    }
}
