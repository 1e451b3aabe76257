//! The answer sheet: the environment's side of `submit_answers` (RWE-bench
//! section 2.1 and Appendix E.1). Baseline fields and choice questions are
//! visible from the start; a primary result's fields are revealed only once
//! its choice question has been answered correctly; every question is
//! answered at most once; nothing is accepted before the cohort audit file
//! exists. The sheet is plain data, so a run can store it after each step
//! and restore it on resume.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::gold::Gold;
use crate::provenance::AnswerBasis;
use crate::task::{FieldKind, Question, Task};

/// An answer as the agent gave it: an option letter or a number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AnswerValue {
    Number(f64),
    Choice(String),
}

/// An accepted answer, the agent step that submitted it and (typed
/// strategy) where its value comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedAnswer {
    pub value: AnswerValue,
    pub step: u32,
    /// The result it was resolved from, the tool output it matches, or
    /// `unsupported` ([`crate::provenance`]); `None` where not assessed
    /// (the R strategy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<AnswerBasis>,
}

/// What happened to one submitted item.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SubmitOutcome {
    Accepted,
    /// Answered before; the first answer stands.
    AlreadyAnswered,
    /// A field whose choice question has not been answered correctly.
    NotVisible,
    /// No question or field of that name.
    Unknown,
    /// Not a value of the right kind; not recorded, may be submitted again.
    Invalid {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubmitItem {
    pub id: String,
    #[serde(flatten)]
    pub outcome: SubmitOutcome,
}

/// The environment's reply to one submission.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubmitReport {
    pub items: Vec<SubmitItem>,
    /// Fields that became visible because of this submission.
    pub revealed: Vec<VisibleItem>,
    /// Visible questions still unanswered after it.
    pub remaining: Vec<String>,
}

/// A question the agent can see.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum VisibleItem {
    Choice { id: String, question: String, options: BTreeMap<String, String> },
    Field { name: String, field_type: String, sentence: String },
}

/// Why a whole submission was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitRefused {
    #[error(
        "answers are accepted only after the cohort audit file exists; export the final cohort (identifiers and the key criterion variables) first"
    )]
    NoAuditFile,
}

/// The answers of one task run so far.
#[derive(Debug, Clone)]
pub struct AnswerSheet {
    task: Task,
    gold: Gold,
    answers: BTreeMap<String, RecordedAnswer>,
}

impl AnswerSheet {
    pub fn new(task: Task, gold: Gold) -> AnswerSheet {
        AnswerSheet { task, gold, answers: BTreeMap::new() }
    }

    /// A sheet with answers stored by an earlier, interrupted run.
    pub fn restore(task: Task, gold: Gold, answers: BTreeMap<String, RecordedAnswer>) -> AnswerSheet {
        AnswerSheet { task, gold, answers }
    }

    pub fn task(&self) -> &Task {
        &self.task
    }

    /// The same task and gold with `answers` in place of the current ones.
    pub fn with_answers(&self, answers: BTreeMap<String, RecordedAnswer>) -> AnswerSheet {
        AnswerSheet { task: self.task.clone(), gold: self.gold.clone(), answers }
    }

    /// What is visible before any answer: baseline fields and choice questions.
    pub fn visible_at_start(&self) -> Vec<VisibleItem> {
        self.with_answers(BTreeMap::new()).visible()
    }

    pub fn answers(&self) -> &BTreeMap<String, RecordedAnswer> {
        &self.answers
    }

    /// Whether a choice question has been answered with the gold option.
    pub fn choice_correct(&self, question_id: &str) -> bool {
        match (self.answers.get(question_id), self.gold.choices.get(question_id)) {
            (Some(RecordedAnswer { value: AnswerValue::Choice(c), .. }), Some(gold)) => c == gold,
            _ => false,
        }
    }

    fn fields_visible(&self, q: &Question) -> bool {
        !q.is_gated() || self.choice_correct(&q.id)
    }

