//! Reads one MIMIC-IV table file (`.csv.gz` or `.csv`) against its schema:
//! the header is matched to the columns by name (case-insensitive), and
//! every field is checked against its column's type before any backend
//! sees it, so SQLite and PostgreSQL accept and refuse the same files and
//! an error names the file, the line and what to do.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use chrono::{NaiveDate, NaiveDateTime};

use crate::schema::{ColumnKind, TableDef};
use crate::DbError;

/// A checked field; timestamps and dates stay text as MIMIC-IV writes them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Field {
    Integer(i64),
    Real(f64),
    Text(String),
}

/// Finds the table's file in a MIMIC-IV folder: `DIR/hosp/NAME.csv.gz`
/// (or `.csv`), likewise `icu/`.
pub(crate) fn find_file(dir: &Path, table: &TableDef) -> Option<PathBuf> {
    let folder = dir.join(table.module());
    [format!("{}.csv.gz", table.name), format!("{}.csv", table.name)]
        .into_iter()
        .map(|name| folder.join(name))
        .find(|p| p.is_file())
}

/// The rows of one table file, checked.
pub(crate) struct TableReader<'t> {
    path: PathBuf,
    table: &'t TableDef,
    records: csv::StringRecordsIntoIter<Box<dyn Read>>,
    /// For each schema column, its position in the file (None: absent,
    /// loaded as NULL).
    positions: Vec<Option<usize>>,
    /// Header columns the schema does not know, ignored.
    pub ignored_columns: Vec<String>,
    /// Nullable schema columns the file lacks, loaded as NULL.
    pub absent_columns: Vec<String>,
    record: csv::StringRecord,
}

impl<'t> TableReader<'t> {
    pub fn open(path: &Path, table: &'t TableDef) -> Result<TableReader<'t>, DbError> {
        let file = File::open(path).map_err(|e| DbError::io(path, e))?;
        let input: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
            Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, file)))
        } else {
            Box::new(BufReader::with_capacity(1 << 16, file))
        };
        let mut reader = csv::ReaderBuilder::new().has_headers(true).flexible(false).from_reader(input);
        let header = reader.headers().map_err(|e| csv_error(path, e, "the header line"))?.clone();
        let header: Vec<String> = header.iter().map(|h| h.trim().to_ascii_lowercase()).collect();
        if header.iter().all(|h| h.is_empty()) {
            return Err(input_error(path, Some(1), "the file is empty or has no header line; re-download it"));
        }
        let mut positions = Vec::new();
        let mut missing = Vec::new();
        let mut absent_columns = Vec::new();
        for column in &table.columns {
            let position = header.iter().position(|h| *h == column.name);
            if position.is_none() {
                if column.not_null || table.primary_key.contains(&column.name) {
                    missing.push(column.name.clone());
                } else {
                    absent_columns.push(column.name.clone());
                }
            }
            positions.push(position);
        }
        if !missing.is_empty() {
            return Err(input_error(
                path,
                Some(1),
                &format!(
                    "the header lacks required column(s) {} of {} (header: {}); the file must be MIMIC-IV's own, with its header line",
                    missing.join(", "),
                    table.qualified_name(),
                    header.join(",")
                ),
            ));
        }
        let ignored_columns = header.iter().filter(|h| !table.columns.iter().any(|c| &c.name == *h)).cloned().collect();
        Ok(TableReader {
            path: path.to_path_buf(),
            table,
            records: reader.into_records(),
            positions,
            ignored_columns,
            absent_columns,
            record: csv::StringRecord::new(),
        })
    }

    /// The next row with one field per schema column (None is NULL), with
    /// its line number; None at the end of the file.
    pub fn next_row(&mut self, row: &mut Vec<Option<Field>>) -> Result<Option<u64>, DbError> {
        let record = match self.records.next() {
            None => return Ok(None),
            Some(Ok(record)) => record,
            Some(Err(e)) => return Err(csv_error(&self.path, e, "a row")),
        };
        self.record = record;
        let line = self.record.position().map(|p| p.line()).unwrap_or(0);
        row.clear();
        for (column, position) in self.table.columns.iter().zip(&self.positions) {
            let text = position.and_then(|p| self.record.get(p)).unwrap_or("");
            let field = check(text, column.kind, column.not_null).map_err(|problem| {
                input_error(
                    &self.path,
                    Some(line),
                    &format!(
                        "column {} = {:?} {problem}; fix or remove the row (a download from PhysioNet can be checked against SHA256SUMS.txt)",
                        column.name,
                        shorten(text)
                    ),
                )
            })?;
            row.push(field);
        }
        Ok(Some(line))
    }
}

