//! Harrell's concordance of a risk score with survival, as
//! `survival::concordance` counts it (pairs within strata, time ties and
//! score ties apart), with `concordancefit`'s infinitesimal-jackknife
//! standard error, in O(n log n) with Fenwick trees over score ranks.

use serde::Serialize;

use super::risk_set::{merge_near_ties, order_key, risk_order, tie_blocks};

/// Concordance counts as `survival::concordance` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Concordance {
    pub concordant: f64,
    pub discordant: f64,
    pub tied_risk: f64,
    pub tied_time: f64,
    /// (concordant + tied_risk / 2) / (concordant + discordant + tied_risk).
    pub concordance: f64,
    /// Standard error of the concordance, as `coxph` reports it
    /// (`concordance["std"]`, `summary`'s `se(C)`): the infinitesimal
    /// jackknife of `concordancefit`, from each subject's concordant,
    /// discordant and score-tied pair counts.
    pub std_err: f64,
}

/// Harrell's concordance of a risk score with survival (higher score, shorter
/// survival), counting pairs within strata. A pair is comparable when the
/// shorter time is an event; a subject censored at an event time counts as
/// surviving longer; two events at the same time are `tied_time`.
pub fn concordance(time: &[f64], status: &[f64], strata: Option<&[f64]>, score: &[f64]) -> Concordance {
    let order = risk_order(time, strata);
    let mut t: Vec<f64> = order.iter().map(|&i| time[i]).collect();
    merge_near_ties(&mut t, strata.is_none());
    let s: Vec<f64> = order.iter().map(|&i| status[i]).collect();
    let st: Vec<f64> = order.iter().map(|&i| strata.map_or(0.0, |v| v[i])).collect();
    let sc: Vec<f64> = order.iter().map(|&i| score[i]).collect();
    concordance_sorted(&t, &s, &st, &sc)
}

/// Dense ranks of the values (equal values share a rank, from 0), by one
/// sort of packed (value, index) keys.
fn dense_ranks(values: &[f64]) -> (Vec<usize>, usize) {
    let mut keys: Vec<u128> =
        values.iter().enumerate().map(|(i, v)| ((order_key(*v) as u128) << 64) | i as u128).collect();
    keys.sort_unstable();
    let mut ranks = vec![0; values.len()];
    let mut distinct = 0;
    let mut previous = None;
    for k in keys {
        let value = (k >> 64) as u64;
        if previous.is_some_and(|v| v != value) {
            distinct += 1;
        }
        previous = Some(value);
        ranks[k as u64 as usize] = distinct;
    }
    (ranks, distinct + usize::from(previous.is_some()))
}

/// Concordance on data in risk order (stratum, time descending), in
/// O(n log n) with Fenwick trees over score ranks.
pub(super) fn concordance_sorted(time: &[f64], status: &[f64], stratum: &[f64], score: &[f64]) -> Concordance {
    let (rank, m) = dense_ranks(score);
    // 32-bit counts halve the trees' memory, and their cache misses,
    // whenever the row count fits.
    let counts = if time.len() <= u32::MAX as usize {
        pair_counts::<u32>(time, status, stratum, &rank, m)
    } else {
        pair_counts::<u64>(time, status, stratum, &rank, m)
    };
    let (conc, disc, tied_x) = (counts.concordant as f64, counts.discordant as f64, counts.tied_risk as f64);
    Concordance {
        concordant: conc,
        discordant: disc,
        tied_risk: tied_x,
        tied_time: counts.tied_time as f64,
        concordance: (conc + tied_x / 2.0) / (conc + disc + tied_x),
        std_err: counts.variance.sqrt(),
    }
}

/// A count type for the Fenwick tree.
/// Counts never exceed the number of rows, which the caller checks fits.
trait Count: Copy + Default + std::ops::AddAssign + std::ops::SubAssign + Into<u64> {
    const ONE: Self;
    fn from_count(v: u64) -> Self;
}

impl Count for u32 {
    const ONE: Self = 1;
    fn from_count(v: u64) -> Self {
        v as u32
    }
}

impl Count for u64 {
    const ONE: Self = 1;
    fn from_count(v: u64) -> Self {
        v
    }
}

/// Counts of score ranks 0..m, for "how many below rank r" in O(log m):
/// the plain count at each rank, and a Fenwick tree over buckets of
/// `BUCKET` consecutive ranks. A query walks the small bucket tree (which
/// stays in cache, unlike a Fenwick tree over a million ranks) and sums at
/// most one bucket of contiguous counts.
struct RankCounts<C> {
    at_rank: Vec<C>,
    bucket_tree: Vec<C>,
    total: u64,
}

const BUCKET: usize = 64;

impl<C: Count> RankCounts<C> {
    fn new(m: usize) -> Self {
        Self { at_rank: vec![C::default(); m], bucket_tree: vec![C::default(); m.div_ceil(BUCKET) + 1], total: 0 }
    }

    fn add(&mut self, r: usize) {
        self.at_rank[r] += C::ONE;
        self.total += 1;
        let mut i = r / BUCKET + 1;
        while i < self.bucket_tree.len() {
            self.bucket_tree[i] += C::ONE;
            i += i & i.wrapping_neg();
        }
    }

