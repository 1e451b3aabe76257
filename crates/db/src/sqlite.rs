//! The SQLite layout: `sqlite:PATH` names a main file; each schema
//! (`mimiciv_hosp`, `mimiciv_icu`, `mimiciv_derived`) is a sibling file
//! `PATH.SCHEMA` (for `demo.db`: `demo.db.mimiciv_hosp`, ...), listed in
//! the main file's table `evident_schemas(schema, file)` and attached under
//! the schema's name by every connection, so that `SELECT ... FROM
//! mimiciv_hosp.patients` reads as it does on PostgreSQL. One file per
//! schema is the only way SQLite qualifies a table by a schema name (a
//! table named `mimiciv_hosp.patients` in one file would have to be quoted
//! in every query). A client outside Evident (R's RSQLite, the sqlite3
//! shell) opens PATH and runs `ATTACH 'PATH.mimiciv_hosp' AS mimiciv_hosp`
//! for each row of `evident_schemas` ([`attached_schemas`] lists them).
//!
//! Loading builds every file under a temporary name beside the target and
//! renames them into place only when the whole load has succeeded (schema
//! files first, the main file last), so a failed load leaves the previous
//! database as it was.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags};

use crate::derived::Dialect;
use crate::load::Target;
use crate::schema::{TableDef, SCHEMAS};
use crate::source::{Field, TableReader};
use crate::DbError;

/// The catalogue table in the main file.
pub(crate) const CATALOGUE: &str = "evident_schemas";

/// `PATH.SCHEMA`, the file a schema of the database at `main` lives in.
pub fn schema_file(main: &Path, schema: &str) -> PathBuf {
    let mut name = main.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{schema}"));
    main.with_file_name(name)
}

/// The schemas the database at `main` attaches, with their files, as its
/// catalogue lists them. Empty for a SQLite file Evident did not load.
pub fn attached_schemas(main: &Path) -> Result<Vec<(String, PathBuf)>, DbError> {
    let conn = open_file(main, true)?;
    read_catalogue(&conn, main)
}

fn read_catalogue(conn: &Connection, main: &Path) -> Result<Vec<(String, PathBuf)>, DbError> {
    let connect_error =
        |e: rusqlite::Error| DbError::Connect { url: format!("sqlite:{}", main.display()), message: e.to_string() };
    let has_catalogue: bool = conn
        .query_row("SELECT count(*) > 0 FROM main.sqlite_master WHERE type = 'table' AND name = ?1", [CATALOGUE], |r| {
            r.get(0)
        })
        .map_err(connect_error)?;
    if !has_catalogue {
        return Ok(Vec::new());
    }
    let mut stmt =
        conn.prepare(&format!("SELECT schema, file FROM main.{CATALOGUE} ORDER BY rowid")).map_err(connect_error)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(connect_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(connect_error)?;
    Ok(rows.into_iter().map(|(schema, file)| (schema, main.with_file_name(file))).collect())
}

fn open_file(path: &Path, read_only: bool) -> Result<Connection, DbError> {
    let url = format!("sqlite:{}", path.display());
    if read_only && !path.is_file() {
        return Err(DbError::Connect {
            url,
            message: "no such file; load a database first (evident db load mimic DIR --into sqlite:PATH)".into(),
        });
    }
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| DbError::Connect { url: url.clone(), message: e.to_string() })?;
    // A file that is not SQLite fails on its first read, not on open.
    conn.query_row("SELECT count(*) FROM main.sqlite_master", [], |_| Ok(()))
        .map_err(|e| DbError::Connect { url, message: format!("{e}; is it a SQLite database?") })?;
    Ok(conn)
}

/// Opens the database at `main` with its schemas attached; read-only
/// connections attach read-only (SQLite opens attached files with the main
/// connection's flags).
pub(crate) fn open_attached(main: &Path, read_only: bool) -> Result<Connection, DbError> {
    let conn = open_file(main, read_only)?;
    for (schema, file) in read_catalogue(&conn, main)? {
        if !file.is_file() {
            return Err(DbError::Connect {
                url: format!("sqlite:{}", main.display()),
                message: format!(
                    "schema {schema} is listed in file {}, which is missing; load the database again",
                    file.display()
                ),
            });
        }
        attach(&conn, &file, &schema)
            .map_err(|e| DbError::Connect { url: format!("sqlite:{}", main.display()), message: e.to_string() })?;
    }
    Ok(conn)
}

fn attach(conn: &Connection, file: &Path, schema: &str) -> rusqlite::Result<()> {
    assert!(schema.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "schema names are identifiers");
    conn.execute(&format!("ATTACH DATABASE ?1 AS {schema}"), [file.to_string_lossy()])?;
    Ok(())
}

/// A load in progress: every file under a temporary name until `finish`.
pub(crate) struct SqliteTarget {
    conn: Option<Connection>,
    /// (temporary, final) for the schema files, then the main file last.
    files: Vec<(PathBuf, PathBuf)>,
}

