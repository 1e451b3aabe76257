//! `ReadOnlyConnection`: the connection an agent's SQL runs on. It cannot
//! write, change a setting, attach a file or reach outside the database,
//! and every statement is row-limited, time-limited and its text cut.
//!
//! SQLite: the files are opened read-only, `PRAGMA query_only` is on, and
//! an authorizer allows only reading (SELECT, reading columns, functions,
//! recursive CTEs, and the PRAGMAs that describe a table); everything else,
//! ATTACH and writable PRAGMAs included, is refused before it runs. A
//! progress handler cancels a statement past its time limit.
//!
//! PostgreSQL: from the caller's admin URL, a role is created for the run
//! with LOGIN, SELECT on the tables of every non-system schema and nothing
//! else, `statement_timeout` and `default_transaction_read_only` set, and a
//! password that expires in a day; the agent's statements run as that role,
//! one statement at a time (the extended protocol refuses several), each in
//! a READ ONLY transaction that is rolled back, fetched through a portal
//! that stops at the row limit. `close` (or drop) ends the role's sessions
//! and drops the role. While the run is live its admin session holds an
//! advisory lock keyed by the role's name; the next connection to the
//! server drops every run role whose lock nobody holds (a killed process
//! left it) or whose password has expired.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What [`ReadOnlyConnection::query_with_timeout`] takes for no time limit.
const NO_LIMIT: Duration = Duration::from_secs(365 * 24 * 3600);

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::ValueRef;

use crate::{postgres as pg, sqlite, ColumnInfo, DatabaseUrl, DbError, QueryLimits, QueryResult, TableInfo, Value};

/// A read-only connection for an agent's queries.
pub struct ReadOnlyConnection {
    backend: Backend,
    limits: QueryLimits,
    agent_url: DatabaseUrl,
}

enum Backend {
    Sqlite {
        conn: rusqlite::Connection,
        /// Milliseconds since `epoch` after which the running statement is
        /// cancelled; u64::MAX when none runs.
        deadline_ms: Arc<AtomicU64>,
        epoch: Instant,
        /// `main` and the attached schemas.
        schemas: Vec<String>,
    },
    Postgres {
        client: Option<Box<postgres::Client>>,
        admin: Box<postgres::Client>,
        role: String,
    },
}

/// PRAGMAs an agent may run: they describe a table and change nothing,
/// whatever their argument.
const READ_PRAGMAS: [&str; 7] =
    ["table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list", "table_list"];

impl ReadOnlyConnection {
    /// Connects read-only to the database at `url`. For PostgreSQL, `url`
    /// is an admin URL (a role that may create roles and grant SELECT):
    /// the agent's role is created from it and dropped on `close`.
    pub fn connect(url: &DatabaseUrl, limits: QueryLimits) -> Result<ReadOnlyConnection, DbError> {
        match url {
            DatabaseUrl::Sqlite { path } => connect_sqlite(path, limits, url),
            DatabaseUrl::Postgres { .. } => connect_postgres(url, limits),
        }
    }

    /// The URL under which the agent's other clients (R's DBI) reach the
    /// same database with the same rights: for PostgreSQL the run's role
    /// and its password (never print it; [`DatabaseUrl`]'s Display hides
    /// it), for SQLite the same file (open it read-only).
    pub fn agent_url(&self) -> &DatabaseUrl {
        &self.agent_url
    }

    /// The limits every statement runs under.
    pub fn limits(&self) -> &QueryLimits {
        &self.limits
    }

    /// Runs one read-only statement.
    pub fn query(&mut self, sql: &str) -> Result<QueryResult, DbError> {
        let limits = self.limits.clone();
        self.query_under(sql, &limits, false)
    }

    /// Runs one read-only statement of Evident's own (not an agent's)
    /// under `timeout` instead of the connection's time limit, `None` for
    /// no limit: the evidence bundle's content hash, whose statements on a
    /// big database run for longer than an agent's may and should stop at
    /// the caller's deadline. PostgreSQL sets `statement_timeout` for the
    /// statement's transaction only (`SET LOCAL`), so the role's own limit
    /// is unchanged for every other statement.
    pub fn query_with_timeout(&mut self, sql: &str, timeout: Option<Duration>) -> Result<QueryResult, DbError> {
        // A year stands for no limit on SQLite, whose deadline is a time.
        let limits = QueryLimits { timeout: timeout.unwrap_or(NO_LIMIT).min(NO_LIMIT), ..self.limits.clone() };
        self.query_under(sql, &limits, true)
    }

