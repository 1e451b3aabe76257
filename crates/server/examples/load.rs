//! Load test of `evident serve` on loopback: a synthetic screening run
//! (`evident_app::synthetic`, default 1,000 patients x 20 criteria, no
//! model) in a fresh store, the server started in this process on a free
//! loopback port, and `--clients` concurrent clients (default 50), each
//! logged in with its own session, sending `--requests` requests each
//! (default 20) to one endpoint at a time, then stopping: the worklist
//! page (twice: first on a fresh server, then with the run's report
//! kept; it shows the first 100 patients), a patient's page, the decisions API (one patient's decisions as
//! JSON), and overrides (POST, written and audited). Every answer must be
//! a success. Prints p50, p99 and the maximum latency, the throughput, and
//! the process's resident memory (current and peak; the clients are
//! threads of the same process and add little).
//!
//! cargo run -p evident-server --example load -- [--patients N] [--criteria N] [--clients N] [--requests N]

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use evident_app::users::{self, AddUser, Role};
use evident_app::{synthetic, Config, Session};

const PASSWORD: &str = "load test password";

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} takes a number")))
        .unwrap_or(default)
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .proxy(None)
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

/// (current, peak) resident memory of this process in MiB.
fn memory() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(f64::NAN)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

struct Client {
    agent: ureq::Agent,
    cookie: String,
    csrf: String,
}

fn login(base: &str, name: &str) -> Client {
    let agent = agent();
    let mut r = agent
        .post(&format!("{base}/api/login"))
        .send_json(serde_json::json!({ "name": name, "password": PASSWORD }))
        .expect("login");
    assert_eq!(r.status(), 200, "login failed");
    let cookie = r.headers().get("set-cookie").unwrap().to_str().unwrap().split(';').next().unwrap().to_string();
    let body: serde_json::Value = r.body_mut().read_json().unwrap();
    Client { agent, cookie, csrf: body["csrf_token"].as_str().unwrap().to_string() }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let patients = arg(&args, "--patients", 1000);
    let criteria = arg(&args, "--criteria", 20);
    let clients = arg(&args, "--clients", 50);
    let requests = arg(&args, "--requests", 20);

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("load.db");
    let session = Session::with_config(&db, Config::default());
    let started = Instant::now();
    let run = synthetic::write_synthetic_run(&session, dir.path(), patients, criteria).unwrap();
    for i in 0..clients {
        let request = AddUser { name: format!("r{i:03}"), role: Role::Reviewer, password: PASSWORD.into() };
        users::add(&session, &request, "load").unwrap();
    }
    drop(session);
    println!(
        "store: {patients} patients x {criteria} criteria, {clients} reviewers, written in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let (tx, rx) = std::sync::mpsc::channel();
    let server_db = db.clone();
    std::thread::spawn(move || {
        let session = Session::with_config(&server_db, Config::default());
        evident_server::serve(session, "127.0.0.1:0".parse().unwrap(), |a| tx.send(a).unwrap()).unwrap();
    });
    let addr = rx.recv().unwrap();
    let base = format!("http://{addr}");
    let logged_in: Vec<Arc<Client>> = (0..clients).map(|i| Arc::new(login(&base, &format!("r{i:03}")))).collect();
    let (rss, _) = memory();
    println!("server on {base}; resident memory after logins {rss:.0} MiB\n");
    println!("| endpoint | requests | p50 ms | p99 ms | max ms | requests/s | KiB per answer | RSS MiB (peak) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");

    let run_id = run.run_id.clone();
    // The worklist twice: first as a fresh server meets it (the first
    // requests wait while the run's report is built once), then as it is
    // served once the report is kept.
    let phases: Vec<(&str, bool)> = vec![
        ("worklist page GET /runs/{run} (first: report built)", false),
        ("worklist page GET /runs/{run} (report kept)", false),
        ("patient page GET /runs/{run}/patients/{p}", false),
        ("decisions API GET /api/runs/{run}/patients/{p}", false),
        ("override POST /api/runs/{run}/patients/{p}/overrides", true),
    ];
    for (phase, (name, post)) in phases.into_iter().enumerate() {
        let barrier = Arc::new(Barrier::new(clients + 1));
        let mut handles = Vec::new();
        for (c, client) in logged_in.iter().enumerate() {
            let (client, barrier, base, run_id) = (client.clone(), barrier.clone(), base.clone(), run_id.clone());
            let patients = run.patients.clone();
            let criteria = run.criteria.clone();
            handles.push(std::thread::spawn(move || {
                barrier.wait();
                let mut times = Vec::with_capacity(requests);
                for r in 0..requests {
                    let p = &patients[(c * requests + r) * 7 % patients.len()];
                    let t = Instant::now();
                    let (status, bytes) = match (phase, post) {
                        (_, true) => {
                            let body = serde_json::json!({
                                "criterion_id": criteria[r % criteria.len()],
                                "decision": "NOT MET",
                                "reason": format!("load test override {c}/{r}"),
                            });
                            let mut a = client
                                .agent
                                .post(&format!("{base}/api/runs/{run_id}/patients/{p}/overrides"))
                                .header("cookie", &client.cookie)
                                .header("x-csrf-token", &client.csrf)
                                .send_json(body)
                                .unwrap();
                            let bytes = a.body_mut().read_to_string().map_or(0, |b| b.len());
                            (a.status().as_u16(), bytes)
                        }
                        (0 | 1, _) => get(&client, &format!("{base}/runs/{run_id}")),
                        (2, _) => get(&client, &format!("{base}/runs/{run_id}/patients/{p}")),
                        _ => get(&client, &format!("{base}/api/runs/{run_id}/patients/{p}")),
                    };
                    times.push((t.elapsed(), bytes));
                    assert!(status == 200 || status == 201, "{phase}: status {status}");
                }
                times
            }));
        }
        barrier.wait();
        let t0 = Instant::now();
        let answers: Vec<(Duration, usize)> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        let wall = t0.elapsed().as_secs_f64();
        let mut times: Vec<Duration> = answers.iter().map(|(t, _)| *t).collect();
        times.sort();
        let kib = answers.iter().map(|(_, b)| *b as f64).sum::<f64>() / answers.len() as f64 / 1024.0;
        let (rss, peak) = memory();
        println!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {kib:.1} | {rss:.0} ({peak:.0}) |",
            times.len(),
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            percentile(&times, 1.0),
            times.len() as f64 / wall,
        );
    }
}

/// The status and the body's length in bytes.
fn get(client: &Client, url: &str) -> (u16, usize) {
    let mut a = client.agent.get(url).header("cookie", &client.cookie).call().unwrap();
    let bytes = a.body_mut().read_to_string().map_or(0, |b| b.len());
    (a.status().as_u16(), bytes)
}
