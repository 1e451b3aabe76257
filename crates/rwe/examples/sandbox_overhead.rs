//! Measures the R sandbox's start-up overhead per call: the wall time of a
//! trivial R script (`cat(1)`) run plainly with `Rscript --vanilla` and
//! through the sandbox (prlimit + bubblewrap); and, in the sandbox only
//! (outside it `/data` does not exist), a script that sources the DBI
//! connection script and runs one query. Prints the median and range over
//! N calls.
//!
//! cargo run --release -p evident-rwe --example sandbox_overhead -- [N]

use std::process::Command;
use std::time::Instant;

use evident_rwe::sandbox::{RDatabase, SandboxConfig, Workspace};

fn stats(mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    format!("median {:.0} ms (min {:.0}, max {:.0})", ms[ms.len() / 2], ms[0], ms[ms.len() - 1])
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("bench.sqlite");
    rusqlite::Connection::open(&main)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
        .unwrap();
    let ws = Workspace::create(&dir.path().join("ws"), RDatabase::Sqlite { main, attach: vec![] }, &[]).unwrap();
    let config = SandboxConfig::default();
    std::fs::write(ws.root().join("trivial.R"), "cat(1)\n").unwrap();
    std::fs::write(
        ws.root().join("query.R"),
        "source(\"db_connect.R\"); cat(dbGetQuery(con, \"SELECT x FROM t\")$x)\n",
    )
    .unwrap();
    let mut plain = Vec::new();
    let mut boxed = Vec::new();
    let mut query = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let out = Command::new("Rscript").arg("--vanilla").arg("trivial.R").current_dir(ws.root()).output().unwrap();
        plain.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(out.status.success());
        for (script, times) in [("trivial.R", &mut boxed), ("query.R", &mut query)] {
            let t = Instant::now();
            let r = ws.run_script(&config, script).unwrap();
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(r.succeeded(), "{}", r.observation(2000));
        }
    }
    println!("cat(1): plain Rscript {}; sandboxed {}", stats(plain), stats(boxed));
    println!("source(db_connect.R) + one query, sandboxed: {}", stats(query));
}
