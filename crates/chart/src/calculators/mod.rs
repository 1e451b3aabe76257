//! Deterministic clinical calculators: stateless functions with validated
//! inputs and JSON in and out, as the agent's calculator tool calls them.
//!
//! The paper's four (Supplementary Methods, "Tool specifications"):
//! - ISS (Greipp et al., J Clin Oncol 2005) exactly as the paper states it:
//!   I when beta-2-microglobulin < 3.5 mg/L and albumin >= 3.5 g/dL, III when
//!   beta-2-microglobulin >= 5.5 mg/L, II otherwise.
//! - R-ISS (Palumbo et al., J Clin Oncol 2015): I = ISS I with no high-risk
//!   cytogenetics (del(17p), t(4;14), t(14;16)) and normal LDH; III = ISS
//!   III with high-risk cytogenetics or high LDH; II otherwise.
//! - R2-ISS: the paper does not give the weights; these are the published
//!   score of D'Agostino M, et al. "Second Revision of the International
//!   Staging System (R2-ISS) for Overall Survival in Multiple Myeloma: A
//!   European Myeloma Network (EMN) Report Within the HARMONY Project."
//!   J Clin Oncol 2022;40(29):3406-3418: ISS II 1 point, ISS III 1.5,
//!   del(17p) 1, high LDH 1, t(4;14) 1, 1q gain/amplification 0.5; groups
//!   I (0), II (0.5-1), III (1.5-2.5), IV (3-5).
//! - HCT-CI (Sorror et al., Blood 2005) as the paper defines it: 17 boolean
//!   comorbidities weighted 1, 2 or 3; risk low (0), intermediate (1-2),
//!   high (>= 3).
//!
//! Evident's additions for general-medicine records: the Charlson
//! comorbidity index (Charlson et al., J Chronic Dis 1987, with the
//! optional age points of Charlson 1994), CHA2DS2-VASc (Lip et al., Chest
//! 2010), eGFR by CKD-EPI 2021 without race (Inker et al., N Engl J Med
//! 2021), BMI, the glycaemic range of an HbA1c (normal, prediabetes,
//! diabetes; American Diabetes Association, Standards of Care in
//! Diabetes-2024) and the CKD G stage of a recorded eGFR (KDIGO 2012's
//! GFR categories).
//!
//! Every input is checked (missing, wrong type, out of a physiological
//! range, unknown field) before anything is computed; an invalid input is
//! an error naming the field, never a guess.
//!
//! The weighted items, age points, groups and condition phrases are data,
//! validated when first read ([`tables`], `data/calculator_tables.json`);
//! the formulas are here.

pub mod tables;

use chrono::NaiveDateTime;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub use tables::CalculatorTables;

/// A calculator the agent may call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Calculator {
    #[serde(rename = "iss")]
    Iss,
    #[serde(rename = "r-iss")]
    RIss,
    #[serde(rename = "r2-iss")]
    R2Iss,
    #[serde(rename = "hct-ci")]
    HctCi,
    #[serde(rename = "charlson")]
    Charlson,
    #[serde(rename = "cha2ds2-vasc")]
    Cha2ds2Vasc,
    #[serde(rename = "egfr-ckd-epi-2021")]
    EgfrCkdEpi2021,
    #[serde(rename = "bmi")]
    Bmi,
    #[serde(rename = "glycaemic-range")]
    GlycaemicRange,
    #[serde(rename = "ckd-g-stage")]
    CkdGStage,
}

