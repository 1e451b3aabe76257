//! The R sandbox against real bubblewrap and R: agent R reads the study
//! database through the ready connection script, and cannot write to it,
//! open a network socket, read outside its view, write outside its
//! workspace, or outrun its time and memory limits.

use std::path::{Path, PathBuf};
use std::time::Duration;

use evident_rwe::sandbox::{RDatabase, SandboxConfig, Workspace};

/// A SQLite main file and one attached schema file with a patients table,
/// in rollback-journal mode so read-only mounts can open it.
fn fixture_database(dir: &Path) -> RDatabase {
    let main = dir.join("study.sqlite");
    let hosp = dir.join("study.mimiciv_hosp.sqlite");
    rusqlite::Connection::open(&main).unwrap().execute_batch("CREATE TABLE meta (k TEXT);").unwrap();
    let c = rusqlite::Connection::open(&hosp).unwrap();
    c.execute_batch(
        "CREATE TABLE patients (subject_id INTEGER PRIMARY KEY, gender TEXT);
         INSERT INTO patients VALUES (10000032, 'F'), (10001217, 'F'), (10002428, 'M');",
    )
    .unwrap();
    RDatabase::Sqlite { main, attach: vec![("mimiciv_hosp".into(), hosp)] }
}

struct Setup {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    outside: PathBuf,
    workspace: Workspace,
}

fn setup() -> Setup {
    let data = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let aux = data.path().join("icd_codes.csv");
    std::fs::write(&aux, "code\nI48\n").unwrap();
    let outside = data.path().join("secret.txt");
    std::fs::write(&outside, "not for the agent").unwrap();
    let workspace = Workspace::create(&work.path().join("ws"), fixture_database(data.path()), &[aux]).unwrap();
    Setup { _dirs: (data, work), outside, workspace }
}

fn config() -> SandboxConfig {
    SandboxConfig { wall_time: Duration::from_secs(60), ..SandboxConfig::default() }
}

fn run(s: &Setup, code: &str) -> evident_rwe::sandbox::RRun {
    s.workspace.run_code(&config(), "step", code).unwrap()
}

#[test]
fn r_reads_the_database_and_the_workspace() {
    let s = setup();
    let r = run(
        &s,
        r#"source("db_connect.R")
           print(dbGetQuery(con, "SELECT count(*) AS n FROM mimiciv_hosp.patients")$n)
           print(read.csv("icd_codes.csv")$code)
           writeLines("cohort", "cohort_audit.csv")"#,
    );
    assert!(r.succeeded(), "{}", r.observation(4000));
    assert!(r.stdout.contains("[1] 3") && r.stdout.contains("I48"), "{}", r.stdout);
    assert_eq!(std::fs::read_to_string(s.workspace.root().join("cohort_audit.csv")).unwrap(), "cohort\n");
}

#[test]
fn r_cannot_write_the_database() {
    let s = setup();
    for sql in [
        "INSERT INTO mimiciv_hosp.patients VALUES (1, 'M')",
        "DELETE FROM mimiciv_hosp.patients",
        "DROP TABLE mimiciv_hosp.patients",
        "CREATE TABLE made_up (x INTEGER)",
    ] {
        let r = run(&s, &format!("source(\"db_connect.R\")\ndbExecute(con, \"{sql}\")"));
        assert!(!r.succeeded(), "{sql} succeeded: {}", r.stdout);
        assert!(r.stderr.contains("readonly") || r.stderr.contains("read-only"), "{sql}: {}", r.stderr);
    }
    let hosp = match s.workspace.database() {
        RDatabase::Sqlite { attach, .. } => attach[0].1.clone(),
        RDatabase::Postgres { .. } => unreachable!(),
    };
    let n: i64 = rusqlite::Connection::open(hosp)
        .unwrap()
        .query_row("SELECT count(*) FROM patients", [], |row| row.get(0))
        .unwrap();
    assert_eq!(n, 3);
}

