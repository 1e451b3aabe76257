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
use crate::glm::{check_design, design_columns, Coefficient, Predictor};
use crate::linalg::{chol_inverse, chol_solve, cholesky, wls};

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
        Self {
            statistic,
            df,
            p_value: pchisq_upper(statistic, df),
        }
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
        return Err(StatsError::NoRows {
            analysis: analysis.into(),
            rows_in: 0,
            rows_dropped: 0,
        });
    }
    if time.len() != status.len() {
        return Err(invalid(
            analysis,
            format!("time has {} rows, status has {}", time.len(), status.len()),
        ));
    }
    for (i, t) in time.iter().enumerate() {
        if !t.is_finite() {
            return Err(StatsError::InvalidValue {
                analysis: analysis.into(),
                column: "time".into(),
                row: i + 1,
                value: *t,
                expected: "expected a finite time; remove missing values first (listwise deletion)"
                    .into(),
            });
        }
        if *t < 0.0 {
            return Err(StatsError::NegativeTime {
                analysis: analysis.into(),
                row: i + 1,
                value: *t,
            });
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
        return Err(StatsError::AllCensored {
            analysis: analysis.into(),
            n: time.len(),
        });
    }
    Ok(())
}

/// Risk-set order: by stratum, then time descending, deaths before censored
/// at the same time is irrelevant (all tied times enter the risk set together).
fn risk_order(time: &[f64], strata: Option<&[f64]>) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..time.len()).collect();
    idx.sort_by(|&a, &b| {
        let sa = strata.map_or(0.0, |s| s[a]);
        let sb = strata.map_or(0.0, |s| s[b]);
        sa.total_cmp(&sb).then(time[b].total_cmp(&time[a]))
    });
    idx
}

struct CoxData {
    /// Covariates, row-major n x p, centred, in risk order.
    x: Vec<f64>,
    time: Vec<f64>,
    status: Vec<f64>,
    stratum: Vec<f64>,
    n: usize,
    p: usize,
}

struct CoxEval {
    loglik: f64,
    u: Vec<f64>,
    imat: Vec<f64>,
}

impl CoxData {
    /// Partial log-likelihood, score and information at beta.
    fn eval(&self, beta: &[f64], ties: Ties, need_imat: bool) -> CoxEval {
        let (n, p) = (self.n, self.p);
        let mut loglik = 0.0;
        let mut u = vec![0.0; p];
        let mut imat = vec![0.0; p * p];
        let mut s1 = vec![0.0; p];
        let mut s2 = vec![0.0; p * p];
        let mut d1 = vec![0.0; p];
        let mut d2 = vec![0.0; p * p];
        let mut a = vec![0.0; p];
        let mut s0 = 0.0;
        let mut i = 0;
        while i < n {
            if i == 0 || self.stratum[i] != self.stratum[i - 1] {
                s0 = 0.0;
                s1.iter_mut().for_each(|v| *v = 0.0);
                s2.iter_mut().for_each(|v| *v = 0.0);
            }
            // The block of rows with the same time (and stratum).
            let mut j = i;
            while j < n && self.time[j] == self.time[i] && self.stratum[j] == self.stratum[i] {
                j += 1;
            }
            let mut d0 = 0.0;
            let mut deaths = 0usize;
            d1.iter_mut().for_each(|v| *v = 0.0);
            if need_imat {
                d2.iter_mut().for_each(|v| *v = 0.0);
            }
            for k in i..j {
                let xk = &self.x[k * p..(k + 1) * p];
                let eta: f64 = xk
                    .iter()
                    .zip(beta)
                    .map(|(x, b)| x * b)
                    .sum::<f64>()
                    .clamp(-200.0, 22.0);
                let r = eta.exp();
                s0 += r;
                for a in 0..p {
                    s1[a] += r * xk[a];
                }
                if need_imat {
                    add_outer_lower(&mut s2, xk, r, p);
                }
                if self.status[k] == 1.0 {
                    deaths += 1;
                    d0 += r;
                    loglik += eta;
                    for a in 0..p {
                        d1[a] += r * xk[a];
                        u[a] += xk[a];
                    }
                    if need_imat {
                        add_outer_lower(&mut d2, xk, r, p);
                    }
                }
            }
            if deaths > 0 {
                let dd = deaths as f64;
                let steps = match ties {
                    Ties::Efron => deaths,
                    Ties::Breslow => 1,
                };
                let mult = match ties {
                    Ties::Efron => 1.0,
                    Ties::Breslow => dd,
                };
                for k in 0..steps {
                    let frac = match ties {
                        Ties::Efron => k as f64 / dd,
                        Ties::Breslow => 0.0,
                    };
                    let denom = s0 - frac * d0;
                    loglik -= mult * denom.ln();
                    for c in 0..p {
                        a[c] = (s1[c] - frac * d1[c]) / denom;
                        u[c] -= mult * a[c];
                    }
                    if need_imat {
                        let inv = mult / denom;
                        for c in 0..p {
                            let lo = c * p;
                            let ac = mult * a[c];
                            let row = &mut imat[lo..=lo + c];
                            for (((m, s2v), d2v), ab) in row
                                .iter_mut()
                                .zip(&s2[lo..=lo + c])
                                .zip(&d2[lo..=lo + c])
                                .zip(&a[..=c])
                            {
                                *m += (s2v - frac * d2v) * inv - ac * ab;
                            }
                        }
                    }
                }
            }
            i = j;
        }
        for c in 0..p {
            for b in 0..c {
                imat[b * p + c] = imat[c * p + b];
            }
        }
        CoxEval { loglik, u, imat }
    }
}