impl Calculator {
    pub const ALL: [Calculator; 10] = [
        Calculator::Iss,
        Calculator::RIss,
        Calculator::R2Iss,
        Calculator::HctCi,
        Calculator::Charlson,
        Calculator::Cha2ds2Vasc,
        Calculator::EgfrCkdEpi2021,
        Calculator::Bmi,
        Calculator::GlycaemicRange,
        Calculator::CkdGStage,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Calculator::Iss => "iss",
            Calculator::RIss => "r-iss",
            Calculator::R2Iss => "r2-iss",
            Calculator::HctCi => "hct-ci",
            Calculator::Charlson => "charlson",
            Calculator::Cha2ds2Vasc => "cha2ds2-vasc",
            Calculator::EgfrCkdEpi2021 => "egfr-ckd-epi-2021",
            Calculator::Bmi => "bmi",
            Calculator::GlycaemicRange => "glycaemic-range",
            Calculator::CkdGStage => "ckd-g-stage",
        }
    }

    pub fn from_name(name: &str) -> Option<Calculator> {
        Calculator::ALL.into_iter().find(|c| c.name() == name.trim().to_lowercase())
    }

    /// How far back (days before the reference date) a lab or finding may
    /// be to count as an input; older is missing. The paper's windows:
    /// labs 90 days for the ISS family, HCT-CI comorbidities 365 days
    /// (ECOG's 180 days is [`ECOG_LOOKBACK_DAYS`]).
    pub fn lookback_days(self) -> Option<i64> {
        match self {
            Calculator::Iss | Calculator::RIss | Calculator::R2Iss => Some(90),
            Calculator::HctCi => Some(365),
            _ => None,
        }
    }

    /// The JSON schema of the calculator's input. Numbers are not bounded
    /// here: bounds of 0 to 1,000 (against an albumin of a thousand zeros
    /// that a 0.5B plan once wrote) changed the embedded model's ISS plan
    /// on the example myeloma record so that it lost its calculator call;
    /// the calculator checks each value's range itself.
    pub fn input_schema(self) -> Value {
        let num = |d: &str| json!({"type": "number", "description": d});
        let flag = json!({"type": "boolean"});
        let flags = |names: &[&str]| {
            let props: serde_json::Map<String, Value> = names.iter().map(|n| (n.to_string(), flag.clone())).collect();
            json!({"type": "object", "properties": props, "additionalProperties": false})
        };
        match self {
            Calculator::Iss => json!({"type": "object", "properties": {
                "beta2_microglobulin_mg_l": num("serum beta-2-microglobulin, mg/L"),
                "albumin_g_dl": num("serum albumin, g/dL")},
                "required": ["beta2_microglobulin_mg_l", "albumin_g_dl"], "additionalProperties": false}),
            Calculator::RIss => json!({"type": "object", "properties": {
                "beta2_microglobulin_mg_l": num("mg/L"), "albumin_g_dl": num("g/dL"),
                "ldh_high": flag, "del_17p": flag, "t_4_14": flag, "t_14_16": flag},
                "required": ["beta2_microglobulin_mg_l", "albumin_g_dl", "ldh_high", "del_17p", "t_4_14", "t_14_16"],
                "additionalProperties": false}),
            Calculator::R2Iss => json!({"type": "object", "properties": {
                "beta2_microglobulin_mg_l": num("mg/L"), "albumin_g_dl": num("g/dL"),
                "ldh_high": flag, "del_17p": flag, "t_4_14": flag, "gain_1q": flag},
                "required": ["beta2_microglobulin_mg_l", "albumin_g_dl", "ldh_high", "del_17p", "t_4_14", "gain_1q"],
                "additionalProperties": false}),
            Calculator::HctCi => flags(&item_names(&CalculatorTables::builtin().hct_ci.items)),
            Calculator::Charlson => {
                let mut s = flags(&item_names(&CalculatorTables::builtin().charlson.items));
                s["properties"]["age_years"] = num("optional: adds the age points of Charlson 1994");
                s
            }
            Calculator::Cha2ds2Vasc => json!({"type": "object", "properties": {
                "age_years": num("years"), "female": flag, "congestive_heart_failure": flag, "hypertension": flag,
                "diabetes": flag, "stroke_tia_thromboembolism": flag, "vascular_disease": flag},
                "required": ["age_years", "female"], "additionalProperties": false}),
            Calculator::EgfrCkdEpi2021 => json!({"type": "object", "properties": {
                "creatinine_mg_dl": num("serum creatinine, mg/dL"), "age_years": num("years"), "female": flag},
                "required": ["creatinine_mg_dl", "age_years", "female"], "additionalProperties": false}),
            Calculator::Bmi => json!({"type": "object", "properties": {
                "weight_kg": num("kg"), "height_m": num("m")},
                "required": ["weight_kg", "height_m"], "additionalProperties": false}),
            Calculator::GlycaemicRange => json!({"type": "object", "properties": {
                "hba1c_percent": num("HbA1c, % (NGSP)")},
                "required": ["hba1c_percent"], "additionalProperties": false}),
            Calculator::CkdGStage => json!({"type": "object", "properties": {
                "egfr_ml_min_1_73m2": num("recorded eGFR, mL/min/1.73 m2")},
                "required": ["egfr_ml_min_1_73m2"], "additionalProperties": false}),
        }
    }
}

/// The paper's lookback for a documented ECOG performance status.
pub const ECOG_LOOKBACK_DAYS: i64 = 180;

