//! ROC AUC of a predictor for a 0/1 outcome, with DeLong's CI.

use std::fmt;

use evident_stats::roc::{self, Auc};
use evident_stats::MissingReport;
use serde::Serialize;

use super::error::StatsJobError;
use super::request::AucRequest;
use super::table::CsvTable;
use super::text::missing_line;

/// `{"auc": ..., "missing": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct AucReport {
    pub auc: Auc,
    pub missing: MissingReport,
    #[serde(skip)]
    pub request: AucRequest,
}

pub(super) fn auc(table: &CsvTable, request: &AucRequest, level: f64) -> Result<AucReport, StatsJobError> {
    let kept = table.complete("ROC AUC", &[&request.outcome, &request.predictor])?;
    let auc = roc::auc_delong(&kept.columns[0], &kept.columns[1], level).map_err(|e| {
        kept.locate(e, &[("response", request.outcome.as_str()), ("predictor", request.predictor.as_str())])
    })?;
    Ok(AucReport { auc, missing: kept.missing, request: request.clone() })
}

impl fmt::Display for AucReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.auc;
        writeln!(
            f,
            "AUC of {} for {}: {:.6} (DeLong CI {:.6} to {:.6}); {} cases, {} controls\n{}",
            self.request.predictor,
            self.request.outcome,
            a.auc,
            a.conf_low,
            a.conf_high,
            a.n_cases,
            a.n_controls,
            missing_line(&self.missing)
        )
    }
}
