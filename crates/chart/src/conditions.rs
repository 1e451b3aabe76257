//! Phrases that name another condition than the word they end in
//! ("pulmonary hypertension" is not hypertension), as data
//! (`data/distinct_conditions.json`), validated when first read. The
//! yes/no record rule reads a record's entry with them blanked out, so a
//! line of pulmonary hypertension does not answer "Has the patient been
//! diagnosed with hypertension?" "Yes".

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

const BUILTIN_JSON: &str = include_str!("../data/distinct_conditions.json");

/// The whole file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistinctConditions {
    #[serde(default)]
    pub about: Option<String>,
    pub version: u32,
    /// A word and the phrases holding it that name another condition.
    pub distinct: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum DistinctError {
    #[error("distinct conditions are not valid JSON of the file's shape: {0}; fix the file (see crates/chart/data/distinct_conditions.json)")]
    Json(#[from] serde_json::Error),
    #[error("distinct conditions have {} problem(s):\n  {}", .0.len(), .0.join("\n  "))]
    Invalid(Vec<String>),
}

impl DistinctConditions {
    /// The built-in phrases, read and validated once.
    pub fn builtin() -> &'static DistinctConditions {
        static BUILTIN: OnceLock<DistinctConditions> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            DistinctConditions::from_json(BUILTIN_JSON)
                .unwrap_or_else(|e| panic!("the built-in data/distinct_conditions.json is invalid: {e}"))
        })
    }

    /// Reads and validates the file; every problem is reported with its
    /// place (`distinct.hypertension[2]`).
    pub fn from_json(json: &str) -> Result<DistinctConditions, DistinctError> {
        let file: DistinctConditions = serde_json::from_str(json)?;
        let mut problems = Vec::new();
        for (word, phrases) in &file.distinct {
            if word.is_empty() || !word.chars().all(|c| c.is_ascii_lowercase()) {
                problems.push(format!("distinct.{word:?}: a key is one lower-case word of letters"));
            }
            for (i, phrase) in phrases.iter().enumerate() {
                let words: Vec<&str> = phrase.split(' ').collect();
                if phrase != &phrase.to_lowercase() || words.iter().any(|w| w.is_empty()) {
                    problems.push(format!(
                        "distinct.{word}[{i}]: {phrase:?} must be lower case, words separated by single spaces"
                    ));
                } else if words.len() < 2 || !words.contains(&word.as_str()) {
                    problems.push(format!(
                        "distinct.{word}[{i}]: {phrase:?} must hold {word:?} as a whole word beside other words"
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(file)
        } else {
            Err(DistinctError::Invalid(problems))
        }
    }

    /// `text`, lower-cased, with every phrase that names another condition
    /// than one of `words` blanked out (spaces, so offsets stay), except
    /// those `question` names itself.
    pub fn masked(&self, words: &[String], question: &str, text: &str) -> String {
        let question = question.to_lowercase();
        let mut lower = text.to_lowercase();
        for phrase in words.iter().filter_map(|w| self.distinct.get(w)).flatten() {
            if question.contains(phrase.as_str()) {
                continue;
            }
            while let Some(at) = lower.find(phrase.as_str()) {
                lower.replace_range(at..at + phrase.len(), &" ".repeat(phrase.len()));
            }
        }
        lower
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_phrases_validate_and_a_broken_edit_is_named() {
        let builtin = DistinctConditions::builtin();
        assert!(builtin.distinct["hypertension"].contains(&"pulmonary hypertension".to_string()));
        let broken = r#"{"version": 1, "distinct": {"Hypertension": ["pulmonary"], "diabetes": ["Diabetes insipidus", "prediabetes"]}}"#;
        let text = DistinctConditions::from_json(broken).unwrap_err().to_string();
        for place in [
            "distinct.\"Hypertension\": a key is one lower-case word",
            "distinct.Hypertension[0]: \"pulmonary\" must hold",
            "distinct.diabetes[0]: \"Diabetes insipidus\" must be lower case",
            "distinct.diabetes[1]: \"prediabetes\" must hold \"diabetes\" as a whole word",
        ] {
            assert!(text.contains(place), "missing {place:?} in {text}");
        }
    }

    #[test]
    fn a_phrase_naming_another_condition_is_blanked_unless_the_question_names_it() {
        let d = DistinctConditions::builtin();
        let words = vec!["hypertension".to_string()];
        let line = "Other secondary pulmonary hypertension; Essential hypertension";
        let masked = d.masked(&words, "Has the patient been diagnosed with hypertension?", line);
        assert_eq!(masked.len(), line.len());
        assert!(!masked.contains("pulmonary hypertension") && masked.contains("essential hypertension"));
        let asked = d.masked(&words, "Is pulmonary hypertension documented?", line);
        assert!(asked.contains("pulmonary hypertension"));
    }
}
