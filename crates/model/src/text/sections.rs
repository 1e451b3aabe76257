//! Sectioning at headings, then the myeloma pipeline's post-processing:
//! sections under 50 words merge into a neighbour, sections over 350 words
//! split into overlapping 50-word-overlap chunks.
//!
//! Headings are markdown headings ("## Plan", as in Synthea notes), short
//! lines ending in a colon ("Chief Complaint:", "Brief Hospital Course:", as
//! in MIMIC-IV discharge summaries), short all-caps lines ("PHYSICAL EXAM")
//! and known clinical headings or all-caps labels followed by text on the
//! same line ("HPI: 64 yo man ...", "Impression: no acute process").

use crate::text::sentences::{is_all_caps_title, is_heading_line};
use crate::SectionSpan;

/// Sections with fewer words merge into a neighbour.
pub const MIN_SECTION_WORDS: usize = 50;
/// Sections with more words are split into overlapping chunks.
pub const MAX_SECTION_WORDS: usize = 350;
/// Words shared by consecutive chunks of one long section.
pub const CHUNK_OVERLAP_WORDS: usize = 50;

/// Headings recognised when text follows the colon on the same line
/// (lower-cased). Standalone heading lines need not be listed.
const INLINE_HEADINGS: &[&str] = &[
    "chief complaint",
    "cc",
    "history of present illness",
    "hpi",
    "history",
    "past medical history",
    "pmh",
    "past surgical history",
    "psh",
    "social history",
    "family history",
    "allergies",
    "medications",
    "medications on admission",
    "discharge medications",
    "home medications",
    "review of systems",
    "ros",
    "physical exam",
    "physical examination",
    "exam",
    "pertinent results",
    "labs",
    "laboratory",
    "laboratory data",
    "imaging",
    "brief hospital course",
    "hospital course",
    "assessment",
    "plan",
    "assessment and plan",
    "a/p",
    "impression",
    "findings",
    "indication",
    "technique",
    "comparison",
    "conclusion",
    "recommendations",
    "diagnosis",
    "diagnoses",
    "discharge diagnosis",
    "discharge condition",
    "discharge disposition",
    "discharge instructions",
    "followup instructions",
    "follow-up",
    "major surgical or invasive procedure",
    "procedure",
    "procedures",
    "clinical history",
    "reason for exam",
    "final diagnosis",
    "microscopic description",
    "gross description",
    "specimen",
    "anamnese",
    "befund",
    "beurteilung",
    "diagnose",
    "therapie",
    "procedere",
    "epikrise",
    "medikation",
    "verlauf",
];

/// Splits a document into sections. Spans are byte offsets into `text`,
/// cover every non-blank part of the text, and never cut a UTF-8 character.
///
/// Each span is trimmed of surrounding whitespace. Sections follow one
/// another in document order; only the chunks of one long section overlap.
/// A section's heading is the heading its span starts under (for a merged
/// section whose first part has no heading, the next part's heading).
pub fn split_sections(text: &str) -> Vec<SectionSpan> {
    let mut raw = raw_sections(text);
    merge_short(text, &mut raw);
    let mut out = Vec::new();
    for section in raw {
        split_long(text, section, &mut out);
    }
    out
}

/// A section before chunking: a trimmed byte range and its heading.
#[derive(Debug, Clone)]
struct Raw {
    heading: Option<String>,
    start: usize,
    end: usize,
    words: usize,
}

/// Cuts the text at heading lines. The heading line belongs to the section
/// it opens; text before the first heading forms a section without one.
fn raw_sections(text: &str) -> Vec<Raw> {
    let mut cuts: Vec<(usize, Option<String>)> = vec![(0, None)];
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        if let Some(heading) = heading_of(line) {
            if line_start == 0 {
                cuts[0].1 = Some(heading);
            } else {
                cuts.push((line_start, Some(heading)));
            }
        }
        line_start += line.len();
    }
    let mut out = Vec::new();
    for (i, (start, heading)) in cuts.iter().enumerate() {
        let end = cuts.get(i + 1).map(|c| c.0).unwrap_or(text.len());
        if let Some((s, e)) = trim_range(text, *start, end) {
            out.push(Raw { heading: heading.clone(), start: s, end: e, words: text[s..e].split_whitespace().count() });
        }
    }
    out
}

