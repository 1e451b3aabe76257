//! The calculators against worked examples: the paper's ISS/R-ISS rules at
//! their cut-offs, R2-ISS point sums from D'Agostino et al. (J Clin Oncol
//! 2022), HCT-CI with the paper's weights, Charlson 1987/1994,
//! CHA2DS2-VASc (Lip 2010), CKD-EPI 2021 (Inker 2021) and BMI; their
//! input validation; and how a sentence is read for a numeric input.

use chrono::NaiveDate;
use evident_chart::calculators::tables::TablesError;
use evident_chart::calculators::{calculate, latest_within, Calculator, CalculatorTables};
use serde_json::{json, Value};

#[track_caller]
fn check(c: Calculator, input: Value, field: &str, expected: Value) {
    let out = calculate(c, &input).unwrap_or_else(|e| panic!("{input}: {e}"));
    assert_eq!(out[field], expected, "{} {input} -> {out}", c.name());
}

#[test]
fn iss_follows_the_papers_cut_offs() {
    check(Calculator::Iss, json!({"beta2_microglobulin_mg_l": 3.4, "albumin_g_dl": 3.5}), "stage", json!("I"));
    check(Calculator::Iss, json!({"beta2_microglobulin_mg_l": 3.4, "albumin_g_dl": 3.4}), "stage", json!("II"));
    check(Calculator::Iss, json!({"beta2_microglobulin_mg_l": 3.5, "albumin_g_dl": 4.0}), "stage", json!("II"));
    check(Calculator::Iss, json!({"beta2_microglobulin_mg_l": 5.4, "albumin_g_dl": 2.0}), "stage", json!("II"));
    check(Calculator::Iss, json!({"beta2_microglobulin_mg_l": 5.5, "albumin_g_dl": 4.5}), "stage", json!("III"));
}

#[test]
fn r_iss_needs_both_iss_and_risk() {
    let base = |b2m: f64, ldh: bool, del17p: bool| json!({"beta2_microglobulin_mg_l": b2m, "albumin_g_dl": 4.0, "ldh_high": ldh, "del_17p": del17p, "t_4_14": false, "t_14_16": false});
    check(Calculator::RIss, base(2.0, false, false), "stage", json!("I"));
    check(Calculator::RIss, base(2.0, true, false), "stage", json!("II"));
    check(Calculator::RIss, base(2.0, false, true), "stage", json!("II"));
    check(Calculator::RIss, base(6.0, false, false), "stage", json!("II"));
    check(Calculator::RIss, base(6.0, true, false), "stage", json!("III"));
    check(Calculator::RIss, base(6.0, false, true), "stage", json!("III"));
}

#[test]
fn r2_iss_points_and_groups_of_dagostino_2022() {
    let input = |b2m: f64, ldh: bool, del17p: bool, t414: bool, q1: bool| json!({"beta2_microglobulin_mg_l": b2m, "albumin_g_dl": 4.0, "ldh_high": ldh, "del_17p": del17p, "t_4_14": t414, "gain_1q": q1});
    // (ISS I, nothing) = 0 -> I; 1q alone 0.5 -> II; ISS II alone 1 -> II;
    // ISS III alone 1.5 -> III; ISS II + 1q + t(4;14) = 2.5 -> III;
    // ISS III + del(17p) + high LDH = 3.5 -> IV; everything = 5 -> IV.
    for (b2m, ldh, del, t414, q1, points, stage) in [
        (2.0, false, false, false, false, 0.0, "I"),
        (2.0, false, false, false, true, 0.5, "II"),
        (4.0, false, false, false, false, 1.0, "II"),
        (6.0, false, false, false, false, 1.5, "III"),
        (4.0, false, false, true, true, 2.5, "III"),
        (2.0, true, true, true, false, 3.0, "IV"),
        (6.0, true, true, false, false, 3.5, "IV"),
        (6.0, true, true, true, true, 5.0, "IV"),
    ] {
        let out = calculate(Calculator::R2Iss, &input(b2m, ldh, del, t414, q1)).unwrap();
        assert_eq!((out["points"].as_f64().unwrap(), out["stage"].as_str().unwrap()), (points, stage), "{out}");
    }
}

