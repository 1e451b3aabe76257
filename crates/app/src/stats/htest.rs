//! Two-sample and contingency tests: t-test and Wilcoxon rank-sum between
//! the 2 values of a group column, Kruskal-Wallis across its values, and
//! chi-square and Fisher's exact test of two categorical columns.

use std::fmt;

use evident_stats::htest::{self, ChiSquare, Fisher, KruskalWallis, TTest, TwoGroups, Wilcoxon};
use evident_stats::MissingReport;
use serde::Serialize;

use super::error::StatsJobError;
use super::request::{CrossTabRequest, KruskalRequest, TwoSampleRequest};
use super::table::{CompleteCases, CsvTable};
use super::text::missing_line;

/// `{"ttest": ..., "groups": [compared, reference], "missing": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct TTestReport {
    pub ttest: TTest,
    /// The larger group value (x) and the smaller (y): the difference is
    /// mean(x) - mean(y).
    pub groups: [f64; 2],
    pub missing: MissingReport,
    #[serde(skip)]
    pub request: TwoSampleRequest,
}

/// `{"wilcoxon": ..., "groups": [compared, reference], "missing": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct WilcoxonReport {
    pub wilcoxon: Wilcoxon,
    pub groups: [f64; 2],
    pub missing: MissingReport,
    #[serde(skip)]
    pub request: TwoSampleRequest,
}

/// `{"kruskal": ..., "missing": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct KruskalReport {
    pub kruskal: KruskalWallis,
    pub missing: MissingReport,
}

/// The cross-tabulation both contingency tests report.
#[derive(Debug, Clone, Serialize)]
pub struct CrossTab {
    /// Sorted distinct values of the row column, and of the column column.
    pub row_levels: Vec<f64>,
    pub col_levels: Vec<f64>,
    /// Counts, row-major.
    pub table: Vec<f64>,
}

/// `{"chisq": ..., "row_levels", "col_levels", "table", "missing"}`.
#[derive(Debug, Clone, Serialize)]
pub struct ChiSquareReport {
    pub chisq: ChiSquare,
    #[serde(flatten)]
    pub crosstab: CrossTab,
    pub missing: MissingReport,
    #[serde(skip)]
    pub request: CrossTabRequest,
}

/// `{"fisher": ..., "row_levels", "col_levels", "table", "missing"}`.
#[derive(Debug, Clone, Serialize)]
pub struct FisherReport {
    pub fisher: Fisher,
    #[serde(flatten)]
    pub crosstab: CrossTab,
    pub missing: MissingReport,
    #[serde(skip)]
    pub request: CrossTabRequest,
}

/// The outcome split by the 2 values of the group, errors placed in the
/// user's columns and lines.
fn split(kept: &CompleteCases, analysis: &str, request: &TwoSampleRequest) -> Result<TwoGroups, StatsJobError> {
    htest::two_groups(analysis, &kept.columns[0], &kept.columns[1])
        .map_err(|e| kept.locate(e, &[("outcome", &request.outcome), ("group", &request.group)]))
}

pub(super) fn t_test(table: &CsvTable, request: &TwoSampleRequest, level: f64) -> Result<TTestReport, StatsJobError> {
    let analysis = "t-test";
    let kept = table.complete(analysis, &[&request.outcome, &request.group])?;
    let groups = split(&kept, analysis, request)?;
    let ttest = htest::t_test(&groups.high_values, &groups.low_values, request.equal_var, level)
        .map_err(|e| kept.locate(e, &[]))?;
    Ok(TTestReport { ttest, groups: [groups.high, groups.low], missing: kept.missing, request: request.clone() })
}

pub(super) fn wilcoxon(table: &CsvTable, request: &TwoSampleRequest) -> Result<WilcoxonReport, StatsJobError> {
    let analysis = "Wilcoxon rank-sum test";
    let kept = table.complete(analysis, &[&request.outcome, &request.group])?;
    let groups = split(&kept, analysis, request)?;
    let wilcoxon = htest::wilcoxon(&groups.high_values, &groups.low_values).map_err(|e| kept.locate(e, &[]))?;
    Ok(WilcoxonReport { wilcoxon, groups: [groups.high, groups.low], missing: kept.missing, request: request.clone() })
}

pub(super) fn kruskal(table: &CsvTable, request: &KruskalRequest) -> Result<KruskalReport, StatsJobError> {
    let kept = table.complete("Kruskal-Wallis test", &[&request.outcome, &request.group])?;
    let kruskal = htest::kruskal_wallis(&kept.columns[0], &kept.columns[1])
        .map_err(|e| kept.locate(e, &[("x", &request.outcome), ("group", &request.group)]))?;
    Ok(KruskalReport { kruskal, missing: kept.missing })
}

