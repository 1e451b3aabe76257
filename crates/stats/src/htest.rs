//! Hypothesis tests as R's `stats` package computes them: `t.test` (Welch and
//! Student), `wilcox.test` (exact or normal approximation with continuity
//! correction), `chisq.test` (with and without Yates), `fisher.test` (2x2,
//! conditional MLE odds ratio and its CI via `uniroot`) and `kruskal.test`.

use serde::Serialize;

use crate::describe::{mean, var};
use crate::dist::{lchoose, p_two_sided_t, pchisq_upper, pnorm, pnorm_upper, qt};
use crate::error::{invalid, invalid_at, Result, Row, StatsError};
use crate::zeroin::uniroot;

/// Result of a two-sample t-test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TTest {
    pub statistic: f64,
    pub df: f64,
    pub p_value: f64,
    pub mean_x: f64,
    pub mean_y: f64,
    /// CI of mean_x - mean_y.
    pub conf_low: f64,
    pub conf_high: f64,
    pub stderr: f64,
}

fn finite(analysis: &str, name: &str, x: &[f64]) -> Result<()> {
    if x.is_empty() {
        return Err(StatsError::NoRows { analysis: analysis.into(), rows_in: 0, rows_dropped: 0 });
    }
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Err(StatsError::InvalidValue {
            analysis: analysis.into(),
            column: name.into(),
            row: Row::Index(i),
            value: x[i],
            expected: "expected a finite number; remove missing values first".into(),
        });
    }
    Ok(())
}

/// The values of `outcome` split by the two values of `group`, for the
/// two-sample tests.
#[derive(Debug, Clone, PartialEq)]
pub struct TwoGroups {
    /// The smaller group value and its outcomes.
    pub low: f64,
    pub low_values: Vec<f64>,
    /// The larger group value and its outcomes.
    pub high: f64,
    pub high_values: Vec<f64>,
}

/// Splits `outcome` by `group`, which must have exactly 2 distinct values.
/// Errors name the argument (`outcome` or `group`) and the 0-based row of
/// these slices (the first non-finite value, the first row with a third
/// group value), so that [`StatsError::locate`] can place them.
pub fn two_groups(analysis: &str, outcome: &[f64], group: &[f64]) -> Result<TwoGroups> {
    if outcome.is_empty() {
        return Err(StatsError::NoRows { analysis: analysis.into(), rows_in: 0, rows_dropped: 0 });
    }
    if outcome.len() != group.len() {
        return Err(invalid(analysis, format!("outcome has {} rows, group has {}", outcome.len(), group.len())));
    }
    if let Some(i) = outcome.iter().position(|v| !v.is_finite()) {
        return Err(invalid_at(
            analysis,
            "outcome",
            i,
            outcome[i],
            "expected a finite number; remove missing values first",
        ));
    }
    let mut seen: Vec<f64> = Vec::with_capacity(2);
    for (i, g) in group.iter().enumerate() {
        if !g.is_finite() {
            return Err(invalid_at(analysis, "group", i, *g, "expected a finite group code"));
        }
        if !seen.contains(g) {
            if seen.len() == 2 {
                let expected =
                    format!("expected exactly 2 distinct values (the rows above have {} and {})", seen[0], seen[1]);
                return Err(invalid_at(analysis, "group", i, *g, &expected));
            }
            seen.push(*g);
        }
    }
    if seen.len() < 2 {
        return Err(StatsError::OneGroup {
            analysis: analysis.into(),
            column: "group".into(),
            value: seen[0],
            n: group.len(),
        });
    }
    seen.sort_by(|a, b| a.total_cmp(b));
    let pick = |level: f64| outcome.iter().zip(group).filter(|(_, g)| **g == level).map(|(v, _)| *v).collect();
    Ok(TwoGroups { low: seen[0], low_values: pick(seen[0]), high: seen[1], high_values: pick(seen[1]) })
}

