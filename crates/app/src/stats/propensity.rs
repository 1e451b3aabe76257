//! Propensity scores: nearest-neighbour matching on the logit of a logistic
//! propensity model, and inverse probability of treatment weighting, each
//! with covariate balance (SMD) before and after. The treatment column is
//! 1 = treated, 0 = comparator.

use std::fmt;

use evident_stats::glm::{Coefficient, Predictor};
use evident_stats::propensity::{self, Balance, Estimand, MatchConfig, OutcomeModel, WeightedEffect};
use evident_stats::MissingReport;
use serde::Serialize;

use super::error::StatsJobError;
use super::request::{IptwRequest, PsMatchRequest};
use super::table::CsvTable;
use super::text::{missing_line, with_covariates};

/// `{"ps_match": ..., "missing": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct PsMatchReport {
    pub ps_match: PsMatchSummary,
    pub missing: MissingReport,
    #[serde(skip)]
    pub ratio: usize,
    /// Treated rows among the complete cases.
    #[serde(skip)]
    pub n_treated: usize,
}

/// The matched sets, their weights and balance, and the propensity model.
#[derive(Debug, Clone, Serialize)]
pub struct PsMatchSummary {
    /// The caliper on the logit scale, if any.
    pub caliper: Option<f64>,
    pub n_treated_matched: usize,
    pub n_controls_matched: usize,
    pub pairs: Vec<MatchedSet>,
    pub weights: Vec<f64>,
    pub balance: Vec<Balance>,
    pub propensity_model: Vec<Coefficient>,
}

/// One treated row and its controls, 1-based among the complete rows.
#[derive(Debug, Clone, Serialize)]
pub struct MatchedSet {
    pub treated: usize,
    pub controls: Vec<usize>,
}

/// `{"iptw": {"estimand", "effect", "balance"}, "missing": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct IptwReport {
    pub iptw: IptwSummary,
    pub missing: MissingReport,
    #[serde(skip)]
    pub request: IptwRequest,
}

/// The weighted treatment effect and the balance the weights reach.
#[derive(Debug, Clone, Serialize)]
pub struct IptwSummary {
    pub estimand: Estimand,
    pub effect: WeightedEffect,
    pub balance: Vec<Balance>,
}

fn predictors<'a>(names: &'a [String], cols: &'a [Vec<f64>]) -> Vec<Predictor<'a>> {
    names.iter().zip(cols).map(|(n, c)| Predictor { name: n, values: c }).collect()
}

pub(super) fn ps_match(table: &CsvTable, request: &PsMatchRequest) -> Result<PsMatchReport, StatsJobError> {
    let mut wanted = vec![request.treatment.as_str()];
    wanted.extend(request.covariates.iter().map(String::as_str));
    let kept = table.complete("propensity score matching", &wanted)?;
    // The propensity model is a logistic regression of the treatment.
    let fixed = [("treatment", request.treatment.as_str()), ("outcome", request.treatment.as_str())];
    let arguments = with_covariates(&fixed, &request.covariates);
    let locate = |e| kept.locate(e, &arguments);
    let treat = &kept.columns[0];
    let x = predictors(&request.covariates, &kept.columns[1..]);
    let ps = propensity::propensity_scores(treat, &x).map_err(locate)?;
    let config = MatchConfig {
        ratio: request.ratio,
        caliper_sd: request.caliper_sd,
        order: request.order,
        arithmetic: request.arithmetic,
    };
    let m = propensity::match_nearest(treat, &ps.logit, &config).map_err(locate)?;
    let balance = propensity::balance(treat, &x, &m.weights).map_err(locate)?;
    let pairs = m
        .pairs
        .iter()
        .map(|(t, c)| MatchedSet { treated: t + 1, controls: c.iter().map(|c| c + 1).collect() })
        .collect();
    let ps_match = PsMatchSummary {
        caliper: m.caliper,
        n_treated_matched: m.n_treated_matched,
        n_controls_matched: m.n_controls_matched,
        pairs,
        weights: m.weights,
        balance,
        propensity_model: ps.model.coefficients,
    };
    let n_treated = treat.iter().filter(|t| **t == 1.0).count();
    Ok(PsMatchReport { ps_match, missing: kept.missing, ratio: request.ratio, n_treated })
}

