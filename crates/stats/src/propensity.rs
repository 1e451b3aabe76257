//! Propensity scores as epidemiologists run them in R: a logistic PS model;
//! greedy nearest-neighbour matching without replacement on the linear
//! predictor (logit of the PS) with a caliper in SD units, exactly as
//! MatchIt 4.5 `matchit(method = "nearest", distance = "glm",
//! link = "linear.logit", caliper = 0.2)` does it (treated units matched
//! from the largest distance down, ties kept in data order, the nearer of the
//! closest available control on each side, the left one on a tie; 1:k matched
//! in k rounds); covariate balance before and after (SMD standardised by the
//! treated SD, MatchIt's ATT default); inverse probability weights for the
//! ATE and ATT and weighted outcome models with robust (HC0 sandwich) SEs.

use serde::Serialize;

use crate::describe::mean;
use crate::dist::{p_two_sided_z, qnorm};
use crate::error::{invalid, Result, Row, StatsError};
use crate::glm::{glm, lm, Family, GlmConfig, Predictor};

/// A fitted propensity score model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PropensityScores {
    pub model: crate::glm::GlmFit,
    /// P(treated | covariates).
    pub score: Vec<f64>,
    /// Linear predictor (logit of the score): MatchIt's `linear.logit` distance.
    pub logit: Vec<f64>,
}

fn check_treat(analysis: &str, treat: &[f64]) -> Result<()> {
    if let Some(i) = treat.iter().position(|t| *t != 0.0 && *t != 1.0) {
        return Err(StatsError::InvalidValue {
            analysis: analysis.into(),
            column: "treatment".into(),
            row: Row::Index(i),
            value: treat[i],
            expected: "expected 1 (treated) or 0 (comparator)".into(),
        });
    }
    let n1 = treat.iter().filter(|t| **t == 1.0).count();
    if n1 == 0 || n1 == treat.len() {
        return Err(invalid(
            analysis,
            format!("need both treated and comparator rows ({n1} treated of {})", treat.len()),
        ));
    }
    Ok(())
}

/// Logistic propensity score model of `treat` on the covariates.
pub fn propensity_scores(treat: &[f64], covariates: &[Predictor]) -> Result<PropensityScores> {
    check_treat("propensity score model", treat)?;
    let model = glm(treat, covariates, Family::Binomial, &GlmConfig::default())?;
    Ok(PropensityScores { score: model.fitted.clone(), logit: model.linear_predictor.clone(), model })
}

/// The order in which treated units pick their controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MatchOrder {
    /// Largest distance first (MatchIt's default for the ATT).
    Largest,
    Smallest,
    /// Data order.
    Data,
}

crate::spelling::spelled!(MatchOrder, "matching order", [
    "largest" => MatchOrder::Largest,
    "smallest" => MatchOrder::Smallest,
    "data" => MatchOrder::Data,
]);

/// Nearest-neighbour matching options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatchConfig {
    /// Controls per treated unit (1 for 1:1).
    pub ratio: usize,
    /// Caliper in SDs of the distance (MatchIt `std.caliper = TRUE`); None for no caliper.
    pub caliper_sd: Option<f64>,
    pub order: MatchOrder,
    /// Reproduce MatchIt 4.5.1's distance arithmetic (see [`DistanceArithmetic`]).
    pub arithmetic: DistanceArithmetic,
}

/// How distances between units are compared.
///
/// MatchIt 4.5.1's C++ matcher (`nn_matchC_vec`) calls `abs()` on a double
/// where only the C `int abs(int)` is in scope, so every distance is
/// truncated to an integer before it is compared: on the logit scale almost
/// every control is "within" a caliper below 1, and between the nearest
/// control on the left and on the right the left one wins unless the right
/// is a whole unit closer. `Exact` compares real distances (what the caliper
/// means); `MatchIt451` reproduces MatchIt 4.5.1's matched sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DistanceArithmetic {
    Exact,
    MatchIt451,
}

impl Default for MatchConfig {
    fn default() -> Self {
        Self { ratio: 1, caliper_sd: Some(0.2), order: MatchOrder::Largest, arithmetic: DistanceArithmetic::Exact }
    }
}

/// The result of matching.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Matching {
    /// For each treated unit (in data order): its row and the rows of its
    /// controls in the order they were matched (MatchIt's `match.matrix`).
    pub pairs: Vec<(usize, Vec<usize>)>,
    /// MatchIt's matching weights (0 for unmatched units).
    pub weights: Vec<f64>,
    /// The caliper on the distance scale, if any.
    pub caliper: Option<f64>,
    pub n_treated_matched: usize,
    pub n_controls_matched: usize,
}

