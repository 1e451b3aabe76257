//! What a statistics job is asked: a CSV file, a confidence level, and one
//! [`Estimator`] with its options. Options are the library's own types
//! (`Ties`, `ConfType`, `MatchOrder`, `Estimand`, `OutcomeModel`), which
//! parse from their command-line spellings; nothing here knows argv.
//! Every column option names one of the user's columns.

use std::path::PathBuf;

use evident_stats::propensity::{DistanceArithmetic, Estimand, MatchOrder, OutcomeModel};
use evident_stats::survival::{ConfType, Ties};

/// One statistics job.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsRequest {
    /// CSV file with a header row and numeric columns.
    pub data: PathBuf,
    /// Confidence level for intervals (0.95).
    pub conf_level: f64,
    pub estimator: Estimator,
}

/// One analysis and its options.
#[derive(Debug, Clone, PartialEq)]
pub enum Estimator {
    Describe(DescribeRequest),
    TTest(TwoSampleRequest),
    Wilcoxon(TwoSampleRequest),
    Kruskal(KruskalRequest),
    ChiSquare(CrossTabRequest),
    Fisher(CrossTabRequest),
    Logistic(RegressionRequest),
    Linear(RegressionRequest),
    Poisson(RegressionRequest),
    Cox(CoxRequest),
    KaplanMeier(KaplanMeierRequest),
    LogRank(LogRankRequest),
    PsMatch(PsMatchRequest),
    Iptw(IptwRequest),
    Auc(AucRequest),
}

/// Table 1: n, mean, SD, median, IQR, counts and percentages, and SMDs by a
/// 0/1 group.
#[derive(Debug, Clone, PartialEq)]
pub struct DescribeRequest {
    /// The variables; none: every column but the group.
    pub columns: Vec<String>,
    pub group: Option<String>,
    /// Variables with at most this many distinct values are categorical.
    pub max_levels: usize,
}

/// `outcome` compared between the 2 values of `group` (t-test: Welch unless
/// `equal_var`; Wilcoxon rank-sum ignores `equal_var`).
#[derive(Debug, Clone, PartialEq)]
pub struct TwoSampleRequest {
    pub outcome: String,
    pub group: String,
    pub equal_var: bool,
}

/// Kruskal-Wallis test of `outcome` across the values of `group`.
#[derive(Debug, Clone, PartialEq)]
pub struct KruskalRequest {
    pub outcome: String,
    pub group: String,
}

/// A test of two categorical columns (chi-square: Yates' correction on 2x2
/// tables when `yates`; Fisher needs a 2x2 table and ignores `yates`).
#[derive(Debug, Clone, PartialEq)]
pub struct CrossTabRequest {
    pub row: String,
    pub col: String,
    pub yates: bool,
}

/// A regression of `outcome` on the covariates.
#[derive(Debug, Clone, PartialEq)]
pub struct RegressionRequest {
    pub outcome: String,
    pub covariates: Vec<String>,
    /// Poisson only: a column already on the log scale.
    pub offset: Option<String>,
    /// Logistic only: where to write a forest plot of the odds ratios.
    pub forest_svg: Option<PathBuf>,
}

/// Cox proportional hazards.
#[derive(Debug, Clone, PartialEq)]
pub struct CoxRequest {
    pub time: String,
    /// 1 = event, 0 = censored.
    pub event: String,
    pub covariates: Vec<String>,
    pub strata: Option<String>,
    pub ties: Ties,
    /// Where to write a forest plot of the hazard ratios.
    pub forest_svg: Option<PathBuf>,
}

/// Kaplan-Meier curves with Greenwood CIs and median survival.
#[derive(Debug, Clone, PartialEq)]
pub struct KaplanMeierRequest {
    pub time: String,
    pub event: String,
    pub group: Option<String>,
    pub conf_type: ConfType,
    /// Where to write the curves with numbers at risk.
    pub curves_svg: Option<PathBuf>,
}

/// Log-rank test, optionally stratified.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRankRequest {
    pub time: String,
    pub event: String,
    pub group: String,
    pub strata: Option<String>,
}

/// Propensity score nearest-neighbour matching on the logit, with balance.
#[derive(Debug, Clone, PartialEq)]
pub struct PsMatchRequest {
    pub treatment: String,
    pub covariates: Vec<String>,
    /// Controls per treated unit.
    pub ratio: usize,
    /// Caliper in SDs of the logit; `None` for none.
    pub caliper_sd: Option<f64>,
    pub order: MatchOrder,
    pub arithmetic: DistanceArithmetic,
}

/// Inverse probability of treatment weighting with robust (sandwich) SEs.
#[derive(Debug, Clone, PartialEq)]
pub struct IptwRequest {
    pub treatment: String,
    pub covariates: Vec<String>,
    pub outcome: String,
    pub estimand: Estimand,
    pub outcome_model: OutcomeModel,
}

/// ROC AUC of `predictor` for the 0/1 `outcome`, with DeLong CI.
#[derive(Debug, Clone, PartialEq)]
pub struct AucRequest {
    pub outcome: String,
    pub predictor: String,
}
