//! A fitted threshold on P(MET) as data: Evident's lever against a model's
//! lean to MET (issue 19), not a method of either paper.
//!
//! The paper's zero-shot prompt (C-A; `makar-zero-shot`, `makar-aug`)
//! answers 0 or 1. With [`crate::makar::MakarConfig::probabilities`] the
//! model layer also gives the log-probabilities of the answer's first
//! token, and the trace keeps P(MET) (`p_met`,
//! [`crate::makar::paper::p_met_of_binary`]). The model's own answer is the
//! argmax (P(MET) >= 0.5); a threshold per criterion type replaces it.
//!
//! `evident eval trialgpt --threshold-calibration --save-thresholds FILE`
//! fits the thresholds on a development split (`crates/eval/src/threshold.rs`:
//! the accuracy-maximising cut per criterion type) and writes this table;
//! `evident match --thresholds FILE` applies it to each decision: the
//! stored decision carries the thresholded label, its rationale says what
//! the model answered, and its trace keeps P(MET), the model's label, the
//! threshold and the table. A decision without a P(MET) keeps the model's
//! label (and says so in its trace).
//!
//! A table is validated on load ([`ThresholdTable::load`]; every error
//! names the file and the field) and refused for another strategy, model,
//! or use of exemplars or calibration ([`ThresholdTable::check_fits`]).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::criteria::CriterionType;
use crate::decision::{Assessment, Decision};
use crate::label_correction::{FittedOn, Screened};

/// The `format` field every table carries.
pub const FORMAT: &str = "evident-threshold-calibration";
/// The table version this build reads and writes.
pub const VERSION: u64 = 1;
/// The strategies whose answer is one 0/1 token, the only ones with a P(MET).
pub const STRATEGIES: [&str; 2] = ["makar-zero-shot", "makar-aug"];

/// The threshold of one criterion type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypeThreshold {
    pub criterion_type: CriterionType,
    /// MET when P(MET) >= threshold, NOT MET otherwise (0.5: the model's own answer).
    pub threshold: f64,
    /// Rows of this type with a P(MET) it was fitted on.
    pub rows: usize,
    /// Of those, rows it decides as the physicians did.
    pub correct: usize,
    /// Of those, rows the model's own answer decides as the physicians did.
    pub correct_at_argmax: usize,
}

/// A fitted threshold table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdTable {
    pub format: String,
    pub version: u64,
    pub strategy: String,
    /// The matching model's id.
    pub model: String,
    /// The exemplar bank the fitted decisions' prompts drew on; `None`: no exemplars.
    pub exemplars: Option<String>,
    /// Whether the fitted decisions were calibrated (never, for a 0/1 strategy).
    pub calibrate: bool,
    pub fitted_on: FittedOn,
    pub thresholds: Vec<TypeThreshold>,
}

/// A table that cannot be used, naming the file and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ThresholdError {
    #[error("{path}: cannot read the threshold table: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: the threshold table is not JSON: {message}")]
    Json { path: String, message: String },
    #[error("{path}: field {field}: {message}")]
    Field { path: String, field: String, message: String },
    #[error("{path}: this table was fitted for {what} {fitted:?}, but this screening uses {used:?}; {hint}")]
    Mismatch { path: String, what: &'static str, fitted: String, used: String, hint: String },
}

