//! Survival analysis as R's `survival` package computes it: Cox proportional
//! hazards (`coxph`, Efron or Breslow ties, strata, Newton–Raphson started
//! at 0 and stopped as `coxfit6` stops: relative log-likelihood change
//! <= 1e-9, at most 20 iterations, step halving), with Wald / likelihood-ratio
//! / score tests and Harrell's concordance (`concordance`, risk score order);
//! Kaplan–Meier (`survfit`) with Greenwood variance, log and log-log CIs and
//! the median with its CI (`print.survfit`); log-rank test (`survdiff`),
//! optionally stratified.

use serde::Serialize;

use crate::dist::{p_two_sided_z, pchisq_upper, qnorm};
use crate::error::{invalid, Result, StatsError};
use crate::glm::{check_design, Coefficient, Predictor};
use crate::linalg::{chol_inverse, chol_solve, cholesky, dot_lanes, wls};

/// How tied event times enter the Cox partial likelihood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ties {
    Efron,
    Breslow,
}

/// A chi-square test: statistic, degrees of freedom, p-value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ChiTest {
    pub statistic: f64,
    pub df: f64,
    pub p_value: f64,
}

impl ChiTest {
    fn new(statistic: f64, df: f64) -> Self {
        Self { statistic, df, p_value: pchisq_upper(statistic, df) }
    }
}

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

/// A fitted Cox model. Coefficients are log hazard ratios.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CoxFit {
    pub ties: Ties,
    pub coefficients: Vec<Coefficient>,
    pub covariance: Vec<f64>,
    pub loglik_null: f64,
    pub loglik: f64,
    pub likelihood_ratio: ChiTest,
    pub wald: ChiTest,
    pub score: ChiTest,
    pub concordance: Concordance,
    pub n: usize,
    pub events: usize,
    pub iterations: usize,
}

/// Validates survival outcome columns.
pub(crate) fn check_surv(analysis: &str, time: &[f64], status: &[f64]) -> Result<()> {
    if time.is_empty() {
        return Err(StatsError::NoRows { analysis: analysis.into(), rows_in: 0, rows_dropped: 0 });
    }
    if time.len() != status.len() {
        return Err(invalid(analysis, format!("time has {} rows, status has {}", time.len(), status.len())));
    }
    for (i, t) in time.iter().enumerate() {
        if !t.is_finite() {
            return Err(StatsError::InvalidValue {
                analysis: analysis.into(),
                column: "time".into(),
                row: i + 1,
                value: *t,
                expected: "expected a finite time; remove missing values first (listwise deletion)".into(),
            });
        }
        if *t < 0.0 {
            return Err(StatsError::NegativeTime { analysis: analysis.into(), row: i + 1, value: *t });
        }
    }
    for (i, s) in status.iter().enumerate() {
        if *s != 0.0 && *s != 1.0 {
            return Err(StatsError::InvalidValue {
                analysis: analysis.into(),
                column: "status".into(),
                row: i + 1,
                value: *s,
                expected: "expected 1 (event) or 0 (censored)".into(),
            });
        }
    }
    if status.iter().all(|s| *s == 0.0) {
        return Err(StatsError::AllCensored { analysis: analysis.into(), n: time.len() });
    }
    Ok(())
}

