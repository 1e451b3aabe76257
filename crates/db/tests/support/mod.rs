//! What the database tests share: the demo folder, the test PostgreSQL
//! server and throwaway databases on it.
//!
//! The server is found at `EVIDENT_TEST_POSTGRES` when set, else at the URL
//! `scripts/setup` writes to `~/.cache/evident/test-postgres-url` when it
//! starts Debian's cluster, else at
//! `postgres://evident:evident@127.0.0.1:5432/evident`. The URL's role must
//! be allowed to create databases and roles (setup makes it a superuser).

#![allow(dead_code)]

use std::path::PathBuf;
use std::str::FromStr;

use evident_db::DatabaseUrl;

pub fn demo_dir() -> PathBuf {
    evident_testdata::shared_data().join("mimic-iv-demo")
}

pub fn admin_url() -> String {
    if let Ok(url) = std::env::var("EVIDENT_TEST_POSTGRES") {
        return url;
    }
    if let Some(home) = std::env::var_os("HOME") {
        let file = PathBuf::from(home).join(".cache/evident/test-postgres-url");
        if let Ok(url) = std::fs::read_to_string(file) {
            return url.trim().to_string();
        }
    }
    "postgres://evident:evident@127.0.0.1:5432/evident".to_string()
}

/// A database created for one test on the test server, dropped with it.
pub struct TempPgDatabase {
    pub name: String,
    pub url: DatabaseUrl,
    admin: String,
}

impl TempPgDatabase {
    pub fn new() -> TempPgDatabase {
        let admin = admin_url();
        let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap_or_else(|e| {
            panic!("the test PostgreSQL server at {admin} does not answer ({e}); run scripts/setup, which starts it, or set EVIDENT_TEST_POSTGRES")
        });
        let name = format!("evident_test_{}_{:08x}", std::process::id(), rand_u32());
        client.batch_execute(&format!("CREATE DATABASE {name}")).expect("create the test database");
        let url = match admin.rfind('/') {
            Some(slash) if admin[..slash].contains('@') || admin[..slash].ends_with(|c: char| c.is_ascii_digit()) => {
                format!("{}/{name}", &admin[..slash])
            }
            _ => panic!("the test URL {admin} must name a database"),
        };
        TempPgDatabase { name, url: DatabaseUrl::from_str(&url).unwrap(), admin }
    }

    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url.expose(), postgres::NoTls).unwrap()
    }
}

impl Drop for TempPgDatabase {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

fn rand_u32() -> u32 {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
    nanos ^ (std::process::id() << 16)
}

/// A MIMIC-IV folder like the demo, whose files link to the demo's, with
/// some files replaced (`Some(csv text)`, gzipped) or removed (`None`);
/// names are relative to the folder, e.g. `hosp/patients.csv.gz`.
pub fn demo_variant(changes: &[(&str, Option<String>)]) -> tempfile::TempDir {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    for module in ["hosp", "icu"] {
        std::fs::create_dir(dir.path().join(module)).unwrap();
        for entry in std::fs::read_dir(demo_dir().join(module)).unwrap() {
            let entry = entry.unwrap();
            let name = format!("{module}/{}", entry.file_name().to_string_lossy());
            let target = dir.path().join(&name);
            match changes.iter().find(|(n, _)| *n == name) {
                None => std::os::unix::fs::symlink(entry.path(), &target).unwrap(),
                Some((_, None)) => {}
                Some((_, Some(text))) => {
                    let file = std::fs::File::create(&target).unwrap();
                    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
                    gz.write_all(text.as_bytes()).unwrap();
                    gz.finish().unwrap();
                }
            }
        }
    }
    dir
}

/// The decompressed text of a demo file, e.g. `hosp/admissions.csv.gz`.
pub fn demo_text(name: &str) -> String {
    use std::io::Read;
    let file = std::fs::File::open(demo_dir().join(name)).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(file).read_to_string(&mut text).unwrap();
    text
}

/// The records of a demo file, read with the csv crate alone (header
/// first), independent of the loader.
pub fn demo_records(name: &str) -> Vec<csv::StringRecord> {
    let text = demo_text(name);
    let mut reader = csv::ReaderBuilder::new().has_headers(false).from_reader(text.as_bytes());
    reader.records().map(|r| r.unwrap()).collect()
}

/// A fresh SQLite URL in `dir`.
pub fn sqlite_url(dir: &std::path::Path) -> DatabaseUrl {
    DatabaseUrl::from_str(&format!("sqlite:{}", dir.join("mimic.db").display())).unwrap()
}