impl ThresholdTable {
    /// Reads and validates a table.
    pub fn load(path: &Path) -> Result<ThresholdTable, ThresholdError> {
        let shown = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| ThresholdError::Read { path: shown.clone(), source })?;
        Self::parse(&text, &shown)
    }

    /// Validates a table's text; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<ThresholdTable, ThresholdError> {
        let field = |field: &str, message: String| ThresholdError::Field {
            path: path.to_string(),
            field: field.to_string(),
            message,
        };
        let value: Value = serde_json::from_str(text)
            .map_err(|e| ThresholdError::Json { path: path.to_string(), message: e.to_string() })?;
        let Some(object) = value.as_object() else { return Err(field("(top level)", "expected an object".into())) };
        for name in ["format", "version", "strategy", "model", "exemplars", "calibrate", "fitted_on", "thresholds"] {
            if !object.contains_key(name) {
                return Err(field(name, "missing".into()));
            }
        }
        if value["format"] != FORMAT {
            return Err(field("format", format!("{} is not {FORMAT:?}", value["format"])));
        }
        if value["version"].as_u64() != Some(VERSION) {
            return Err(field("version", format!("this Evident reads version {VERSION} tables only")));
        }
        match value["strategy"].as_str() {
            Some(s) if STRATEGIES.contains(&s) => {}
            _ => {
                return Err(field(
                    "strategy",
                    format!("{} has no P(MET); thresholds are for {}", value["strategy"], STRATEGIES.join(", ")),
                ))
            }
        }
        if let Some(items) = value["thresholds"].as_array() {
            for (i, t) in items.iter().enumerate() {
                match t.get("threshold").and_then(Value::as_f64) {
                    Some(x) if (0.0..=1.0).contains(&x) => {}
                    _ => {
                        return Err(field(
                            &format!("thresholds[{i}].threshold"),
                            "expected a number from 0 to 1".into(),
                        ))
                    }
                }
            }
        }
        // The remaining shape (types, counts, fitted_on) through serde, whose
        // message names the field.
        let table: ThresholdTable = serde_json::from_value(value).map_err(|e| field("(table)", e.to_string()))?;
        for (i, t) in table.thresholds.iter().enumerate() {
            if table.thresholds[..i].iter().any(|o| o.criterion_type == t.criterion_type) {
                return Err(field(&format!("thresholds[{i}]"), format!("a second {}", t.criterion_type.as_str())));
            }
            if t.correct > t.rows || t.correct_at_argmax > t.rows {
                return Err(field(&format!("thresholds[{i}].correct"), format!("more than its {} rows", t.rows)));
            }
        }
        Ok(table)
    }

    /// The threshold for a criterion type (0.5, the model's own, if the table has none).
    pub fn threshold(&self, criterion_type: CriterionType) -> f64 {
        self.thresholds.iter().find(|t| t.criterion_type == criterion_type).map_or(0.5, |t| t.threshold)
    }

    /// Refuses a table fitted for another strategy, model, or use of
    /// exemplars or calibration than the screening's.
    pub fn check_fits(&self, path: &str, s: Screened<'_>) -> Result<(), ThresholdError> {
        match s.differs_from(&self.strategy, &self.model, self.exemplars.is_some(), self.calibrate) {
            None => Ok(()),
            Some((what, fitted, used)) => Err(ThresholdError::Mismatch {
                path: path.to_string(),
                what,
                fitted,
                used,
                hint: format!(
                    "fit one for it with `evident eval trialgpt --strategy {} --threshold-calibration --save-thresholds FILE` (same model and options)",
                    s.strategy
                ),
            }),
        }
    }

    /// sha256 of the table's canonical JSON (names the run it decides).
    pub fn fingerprint(&self) -> String {
        crate::batch::json_hash(self).expect("tables serialise")
    }
}

/// A table loaded for a screening: the table and the file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedThresholds {
    pub table: ThresholdTable,
    /// The file, as given.
    pub path: String,
}

/// What the threshold did to one decision: kept in its trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedThreshold {
    /// The model's own label.
    pub model_decision: Decision,
    /// The model's P(MET); `None`: it gave none, and the label is the model's.
    pub p_met: Option<f64>,
    pub threshold: f64,
    /// The label the decision carries.
    pub decision: Decision,
    pub changed: bool,
    /// The table's file, as given.
    pub table: String,
    pub table_sha256: String,
}

