//! The per-query BM25 scan: reads the text of every section a filter
//! admits and scores it against the query on the fly, with the admitted
//! sections as the corpus (IDF and average length over them). For a query
//! of single-term words over ASCII text it stems only the tokens that
//! could stem to a query term. What [`Store::search_bm25`] does for a
//! patient, and what the in-memory index falls back to for a query word
//! FTS5 splits into several terms.

use super::{formula, terms, SectionSink};
use crate::{Result, ScoredSection, SectionFilter, Store};

/// A single-term phrase and how much of it a token must share before
/// it is worth stemming (see [`terms::CHANGED_TAIL`]).
struct Target {
    term: Vec<u8>,
    prefix: usize,
}

struct Scorer<'q> {
    phrases: &'q [Vec<String>],
    /// Distinct terms when every phrase is one term; `None` otherwise.
    targets: Option<Vec<Target>>,
    /// For each phrase, its index in `targets`.
    phrase_target: Vec<usize>,
    /// Tokens per section.
    lengths: Vec<u32>,
    /// Phrase frequencies, `phrases.len()` per section.
    freqs: Vec<u32>,
    counts: Vec<u32>,
    lower: Vec<u8>,
    stem: Vec<u8>,
}

impl<'q> Scorer<'q> {
    fn new(phrases: &'q [Vec<String>]) -> Self {
        let mut targets: Vec<Target> = Vec::new();
        let mut phrase_target = Vec::new();
        // The fast path cuts a term's head at a byte count and matches it
        // in ASCII text: a term outside ASCII (it can never occur there)
        // takes the general path, which cannot cut a character in two.
        let single = phrases.iter().all(|p| p.len() == 1 && p[0].is_ascii());
        if single {
            for p in phrases {
                let term = p[0].as_bytes();
                let at = match targets.iter().position(|t| t.term == term) {
                    Some(at) => at,
                    None => {
                        let prefix = term.len().saturating_sub(terms::CHANGED_TAIL).max(1).min(term.len());
                        targets.push(Target { term: term.to_vec(), prefix });
                        targets.len() - 1
                    }
                };
                phrase_target.push(at);
            }
        }
        let n_targets = targets.len();
        Scorer {
            phrases,
            targets: single.then_some(targets),
            phrase_target,
            lengths: Vec::new(),
            freqs: Vec::new(),
            counts: vec![0; n_targets],
            lower: Vec::new(),
            stem: Vec::new(),
        }
    }
}

impl SectionSink for Scorer<'_> {
    /// Adds a section whose columns are all ASCII.
    fn ascii(&mut self, columns: [&[u8]; 2]) {
        if self.targets.is_none() {
            let terms: Vec<Vec<String>> = columns.iter().map(|c| terms::ascii_terms(c)).collect();
            self.lengths.push(0);
            self.freqs.extend(std::iter::repeat_n(0, self.phrases.len()));
            self.terms(self.lengths.len() - 1, &terms);
            return;
        }
        let targets = self.targets.as_ref().expect("checked above");
        self.counts.iter_mut().for_each(|c| *c = 0);
        let mut length = 0u32;
        for text in columns {
            length += terms::count_tokens(text);
            // Find each term's head where a token starts, and stem only
            // those tokens: a token can only stem to a term it shares
            // that head with.
            self.lower.clear();
            self.lower.extend(text.iter().map(u8::to_ascii_lowercase));
            let lower = std::str::from_utf8(&self.lower).expect("ASCII");
            for (t, target) in targets.iter().enumerate() {
                let head = &target.term[..target.prefix];
                let head = std::str::from_utf8(head).expect("ASCII");
                for (at, _) in lower.match_indices(head) {
                    let bytes = lower.as_bytes();
                    if at > 0 && bytes[at - 1].is_ascii_alphanumeric() {
                        continue;
                    }
                    let end =
                        bytes[at..].iter().position(|b| !b.is_ascii_alphanumeric()).map_or(bytes.len(), |n| at + n);
                    let token = &bytes[at..end];
                    if token.len() < target.term.len() {
                        continue;
                    }
                    terms::stem(token, &mut self.stem);
                    if self.stem == target.term {
                        self.counts[t] += 1;
                    }
                }
            }
        }
        self.lengths.push(length);
        for &t in &self.phrase_target {
            self.freqs.push(self.counts[t]);
        }
    }

    /// Adds a section whose terms will be given by `terms`.
    fn placeholder(&mut self) {
        self.lengths.push(0);
        self.freqs.extend(std::iter::repeat_n(0, self.phrases.len()));
    }

    /// Sets section `index`'s length and phrase frequencies from its
    /// terms, one list per column (phrases never span columns).
    fn terms(&mut self, index: usize, columns: &[Vec<String>]) {
        self.lengths[index] = columns.iter().map(|c| c.len() as u32).sum();
        let row = &mut self.freqs[index * self.phrases.len()..(index + 1) * self.phrases.len()];
        for (slot, phrase) in row.iter_mut().zip(self.phrases) {
            *slot = columns
                .iter()
                .map(|c| c.windows(phrase.len()).filter(|w| w.iter().zip(phrase).all(|(a, b)| a == b)).count() as u32)
                .sum();
        }
    }
}

impl Scorer<'_> {
    /// The best `k` sections that contain at least one phrase, as
    /// (index in insertion order, score), best first; ties in order of
    /// `ids` (one per section, in insertion order).
    fn top_k(&self, k: usize, ids: &[i64]) -> Vec<(usize, f64)> {
        let n_rows = self.lengths.len();
        let n_phrases = self.phrases.len();
        if n_rows == 0 || n_phrases == 0 {
            return Vec::new();
        }
        let average_length = formula::average_length(&self.lengths);
        let idf: Vec<f64> = (0..n_phrases)
            .map(|p| formula::idf(n_rows, (0..n_rows).filter(|r| self.freqs[r * n_phrases + p] > 0).count()))
            .collect();
        let mut scored: Vec<(usize, f64)> = Vec::new();
        for r in 0..n_rows {
            let row = &self.freqs[r * n_phrases..(r + 1) * n_phrases];
            if row.iter().all(|&f| f == 0) {
                continue;
            }
            let norm = formula::length_norm(self.lengths[r], average_length);
            let mut score = 0.0;
            for (p, &f) in row.iter().enumerate() {
                score += formula::term_score(idf[p], f, norm);
            }
            scored.push((r, score));
        }
        let order = |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(ids[a.0].cmp(&ids[b.0]));
        if scored.len() > k {
            scored.select_nth_unstable_by(k - 1, order);
            scored.truncate(k);
        }
        scored.sort_by(order);
        scored
    }
}

impl Store {
    /// BM25 over exactly the sections the filter admits, scored here from
    /// their text (see [`Store::search_bm25`]).
    pub(crate) fn search_bm25_scoped(
        &self,
        query: &str,
        filter: &SectionFilter,
        k: usize,
    ) -> Result<Vec<ScoredSection>> {
        let phrases = self.query_phrases(query)?;
        if phrases.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let mut scorer = Scorer::new(&phrases);
        let ids = self.read_sections_into(filter, &mut scorer)?;
        let best = scorer.top_k(k, &ids).into_iter().map(|(i, score)| (ids[i], score)).collect();
        self.scored_sections(best)
    }
}