    /// Everything the agent can see now, in task order: each question's
    /// choice, then its fields once visible.
    pub fn visible(&self) -> Vec<VisibleItem> {
        let mut out = Vec::new();
        for q in &self.task.questions {
            if let Some(choice) = &q.choice {
                out.push(VisibleItem::Choice {
                    id: q.id.clone(),
                    question: choice.question.clone(),
                    options: choice.options.clone(),
                });
            }
            if self.fields_visible(q) {
                out.extend(q.fields.iter().map(|f| field_item(q, f)));
            }
        }
        out
    }

    fn visible_ids(&self) -> Vec<String> {
        self.visible()
            .into_iter()
            .map(|v| match v {
                VisibleItem::Choice { id, .. } => id,
                VisibleItem::Field { name, .. } => name,
            })
            .collect()
    }

    /// Visible questions not answered yet.
    pub fn remaining(&self) -> Vec<String> {
        self.visible_ids().into_iter().filter(|id| !self.answers.contains_key(id)).collect()
    }

    /// The JSON Schema of each answer that can be given now (Evident's
    /// typed strategy decodes `submit_answers` under them): one entry per
    /// visible, unanswered question id or field name, in task order; a
    /// choice takes one of its option letters, a count a whole number of at
    /// least 0, a proportion a number from 0 to its base, a ratio or its CI
    /// bound a positive number, a p-value or AUC a number from 0 to 1, a
    /// numeric field any number.
    pub fn open_answer_schemas(&self) -> Vec<(String, serde_json::Value)> {
        use serde_json::json;
        let remaining = self.remaining();
        let mut out = Vec::new();
        for q in &self.task.questions {
            if let Some(choice) = q.choice.as_ref().filter(|_| remaining.contains(&q.id)) {
                let letters: Vec<&String> = choice.options.keys().collect();
                out.push((q.id.clone(), json!({"type": "string", "enum": letters})));
            }
            for f in q.fields.iter().filter(|f| remaining.iter().any(|r| r == f.name())) {
                let schema = match f {
                    FieldKind::Count { .. } => json!({"type": "integer", "minimum": 0}),
                    FieldKind::Proportion { base, .. } => json!({"type": "number", "minimum": 0, "maximum": base}),
                    FieldKind::Ratio { .. } | FieldKind::Ci { .. } => json!({"type": "number", "exclusiveMinimum": 0}),
                    FieldKind::Pvalue { .. } | FieldKind::Auc { .. } => {
                        json!({"type": "number", "minimum": 0, "maximum": 1})
                    }
                    FieldKind::Numeric { .. } => json!({"type": "number"}),
                };
                out.push((f.name().to_string(), schema));
            }
        }
        out
    }

    /// Records where an accepted answer comes from (Evident's typed strategy).
    pub fn set_basis(&mut self, id: &str, basis: AnswerBasis) {
        if let Some(a) = self.answers.get_mut(id) {
            a.basis = Some(basis);
        }
    }

    /// Every visible question is answered (RWE-bench's completion).
    pub fn is_complete(&self) -> bool {
        self.remaining().is_empty()
    }

    /// Records a submission made at `step`. Items are judged against what was
    /// visible before the submission, so a field gated by a choice in the
    /// same submission is not yet visible.
    pub fn submit(
        &mut self,
        step: u32,
        audit_file_present: bool,
        items: &[(String, serde_json::Value)],
    ) -> Result<SubmitReport, SubmitRefused> {
        if !audit_file_present {
            return Err(SubmitRefused::NoAuditFile);
        }
        let visible_before = self.visible_ids();
        let mut report = Vec::new();
        for (id, raw) in items {
            let outcome = if self.answers.contains_key(id) {
                SubmitOutcome::AlreadyAnswered
            } else if let Some(q) = self.task.question(id).filter(|q| q.choice.is_some()) {
                match parse_choice(q, raw) {
                    Ok(letter) => {
                        self.answers.insert(
                            id.clone(),
                            RecordedAnswer { value: AnswerValue::Choice(letter), step, basis: None },
                        );
                        SubmitOutcome::Accepted
                    }
                    Err(reason) => SubmitOutcome::Invalid { reason },
                }
            } else if let Some((_, field)) = self.task.field(id) {
                if !visible_before.contains(id) {
                    SubmitOutcome::NotVisible
                } else {
                    match parse_number(field, raw) {
                        Ok(x) => {
                            self.answers.insert(
                                id.clone(),
                                RecordedAnswer { value: AnswerValue::Number(x), step, basis: None },
                            );
                            SubmitOutcome::Accepted
                        }
                        Err(reason) => SubmitOutcome::Invalid { reason },
                    }
                }
            } else {
                SubmitOutcome::Unknown
            };
            report.push(SubmitItem { id: id.clone(), outcome });
        }
        let revealed = self
            .visible()
            .into_iter()
            .filter(|v| matches!(v, VisibleItem::Field { name, .. } if !visible_before.contains(name)))
            .collect();
        Ok(SubmitReport { items: report, revealed, remaining: self.remaining() })
    }
}