/// Greedy nearest-neighbour matching without replacement on `distance`.
pub fn match_nearest(treat: &[f64], distance: &[f64], config: &MatchConfig) -> Result<Matching> {
    let analysis = "nearest-neighbour matching";
    check_treat(analysis, treat)?;
    if distance.len() != treat.len() || distance.iter().any(|d| !d.is_finite()) {
        return Err(invalid(analysis, "distance must have one finite value per row"));
    }
    if config.ratio == 0 {
        return Err(invalid(analysis, "ratio must be at least 1"));
    }
    let n = treat.len();
    let caliper = config.caliper_sd.map(|c| c.abs() * crate::describe::sd(distance));
    // All units in ascending distance order (stable, as R's sort.list).
    let mut d_ord: Vec<usize> = (0..n).collect();
    d_ord.sort_by(|&a, &b| distance[a].total_cmp(&distance[b]));
    let mut pos = vec![0; n];
    for (k, &i) in d_ord.iter().enumerate() {
        pos[i] = k;
    }
    let treated: Vec<usize> = (0..n).filter(|&i| treat[i] == 1.0).collect();
    let mut ord: Vec<usize> = (0..treated.len()).collect();
    match config.order {
        MatchOrder::Largest => ord.sort_by(|&a, &b| distance[treated[b]].total_cmp(&distance[treated[a]])),
        MatchOrder::Smallest => ord.sort_by(|&a, &b| distance[treated[a]].total_cmp(&distance[treated[b]])),
        MatchOrder::Data => {}
    }
    let sd_treat: Vec<bool> = d_ord.iter().map(|&i| treat[i] == 1.0).collect();
    let sd_dist: Vec<f64> = d_ord.iter().map(|&i| distance[i]).collect();
    let mut available: Vec<bool> = sd_treat.iter().map(|t| !t).collect();
    let mut n_available = available.iter().filter(|a| **a).count();
    let mut matches: Vec<Vec<usize>> = vec![Vec::new(); treated.len()];
    'rounds: for _round in 0..config.ratio {
        for &t in &ord {
            let ii = pos[treated[t]];
            let gap = |k: usize| {
                let g = sd_dist[ii] - sd_dist[k];
                match config.arithmetic {
                    DistanceArithmetic::Exact => g.abs(),
                    DistanceArithmetic::MatchIt451 => g.trunc().abs(),
                }
            };
            let within = |k: usize| caliper.is_none_or(|c| gap(k) <= c);
            let left = (0..ii).rev().find(|&k| available[k]).filter(|&k| within(k));
            let right = (ii + 1..n).find(|&k| available[k]).filter(|&k| within(k));
            let k = match (left, right) {
                (Some(l), Some(r)) => {
                    if gap(l) <= gap(r) {
                        l
                    } else {
                        r
                    }
                }
                (Some(l), None) => l,
                (None, Some(r)) => r,
                (None, None) => continue,
            };
            matches[t].push(d_ord[k]);
            available[k] = false;
            n_available -= 1;
            if n_available == 0 {
                break 'rounds;
            }
        }
    }
    // MatchIt weights: treated 1 if matched; each control gets 1/k from each
    // treated unit with k controls, rescaled to sum to the matched controls.
    let mut weights = vec![0.0; n];
    for (t, m) in matches.iter().enumerate() {
        if !m.is_empty() {
            weights[treated[t]] = 1.0;
            for &c in m {
                weights[c] += 1.0 / m.len() as f64;
            }
        }
    }
    let n_controls_matched = (0..n).filter(|&i| treat[i] == 0.0 && weights[i] > 0.0).count();
    let sum_c: f64 = (0..n).filter(|&i| treat[i] == 0.0).map(|i| weights[i]).sum();
    if sum_c > 0.0 {
        for i in 0..n {
            if treat[i] == 0.0 {
                weights[i] *= n_controls_matched as f64 / sum_c;
            }
        }
    }
    let n_treated_matched = matches.iter().filter(|m| !m.is_empty()).count();
    if n_treated_matched == 0 {
        return Err(invalid(analysis, "no treated unit found a control within the caliper; widen the caliper"));
    }
    Ok(Matching {
        pairs: treated.iter().zip(matches).map(|(&t, m)| (t, m)).collect(),
        weights,
        caliper,
        n_treated_matched,
        n_controls_matched,
    })
}

/// Balance of one covariate before and after matching or weighting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Balance {
    pub covariate: String,
    pub mean_treated_before: f64,
    pub mean_control_before: f64,
    pub smd_before: f64,
    pub mean_treated_after: f64,
    pub mean_control_after: f64,
    pub smd_after: f64,
}

fn weighted_mean(x: &[f64], w: &[f64]) -> f64 {
    x.iter().zip(w).map(|(x, w)| x * w).sum::<f64>() / w.iter().sum::<f64>()
}