/// An order-preserving map of a finite f64 to u64 (-0.0 and 0.0 alike), so
/// that sorting plain integer keys sorts the numbers.
fn order_key(v: f64) -> u64 {
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
fn risk_order(time: &[f64], strata: Option<&[f64]>) -> Vec<usize> {
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
fn merge_near_ties(time: &mut [f64], descending: bool) {
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
struct TieBlock {
    start: usize,
    end: usize,
    deaths: usize,
    /// The block with the latest time of its stratum: the risk sets restart.
    first_in_stratum: bool,
}

/// Rows per group of tie blocks: ten columns of 1024 rows (80 KiB) stay in
/// the L2 cache between the passes over a group.
const GROUP_ROWS: usize = 1024;

/// Runs of consecutive blocks with at least `GROUP_ROWS` rows (the last may
/// have fewer).
fn block_groups(blocks: &[TieBlock]) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut first = 0;
    for (b, blk) in blocks.iter().enumerate() {
        if blk.end - blocks[first].start >= GROUP_ROWS || b + 1 == blocks.len() {
            groups.push(first..b + 1);
            first = b + 1;
        }
    }
    groups
}

/// The tie blocks of data in risk order.
fn tie_blocks(time: &[f64], status: &[f64], stratum: &[f64]) -> Vec<TieBlock> {
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

/// The Cox data in risk order, laid out for the Newton iterations.
struct CoxData {
    /// Covariates, column-major (column c is x[c * n..(c + 1) * n]),
    /// centred, in risk order.
    x: Vec<f64>,
    /// 1.0 for an event, 0.0 for censored, in risk order.
    status: Vec<f64>,
    blocks: Vec<TieBlock>,
    /// Consecutive tie blocks grouped into runs of at least `GROUP_ROWS` rows
    /// (or one larger block): the unit of work that stays in cache.
    groups: Vec<std::ops::Range<usize>>,
    /// Sum of the covariates over the events: the part of the score and of
    /// the log-likelihood (times beta) that does not depend on beta.
    x_events: Vec<f64>,
    n: usize,
    p: usize,
}

/// Per-row buffers reused by every evaluation (no allocation per iteration).
struct CoxWork {
    eta: Vec<f64>,
    /// exp(eta).
    risk: Vec<f64>,
    /// exp(eta) for events, 0 for censored rows.
    risk_events: Vec<f64>,
    /// The weight of each row's x x' in the information matrix.
    weight: Vec<f64>,
    /// Per tie block: sum over the Efron steps of mult / denom, and of
    /// mult * frac / denom (the hazard increment and its event share).
    hazard: Vec<(f64, f64)>,
}

impl CoxWork {
    fn new(data: &CoxData) -> Self {
        Self {
            eta: vec![0.0; data.n],
            risk: vec![0.0; data.n],
            risk_events: vec![0.0; data.n],
            weight: vec![0.0; data.n],
            hazard: vec![(0.0, 0.0); data.blocks.len()],
        }
    }
}

struct CoxEval {
    loglik: f64,
    u: Vec<f64>,
    imat: Vec<f64>,
}

impl CoxData {
    fn column(&self, c: usize) -> &[f64] {
        &self.x[c * self.n..(c + 1) * self.n]
    }

    /// eta = X beta, in risk order.
    /// eta = X beta, in risk order.
    fn linear_predictor(&self, beta: &[f64], eta: &mut [f64]) {
        const BLOCK: usize = 2048;
        let mut start = 0;
        while start < self.n {
            let end = (start + BLOCK).min(self.n);
            self.linear_predictor_rows(beta, start, end, &mut eta[start..end]);
            start = end;
        }
    }

    /// out = (X beta)[start..end].
    #[inline(always)]
    fn linear_predictor_rows(&self, beta: &[f64], start: usize, end: usize, out: &mut [f64]) {
        out.iter_mut().for_each(|v| *v = 0.0);
        for (c, b) in beta.iter().enumerate() {
            for (o, x) in out.iter_mut().zip(&self.column(c)[start..end]) {
                *o += x * b;
            }
        }
    }

    /// Partial log-likelihood, score and information at beta.
    ///
    /// `coxfit6` accumulates the weighted sums of x x' row by row (p^2 / 2
    /// products per row, twice for events). Here the sums are exchanged: the
    /// information is sum_t sum_k [(S2 - f_k D2) / den_k - a_k a_k'] over
    /// event times t and Efron steps k, and S2 (resp. D2) is a sum over the
    /// risk set (resp. the events) at t, so each row's r x x' enters once,
    /// weighted by the sum of mult / den_k over the event times at which it
    /// is at risk (minus its own time's mult f_k / den_k if it is an event):
    /// one weighted Gram matrix X' diag(w) X, computed column-major in
    /// cache-sized blocks. The a_k a_k' terms, with a_k = (S1 - f_k D1) /
    /// den_k, expand into three outer products per event time. The sums are
    /// the same, in a different order.
    fn eval(&self, beta: &[f64], ties: Ties, work: &mut CoxWork) -> CoxEval {
        // The same code compiled for wider vectors where the CPU has them
        // (the build targets baseline x86-64, i.e. SSE2). Each lane sums the
        // same terms in the same order, so the result is bit-identical.
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU supports AVX-512F (checked above).
                return unsafe { self.eval_avx512(beta, ties, work) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked above).
                return unsafe { self.eval_avx2(beta, ties, work) };
            }
        }
        self.eval_portable(beta, ties, work)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn eval_avx512(&self, beta: &[f64], ties: Ties, work: &mut CoxWork) -> CoxEval {
        self.eval_portable(beta, ties, work)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn eval_avx2(&self, beta: &[f64], ties: Ties, work: &mut CoxWork) -> CoxEval {
        self.eval_portable(beta, ties, work)
    }

    #[inline(always)]
    fn eval_portable(&self, beta: &[f64], ties: Ties, work: &mut CoxWork) -> CoxEval {
        let (n, p) = (self.n, self.p);
        let mut loglik: f64 = beta.iter().zip(&self.x_events).map(|(b, x)| b * x).sum();
        let mut u = self.x_events.clone();
        // Lower triangle of sum_t sum_k mult a_k a_k'.
        let mut outer = RankOneBatch::new(p);
        let mut s0 = 0.0;
        let mut s1 = vec![0.0; p];
        let mut d1 = vec![0.0; p];
        // Forward in risk order, one group of tie blocks at a time, so that
        // the rows read for the linear predictor are still in cache for the
        // risk-set sums.
        for group in &self.groups {
            let (gs, ge) = (self.blocks[group.start].start, self.blocks[group.end - 1].end);
            let eta = &mut work.eta[gs..ge];
            self.linear_predictor_rows(beta, gs, ge, eta);
            for (((r, re), eta), s) in work.risk[gs..ge]
                .iter_mut()
                .zip(work.risk_events[gs..ge].iter_mut())
                .zip(eta.iter())
                .zip(&self.status[gs..ge])
            {
                *r = eta.clamp(-200.0, 22.0).exp();
                *re = *r * s;
            }
            for (blk, hz) in self.blocks[group.clone()].iter().zip(work.hazard[group.clone()].iter_mut()) {
                if blk.first_in_stratum {
                    s0 = 0.0;
                    s1.iter_mut().for_each(|v| *v = 0.0);
                }
                let (i, j) = (blk.start, blk.end);
                let risk = &work.risk[i..j];
                s0 += risk.iter().sum::<f64>();
                for (c, s) in s1.iter_mut().enumerate() {
                    *s += dot_lanes(risk, &self.column(c)[i..j]);
                }
                if blk.deaths == 0 {
                    *hz = (0.0, 0.0);
                    continue;
                }
                // The events' own sums enter only Efron's steps after the
                // first (frac > 0).
                let d0 = if ties == Ties::Efron && blk.deaths > 1 {
                    let risk_events = &work.risk_events[i..j];
                    for (c, d) in d1.iter_mut().enumerate() {
                        *d = dot_lanes(risk_events, &self.column(c)[i..j]);
                    }
                    risk_events.iter().sum()
                } else {
                    d1.iter_mut().for_each(|d| *d = 0.0);
                    0.0
                };
                let dd = blk.deaths as f64;
                let (steps, mult) = match ties {
                    Ties::Efron => (blk.deaths, 1.0),
                    Ties::Breslow => (1, dd),
                };
                let (mut h, mut h_frac) = (0.0, 0.0);
                let (mut sa, mut sb, mut sc) = (0.0, 0.0, 0.0);
                for k in 0..steps {
                    let frac = match ties {
                        Ties::Efron => k as f64 / dd,
                        Ties::Breslow => 0.0,
                    };
                    let denom = s0 - frac * d0;
                    loglik -= mult * denom.ln();
                    let inv = mult / denom;
                    h += inv;
                    h_frac += frac * inv;
                    let inv2 = inv / denom;
                    sa += inv2;
                    sb += frac * inv2;
                    sc += frac * frac * inv2;
                }
                for c in 0..p {
                    u[c] -= s1[c] * h - d1[c] * h_frac;
                }
                // S1 S1' sa - (S1 D1' + D1 S1') sb + D1 D1' sc as two
                // weighted rank-one terms (sa sc >= sb^2, so both weights
                // are >= 0); sb = 0 for one event or Breslow ties.
                if sb == 0.0 {
                    outer.push(|c| s1[c], sa);
                } else {
                    let shift = sb / sa;
                    outer.push(|c| s1[c] - shift * d1[c], sa);
                    outer.push(|c| d1[c], sc - sb * shift);
                }
                *hz = (h, h_frac);
            }
        }
        // Backward: each row's weight is the hazard summed over the event
        // times at which it is at risk (its own and later blocks of its
        // stratum in risk order, i.e. earlier times); each group's weights
        // go into the Gram matrix while the group is in cache.
        let mut imat = vec![0.0; p * p];
        let mut cumulative = 0.0;
        for group in self.groups.iter().rev() {
            for (blk, &(h, h_frac)) in self.blocks[group.clone()].iter().zip(&work.hazard[group.clone()]).rev() {
                cumulative += h;
                let (i, j) = (blk.start, blk.end);
                for ((w, r), re) in work.weight[i..j].iter_mut().zip(&work.risk[i..j]).zip(&work.risk_events[i..j]) {
                    *w = r * cumulative - re * h_frac;
                }
                if blk.first_in_stratum {
                    cumulative = 0.0;
                }
            }
            let (gs, ge) = (self.blocks[group.start].start, self.blocks[group.end - 1].end);
            weighted_gram_lower(&self.x, n, p, gs, ge, &work.weight, &mut imat);
        }
        let outer = outer.finish();
        for c in 0..p {
            for b in 0..=c {
                imat[c * p + b] -= outer[c * p + b];
                imat[b * p + c] = imat[c * p + b];
            }
        }
        CoxEval { loglik, u, imat }
    }
}

/// The sum of weighted rank-one terms w v v' (lower triangle, row-major
/// p x p), with the vectors collected column-major and added in batches as
/// one Gram matrix each: one term per event time, so p^2 / 2 scalar updates
/// per event would dominate data without ties.
struct RankOneBatch {
    p: usize,
    vectors: Vec<f64>,
    weights: Vec<f64>,
    len: usize,
    sum: Vec<f64>,
}

impl RankOneBatch {
    const CAPACITY: usize = 256;

    fn new(p: usize) -> Self {
        Self {
            p,
            vectors: vec![0.0; p * Self::CAPACITY],
            weights: vec![0.0; Self::CAPACITY],
            len: 0,
            sum: vec![0.0; p * p],
        }
    }

    /// Adds w v v' with v[c] = v(c).
    #[inline(always)]
    fn push(&mut self, v: impl Fn(usize) -> f64, w: f64) {
        for c in 0..self.p {
            self.vectors[c * Self::CAPACITY + self.len] = v(c);
        }
        self.weights[self.len] = w;
        self.len += 1;
        if self.len == Self::CAPACITY {
            self.flush();
        }
    }

    #[inline(always)]
    fn flush(&mut self) {
        weighted_gram_lower(&self.vectors, Self::CAPACITY, self.p, 0, self.len, &self.weights, &mut self.sum);
        self.len = 0;
    }

    #[inline(always)]
    fn finish(mut self) -> Vec<f64> {
        self.flush();
        self.sum
    }
}

/// out[a][b] += sum_i w_i x_ia x_ib over rows `from..to`, for b <= a (lower
/// triangle, row-major p x p), with x column-major n x p, in blocks of rows
/// that stay in cache.
#[inline(always)]
fn weighted_gram_lower(x: &[f64], n: usize, p: usize, from: usize, to: usize, w: &[f64], out: &mut [f64]) {
    const BLOCK: usize = 512;
    let mut wx = [0.0; BLOCK];
    let mut start = from;
    while start < to {
        let end = (start + BLOCK).min(to);
        let m = end - start;
        for a in 0..p {
            let xa = &x[a * n + start..a * n + end];
            for ((t, xv), wv) in wx[..m].iter_mut().zip(xa).zip(&w[start..end]) {
                *t = xv * wv;
            }
            for b in 0..=a {
                out[a * p + b] += dot_lanes(&wx[..m], &x[b * n + start..b * n + end]);
            }
        }
        start = end;
    }
}

/// Fits a Cox model of (time, status) on the predictors, optionally
/// stratified (R: `coxph(Surv(time, status) ~ x + strata(s), ties = ...)`).
pub fn coxph(
    time: &[f64],
    status: &[f64],
    x: &[Predictor],
    strata: Option<&[f64]>,
    ties: Ties,
    conf_level: f64,
) -> Result<CoxFit> {
    let analysis = "Cox model";
    check_surv(analysis, time, status)?;
    check_design(analysis, time, x)?;
    if x.is_empty() {
        return Err(invalid(analysis, "no covariates given; use km or logrank for a model without covariates"));
    }
    if let Some(s) = strata {
        if s.len() != time.len() || s.iter().any(|v| !v.is_finite()) {
            return Err(invalid(analysis, "strata must have one finite value per row"));
        }
    }
    let n = time.len();
    let p = x.len();
    // Collinearity check on the design with an intercept, as lm would see it.
    let names: Vec<String> =
        std::iter::once("(Intercept)".to_string()).chain(x.iter().map(|c| c.name.to_string())).collect();
    let ones = vec![1.0; n];
    let cols: Vec<&[f64]> = std::iter::once(&ones[..]).chain(x.iter().map(|c| c.values)).collect();
    if let Err(e) = wls(&cols, time, None, 1e-7) {
        return Err(StatsError::SingularDesign { analysis: analysis.into(), column: names[e.0].clone() });
    }
    drop(ones);
    let order = risk_order(time, strata);
    let means: Vec<f64> = x.iter().map(|c| c.values.iter().sum::<f64>() / n as f64).collect();
    let mut xs = vec![0.0; n * p];
    for ((col, pred), mean) in xs.chunks_exact_mut(n).zip(x).zip(&means) {
        for (dst, &i) in col.iter_mut().zip(&order) {
            *dst = pred.values[i] - mean;
        }
    }
    let mut sorted_time: Vec<f64> = order.iter().map(|&i| time[i]).collect();
    merge_near_ties(&mut sorted_time, strata.is_none());
    let sorted_status: Vec<f64> = order.iter().map(|&i| status[i]).collect();
    let stratum: Vec<f64> = match strata {
        Some(s) => order.iter().map(|&i| s[i]).collect(),
        None => vec![0.0; n],
    };
    drop(order);
    let x_events = xs.chunks_exact(n).map(|col| dot_lanes(col, &sorted_status)).collect();
    let blocks = tie_blocks(&sorted_time, &sorted_status, &stratum);
    let data = CoxData { groups: block_groups(&blocks), blocks, x: xs, status: sorted_status, x_events, n, p };
    let mut work = CoxWork::new(&data);
    let toler = f64::EPSILON.powf(0.75);
    let eps = 1e-9;
    let maxiter = 20;
    let mut beta = vec![0.0; p];
    let first = data.eval(&beta, ties, &mut work);
    let loglik_null = first.loglik;
    let singular = |e: crate::linalg::RankDeficient| StatsError::SingularDesign {
        analysis: analysis.into(),
        column: x[e.0].name.to_string(),
    };
    let mut l = first.imat.clone();
    cholesky(&mut l, p, toler).map_err(singular)?;
    let step = chol_solve(&l, p, &first.u);
    let score_stat: f64 = step.iter().zip(&first.u).map(|(a, b)| a * b).sum();
    let mut newbeta: Vec<f64> = beta.iter().zip(&step).map(|(b, s)| b + s).collect();
    let mut loglik = loglik_null;
    let mut halving = false;
    let mut result = None;
    let mut iterations = 0;
    for iter in 1..=maxiter {
        iterations = iter;
        let ev = data.eval(&newbeta, ties, &mut work);
        if !ev.loglik.is_finite() {
            return Err(StatsError::NoConvergence { analysis: analysis.into(), iterations: iter });
        }
        if (1.0 - loglik / ev.loglik).abs() <= eps && !halving {
            result = Some((newbeta.clone(), ev));
            break;
        }
        if iter == maxiter {
            break;
        }
        if ev.loglik < loglik {
            halving = true;
            newbeta = newbeta.iter().zip(&beta).map(|(nb, b)| (nb + b) / 2.0).collect();
        } else {
            halving = false;
            loglik = ev.loglik;
            let mut l = ev.imat.clone();
            cholesky(&mut l, p, toler).map_err(singular)?;
            let step = chol_solve(&l, p, &ev.u);
            beta = newbeta.clone();
            newbeta = newbeta.iter().zip(&step).map(|(b, s)| b + s).collect();
        }
    }
    let Some((beta, ev)) = result else {
        return Err(StatsError::NoConvergence { analysis: analysis.into(), iterations });
    };
    let mut l = ev.imat.clone();
    cholesky(&mut l, p, toler).map_err(singular)?;
    let covariance = chol_inverse(&l, p);
    let wald: f64 = (0..p).map(|a| (0..p).map(|b| beta[a] * ev.imat[a * p + b] * beta[b]).sum::<f64>()).sum();
    let level = if conf_level > 0.0 { conf_level } else { 0.95 };
    let z = qnorm(0.5 + level / 2.0);
    let coefficients = (0..p)
        .map(|j| {
            let se = covariance[j * p + j].sqrt();
            Coefficient {
                term: names[j + 1].clone(),
                estimate: beta[j],
                std_error: se,
                statistic: beta[j] / se,
                p_value: p_two_sided_z(beta[j] / se),
                conf_low: beta[j] - z * se,
                conf_high: beta[j] + z * se,
            }
        })
        .collect();
    // The linear predictor at the estimate, unclamped, for the concordance.
    let mut lp = std::mem::take(&mut work.eta);
    data.linear_predictor(&beta, &mut lp);
    drop(work);
    let concordance = concordance_sorted(&sorted_time, &data.status, &stratum, &lp);
    Ok(CoxFit {
        ties,
        coefficients,
        covariance,
        loglik_null,
        loglik: ev.loglik,
        likelihood_ratio: ChiTest::new(2.0 * (ev.loglik - loglik_null), p as f64),
        wald: ChiTest::new(wald, p as f64),
        score: ChiTest::new(score_stat, p as f64),
        concordance,
        n,
        events: status.iter().filter(|s| **s == 1.0).count(),
        iterations,
    })
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
fn concordance_sorted(time: &[f64], status: &[f64], stratum: &[f64], score: &[f64]) -> Concordance {
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

/// Confidence interval type for Kaplan–Meier curves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfType {
    Log,
    LogLog,
}

/// One Kaplan–Meier curve (one group).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KmCurve {
    pub group: f64,
    pub n: usize,
    pub events: usize,
    /// One entry per distinct time in the group (events or censorings).
    pub time: Vec<f64>,
    pub n_risk: Vec<f64>,
    pub n_event: Vec<f64>,
    pub n_censor: Vec<f64>,
    pub surv: Vec<f64>,
    /// Greenwood standard error of -log S (as `survfit`'s `std.err`).
    pub std_err: Vec<f64>,
    /// CI bounds; NaN where R reports NA (S = 0, or S = 1 for log-log).
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    /// Median survival and its CI; NaN where not reached.
    pub median: f64,
    pub median_lower: f64,
    pub median_upper: f64,
}

/// Kaplan–Meier curves of (time, status) for each value of `group`
/// (R: `survfit(Surv(time, status) ~ group, conf.type = ...)`).
pub fn kaplan_meier(
    time: &[f64],
    status: &[f64],
    group: Option<&[f64]>,
    conf: ConfType,
    conf_level: f64,
) -> Result<Vec<KmCurve>> {
    let analysis = "Kaplan-Meier";
    check_surv(analysis, time, status)?;
    // Times equal up to rounding error are ties, as in R (timefix).
    let mut fixed = time.to_vec();
    merge_near_ties(&mut fixed, false);
    let time = &fixed[..];
    let zeros = vec![0.0; time.len()];
    let g = group.unwrap_or(&zeros);
    let mut levels: Vec<f64> = g.to_vec();
    levels.sort_by(|a, b| a.total_cmp(b));
    levels.dedup();
    let level = if conf_level > 0.0 { conf_level } else { 0.95 };
    let z = qnorm(1.0 - (1.0 - level) / 2.0);
    let mut out = Vec::new();
    for lv in levels {
        let mut rows: Vec<(f64, f64)> =
            time.iter().zip(status).zip(g).filter(|(_, gi)| **gi == lv).map(|((t, s), _)| (*t, *s)).collect();
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        let n = rows.len();
        let mut c = KmCurve {
            group: lv,
            n,
            events: rows.iter().filter(|r| r.1 == 1.0).count(),
            time: vec![],
            n_risk: vec![],
            n_event: vec![],
            n_censor: vec![],
            surv: vec![],
            std_err: vec![],
            lower: vec![],
            upper: vec![],
            median: f64::NAN,
            median_lower: f64::NAN,
            median_upper: f64::NAN,
        };
        let (mut s, mut var) = (1.0, 0.0);
        let mut i = 0;
        while i < n {
            let t = rows[i].0;
            let mut j = i;
            while j < n && rows[j].0 == t {
                j += 1;
            }
            let at_risk = (n - i) as f64;
            let d = rows[i..j].iter().filter(|r| r.1 == 1.0).count() as f64;
            s *= 1.0 - d / at_risk;
            if d > 0.0 {
                var += d / (at_risk * (at_risk - d));
            }
            let se = var.sqrt();
            let (lo, hi) = match conf {
                ConfType::Log => {
                    if s == 0.0 {
                        (f64::NAN, f64::NAN)
                    } else {
                        ((s.ln() - z * se).exp(), (s.ln() + z * se).exp().min(1.0))
                    }
                }
                ConfType::LogLog => {
                    if s == 0.0 || s == 1.0 {
                        (f64::NAN, f64::NAN)
                    } else {
                        let se2 = z * se / s.ln();
                        ((-((-s.ln()).ln() - se2).exp()).exp(), (-((-s.ln()).ln() + se2).exp()).exp())
                    }
                }
            };
            c.time.push(t);
            c.n_risk.push(at_risk);
            c.n_event.push(d);
            c.n_censor.push((j - i) as f64 - d);
            c.surv.push(s);
            c.std_err.push(se);
            c.lower.push(lo);
            c.upper.push(hi);
            i = j;
        }
        c.median = minmin(&c.surv, &c.time);
        c.median_lower = minmin(&c.lower, &c.time);
        c.median_upper = minmin(&c.upper, &c.time);
        out.push(c);
    }
    Ok(out)
}

/// The first time the curve `y` reaches 0.5 (R's `survmean` rule: a curve
/// flat at exactly 0.5 gives the midpoint to the next drop).
fn minmin(y: &[f64], x: &[f64]) -> f64 {
    let tol = f64::EPSILON.sqrt();
    let keep: Vec<(f64, f64)> =
        y.iter().zip(x).filter(|(v, _)| !v.is_nan() && **v < 0.5 + tol).map(|(v, t)| (*v, *t)).collect();
    let Some(&(y1, x1)) = keep.first() else {
        return f64::NAN;
    };
    if (y1 - 0.5).abs() < tol {
        if let Some(&(_, x2)) = keep.iter().find(|(v, _)| *v < y1) {
            return (x1 + x2) / 2.0;
        }
    }
    x1
}

/// Log-rank test result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogRank {
    pub groups: Vec<f64>,
    pub observed: Vec<f64>,
    pub expected: Vec<f64>,
    pub test: ChiTest,
}

/// Log-rank test of survival across groups, optionally stratified
/// (R: `survdiff(Surv(time, status) ~ group + strata(s))`).
pub fn logrank(time: &[f64], status: &[f64], group: &[f64], strata: Option<&[f64]>) -> Result<LogRank> {
    let analysis = "log-rank test";
    check_surv(analysis, time, status)?;
    // Times equal up to rounding error are ties, as in R (timefix).
    let mut fixed = time.to_vec();
    merge_near_ties(&mut fixed, false);
    let time = &fixed[..];
    let mut groups: Vec<f64> = group.to_vec();
    if let Some(i) = groups.iter().position(|v| !v.is_finite()) {
        return Err(StatsError::InvalidValue {
            analysis: analysis.into(),
            column: "group".into(),
            row: i + 1,
            value: groups[i],
            expected: "expected a finite group code".into(),
        });
    }
    groups.sort_by(|a, b| a.total_cmp(b));
    groups.dedup();
    let k = groups.len();
    if k < 2 {
        return Err(invalid(analysis, "all rows are in one group; need at least 2 groups"));
    }
    let gi: Vec<usize> = group.iter().map(|v| groups.iter().position(|g| g == v).unwrap()).collect();
    let order = risk_order(time, strata);
    // Walk each stratum in ascending time: reverse of the risk order.
    let mut observed = vec![0.0; k];
    let mut expected = vec![0.0; k];
    let mut v = vec![0.0; k * k];
    let stratum_of = |i: usize| strata.map_or(0.0, |s| s[i]);
    let mut start = 0;
    while start < order.len() {
        let mut end = start;
        while end < order.len() && stratum_of(order[end]) == stratum_of(order[start]) {
            end += 1;
        }
        let idx: Vec<usize> = order[start..end].iter().rev().copied().collect();
        let mut at_risk = vec![0.0; k];
        for &i in &idx {
            at_risk[gi[i]] += 1.0;
        }
        let mut a = 0;
        while a < idx.len() {
            let t = time[idx[a]];
            let mut b = a;
            let mut d = vec![0.0; k];
            let mut leaving = vec![0.0; k];
            while b < idx.len() && time[idx[b]] == t {
                let i = idx[b];
                d[gi[i]] += status[i];
                leaving[gi[i]] += 1.0;
                b += 1;
            }
            let dt: f64 = d.iter().sum();
            let nt: f64 = at_risk.iter().sum();
            if dt > 0.0 {
                for g in 0..k {
                    observed[g] += d[g];
                    expected[g] += at_risk[g] * dt / nt;
                }
                if nt > 1.0 {
                    let f = dt * (nt - dt) / (nt - 1.0);
                    for g in 0..k {
                        for h in 0..k {
                            let delta = if g == h { 1.0 } else { 0.0 };
                            v[g * k + h] += f * (at_risk[g] / nt) * (delta - at_risk[h] / nt);
                        }
                    }
                }
            }
            for g in 0..k {
                at_risk[g] -= leaving[g];
            }
            a = b;
        }
        start = end;
    }
    let m = k - 1;
    let mut sub = vec![0.0; m * m];
    for g in 0..m {
        for h in 0..m {
            sub[g * m + h] = v[g * k + h];
        }
    }
    let diff: Vec<f64> = (0..m).map(|g| observed[g] - expected[g]).collect();
    let mut l = sub.clone();
    cholesky(&mut l, m, 1e-10)
        .map_err(|_| invalid(analysis, "a group has no one at risk at any event time; drop it"))?;
    let sol = chol_solve(&l, m, &diff);
    let stat: f64 = sol.iter().zip(&diff).map(|(a, b)| a * b).sum();
    Ok(LogRank { groups, observed, expected, test: ChiTest::new(stat, m as f64) })
}