#[test]
fn hct_ci_weights_and_risk_groups_as_the_paper_defines_them() {
    check(Calculator::HctCi, json!({}), "risk_group", json!("low"));
    check(Calculator::HctCi, json!({"arrhythmia": true, "infection": true}), "score", json!(2.0));
    check(Calculator::HctCi, json!({"arrhythmia": true, "infection": true}), "risk_group", json!("intermediate"));
    check(Calculator::HctCi, json!({"peptic_ulcer": true, "diabetes_requiring_medication": true}), "score", json!(3.0));
    check(Calculator::HctCi, json!({"heart_valve_disease": true, "arrhythmia": false}), "risk_group", json!("high"));
    // All 17 items: 9 x 1 + 4 x 2 + 4 x 3 = 29.
    let all: serde_json::Map<String, Value> =
        CalculatorTables::builtin().hct_ci.items.iter().map(|i| (i.name.clone(), json!(true))).collect();
    check(Calculator::HctCi, Value::Object(all), "score", json!(29.0));
}

#[test]
fn charlson_counts_the_severe_form_only_and_age_points() {
    // Diabetes with end-organ damage (2) supersedes uncomplicated (1); CHF 1;
    // metastatic tumour 6 supersedes any tumour; age 72 adds 3 (Charlson 1994).
    check(
        Calculator::Charlson,
        json!({"diabetes_uncomplicated": true, "diabetes_end_organ_damage": true, "congestive_heart_failure": true,
               "any_tumour": true, "metastatic_solid_tumour": true, "age_years": 72}),
        "score",
        json!(12.0),
    );
    check(Calculator::Charlson, json!({"age_years": 49}), "score", json!(0.0));
    check(Calculator::Charlson, json!({"age_years": 91, "dementia": true}), "score", json!(5.0));
}

#[test]
fn cha2ds2_vasc_worked_examples() {
    // A 32-year-old man with nothing: 0, written "0.0" (an empty float sum
    // is -0.0, which the model was once shown).
    let none = calculate(Calculator::Cha2ds2Vasc, &json!({"age_years": 32, "female": false})).unwrap();
    assert_eq!(none["score"].to_string(), "0.0", "{none}");
    let none = calculate(Calculator::Charlson, &json!({"age_years": 49})).unwrap();
    assert_eq!(none["score"].to_string(), "0.0", "{none}");
    // A 76-year-old woman with hypertension and diabetes: 2 + 1 + 1 + 1 = 5.
    check(
        Calculator::Cha2ds2Vasc,
        json!({"age_years": 76, "female": true, "hypertension": true, "diabetes": true}),
        "score",
        json!(5.0),
    );
    // A 66-year-old man with prior stroke and heart failure: 1 + 2 + 1 = 4.
    check(
        Calculator::Cha2ds2Vasc,
        json!({"age_years": 66, "female": false, "stroke_tia_thromboembolism": true, "congestive_heart_failure": true}),
        "score",
        json!(4.0),
    );
    check(Calculator::Cha2ds2Vasc, json!({"age_years": 40, "female": false}), "score", json!(0.0));
}

/// The record's condition lines that mark a CHA2DS2-VASc input: a phrase
/// after "without" marks nothing (ICD-9 descriptions), "hypertensive"
/// conditions mark hypertension, pulmonary hypertension does not, and a
/// peripheral vascular angioplasty marks vascular disease (MIMIC-IV
/// diagnoses of the development bank's G31 questions).
#[test]
fn cha2ds2_vasc_conditions_are_read_from_icd_descriptions() {
    let tables = CalculatorTables::builtin();
    let marks = |line: &str| -> Vec<&str> {
        let lower = line.to_lowercase();
        tables.cha2ds2_vasc.conditions.iter().filter(|c| c.shown_in(&lower)).map(|c| c.input.as_str()).collect()
    };
    let carotid = "ICD-9 43310: Occlusion and stenosis of carotid artery without mention of cerebral infarction (#7)";
    assert!(marks(carotid).is_empty(), "{:?}", marks(carotid));
    let infarct = "ICD-9 43491: Cerebral artery occlusion, unspecified with cerebral infarction (#2)";
    assert_eq!(marks(infarct), ["stroke_tia_thromboembolism"]);
    let coronary = "ICD-10 I2510: Atherosclerotic heart disease of native coronary artery without angina pectoris";
    assert_eq!(marks(coronary), ["vascular_disease"]);
    assert_eq!(marks("ICD-9 40390: Hypertensive chronic kidney disease, unspecified"), ["hypertension"]);
    assert!(marks("ICD-10 I272: Other secondary pulmonary hypertension").is_empty());
    let angioplasty = "ICD-10 Z95820: Peripheral vascular angioplasty status with implants and grafts";
    assert_eq!(marks(angioplasty), ["vascular_disease"]);
    let diabetes = "ICD-9 25000: Diabetes mellitus without mention of complication, type II or unspecified type";
    assert_eq!(marks(diabetes), ["diabetes"]);
}

