//! An in-memory BM25 index over the sections a filter admits: postings
//! per term, built once from the store, then queried without touching
//! SQLite until the winners' text is read. Terms, statistics and formula
//! are those of [`Store::search_bm25`] over the same filter (FTS5's
//! `porter unicode61` terms from [`super::terms`], the formula of
//! [`super::formula`], IDF and average length over the admitted
//! sections), so both give the same
//! sections with the same scores; this one answers a query in time
//! proportional to the query terms' postings, not to the corpus.
//!
//! The index is a snapshot: sections written after it was built are not
//! in it. Whoever holds one across writes builds a new one.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{formula, terms, SectionSink};
use crate::{Result, ScoredSection, SectionFilter, Store};

/// Up to this k the best are kept in a sorted list while scanning; above
/// it, selected from all candidates at once (the list would cost O(k) per
/// insertion).
const SMALL_K: usize = 64;

pub struct Bm25Index {
    filter: SectionFilter,
    /// Section ids, ascending; a section's position here is its index in
    /// the postings.
    section_ids: Vec<i64>,
    /// Per section, its [`formula::length_norm`].
    norm: Vec<f64>,
    terms: HashMap<Box<[u8]>, u32, rustc_hash::FxBuildHasher>,
    /// Term `t`'s postings are `docs[offsets[t]..offsets[t + 1]]` (section
    /// indices, ascending) with their frequencies in `freqs`.
    offsets: Vec<usize>,
    docs: Vec<u32>,
    freqs: Vec<u32>,
    scratch: Mutex<Scratch>,
}

/// Per-query accumulators, kept between queries so that a query costs
/// what its postings cost, not an allocation the size of the corpus.
#[derive(Default)]
struct Scratch {
    scores: Vec<f64>,
    touched: Vec<u32>,
}

impl std::fmt::Debug for Bm25Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25Index")
            .field("filter", &self.filter)
            .field("sections", &self.section_ids.len())
            .field("terms", &self.terms.len())
            .field("postings", &self.docs.len())
            .finish()
    }
}

impl Bm25Index {
    /// The filter the index was built for.
    pub fn filter(&self) -> &SectionFilter {
        &self.filter
    }

    pub fn sections(&self) -> usize {
        self.section_ids.len()
    }

    pub fn postings(&self) -> usize {
        self.docs.len()
    }

    /// The best `k` sections for query terms (each a single FTS5 term,
    /// repeated as often as the query repeats it), as (section id, score),
    /// best first, ties by section id; only sections holding a term.
    fn top_k(&self, query_terms: &[String], k: usize) -> Vec<(i64, f64)> {
        let n = self.section_ids.len();
        if n == 0 || k == 0 {
            return Vec::new();
        }
        let mut weighted: Vec<(u32, f64)> = Vec::new();
        for term in query_terms {
            let Some(&t) = self.terms.get(term.as_bytes()) else { continue };
            match weighted.iter_mut().find(|(u, _)| *u == t) {
                Some((_, times)) => *times += 1.0,
                None => weighted.push((t, 1.0)),
            }
        }
        if weighted.is_empty() {
            return Vec::new();
        }
        let mut own = Scratch::default();
        let mut guard = self.scratch.try_lock().ok();
        let scratch = guard.as_deref_mut().unwrap_or(&mut own);
        if scratch.scores.len() != n {
            scratch.scores = vec![0.0; n];
        }
        let scores = &mut scratch.scores;
        let touched = &mut scratch.touched;
        for &(t, times) in &weighted {
            let (from, to) = (self.offsets[t as usize], self.offsets[t as usize + 1]);
            // A word the query repeats counts once per repetition, as a
            // phrase does in FTS5.
            let weight = times * formula::idf(n, to - from);
            for (&d, &f) in self.docs[from..to].iter().zip(&self.freqs[from..to]) {
                let slot = &mut scores[d as usize];
                if *slot == 0.0 {
                    touched.push(d);
                }
                *slot += formula::term_score(weight, f, self.norm[d as usize]);
            }
        }
        // Best first, then the lower section index (= lower id).
        let better = |a: &(u32, f64), b: &(u32, f64)| a.1 > b.1 || (a.1 == b.1 && a.0 < b.0);
        let order = |a: &(u32, f64), b: &(u32, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let mut best: Vec<(u32, f64)>;
        if k <= SMALL_K {
            // A sorted list of at most k: most candidates fail one comparison.
            best = Vec::with_capacity(k + 1);
            for &d in touched.iter() {
                let candidate = (d, scores[d as usize]);
                scores[d as usize] = 0.0;
                if best.len() == k && !better(&candidate, &best[k - 1]) {
                    continue;
                }
                let at = best.partition_point(|b| better(b, &candidate));
                best.insert(at, candidate);
                best.truncate(k);
            }
        } else {
            best = touched.iter().map(|&d| (d, std::mem::take(&mut scores[d as usize]))).collect();
            if best.len() > k {
                best.select_nth_unstable_by(k - 1, order);
                best.truncate(k);
            }
            best.sort_by(order);
        }
        touched.clear();
        best.into_iter().map(|(d, score)| (self.section_ids[d as usize], score)).collect()
    }
}

/// Collects postings section by section.
#[derive(Default)]
struct Builder {
    terms: HashMap<Box<[u8]>, u32, rustc_hash::FxBuildHasher>,
    /// Lower-cased token -> term id: each distinct token is stemmed once.
    tokens: HashMap<Box<[u8]>, u32, rustc_hash::FxBuildHasher>,
    postings: Vec<Vec<(u32, u32)>>,
    lengths: Vec<u32>,
    /// Term ids of the section being added.
    section: Vec<u32>,
    lower: Vec<u8>,
    stem: Vec<u8>,
    /// Whether some postings were appended out of section order.
    unsorted: bool,
}

impl Builder {
    fn term_id(&mut self, term: &[u8]) -> u32 {
        if let Some(&t) = self.terms.get(term) {
            return t;
        }
        let t = self.postings.len() as u32;
        self.terms.insert(term.into(), t);
        self.postings.push(Vec::new());
        t
    }

