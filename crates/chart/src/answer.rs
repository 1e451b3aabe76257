//! The paper's two-line answer: `Answer:` with the schema-aligned value and
//! `Reasoning:` with one or two sentences carrying inline citations `[n]`.
//! Parsing is strict about the two labels and lenient about what surrounds
//! them (blank lines, Markdown bold); citation numbers are checked against
//! the numbered context nodes, and a number that names no node is kept and
//! flagged as unsupported, never dropped.

use serde::Serialize;

/// A parsed two-line answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TwoLine {
    pub answer: String,
    pub reasoning: String,
    /// Citation numbers in order of first appearance in the reasoning.
    pub cited: Vec<usize>,
}

/// Why a text is not a two-line answer (for the repair prompt).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct FormatError(pub String);

/// Parses `text` as the two-line format.
pub fn parse_two_line(text: &str) -> Result<TwoLine, FormatError> {
    let clean = |l: &str| l.trim().trim_start_matches(['*', '#', '-', ' ']).replace("**", "").trim().to_string();
    // "Answer: x Reasoning: y" on one line is the same two fields: split it.
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines().map(clean).filter(|l| !l.is_empty()) {
        let lower = line.to_ascii_lowercase();
        match lower.find("reasoning:") {
            Some(i) if i > 0 && lower.starts_with("answer:") && line.is_char_boundary(i) => {
                lines.push(line[..i].trim().to_string());
                lines.push(line[i..].to_string());
            }
            _ => lines.push(line),
        }
    }
    let find =
        |label: &str| lines.iter().position(|l| l.len() >= label.len() && l[..label.len()].eq_ignore_ascii_case(label));
    let Some(a) = find("answer:") else {
        return Err(FormatError("no line starts with \"Answer:\"".into()));
    };
    let Some(r) = find("reasoning:") else {
        return Err(FormatError("no line starts with \"Reasoning:\"".into()));
    };
    if r < a {
        return Err(FormatError("the \"Reasoning:\" line comes before the \"Answer:\" line".into()));
    }
    let answer = lines[a]["answer:".len()..].trim().to_string();
    if answer.is_empty() {
        return Err(FormatError("the \"Answer:\" line is empty".into()));
    }
    // The reasoning may wrap onto following lines.
    let reasoning = std::iter::once(lines[r]["reasoning:".len()..].trim().to_string())
        .chain(lines[r + 1..].iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
        .trim()
        .to_string();
    if reasoning.is_empty() {
        return Err(FormatError("the \"Reasoning:\" line is empty".into()));
    }
    let cited = citation_numbers(&reasoning);
    Ok(TwoLine { answer, reasoning, cited })
}

/// The numbers inside `[n]`, `[n, m]` or `[n][m]`, first appearance order.
pub fn citation_numbers(text: &str) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else { break };
        let inside = &after[..close];
        let numbers: Vec<Option<usize>> =
            inside.split([',', ';']).map(|p| p.trim().trim_start_matches('#').parse().ok()).collect();
        if !numbers.is_empty() && numbers.iter().all(Option::is_some) {
            for n in numbers.into_iter().flatten() {
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
        rest = &after[close + 1..];
    }
    out
}

/// The answer value normalised for comparison (case, whitespace, trailing
/// punctuation, formatting artefacts), as the paper's scoring does.
pub fn normalise_answer(answer: &str) -> String {
    answer
        .replace(['*', '`', '"'], "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(['.', ';', ','])
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_lines_parse_with_citations() {
        let t =
            parse_two_line("Answer: Yes\nReasoning: Metformin was started in 2019 [2] and is active [2, 5].").unwrap();
        assert_eq!(t.answer, "Yes");
        assert_eq!(t.cited, vec![2, 5]);
        let t =
            parse_two_line("\n**Answer:** Not documented\n\n**Reasoning:** Nothing in the record [1][3].\n").unwrap();
        assert_eq!((t.answer.as_str(), t.cited.clone()), ("Not documented", vec![1, 3]));
        let t = parse_two_line("Answer: Yes. Reasoning: Listed on 2022-06-12 [1].").unwrap();
        assert_eq!(
            (t.answer.as_str(), t.reasoning.as_str(), t.cited.clone()),
            ("Yes.", "Listed on 2022-06-12 [1].", vec![1])
        );
    }

    #[test]
    fn malformed_answers_say_what_is_wrong() {
        assert!(parse_two_line("Yes, the patient takes it.").unwrap_err().0.contains("Answer:"));
        assert!(parse_two_line("Answer: Yes").unwrap_err().0.contains("Reasoning:"));
        assert!(parse_two_line("Reasoning: x [1]\nAnswer: Yes").unwrap_err().0.contains("before"));
        assert!(parse_two_line("Answer:\nReasoning: x").unwrap_err().0.contains("empty"));
    }

    #[test]
    fn brackets_that_are_not_citations_are_ignored() {
        assert_eq!(citation_numbers("dose [mg] on day [1] and [x, 2]"), vec![1]);
    }

    #[test]
    fn normalisation() {
        assert_eq!(normalise_answer("  **Not  documented**. "), "not documented");
    }
}
