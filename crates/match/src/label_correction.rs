//! A fitted label correction as data: Evident's lever against a model's
//! lean to one label (issue 19), not a method of either paper.
//!
//! `evident eval trialgpt --label-correction --save-correction FILE` fits
//! it on a development split: for each criterion type and label the
//! strategy predicted, how often the physicians gave each label on those
//! rows, and the label such predictions become (the physicians' most
//! frequent one, where the cell has enough rows and another label is
//! strictly ahead; `crates/eval/src/correction.rs`). `evident match
//! --label-correction FILE` applies it to each decision the model makes:
//! the stored decision carries the corrected label, its rationale says
//! what the model answered, and its trace keeps the model's label, the
//! corrected one, the table's file and the counts the cell rests on.
//!
//! A table is validated on load ([`CorrectionTable::load`]): every error
//! names the file and the field. It is fitted for one strategy and model,
//! with or without exemplars and calibration, and refused for any other
//! ([`CorrectionTable::check_fits`]): another strategy leans differently.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::criteria::CriterionType;
use crate::decision::{Assessment, Decision};

/// The `format` field every table carries.
pub const FORMAT: &str = "evident-label-correction";
/// The table version this build reads and writes.
pub const VERSION: u64 = 1;

/// Where a table's counts come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FittedOn {
    /// What the labels are, e.g. "physicians' labels, TrialGPT criterion annotations".
    pub source: String,
    /// The annotation file, as given to the evaluation.
    pub annotations: String,
    pub patients: usize,
    pub rows: usize,
    /// The command that wrote the table.
    pub command: String,
    /// When it was written (UTC, RFC 3339).
    pub created_at: String,
    /// The Evident version that wrote it.
    pub evident: String,
}

/// One (criterion type, predicted label) cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorrectionCell {
    pub criterion_type: CriterionType,
    /// What the strategy answered.
    pub predicted: Decision,
    /// Rows of this cell the table was fitted on.
    pub rows: usize,
    /// Physician label -> rows.
    pub physicians: BTreeMap<Decision, usize>,
    /// The label such a prediction becomes.
    pub corrected: Decision,
}

/// A fitted correction table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorrectionTable {
    pub format: String,
    pub version: u64,
    /// The strategy whose decisions it was fitted on (`ican`, `makar-zero-shot`, ...).
    pub strategy: String,
    /// The matching model's id.
    pub model: String,
    /// The exemplar bank the fitted decisions' prompts drew on; `None`: no exemplars.
    pub exemplars: Option<String>,
    /// Whether the fitted decisions were calibrated.
    pub calibrate: bool,
    /// Rows a cell needed before it could change a label.
    pub min_rows: usize,
    pub fitted_on: FittedOn,
    pub cells: Vec<CorrectionCell>,
}

/// A table that cannot be used, naming the file and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum CorrectionError {
    #[error("{path}: cannot read the label correction table: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: the label correction table is not JSON: {message}")]
    Json { path: String, message: String },
    #[error("{path}: field {field}: {message}")]
    Field { path: String, field: String, message: String },
    #[error("{path}: this table was fitted for {what} {fitted:?}, but this screening uses {used:?}; {hint}")]
    Mismatch { path: String, what: &'static str, fitted: String, used: String, hint: String },
}

/// What a screening is, for [`CorrectionTable::check_fits`].
#[derive(Debug, Clone, Copy)]
pub struct Screened<'a> {
    pub strategy: &'a str,
    pub model: &'a str,
    pub exemplars: bool,
    pub calibrate: bool,
}

impl Screened<'_> {
    /// The first way a table fitted for `strategy`, `model`, exemplars on
    /// or off and calibration on or off differs from this screening: what
    /// differs, the table's value and the screening's, in words. A table
    /// fitted on physicians' labels for one strategy's lean is wrong for
    /// any other (label correction and thresholds alike).
    pub(crate) fn differs_from(
        &self,
        strategy: &str,
        model: &str,
        exemplars: bool,
        calibrate: bool,
    ) -> Option<(&'static str, String, String)> {
        if !strategy.eq_ignore_ascii_case(self.strategy) {
            return Some(("strategy", strategy.to_string(), self.strategy.to_string()));
        }
        if model != self.model {
            return Some(("model", model.to_string(), self.model.to_string()));
        }
        if exemplars != self.exemplars {
            let said = |on: bool| if on { "exemplars" } else { "no exemplars" }.to_string();
            return Some(("prompts with", said(exemplars), said(self.exemplars)));
        }
        if calibrate != self.calibrate {
            let said = |on: bool| if on { "calibration" } else { "no calibration" }.to_string();
            return Some(("decisions with", said(calibrate), said(self.calibrate)));
        }
        None
    }
}

