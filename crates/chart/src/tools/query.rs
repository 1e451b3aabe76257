//! Query words: answer-schema tokens out, keyword subsets for broadening,
//! the words that name a question's subject.

use std::collections::BTreeSet;

/// Answer-schema words the model sometimes puts into a query.
const SCHEMA_TOKENS: &[&str] =
    &["not documented", "answer:", "reasoning:", "yes/no", "unclear", "never", "yes", "no", "nd"];

/// The query without answer-schema tokens and citation markers.
pub fn sanitise_query(query: &str) -> String {
    let lowered = query.to_lowercase();
    let mut text = lowered.clone();
    for token in SCHEMA_TOKENS.iter().filter(|t| t.contains(' ') || t.contains(':') || t.contains('/')) {
        text = text.replace(token, " ");
    }
    text.split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|w| !w.is_empty())
        .filter(|w| !SCHEMA_TOKENS.contains(w))
        .filter(|w| !(w.starts_with('[') && w.ends_with(']') && w[1..w.len() - 1].chars().all(|c| c.is_ascii_digit())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Common words dropped when a query is reduced to its keywords after
/// repeated empty results.
pub(crate) const STOPWORDS: &[&str] = &[
    "the",
    "a",
    "an",
    "of",
    "in",
    "on",
    "for",
    "to",
    "and",
    "or",
    "with",
    "was",
    "is",
    "were",
    "has",
    "have",
    "had",
    "patient",
    "patients",
    "any",
    "documented",
    "documentation",
    "evidence",
    "report",
    "reports",
    "did",
    "does",
    "what",
    "which",
    "when",
    "there",
    "that",
    "been",
    "be",
    "by",
    "at",
    "from",
    "their",
    "his",
    "her",
    "date",
    "dates",
    "are",
];

/// The keyword subset of a query (stopwords out).
pub fn keyword_subset(query: &str) -> String {
    query
        .split_whitespace()
        .filter(|w| !STOPWORDS.contains(&w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase().as_str()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The question's content words (stopwords and answer words out): the
/// planner's candidate search words.
pub fn question_keywords(question: &str) -> String {
    let cleaned: String = question.chars().map(|c| if c.is_alphanumeric() || c == '-' { c } else { ' ' }).collect();
    let words = keyword_subset(&sanitise_query(&cleaned));
    const QUESTION_WORDS: &[&str] =
        &["currently", "receiving", "ever", "received", "does", "do", "how", "many", "who", "whether"];
    words.split_whitespace().filter(|w| !QUESTION_WORDS.contains(w)).collect::<Vec<_>>().join(" ")
}

/// Words of time and status that a question asks with, not about.
const FRAME_WORDS: &[&str] = &[
    "first",
    "last",
    "latest",
    "earliest",
    "initial",
    "initially",
    "most",
    "recent",
    "recently",
    "current",
    "time",
    "interval",
    "intervals",
    "period",
    "periods",
    "active",
    "ongoing",
];

/// The words that name what a question asks about: its keywords
/// ([`question_keywords`]) without words of time and status ("first",
/// "most recent", "intervals", "active") and without a parenthesised
/// part, which holds a format, the options or a qualifier ("(at most 12,
/// YYYY-MM-DD)", "(disorder)").
pub fn subject_words(question: &str) -> Vec<String> {
    let outside = outside_parentheses(question);
    question_keywords(&outside).split_whitespace().filter(|w| !FRAME_WORDS.contains(w)).map(str::to_string).collect()
}

/// A question with every parenthesised part blanked (a format, options or
/// a qualifier), so what is left words its subject.
pub(crate) fn outside_parentheses(question: &str) -> String {
    let mut outside = String::new();
    let mut depth = 0usize;
    for c in question.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => outside.push(c),
            _ => outside.push(' '),
        }
    }
    outside
}

/// Whether `text` names the subject whose words are `words`: it holds
/// all of them but at most a third (rounded down), each as a whole word,
/// ignoring case. A question may word its subject with more than the
/// record's line repeats ("prescription dates of Acetaminophen 325 MG
/// Oral Tablet"), so not every word of a longer subject is required;
/// "chronic kidney disease" is not named by "chronic sinusitis", nor
/// "polyp of colon" by "colon cancer screening".
pub fn names_subject(words: &[String], text: &str) -> bool {
    let present = subject_words_in(words, text);
    present >= 1 && words.len() - present <= words.len() / 3
}

/// How many of the subject's words `text` holds, each as a whole word,
/// ignoring case.
pub fn subject_words_in(words: &[String], text: &str) -> usize {
    let lowered = text.to_lowercase();
    let tokens: BTreeSet<&str> = lowered.split(|c: char| !(c.is_alphanumeric() || c == '-')).collect();
    words.iter().filter(|w| tokens.contains(w.as_str())).count()
}

/// Where a phrase occurs in a text as a whole phrase, not inside a longer
/// word ("metformin" in "metformins" does not count): the byte spans, in
/// order. Both are compared as given (lower-case them first).
pub fn phrase_spans(text: &str, phrase: &str) -> Vec<(usize, usize)> {
    if phrase.is_empty() {
        return vec![];
    }
    let bytes = text.as_bytes();
    let boundary = |b: Option<&u8>| b.is_none_or(|b| !b.is_ascii_alphanumeric());
    text.match_indices(phrase)
        .filter(|(i, _)| boundary(i.checked_sub(1).and_then(|j| bytes.get(j))) && boundary(bytes.get(i + phrase.len())))
        .map(|(i, _)| (i, i + phrase.len()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_lose_answer_schema_tokens() {
        assert_eq!(sanitise_query("Answer: Yes/No metformin [3] not documented"), "metformin");
        assert_eq!(sanitise_query("dialysis yes no unclear"), "dialysis");
        assert_eq!(keyword_subset("Was the patient given metformin"), "given metformin");
    }

    #[test]
    fn a_subject_is_named_by_a_line_that_holds_nearly_all_its_words() {
        let words = subject_words(
            "Which prescription dates of Acetaminophen 325 MG Oral Tablet are documented (at most 12, YYYY-MM-DD)?",
        );
        assert_eq!(words, ["prescription", "acetaminophen", "325", "mg", "oral", "tablet"]);
        let line = "- 2017-12-04 12:55: Acetaminophen 325 MG Oral Tablet (stopped) [RxNorm 313782]";
        assert!(names_subject(&words, line));
        assert!(!names_subject(&words, "- 2017-12-04 12:55: Ibuprofen 200 MG Oral Tablet (stopped)"));

        let words = subject_words("When was Chronic kidney disease first documented?");
        assert_eq!(words, ["chronic", "kidney", "disease"]);
        assert!(names_subject(&words, "- 2010-02-01: Chronic kidney disease stage 3 (disorder) (active)"));
        assert!(!names_subject(&words, "- 1993-05-04: Chronic sinusitis (disorder) (active)"));
        assert!(!names_subject(&words, "- 1993-05-04: Chronic kidneydisease"));

        let words = subject_words(
            "In which documented intervals was Acute viral pharyngitis (disorder) active (onset–resolution or onset–ongoing)?",
        );
        assert_eq!(words, ["acute", "viral", "pharyngitis"]);

        let words = subject_words("When was Hypertension first documented?");
        assert!(names_subject(&words, "- 2001-03-02: Hypertension (active)"));
        assert!(!names_subject(&words, "- 2001-03-02: First visit"));

        let words = subject_words("When was Polyp of colon first documented?");
        assert!(names_subject(&words, "- 2017-08-26 20:43: Polyp of colon (resolved, resolved 2019-01-18)"));
        assert!(!names_subject(&words, "- 2017-08-26 20:43: Colon cancer screening"));
    }
}
