//! The calculator tool: every numeric input but age is read from the
//! record (a stored lab, else a sentence that writes it with a unit, the
//! newest inside the input's lookback window), age and sex from the stored
//! patient, and CHA2DS2-VASc's conditions from the stored problem list
//! (from the notes where there is none); each value read is cited. A
//! number the call gives is never used, nor a CHA2DS2-VASc condition: the
//! embedded model typed an albumin of 0.00001 g/dL beside a stored 3.9, a
//! BMI from a weight of 1 kg and a height of 1 m, and a stroke no record
//! shows. Present-or-absent findings the record cannot give by itself
//! (cytogenetics; Charlson's and HCT-CI's comorbidities) come from the
//! call. A criteria set's id runs its criteria check
//! ([`RecordView::check_criteria`]).

use super::age::Age;
use super::*;
use crate::calculators::tables::{Measurement, NUMERIC_INPUTS};
// The oldest age tried where the record gives no upper bound (MIMIC-IV's
// ages over 89); the calculators refuse ages past it.
use evident_model::age::OLDEST_AGE;

/// The stored lab concept a numeric input may be read from.
fn lab_concept(input: &str) -> Option<&'static str> {
    match input {
        "beta2_microglobulin_mg_l" => Some("Beta-2-microglobulin"),
        "albumin_g_dl" => Some("Albumin"),
        "creatinine_mg_dl" => Some("Creatinine"),
        "hba1c_percent" => Some("Hemoglobin A1c"),
        "egfr_ml_min_1_73m2" => Some("Estimated glomerular filtration rate"),
        _ => None,
    }
}

/// A calculator's numeric inputs that the record gives (all but age).
fn measured_inputs(calculator: Calculator) -> Vec<String> {
    let schema = calculator.input_schema();
    NUMERIC_INPUTS.iter().filter(|f| schema["properties"].get(**f).is_some()).map(|f| f.to_string()).collect()
}

