//! Sandboxed R against PostgreSQL: the demo loaded into a throwaway
//! database on the server scripts/setup starts; R, with no network, reaches
//! it through the server's Unix socket as the run's read-only role, reads
//! the same cohort as from SQLite, and cannot write; the content hash the
//! evidence bundle records for a PostgreSQL database.

use evident_db::testing::TempPgDatabase;
use evident_db::{load_mimic, DatabaseUrl, QueryLimits, ReadOnlyConnection};
use evident_rwe::database::{postgres_content_sha256, r_database};
use evident_rwe::sandbox::{RDatabase, SandboxConfig, Workspace};

#[test]
fn sandboxed_r_reads_postgres_through_the_socket_and_cannot_write() {
    let pg = TempPgDatabase::new();
    load_mimic(&evident_testdata::shared_data().join("mimic-iv-demo"), &pg.url, &mut |_| {}).unwrap();
    let conn = ReadOnlyConnection::connect(&pg.url, QueryLimits::default()).unwrap();
    let db = r_database(conn.agent_url()).unwrap();
    match &db {
        RDatabase::Postgres { user, .. } => assert_ne!(
            Some(user.as_str()),
            pg.url.expose().split("//").nth(1).and_then(|r| r.split(':').next()),
            "R uses the run's role, not the admin"
        ),
        RDatabase::Sqlite { .. } => panic!("a PostgreSQL URL"),
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::create(&dir.path().join("ws"), db, &[]).unwrap();
    let r = ws
        .run_code(
            &SandboxConfig::default(),
            "read",
            r#"source("db_connect.R")
               cat("patients", dbGetQuery(con, "SELECT count(*) AS n FROM mimiciv_hosp.patients")$n, "\n")
               first <- dbGetQuery(con, "SELECT count(DISTINCT subject_id) AS n FROM mimiciv_icu.icustays")$n
               cat("first_stays", first, "\n")
               ok <- tryCatch({ dbExecute(con, "DELETE FROM mimiciv_hosp.patients"); TRUE }, error = function(e) FALSE)
               cat("deleted", ok, "\n")"#,
        )
        .unwrap();
    assert!(r.succeeded(), "{}", r.observation(6000));
    assert!(r.stdout.contains("patients 100 "), "{}", r.stdout);
    assert!(r.stdout.contains("first_stays 100 "), "{}", r.stdout);
    assert!(r.stdout.contains("deleted FALSE"), "{}", r.stdout);
    drop(conn);
}

/// A run's read-only role left behind by a killed process is dropped when
/// the next run starts; a live run's role (its session holds the advisory
/// lock keyed by the role's name) is kept, whichever database it is on.
#[test]
fn a_killed_runs_role_is_dropped_when_the_next_run_starts_and_a_live_runs_is_kept() {
    let pg = TempPgDatabase::new();
    let exists = |role: &str| -> bool {
        let n: i64 =
            pg.client().query_one("SELECT count(*) FROM pg_roles WHERE rolname = $1", &[&role]).unwrap().get(0);
        n == 1
    };
    // What a killed run leaves: a role named like a run's, valid for a day,
    // whose process (and so its lock) is gone.
    let stale = format!("evident_ro_999999_{}", &pg.name[pg.name.len() - 8..]);
    let live = format!("evident_ro_999998_{}", &pg.name[pg.name.len() - 8..]);
    let mut admin = pg.client();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {stale} LOGIN VALID UNTIL 'infinity'; CREATE ROLE {live} LOGIN VALID UNTIL 'infinity';"
        ))
        .unwrap();
    // A live run in another process: a session holding the role's lock.
    let mut holder = pg.client();
    holder.execute("SELECT pg_advisory_lock(1165388132, hashtext($1))", &[&live]).unwrap();
    let first = ReadOnlyConnection::connect(&pg.url, QueryLimits::default()).unwrap();
    assert!(!exists(&stale), "the killed run's role was not dropped");
    assert!(exists(&live), "a live run's role was dropped");
    // The first run's own role survives a second run starting beside it.
    let DatabaseUrl::Postgres { url } = first.agent_url() else { panic!("a PostgreSQL URL") };
    let first_role = url.split("://").nth(1).unwrap().split(':').next().unwrap().to_string();
    let mut second = ReadOnlyConnection::connect(&pg.url, QueryLimits::default()).unwrap();
    assert!(exists(&first_role), "a second run dropped the first run's role");
    // The live run's process dies: its session ends, the next start drops it.
    drop(holder);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let third = ReadOnlyConnection::connect(&pg.url, QueryLimits::default()).unwrap();
    assert!(!exists(&live), "the role of a run whose process ended was kept");
    assert!(exists(&first_role));
    second.query("SELECT 1").unwrap();
    for conn in [first, second, third] {
        conn.close().unwrap();
    }
    assert!(!exists(&first_role), "close drops the run's role");
    admin.batch_execute(&format!("DROP ROLE IF EXISTS {stale}; DROP ROLE IF EXISTS {live};")).unwrap();
}

/// The bundle's PostgreSQL content hash: two loads of the demo into two
/// databases hash the same; changing one value of one row changes it, and
/// changing it back restores it (the hash reads the content, not where or
/// in what order the rows are stored). A new empty table changes it too.
#[test]
fn the_postgres_content_hash_is_the_same_for_the_same_load_and_changes_with_a_row() {
    let demo = evident_testdata::shared_data().join("mimic-iv-demo");
    let hash = |pg: &TempPgDatabase| {
        let mut conn = ReadOnlyConnection::connect(&pg.url, QueryLimits::default()).unwrap();
        let hash = postgres_content_sha256(&mut conn).unwrap();
        conn.close().unwrap();
        hash
    };
    let (a, b) = (TempPgDatabase::new(), TempPgDatabase::new());
    std::thread::scope(|scope| {
        for pg in [&a, &b] {
            scope.spawn(|| load_mimic(&demo, &pg.url, &mut |_| {}).unwrap());
        }
    });
    let loaded = hash(&a);
    assert_eq!(loaded.len(), 64);
    assert!(loaded.bytes().all(|c| c.is_ascii_hexdigit()), "{loaded}");
    assert_eq!(hash(&b), loaded, "two loads of the same folder");
    let mut client = b.client();
    let one_row = "UPDATE mimiciv_hosp.patients SET anchor_age = anchor_age + 1 \
                   WHERE subject_id = (SELECT min(subject_id) FROM mimiciv_hosp.patients)";
    client.batch_execute(one_row).unwrap();
    let changed = hash(&b);
    assert_ne!(changed, loaded, "one changed value");
    client.batch_execute(&one_row.replace("+ 1", "- 1")).unwrap();
    assert_eq!(hash(&b), loaded, "the value changed back (the row now stored elsewhere)");
    client.batch_execute("CREATE TABLE mimiciv_derived.extra (x integer)").unwrap();
    assert_ne!(hash(&b), loaded, "a new empty table");
}
