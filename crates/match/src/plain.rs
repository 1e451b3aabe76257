//! Plain eligibility text split into criteria: "Inclusion Criteria:" and
//! "Exclusion Criteria:" headers start sections; bullets (`*`, `-`, `•`) and
//! numbering (`1.`, `1)`, `(a)`, `a.`) start items; lines without a marker
//! continue the previous item; more deeply indented bullets are sub-items
//! joined to their parent. A section with no markers at all is split into
//! paragraphs. Text before any header counts as inclusion (most registries
//! list inclusion first and omit the header when there is no exclusion).

use crate::criteria::{CriteriaSet, Criterion, CriterionType};

/// The items of an eligibility text, in order, by section.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SplitCriteria {
    pub inclusion: Vec<String>,
    pub exclusion: Vec<String>,
}

impl SplitCriteria {
    /// A criteria set with ids `inc-1..`, `exc-1..`.
    pub fn into_criteria_set(self, trial_id: &str, title: &str, source: Option<String>) -> CriteriaSet {
        let mut criteria = Vec::new();
        for (ty, prefix, items) in
            [(CriterionType::Inclusion, "inc", self.inclusion), (CriterionType::Exclusion, "exc", self.exclusion)]
        {
            for (i, text) in items.into_iter().enumerate() {
                criteria.push(Criterion {
                    id: format!("{prefix}-{}", i + 1),
                    criterion_type: ty,
                    text,
                    refined: None,
                    pooling: None,
                    window_months: None,
                    structured: None,
                    check: None,
                });
            }
        }
        CriteriaSet { trial_id: trial_id.to_string(), title: title.to_string(), source, criteria }
    }
}

fn header(line: &str) -> Option<CriterionType> {
    let l = line.trim().trim_end_matches(':').trim().to_ascii_lowercase();
    let l = l.trim_start_matches(['#', '*', ' ']).trim_end_matches(['*', ' ', ':']);
    let l = l.strip_prefix("key ").unwrap_or(l);
    match l {
        "inclusion criteria" | "inclusion" | "inclusion criterion" => Some(CriterionType::Inclusion),
        "exclusion criteria" | "exclusion" | "exclusion criterion" => Some(CriterionType::Exclusion),
        _ => None,
    }
}

/// If `line` starts with a bullet or number, the text after the marker.
fn strip_marker(line: &str) -> Option<&str> {
    let t = line.trim_start();
    for bullet in ["* ", "- ", "• ", "· ", "– ", "o "] {
        if let Some(rest) = t.strip_prefix(bullet) {
            return Some(rest.trim());
        }
    }
    // (a) (1) (iv)
    if let Some(rest) = t.strip_prefix('(') {
        if let Some(close) = rest.find(')') {
            let label = &rest[..close];
            if is_label(label) && rest[close + 1..].starts_with(' ') {
                return Some(rest[close + 1..].trim());
            }
        }
    }
    // 1. 1) a. a) 10.
    let label_end = t.find(['.', ')'])?;
    let label = &t[..label_end];
    let after = &t[label_end + 1..];
    if is_label(label) && (after.starts_with(' ') || after.starts_with('\t')) {
        // "1.5 mg" is not a marker: the label must be followed by whitespace.
        return Some(after.trim());
    }
    None
}

