//! Text pieces every report shares: the line on rows used and dropped for
//! missing values, a coefficient table, and `NA` for a missing number.

use evident_stats::glm::Coefficient;
use evident_stats::MissingReport;

/// `rows: 213 of 228 used; 15 dropped for missing values (ecog: 1, wtloss: 14)`.
pub(super) fn missing_line(report: &MissingReport) -> String {
    if report.rows_dropped() == 0 {
        format!("rows: {} used, none missing", report.rows_used)
    } else {
        let by: Vec<String> = report.missing_by_column.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        format!(
            "rows: {} of {} used; {} dropped for missing values ({})",
            report.rows_used,
            report.rows_in,
            report.rows_dropped(),
            by.join(", ")
        )
    }
}

/// Estimates, standard errors, tests and CIs, one term a line; with `exp`,
/// a second table of the exponentiated estimates headed `exp_title`.
pub(super) fn coef_table(exp_title: &str, coefs: &[Coefficient], exp: bool) -> String {
    let mut s = format!(
        "{:<24} {:>12} {:>12} {:>10} {:>12} {:>12} {:>12}\n",
        "term", "estimate", "std.error", "statistic", "p.value", "conf.low", "conf.high"
    );
    for c in coefs {
        s.push_str(&format!(
            "{:<24} {:>12.6} {:>12.6} {:>10.4} {:>12.4e} {:>12.6} {:>12.6}\n",
            c.term, c.estimate, c.std_error, c.statistic, c.p_value, c.conf_low, c.conf_high
        ));
    }
    if exp {
        s.push_str(&format!("\n{:<24} {:>12} {:>12} {:>12}\n", "term", exp_title, "conf.low", "conf.high"));
        for c in coefs {
            let (lo, hi) = c.exp_conf();
            s.push_str(&format!("{:<24} {:>12.6} {:>12.6} {:>12.6}\n", c.term, c.exp_estimate(), lo, hi));
        }
    }
    s
}

/// A number, or `NA` where R prints NA (not reached, not estimable).
pub(super) fn na(v: f64) -> String {
    if v.is_nan() {
        "NA".into()
    } else {
        format!("{v}")
    }
}

/// The argument names an estimator gives its columns, paired with the
/// user's: each covariate under its own name.
pub(super) fn with_covariates<'a>(fixed: &[(&'a str, &'a str)], covariates: &'a [String]) -> Vec<(&'a str, &'a str)> {
    fixed.iter().copied().chain(covariates.iter().map(|c| (c.as_str(), c.as_str()))).collect()
}
