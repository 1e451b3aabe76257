//! The units a lab check may be written in, per canonical lab concept, and
//! the conversions between them: the data file
//! [`data/lab_units.json`](../../data/lab_units.json), validated on load
//! against the lab catalogue (every concept must exist; units must be
//! unique within a concept; factors finite and positive). A stored value in
//! a unit the table does not list is never converted.

use std::collections::HashMap;
use std::sync::OnceLock;

use evident_model::labs::LabCatalogue;
use serde::Deserialize;

const BUILTIN_JSON: &str = include_str!("../../data/lab_units.json");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UnitsFile {
    #[allow(dead_code)]
    about: String,
    #[allow(dead_code)]
    version: u32,
    concepts: Vec<ConceptEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConceptEntry {
    concept: String,
    units: Vec<UnitEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UnitEntry {
    unit: String,
    #[serde(default)]
    aliases: Vec<String>,
    factor: f64,
    offset: f64,
}

/// One unit of a concept: `canonical = value * factor + offset`.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// The unit as the table writes it.
    pub name: String,
    pub factor: f64,
    pub offset: f64,
}

/// The units of one concept; the first is the canonical one.
#[derive(Debug, Clone)]
pub struct ConceptUnits {
    pub units: Vec<Unit>,
    /// Normalised spelling (name or alias) -> index into `units`.
    by_key: HashMap<String, usize>,
}

impl ConceptUnits {
    /// The unit a spelling names, if the table knows it.
    pub fn find(&self, spelling: &str) -> Option<&Unit> {
        self.by_key.get(&normalise_unit(spelling)).map(|&i| &self.units[i])
    }

    /// The table's names for this concept's units, for error messages.
    pub fn names(&self) -> Vec<&str> {
        self.units.iter().map(|u| u.name.as_str()).collect()
    }
}

/// `value` in unit `from` expressed in unit `to` (both of one concept).
pub fn convert(value: f64, from: &Unit, to: &Unit) -> f64 {
    if from == to {
        return value;
    }
    let canonical = value * from.factor + from.offset;
    (canonical - to.offset) / to.factor
}

/// Concept id (from the lab catalogue) -> its units.
#[derive(Debug, Clone)]
pub struct UnitTable {
    by_concept: HashMap<String, ConceptUnits>,
}

impl UnitTable {
    /// The table shipped in `data/lab_units.json`, validated once.
    ///
    /// # Panics
    /// If the embedded file is invalid; the crate's tests load it, so a bad
    /// file never ships.
    pub fn builtin() -> &'static UnitTable {
        static BUILTIN: OnceLock<UnitTable> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            UnitTable::from_json(BUILTIN_JSON, LabCatalogue::builtin())
                .unwrap_or_else(|problems| panic!("data/lab_units.json is invalid: {}", problems.join("; ")))
        })
    }

    /// Parses and validates a table against `catalogue`, reporting every problem.
    pub fn from_json(json: &str, catalogue: &LabCatalogue) -> Result<UnitTable, Vec<String>> {
        let file: UnitsFile = serde_json::from_str(json).map_err(|e| vec![e.to_string()])?;
        let mut problems = Vec::new();
        let mut by_concept = HashMap::new();
        for (i, entry) in file.concepts.iter().enumerate() {
            let place = format!("concepts[{i}] ({:?})", entry.concept);
            let Some(concept) = catalogue.resolve_name(&entry.concept) else {
                problems.push(format!("{place}: not a concept of the lab catalogue"));
                continue;
            };
            if by_concept.contains_key(&concept.id) {
                problems.push(format!("{place}: the concept is listed twice"));
                continue;
            }
            if entry.units.is_empty() {
                problems.push(format!("{place}: no units"));
                continue;
            }
            let mut units = Vec::new();
            let mut by_key = HashMap::new();
            for (j, u) in entry.units.iter().enumerate() {
                if !(u.factor.is_finite() && u.factor > 0.0 && u.offset.is_finite()) {
                    problems.push(format!("{place}.units[{j}]: factor must be finite and positive, offset finite"));
                }
                for spelling in std::iter::once(&u.unit).chain(&u.aliases) {
                    let key = normalise_unit(spelling);
                    if key.is_empty() || by_key.insert(key, j).is_some_and(|other| other != j) {
                        problems.push(format!("{place}.units[{j}]: {spelling:?} is empty or names two units"));
                    }
                }
                units.push(Unit { name: u.unit.clone(), factor: u.factor, offset: u.offset });
            }
            by_concept.insert(concept.id.clone(), ConceptUnits { units, by_key });
        }
        if problems.is_empty() {
            Ok(UnitTable { by_concept })
        } else {
            Err(problems)
        }
    }

    /// The units of a concept (by catalogue id), if the table lists it.
    pub fn concept(&self, concept_id: &str) -> Option<&ConceptUnits> {
        self.by_concept.get(concept_id)
    }
}