fn field_item(q: &Question, f: &FieldKind) -> VisibleItem {
    VisibleItem::Field {
        name: f.name().to_string(),
        field_type: f.type_name().to_string(),
        sentence: q.description.clone(),
    }
}

fn parse_choice(q: &Question, raw: &serde_json::Value) -> Result<String, String> {
    let options = &q.choice.as_ref().expect("a choice question").options;
    let letters = options.keys().cloned().collect::<Vec<_>>().join(", ");
    let text = raw.as_str().ok_or_else(|| format!("answer with one option letter ({letters})"))?;
    let letter = text.trim().trim_end_matches(['.', ')']).to_ascii_uppercase();
    if options.contains_key(&letter) {
        Ok(letter)
    } else {
        Err(format!("{text:?} is not an option; answer with one of {letters}"))
    }
}

fn parse_number(field: &FieldKind, raw: &serde_json::Value) -> Result<f64, String> {
    let x = match raw {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => {
            let mut s = s.trim();
            // A p-value may be written with its own sign ("<0.001").
            if let FieldKind::Pvalue { sign, .. } = field {
                s = s.strip_prefix(sign.as_str()).unwrap_or(s).trim();
            }
            s.parse::<f64>().ok()
        }
        _ => None,
    };
    match x {
        Some(x) if x.is_finite() => Ok(x),
        _ => Err(format!("field {:?} takes a number (type {})", field.name(), field.type_name())),
    }
}