impl CorrectionTable {
    /// Reads and validates a table.
    pub fn load(path: &Path) -> Result<CorrectionTable, CorrectionError> {
        let shown = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| CorrectionError::Read { path: shown.clone(), source })?;
        Self::parse(&text, &shown)
    }

    /// Validates a table's text; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<CorrectionTable, CorrectionError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| CorrectionError::Json { path: path.to_string(), message: e.to_string() })?;
        Reader { path }.table(&value)
    }

    /// The cell for a (criterion type, predicted label).
    pub fn cell(&self, criterion_type: CriterionType, predicted: Decision) -> Option<&CorrectionCell> {
        self.cells.iter().find(|c| c.criterion_type == criterion_type && c.predicted == predicted)
    }

    /// Refuses a table fitted for another strategy, model, or use of
    /// exemplars or calibration than the screening's.
    pub fn check_fits(&self, path: &str, s: Screened<'_>) -> Result<(), CorrectionError> {
        match s.differs_from(&self.strategy, &self.model, self.exemplars.is_some(), self.calibrate) {
            None => Ok(()),
            Some((what, fitted, used)) => Err(CorrectionError::Mismatch {
                path: path.to_string(),
                what,
                fitted,
                used,
                hint: format!(
                    "fit one for it with `evident eval trialgpt --strategy {} --label-correction --save-correction FILE` (same model and options)",
                    s.strategy
                ),
            }),
        }
    }

    /// sha256 of the table's canonical JSON (names the run it corrects).
    pub fn fingerprint(&self) -> String {
        crate::batch::json_hash(self).expect("tables serialise")
    }
}

/// A table loaded for a screening: the table and the file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedCorrection {
    pub table: CorrectionTable,
    /// The file, as given.
    pub path: String,
}

/// What the correction did to one decision: kept in its trace and shown in
/// the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedCorrection {
    /// The model's own label.
    pub model_decision: Decision,
    /// The label the decision carries.
    pub corrected: Decision,
    pub changed: bool,
    /// The table's file, as given.
    pub table: String,
    pub table_sha256: String,
    /// Rows of the cell the table was fitted on (0: the table has no such cell).
    pub rows: usize,
    /// Physician label -> rows in that cell.
    pub physicians: BTreeMap<Decision, usize>,
}

impl LoadedCorrection {
    /// Corrects one assessment of a criterion of `criterion_type`: its
    /// decision becomes the cell's corrected label, and a changed one's
    /// rationale starts with what the model answered.
    pub fn apply(&self, criterion_type: CriterionType, assessment: &mut Assessment) -> AppliedCorrection {
        let model_decision = assessment.decision;
        let cell = self.table.cell(criterion_type, model_decision);
        let corrected = cell.map_or(model_decision, |c| c.corrected);
        let applied = AppliedCorrection {
            model_decision,
            corrected,
            changed: corrected != model_decision,
            table: self.path.clone(),
            table_sha256: self.table.fingerprint(),
            rows: cell.map_or(0, |c| c.rows),
            physicians: cell.map(|c| c.physicians.clone()).unwrap_or_default(),
        };
        if applied.changed {
            let counts: Vec<String> = applied.physicians.iter().map(|(d, n)| format!("{} {n}", d.as_str())).collect();
            assessment.rationale = format!(
                "[label correction ({}): the model answered {}; on the {} fitted {} rows where it answered so, the physicians said {}] {}",
                self.path,
                model_decision.as_str(),
                applied.rows,
                criterion_type.as_str(),
                counts.join(", "),
                assessment.rationale
            );
            assessment.decision = corrected;
        }
        applied
    }
}

/// The correction a stored trace records (`label_correction`), if any.
pub fn applied_correction(trace: Option<&Value>) -> Option<AppliedCorrection> {
    trace.and_then(|t| t.get("label_correction")).and_then(|v| serde_json::from_value(v.clone()).ok())
}

/// Reads a table from JSON, naming the field of every error.
struct Reader<'a> {
    path: &'a str,
}

