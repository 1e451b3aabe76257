//! What the study tests share: the scripted fake model, failing like a
//! lost connection when its script runs out, and the MIMIC-IV demo loaded
//! into SQLite.
#![allow(dead_code)]

use std::fs;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use evident_db::{load_mimic, DatabaseUrl};
pub use evident_testdata::Scripted;

/// A scripted model whose exhausted script fails like a lost connection (a
/// killed run).
pub fn scripted<S: AsRef<str>>(answers: &[S]) -> Scripted {
    Scripted::new(answers).failing_when_exhausted()
}

/// The MIMIC-IV demo loaded into SQLite, read-only for the tests, shared by
/// every test process of this build of the test binary.
///
/// nextest runs each test in a process of its own, and a `static` temporary
/// directory is never dropped, so one copy per test (127 MB) used to stay
/// in /tmp. The copy now lives under cargo's target tmp dir, keyed by the
/// test binary's name, size and modification time: a rebuild (a change to
/// the loader included) loads afresh and removes the earlier builds'
/// copies. A process loads into a directory of its own and renames it into
/// place, so concurrent first loads do not see half a database.
pub fn demo_sqlite() -> &'static DatabaseUrl {
    static DB: OnceLock<DatabaseUrl> = OnceLock::new();
    DB.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let meta = fs::metadata(&exe).unwrap();
        let stem = exe.file_stem().unwrap().to_string_lossy().into_owned();
        let built = meta.modified().unwrap().duration_since(UNIX_EPOCH).unwrap().as_nanos();
        let key = format!("{stem}-{:x}-{built:x}", meta.len());
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rwe-demo");
        fs::create_dir_all(&root).unwrap();
        let dir = root.join(&key);
        if !dir.exists() {
            let partial = root.join(format!("{key}.partial-{}", std::process::id()));
            let _ = fs::remove_dir_all(&partial);
            fs::create_dir_all(&partial).unwrap();
            let demo = evident_testdata::shared_data().join("mimic-iv-demo");
            load_mimic(&demo, &url_in(&partial), &mut |_| {}).unwrap();
            if fs::rename(&partial, &dir).is_err() {
                // Another process put its copy in place first.
                fs::remove_dir_all(&partial).unwrap();
            }
            remove_stale(&root, &stem, &key);
        }
        url_in(&dir)
    })
}

fn url_in(dir: &Path) -> DatabaseUrl {
    DatabaseUrl::parse(&format!("sqlite:{}", dir.join("demo.db").display())).unwrap()
}

/// Removes this binary's copies from earlier builds, and partial loads of
/// any binary left for an hour (a killed process).
fn remove_stale(root: &Path, stem: &str, key: &str) {
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    for entry in fs::read_dir(root).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let old = entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| t < hour_ago);
        let earlier_build =
            name.starts_with(&format!("{stem}-")) && !name.starts_with(key) && !name.contains(".partial-");
        if earlier_build || (name.contains(".partial-") && old) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}
