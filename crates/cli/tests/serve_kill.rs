//! `evident serve` killed under load: eight reviewers send overrides at
//! once (each with a reason naming it uniquely), the server is killed with
//! SIGKILL while they do, and then every override the server acknowledged
//! (201) is in the store and in the audit trail exactly once; the server
//! starts again on the same store and serves them (no request is doubled
//! by the crash; an override in flight when the server died may or may not
//! be stored, and is then stored once).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use evident_app::users::{self, AddUser, Role};
use evident_app::{synthetic, Config, Session};
use evident_store::Store;

const PASSWORD: &str = "correct horse battery";
const CLIENTS: usize = 8;

/// One HTTP/1.1 request on its own connection: (status, headers and body).
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, answer))
}

fn serve(db: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_evident"))
        .arg("--db")
        .arg(db)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("http://") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the server ended before listening");
    }
    let addr = line.split("http://").nth(1).and_then(|s| s.split('/').next()).unwrap().to_string();
    // Keep reading stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    (child, addr)
}

/// Logs in; returns the cookie and the CSRF token.
fn login(addr: &str, name: &str) -> (String, String) {
    let body = serde_json::json!({ "name": name, "password": PASSWORD }).to_string();
    let (status, answer) = http(addr, "POST", "/api/login", &[("Content-Type", "application/json")], &body).unwrap();
    assert_eq!(status, 200, "{answer}");
    let cookie = answer
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_string();
    let json: serde_json::Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    (cookie, json["csrf_token"].as_str().unwrap().to_string())
}

#[test]
fn every_acknowledged_override_survives_a_sigkill_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("evident.db");
    let session = Session::with_config(&db, Config::default());
    let run = synthetic::write_synthetic_run(&session, dir.path(), 30, 5).unwrap();
    for i in 0..CLIENTS {
        let request = AddUser { name: format!("r{i}"), role: Role::Reviewer, password: PASSWORD.into() };
        users::add(&session, &request, "test").unwrap();
    }
    drop(session);

    let (mut server, addr) = serve(&db);
    let sessions: Vec<(String, String)> = (0..CLIENTS).map(|i| login(&addr, &format!("r{i}"))).collect();
    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let acks = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for (c, (cookie, csrf)) in sessions.into_iter().enumerate() {
        let (addr, run, acknowledged, acks, stop) =
            (addr.clone(), run.clone(), acknowledged.clone(), acks.clone(), stop.clone());
        clients.push(std::thread::spawn(move || {
            for n in 0.. {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let patient = &run.patients[(c * 7 + n) % run.patients.len()];
                let reason = format!("kill test client {c} request {n}");
                let body = serde_json::json!({
                    "criterion_id": run.criteria[n % run.criteria.len()],
                    "decision": if n % 2 == 0 { "NOT MET" } else { "MET" },
                    "reason": reason,
                })
                .to_string();
                let path = format!("/api/runs/{}/patients/{patient}/overrides", run.run_id);
                let headers = [
                    ("Content-Type", "application/json"),
                    ("Cookie", cookie.as_str()),
                    ("X-CSRF-Token", csrf.as_str()),
                ];
                match http(&addr, "POST", &path, &headers, &body) {
                    Ok((201, _)) => {
                        acknowledged.lock().unwrap().push(reason);
                        acks.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok((0, _)) | Err(_) => break, // the server is gone
                    Ok((status, answer)) => panic!("override refused with {status}: {answer}"),
                }
            }
        }));
    }
    let started = Instant::now();
    while acks.load(Ordering::SeqCst) < 200 {
        assert!(started.elapsed() < Duration::from_secs(120), "the server acknowledged too few overrides");
        std::thread::sleep(Duration::from_millis(5));
    }
    server.kill().unwrap(); // SIGKILL
    server.wait().unwrap();
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= 200);

    // The store after the crash: every acknowledged override once, with its audit entry once.
    let store = Store::open(&db).unwrap();
    let mut in_overrides: BTreeMap<String, usize> = BTreeMap::new();
    for o in store.overrides(&run.run_id, None).unwrap() {
        *in_overrides.entry(o.reason).or_default() += 1;
    }
    let mut in_audit: BTreeMap<String, usize> = BTreeMap::new();
    for a in store.audit_log().unwrap().into_iter().filter(|a| a.action == "override") {
        *in_audit.entry(a.reason).or_default() += 1;
    }
    drop(store);
    for reason in &acknowledged {
        assert_eq!(in_overrides.get(reason), Some(&1), "{reason} in the overrides");
        assert_eq!(in_audit.get(reason), Some(&1), "{reason} in the audit trail");
    }
    assert!(in_overrides.values().all(|&n| n == 1), "an override is doubled");
    assert_eq!(in_overrides.keys().collect::<Vec<_>>(), in_audit.keys().collect::<Vec<_>>(), "override without audit");
    assert!(in_overrides.len() <= acknowledged.len() + CLIENTS, "more stored than sent");

    // The server starts again on the same store and serves them.
    let (mut again, addr) = serve(&db);
    let (cookie, _) = login(&addr, "r0");
    let (status, answer) = http(&addr, "GET", "/api/audit", &[("Cookie", cookie.as_str())], "").unwrap();
    again.kill().unwrap();
    again.wait().unwrap();
    assert_eq!(status, 200, "{answer}");
    let audit: serde_json::Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let served = audit.as_array().unwrap().iter().filter(|a| a["action"] == "override").count();
    assert_eq!(served, in_audit.len());
}
