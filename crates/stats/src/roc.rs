//! ROC AUC with DeLong's variance and CI, as `pROC::roc` and
//! `pROC::ci.auc(method = "delong")` report them (direction chosen as pROC's
//! "auto": controls below cases when median(controls) <= median(cases)).

use serde::Serialize;

use crate::dist::qnorm;
use crate::error::{invalid, Result, Row, StatsError};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Auc {
    pub auc: f64,
    pub variance: f64,
    pub conf_low: f64,
    pub conf_high: f64,
    /// true when higher predictor values mean "case" (pROC direction "<").
    pub cases_higher: bool,
    pub n_cases: usize,
    pub n_controls: usize,
}

/// AUC of `predictor` for the 0/1 `response`, with DeLong CI.
pub fn auc_delong(response: &[f64], predictor: &[f64], conf_level: f64) -> Result<Auc> {
    let analysis = "ROC AUC";
    if response.len() != predictor.len() {
        return Err(invalid(analysis, "response and predictor lengths differ"));
    }
    for (i, (r, p)) in response.iter().zip(predictor).enumerate() {
        if *r != 0.0 && *r != 1.0 {
            return Err(StatsError::InvalidValue {
                analysis: analysis.into(),
                column: "response".into(),
                row: Row::Index(i),
                value: *r,
                expected: "expected 1 (case) or 0 (control)".into(),
            });
        }
        if !p.is_finite() {
            return Err(StatsError::InvalidValue {
                analysis: analysis.into(),
                column: "predictor".into(),
                row: Row::Index(i),
                value: *p,
                expected: "expected a finite number; remove missing values first".into(),
            });
        }
    }
    let mut cases: Vec<f64> = response.iter().zip(predictor).filter(|(r, _)| **r == 1.0).map(|(_, p)| *p).collect();
    let mut controls: Vec<f64> = response.iter().zip(predictor).filter(|(r, _)| **r == 0.0).map(|(_, p)| *p).collect();
    if cases.is_empty() || controls.is_empty() {
        return Err(invalid(
            analysis,
            format!("need both cases and controls ({} cases, {} controls)", cases.len(), controls.len()),
        ));
    }
    let cases_higher = crate::describe::quantile(&controls, 0.5) <= crate::describe::quantile(&cases, 0.5);
    if !cases_higher {
        cases.iter_mut().for_each(|v| *v = -*v);
        controls.iter_mut().for_each(|v| *v = -*v);
    }
    let (m, n) = (cases.len() as f64, controls.len() as f64);
    let mut sc = controls.clone();
    sc.sort_by(|a, b| a.total_cmp(b));
    let mut sx = cases.clone();
    sx.sort_by(|a, b| a.total_cmp(b));
    // Placement values: share of the other group below (ties count half).
    let place = |sorted: &[f64], v: f64| {
        let below = sorted.partition_point(|s| *s < v) as f64;
        let upto = sorted.partition_point(|s| *s <= v) as f64;
        (below + (upto - below) / 2.0) / sorted.len() as f64
    };
    let v10: Vec<f64> = cases.iter().map(|&x| place(&sc, x)).collect();
    let v01: Vec<f64> = controls.iter().map(|&y| 1.0 - place(&sx, y)).collect();
    let auc = v10.iter().sum::<f64>() / m;
    let var = |v: &[f64]| {
        let mu = v.iter().sum::<f64>() / v.len() as f64;
        v.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / (v.len() as f64 - 1.0)
    };
    let variance = var(&v10) / m + var(&v01) / n;
    let level = if conf_level > 0.0 { conf_level } else { 0.95 };
    let z = qnorm(0.5 + level / 2.0);
    let sd = variance.sqrt();
    Ok(Auc {
        auc,
        variance,
        conf_low: (auc - z * sd).max(0.0),
        conf_high: (auc + z * sd).min(1.0),
        cases_higher,
        n_cases: cases.len(),
        n_controls: controls.len(),
    })
}
