//! Statistics on a table: `evident stats` as a job. [`run`] reads a CSV
//! file, keeps the rows complete in the columns the analysis uses, runs one
//! estimator of `evident-stats`, writes any plot asked for, and returns a
//! [`StatsReport`]: `Serialize` (the `--json` output) and `Display` (the
//! text output). The job never prints.
//!
//! Split by question:
//! - [`request`]: what is asked ([`StatsRequest`], [`Estimator`]).
//! - [`table`]: the CSV as a numeric table that remembers each row's line.
//! - [`error`]: refusals in the user's terms (file, column, line).
//! - `describe`, `htest`, `regression`, `survival`, `propensity`, `roc`:
//!   each runs its estimators and renders their reports.

mod describe;
pub mod error;
mod htest;
mod propensity;
mod regression;
pub mod request;
mod roc;
mod survival;
pub mod table;
#[cfg(test)]
mod tests;
mod text;

use std::fmt;
use std::path::Path;

use serde::Serialize;

pub use describe::{DescribeReport, DescribedVariable};
pub use error::StatsJobError;
pub use htest::{ChiSquareReport, FisherReport, KruskalReport, TTestReport, WilcoxonReport};
pub use propensity::{IptwReport, PsMatchReport};
pub use regression::{GlmSummary, LinearReport, LogisticReport, PoissonReport};
pub use request::{
    AucRequest, CoxRequest, CrossTabRequest, DescribeRequest, Estimator, IptwRequest, KaplanMeierRequest,
    KruskalRequest, LogRankRequest, PsMatchRequest, RegressionRequest, StatsRequest, TwoSampleRequest,
};
pub use roc::AucReport;
pub use survival::{CoxReport, KaplanMeierReport, LogRankReport};
pub use table::{CompleteCases, CsvTable};

/// The result of one statistics job. Its JSON is one object keyed by the
/// analysis (`cox`, `km`, `ttest`, ...) with the `missing` report beside
/// it; its text is what `evident stats` prints.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum StatsReport {
    Describe(DescribeReport),
    TTest(TTestReport),
    Wilcoxon(WilcoxonReport),
    Kruskal(KruskalReport),
    ChiSquare(ChiSquareReport),
    Fisher(FisherReport),
    Logistic(LogisticReport),
    Linear(LinearReport),
    Poisson(PoissonReport),
    Cox(CoxReport),
    KaplanMeier(KaplanMeierReport),
    LogRank(LogRankReport),
    PsMatch(PsMatchReport),
    Iptw(IptwReport),
    Auc(AucReport),
}

/// Runs one statistics job.
pub fn run(request: &StatsRequest) -> Result<StatsReport, StatsJobError> {
    let table = CsvTable::read(&request.data)?;
    let level = request.conf_level;
    let report = match &request.estimator {
        Estimator::Describe(r) => StatsReport::Describe(describe::describe(&table, r)?),
        Estimator::TTest(r) => StatsReport::TTest(htest::t_test(&table, r, level)?),
        Estimator::Wilcoxon(r) => StatsReport::Wilcoxon(htest::wilcoxon(&table, r)?),
        Estimator::Kruskal(r) => StatsReport::Kruskal(htest::kruskal(&table, r)?),
        Estimator::ChiSquare(r) => StatsReport::ChiSquare(htest::chi_square(&table, r)?),
        Estimator::Fisher(r) => StatsReport::Fisher(htest::fisher(&table, r, level)?),
        Estimator::Logistic(r) => StatsReport::Logistic(regression::logistic(&table, r, level)?),
        Estimator::Linear(r) => StatsReport::Linear(regression::linear(&table, r, level)?),
        Estimator::Poisson(r) => StatsReport::Poisson(regression::poisson(&table, r, level)?),
        Estimator::Cox(r) => StatsReport::Cox(survival::cox(&table, r, level)?),
        Estimator::KaplanMeier(r) => StatsReport::KaplanMeier(survival::kaplan_meier(&table, r, level)?),
        Estimator::LogRank(r) => StatsReport::LogRank(survival::logrank(&table, r)?),
        Estimator::PsMatch(r) => StatsReport::PsMatch(propensity::ps_match(&table, r)?),
        Estimator::Iptw(r) => StatsReport::Iptw(propensity::iptw(&table, r, level)?),
        Estimator::Auc(r) => StatsReport::Auc(roc::auc(&table, r, level)?),
    };
    Ok(report)
}

impl fmt::Display for StatsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatsReport::Describe(r) => r.fmt(f),
            StatsReport::TTest(r) => r.fmt(f),
            StatsReport::Wilcoxon(r) => r.fmt(f),
            StatsReport::Kruskal(r) => r.fmt(f),
            StatsReport::ChiSquare(r) => r.fmt(f),
            StatsReport::Fisher(r) => r.fmt(f),
            StatsReport::Logistic(r) => r.fmt(f),
            StatsReport::Linear(r) => r.fmt(f),
            StatsReport::Poisson(r) => r.fmt(f),
            StatsReport::Cox(r) => r.fmt(f),
            StatsReport::KaplanMeier(r) => r.fmt(f),
            StatsReport::LogRank(r) => r.fmt(f),
            StatsReport::PsMatch(r) => r.fmt(f),
            StatsReport::Iptw(r) => r.fmt(f),
            StatsReport::Auc(r) => r.fmt(f),
        }
    }
}

/// Writes a plot where the request asked for one.
fn write_svg(path: &Path, svg: &str) -> Result<(), StatsJobError> {
    std::fs::write(path, svg).map_err(|source| StatsJobError::WriteSvg { path: path.to_path_buf(), source })
}
