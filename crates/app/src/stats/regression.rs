//! Regressions: logistic (odds ratios, with a forest plot if asked),
//! linear, and Poisson (rate ratios, with an offset on the log scale).

use std::fmt;

use evident_stats::glm::{self, Coefficient, Family, GlmConfig, GlmFit, Predictor};
use evident_stats::{svg, MissingReport};
use serde::Serialize;

use super::error::StatsJobError;
use super::request::RegressionRequest;
use super::table::{CompleteCases, CsvTable};
use super::text::{coef_table, missing_line, with_covariates};

/// A GLM fit without its per-row vectors, with the exponentiated
/// coefficients (odds or rate ratios).
#[derive(Debug, Clone, Serialize)]
pub struct GlmSummary {
    pub family: Family,
    pub coefficients: Vec<Coefficient>,
    pub exp_coefficients: Vec<ExpCoefficient>,
    pub deviance: f64,
    pub null_deviance: f64,
    pub aic: f64,
    pub df_residual: f64,
    pub df_null: f64,
    pub iterations: usize,
    pub n: usize,
}

/// exp(estimate) and exp of its CI.
#[derive(Debug, Clone, Serialize)]
pub struct ExpCoefficient {
    pub term: String,
    pub estimate: f64,
    pub conf_low: f64,
    pub conf_high: f64,
}

impl From<GlmFit> for GlmSummary {
    fn from(fit: GlmFit) -> GlmSummary {
        let exp_coefficients = fit
            .coefficients
            .iter()
            .map(|c| {
                let (conf_low, conf_high) = c.exp_conf();
                ExpCoefficient { term: c.term.clone(), estimate: c.exp_estimate(), conf_low, conf_high }
            })
            .collect();
        GlmSummary {
            family: fit.family,
            coefficients: fit.coefficients,
            exp_coefficients,
            deviance: fit.deviance,
            null_deviance: fit.null_deviance,
            aic: fit.aic,
            df_residual: fit.df_residual,
            df_null: fit.df_null,
            iterations: fit.iterations,
            n: fit.n,
        }
    }
}

/// `{"logistic": ..., "missing": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct LogisticReport {
    pub logistic: GlmSummary,
    pub missing: MissingReport,
    #[serde(skip)]
    pub outcome: String,
}

/// `{"poisson": ..., "missing": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct PoissonReport {
    pub poisson: GlmSummary,
    pub missing: MissingReport,
    #[serde(skip)]
    pub outcome: String,
    #[serde(skip)]
    pub offset: Option<String>,
}

/// `{"linear": ..., "missing": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct LinearReport {
    pub linear: LinearSummary,
    pub missing: MissingReport,
    #[serde(skip)]
    pub outcome: String,
}

/// A linear fit without its per-row vectors.
#[derive(Debug, Clone, Serialize)]
pub struct LinearSummary {
    pub coefficients: Vec<Coefficient>,
    pub sigma: f64,
    pub r_squared: f64,
    pub adj_r_squared: f64,
    pub f_statistic: f64,
    pub f_p_value: f64,
    pub df_residual: f64,
    pub n: usize,
}

/// The complete rows of the outcome, the covariates and (for Poisson) the
/// offset, in that order.
fn complete<'t>(
    table: &'t CsvTable,
    analysis: &str,
    r: &RegressionRequest,
) -> Result<CompleteCases<'t>, StatsJobError> {
    let mut wanted = vec![r.outcome.as_str()];
    wanted.extend(r.covariates.iter().map(String::as_str));
    wanted.extend(r.offset.as_deref());
    table.complete(analysis, &wanted)
}

fn predictors<'a>(names: &'a [String], cols: &'a [Vec<f64>]) -> Vec<Predictor<'a>> {
    names.iter().zip(cols).map(|(n, c)| Predictor { name: n, values: c }).collect()
}

pub(super) fn logistic(
    table: &CsvTable,
    request: &RegressionRequest,
    level: f64,
) -> Result<LogisticReport, StatsJobError> {
    let kept = complete(table, "logistic regression", request)?;
    let x = predictors(&request.covariates, &kept.columns[1..]);
    let fit = glm::glm(&kept.columns[0], &x, Family::Binomial, &GlmConfig { conf_level: level, ..Default::default() })
        .map_err(|e| kept.locate(e, &with_covariates(&[("outcome", &request.outcome)], &request.covariates)))?;
    if let Some(path) = &request.forest_svg {
        let rows = forest_rows(&fit.coefficients, true);
        super::write_svg(path, &svg::forest_svg(&rows, "Odds ratio", 1.0, true))?;
    }
    Ok(LogisticReport { logistic: fit.into(), missing: kept.missing, outcome: request.outcome.clone() })
}

