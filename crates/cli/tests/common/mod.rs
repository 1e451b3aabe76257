//! Helpers for tests that drive the `evident` binary as a user would: a
//! temporary working folder with its own store, and the shared real data.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `../shared/data` beside the repository. Tests that need it fail, not
/// skip, when it is missing.
pub fn shared_data() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    assert!(
        path.join("README.md").is_file(),
        "the shared data folder {} is missing: these tests read real data from ../shared/data beside the repository",
        path.display()
    );
    path.canonicalize().unwrap()
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A temporary folder with a store path; commands run inside it.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox { dir: tempfile::tempdir().unwrap() }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("evident.db")
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_evident"));
        cmd.current_dir(self.dir.path()).env("EVIDENT_DB", self.db()).env_remove("EVIDENT_CONFIG").args(args);
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Run {
        Run(self.cmd(args).output().expect("the evident binary runs"))
    }

    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, contents).unwrap();
        path
    }

    /// Counts rows of the store directly (not through the binary), to check
    /// what a command left behind.
    pub fn counts(&self) -> evident_store::StoreCounts {
        evident_store::Store::open(&self.db()).unwrap().counts().unwrap()
    }

    pub fn store(&self) -> evident_store::Store {
        evident_store::Store::open(&self.db()).unwrap()
    }
}

pub struct Run(pub Output);

impl Run {
    pub fn code(&self) -> i32 {
        self.0.status.code().expect("exited normally")
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.0.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}\nstderr:\n{}", self.stdout(), self.stderr()))
    }
    #[track_caller]
    pub fn ok(self) -> Run {
        assert_eq!(self.code(), 0, "expected success\nstdout:\n{}\nstderr:\n{}", self.stdout(), self.stderr());
        self
    }
    #[track_caller]
    pub fn fails_with(self, code: i32, message: &str) -> Run {
        assert_eq!(self.code(), code, "expected exit {code}\nstdout:\n{}\nstderr:\n{}", self.stdout(), self.stderr());
        let all = format!("{}{}", self.stdout(), self.stderr());
        assert!(
            all.contains(message),
            "expected the output to contain {message:?}\nstdout:\n{}\nstderr:\n{}",
            self.stdout(),
            self.stderr()
        );
        self
    }
}

/// Serves OpenAI-compatible chat completions on 127.0.0.1 until the test
/// process ends, so a test needs no real model: `choice` turns each request
/// (its JSON body) into the response's `choices[0]` (the message and, where
/// the test wants them, log-probabilities). Returns the base URL.
pub fn scripted_endpoint(choice: impl Fn(&serde_json::Value) -> serde_json::Value + Send + 'static) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0u8; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let response = serde_json::json!({
                "model": "scripted",
                "choices": [choice(&request)],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            })
            .to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{response}",
                response.len()
            );
        }
    });
    url
}
