//! `evident db load mimic`, `evident db query` and `evident db hash` end to
//! end: the demo loads into SQLite and into PostgreSQL (a database made for
//! the test on the server scripts/setup starts), rows per table are
//! printed, queries read it back, the content hash `db hash` keeps in the
//! store is reused, and bad input exits 2 naming the place and leaves the
//! database as it was.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use common::{shared_data, Sandbox};
use evident_db::testing::TempPgDatabase;

fn demo() -> PathBuf {
    shared_data().join("mimic-iv-demo")
}

/// A copy of the demo folder (links) with admissions replaced by `text`.
fn demo_with_admissions(dir: &Path, text: &str) -> PathBuf {
    let root = dir.join("mimic");
    for module in ["hosp", "icu"] {
        std::fs::create_dir_all(root.join(module)).unwrap();
        for entry in std::fs::read_dir(demo().join(module)).unwrap() {
            let entry = entry.unwrap();
            let target = root.join(module).join(entry.file_name());
            if entry.file_name() == "admissions.csv.gz" {
                let mut gz =
                    flate2::write::GzEncoder::new(std::fs::File::create(&target).unwrap(), flate2::Compression::fast());
                gz.write_all(text.as_bytes()).unwrap();
                gz.finish().unwrap();
            } else {
                std::os::unix::fs::symlink(entry.path(), target).unwrap();
            }
        }
    }
    root
}

fn admissions_text() -> String {
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(demo().join("hosp/admissions.csv.gz")).unwrap()),
        &mut text,
    )
    .unwrap();
    text
}

fn check_loaded(sandbox: &Sandbox, url: &str) {
    let out = sandbox.run(&["db", "query", url, "SELECT count(*) AS n FROM mimiciv_hosp.patients"]).ok().stdout();
    assert_eq!(out, "n\n100\n");
    let out = sandbox
        .run(&[
            "db",
            "query",
            url,
            "SELECT count(*) AS stays, sum(first_icu_stay) AS first FROM mimiciv_derived.icustay_detail",
        ])
        .ok()
        .stdout();
    assert_eq!(out, "stays\tfirst\n140\t128\n");
}

#[test]
fn the_demo_loads_into_sqlite_and_reads_back() {
    let sandbox = Sandbox::new();
    let url = format!("sqlite:{}", sandbox.path().join("mimic.db").display());
    let out = sandbox.run(&["db", "load", "mimic", demo().to_str().unwrap(), "--into", &url]).ok().stdout();
    assert!(out.contains("mimiciv_hosp.labevents") && out.contains("107,727 rows"), "{out}");
    assert!(out.contains("mimiciv_derived.charlson") && out.contains("275 rows"), "{out}");
    assert!(out.contains("note: icu/chartevents.csv.gz is absent"), "{out}");
    assert!(out.contains("loaded 729,638 rows from"), "{out}");
    check_loaded(&sandbox, &url);

    // JSON: the report with every table.
    let db2 = format!("sqlite:{}", sandbox.path().join("again.db").display());
    let json = sandbox.run(&["--json", "db", "load", "mimic", demo().to_str().unwrap(), "--into", &db2]).ok().json();
    assert_eq!(json["tables"].as_array().unwrap().len(), 31);
    assert_eq!(json["rows"], 729638);
    assert!(json["rows_per_second"].as_f64().unwrap() > 0.0);

    // Reading only: a write is refused and exits 2, nothing found exits 1.
    sandbox
        .run(&["db", "query", &url, "DELETE FROM mimiciv_hosp.patients"])
        .fails_with(2, "refused: the database is read-only");
    let none = sandbox.run(&["db", "query", &url, "SELECT * FROM mimiciv_hosp.patients WHERE subject_id = -1"]);
    assert_eq!(none.code(), 1, "{}", none.stderr());
    check_loaded(&sandbox, &url);
}

#[test]
fn the_demo_loads_into_postgresql_and_reads_back() {
    let pg = TempPgDatabase::new();
    let sandbox = Sandbox::new();
    let url = pg.url.expose();
    let out = sandbox.run(&["db", "load", "mimic", demo().to_str().unwrap(), "--into", &url]).ok().stdout();
    assert!(out.contains("mimiciv_icu.icustays") && out.contains("140 rows"), "{out}");
    assert!(!out.contains(":evident@"), "the password is printed: {out}");
    check_loaded(&sandbox, &url);
    let roles: i64 =
        pg.client().query_one("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'evident_ro_%'", &[]).unwrap().get(0);
    assert_eq!(roles, 0, "a query's read-only role outlived it");

    // `db hash` reads every row once and keeps the hash in the store; a
    // study's default (cached) then takes it from there, computed then.
    let full = sandbox.run(&["--json", "db", "hash", &url]).ok().json();
    assert_eq!(
        (full["hash_method"].as_str(), full["hash_from_cache"].as_bool()),
        (Some("postgres-content"), Some(false))
    );
    let cached = sandbox.run(&["--json", "db", "hash", &url, "--method", "cached", "--timeout", "1"]).ok().json();
    assert_eq!(cached["hash_from_cache"], true, "{cached}");
    assert_eq!((&cached["sha256"], &cached["hash_computed_at"]), (&full["sha256"], &full["hash_computed_at"]));
    let text = sandbox.run(&["db", "hash", &url, "--method", "catalogue"]).ok().stdout();
    assert!(text.contains("hash: catalogue only: tables, columns and estimated row counts (not the rows)"), "{text}");
}

#[test]
fn bad_input_exits_2_naming_the_place_and_changes_nothing() {
    let sandbox = Sandbox::new();
    let url = format!("sqlite:{}", sandbox.path().join("mimic.db").display());
    sandbox.run(&["db", "load", "mimic", "nowhere", "--into", &url]).fails_with(2, "nowhere: no such folder");
    sandbox
        .run(&["db", "load", "mimic", demo().to_str().unwrap(), "--into", "mimic.db"])
        .fails_with(2, "for a SQLite file write sqlite:mimic.db");
    sandbox
        .run(&["db", "load", "mimic", demo().to_str().unwrap(), "--into", "postgres://evident:x@127.0.0.1:1/none"])
        .fails_with(2, "cannot connect to postgres://evident:***@127.0.0.1:1/none");

    sandbox.run(&["db", "load", "mimic", demo().to_str().unwrap(), "--into", &url]).ok();
    let text = admissions_text();
    let bad: String = text
        .lines()
        .enumerate()
        .map(|(i, l)| if i == 6 { l.replacen("URGENT", "URGENT,extra", 1) + "\n" } else { format!("{l}\n") })
        .collect();
    let folder = demo_with_admissions(sandbox.path(), &bad);
    sandbox
        .run(&["db", "load", "mimic", folder.to_str().unwrap(), "--into", &url])
        .fails_with(2, "hosp/admissions.csv.gz:7: the row has 17 fields, the header 16");
    check_loaded(&sandbox, &url);
}
