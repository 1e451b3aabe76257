//! Sandboxed R against PostgreSQL: the demo loaded into a throwaway
//! database on the server scripts/setup starts; R, with no network, reaches
//! it through the server's Unix socket as the run's read-only role, reads
//! the same cohort as from SQLite, and cannot write.

use evident_db::testing::TempPgDatabase;
use evident_db::{load_mimic, QueryLimits, ReadOnlyConnection};
use evident_rwe::database::r_database;
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
