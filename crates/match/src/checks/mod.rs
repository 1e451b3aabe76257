//! Checks: a criterion's small declarative predicate over the structured
//! record, stored in the criteria set beside the criterion's text. One of:
//! age at the screening date; sex; a lab value (a canonical concept of the
//! lab catalogue, a comparator or range in a unit of that concept, a window
//! before the screening date, and whether the most recent, any or all
//! values in the window must satisfy it); a diagnosis, medication or
//! procedure present or absent in a window, by code list or name list,
//! through the timeline documents ingestion made from structured records.
//!
//! [`Check`] is the file format; [`CompiledCheck`] is a check validated
//! against the lab catalogue and the unit table ([`units`]) and ready to
//! evaluate; [`facts`] reads what a check needs of one patient from the
//! store; [`evaluate()`] decides MET / NOT MET / NOT ENOUGH INFORMATION with
//! the rows it used. A check never guesses: no value in the window, or only
//! values it cannot read (an unknown unit, a text value), is NOT ENOUGH
//! INFORMATION. [`compile`] has a model propose checks once per trial,
//! marked proposed until a person reviews them.

pub mod compile;
pub mod evaluate;
pub mod facts;
pub mod units;

use evident_model::labs::LabCatalogue;
use serde::{Deserialize, Serialize};

pub use evaluate::{evaluate, CheckOutcome, LabEvidence, SentenceEvidence};
pub use facts::{FactNeeds, PatientFacts, TimelineKind};
use units::{ConceptUnits, Unit, UnitTable};

/// Whether a person has read the check against its criterion. Only
/// reviewed checks decide criteria; a proposed one (e.g. written by
/// `evident criteria compile`) waits for review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    Proposed,
    Reviewed,
}

/// What decides a criterion when its check finds no data at all (no value,
/// record or fact of the kind it reads in its window).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IfNoData {
    /// The check's NOT ENOUGH INFORMATION stands (the default: the record
    /// is expected to hold the value as data, so its absence is the answer).
    #[default]
    Abstain,
    /// The text strategy decides, from the notes (for records whose facts
    /// are mostly in notes, such as n2c2's discharge summaries).
    Text,
}

impl IfNoData {
    fn is_default(&self) -> bool {
        *self == IfNoData::Abstain
    }
}

/// A check as written in a criteria set: a status and exactly one predicate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    pub status: CheckStatus,
    #[serde(default, skip_serializing_if = "IfNoData::is_default")]
    pub if_no_data: IfNoData,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age: Option<AgeCheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sex: Option<SexCheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<LabCheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<EventCheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub medication: Option<EventCheck>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub procedure: Option<EventCheck>,
}

/// Age in whole years at the screening date, bounds inclusive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgeCheck {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SexCheck {
    Female,
    Male,
}

/// Which values in the window must satisfy the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Select {
    /// The latest value in the window.
    #[default]
    MostRecent,
    /// At least one value.
    Any,
    /// Every value.
    All,
}

/// A lab value compared in `unit`; lower bound `above` (exclusive) or
/// `at_least` (inclusive), upper bound `below` or `at_most`, or
/// `between: [low, high]` (both inclusive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabCheck {
    /// A concept of the lab catalogue: its name, an alias, its id, or a
    /// LOINC code (`LOINC:4548-4`) that the catalogue maps to it (values
    /// are stored by concept, so every LOINC code of that concept counts).
    pub concept: String,
    pub unit: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_least: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_most: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub between: Option<[f64; 2]>,
    /// Above the upper limit of the reference range stored with each value
    /// ("creatinine above the upper limit of normal"); a value stored
    /// without a range cannot be read. Not combined with the bounds above.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub above_normal: bool,
    #[serde(default)]
    pub select: Select,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_days: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_months: Option<u32>,
}

