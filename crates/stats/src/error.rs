//! The one error type of the crate. Each variant names the input, what is
//! wrong with it and what the caller can do about it; estimators return these
//! instead of NaNs.
//!
//! An estimator knows its arguments (`time`, `status`, `outcome`, a
//! predictor's name) and the 0-based rows of the slices it was given, not
//! the caller's file. [`StatsError::locate`] turns those into the caller's
//! terms: it renames argument columns to the caller's columns and moves a
//! row to its line in a named source (a CSV file), so that the message
//! reads `cohort.csv:14: column days = -3 is negative; ...`. The crate
//! itself still reads no file: the caller hands it the names and lines.

use std::fmt;

/// Which row of its input an error is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// The 0-based index into the slices the estimator was given.
    Index(usize),
    /// The same row placed by [`StatsError::locate`]: its 1-based line in a
    /// named source (for a CSV file the header is line 1).
    Line { source: String, line: usize },
}

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
    /// A survival time below 0; `column` is the time argument (`time`
    /// until located).
    #[error("{}", negative_time(analysis, column, row, *value))]
    NegativeTime { analysis: String, column: String, row: Row, value: f64 },
    /// A value outside what the analysis accepts (an event code other than
    /// 0/1, an outcome outside the family's range, a third group).
    #[error("{}", invalid_value(analysis, column, row, *value, expected))]
    InvalidValue { analysis: String, column: String, row: Row, value: f64, expected: String },
    /// A grouping column with one value where the analysis compares two
    /// groups.
    #[error("{analysis}: column `{column}` is {value} in all {n} rows; it must have exactly 2 distinct values, one per group")]
    OneGroup { analysis: String, column: String, value: f64, n: usize },
    #[error("{analysis}: {problem}")]
    InvalidInput { analysis: String, problem: String },
    #[error(
        "{analysis}: did not converge in {iterations} iterations; check for separation or extreme covariate values"
    )]
    NoConvergence { analysis: String, iterations: usize },
}

fn negative_time(analysis: &str, column: &str, row: &Row, value: f64) -> String {
    const ADVICE: &str = "survival times must be >= 0, check the start and end dates";
    match row {
        Row::Index(i) => format!("{analysis}: {column} at row {} is negative ({value}); {ADVICE}", i + 1),
        Row::Line { source, line } => format!("{source}:{line}: column {column} = {value} is negative; {ADVICE}"),
    }
}

fn invalid_value(analysis: &str, column: &str, row: &Row, value: f64, expected: &str) -> String {
    match row {
        Row::Index(i) => format!("{analysis}: column `{column}` has value {value} at row {}, {expected}", i + 1),
        Row::Line { source, line } => {
            format!("{source}:{line}: column {column} = {value} is not valid for {analysis}; {expected}")
        }
    }
}

/// Where the rows and columns an estimator was given came from: what
/// [`StatsError::locate`] needs to speak the caller's terms.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// The source named in messages, e.g. `cohort.csv`.
    pub source: &'a str,
    /// For each argument name the estimator uses (`time`, `status`,
    /// `outcome`, a predictor's name), the caller's column. An argument not
    /// listed keeps its name and its rows are not relocated: its rows may
    /// index something else than the caller's table (one group's subset).
    pub columns: &'a [(&'a str, &'a str)],
    /// The source line of each row: row i of the slices is line `lines[i]`.
    pub lines: &'a [usize],
}

impl Origin<'_> {
    fn column(&self, argument: &str) -> Option<&str> {
        self.columns.iter().find(|(a, _)| *a == argument).map(|(_, c)| *c)
    }

    /// The caller's column and line for a value at `row` of `argument`, when
    /// both are known.
    fn place(&self, argument: &str, row: &Row) -> Option<(String, Row)> {
        let column = self.column(argument)?;
        let Row::Index(i) = row else { return None };
        let line = *self.lines.get(*i)?;
        Some((column.to_string(), Row::Line { source: self.source.to_string(), line }))
    }
}

impl StatsError {
    /// The error in the caller's terms: argument columns renamed to the
    /// caller's columns, and a row moved to its line in `origin.source`.
    /// Errors about a whole column only have the column renamed; whether the
    /// error now names its source is [`StatsError::names_source`].
    pub fn locate(self, origin: &Origin) -> StatsError {
        let rename = |column: String| origin.column(&column).map_or(column, str::to_string);
        match self {
            StatsError::NegativeTime { analysis, column, row, value } => match origin.place(&column, &row) {
                Some((column, row)) => StatsError::NegativeTime { analysis, column, row, value },
                None => StatsError::NegativeTime { analysis, column, row, value },
            },
            StatsError::InvalidValue { analysis, column, row, value, expected } => match origin.place(&column, &row) {
                Some((column, row)) => StatsError::InvalidValue { analysis, column, row, value, expected },
                None => StatsError::InvalidValue { analysis, column, row, value, expected },
            },
            StatsError::ConstantCovariate { analysis, column, value } => {
                StatsError::ConstantCovariate { analysis, column: rename(column), value }
            }
            StatsError::SingularDesign { analysis, column } => {
                StatsError::SingularDesign { analysis, column: rename(column) }
            }
            StatsError::OneGroup { analysis, column, value, n } => {
                StatsError::OneGroup { analysis, column: rename(column), value, n }
            }
            other => other,
        }
    }

    /// Whether the message names the source itself (`cohort.csv:14: ...`),
    /// so that a caller need not add it.
    pub fn names_source(&self) -> bool {
        matches!(
            self,
            StatsError::NegativeTime { row: Row::Line { .. }, .. }
                | StatsError::InvalidValue { row: Row::Line { .. }, .. }
        )
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Row::Index(i) => write!(f, "row {}", i + 1),
            Row::Line { source, line } => write!(f, "{source}:{line}"),
        }
    }
}

pub type Result<T> = std::result::Result<T, StatsError>;

pub(crate) fn invalid(analysis: &str, problem: impl Into<String>) -> StatsError {
    StatsError::InvalidInput { analysis: analysis.to_string(), problem: problem.into() }
}

/// A value at a 0-based `row` of `column` that the analysis does not accept.
pub(crate) fn invalid_at(analysis: &str, column: &str, row: usize, value: f64, expected: &str) -> StatsError {
    StatsError::InvalidValue {
        analysis: analysis.into(),
        column: column.into(),
        row: Row::Index(row),
        value,
        expected: expected.into(),
    }
}