/// Where a record has no problem list, a note's clause affirms a condition
/// where no negation cue (data, whole words) precedes its mark in the
/// clause: a cue later in the clause ("diabetes, no retinopathy") and one
/// in another clause do not deny it; a relative's condition is not the
/// patient's, nor is a stroke the anticoagulant is to prevent.
#[test]
fn a_notes_clause_affirms_a_condition_only_where_no_negation_precedes_it() {
    let tables = CalculatorTables::builtin();
    let affirmed = |text: &str| -> Vec<&str> {
        let lower = text.to_lowercase();
        let v = &tables.cha2ds2_vasc;
        v.conditions.iter().filter(|c| c.affirmed_in(&lower, &v.negations)).map(|c| c.input.as_str()).collect()
    };
    let consult = "Past history: breast cancer in 2009; type 2 diabetes on metformin; hypertension on ramipril.";
    assert_eq!(affirmed(consult), ["hypertension", "diabetes"]);
    assert!(affirmed("No arrhythmia, no heart failure, no stroke.").is_empty());
    assert!(affirmed("She denies chest pain, diabetes or a transient ischemic attack.").is_empty());
    assert_eq!(affirmed("Type 2 diabetes, no retinopathy."), ["diabetes"]);
    assert_eq!(affirmed("No chest pain. Known hypertension."), ["hypertension"]);
    assert!(affirmed("Family history of stroke and myocardial infarction (father).").is_empty());
    assert!(affirmed("Apixaban started for stroke prevention.").is_empty());
    assert_eq!(affirmed("Echo: pulmonary hypertension."), Vec::<&str>::new());
    // "no" is a word, not a part of one: "known" and "nocturnal" deny nothing.
    assert_eq!(affirmed("Nocturnal hypertension, known for years."), ["hypertension"]);
}

#[test]
fn egfr_ckd_epi_2021_worked_examples() {
    // By hand from the published equation: 50-year-old man, creatinine 1.0:
    // 142 x (1/0.9)^-1.2 x 0.9938^50 = 91.7; 60-year-old woman, 0.8:
    // 142 x (0.8/0.7)^-1.2 x 0.9938^60 x 1.012 = 84.3; 70-year-old woman,
    // 0.6 (below kappa): 142 x (0.6/0.7)^-0.241 x 0.9938^70 x 1.012 = 96.5.
    for (cr, age, female, expected) in [(1.0, 50.0, false, 91.7), (0.8, 60.0, true, 84.3), (0.6, 70.0, true, 96.5)] {
        let out =
            calculate(Calculator::EgfrCkdEpi2021, &json!({"creatinine_mg_dl": cr, "age_years": age, "female": female}))
                .unwrap();
        let v = out["value"].as_f64().unwrap();
        assert!((v - expected).abs() < 0.05, "{cr} {age} {female}: {v}");
    }
    check(
        Calculator::EgfrCkdEpi2021,
        json!({"creatinine_mg_dl": 4.0, "age_years": 70, "female": false}),
        "category",
        json!("G4"),
    );
}

#[test]
fn bmi_worked_example() {
    check(Calculator::Bmi, json!({"weight_kg": 70, "height_m": 1.75}), "reported", json!(22.9));
    check(Calculator::Bmi, json!({"weight_kg": 110, "height_m": 1.70}), "category", json!("obese"));
}