pub(super) fn linear(table: &CsvTable, request: &RegressionRequest, level: f64) -> Result<LinearReport, StatsJobError> {
    let kept = complete(table, "linear regression", request)?;
    let x = predictors(&request.covariates, &kept.columns[1..]);
    let fit = glm::lm(&kept.columns[0], &x, None, level)
        .map_err(|e| kept.locate(e, &with_covariates(&[("outcome", &request.outcome)], &request.covariates)))?;
    let linear = LinearSummary {
        coefficients: fit.coefficients,
        sigma: fit.sigma,
        r_squared: fit.r_squared,
        adj_r_squared: fit.adj_r_squared,
        f_statistic: fit.f_statistic,
        f_p_value: fit.f_p_value,
        df_residual: fit.df_residual,
        n: fit.n,
    };
    Ok(LinearReport { linear, missing: kept.missing, outcome: request.outcome.clone() })
}

pub(super) fn poisson(
    table: &CsvTable,
    request: &RegressionRequest,
    level: f64,
) -> Result<PoissonReport, StatsJobError> {
    let kept = complete(table, "Poisson regression", request)?;
    let covariates = &kept.columns[1..1 + request.covariates.len()];
    let x = predictors(&request.covariates, covariates);
    let offset = request.offset.as_ref().map(|_| kept.columns[kept.columns.len() - 1].as_slice());
    let config = GlmConfig { offset, conf_level: level, ..Default::default() };
    let fixed = [("outcome", request.outcome.as_str()), ("offset", request.offset.as_deref().unwrap_or_default())];
    let fit = glm::glm(&kept.columns[0], &x, Family::Poisson, &config)
        .map_err(|e| kept.locate(e, &with_covariates(&fixed, &request.covariates)))?;
    Ok(PoissonReport {
        poisson: fit.into(),
        missing: kept.missing,
        outcome: request.outcome.clone(),
        offset: request.offset.clone(),
    })
}

/// Forest plot rows: exp(estimate) with its CI, per term.
pub(super) fn forest_rows(coefs: &[Coefficient], skip_intercept: bool) -> Vec<svg::ForestRow> {
    coefs
        .iter()
        .filter(|c| !(skip_intercept && c.term == "(Intercept)"))
        .map(|c| {
            let (lo, hi) = c.exp_conf();
            svg::ForestRow { label: c.term.clone(), estimate: c.exp_estimate(), conf_low: lo, conf_high: hi }
        })
        .collect()
}

impl fmt::Display for LogisticReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fit = &self.logistic;
        writeln!(
            f,
            "logistic regression of {}\n{}\ndeviance {:.6} on {} df; null deviance {:.6} on {} df; AIC {:.6}; {} iterations\n{}",
            self.outcome, coef_table("odds ratio", &fit.coefficients, true), fit.deviance, fit.df_residual,
            fit.null_deviance, fit.df_null, fit.aic, fit.iterations, missing_line(&self.missing)
        )
    }
}

impl fmt::Display for LinearReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fit = &self.linear;
        writeln!(
            f,
            "linear regression of {}\n{}\nresidual SE {:.6} on {} df; R-squared {:.6}, adjusted {:.6}; F {:.6}, p = {:.6e}\n{}",
            self.outcome, coef_table("", &fit.coefficients, false), fit.sigma, fit.df_residual, fit.r_squared,
            fit.adj_r_squared, fit.f_statistic, fit.f_p_value, missing_line(&self.missing)
        )
    }
}

impl fmt::Display for PoissonReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fit = &self.poisson;
        writeln!(
            f,
            "Poisson regression of {}{}\n{}\ndeviance {:.6} on {} df; null deviance {:.6} on {} df; AIC {:.6}\n{}",
            self.outcome,
            self.offset.as_ref().map(|o| format!(" with offset {o}")).unwrap_or_default(),
            coef_table("rate ratio", &fit.coefficients, true),
            fit.deviance,
            fit.df_residual,
            fit.null_deviance,
            fit.df_null,
            fit.aic,
            missing_line(&self.missing)
        )
    }
}
