//! Where an answer comes from (Evident's typed strategy; `--strategy r`,
//! the paper's RWEAgent, is untouched).
//!
//! Each typed statistics tool (and `build_cohort`) leaves, beside its text,
//! the numbers it computed as [`ResultNumber`]s, each under a key the agent
//! can cite, named for what it is (`"OR anion_gap"` for a logistic
//! regression term, `"female"` for a 0/1 column described, `"rows"`,
//! `"stays"`, `"log-rank p"`, `"AUC anion_gap"`; `_2`, `_3` when a later
//! step computes a result of the same name; no step number, which a small
//! model copied as a value). `submit_answers`
//! takes a field's value either as a number or as `{"from_result": KEY}`,
//! resolved here, deterministically, from the stored result by the field's
//! type (a count takes a count or a 0/1 column's ones, a proportion that
//! share times its base, a ratio, its CI bounds and its p-value the effect's
//! numbers, an AUC the curve's area, a median the column's median), so a
//! small model copies no digits. Every accepted answer gets an
//! [`AnswerBasis`]: the result it was resolved from, the tool output a typed
//! number matches at its precision, or `unsupported` (a number no tool
//! produced, a choice made before any effect or test was computed). An
//! unsupported answer is recorded and scored like any other, and flagged in
//! the trace and in `bundle.json` for a reviewer.
//!
//! `--strategy typed-grounded` (Evident's, named apart from `typed`) takes
//! the next step: a field is offered only as `{"from_result": KEY}` over
//! the results that can fill it ([`reference_only`]), a choice only once
//! [`analysis_done`], so no answer of that strategy is `unsupported`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::task::{FieldKind, Question, Task};

/// One number set a tool computed, citable by `key`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultNumber {
    /// What the agent writes in `{"from_result": KEY}`: the result's name,
    /// unique in the run.
    pub key: String,
    /// The step whose action computed it.
    pub step: u32,
    /// The action (`describe`, `logistic_regression`, `build_cohort`, ...).
    pub tool: String,
    #[serde(flatten)]
    pub value: ResultValue,
}

/// What a result holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ResultValue {
    /// A number of rows, patients, pairs or events.
    Count { n: u64 },
    /// A 0/1 column (or a 2x2 table's cell): `ones` of `n`. Fills a count
    /// (ones) or a proportion (ones / n times the field's base).
    Binary { ones: u64, n: u64 },
    /// A continuous column: fills a numeric field (its median, or its mean
    /// where the field's role is "mean").
    Continuous { n: u64, median: f64, mean: f64 },
    /// A ratio with its 95% CI and p-value (`effect`: odds_ratio,
    /// hazard_ratio or rate_ratio).
    Effect { effect: String, ratio: f64, conf_low: f64, conf_high: f64, p_value: f64 },
    /// A test's p-value (log-rank, Fisher's exact).
    Test { test: String, p_value: f64 },
    /// An area under the ROC curve.
    Auc { auc: f64 },
}

impl ResultValue {
    /// Every number it holds, for matching a typed answer.
    fn numbers(&self) -> Vec<f64> {
        match self {
            ResultValue::Count { n } => vec![*n as f64],
            ResultValue::Binary { ones, n } => {
                let share = *ones as f64 / (*n).max(1) as f64;
                vec![*ones as f64, *n as f64, share, share * 100.0]
            }
            ResultValue::Continuous { n, median, mean } => vec![*n as f64, *median, *mean],
            ResultValue::Effect { ratio, conf_low, conf_high, p_value, .. } => {
                vec![*ratio, *conf_low, *conf_high, *p_value]
            }
            ResultValue::Test { p_value, .. } => vec![*p_value],
            ResultValue::Auc { auc } => vec![*auc],
        }
    }

    /// Whether it holds every number it claims (a degenerate fit's NaN is
    /// not offered).
    pub fn is_finite(&self) -> bool {
        self.numbers().iter().all(|x| x.is_finite())
    }

    /// One line for the agent: what it is and its numbers.
    pub fn describe(&self) -> String {
        let g = |x: f64| format_number(x);
        match self {
            ResultValue::Count { n } => format!("{n} (count)"),
            ResultValue::Binary { ones, n } => {
                format!("{ones} of {n} are 1 ({}%) (count or proportion)", g(*ones as f64 * 100.0 / (*n).max(1) as f64))
            }
            ResultValue::Continuous { median, mean, n } => {
                format!("median {}, mean {} (n {n}) (numeric)", g(*median), g(*mean))
            }
            ResultValue::Effect { effect, ratio, conf_low, conf_high, p_value } => {
                let direction = if *conf_low > 1.0 {
                    "above 1, significant at 0.05: higher values, higher risk"
                } else if *conf_high < 1.0 {
                    "below 1, significant at 0.05: higher values, lower risk"
                } else {
                    "CI includes 1: not significant at 0.05"
                };
                format!(
                    "{} {} (95% CI {}-{}), p {} ({direction}) (ratio, its CI bounds, p-value)",
                    effect.replace('_', " "),
                    g(*ratio),
                    g(*conf_low),
                    g(*conf_high),
                    g(*p_value)
                )
            }
            ResultValue::Test { test, p_value } => {
                let sig = if *p_value < 0.05 { "significant at 0.05" } else { "not significant at 0.05" };
                format!("{test} p {} ({sig}) (p-value)", g(*p_value))
            }
            ResultValue::Auc { auc } => format!("AUC {} (auc)", g(*auc)),
        }
    }
}

