//! A MIMIC-IV folder with a missing or malformed table is refused with the
//! file, the line and what to do, and the target database is left exactly
//! as it was, on both backends.

mod support;

use evident_db::{load_mimic, DatabaseUrl, DbError, QueryLimits, ReadOnlyConnection, Value};
use support::{demo_dir, demo_text, demo_variant, sqlite_url, TempPgDatabase};

fn load_error(dir: &std::path::Path, url: &DatabaseUrl) -> DbError {
    load_mimic(dir, url, &mut |_| {}).expect_err("the load must fail")
}

fn patients(url: &DatabaseUrl) -> i64 {
    let mut conn = ReadOnlyConnection::connect(url, QueryLimits::default()).unwrap();
    let n = match conn.query("SELECT count(*) FROM mimiciv_hosp.patients").unwrap().rows[0][0] {
        Value::Integer(n) => n,
        ref v => panic!("{v:?}"),
    };
    conn.close().unwrap();
    n
}

/// The demo's admissions with line `line` (1-based, header = 1) changed.
fn admissions_with(line: usize, change: impl Fn(&str) -> String) -> String {
    let text = demo_text("hosp/admissions.csv.gz");
    text.lines()
        .enumerate()
        .map(|(i, l)| if i + 1 == line { change(l) } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn a_missing_table_is_named_with_what_to_do() {
    let folder = demo_variant(&[("hosp/patients.csv.gz", None), ("icu/icustays.csv.gz", None)]);
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(dir.path());
    let err = load_error(folder.path(), &url);
    assert!(err.is_input());
    let text = err.to_string();
    assert!(text.contains("hosp/patients.csv.gz") && text.contains("icu/icustays.csv.gz"), "{text}");
    assert!(text.contains("2 required table file(s)") && text.contains("re-download"), "{text}");
    assert!(!url.sqlite_path().unwrap().exists(), "nothing is written for a refused folder");

    let text = load_error(&dir.path().join("nowhere"), &url).to_string();
    assert!(text.contains("no such folder"), "{text}");
    let text = load_error(&demo_dir().join("hosp"), &url).to_string();
    assert!(text.contains("has no hosp/ folder"), "{text}");
}

#[test]
fn a_malformed_row_names_its_file_and_line_and_the_sqlite_database_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(dir.path());
    load_mimic(&demo_dir(), &url, &mut |_| {}).unwrap();
    let before: Vec<(String, Vec<u8>)> = files(dir.path());

    // A subject_id that is not a number on line 7 of admissions.
    let folder = demo_variant(&[("hosp/admissions.csv.gz", Some(admissions_with(7, |l| l.replacen(',', "x,", 1))))]);
    let err = load_error(folder.path(), &url);
    let DbError::Input { path, line, message } = &err else { panic!("{err:?}") };
    assert!(path.ends_with("hosp/admissions.csv.gz"), "{path:?}");
    assert_eq!(*line, Some(7));
    assert!(message.contains("column subject_id") && message.contains("is not an integer"), "{message}");
    assert!(err.to_string().contains("admissions.csv.gz:7: column subject_id"), "{err}");
    assert_eq!(files(dir.path()), before, "the database files changed after a failed load");

    // A row with a field too many, in a table loaded late (after most
    // others were written into the new files).
    let text = demo_text("icu/procedureevents.csv.gz");
    let bad: String = text
        .lines()
        .enumerate()
        .map(|(i, l)| if i == 99 { format!("{l},extra\n") } else { format!("{l}\n") })
        .collect();
    let folder = demo_variant(&[("icu/procedureevents.csv.gz", Some(bad))]);
    let err = load_error(folder.path(), &url);
    assert!(err.to_string().contains("procedureevents.csv.gz:100: the row has 23 fields, the header 22"), "{err}");
    assert_eq!(files(dir.path()), before);

    // A header without a required column.
    let folder =
        demo_variant(&[("hosp/admissions.csv.gz", Some(admissions_with(1, |l| l.replace("hadm_id", "hadm"))))]);
    let err = load_error(folder.path(), &url);
    assert!(err.to_string().contains("admissions.csv.gz:1: the header lacks required column(s) hadm_id"), "{err}");
    assert_eq!(files(dir.path()), before);
    assert_eq!(patients(&url), 100);
}

#[test]
fn a_file_evident_did_not_load_is_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mimic.db");
    rusqlite::Connection::open(&path).unwrap().execute_batch("CREATE TABLE mine (x)").unwrap();
    let url = sqlite_url(dir.path());
    let err = load_error(&demo_dir(), &url);
    assert!(err.is_input());
    assert!(err.to_string().contains("not a database Evident loaded"), "{err}");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.query_row("SELECT count(*) FROM mine", [], |_| Ok(())).unwrap();
}

#[test]
fn a_failed_postgresql_load_rolls_back_and_names_the_duplicate_line() {
    let pg = TempPgDatabase::new();
    load_mimic(&demo_dir(), &pg.url, &mut |_| {}).unwrap();
    pg.client().batch_execute("CREATE TABLE public.keep_me (x int); INSERT INTO public.keep_me VALUES (1)").unwrap();

    // Line 12 repeats line 11: admissions' primary key hadm_id repeats.
    let text = demo_text("hosp/admissions.csv.gz");
    let lines: Vec<&str> = text.lines().collect();
    let mut changed: Vec<&str> = lines.clone();
    changed[11] = lines[10];
    let folder = demo_variant(&[("hosp/admissions.csv.gz", Some(changed.join("\n") + "\n"))]);
    let err = load_error(folder.path(), &pg.url);
    let DbError::Input { path, line, message } = &err else { panic!("{err:?}") };
    assert!(path.ends_with("hosp/admissions.csv.gz"));
    assert_eq!(*line, Some(12), "{message}");
    assert!(message.contains("duplicate key") && message.contains("primary key hadm_id"), "{message}");
    assert_eq!(patients(&pg.url), 100, "the earlier load is still there");
    let kept: i64 = pg.client().query_one("SELECT count(*) FROM public.keep_me", &[]).unwrap().get(0);
    assert_eq!(kept, 1);

    // A malformed row in a table loaded after many others.
    let text = demo_text("icu/icustays.csv.gz");
    let bad: String =
        text.lines().enumerate().map(|(i, l)| if i == 49 { l.replace(",2", ",x2") } else { l.into() } + "\n").collect();
    let folder = demo_variant(&[("icu/icustays.csv.gz", Some(bad))]);
    let err = load_error(folder.path(), &pg.url);
    assert!(err.is_input(), "{err}");
    assert!(err.to_string().contains("icustays.csv.gz:50: column"), "{err}");
    assert_eq!(patients(&pg.url), 100);
}

#[test]
fn a_server_that_does_not_answer_is_a_connect_error() {
    let url = DatabaseUrl::parse("postgres://evident:wrong@127.0.0.1:1/nothing").unwrap();
    let err = load_error(&demo_dir(), &url);
    assert!(matches!(err, DbError::Connect { .. }), "{err:?}");
    assert!(err.to_string().contains("check that the server is running"), "{err}");
    assert!(!err.to_string().contains("wrong"), "password leaked: {err}");
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
