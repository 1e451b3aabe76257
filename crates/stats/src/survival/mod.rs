//! Survival analysis as R's `survival` package computes it, one question per
//! module: [`cox`](mod@cox) fits proportional hazards models (`coxph`),
//! [`concordance`](mod@concordance) counts Harrell's concordance
//! (`concordance`), [`kaplan_meier`](mod@kaplan_meier) estimates survival
//! curves (`survfit`) and [`logrank`](mod@logrank) compares them (`survdiff`).
//! `risk_set` holds what they share: the risk-set order (stratum, time
//! descending), R's merging of times equal up to rounding error, and tie
//! blocks. This module holds the checks of a (time, status) outcome and the
//! chi-square test type, and re-exports the public API.

use serde::Serialize;

use crate::dist::pchisq_upper;
use crate::error::{invalid, Result, Row, StatsError};

pub mod concordance;
pub mod cox;
pub mod kaplan_meier;
pub mod logrank;
mod risk_set;

pub use concordance::{concordance, Concordance};
pub use cox::{coxph, CoxFit, Ties};
pub use kaplan_meier::{kaplan_meier, ConfType, KmCurve};
pub use logrank::{logrank, LogRank};

/// A chi-square test: statistic, degrees of freedom, p-value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ChiTest {
    pub statistic: f64,
    pub df: f64,
    pub p_value: f64,
}

impl ChiTest {
    pub(crate) fn new(statistic: f64, df: f64) -> Self {
        Self { statistic, df, p_value: pchisq_upper(statistic, df) }
    }
}

/// Validates survival outcome columns.
pub(crate) fn check_surv(analysis: &str, time: &[f64], status: &[f64]) -> Result<()> {
    if time.is_empty() {
        return Err(StatsError::NoRows { analysis: analysis.into(), rows_in: 0, rows_dropped: 0 });
    }
    if time.len() != status.len() {
        return Err(invalid(analysis, format!("time has {} rows, status has {}", time.len(), status.len())));
    }
    for (i, t) in time.iter().enumerate() {
        if !t.is_finite() {
            return Err(StatsError::InvalidValue {
                analysis: analysis.into(),
                column: "time".into(),
                row: Row::Index(i),
                value: *t,
                expected: "expected a finite time; remove missing values first (listwise deletion)".into(),
            });
        }
        if *t < 0.0 {
            return Err(StatsError::NegativeTime {
                analysis: analysis.into(),
                column: "time".into(),
                row: Row::Index(i),
                value: *t,
            });
        }
    }
    for (i, s) in status.iter().enumerate() {
        if *s != 0.0 && *s != 1.0 {
            return Err(StatsError::InvalidValue {
                analysis: analysis.into(),
                column: "status".into(),
                row: Row::Index(i),
                value: *s,
                expected: "expected 1 (event) or 0 (censored)".into(),
            });
        }
    }
    if status.iter().all(|s| *s == 0.0) {
        return Err(StatsError::AllCensored { analysis: analysis.into(), n: time.len() });
    }
    Ok(())
}