/// Four significant digits, as the agent reads them.
fn format_number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    if x.abs() < 1e-3 {
        return format!("{x:.3e}");
    }
    let digits = (3 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

/// The typed statistics tools whose results answer `question`, from the
/// types of its fields (shown or still hidden behind its choice) and the
/// methods the protocol names: an odds ratio from a logistic regression (a
/// propensity-score match where the protocol matches), a hazard ratio from
/// a Cox model, a rate ratio from a Poisson model, a lone p-value from a
/// log-rank or Fisher's test, an AUC from a ROC curve, counts, shares and
/// medians from `describe` (Fisher's table for a tested question's shares).
pub fn tools_for(task: &Task, question: &Question) -> Vec<&'static str> {
    let mut tools: Vec<&'static str> = Vec::new();
    for f in &question.fields {
        if let Some(t) = tool_for_field(task, question, f).filter(|t| !tools.contains(t)) {
            tools.push(t);
        }
    }
    tools
}

/// Words that name an analysed sample rather than the cohort: a field
/// named with one takes only results whose key holds it ([`relevant`]),
/// and the tool that forms that sample ([`tool_for_field`]).
pub const SAMPLE_WORDS: [&str; 2] = ["matched", "weighted"];

/// Words that name the lower side of a 0/1 column (`n_normal_rdw`,
/// `n_no_statin`): no group is cut for them, and `describe` does not count
/// them.
pub const LOWER_SIDE: [&str; 7] = ["low", "normal", "younger", "no", "non", "not", "without"];

/// The tool that computes one field of `question` ([`tools_for`]). Run 6's
/// anion-gap task, with only the AUC open, ran regressions for six steps:
/// the compute-only lever offered the question's logistic regression too.
pub fn tool_for_field(task: &Task, question: &Question, field: &FieldKind) -> Option<&'static str> {
    let methods = task.protocol.methods.to_lowercase();
    let ratio_tool = |role: Option<&str>| match role {
        Some("hazard_ratio") => "cox_regression",
        Some("rate_ratio") => "poisson_regression",
        _ if methods.contains("propensity") => "propensity_matching",
        _ => "logistic_regression",
    };
    let ratio = question.fields.iter().find_map(|f| match f {
        FieldKind::Ratio { role, .. } => Some(ratio_tool(role.as_deref())),
        _ => None,
    });
    let test = if methods.contains("log-rank") {
        Some("kaplan_meier_logrank")
    } else if methods.contains("fisher") {
        Some("fisher_test")
    } else {
        None
    };
    // A count of the lower side of a 0/1 column (`n_normal_rdw`,
    // `n_no_statin`) is not a column's ones, which `describe` gives: the
    // group sizes of a Kaplan-Meier comparison or of a propensity match,
    // or a Fisher table's shares, count it. Run 6's RDW task described the
    // RDW columns again and again for n_normal_rdw.
    let words = own_words(field.name());
    let lower_side = words.iter().any(|w| LOWER_SIDE.contains(&w.as_str()));
    let side_tool = if methods.contains("propensity") { Some("propensity_matching") } else { test };
    let sample_tool = words.iter().find_map(|w| match w.as_str() {
        "matched" => Some("propensity_matching"),
        "weighted" => Some("iptw"),
        _ => None,
    });
    match field {
        FieldKind::Count { .. } | FieldKind::Proportion { .. } if sample_tool.is_some() => sample_tool,
        FieldKind::Ratio { .. } | FieldKind::Ci { .. } => ratio,
        FieldKind::Pvalue { .. } => ratio.or(test),
        FieldKind::Auc { .. } => Some("roc_auc"),
        FieldKind::Proportion { .. } if question.is_gated() && test == Some("fisher_test") => test,
        FieldKind::Count { .. } | FieldKind::Proportion { .. } if lower_side && side_tool.is_some() => side_tool,
        FieldKind::Count { .. } | FieldKind::Proportion { .. } | FieldKind::Numeric { .. } => Some("describe"),
    }
}

/// The value a result gives `field` of `task`, if it can fill it.
pub fn resolve(task: &Task, field: &FieldKind, result: &ResultValue) -> Option<f64> {
    let share = |ones: u64, n: u64| ones as f64 / n.max(1) as f64;
    let x = match (field, result) {
        (FieldKind::Count { .. }, ResultValue::Count { n }) => *n as f64,
        (FieldKind::Count { .. }, ResultValue::Binary { ones, .. }) => *ones as f64,
        (FieldKind::Proportion { base, .. }, ResultValue::Binary { ones, n }) => share(*ones, *n) * f64::from(*base),
        (FieldKind::Numeric { role, .. }, ResultValue::Continuous { median, mean, .. }) => {
            if role.as_deref() == Some("mean") {
                *mean
            } else {
                *median
            }
        }
        (FieldKind::Ratio { role, .. }, ResultValue::Effect { effect, ratio, .. }) => {
            role_fits(role.as_deref(), effect).then_some(*ratio)?
        }
        (FieldKind::Ci { name }, ResultValue::Effect { effect, conf_low, conf_high, .. }) => {
            let (ratio_role, low) = task.questions.iter().flat_map(|q| &q.fields).find_map(|f| match f {
                FieldKind::Ratio { ci_low, ci_high, role, .. } if ci_low == name || ci_high == name => {
                    Some((role.clone(), ci_low == name))
                }
                _ => None,
            })?;
            if !role_fits(ratio_role.as_deref(), effect) {
                return None;
            }
            if low {
                *conf_low
            } else {
                *conf_high
            }
        }
        // A p-value beside a ratio is that ratio's: an effect of the ratio's
        // kind, not a test or another model's (run 9's RDW task filled the
        // Cox model's p with the logistic regression's).
        (FieldKind::Pvalue { name, .. }, ResultValue::Effect { p_value, effect, .. })
            if question_ratio_role(task, name).is_none_or(|role| role_fits(role.as_deref(), effect)) =>
        {
            *p_value
        }
        (FieldKind::Pvalue { name, .. }, ResultValue::Test { p_value, .. })
            if question_ratio_role(task, name).is_none() =>
        {
            *p_value
        }
        (FieldKind::Auc { .. }, ResultValue::Auc { auc }) => *auc,
        _ => return None,
    };
    x.is_finite().then_some(x)
}

