//! The forms coordinators hold criteria in, told apart by content (not by
//! file name): an Evident criteria set (YAML or JSON with `trial_id` and
//! `criteria`), a ClinicalTrials.gov API v2 study (JSON with a
//! `protocolSection`), or plain eligibility text as pasted from a registry
//! ("Inclusion Criteria:" / "Exclusion Criteria:" with bulleted or numbered
//! items), which goes through [`crate::plain`]. Plain text takes its trial
//! id and title from [`TrialNames`] or, for the id, from the file name. A
//! text in none of these forms is an error that lists them; it never
//! becomes an empty trial.

use serde_json::Value;

use crate::criteria::{CriteriaError, CriteriaSet};
use crate::ctgov::criteria_from_ctgov_json;
use crate::plain::{has_items, split_criteria_text};

/// The trial id and title to give a set (plain text has neither); when
/// given, they replace what a set or study says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrialNames {
    pub trial_id: Option<String>,
    pub title: Option<String>,
}

/// Which form a text was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CriteriaForm {
    EvidentSet,
    ClinicalTrialsGov,
    PlainText,
}

impl CriteriaForm {
    pub fn as_str(self) -> &'static str {
        match self {
            CriteriaForm::EvidentSet => "Evident criteria set",
            CriteriaForm::ClinicalTrialsGov => "ClinicalTrials.gov API v2 study",
            CriteriaForm::PlainText => "eligibility text",
        }
    }
}

/// What the error for an unrecognised text says is accepted.
pub const ACCEPTED_FORMS: &str = "expected an Evident criteria set (YAML or JSON with trial_id and criteria), a ClinicalTrials.gov API v2 study (JSON with protocolSection), or eligibility text with \"Inclusion Criteria:\" / \"Exclusion Criteria:\" headings and bulleted (*, -) or numbered (1.) items";

/// Reads criteria in any accepted form. `origin` names the input in
/// errors; `file_stem` gives plain text its trial id when `names` has none.
pub fn read_criteria(
    text: &str,
    origin: &str,
    file_stem: Option<&str>,
    names: &TrialNames,
) -> Result<(CriteriaSet, CriteriaForm), CriteriaError> {
    let unrecognised = |what: &str| CriteriaError::Unrecognised {
        path: origin.to_string(),
        message: format!("{what}; {ACCEPTED_FORMS}"),
    };
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Err(unrecognised("the text is empty"));
    }
    let (mut set, form) = if trimmed.starts_with('{') {
        let value: Value = serde_json::from_str(trimmed)
            .map_err(|e| CriteriaError::Parse { path: origin.to_string(), message: format!("not valid JSON: {e}") })?;
        if value.get("protocolSection").is_some() {
            (criteria_from_ctgov_json(trimmed, origin)?, CriteriaForm::ClinicalTrialsGov)
        } else if value.get("criteria").is_some() || value.get("trial_id").is_some() {
            (CriteriaSet::from_json_str(trimmed, origin)?, CriteriaForm::EvidentSet)
        } else {
            return Err(unrecognised("a JSON object with neither protocolSection nor trial_id and criteria"));
        }
    } else if looks_like_evident_yaml(trimmed) {
        (CriteriaSet::from_yaml_str(trimmed, origin)?, CriteriaForm::EvidentSet)
    } else {
        if !has_items(trimmed) {
            return Err(unrecognised("no criteria headings or items found"));
        }
        let split = split_criteria_text(trimmed);
        if split.inclusion.is_empty() && split.exclusion.is_empty() {
            return Err(unrecognised("the headings have no items under them"));
        }
        let trial_id = names
            .trial_id
            .clone()
            .or_else(|| file_stem.map(str::to_string))
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| "trial".to_string());
        let set = split.into_criteria_set(&trial_id, names.title.as_deref().unwrap_or(""), Some(origin.to_string()));
        (set, CriteriaForm::PlainText)
    };
    if let Some(id) = &names.trial_id {
        set.trial_id = id.clone();
    }
    if let Some(title) = &names.title {
        set.title = title.clone();
    }
    set.validate(origin)?;
    Ok((set, form))
}

/// A YAML mapping with `trial_id` or `criteria` at the top level. Plain
/// text such as "Inclusion Criteria:" also parses as YAML, so the keys
/// decide, not whether it parses.
fn looks_like_evident_yaml(text: &str) -> bool {
    match serde_yaml::from_str::<serde_yaml::Value>(text) {
        Ok(serde_yaml::Value::Mapping(m)) => m.contains_key("trial_id") || m.contains_key("criteria"),
        Ok(_) => false,
        // A broken YAML file that names the keys is a broken criteria set:
        // let the set's parser say where.
        Err(_) => text.lines().any(|l| l.starts_with("trial_id:") || l.starts_with("criteria:")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASTED: &str =
        "Inclusion Criteria:\n\n* Age 18 to 75 years\n* HbA1c 7.0-10.5%\n\nExclusion Criteria:\n\n* Pregnancy\n";

    fn read(text: &str) -> Result<(CriteriaSet, CriteriaForm), CriteriaError> {
        read_criteria(text, "pasted.txt", Some("pasted"), &TrialNames::default())
    }

    #[test]
    fn pasted_registry_text_is_split_with_the_id_from_the_file_name() {
        let (set, form) = read(PASTED).unwrap();
        assert_eq!(form, CriteriaForm::PlainText);
        assert_eq!(set.trial_id, "pasted");
        let ids: Vec<_> = set.criteria.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["inc-1", "inc-2", "exc-1"]);
        let names = TrialNames { trial_id: Some("NCT123".into()), title: Some("A trial".into()) };
        let (set, _) = read_criteria(PASTED, "-", None, &names).unwrap();
        assert_eq!((set.trial_id.as_str(), set.title.as_str()), ("NCT123", "A trial"));
    }

    #[test]
    fn evident_sets_and_studies_are_told_apart_by_content() {
        let yaml = "trial_id: T1\ncriteria:\n  - id: a\n    type: inclusion\n    text: Adult.\n";
        assert_eq!(read(yaml).unwrap().1, CriteriaForm::EvidentSet);
        let json = r#"{"trial_id": "T1", "criteria": [{"id": "a", "type": "inclusion", "text": "Adult."}]}"#;
        assert_eq!(read(json).unwrap().1, CriteriaForm::EvidentSet);
        let study = r#"{"protocolSection": {"identificationModule": {"nctId": "NCT1"}, "eligibilityModule": {"eligibilityCriteria": "Inclusion Criteria:\n* Adult"}}}"#;
        let (set, form) = read(study).unwrap();
        assert_eq!((form, set.trial_id.as_str()), (CriteriaForm::ClinicalTrialsGov, "NCT1"));
        // A broken set is reported as a broken set, not as text.
        let e = read("trial_id: T1\ncriteria:\n  - id: a\n    type: maybe\n    text: x\n").unwrap_err().to_string();
        assert!(e.starts_with("pasted.txt: not a valid criteria set"), "{e}");
    }

    #[test]
    fn text_without_items_is_an_error_saying_what_is_accepted() {
        for text in ["", "   \n", "Just a sentence about a trial.", "Inclusion Criteria:\n\nExclusion Criteria:\n"] {
            let e = read(text).unwrap_err().to_string();
            assert!(e.starts_with("pasted.txt: no criteria: "), "{e}");
            assert!(e.contains("expected an Evident criteria set"), "{e}");
            assert!(e.contains("\"Inclusion Criteria:\""), "{e}");
        }
        let e = read(r#"{"studies": []}"#).unwrap_err().to_string();
        assert!(e.contains("neither protocolSection nor trial_id"), "{e}");
    }
}