/// Checks one field. Empty text is NULL, except in a NOT NULL text column,
/// where it is the empty string (MIMIC-IV's CSV quotes such values, which
/// a CSV reader cannot tell apart).
fn check(text: &str, kind: ColumnKind, not_null: bool) -> Result<Option<Field>, String> {
    if text.is_empty() {
        return match kind {
            ColumnKind::Text { .. } if not_null => Ok(Some(Field::Text(String::new()))),
            _ if not_null => Err("is empty, but the column is required".into()),
            _ => Ok(None),
        };
    }
    match kind {
        ColumnKind::Integer { min, max } => {
            let value: i64 = text.trim().parse().map_err(|_| "is not an integer".to_string())?;
            if value < min || value > max {
                return Err(format!("is out of the column's range {min}..={max}"));
            }
            Ok(Some(Field::Integer(value)))
        }
        ColumnKind::Real => {
            let value: f64 = text.trim().parse().map_err(|_| "is not a number".to_string())?;
            if !value.is_finite() {
                return Err("is not a finite number".into());
            }
            Ok(Some(Field::Real(value)))
        }
        ColumnKind::Text { max_chars } => {
            if let Some(max) = max_chars {
                let n = text.chars().count();
                if n > max {
                    return Err(format!("has {n} characters; the column holds at most {max}"));
                }
            }
            Ok(Some(Field::Text(text.to_string())))
        }
        ColumnKind::Timestamp => {
            let ok = NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").is_ok()
                || NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok();
            if !ok {
                return Err("is not a timestamp (expected YYYY-MM-DD HH:MM:SS)".into());
            }
            Ok(Some(Field::Text(text.to_string())))
        }
        ColumnKind::Date => {
            if NaiveDate::parse_from_str(text, "%Y-%m-%d").is_err() {
                return Err("is not a date (expected YYYY-MM-DD)".into());
            }
            Ok(Some(Field::Text(text.to_string())))
        }
    }
}

fn shorten(text: &str) -> String {
    if text.chars().count() > 60 {
        format!("{}...", text.chars().take(60).collect::<String>())
    } else {
        text.to_string()
    }
}

fn input_error(path: &Path, line: Option<u64>, message: &str) -> DbError {
    DbError::Input { path: path.to_path_buf(), line, message: message.to_string() }
}

fn csv_error(path: &Path, error: csv::Error, what: &str) -> DbError {
    let line = error.position().map(|p| p.line());
    let message = match error.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => format!(
            "the row has {len} fields, the header {expected_len}; the file is cut or malformed (re-download it)"
        ),
        csv::ErrorKind::Io(e) => {
            format!("cannot read {what}: {e}; the file is not a readable CSV (a .csv.gz must be gzip)")
        }
        csv::ErrorKind::Utf8 { .. } => format!("{what} is not UTF-8 text; MIMIC-IV files are UTF-8"),
        _ => format!("cannot read {what}: {error}"),
    };
    input_error(path, line, &message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_checked_against_their_column_type() {
        let int = ColumnKind::Integer { min: -32768, max: 32767 };
        assert_eq!(check("12", int, true), Ok(Some(Field::Integer(12))));
        assert!(check("12.5", int, true).unwrap_err().contains("not an integer"));
        assert!(check("40000", int, true).unwrap_err().contains("range"));
        assert_eq!(check("", int, false), Ok(None));
        assert!(check("", int, true).unwrap_err().contains("required"));
        assert_eq!(check("1.10", ColumnKind::Real, false), Ok(Some(Field::Real(1.1))));
        assert!(check("abc", ColumnKind::Real, false).is_err());
        assert!(check("NaN", ColumnKind::Real, false).is_err());
        assert_eq!(check("", ColumnKind::Text { max_chars: Some(3) }, true), Ok(Some(Field::Text(String::new()))));
        assert!(check("abcd", ColumnKind::Text { max_chars: Some(3) }, false).unwrap_err().contains("at most 3"));
        assert!(check("2180-07-23 12:35:00", ColumnKind::Timestamp, true).is_ok());
        assert!(check("2180-07-23 12:35:00.123", ColumnKind::Timestamp, true).is_ok());
        assert!(check("23/07/2180", ColumnKind::Timestamp, true).unwrap_err().contains("YYYY-MM-DD HH:MM:SS"));
        assert!(check("2180-02-30", ColumnKind::Date, true).is_err());
    }
}
