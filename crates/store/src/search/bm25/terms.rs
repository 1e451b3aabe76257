//! The terms FTS5's `porter unicode61` tokenizer indexes, computed in
//! Rust: a port for ASCII text (tokens are runs of ASCII letters and
//! digits, lower-cased, then stemmed by the porter rules exactly as
//! `fts5_porter.c` applies them; tokens shorter than 3 or longer than 64
//! bytes pass through unstemmed), with anything else left to FTS5 itself
//! ([`Store::fts5_terms`]). Also the query side: a query's words as the
//! phrases FTS5 would search for.

use crate::search::fts5::query_words;
use crate::{Result, Store};

impl Store {
    /// The query as FTS5 phrases: one per word of the FTS5 query
    /// (`fts_query`), each the list of terms FTS5 would search for. Words
    /// that yield no term are dropped (in FTS5 they match nothing and add
    /// nothing to any score).
    pub(crate) fn query_phrases(&self, query: &str) -> Result<Vec<Vec<String>>> {
        let mut phrases = Vec::new();
        for word in query_words(query) {
            if word.is_ascii() {
                // An ASCII word of letters and digits is exactly one token.
                phrases.push(vec![stem_string(word.as_bytes())]);
            } else {
                let mut columns = self.fts5_terms(&[[word.as_str(), ""]])?;
                let terms = std::mem::take(&mut columns[0][0]);
                if !terms.is_empty() {
                    phrases.push(terms);
                }
            }
        }
        Ok(phrases)
    }

    /// The terms FTS5 indexes for `text`, in order: lower-cased, diacritics
    /// removed, porter-stemmed, exactly as the `sections_fts` index holds
    /// them. ASCII text is tokenized in Rust; anything else by FTS5 itself.
    pub fn index_terms(&self, text: &str) -> Result<Vec<String>> {
        if text.is_ascii() {
            return Ok(ascii_terms(text.as_bytes()));
        }
        let mut columns = self.fts5_terms(&[[text, ""]])?;
        Ok(std::mem::take(&mut columns[0][0]))
    }
}

const MAX_STEMMED: usize = 64;

/// A stem differs from its token in at most this many trailing bytes,
/// and never in the first, and is never longer: every porter rule
/// rewrites a suffix, keeps a non-empty stem and does not lengthen the
/// word, and the rewrites that survive the later steps add at most 2
/// bytes past the part shared with the token ("ability" -> "able":
/// "ab" + "le"; "studying" -> "studi"). Tested on every token of the
/// Synthea notes.
pub(crate) const CHANGED_TAIL: usize = 2;

/// How many tokens the ASCII `text` holds: runs of letters and digits.
pub(crate) fn count_tokens(text: &[u8]) -> u32 {
    let mut n = 0;
    let mut previous = false;
    for &b in text {
        let alnum = b.is_ascii_alphanumeric();
        n += u32::from(alnum & !previous);
        previous = alnum;
    }
    n
}

pub(crate) fn ascii_terms(text: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut stem_buf = Vec::new();
    for raw in text.split(|b| !b.is_ascii_alphanumeric()).filter(|t| !t.is_empty()) {
        let token: Vec<u8> = raw.iter().map(u8::to_ascii_lowercase).collect();
        stem(&token, &mut stem_buf);
        out.push(String::from_utf8(stem_buf.clone()).expect("ASCII"));
    }
    out
}

/// The stem of one lower-cased ASCII token as a string.
pub(crate) fn stem_string(token: &[u8]) -> String {
    let mut out = Vec::new();
    stem(token, &mut out);
    String::from_utf8(out).expect("stems of ASCII tokens are ASCII")
}

fn is_vowel(c: u8, y_is_vowel: bool) -> bool {
    matches!(c, b'a' | b'e' | b'i' | b'o' | b'u') || (y_is_vowel && c == b'y')
}

/// Skips one vowel run and the consonant run after it; returns the
/// index just past that consonant, or 0 if there is none.
fn gobble_vc(stem: &[u8], prev_consonant: bool) -> usize {
    let mut consonant = prev_consonant;
    let mut i = 0;
    while i < stem.len() {
        consonant = !is_vowel(stem[i], consonant);
        if !consonant {
            break;
        }
        i += 1;
    }
    i += 1;
    while i < stem.len() {
        consonant = !is_vowel(stem[i], consonant);
        if consonant {
            return i + 1;
        }
        i += 1;
    }
    0
}

fn m_gt0(stem: &[u8]) -> bool {
    gobble_vc(stem, false) != 0
}

fn m_gt1(stem: &[u8]) -> bool {
    let n = gobble_vc(stem, false);
    n != 0 && gobble_vc(&stem[n..], true) != 0
}