/// The ADA's A1C criteria: prediabetes from 5.7%, diabetes from 6.5%;
/// each bound belongs to the range above it.
#[test]
fn glycaemic_range_of_an_hba1c_at_each_bound() {
    for (hba1c, range) in [
        (4.8, "normal"),
        (5.69, "normal"),
        (5.7, "prediabetes"),
        (6.4, "prediabetes"),
        (6.5, "diabetes"),
        (9.1, "diabetes"),
    ] {
        check(Calculator::GlycaemicRange, json!({ "hba1c_percent": hba1c }), "category", json!(range));
    }
    check(Calculator::GlycaemicRange, json!({"hba1c_percent": 6.04}), "reported", json!(6.0));
}

/// KDIGO's GFR categories: each lower bound belongs to its category.
#[test]
fn ckd_g_stage_of_a_recorded_egfr_at_each_bound() {
    for (egfr, stage) in [
        (120.0, "G1"),
        (90.0, "G1"),
        (89.73, "G2"),
        (60.0, "G2"),
        (59.9, "G3a"),
        (45.0, "G3a"),
        (44.0, "G3b"),
        (30.0, "G3b"),
        (19.84, "G4"),
        (15.0, "G4"),
        (14.9, "G5"),
        (4.0, "G5"),
    ] {
        check(Calculator::CkdGStage, json!({ "egfr_ml_min_1_73m2": egfr }), "category", json!(stage));
    }
}

#[track_caller]
fn check_refused(c: Calculator, input: Value, field: &str) {
    let e = calculate(c, &input).unwrap_err();
    assert_eq!(e.field, field, "{e}");
}

#[test]
fn invalid_inputs_are_refused_naming_the_field() {
    check_refused(Calculator::Iss, json!({"albumin_g_dl": 3.0}), "beta2_microglobulin_mg_l");
    // Albumin in g/L given as g/dL.
    check_refused(Calculator::Iss, json!({"beta2_microglobulin_mg_l": 3.0, "albumin_g_dl": 38}), "albumin_g_dl");
    check_refused(Calculator::Iss, json!({"beta2_microglobulin_mg_l": 3.0, "albumin_g_dl": 3.8, "ldh": 1}), "ldh");
    check_refused(Calculator::HctCi, json!({"diabetes": true}), "diabetes");
    check_refused(Calculator::HctCi, json!({"arrhythmia": "yes"}), "arrhythmia");
    check_refused(Calculator::Bmi, json!({"weight_kg": 70, "height_m": 175}), "height_m");
    // An IFCC value (mmol/mol) given as per cent.
    check_refused(Calculator::GlycaemicRange, json!({"hba1c_percent": 48}), "hba1c_percent");
    check_refused(
        Calculator::EgfrCkdEpi2021,
        json!({"creatinine_mg_dl": 1.0, "age_years": 12, "female": true}),
        "age_years",
    );
}

#[test]
fn a_value_outside_the_lookback_window_is_missing() {
    let t = |d: &str| NaiveDate::parse_from_str(d, "%Y-%m-%d").unwrap().and_hms_opt(0, 0, 0).unwrap();
    let values = vec![(t("2024-01-01"), 3.1), (t("2024-05-01"), 4.2), (t("2024-09-01"), 9.9)];
    // As of 2024-06-01 with 90 days: the May value (the September one is after the date).
    assert_eq!(latest_within(&values, t("2024-06-01"), 90), Some((t("2024-05-01"), 4.2)));
    // As of 2024-08-15: May is 106 days back, outside 90 days: missing.
    assert_eq!(latest_within(&values, t("2024-08-15"), 90), None);
    assert_eq!(Calculator::Iss.lookback_days(), Some(90));
    assert_eq!(Calculator::HctCi.lookback_days(), Some(365));
    assert_eq!(evident_chart::calculators::ECOG_LOOKBACK_DAYS, 180);
}

const TABLES: &str = include_str!("../data/calculator_tables.json");

