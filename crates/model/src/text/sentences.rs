//! Sentence splitting that survives clinical text.
//!
//! The splitter works in two passes. First it groups lines into blocks: a
//! blank line, a heading line, a list item or a line that ends without
//! punctuation ends a block, except that a line whose successor starts with a
//! lower-case letter (or that ends in a comma) is a wrapped line and
//! continues. Then it splits each block after `.`, `!` or `?` when the next
//! word starts a new sentence, skipping abbreviations ("b.i.d.", "Dr.",
//! "e.g."), initials, list numbers and decimals ("1.5 cm" never has a space
//! after its dot). Vital-sign lines ("BP 120/80, HR 72, T 98.6 F") hold no
//! sentence end, so they stay whole.

use crate::SentenceSpan;

/// Abbreviations (lower-cased, with their final dot) after which a dot does
/// not end a sentence even before a capital letter.
const ABBREVIATIONS: &[&str] = &[
    "dr.", "mr.", "mrs.", "ms.", "prof.", "sr.", "jr.", "st.", "no.", "nr.", "vs.", "v.", "e.g.", "i.e.", "eg.", "ie.",
    "cf.", "approx.", "appt.", "apt.", "dept.", "est.", "fig.", "inc.", "min.", "max.", "mg.", "ml.", "temp.", "wt.",
    "ht.", "pt.", "pts.", "hx.", "dx.", "tx.", "rx.", "sx.", "fx.", "yo.", "y.o.", "b.i.d.", "t.i.d.", "q.i.d.",
    "q.d.", "q.o.d.", "q.h.", "q.h.s.", "h.s.", "p.o.", "p.r.n.", "prn.", "a.m.", "p.m.", "i.v.", "i.m.", "s.c.",
    "s.l.", "p.r.", "o.d.", "o.s.", "o.u.", "a.c.", "p.c.", "mon.", "tue.", "wed.", "thu.", "fri.", "sat.", "sun.",
    "jan.", "feb.", "mar.", "apr.", "jun.", "jul.", "aug.", "sep.", "sept.", "oct.", "nov.", "dec.", "ca.", "z.b.",
    "bzw.", "ggf.", "evtl.", "sog.", "u.a.", "d.h.", "re.", "resp.", "ref.", "vol.", "dose.", "hr.", "hrs.", "wk.",
    "wks.", "mo.", "mos.", "yr.", "yrs.", "sec.", "lt.", "rt.", "bilat.", "neg.", "pos.", "abd.",
];

/// Splits `text` into sentences, as byte spans in document order.
///
/// Every span is trimmed of surrounding whitespace, is never empty, starts
/// and ends on character boundaries, and spans never overlap.
pub fn split_sentences(text: &str) -> Vec<SentenceSpan> {
    let mut out = Vec::new();
    for (start, end) in blocks(text) {
        split_block(text, start, end, &mut out);
    }
    out
}

/// A line of the text: byte range without its line terminator.
#[derive(Clone, Copy)]
struct Line {
    start: usize,
    end: usize,
}

fn lines(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            out.push(Line { start, end: i });
            start = i + 1;
        }
    }
    out.push(Line { start, end: text.len() });
    out
}

/// Groups lines into blocks that may hold several sentences but never share
/// one with another block. Returned ranges are trimmed and non-empty.
fn blocks(text: &str) -> Vec<(usize, usize)> {
    let lines = lines(text);
    let mut out = Vec::new();
    let mut current: Option<(usize, usize)> = None;
    for (i, line) in lines.iter().enumerate() {
        let content = text[line.start..line.end].trim();
        if content.is_empty() {
            if let Some(block) = current.take() {
                out.push(block);
            }
            continue;
        }
        let lead = text[line.start..line.end].len() - text[line.start..line.end].trim_start().len();
        let start = line.start + lead;
        let end = start + content.len();
        // A list item or heading always starts its own block.
        if is_list_item(content) || is_heading_line(content) {
            if let Some(block) = current.take() {
                out.push(block);
            }
        }
        current = Some(match current {
            Some((s, _)) => (s, end),
            None => (start, end),
        });
        let next = lines.get(i + 1).map(|l| text[l.start..l.end].trim()).unwrap_or("");
        if !continues_on_next_line(content, next) {
            if let Some(block) = current.take() {
                out.push(block);
            }
        }
    }
    if let Some(block) = current.take() {
        out.push(block);
    }
    out
}

