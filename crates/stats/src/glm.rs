//! Linear regression (R: `lm`) and generalised linear models by iteratively
//! reweighted least squares (R: `glm.fit`): logistic (binomial, logit link)
//! and Poisson (log link, with offset). The IRLS starts, steps and stops as
//! `glm.fit` does (same starting values, same deviance criterion 1e-8, at
//! most 25 iterations), so the estimates are R's, not merely close to them.
//! Wald CIs are those of `confint.default`. Robust (HC0 sandwich) covariance
//! is available for weighted outcome models.

use serde::Serialize;

use crate::dist::{p_two_sided_t, p_two_sided_z, pf_upper, qnorm, qt};
use crate::error::{invalid, Result, Row, StatsError};
use crate::linalg::{wls, RankDeficient};

/// Named predictor columns (the intercept is added by the estimator).
#[derive(Debug, Clone, Copy)]
pub struct Predictor<'a> {
    pub name: &'a str,
    pub values: &'a [f64],
}

/// One row of a coefficient table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Coefficient {
    pub term: String,
    pub estimate: f64,
    pub std_error: f64,
    /// t (linear) or z (GLM) statistic.
    pub statistic: f64,
    pub p_value: f64,
    pub conf_low: f64,
    pub conf_high: f64,
}

impl Coefficient {
    /// exp(estimate): odds ratio (logistic), rate ratio (Poisson), hazard ratio (Cox).
    pub fn exp_estimate(&self) -> f64 {
        self.estimate.exp()
    }
    pub fn exp_conf(&self) -> (f64, f64) {
        (self.conf_low.exp(), self.conf_high.exp())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Binomial,
    Poisson,
}

/// A fitted GLM.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GlmFit {
    pub family: Family,
    pub coefficients: Vec<Coefficient>,
    /// Model-based covariance of the coefficients, row-major.
    pub covariance: Vec<f64>,
    pub deviance: f64,
    pub null_deviance: f64,
    pub aic: f64,
    pub df_residual: f64,
    pub df_null: f64,
    pub iterations: usize,
    pub n: usize,
    pub fitted: Vec<f64>,
    pub linear_predictor: Vec<f64>,
}

/// Options for [`glm`].
#[derive(Debug, Clone, Default)]
pub struct GlmConfig<'a> {
    pub offset: Option<&'a [f64]>,
    /// Prior weights (e.g. inverse probability weights).
    pub weights: Option<&'a [f64]>,
    /// Confidence level for Wald intervals; 0 means 0.95.
    pub conf_level: f64,
}

const EPS: f64 = f64::EPSILON;
const THRESH: f64 = 30.0;
const MTHRESH: f64 = -30.0;

impl Family {
    fn analysis(self) -> &'static str {
        match self {
            Family::Binomial => "logistic regression",
            Family::Poisson => "Poisson regression",
        }
    }
    fn linkinv(self, eta: f64) -> f64 {
        match self {
            Family::Binomial => {
                let t = if eta < MTHRESH {
                    EPS
                } else if eta > THRESH {
                    1.0 / EPS
                } else {
                    eta.exp()
                };
                t / (1.0 + t)
            }
            Family::Poisson => eta.exp().max(EPS),
        }
    }
    fn linkfun(self, mu: f64) -> f64 {
        match self {
            Family::Binomial => (mu / (1.0 - mu)).ln(),
            Family::Poisson => mu.ln(),
        }
    }
    fn mu_eta(self, eta: f64) -> f64 {
        match self {
            Family::Binomial => {
                if !(MTHRESH..=THRESH).contains(&eta) {
                    EPS
                } else {
                    let e = eta.exp();
                    e / ((1.0 + e) * (1.0 + e))
                }
            }
            Family::Poisson => eta.exp().max(EPS),
        }
    }
    fn variance(self, mu: f64) -> f64 {
        match self {
            Family::Binomial => mu * (1.0 - mu),
            Family::Poisson => mu,
        }
    }
    fn dev_resid(self, y: f64, mu: f64, w: f64) -> f64 {
        match self {
            Family::Binomial => 2.0 * w * (ylogy(y, mu) + ylogy(1.0 - y, 1.0 - mu)),
            Family::Poisson => {
                if y > 0.0 {
                    2.0 * w * (y * (y / mu).ln() - (y - mu))
                } else {
                    2.0 * mu * w
                }
            }
        }
    }
    fn mustart(self, y: f64, w: f64) -> f64 {
        match self {
            Family::Binomial => (w * y + 0.5) / (w + 1.0),
            Family::Poisson => y + 0.1,
        }
    }
    /// -2 log-likelihood summed (R's `family$aic` without the 2 p term).
    fn aic_part(self, y: &[f64], mu: &[f64], w: &[f64]) -> f64 {
        match self {
            Family::Binomial => {
                -2.0 * y
                    .iter()
                    .zip(mu)
                    .zip(w)
                    .map(|((y, m), w)| if *w > 0.0 { w * (y * m.ln() + (1.0 - y) * (1.0 - m).ln()) } else { 0.0 })
                    .sum::<f64>()
            }
            Family::Poisson => {
                -2.0 * y
                    .iter()
                    .zip(mu)
                    .zip(w)
                    .map(|((y, m), w)| w * (y * m.ln() - m - crate::dist::lgamma(y + 1.0)))
                    .sum::<f64>()
            }
        }
    }
}

