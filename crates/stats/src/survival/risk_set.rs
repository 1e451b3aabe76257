//! The ordering that Cox models, concordance and the log-rank test share:
//! rows sorted into risk sets (by stratum, time descending), times equal up to
//! rounding error merged as R's `timefix` merges them, and the blocks of rows
//! that share one time.

/// An order-preserving map of a finite f64 to u64 (-0.0 and 0.0 alike), so
/// that sorting plain integer keys sorts the numbers.
pub(super) fn order_key(v: f64) -> u64 {
    let bits = (v + 0.0).to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Risk-set order: by stratum, then time descending (all tied times enter
/// the risk set together, so the order within a tie does not matter; ties
/// keep the input order).
pub(super) fn risk_order(time: &[f64], strata: Option<&[f64]>) -> Vec<usize> {
    let n = time.len();
    // Stratum codes: ranks of the distinct stratum values.
    let codes: Vec<u32> = match strata {
        None => vec![0; n],
        Some(s) => {
            let mut levels: Vec<u64> = s.iter().map(|v| order_key(*v)).collect();
            levels.sort_unstable();
            levels.dedup();
            s.iter().map(|v| levels.partition_point(|l| *l < order_key(*v)) as u32).collect()
        }
    };
    if n > u32::MAX as usize {
        let mut idx: Vec<usize> = (0..n).collect();
        idx.sort_by(|&a, &b| codes[a].cmp(&codes[b]).then(time[b].total_cmp(&time[a])));
        return idx;
    }
    // One packed key per row (stratum code, descending time, row index):
    // an unstable sort of distinct integers is as good as a stable sort
    // and much faster than comparing through indices.
    let mut keys: Vec<u128> =
        (0..n).map(|i| ((codes[i] as u128) << 96) | ((!order_key(time[i]) as u128) << 32) | i as u128).collect();
    keys.sort_unstable();
    keys.into_iter().map(|k| (k as u32) as usize).collect()
}

/// Treats times that differ by rounding error as tied, as `coxph`, `survfit`
/// and `survdiff` do by default (`aeqSurv`, `timefix = TRUE`): among the
/// sorted distinct times, one within sqrt(machine epsilon) of its
/// predecessor, absolutely or relative to the mean absolute distinct time,
/// takes the predecessor's value (transitively). The map is monotone, so a
/// sorted order stays valid. `descending` says `time` is already sorted
/// descending (saves a sort).
pub(super) fn merge_near_ties(time: &mut [f64], descending: bool) {
    let tolerance = f64::EPSILON.sqrt();
    let mut distinct: Vec<f64> = if descending {
        time.iter().rev().copied().collect()
    } else {
        let mut t = time.to_vec();
        t.sort_unstable_by(|a, b| a.total_cmp(b));
        t
    };
    distinct.dedup();
    let mean_abs = distinct.iter().map(|t| t.abs()).sum::<f64>() / distinct.len() as f64;
    let tied = |k: usize| {
        let dy = distinct[k] - distinct[k - 1];
        dy <= tolerance || dy / mean_abs <= tolerance
    };
    if !(1..distinct.len()).any(tied) {
        return;
    }
    let mut merged = distinct.clone();
    for k in 1..merged.len() {
        if tied(k) {
            merged[k] = merged[k - 1];
        }
    }
    for t in time.iter_mut() {
        let k = distinct.partition_point(|d| d < t);
        *t = merged[k];
    }
}

/// Rows [start, end) of the risk order share one time (and stratum).
pub(super) struct TieBlock {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) deaths: usize,
    /// The block with the latest time of its stratum: the risk sets restart.
    pub(super) first_in_stratum: bool,
}

/// The tie blocks of data in risk order.
pub(super) fn tie_blocks(time: &[f64], status: &[f64], stratum: &[f64]) -> Vec<TieBlock> {
    let n = time.len();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && time[j] == time[i] && stratum[j] == stratum[i] {
            j += 1;
        }
        blocks.push(TieBlock {
            start: i,
            end: j,
            deaths: status[i..j].iter().filter(|s| **s == 1.0).count(),
            first_in_stratum: i == 0 || stratum[i] != stratum[i - 1],
        });
        i = j;
    }
    blocks
}