    fn remove(&mut self, r: usize) {
        self.at_rank[r] -= C::ONE;
        self.total -= 1;
        let mut i = r / BUCKET + 1;
        while i < self.bucket_tree.len() {
            self.bucket_tree[i] -= C::ONE;
            i += i & i.wrapping_neg();
        }
    }

    /// (entries with rank < r, entries with rank r, entries with rank > r).
    fn split(&self, r: usize) -> (u64, u64, u64) {
        let bucket = r / BUCKET;
        let mut i = bucket;
        let mut below = 0u64;
        while i > 0 {
            below += self.bucket_tree[i].into();
            i -= i & i.wrapping_neg();
        }
        below += self.at_rank[bucket * BUCKET..r].iter().map(|c| (*c).into()).sum::<u64>();
        let same: u64 = self.at_rank[r].into();
        (below, same, self.total - below - same)
    }
}

/// Pair counts over all strata, and the variance of the concordance.
struct PairCounts {
    concordant: u64,
    discordant: u64,
    tied_risk: u64,
    tied_time: u64,
    variance: f64,
}

/// Concordant, discordant, tied-on-score and tied-on-time pairs of data in
/// risk order, with `rank` the dense score ranks (0..m). A pair is an event
/// and a subject still at risk at its time (later time, or censored at the
/// same time); it is concordant when the event has the higher score.
///
/// The variance is `concordancefit`'s: with C_i, D_i, T_i the concordant,
/// discordant and score-tied pairs subject i belongs to, N the number of
/// such pairs and s = (C - D) / N (Somers' d),
/// dfbeta_i = (C_i - D_i) / N - s / N (C_i + D_i + T_i), and
/// var(concordance) = sum dfbeta_i^2 / 4. Each subject's pairs as the event
/// are counted walking the risk order (later times first); its pairs as the
/// subject at risk, walking back (earlier events first).
fn pair_counts<C: Count>(time: &[f64], status: &[f64], stratum: &[f64], rank: &[usize], m: usize) -> PairCounts {
    let n = time.len();
    let blocks = tie_blocks(time, status, stratum);
    // Pairs of each event as the earlier member: concordant, discordant, tied.
    let mut as_event = vec![[C::default(); 3]; n];
    let mut at_risk = RankCounts::<C>::new(m);
    let (mut conc, mut disc, mut tied_x, mut tied_y) = (0u64, 0u64, 0u64, 0u64);
    let mut stratum_start = 0;
    for blk in &blocks {
        let (i, j) = (blk.start, blk.end);
        if blk.first_in_stratum {
            // Empty the tree entry by entry: clearing all m ranks for each
            // of many strata would cost m times the number of strata.
            for &r in &rank[stratum_start..i] {
                at_risk.remove(r);
            }
            stratum_start = i;
        }
        // Censored at this time are at risk for the deaths at this time.
        for k in i..j {
            if status[k] == 0.0 {
                at_risk.add(rank[k]);
            }
        }
        let deaths = blk.deaths as u64;
        tied_y += deaths * deaths.saturating_sub(1) / 2;
        for k in i..j {
            if status[k] == 1.0 {
                let (lower, same, higher) = at_risk.split(rank[k]);
                as_event[k] = [lower, higher, same].map(C::from_count);
                conc += lower;
                disc += higher;
                tied_x += same;
            }
        }
        for k in i..j {
            if status[k] == 1.0 {
                at_risk.add(rank[k]);
            }
        }
    }
    drop(at_risk);
    let pairs = (conc + disc + tied_x) as f64;
    let somers = (conc as f64 - disc as f64) / pairs;
    let dfbeta = |c: u64, d: u64, t: u64| (c as f64 - d as f64) / pairs - somers / pairs * (c + d + t) as f64;
    // Walk back: the events at earlier times (and, for a censored subject,
    // at its own time) that each subject is at risk for.
    let mut events = RankCounts::<C>::new(m);
    let mut sum_sq = 0.0;
    // Rows i..stratum_end belong to the stratum being walked.
    let mut stratum_end = n;
    for blk in blocks.iter().rev() {
        let (i, j) = (blk.start, blk.end);
        // An event at risk for the events at earlier times: concordant when
        // the earlier event has the higher score.
        for k in i..j {
            if status[k] == 1.0 {
                let (lower, same, higher) = events.split(rank[k]);
                let [c, d, t] = as_event[k].map(Into::<u64>::into);
                sum_sq += dfbeta(c + higher, d + lower, t + same).powi(2);
            }
        }
        for k in i..j {
            if status[k] == 1.0 {
                events.add(rank[k]);
            }
        }
        // A censored subject is at risk for the events at its own time too.
        for k in i..j {
            if status[k] == 0.0 {
                let (lower, same, higher) = events.split(rank[k]);
                sum_sq += dfbeta(higher, lower, same).powi(2);
            }
        }
        if blk.first_in_stratum {
            for k in i..stratum_end {
                if status[k] == 1.0 {
                    events.remove(rank[k]);
                }
            }
            stratum_end = i;
        }
    }
    PairCounts { concordant: conc, discordant: disc, tied_risk: tied_x, tied_time: tied_y, variance: sum_sq / 4.0 }
}
