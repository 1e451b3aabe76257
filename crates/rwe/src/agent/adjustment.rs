//! The protocol's models, read from its text for the grounded strategy: the
//! terms of each "regression of Y on A, B and C" (or "model of ... on ...")
//! and of a `Covariates:` line, matched to the columns of a cohort table.
//! A model whose every term names one column becomes the only predictor set
//! the grounded schema offers; one that does not (a term such as "the three
//! covariates") constrains nothing. A lactate chunk at 0d07b7d
//! (docs/evaluation.md) fitted lactate alone where the protocol adjusts for
//! age and sex, and chose the wrong answer from it.

/// Words that say nothing about which column a term is.
const FILLER: &[&str] = &[
    "the",
    "a",
    "an",
    "of",
    "use",
    "user",
    "users",
    "maximum",
    "max",
    "minimum",
    "first-day",
    "first",
    "day",
    "level",
    "levels",
    "value",
    "values",
    "indicator",
    "continuous",
    "per",
    "serum",
    "blood",
    "its",
];

/// Words that begin the rest of a term after the variable's name
/// ("creatinine charted from six hours before ...").
const TAIL: &[&str] = &[
    "charted", "measured", "from", "within", "at", "during", "before", "after", "matched", "by", "with", "for", "on",
    "in",
];

/// A term's words, lower-cased, with `sex` and `gender` read as `female`
/// (the cohort's sex column).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .filter(|w| !w.is_empty())
        .map(|w| match w.to_lowercase().as_str() {
            "sex" | "gender" | "women" | "woman" => "female".to_string(),
            other => other.to_string(),
        })
        .collect()
}

/// The text with parenthetical remarks removed.
fn without_parentheses(text: &str) -> String {
    let mut depth = 0usize;
    text.chars()
        .filter(|c| {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth = depth.saturating_sub(1);
                    return false;
                }
                _ => {}
            }
            depth == 0
        })
        .collect()
}

/// The terms of a list "A, B and C", up to the end of its clause.
fn terms(list: &str) -> Vec<String> {
    let end = [". ", ";", ":"].iter().filter_map(|s| list.find(s)).min().unwrap_or(list.len());
    let list = list[..end].trim_end_matches('.');
    list.split(',')
        .flat_map(|part| part.split(" and "))
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

/// The protocol's models and covariate lists, as their terms.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProtocolModels {
    /// The terms after "on" of each "regression of ... on ..." or
    /// "model of ... on ...", in the protocol's order.
    pub models: Vec<Vec<String>>,
    /// The terms of each `Covariates:` line.
    pub covariates: Vec<Vec<String>>,
}

impl ProtocolModels {
    pub fn read(protocol_text: &str) -> ProtocolModels {
        let text = without_parentheses(&protocol_text.replace('\n', " "));
        let lower = text.to_lowercase();
        let mut models = Vec::new();
        for marker in ["regression of ", "model of "] {
            let mut from = 0;
            while let Some(at) = lower[from..].find(marker) {
                let start = from + at + marker.len();
                from = start;
                let clause_end =
                    [". ", ";"].iter().filter_map(|s| lower[start..].find(s)).min().unwrap_or(lower.len() - start);
                let Some(on) = lower[start..start + clause_end].find(" on ") else { continue };
                models.push((start + on, terms(&lower[start + on + 4..])));
            }
        }
        models.sort_by_key(|(at, _)| *at);
        let covariates = protocol_text
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("Covariates:"))
            .map(|rest| terms(&without_parentheses(&rest.to_lowercase())))
            .collect();
        ProtocolModels { models: models.into_iter().map(|(_, t)| t).collect(), covariates }
    }

    /// The regressions' predictor sets on a table with these columns.
    pub fn predictor_sets(&self, columns: &[String]) -> Vec<Vec<String>> {
        sets(&self.models, columns)
    }

    /// The covariate sets (a propensity model's) on a table with these
    /// columns.
    pub fn covariate_sets(&self, columns: &[String]) -> Vec<Vec<String>> {
        sets(&self.covariates, columns)
    }
}