impl RecordView<'_> {
    pub(super) fn calculate(&self, a: &CalcArgs) -> Result<ToolOutput, ToolFailure> {
        let Some(calculator) = Calculator::from_name(&a.calculator) else {
            if let Some(set) = self.criteria().get(&a.calculator) {
                return self.check_criteria(set);
            }
            let sets = self.criteria().sets.iter().map(|s| s.id.as_str());
            let known: Vec<&str> = Calculator::ALL.map(|c| c.name()).into_iter().chain(sets).collect();
            return Err(ToolError(format!(
                "calculator {:?} is unknown; use one of {}",
                a.calculator,
                known.join(", ")
            ))
            .into());
        };
        let mut inputs = a.inputs.clone().unwrap_or_else(|| json!({}));
        if !inputs.is_object() {
            return Err(ToolError("inputs must be a JSON object".into()).into());
        }
        let mut used = Vec::new();
        let mut missing = Vec::new();
        let table = &CalculatorTables::builtin().measurements;
        for field in measured_inputs(calculator) {
            let m = table.of(&field).expect("the tables give every numeric input a measurement (validated on load)");
            let days = calculator.lookback_days().or(m.lookback_days);
            let typed = inputs.as_object_mut().and_then(|o| o.remove(&field));
            match self.read_input(m, days)? {
                Some((value, evidence)) => {
                    inputs[&field] = json!(value);
                    used.push(evidence);
                }
                None => {
                    let window = match days {
                        Some(d) => format!("within {d} days before {}", self.as_of.date()),
                        None => format!("on or before {}", self.as_of.date()),
                    };
                    let units = m.units.iter().map(|u| u.unit.as_str()).collect::<Vec<_>>().join(", ");
                    let not_used = typed.map(|v| format!("; the call's {v} is not used")).unwrap_or_default();
                    missing.push(format!(
                        "{field}: no stored lab or sentence gives {} in {units} {window}{not_used}",
                        m.names[0]
                    ));
                }
            }
        }
        if matches!(calculator, Calculator::RIss | Calculator::R2Iss) {
            let days = calculator.lookback_days().expect("the ISS family has a lookback");
            let given = inputs.get("ldh_high").is_some();
            match self.latest_lab("Lactate dehydrogenase", days)? {
                Some((lab, value)) => match lab_high(&lab, value) {
                    Some(high) => {
                        inputs["ldh_high"] = json!(high);
                        used.push(lab);
                    }
                    None if given => {}
                    None => missing.push("LDH upper limit of normal (no reference range stored)".into()),
                },
                None if given => {}
                None => missing.push(format!("Lactate dehydrogenase within {days} days before {}", self.as_of.date())),
            }
        }
        let age_range = self.fill_demographics(calculator, &mut inputs, &mut used)?;
        let set_aside =
            if calculator == Calculator::Cha2ds2Vasc { self.fill_conditions(&mut inputs, &mut used)? } else { vec![] };
        if !missing.is_empty() {
            return Ok(ToolOutput {
                evidence: used,
                note: Some(format!("{} not computable: missing {}", calculator.name(), missing.join("; "))),
            });
        }
        // Inputs the record cannot give by itself (cytogenetics, findings)
        // are named all at once, with what was read from the store, so the
        // next call can give them; serde would name only the first.
        let schema = calculator.input_schema();
        let absent: Vec<String> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|f| inputs.get(*f).is_none())
            .map(|f| {
                let kind = if schema["properties"][f]["type"] == "boolean" { "true or false" } else { "a number" };
                format!("{f} ({kind})")
            })
            .collect();
        if !absent.is_empty() {
            let read: Vec<String> = inputs
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(_, v)| v.is_number() || v.is_boolean())
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            return Ok(ToolOutput {
                evidence: used,
                note: Some(format!(
                    "{} needs the inputs {}, from the record; call it again with them{}",
                    calculator.name(),
                    absent.join(", "),
                    if read.is_empty() { String::new() } else { format!("; already known: {}", read.join(", ")) }
                )),
            });
        }
        let output = match age_range {
            None => calculate(calculator, &inputs).map_err(|e| ToolError(e.to_string()))?,
            Some(age) => {
                // Every age the record allows gives the same result, or
                // there is none.
                let oldest = age.oldest.unwrap_or(OLDEST_AGE).max(age.youngest);
                let outputs = (age.youngest..=oldest)
                    .map(|years| {
                        let mut at = inputs.clone();
                        at["age_years"] = json!(years);
                        calculate(calculator, &at).map_err(|e| ToolError(e.to_string()))
                    })
                    .collect::<Result<Vec<Value>, ToolError>>()?;
                if outputs.windows(2).any(|w| w[0] != w[1]) {
                    return Ok(ToolOutput {
                        evidence: used,
                        note: Some(format!(
                            "{} not computable: the record gives the age as {} years (MIMIC-IV's anchor age), and the result differs within that range",
                            calculator.name(),
                            age.shown().to_string().trim_matches('"')
                        )),
                    });
                }
                inputs["age_years"] = age.shown();
                outputs.into_iter().next().expect("at least one age")
            }
        };
        Ok(ToolOutput {
            evidence: vec![Evidence::Calculation { calculator: calculator.name().into(), inputs, output, used }],
            note: (!set_aside.is_empty()).then(|| set_aside.join("; ")),
        })
    }
}

