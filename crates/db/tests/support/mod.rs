//! What the database tests share: the demo folder, variants of it with
//! files changed, and throwaway PostgreSQL databases
//! ([`evident_db::testing`] says where the test server is).

#![allow(dead_code)]

use std::path::PathBuf;
use std::str::FromStr;

use evident_db::DatabaseUrl;

pub fn demo_dir() -> PathBuf {
    evident_testdata::shared_data().join("mimic-iv-demo")
}

pub use evident_db::testing::TempPgDatabase;

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
