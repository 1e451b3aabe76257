//! Rank fusion for hybrid retrieval, on plain `(section id, score)` lists
//! (higher score = better) so it can be tested without a store:
//! reciprocal rank fusion (Cormack et al., 2009; `1 / (k + rank)` summed
//! over lists, rank from 1) and a weighted fusion of min-max normalised
//! scores. Ties are broken by section id so results are deterministic.

use std::collections::HashMap;

/// The RRF constant from Cormack et al.; 60 is the value everyone uses.
pub const RRF_K: f64 = 60.0;

/// Reciprocal rank fusion. Each list must be sorted best first; a section
/// absent from a list contributes nothing for it.
pub fn reciprocal_rank_fusion(lists: &[&[(i64, f64)]], k: f64) -> Vec<(i64, f64)> {
    let mut fused: HashMap<i64, f64> = HashMap::new();
    for list in lists {
        for (rank0, (id, _)) in list.iter().enumerate() {
            *fused.entry(*id).or_default() += 1.0 / (k + rank0 as f64 + 1.0);
        }
    }
    sorted(fused)
}

/// `alpha * dense' + (1 - alpha) * bm25'`, where `x'` is the score min-max
/// normalised to 0..=1 within its own list (a list whose scores are all
/// equal normalises to 1), and a section absent from a list gets 0 there.
/// `alpha` is clamped to 0..=1.
pub fn weighted_fusion(bm25: &[(i64, f64)], dense: &[(i64, f64)], alpha: f64) -> Vec<(i64, f64)> {
    let alpha = alpha.clamp(0.0, 1.0);
    let mut fused: HashMap<i64, f64> = HashMap::new();
    for (list, weight) in [(bm25, 1.0 - alpha), (dense, alpha)] {
        for (id, normalised) in min_max(list) {
            *fused.entry(id).or_default() += weight * normalised;
        }
    }
    sorted(fused)
}

fn min_max(list: &[(i64, f64)]) -> Vec<(i64, f64)> {
    let lo = list.iter().map(|(_, s)| *s).fold(f64::INFINITY, f64::min);
    let hi = list.iter().map(|(_, s)| *s).fold(f64::NEG_INFINITY, f64::max);
    list.iter()
        .map(|(id, s)| {
            let n = if hi > lo { (s - lo) / (hi - lo) } else { 1.0 };
            (*id, n)
        })
        .collect()
}

fn sorted(fused: HashMap<i64, f64>) -> Vec<(i64, f64)> {
    let mut out: Vec<(i64, f64)> = fused.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_rrf(lists: &[&[(i64, f64)]], expected_ids: &[i64]) {
        let fused = reciprocal_rank_fusion(lists, RRF_K);
        let ids: Vec<i64> = fused.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, expected_ids);
    }

    #[test]
    fn rrf_rewards_agreement() {
        // 2 is second in both lists; 1 and 3 are first in one list and absent
        // from the other: 2/(62) > 1/61.
        check_rrf(&[&[(1, 9.0), (2, 8.0)], &[(3, 0.9), (2, 0.8)]], &[2, 1, 3]);
    }

    #[test]
    fn rrf_scores_are_reciprocal_ranks() {
        let fused = reciprocal_rank_fusion(&[&[(7, 1.0), (8, 0.5)]], 60.0);
        assert_eq!(fused, vec![(7, 1.0 / 61.0), (8, 1.0 / 62.0)]);
    }

    #[test]
    fn rrf_of_empty_lists_is_empty() {
        check_rrf(&[&[], &[]], &[]);
    }

    #[test]
    fn weighted_fusion_endpoints_reproduce_each_list() {
        let bm25 = [(1, 12.0), (2, 5.0), (3, 1.0)];
        let dense = [(3, 0.9), (2, 0.5), (1, 0.1)];
        let ids = |v: Vec<(i64, f64)>| v.into_iter().map(|(id, _)| id).collect::<Vec<_>>();
        assert_eq!(ids(weighted_fusion(&bm25, &dense, 0.0)), vec![1, 2, 3]);
        assert_eq!(ids(weighted_fusion(&bm25, &dense, 1.0)), vec![3, 2, 1]);
    }

    #[test]
    fn weighted_fusion_normalises_each_list() {
        let bm25 = [(1, 20.0), (2, 10.0)];
        let dense = [(2, 0.8), (1, 0.6)];
        let fused = weighted_fusion(&bm25, &dense, 0.5);
        // 1: 0.5*1 + 0.5*0 = 0.5; 2: 0.5*0 + 0.5*1 = 0.5; tie broken by id.
        assert_eq!(fused, vec![(1, 0.5), (2, 0.5)]);
        let single = weighted_fusion(&[(5, 3.0)], &[], 0.25);
        assert_eq!(single, vec![(5, 0.75)]);
    }
}