/// An input that does not validate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{calculator}: {field}: {message}")]
pub struct CalcError {
    pub calculator: &'static str,
    pub field: String,
    pub message: String,
}

fn calc_err(c: Calculator, field: &str, message: impl Into<String>) -> CalcError {
    CalcError { calculator: c.name(), field: field.to_string(), message: message.into() }
}

/// Runs `calculator` on a JSON input and returns its JSON output.
pub fn calculate(calculator: Calculator, input: &Value) -> Result<Value, CalcError> {
    let out = match calculator {
        Calculator::Iss => to_value(iss(&parse(calculator, input)?)?),
        Calculator::RIss => to_value(r_iss(&parse(calculator, input)?)?),
        Calculator::R2Iss => to_value(r2_iss(&parse(calculator, input)?)?),
        Calculator::HctCi => {
            to_value(hct_ci(&parse_flags(calculator, input, &CalculatorTables::builtin().hct_ci.items)?))
        }
        Calculator::Charlson => to_value(charlson(&parse(calculator, input)?)?),
        Calculator::Cha2ds2Vasc => to_value(cha2ds2_vasc(&parse(calculator, input)?)?),
        Calculator::EgfrCkdEpi2021 => to_value(egfr_ckd_epi_2021(&parse(calculator, input)?)?),
        Calculator::Bmi => to_value(bmi(&parse(calculator, input)?)?),
        Calculator::GlycaemicRange => to_value(glycaemic_range(&parse(calculator, input)?)?),
        Calculator::CkdGStage => to_value(ckd_g_stage(&parse(calculator, input)?)?),
    };
    let mut out = out;
    out["calculator"] = json!(calculator.name());
    Ok(out)
}

fn item_names(items: &[tables::Item]) -> Vec<&str> {
    items.iter().map(|i| i.name.as_str()).collect()
}

fn to_value<T: Serialize>(v: T) -> Value {
    serde_json::to_value(v).expect("calculator outputs are plain data")
}

fn parse<T: DeserializeOwned>(c: Calculator, input: &Value) -> Result<T, CalcError> {
    serde_json::from_value(input.clone()).map_err(|e| {
        let message = e.to_string();
        let field = message.split('`').nth(1).unwrap_or("input").to_string();
        calc_err(c, &field, message)
    })
}

#[track_caller]
fn check_range(c: Calculator, field: &str, value: f64, low: f64, high: f64) -> Result<(), CalcError> {
    if !value.is_finite() || value < low || value > high {
        return Err(calc_err(c, field, format!("{value} is outside the plausible range {low}..={high}")));
    }
    Ok(())
}

