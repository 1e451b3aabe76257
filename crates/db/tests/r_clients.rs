//! R reaches a loaded database the way the study sandbox's connection
//! script does (DBI with RSQLite, or RPostgreSQL as the run's read-only
//! role), reads the official schemas, and cannot write. R with DBI,
//! RSQLite and RPostgreSQL must be installed (scripts/setup installs them);
//! a missing R fails the test.

mod support;

use std::process::Command;

use evident_db::{load_mimic, QueryLimits, ReadOnlyConnection};
use support::{demo_dir, sqlite_url, TempPgDatabase};

/// Runs an R script; returns (success, stdout, stderr).
fn r(script: &str) -> (bool, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("script.R");
    std::fs::write(&path, script).unwrap();
    let out = Command::new("Rscript").arg("--vanilla").arg(&path).output().expect("Rscript must be installed");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn r_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

#[test]
fn r_reads_the_sqlite_layout_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(dir.path());
    load_mimic(&demo_dir(), &url, &mut |_| {}).unwrap();
    let main = url.sqlite_path().unwrap();
    let attach: String = evident_db::sqlite::attached_schemas(main)
        .unwrap()
        .iter()
        .map(|(schema, file)| {
            format!(
                "invisible(DBI::dbExecute(con, paste0('ATTACH DATABASE ', {}, ' AS {schema}')))\n",
                r_string(&format!("'{}'", file.display()))
            )
        })
        .collect();
    let script = format!(
        "con <- DBI::dbConnect(RSQLite::SQLite(), {}, flags = RSQLite::SQLITE_RO)\n{attach}\
         cat(DBI::dbGetQuery(con, 'SELECT count(*) AS n FROM mimiciv_hosp.patients JOIN mimiciv_derived.age USING (subject_id)')$n, '\\n')\n\
         r <- tryCatch(DBI::dbExecute(con, 'DELETE FROM mimiciv_hosp.patients'), error = function(e) 'refused')\n\
         cat(r, '\\n')\n",
        r_string(&main.display().to_string())
    );
    let (ok, out, err) = r(&script);
    assert!(ok, "R failed: {err}");
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["275", "refused"], "{err}");
}

#[test]
fn r_reads_postgresql_as_the_runs_role_and_cannot_write() {
    let pg = TempPgDatabase::new();
    load_mimic(&demo_dir(), &pg.url, &mut |_| {}).unwrap();
    let conn = ReadOnlyConnection::connect(&pg.url, QueryLimits::default()).unwrap();
    let p = conn.agent_url().postgres_params().unwrap();
    assert!(p.user.starts_with("evident_ro_"));
    let script = format!(
        "con <- DBI::dbConnect(RPostgreSQL::PostgreSQL(), host = {}, port = {}, user = {}, password = {}, dbname = {})\n\
         cat(DBI::dbGetQuery(con, 'SELECT count(*) AS n FROM mimiciv_icu.icustays')$n, '\\n')\n\
         r <- tryCatch(DBI::dbExecute(con, 'DELETE FROM mimiciv_hosp.patients'), error = function(e) 'refused')\n\
         cat(r, '\\n')\n\
         r <- tryCatch(DBI::dbExecute(con, 'SET default_transaction_read_only = off'), error = function(e) 'refused')\n\
         r <- tryCatch(DBI::dbExecute(con, 'UPDATE mimiciv_hosp.patients SET anchor_age = 0'), error = function(e) 'refused')\n\
         cat(r, '\\n')\n",
        r_string(&p.host),
        p.port,
        r_string(&p.user),
        r_string(&p.password),
        r_string(&p.dbname)
    );
    let (ok, out, err) = r(&script);
    assert!(ok, "R failed: {err}");
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["140", "refused", "refused"], "{err}");
    conn.close().unwrap();
    let ages: i64 =
        pg.client().query_one("SELECT count(*) FROM mimiciv_hosp.patients WHERE anchor_age = 0", &[]).unwrap().get(0);
    assert_eq!(ages, 0);
}