/// The role of the ratio in the question that holds field `name`:
/// `None` where that question has no ratio, `Some(None)` for a ratio
/// without a role.
fn question_ratio_role(task: &Task, name: &str) -> Option<Option<String>> {
    let (question, _) = task.field(name)?;
    question.fields.iter().find_map(|f| match f {
        FieldKind::Ratio { role, .. } => Some(role.clone()),
        _ => None,
    })
}

/// A ratio field's role (odds_ratio, hazard_ratio, ...) takes an effect of
/// that kind; a field without a role takes any.
fn role_fits(role: Option<&str>, effect: &str) -> bool {
    role.is_none_or(|r| r == effect)
}

/// The keys of the results that can fill `field`, oldest first.
pub fn candidates<'a>(task: &Task, field: &FieldKind, results: &'a [ResultNumber]) -> Vec<&'a str> {
    results.iter().filter(|r| resolve(task, field, &r.value).is_some()).map(|r| r.key.as_str()).collect()
}

/// The grounded strategy's narrower offer: of the results that can fill
/// `field` ([`candidates`]), those named for what the field is about, the
/// ones that match most of its words, oldest first among equals, fewest
/// other words first. Run 4 (docs/evaluation.md) offered every result of
/// the right type, and the 0.5B model took the first: `stays` (100) for
/// the deaths, the age column for the median lactate. A field is about the
/// words of its name (`n_deaths_28d`: death, 28d) less the words of its
/// type (`n`, `pct`, `median`, `or`, `p`, `auc`, ...); a CI bound is about
/// its ratio's words, and a p-value about its question's ratio, else its
/// question's exposure (the words of its proportions, deaths aside), else
/// its own. Words match a result's key word for word after synonyms (a
/// death is also `died`, `mortality`, `expire`, `events`; a cohort's size
/// `patients`, `stays`, `rows`; `1y` is `365d`) and plurals, or, five
/// letters or longer, anywhere in the key (`logrank` in `log-rank p`).
/// None when no result matches a word: the field waits for one named for
/// it. A field whose name has no such word takes every candidate.
pub fn relevant<'a>(task: &Task, id: &str, field: &FieldKind, results: &'a [ResultNumber]) -> Vec<&'a str> {
    let words = subject_words(task, id);
    // A field about an analysed sample (`n_deaths_matched`) takes only a
    // result computed on that sample: run 7's statin task filled
    // n_deaths_matched with the whole cohort's deaths.
    let sample: Vec<&str> = SAMPLE_WORDS.into_iter().filter(|w| words.iter().any(|x| x == w)).collect();
    let fitting: Vec<&ResultNumber> = results
        .iter()
        .filter(|r| resolve(task, field, &r.value).is_some())
        .filter(|r| sample.iter().all(|w| key_tokens(&r.key).iter().any(|t| t == w)))
        .collect();
    if words.is_empty() {
        return fitting.iter().map(|r| r.key.as_str()).collect();
    }
    let scored: Vec<(usize, usize, &ResultNumber)> = fitting
        .into_iter()
        .filter_map(|r| {
            let tokens = key_tokens(&r.key);
            let (contradicts, complements) = conditions_against(&words, &r.key);
            if contradicts {
                return None;
            }
            let hits = words.iter().filter(|w| word_matches(w, &tokens, &r.key)).count() + complements;
            let other = tokens.iter().filter(|t| !words.contains(t)).count();
            Some((hits, other, r))
        })
        .collect();
    let best = scored.iter().map(|(h, _, _)| *h).max().unwrap_or(0);
    if best == 0 {
        return Vec::new();
    }
    let mut top: Vec<(usize, &ResultNumber)> =
        scored.into_iter().filter(|(h, _, _)| *h == best).map(|(_, o, r)| (o, r)).collect();
    top.sort_by_key(|(other, _)| *other);
    top.into_iter().map(|(_, r)| r.key.as_str()).collect()
}

/// Words that name the other side of a 0/1 column: `younger` is
/// `older=0`, `normal` and `low` are `high=0`, `male` is `female=0`.
const OPPOSITES: [(&str, &str); 4] = [("older", "younger"), ("high", "low"), ("high", "normal"), ("female", "male")];

/// A field's words against a result key's 0/1 conditions (`NAME=0`,
/// `NAME=1`, as in `hospital_expire_flag=1 if older=0` or `n high_rdw=1`):
/// whether the key says the opposite of a word (`older` against `older=0`,
/// `younger` against `older=1`), and how many words it names as the other
/// side (`younger` in `older=0`, `no statin` in `statin=0`). Run 6's age task was offered the older
/// patients' mortality for the younger patients' and took it.
fn conditions_against(words: &[String], key: &str) -> (bool, usize) {
    let mut conditions: Vec<(Vec<String>, bool)> = key
        .split_whitespace()
        .filter_map(|piece| {
            let (name, value) = piece.split_once('=')?;
            let one = match value.trim_end_matches(|c: char| !c.is_ascii_digit()) {
                "1" => true,
                "0" => false,
                _ => return None,
            };
            Some((key_tokens(name), one))
        })
        .collect();
    // A 0/1 column's own key (`high_rdw`, `statin`) counts its ones.
    if conditions.is_empty() && !key.contains(' ') {
        conditions.push((key_tokens(key), true));
    }
    let opposites = |w: &str| -> Vec<String> {
        OPPOSITES
            .iter()
            .filter_map(|(a, b)| match w {
                x if x == *a => Some(b.to_string()),
                x if x == *b => Some(a.to_string()),
                _ => None,
            })
            .collect()
    };
    // A share "A=1 if B=v" measures A: a field's deaths (else its first
    // word) must be A, so the older patients' mortality is not the share of
    // older patients among the deaths.
    let (mut contradicts, mut complements) = (false, 0);
    if let Some((measured, _)) = key.split_once(" if ") {
        let wanted = if words.iter().any(|w| w == "death") { "death" } else { words[0].as_str() };
        let tokens = key_tokens(measured);
        contradicts =
            words.iter().any(|w| word_matches(w, &key_tokens(key), key)) && !word_matches(wanted, &tokens, measured);
    }
    // `n_no_statin` names the other side of every word it has.
    let negated = words.iter().any(|w| matches!(w.as_str(), "no" | "non" | "not" | "without"));
    for (names, one) in &conditions {
        let other_side = |w: &String| opposites(w).iter().any(|o| names.contains(o)) || (negated && names.contains(w));
        if words.iter().any(other_side) {
            // The field names the other side: `younger` of `older=0`.
            if *one {
                contradicts = true;
            } else {
                complements += 1;
            }
        } else if !one && words.iter().any(|w| names.contains(w)) {
            contradicts = true;
        }
    }
    (contradicts, complements)
}