fn ylogy(y: f64, mu: f64) -> f64 {
    if y > 0.0 {
        y * (y / mu).ln()
    } else {
        0.0
    }
}

/// Checks shared by all regressions: rows, finite values, constant columns.
pub(crate) fn check_design(analysis: &str, y: &[f64], x: &[Predictor]) -> Result<()> {
    let n = y.len();
    if n == 0 {
        return Err(StatsError::NoRows { analysis: analysis.into(), rows_in: 0, rows_dropped: 0 });
    }
    for p in x {
        if p.values.len() != n {
            return Err(invalid(
                analysis,
                format!("column `{}` has {} rows, the outcome has {n}", p.name, p.values.len()),
            ));
        }
        if let Some(i) = p.values.iter().position(|v| !v.is_finite()) {
            return Err(StatsError::InvalidValue {
                analysis: analysis.into(),
                column: p.name.into(),
                row: Row::Index(i),
                value: p.values[i],
                expected: "expected a finite number; remove missing values first (listwise deletion)".into(),
            });
        }
        let first = p.values[0];
        if p.values.iter().all(|v| *v == first) {
            return Err(StatsError::ConstantCovariate {
                analysis: analysis.into(),
                column: p.name.into(),
                value: first,
            });
        }
    }
    if let Some(i) = y.iter().position(|v| !v.is_finite()) {
        return Err(StatsError::InvalidValue {
            analysis: analysis.into(),
            column: "outcome".into(),
            row: Row::Index(i),
            value: y[i],
            expected: "expected a finite number; remove missing values first (listwise deletion)".into(),
        });
    }
    Ok(())
}

pub(crate) fn design_columns(n: usize, x: &[Predictor]) -> (Vec<String>, Vec<Vec<f64>>) {
    let mut names = vec!["(Intercept)".to_string()];
    let mut cols = vec![vec![1.0; n]];
    for p in x {
        names.push(p.name.to_string());
        cols.push(p.values.to_vec());
    }
    (names, cols)
}

fn singular(analysis: &str, names: &[String], e: RankDeficient) -> StatsError {
    StatsError::SingularDesign { analysis: analysis.into(), column: names[e.0].clone() }
}

