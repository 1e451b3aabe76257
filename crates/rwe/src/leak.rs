//! The check that a task does not leak its results: no number in the
//! protocol or in a choice question or option equals a gold field value at
//! the precision it is written with (RWE-bench masks results in the
//! protocol, section 2.2, and its choice questions carry no numbers,
//! Figure 13). A whole number in the text is compared only with whole-number
//! gold values (counts), so "28-day mortality" is not taken for an odds
//! ratio of 27.6. Numbers the task lists in `leak_check_allow` are exempt.
//! Loading a task with its gold answers for a study refuses a leaking task
//! ([`refuse_leaks`]).

use serde::Serialize;

use crate::gold::Gold;
use crate::task::{Task, TaskError};

/// A number in the task text that equals a result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Leak {
    /// Where the number is (`protocol.methods`, `questions[1].choice.options.B`).
    pub place: String,
    pub number: String,
    /// The gold field it equals.
    pub field: String,
}

/// The decimal numbers in a text with the count of their decimals.
fn numbers(text: &str) -> Vec<(String, f64, i32)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let preceded_by_word = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.');
        if bytes[i].is_ascii_digit() && !preceded_by_word {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let mut decimals = 0;
            if i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit() {
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                    decimals += 1;
                }
            }
            let token = &text[start..i];
            if let Ok(v) = token.parse::<f64>() {
                out.push((token.to_string(), v, decimals));
            }
        } else {
            i += 1;
        }
    }
    out
}

fn round_to(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round() / scale
}

/// Every place where the task's text states a gold value.
pub fn find_leaks(task: &Task, gold: &Gold) -> Vec<Leak> {
    let mut texts = vec![
        ("protocol.background".to_string(), task.protocol.background.as_str()),
        ("protocol.methods".to_string(), task.protocol.methods.as_str()),
    ];
    for (qi, q) in task.questions.iter().enumerate() {
        if let Some(choice) = &q.choice {
            texts.push((format!("questions[{qi}].choice.question"), choice.question.as_str()));
            for (letter, text) in &choice.options {
                texts.push((format!("questions[{qi}].choice.options.{letter}"), text.as_str()));
            }
        }
    }
    let allowed = |v: f64| task.leak_check_allow.iter().any(|a| (a.number - v).abs() < 1e-9);
    let mut leaks = Vec::new();
    for (place, text) in texts {
        for (token, value, decimals) in numbers(text) {
            if allowed(value) {
                continue;
            }
            for (field, &g) in &gold.fields {
                let comparable = decimals > 0 || g.fract() == 0.0;
                if comparable && (round_to(g, decimals) - value).abs() < 1e-9 {
                    leaks.push(Leak { place: place.clone(), number: token.clone(), field: field.clone() });
                }
            }
        }
    }
    leaks
}

/// Refuses a task whose text states one of its gold values: such a task
/// measures nothing. The error names the task file `origin`, the first
/// place, its number and the gold field it equals, any further leaks, and
/// what to do (reword, or list a number that is not a result under
/// `leak_check_allow` with its reason).
pub fn refuse_leaks(task: &Task, gold: &Gold, origin: &str) -> Result<(), TaskError> {
    let leaks = find_leaks(task, gold);
    let Some(first) = leaks.first() else { return Ok(()) };
    let also: Vec<String> =
        leaks[1..].iter().map(|l| format!("{} states {} ({})", l.place, l.number, l.field)).collect();
    let also = if also.is_empty() { String::new() } else { format!("; also {}", also.join(", ")) };
    Err(TaskError::Invalid {
        path: origin.to_string(),
        field: first.place.clone(),
        message: format!(
            "states {}, the gold value of {}{also}; a task whose text gives its results is not a measurement: \
             reword it without the number, or, if the number is not a result (an age limit, a time window), \
             list it under leak_check_allow with its reason",
            first.number, first.field
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::tests::GOOD;

    fn gold(task: &Task) -> Gold {
        Gold::from_json_str(
            r#"{"task": "lactate-demo", "produced_by": "test", "choices": {"q_lactate": "A"},
            "fields": {"n_patients": 74, "n_deaths": 11, "or_lactate": 1.523, "or_low": 1.1, "or_high": 2.0, "p_lactate": 0.0123}}"#,
            task,
            "gold",
        )
        .unwrap()
    }

    #[test]
    fn numbers_are_tokenised_with_their_precision() {
        let n = numbers("28-day mortality, OR 1.52, v2.2 and 74 patients; P < 0.05.");
        let tokens: Vec<_> = n.iter().map(|(t, _, d)| (t.as_str(), *d)).collect();
        assert_eq!(tokens, vec![("28", 0), ("1.52", 2), ("74", 0), ("0.05", 2)]);
    }

    #[test]
    fn clean_task_has_no_leaks() {
        let task = Task::from_yaml_str(GOOD, "t").unwrap();
        assert_eq!(find_leaks(&task, &gold(&task)), vec![]);
    }

    #[test]
    fn stated_results_are_found_at_their_precision() {
        let leaky = GOOD
            .replace("logistic regression.", "logistic regression; 74 patients, the OR was about 1.5.")
            .replace("C: no significant association", "C: an OR near 1.52");
        let task = Task::from_yaml_str(&leaky, "t").unwrap();
        let leaks = find_leaks(&task, &gold(&task));
        let found: Vec<_> = leaks.iter().map(|l| (l.place.as_str(), l.number.as_str(), l.field.as_str())).collect();
        assert_eq!(
            found,
            vec![
                ("protocol.methods", "74", "n_patients"),
                ("protocol.methods", "1.5", "or_lactate"),
                ("questions[1].choice.options.C", "1.52", "or_lactate"),
            ]
        );
        let refused = refuse_leaks(&task, &gold(&task), "t/task.yaml").unwrap_err().to_string();
        assert!(
            refused.starts_with("t/task.yaml: protocol.methods: states 74, the gold value of n_patients; also protocol.methods states 1.5 (or_lactate), questions[1].choice.options.C states 1.52 (or_lactate); "),
            "{refused}"
        );
        assert!(refused.contains("reword it") && refused.contains("leak_check_allow"), "{refused}");
        // An allowed number is exempt.
        let allowed = format!("{leaky}leak_check_allow:\n  - {{number: 74, reason: the age limit}}\n");
        let task = Task::from_yaml_str(&allowed, "t").unwrap();
        assert_eq!(find_leaks(&task, &gold(&task)).len(), 2);
        let clean = Task::from_yaml_str(GOOD, "t").unwrap();
        assert!(refuse_leaks(&clean, &gold(&clean), "t").is_ok());
    }
}