/// m[a][b] += r x[a] x[b] for b <= a (lower triangle, row-major p x p).
#[inline]
fn add_outer_lower(m: &mut [f64], x: &[f64], r: f64, p: usize) {
    for a in 0..p {
        let ra = r * x[a];
        let lo = a * p;
        for (mv, xb) in m[lo..=lo + a].iter_mut().zip(&x[..=a]) {
            *mv += ra * xb;
        }
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
        return Err(invalid(
            analysis,
            "no covariates given; use km or logrank for a model without covariates",
        ));
    }
    if let Some(s) = strata {
        if s.len() != time.len() || s.iter().any(|v| !v.is_finite()) {
            return Err(invalid(
                analysis,
                "strata must have one finite value per row",
            ));
        }
    }
    let n = time.len();
    let p = x.len();
    // Collinearity check on the design with an intercept, as lm would see it.
    let (names, cols) = design_columns(n, x);
    if let Err(e) = wls(&cols, time, None, 1e-7) {
        return Err(StatsError::SingularDesign {
            analysis: analysis.into(),
            column: names[e.0].clone(),
        });
    }
    let order = risk_order(time, strata);
    let means: Vec<f64> = x
        .iter()
        .map(|c| c.values.iter().sum::<f64>() / n as f64)
        .collect();
    let mut xs = vec![0.0; n * p];
    for (r, &i) in order.iter().enumerate() {
        for (c, pred) in x.iter().enumerate() {
            xs[r * p + c] = pred.values[i] - means[c];
        }
    }
    let data = CoxData {
        x: xs,
        time: order.iter().map(|&i| time[i]).collect(),
        status: order.iter().map(|&i| status[i]).collect(),
        stratum: order
            .iter()
            .map(|&i| strata.map_or(0.0, |s| s[i]))
            .collect(),
        n,
        p,
    };
    let toler = f64::EPSILON.powf(0.75);
    let eps = 1e-9;
    let maxiter = 20;
    let mut beta = vec![0.0; p];
    let first = data.eval(&beta, ties, true);
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
        let ev = data.eval(&newbeta, ties, true);
        if !ev.loglik.is_finite() {
            return Err(StatsError::NoConvergence {
                analysis: analysis.into(),
                iterations: iter,
            });
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
            newbeta = newbeta
                .iter()
                .zip(&beta)
                .map(|(nb, b)| (nb + b) / 2.0)
                .collect();
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
        return Err(StatsError::NoConvergence {
            analysis: analysis.into(),
            iterations,
        });
    };
    let mut l = ev.imat.clone();
    cholesky(&mut l, p, toler).map_err(singular)?;
    let covariance = chol_inverse(&l, p);
    let wald: f64 = (0..p)
        .map(|a| {
            (0..p)
                .map(|b| beta[a] * ev.imat[a * p + b] * beta[b])
                .sum::<f64>()
        })
        .sum();
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
    let lp: Vec<f64> = (0..n)
        .map(|r| (0..p).map(|c| data.x[r * p + c] * beta[c]).sum())
        .collect();
    let concordance = concordance_sorted(&data.time, &data.status, &data.stratum, &lp);
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
pub fn concordance(
    time: &[f64],
    status: &[f64],
    strata: Option<&[f64]>,
    score: &[f64],
) -> Concordance {
    let order = risk_order(time, strata);
    let t: Vec<f64> = order.iter().map(|&i| time[i]).collect();
    let s: Vec<f64> = order.iter().map(|&i| status[i]).collect();
    let st: Vec<f64> = order
        .iter()
        .map(|&i| strata.map_or(0.0, |v| v[i]))
        .collect();
    let sc: Vec<f64> = order.iter().map(|&i| score[i]).collect();
    concordance_sorted(&t, &s, &st, &sc)
}

/// Concordance on data in risk order (stratum, time descending), in
/// O(n log n) with a Fenwick tree over score ranks.
fn concordance_sorted(time: &[f64], status: &[f64], stratum: &[f64], score: &[f64]) -> Concordance {
    let n = time.len();
    let mut sorted: Vec<f64> = score.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    sorted.dedup();
    let rank = |v: f64| sorted.partition_point(|s| *s < v);
    let m = sorted.len();
    let mut tree = vec![0.0_f64; m + 1];
    let add = |tree: &mut Vec<f64>, r: usize| {
        let mut i = r + 1;
        while i <= m {
            tree[i] += 1.0;
            i += i & i.wrapping_neg();
        }
    };
    let prefix = |tree: &Vec<f64>, r: usize| -> f64 {
        // Count of entries with rank < r.
        let mut i = r;
        let mut s = 0.0;
        while i > 0 {
            s += tree[i];
            i -= i & i.wrapping_neg();
        }
        s
    };
    let (mut conc, mut disc, mut tied_x, mut tied_y) = (0.0, 0.0, 0.0, 0.0);
    let mut total = 0.0;
    let mut i = 0;
    while i < n {
        if i == 0 || stratum[i] != stratum[i - 1] {
            tree.iter_mut().for_each(|v| *v = 0.0);
            total = 0.0;
        }
        let mut j = i;
        while j < n && time[j] == time[i] && stratum[j] == stratum[i] {
            j += 1;
        }
        // Censored at this time are at risk for the deaths at this time.
        for k in i..j {
            if status[k] == 0.0 {
                add(&mut tree, rank(score[k]));
                total += 1.0;
            }
        }
        let deaths = (i..j).filter(|&k| status[k] == 1.0).count() as f64;
        tied_y += deaths * (deaths - 1.0) / 2.0;
        for k in i..j {
            if status[k] == 1.0 {
                let r = rank(score[k]);
                let below = prefix(&tree, r);
                let upto = prefix(&tree, r + 1);
                conc += below;
                tied_x += upto - below;
                disc += total - upto;
            }
        }
        for k in i..j {
            if status[k] == 1.0 {
                add(&mut tree, rank(score[k]));
                total += 1.0;
            }
        }
        i = j;
    }
    Concordance {
        concordant: conc,
        discordant: disc,
        tied_risk: tied_x,
        tied_time: tied_y,
        concordance: (conc + tied_x / 2.0) / (conc + disc + tied_x),
    }
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
    let zeros = vec![0.0; time.len()];
    let g = group.unwrap_or(&zeros);
    let mut levels: Vec<f64> = g.to_vec();
    levels.sort_by(|a, b| a.total_cmp(b));
    levels.dedup();
    let level = if conf_level > 0.0 { conf_level } else { 0.95 };
    let z = qnorm(1.0 - (1.0 - level) / 2.0);
    let mut out = Vec::new();
    for lv in levels {
        let mut rows: Vec<(f64, f64)> = time
            .iter()
            .zip(status)
            .zip(g)
            .filter(|(_, gi)| **gi == lv)
            .map(|((t, s), _)| (*t, *s))
            .collect();
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
                        (
                            (-((-s.ln()).ln() - se2).exp()).exp(),
                            (-((-s.ln()).ln() + se2).exp()).exp(),
                        )
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
    let keep: Vec<(f64, f64)> = y
        .iter()
        .zip(x)
        .filter(|(v, _)| !v.is_nan() && **v < 0.5 + tol)
        .map(|(v, t)| (*v, *t))
        .collect();
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
pub fn logrank(
    time: &[f64],
    status: &[f64],
    group: &[f64],
    strata: Option<&[f64]>,
) -> Result<LogRank> {
    let analysis = "log-rank test";
    check_surv(analysis, time, status)?;
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
        return Err(invalid(
            analysis,
            "all rows are in one group; need at least 2 groups",
        ));
    }
    let gi: Vec<usize> = group
        .iter()
        .map(|v| groups.iter().position(|g| g == v).unwrap())
        .collect();
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
    cholesky(&mut l, m, 1e-10).map_err(|_| {
        invalid(
            analysis,
            "a group has no one at risk at any event time; drop it",
        )
    })?;
    let sol = chol_solve(&l, m, &diff);
    let stat: f64 = sol.iter().zip(&diff).map(|(a, b)| a * b).sum();
    Ok(LogRank {
        groups,
        observed,
        expected,
        test: ChiTest::new(stat, m as f64),
    })
}
