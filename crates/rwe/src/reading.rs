//! Evident's reader of a computed result against a choice question's
//! options, for the `typed-read` strategy (Evident's, not the paper's).
//!
//! RWE-bench's choice questions (its Figure 13) ask what a study's primary
//! result showed, with neutral options such as "higher X was associated
//! with a higher risk of death", "... a lower risk ..." and "no
//! significant association". On the embedded 0.5B model the grounded
//! strategy computed each development task's analysis as R does, yet the
//! letter it chose did not follow the result (docs/evaluation.md, issue
//! 17). This module reads the letter from the result instead, by rule:
//!
//! - a result is *significant* when its p-value is below the protocol's
//!   level (0.05 unless the protocol states another) and, for a ratio, its
//!   95% CI excludes 1; *null* when neither holds; anything in between is
//!   not read;
//! - a significant ratio has a *direction*: above 1 means more of the
//!   outcome event for the group or the higher values its term names,
//!   turned over once per word of its term that names the lower side
//!   (`low_albumin`, `younger`) where the options name that side or its
//!   other side; a test (log-rank) has no direction;
//! - an option is *null* when it denies a significant difference or
//!   association ("no significant", "did not differ", "no clear
//!   association") or calls the groups similar; one that joins two
//!   findings ("... but ...") is not read; otherwise its direction is the
//!   product of its direction words (`higher`, `lower`, `older`,
//!   `younger`, ...), turned once by a negation that names the other side
//!   ("did not receive", "without"), and turned when it speaks of survival
//!   (the complement of the event) unless a word such as `worse` or
//!   `better` states the outcome's direction itself.
//!
//! The reader answers only when every relevant result reads the same way
//! and exactly one option has that reading; otherwise it returns nothing
//! and the model chooses as in `typed-grounded`. It answers the
//! benchmark's interpretation question for the model, which is why it is
//! a separately named strategy.

use serde::{Deserialize, Serialize};

use crate::provenance::{named_for, names_all, relevant, ResultNumber, ResultValue};
use crate::task::{FieldKind, Question, Task};

/// How a result or an option reads: no significant association, or a
/// significant one with more (`Higher`) or less (`Lower`) of the outcome
/// event for the higher side of the exposure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reading {
    Null,
    Higher,
    Lower,
}

impl Reading {
    fn flipped(self) -> Reading {
        match self {
            Reading::Higher => Reading::Lower,
            Reading::Lower => Reading::Higher,
            Reading::Null => Reading::Null,
        }
    }
}

/// The option a choice question's results read as, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChoiceReading {
    pub option: String,
    pub reading: Reading,
    /// The results read (their keys).
    pub keys: Vec<String>,
    /// One line for the trace: each result with its reading.
    pub why: String,
}

/// Words that place a group or a value on the higher side.
const UP: &[&str] = &[
    "higher",
    "high",
    "increased",
    "increase",
    "increasing",
    "greater",
    "more",
    "elevated",
    "older",
    "longer",
    "larger",
    "above",
];
/// Words that place it on the lower side.
const DOWN: &[&str] = &[
    "lower",
    "low",
    "decreased",
    "decrease",
    "decreasing",
    "reduced",
    "less",
    "fewer",
    "younger",
    "shorter",
    "smaller",
    "below",
    "normal",
];
/// Words that state the outcome's direction themselves (more of the event).
const WORSE: &[&str] = &["worse", "poorer", "harmful", "unfavourable", "unfavorable"];
/// Words that state less of the event.
const BETTER: &[&str] = &["better", "improved", "protective", "favourable", "favorable"];
/// Words for the complement of the event.
const SURVIVAL: &[&str] = &["survival", "survived", "survive", "surviving", "alive"];
/// Words that, within two words after a negation (`no`, `not`, `nor`,
/// `neither`), deny a significant difference or association: "no
/// significant", "did not differ", "no independent correlation", "no clear
/// association", "was not associated".
const NULL_HEADS: &[&str] = &[
    "significant",
    "significantly",
    "statistically",
    "associated",
    "association",
    "associations",
    "correlation",
    "correlated",
    "correlations",
    "difference",
    "differences",
    "different",
    "differ",
    "differed",
    "relationship",
    "related",
    "independent",
    "independently",
    "clear",
    "meaningful",
    "effect",
    "impact",
];
const NEGATIONS: &[&str] = &["no", "not", "nor", "neither"];
/// Words that say the groups were alike.
const ALIKE: &[&str] = &["similar", "comparable", "unchanged"];
/// Words that join two opposite findings in one option ("lower risk of ICU
/// mortality but higher risk of hospital mortality"): not read.
const CONTRAST: &[&str] = &["but", "whereas", "while", "although", "though", "however", "yet"];

fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect()
}

/// The product of a text's direction words: +1, -1, or 0 when it has none.
fn direction_of(words: &[String]) -> i32 {
    let mut sign = 0;
    for w in words {
        let s = if UP.contains(&w.as_str()) {
            1
        } else if DOWN.contains(&w.as_str()) {
            -1
        } else {
            continue;
        };
        sign = if sign == 0 { s } else { sign * s };
    }
    sign
}

/// How an option reads; `None` when it has no direction word and does not
/// deny an association, joins two findings, or states the outcome both ways.
pub fn classify_option(text: &str) -> Option<Reading> {
    let ws = words(text);
    let denies = ws.iter().enumerate().any(|(i, w)| {
        NEGATIONS.contains(&w.as_str()) && ws[i + 1..].iter().take(2).any(|n| NULL_HEADS.contains(&n.as_str()))
    });
    if denies || ws.iter().any(|w| ALIKE.contains(&w.as_str())) {
        return Some(Reading::Null);
    }
    if ws.iter().any(|w| CONTRAST.contains(&w.as_str())) {
        return None;
    }
    let worse = ws.iter().any(|w| WORSE.contains(&w.as_str()));
    let better = ws.iter().any(|w| BETTER.contains(&w.as_str()));
    // A negation that denies nothing names the exposure's other side ("did
    // not receive a statin", "without", "non-users"): it turns the reading.
    let negations = ws.iter().filter(|w| NEGATIONS.contains(&w.as_str()) || *w == "without" || *w == "non").count();
    let magnitude = direction_of(&ws) * if negations % 2 == 1 { -1 } else { 1 };
    let sign = match (worse, better) {
        (true, true) => return None,
        // "Higher X was associated with worse outcomes": the outcome word
        // carries the direction; the exposure's words (if any) turn it.
        (true, false) => {
            if magnitude < 0 {
                -1
            } else {
                1
            }
        }
        (false, true) => {
            if magnitude < 0 {
                1
            } else {
                -1
            }
        }
        (false, false) => {
            if magnitude == 0 {
                return None;
            }
            if ws.iter().any(|w| SURVIVAL.contains(&w.as_str())) {
                -magnitude
            } else {
                magnitude
            }
        }
    };
    Some(if sign > 0 { Reading::Higher } else { Reading::Lower })
}

/// Lower-side words a result's term can hold, each with the words that
/// name the other side of it. A term's lower-side word turns its ratio's
/// reading only where the options name that side or its other side as
/// such (`younger` against "older patients"); where they name the
/// exposure otherwise ("SAL <30 g/l" for `low_albumin`) they mean the
/// term's own side.
const TERM_SIDES: &[(&str, &[&str])] = &[
    ("low", &["low", "high"]),
    ("younger", &["younger", "older"]),
    ("young", &["young", "old", "older"]),
    ("normal", &["normal", "high", "abnormal", "elevated"]),
    ("below", &["below", "above"]),
    ("short", &["short", "long"]),
];

/// -1 when the term (a result key's words) holds a lower-side word whose
/// side the options name, else +1.
fn term_sign(key: &str, options: &[String]) -> i32 {
    let option_words: Vec<String> = options.iter().flat_map(|o| words(o)).collect();
    let mut sign = 1;
    for w in words(key) {
        if let Some((_, sides)) = TERM_SIDES.iter().find(|(low, _)| *low == w) {
            if sides.iter().any(|s| option_words.iter().any(|o| o == s)) {
                sign = -sign;
            }
        }
    }
    sign
}

/// The significance level the protocol states for its findings ("P < 0.01
/// was considered statistically significant", "a significance level of
/// 0.01"), else 0.05. Only a sentence that speaks of significance counts,
/// and not one about selecting variables ("variables with P < 0.1 in the
/// univariable analysis were entered"), which is not the findings' level.
pub fn alpha_of(task: &Task) -> f64 {
    let text = format!("{}\n{}", task.protocol.background, task.protocol.methods).to_lowercase();
    let sentences = text.split(['\n', ';']).flat_map(|line| line.split(". "));
    for sentence in sentences {
        if !sentence.contains("significan")
            || ["univariate", "univariable", "entered", "selected", "included in the", "candidate"]
                .iter()
                .any(|w| sentence.contains(w))
        {
            continue;
        }
        for lead in
            ["p <", "p<", "p-value <", "p value <", "significance level of", "level of significance of", "alpha ="]
        {
            for (i, _) in sentence.match_indices(lead) {
                let rest = sentence[i + lead.len()..].trim_start();
                let number: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
                if let Ok(x) = number.trim_end_matches('.').parse::<f64>() {
                    if x > 0.0 && x <= 0.1 {
                        return x;
                    }
                }
            }
        }
    }
    0.05
}