impl RecordView<'_> {
    /// Sets a calculator's required `age_years` (whole years at the
    /// reference date) and `female` from the stored patient, and cites the
    /// patient's demographics for them. The stored value wins over one the
    /// call gives (the embedded model was seen inventing ages of 1 and 20
    /// for a patient of 55); the call's value stands only where the store
    /// has none. A sex the store gives other than female/male (or F/M) is
    /// not guessed. Where the record gives the age as a range (MIMIC-IV's
    /// anchor age, [`RecordView::age`]), the youngest is set, the line that
    /// gives it cited, and the range returned: the calculator must give one
    /// result for every age in it.
    fn fill_demographics(
        &self,
        calculator: Calculator,
        inputs: &mut Value,
        used: &mut Vec<Evidence>,
    ) -> Result<Option<Age>, ToolFailure> {
        let schema = calculator.input_schema();
        let required = |f: &str| schema["required"].as_array().is_some_and(|r| r.iter().any(|v| v == f));
        // Charlson's optional age: one the call gives is replaced too.
        let wants_age = required("age_years") || inputs.get("age_years").is_some();
        let wants_sex = required("female");
        if !wants_age && !wants_sex {
            return Ok(None);
        }
        let Some(patient) = self.lock().patient(self.patient_id())? else { return Ok(None) };
        let mut read = false;
        let mut range = None;
        let age = if wants_age { self.age()? } else { None };
        match age {
            Some(age) if age.oldest == Some(age.youngest) => {
                inputs["age_years"] = json!(age.youngest);
                read = true;
            }
            Some(age) => {
                inputs["age_years"] = json!(age.youngest);
                used.push(age.evidence.clone());
                range = Some(age);
            }
            None => {}
        }
        let female = female_of(patient.sex.as_deref());
        if let (true, Some(female)) = (wants_sex, female) {
            inputs["female"] = json!(female);
            read = true;
        }
        if read {
            used.push(Evidence::Patient {
                patient_id: patient.id,
                birth_date: patient.birth_date,
                sex: patient.sex,
                as_of: self.as_of(),
            });
        }
        Ok(range)
    }
}

impl RecordView<'_> {
    /// Sets each CHA2DS2-VASc condition (the calculator tables'
    /// `cha2ds2_vasc.conditions`) from the record on or before the
    /// reference date, true with the first line that shows it cited, false
    /// where none does. The stored problem lists decide where the record
    /// has one (the bank's generator and the criteria check read them
    /// alone); a record without one is read in its notes, newest first, a
    /// condition counting where a clause affirms it
    /// ([`crate::calculators::tables::Condition::affirmed_in`]). The call's
    /// condition values are never used, as its numbers are not: the
    /// embedded model called the calculator with age and sex only, so a
    /// documented hypertension never counted, and on a MIMIC-IV patient
    /// (`10020786-G31`) it called it with hypertension, diabetes, stroke
    /// and vascular disease all true, none of them in the record, and
    /// scored 8 where the record gives 5. Returns a note for each true the
    /// call gave that the record does not show.
    fn fill_conditions(&self, inputs: &mut Value, used: &mut Vec<Evidence>) -> Result<Vec<String>, ToolFailure> {
        let table = &CalculatorTables::builtin().cha2ds2_vasc;
        let called: Vec<(&str, Value)> = table
            .conditions
            .iter()
            .filter_map(|c| Some((c.input.as_str(), inputs.as_object_mut()?.remove(&c.input)?)))
            .collect();
        let store = self.lock();
        let lists = self.problem_lists(&store)?;
        let mut found: Vec<&str> = Vec::new();
        for doc in &lists {
            for (lower, entry) in timeline_entries(&store, doc)? {
                for condition in &table.conditions {
                    let input = condition.input.as_str();
                    if !condition.shown_in(&lower) || found.contains(&input) {
                        continue;
                    }
                    found.push(input);
                    used.push(entry.clone());
                }
            }
        }
        if lists.is_empty() {
            let filter = SectionFilter {
                patient_id: Some(self.patient_id.clone()),
                until: Some(self.as_of),
                ..SectionFilter::default()
            };
            for section in store.sections(&filter)?.into_iter().rev() {
                let lower = section.text.to_lowercase();
                let affirmed: Vec<&str> = table
                    .conditions
                    .iter()
                    .filter(|c| !found.contains(&c.input.as_str()) && c.affirmed_in(&lower, &table.negations))
                    .map(|c| c.input.as_str())
                    .collect();
                if !affirmed.is_empty() {
                    found.extend(affirmed);
                    used.push(Evidence::from(section));
                }
            }
        }
        for condition in &table.conditions {
            inputs[&condition.input] = json!(found.contains(&condition.input.as_str()));
        }
        let on = self.as_of.date();
        let why = if lists.is_empty() {
            format!("the record has no problem list on or before {on}, and no note up to then affirms it")
        } else {
            format!("no problem-list entry on or before {on} shows it")
        };
        Ok(called
            .into_iter()
            .filter(|(input, v)| *v == json!(true) && !found.contains(input))
            .map(|(input, _)| format!("the call's {input} true is not used: {why}"))
            .collect())
    }
}