/// Two-sample t-test, two-sided (R: `t.test(x, y, var.equal = equal_var)`).
pub fn t_test(x: &[f64], y: &[f64], equal_var: bool, conf_level: f64) -> Result<TTest> {
    let analysis = if equal_var { "Student t-test" } else { "Welch t-test" };
    finite(analysis, "x", x)?;
    finite(analysis, "y", y)?;
    if x.len() < 2 || y.len() < 2 {
        return Err(invalid(analysis, format!("each group needs at least 2 values (got {} and {})", x.len(), y.len())));
    }
    let (nx, ny) = (x.len() as f64, y.len() as f64);
    let (mx, my) = (mean(x), mean(y));
    let (vx, vy) = (var(x), var(y));
    let (df, stderr) = if equal_var {
        let df = nx + ny - 2.0;
        let v = ((nx - 1.0) * vx + (ny - 1.0) * vy) / df;
        (df, (v * (1.0 / nx + 1.0 / ny)).sqrt())
    } else {
        let sx = vx / nx;
        let sy = vy / ny;
        let se = (sx + sy).sqrt();
        (se.powi(4) / (sx * sx / (nx - 1.0) + sy * sy / (ny - 1.0)), se)
    };
    if !(stderr > 10.0 * f64::EPSILON * mx.abs().max(my.abs())) {
        return Err(invalid(analysis, "data are essentially constant; a t-test is not defined"));
    }
    let t = (mx - my) / stderr;
    let q = qt(0.5 + conf_level / 2.0, df);
    Ok(TTest {
        statistic: t,
        df,
        p_value: p_two_sided_t(t, df),
        mean_x: mx,
        mean_y: my,
        conf_low: (mx - my) - q * stderr,
        conf_high: (mx - my) + q * stderr,
        stderr,
    })
}

/// Average ranks (ties get the mean rank), 1-based, plus the tie group sizes.
pub fn rank_average(v: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut ranks = vec![0.0; v.len()];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            ranks[k] = r;
        }
        ties.push(j - i + 1);
        i = j + 1;
    }
    (ranks, ties)
}

/// Result of a rank-sum test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wilcoxon {
    /// W = rank sum of x minus nx (nx + 1) / 2 (R's statistic).
    pub statistic: f64,
    pub p_value: f64,
    pub exact: bool,
}

/// Number of subsets of size m of {1..m+n} for each value of the
/// Mann–Whitney statistic 0..=m n (R's `cwilcox`), as f64 counts.
fn wilcox_counts(m: usize, n: usize) -> Vec<f64> {
    // f[j][u]: ways to choose j of the first i items with statistic u.
    let maxu = m * n;
    let mut f = vec![vec![0.0_f64; maxu + 1]; m + 1];
    f[0][0] = 1.0;
    for i in 1..=(m + n) {
        for j in (1..=m.min(i)).rev() {
            // Choosing item i as the j-th smallest selected adds (i - j) non-selected below it.
            let add = i - j;
            if add > n {
                continue;
            }
            let (lo, hi) = f.split_at_mut(j);
            let prev = &lo[j - 1];
            let cur = &mut hi[0];
            for u in (add..=maxu).rev() {
                cur[u] += prev[u - add];
            }
        }
    }
    f.swap_remove(m)
}

/// Wilcoxon rank-sum (Mann–Whitney) test, two-sided, as `wilcox.test(x, y)`:
/// exact when both samples have fewer than 50 values and there are no ties,
/// otherwise the normal approximation with continuity correction.
pub fn wilcoxon(x: &[f64], y: &[f64]) -> Result<Wilcoxon> {
    let analysis = "Wilcoxon rank-sum test";
    finite(analysis, "x", x)?;
    finite(analysis, "y", y)?;
    let (nx, ny) = (x.len(), y.len());
    let all: Vec<f64> = x.iter().chain(y).copied().collect();
    let (r, ties) = rank_average(&all);
    let w = r[..nx].iter().sum::<f64>() - (nx * (nx + 1)) as f64 / 2.0;
    let has_ties = ties.iter().any(|t| *t > 1);
    if nx < 50 && ny < 50 && !has_ties {
        let counts = wilcox_counts(nx, ny);
        let total: f64 = lchoose((nx + ny) as f64, nx as f64).exp();
        let total_exact: f64 = counts.iter().sum();
        let _ = total;
        let q = w.round() as usize;
        let p = if w > (nx * ny) as f64 / 2.0 {
            counts[q..].iter().sum::<f64>() / total_exact
        } else {
            counts[..=q].iter().sum::<f64>() / total_exact
        };
        return Ok(Wilcoxon { statistic: w, p_value: (2.0 * p).min(1.0), exact: true });
    }
    let (nxf, nyf) = (nx as f64, ny as f64);
    let z = w - nxf * nyf / 2.0;
    let tie_term: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum();
    let sigma = ((nxf * nyf / 12.0) * ((nxf + nyf + 1.0) - tie_term / ((nxf + nyf) * (nxf + nyf - 1.0)))).sqrt();
    if sigma == 0.0 {
        return Err(invalid(analysis, "all values are tied; the test is not defined"));
    }
    let correction = 0.5 * z.signum();
    let z = (z - correction) / sigma;
    let p = 2.0 * pnorm(z).min(pnorm_upper(z));
    Ok(Wilcoxon { statistic: w, p_value: p.min(1.0), exact: false })
}

