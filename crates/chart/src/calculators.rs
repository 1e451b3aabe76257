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
//! 2021) and BMI.
//!
//! Every input is checked (missing, wrong type, out of a physiological
//! range, unknown field) before anything is computed; an invalid input is
//! an error naming the field, never a guess.

use chrono::NaiveDateTime;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

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
}

impl Calculator {
    pub const ALL: [Calculator; 8] = [
        Calculator::Iss,
        Calculator::RIss,
        Calculator::R2Iss,
        Calculator::HctCi,
        Calculator::Charlson,
        Calculator::Cha2ds2Vasc,
        Calculator::EgfrCkdEpi2021,
        Calculator::Bmi,
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
            Calculator::HctCi => flags(&HCT_CI.iter().map(|(n, _)| *n).collect::<Vec<_>>()),
            Calculator::Charlson => {
                let mut s = flags(&CHARLSON.iter().map(|(n, _)| *n).collect::<Vec<_>>());
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
        Calculator::HctCi => to_value(hct_ci(&parse_flags(calculator, input, &HCT_CI)?)),
        Calculator::Charlson => to_value(charlson(&parse(calculator, input)?)?),
        Calculator::Cha2ds2Vasc => to_value(cha2ds2_vasc(&parse(calculator, input)?)?),
        Calculator::EgfrCkdEpi2021 => to_value(egfr_ckd_epi_2021(&parse(calculator, input)?)?),
        Calculator::Bmi => to_value(bmi(&parse(calculator, input)?)?),
    };
    let mut out = out;
    out["calculator"] = json!(calculator.name());
    Ok(out)
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
    let iss = iss_stage(input.beta2_microglobulin_mg_l, input.albumin_g_dl);
    let mut points = match iss {
        Stage::II => 1.0,
        Stage::III => 1.5,
        _ => 0.0,
    };
    for (present, weight) in [(input.del_17p, 1.0), (input.ldh_high, 1.0), (input.t_4_14, 1.0), (input.gain_1q, 0.5)] {
        if present {
            points += weight;
        }
    }
    let stage = if points == 0.0 {
        Stage::I
    } else if points <= 1.0 {
        Stage::II
    } else if points <= 2.5 {
        Stage::III
    } else {
        Stage::IV
    };
    let rule = "ISS II 1, ISS III 1.5, del(17p) 1, high LDH 1, t(4;14) 1, 1q+ 0.5; I 0, II 0.5-1, III 1.5-2.5, IV 3-5";
    Ok(StageOutput { stage, points: Some(points), rule: format!("{rule} (ISS {iss:?})") })
}

// ---------------------------------------------------------------- HCT-CI

/// The paper's 17 HCT-CI comorbidities and their weights.
pub const HCT_CI: [(&str, u32); 17] = [
    ("arrhythmia", 1),
    ("cardiac_disease", 1),
    ("inflammatory_bowel_disease", 1),
    ("diabetes_requiring_medication", 1),
    ("cerebrovascular_disease", 1),
    ("psychiatric_disturbance", 1),
    ("hepatic_mild", 1),
    ("obesity_bmi_over_35", 1),
    ("infection", 1),
    ("rheumatologic", 2),
    ("peptic_ulcer", 2),
    ("renal_moderate_severe", 2),
    ("pulmonary_moderate", 2),
    ("prior_solid_tumour", 3),
    ("heart_valve_disease", 3),
    ("pulmonary_severe", 3),
    ("hepatic_moderate_severe", 3),
];

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreOutput {
    pub score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub risk_group: Option<String>,
    /// The items that contributed, with their points.
    pub items: Vec<(String, f64)>,
}

/// Flags by name from a JSON object whose keys must come from `table`
/// (absent keys are false).
fn parse_flags(c: Calculator, input: &Value, table: &[(&str, u32)]) -> Result<Vec<(String, u32)>, CalcError> {
    let Some(object) = input.as_object() else { return Err(calc_err(c, "input", "expected a JSON object of flags")) };
    let mut present = Vec::new();
    for (key, value) in object {
        let Some((name, weight)) = table.iter().find(|(n, _)| n == key) else {
            let known: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
            return Err(calc_err(c, key, format!("unknown item; use {}", known.join(", "))));
        };
        match value.as_bool() {
            Some(true) => present.push((name.to_string(), *weight)),
            Some(false) => {}
            None => return Err(calc_err(c, key, format!("{value} is not true or false"))),
        }
    }
    Ok(present)
}

pub fn hct_ci(present: &[(String, u32)]) -> ScoreOutput {
    let score: u32 = present.iter().map(|(_, w)| w).sum();
    let group = match score {
        0 => "low",
        1 | 2 => "intermediate",
        _ => "high",
    };
    ScoreOutput {
        score: score as f64,
        risk_group: Some(group.into()),
        items: present.iter().map(|(n, w)| (n.clone(), *w as f64)).collect(),
    }
}

// ---------------------------------------------------------------- Charlson

/// Charlson 1987 conditions and weights. Where a severe form is present
/// its mild form does not also count (diabetes, liver disease, tumour).
pub const CHARLSON: [(&str, u32); 19] = [
    ("myocardial_infarction", 1),
    ("congestive_heart_failure", 1),
    ("peripheral_vascular_disease", 1),
    ("cerebrovascular_disease", 1),
    ("dementia", 1),
    ("chronic_pulmonary_disease", 1),
    ("connective_tissue_disease", 1),
    ("peptic_ulcer_disease", 1),
    ("mild_liver_disease", 1),
    ("diabetes_uncomplicated", 1),
    ("hemiplegia", 2),
    ("moderate_severe_renal_disease", 2),
    ("diabetes_end_organ_damage", 2),
    ("any_tumour", 2),
    ("leukaemia", 2),
    ("lymphoma", 2),
    ("moderate_severe_liver_disease", 3),
    ("metastatic_solid_tumour", 6),
    ("aids", 6),
];

#[derive(Debug, Clone, Deserialize)]
pub struct CharlsonInput {
    #[serde(default)]
    pub age_years: Option<f64>,
    #[serde(flatten)]
    pub flags: serde_json::Map<String, Value>,
}

pub fn charlson(input: &CharlsonInput) -> Result<ScoreOutput, CalcError> {
    let c = Calculator::Charlson;
    let mut present = parse_flags(c, &Value::Object(input.flags.clone()), &CHARLSON)?;
    let has = |p: &[(String, u32)], n: &str| p.iter().any(|(x, _)| x == n);
    for (severe, mild) in [
        ("diabetes_end_organ_damage", "diabetes_uncomplicated"),
        ("moderate_severe_liver_disease", "mild_liver_disease"),
        ("metastatic_solid_tumour", "any_tumour"),
    ] {
        if has(&present, severe) {
            present.retain(|(n, _)| n != mild);
        }
    }
    let mut items: Vec<(String, f64)> = present.iter().map(|(n, w)| (n.clone(), *w as f64)).collect();
    if let Some(age) = input.age_years {
        check_range(c, "age_years", age, 0.0, 120.0)?;
        // Charlson 1994: one point per decade from 50 (50-59: 1 ... >= 80: 4).
        let points = if age < 50.0 { 0.0 } else { ((age - 40.0) / 10.0).floor().min(4.0) };
        if points > 0.0 {
            items.push(("age".into(), points));
        }
    }
    Ok(ScoreOutput { score: points(&items), risk_group: None, items })
}

// ---------------------------------------------------------------- CHA2DS2-VASc

/// The CHA2DS2-VASc conditions as the stored problem list names them
/// (Lip et al., Chest 2010: congestive heart failure, hypertension,
/// diabetes, prior stroke / TIA / thromboembolism, vascular disease =
/// prior myocardial infarction, peripheral artery disease or aortic
/// plaque): each input, the phrases that mark it (lower case, matched
/// inside a condition line), and phrases that do not count.
pub const CHA2DS2_VASC_CONDITIONS: [(&str, &[&str], &[&str]); 5] = [
    ("congestive_heart_failure", &["heart failure"], &[]),
    ("hypertension", &["hypertension", "hypertensive"], &["pulmonary hypertension", "ocular hypertension"]),
    ("diabetes", &["diabetes"], &["prediabetes", "gestational diabetes", "diabetes insipidus"]),
    (
        "stroke_tia_thromboembolism",
        &["stroke", "cerebral infarction", "cerebrovascular accident", "transient ischemic attack", "thromboembolism"],
        &[],
    ),
    (
        "vascular_disease",
        &[
            "myocardial infarction",
            "peripheral arterial disease",
            "peripheral artery disease",
            "peripheral vascular disease",
            "aortic plaque",
        ],
        &[],
    ),
];

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

/// The sum of the items' points; 0 (not the -0.0 an empty float sum
/// gives, which the model was shown as "score: -0.0") when none applies.
fn points(items: &[(String, f64)]) -> f64 {
    items.iter().fold(0.0, |sum, (_, p)| sum + p)
}

pub fn cha2ds2_vasc(input: &Cha2ds2VascInput) -> Result<ScoreOutput, CalcError> {
    check_range(Calculator::Cha2ds2Vasc, "age_years", input.age_years, 0.0, 120.0)?;
    let age_points = if input.age_years >= 75.0 {
        2.0
    } else if input.age_years >= 65.0 {
        1.0
    } else {
        0.0
    };
    let mut items = vec![];
    for (present, name, points) in [
        (input.congestive_heart_failure, "congestive_heart_failure", 1.0),
        (input.hypertension, "hypertension", 1.0),
        (age_points > 0.0, "age", age_points),
        (input.diabetes, "diabetes", 1.0),
        (input.stroke_tia_thromboembolism, "stroke_tia_thromboembolism", 2.0),
        (input.vascular_disease, "vascular_disease", 1.0),
        (input.female, "female", 1.0),
    ] {
        if present {
            items.push((name.to_string(), points));
        }
    }
    Ok(ScoreOutput { score: points(&items), risk_group: None, items })
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
