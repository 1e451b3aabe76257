//! `evident users` and `evident serve` as a user runs them: an account
//! added with the password on stdin (and refused for a short password, a
//! taken name or an unknown role, exit 2), a non-loopback bind refused
//! without the opt-in (exit 2, nothing served), and a server on a loopback
//! port that answers its login page and refuses the API without a session.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

fn evident(db: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_evident"))
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

fn http_get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn users_add_reads_the_password_from_stdin_and_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("evident.db");
    let (code, out, err) = evident(&db, &["users", "add", "rita", "--role", "reviewer"], "correct horse battery\n");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "added user rita (reviewer)");
    let (code, out, _) = evident(&db, &["--json", "users", "list"], "");
    assert_eq!(code, 0);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((list[0]["name"].as_str(), list[0]["role"].as_str()), (Some("rita"), Some("reviewer")));
    assert!(!out.contains("argon2"), "the hash is never printed: {out}");

    let (code, _, err) = evident(&db, &["users", "add", "rita", "--role", "viewer"], "another long one\n");
    assert_eq!(code, 2);
    assert!(err.contains("a user named \"rita\" exists already"), "{err}");
    let (code, _, err) = evident(&db, &["users", "add", "bob", "--role", "viewer"], "short\n");
    assert_eq!(code, 2);
    assert!(err.contains("at least 8 characters"), "{err}");
    let (code, _, err) = evident(&db, &["users", "add", "bob", "--role", "root"], "long enough pw\n");
    assert_eq!(code, 2);
    assert!(err.contains("role \"root\" is not known"), "{err}");
    let (_, out, _) = evident(&db, &["--json", "users", "list"], "");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&out).unwrap().as_array().unwrap().len(), 1);
}

#[test]
fn serve_refuses_a_remote_bind_and_serves_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("evident.db");
    let (code, _, err) = evident(&db, &["serve", "--bind", "0.0.0.0:0"], "");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a loopback address"), "{err}");

    let mut child = Command::new(env!("CARGO_BIN_EXE_evident"))
        .arg("--db")
        .arg(&db)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
    let addr =
        line.split("http://").nth(1).and_then(|s| s.split('/').next()).unwrap_or_else(|| panic!("{line}")).to_string();
    let login = http_get(&addr, "/login");
    let api = http_get(&addr, "/api/patients");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(login.starts_with("HTTP/1.1 200"), "{login}");
    assert!(login.contains("content-security-policy: default-src 'self'"), "{login}");
    assert!(login.contains("id=\"login-form\""));
    assert!(api.starts_with("HTTP/1.1 401"), "{api}");
}

#[test]
fn serve_refuses_unusable_tls_files_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("evident.db");
    let cert = dir.path().join("cert.pem");
    std::fs::write(&cert, "not a certificate\n").unwrap();
    let key = dir.path().join("missing-key.pem");
    let (code, _, err) =
        evident(&db, &["serve", "--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()], "");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("--tls-cert {}: holds no certificate", cert.display())), "{err}");
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").unwrap();
    let (code, _, err) =
        evident(&db, &["serve", "--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()], "");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("--tls-key {}: cannot read it", key.display())), "{err}");
    // One flag without the other is a usage error.
    let (code, _, err) = evident(&db, &["serve", "--tls-cert", cert.to_str().unwrap()], "");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--tls-key"), "{err}");
}
