//! `load_mimic`: a MIMIC-IV folder (`hosp/`, `icu/`, csv.gz) into SQLite or
//! PostgreSQL, in the official schemas and table names, with primary keys,
//! indexes and the derived tables, all or nothing. The folder is checked
//! first (every required table present), every row is checked against its
//! column types while it streams in, and the target changes only when the
//! whole load succeeded: SQLite builds new files and renames them into
//! place, PostgreSQL runs the load as one transaction.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::derived::{derived_tables, Dialect};
use crate::schema::{tables, TableDef, SCHEMAS};
use crate::source::{find_file, TableReader};
use crate::{DatabaseUrl, DbError};

/// What a load reports while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadEvent {
    /// The folder checked out: this many tables will be loaded.
    Started { tables: usize },
    /// One table is loaded.
    TableLoaded { table: String, rows: u64, elapsed_ms: u64 },
    /// Building the indexes.
    Indexing,
    /// One derived table is built.
    DerivedBuilt { table: String, rows: u64, elapsed_ms: u64 },
}

/// One table of a load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableLoad {
    /// `schema.table`.
    pub table: String,
    /// The file it was read from; None for a derived table or an optional
    /// table the folder lacks (created empty).
    pub file: Option<PathBuf>,
    pub rows: u64,
    pub elapsed_ms: u64,
}

/// What a finished load did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadReport {
    /// The target, password hidden.
    pub url: String,
    pub source: PathBuf,
    /// The MIMIC-IV tables, in load order.
    pub tables: Vec<TableLoad>,
    /// The `mimiciv_derived` tables.
    pub derived: Vec<TableLoad>,
    /// Rows loaded from files (derived rows not counted).
    pub rows: u64,
    pub index_ms: u64,
    pub elapsed_ms: u64,
    /// Things the user may want to know: optional tables absent, columns
    /// ignored or absent.
    pub notes: Vec<String>,
}

impl LoadReport {
    /// Rows loaded per second of the whole load (indexes and derived
    /// tables included).
    pub fn rows_per_second(&self) -> f64 {
        self.rows as f64 / (self.elapsed_ms.max(1) as f64 / 1000.0)
    }
}

/// A backend a load writes into; nothing it does is visible until
/// `finish`, and dropping it without `finish` leaves the target as it was.
pub(crate) trait Target {
    fn dialect(&self) -> Dialect;
    fn execute(&mut self, sql: &str, context: &str) -> Result<(), DbError>;
    fn count(&mut self, qualified: &str) -> Result<u64, DbError>;
    /// Streams the reader's rows into the (created, empty) table.
    fn append(&mut self, table: &TableDef, reader: &mut TableReader, path: &Path) -> Result<u64, DbError>;
    fn index_sql(&self, table: &TableDef) -> Vec<String>;
    fn derived_index_sql(&self, table: &str, column: &str) -> String;
    fn finish(self: Box<Self>) -> Result<(), DbError>;
}