/// The shipped tables load, and hold what the calculators' sources say:
/// the paper's 17 HCT-CI items (29 points in all), Charlson's 19
/// conditions, CHA2DS2-VASc's six items and five conditions with phrases.
#[test]
fn the_shipped_calculator_tables_validate() {
    let t = CalculatorTables::from_json(TABLES).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.hct_ci.items.len(), 17);
    assert_eq!(t.hct_ci.items.iter().map(|i| i.points).sum::<f64>(), 29.0);
    assert_eq!(t.charlson.items.len(), 19);
    assert_eq!(t.cha2ds2_vasc.items.len(), 6);
    assert_eq!(t.cha2ds2_vasc.conditions.len(), 5);
    assert_eq!(t.measurements.inputs.len(), 7);
    let stages: Vec<(&str, f64)> = t.ckd_g_stage.groups.iter().map(|g| (g.name.as_str(), g.from)).collect();
    assert_eq!(stages, [("G5", 0.0), ("G4", 15.0), ("G3b", 30.0), ("G3a", 45.0), ("G2", 60.0), ("G1", 90.0)]);
    let ranges: Vec<(&str, f64)> = t.glycaemic_range.groups.iter().map(|g| (g.name.as_str(), g.from)).collect();
    assert_eq!(ranges, [("normal", 0.0), ("prediabetes", 5.7), ("diabetes", 6.5)]);
    // Every numeric input of every calculator but age has a measurement.
    let numeric: std::collections::BTreeSet<String> = Calculator::ALL
        .iter()
        .flat_map(|c| {
            let schema = c.input_schema();
            let props = schema["properties"].as_object().cloned().unwrap_or_default();
            props.into_iter().filter(|(_, v)| v["type"] == "number").map(|(k, _)| k).collect::<Vec<_>>()
        })
        .filter(|k| k != "age_years")
        .collect();
    let listed: std::collections::BTreeSet<String> =
        evident_chart::calculators::tables::NUMERIC_INPUTS.iter().map(|s| s.to_string()).collect();
    assert_eq!(numeric, listed);
    assert_eq!(&t, CalculatorTables::builtin());
}

/// Each way an edit can break a table is reported with its place in the
/// file and what to do, all at once; nothing is computed from such a file.
#[test]
fn a_broken_table_is_refused_naming_each_place() {
    let mut v: Value = serde_json::from_str(TABLES).unwrap();
    v["hct_ci"]["items"][3]["points"] = json!(0);
    v["hct_ci"]["items"][4]["name"] = json!("Cerebrovascular disease");
    v["charlson"]["supersedes"][1]["mild"] = json!("mild_liver");
    v["charlson"]["age_points"][2]["from"] = json!(55);
    v["cha2ds2_vasc"]["items"][5]["name"] = json!("sex");
    v["cha2ds2_vasc"]["conditions"][2]["not"][0] = json!("Prediabetes");
    v["cha2ds2_vasc"]["conditions"][3]["input"] = json!("female");
    v["cha2ds2_vasc"]["negations"][1] = json!("Not  ");
    v["r2_iss"]["groups"][3]["up_to"] = json!(4);
    v["glycaemic_range"]["groups"][2]["from"] = json!(5.0);
    v["measurements"]["inputs"][3]["not"][0] = json!("losing");
    v["measurements"]["inputs"][3]["units"][0]["factor"] = json!(0);
    v["measurements"]["inputs"].as_array_mut().unwrap().remove(4);
    let err = CalculatorTables::from_json(&v.to_string()).unwrap_err();
    let TablesError::Invalid(problems) = &err else { panic!("expected problems, got {err}") };
    let text = err.to_string();
    for place in [
        "hct_ci.items[3].points: 0 must be a positive number",
        "hct_ci.items[4].name: \"Cerebrovascular disease\" must be snake case",
        "charlson.supersedes[1].mild: \"mild_liver\" is not one of charlson's items",
        "charlson.age_points[2]: ages and points must both rise",
        "cha2ds2_vasc.items: \"sex\" is not an input of the calculator",
        "cha2ds2_vasc.items: the input \"female\" has no points",
        "cha2ds2_vasc.conditions[2].not[0]: \"Prediabetes\" must be a non-empty lower-case phrase",
        "cha2ds2_vasc.conditions[3].input: \"female\" is not a condition CHA2DS2-VASc weighs",
        "cha2ds2_vasc.negations[1]: \"Not  \" must be lower-case words",
        "r2_iss.groups: the last group ends at 4 but a patient can score 5",
        "glycaemic_range.groups[2].from: 5 does not follow 5.7; order groups by rising value",
        "measurements.inputs[3].not[0]: \"losing\" holds none of the names",
        "measurements.inputs[3].units[0].factor: 0 must be a positive number",
        "measurements.inputs: the numeric input \"height_m\" has no measurement",
    ] {
        assert!(text.contains(place), "missing {place:?} in:\n{text}");
    }
    assert_eq!(problems.len(), 14, "{text}");

    // A misspelt field is a JSON error that names it.
    let mut v: Value = serde_json::from_str(TABLES).unwrap();
    v["charlson"]["item"] = v["charlson"]["items"].clone();
    let err = CalculatorTables::from_json(&v.to_string()).unwrap_err().to_string();
    assert!(err.contains("unknown field `item`") && err.contains("calculator_tables.json"), "{err}");
}