fn lab_unit(e: &Evidence) -> &str {
    match e {
        Evidence::Lab { unit, .. } => unit.as_deref().unwrap_or(""),
        _ => "",
    }
}

/// Whether an LDH value is above its stored upper limit.
fn lab_high(e: &Evidence, value: f64) -> Option<bool> {
    match e {
        Evidence::Lab { reference_range: Some(r), .. } => {
            let high: f64 = r.rsplit(['-', '–', ' ']).find_map(|p| p.trim().parse().ok())?;
            Some(value > high)
        }
        _ => None,
    }
}

impl RecordView<'_> {
    /// The newest value of a measured input on or before the reference
    /// date (and inside `days` before it, where given), with the evidence
    /// that shows it: a stored lab of the input's concept whose unit the
    /// measurement knows, else a sentence that writes the input with a
    /// unit (a timeline line is cited as its entry, narrative as its
    /// section). A stored lab wins over text of the same window.
    fn read_input(&self, m: &Measurement, days: Option<i64>) -> Result<Option<(f64, Evidence)>, ToolFailure> {
        let in_unit = |value: f64, unit: &str| {
            let unit = unit.trim().to_lowercase().replace(' ', "");
            m.units.iter().find(|u| u.unit == unit).map(|u| u.convert(value))
        };
        if let Some(concept) = lab_concept(&m.input) {
            if let Some((lab, value)) = self.latest_lab(concept, days.unwrap_or(36_500))? {
                if let Some(v) = in_unit(value, lab_unit(&lab)) {
                    return Ok(Some((v, lab)));
                }
            }
        }
        let table = &CalculatorTables::builtin().measurements;
        let store = self.lock();
        let filter = SectionFilter {
            patient_id: Some(self.patient_id.clone()),
            since: days.map(|d| self.as_of - chrono::Duration::days(d)),
            until: Some(self.as_of),
            ..SectionFilter::default()
        };
        let mut sentences_of: Option<(String, Vec<evident_store::SentenceRecord>)> = None;
        for section in store.sections(&filter)?.into_iter().rev() {
            let lower = section.text.to_lowercase();
            if !m.names.iter().any(|n| lower.contains(n.as_str())) {
                continue;
            }
            if sentences_of.as_ref().is_none_or(|(id, _)| *id != section.document_id) {
                sentences_of = Some((section.document_id.clone(), store.sentences(&section.document_id)?));
            }
            let sentences = &sentences_of.as_ref().expect("just set").1;
            let inside = sentences.iter().filter(|s| s.start >= section.start && s.end <= section.end).rev();
            for sentence in inside {
                let Some(value) = table.read(m, &sentence.text) else { continue };
                let evidence = match timeline_line(&sentence.text) {
                    Some((_, record)) => Evidence::Entry {
                        record,
                        document_id: section.document_id.clone(),
                        date: section.date,
                        sentence_id: sentence.ordinal,
                        start: sentence.start,
                        end: sentence.end,
                        text: sentence.text.trim().to_string(),
                    },
                    None => Evidence::from(section),
                };
                return Ok(Some((value, evidence)));
            }
        }
        Ok(None)
    }
}

/// Whether a stored sex is female (`Some(true)`) or male (`Some(false)`):
/// "female"/"F" and "male"/"M" in any case; anything else is not guessed.
pub(super) fn female_of(sex: Option<&str>) -> Option<bool> {
    match sex.map(|s| s.trim().to_ascii_lowercase()) {
        Some(s) if s == "female" || s == "f" => Some(true),
        Some(s) if s == "male" || s == "m" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_numeric_input_but_age_is_measured() {
        assert_eq!(measured_inputs(Calculator::Bmi), ["weight_kg", "height_m"]);
        assert_eq!(measured_inputs(Calculator::EgfrCkdEpi2021), ["creatinine_mg_dl"]);
        assert_eq!(measured_inputs(Calculator::RIss), ["beta2_microglobulin_mg_l", "albumin_g_dl"]);
        assert!(measured_inputs(Calculator::Charlson).is_empty());
    }
}
