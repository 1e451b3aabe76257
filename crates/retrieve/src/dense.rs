//! Exact dense top-k: the dot product of a unit query vector with every
//! candidate vector (cosine, since stored vectors are unit length), keeping
//! the best `k` in a bounded min-heap, O(n log k). Brute force is right at
//! per-patient scale (hundreds to thousands of sections).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Heap entry ordered so that the *worst* kept candidate is on top.
struct Candidate {
    score: f32,
    index: usize,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    /// "Greater" = worse: lower score, then higher index (earlier index wins ties).
    fn cmp(&self, other: &Self) -> Ordering {
        other.score.total_cmp(&self.score).then(self.index.cmp(&other.index))
    }
}

/// Indices and scores of the `k` vectors most similar to `query`, best
/// first; ties go to the earlier index.
pub fn top_k<'a>(query: &[f32], vectors: impl IntoIterator<Item = &'a [f32]>, k: usize) -> Vec<(usize, f32)> {
    if k == 0 {
        return Vec::new();
    }
    let mut heap: BinaryHeap<Candidate> = BinaryHeap::with_capacity(k + 1);
    for (index, v) in vectors.into_iter().enumerate() {
        let candidate = Candidate { score: dot(query, v), index };
        if heap.len() < k {
            heap.push(candidate);
        } else if let Some(worst) = heap.peek() {
            if candidate < *worst {
                heap.pop();
                heap.push(candidate);
            }
        }
    }
    let mut out: Vec<(usize, f32)> = heap.into_iter().map(|c| (c.index, c.score)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive version the heap must agree with.
    fn naive(query: &[f32], vectors: &[Vec<f32>], k: usize) -> Vec<(usize, f32)> {
        let mut all: Vec<(usize, f32)> = vectors.iter().enumerate().map(|(i, v)| (i, dot(query, v))).collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(k);
        all
    }

    /// A small deterministic generator (xorshift) so the test needs no crate.
    fn vectors(seed: u64, n: usize, dims: usize) -> Vec<Vec<f32>> {
        let mut state = seed.max(1);
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Coarse values so that ties actually happen.
            ((state % 7) as f32 - 3.0) / 3.0
        };
        (0..n).map(|_| (0..dims).map(|_| next()).collect()).collect()
    }

    #[test]
    fn heap_agrees_with_full_sort() {
        for seed in 1..200u64 {
            let n = (seed as usize * 7) % 60;
            let all = vectors(seed, n + 1, 4);
            let (query, rest) = all.split_first().unwrap();
            for k in [0, 1, 3, 10, 100] {
                let fast = top_k(query, rest.iter().map(|v| v.as_slice()), k);
                assert_eq!(fast, naive(query, rest, k), "seed {seed} n {n} k {k}");
            }
        }
    }
}