impl SqliteTarget {
    pub fn create(main: &Path) -> Result<SqliteTarget, DbError> {
        let url = format!("sqlite:{}", main.display());
        if main.exists() {
            // Replace only what Evident loaded: a store or another program's
            // file at this path is refused rather than overwritten.
            let conn = open_file(main, true)?;
            if read_catalogue(&conn, main)?.is_empty() {
                return Err(DbError::Connect {
                    url,
                    message: "the file exists and is not a database Evident loaded; choose another path or remove it"
                        .into(),
                });
            }
        }
        if let Some(dir) = main.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(DbError::Connect { url, message: format!("folder {} does not exist", dir.display()) });
            }
        }
        let suffix = format!("loading-{}-{:08x}", std::process::id(), rand::random::<u32>());
        let temporary = |path: &Path| {
            let mut name = std::ffi::OsString::from(".");
            name.push(path.file_name().unwrap_or_default());
            name.push(format!(".{suffix}"));
            path.with_file_name(name)
        };
        let mut target = SqliteTarget { conn: None, files: Vec::new() };
        let main_tmp = temporary(main);
        for schema in SCHEMAS {
            let file = schema_file(main, schema);
            target.files.push((temporary(&file), file));
        }
        target.files.push((main_tmp.clone(), main.to_path_buf()));
        let conn = open_file(&main_tmp, false)?;
        let backend = |e: rusqlite::Error| DbError::backend(format!("creating {}", main_tmp.display()), e);
        conn.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;").map_err(backend)?;
        conn.execute_batch(&format!("CREATE TABLE {CATALOGUE} (schema TEXT PRIMARY KEY, file TEXT NOT NULL)"))
            .map_err(backend)?;
        for (schema, (tmp, file)) in SCHEMAS.iter().zip(&target.files) {
            attach(&conn, tmp, schema).map_err(backend)?;
            conn.execute_batch(&format!("PRAGMA {schema}.journal_mode = OFF; PRAGMA {schema}.synchronous = OFF;"))
                .map_err(backend)?;
            let name = file.file_name().unwrap_or_default().to_string_lossy().into_owned();
            conn.execute(&format!("INSERT INTO {CATALOGUE} (schema, file) VALUES (?1, ?2)"), params![schema, name])
                .map_err(backend)?;
        }
        conn.execute_batch("BEGIN").map_err(backend)?;
        target.conn = Some(conn);
        Ok(target)
    }

    fn conn(&self) -> &Connection {
        self.conn.as_ref().expect("open until finish")
    }

    fn remove_temporary_files(&mut self) {
        self.conn = None;
        for (tmp, _) in &self.files {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

impl Drop for SqliteTarget {
    fn drop(&mut self) {
        // After `finish` the temporary files are gone (renamed); otherwise
        // the load failed and they go, leaving the old database in place.
        self.remove_temporary_files();
    }
}

impl Target for SqliteTarget {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&mut self, sql: &str, context: &str) -> Result<(), DbError> {
        self.conn().execute_batch(sql).map_err(|e| DbError::backend(context, e))
    }

    fn count(&mut self, qualified: &str) -> Result<u64, DbError> {
        self.conn()
            .query_row(&format!("SELECT count(*) FROM {qualified}"), [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(|e| DbError::backend(format!("counting {qualified}"), e))
    }

    fn append(&mut self, table: &TableDef, reader: &mut TableReader, path: &Path) -> Result<u64, DbError> {
        let columns: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
        let placeholders: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            table.qualified_name(),
            columns.join(", "),
            placeholders.join(", ")
        );
        let conn = self.conn.as_ref().expect("open until finish");
        let mut stmt =
            conn.prepare(&sql).map_err(|e| DbError::backend(format!("loading {}", table.qualified_name()), e))?;
        let mut row = Vec::with_capacity(columns.len());
        let mut rows = 0u64;
        while let Some(line) = reader.next_row(&mut row)? {
            let values = row.iter().map(|f| match f {
                None => rusqlite::types::Value::Null,
                Some(Field::Integer(v)) => rusqlite::types::Value::Integer(*v),
                Some(Field::Real(v)) => rusqlite::types::Value::Real(*v),
                Some(Field::Text(v)) => rusqlite::types::Value::Text(v.clone()),
            });
            stmt.execute(rusqlite::params_from_iter(values)).map_err(|e| DbError::Input {
                path: path.to_path_buf(),
                line: Some(line),
                message: format!(
                    "row refused by {}: {e}{}",
                    table.qualified_name(),
                    if e.to_string().contains("UNIQUE") {
                        format!(
                            " (primary key {} repeats an earlier row); remove the duplicate",
                            table.primary_key.join(", ")
                        )
                    } else {
                        String::new()
                    }
                ),
            })?;
            rows += 1;
        }
        Ok(rows)
    }

    fn index_sql(&self, table: &TableDef) -> Vec<String> {
        table.index_sql(false)
    }

    fn derived_index_sql(&self, table: &str, column: &str) -> String {
        format!("CREATE INDEX mimiciv_derived.{table}_{column}_idx ON {table} ({column})")
    }

    fn finish(mut self: Box<Self>) -> Result<(), DbError> {
        let conn = self.conn.take().expect("open until finish");
        conn.execute_batch("COMMIT; ANALYZE;").map_err(|e| DbError::backend("committing the load", e))?;
        for schema in SCHEMAS {
            conn.execute_batch(&format!("DETACH DATABASE {schema}")).map_err(|e| DbError::backend("detaching", e))?;
        }
        conn.close().map_err(|(_, e)| DbError::backend("closing the new database", e))?;
        // Schema files first, the main file last: until the main file is
        // renamed, the old main file is the database.
        for (tmp, file) in &self.files {
            std::fs::rename(tmp, file).map_err(|e| DbError::io(file, e))?;
        }
        self.files.clear();
        Ok(())
    }
}