#[test]
fn r_cannot_open_a_network_socket() {
    let s = setup();
    // A server the host can reach: the sandbox's network namespace cannot.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        r#"ok <- tryCatch({{ s <- socketConnection("127.0.0.1", {port}, blocking = TRUE, timeout = 3); close(s); TRUE }},
                      error = function(e) FALSE, warning = function(w) FALSE)
           cat("connected:", ok, "\n")
           ok2 <- tryCatch({{ u <- url("http://example.com"); open(u); TRUE }}, error = function(e) FALSE, warning = function(w) FALSE)
           cat("http:", ok2, "\n")"#
    );
    let r = run(&s, &code);
    assert!(r.succeeded(), "{}", r.observation(4000));
    assert!(r.stdout.contains("connected: FALSE"), "{}", r.stdout);
    assert!(r.stdout.contains("http: FALSE"), "{}", r.stdout);
    // The control: the same code outside the sandbox reaches the listener.
    let plain = std::process::Command::new("Rscript").args(["--vanilla", "-e", &code]).output().unwrap();
    assert!(String::from_utf8_lossy(&plain.stdout).contains("connected: TRUE"), "{plain:?}");
    drop(listener);
}

#[test]
fn r_cannot_read_outside_its_view() {
    let s = setup();
    let shared = evident_testdata::shared_data().join("mimic-iv-demo").join("hosp").join("patients.csv.gz");
    assert!(shared.is_file());
    let home_store = dirs_home().join(".cache");
    let code = format!(
        r#"for (p in c("{}", "{}", "/root", "{}", "/etc/shadow", "/work")) cat(p, file.exists(p), "\n")"#,
        s.outside.display(),
        shared.display(),
        home_store.display()
    );
    let r = run(&s, &code);
    assert!(r.succeeded(), "{}", r.observation(4000));
    for line in r.stdout.lines() {
        assert!(line.trim_end().ends_with("FALSE"), "visible inside the sandbox: {line}");
    }
    assert_eq!(r.stdout.lines().count(), 6, "{}", r.stdout);
}

fn dirs_home() -> PathBuf {
    PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()))
}

#[test]
fn r_cannot_write_outside_its_workspace() {
    let s = setup();
    let marker = format!("evident_rwe_marker_{}", std::process::id());
    let code = format!(
        r#"try_write <- function(p) tryCatch({{ suppressWarnings(writeLines("x", p)); TRUE }}, error = function(e) FALSE)
           for (p in c("/usr/evil.txt", "/data/evil.txt", "/etc/R/evil", "{outside}", "/evil.txt"))
             cat(p, try_write(p), "\n")
           cat("tmp", try_write("/tmp/{marker}"), "\n")"#,
        outside = s.outside.with_file_name("evil.txt").display()
    );
    let r = run(&s, &code);
    assert!(r.succeeded(), "{}", r.observation(4000));
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{}", r.stdout);
    for line in &lines[..5] {
        assert!(line.trim_end().ends_with("FALSE"), "written outside the workspace: {line}");
    }
    // /tmp is writable but private to the call.
    assert!(lines[5].trim_end().ends_with("TRUE"), "{}", r.stdout);
    assert!(!Path::new("/tmp").join(&marker).exists());
    assert!(!s.outside.with_file_name("evil.txt").exists());
}

#[test]
fn limits_stop_runaway_code() {
    let s = setup();
    let quick = SandboxConfig { wall_time: Duration::from_secs(2), ..config() };
    let r = s.workspace.run_code(&quick, "sleep", "Sys.sleep(30)").unwrap();
    assert!(r.timed_out, "{r:?}");
    assert!(r.elapsed_ms < 10_000, "{}", r.elapsed_ms);
    assert!(r.observation(1000).starts_with("The R code was stopped"));
    let small = SandboxConfig { memory_bytes: 1 << 30, ..config() };
    let r = s.workspace.run_code(&small, "big", "x <- numeric(4e8); cat(length(x))").unwrap();
    assert!(!r.succeeded(), "{r:?}");
    assert!(r.stderr.contains("cannot allocate"), "{}", r.stderr);
}

#[test]
fn observations_are_cut_at_ten_thousand_characters() {
    let s = setup();
    let r = run(&s, "cat(strrep(\"a\", 25000))");
    assert!(r.succeeded());
    let obs = r.observation(10_000);
    assert!(obs.contains("[... cut at 10000 characters of"), "{}", &obs[obs.len() - 80..]);
    assert_eq!(obs.split("\n[... cut").next().unwrap().chars().count(), 10_000);
}
