//! The task format: a study protocol (background and objective, research
//! methods) and its questions, read from YAML or JSON and validated on load.
//! Questions follow RWE-bench (section 2.1, Figures 13-16): each result
//! sentence is a masked description whose `<placeholders>` are typed fill-in
//! fields (count, proportion, ratio with its CI fields, ci, pvalue with mode
//! and sign, numeric, auc); a primary result is gated by one single-choice
//! question, a baseline characteristic is not gated. The database is not part
//! of the file: a task is this protocol plus the database URL it runs on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The three parts of a protocol an agent reads (RWE-bench section 2.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Protocol {
    /// Background and objective.
    pub background: String,
    /// Research methods: population, exposure, outcome, covariates, analysis.
    pub methods: String,
}

/// What a result sentence reports (the categories of Figure 14; additional
/// results are excluded from RWE-bench and therefore from this format).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultType {
    /// Descriptive; its fields are visible from the start, never gated.
    BaselineCharacteristics,
    /// A primary result; its fields are revealed only after its choice
    /// question is answered correctly.
    PrimaryResults,
}

/// A single-choice question about a primary result (Figure 13): neutral
/// wording, no numbers, three or four mutually exclusive options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Choice {
    pub question: String,
    /// Option letter (`A`, `B`, ...) to option text, in letter order.
    pub options: BTreeMap<String, String>,
}

/// How a p-value field is reported (Figure 15's `pvalue_mode`). Interval
/// p-values (`interval_low` / `interval_high`) are not supported: write the
/// p-value as a bound instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PvalueMode {
    /// `P = 0.012`.
    Exact,
    /// `P < 0.001`, `P > 0.05`: the number is a bound, the sign says which way.
    Bound,
}

/// The sign on the left of a p-value placeholder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PvalueSign {
    #[serde(rename = "=")]
    Eq,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
}

impl PvalueSign {
    pub fn as_str(self) -> &'static str {
        match self {
            PvalueSign::Eq => "=",
            PvalueSign::Lt => "<",
            PvalueSign::Le => "<=",
            PvalueSign::Gt => ">",
            PvalueSign::Ge => ">=",
        }
    }
}

/// A field's type and facets (Figure 15), without its name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum FieldKind {
    /// Integer-like counts (patients, events).
    Count {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unit: Option<String>,
    },
    /// A proportion or rate on the given base (1, 100, 1000 or 100000).
    Proportion {
        name: String,
        base: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
    },
    /// A multiplicative effect (OR, HR, RR) with its confidence interval
    /// fields, which must be `ci` fields of the same question.
    Ratio {
        name: String,
        ci_low: String,
        ci_high: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
    },
    /// One endpoint of a ratio's confidence interval.
    Ci { name: String },
    /// A p-value.
    Pvalue { name: String, mode: PvalueMode, sign: PvalueSign },
    /// A continuous value (mean, median, threshold, dispersion).
    Numeric {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unit: Option<String>,
    },
    /// ROC AUC, in [0, 1].
    Auc { name: String },
}

/// A fill-in field: its kind carries its name.
pub type Field = FieldKind;

impl FieldKind {
    pub fn name(&self) -> &str {
        match self {
            FieldKind::Count { name, .. }
            | FieldKind::Proportion { name, .. }
            | FieldKind::Ratio { name, .. }
            | FieldKind::Ci { name }
            | FieldKind::Pvalue { name, .. }
            | FieldKind::Numeric { name, .. }
            | FieldKind::Auc { name } => name,
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            FieldKind::Count { .. } => "count",
            FieldKind::Proportion { .. } => "proportion",
            FieldKind::Ratio { .. } => "ratio",
            FieldKind::Ci { .. } => "ci",
            FieldKind::Pvalue { .. } => "pvalue",
            FieldKind::Numeric { .. } => "numeric",
            FieldKind::Auc { .. } => "auc",
        }
    }

    /// Whether the field counts towards task success (SR): ratio, its CI and
    /// p-value fields do; descriptive fields do not (RWE-bench 2.4.2).
    pub fn is_statistical(&self) -> bool {
        matches!(self, FieldKind::Ratio { .. } | FieldKind::Ci { .. } | FieldKind::Pvalue { .. })
    }
}