/// Result of a chi-square test of independence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChiSquare {
    pub statistic: f64,
    pub df: f64,
    pub p_value: f64,
    /// Expected counts, row-major.
    pub expected: Vec<f64>,
    pub yates: bool,
}

/// Chi-square test on an r x c table of counts (row-major), as
/// `chisq.test(table, correct = yates)`; Yates' correction applies to 2x2 only.
pub fn chisq_test(table: &[f64], nrow: usize, ncol: usize, yates: bool) -> Result<ChiSquare> {
    let analysis = "chi-square test";
    if nrow < 2 || ncol < 2 || table.len() != nrow * ncol {
        return Err(invalid(analysis, format!("need at least a 2x2 table (got {nrow}x{ncol})")));
    }
    if let Some(i) = table.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
        return Err(invalid(analysis, format!("cell {} is {}; counts must be non-negative", i + 1, table[i])));
    }
    let total: f64 = table.iter().sum();
    let rows: Vec<f64> = (0..nrow).map(|i| table[i * ncol..(i + 1) * ncol].iter().sum()).collect();
    let cols: Vec<f64> = (0..ncol).map(|j| (0..nrow).map(|i| table[i * ncol + j]).sum()).collect();
    if let Some(i) = rows.iter().position(|r| *r == 0.0) {
        return Err(invalid(analysis, format!("row {} has no observations; drop the empty category", i + 1)));
    }
    if let Some(j) = cols.iter().position(|c| *c == 0.0) {
        return Err(invalid(analysis, format!("column {} has no observations; drop the empty category", j + 1)));
    }
    let expected: Vec<f64> = (0..nrow * ncol).map(|k| rows[k / ncol] * cols[k % ncol] / total).collect();
    let use_yates = yates && nrow == 2 && ncol == 2;
    let correction =
        if use_yates { table.iter().zip(&expected).map(|(o, e)| (o - e).abs()).fold(0.5_f64, f64::min) } else { 0.0 };
    let statistic: f64 = table.iter().zip(&expected).map(|(o, e)| ((o - e).abs() - correction).powi(2) / e).sum();
    let df = ((nrow - 1) * (ncol - 1)) as f64;
    Ok(ChiSquare { statistic, df, p_value: pchisq_upper(statistic, df), expected, yates: use_yates })
}

/// Result of Fisher's exact test on a 2x2 table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fisher {
    pub p_value: f64,
    /// Conditional maximum-likelihood odds ratio (may be 0 or infinite).
    pub odds_ratio: f64,
    pub conf_low: f64,
    pub conf_high: f64,
}

