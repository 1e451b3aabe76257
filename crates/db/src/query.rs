//! What a read-only query returns, and the limits it runs under: typed
//! values, the columns, whether anything was cut, and the text an agent
//! reads (at most `max_text_chars` characters).

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

/// One value of a result row. Timestamps and dates come back as text in
/// the form MIMIC-IV writes them (`2180-07-23 12:35:00`, `2180-07-23`) on
/// both backends; PostgreSQL `numeric` comes back as `Real`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Bool(bool),
}

impl Value {
    /// The value as an agent reads it in a result table (`NULL` for null).
    pub fn to_text(&self) -> String {
        match self {
            Value::Null => "NULL".into(),
            Value::Integer(v) => v.to_string(),
            Value::Real(v) => v.to_string(),
            Value::Text(v) => v.clone(),
            Value::Bool(v) => v.to_string(),
        }
    }

    /// The value as a number, when it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Integer(v) => Some(*v as f64),
            Value::Real(v) => Some(*v),
            _ => None,
        }
    }
}

/// The limits every agent statement runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryLimits {
    /// Rows returned at most; a result with more is cut and marked
    /// `truncated` (the database stops producing rows at the limit).
    pub max_rows: usize,
    /// Wall time one statement may run before it is cancelled.
    pub timeout: Duration,
    /// Characters of rendered result text at most (RWE-bench cuts every
    /// observation at 10,000).
    pub max_text_chars: usize,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits { max_rows: 1_000, timeout: Duration::from_secs(60), max_text_chars: 10_000 }
    }
}

/// The answer to one read-only statement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueryResult {
    /// Column names, in the statement's order.
    pub columns: Vec<String>,
    /// At most `max_rows` rows, each with one value per column.
    pub rows: Vec<Vec<Value>>,
    /// True when rows past `max_rows` were dropped or `text` was cut.
    pub truncated: bool,
    /// The result as tab-separated text with a header line, at most
    /// `max_text_chars` characters, ending with a note when anything was
    /// cut: what an agent reads.
    pub text: String,
}

impl QueryResult {
    /// Builds the result and its text; `more_rows` says the database had
    /// rows past `rows`.
    pub(crate) fn new(columns: Vec<String>, rows: Vec<Vec<Value>>, more_rows: bool, limits: &QueryLimits) -> Self {
        let (text, text_cut) = render(&columns, &rows, more_rows, limits);
        QueryResult { columns, rows, truncated: more_rows || text_cut, text }
    }
}

fn render(columns: &[String], rows: &[Vec<Value>], more_rows: bool, limits: &QueryLimits) -> (String, bool) {
    let mut full = columns.join("\t");
    full.push('\n');
    for row in rows {
        let line: Vec<String> = row.iter().map(|v| v.to_text().replace(['\t', '\n'], " ")).collect();
        full.push_str(&line.join("\t"));
        full.push('\n');
    }
    let total_chars = full.chars().count();
    let mut note = String::new();
    if more_rows {
        let _ = write!(note, "[only the first {} rows are shown; aggregate or add LIMIT]", rows.len());
    }
    if total_chars <= limits.max_text_chars && note.is_empty() {
        return (full, false);
    }
    let text_cut = total_chars + note.chars().count() + 1 > limits.max_text_chars;
    if text_cut {
        note = format!(
            "[result cut at {} characters of {total_chars}; {} rows in all]",
            limits.max_text_chars,
            rows.len()
        ) + if more_rows { " [more rows were not fetched]" } else { "" };
    }
    let budget = limits.max_text_chars.saturating_sub(note.chars().count() + 1);
    let mut text: String = full.chars().take(budget).collect();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&note);
    // The note itself can exceed a tiny budget; the limit holds regardless.
    let text = text.chars().take(limits.max_text_chars).collect();
    (text, text_cut)
}

/// A table an agent may read, with its columns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableInfo {
    /// `mimiciv_hosp`, `mimiciv_icu`, `mimiciv_derived`, ...
    pub schema: String,
    /// The table's name within its schema.
    pub name: String,
    /// Its columns in order.
    pub columns: Vec<ColumnInfo>,
}

impl TableInfo {
    /// `schema.name`, as a query writes it.
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ColumnInfo {
    pub name: String,
    /// The declared type as the database reports it (SQLite: as written in
    /// the schema, e.g. `TIMESTAMP`; PostgreSQL: `format_type`, e.g.
    /// `timestamp without time zone`).
    pub data_type: String,
    pub nullable: bool,
    /// Part of the table's primary key.
    pub primary_key: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_text_chars: usize) -> QueryLimits {
        QueryLimits { max_text_chars, ..QueryLimits::default() }
    }

    #[test]
    fn small_results_render_whole() {
        let r = QueryResult::new(
            vec!["a".into(), "b".into()],
            vec![vec![Value::Integer(1), Value::Null], vec![Value::Real(2.5), Value::Text("x\ty".into())]],
            false,
            &limits(100),
        );
        assert!(!r.truncated);
        assert_eq!(r.text, "a\tb\n1\tNULL\n2.5\tx y\n");
    }

    #[test]
    fn long_results_are_cut_to_the_limit_with_a_note() {
        let rows = (0..1000).map(|i| vec![Value::Integer(i)]).collect();
        let r = QueryResult::new(vec!["n".into()], rows, false, &limits(200));
        assert!(r.truncated);
        assert!(r.text.chars().count() <= 200, "{}", r.text.len());
        assert!(r.text.contains("result cut at 200 characters"), "{}", r.text);
        assert_eq!(r.rows.len(), 1000);
    }

    #[test]
    fn dropped_rows_are_said() {
        let r = QueryResult::new(vec!["n".into()], vec![vec![Value::Integer(1)]], true, &limits(10_000));
        assert!(r.truncated);
        assert!(r.text.ends_with("[only the first 1 rows are shown; aggregate or add LIMIT]"), "{}", r.text);
    }
}
