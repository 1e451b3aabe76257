//! The log-rank test of survival across groups as `survdiff` computes it,
//! optionally stratified.

use serde::Serialize;

use super::risk_set::{merge_near_ties, risk_order};
use super::{check_surv, ChiTest};
use crate::error::{invalid, Result, Row, StatsError};
use crate::linalg::{chol_solve, cholesky};

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
            row: Row::Index(i),
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