    /// Turns the current section's term ids into postings.
    fn flush(&mut self, index: usize) {
        self.section.sort_unstable();
        for run in self.section.chunk_by(|a, b| a == b) {
            self.postings[run[0] as usize].push((index as u32, run.len() as u32));
        }
    }

    fn finish(self, filter: SectionFilter, section_ids: Vec<i64>) -> Bm25Index {
        let average_length = formula::average_length(&self.lengths);
        let norm = self.lengths.iter().map(|&l| formula::length_norm(l, average_length)).collect();
        let size: usize = self.postings.iter().map(Vec::len).sum();
        let mut offsets = Vec::with_capacity(self.postings.len() + 1);
        let mut docs = Vec::with_capacity(size);
        let mut freqs = Vec::with_capacity(size);
        offsets.push(0);
        for mut list in self.postings {
            if self.unsorted {
                list.sort_unstable_by_key(|(d, _)| *d);
            }
            docs.extend(list.iter().map(|(d, _)| *d));
            freqs.extend(list.iter().map(|(_, f)| *f));
            offsets.push(docs.len());
        }
        Bm25Index {
            filter,
            section_ids,
            norm,
            terms: self.terms,
            offsets,
            docs,
            freqs,
            scratch: Mutex::new(Scratch::default()),
        }
    }
}

impl SectionSink for Builder {
    /// Adds the next section, all of whose columns are ASCII.
    fn ascii(&mut self, columns: [&[u8]; 2]) {
        self.section.clear();
        for text in columns {
            for raw in text.split(|b| !b.is_ascii_alphanumeric()).filter(|t| !t.is_empty()) {
                self.lower.clear();
                self.lower.extend(raw.iter().map(u8::to_ascii_lowercase));
                let t = match self.tokens.get(self.lower.as_slice()) {
                    Some(&t) => t,
                    None => {
                        let mut stem = std::mem::take(&mut self.stem);
                        terms::stem(&self.lower, &mut stem);
                        let t = self.term_id(&stem);
                        self.stem = stem;
                        self.tokens.insert(self.lower.as_slice().into(), t);
                        t
                    }
                };
                self.section.push(t);
            }
        }
        self.lengths.push(self.section.len() as u32);
        self.flush(self.lengths.len() - 1);
    }

    /// Reserves the next section; its terms come from `terms`.
    fn placeholder(&mut self) {
        self.lengths.push(0);
    }

    fn terms(&mut self, index: usize, columns: &[Vec<String>]) {
        self.section.clear();
        for term in columns.iter().flatten() {
            let t = self.term_id(term.as_bytes());
            self.section.push(t);
        }
        self.lengths[index] = self.section.len() as u32;
        self.unsorted = true;
        self.flush(index);
    }
}

impl Store {
    /// Builds an in-memory BM25 index over the sections `filter` admits
    /// (the whole store for the default filter). Reads every admitted
    /// section once; see [`Bm25Index`].
    pub fn bm25_index(&self, filter: &SectionFilter) -> Result<Bm25Index> {
        let mut builder = Builder::default();
        let section_ids = self.read_sections_into(filter, &mut builder)?;
        Ok(builder.finish(filter.clone(), section_ids))
    }

    /// The top `k` sections for `query` in `index`, best first: the same
    /// sections and scores as [`Store::search_bm25`] over the index's
    /// filter when the index was built, if that filter names a patient or
    /// is empty (with other filters `search_bm25` takes FTS5's whole-store
    /// statistics, and the index those of the admitted sections). A query
    /// word that FTS5 splits into several terms (a phrase; only possible
    /// outside ASCII) is answered by scanning the filter's sections
    /// instead, with the same result.
    pub fn search_bm25_index(&self, index: &Bm25Index, query: &str, k: usize) -> Result<Vec<ScoredSection>> {
        match self.rank_terms(query)? {
            Some(terms) => self.scored_sections(index.top_k(&terms, k)),
            None => self.search_bm25_scoped(query, &index.filter, k),
        }
    }

    /// Only the ranking of [`Store::search_bm25_index`]: (section id,
    /// score), best first, without reading the sections.
    pub fn rank_bm25_index(&self, index: &Bm25Index, query: &str, k: usize) -> Result<Vec<(i64, f64)>> {
        match self.rank_terms(query)? {
            Some(terms) => Ok(index.top_k(&terms, k)),
            None => {
                let hits = self.search_bm25_scoped(query, &index.filter, k)?;
                Ok(hits.into_iter().map(|h| (h.section.section_id, h.score)).collect())
            }
        }
    }

    /// The query's terms, one per word, or `None` when a word is a phrase
    /// of several terms, which the index cannot score (it keeps no
    /// positions). ASCII words are stemmed here without SQL.
    fn rank_terms(&self, query: &str) -> Result<Option<Vec<String>>> {
        let phrases = self.query_phrases(query)?;
        if phrases.iter().any(|p| p.len() > 1) {
            return Ok(None);
        }
        Ok(Some(phrases.into_iter().flatten().collect()))
    }
}