/// The heading a line opens, cleaned of markdown marks and the colon, or
/// `None` when the line is not a heading.
fn heading_of(line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    if is_heading_line(line) {
        let cleaned = line.trim_start_matches('#').trim().trim_end_matches(':').trim();
        return (!cleaned.is_empty()).then(|| cleaned.to_string());
    }
    // "HEADING: text" on one line.
    let (label, rest) = line.split_once(':')?;
    let label = label.trim();
    if rest.trim().is_empty() || label.is_empty() || label.split_whitespace().count() > 6 {
        return None;
    }
    let known = INLINE_HEADINGS.contains(&label.to_lowercase().as_str());
    let caps = is_all_caps_title(label) && label.chars().filter(|c| c.is_alphabetic()).count() >= 3;
    (known || caps).then(|| label.to_string())
}

fn trim_range(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let piece = &text[start..end];
    let trimmed = piece.trim();
    if trimmed.is_empty() {
        return None;
    }
    let s = start + (piece.len() - piece.trim_start().len());
    Some((s, s + trimmed.len()))
}

/// Repeatedly merges the shortest section under the minimum into the
/// shorter of its neighbours (the previous one on a tie), until every
/// section has enough words or only one is left.
fn merge_short(text: &str, sections: &mut Vec<Raw>) {
    while sections.len() > 1 {
        let Some((i, _)) =
            sections.iter().enumerate().filter(|(_, s)| s.words < MIN_SECTION_WORDS).min_by_key(|(i, s)| (s.words, *i))
        else {
            break;
        };
        let with_previous = match (i.checked_sub(1), sections.get(i + 1)) {
            (Some(p), Some(next)) => sections[p].words <= next.words,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let (first, second) = if with_previous { (i - 1, i) } else { (i, i + 1) };
        let b = sections.remove(second);
        let a = &mut sections[first];
        a.heading = a.heading.take().or(b.heading);
        a.end = b.end;
        a.words = text[a.start..a.end].split_whitespace().count();
    }
}

/// Emits a section as is, or as overlapping chunks of at most
/// `MAX_SECTION_WORDS` words sharing `CHUNK_OVERLAP_WORDS` words, spread
/// evenly so the last chunk is not a sliver.
fn split_long(text: &str, section: Raw, out: &mut Vec<SectionSpan>) {
    if section.words <= MAX_SECTION_WORDS {
        out.push(SectionSpan { heading: section.heading, start: section.start, end: section.end });
        return;
    }
    let words = word_ranges(text, section.start, section.end);
    let n = words.len();
    let stride_total = n - CHUNK_OVERLAP_WORDS;
    let step = MAX_SECTION_WORDS - CHUNK_OVERLAP_WORDS;
    let chunks = stride_total.div_ceil(step);
    for k in 0..chunks {
        let first = k * stride_total / chunks;
        let last = ((k + 1) * stride_total / chunks + CHUNK_OVERLAP_WORDS).min(n) - 1;
        out.push(SectionSpan { heading: section.heading.clone(), start: words[first].0, end: words[last].1 });
    }
}

/// Byte ranges of the whitespace-separated words in `text[start..end]`.
fn word_ranges(text: &str, start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut word_start: Option<usize> = None;
    for (i, c) in text[start..end].char_indices() {
        let at = start + i;
        match (c.is_whitespace(), word_start) {
            (true, Some(s)) => {
                out.push((s, at));
                word_start = None;
            }
            (false, None) => word_start = Some(at),
            _ => {}
        }
    }
    if let Some(s) = word_start {
        out.push((s, end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(n: usize, tag: &str) -> String {
        (0..n).map(|i| format!("{tag}{i}")).collect::<Vec<_>>().join(" ")
    }

    /// (heading, word count) of each section.
    #[track_caller]
    fn check(text: &str, expected: &[(Option<&str>, usize)]) {
        let spans = split_sections(text);
        let got: Vec<(Option<&str>, usize)> =
            spans.iter().map(|s| (s.heading.as_deref(), text[s.start..s.end].split_whitespace().count())).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn headings_split_sections() {
        let text = format!(
            "HISTORY OF PRESENT ILLNESS:\n{}\n\nAssessment and Plan:\n{}\n\n## Medications\n{}\n",
            words(60, "h"),
            words(70, "a"),
            words(80, "m")
        );
        check(
            &text,
            &[(Some("HISTORY OF PRESENT ILLNESS"), 64), (Some("Assessment and Plan"), 73), (Some("Medications"), 82)],
        );
    }

    #[test]
    fn all_caps_and_inline_headings() {
        let text = format!("PHYSICAL EXAM\n{}\nIMPRESSION: {}\n", words(55, "p"), words(60, "i"));
        check(&text, &[(Some("PHYSICAL EXAM"), 57), (Some("IMPRESSION"), 61)]);
        let text = format!("Chief Complaint: {}\nBrief Hospital Course:\n{}", words(60, "c"), words(60, "b"));
        check(&text, &[(Some("Chief Complaint"), 62), (Some("Brief Hospital Course"), 63)]);
    }

    #[test]
    fn short_sections_merge_into_the_shorter_neighbour() {
        // The 5-word middle section joins the 60-word first one (shorter than 90).
        let text = format!("# A\n{}\n# B\n{}\n# C\n{}", words(60, "a"), words(5, "b"), words(90, "c"));
        check(&text, &[(Some("A"), 69), (Some("C"), 92)]);
        // A short first section merges forward and keeps its own heading.
        let text = format!("# A\n{}\n# B\n{}", words(3, "a"), words(60, "b"));
        check(&text, &[(Some("A"), 67)]);
        // Text before the first heading takes the next heading.
        let text = format!("2020-01-01\n# Chief Complaint\n{}", words(60, "c"));
        check(&text, &[(Some("Chief Complaint"), 64)]);
    }

    #[test]
    fn mimic_discharge_summary_headings() {
        let text = format!(
            "Service: MEDICINE\n\nAllergies: \nNo Known Allergies\n\nChief Complaint:\nabd pain\n\n\
             History of Present Illness:\n{}\n# Ascites: s/p paracentesis (3L removed).\n{}\n\n\
             Brief Hospital Course:\n{}\n\nDischarge Medications:\n1. Furosemide 20 mg PO DAILY\n",
            words(60, "h"),
            words(10, "x"),
            words(70, "b")
        );
        // Service and Allergies merge forward into Chief Complaint, which is
        // itself short and joins the HPI; the problem-list line is no heading;
        // the short medication list joins the hospital course.
        check(&text, &[(Some("Allergies"), 90), (Some("Brief Hospital Course"), 81)]);
    }

    #[test]
    fn short_document_is_one_section() {
        check("Just a short note.", &[(None, 4)]);
        check("", &[]);
        check(" \n\n\t", &[]);
    }

    #[test]
    fn long_sections_split_with_overlap() {
        let text = words(1000, "w");
        let spans = split_sections(&text);
        // (1000 - 50) / 300 rounds up to 4 chunks.
        assert_eq!(spans.len(), 4);
        let chunk_words: Vec<Vec<&str>> =
            spans.iter().map(|s| text[s.start..s.end].split_whitespace().collect()).collect();
        for chunk in &chunk_words {
            assert!(chunk.len() <= MAX_SECTION_WORDS && chunk.len() >= MIN_SECTION_WORDS, "{}", chunk.len());
        }
        for pair in chunk_words.windows(2) {
            let overlap = &pair[0][pair[0].len() - CHUNK_OVERLAP_WORDS..];
            assert_eq!(overlap, &pair[1][..CHUNK_OVERLAP_WORDS]);
        }
        assert_eq!(chunk_words[0][0], "w0");
        assert_eq!(*chunk_words[3].last().unwrap(), "w999");
        assert!(spans.iter().all(|s| s.heading.is_none()));
    }

    #[test]
    fn boundary_word_counts() {
        check(&words(350, "w"), &[(None, 350)]);
        check(&words(351, "w"), &[(None, 200), (None, 201)]);
    }

    #[test]
    fn spans_are_trimmed_and_cover_non_blank_text() {
        let text = format!("\n\n  # Head\n\n{}  \n\n", words(60, "é"));
        let spans = split_sections(&text);
        assert_eq!(spans.len(), 1);
        assert_eq!(&text[spans[0].start..spans[0].end], text.trim());
    }
}