// ---------------------------------------------------------------- ISS family

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IssInput {
    pub beta2_microglobulin_mg_l: f64,
    pub albumin_g_dl: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stage {
    I,
    II,
    III,
    IV,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageOutput {
    pub stage: Stage,
    /// R2-ISS only: the points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub points: Option<f64>,
    pub rule: String,
}

fn check_iss(c: Calculator, b2m: f64, albumin: f64) -> Result<(), CalcError> {
    check_range(c, "beta2_microglobulin_mg_l", b2m, 0.0, 100.0)?;
    // Albumin above 10 g/dL is almost surely g/L given as g/dL.
    check_range(c, "albumin_g_dl", albumin, 0.5, 10.0)
}

fn iss_stage(b2m: f64, albumin: f64) -> Stage {
    if b2m < 3.5 && albumin >= 3.5 {
        Stage::I
    } else if b2m >= 5.5 {
        Stage::III
    } else {
        Stage::II
    }
}

pub fn iss(input: &IssInput) -> Result<StageOutput, CalcError> {
    check_iss(Calculator::Iss, input.beta2_microglobulin_mg_l, input.albumin_g_dl)?;
    let stage = iss_stage(input.beta2_microglobulin_mg_l, input.albumin_g_dl);
    let rule = match stage {
        Stage::I => "beta-2-microglobulin < 3.5 mg/L and albumin >= 3.5 g/dL",
        Stage::III => "beta-2-microglobulin >= 5.5 mg/L",
        _ => "neither stage I nor stage III",
    };
    Ok(StageOutput { stage, points: None, rule: rule.into() })
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RIssInput {
    pub beta2_microglobulin_mg_l: f64,
    pub albumin_g_dl: f64,
    pub ldh_high: bool,
    pub del_17p: bool,
    pub t_4_14: bool,
    pub t_14_16: bool,
}

pub fn r_iss(input: &RIssInput) -> Result<StageOutput, CalcError> {
    check_iss(Calculator::RIss, input.beta2_microglobulin_mg_l, input.albumin_g_dl)?;
    let iss = iss_stage(input.beta2_microglobulin_mg_l, input.albumin_g_dl);
    let high_risk = input.del_17p || input.t_4_14 || input.t_14_16;
    let (stage, rule) = match iss {
        Stage::I if !high_risk && !input.ldh_high => (Stage::I, "ISS I, standard-risk cytogenetics, normal LDH"),
        Stage::III if high_risk || input.ldh_high => (Stage::III, "ISS III with high-risk cytogenetics or high LDH"),
        _ => (Stage::II, "neither R-ISS I nor R-ISS III"),
    };
    Ok(StageOutput { stage, points: None, rule: format!("{rule} (ISS {iss:?})") })
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct R2IssInput {
    pub beta2_microglobulin_mg_l: f64,
    pub albumin_g_dl: f64,
    pub ldh_high: bool,
    pub del_17p: bool,
    pub t_4_14: bool,
    pub gain_1q: bool,
}

/// R2-ISS, D'Agostino et al., J Clin Oncol 2022;40:3406-3418 (Table 2 and
/// the risk groups of the abstract).
pub fn r2_iss(input: &R2IssInput) -> Result<StageOutput, CalcError> {
    check_iss(Calculator::R2Iss, input.beta2_microglobulin_mg_l, input.albumin_g_dl)?;
    let table = &CalculatorTables::builtin().r2_iss;
    let iss = iss_stage(input.beta2_microglobulin_mg_l, input.albumin_g_dl);
    let iss_points = table.iss_points.iter().filter(|s| s.stage == iss).map(|s| s.points).sum::<f64>();
    let present = present_items(&table.items, |name| match name {
        "del_17p" => Some(input.del_17p),
        "ldh_high" => Some(input.ldh_high),
        "t_4_14" => Some(input.t_4_14),
        "gain_1q" => Some(input.gain_1q),
        _ => None,
    });
    let points = iss_points + points(&present);
    let group = table.groups.iter().find(|g| points <= g.up_to).or(table.groups.last());
    let stage = group.map_or(Stage::IV, |g| g.stage);
    let weights: Vec<String> = table
        .iss_points
        .iter()
        .map(|s| format!("ISS {:?} {}", s.stage, s.points))
        .chain(table.items.iter().map(|i| format!("{} {}", i.name, i.points)))
        .collect();
    let groups: Vec<String> = table.groups.iter().map(|g| format!("{:?} up to {}", g.stage, g.up_to)).collect();
    let rule = format!("{}; groups {}", weights.join(", "), groups.join(", "));
    Ok(StageOutput { stage, points: Some(points), rule: format!("{rule} (ISS {iss:?})") })
}

// ---------------------------------------------------------------- HCT-CI

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreOutput {
    pub score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk_group: Option<String>,
    /// The items that contributed, with their points.
    pub items: Vec<(String, f64)>,
}

/// The items of `table` that a JSON object of flags marks true (absent keys
/// are false; a key not in the table is an error listing the table's).
fn parse_flags(c: Calculator, input: &Value, table: &[tables::Item]) -> Result<Vec<(String, f64)>, CalcError> {
    let Some(object) = input.as_object() else { return Err(calc_err(c, "input", "expected a JSON object of flags")) };
    let mut present = Vec::new();
    for (key, value) in object {
        let Some(item) = table.iter().find(|i| i.name == *key) else {
            return Err(calc_err(c, key, format!("unknown item; use {}", item_names(table).join(", "))));
        };
        match value.as_bool() {
            Some(true) => present.push((item.name.clone(), item.points)),
            Some(false) => {}
            None => return Err(calc_err(c, key, format!("{value} is not true or false"))),
        }
    }
    Ok(present)
}

/// HCT-CI: the present comorbidities' points and the risk group the sum
/// reaches (the tables' `hct_ci`).
pub fn hct_ci(present: &[(String, f64)]) -> ScoreOutput {
    let score = points(present);
    let groups = &CalculatorTables::builtin().hct_ci.risk_groups;
    let group = groups.iter().rev().find(|g| score >= g.from).map(|g| g.name.clone());
    ScoreOutput { score, risk_group: group, items: present.to_vec() }
}

// ---------------------------------------------------------------- Charlson

#[derive(Debug, Clone, Deserialize)]
pub struct CharlsonInput {
    #[serde(default)]
    pub age_years: Option<f64>,
    #[serde(flatten)]
    pub flags: serde_json::Map<String, Value>,
}

/// Charlson 1987 with the optional age points of 1994 (the tables'
/// `charlson`). Where a severe form is present its mild form does not also
/// count (diabetes, liver disease, tumour).
pub fn charlson(input: &CharlsonInput) -> Result<ScoreOutput, CalcError> {
    let c = Calculator::Charlson;
    let table = &CalculatorTables::builtin().charlson;
    let mut items = parse_flags(c, &Value::Object(input.flags.clone()), &table.items)?;
    for rule in &table.supersedes {
        if items.iter().any(|(n, _)| *n == rule.severe) {
            items.retain(|(n, _)| *n != rule.mild);
        }
    }
    if let Some(age) = input.age_years {
        check_range(c, "age_years", age, 0.0, 120.0)?;
    }
    Ok(scored_with_age(items, &table.age_points, input.age_years))
}

/// The items with the age band's points after them (none below the first
/// band, or without an age), and their sum.
fn scored_with_age(mut items: Vec<(String, f64)>, bands: &[tables::AgeBand], age: Option<f64>) -> ScoreOutput {
    let age_points = age.map_or(0.0, |a| tables::age_points(bands, a));
    if age_points > 0.0 {
        items.push(("age".to_string(), age_points));
    }
    ScoreOutput { score: points(&items), risk_group: None, items }
}

// ---------------------------------------------------------------- CHA2DS2-VASc

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cha2ds2VascInput {
    pub age_years: f64,
    pub female: bool,
    #[serde(default)]
    pub congestive_heart_failure: bool,
    #[serde(default)]
    pub hypertension: bool,
    #[serde(default)]
    pub diabetes: bool,
    #[serde(default)]
    pub stroke_tia_thromboembolism: bool,
    #[serde(default)]
    pub vascular_disease: bool,
}

/// The table's items whose typed input `flag` reads true, with their
/// points, in table order. Loading the tables checks that every item is an
/// input of its calculator, so `flag` knows every name.
fn present_items(items: &[tables::Item], flag: impl Fn(&str) -> Option<bool>) -> Vec<(String, f64)> {
    items
        .iter()
        .filter(|item| {
            flag(&item.name).unwrap_or_else(|| unreachable!("validated: {} is an input of its calculator", item.name))
        })
        .map(|item| (item.name.clone(), item.points))
        .collect()
}

/// The sum of the items' points; 0 (not the -0.0 an empty float sum
/// gives, which the model was shown as "score: -0.0") when none applies.
fn points(items: &[(String, f64)]) -> f64 {
    items.iter().fold(0.0, |sum, (_, p)| sum + p)
}

/// CHA2DS2-VASc (the tables' `cha2ds2_vasc`): each present item's points,
/// then the age points.
pub fn cha2ds2_vasc(input: &Cha2ds2VascInput) -> Result<ScoreOutput, CalcError> {
    check_range(Calculator::Cha2ds2Vasc, "age_years", input.age_years, 0.0, 120.0)?;
    let table = &CalculatorTables::builtin().cha2ds2_vasc;
    let items = present_items(&table.items, |name| match name {
        "congestive_heart_failure" => Some(input.congestive_heart_failure),
        "hypertension" => Some(input.hypertension),
        "diabetes" => Some(input.diabetes),
        "stroke_tia_thromboembolism" => Some(input.stroke_tia_thromboembolism),
        "vascular_disease" => Some(input.vascular_disease),
        "female" => Some(input.female),
        _ => None,
    });
    Ok(scored_with_age(items, &table.age_points, Some(input.age_years)))
}

// ---------------------------------------------------------------- eGFR, BMI

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgfrInput {
    pub creatinine_mg_dl: f64,
    pub age_years: f64,
    pub female: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueOutput {
    pub value: f64,
    pub unit: String,
    /// The value rounded as it is reported.
    pub reported: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
}

/// CKD-EPI 2021 (Inker et al., N Engl J Med 2021;385:1737-1749):
/// 142 x min(Scr/k, 1)^a x max(Scr/k, 1)^-1.200 x 0.9938^age x 1.012 [female],
/// k = 0.7 (female) or 0.9 (male), a = -0.241 (female) or -0.302 (male).
pub fn egfr_ckd_epi_2021(input: &EgfrInput) -> Result<ValueOutput, CalcError> {
    let c = Calculator::EgfrCkdEpi2021;
    check_range(c, "creatinine_mg_dl", input.creatinine_mg_dl, 0.1, 30.0)?;
    check_range(c, "age_years", input.age_years, 18.0, 120.0)?;
    let (kappa, alpha, sex) = if input.female { (0.7, -0.241, 1.012) } else { (0.9, -0.302, 1.0) };
    let ratio = input.creatinine_mg_dl / kappa;
    let value =
        142.0 * ratio.min(1.0).powf(alpha) * ratio.max(1.0).powf(-1.200) * 0.9938f64.powf(input.age_years) * sex;
    let category = match value {
        v if v >= 90.0 => "G1",
        v if v >= 60.0 => "G2",
        v if v >= 45.0 => "G3a",
        v if v >= 30.0 => "G3b",
        v if v >= 15.0 => "G4",
        _ => "G5",
    };
    Ok(ValueOutput { value, unit: "mL/min/1.73m2".into(), reported: value.round(), category: Some(category.into()) })
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BmiInput {
    pub weight_kg: f64,
    pub height_m: f64,
}

pub fn bmi(input: &BmiInput) -> Result<ValueOutput, CalcError> {
    check_range(Calculator::Bmi, "weight_kg", input.weight_kg, 1.0, 500.0)?;
    check_range(Calculator::Bmi, "height_m", input.height_m, 0.3, 2.6)?;
    let value = input.weight_kg / (input.height_m * input.height_m);
    let category = match value {
        v if v < 18.5 => "underweight",
        v if v < 25.0 => "normal",
        v if v < 30.0 => "overweight",
        _ => "obese",
    };
    Ok(ValueOutput {
        value,
        unit: "kg/m2".into(),
        reported: (value * 10.0).round() / 10.0,
        category: Some(category.into()),
    })
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlycaemicRangeInput {
    pub hba1c_percent: f64,
}

/// The glycaemic range an HbA1c (% NGSP) falls in, by the groups of
/// `data/calculator_tables.json` (the ADA's: normal below 5.7%,
/// prediabetes 5.7-6.4%, diabetes 6.5% or more).
pub fn glycaemic_range(input: &GlycaemicRangeInput) -> Result<ValueOutput, CalcError> {
    // Below 3% or above 20% is no HbA1c in per cent (an IFCC mmol/mol value
    // written as per cent is 20 or more).
    check_range(Calculator::GlycaemicRange, "hba1c_percent", input.hba1c_percent, 3.0, 20.0)?;
    let category = CalculatorTables::builtin().glycaemic_range.group_of(input.hba1c_percent);
    Ok(ValueOutput {
        value: input.hba1c_percent,
        unit: "%".into(),
        reported: (input.hba1c_percent * 10.0).round() / 10.0,
        category: Some(category.into()),
    })
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CkdGStageInput {
    pub egfr_ml_min_1_73m2: f64,
}

/// The CKD G stage (KDIGO 2012's GFR category) of a recorded eGFR, by the
/// groups of `data/calculator_tables.json`. The eGFR is the record's own
/// (a laboratory's report), not one computed from creatinine, which
/// `egfr-ckd-epi-2021` does.
pub fn ckd_g_stage(input: &CkdGStageInput) -> Result<ValueOutput, CalcError> {
    check_range(Calculator::CkdGStage, "egfr_ml_min_1_73m2", input.egfr_ml_min_1_73m2, 0.0, 250.0)?;
    let category = CalculatorTables::builtin().ckd_g_stage.group_of(input.egfr_ml_min_1_73m2);
    Ok(ValueOutput {
        value: input.egfr_ml_min_1_73m2,
        unit: "mL/min/1.73m2".into(),
        reported: input.egfr_ml_min_1_73m2.round(),
        category: Some(category.into()),
    })
}

/// The most recent of `values` (time, value) dated on or before `as_of`
/// and no more than `days` before it; `None` when there is none, which a
/// calculator input treats as missing.
pub fn latest_within<T: Clone>(
    values: &[(NaiveDateTime, T)],
    as_of: NaiveDateTime,
    days: i64,
) -> Option<(NaiveDateTime, T)> {
    let earliest = as_of - chrono::Duration::days(days);
    values.iter().filter(|(t, _)| *t <= as_of && *t >= earliest).max_by_key(|(t, _)| *t).cloned()
}