impl LoadedThresholds {
    /// Decides one assessment of a criterion of `criterion_type` by its
    /// P(MET); a changed one's rationale starts with what the model answered.
    pub fn apply(
        &self,
        criterion_type: CriterionType,
        p_met: Option<f64>,
        assessment: &mut Assessment,
    ) -> AppliedThreshold {
        let model_decision = assessment.decision;
        let threshold = self.table.threshold(criterion_type);
        let decision = match p_met {
            Some(p) if p >= threshold => Decision::Met,
            Some(_) => Decision::NotMet,
            None => model_decision,
        };
        let applied = AppliedThreshold {
            model_decision,
            p_met,
            threshold,
            decision,
            changed: decision != model_decision,
            table: self.path.clone(),
            table_sha256: self.table.fingerprint(),
        };
        if applied.changed {
            assessment.rationale = format!(
                "[threshold ({}): the model answered {} with P(MET) {:.3}; the {} threshold is {:.3}] {}",
                self.path,
                model_decision.as_str(),
                p_met.unwrap_or_default(),
                criterion_type.as_str(),
                threshold,
                assessment.rationale
            );
            assessment.decision = decision;
        }
        applied
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn table() -> ThresholdTable {
        ThresholdTable {
            format: FORMAT.into(),
            version: VERSION,
            strategy: "makar-zero-shot".into(),
            model: "m".into(),
            exemplars: Some("bank".into()),
            calibrate: false,
            fitted_on: FittedOn {
                source: "physicians".into(),
                annotations: "a.json".into(),
                patients: 2,
                rows: 10,
                command: "evident eval trialgpt".into(),
                created_at: "2026-11-25T00:00:00Z".into(),
                evident: "0".into(),
            },
            thresholds: vec![TypeThreshold {
                criterion_type: CriterionType::Exclusion,
                threshold: 0.8,
                rows: 6,
                correct: 5,
                correct_at_argmax: 1,
            }],
        }
    }

    #[test]
    fn a_written_table_reads_back_and_a_bad_field_is_named() {
        let text = serde_json::to_string_pretty(&table()).unwrap();
        assert_eq!(ThresholdTable::parse(&text, "t.json").unwrap(), table());
        let bad = text.replace("\"threshold\": 0.8", "\"threshold\": 1.5");
        let err = ThresholdTable::parse(&bad, "t.json").unwrap_err().to_string();
        assert_eq!(err, "t.json: field thresholds[0].threshold: expected a number from 0 to 1");
        let bad = text.replace("\"makar-zero-shot\"", "\"ican\"");
        let err = ThresholdTable::parse(&bad, "t.json").unwrap_err().to_string();
        assert!(err.starts_with("t.json: field strategy: \"ican\" has no P(MET)"), "{err}");
        let bad = text.replace("\"model\"", "\"modell\"");
        assert_eq!(ThresholdTable::parse(&bad, "t.json").unwrap_err().to_string(), "t.json: field model: missing");
        let bad = text.replace("\"correct\": 5", "\"correct\": 7");
        assert!(ThresholdTable::parse(&bad, "t.json").unwrap_err().to_string().contains("thresholds[0].correct"));
    }

    #[test]
    fn apply_decides_by_the_types_threshold_and_keeps_the_models_label() {
        let loaded = LoadedThresholds { table: table(), path: "t.json".into() };
        let assessment = Assessment {
            medications_and_supplements: Vec::new(),
            rationale: String::new(),
            decision: Decision::Met,
            confidence: crate::Confidence::Medium,
            evidence: Vec::new(),
        };
        let mut a = assessment.clone();
        let applied = loaded.apply(CriterionType::Exclusion, Some(0.7), &mut a);
        assert_eq!(
            (applied.model_decision, applied.decision, applied.changed),
            (Decision::Met, Decision::NotMet, true)
        );
        assert_eq!(a.decision, Decision::NotMet);
        assert!(
            a.rationale.starts_with("[threshold (t.json): the model answered MET with P(MET) 0.700;"),
            "{}",
            a.rationale
        );
        let mut b = assessment.clone();
        assert!(!loaded.apply(CriterionType::Exclusion, Some(0.85), &mut b).changed);
        // Inclusion has no threshold in the table: the model's own 0.5.
        let mut c = assessment.clone();
        assert!(!loaded.apply(CriterionType::Inclusion, Some(0.6), &mut c).changed);
        // No P(MET): the model's label, said so.
        let mut d = assessment.clone();
        let kept = loaded.apply(CriterionType::Exclusion, None, &mut d);
        assert_eq!((kept.p_met, kept.decision, kept.changed), (None, Decision::Met, false));
    }

    #[test]
    fn a_table_for_another_strategy_model_or_lever_is_refused() {
        let t = table();
        let s = Screened { strategy: "makar-zero-shot", model: "m", exemplars: true, calibrate: false };
        t.check_fits("t.json", s).unwrap();
        let err = t.check_fits("t.json", Screened { strategy: "makar-aug", ..s }).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "t.json: this table was fitted for strategy \"makar-zero-shot\", but this screening uses \"makar-aug\""
            ),
            "{err}"
        );
        assert!(t.check_fits("t.json", Screened { model: "other", ..s }).is_err());
        assert!(t.check_fits("t.json", Screened { exemplars: false, ..s }).is_err());
    }
}