pub(super) fn iptw(table: &CsvTable, request: &IptwRequest, level: f64) -> Result<IptwReport, StatsJobError> {
    let mut wanted = vec![request.treatment.as_str(), request.outcome.as_str()];
    wanted.extend(request.covariates.iter().map(String::as_str));
    let kept = table.complete("inverse probability weighting", &wanted)?;
    let treat = &kept.columns[0];
    let x = predictors(&request.covariates, &kept.columns[2..]);
    let propensity_arguments = with_covariates(
        &[("treatment", request.treatment.as_str()), ("outcome", request.treatment.as_str())],
        &request.covariates,
    );
    let ps = propensity::propensity_scores(treat, &x).map_err(|e| kept.locate(e, &propensity_arguments))?;
    let weight_arguments = [("treatment", request.treatment.as_str()), ("propensity score", "propensity score")];
    let weights =
        propensity::ipw_weights(treat, &ps.score, request.estimand).map_err(|e| kept.locate(e, &weight_arguments))?;
    // The outcome model regresses the outcome on a predictor named `treatment`.
    let outcome_arguments = [("outcome", request.outcome.as_str()), ("treatment", request.treatment.as_str())];
    let effect = propensity::weighted_effect(&kept.columns[1], treat, &weights, request.outcome_model, level)
        .map_err(|e| kept.locate(e, &outcome_arguments))?;
    let balance = propensity::balance(treat, &x, &weights).map_err(|e| kept.locate(e, &propensity_arguments))?;
    let iptw = IptwSummary { estimand: request.estimand, effect, balance };
    Ok(IptwReport { iptw, missing: kept.missing, request: request.clone() })
}

fn balance_table(f: &mut fmt::Formatter<'_>, balance: &[Balance], missing: &MissingReport) -> fmt::Result {
    for b in balance {
        writeln!(f, "{:<20} {:>12.4} {:>12.4}", b.covariate, b.smd_before, b.smd_after)?;
    }
    writeln!(f, "{}", missing_line(missing))
}

impl fmt::Display for PsMatchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.ps_match;
        writeln!(
            f,
            "propensity score matching 1:{} on the logit{}: {} of {} treated matched to {} controls\n{:<20} {:>12} {:>12}",
            self.ratio,
            m.caliper.map(|c| format!(", caliper {c:.6}")).unwrap_or_default(),
            m.n_treated_matched,
            self.n_treated,
            m.n_controls_matched,
            "covariate",
            "SMD before",
            "SMD after"
        )?;
        balance_table(f, &m.balance, &self.missing)
    }
}

impl fmt::Display for IptwReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = &self.iptw.effect;
        let scale = match self.request.outcome_model {
            OutcomeModel::Logistic => {
                format!("odds ratio {:.6} (CI {:.6} to {:.6})", e.estimate.exp(), e.conf_low.exp(), e.conf_high.exp())
            }
            OutcomeModel::Linear => {
                format!("mean difference {:.6} (CI {:.6} to {:.6})", e.estimate, e.conf_low, e.conf_high)
            }
        };
        writeln!(
            f,
            "IPTW ({:?}) effect of {} on {}: {scale}; robust SE {:.6}, p = {:.6e}\n{:<20} {:>12} {:>12}",
            self.iptw.estimand,
            self.request.treatment,
            self.request.outcome,
            e.robust_se,
            e.p_value,
            "covariate",
            "SMD before",
            "SMD after"
        )?;
        balance_table(f, &self.iptw.balance, &self.missing)
    }
}