/// One result sentence with its fields, and for a primary result the choice
/// question that gates them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    /// Unique in the task, and distinct from every field name (answers are
    /// keyed by question id for choices and by field name for fields).
    pub id: String,
    pub result_type: ResultType,
    /// Present exactly for primary results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<Choice>,
    /// The result sentence with `<field>` placeholders, one per field.
    pub description: String,
    pub fields: Vec<Field>,
}

impl Question {
    pub fn is_gated(&self) -> bool {
        self.choice.is_some()
    }
}

/// A study task as written in a task file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Short, unique name: lowercase letters, digits and `-`.
    pub id: String,
    pub title: String,
    /// The published study this task is modelled on, and how it was adapted.
    pub modelled_on: String,
    pub protocol: Protocol,
    pub questions: Vec<Question>,
    /// Files beside the task file that go into the agent's workspace
    /// (ICD code lists, variable definitions), relative to the task folder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auxiliary_files: Vec<String>,
    /// Numbers the protocol may state although a result has the same value
    /// (e.g. "aged 18 or over" when a count is 18), each with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leak_check_allow: Vec<AllowedNumber>,
}

/// A number exempt from the leak check, with why it is not a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowedNumber {
    pub number: f64,
    pub reason: String,
}

/// A task file could not be read, parsed or validated. Every message names
/// the file and, for a validation error, the field.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("{path}: cannot read the task file: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: not a valid task: {message}; see crates/rwe/tasks/*/task.yaml for the format")]
    Parse { path: String, message: String },
    #[error("{path}: {field}: {message}")]
    Invalid { path: String, field: String, message: String },
}

/// A task with where it came from, so auxiliary files and gold answers can
/// be found beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedTask {
    pub task: Task,
    /// The task file.
    pub path: PathBuf,
}

impl LoadedTask {
    /// The folder holding the task file.
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }
}

impl Task {
    /// Reads a task from a `.json` file, or from YAML for any other name,
    /// and validates it.
    pub fn load(path: &Path) -> Result<LoadedTask, TaskError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| TaskError::Io { path: origin.clone(), source })?;
        let task = if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
            Task::from_json_str(&text, &origin)?
        } else {
            Task::from_yaml_str(&text, &origin)?
        };
        for (i, file) in task.auxiliary_files.iter().enumerate() {
            let aux = path.parent().unwrap_or(Path::new(".")).join(file);
            if !aux.is_file() {
                return Err(TaskError::Invalid {
                    path: origin,
                    field: format!("auxiliary_files[{i}]"),
                    message: format!("{file:?} is not a file beside the task file; add it or remove the entry"),
                });
            }
        }
        Ok(LoadedTask { task, path: path.to_path_buf() })
    }

    pub fn from_yaml_str(text: &str, origin: &str) -> Result<Task, TaskError> {
        let task: Task = serde_yaml::from_str(text)
            .map_err(|e| TaskError::Parse { path: origin.to_string(), message: e.to_string() })?;
        task.validate(origin)?;
        Ok(task)
    }

    pub fn from_json_str(text: &str, origin: &str) -> Result<Task, TaskError> {
        let task: Task = serde_json::from_str(text)
            .map_err(|e| TaskError::Parse { path: origin.to_string(), message: e.to_string() })?;
        task.validate(origin)?;
        Ok(task)
    }

    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self).expect("a task always serialises")
    }

    /// Every field of the task with the question it belongs to, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&Question, &Field)> {
        self.questions.iter().flat_map(|q| q.fields.iter().map(move |f| (q, f)))
    }

    pub fn field(&self, name: &str) -> Option<(&Question, &Field)> {
        self.fields().find(|(_, f)| f.name() == name)
    }

    pub fn question(&self, id: &str) -> Option<&Question> {
        self.questions.iter().find(|q| q.id == id)
    }

    /// Checks everything the answer sheet and the metrics rely on; the first
    /// problem is returned with its field path.
    pub fn validate(&self, origin: &str) -> Result<(), TaskError> {
        let invalid = |field: String, message: String| TaskError::Invalid { path: origin.to_string(), field, message };
        if self.id.is_empty() || !self.id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
            return Err(invalid("id".into(), format!("{:?} must be lowercase letters, digits and '-'", self.id)));
        }
        for (name, text) in [
            ("title", &self.title),
            ("modelled_on", &self.modelled_on),
            ("protocol.background", &self.protocol.background),
            ("protocol.methods", &self.protocol.methods),
        ] {
            if text.trim().is_empty() {
                return Err(invalid(name.into(), "is empty".into()));
            }
        }
        if self.questions.is_empty() {
            return Err(invalid("questions".into(), "is empty; a task needs at least one question".into()));
        }
        let mut names = BTreeSet::new();
        for (qi, q) in self.questions.iter().enumerate() {
            validate_question(q, &format!("questions[{qi}]"), &mut names).map_err(|(f, m)| invalid(f, m))?;
        }
        if !self.fields().any(|(_, f)| matches!(f, FieldKind::Ratio { .. } | FieldKind::Pvalue { .. })) {
            return Err(invalid(
                "questions".into(),
                "has no ratio or pvalue field; every task needs at least one (RWE-bench keeps only such tasks)".into(),
            ));
        }
        for (i, a) in self.leak_check_allow.iter().enumerate() {
            if a.reason.trim().is_empty() {
                return Err(invalid(format!("leak_check_allow[{i}].reason"), "is empty; say why".into()));
            }
        }
        Ok(())
    }
}