/// Whether a choice question can be grounded now in the grounded strategy:
/// a result relevant to one of its effect fields (ratio, p-value, AUC;
/// [`relevant`]) was computed, or, for a question with none, any effect or
/// test ([`analysis_done`]). Run 4 chose after a Fisher test of sex, not
/// age, and after a regression of sex on age.
pub fn choice_ready(task: &Task, question: &Question, results: &[ResultNumber]) -> bool {
    let effects: Vec<&FieldKind> = question
        .fields
        .iter()
        .filter(|f| matches!(f, FieldKind::Ratio { .. } | FieldKind::Pvalue { .. } | FieldKind::Auc { .. }))
        // An effect no tool computes (a mean difference's ratio and p) cannot
        // hold the choice back.
        .filter(|f| fillable_by_a_tool(task, f))
        .collect();
    if effects.is_empty() {
        return analysis_done(results);
    }
    effects.iter().any(|f| !relevant(task, f.name(), f, results).is_empty())
}

/// What a field waits for, for the `[State]` line: the words a result's
/// key must hold to be offered for it ([`relevant`]), a cohort's size left
/// out (every cohort has one); empty when any result of its type will do.
pub fn named_for(task: &Task, id: &str) -> Vec<String> {
    subject_words(task, id).into_iter().filter(|w| w != "size").collect()
}

/// Whether a name (a result's key, a column) holds one of `words` as
/// [`relevant`] matches them.
pub fn names_any(name: &str, words: &[String]) -> bool {
    let tokens = key_tokens(name);
    words.iter().any(|w| word_matches(w, &tokens, name))
}

/// Whether a name holds every one of `words` as [`relevant`] matches them.
pub fn names_all(name: &str, words: &[String]) -> bool {
    let tokens = key_tokens(name);
    words.iter().all(|w| word_matches(w, &tokens, name))
}

/// Whether a 0/1 group column `group` (`high_rdw`) is what a field named
/// for `words` counts: each word of the group's name is one of `words`,
/// or its other side (`n_normal_rdw` is `high_rdw=0`).
pub fn group_counts(group: &str, words: &[String]) -> bool {
    group.split('_').all(|g| {
        words.iter().any(|w| w == g || OPPOSITES.iter().any(|(a, b)| (*a == g && w == b) || (*b == g && w == a)))
    })
}

/// The words of a field's name that say what it is about ([`relevant`]).
fn subject_words(task: &Task, id: &str) -> Vec<String> {
    let Some((question, field)) = task.field(id) else { return Vec::new() };
    let ratio = question.fields.iter().find(|f| matches!(f, FieldKind::Ratio { .. }));
    match field {
        FieldKind::Ci { name } => {
            let of_ratio = question.fields.iter().find_map(|f| match f {
                FieldKind::Ratio { name: r, ci_low, ci_high, .. } if ci_low == name || ci_high == name => Some(r),
                _ => None,
            });
            of_ratio.map(|r| own_words(r)).unwrap_or_default()
        }
        FieldKind::Pvalue { name, .. } => {
            if let Some(r) = ratio {
                return own_words(r.name());
            }
            let exposure: Vec<String> = question
                .fields
                .iter()
                .filter(|f| matches!(f, FieldKind::Proportion { .. }))
                .flat_map(|f| own_words(f.name()))
                .filter(|w| w != "death")
                .fold(Vec::new(), |mut out, w| {
                    if !out.contains(&w) {
                        out.push(w);
                    }
                    out
                });
            if exposure.is_empty() {
                own_words(name)
            } else {
                exposure
            }
        }
        _ => own_words(field.name()),
    }
}

/// The words of a field name that are not the words of its type.
fn own_words(name: &str) -> Vec<String> {
    const TYPE_WORDS: [&str; 12] =
        ["n", "pct", "percent", "prop", "proportion", "median", "mean", "or", "hr", "rr", "p", "auc"];
    name.split('_').filter(|w| !w.is_empty() && !TYPE_WORDS.contains(w)).map(canonical).collect()
}

/// A result key's words, canonical.
fn key_tokens(key: &str) -> Vec<String> {
    key.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).map(canonical).collect()
}

/// One word in its canonical form: lower case, a plural's `s` dropped, and
/// the synonyms of a death and of a cohort's size made one word.
fn canonical(word: &str) -> String {
    let w = word.to_ascii_lowercase();
    let w = match w.strip_suffix('s') {
        Some(stem) if stem.len() >= 3 && !stem.ends_with('s') => stem.to_string(),
        _ => w,
    };
    match w.as_str() {
        "death" | "died" | "dead" | "mortality" | "expire" | "expired" | "deceased" | "event" => "death".into(),
        "patient" | "stay" | "subject" | "row" | "cohort" | "total" | "included" => "size".into(),
        "1y" | "1year" | "365d" => "365d".into(),
        "elderly" => "older".into(),
        _ => w,
    }
}