fn m_eq1(stem: &[u8]) -> bool {
    let n = gobble_vc(stem, false);
    n != 0 && gobble_vc(&stem[n..], true) == 0
}

/// Ends consonant-vowel-consonant, the last not w, x or y.
fn o_star(stem: &[u8]) -> bool {
    match stem.last() {
        None | Some(b'w' | b'x' | b'y') => false,
        Some(_) => {
            let mut mask = 0u32;
            let mut consonant = false;
            for &c in stem {
                consonant = !is_vowel(c, consonant);
                mask = (mask << 1) + u32::from(consonant);
            }
            mask & 7 == 5
        }
    }
}

fn m_gt1_and_s_or_t(stem: &[u8]) -> bool {
    matches!(stem.last(), Some(b's' | b't')) && m_gt1(stem)
}

fn has_vowel(stem: &[u8]) -> bool {
    stem.iter().enumerate().any(|(i, &c)| is_vowel(c, i > 0))
}

type Cond = fn(&[u8]) -> bool;

/// Applies the first rule whose suffix the word ends with (the word
/// longer than the suffix): if its condition holds on the rest, the
/// suffix is replaced. Returns the index of the rule that replaced.
fn apply(buf: &mut Vec<u8>, rules: &[(&str, Cond, &str)]) -> Option<usize> {
    let n = buf.len();
    for (i, (suffix, cond, output)) in rules.iter().enumerate() {
        let suffix = suffix.as_bytes();
        if n > suffix.len() && buf.ends_with(suffix) {
            let stem = n - suffix.len();
            if cond(&buf[..stem]) {
                buf.truncate(stem);
                buf.extend_from_slice(output.as_bytes());
                return Some(i);
            }
            return None;
        }
    }
    None
}

const STEP2: &[(&str, Cond, &str)] = &[
    ("ational", m_gt0, "ate"),
    ("tional", m_gt0, "tion"),
    ("enci", m_gt0, "ence"),
    ("anci", m_gt0, "ance"),
    ("izer", m_gt0, "ize"),
    ("logi", m_gt0, "log"),
    ("bli", m_gt0, "ble"),
    ("alli", m_gt0, "al"),
    ("entli", m_gt0, "ent"),
    ("eli", m_gt0, "e"),
    ("ousli", m_gt0, "ous"),
    ("ization", m_gt0, "ize"),
    ("ation", m_gt0, "ate"),
    ("ator", m_gt0, "ate"),
    ("alism", m_gt0, "al"),
    ("iveness", m_gt0, "ive"),
    ("fulness", m_gt0, "ful"),
    ("ousness", m_gt0, "ous"),
    ("aliti", m_gt0, "al"),
    ("iviti", m_gt0, "ive"),
    ("biliti", m_gt0, "ble"),
];

const STEP3: &[(&str, Cond, &str)] = &[
    ("ical", m_gt0, "ic"),
    ("ness", m_gt0, ""),
    ("icate", m_gt0, "ic"),
    ("iciti", m_gt0, "ic"),
    ("ful", m_gt0, ""),
    ("ative", m_gt0, ""),
    ("alize", m_gt0, "al"),
];

const STEP4: &[(&str, Cond, &str)] = &[
    ("al", m_gt1, ""),
    ("ance", m_gt1, ""),
    ("ence", m_gt1, ""),
    ("er", m_gt1, ""),
    ("ic", m_gt1, ""),
    ("able", m_gt1, ""),
    ("ible", m_gt1, ""),
    ("ant", m_gt1, ""),
    ("ement", m_gt1, ""),
    ("ment", m_gt1, ""),
    ("ent", m_gt1, ""),
    ("ion", m_gt1_and_s_or_t, ""),
    ("ou", m_gt1, ""),
    ("ism", m_gt1, ""),
    ("ate", m_gt1, ""),
    ("iti", m_gt1, ""),
    ("ous", m_gt1, ""),
    ("ive", m_gt1, ""),
    ("ize", m_gt1, ""),
];

const STEP1B: &[(&str, Cond, &str)] = &[("eed", m_gt0, "ee"), ("ed", has_vowel, ""), ("ing", has_vowel, "")];

fn always(_: &[u8]) -> bool {
    true
}

const STEP1B2: &[(&str, Cond, &str)] = &[("at", always, "ate"), ("bl", always, "ble"), ("iz", always, "ize")];

