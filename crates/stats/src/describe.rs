//! Descriptive statistics for a "Table 1": counts and percentages, mean and
//! SD, median and IQR by R's default quantile (type 7), and standardised mean
//! differences (pooled-SD convention of R's `tableone`).

use serde::Serialize;

use crate::error::{invalid, invalid_at, Result, Row, StatsError};

/// Summary of a continuous variable (R: `mean`, `sd`, `quantile(type = 7)`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContinuousSummary {
    pub n: usize,
    pub mean: f64,
    /// Sample SD (n - 1 denominator); NaN-free: 0 rows is an error, 1 row gives 0.
    pub sd: f64,
    pub min: f64,
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
    pub max: f64,
}

impl ContinuousSummary {
    pub fn iqr(&self) -> f64 {
        self.q3 - self.q1
    }
}

/// One level of a categorical variable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelCount {
    pub level: f64,
    pub count: usize,
    pub percent: f64,
}

pub fn mean(x: &[f64]) -> f64 {
    // Two-pass mean as R's `mean` does (sum / n, then a correction pass).
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    m + x.iter().map(|v| v - m).sum::<f64>() / n
}

/// Sample variance (n - 1).
pub fn var(x: &[f64]) -> f64 {
    let m = mean(x);
    x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() as f64 - 1.0)
}

pub fn sd(x: &[f64]) -> f64 {
    var(x).sqrt()
}

/// Quantile of already sorted data by R's type 7 (the default).
pub fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    let h = (n as f64 - 1.0) * p;
    // R computes the index with a small fuzz so that exact integers stay exact.
    let lo = (h + 4.0 * f64::EPSILON).floor() as usize;
    let frac = h - lo as f64;
    if lo + 1 >= n {
        return sorted[n - 1];
    }
    if frac.abs() < 4.0 * f64::EPSILON {
        return sorted[lo];
    }
    sorted[lo] + frac * (sorted[lo + 1] - sorted[lo])
}

/// Quantile (type 7) of unsorted data.
pub fn quantile(x: &[f64], p: f64) -> f64 {
    let mut s = x.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    quantile_sorted(&s, p)
}

fn check_values(analysis: &str, x: &[f64]) -> Result<()> {
    if x.is_empty() {
        return Err(StatsError::NoRows { analysis: analysis.to_string(), rows_in: 0, rows_dropped: 0 });
    }
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Err(invalid_at(analysis, "x", i, x[i], "expected a finite number; remove missing values first"));
    }
    Ok(())
}

pub fn summarize(x: &[f64]) -> Result<ContinuousSummary> {
    check_values("summary", x)?;
    let mut s = x.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    Ok(ContinuousSummary {
        n: x.len(),
        mean: mean(x),
        sd: if x.len() > 1 { sd(x) } else { 0.0 },
        min: s[0],
        q1: quantile_sorted(&s, 0.25),
        median: quantile_sorted(&s, 0.5),
        q3: quantile_sorted(&s, 0.75),
        max: s[s.len() - 1],
    })
}

/// Counts and percentages of each distinct value, in increasing order.
pub fn counts(x: &[f64]) -> Vec<LevelCount> {
    let mut s = x.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let mut out: Vec<LevelCount> = Vec::new();
    for v in s {
        match out.last_mut() {
            Some(l) if l.level == v => l.count += 1,
            _ => out.push(LevelCount { level: v, count: 1, percent: 0.0 }),
        }
    }
    let n = x.len() as f64;
    for l in &mut out {
        l.percent = 100.0 * l.count as f64 / n;
    }
    out
}

/// Standardised mean difference of a continuous variable:
/// (mean1 - mean0) / sqrt((var1 + var0) / 2).
pub fn smd_continuous(x1: &[f64], x0: &[f64]) -> f64 {
    (mean(x1) - mean(x0)) / ((var(x1) + var(x0)) / 2.0).sqrt()
}

/// Standardised difference of a binary (0/1) variable:
/// (p1 - p0) / sqrt((p1 (1 - p1) + p0 (1 - p0)) / 2).
pub fn smd_binary(x1: &[f64], x0: &[f64]) -> f64 {
    let p1 = mean(x1);
    let p0 = mean(x0);
    (p1 - p0) / ((p1 * (1.0 - p1) + p0 * (1.0 - p0)) / 2.0).sqrt()
}

/// One variable of a Table 1, split by a 0/1 group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableOneRow {
    pub variable: String,
    pub kind: VariableKind,
    pub overall: ContinuousSummary,
    pub group0: ContinuousSummary,
    pub group1: ContinuousSummary,
    /// Level counts (categorical variables only): overall, group 0, group 1.
    pub levels: Vec<(LevelCount, LevelCount, LevelCount)>,
    pub smd: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VariableKind {
    Continuous,
    Binary,
    Categorical,
}

/// Table 1 of `x` by the 0/1 `group`. A variable with 2 distinct values
/// 0 and 1 is binary; with at most `max_levels` distinct values categorical;
/// otherwise continuous. Rows must be complete.
pub fn table_one_row(variable: &str, x: &[f64], group: &[f64], max_levels: usize) -> Result<TableOneRow> {
    let analysis = format!("table 1, variable `{variable}`");
    check_values(&analysis, x)?;
    if let Some(i) = group.iter().position(|g| *g != 0.0 && *g != 1.0) {
        return Err(StatsError::InvalidValue {
            analysis,
            column: "group".into(),
            row: Row::Index(i),
            value: group[i],
            expected: "expected 0 or 1".into(),
        });
    }
    let x1: Vec<f64> = x.iter().zip(group).filter(|(_, g)| **g == 1.0).map(|(v, _)| *v).collect();
    let x0: Vec<f64> = x.iter().zip(group).filter(|(_, g)| **g == 0.0).map(|(v, _)| *v).collect();
    if x1.len() < 2 || x0.len() < 2 {
        return Err(invalid(
            &analysis,
            format!("each group needs at least 2 rows (group 1 has {}, group 0 has {})", x1.len(), x0.len()),
        ));
    }
    let all = counts(x);
    let binary = all.len() <= 2 && all.iter().all(|l| l.level == 0.0 || l.level == 1.0);
    let kind = if binary {
        VariableKind::Binary
    } else if all.len() <= max_levels {
        VariableKind::Categorical
    } else {
        VariableKind::Continuous
    };
    let levels = if kind == VariableKind::Continuous {
        Vec::new()
    } else {
        let c0 = counts(&x0);
        let c1 = counts(&x1);
        let find = |c: &[LevelCount], lv: f64, n: usize| {
            c.iter().find(|l| l.level == lv).cloned().unwrap_or(LevelCount {
                level: lv,
                count: 0,
                percent: 0.0 * n as f64,
            })
        };
        all.iter().map(|l| (l.clone(), find(&c0, l.level, x0.len()), find(&c1, l.level, x1.len()))).collect()
    };
    let smd = if binary { smd_binary(&x1, &x0) } else { smd_continuous(&x1, &x0) };
    Ok(TableOneRow {
        variable: variable.to_string(),
        kind,
        overall: summarize(x)?,
        group0: summarize(&x0)?,
        group1: summarize(&x1)?,
        levels,
        smd,
    })
}