/// Fits a GLM by IRLS exactly as R's `glm.fit` iterates.
pub fn glm(y: &[f64], x: &[Predictor], family: Family, config: &GlmConfig) -> Result<GlmFit> {
    let analysis = family.analysis();
    check_design(analysis, y, x)?;
    let n = y.len();
    let ones = vec![1.0; n];
    let w = config.weights.unwrap_or(&ones);
    let zeros = vec![0.0; n];
    let offset = config.offset.unwrap_or(&zeros);
    for (i, v) in y.iter().enumerate() {
        let ok = match family {
            Family::Binomial => (0.0..=1.0).contains(v),
            Family::Poisson => *v >= 0.0,
        };
        if !ok {
            return Err(StatsError::InvalidValue {
                analysis: analysis.into(),
                column: "outcome".into(),
                row: Row::Index(i),
                value: *v,
                expected: match family {
                    Family::Binomial => "expected 0 or 1".into(),
                    Family::Poisson => "expected a count >= 0".into(),
                },
            });
        }
    }
    if w.len() != n || offset.len() != n {
        return Err(invalid(analysis, "weights and offset must have one value per row"));
    }
    if let Some(i) = w.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
        return Err(StatsError::InvalidValue {
            analysis: analysis.into(),
            column: "weights".into(),
            row: Row::Index(i),
            value: w[i],
            expected: "expected a finite weight >= 0".into(),
        });
    }
    if let Some(i) = offset.iter().position(|v| !v.is_finite()) {
        return Err(StatsError::InvalidValue {
            analysis: analysis.into(),
            column: "offset".into(),
            row: Row::Index(i),
            value: offset[i],
            expected: "expected a finite number".into(),
        });
    }
    let (names, cols) = design_columns(n, x);
    let fit = irls(y, &cols, family, w, offset).map_err(|e| match e {
        IrlsError::Singular(r) => singular(analysis, &names, r),
        IrlsError::NoConvergence(it) => StatsError::NoConvergence { analysis: analysis.into(), iterations: it },
    })?;
    if family == Family::Binomial {
        let eps = 10.0 * EPS;
        let rows = fit.mu.iter().filter(|m| **m > 1.0 - eps || **m < eps).count();
        if rows > 0 {
            return Err(StatsError::Separation { rows, n });
        }
    }
    if !fit.converged {
        return Err(StatsError::NoConvergence { analysis: analysis.into(), iterations: fit.iterations });
    }
    // Null deviance: intercept-only model (with the offset, refitted as R does).
    let null_deviance = if config.offset.is_none() {
        let sw: f64 = w.iter().sum();
        let wtdmu = y.iter().zip(w).map(|(y, w)| y * w).sum::<f64>() / sw;
        y.iter().zip(w).map(|(y, w)| family.dev_resid(*y, wtdmu, *w)).sum()
    } else {
        irls(y, &cols[..1], family, w, offset).map(|f| f.deviance).unwrap_or(f64::NAN)
    };
    let p = cols.len();
    let n_pos = w.iter().filter(|v| **v > 0.0).count() as f64;
    let level = if config.conf_level > 0.0 { config.conf_level } else { 0.95 };
    let z = qnorm(0.5 + level / 2.0);
    let coefficients = (0..p)
        .map(|j| {
            let se = fit.cov[j * p + j].sqrt();
            let est = fit.coef[j];
            Coefficient {
                term: names[j].clone(),
                estimate: est,
                std_error: se,
                statistic: est / se,
                p_value: p_two_sided_z(est / se),
                conf_low: est - z * se,
                conf_high: est + z * se,
            }
        })
        .collect();
    let aic = family.aic_part(y, &fit.mu, w) + 2.0 * p as f64;
    Ok(GlmFit {
        family,
        coefficients,
        covariance: fit.cov,
        deviance: fit.deviance,
        null_deviance,
        aic,
        df_residual: n_pos - p as f64,
        df_null: n_pos - 1.0,
        iterations: fit.iterations,
        n,
        fitted: fit.mu,
        linear_predictor: fit.eta,
    })
}

struct Irls {
    coef: Vec<f64>,
    cov: Vec<f64>,
    mu: Vec<f64>,
    eta: Vec<f64>,
    deviance: f64,
    iterations: usize,
    converged: bool,
}

enum IrlsError {
    Singular(RankDeficient),
    NoConvergence(usize),
}