/// Writes the porter stem of the lower-cased ASCII `token` to `out`.
pub(crate) fn stem(token: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(token);
    if token.len() > MAX_STEMMED || token.len() < 3 {
        return;
    }
    let buf = out;
    // Step 1a.
    let n = buf.len();
    if buf[n - 1] == b's' {
        if buf[n - 2] == b'e' {
            if (n > 4 && buf[n - 4] == b's' && buf[n - 3] == b's') || (n > 3 && buf[n - 3] == b'i') {
                buf.truncate(n - 2);
            } else {
                buf.truncate(n - 1);
            }
        } else if buf[n - 2] != b's' {
            buf.truncate(n - 1);
        }
    }
    // Step 1b; only the "ed" and "ing" removals go on to 1b2.
    if matches!(apply(buf, STEP1B), Some(1 | 2)) && apply(buf, STEP1B2).is_none() {
        let n = buf.len();
        let c = buf[n - 1];
        if !is_vowel(c, false) && !matches!(c, b'l' | b's' | b'z') && n >= 2 && c == buf[n - 2] {
            buf.truncate(n - 1);
        } else if m_eq1(buf) && o_star(buf) {
            buf.push(b'e');
        }
    }
    // Step 1c.
    let n = buf.len();
    if buf[n - 1] == b'y' && has_vowel(&buf[..n - 1]) {
        buf[n - 1] = b'i';
    }
    // Steps 2 to 4.
    apply(buf, STEP2);
    apply(buf, STEP3);
    apply(buf, STEP4);
    // Step 5a.
    let n = buf.len();
    if buf[n - 1] == b'e' {
        let rest = &buf[..n - 1];
        if m_gt1(rest) || (m_eq1(rest) && !o_star(rest)) {
            buf.truncate(n - 1);
        }
    }
    // Step 5b.
    let n = buf.len();
    if n > 1 && buf[n - 1] == b'l' && buf[n - 2] == b'l' && m_gt1(&buf[..n - 1]) {
        buf.truncate(n - 1);
    }
}

#[cfg(test)]
mod tests {
    use evident_model::text::split_sections;

    use super::{ascii_terms, stem_string, CHANGED_TAIL};
    use crate::Store;

    /// The Rust tokenizer gives exactly FTS5's terms (same order, same
    /// stems) on every section of the real notes, and every stem keeps the
    /// token's head as the scan's prefilter assumes.
    #[test]
    fn rust_terms_equal_fts5_terms_on_the_synthea_notes() {
        let store = Store::open_in_memory().unwrap();
        let notes = evident_testdata::synthea_sample_notes();
        assert_eq!(notes.len(), 1215, "the Synthea sample's notes");
        let mut texts: Vec<&str> = Vec::new();
        for note in &notes {
            for s in split_sections(&note.text) {
                texts.push(&note.text[s.start..s.end]);
            }
        }
        let rows: Vec<[&str; 2]> = texts.iter().map(|t| [*t, ""]).collect();
        let exact = store.fts5_terms(&rows).unwrap();
        let mut tokens = 0;
        for (text, columns) in texts.iter().zip(&exact) {
            assert!(text.is_ascii());
            assert_eq!(ascii_terms(text.as_bytes()), columns[0], "terms of {text:?}");
            tokens += columns[0].len();
            for raw in text.split(|c: char| !c.is_ascii_alphanumeric()).filter(|t| !t.is_empty()) {
                let token = raw.to_ascii_lowercase();
                let stem = stem_string(token.as_bytes());
                let shared = token.bytes().zip(stem.bytes()).take_while(|(a, b)| a == b).count();
                assert!(stem.len() <= token.len(), "{token} -> {stem}");
                assert!(shared >= 1 && shared + CHANGED_TAIL >= stem.len(), "{token} -> {stem}");
            }
        }
        assert!(tokens > 100_000, "only {tokens} tokens compared");
    }

    #[test]
    fn porter_edge_cases_match_fts5() {
        let store = Store::open_in_memory().unwrap();
        let words = "aed aing ied ies sses ss caresses ponies ties cats feed agreed plastered bled motoring sing \
            conflated troubled sized hopping tanned falling hissing fizzed failing filing happy sky relational \
            conditional rational valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli \
            vietnamization predication operator feudalism decisiveness hopefulness callousness formaliti \
            sensitiviti sensibiliti triplicate formative formalize electriciti electrical hopeful goodness revival \
            allowance inference airliner gyroscopic adjustable defensible irritant replacement adjustment dependent \
            adoption homologou communism activate angulariti homologous effective bowdlerize probate rate cease \
            controll roll generalizations oscillators yyy qwertyuiopasdfghjklzxcvbnmqwertyuiopasdfghjklzxcvbnmqwertyuiopqq";
        let exact = store.fts5_terms(&[[words, ""]]).unwrap();
        assert_eq!(ascii_terms(words.as_bytes()), exact[0][0]);
    }

    #[test]
    fn index_terms_take_fts5_s_terms_outside_ascii() {
        let store = Store::open_in_memory().unwrap();
        assert_eq!(store.index_terms("Größer Schädel-MRTs").unwrap(), vec!["großer", "schadel", "mrt"]);
        assert_eq!(store.index_terms("Running pains").unwrap(), vec!["run", "pain"]);
    }
}
