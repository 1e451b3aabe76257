//! A plain numeric table with named columns, where NaN marks a missing value,
//! and listwise deletion that reports how many rows each column removed
//! (CohortMethod-style attrition) and which rows it kept (so that a caller
//! can place an estimator's errors in its own file).

use serde::Serialize;

use crate::error::{Result, StatsError};

/// Named numeric columns of equal length. NaN is a missing value.
#[derive(Debug, Clone, Default)]
pub struct Frame {
    names: Vec<String>,
    columns: Vec<Vec<f64>>,
}

/// How many rows listwise deletion removed, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MissingReport {
    pub rows_in: usize,
    pub rows_used: usize,
    /// For each column with missing values among those used: how many rows
    /// had a missing value there (a row may count in several columns).
    pub missing_by_column: Vec<(String, usize)>,
}

impl MissingReport {
    pub fn rows_dropped(&self) -> usize {
        self.rows_in - self.rows_used
    }
}

impl Frame {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a column. All columns must have the same length.
    pub fn with(mut self, name: &str, values: Vec<f64>) -> Self {
        self.push(name, values);
        self
    }

    pub fn push(&mut self, name: &str, values: Vec<f64>) {
        assert!(
            self.columns.first().is_none_or(|c| c.len() == values.len()),
            "column `{name}` has {} rows, the frame has {}",
            values.len(),
            self.nrows()
        );
        if let Some(i) = self.names.iter().position(|n| n == name) {
            self.columns[i] = values;
        } else {
            self.names.push(name.to_string());
            self.columns.push(values);
        }
    }

    pub fn nrows(&self) -> usize {
        self.columns.first().map_or(0, |c| c.len())
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn column(&self, name: &str) -> Option<&[f64]> {
        self.names.iter().position(|n| n == name).map(|i| self.columns[i].as_slice())
    }

    /// The column, or an error naming the analysis and the known columns.
    pub fn require(&self, analysis: &str, name: &str) -> Result<&[f64]> {
        self.column(name).ok_or_else(|| StatsError::InvalidInput {
            analysis: analysis.to_string(),
            problem: format!("no column `{name}` (columns are: {})", self.names.join(", ")),
        })
    }

    /// Keeps the rows complete in `columns` (listwise deletion) and returns
    /// those columns with the report. Zero remaining rows is an error.
    pub fn complete_cases(&self, analysis: &str, columns: &[&str]) -> Result<(Vec<Vec<f64>>, MissingReport)> {
        let kept = self.complete_rows(analysis, columns)?;
        Ok((kept.columns, kept.missing))
    }

    /// [`Frame::complete_cases`], also saying which rows were kept, so that a
    /// caller can place an estimator's errors (row i of the result is row
    /// `rows[i]` of the frame).
    pub fn complete_rows(&self, analysis: &str, columns: &[&str]) -> Result<CompleteRows> {
        let cols: Vec<&[f64]> = columns.iter().map(|c| self.require(analysis, c)).collect::<Result<_>>()?;
        let n = self.nrows();
        let mut keep = vec![true; n];
        let mut missing_by_column = Vec::new();
        for (name, col) in columns.iter().zip(&cols) {
            let mut count = 0;
            for (k, v) in keep.iter_mut().zip(col.iter()) {
                if v.is_nan() {
                    count += 1;
                    *k = false;
                }
            }
            if count > 0 {
                missing_by_column.push((name.to_string(), count));
            }
        }
        let out: Vec<Vec<f64>> =
            cols.iter().map(|c| c.iter().zip(&keep).filter(|(_, k)| **k).map(|(v, _)| *v).collect()).collect();
        let rows: Vec<usize> = keep.iter().enumerate().filter(|(_, k)| **k).map(|(i, _)| i).collect();
        if rows.is_empty() {
            return Err(StatsError::NoRows { analysis: analysis.to_string(), rows_in: n, rows_dropped: n });
        }
        let missing = MissingReport { rows_in: n, rows_used: rows.len(), missing_by_column };
        Ok(CompleteRows { columns: out, missing, rows })
    }
}

/// The complete rows of some columns of a [`Frame`].
#[derive(Debug, Clone, PartialEq)]
pub struct CompleteRows {
    /// The requested columns, complete rows only, in the order requested.
    pub columns: Vec<Vec<f64>>,
    pub missing: MissingReport,
    /// The frame's 0-based index of each kept row.
    pub rows: Vec<usize>,
}
