//! Clinical databases for studies: load a MIMIC-IV folder into SQLite or
//! PostgreSQL ([`load`]), and run one read-only statement on such a
//! database ([`query`]). The work is `evident_db`'s; this module turns the
//! user's text into its types, reports progress and renders the results.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use evident_db::{DatabaseUrl, LoadEvent, LoadReport, QueryLimits, QueryResult, ReadOnlyConnection};
use serde::Serialize;

use crate::error::{input_error, AppError};
use crate::{ProgressEvent, ProgressSink, Result};

/// Load the MIMIC-IV folder `source` into the database at `url`.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    pub source: PathBuf,
    /// `sqlite:PATH` or `postgres://...`, as the user wrote it.
    pub url: String,
}

/// A finished load: rows per table and the time it took.
#[derive(Debug, Clone, Serialize)]
pub struct LoadSummary {
    #[serde(flatten)]
    pub report: LoadReport,
    pub rows_per_second: f64,
}

/// Parses a database URL the user wrote; a bad one is an input error.
pub fn parse_url(text: &str) -> Result<DatabaseUrl> {
    DatabaseUrl::parse(text).map_err(|e| AppError::Input(e.to_string()))
}

/// Loads the folder, replacing the `mimiciv_*` schemas at the URL; on any
/// error the database is left as it was. Reports each table as it is
/// loaded.
pub fn load(request: &LoadRequest, progress: &dyn ProgressSink) -> Result<LoadSummary> {
    let url = parse_url(&request.url)?;
    let mut tables = 0;
    let mut done = 0;
    let report = evident_db::load_mimic(&request.source, &url, &mut |event| match event {
        LoadEvent::Started { tables: n } => {
            tables = *n;
            progress.report(ProgressEvent::DatabaseTable { table: String::new(), done: 0, total: tables });
        }
        LoadEvent::TableLoaded { table, .. } => {
            done += 1;
            progress.report(ProgressEvent::DatabaseTable { table: table.clone(), done, total: tables });
        }
        LoadEvent::Indexing | LoadEvent::DerivedBuilt { .. } => {}
    })?;
    Ok(LoadSummary { rows_per_second: report.rows_per_second(), report })
}

impl fmt::Display for LoadSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let report = &self.report;
        let width = report.tables.iter().chain(&report.derived).map(|t| t.table.len()).max().unwrap_or(0);
        for table in report.tables.iter().chain(&report.derived) {
            writeln!(
                f,
                "{:<width$}  {:>9} rows  {:>6} ms",
                table.table,
                group_thousands(table.rows),
                table.elapsed_ms
            )?;
        }
        for note in &report.notes {
            writeln!(f, "note: {note}")?;
        }
        writeln!(
            f,
            "loaded {} rows from {} into {} in {:.1} s ({} rows/s; indexes {:.1} s)",
            group_thousands(report.rows),
            report.source.display(),
            report.url,
            report.elapsed_ms as f64 / 1000.0,
            group_thousands(self.rows_per_second.round() as u64),
            report.index_ms as f64 / 1000.0
        )
    }
}

fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Run one read-only statement on the database at `url` (for PostgreSQL,
/// an admin URL: the statement runs as a read-only role made for it).
#[derive(Debug, Clone)]
pub struct QueryRequest {
    pub url: String,
    pub sql: String,
    pub max_rows: usize,
    pub timeout: Duration,
}

/// The statement's result: [`QueryResult`], shown as its text.
#[derive(Debug, Clone, Serialize)]
pub struct QueryOutput(pub QueryResult);

impl fmt::Display for QueryOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.text)?;
        if !self.0.text.ends_with('\n') {
            writeln!(f)?;
        }
        Ok(())
    }
}

/// Runs the statement read-only; a statement that would write is refused
/// as an input error.
pub fn query(request: &QueryRequest) -> Result<QueryOutput> {
    let url = parse_url(&request.url)?;
    if request.max_rows == 0 {
        input_error!("the row limit must be at least 1");
    }
    let limits = QueryLimits { max_rows: request.max_rows, timeout: request.timeout, ..QueryLimits::default() };
    let mut conn = ReadOnlyConnection::connect(&url, limits)?;
    let result = conn.query(&request.sql).map_err(|e| match e {
        evident_db::DbError::Refused { .. }
        | evident_db::DbError::Query { .. }
        | evident_db::DbError::Timeout { .. } => AppError::Input(e.to_string()),
        other => AppError::Db(other),
    });
    conn.close()?;
    Ok(QueryOutput(result?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(729638), "729,638");
        assert_eq!(group_thousands(1234567), "1,234,567");
    }

    #[test]
    fn a_bad_url_is_an_input_error() {
        let err = load(&LoadRequest { source: "x".into(), url: "demo.db".into() }, &crate::Silent).unwrap_err();
        assert!(matches!(err, AppError::Input(_)));
        assert!(err.to_string().contains("write sqlite:demo.db"), "{err}");
    }
}