    fn query_under(&mut self, sql: &str, limits: &QueryLimits, set_timeout: bool) -> Result<QueryResult, DbError> {
        match &mut self.backend {
            Backend::Sqlite { conn, deadline_ms, epoch, .. } => {
                let deadline = epoch.elapsed() + limits.timeout;
                deadline_ms.store(deadline.as_millis() as u64, Ordering::SeqCst);
                let result = sqlite_query(conn, sql, limits);
                deadline_ms.store(u64::MAX, Ordering::SeqCst);
                result
            }
            Backend::Postgres { client, .. } => {
                // statement_timeout: milliseconds, 0 for none, at most i32::MAX.
                let timeout_ms = if limits.timeout >= NO_LIMIT {
                    0
                } else {
                    limits.timeout.as_millis().clamp(1, i32::MAX as u128) as i64
                };
                postgres_query(
                    client.as_mut().expect("open until close"),
                    sql,
                    limits,
                    set_timeout.then_some(timeout_ms),
                )
            }
        }
    }

    /// Every table the agent can read, with its columns, ordered by schema
    /// and name.
    pub fn tables(&mut self) -> Result<Vec<TableInfo>, DbError> {
        match &mut self.backend {
            Backend::Sqlite { conn, schemas, .. } => sqlite_tables(conn, schemas),
            Backend::Postgres { client, .. } => postgres_tables(client.as_mut().expect("open until close")),
        }
    }

    /// One table, named `schema.table` or, when only one schema has it,
    /// `table`.
    pub fn describe(&mut self, table: &str) -> Result<TableInfo, DbError> {
        let wanted = table.trim().to_ascii_lowercase();
        let tables = self.tables()?;
        let matches: Vec<&TableInfo> = tables
            .iter()
            .filter(|t| t.qualified_name().to_ascii_lowercase() == wanted || t.name.to_ascii_lowercase() == wanted)
            .collect();
        match matches[..] {
            [one] => Ok(one.clone()),
            [] => Err(DbError::Query { message: format!("no table {table}; list the tables to see their names") }),
            _ => Err(DbError::Query {
                message: format!(
                    "{table} is in several schemas ({}); name it as schema.table",
                    matches.iter().map(|t| t.qualified_name()).collect::<Vec<_>>().join(", ")
                ),
            }),
        }
    }

    /// Closes the connection; for PostgreSQL, ends the run role's sessions
    /// and drops the role.
    pub fn close(mut self) -> Result<(), DbError> {
        self.drop_role()
    }

    fn drop_role(&mut self) -> Result<(), DbError> {
        let Backend::Postgres { client, admin, role } = &mut self.backend else { return Ok(()) };
        let Some(client) = client.take() else { return Ok(()) };
        drop(client);
        drop_role(admin, role)
    }
}

impl Drop for ReadOnlyConnection {
    fn drop(&mut self) {
        let _ = self.drop_role();
    }
}

fn connect_sqlite(
    path: &std::path::Path,
    limits: QueryLimits,
    url: &DatabaseUrl,
) -> Result<ReadOnlyConnection, DbError> {
    let conn = sqlite::open_attached(path, true)?;
    let mut schemas = vec!["main".to_string()];
    schemas.extend(sqlite::attached_schemas(path)?.into_iter().map(|(schema, _)| schema));
    let setup = |e: rusqlite::Error| DbError::Connect { url: url.redacted(), message: e.to_string() };
    conn.execute_batch("PRAGMA query_only = ON").map_err(setup)?;
    conn.authorizer(Some(|ctx: AuthContext<'_>| match ctx.action {
        AuthAction::Select | AuthAction::Read { .. } | AuthAction::Recursive => Authorization::Allow,
        AuthAction::Function { function_name } => {
            let name = function_name.to_ascii_lowercase();
            if name == "load_extension" || name.starts_with("fts3_tokenizer") {
                Authorization::Deny
            } else {
                Authorization::Allow
            }
        }
        AuthAction::Pragma { pragma_name, .. } if READ_PRAGMAS.contains(&pragma_name.to_ascii_lowercase().as_str()) => {
            Authorization::Allow
        }
        _ => Authorization::Deny,
    }));
    let epoch = Instant::now();
    let deadline_ms = Arc::new(AtomicU64::new(u64::MAX));
    let handler_deadline = Arc::clone(&deadline_ms);
    conn.progress_handler(
        1_000,
        Some(move || epoch.elapsed().as_millis() as u64 > handler_deadline.load(Ordering::SeqCst)),
    );
    Ok(ReadOnlyConnection {
        backend: Backend::Sqlite { conn, deadline_ms, epoch, schemas },
        limits,
        agent_url: url.clone(),
    })
}

