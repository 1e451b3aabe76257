//! Cox proportional hazards as `coxph` fits them: Efron or Breslow ties,
//! strata, Newton–Raphson started at 0 and stopped as `coxfit6` stops
//! (relative log-likelihood change <= 1e-9, at most 20 iterations, step
//! halving), with Wald, likelihood-ratio and score tests and the concordance
//! of the fitted risk score. The score and information are summed in
//! cache-sized groups of tie blocks (`CoxData::eval`).

use serde::Serialize;

use super::concordance::{concordance_sorted, Concordance};
use super::risk_set::{merge_near_ties, risk_order, tie_blocks, TieBlock};
use super::{check_surv, ChiTest};
use crate::dist::{p_two_sided_z, qnorm};
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

crate::spelling::spelled!(Ties, "ties method", ["efron" => Ties::Efron, "breslow" => Ties::Breslow]);

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