/// Each list whose terms all name a column, as those columns (the list ends
/// at a term that begins the rest of the sentence, "with Efron's method for
/// ties" or "report the odds ratio ...", once a term before it named a
/// column).
fn sets(lists: &[Vec<String>], columns: &[String]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    for list in lists {
        let mut set = Vec::new();
        let mut complete = true;
        for term in list {
            match column_for(term, columns) {
                Some(c) if !set.contains(&c) => set.push(c),
                Some(_) => {}
                None if !set.is_empty() && is_trailing_clause(term) => break,
                None => complete = false,
            }
        }
        if complete && !set.is_empty() && !out.contains(&set) {
            out.push(set);
        }
    }
    out
}

/// A term that is not a variable but the rest of the sentence ("with
/// Efron's method for ties", "report the odds ratio ...", "matched by
/// subject_id").
fn is_trailing_clause(term: &str) -> bool {
    let first = term.split_whitespace().next().unwrap_or("");
    matches!(first, "with" | "report" | "reporting" | "matched" | "charted" | "using" | "then" | "stays" | "for" | "in")
}

/// The one column a term names: every word of the column's name is among
/// the term's words, every word of the term (less filler) among the
/// column's, and a cut word ("high") only where the column has it.
fn column_for(term: &str, columns: &[String]) -> Option<String> {
    let term_words: Vec<String> = words(term)
        .into_iter()
        .take_while(|w| !TAIL.contains(&w.as_str()))
        .filter(|w| !FILLER.contains(&w.as_str()))
        .collect();
    if term_words.is_empty() {
        return None;
    }
    let matches: Vec<&String> = columns
        .iter()
        .filter(|c| {
            let col_words: Vec<String> =
                words(&c.replace('_', " ")).into_iter().filter(|w| !FILLER.contains(&w.as_str())).collect();
            col_words.iter().all(|w| term_words.contains(w)) && term_words.iter().all(|w| col_words.contains(w))
        })
        .collect();
    match matches.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn reads_each_development_protocols_models() {
        let anion = "Analysis: report the number of patients and of deaths within 28 days. Fit a logistic regression\nof the outcome on the anion gap (continuous, per 1 mEq/L) and age (continuous); report the odds\nratio for the anion gap.";
        let m = ProtocolModels::read(anion);
        assert_eq!(m.predictor_sets(&cols(&["age", "female", "anion_gap"])), [cols(&["anion_gap", "age"])]);

        let lactate = "Fit a logistic regression of in-hospital death on lactate (continuous, per 1 mmol/L),\nage (continuous, years) and sex (female indicator). Report the odds ratio.";
        let m = ProtocolModels::read(lactate);
        assert_eq!(m.predictor_sets(&cols(&["age", "female", "lactate"])), [cols(&["lactate", "age", "female"])]);

        let rdw = "Fit a Cox proportional hazards model of the outcome on high RDW (indicator), age (continuous) and sex (female\nindicator), with Efron's method for ties; report the hazard ratio.";
        let m = ProtocolModels::read(rdw);
        // The group column names the cut; the raw column does not.
        assert_eq!(
            m.predictor_sets(&cols(&["age", "female", "rdw", "high_rdw"])),
            [cols(&["high_rdw", "age", "female"])]
        );
        // A group named otherwise constrains nothing (never the raw rdw).
        assert!(m.predictor_sets(&cols(&["age", "female", "rdw", "elevated_rdw"])).is_empty());

        let statin = "Covariates: age (continuous), sex (female indicator) and the maximum creatinine (labevents\nitemid 50912) charted from six hours before to twenty-four hours after intime, matched by\nsubject_id; stays without such a creatinine are excluded.\nPropensity-score matching: estimate the propensity score by logistic regression of statin use\non the three covariates; match.\nAnalysis: in the matched set, fit a logistic regression of the outcome on statin use and report\nthe odds ratio.";
        let m = ProtocolModels::read(statin);
        let table = cols(&["age", "female", "creatinine", "statin"]);
        assert_eq!(m.covariate_sets(&table), [cols(&["age", "female", "creatinine"])]);
        // "the three covariates" names no column: only the outcome model.
        assert_eq!(m.predictor_sets(&table), [cols(&["statin"])]);
    }

    #[test]
    fn a_protocol_without_models_constrains_nothing() {
        let age = "Analysis: report the number of patients. Compare the groups with a two-sided Fisher's exact test.";
        let m = ProtocolModels::read(age);
        assert!(m.models.is_empty() && m.covariates.is_empty());
        assert!(m.predictor_sets(&cols(&["age", "female"])).is_empty());
    }
}