fn sqlite_error(e: rusqlite::Error, limits: &QueryLimits) -> DbError {
    use rusqlite::ErrorCode;
    let refused = "the database is read-only for agents: only SELECT (and WITH ... SELECT) and the PRAGMAs that describe a table run";
    if let rusqlite::Error::MultipleStatement = e {
        return DbError::Refused { message: "one statement at a time; send the others separately".into() };
    }
    let text = e.to_string();
    match e.sqlite_error_code() {
        Some(ErrorCode::OperationInterrupted) => DbError::Timeout { limit_ms: limits.timeout.as_millis() as u64 },
        Some(ErrorCode::AuthorizationForStatementDenied | ErrorCode::ReadOnly) => {
            DbError::Refused { message: format!("{refused} ({text})") }
        }
        _ if text.contains("not authorized") => DbError::Refused { message: format!("{refused} ({text})") },
        _ => DbError::Query { message: text },
    }
}

fn sqlite_query(conn: &rusqlite::Connection, sql: &str, limits: &QueryLimits) -> Result<QueryResult, DbError> {
    let mut stmt = conn.prepare(sql).map_err(|e| sqlite_error(e, limits))?;
    if !stmt.readonly() {
        return Err(sqlite_error(
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
                Some("statement writes".into()),
            ),
            limits,
        ));
    }
    let columns: Vec<String> = stmt.column_names().into_iter().map(String::from).collect();
    let mut rows = Vec::new();
    let mut more_rows = false;
    let mut cursor = stmt.query([]).map_err(|e| sqlite_error(e, limits))?;
    while let Some(row) = cursor.next().map_err(|e| sqlite_error(e, limits))? {
        if rows.len() == limits.max_rows {
            more_rows = true;
            break;
        }
        let mut values = Vec::with_capacity(columns.len());
        for i in 0..columns.len() {
            values.push(match row.get_ref(i).map_err(|e| sqlite_error(e, limits))? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(v) => Value::Integer(v),
                ValueRef::Real(v) => Value::Real(v),
                ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => Value::Text(format!("<blob of {} bytes>", b.len())),
            });
        }
        rows.push(values);
    }
    Ok(QueryResult::new(columns, rows, more_rows, limits))
}

fn sqlite_tables(conn: &rusqlite::Connection, schemas: &[String]) -> Result<Vec<TableInfo>, DbError> {
    let error = |e: rusqlite::Error| DbError::Query { message: e.to_string() };
    let mut tables = Vec::new();
    for schema in schemas {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT name FROM {schema}.sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' AND name <> '{}' ORDER BY name",
                sqlite::CATALOGUE
            ))
            .map_err(error)?;
        let names: Vec<String> =
            stmt.query_map([], |r| r.get(0)).map_err(error)?.collect::<Result<_, _>>().map_err(error)?;
        for name in names {
            let mut info = conn.prepare(&format!("PRAGMA {schema}.table_info(\"{name}\")")).map_err(error)?;
            let columns = info
                .query_map([], |r| {
                    Ok(ColumnInfo {
                        name: r.get(1)?,
                        data_type: r.get(2)?,
                        nullable: r.get::<_, i64>(3)? == 0,
                        primary_key: r.get::<_, i64>(5)? > 0,
                    })
                })
                .map_err(error)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(error)?;
            tables.push(TableInfo { schema: schema.clone(), name, columns });
        }
    }
    tables.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
    Ok(tables)
}