impl Reader<'_> {
    fn err<T>(&self, field: &str, message: impl Into<String>) -> Result<T, CorrectionError> {
        Err(CorrectionError::Field { path: self.path.to_string(), field: field.to_string(), message: message.into() })
    }

    fn get<'v>(&self, obj: &'v Value, parent: &str, name: &str) -> Result<&'v Value, CorrectionError> {
        let field = join(parent, name);
        match obj.get(name) {
            Some(v) => Ok(v),
            None => self.err(&field, "missing"),
        }
    }

    fn string(&self, obj: &Value, parent: &str, name: &str) -> Result<String, CorrectionError> {
        match self.get(obj, parent, name)? {
            Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
            other => self.err(&join(parent, name), format!("expected a non-empty string, found {other}")),
        }
    }

    fn count(&self, value: &Value, field: &str) -> Result<usize, CorrectionError> {
        match value.as_u64() {
            Some(n) => Ok(n as usize),
            None => self.err(field, format!("expected a whole number of rows, found {value}")),
        }
    }

    fn decision(&self, value: &Value, field: &str) -> Result<Decision, CorrectionError> {
        match value.as_str().and_then(Decision::parse) {
            Some(d) => Ok(d),
            None => self.err(
                field,
                format!("{value} is not a label; use MET, NOT MET, NOT ENOUGH INFORMATION or NOT APPLICABLE"),
            ),
        }
    }

    fn table(&self, v: &Value) -> Result<CorrectionTable, CorrectionError> {
        if !v.is_object() {
            return self.err("(top level)", "expected an object");
        }
        let format = self.string(v, "", "format")?;
        if format != FORMAT {
            return self.err("format", format!("{format:?} is not {FORMAT:?}"));
        }
        let version = match self.get(v, "", "version")?.as_u64() {
            Some(n) if n == VERSION => n,
            _ => return self.err("version", format!("this Evident reads version {VERSION} tables only")),
        };
        let strategy = self.string(v, "", "strategy")?;
        if crate::batch::Method::parse(&strategy).is_none() {
            return self.err("strategy", format!("{strategy:?} is not a strategy Evident knows"));
        }
        let model = self.string(v, "", "model")?;
        let exemplars = match self.get(v, "", "exemplars")? {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => return self.err("exemplars", format!("expected a bank name or null, found {other}")),
        };
        let calibrate = match self.get(v, "", "calibrate")? {
            Value::Bool(b) => *b,
            other => return self.err("calibrate", format!("expected true or false, found {other}")),
        };
        let min_rows = self.count(self.get(v, "", "min_rows")?, "min_rows")?;
        let f = self.get(v, "", "fitted_on")?;
        if !f.is_object() {
            return self.err("fitted_on", "expected an object");
        }
        let fitted_on = FittedOn {
            source: self.string(f, "fitted_on", "source")?,
            annotations: self.string(f, "fitted_on", "annotations")?,
            patients: self.count(self.get(f, "fitted_on", "patients")?, "fitted_on.patients")?,
            rows: self.count(self.get(f, "fitted_on", "rows")?, "fitted_on.rows")?,
            command: self.string(f, "fitted_on", "command")?,
            created_at: self.string(f, "fitted_on", "created_at")?,
            evident: self.string(f, "fitted_on", "evident")?,
        };
        let Some(cells) = self.get(v, "", "cells")?.as_array() else {
            return self.err("cells", "expected a list of cells");
        };
        let mut out: Vec<CorrectionCell> = Vec::new();
        for (i, c) in cells.iter().enumerate() {
            let at = format!("cells[{i}]");
            if !c.is_object() {
                return self.err(&at, "expected an object");
            }
            let criterion_type = match self.get(c, &at, "criterion_type")?.as_str() {
                Some("inclusion") => CriterionType::Inclusion,
                Some("exclusion") => CriterionType::Exclusion,
                _ => return self.err(&format!("{at}.criterion_type"), "expected inclusion or exclusion"),
            };
            let predicted = self.decision(self.get(c, &at, "predicted")?, &format!("{at}.predicted"))?;
            let corrected = self.decision(self.get(c, &at, "corrected")?, &format!("{at}.corrected"))?;
            let rows = self.count(self.get(c, &at, "rows")?, &format!("{at}.rows"))?;
            let Some(counts) = self.get(c, &at, "physicians")?.as_object() else {
                return self.err(&format!("{at}.physicians"), "expected an object of label -> rows");
            };
            let mut physicians = BTreeMap::new();
            for (label, n) in counts {
                let field = format!("{at}.physicians.{label}");
                let d = self.decision(&Value::String(label.clone()), &field)?;
                physicians.insert(d, self.count(n, &field)?);
            }
            let sum: usize = physicians.values().sum();
            if sum != rows {
                return self.err(&format!("{at}.rows"), format!("{rows}, but the physicians' counts add up to {sum}"));
            }
            if out.iter().any(|o| o.criterion_type == criterion_type && o.predicted == predicted) {
                return self.err(&at, format!("a second cell for {} {}", criterion_type.as_str(), predicted.as_str()));
            }
            out.push(CorrectionCell { criterion_type, predicted, rows, physicians, corrected });
        }
        let total: usize = out.iter().map(|c| c.rows).sum();
        if total > fitted_on.rows {
            return self.err("fitted_on.rows", format!("{} but the cells hold {total} rows", fitted_on.rows));
        }
        Ok(CorrectionTable { format, version, strategy, model, exemplars, calibrate, min_rows, fitted_on, cells: out })
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> CorrectionTable {
        CorrectionTable {
            format: FORMAT.into(),
            version: VERSION,
            strategy: "ican".into(),
            model: "m".into(),
            exemplars: None,
            calibrate: false,
            min_rows: 5,
            fitted_on: FittedOn {
                source: "physicians".into(),
                annotations: "a.json".into(),
                patients: 2,
                rows: 10,
                command: "evident eval trialgpt".into(),
                created_at: "2026-11-25T00:00:00Z".into(),
                evident: "0".into(),
            },
            cells: vec![CorrectionCell {
                criterion_type: CriterionType::Exclusion,
                predicted: Decision::Met,
                rows: 6,
                physicians: [(Decision::Met, 1), (Decision::NotMet, 5)].into_iter().collect(),
                corrected: Decision::NotMet,
            }],
        }
    }

    #[test]
    fn a_written_table_reads_back_and_a_bad_field_is_named() {
        let text = serde_json::to_string_pretty(&table()).unwrap();
        assert_eq!(CorrectionTable::parse(&text, "t.json").unwrap(), table());
        let bad = text.replace("\"NOT MET\": 5", "\"NOT MET\": 4");
        let err = CorrectionTable::parse(&bad, "t.json").unwrap_err().to_string();
        assert_eq!(err, "t.json: field cells[0].rows: 6, but the physicians' counts add up to 5");
        let bad = text.replace("\"predicted\": \"MET\"", "\"predicted\": \"MAYBE\"");
        let err = CorrectionTable::parse(&bad, "t.json").unwrap_err().to_string();
        assert!(err.starts_with("t.json: field cells[0].predicted: \"MAYBE\" is not a label"), "{err}");
        let bad = text.replace("\"strategy\"", "\"strategie\"");
        assert_eq!(CorrectionTable::parse(&bad, "t.json").unwrap_err().to_string(), "t.json: field strategy: missing");
    }

    #[test]
    fn apply_relabels_a_cell_and_keeps_the_models_label() {
        let loaded = LoadedCorrection { table: table(), path: "t.json".into() };
        let mut a = Assessment {
            medications_and_supplements: Vec::new(),
            rationale: "insulin".into(),
            decision: Decision::Met,
            confidence: crate::Confidence::High,
            evidence: Vec::new(),
        };
        let applied = loaded.apply(CriterionType::Exclusion, &mut a);
        assert_eq!(
            (applied.model_decision, applied.corrected, applied.changed),
            (Decision::Met, Decision::NotMet, true)
        );
        assert_eq!(a.decision, Decision::NotMet);
        assert!(a.rationale.starts_with("[label correction (t.json): the model answered MET;"), "{}", a.rationale);
        // An inclusion MET has no cell: unchanged.
        let mut b = Assessment { decision: Decision::Met, ..a.clone() };
        let kept = loaded.apply(CriterionType::Inclusion, &mut b);
        assert!(!kept.changed);
        assert_eq!(b.decision, Decision::Met);
        assert_eq!(b.rationale, a.rationale);
    }

    #[test]
    fn a_table_for_another_strategy_model_or_lever_is_refused() {
        let t = table();
        let s = Screened { strategy: "ican", model: "m", exemplars: false, calibrate: false };
        t.check_fits("t.json", s).unwrap();
        let err = t.check_fits("t.json", Screened { strategy: "acan", ..s }).unwrap_err().to_string();
        assert!(
            err.starts_with("t.json: this table was fitted for strategy \"ican\", but this screening uses \"acan\"")
        );
        assert!(t.check_fits("t.json", Screened { model: "other", ..s }).is_err());
        assert!(t.check_fits("t.json", Screened { exemplars: true, ..s }).is_err());
        assert!(t.check_fits("t.json", Screened { calibrate: true, ..s }).is_err());
    }
}