/// Whether a line without a blank line after it runs on into the next line
/// (a wrapped sentence) rather than ending there.
fn continues_on_next_line(line: &str, next: &str) -> bool {
    if next.is_empty() || is_heading_line(line) || is_list_item(next) || is_heading_line(next) {
        return false;
    }
    let last = line.chars().next_back().unwrap_or(' ');
    if matches!(last, ',' | '(' | '&' | '/') {
        return true;
    }
    let first_next = next.chars().next().unwrap_or(' ');
    // A wrapped line continues in lower case; sentence-final punctuation
    // then still splits inside the block.
    first_next.is_lowercase()
}

/// A markdown heading, a short line ending in a colon, or a short all-caps
/// line: these stand alone as a sentence.
pub(crate) fn is_heading_line(line: &str) -> bool {
    let line = line.trim();
    let words = line.split_whitespace().count();
    if line.starts_with('#') {
        // "## Plan", not a MIMIC problem-list line such as
        // "# Ascites: s/p paracentesis (3L removed)."
        let rest = line.trim_start_matches('#');
        return line.len() - rest.len() <= 6
            && (rest.is_empty() || rest.starts_with(' '))
            && words <= 10
            && !rest.trim_end().ends_with(['.', '!', '?']);
    }
    if words == 0 || words > 8 {
        return false;
    }
    if let Some(body) = line.strip_suffix(':') {
        // "Assessment and Plan:", "Chief complaint:", "HPI:"; not a
        // sentence that leads into a list ("The following procedures were
        // conducted:").
        return body.chars().next().is_some_and(|c| c.is_uppercase())
            && !body.contains(['.', ':', ';', '!', '?'])
            && (words <= 4 || is_title_case(body));
    }
    is_all_caps_title(line)
}

/// Every word capitalised except short connectives ("Major Surgical or
/// Invasive Procedure").
fn is_title_case(s: &str) -> bool {
    const CONNECTIVES: &[&str] = &["and", "or", "of", "on", "in", "at", "to", "for", "the", "with", "/", "&", "-"];
    s.split_whitespace()
        .all(|w| w.chars().next().is_some_and(|c| c.is_uppercase() || c.is_ascii_digit()) || CONNECTIVES.contains(&w))
}

/// An all-caps line of words ("PHYSICAL EXAMINATION"), not a vital-sign or
/// lab line ("BP 120/80"), which holds digits.
pub(crate) fn is_all_caps_title(line: &str) -> bool {
    let letters = line.chars().filter(|c| c.is_alphabetic()).count();
    letters >= 3
        && !line.chars().any(|c| c.is_ascii_digit())
        && line.chars().all(|c| !c.is_lowercase())
        && line.chars().all(|c| c.is_alphabetic() || " &/-,()'".contains(c))
}

/// A bulleted or numbered list item: "- x", "* x", "• x", "1. x", "2) x",
/// "(3) x", "a) x".
pub(crate) fn is_list_item(line: &str) -> bool {
    list_marker_len(line).is_some()
}

/// Byte length of the list marker at the start of `line`, including the
/// space after it.
fn list_marker_len(line: &str) -> Option<usize> {
    let mut chars = line.char_indices();
    let (_, first) = chars.next()?;
    let followed_by_space = |i: usize| line[i..].starts_with([' ', '\t']);
    if matches!(first, '-' | '*' | '•' | '–' | '+' | '·' | '▪' | '◦') {
        let i = first.len_utf8();
        return followed_by_space(i).then_some(i + 1);
    }
    let (open, body_start) = if first == '(' { (true, 1) } else { (false, 0) };
    let rest = &line[body_start..];
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let marker = if (1..=3).contains(&digits) {
        digits
    } else if rest.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) && rest[1..].starts_with(')') {
        1
    } else {
        return None;
    };
    let close = rest[marker..].chars().next()?;
    let ok = if open { close == ')' } else { close == '.' || close == ')' };
    if !ok {
        return None;
    }
    let i = body_start + marker + 1;
    followed_by_space(i).then_some(i + 1)
}