/// A diagnosis, medication or procedure in the timeline documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventCheck {
    /// `true`: the criterion holds when a matching record is in the window;
    /// `false`: when none is.
    pub present: bool,
    /// Codes as `SYSTEM:CODE` (`ICD-10:E11`, `ICD-9:250`, `SNOMED:44054006`,
    /// `RxNorm:314076`); an ICD code matches itself and every code it is a
    /// prefix of (E11 matches E119); SNOMED CT and RxNorm codes match whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<String>,
    /// Names matched as whole words, case-insensitively, in the record's line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_days: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_months: Option<u32>,
}

/// A window before the screening date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Window {
    /// The whole record up to the screening date.
    Ever,
    Days(u32),
    Months(u32),
}

/// A check's predicate, validated.
#[derive(Debug, Clone)]
pub enum Predicate {
    Age { min: Option<f64>, max: Option<f64> },
    Sex(SexCheck),
    Lab(CompiledLab),
    Event(CompiledEvent),
}

#[derive(Debug, Clone)]
pub struct CompiledLab {
    pub concept_id: String,
    pub concept_name: String,
    pub unit: Unit,
    pub units: ConceptUnits,
    /// (bound, inclusive)
    pub lower: Option<(f64, bool)>,
    pub upper: Option<(f64, bool)>,
    /// Above each value's stored upper limit of normal.
    pub above_normal: bool,
    pub select: Select,
    pub window: Window,
}

/// A code system the timeline keeps codes of: ICD in MIMIC-IV's lines
/// (`ICD-10 E119: ...`), and the codings of FHIR resources in brackets
/// (`[SNOMED 44054006, RxNorm 314076]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CodeSystem {
    Icd9,
    Icd10,
    Snomed,
    RxNorm,
}

impl CodeSystem {
    /// How a timeline line and a check's `SYSTEM:CODE` name the system.
    pub fn label(self) -> &'static str {
        match self {
            CodeSystem::Icd9 => "ICD-9",
            CodeSystem::Icd10 => "ICD-10",
            CodeSystem::Snomed => "SNOMED",
            CodeSystem::RxNorm => "RxNorm",
        }
    }

    /// ICD codes are hierarchical by prefix (E11 covers E119); SNOMED CT
    /// and RxNorm codes are opaque identifiers, matched whole.
    pub fn matches(self, wanted: &str, carried: &str) -> bool {
        match self {
            CodeSystem::Icd9 | CodeSystem::Icd10 => carried.starts_with(wanted),
            CodeSystem::Snomed | CodeSystem::RxNorm => carried == wanted,
        }
    }
}

#[derive(Debug, Clone)]
pub struct CompiledEvent {
    pub kind: TimelineKind,
    pub present: bool,
    /// (system, code without dots, upper case)
    pub codes: Vec<(CodeSystem, String)>,
    /// Lower-cased names.
    pub names: Vec<String>,
    pub window: Window,
}

/// A check ready to evaluate.
#[derive(Debug, Clone)]
pub struct CompiledCheck {
    pub status: CheckStatus,
    pub if_no_data: IfNoData,
    pub predicate: Predicate,
}

/// A field of a check and what is wrong with it (`field` is relative to
/// the check, e.g. `lab.unit`).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckProblem {
    pub field: String,
    pub message: String,
}

fn problem<T>(field: &str, message: impl Into<String>) -> Result<T, CheckProblem> {
    Err(CheckProblem { field: field.to_string(), message: message.into() })
}

