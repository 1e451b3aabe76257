//! BM25 over character trigrams, in memory, for the chart comparators'
//! hybrid retrieval (the longitudinal paper's advanced RAG: "BM25 built
//! over character trigrams with k1 = 1.2 and b = 0.75"). The store's BM25
//! ranks porter-stemmed words; trigrams also match misspellings,
//! abbreviations glued to numbers ("VRd", "R-ISS") and word fragments
//! ("lenalidomid" against "lenalidomide").
//!
//! Text is lower-cased, every run of characters that are not letters or
//! digits becomes one space, and the result is padded with a space on each
//! side; the terms are its overlapping three-character windows, counted
//! with multiplicity. The score is the Okapi formula
//! `idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_len))`
//! summed over the query's trigrams (a repeated query trigram counts each
//! time, as rank_bm25 does), with the non-negative idf
//! `ln(1 + (N - n_t + 0.5) / (n_t + 0.5))` (Lucene's), so a trigram in
//! every text still scores slightly above zero instead of negatively.

use std::collections::HashMap;

/// The paper's parameters.
pub const K1: f64 = 1.2;
pub const B: f64 = 0.75;

type Trigram = [char; 3];

/// The trigrams of `text`, in order, with repeats.
pub fn trigrams(text: &str) -> Vec<Trigram> {
    let mut chars = vec![' '];
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            chars.push(c);
        } else if chars.last() != Some(&' ') {
            chars.push(' ');
        }
    }
    if chars.last() != Some(&' ') {
        chars.push(' ');
    }
    chars.windows(3).map(|w| [w[0], w[1], w[2]]).collect()
}

/// An index over a fixed list of texts; scores refer to positions in it.
#[derive(Debug, Clone)]
pub struct TrigramBm25 {
    k1: f64,
    b: f64,
    /// Per trigram, (text index, term frequency), text indices ascending.
    postings: HashMap<Trigram, Vec<(u32, u32)>>,
    /// Per text, its number of trigrams.
    lengths: Vec<u32>,
    average_length: f64,
}

impl TrigramBm25 {
    /// An index with the paper's k1 = 1.2 and b = 0.75.
    pub fn new<S: AsRef<str>>(texts: &[S]) -> Self {
        TrigramBm25::with_parameters(texts, K1, B)
    }

    pub fn with_parameters<S: AsRef<str>>(texts: &[S], k1: f64, b: f64) -> Self {
        let mut postings: HashMap<Trigram, Vec<(u32, u32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(texts.len());
        for (i, text) in texts.iter().enumerate() {
            let grams = trigrams(text.as_ref());
            lengths.push(grams.len() as u32);
            let mut counts: HashMap<Trigram, u32> = HashMap::new();
            for g in grams {
                *counts.entry(g).or_default() += 1;
            }
            for (g, tf) in counts {
                postings.entry(g).or_default().push((i as u32, tf));
            }
        }
        let total: u64 = lengths.iter().map(|&l| u64::from(l)).sum();
        let average_length = if lengths.is_empty() { 0.0 } else { total as f64 / lengths.len() as f64 };
        TrigramBm25 { k1, b, postings, lengths, average_length }
    }

    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    fn idf(&self, containing: usize) -> f64 {
        let n = self.lengths.len() as f64;
        let df = containing as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Every text's score for `query` (0 for a text sharing no trigram).
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.lengths.len()];
        for g in trigrams(query) {
            let Some(list) = self.postings.get(&g) else { continue };
            let idf = self.idf(list.len());
            for &(i, tf) in list {
                let tf = f64::from(tf);
                let len = f64::from(self.lengths[i as usize]);
                let norm = 1.0 - self.b + self.b * len / self.average_length.max(f64::MIN_POSITIVE);
                scores[i as usize] += idf * tf * (self.k1 + 1.0) / (tf + self.k1 * norm);
            }
        }
        scores
    }

    /// The best `k` texts with a positive score, as (index, score), best
    /// first, ties by index.
    pub fn top_k(&self, query: &str, k: usize) -> Vec<(usize, f64)> {
        let mut scored: Vec<(usize, f64)> =
            self.scores(query).into_iter().enumerate().filter(|(_, s)| *s > 0.0).collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(k);
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigrams_are_padded_lower_cased_and_split_on_punctuation() {
        let grams: Vec<String> = trigrams("VRd, x").iter().map(|g| g.iter().collect()).collect();
        assert_eq!(grams, [" vr", "vrd", "rd ", "d x", " x "]);
        assert!(trigrams("").is_empty(), "a lone padding space has no trigram");
    }

    /// The score written out by hand for a two-text corpus.
    #[test]
    fn scores_follow_the_okapi_formula() {
        let index = TrigramBm25::new(&["ab", "cd ab"]);
        // Texts' trigrams: " ab", "ab " (2) and " cd", "cd ", "d a", " ab", "ab " (5); average 3.5.
        // Query "ab": " ab" and "ab ", each in both texts: idf = ln(1 + 0.5/2.5).
        let idf = (1.0f64 + 0.5 / 2.5).ln();
        let term = |len: f64| idf * 2.2 / (1.0 + 1.2 * (0.25 + 0.75 * len / 3.5));
        let scores = index.scores("ab");
        assert!((scores[0] - 2.0 * term(2.0)).abs() < 1e-12, "{scores:?}");
        assert!((scores[1] - 2.0 * term(5.0)).abs() < 1e-12, "{scores:?}");
    }

    #[test]
    fn a_misspelt_or_truncated_drug_name_still_ranks_its_text_first() {
        let texts = [
            "Started lenalidomide 25 mg days 1-21.",
            "Bone marrow biopsy shows 40% plasma cells.",
            "CT chest without acute findings.",
        ];
        let index = TrigramBm25::new(&texts);
        assert_eq!(index.top_k("lenalidomid", 3)[0].0, 0);
        assert_eq!(index.top_k("plasmacells", 3)[0].0, 1);
        assert!(index.top_k("zzz", 3).is_empty(), "no shared trigram, no hit");
    }

    #[test]
    fn top_k_is_the_sorted_prefix_of_all_scores() {
        let texts: Vec<String> = (0..40).map(|i| format!("note {i} dexamethasone {}", "x".repeat(i % 7))).collect();
        let index = TrigramBm25::new(&texts);
        let all = index.scores("dexamethasone note 3");
        let top = index.top_k("dexamethasone note 3", 5);
        assert_eq!(top.len(), 5);
        for w in top.windows(2) {
            assert!(w[0].1 >= w[1].1);
        }
        let best = all.iter().cloned().fold(f64::MIN, f64::max);
        assert_eq!(top[0].1, best);
    }
}