/// Fisher's exact test, two-sided, on the 2x2 table [[a, b], [c, d]]
/// (R: `fisher.test(matrix(c(a, c, b, d), 2))`).
pub fn fisher_test(a: u64, b: u64, c: u64, d: u64, conf_level: f64) -> Result<Fisher> {
    let analysis = "Fisher's exact test";
    let m = (a + c) as f64; // first column total
    let n = (b + d) as f64; // second column total
    let k = (a + b) as f64; // first row total
    let x = a as f64;
    if m + n == 0.0 {
        return Err(StatsError::NoRows { analysis: analysis.into(), rows_in: 0, rows_dropped: 0 });
    }
    let lo = (k - n).max(0.0);
    let hi = k.min(m);
    let support: Vec<f64> = (lo as u64..=hi as u64).map(|v| v as f64).collect();
    let logdc: Vec<f64> = support.iter().map(|&s| lchoose(m, s) + lchoose(n, k - s) - lchoose(m + n, k)).collect();
    let dnhyper = |ncp: f64| -> Vec<f64> {
        let ln = ncp.ln();
        let d: Vec<f64> = logdc.iter().zip(&support).map(|(l, s)| l + ln * s).collect();
        let mx = d.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = d.iter().map(|v| (v - mx).exp()).collect();
        let sum: f64 = e.iter().sum();
        e.iter().map(|v| v / sum).collect()
    };
    let mnhyper = |ncp: f64| -> f64 {
        if ncp == 0.0 {
            return lo;
        }
        if ncp.is_infinite() {
            return hi;
        }
        support.iter().zip(dnhyper(ncp)).map(|(s, d)| s * d).sum()
    };
    let pnhyper = |q: f64, ncp: f64, upper: bool| -> f64 {
        if ncp == 0.0 {
            return if upper { (q <= lo) as u8 as f64 } else { (q >= lo) as u8 as f64 };
        }
        if ncp.is_infinite() {
            return if upper { (q <= hi) as u8 as f64 } else { (q >= hi) as u8 as f64 };
        }
        support.iter().zip(dnhyper(ncp)).filter(|(s, _)| if upper { **s >= q } else { **s <= q }).map(|(_, d)| d).sum()
    };
    // p-value: sum of probabilities no larger than the observed one.
    let d1 = dnhyper(1.0);
    let obs = d1[(x - lo) as usize] * (1.0 + 1e-7);
    let p_value = d1.iter().filter(|v| **v <= obs).sum::<f64>().min(1.0);
    let mle = if x == lo {
        0.0
    } else if x == hi {
        f64::INFINITY
    } else {
        let mu = mnhyper(1.0);
        if mu > x {
            uniroot(|t| mnhyper(t) - x, 0.0, 1.0)
        } else if mu < x {
            1.0 / uniroot(|t| mnhyper(1.0 / t) - x, f64::EPSILON, 1.0)
        } else {
            1.0
        }
    };
    let alpha = (1.0 - conf_level) / 2.0;
    let ncp_u = if x == hi {
        f64::INFINITY
    } else {
        let p = pnhyper(x, 1.0, false);
        if p < alpha {
            uniroot(|t| pnhyper(x, t, false) - alpha, 0.0, 1.0)
        } else if p > alpha {
            1.0 / uniroot(|t| pnhyper(x, 1.0 / t, false) - alpha, f64::EPSILON, 1.0)
        } else {
            1.0
        }
    };
    let ncp_l = if x == lo {
        0.0
    } else {
        let p = pnhyper(x, 1.0, true);
        if p > alpha {
            uniroot(|t| pnhyper(x, t, true) - alpha, 0.0, 1.0)
        } else if p < alpha {
            1.0 / uniroot(|t| pnhyper(x, 1.0 / t, true) - alpha, f64::EPSILON, 1.0)
        } else {
            1.0
        }
    };
    Ok(Fisher { p_value, odds_ratio: mle, conf_low: ncp_l, conf_high: ncp_u })
}

/// Result of a Kruskal–Wallis rank-sum test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KruskalWallis {
    pub statistic: f64,
    pub df: f64,
    pub p_value: f64,
}

/// Kruskal–Wallis test of `x` across the groups coded in `group`
/// (R: `kruskal.test(x, g)`).
pub fn kruskal_wallis(x: &[f64], group: &[f64]) -> Result<KruskalWallis> {
    let analysis = "Kruskal-Wallis test";
    finite(analysis, "x", x)?;
    finite(analysis, "group", group)?;
    let (r, ties) = rank_average(x);
    let mut levels: Vec<f64> = group.to_vec();
    levels.sort_by(|a, b| a.total_cmp(b));
    levels.dedup();
    if levels.len() < 2 {
        return Err(invalid(analysis, "all observations are in the same group; need at least 2 groups"));
    }
    let n = x.len() as f64;
    let mut stat = 0.0;
    for lv in &levels {
        let (s, c) =
            r.iter().zip(group).filter(|(_, g)| *g == lv).fold((0.0, 0.0), |(s, c), (ri, _)| (s + ri, c + 1.0));
        stat += s * s / c;
    }
    let tie_term: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum();
    let denom = 1.0 - tie_term / (n * n * n - n);
    if denom == 0.0 {
        return Err(invalid(analysis, "all values are tied; the test is not defined"));
    }
    let statistic = (12.0 * stat / (n * (n + 1.0)) - 3.0 * (n + 1.0)) / denom;
    let df = (levels.len() - 1) as f64;
    Ok(KruskalWallis { statistic, df, p_value: pchisq_upper(statistic, df) })
}