/// Standardised mean differences before and after (weights of 0 drop a
/// unit), standardised by the SD of the treated in the full sample, with
/// p (1 - p) as the variance of a 0/1 covariate (MatchIt's `summary`).
pub fn balance(treat: &[f64], covariates: &[Predictor], weights: &[f64]) -> Result<Vec<Balance>> {
    check_treat("balance", treat)?;
    let mut out = Vec::new();
    for c in covariates {
        let x1: Vec<f64> = c.values.iter().zip(treat).filter(|(_, t)| **t == 1.0).map(|(v, _)| *v).collect();
        let x0: Vec<f64> = c.values.iter().zip(treat).filter(|(_, t)| **t == 0.0).map(|(v, _)| *v).collect();
        let w1: Vec<f64> = weights.iter().zip(treat).filter(|(_, t)| **t == 1.0).map(|(v, _)| *v).collect();
        let w0: Vec<f64> = weights.iter().zip(treat).filter(|(_, t)| **t == 0.0).map(|(v, _)| *v).collect();
        let binary = c.values.iter().all(|v| *v == 0.0 || *v == 1.0);
        let m1 = mean(&x1);
        let var1 = if binary { m1 * (1.0 - m1) } else { crate::describe::var(&x1) };
        let sd = var1.sqrt();
        let (a1, a0) = (weighted_mean(&x1, &w1), weighted_mean(&x0, &w0));
        let m0 = mean(&x0);
        out.push(Balance {
            covariate: c.name.to_string(),
            mean_treated_before: m1,
            mean_control_before: m0,
            smd_before: (m1 - m0) / sd,
            mean_treated_after: a1,
            mean_control_after: a0,
            smd_after: (a1 - a0) / sd,
        });
    }
    Ok(out)
}

/// The estimand that inverse probability weights target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Estimand {
    Ate,
    Att,
}

crate::spelling::spelled!(Estimand, "estimand", ["ate" => Estimand::Ate, "att" => Estimand::Att]);

/// Inverse probability weights: ATE t/e + (1-t)/(1-e); ATT t + (1-t) e/(1-e).
pub fn ipw_weights(treat: &[f64], score: &[f64], estimand: Estimand) -> Result<Vec<f64>> {
    check_treat("inverse probability weights", treat)?;
    if let Some(i) = score.iter().position(|e| !(*e > 0.0 && *e < 1.0)) {
        return Err(StatsError::InvalidValue {
            analysis: "inverse probability weights".into(),
            column: "propensity score".into(),
            row: Row::Index(i),
            value: score[i],
            expected: "expected a probability strictly between 0 and 1 (a score of 0 or 1 means no overlap)".into(),
        });
    }
    Ok(treat
        .iter()
        .zip(score)
        .map(|(t, e)| match estimand {
            Estimand::Ate => t / e + (1.0 - t) / (1.0 - e),
            Estimand::Att => t + (1.0 - t) * e / (1.0 - e),
        })
        .collect())
}

/// A treatment effect from a weighted outcome model with robust SE.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeightedEffect {
    /// Coefficient of treatment: log odds ratio (binary outcome) or mean
    /// difference (continuous outcome).
    pub estimate: f64,
    pub robust_se: f64,
    pub z: f64,
    pub p_value: f64,
    pub conf_low: f64,
    pub conf_high: f64,
}

/// Outcome family for [`weighted_effect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeModel {
    /// Weighted logistic regression (R: `glm(y ~ t, weights = w, family = quasibinomial)`).
    Logistic,
    /// Weighted least squares (R: `lm(y ~ t, weights = w)`).
    Linear,
}

crate::spelling::spelled!(OutcomeModel, "outcome model", ["logistic" => OutcomeModel::Logistic, "linear" => OutcomeModel::Linear]);

/// The treatment coefficient of `y ~ treat` fitted with weights, with the HC0
/// sandwich SE (R: `sandwich::vcovHC(fit, type = "HC0")`) and a Wald CI.
pub fn weighted_effect(
    y: &[f64],
    treat: &[f64],
    weights: &[f64],
    model: OutcomeModel,
    conf_level: f64,
) -> Result<WeightedEffect> {
    let x = [Predictor { name: "treatment", values: treat }];
    let (est, cov) = match model {
        OutcomeModel::Logistic => {
            let fit = glm(y, &x, Family::Binomial, &GlmConfig { weights: Some(weights), ..Default::default() })?;
            let cov = fit.robust_covariance(y, &x, Some(weights));
            (fit.coefficients[1].estimate, cov)
        }
        OutcomeModel::Linear => {
            let fit = lm(y, &x, Some(weights), conf_level)?;
            let cov = fit.robust_covariance(&x, Some(weights));
            (fit.coefficients[1].estimate, cov)
        }
    };
    let se = cov[3].sqrt();
    let level = if conf_level > 0.0 { conf_level } else { 0.95 };
    let z = qnorm(0.5 + level / 2.0);
    Ok(WeightedEffect {
        estimate: est,
        robust_se: se,
        z: est / se,
        p_value: p_two_sided_z(est / se),
        conf_low: est - z * se,
        conf_high: est + z * se,
    })
}