fn irls(
    y: &[f64],
    cols: &[Vec<f64>],
    family: Family,
    w: &[f64],
    offset: &[f64],
) -> std::result::Result<Irls, IrlsError> {
    let n = y.len();
    let p = cols.len();
    let mut eta: Vec<f64> = (0..n).map(|i| family.linkfun(family.mustart(y[i], w[i]))).collect();
    let mut mu: Vec<f64> = eta.iter().map(|e| family.linkinv(*e)).collect();
    let mut devold: f64 = (0..n).map(|i| family.dev_resid(y[i], mu[i], w[i])).sum();
    let mut coefold: Option<Vec<f64>> = None;
    let mut z = vec![0.0; n];
    let mut ww = vec![0.0; n];
    let mut last = None;
    let maxit = 25;
    for iter in 1..=maxit {
        for i in 0..n {
            let me = family.mu_eta(eta[i]);
            z[i] = (eta[i] - offset[i]) + (y[i] - mu[i]) / me;
            ww[i] = w[i] * me * me / family.variance(mu[i]);
        }
        let fit = wls(cols, &z, Some(&ww), 1e-11_f64.min(1e-7)).map_err(IrlsError::Singular)?;
        let mut start = fit.coef.clone();
        let compute = |coef: &[f64], eta: &mut Vec<f64>, mu: &mut Vec<f64>| -> f64 {
            for i in 0..n {
                let mut e = offset[i];
                for j in 0..p {
                    e += cols[j][i] * coef[j];
                }
                eta[i] = e;
                mu[i] = family.linkinv(e);
            }
            (0..n).map(|i| family.dev_resid(y[i], mu[i], w[i])).sum()
        };
        let mut dev = compute(&start, &mut eta, &mut mu);
        // Step halving when the deviance is not finite (glm.fit's first guard).
        let mut halvings = 0;
        while !dev.is_finite() {
            let Some(old) = &coefold else {
                return Err(IrlsError::NoConvergence(iter));
            };
            halvings += 1;
            if halvings > maxit {
                return Err(IrlsError::NoConvergence(iter));
            }
            start = start.iter().zip(old).map(|(s, o)| (s + o) / 2.0).collect();
            dev = compute(&start, &mut eta, &mut mu);
        }
        let converged = (dev - devold).abs() / (dev.abs() + 0.1) < 1e-8;
        last = Some(Irls {
            coef: start.clone(),
            cov: fit.cov_unscaled,
            mu: mu.clone(),
            eta: eta.clone(),
            deviance: dev,
            iterations: iter,
            converged,
        });
        if converged {
            break;
        }
        devold = dev;
        coefold = Some(start);
    }
    let mut out = last.expect("at least one iteration");
    // R reports the covariance from the last weighted fit's QR, i.e. the
    // working weights of the iteration that produced the final coefficients.
    // glm.fit recomputes nothing after convergence, and neither do we.
    out.cov = out.cov.clone();
    Ok(out)
}

/// HC0 sandwich covariance for a fitted GLM with canonical link, or a
/// linear model when `fit` is `None` and `residual`/`working` are given:
/// bread = (X' W X)^-1 with working weights W, meat = sum (w_i r_i)^2 x_i x_i'.
/// (R: `sandwich::sandwich(model)`, i.e. `vcovHC(model, type = "HC0")`.)
pub fn sandwich_hc0(cols: &[Vec<f64>], bread: &[f64], score_weight: &[f64]) -> Vec<f64> {
    let p = cols.len();
    let n = score_weight.len();
    let mut meat = vec![0.0; p * p];
    let mut xi = vec![0.0; p];
    for i in 0..n {
        for j in 0..p {
            xi[j] = cols[j][i] * score_weight[i];
        }
        for a in 0..p {
            for b in a..p {
                meat[a * p + b] += xi[a] * xi[b];
            }
        }
    }
    for a in 0..p {
        for b in 0..a {
            meat[a * p + b] = meat[b * p + a];
        }
    }
    let bm = matmul(bread, &meat, p);
    matmul(&bm, bread, p)
}

fn matmul(a: &[f64], b: &[f64], p: usize) -> Vec<f64> {
    let mut out = vec![0.0; p * p];
    for i in 0..p {
        for k in 0..p {
            let aik = a[i * p + k];
            for j in 0..p {
                out[i * p + j] += aik * b[k * p + j];
            }
        }
    }
    out
}

