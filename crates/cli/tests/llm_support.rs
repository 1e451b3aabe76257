//! Shared helpers for the model-layer tests of the `evident` binary: the
//! binary's path, and the path of a pulled model (a missing model fails the
//! test with the command that fetches it; CI pulls models before testing).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

pub fn evident() -> Command {
    Command::new(env!("CARGO_BIN_EXE_evident"))
}

/// The GGUF of a known model; panics with the pull command if missing.
pub fn pulled_gguf(name: &str) -> PathBuf {
    let model = evident_llm::models::find_model(name).unwrap_or_else(|| panic!("{name} is not a known model"));
    let path = model.gguf_path().expect("a chat model");
    assert!(path.is_file(), "model {name} is missing ({}); run `evident models pull {name}` first", path.display());
    path
}

/// A fresh temporary directory with an `evident.db` path in it.
pub fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("evident.db");
    (dir, db)
}

/// Runs the binary; returns (exit code, stdout, stderr).
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("run evident");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
