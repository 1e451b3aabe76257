//! The calculator tool: ISS-family lab inputs are read from stored labs
//! within the lookback window, a required age or sex from the stored
//! patient, and CHA2DS2-VASc's conditions from the stored problem list; a
//! stored value wins over one the call gives, which stands only where the
//! store has none.

use super::*;

impl RecordView<'_> {
    pub(super) fn calculate(&self, a: &CalcArgs) -> Result<ToolOutput, ToolFailure> {
        let Some(calculator) = Calculator::from_name(&a.calculator) else {
            let known = Calculator::ALL.map(|c| c.name()).join(", ");
            return Err(ToolError(format!("calculator {:?} is unknown; use one of {known}", a.calculator)).into());
        };
        let mut inputs = a.inputs.clone().unwrap_or_else(|| json!({}));
        if !inputs.is_object() {
            return Err(ToolError("inputs must be a JSON object".into()).into());
        }
        let mut used = Vec::new();
        let mut missing = Vec::new();
        if matches!(calculator, Calculator::Iss | Calculator::RIss | Calculator::R2Iss) {
            let days = calculator.lookback_days().expect("the ISS family has a lookback");
            // A stored value in the window wins over one the call gives (the
            // embedded model, offered the calculator's inputs by the typed
            // plan, typed an albumin of 0.00001 g/dL beside the stored 3.9);
            // the call's value stands only where the store has none.
            for (field, concept, to_unit) in
                [("beta2_microglobulin_mg_l", "Beta-2-microglobulin", "mg/L"), ("albumin_g_dl", "Albumin", "g/dL")]
            {
                let given = inputs.get(field).is_some();
                match self.latest_lab(concept, days)? {
                    Some((lab, value)) => match convert(value, lab_unit(&lab), to_unit) {
                        Some(v) => {
                            inputs[field] = json!(v);
                            used.push(lab);
                        }
                        None if given => {}
                        None => {
                            missing.push(format!("{concept} (unit {:?} cannot be read as {to_unit})", lab_unit(&lab)))
                        }
                    },
                    None if given => {}
                    None => missing.push(format!("{concept} within {days} days before {}", self.as_of.date())),
                }
            }
            if calculator != Calculator::Iss {
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
                    None => {
                        missing.push(format!("Lactate dehydrogenase within {days} days before {}", self.as_of.date()))
                    }
                }
            }
        }
        self.fill_demographics(calculator, &mut inputs, &mut used)?;
        if calculator == Calculator::Cha2ds2Vasc {
            self.fill_conditions(&mut inputs, &mut used)?;
        }
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
        let output = calculate(calculator, &inputs).map_err(|e| ToolError(e.to_string()))?;
        Ok(ToolOutput {
            evidence: vec![Evidence::Calculation { calculator: calculator.name().into(), inputs, output, used }],
            note: None,
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
    /// not guessed.
    fn fill_demographics(
        &self,
        calculator: Calculator,
        inputs: &mut Value,
        used: &mut Vec<Evidence>,
    ) -> Result<(), ToolFailure> {
        let schema = calculator.input_schema();
        let required = |f: &str| schema["required"].as_array().is_some_and(|r| r.iter().any(|v| v == f));
        let wants_age = required("age_years");
        let wants_sex = required("female");
        if !wants_age && !wants_sex {
            return Ok(());
        }
        let Some(patient) = self.lock().patient(self.patient_id())? else { return Ok(()) };
        let mut read = false;
        if let (true, Some(birth)) = (wants_age, patient.birth_date) {
            inputs["age_years"] = json!(age_on(birth, self.as_of().date()));
            read = true;
        }
        let female = match patient.sex.as_deref().map(|s| s.trim().to_ascii_lowercase()) {
            Some(s) if s == "female" || s == "f" => Some(true),
            Some(s) if s == "male" || s == "m" => Some(false),
            _ => None,
        };
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
        Ok(())
    }
}

impl RecordView<'_> {
    /// Sets each CHA2DS2-VASc condition the stored problem list documents
    /// on or before the reference date (the calculator tables'
    /// `cha2ds2_vasc.conditions`) and cites the first line that shows it;
    /// a condition the list does not show keeps the call's value (absent
    /// by default, as the score counts it). The embedded model called the calculator with age and sex only,
    /// so a patient's documented hypertension never counted.
    fn fill_conditions(&self, inputs: &mut Value, used: &mut Vec<Evidence>) -> Result<(), ToolFailure> {
        let store = self.lock();
        let documents = store.documents(&self.patient_id)?;
        let lists =
            documents.iter().filter(|d| d.kind == DocKind::ProblemList && d.date.is_some_and(|t| t <= self.as_of));
        let mut found: Vec<&str> = Vec::new();
        for doc in lists {
            for (lower, entry) in timeline_entries(&store, doc)? {
                for condition in &CalculatorTables::builtin().cha2ds2_vasc.conditions {
                    let input = condition.input.as_str();
                    if !condition.shown_in(&lower) || found.contains(&input) {
                        continue;
                    }
                    found.push(input);
                    inputs[input] = json!(true);
                    used.push(entry.clone());
                }
            }
        }
        Ok(())
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

/// Unit conversion for the two units the ISS family reads (the store never
/// converts; a calculator reading a value in another unit does, explicitly).
fn convert(value: f64, from: &str, to: &str) -> Option<f64> {
    let from = from.trim().to_lowercase().replace(' ', "");
    match (from.as_str(), to) {
        ("mg/l", "mg/L") | ("g/dl", "g/dL") => Some(value),
        ("ug/ml" | "µg/ml" | "μg/ml", "mg/L") => Some(value),
        ("g/l", "g/dL") => Some(value / 10.0),
        ("", _) => None,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_conversion_is_explicit() {
        assert_eq!(convert(38.0, "g/L", "g/dL"), Some(3.8));
        assert_eq!(convert(3.8, "g/dL", "g/dL"), Some(3.8));
        assert_eq!(convert(3.8, "mmol/L", "g/dL"), None);
    }
}