/// Validates one question; names (question ids and field names) share one
/// namespace across the task.
fn validate_question(q: &Question, at: &str, names: &mut BTreeSet<String>) -> Result<(), (String, String)> {
    let err = |field: &str, message: String| Err((format!("{at}.{field}"), message));
    if !is_identifier(&q.id) {
        return err("id", format!("{:?} must be letters, digits and '_', starting with a letter", q.id));
    }
    if !names.insert(q.id.clone()) {
        return err("id", format!("{:?} is used twice; question ids and field names must be unique", q.id));
    }
    match (q.result_type, &q.choice) {
        (ResultType::PrimaryResults, None) => {
            return err("choice", "is missing; a primary result is gated by a single-choice question".into())
        }
        (ResultType::BaselineCharacteristics, Some(_)) => {
            return err("choice", "is set on a baseline characteristic; baseline fields are not gated".into())
        }
        _ => {}
    }
    if let Some(choice) = &q.choice {
        if choice.question.trim().is_empty() {
            return err("choice.question", "is empty".into());
        }
        let n = choice.options.len();
        if !(3..=4).contains(&n) {
            return err("choice.options", format!("has {n} options; give three or four (Figure 13)"));
        }
        let expected: Vec<String> = ["A", "B", "C", "D"][..n].iter().map(|s| s.to_string()).collect();
        let keys: Vec<String> = choice.options.keys().cloned().collect();
        if keys != expected {
            return err("choice.options", format!("keys are {keys:?}; use the letters {expected:?}"));
        }
        if let Some((k, _)) = choice.options.iter().find(|(_, v)| v.trim().is_empty()) {
            return err(&format!("choice.options.{k}"), "is empty".into());
        }
        let distinct: BTreeSet<&str> = choice.options.values().map(|v| v.trim()).collect();
        if distinct.len() != n {
            return err("choice.options", "repeat an option; options must be mutually exclusive".into());
        }
    }
    if q.fields.is_empty() {
        return err("fields", "is empty; a result sentence has at least one field".into());
    }
    let placeholders = placeholders(&q.description);
    let mut own = BTreeSet::new();
    for (fi, f) in q.fields.iter().enumerate() {
        let name = f.name();
        if !is_identifier(name) {
            return err(&format!("fields[{fi}].name"), format!("{name:?} must be letters, digits and '_'"));
        }
        if !names.insert(name.to_string()) {
            return err(
                &format!("fields[{fi}].name"),
                format!("{name:?} is used twice; question ids and field names must be unique"),
            );
        }
        own.insert(name);
        if !placeholders.iter().any(|p| p == name) {
            return err("description", format!("has no placeholder <{name}> for field {name:?}"));
        }
        match f {
            FieldKind::Proportion { base, .. } if ![1, 100, 1000, 100_000].contains(base) => {
                return err(&format!("fields[{fi}].base"), format!("is {base}; use 1, 100, 1000 or 100000"));
            }
            FieldKind::Pvalue { mode, sign, .. } => match (mode, sign) {
                (PvalueMode::Exact, PvalueSign::Eq) => {}
                (PvalueMode::Exact, _) => {
                    return err(&format!("fields[{fi}].sign"), "an exact p-value has sign \"=\"".into());
                }
                (PvalueMode::Bound, PvalueSign::Eq) => {
                    return err(&format!("fields[{fi}].sign"), "a bound has sign <, <=, > or >=, not =".into());
                }
                (PvalueMode::Bound, _) => {}
            },
            _ => {}
        }
    }
    for p in &placeholders {
        if !own.contains(p.as_str()) {
            return err("description", format!("placeholder <{p}> is not a field of this question"));
        }
    }
    // Each ratio names two distinct ci fields of the same question, and each
    // ci field belongs to exactly one ratio.
    let mut ci_owner: BTreeMap<&str, &str> = BTreeMap::new();
    for (fi, f) in q.fields.iter().enumerate() {
        if let FieldKind::Ratio { name, ci_low, ci_high, .. } = f {
            if ci_low == ci_high {
                return err(&format!("fields[{fi}].ci_high"), "names the same field as ci_low".into());
            }
            for (facet, ci) in [("ci_low", ci_low), ("ci_high", ci_high)] {
                match q.fields.iter().find(|g| g.name() == ci) {
                    Some(FieldKind::Ci { .. }) => {}
                    Some(other) => {
                        return err(
                            &format!("fields[{fi}].{facet}"),
                            format!("{ci:?} is a {} field; it must be a ci field", other.type_name()),
                        )
                    }
                    None => {
                        return err(
                            &format!("fields[{fi}].{facet}"),
                            format!("{ci:?} is not a field of this question; add it as type ci"),
                        )
                    }
                }
                if let Some(prev) = ci_owner.insert(ci, name) {
                    return err(&format!("fields[{fi}].{facet}"), format!("{ci:?} already belongs to ratio {prev:?}"));
                }
            }
        }
    }
    for (fi, f) in q.fields.iter().enumerate() {
        if let FieldKind::Ci { name } = f {
            if !ci_owner.contains_key(name.as_str()) {
                return err(&format!("fields[{fi}]"), format!("ci field {name:?} belongs to no ratio field"));
            }
        }
    }
    Ok(())
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The `<name>` placeholders of a masked description, in order.
pub fn placeholders(description: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = description;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        match after.find('>') {
            Some(end) if is_identifier(&after[..end]) => {
                out.push(after[..end].to_string());
                rest = &after[end + 1..];
            }
            _ => rest = after,
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const GOOD: &str = r#"
id: lactate-demo
title: Lactate and in-hospital mortality
modelled_on: A published MIMIC-IV cohort study, adapted to the demo.
protocol:
  background: Lactate reflects tissue hypoperfusion.
  methods: Adults at their first ICU stay; logistic regression.
questions:
  - id: baseline
    result_type: baseline_characteristics
    description: A total of <n_patients> patients were included, <n_deaths> died in hospital.
    fields:
      - {type: count, name: n_patients}
      - {type: count, name: n_deaths}
  - id: q_lactate
    result_type: primary_results
    choice:
      question: How was the first-day lactate associated with in-hospital mortality in your results?
      options:
        A: higher lactate was associated with higher mortality
        B: higher lactate was associated with lower mortality
        C: no significant association
    description: Per 1 mmol/L, OR <or_lactate> (95% CI <or_low>-<or_high>), P = <p_lactate>.
    fields:
      - {type: ratio, name: or_lactate, ci_low: or_low, ci_high: or_high, role: odds_ratio}
      - {type: ci, name: or_low}
      - {type: ci, name: or_high}
      - {type: pvalue, name: p_lactate, mode: exact, sign: "="}
"#;

    fn error(text: &str) -> String {
        Task::from_yaml_str(text, "t.yaml").unwrap_err().to_string()
    }

    #[test]
    fn good_task_loads_and_round_trips() {
        let task = Task::from_yaml_str(GOOD, "t.yaml").unwrap();
        assert_eq!(task.questions.len(), 2);
        assert!(!task.questions[0].is_gated());
        assert!(task.questions[1].is_gated());
        assert_eq!(task.fields().count(), 6);
        let (q, f) = task.field("p_lactate").unwrap();
        assert_eq!(q.id, "q_lactate");
        assert_eq!(f, &FieldKind::Pvalue { name: "p_lactate".into(), mode: PvalueMode::Exact, sign: PvalueSign::Eq });
        let again = Task::from_yaml_str(&task.to_yaml(), "again").unwrap();
        assert_eq!(again, task);
        let json = serde_json::to_string(&task).unwrap();
        assert_eq!(Task::from_json_str(&json, "j").unwrap(), task);
    }

    #[test]
    fn placeholders_are_found_in_order() {
        assert_eq!(placeholders("a <x> b <y_2> c < 0.05 <not a field>"), vec!["x", "y_2"]);
    }

    #[test]
    fn errors_name_file_and_field() {
        let check = |from: &str, to: &str, expected: &str| {
            assert!(GOOD.contains(from), "{from}");
            let e = error(&GOOD.replacen(from, to, 1));
            assert!(e.contains(expected), "{e}\n  expected: {expected}");
            assert!(e.starts_with("t.yaml"), "{e}");
        };
        check("id: lactate-demo", "id: Lactate Demo", "t.yaml: id: \"Lactate Demo\"");
        check("        C: no significant association\n", "", "questions[1].choice.options: has 2 options");
        check(
            "        C: no significant association",
            "        C: no significant association\n        E: x\n        F: y",
            "has 5 options",
        );
        check("        C: no", "        D: no", "keys are [\"A\", \"B\", \"D\"]");
        check(
            "        B: higher lactate was associated with lower mortality",
            "        B: no significant association",
            "repeat an option",
        );
        check("ci_low: or_low", "ci_low: or_lowx", "questions[1].fields[0].ci_low: \"or_lowx\" is not a field");
        check("ci_high: or_high", "ci_high: p_lactate", "\"p_lactate\" is a pvalue field");
        check("mode: exact, sign: \"=\"", "mode: exact, sign: \"<\"", "fields[3].sign: an exact p-value");
        check("mode: exact, sign: \"=\"", "mode: bound, sign: \"=\"", "a bound has sign");
        check("mode: exact", "mode: interval_low", "t.yaml: not a valid task");
        check("<n_deaths> died", "died", "questions[0].description: has no placeholder <n_deaths>");
        check("P = <p_lactate>.", "P = <p_lactate> <extra>.", "placeholder <extra> is not a field");
        check("name: n_deaths}", "name: n_patients}", "\"n_patients\" is used twice");
        check("id: q_lactate", "id: n_patients", "questions[1].id: \"n_patients\" is used twice");
        check("{type: count, name: n_deaths}", "{type: count, name: n_deaths, colour: red}", "unknown field `colour`");
        check(
            "    result_type: baseline_characteristics\n",
            "    result_type: baseline_characteristics\n    choice: {question: q, options: {A: a, B: b, C: c}}\n",
            "baseline fields are not gated",
        );
    }

    #[test]
    fn structural_requirements() {
        // A primary result without its choice question.
        let no_choice =
            GOOD.replace("    result_type: primary_results\n", "    result_type: baseline_characteristics\n");
        let no_choice = no_choice.replacen("    choice:\n", "    unused:\n", 1);
        assert!(error(&no_choice).contains("unknown field `unused`"));
        let primary_without = GOOD.split("    choice:\n").next().unwrap().to_string()
            + "    description: P = <p>.\n    fields:\n      - {type: pvalue, name: p, mode: exact, sign: \"=\"}\n";
        assert!(error(&primary_without).contains("questions[1].choice: is missing"), "{}", error(&primary_without));
        // No ratio and no p-value anywhere.
        let only_baseline = GOOD.split("  - id: q_lactate").next().unwrap();
        assert!(error(only_baseline).contains("has no ratio or pvalue field"));
        // No questions.
        let none = GOOD.split("questions:").next().unwrap().to_string() + "questions: []\n";
        assert!(error(&none).contains("questions: is empty"));
        // A ci field no ratio owns.
        let orphan = GOOD
            .replace(
                "      - {type: ci, name: or_high}\n",
                "      - {type: ci, name: or_high}\n      - {type: ci, name: stray}\n",
            )
            .replace("P = <p_lactate>.", "P = <p_lactate> <stray>.");
        assert!(error(&orphan).contains("ci field \"stray\" belongs to no ratio field"));
    }

    #[test]
    fn load_names_missing_auxiliary_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("task.yaml");
        std::fs::write(&path, format!("{GOOD}auxiliary_files: [icd_codes.csv]\n")).unwrap();
        let e = Task::load(&path).unwrap_err().to_string();
        assert!(e.contains("auxiliary_files[0]: \"icd_codes.csv\" is not a file"), "{e}");
        std::fs::write(dir.path().join("icd_codes.csv"), "code\nI48\n").unwrap();
        let loaded = Task::load(&path).unwrap();
        assert_eq!(loaded.dir(), dir.path());
        let missing = Task::load(&dir.path().join("nope.yaml")).unwrap_err().to_string();
        assert!(missing.contains("nope.yaml: cannot read the task file"), "{missing}");
    }
}