fn connect_postgres(admin_url: &DatabaseUrl, limits: QueryLimits) -> Result<ReadOnlyConnection, DbError> {
    let mut admin = pg::connect(admin_url)?;
    let role = format!("evident_ro_{}_{:08x}", std::process::id(), rand::random::<u32>());
    let password: String = {
        use rand::Rng;
        let mut rng = rand::thread_rng();
        (0..32).map(|_| rng.sample(rand::distributions::Alphanumeric) as char).collect()
    };
    let admin_error = |e: postgres::Error| {
        DbError::Connect {
        url: admin_url.redacted(),
        message: format!(
            "creating the run's read-only role failed: {}; the URL's user must be allowed to create roles and grant SELECT",
            pg::error_text(&e)
        ),
    }
    };
    // The run is live while its admin session holds an advisory lock keyed
    // by its role's name (released by the server when the process dies),
    // taken before the role exists so no other run mistakes it for stale.
    admin.execute("SELECT pg_advisory_lock($1, hashtext($2))", &[&LIVE_RUN_LOCK_CLASS, &role]).map_err(admin_error)?;
    // Roles of runs that are no longer live (a killed process) or expired
    // are dropped by the next run on this server.
    admin.batch_execute(&drop_stale_roles()).map_err(admin_error)?;
    let timeout_ms = limits.timeout.as_millis().max(1);
    let database: String = admin.query_one("SELECT current_database()", &[]).map_err(admin_error)?.get(0);
    let schemas: Vec<String> = admin
        .query(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg\\_%' ORDER BY nspname",
            &[],
        )
        .map_err(admin_error)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let valid_until = (chrono::Utc::now() + chrono::Duration::days(1)).format("%Y-%m-%d %H:%M:%S+00");
    let mut sql = format!(
        "CREATE ROLE {role} LOGIN PASSWORD '{password}' NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT 8 VALID UNTIL '{valid_until}';
GRANT CONNECT ON DATABASE {db} TO {role};
ALTER ROLE {role} SET statement_timeout = {timeout_ms};
ALTER ROLE {role} SET default_transaction_read_only = on;
ALTER ROLE {role} SET idle_in_transaction_session_timeout = {idle};\n",
        db = quote_ident(&database),
        idle = timeout_ms * 2,
    );
    for schema in &schemas {
        let schema = quote_ident(schema);
        sql.push_str(&format!(
            "GRANT USAGE ON SCHEMA {schema} TO {role};\nGRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role};\n"
        ));
    }
    admin.batch_execute(&sql).map_err(|e| {
        let _ = drop_role(&mut admin, &role);
        admin_error(e)
    })?;
    let agent_url = admin_url.with_credentials(&role, &password)?;
    let client = match pg::connect(&agent_url) {
        Ok(client) => client,
        Err(e) => {
            let _ = drop_role(&mut admin, &role);
            return Err(e);
        }
    };
    Ok(ReadOnlyConnection {
        backend: Backend::Postgres { client: Some(Box::new(client)), admin: Box::new(admin), role },
        limits,
        agent_url,
    })
}

/// The first key of the session advisory lock a live run holds; the
/// second is `hashtext(role)`. ("Evid" in ASCII.)
const LIVE_RUN_LOCK_CLASS: i32 = 0x4576_6964;

/// Drops every run role (`evident_ro_PID_RANDOM`) whose run is not live (no
/// session of the server holds its advisory lock: the process that created
/// it was killed before dropping it) or whose password has expired; a role
/// that still owns something in another database stays until a run there
/// drops it. Locks of every database show in `pg_locks`, so a live run on
/// another database of the same server keeps its role.
fn drop_stale_roles() -> String {
    format!(
        "DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT rolname FROM pg_roles WHERE rolname LIKE 'evident\\_ro\\_%' AND (rolvaliduntil < now() OR NOT EXISTS (
      SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
        AND l.classid = {LIVE_RUN_LOCK_CLASS}::oid AND l.objid = hashtext(rolname)::oid)) LOOP
    BEGIN
      EXECUTE format('DROP OWNED BY %I', r.rolname);
      EXECUTE format('DROP ROLE %I', r.rolname);
    EXCEPTION WHEN others THEN NULL;
    END;
  END LOOP;
