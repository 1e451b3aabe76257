//! Kaplan–Meier curves as `survfit` computes them: Greenwood variance, log
//! and log-log confidence intervals, and the median with its CI as
//! `print.survfit` reports it.

use serde::Serialize;

use super::check_surv;
use super::risk_set::merge_near_ties;
use crate::dist::qnorm;
use crate::error::Result;

/// Confidence interval type for Kaplan–Meier curves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfType {
    Log,
    LogLog,
}

crate::spelling::spelled!(ConfType, "confidence interval type", ["log" => ConfType::Log, "log-log" => ConfType::LogLog]);

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