/// Loads the MIMIC-IV folder `dir` into the database at `url`, replacing
/// the schemas `mimiciv_hosp`, `mimiciv_icu` and `mimiciv_derived` there.
/// On any error the target is left as it was.
pub fn load_mimic(dir: &Path, url: &DatabaseUrl, progress: &mut dyn FnMut(&LoadEvent)) -> Result<LoadReport, DbError> {
    let start = Instant::now();
    let plan = plan(dir)?;
    progress(&LoadEvent::Started { tables: plan.len() });
    let mut target: Box<dyn Target> = match url {
        DatabaseUrl::Sqlite { path } => Box::new(crate::sqlite::SqliteTarget::create(path)?),
        DatabaseUrl::Postgres { .. } => Box::new(crate::postgres::PgTarget::begin(url)?),
    };
    let mut report = LoadReport {
        url: url.redacted(),
        source: dir.to_path_buf(),
        tables: Vec::new(),
        derived: Vec::new(),
        rows: 0,
        index_ms: 0,
        elapsed_ms: 0,
        notes: Vec::new(),
    };
    for (table, file) in &plan {
        let table_start = Instant::now();
        target.execute(&table.create_sql(), &format!("creating {}", table.qualified_name()))?;
        let rows = match file {
            Some(path) => {
                let mut reader = TableReader::open(path, table)?;
                if !reader.ignored_columns.is_empty() {
                    report.notes.push(format!(
                        "{}: column(s) {} are not in the schema and were not loaded",
                        path.display(),
                        reader.ignored_columns.join(", ")
                    ));
                }
                if !reader.absent_columns.is_empty() {
                    report.notes.push(format!(
                        "{}: column(s) {} are absent and were loaded as NULL",
                        path.display(),
                        reader.absent_columns.join(", ")
                    ));
                }
                target.append(table, &mut reader, path)?
            }
            None => {
                report.notes.push(format!(
                    "{}/{}.csv.gz is absent; {} was created empty",
                    table.module(),
                    table.name,
                    table.qualified_name()
                ));
                0
            }
        };
        let elapsed_ms = table_start.elapsed().as_millis() as u64;
        progress(&LoadEvent::TableLoaded { table: table.qualified_name(), rows, elapsed_ms });
        report.rows += rows;
        report.tables.push(TableLoad { table: table.qualified_name(), file: file.clone(), rows, elapsed_ms });
    }

    progress(&LoadEvent::Indexing);
    let index_start = Instant::now();
    for (table, _) in &plan {
        for sql in target.index_sql(table) {
            target.execute(&sql, &format!("indexing {}", table.qualified_name()))?;
        }
    }
    report.index_ms = index_start.elapsed().as_millis() as u64;

    for derived in derived_tables(target.dialect()) {
        let derived_start = Instant::now();
        let qualified = format!("mimiciv_derived.{}", derived.name);
        target
            .execute(&format!("CREATE TABLE {qualified} AS\n{}", derived.select), &format!("building {qualified}"))?;
        for column in derived.indexes {
            let sql = target.derived_index_sql(derived.name, column);
            target.execute(&sql, &format!("indexing {qualified}"))?;
        }
        let rows = target.count(&qualified)?;
        let elapsed_ms = derived_start.elapsed().as_millis() as u64;
        progress(&LoadEvent::DerivedBuilt { table: qualified.clone(), rows, elapsed_ms });
        report.derived.push(TableLoad { table: qualified, file: None, rows, elapsed_ms });
    }
    target.finish()?;
    report.elapsed_ms = start.elapsed().as_millis() as u64;
    Ok(report)
}

/// Every schema table with its file in `dir`; an error naming every
/// required table that is missing.
fn plan(dir: &Path) -> Result<Vec<(&'static TableDef, Option<PathBuf>)>, DbError> {
    let not_mimic = |message: String| DbError::Input { path: dir.to_path_buf(), line: None, message };
    if !dir.is_dir() {
        return Err(not_mimic("no such folder; give the MIMIC-IV folder that holds hosp/ and icu/".into()));
    }
    for module in ["hosp", "icu"] {
        if !dir.join(module).is_dir() {
            return Err(not_mimic(format!(
                "has no {module}/ folder; give the MIMIC-IV folder that holds hosp/ and icu/ (as downloaded from PhysioNet)"
            )));
        }
    }
    let mut plan = Vec::new();
    let mut missing = Vec::new();
    for table in tables() {
        let file = find_file(dir, table);
        if file.is_none() && !table.optional {
            missing.push(format!("{}/{}.csv.gz", table.module(), table.name));
        }
        plan.push((table, file));
    }
    if !missing.is_empty() {
        let first = dir.join(&missing[0]);
        return Err(DbError::Input {
            path: first,
            line: None,
            message: format!(
                "missing: the folder lacks {} required table file(s): {}; every MIMIC-IV table must be present (re-download the folder, or copy the missing files in)",
                missing.len(),
                missing.join(", ")
            ),
        });
    }
    debug_assert!(plan.iter().all(|(t, _)| SCHEMAS.contains(&t.schema.as_str())));
    Ok(plan)
}