END $$"
    )
}

fn drop_role(admin: &mut postgres::Client, role: &str) -> Result<(), DbError> {
    let sql = format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}';
DROP OWNED BY {role};
DROP ROLE IF EXISTS {role};"
    );
    admin.batch_execute(&sql).map_err(|e| DbError::backend(format!("dropping role {role}"), pg::error_text(&e)))
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn postgres_error(e: postgres::Error, limits: &QueryLimits) -> DbError {
    use postgres::error::SqlState;
    let text = pg::error_text(&e);
    match e.code() {
        Some(code) if *code == SqlState::QUERY_CANCELED => {
            DbError::Timeout { limit_ms: limits.timeout.as_millis() as u64 }
        }
        Some(code)
            if *code == SqlState::INSUFFICIENT_PRIVILEGE
                || *code == SqlState::READ_ONLY_SQL_TRANSACTION
                || *code == SqlState::FEATURE_NOT_SUPPORTED && text.contains("COPY") =>
        {
            DbError::Refused { message: format!("the database is read-only for agents: {text}") }
        }
        _ => DbError::Query { message: text },
    }
}

/// `statement_timeout_ms`: set for this statement's transaction only
/// (Evident's own statements, [`ReadOnlyConnection::query_with_timeout`]).
fn postgres_query(
    client: &mut postgres::Client,
    sql: &str,
    limits: &QueryLimits,
    statement_timeout_ms: Option<i64>,
) -> Result<QueryResult, DbError> {
    let mut tx = client.build_transaction().read_only(true).start().map_err(|e| postgres_error(e, limits))?;
    if let Some(ms) = statement_timeout_ms {
        tx.batch_execute(&format!("SET LOCAL statement_timeout = {ms}")).map_err(|e| postgres_error(e, limits))?;
    }
    let statement = tx.prepare(sql).map_err(|e| postgres_error(e, limits))?;
    let columns: Vec<String> = statement.columns().iter().map(|c| c.name().to_string()).collect();
    let mut rows = Vec::new();
    let mut more_rows = false;
    if !columns.is_empty() {
        let portal = tx.bind(&statement, &[]).map_err(|e| postgres_error(e, limits))?;
        let fetched = tx.query_portal(&portal, (limits.max_rows + 1) as i32).map_err(|e| postgres_error(e, limits))?;
        for row in fetched.iter() {
            if rows.len() == limits.max_rows {
                more_rows = true;
                break;
            }
            rows.push((0..columns.len()).map(|i| pg::value(row, i)).collect::<Result<Vec<_>, _>>()?);
        }
    } else {
        // A statement without result columns (SET, a DDL statement): run
        // it as the read-only role in the read-only transaction, which is
        // rolled back; privileges and read-only refuse any write.
        tx.execute(&statement, &[]).map_err(|e| postgres_error(e, limits))?;
    }
    tx.rollback().map_err(|e| postgres_error(e, limits))?;
    Ok(QueryResult::new(columns, rows, more_rows, limits))
}

fn postgres_tables(client: &mut postgres::Client) -> Result<Vec<TableInfo>, DbError> {
    let rows = client
        .query(
            "SELECT n.nspname::text, c.relname::text, a.attname::text, format_type(a.atttypid, a.atttypmod),
                    NOT a.attnotnull, COALESCE(a.attnum = ANY(i.indkey::int2[]), false)
             FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
             LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
             WHERE c.relkind IN ('r', 'v', 'm', 'p')
               AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
               AND has_table_privilege(c.oid, 'SELECT')
             ORDER BY n.nspname, c.relname, a.attnum",
            &[],
        )
        .map_err(|e| DbError::Query { message: pg::error_text(&e) })?;
    let mut tables: Vec<TableInfo> = Vec::new();
    for row in rows {
        let (schema, name): (String, String) = (row.get(0), row.get(1));
        let column =
            ColumnInfo { name: row.get(2), data_type: row.get(3), nullable: row.get(4), primary_key: row.get(5) };
        match tables.last_mut() {
            Some(t) if t.schema == schema && t.name == name => t.columns.push(column),
            _ => tables.push(TableInfo { schema, name, columns: vec![column] }),
        }
    }
    Ok(tables)
}