/// Splits one block (`text[start..end]`, trimmed) into sentences.
fn split_block(text: &str, start: usize, end: usize, out: &mut Vec<SentenceSpan>) {
    let block = &text[start..end];
    let marker = list_marker_len(block).unwrap_or(0);
    let mut sentence_start = 0;
    let bytes = block.as_bytes();
    let mut i = marker;
    while i < bytes.len() {
        let b = bytes[i];
        if matches!(b, b'.' | b'!' | b'?') {
            // Take the whole run of terminators and closing marks: "?!", '."', ".)".
            let mut j = i + 1;
            while j < bytes.len() && matches!(bytes[j], b'.' | b'!' | b'?' | b'"' | b'\'' | b')' | b']') {
                j += 1;
            }
            if j < bytes.len() && bytes[j].is_ascii_whitespace() && ends_sentence(block, sentence_start, i, j) {
                push_trimmed(text, start + sentence_start, start + j, out);
                sentence_start = j;
            }
            i = j;
        } else {
            i += 1;
        }
    }
    push_trimmed(text, start + sentence_start, start + block.len(), out);
}

/// Whether the terminator run `block[dot..after]` ends the sentence that
/// began at `sentence_start`.
fn ends_sentence(block: &str, sentence_start: usize, dot: usize, after: usize) -> bool {
    let next_word = block[after..].trim_start();
    let Some(next) = next_word.chars().next() else {
        return true;
    };
    if block.as_bytes()[dot] != b'.' || block[dot..after].contains(['!', '?']) {
        // "?" and "!" end a sentence unless a lower-case word follows ("Why? because").
        return !next.is_lowercase();
    }
    // A dot before a lower-case word is an abbreviation we do not know.
    if !(next.is_uppercase() || next.is_ascii_digit() || "\"'([-•*#".contains(next)) {
        return false;
    }
    // The token that ends in this dot.
    let token_start = block[sentence_start..dot]
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace() || *c == '(')
        .map(|(p, c)| sentence_start + p + c.len_utf8())
        .unwrap_or(sentence_start);
    let token = &block[token_start..=dot];
    let lower = token.to_lowercase();
    if ABBREVIATIONS.contains(&lower.as_str()) {
        return false;
    }
    let word = &token[..token.len() - 1];
    // An initial ("J. Smith") or a dotted abbreviation ("U.S.", "q.4h.").
    let letters: Vec<char> = word.chars().collect();
    if letters.len() == 1 && letters[0].is_uppercase() {
        return false;
    }
    if word.contains('.') && word.split('.').all(|p| p.chars().count() <= 3 && !p.is_empty()) {
        return false;
    }
    // A list number at the start of the sentence ("1. Aspirin").
    if token_start == sentence_start && !word.is_empty() && word.len() <= 3 && word.bytes().all(|b| b.is_ascii_digit())
    {
        return false;
    }
    true
}

