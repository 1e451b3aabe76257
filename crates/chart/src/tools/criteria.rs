//! The criteria check: a criteria set ([`crate::criteria`]) evaluated on
//! the record at the reference date, each criterion from what the record
//! stores (age from the stored patient or MIMIC-IV's anchor age, conditions from the problem list,
//! values from the stored labs, scores from the calculators), each read
//! cited. The result is a calculation item (the set's id as its
//! calculator) whose inputs are what each criterion read and whose result
//! is Yes / No / Unclear with every criterion's status.

use super::labs::lab_evidence;
use super::*;
use crate::criteria::{CriteriaSet, LabRule, LabValue, Rule, Sex, Truth};

/// A criterion's outcome, what it read (for the calculation's inputs) and
/// the evidence it read it from.
type Checked = (Truth, Value, Vec<Evidence>);

impl RecordView<'_> {
    /// Evaluates a criteria set on the record; every criterion is read,
    /// so the result shows each one's status.
    pub fn check_criteria(&self, set: &CriteriaSet) -> Result<ToolOutput, ToolFailure> {
        let mut inputs = serde_json::Map::new();
        let mut criteria = Vec::new();
        let mut used: Vec<Evidence> = Vec::new();
        let truth = set.rule.evaluate(&mut |atom| {
            let (truth, read, evidence) = self.criterion(atom)?;
            let label = atom.label().unwrap_or_default().to_string();
            inputs.insert(label.clone(), read);
            criteria.push(json!({"criterion": label, "status": truth.as_str()}));
            for e in evidence {
                if !used.iter().any(|u| u.key() == e.key()) {
                    used.push(e);
                }
            }
            Ok::<_, ToolFailure>(truth)
        })?;
        let output = json!({"result": truth.answer(), "criteria": criteria});
        Ok(ToolOutput {
            evidence: vec![Evidence::Calculation {
                calculator: set.id.clone(),
                inputs: Value::Object(inputs),
                output,
                used,
            }],
            note: None,
        })
    }

    fn criterion(&self, atom: &Rule) -> Result<Checked, ToolFailure> {
        match atom {
            Rule::All(_) | Rule::Any(_) => unreachable!("Rule::evaluate passes atoms only"),
            Rule::Age(a) => {
                let Some(age) = self.age()? else {
                    return Ok((Truth::Unknown, json!("no birth date or age recorded"), vec![]));
                };
                Ok((age.within(a.min, a.max), age.shown(), vec![age.evidence]))
            }
            Rule::Sex(rule) => {
                let Some(patient) = self.lock().patient(self.patient_id())? else {
                    return Ok((Truth::Unknown, json!("no patient recorded"), vec![]));
                };
                let sex = match super::calculate::female_of(patient.sex.as_deref()) {
                    Some(true) => Sex::Female,
                    Some(false) => Sex::Male,
                    None => return Ok((Truth::Unknown, json!("no sex recorded"), vec![])),
                };
                let read = json!(if sex == Sex::Female { "female" } else { "male" });
                let evidence = Evidence::Patient {
                    patient_id: patient.id,
                    birth_date: patient.birth_date,
                    sex: patient.sex,
                    as_of: self.as_of,
                };
                Ok((Truth::of(sex == rule.is), read, vec![evidence]))
            }
            Rule::Condition(c) => {
                let store = self.lock();
                let lists = self.problem_lists(&store)?;
                let on = self.as_of.date().to_string();
                for doc in &lists {
                    let shown = timeline_entries(&store, doc)?
                        .into_iter()
                        .find(|(l, _)| c.shown_in(l) && !(c.current && ended_by(l, &on)));
                    if let Some((_, entry)) = shown {
                        return Ok((Truth::Met, json!(entry.text()), vec![entry]));
                    }
                }
                let why = if c.current { "not current on the problem list" } else { "not on the problem list" };
                Ok((Truth::NotMet, json!(why), vec![]))
            }
            Rule::Lab(l) => self.lab_criterion(l),
            Rule::Score(s) => {
                let args = CalcArgs { calculator: s.calculator.clone(), inputs: None };
                let output = self.calculate(&args)?;
                let calculation = output.evidence.iter().find_map(|e| match e {
                    Evidence::Calculation { inputs, output, .. } => Some((inputs, output["score"].as_f64()?)),
                    _ => None,
                });
                let Some((inputs, score)) = calculation else {
                    let why = output.note.unwrap_or_else(|| format!("{} gave no score", s.calculator));
                    return Ok((Truth::Unknown, json!(why), output.evidence));
                };
                let female = inputs["female"].as_bool() == Some(true);
                let threshold = s.at_least_female.filter(|_| female).unwrap_or(s.at_least);
                Ok((Truth::of(score >= threshold), json!(score), output.evidence))
            }
        }
    }

    /// A lab criterion: the concept's values inside the window, newest
    /// first. `last`: the newest decides; none, or a newest in a unit the
    /// rule does not know, is unknown. `any`: one past the threshold (in a
    /// unit the rule knows) meets it, the newest such cited; else the
    /// newest is cited and it is not met; none is not met. Values in units
    /// the rule does not know make "not met" unknown.
    fn lab_criterion(&self, l: &LabRule) -> Result<Checked, ToolFailure> {
        let concept = LabCatalogue::builtin()
            .resolve_name(&l.concept)
            .expect("criteria sets name catalogue concepts (validated on load)");
        let since = self.as_of - chrono::Duration::days(l.within_days);
        let mut in_window: Vec<LabRecord> = self
            .labs_of(&concept.id)?
            .into_iter()
            .filter(|v| v.value_num.is_some() && v.time >= since && v.time <= self.as_of)
            .collect();
        in_window.sort_by_key(|v| std::cmp::Reverse(v.time));
        let foreign = in_window.iter().filter(|v| l.converted(0.0, v.unit.as_deref()).is_none()).count();
        let newest_foreign = in_window.first().is_some_and(|v| l.converted(0.0, v.unit.as_deref()).is_none());
        let mut values = in_window.into_iter().filter_map(|v| {
            let value = l.converted(v.value_num.expect("filtered to numeric values"), v.unit.as_deref())?;
            Some((value, v))
        });
        // Shown to two decimals (Synthea stores "15.13646438169292"); the
        // criterion decides on the stored value, and the cited lab item
        // shows it whole.
        let read = |value: f64, v: &LabRecord| {
            let shown = format!("{value:.2}");
            let shown = shown.trim_end_matches('0').trim_end_matches('.');
            json!(format!("{shown} {} on {}", l.units[0].unit, v.time.date()))
        };
        let none = || {
            let days = l.within_days;
            if foreign > 0 {
                (
                    Truth::Unknown,
                    json!(format!("{foreign} value(s) within {days} days in units the criterion does not know")),
                    vec![],
                )
            } else {
                let truth = if l.value == LabValue::Last { Truth::Unknown } else { Truth::NotMet };
                (truth, json!(format!("no value within {days} days")), vec![])
            }
        };
        let checked = match l.value {
            LabValue::Last => match values.next() {
                Some((value, v)) if !newest_foreign => {
                    (Truth::of(l.passes(value)), read(value, &v), vec![lab_evidence(&concept.name, v)])
                }
                _ => none(),
            },
            LabValue::Any => {
                let all: Vec<(f64, LabRecord)> = values.collect();
                let passing = all.iter().position(|(value, _)| l.passes(*value));
                match passing.or_else(|| (foreign == 0 && !all.is_empty()).then_some(0)) {
                    Some(i) => {
                        let (value, v) = all.into_iter().nth(i).expect("an index of the list");
                        (Truth::of(l.passes(value)), read(value, &v), vec![lab_evidence(&concept.name, v)])
                    }
                    None => none(),
                }
            }
        };
        Ok(checked)
    }
}

