//! Properties of sentence and section spans on arbitrary text (proptest) and
//! on every Synthea clinical note in `../shared/data` (which must exist):
//! spans in order, non-overlapping (sentences), on character boundaries,
//! trimmed and non-empty, and sections covering all non-blank text within
//! the 50/350-word limits.

use evident_model::text::{html_to_text, split_sections, split_sentences};
use proptest::prelude::*;

#[track_caller]
fn check_sentence_spans(text: &str) {
    let spans = split_sentences(text);
    let mut previous_end = 0;
    for span in &spans {
        assert!(span.start < span.end, "empty span {span:?} in {text:?}");
        assert!(span.start >= previous_end, "span {span:?} overlaps or is out of order in {text:?}");
        assert!(
            text.is_char_boundary(span.start) && text.is_char_boundary(span.end),
            "{span:?} cuts a char in {text:?}"
        );
        let piece = &text[span.start..span.end];
        assert_eq!(piece, piece.trim(), "span {span:?} not trimmed in {text:?}");
        previous_end = span.end;
    }
    // Every non-whitespace character is inside some sentence.
    let covered: usize =
        spans.iter().map(|s| text[s.start..s.end].chars().filter(|c| !c.is_whitespace()).count()).sum();
    assert_eq!(covered, text.chars().filter(|c| !c.is_whitespace()).count(), "sentences lose text in {text:?}");
}

#[track_caller]
fn check_section_spans(text: &str) {
    let spans = split_sections(text);
    let mut covered = vec![false; text.len()];
    let mut previous_start = 0;
    for span in &spans {
        assert!(span.start < span.end, "empty section {span:?}");
        assert!(span.start >= previous_start, "sections out of order");
        assert!(text.is_char_boundary(span.start) && text.is_char_boundary(span.end), "{span:?} cuts a char");
        let piece = &text[span.start..span.end];
        assert_eq!(piece, piece.trim(), "section {span:?} not trimmed");
        let words = piece.split_whitespace().count();
        assert!(words <= 350, "section of {words} words");
        if spans.len() > 1 {
            assert!(words >= 50, "section of {words} words beside others");
        }
        covered[span.start..span.end].iter_mut().for_each(|c| *c = true);
        previous_start = span.start;
    }
    for (i, c) in text.char_indices() {
        assert!(c.is_whitespace() || covered[i], "byte {i} ({c:?}) is in no section");
    }
}

fn clinical_text() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "Dr.",
        "b.i.d.",
        "q.d.",
        "1.5 cm",
        "Cr 1.2",
        "BP 120/80, HR 72",
        "HISTORY:",
        "## Plan",
        "- item",
        "1.",
        "2)",
        "e.g.",
        "Hämoglobin",
        "ß",
        "😀",
        "\n",
        "\n\n",
        " ",
        ".",
        "?",
        "!",
        "\"",
        ")",
        "(",
        "word",
        "Word",
        "ALL CAPS",
        "Assessment and Plan:",
        "\t",
        "\r\n",
        "•",
        "z.B.",
        "…",
    ]);
    prop::collection::vec(
        prop_oneof![pieces.prop_map(str::to_string), "[a-zA-Z0-9 .,:;!?\n-]{0,12}", any::<String>()],
        0..80,
    )
    .prop_map(|parts| parts.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn sentence_spans_hold_on_arbitrary_text(text in any::<String>()) {
        check_sentence_spans(&text);
    }

    #[test]
    fn sentence_spans_hold_on_clinical_like_text(text in clinical_text()) {
        check_sentence_spans(&text);
    }

    #[test]
    fn section_spans_hold_on_clinical_like_text(text in clinical_text(), repeat in 1usize..40) {
        check_section_spans(&text.repeat(repeat));
    }

    #[test]
    fn section_spans_hold_on_arbitrary_text(text in any::<String>()) {
        check_section_spans(&text);
    }

    #[test]
    fn html_to_text_never_panics_and_has_no_tags_left(html in "(<[a-z/!]{0,6}[^<>]{0,8}>|&[a-z#0-9]{0,6};?|[^<&]{0,10})*") {
        let text = html_to_text(&html);
        prop_assert!(!text.contains("<p>") && !text.contains("<br>"), "{text:?}");
    }
}

/// The text of every note in the shared Synthea sample, in file order.
fn synthea_notes() -> Vec<String> {
    evident_testdata::synthea_sample_notes().into_iter().map(|note| note.text).collect()
}

#[test]
fn spans_hold_on_every_synthea_note() {
    let notes = synthea_notes();
    assert_eq!(notes.len(), 1215);
    let (mut sentences, mut sections, mut headed) = (0, 0, 0);
    for note in &notes {
        check_sentence_spans(note);
        check_section_spans(note);
        sentences += split_sentences(note).len();
        let spans = split_sections(note);
        sections += spans.len();
        headed += spans.iter().filter(|s| s.heading.is_some()).count();
    }
    println!("Synthea: {} notes, {sentences} sentences, {sections} sections ({headed} with a heading)", notes.len());
    assert_eq!(headed, sections, "every Synthea section starts under a markdown heading");
}

#[test]
fn synthea_note_sentences_look_right() {
    let notes = synthea_notes();
    let note = &notes[0];
    let sentences: Vec<&str> = split_sentences(note).iter().map(|s| &note[s.start..s.end]).collect();
    assert_eq!(&sentences[..4], &["1987-11-19", "# Chief Complaint", "- Cough", "# History of Present Illness"]);
    // The name line wraps into the sentence it starts.
    assert!(sentences[4].starts_with("Sumiko254 Larue605\n is a 60 year-old"), "{:?}", sentences[4]);
    assert!(sentences.contains(&"Patient is married."));
    assert!(sentences.contains(&"- hearing examination (procedure)"));
    assert!(sentences.contains(&"The following procedures were conducted:"));
}