impl GlmFit {
    /// Robust (HC0 sandwich) covariance of this fit, given its data.
    pub fn robust_covariance(&self, y: &[f64], x: &[Predictor], weights: Option<&[f64]>) -> Vec<f64> {
        let n = y.len();
        let (_, cols) = design_columns(n, x);
        let score: Vec<f64> = (0..n).map(|i| weights.map_or(1.0, |w| w[i]) * (y[i] - self.fitted[i])).collect();
        sandwich_hc0(&cols, &self.covariance, &score)
    }
}

/// A fitted linear model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LmFit {
    pub coefficients: Vec<Coefficient>,
    pub covariance: Vec<f64>,
    /// (X'WX)^-1, row-major: the bread of the sandwich.
    pub cov_unscaled: Vec<f64>,
    pub sigma: f64,
    pub r_squared: f64,
    pub adj_r_squared: f64,
    pub f_statistic: f64,
    pub f_p_value: f64,
    pub df_residual: f64,
    pub n: usize,
    pub residuals: Vec<f64>,
}

/// Ordinary (or weighted) least squares with intercept, as `lm(y ~ x)`.
pub fn lm(y: &[f64], x: &[Predictor], weights: Option<&[f64]>, conf_level: f64) -> Result<LmFit> {
    let analysis = "linear regression";
    check_design(analysis, y, x)?;
    let n = y.len();
    let (names, cols) = design_columns(n, x);
    let p = cols.len();
    if n <= p {
        return Err(invalid(analysis, format!("{n} rows for {p} coefficients; need more rows than coefficients")));
    }
    let fit = wls(&cols, y, weights, 1e-7).map_err(|e| singular(analysis, &names, e))?;
    let ones = vec![1.0; n];
    let w = weights.unwrap_or(&ones);
    let residuals: Vec<f64> = (0..n).map(|i| y[i] - (0..p).map(|j| cols[j][i] * fit.coef[j]).sum::<f64>()).collect();
    let rss: f64 = residuals.iter().zip(w).map(|(r, w)| w * r * r).sum();
    let df = (n - p) as f64;
    let sigma2 = rss / df;
    let sw: f64 = w.iter().sum();
    let ybar = y.iter().zip(w).map(|(y, w)| y * w).sum::<f64>() / sw;
    let tss: f64 = y.iter().zip(w).map(|(y, w)| w * (y - ybar).powi(2)).sum();
    let r2 = 1.0 - rss / tss;
    let level = if conf_level > 0.0 { conf_level } else { 0.95 };
    let q = qt(0.5 + level / 2.0, df);
    let covariance: Vec<f64> = fit.cov_unscaled.iter().map(|v| v * sigma2).collect();
    let coefficients = (0..p)
        .map(|j| {
            let se = covariance[j * p + j].sqrt();
            let est = fit.coef[j];
            Coefficient {
                term: names[j].clone(),
                estimate: est,
                std_error: se,
                statistic: est / se,
                p_value: p_two_sided_t(est / se, df),
                conf_low: est - q * se,
                conf_high: est + q * se,
            }
        })
        .collect();
    let dfm = (p - 1) as f64;
    let f = ((tss - rss) / dfm) / sigma2;
    Ok(LmFit {
        coefficients,
        covariance,
        cov_unscaled: fit.cov_unscaled,
        sigma: sigma2.sqrt(),
        r_squared: r2,
        adj_r_squared: 1.0 - (1.0 - r2) * ((n - 1) as f64 / df),
        f_statistic: f,
        f_p_value: pf_upper(f, dfm, df),
        df_residual: df,
        n,
        residuals,
    })
}

impl LmFit {
    /// Robust (HC0 sandwich) covariance, as `sandwich::vcovHC(fit, "HC0")`.
    pub fn robust_covariance(&self, x: &[Predictor], weights: Option<&[f64]>) -> Vec<f64> {
        let n = self.residuals.len();
        let (_, cols) = design_columns(n, x);
        let score: Vec<f64> = (0..n).map(|i| weights.map_or(1.0, |w| w[i]) * self.residuals[i]).collect();
        sandwich_hc0(&cols, &self.cov_unscaled, &score)
    }
}