/// A unit's spelling compared loosely: case, spaces, micro signs,
/// superscripts, `^`, and UCUM braces around an annotation do not matter
/// ("µmol/L" = "umol/l"; "mL/min/{1.73_m2}" = "ml/min/1.73m²").
pub fn normalise_unit(unit: &str) -> String {
    let mut out = String::with_capacity(unit.len());
    for ch in unit.chars() {
        match ch {
            'µ' | 'μ' => out.push('u'),
            '²' => out.push('2'),
            '³' => out.push('3'),
            ' ' | '\t' | '^' | '{' | '}' | '_' => {}
            c => out.extend(c.to_lowercase()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(concept: &str) -> &'static ConceptUnits {
        let id = &LabCatalogue::builtin().resolve_name(concept).unwrap().id;
        UnitTable::builtin().concept(id).unwrap()
    }

    #[test]
    fn the_builtin_table_loads() {
        assert!(UnitTable::builtin().concept("nonexistent").is_none());
        assert_eq!(units("HbA1c").names(), ["%", "mmol/mol"]);
    }

    #[test]
    fn conversions_between_common_units() {
        let check = |concept: &str, value: f64, from: &str, to: &str, expected: f64| {
            let u = units(concept);
            let got = convert(value, u.find(from).unwrap(), u.find(to).unwrap());
            assert!((got - expected).abs() < 0.01 * expected.abs().max(1.0), "{concept} {value} {from} -> {to}: {got}");
        };
        check("Hemoglobin A1c", 53.0, "mmol/mol", "%", 7.0);
        check("Hemoglobin A1c", 7.0, "%", "mmol/mol", 53.0);
        check("Creatinine", 88.42, "µmol/L", "mg/dL", 1.0);
        check("Creatinine", 2.6, "mg/dl", "umol/l", 229.9);
        check("Glucose", 5.5, "mmol/L", "mg/dL", 99.1);
        check("Hemoglobin", 109.0, "g/L", "g/dL", 10.9);
        check("Potassium", 5.1, "mEq/L", "mmol/L", 5.1);
        check("Estimated glomerular filtration rate", 24.0, "mL/min/{1.73_m2}", "mL/min/1.73 m²", 24.0);
    }

    #[test]
    fn unknown_spellings_are_not_found() {
        assert!(units("Creatinine").find("mg").is_none());
        assert!(units("Hemoglobin A1c").find("mg/dL").is_none());
    }

    #[test]
    fn a_bad_table_reports_every_problem() {
        let json = r#"{"about":"","version":1,"concepts":[
            {"concept":"Unobtainium","units":[{"unit":"x","factor":1,"offset":0}]},
            {"concept":"Creatinine","units":[{"unit":"mg/dL","factor":0,"offset":0},{"unit":"MG/DL","factor":1,"offset":0}]}]}"#;
        let problems = UnitTable::from_json(json, LabCatalogue::builtin()).unwrap_err();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("Unobtainium"), "{problems:?}");
    }
}
