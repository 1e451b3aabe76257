//! Survival: Cox models (hazard ratios, with a forest plot if asked),
//! Kaplan-Meier curves (with the curves drawn if asked) and the log-rank
//! test. The event column is 1 = event, 0 = censored.

use std::fmt;

use evident_stats::survival::{self, CoxFit, KmCurve, LogRank};
use evident_stats::{svg, MissingReport};
use serde::Serialize;

use super::error::StatsJobError;
use super::regression::forest_rows;
use super::request::{CoxRequest, KaplanMeierRequest, LogRankRequest};
use super::table::CsvTable;
use super::text::{coef_table, missing_line, na, with_covariates};

/// `{"cox": ..., "missing": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct CoxReport {
    pub cox: CoxFit,
    pub missing: MissingReport,
    #[serde(skip)]
    pub strata: Option<String>,
}

/// `{"km": [...], "labels": [...], "missing": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct KaplanMeierReport {
    pub km: Vec<KmCurve>,
    /// One label per curve: `group=value`, or `all` without a group.
    pub labels: Vec<String>,
    pub missing: MissingReport,
}

/// `{"logrank": ..., "missing": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct LogRankReport {
    pub logrank: LogRank,
    pub missing: MissingReport,
    #[serde(skip)]
    pub request: LogRankRequest,
}

pub(super) fn cox(table: &CsvTable, request: &CoxRequest, level: f64) -> Result<CoxReport, StatsJobError> {
    let mut wanted = vec![request.time.as_str(), request.event.as_str()];
    wanted.extend(request.covariates.iter().map(String::as_str));
    wanted.extend(request.strata.as_deref());
    let kept = table.complete("Cox model", &wanted)?;
    let covariates = &kept.columns[2..2 + request.covariates.len()];
    let x: Vec<_> = request
        .covariates
        .iter()
        .zip(covariates)
        .map(|(name, values)| evident_stats::glm::Predictor { name, values })
        .collect();
    let strata = request.strata.as_ref().map(|_| kept.columns[kept.columns.len() - 1].as_slice());
    let fit = survival::coxph(&kept.columns[0], &kept.columns[1], &x, strata, request.ties, level).map_err(|e| {
        let fixed = [("time", request.time.as_str()), ("status", request.event.as_str())];
        kept.locate(e, &with_covariates(&fixed, &request.covariates))
    })?;
    if let Some(path) = &request.forest_svg {
        let rows = forest_rows(&fit.coefficients, false);
        super::write_svg(path, &svg::forest_svg(&rows, "Hazard ratio", 1.0, true))?;
    }
    Ok(CoxReport { cox: fit, missing: kept.missing, strata: request.strata.clone() })
}

pub(super) fn kaplan_meier(
    table: &CsvTable,
    request: &KaplanMeierRequest,
    level: f64,
) -> Result<KaplanMeierReport, StatsJobError> {
    let mut wanted = vec![request.time.as_str(), request.event.as_str()];
    wanted.extend(request.group.as_deref());
    let kept = table.complete("Kaplan-Meier", &wanted)?;
    let group = request.group.as_ref().map(|_| kept.columns[2].as_slice());
    let curves =
        survival::kaplan_meier(&kept.columns[0], &kept.columns[1], group, request.conf_type, level).map_err(|e| {
            let arguments = [
                ("time", request.time.as_str()),
                ("status", request.event.as_str()),
                ("group", request.group.as_deref().unwrap_or_default()),
            ];
            kept.locate(e, &arguments)
        })?;
    let labels: Vec<String> = curves
        .iter()
        .map(|c| request.group.as_ref().map(|g| format!("{g}={}", c.group)).unwrap_or_else(|| "all".into()))
        .collect();
    if let Some(path) = &request.curves_svg {
        super::write_svg(path, &svg::kaplan_meier_svg(&curves, &labels, &request.time))?;
    }
    Ok(KaplanMeierReport { km: curves, labels, missing: kept.missing })
}

pub(super) fn logrank(table: &CsvTable, request: &LogRankRequest) -> Result<LogRankReport, StatsJobError> {
    let mut wanted = vec![request.time.as_str(), request.event.as_str(), request.group.as_str()];
    wanted.extend(request.strata.as_deref());
    let kept = table.complete("log-rank test", &wanted)?;
    let strata = request.strata.as_ref().map(|_| kept.columns[3].as_slice());
    let logrank = survival::logrank(&kept.columns[0], &kept.columns[1], &kept.columns[2], strata).map_err(|e| {
        let arguments =
            [("time", request.time.as_str()), ("status", request.event.as_str()), ("group", request.group.as_str())];
        kept.locate(e, &arguments)
    })?;
    Ok(LogRankReport { logrank, missing: kept.missing, request: request.clone() })
}

impl fmt::Display for CoxReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fit = &self.cox;
        let (lr, wald, score) = (&fit.likelihood_ratio, &fit.wald, &fit.score);
        writeln!(
            f,
            "Cox model ({:?} ties{}): n = {}, events = {}\n{}\nlikelihood ratio test {:.6} on {} df, p = {:.6e}\nWald test {:.6} on {} df, p = {:.6e}\nscore (log-rank) test {:.6} on {} df, p = {:.6e}\nconcordance {:.6} (se {:.6})\n{}",
            fit.ties, self.strata.as_ref().map(|s| format!(", stratified by {s}")).unwrap_or_default(), fit.n, fit.events,
            coef_table("hazard ratio", &fit.coefficients, true),
            lr.statistic, lr.df, lr.p_value, wald.statistic, wald.df, wald.p_value, score.statistic, score.df, score.p_value,
            fit.concordance.concordance, fit.concordance.std_err, missing_line(&self.missing)
        )
    }
}

impl fmt::Display for KaplanMeierReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:<16} {:>6} {:>7} {:>10} {:>10} {:>10}", "group", "n", "events", "median", "lower", "upper")?;
        for (c, label) in self.km.iter().zip(&self.labels) {
            writeln!(
                f,
                "{:<16} {:>6} {:>7} {:>10} {:>10} {:>10}",
                label,
                c.n,
                c.events,
                na(c.median),
                na(c.median_lower),
                na(c.median_upper)
            )?;
        }
        writeln!(f, "{}", missing_line(&self.missing))
    }
}

impl fmt::Display for LogRankReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (t, group) = (&self.logrank, &self.request.group);
        let strata = self.request.strata.as_ref().map(|s| format!(", stratified by {s}")).unwrap_or_default();
        writeln!(f, "log-rank test by {group}{strata}")?;
        for ((g, o), e) in t.groups.iter().zip(&t.observed).zip(&t.expected) {
            writeln!(f, "{group}={g}: observed {o}, expected {e:.4}")?;
        }
        writeln!(
            f,
            "chi-squared = {:.6} on {} df, p = {:.6e}\n{}",
            t.test.statistic,
            t.test.df,
            t.test.p_value,
            missing_line(&self.missing)
        )
    }
}