pub(super) fn chi_square(table: &CsvTable, request: &CrossTabRequest) -> Result<ChiSquareReport, StatsJobError> {
    let kept = table.complete("chi-square test", &[&request.row, &request.col])?;
    let crosstab = crosstab(&kept.columns[0], &kept.columns[1]);
    let chisq = htest::chisq_test(&crosstab.table, crosstab.row_levels.len(), crosstab.col_levels.len(), request.yates)
        .map_err(|e| kept.locate(e, &[]))?;
    Ok(ChiSquareReport { chisq, crosstab, missing: kept.missing, request: request.clone() })
}

pub(super) fn fisher(table: &CsvTable, request: &CrossTabRequest, level: f64) -> Result<FisherReport, StatsJobError> {
    let kept = table.complete("Fisher's exact test", &[&request.row, &request.col])?;
    let crosstab = crosstab(&kept.columns[0], &kept.columns[1]);
    let (row_levels, col_levels) = (crosstab.row_levels.len(), crosstab.col_levels.len());
    if row_levels != 2 || col_levels != 2 {
        return Err(StatsJobError::NotTwoByTwo {
            source_name: kept.source_name().to_string(),
            row: request.row.clone(),
            col: request.col.clone(),
            row_levels,
            col_levels,
        });
    }
    let t = &crosstab.table;
    let fisher = htest::fisher_test(t[0] as u64, t[1] as u64, t[2] as u64, t[3] as u64, level)
        .map_err(|e| kept.locate(e, &[]))?;
    Ok(FisherReport { fisher, crosstab, missing: kept.missing, request: request.clone() })
}

/// Cross-tabulates two columns: sorted row levels, column levels, counts
/// row-major.
fn crosstab(a: &[f64], b: &[f64]) -> CrossTab {
    let levels = |v: &[f64]| {
        let mut l = v.to_vec();
        l.sort_by(|x, y| x.total_cmp(y));
        l.dedup();
        l
    };
    let (row_levels, col_levels) = (levels(a), levels(b));
    let mut table = vec![0.0; row_levels.len() * col_levels.len()];
    for (x, y) in a.iter().zip(b) {
        let i = row_levels.iter().position(|v| v == x).expect("a level of its own column");
        let j = col_levels.iter().position(|v| v == y).expect("a level of its own column");
        table[i * col_levels.len() + j] += 1.0;
    }
    CrossTab { row_levels, col_levels, table }
}

impl fmt::Display for TTestReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (t, [g1, g0]) = (&self.ttest, self.groups);
        let TwoSampleRequest { outcome, group, equal_var } = &self.request;
        writeln!(
            f,
            "{} t-test of {outcome}: {group}={g1} vs {group}={g0}\nmeans {:.6} vs {:.6}, difference CI {:.6} to {:.6}\nt = {:.6}, df = {:.6}, p = {:.6e}\n{}",
            if *equal_var { "Student" } else { "Welch" }, t.mean_x, t.mean_y, t.conf_low, t.conf_high, t.statistic, t.df, t.p_value, missing_line(&self.missing)
        )
    }
}

impl fmt::Display for WilcoxonReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (w, [g1, g0]) = (&self.wilcoxon, self.groups);
        let TwoSampleRequest { outcome, group, .. } = &self.request;
        writeln!(
            f,
            "Wilcoxon rank-sum test of {outcome}: {group}={g1} vs {group}={g0}\nW = {}, p = {:.6e} ({})\n{}",
            w.statistic,
            w.p_value,
            if w.exact { "exact" } else { "normal approximation with continuity correction" },
            missing_line(&self.missing)
        )
    }
}

impl fmt::Display for KruskalReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = &self.kruskal;
        writeln!(
            f,
            "Kruskal-Wallis chi-squared = {:.6}, df = {}, p = {:.6e}\n{}",
            k.statistic,
            k.df,
            k.p_value,
            missing_line(&self.missing)
        )
    }
}

impl fmt::Display for ChiSquareReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.chisq;
        writeln!(
            f,
            "chi-square test of {} x {} ({}x{} table{}): X-squared = {:.6}, df = {}, p = {:.6e}\n{}",
            self.request.row,
            self.request.col,
            self.crosstab.row_levels.len(),
            self.crosstab.col_levels.len(),
            if c.yates { ", Yates' correction" } else { "" },
            c.statistic,
            c.df,
            c.p_value,
            missing_line(&self.missing)
        )
    }
}

impl fmt::Display for FisherReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = &self.fisher;
        writeln!(
            f,
            "Fisher's exact test of {} x {}: odds ratio {:.6} (CI {:.6} to {:.6}), p = {:.6e}\n{}",
            self.request.row,
            self.request.col,
            x.odds_ratio,
            x.conf_low,
            x.conf_high,
            x.p_value,
            missing_line(&self.missing)
        )
    }
}
