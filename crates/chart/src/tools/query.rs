//! Query words: answer-schema tokens out, keyword subsets for broadening.

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
];

/// The keyword subset of a query (stopwords out).
pub fn keyword_subset(query: &str) -> String {
    query
        .split_whitespace()
        .filter(|w| !STOPWORDS.contains(&w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase().as_str()))
        .collect::<Vec<_>>()
        .join(" ")
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
}