impl Check {
    /// Validates the check against the lab catalogue and the unit table.
    pub fn compile(&self) -> Result<CompiledCheck, CheckProblem> {
        let given: Vec<&str> = [
            self.age.as_ref().map(|_| "age"),
            self.sex.as_ref().map(|_| "sex"),
            self.lab.as_ref().map(|_| "lab"),
            self.diagnosis.as_ref().map(|_| "diagnosis"),
            self.medication.as_ref().map(|_| "medication"),
            self.procedure.as_ref().map(|_| "procedure"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if given.len() != 1 {
            return problem(
                "",
                format!(
                    "names {} predicates ({}); give exactly one of age, sex, lab, diagnosis, medication, procedure",
                    given.len(),
                    given.join(", ")
                ),
            );
        }
        let predicate = if let Some(age) = &self.age {
            compile_age(age)?
        } else if let Some(sex) = self.sex {
            Predicate::Sex(sex)
        } else if let Some(lab) = &self.lab {
            Predicate::Lab(compile_lab(lab)?)
        } else if let Some(d) = &self.diagnosis {
            Predicate::Event(compile_event(d, TimelineKind::Diagnosis, "diagnosis")?)
        } else if let Some(m) = &self.medication {
            Predicate::Event(compile_event(m, TimelineKind::Medication, "medication")?)
        } else {
            let p = self.procedure.as_ref().expect("one predicate is given");
            Predicate::Event(compile_event(p, TimelineKind::Procedure, "procedure")?)
        };
        Ok(CompiledCheck { status: self.status, if_no_data: self.if_no_data, predicate })
    }

    /// The age check of ClinicalTrials.gov's structured minimum and maximum age.
    pub fn age(min: Option<f64>, max: Option<f64>, status: CheckStatus) -> Check {
        Check { status, age: Some(AgeCheck { min, max }), ..Check::none(status) }
    }

    /// The sex check of ClinicalTrials.gov's structured sex.
    pub fn sex(sex: SexCheck, status: CheckStatus) -> Check {
        Check { sex: Some(sex), ..Check::none(status) }
    }

    fn none(status: CheckStatus) -> Check {
        Check {
            status,
            if_no_data: IfNoData::Abstain,
            age: None,
            sex: None,
            lab: None,
            diagnosis: None,
            medication: None,
            procedure: None,
        }
    }
}

fn compile_age(age: &AgeCheck) -> Result<Predicate, CheckProblem> {
    for (field, v) in [("age.min", age.min), ("age.max", age.max)] {
        if v.is_some_and(|v| !v.is_finite() || v < 0.0) {
            return problem(field, "must be a non-negative number of years");
        }
    }
    match (age.min, age.max) {
        (None, None) => problem("age", "needs min, max or both (years, inclusive)"),
        (Some(lo), Some(hi)) if lo > hi => problem("age", format!("min {lo} is above max {hi}")),
        (min, max) => Ok(Predicate::Age { min, max }),
    }
}

fn window(prefix: &str, days: Option<u32>, months: Option<u32>) -> Result<Window, CheckProblem> {
    match (days, months) {
        (Some(_), Some(_)) => problem(prefix, "gives both within_days and within_months; keep one"),
        (Some(0), _) => problem(&format!("{prefix}.within_days"), "is 0; a window is at least one day"),
        (_, Some(0)) => problem(&format!("{prefix}.within_months"), "is 0; a window is at least one month"),
        (Some(d), None) => Ok(Window::Days(d)),
        (None, Some(m)) => Ok(Window::Months(m)),
        (None, None) => Ok(Window::Ever),
    }
}

fn compile_lab(lab: &LabCheck) -> Result<CompiledLab, CheckProblem> {
    let catalogue = LabCatalogue::builtin();
    let loinc = lab.concept.trim().strip_prefix("LOINC:").or_else(|| lab.concept.trim().strip_prefix("loinc:"));
    if let Some(code) = loinc {
        if catalogue.resolve_loinc(code.trim()).is_none() {
            return problem(
                "lab.concept",
                format!(
                    "LOINC code {:?} maps to no concept of the lab catalogue; add it to the concept's loinc list in crates/model/data/lab_concepts.json, or name the concept",
                    code.trim()
                ),
            );
        }
    }
    let concept = match loinc {
        Some(code) => catalogue.resolve_loinc(code.trim()),
        None => catalogue
            .get(&lab.concept)
            .or_else(|| catalogue.resolve_name(&lab.concept))
            .or_else(|| catalogue.resolve_loinc(lab.concept.trim())),
    };
    let Some(concept) = concept else {
        let near: Vec<&str> = catalogue.find(&lab.concept).iter().take(3).map(|c| c.name.as_str()).collect();
        let hint = if near.is_empty() { String::new() } else { format!(" (did you mean {}?)", near.join(", ")) };
        return problem(
            "lab.concept",
            format!(
                "{:?} is not a concept of the lab catalogue{hint}; use a name from crates/model/data/lab_concepts.json",
                lab.concept
            ),
        );
    };
    let Some(units) = UnitTable::builtin().concept(&concept.id) else {
        return problem(
            "lab.concept",
            format!(
                "{} has no unit table, so its values cannot be compared; add it to crates/match/data/lab_units.json",
                concept.name
            ),
        );
    };
    let Some(unit) = units.find(&lab.unit) else {
        return problem(
            "lab.unit",
            format!("{:?} is not a unit known for {} (known: {})", lab.unit, concept.name, units.names().join(", ")),
        );
    };
    let finite = |field: &str, v: Option<f64>| -> Result<(), CheckProblem> {
        match v {
            Some(v) if !v.is_finite() => problem(field, "must be a finite number"),
            _ => Ok(()),
        }
    };
    finite("lab.above", lab.above)?;
    finite("lab.at_least", lab.at_least)?;
    finite("lab.below", lab.below)?;
    finite("lab.at_most", lab.at_most)?;
    let bounded = lab.between.is_some()
        || lab.above.is_some()
        || lab.at_least.is_some()
        || lab.below.is_some()
        || lab.at_most.is_some();
    let (lower, upper) = match lab.between {
        _ if lab.above_normal && bounded => {
            return problem("lab.above_normal", "is given with a bound; use above_normal alone or the bounds alone");
        }
        _ if lab.above_normal => (None, None),
        Some([lo, hi]) => {
            if lab.above.is_some() || lab.at_least.is_some() || lab.below.is_some() || lab.at_most.is_some() {
                return problem("lab.between", "is given with above/at_least/below/at_most; use one form");
            }
            if !(lo.is_finite() && hi.is_finite()) || lo > hi {
                return problem("lab.between", format!("[{lo}, {hi}] is not a range low <= high"));
            }
            (Some((lo, true)), Some((hi, true)))
        }
        None => {
            if lab.above.is_some() && lab.at_least.is_some() {
                return problem("lab", "gives both above and at_least; keep one lower bound");
            }
            if lab.below.is_some() && lab.at_most.is_some() {
                return problem("lab", "gives both below and at_most; keep one upper bound");
            }
            let lower = lab.above.map(|v| (v, false)).or(lab.at_least.map(|v| (v, true)));
            let upper = lab.below.map(|v| (v, false)).or(lab.at_most.map(|v| (v, true)));
            if lower.is_none() && upper.is_none() {
                return problem("lab", "needs a comparison: above, at_least, below, at_most or between: [low, high]");
            }
            if let (Some((lo, _)), Some((hi, _))) = (lower, upper) {
                if lo > hi {
                    return problem("lab", format!("the lower bound {lo} is above the upper bound {hi}"));
                }
            }
            (lower, upper)
        }
    };
    Ok(CompiledLab {
        concept_id: concept.id.clone(),
        concept_name: concept.name.clone(),
        unit: unit.clone(),
        units: units.clone(),
        lower,
        upper,
        above_normal: lab.above_normal,
        select: lab.select,
        window: window("lab", lab.within_days, lab.within_months)?,
    })
}

fn compile_event(event: &EventCheck, kind: TimelineKind, prefix: &str) -> Result<CompiledEvent, CheckProblem> {
    if event.codes.is_empty() && event.names.is_empty() {
        return problem(prefix, "needs codes, names or both");
    }
    let mut codes = Vec::new();
    for (i, text) in event.codes.iter().enumerate() {
        let field = format!("{prefix}.codes[{i}]");
        let Some((system, code)) = text.split_once(':') else {
            return problem(&field, format!("{text:?} is not SYSTEM:CODE (e.g. ICD-10:E11)"));
        };
        let system = match system.trim().to_ascii_uppercase().replace(['-', ' '], "").as_str() {
            "ICD9" | "ICD9CM" => CodeSystem::Icd9,
            "ICD10" | "ICD10CM" | "ICD10PCS" => CodeSystem::Icd10,
            "SNOMED" | "SNOMEDCT" | "SCT" => CodeSystem::Snomed,
            "RXNORM" => CodeSystem::RxNorm,
            "LOINC" => {
                return problem(
                    &field,
                    format!(
                        "LOINC codes name lab tests and observations, not {prefix} records; use a lab check with concept: \"LOINC:{}\"",
                        code.trim()
                    ),
                )
            }
            "NDC" | "ATC" => {
                return problem(
                    &field,
                    format!(
                        "{system} codes are not kept in the store's timeline; use RxNorm codes (FHIR medications), names, or ICD codes"
                    ),
                )
            }
            other => {
                return problem(
                    &field,
                    format!("code system {other:?} is not known; use ICD-9, ICD-10, SNOMED or RxNorm"),
                );
            }
        };
        let code = code.trim().replace('.', "").to_ascii_uppercase();
        if code.is_empty() || !code.chars().all(|c| c.is_ascii_alphanumeric()) {
            return problem(&field, format!("{text:?}: the code must be letters and digits"));
        }
        if matches!(system, CodeSystem::Snomed | CodeSystem::RxNorm) && !code.chars().all(|c| c.is_ascii_digit()) {
            return problem(&field, format!("{text:?}: {} codes are digits only", system.label()));
        }
        codes.push((system, code));
    }
    let mut names = Vec::new();
    for (i, name) in event.names.iter().enumerate() {
        let name = name.trim().to_lowercase();
        if name.chars().filter(|c| c.is_alphanumeric()).count() < 3 {
            return problem(&format!("{prefix}.names[{i}]"), "needs at least three letters or digits");
        }
        names.push(name);
    }
    Ok(CompiledEvent {
        kind,
        present: event.present,
        codes,
        names,
        window: window(prefix, event.within_days, event.within_months)?,
    })
}

/// Whether checks decide criteria in a screening.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChecksMode {
    /// Every criterion goes to the text strategy.
    Off,
    /// A criterion with a reviewed check is decided by it alone.
    On,
    /// Both run; where they disagree the criterion needs review.
    Both,
}

impl ChecksMode {
    pub fn parse(text: &str) -> Option<ChecksMode> {
        match text.trim().to_ascii_lowercase().as_str() {
            "off" => Some(ChecksMode::Off),
            "on" => Some(ChecksMode::On),
            "both" => Some(ChecksMode::Both),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ChecksMode::Off => "off",
            ChecksMode::On => "on",
            ChecksMode::Both => "both",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(yaml: &str) -> Result<CompiledCheck, CheckProblem> {
        let check: Check = serde_yaml::from_str(yaml).unwrap();
        check.compile()
    }

    fn problem_of(yaml: &str) -> (String, String) {
        let p = compile(yaml).unwrap_err();
        (p.field, p.message)
    }

    #[test]
    fn a_lab_check_compiles_with_its_concept_and_unit() {
        let c =
            compile("status: reviewed\nlab: {concept: HbA1c, unit: mmol/mol, between: [53, 86], within_months: 12}")
                .unwrap();
        let Predicate::Lab(lab) = c.predicate else { panic!() };
        assert_eq!(lab.concept_name, "Hemoglobin A1c");
        assert_eq!(lab.unit.name, "mmol/mol");
        assert_eq!((lab.lower, lab.upper), (Some((53.0, true)), Some((86.0, true))));
        assert_eq!(lab.window, Window::Months(12));
        assert_eq!(lab.select, Select::MostRecent);
        for concept in ["LOINC:17856-6", "4548-4"] {
            let c =
                compile(&format!("status: reviewed\nlab: {{concept: '{concept}', unit: '%', at_least: 7}}")).unwrap();
            let Predicate::Lab(lab) = c.predicate else { panic!() };
            assert_eq!(lab.concept_name, "Hemoglobin A1c", "{concept}");
        }
        let (f, m) = problem_of("status: reviewed\nlab: {concept: 'LOINC:9999-9', unit: '%', at_least: 7}");
        assert_eq!(f, "lab.concept");
        assert!(m.contains("maps to no concept"), "{m}");
    }

    #[test]
    fn problems_name_the_field() {
        let (f, m) = problem_of("status: reviewed\nlab: {concept: HbA1c, unit: mg/dL, at_least: 7}");
        assert_eq!(f, "lab.unit");
        assert_eq!(m, "\"mg/dL\" is not a unit known for Hemoglobin A1c (known: %, mmol/mol)");
        let (f, m) = problem_of("status: reviewed\nlab: {concept: Unobtainium level, unit: '%', at_least: 7}");
        assert_eq!(f, "lab.concept");
        assert!(m.contains("not a concept of the lab catalogue"), "{m}");
        let (f, _) = problem_of("status: reviewed\nlab: {concept: HbA1c, unit: '%'}");
        assert_eq!(f, "lab");
        let (f, _) = problem_of("status: reviewed\nlab: {concept: HbA1c, unit: '%', between: [9, 7]}");
        assert_eq!(f, "lab.between");
        let (f, m) = problem_of("status: reviewed\nage: {min: 18}\nsex: female");
        assert_eq!(f, "");
        assert!(m.contains("names 2 predicates (age, sex)"), "{m}");
        let (f, m) = problem_of("status: reviewed\ndiagnosis: {present: true, codes: ['LOINC:4548-4']}");
        assert_eq!(f, "diagnosis.codes[0]");
        assert!(m.contains("use a lab check"), "{m}");
        let (f, m) = problem_of("status: reviewed\nmedication: {present: true, codes: ['NDC:00904224461']}");
        assert_eq!(f, "medication.codes[0]");
        assert!(m.contains("use RxNorm codes"), "{m}");
        let (f, m) = problem_of("status: reviewed\ndiagnosis: {present: true, codes: ['SNOMED:E11']}");
        assert_eq!(f, "diagnosis.codes[0]");
        assert!(m.contains("digits only"), "{m}");
        let (f, _) = problem_of("status: reviewed\nmedication: {present: true}");
        assert_eq!(f, "medication");
        let (f, _) = problem_of("status: reviewed\nmedication: {present: true, names: [x], within_days: 3}");
        assert_eq!(f, "medication.names[0]");
        let (f, _) = problem_of("status: reviewed\nage: {min: 80, max: 18}");
        assert_eq!(f, "age");
    }

    #[test]
    fn unknown_fields_are_refused_by_the_format() {
        let e = serde_yaml::from_str::<Check>("status: reviewed\nlab: {concept: HbA1c, unit: '%', atleast: 7}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("atleast"), "{e}");
        let e = serde_yaml::from_str::<Check>("status: approved\nsex: female").unwrap_err().to_string();
        assert!(e.contains("approved"), "{e}");
    }

    #[test]
    fn codes_are_normalised() {
        let c = compile("status: proposed\ndiagnosis: {present: true, codes: ['ICD-10:E11.9', 'icd9:250'], names: [Type 2 diabetes]}")
            .unwrap();
        let Predicate::Event(e) = c.predicate else { panic!() };
        assert_eq!(e.codes, [(CodeSystem::Icd10, "E119".to_string()), (CodeSystem::Icd9, "250".to_string())]);
        assert_eq!(e.names, ["type 2 diabetes"]);
        assert_eq!(c.status, CheckStatus::Proposed);
    }
}