/// A numeric input is read from a sentence only where a name introduces a
/// number with a unit, past at most a few gap words: what a record writes
/// about the measurement, not about a change in it or another quantity.
#[test]
fn a_sentence_gives_a_measurement_only_where_it_writes_it_with_a_unit() {
    let t = &CalculatorTables::builtin().measurements;
    let read = |input: &str, sentence: &str| t.read(t.of(input).unwrap(), sentence);
    let close = |got: Option<f64>, want: f64| got.is_some_and(|g| (g - want).abs() < 1e-6);
    let line = "- 2023-11-20 16:42: Body Weight: 70.7838181760092 kg [Observation/5418a292]";
    assert!(close(read("weight_kg", line), 70.7838181760092));
    assert!(close(read("height_m", "- 2023-11-20 16:42: Body Height: 175.3 cm [Observation/1]"), 1.753));
    assert!(close(read("weight_kg", "Weight 154 lbs today."), 154.0 * 0.45359237));
    assert!(close(read("albumin_g_dl", "Albumin was 38 g/L."), 3.8));
    assert!(close(read("beta2_microglobulin_mg_l", "B2M 5.6 mg/L, LDH normal."), 5.6));
    let creatinine = "Creatinine [Mass/volume] in Serum or Plasma: 88.4 umol/L";
    assert!(close(read("creatinine_mg_dl", creatinine), 88.4 * 0.011312));
    // The second of two measurements in one sentence.
    assert!(close(read("albumin_g_dl", "Serum creatinine 1.2 mg/dL, albumin 3.9 g/dL."), 3.9));
    assert!(close(read("hba1c_percent", "HbA1c 7.2% in March."), 7.2));
    assert!(close(read("hba1c_percent", "Hemoglobin A1c was 6.1 %."), 6.1));
    // IFCC mmol/mol by the master equation: 48 mmol/mol is the diabetes
    // threshold's 6.5% (Hoelzel 2004), 6.543 by the equation.
    assert!(close(read("hba1c_percent", "HbA1c 48 mmol/mol."), 0.09148 * 48.0 + 2.152));
    let ifcc = read("hba1c_percent", "HbA1c 48 mmol/mol.").unwrap();
    let range = evident_chart::calculators::glycaemic_range(&evident_chart::calculators::GlycaemicRangeInput {
        hba1c_percent: ifcc,
    });
    assert_eq!(range.unwrap().category.as_deref(), Some("diabetes"));
    assert!(close(read("egfr_ml_min_1_73m2", "eGFR 52 mL/min/1.73m2 today."), 52.0));
    let synthea = "- 2021-01-23 01:34: Estimated Glomerular Filtration Rate: 89.7 mL/min/{1.73_m2} [Observation/e5]";
    assert!(close(read("egfr_ml_min_1_73m2", synthea), 89.7));
    for (input, sentence) in [
        ("weight_kg", "Weight loss of 5 kg since spring."),
        ("weight_kg", "Birth weight 3.2 kg."),
        ("weight_kg", "Weight: 70 kilograms."),
        ("height_m", "Heightened anxiety for 5 m."),
        ("albumin_g_dl", "Albumin/creatinine ratio 30 mg/g."),
        ("albumin_g_dl", "Albumin not measured; 3.9 g/dL last year."),
        ("creatinine_mg_dl", "Creatinine clearance 60 mL/min."),
        ("creatinine_mg_dl", "No creatinine on file."),
        ("egfr_ml_min_1_73m2", "eGFR declined by 10 mL/min."),
    ] {
        assert_eq!(read(input, sentence), None, "{input} from {sentence:?}");
    }
}
