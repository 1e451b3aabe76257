//! The clap definitions of `evident stats`'s subcommands. Option values
//! parse straight into `evident-stats`'s own enums through their spellings
//! (`efron|breslow`, `log|log-log`, `largest|smallest|data`, `ate|att`,
//! `logistic|linear`).

use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use evident_stats::propensity::{Estimand, MatchOrder, OutcomeModel};
use evident_stats::spelling::Spelled;
use evident_stats::survival::{ConfType, Ties};

/// A parser that accepts exactly the spellings of `T` (listed in `--help`).
fn spelled<T: Spelled + Clone + Send + Sync>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(T::SPELLINGS.iter().map(|(spelling, _)| *spelling))
        .map(|text| T::from_spelling(&text).expect("clap accepts only the listed spellings"))
}

/// The CSV input every subcommand takes.
#[derive(clap::Args, Debug, Clone)]
pub struct Data {
    /// CSV file with a header row; numeric columns; empty, NA, NaN or . = missing.
    #[arg(long)]
    pub data: PathBuf,
    /// Confidence level for intervals.
    #[arg(long, default_value_t = 0.95)]
    pub conf_level: f64,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum StatsCommand {
    /// Table 1: n, mean, SD, median, IQR, counts and percentages, SMD by group.
    Describe {
        #[command(flatten)]
        data: Data,
        /// Columns to describe (comma-separated); default: all but the group.
        #[arg(long, value_delimiter = ',')]
        columns: Vec<String>,
        /// 0/1 column to split by (adds SMDs).
        #[arg(long)]
        group: Option<String>,
        /// Variables with at most this many distinct values are categorical.
        #[arg(long, default_value_t = 5)]
        max_levels: usize,
    },
    /// Two-sample t-test (Welch unless --equal-var) of --outcome between the 2 values of --group.
    Ttest {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        outcome: String,
        #[arg(long)]
        group: String,
        #[arg(long)]
        equal_var: bool,
    },
    /// Wilcoxon rank-sum (Mann-Whitney) test of --outcome between the 2 values of --group.
    Wilcoxon {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        outcome: String,
        #[arg(long)]
        group: String,
    },
    /// Kruskal-Wallis test of --outcome across the values of --group.
    Kruskal {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        outcome: String,
        #[arg(long)]
        group: String,
    },
    /// Chi-square test of independence of two categorical columns.
    Chisq {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        row: String,
        #[arg(long)]
        col: String,
        /// No Yates continuity correction for 2x2 tables.
        #[arg(long)]
        no_yates: bool,
    },
    /// Fisher's exact test of two binary columns (conditional MLE odds ratio).
    Fisher {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        row: String,
        #[arg(long)]
        col: String,
    },
    /// Logistic regression: odds ratios with Wald CIs.
    Logistic {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        outcome: String,
        #[arg(long, value_delimiter = ',', required = true)]
        covariates: Vec<String>,
        /// Write a forest plot of the odds ratios (SVG).
        #[arg(long)]
        forest: Option<PathBuf>,
    },
    /// Linear regression.
    Linear {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        outcome: String,
        #[arg(long, value_delimiter = ',', required = true)]
        covariates: Vec<String>,
    },
    /// Poisson regression: rate ratios; --offset names a column already on the log scale.
    Poisson {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        outcome: String,
        #[arg(long, value_delimiter = ',', required = true)]
        covariates: Vec<String>,
        #[arg(long)]
        offset: Option<String>,
    },
    /// Cox proportional hazards: hazard ratios, Wald/LR/score tests, concordance.
    Cox {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        time: String,
        /// 1 = event, 0 = censored.
        #[arg(long)]
        event: String,
        #[arg(long, value_delimiter = ',', required = true)]
        covariates: Vec<String>,
        #[arg(long)]
        strata: Option<String>,
        #[arg(long, default_value_t = Ties::Efron, value_parser = spelled::<Ties>())]
        ties: Ties,
        /// Write a forest plot of the hazard ratios (SVG).
        #[arg(long)]
        forest: Option<PathBuf>,
    },
    /// Kaplan-Meier curves with Greenwood CIs and median survival.
    Km {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        time: String,
        #[arg(long)]
        event: String,
        #[arg(long)]
        group: Option<String>,
        #[arg(long, default_value_t = ConfType::Log, value_parser = spelled::<ConfType>())]
        conf_type: ConfType,
        /// Write the curves with numbers at risk (SVG).
        #[arg(long)]
        svg: Option<PathBuf>,
    },
    /// Log-rank test, optionally stratified.
    Logrank {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        time: String,
        #[arg(long)]
        event: String,
        #[arg(long)]
        group: String,
        #[arg(long)]
        strata: Option<String>,
    },
    /// Propensity score nearest-neighbour matching on the logit, with balance.
    PsMatch {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        treatment: String,
        #[arg(long, value_delimiter = ',', required = true)]
        covariates: Vec<String>,
        /// Controls per treated unit.
        #[arg(long, default_value_t = 1)]
        ratio: usize,
        /// Caliper in SDs of the logit; 0 for none.
        #[arg(long, default_value_t = 0.2)]
        caliper: f64,
        #[arg(long, default_value_t = MatchOrder::Largest, value_parser = spelled::<MatchOrder>())]
        order: MatchOrder,
        /// Reproduce MatchIt 4.5.1's matched sets (its truncated distances).
        #[arg(long)]
        matchit_compat: bool,
    },
    /// Inverse probability of treatment weighting with robust (sandwich) SEs.
    Iptw {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        treatment: String,
        #[arg(long, value_delimiter = ',', required = true)]
        covariates: Vec<String>,
        #[arg(long)]
        outcome: String,
        #[arg(long, default_value_t = Estimand::Ate, value_parser = spelled::<Estimand>())]
        estimand: Estimand,
        #[arg(long, default_value_t = OutcomeModel::Logistic, value_parser = spelled::<OutcomeModel>())]
        outcome_model: OutcomeModel,
    },
    /// ROC AUC with DeLong CI.
    Auc {
        #[command(flatten)]
        data: Data,
        /// 1 = case, 0 = control.
        #[arg(long)]
        outcome: String,
        #[arg(long)]
        predictor: String,
    },
}
