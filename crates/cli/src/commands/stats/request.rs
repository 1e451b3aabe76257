//! The parsed `evident stats` subcommand as the statistics job's request.

use evident_app::stats::{
    AucRequest, CoxRequest, CrossTabRequest, DescribeRequest, Estimator, IptwRequest, KaplanMeierRequest,
    KruskalRequest, LogRankRequest, PsMatchRequest, RegressionRequest, StatsRequest, TwoSampleRequest,
};
use evident_stats::propensity::DistanceArithmetic;

use super::subcommands::{Data, StatsCommand};

/// The request for one subcommand.
pub fn stats_request(command: &StatsCommand) -> StatsRequest {
    let (data, estimator) = match command.clone() {
        StatsCommand::Describe { data, columns, group, max_levels } => {
            (data, Estimator::Describe(DescribeRequest { columns, group, max_levels }))
        }
        StatsCommand::Ttest { data, outcome, group, equal_var } => {
            (data, Estimator::TTest(TwoSampleRequest { outcome, group, equal_var }))
        }
        StatsCommand::Wilcoxon { data, outcome, group } => {
            (data, Estimator::Wilcoxon(TwoSampleRequest { outcome, group, equal_var: false }))
        }
        StatsCommand::Kruskal { data, outcome, group } => (data, Estimator::Kruskal(KruskalRequest { outcome, group })),
        StatsCommand::Chisq { data, row, col, no_yates } => {
            (data, Estimator::ChiSquare(CrossTabRequest { row, col, yates: !no_yates }))
        }
        StatsCommand::Fisher { data, row, col } => {
            (data, Estimator::Fisher(CrossTabRequest { row, col, yates: false }))
        }
        StatsCommand::Logistic { data, outcome, covariates, forest } => {
            let request = RegressionRequest { outcome, covariates, offset: None, forest_svg: forest };
            (data, Estimator::Logistic(request))
        }
        StatsCommand::Linear { data, outcome, covariates } => {
            (data, Estimator::Linear(RegressionRequest { outcome, covariates, offset: None, forest_svg: None }))
        }
        StatsCommand::Poisson { data, outcome, covariates, offset } => {
            (data, Estimator::Poisson(RegressionRequest { outcome, covariates, offset, forest_svg: None }))
        }
        StatsCommand::Cox { data, time, event, covariates, strata, ties, forest } => {
            (data, Estimator::Cox(CoxRequest { time, event, covariates, strata, ties, forest_svg: forest }))
        }
        StatsCommand::Km { data, time, event, group, conf_type, svg } => {
            (data, Estimator::KaplanMeier(KaplanMeierRequest { time, event, group, conf_type, curves_svg: svg }))
        }
        StatsCommand::Logrank { data, time, event, group, strata } => {
            (data, Estimator::LogRank(LogRankRequest { time, event, group, strata }))
        }
        StatsCommand::PsMatch { data, treatment, covariates, ratio, caliper, order, matchit_compat } => {
            let request = PsMatchRequest {
                treatment,
                covariates,
                ratio,
                // A caliper of 0 means none.
                caliper_sd: (caliper > 0.0).then_some(caliper),
                order,
                arithmetic: if matchit_compat { DistanceArithmetic::MatchIt451 } else { DistanceArithmetic::Exact },
            };
            (data, Estimator::PsMatch(request))
        }
        StatsCommand::Iptw { data, treatment, covariates, outcome, estimand, outcome_model } => {
            (data, Estimator::Iptw(IptwRequest { treatment, covariates, outcome, estimand, outcome_model }))
        }
        StatsCommand::Auc { data, outcome, predictor } => (data, Estimator::Auc(AucRequest { outcome, predictor })),
    };
    let Data { data, conf_level } = data;
    StatsRequest { data, conf_level, estimator }
}
