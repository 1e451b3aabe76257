//! A reader that stops early (`evident patients | head -1`) closes the
//! pipe; `evident` then stops quietly, as other Unix tools do, instead of
//! panicking with "failed printing to stdout: Broken pipe".

mod common;

use std::process::Stdio;

use common::{repo_root, Sandbox};

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let sandbox = Sandbox::new();
    let records = repo_root().join("examples/records");
    sandbox.run(&["ingest", records.to_str().unwrap()]).ok();
    for args in [&["patients"][..], &["--json", "patients"][..]] {
        let mut child = sandbox.cmd(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        // Close the reading end before the command prints anything.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(matches!(out.status.code(), Some(0 | 141)), "{args:?}: {:?} {stderr}", out.status);
    }
}