/// A propensity-score-matched treatment comparison, end to end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatchedEffect {
    pub scores: PropensityScores,
    pub matching: Matching,
    /// SMDs before and after matching (MatchIt's `summary`).
    pub balance: Vec<Balance>,
    /// Treatment coefficient of the outcome model in the matched sample.
    pub effect: WeightedEffect,
    /// Units in the matched sample (treated and controls).
    pub n_matched: usize,
}

/// Propensity score matching as an epidemiologist runs it: a logistic PS
/// model of `treat` on the covariates; greedy 1:`ratio` nearest-neighbour
/// matching without replacement on the logit of the PS with the caliper in
/// SDs of the logit ([`match_nearest`], real distances unless the config
/// says otherwise); then `y ~ treat` fitted on the matched units only with
/// MatchIt's matching weights (all 1 for 1:1).
///
/// Estimand: the average treatment effect in the matched treated (ATT
/// restricted to the treated units that found a control): a log odds ratio
/// ([`OutcomeModel::Logistic`]) or a mean difference
/// ([`OutcomeModel::Linear`]). Variance: the HC0 sandwich of the weighted
/// outcome model over the matched units, units treated as independent (no
/// pair clustering) and the PS as known. In R: `glm(y ~ t, weights = w,
/// family = quasibinomial, subset = w > 0)` (or `lm`) and
/// `sandwich::vcovHC(fit, type = "HC0")`; `tests/propensity_vs_r.rs` checks it
/// with matching written in base R.
pub fn matched_effect(
    y: &[f64],
    treat: &[f64],
    covariates: &[Predictor],
    config: &MatchConfig,
    model: OutcomeModel,
    conf_level: f64,
) -> Result<MatchedEffect> {
    if y.len() != treat.len() {
        return Err(invalid("matched effect", "the outcome and the treatment must have one value per row"));
    }
    let scores = propensity_scores(treat, covariates)?;
    let matching = match_nearest(treat, &scores.logit, config)?;
    let balance = balance(treat, covariates, &matching.weights)?;
    let keep: Vec<usize> = (0..y.len()).filter(|&i| matching.weights[i] > 0.0).collect();
    let pick = |v: &[f64]| keep.iter().map(|&i| v[i]).collect::<Vec<f64>>();
    let effect = weighted_effect(&pick(y), &pick(treat), &pick(&matching.weights), model, conf_level)?;
    Ok(MatchedEffect { scores, matching, balance, effect, n_matched: keep.len() })
}

/// An inverse-probability-of-treatment-weighted comparison, end to end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IptwEffect {
    pub scores: PropensityScores,
    pub weights: Vec<f64>,
    /// SMDs unweighted and weighted.
    pub balance: Vec<Balance>,
    pub effect: WeightedEffect,
}

/// IPTW: a logistic PS model, weights for `estimand` ([`ipw_weights`]:
/// ATE t/e + (1-t)/(1-e), ATT t + (1-t) e/(1-e), not stabilised, not
/// trimmed), and `y ~ treat` fitted with those weights. The estimate is the
/// marginal log odds ratio ([`OutcomeModel::Logistic`]) or mean difference
/// ([`OutcomeModel::Linear`]) for the estimand; the variance is the HC0
/// sandwich of the weighted outcome model with the PS treated as known
/// (conservative for the ATE). In R: `glm(y ~ t, weights = w, family =
/// quasibinomial)` (or `lm`) and `sandwich::vcovHC(fit, type = "HC0")`.
pub fn iptw_effect(
    y: &[f64],
    treat: &[f64],
    covariates: &[Predictor],
    estimand: Estimand,
    model: OutcomeModel,
    conf_level: f64,
) -> Result<IptwEffect> {
    if y.len() != treat.len() {
        return Err(invalid("IPTW effect", "the outcome and the treatment must have one value per row"));
    }
    let scores = propensity_scores(treat, covariates)?;
    let weights = ipw_weights(treat, &scores.score, estimand)?;
    let balance = balance(treat, covariates, &weights)?;
    let effect = weighted_effect(y, treat, &weights, model, conf_level)?;
    Ok(IptwEffect { scores, weights, balance, effect })
}
