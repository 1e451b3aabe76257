//! The one error type of the crate. Each variant names the input, what is
//! wrong with it and what the caller can do about it; estimators return these
//! instead of NaNs.

/// Why an estimator refused its input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("{analysis}: no rows to analyse ({rows_in} rows given, {rows_dropped} dropped for missing values); check the cohort filter and the missing values")]
    NoRows { analysis: String, rows_in: usize, rows_dropped: usize },
    #[error("{analysis}: covariate `{column}` is constant (every row is {value}); drop it from the model")]
    ConstantCovariate { analysis: String, column: String, value: f64 },
    #[error("{analysis}: design matrix is singular: column `{column}` is a linear combination of the columns before it; drop it or merge the categories")]
    SingularDesign { analysis: String, column: String },
    #[error("logistic regression: complete separation: fitted probabilities are numerically 0 or 1 for {rows} of {n} rows, so the odds ratios are infinite; drop or merge the covariate that predicts the outcome perfectly, or use penalised (Firth) regression")]
    Separation { rows: usize, n: usize },
    #[error("{analysis}: all {n} observations are censored, so there are no events to estimate from; check the event column (1 = event, 0 = censored)")]
    AllCensored { analysis: String, n: usize },
    #[error("{analysis}: time at row {row} is negative ({value}); survival times must be >= 0, check the start and end dates")]
    NegativeTime { analysis: String, row: usize, value: f64 },
    #[error("{analysis}: column `{column}` has value {value} at row {row}, {expected}")]
    InvalidValue { analysis: String, column: String, row: usize, value: f64, expected: String },
    #[error("{analysis}: {problem}")]
    InvalidInput { analysis: String, problem: String },
    #[error(
        "{analysis}: did not converge in {iterations} iterations; check for separation or extreme covariate values"
    )]
    NoConvergence { analysis: String, iterations: usize },
}

pub type Result<T> = std::result::Result<T, StatsError>;

pub(crate) fn invalid(analysis: &str, problem: impl Into<String>) -> StatsError {
    StatsError::InvalidInput { analysis: analysis.to_string(), problem: problem.into() }
}
