//! Agent SQL cannot write: on SQLite (read-only files, `query_only`, an
//! authorizer) and on PostgreSQL (a per-run role with SELECT only, in
//! read-only transactions) every statement that would write, change a
//! setting, attach a file or reach outside the database is refused and
//! the data is unchanged; statements are row-, time- and text-limited.

mod support;

use std::time::Duration;

use evident_db::{load_mimic, DatabaseUrl, DbError, QueryLimits, ReadOnlyConnection, Value};
use support::{demo_dir, sqlite_url, TempPgDatabase};

/// Statements that would change the database, on both backends.
const WRITES: [&str; 8] = [
    "INSERT INTO mimiciv_hosp.patients (subject_id, gender, anchor_age, anchor_year, anchor_year_group) VALUES (1, 'F', 50, 2150, '2008 - 2010')",
    "UPDATE mimiciv_hosp.patients SET anchor_age = 0",
    "DELETE FROM mimiciv_hosp.patients",
    "DROP TABLE mimiciv_hosp.patients",
    "CREATE TABLE mimiciv_hosp.mine (x INTEGER)",
    "ALTER TABLE mimiciv_hosp.patients ADD COLUMN x INTEGER",
    "CREATE TEMP TABLE scratch AS SELECT * FROM mimiciv_hosp.patients",
    "CREATE VIEW mimiciv_hosp.v AS SELECT 1",
];

fn fingerprint(conn: &mut ReadOnlyConnection) -> Vec<Vec<Value>> {
    conn.query(
        "SELECT count(*), sum(anchor_age), min(subject_id), max(dod) FROM mimiciv_hosp.patients
         UNION ALL SELECT count(*), sum(itemid), min(labevent_id), max(charttime) FROM mimiciv_hosp.labevents",
    )
    .unwrap()
    .rows
}

fn refused(conn: &mut ReadOnlyConnection, sql: &str) -> String {
    match conn.query(sql) {
        Err(DbError::Refused { message }) => message,
        other => panic!("{sql}: expected a refusal, got {other:?}"),
    }
}

fn check_limits(conn: &mut ReadOnlyConnection) {
    // The row limit stops the rows and says so.
    let result = conn.query("SELECT subject_id FROM mimiciv_hosp.labevents ORDER BY labevent_id").unwrap();
    assert_eq!(result.rows.len(), 5);
    assert!(result.truncated);
    assert!(result.text.contains("[only the first 5 rows are shown"), "{}", result.text);
    // The text is cut at its limit.
    let result =
        conn.query("SELECT long_title FROM mimiciv_hosp.d_icd_diagnoses ORDER BY icd_code, icd_version").unwrap();
    assert!(result.truncated && result.text.chars().count() <= 300, "{}", result.text);
    // describe and tables.
    let patients = conn.describe("patients").unwrap();
    assert_eq!(patients.qualified_name(), "mimiciv_hosp.patients");
    assert_eq!(
        patients.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["subject_id", "gender", "anchor_age", "anchor_year", "anchor_year_group", "dod"]
    );
    assert!(matches!(conn.describe("no_such_table"), Err(DbError::Query { .. })));
    let names: Vec<String> = conn.tables().unwrap().iter().map(|t| t.qualified_name()).collect();
    assert!(names.contains(&"mimiciv_derived.charlson".to_string()) && names.contains(&"mimiciv_icu.icustays".into()));
    assert_eq!(names.iter().filter(|n| n.starts_with("mimiciv_")).count(), 35, "{names:?}");
    // A bad statement is the database's own message.
    let err = conn.query("SELECT nope FROM mimiciv_hosp.patients").unwrap_err();
    assert!(matches!(err, DbError::Query { .. }) && err.to_string().contains("nope"), "{err}");
}

fn limits(timeout_ms: u64) -> QueryLimits {
    QueryLimits { max_rows: 5, timeout: Duration::from_millis(timeout_ms), max_text_chars: 300 }
}