/// Whether a lower-cased problem-list line says its condition had ended
/// by `on` (YYYY-MM-DD): "resolved" or "inactive", with no date after the
/// line's own, or the latest such date on or before `on` ("(resolved,
/// resolved 2013-04-11)").
fn ended_by(lower: &str, on: &str) -> bool {
    if !(lower.contains("resolved") || lower.contains("inactive")) {
        return false;
    }
    let dates: Vec<&str> = lower
        .char_indices()
        .filter_map(|(i, _)| lower.get(i..i + 10))
        .filter(|d| {
            d.len() == 10
                && d.bytes().enumerate().all(|(j, b)| if j == 4 || j == 7 { b == b'-' } else { b.is_ascii_digit() })
        })
        .collect();
    match dates.as_slice() {
        [] | [_] => true,
        [.., end] => *end <= on,
    }
}

#[cfg(test)]
mod tests {
    use super::ended_by;

    #[test]
    fn a_line_ended_by_a_date_says_resolved_or_inactive_on_or_before_it() {
        let resolved = "- 2013-03-29 16:42: anemia (disorder) (resolved, resolved 2013-04-11) [condition/a]";
        assert!(ended_by(resolved, "2013-04-11"));
        assert!(!ended_by(resolved, "2013-04-10"), "still current the day before");
        assert!(ended_by("- 2013-03-29 16:42: anemia (resolved) [condition/a]", "2013-03-29"), "no date: ended");
        assert!(!ended_by("- 2013-03-29 16:42: anemia (disorder) (active) [condition/a]", "2030-01-01"));
    }
}