fn word_matches(word: &str, tokens: &[String], key: &str) -> bool {
    if tokens.iter().any(|t| t == word) {
        return true;
    }
    let squeezed: String = key.chars().filter(char::is_ascii_alphanumeric).collect::<String>().to_ascii_lowercase();
    word.len() >= 5 && squeezed.contains(word)
}

/// The JSON Schema of a field's answer once results can fill it: its own
/// value schema, or `{"from_result": KEY}` with KEY one of `keys`.
pub fn with_reference(value_schema: Value, keys: &[&str]) -> Value {
    if keys.is_empty() {
        return value_schema;
    }
    json!({"anyOf": [
        value_schema,
        {
            "type": "object",
            "properties": {"from_result": {"enum": keys}},
            "required": ["from_result"],
            "additionalProperties": false
        }
    ]})
}

/// The JSON Schema of a field's answer in the grounded strategy
/// (`--strategy typed-grounded`): only `{"from_result": KEY}` with KEY one
/// of `keys`, never a typed number; `None` when no result can fill it yet
/// (the field is not offered).
pub fn reference_only(keys: &[&str]) -> Option<Value> {
    (!keys.is_empty()).then(|| {
        json!({
            "type": "object",
            "properties": {"from_result": {"enum": keys}},
            "required": ["from_result"],
            "additionalProperties": false
        })
    })
}

/// Whether some typed tool's result could ever fill `field`: one of the
/// kinds the tools produce (a count, a 0/1 column, a continuous column, an
/// odds, hazard or rate ratio, a test, an AUC) resolves it. A field none
/// fits (a ratio of a role no tool estimates) is a dead end for the
/// grounded strategy: it stays unanswered, and the `[State]` line says so.
pub fn fillable_by_a_tool(task: &Task, field: &FieldKind) -> bool {
    let effect = |effect: &str| ResultValue::Effect {
        effect: effect.into(),
        ratio: 1.0,
        conf_low: 0.5,
        conf_high: 2.0,
        p_value: 0.5,
    };
    let kinds = [
        ResultValue::Count { n: 1 },
        ResultValue::Binary { ones: 1, n: 2 },
        ResultValue::Continuous { n: 2, median: 1.0, mean: 1.0 },
        effect("odds_ratio"),
        effect("hazard_ratio"),
        effect("rate_ratio"),
        ResultValue::Test { test: "log-rank".into(), p_value: 0.5 },
        ResultValue::Auc { auc: 0.5 },
    ];
    kinds.iter().any(|k| resolve(task, field, k).is_some())
}

/// Whether a choice can be grounded now: an effect, test or AUC has been
/// computed (what [`choice_basis`] records as `after_analysis`).
pub fn analysis_done(results: &[ResultNumber]) -> bool {
    !choice_basis(results).is_unsupported()
}

/// The key of `{"from_result": KEY}`, if the answer is one.
pub fn reference(raw: &Value) -> Option<&str> {
    raw.as_object().filter(|o| o.len() == 1)?.get("from_result")?.as_str()
}

/// Where an accepted answer comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AnswerBasis {
    /// Submitted as `{"from_result": key}` and resolved from that result.
    FromResult { key: String, step: u32, tool: String },
    /// A typed number equal, at its precision, to one a tool produced
    /// (`source`: the key of a result that can fill the field's type, or
    /// "observation" for a number the agent's own SQL or R printed).
    Matches { step: u32, source: String },
    /// A choice made after a tool computed these effects or tests.
    AfterAnalysis { keys: Vec<String> },
    /// A choice read from these results by Evident's rule
    /// ([`crate::reading`], the `typed-read` strategy), not chosen by the
    /// model.
    Read { option: String, keys: Vec<String>, why: String },
    /// A number no tool produced, or a choice made before any effect or
    /// test was computed: recorded and scored, flagged for a reviewer.
    Unsupported { reason: String },
}

impl AnswerBasis {
    pub fn is_unsupported(&self) -> bool {
        matches!(self, AnswerBasis::Unsupported { .. })
    }

    /// A short note for the trace.
    pub fn note(&self) -> String {
        match self {
            AnswerBasis::FromResult { key, .. } => format!("from result {key}"),
            AnswerBasis::Matches { step, source } => format!("matches {source} of step {step}"),
            AnswerBasis::AfterAnalysis { keys } => format!("after {}", keys.join(", ")),
            AnswerBasis::Read { option, why, .. } => format!("option {option} {why}"),
            AnswerBasis::Unsupported { reason } => format!("UNSUPPORTED: {reason}"),
        }
    }
}

/// Whether a typed answer `x`, written `text`, equals `v` at the precision
/// it was written with (half a unit of its last digit) and within 5% of it.
fn same_at_precision(x: f64, text: &str, v: f64) -> bool {
    if !v.is_finite() {
        return false;
    }
    if x == v {
        return true;
    }
    let mantissa = text.split(['e', 'E']).next().unwrap_or(text);
    let exponent: i32 = text.split(['e', 'E']).nth(1).and_then(|e| e.parse().ok()).unwrap_or(0);
    let decimals = mantissa.split('.').nth(1).map_or(0, |d| d.len()) as i32 - exponent;
    let half_unit = 0.5 * 10f64.powi(-decimals);
    (x - v).abs() <= half_unit * (1.0 + 1e-9) && (x - v).abs() <= 0.05 * v.abs()
}