/// How one result reads at level `alpha`, against a question whose options
/// are `options`; `None` for a result that is not an effect or a test,
/// whose p-value and CI disagree, or that is a significant test (a test
/// has no direction).
pub fn read_result(result: &ResultNumber, alpha: f64, options: &[String]) -> Option<Reading> {
    match &result.value {
        ResultValue::Effect { ratio, conf_low, conf_high, p_value, .. } => {
            let excludes_one = *conf_low > 1.0 || *conf_high < 1.0;
            let significant = *p_value < alpha;
            if significant != excludes_one || !ratio.is_finite() {
                return None;
            }
            if !significant {
                return Some(Reading::Null);
            }
            let up = if *ratio > 1.0 { Reading::Higher } else { Reading::Lower };
            // The key names the term (`OR high_rdw`, `HR age`, `Fisher OR
            // older by death`): a term naming the lower side turns it.
            Some(if term_sign(&result.key, options) < 0 { up.flipped() } else { up })
        }
        ResultValue::Test { p_value, .. } => (*p_value >= alpha).then_some(Reading::Null),
        _ => None,
    }
}

/// The option that the results relevant to `question`'s ratio and p-value
/// fields read as, when they all read the same way and exactly one option
/// has that reading.
pub fn read_choice(task: &Task, question: &Question, results: &[ResultNumber]) -> Option<ChoiceReading> {
    let choice = question.choice.as_ref()?;
    let alpha = alpha_of(task);
    let options: Vec<String> = choice.options.values().cloned().collect();
    // Where the question has a ratio, a result is read only when its key
    // names all of the ratio's words: a Cox model of the continuous `rdw`
    // is not the protocol's `high_rdw` comparison, though `relevant`
    // offers it when no better one exists (the RDW task, typed-read run 1).
    let has_ratio = question.fields.iter().any(|f| matches!(f, FieldKind::Ratio { .. }));
    let mut keys: Vec<String> = Vec::new();
    for f in &question.fields {
        if !matches!(f, FieldKind::Ratio { .. } | FieldKind::Pvalue { .. }) {
            continue;
        }
        let words = named_for(task, f.name());
        for key in relevant(task, f.name(), f, results) {
            if has_ratio && !names_all(key, &words) {
                continue;
            }
            if !keys.iter().any(|k| k == key) {
                keys.push(key.to_string());
            }
        }
    }
    if keys.is_empty() {
        return None;
    }
    let mut reading: Option<Reading> = None;
    let mut why = Vec::new();
    for key in &keys {
        let r = results.iter().find(|r| &r.key == key)?;
        let this = read_result(r, alpha, &options)?;
        if reading.is_some_and(|x| x != this) {
            return None;
        }
        reading = Some(this);
        why.push(format!("{key}: {}", r.value.describe()));
    }
    let reading = reading?;
    let matching: Vec<&String> =
        choice.options.iter().filter(|(_, text)| classify_option(text) == Some(reading)).map(|(l, _)| l).collect();
    let [option] = matching.as_slice() else { return None };
    Some(ChoiceReading {
        option: option.to_string(),
        reading,
        keys,
        why: format!("read by Evident at p < {alpha}: {}", why.join("; ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effect(key: &str, ratio: f64, lo: f64, hi: f64, p: f64) -> ResultNumber {
        ResultNumber {
            key: key.into(),
            step: 1,
            tool: "logistic_regression".into(),
            value: ResultValue::Effect { effect: "odds_ratio".into(), ratio, conf_low: lo, conf_high: hi, p_value: p },
        }
    }

    #[test]
    fn options_in_the_development_tasks_wordings_read_as_meant() {
        use Reading::*;
        let cases = [
            ("a higher anion gap was associated with a higher risk of death", Some(Higher)),
            ("a higher anion gap was associated with a lower risk of death", Some(Lower)),
            ("no significant association with death", Some(Null)),
            ("significantly higher in older patients", Some(Higher)),
            ("significantly lower in older patients", Some(Lower)),
            ("no significant difference between the age groups", Some(Null)),
            ("patients with high RDW had significantly lower survival", Some(Higher)),
            ("patients with high RDW had significantly higher survival", Some(Lower)),
            ("survival did not differ significantly between the groups", Some(Null)),
            ("statin use was associated with a higher risk of death", Some(Higher)),
            ("statin use was associated with a lower risk of death", Some(Lower)),
            ("high RDW was associated with a lower hazard of death", Some(Lower)),
            ("younger patients had a higher mortality", Some(Lower)),
            ("patients with normal RDW survived longer", Some(Higher)),
            ("higher lactate was associated with worse outcomes", Some(Higher)),
            ("statin use was associated with better outcomes", Some(Lower)),
            ("statin use was protective", Some(Lower)),
            ("statin use was associated with death", None),
            // RWE-bench's own example (its Figure 13).
            ("lower risks of both ICU and hospital mortalities", Some(Lower)),
            ("higher risks of both ICU and hospital mortalities", Some(Higher)),
            ("no independent correlation with ICU or hospital mortalities", Some(Null)),
            ("no clear association with ICU or hospital mortalities", Some(Null)),
            ("lower risk of ICU mortality but higher risk of hospital mortality", None),
            ("higher risk of ICU mortality but lower risk of hospital mortality", None),
            // A negation that denies nothing names the other side.
            ("patients who did not receive a statin had significantly higher mortality", Some(Lower)),
            ("non-users had lower survival", Some(Lower)),
            ("survival was similar in both groups", Some(Null)),
            ("was not independently associated with death", Some(Null)),
        ];
        for (text, want) in cases {
            assert_eq!(classify_option(text), want, "{text}");
        }
    }

    #[test]
    fn the_level_is_the_one_the_protocol_gives_its_findings() {
        let task = |methods: &str| {
            let mut t = Task::from_yaml_str(crate::task::tests::GOOD, "t.yaml").unwrap();
            t.protocol.methods = methods.to_string();
            t
        };
        assert_eq!(alpha_of(&task("Analysis: logistic regression.")), 0.05);
        assert_eq!(
            alpha_of(&task(
                "Analysis: logistic regression. A two-sided P < 0.01 was considered statistically significant."
            )),
            0.01
        );
        assert_eq!(alpha_of(&task("We used a significance level of 0.1 throughout.")), 0.1);
        assert_eq!(
            alpha_of(&task(
                "Variables significant at P < 0.1 in the univariable analysis were entered into the model."
            )),
            0.05,
            "a selection threshold is not the findings' level"
        );
    }

    #[test]
    fn a_ratio_reads_by_its_ci_and_p_and_a_lower_side_term_turns_it_where_the_options_name_that_side() {
        let a = 0.05;
        let opts = |o: &[&str]| o.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let risk = opts(&["higher risk of death", "lower risk of death", "no significant association"]);
        assert_eq!(read_result(&effect("OR lactate", 1.36, 1.04, 1.79, 0.027), a, &risk), Some(Reading::Higher));
        assert_eq!(read_result(&effect("OR statin", 0.61, 0.20, 1.90, 0.395), a, &risk), Some(Reading::Null));
        assert_eq!(read_result(&effect("OR statin", 0.40, 0.20, 0.80, 0.01), a, &risk), Some(Reading::Lower));
        // The options name the exposure without a side ("SAL <30 g/l"): the
        // term's own side, not turned.
        let sal = opts(&["SAL <30 g/l: higher risks of death", "SAL <30 g/l: lower risks of death"]);
        assert_eq!(read_result(&effect("HR low_albumin", 2.0, 1.2, 3.3, 0.01), a, &sal), Some(Reading::Higher));
        // The options name the other side: turned.
        let age = opts(&["significantly higher in older patients", "significantly lower in older patients"]);
        assert_eq!(
            read_result(&effect("Fisher OR younger by death", 3.0, 1.2, 7.5, 0.01), a, &age),
            Some(Reading::Lower)
        );
        let alb = opts(&[
            "patients with low albumin had higher mortality",
            "patients with high albumin had higher mortality",
        ]);
        assert_eq!(read_result(&effect("HR low_albumin", 2.0, 1.2, 3.3, 0.01), a, &alb), Some(Reading::Lower));
        assert_eq!(classify_option(&alb[0]), Some(Reading::Lower), "and the option turns the same way");
        // p and CI disagree (p just under, CI touching 1): not read.
        assert_eq!(read_result(&effect("OR x", 1.9, 0.99, 3.6, 0.049), a, &risk), None);
        let test = |p| ResultNumber {
            key: "log-rank p".into(),
            step: 2,
            tool: "kaplan_meier_logrank".into(),
            value: ResultValue::Test { test: "log-rank".into(), p_value: p },
        };
        assert_eq!(read_result(&test(0.09), a, &risk), Some(Reading::Null));
        assert_eq!(read_result(&test(0.01), a, &risk), None, "a test has no direction");
    }
}
