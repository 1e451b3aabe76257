//! A CSV file read as a numeric table that remembers, for each row, its
//! line in the file (the header is line 1), and listwise deletion that
//! keeps those lines, so that an estimator's error can be placed at the
//! user's `file:line` and column.
//!
//! Cells are numbers; an empty cell, `NA`, `NaN` or `.` is missing. Every
//! non-numeric cell is reported, not only the first.

use std::path::{Path, PathBuf};

use evident_stats::{Frame, MissingReport, Origin, StatsError};

use super::error::StatsJobError;

/// A numeric CSV table.
#[derive(Debug, Clone)]
pub struct CsvTable {
    path: PathBuf,
    /// The file as messages name it (as the user gave it).
    source_name: String,
    frame: Frame,
    /// The CSV line of each row: row i is line `lines[i]`.
    lines: Vec<usize>,
}

impl CsvTable {
    /// Reads the file; every non-numeric cell is reported.
    pub fn read(path: &Path) -> Result<CsvTable, StatsJobError> {
        let read_error = |source| StatsJobError::Read { path: path.to_path_buf(), source };
        let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_path(path).map_err(read_error)?;
        let headers: Vec<String> = reader.headers().map_err(read_error)?.iter().map(str::to_string).collect();
        let source_name = path.display().to_string();
        let mut columns: Vec<Vec<f64>> = vec![Vec::new(); headers.len()];
        let mut lines = Vec::new();
        let mut problems = Vec::new();
        for (i, record) in reader.records().enumerate() {
            let record = record.map_err(|source| StatsJobError::MalformedRecord {
                path: path.to_path_buf(),
                line: source.position().map_or(i as u64 + 2, |p| p.line()),
                source,
            })?;
            let line = record.position().map_or(i + 2, |p| p.line() as usize);
            lines.push(line);
            for (j, cell) in record.iter().enumerate() {
                let value = match cell {
                    "" | "NA" | "NaN" | "." => f64::NAN,
                    text => text.parse::<f64>().unwrap_or_else(|_| {
                        problems.push(format!(
                            "{source_name}:{line}: column {} = {text:?} is not a number; recode categories as numbers (e.g. 0/1)",
                            headers[j]
                        ));
                        f64::NAN
                    }),
                };
                if let Some(column) = columns.get_mut(j) {
                    column.push(value);
                }
            }
        }
        if !problems.is_empty() {
            return Err(StatsJobError::NotNumeric { problems });
        }
        let mut frame = Frame::new();
        for (name, column) in headers.iter().zip(columns) {
            frame.push(name, column);
        }
        Ok(CsvTable { path: path.to_path_buf(), source_name, frame, lines })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file as messages name it.
    pub fn source_name(&self) -> &str {
        &self.source_name
    }

    /// The column names, in file order.
    pub fn names(&self) -> &[String] {
        self.frame.names()
    }

    /// The rows complete in `columns` (listwise deletion), with their lines.
    /// An unknown column or no complete row is refused, naming the file.
    pub fn complete(&self, analysis: &str, columns: &[&str]) -> Result<CompleteCases<'_>, StatsJobError> {
        self.complete_in(&self.source_name, analysis, columns)
    }

    /// [`CsvTable::complete`], with `context` (the file, and perhaps the
    /// variable) heading errors that name no line.
    pub fn complete_in(
        &self,
        context: &str,
        analysis: &str,
        columns: &[&str],
    ) -> Result<CompleteCases<'_>, StatsJobError> {
        let kept = self
            .frame
            .complete_rows(analysis, columns)
            .map_err(|error| StatsJobError::Estimator { context: context.to_string(), error: Box::new(error) })?;
        let lines = kept.rows.iter().map(|&row| self.lines[row]).collect();
        Ok(CompleteCases {
            columns: kept.columns,
            missing: kept.missing,
            lines,
            context: context.to_string(),
            table: self,
        })
    }
}

/// The complete rows of some columns of a [`CsvTable`].
#[derive(Debug)]
pub struct CompleteCases<'t> {
    /// The requested columns, complete rows only, in the order requested.
    pub columns: Vec<Vec<f64>>,
    pub missing: MissingReport,
    /// The CSV line of each kept row.
    lines: Vec<usize>,
    context: String,
    table: &'t CsvTable,
}

impl CompleteCases<'_> {
    /// An estimator's error in the user's terms. `arguments` pairs each
    /// argument name the estimator uses (`time`, `status`, `outcome`, a
    /// predictor's name) with the user's column; a row of an argument listed
    /// there is placed at its CSV line.
    pub fn locate(&self, error: StatsError, arguments: &[(&str, &str)]) -> StatsJobError {
        let origin = Origin { source: &self.table.source_name, columns: arguments, lines: &self.lines };
        StatsJobError::Estimator { context: self.context.clone(), error: Box::new(error.locate(&origin)) }
    }

    /// The file as messages name it.
    pub fn source_name(&self) -> &str {
        &self.table.source_name
    }
}