/// The numbers written in a tool's text (integers, decimals, exponents).
pub fn numbers_in(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts =
            bytes[i].is_ascii_digit() && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'));
        if !starts {
            i += 1;
            continue;
        }
        let begin = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        if i + 1 < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
            let mut j = i + 1;
            if j < bytes.len() && (bytes[j] == b'-' || bytes[j] == b'+') {
                j += 1;
            }
            if j < bytes.len() && bytes[j].is_ascii_digit() {
                while j < bytes.len() && bytes[j].is_ascii_digit() {
                    j += 1;
                }
                i = j;
            }
        }
        let token = text[begin..i].trim_end_matches('.');
        if let Ok(x) = token.parse::<f64>() {
            out.push(x);
        }
    }
    out
}

/// The basis of a number `x` (written `text`) typed for `field` of `task`:
/// the first result whose value for that field's type equals it at its
/// precision (a count of stays does not support a ratio), or else the
/// first text of the agent's own SQL or R (`(step, text)`) holding it.
pub fn literal_basis(
    task: &Task,
    field: &FieldKind,
    (x, text): (f64, &str),
    results: &[ResultNumber],
    observations: &[(u32, String)],
) -> AnswerBasis {
    let holds = |r: &ResultNumber| resolve(task, field, &r.value).is_some_and(|v| same_at_precision(x, text, v));
    if let Some(r) = results.iter().find(|r| holds(r)) {
        return AnswerBasis::Matches { step: r.step, source: r.key.clone() };
    }
    if let Some((step, _)) =
        observations.iter().find(|(_, t)| numbers_in(t).iter().any(|v| same_at_precision(x, text, *v)))
    {
        return AnswerBasis::Matches { step: *step, source: "observation".into() };
    }
    AnswerBasis::Unsupported { reason: format!("{text} matches no number a tool produced") }
}

/// The basis of a choice: the effects and tests computed before it, or
/// unsupported when there are none.
pub fn choice_basis(results: &[ResultNumber]) -> AnswerBasis {
    let keys: Vec<String> = results
        .iter()
        .filter(|r| matches!(r.value, ResultValue::Effect { .. } | ResultValue::Test { .. } | ResultValue::Auc { .. }))
        .map(|r| r.key.clone())
        .collect();
    if keys.is_empty() {
        AnswerBasis::Unsupported { reason: "chosen before any effect or test was computed".into() }
    } else {
        AnswerBasis::AfterAnalysis { keys }
    }
}

/// The basis of a choice in the grounded strategy: the effects and tests
/// relevant to its question's effect fields ([`relevant`]), or, where none
/// is, [`choice_basis`].
pub fn choice_basis_for(task: &Task, question: &Question, results: &[ResultNumber]) -> AnswerBasis {
    let mut keys: Vec<String> = Vec::new();
    for f in &question.fields {
        if !matches!(f, FieldKind::Ratio { .. } | FieldKind::Pvalue { .. } | FieldKind::Auc { .. }) {
            continue;
        }
        for key in relevant(task, f.name(), f, results) {
            if !keys.iter().any(|k| k == key) {
                keys.push(key.to_string());
            }
        }
    }
    if keys.is_empty() {
        choice_basis(results)
    } else {
        AnswerBasis::AfterAnalysis { keys }
    }
}