fn is_label(label: &str) -> bool {
    let numeric = !label.is_empty() && label.len() <= 3 && label.chars().all(|c| c.is_ascii_digit());
    let letter = label.len() == 1 && label.chars().all(|c| c.is_ascii_alphabetic());
    let roman = !label.is_empty() && label.len() <= 4 && label.chars().all(|c| "ivx".contains(c));
    numeric || letter || roman
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Whether a text has anything the splitter recognises: an inclusion or
/// exclusion heading, or a bulleted or numbered item. Prose without either
/// is not taken for criteria.
pub fn has_items(text: &str) -> bool {
    text.lines().any(|l| header(l).is_some() || strip_marker(l).is_some_and(|rest| !rest.is_empty()))
}

/// Splits eligibility text into inclusion and exclusion items.
pub fn split_criteria_text(text: &str) -> SplitCriteria {
    let mut sections: Vec<(CriterionType, Vec<&str>)> = vec![(CriterionType::Inclusion, Vec::new())];
    for line in text.lines() {
        if let Some(ty) = header(line) {
            sections.push((ty, Vec::new()));
        } else {
            sections.last_mut().expect("one section always exists").1.push(line);
        }
    }
    let mut out = SplitCriteria::default();
    for (ty, lines) in sections {
        let items = split_section(&lines);
        match ty {
            CriterionType::Inclusion => out.inclusion.extend(items),
            CriterionType::Exclusion => out.exclusion.extend(items),
        }
    }
    out
}

fn split_section(lines: &[&str]) -> Vec<String> {
    let has_markers = lines.iter().any(|l| strip_marker(l).is_some());
    let mut items: Vec<String> = Vec::new();
    if !has_markers {
        // Paragraphs.
        let mut current = String::new();
        for line in lines {
            if line.trim().is_empty() {
                if !current.is_empty() {
                    items.push(std::mem::take(&mut current));
                }
            } else {
                append(&mut current, line.trim(), " ");
            }
        }
        if !current.is_empty() {
            items.push(current);
        }
        return items;
    }
    // Indent of the top-level markers: the smallest indent of any marker line.
    let top = lines.iter().filter(|l| strip_marker(l).is_some()).map(|l| indent(l)).min().unwrap_or(0);
    let mut preamble = String::new();
    for line in lines {
        if line.trim().is_empty() {
            continue;
        }
        match strip_marker(line) {
            Some(rest) if indent(line) <= top || items.is_empty() => items.push(rest.to_string()),
            Some(rest) => append(items.last_mut().expect("checked non-empty"), rest, "; "),
            None => match items.last_mut() {
                Some(last) => append(last, line.trim(), " "),
                None => append(&mut preamble, line.trim(), " "),
            },
        }
    }
    // Text before the first marker (e.g. "Patients must meet all of:") is
    // kept as its own item only if it is not a lead-in ending in a colon.
    if !preamble.is_empty() && !preamble.ends_with(':') {
        items.insert(0, preamble);
    }
    items.retain(|i| !i.is_empty());
    items
}

fn append(target: &mut String, text: &str, separator: &str) {
    if text.is_empty() {
        return;
    }
    if !target.is_empty() {
        let sep = if target.ends_with(':') && separator == "; " { " " } else { separator };
        target.push_str(sep);
    }
    target.push_str(text);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, inclusion: &[&str], exclusion: &[&str]) {
        let split = split_criteria_text(text);
        assert_eq!(split.inclusion, inclusion, "inclusion of {text:?}");
        assert_eq!(split.exclusion, exclusion, "exclusion of {text:?}");
    }

    #[test]
    fn clinicaltrials_gov_bullets_with_sub_bullets() {
        // The layout ClinicalTrials.gov API v2 returns (markdown bullets).
        check(
            "Inclusion Criteria:\n\n* Age ≥ 18 years\n* Type 2 diabetes with HbA1c 7.0-10.5%\n* Stable dose of one of:\n\n  * metformin\n  * a sulfonylurea\n\nExclusion Criteria:\n\n* Pregnant or breast-feeding\n* eGFR < 30 mL/min/1.73m2\n",
            &["Age ≥ 18 years", "Type 2 diabetes with HbA1c 7.0-10.5%", "Stable dose of one of: metformin; a sulfonylurea"],
            &["Pregnant or breast-feeding", "eGFR < 30 mL/min/1.73m2"],
        );
    }

    #[test]
    fn numbering_and_continuation_lines() {
        check(
            "INCLUSION CRITERIA\n1. Men and women aged 40 to 80,\n   inclusive, at screening.\n2) Chronic stable angina for at least\n3 months.\nEXCLUSION CRITERIA:\n(a) Myocardial infarction within 6 months\n(b) Dose of 1.5 mg or more of nitroglycerin daily\n",
            &["Men and women aged 40 to 80, inclusive, at screening.", "Chronic stable angina for at least 3 months."],
            &["Myocardial infarction within 6 months", "Dose of 1.5 mg or more of nitroglycerin daily"],
        );
    }

    #[test]
    fn decimals_are_not_numbering() {
        check("- HbA1c\n1.5 mg daily dose\n", &["HbA1c 1.5 mg daily dose"], &[]);
    }

    #[test]
    fn paragraphs_without_markers_and_no_headers() {
        check(
            "Adults with COPD.\n\nNo exacerbation in the last\nfour weeks.",
            &["Adults with COPD.", "No exacerbation in the last four weeks."],
            &[],
        );
    }

    #[test]
    fn lead_in_line_is_dropped_but_a_real_item_is_kept() {
        check("Inclusion Criteria:\nPatients must meet all of:\n- A\n- B\n", &["A", "B"], &[]);
        check("Exclusion Criteria:\nKnown HIV infection\n- A\n", &[], &["Known HIV infection", "A"]);
    }

    #[test]
    fn items_are_recognised_by_headings_or_markers() {
        assert!(has_items("Exclusion Criteria:\nKnown HIV infection"));
        assert!(has_items("1. Adults"));
        assert!(has_items("- Adults"));
        assert!(!has_items("Adults with COPD.\n\nNo exacerbation."));
        assert!(!has_items(""));
    }

    #[test]
    fn criteria_set_ids() {
        let set = split_criteria_text("Inclusion Criteria:\n- A\n- B\nExclusion Criteria:\n- C\n")
            .into_criteria_set("NCT1", "T", None);
        let ids: Vec<_> = set.criteria.iter().map(|c| (c.id.as_str(), c.criterion_type)).collect();
        assert_eq!(
            ids,
            [
                ("inc-1", CriterionType::Inclusion),
                ("inc-2", CriterionType::Inclusion),
                ("exc-1", CriterionType::Exclusion)
            ]
        );
        set.validate("test").unwrap();
    }
}