impl fmt::Display for SubmitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for item in &self.items {
            let what = match &item.outcome {
                SubmitOutcome::Accepted => "accepted".to_string(),
                SubmitOutcome::AlreadyAnswered => "refused: already answered (each question is answered once)".into(),
                SubmitOutcome::NotVisible => "refused: this field is not visible".into(),
                SubmitOutcome::Unknown => "refused: no such question".into(),
                SubmitOutcome::Invalid { reason } => format!("not recorded: {reason}"),
            };
            writeln!(f, "{}: {what}", item.id)?;
        }
        if !self.revealed.is_empty() {
            writeln!(f, "New follow-up fields:")?;
            for v in &self.revealed {
                if let VisibleItem::Field { name, field_type, sentence } = v {
                    writeln!(f, "- {name} ({field_type}) in: {sentence}")?;
                }
            }
        }
        if self.remaining.is_empty() {
            write!(f, "All visible questions are answered.")
        } else {
            write!(f, "Still to answer: {}", self.remaining.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::tests::GOOD;
    use serde_json::json;

    fn sheet() -> AnswerSheet {
        let task = Task::from_yaml_str(GOOD, "t.yaml").unwrap();
        let gold = Gold {
            task: task.id.clone(),
            produced_by: "test".into(),
            choices: [("q_lactate".to_string(), "A".to_string())].into(),
            fields: [
                ("n_patients", 74.0),
                ("n_deaths", 11.0),
                ("or_lactate", 1.5),
                ("or_low", 1.1),
                ("or_high", 2.0),
                ("p_lactate", 0.01),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        };
        AnswerSheet::new(task, gold)
    }

    fn items(pairs: &[(&str, serde_json::Value)]) -> Vec<(String, serde_json::Value)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    fn outcomes(r: &SubmitReport) -> Vec<(&str, &SubmitOutcome)> {
        r.items.iter().map(|i| (i.id.as_str(), &i.outcome)).collect()
    }

    #[test]
    fn nothing_is_accepted_before_the_audit_file() {
        let mut s = sheet();
        assert_eq!(s.submit(1, false, &items(&[("n_patients", json!(74))])), Err(SubmitRefused::NoAuditFile));
        assert!(s.answers().is_empty());
    }

    #[test]
    fn gated_fields_appear_only_after_a_correct_choice() {
        let mut s = sheet();
        assert_eq!(s.remaining(), vec!["n_patients", "n_deaths", "q_lactate"]);
        // The ratio is not visible yet, even in the submission that answers its choice.
        let r = s.submit(3, true, &items(&[("q_lactate", json!("a")), ("or_lactate", json!(1.4))])).unwrap();
        assert_eq!(
            outcomes(&r),
            vec![("q_lactate", &SubmitOutcome::Accepted), ("or_lactate", &SubmitOutcome::NotVisible)]
        );
        let revealed: Vec<_> = r
            .revealed
            .iter()
            .map(|v| match v {
                VisibleItem::Field { name, .. } => name.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(revealed, vec!["or_lactate", "or_low", "or_high", "p_lactate"]);
        let r = s.submit(4, true, &items(&[("or_lactate", json!(1.4)), ("p_lactate", json!("=0.02"))])).unwrap();
        assert_eq!(r.items[0].outcome, SubmitOutcome::Accepted);
        assert_eq!(r.items[1].outcome, SubmitOutcome::Accepted);
        assert_eq!(s.answers()["p_lactate"], RecordedAnswer { value: AnswerValue::Number(0.02), step: 4, basis: None });
        assert_eq!(s.remaining(), vec!["n_patients", "n_deaths", "or_low", "or_high"]);
    }

    #[test]
    fn a_wrong_choice_hides_its_fields_for_good_and_completes_the_task() {
        let mut s = sheet();
        s.submit(1, true, &items(&[("q_lactate", json!("C")), ("n_patients", json!(70)), ("n_deaths", json!("9"))]))
            .unwrap();
        assert!(s.is_complete(), "{:?}", s.remaining());
        assert!(!s.choice_correct("q_lactate"));
        let r = s.submit(2, true, &items(&[("q_lactate", json!("A")), ("or_lactate", json!(1.4))])).unwrap();
        assert_eq!(
            outcomes(&r),
            vec![("q_lactate", &SubmitOutcome::AlreadyAnswered), ("or_lactate", &SubmitOutcome::NotVisible)]
        );
        assert_eq!(s.answers()["q_lactate"].value, AnswerValue::Choice("C".into()));
    }

    #[test]
    fn invalid_values_are_not_recorded_and_may_be_retried() {
        let mut s = sheet();
        let r = s
            .submit(1, true, &items(&[("q_lactate", json!("E")), ("n_patients", json!("many")), ("bogus", json!(1))]))
            .unwrap();
        assert!(matches!(&r.items[0].outcome, SubmitOutcome::Invalid { reason } if reason.contains("one of A, B, C")));
        assert!(matches!(&r.items[1].outcome, SubmitOutcome::Invalid { reason } if reason.contains("takes a number")));
        assert_eq!(r.items[2].outcome, SubmitOutcome::Unknown);
        assert!(s.answers().is_empty());
        let r = s.submit(2, true, &items(&[("n_patients", json!(74))])).unwrap();
        assert_eq!(r.items[0].outcome, SubmitOutcome::Accepted);
        assert!(r.to_string().contains("Still to answer: n_deaths, q_lactate"), "{r}");
    }

    #[test]
    fn restore_keeps_gating_and_once_only() {
        let mut s = sheet();
        s.submit(1, true, &items(&[("q_lactate", json!("A"))])).unwrap();
        let stored = serde_json::to_string(s.answers()).unwrap();
        let mut again = AnswerSheet::restore(s.task.clone(), s.gold.clone(), serde_json::from_str(&stored).unwrap());
        assert!(again.choice_correct("q_lactate"));
        let r = again.submit(2, true, &items(&[("q_lactate", json!("B")), ("or_low", json!(1.0))])).unwrap();
        assert_eq!(r.items[0].outcome, SubmitOutcome::AlreadyAnswered);
        assert_eq!(r.items[1].outcome, SubmitOutcome::Accepted);
    }
}