/// The lines an observation adds for the results a step produced.
pub fn results_note(results: &[ResultNumber]) -> String {
    if results.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "Results you can submit by reference (submit_answers with {\"FIELD\": {\"from_result\": \"KEY\"}}; Evident fills in the number):\n",
    );
    for r in results {
        out.push_str(&format!("- {}: {}\n", r.key, r.value.describe()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_counts_the_fields_named_for_it_or_its_other_side() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(group_counts("high_rdw", &words(&["high", "rdw"])));
        assert!(group_counts("high_rdw", &words(&["normal", "rdw"])));
        assert!(group_counts("older", &words(&["younger"])));
        assert!(!group_counts("high_rdw", &words(&["rdw"])), "a median RDW is the rdw column's");
        assert!(!group_counts("older", &words(&["female"])));
    }
    use crate::task::tests::GOOD;

    fn task() -> Task {
        Task::from_yaml_str(GOOD, "t.yaml").unwrap()
    }

    fn field<'a>(t: &'a Task, name: &str) -> &'a FieldKind {
        t.field(name).unwrap().1
    }

    #[test]
    fn a_result_fills_the_fields_of_its_type() {
        let t = task();
        let effect = ResultValue::Effect {
            effect: "odds_ratio".into(),
            ratio: 1.5,
            conf_low: 1.1,
            conf_high: 2.0,
            p_value: 0.01,
        };
        assert_eq!(resolve(&t, field(&t, "or_lactate"), &effect), Some(1.5));
        assert_eq!(resolve(&t, field(&t, "or_low"), &effect), Some(1.1));
        assert_eq!(resolve(&t, field(&t, "or_high"), &effect), Some(2.0));
        assert_eq!(resolve(&t, field(&t, "p_lactate"), &effect), Some(0.01));
        assert_eq!(resolve(&t, field(&t, "n_patients"), &effect), None);
        let hazard = ResultValue::Effect {
            effect: "hazard_ratio".into(),
            ratio: 1.5,
            conf_low: 1.1,
            conf_high: 2.0,
            p_value: 0.01,
        };
        assert_eq!(resolve(&t, field(&t, "or_lactate"), &hazard), None, "an odds-ratio field takes no hazard ratio");
        let binary = ResultValue::Binary { ones: 11, n: 74 };
        assert_eq!(resolve(&t, field(&t, "n_deaths"), &binary), Some(11.0));
        assert_eq!(resolve(&t, field(&t, "or_lactate"), &binary), None);
        assert_eq!(resolve(&t, field(&t, "n_patients"), &ResultValue::Count { n: 74 }), Some(74.0));
    }

    #[test]
    fn typed_numbers_match_at_their_precision() {
        assert!(same_at_precision(1.14, "1.14", 1.138912));
        assert!(same_at_precision(1.1, "1.1", 1.138912), "1.14 at one decimal");
        assert!(!same_at_precision(1.2, "1.2", 1.138912));
        assert!(same_at_precision(74.0, "74", 74.0));
        assert!(!same_at_precision(0.001, "0.001", 0.00077), "within half a unit but 30% off");
        assert!(same_at_precision(0.0077, "0.0077", 0.007712));
        assert!(same_at_precision(7.7e-3, "7.7e-3", 0.007712));
        assert!(!same_at_precision(50.0, "50", 14.0));
        assert_eq!(
            numbers_in("n = 74 (3 rows dropped); p-value 7.712e-3, x1 1.5-2.0."),
            vec![74.0, 3.0, 7.712e-3, 1.5, 2.0]
        );
        let results = vec![ResultNumber {
            key: "OR lactate".into(),
            step: 4,
            tool: "logistic_regression".into(),
            value: ResultValue::Effect {
                effect: "odds_ratio".into(),
                ratio: 1.4321,
                conf_low: 1.1,
                conf_high: 2.0,
                p_value: 0.01,
            },
        }];
        let obs = vec![(2, "12 rows\ncount\n74\n".to_string())];
        let t = task();
        let basis = |name: &str, x: f64, text: &str, results: &[ResultNumber]| {
            literal_basis(&t, field(&t, name), (x, text), results, &obs)
        };
        assert_eq!(
            basis("or_lactate", 1.43, "1.43", &results),
            AnswerBasis::Matches { step: 4, source: "OR lactate".into() }
        );
        assert_eq!(
            basis("or_high", 2.0, "2.0", &results),
            AnswerBasis::Matches { step: 4, source: "OR lactate".into() }
        );
        assert!(basis("or_low", 2.0, "2.0", &results).is_unsupported(), "the upper bound is no lower bound");
        assert_eq!(
            basis("n_patients", 74.0, "74", &results),
            AnswerBasis::Matches { step: 2, source: "observation".into() }
        );
        assert!(basis("n_patients", 3.0, "3.0", &results).is_unsupported());
        // A count of stays supports a count, not a ratio of the same value.
        let stays = vec![ResultNumber {
            key: "stays".into(),
            step: 1,
            tool: "build_cohort".into(),
            value: ResultValue::Count { n: 140 },
        }];
        assert_eq!(basis("n_deaths", 140.0, "140", &stays), AnswerBasis::Matches { step: 1, source: "stays".into() });
        assert!(basis("or_lactate", 140.0, "140", &stays).is_unsupported());
        assert!(choice_basis(&[]).is_unsupported());
        assert_eq!(choice_basis(&results), AnswerBasis::AfterAnalysis { keys: vec!["OR lactate".into()] });
    }

    /// What the grounded strategy offers each development task's fields
    /// out of results of the right type (the keys the tools write).
    #[test]
    fn a_field_is_offered_the_results_named_for_it() {
        let dev = |id: &str| {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tasks/{id}/task.yaml"));
            Task::load(&path).unwrap().task
        };
        let result = |key: &str, value: ResultValue| ResultNumber { key: key.into(), step: 1, tool: "t".into(), value };
        let binary = || ResultValue::Binary { ones: 3, n: 10 };
        let continuous = || ResultValue::Continuous { n: 10, median: 1.0, mean: 1.0 };
        let effect = |e: &str| ResultValue::Effect {
            effect: e.into(),
            ratio: 1.2,
            conf_low: 1.1,
            conf_high: 1.3,
            p_value: 0.01,
        };
        let offered = |t: &Task, id: &str, results: &[ResultNumber]| -> Vec<String> {
            let (_, f) = t.field(id).unwrap();
            relevant(t, id, f, results).into_iter().map(str::to_string).collect()
        };

        let t = dev("anion-gap-28day-auc");
        let results = vec![
            result("stays", ResultValue::Count { n: 100 }),
            result("rows", ResultValue::Count { n: 100 }),
            result("hospital_expire_flag", binary()),
            result("death_28d", binary()),
            result("female", binary()),
            result("age", continuous()),
            result("OR age", effect("odds_ratio")),
            result("OR anion_gap", effect("odds_ratio")),
            result("AUC anion_gap", ResultValue::Auc { auc: 0.7 }),
        ];
        assert_eq!(offered(&t, "n_patients", &results), ["stays", "rows"]);
        assert_eq!(offered(&t, "n_deaths_28d", &results), ["death_28d"], "not the in-hospital deaths");
        assert_eq!(offered(&t, "or_anion_gap", &results), ["OR anion_gap"]);
        assert_eq!(offered(&t, "or_anion_gap_low", &results), ["OR anion_gap"]);
        assert_eq!(offered(&t, "p_anion_gap", &results), ["OR anion_gap"]);
        assert_eq!(offered(&t, "auc_anion_gap", &results), ["AUC anion_gap"]);
        assert!(offered(&t, "n_deaths_28d", &results[..2]).is_empty(), "the stays are no deaths");
        let q = t.question("q_anion_gap").unwrap();
        assert!(choice_ready(&t, q, &results));
        assert!(!choice_ready(&t, q, &results[..7]), "an odds ratio of age is not the question's");
        assert_eq!(
            choice_basis_for(&t, q, &results),
            AnswerBasis::AfterAnalysis { keys: vec!["OR anion_gap".into(), "AUC anion_gap".into()] }
        );

        let t = dev("age-baseline-mortality");
        let results = vec![
            result("female", binary()),
            result("female=1 if hospital_expire_flag=1", binary()),
            result("Fisher OR female by hospital_expire_flag", effect("odds_ratio")),
            result("age", continuous()),
        ];
        assert_eq!(offered(&t, "n_female", &results), ["female", "female=1 if hospital_expire_flag=1"]);
        assert_eq!(offered(&t, "median_age", &results), ["age"]);
        assert!(offered(&t, "p_fisher", &results).is_empty(), "a test of sex is not the question's test of age");
        let q = t.question("q_age").unwrap();
        assert!(!choice_ready(&t, q, &results));
        let older = vec![
            result("Fisher OR older by hospital_expire_flag", effect("odds_ratio")),
            result("hospital_expire_flag=1 if older=1", binary()),
        ];
        assert_eq!(offered(&t, "p_fisher", &older), ["Fisher OR older by hospital_expire_flag"]);
        assert_eq!(offered(&t, "mortality_older_pct", &older), ["hospital_expire_flag=1 if older=1"]);
        assert!(choice_ready(&t, q, &older));
        // Run 6: both shares of the Fisher table, the older side first; the
        // younger patients' mortality is the older=0 side, and each field is
        // offered its own side only.
        let shares = vec![
            result("hospital_expire_flag=1 if older_patients=1", binary()),
            result("hospital_expire_flag=1 if older_patients=0", binary()),
            result("older_patients=1 if hospital_expire_flag=1", binary()),
            result("older_patients=1 if hospital_expire_flag=0", binary()),
        ];
        assert_eq!(offered(&t, "mortality_older_pct", &shares), ["hospital_expire_flag=1 if older_patients=1"]);
        assert_eq!(offered(&t, "mortality_younger_pct", &shares), ["hospital_expire_flag=1 if older_patients=0"]);

        let t = dev("rdw-one-year-survival");
        let results = vec![
            result("n high_rdw=1", ResultValue::Count { n: 4 }),
            result("events", ResultValue::Count { n: 9 }),
            result("log-rank p", ResultValue::Test { test: "log-rank".into(), p_value: 0.09 }),
            result("HR high_rdw", effect("hazard_ratio")),
            result("HR age", effect("hazard_ratio")),
        ];
        assert_eq!(offered(&t, "n_high_rdw", &results), ["n high_rdw=1"]);
        let baseline = t.question("baseline").unwrap();
        let tool = |id: &str| tool_for_field(&t, baseline, t.field(id).unwrap().1);
        assert_eq!(tool("n_high_rdw"), Some("describe"));
        assert_eq!(tool("n_normal_rdw"), Some("kaplan_meier_logrank"), "run 6 described the RDW columns for it");
        let groups = vec![
            result("n high_rdw=1", ResultValue::Count { n: 4 }),
            result("n high_rdw=0", ResultValue::Count { n: 70 }),
        ];
        assert_eq!(offered(&t, "n_high_rdw", &groups), ["n high_rdw=1"]);
        assert_eq!(offered(&t, "n_normal_rdw", &groups), ["n high_rdw=0"]);
        // The cohort's own group column counts the high side only.
        let column = vec![result("high_rdw", binary())];
        assert_eq!(offered(&t, "n_high_rdw", &column), ["high_rdw"]);
        assert!(offered(&t, "n_normal_rdw", &column).is_empty());
        assert_eq!(offered(&t, "n_deaths_1y", &results), ["events"]);
        assert_eq!(offered(&t, "p_logrank", &results), ["log-rank p"]);
        assert_eq!(offered(&t, "hr_high_rdw", &results), ["HR high_rdw"]);
        assert_eq!(offered(&t, "hr_low", &results), ["HR high_rdw"]);
        assert_eq!(offered(&t, "p_cox", &results), ["HR high_rdw"]);
        // Run 9 filled the Cox model's p with a logistic regression's.
        let other_models = vec![
            result("OR high_rdw", effect("odds_ratio")),
            result("log-rank p", ResultValue::Test { test: "log-rank".into(), p_value: 0.09 }),
        ];
        assert!(offered(&t, "p_cox", &other_models).is_empty());
        assert_eq!(offered(&t, "p_logrank", &other_models), ["log-rank p"], "no ratio beside it");

        let t = dev("statin-psm-mortality");
        let results = vec![
            result("statin=1", ResultValue::Count { n: 20 }),
            result("matched pairs", ResultValue::Count { n: 15 }),
            result("matched events", ResultValue::Count { n: 5 }),
        ];
        assert_eq!(offered(&t, "n_matched_pairs", &results), ["matched pairs"]);
        let sides =
            vec![result("statin=1", ResultValue::Count { n: 20 }), result("statin=0", ResultValue::Count { n: 54 })];
        assert_eq!(offered(&t, "n_statin", &sides), ["statin=1"]);
        assert_eq!(offered(&t, "n_no_statin", &sides), ["statin=0"]);
        let baseline = t.question("baseline").unwrap();
        assert_eq!(tool_for_field(&t, baseline, t.field("n_no_statin").unwrap().1), Some("propensity_matching"));
        let column = vec![result("statin", binary())];
        assert_eq!(offered(&t, "n_statin", &column), ["statin"]);
        assert!(offered(&t, "n_no_statin", &column).is_empty());
        assert_eq!(offered(&t, "n_deaths_matched", &results), ["matched events"]);
        // Run 7 filled it with the cohort's deaths, before any matching.
        let cohort = vec![result("death_365d", binary())];
        assert!(offered(&t, "n_deaths_matched", &cohort).is_empty());
        assert_eq!(tool_for_field(&t, baseline, t.field("n_deaths_matched").unwrap().1), Some("propensity_matching"));
        assert_eq!(offered(&t, "n_deaths_matched", &[cohort, results.clone()].concat()), ["matched events"]);
        assert_eq!(offered(&t, "n_statin", &results), ["statin=1"]);
    }
}
