//! The criteria check: a criteria set ([`crate::criteria`]) evaluated on
//! the record at the reference date, each criterion from what the record
//! stores (age from the stored patient or MIMIC-IV's anchor age, conditions from the problem list,
//! values from the stored labs, scores from the calculators), each read
//! cited. The result is a calculation item (the set's id as its
//! calculator) whose inputs are what each criterion read and whose result
//! is Yes / No / Unclear with every criterion's status.

use super::labs::lab_evidence;
use super::*;
use crate::criteria::{CriteriaSet, LabRule, LabValue, Rule, Truth};

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
            Rule::Condition(c) => {
                let store = self.lock();
                let documents = store.documents(&self.patient_id)?;
                let lists = documents
                    .iter()
                    .filter(|d| d.kind == DocKind::ProblemList && d.date.is_some_and(|t| t <= self.as_of));
                for doc in lists {
                    if let Some((_, entry)) = timeline_entries(&store, doc)?.into_iter().find(|(l, _)| c.shown_in(l)) {
                        return Ok((Truth::Met, json!(entry.text()), vec![entry]));
                    }
                }
                Ok((Truth::NotMet, json!("not on the problem list"), vec![]))
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
        let read = |value: f64, v: &LabRecord| json!(format!("{value} {} on {}", l.units[0].unit, v.time.date()));
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