#[test]
fn sqlite_agent_sql_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(dir.path());
    load_mimic(&demo_dir(), &url, &mut |_| {}).unwrap();
    let files_before = files(dir.path());
    let mut conn = ReadOnlyConnection::connect(&url, limits(500)).unwrap();
    let before = fingerprint(&mut conn);
    for sql in WRITES {
        refused(&mut conn, sql);
    }
    let extra = dir.path().join("extra.db");
    for sql in [
        format!("ATTACH DATABASE '{}' AS extra", extra.display()),
        "DETACH DATABASE mimiciv_hosp".to_string(),
        "PRAGMA query_only = OFF".into(),
        "PRAGMA writable_schema = ON".into(),
        "PRAGMA journal_mode = WAL".into(),
        "PRAGMA mimiciv_hosp.user_version = 7".into(),
        "CREATE INDEX mimiciv_hosp.patients_gender ON patients (gender)".into(),
        "VACUUM".into(),
        "REINDEX".into(),
        "BEGIN".into(),
        "SELECT load_extension('/tmp/x')".into(),
        "SELECT 1; DELETE FROM mimiciv_hosp.patients".into(),
        "WITH x AS (SELECT 1) DELETE FROM mimiciv_hosp.patients".into(),
    ] {
        refused(&mut conn, &sql);
    }
    assert!(!extra.exists(), "ATTACH created a file");
    // Describing a table is allowed.
    let info = conn.query("PRAGMA mimiciv_hosp.table_info(patients)").unwrap();
    assert_eq!(info.rows[0][1], Value::Text("subject_id".into()));
    assert_eq!(fingerprint(&mut conn), before);
    check_limits(&mut conn);
    // A long statement is cancelled at the time limit.
    let started = std::time::Instant::now();
    let err = conn
        .query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n")
        .unwrap_err();
    assert!(matches!(err, DbError::Timeout { limit_ms: 500 }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // The connection still works after a cancel.
    assert_eq!(fingerprint(&mut conn), before);
    drop(conn);
    assert_eq!(files(dir.path()), files_before, "the database files changed");
}

#[test]
fn postgresql_agent_sql_cannot_write_and_its_role_is_dropped() {
    let pg = TempPgDatabase::new();
    load_mimic(&demo_dir(), &pg.url, &mut |_| {}).unwrap();
    // A role a killed run left behind, expired.
    let stale = format!("evident_ro_stale_{}", pg.name);
    pg.client().batch_execute(&format!("CREATE ROLE {stale} LOGIN VALID UNTIL '2000-01-01'")).unwrap();
    let mut conn = ReadOnlyConnection::connect(&pg.url, limits(800)).unwrap();
    let stale_left: i64 =
        pg.client().query_one("SELECT count(*) FROM pg_roles WHERE rolname = $1", &[&stale]).unwrap().get(0);
    assert_eq!(stale_left, 0, "the expired role was not dropped");
    let agent_url = conn.agent_url().clone();
    let DatabaseUrl::Postgres { url: agent } = &agent_url else { panic!() };
    let role = agent.split("://").nth(1).unwrap().split(':').next().unwrap().to_string();
    assert!(role.starts_with("evident_ro_"), "{role}");
    let password = agent.split_once(&format!("{role}:")).unwrap().1.split('@').next().unwrap();
    assert!(password.len() >= 32 && !agent_url.to_string().contains(password), "the role's password shows");
    let before = fingerprint(&mut conn);
    for sql in WRITES {
        refused(&mut conn, sql);
    }
    for sql in [
        "CREATE INDEX patients_gender ON mimiciv_hosp.patients (gender)",
        "TRUNCATE mimiciv_hosp.patients",
        "SET ROLE evident",
        "SET SESSION AUTHORIZATION evident",
        "COPY (SELECT 1) TO PROGRAM 'touch /tmp/evident_escape'",
        "COPY mimiciv_hosp.patients TO '/tmp/evident_escape'",
        "COPY mimiciv_hosp.patients FROM '/etc/hostname'",
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT lo_import('/etc/passwd')",
        "CREATE EXTENSION IF NOT EXISTS dblink",
        "CREATE SCHEMA mine",
        "CREATE TABLE public.mine (x int)",
        "GRANT SELECT ON mimiciv_hosp.patients TO PUBLIC",
        "ALTER ROLE CURRENT_USER SET statement_timeout = 0",
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
        "DO $$ BEGIN DELETE FROM mimiciv_hosp.patients; END $$",
    ] {
        refused(&mut conn, sql);
    }
    assert!(!std::path::Path::new("/tmp/evident_escape").exists());
    // Several statements in one call are refused by the protocol.
    assert!(conn.query("SELECT 1; DELETE FROM mimiciv_hosp.patients").is_err());
    // Turning read-only off for the session does not give write rights.
    let _ = conn.query("SET default_transaction_read_only = off");
    refused(&mut conn, WRITES[2]);
    assert_eq!(fingerprint(&mut conn), before);
    check_limits(&mut conn);
    // The run's role also cannot write from another client (R's DBI uses this URL).
    let mut direct = postgres::Client::connect(&agent_url.expose(), postgres::NoTls).unwrap();
    assert!(direct
        .batch_execute("SET default_transaction_read_only = off; DELETE FROM mimiciv_hosp.patients")
        .is_err());
    drop(direct);
    let started = std::time::Instant::now();
    let err = conn.query("SELECT pg_sleep(10)").unwrap_err();
    assert!(matches!(err, DbError::Timeout { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(fingerprint(&mut conn), before);

    conn.close().unwrap();
    let roles: i64 =
        pg.client().query_one("SELECT count(*) FROM pg_roles WHERE rolname = $1", &[&role]).unwrap().get(0);
    assert_eq!(roles, 0, "the run's role outlived the run");
    assert!(postgres::Client::connect(&agent_url.expose(), postgres::NoTls).is_err());
}

#[test]
fn a_missing_sqlite_database_is_a_connect_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = ReadOnlyConnection::connect(&sqlite_url(dir.path()), QueryLimits::default()).err().unwrap();
    assert!(err.is_input() && err.to_string().contains("evident db load mimic"), "{err}");
    assert!(!dir.path().join("mimic.db").exists(), "a read-only connect created the file");
}

/// Every file in `dir` with its bytes, sorted by name.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// Evident's own long statements (the bundle's content hash) run under a
/// time limit of their own, set for their transaction only: the role's
/// limit still holds for the next statement.
#[test]
fn a_statement_of_evidents_own_runs_under_its_own_time_limit_and_only_it() {
    let pg = TempPgDatabase::new();
    let mut conn = ReadOnlyConnection::connect(&pg.url, limits(300)).unwrap();
    let sleep = "SELECT pg_sleep(0.6)::text";
    assert!(matches!(conn.query(sleep), Err(DbError::Timeout { limit_ms: 300 })));
    conn.query_with_timeout(sleep, Some(Duration::from_secs(5))).unwrap();
    conn.query_with_timeout(sleep, None).unwrap();
    assert!(matches!(conn.query_with_timeout(sleep, Some(Duration::from_millis(100))), Err(DbError::Timeout { .. })));
    assert!(matches!(conn.query(sleep), Err(DbError::Timeout { limit_ms: 300 })), "the longer limit stayed");
    conn.close().unwrap();
}