fn push_trimmed(text: &str, start: usize, end: usize, out: &mut Vec<SentenceSpan>) {
    let piece = &text[start..end];
    let trimmed = piece.trim();
    if trimmed.is_empty() {
        return;
    }
    let lead = piece.len() - piece.trim_start().len();
    let s = start + lead;
    out.push(SentenceSpan { start: s, end: s + trimmed.len() });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(input: &str, expected: &[&str]) {
        let got: Vec<&str> = split_sentences(input).iter().map(|s| &input[s.start..s.end]).collect();
        assert_eq!(got, expected, "input: {input:?}");
    }

    #[test]
    fn plain_sentences() {
        check("He is well. She is not.", &["He is well.", "She is not."]);
        check("Is it bad? Yes! Very.", &["Is it bad?", "Yes!", "Very."]);
        check("", &[]);
        check("   \n\n  ", &[]);
        check("no punctuation at all", &["no punctuation at all"]);
        check("  padded.  ", &["padded."]);
    }

    #[test]
    fn dosing_abbreviations_do_not_split() {
        check(
            "Metoprolol 25 mg p.o. b.i.d. Continue aspirin 81 mg q.d. Return in 2 weeks.",
            &["Metoprolol 25 mg p.o. b.i.d. Continue aspirin 81 mg q.d. Return in 2 weeks."],
        );
        check("Take t.i.d. with food. Then stop.", &["Take t.i.d. with food.", "Then stop."]);
    }

    #[test]
    fn title_and_latin_abbreviations_do_not_split() {
        check("Seen by Dr. Smith today. Stable.", &["Seen by Dr. Smith today.", "Stable."]);
        check("Mr. Jones and Mrs. Jones came.", &["Mr. Jones and Mrs. Jones came."]);
        check("Drugs, e.g. Aspirin, i.e. ASA. Next.", &["Drugs, e.g. Aspirin, i.e. ASA.", "Next."]);
        check("Lives on Main St. Boston.", &["Lives on Main St. Boston."]);
        check("Case No. 5 reviewed. Done.", &["Case No. 5 reviewed.", "Done."]);
        check("Surgery vs. Chemo was discussed.", &["Surgery vs. Chemo was discussed."]);
        check("Mass approx. 3 cm. Biopsy planned.", &["Mass approx. 3 cm.", "Biopsy planned."]);
        check("Signed J. Smith MD.", &["Signed J. Smith MD."]);
    }

    #[test]
    fn decimals_do_not_split() {
        check("Lesion of 1.5 cm. Cr 1.2 today.", &["Lesion of 1.5 cm.", "Cr 1.2 today."]);
        check("Hb was 9.8 g/dL.", &["Hb was 9.8 g/dL."]);
    }

    #[test]
    fn vital_sign_lines_stay_whole() {
        check("BP 120/80, HR 72, T 98.6 F", &["BP 120/80, HR 72, T 98.6 F"]);
        check(
            "Vitals: BP 120/80, HR 72, RR 16, T 98.6 F, SpO2 98% RA. Exam normal.",
            &["Vitals: BP 120/80, HR 72, RR 16, T 98.6 F, SpO2 98% RA.", "Exam normal."],
        );
    }

    #[test]
    fn list_items_are_sentences() {
        check("- Cough\n- Fever\n- Chills", &["- Cough", "- Fever", "- Chills"]);
        check("1. Aspirin 81 mg\n2. Lisinopril 10 mg", &["1. Aspirin 81 mg", "2. Lisinopril 10 mg"]);
        check("1) one\n2) two", &["1) one", "2) two"]);
        check("• bullet one\n• bullet two", &["• bullet one", "• bullet two"]);
        check(
            "Plan:\n1. Start metformin. Recheck A1c.\n2. Diet",
            &["Plan:", "1. Start metformin.", "Recheck A1c.", "2. Diet"],
        );
    }

    #[test]
    fn lines_without_punctuation_end_sentences() {
        check("# Chief Complaint\n- Cough", &["# Chief Complaint", "- Cough"]);
        check("HISTORY OF PRESENT ILLNESS:\nPatient is well.", &["HISTORY OF PRESENT ILLNESS:", "Patient is well."]);
        check("Chest X-ray\nNo acute process", &["Chest X-ray", "No acute process"]);
        check("# Medications\nacetaminophen 325 mg", &["# Medications", "acetaminophen 325 mg"]);
    }

    #[test]
    fn wrapped_lines_continue() {
        check(
            "Sumiko254 Larue605\n is a 60 year-old female. Has cough.",
            &["Sumiko254 Larue605\n is a 60 year-old female.", "Has cough."],
        );
        check("The patient was seen in the\nclinic today.", &["The patient was seen in the\nclinic today."]);
        check("Risks include bleeding,\nInfection and pain.", &["Risks include bleeding,\nInfection and pain."]);
    }

    #[test]
    fn blank_lines_separate() {
        check("First part\n\nSecond part", &["First part", "Second part"]);
        check("Ends here.\r\n\r\nNext one.", &["Ends here.", "Next one."]);
    }

    #[test]
    fn closing_quotes_and_parens_stay_with_their_sentence() {
        check("He said \"stop.\" Then left.", &["He said \"stop.\"", "Then left."]);
        check("(See above.) Then plan.", &["(See above.)", "Then plan."]);
    }

    #[test]
    fn non_ascii_text() {
        check("Kreatinin 1,2 mg/dl. Hämoglobin erniedrigt.", &["Kreatinin 1,2 mg/dl.", "Hämoglobin erniedrigt."]);
        check("Ödem z.B. Beine. Ende.", &["Ödem z.B. Beine.", "Ende."]);
        check("!\u{2028}. A", &["!\u{2028}.", "A"]);
    }

    #[test]
    fn heading_detection() {
        assert!(is_heading_line("Assessment and Plan:"));
        assert!(is_heading_line("## Medications"));
        assert!(is_heading_line("PHYSICAL EXAMINATION"));
        assert!(!is_heading_line("BP 120/80, HR 72"));
        assert!(!is_heading_line("#hashtag"));
        assert!(!is_heading_line("# Ascites: s/p paracentesis (3L removed)."));
        assert!(!is_heading_line("He said: hi."));
        assert!(is_heading_line("Major Surgical or Invasive Procedure:"));
        assert!(is_heading_line("Chief complaint:"));
        assert!(!is_heading_line("The following procedures were conducted:"));
    }
}
