//! `evident llm serve` with a real small model (gemma3-270m), used by a
//! plain HTTP client and by the OpenAI-compatible provider: concurrency
//! bound, several endpoints, timeout, retry on an injected 503 (a small
//! real proxy in this file injects it), and the privacy guard.

#[path = "llm_support.rs"]
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use evident_llm::providers::openai_compat::{OpenAiChatModel, OpenAiConfig};
use evident_llm::{ChatModel, ChatRequest, LlmError, Message};
use serde_json::{json, Value};

const MODEL: &str = "gemma3-270m";

struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(extra: &[&str]) -> Server {
    support::pulled_gguf(MODEL);
    let mut child = support::evident()
        .args(["llm", "serve", "--port", "0", "--model", MODEL, "--workers", "6"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start evident llm serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .and_then(|s| s.strip_suffix("/v1"))
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    Server { child, addr }
}

/// A plain HTTP/1.1 exchange over a socket: (status, body).
fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let status: u16 = raw.split(' ').nth(1).unwrap().parse().unwrap();
    let (_, payload) = raw.split_once("\r\n\r\n").unwrap();
    (status, serde_json::from_str(payload).unwrap_or(Value::Null))
}

/// Reads one HTTP request (headers + Content-Length body) from `stream`.
fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let length: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())).unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).ok()?;
    // Forwarded upstream with the connection closed after one exchange.
    let head = String::from_utf8_lossy(&buf).replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
    let head: String = head
        .lines()
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection: keep"))
        .map(|l| format!("{l}\r\n"))
        .collect();
    let mut out = head.trim_end().as_bytes().to_vec();
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(&body);
    Some(out)
}

/// A forwarding proxy that answers the first `fail_first` requests with
/// 503 + `Retry-After: 0` and counts requests (and, through the counters
/// it is given, the most in flight).
struct Proxy {
    addr: String,
    requests: Arc<AtomicUsize>,
}

fn proxy(upstream: &str, fail_first: usize) -> Proxy {
    proxy_sharing(upstream, fail_first, Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)))
}

/// A proxy whose in-flight count (and its maximum) is shared with others.
fn proxy_sharing(
    upstream: &str,
    fail_first: usize,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: Arc<AtomicUsize>,
) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let requests = Arc::new(AtomicUsize::new(0));
    let upstream = upstream.to_string();
    let (r, f, m) = (requests.clone(), in_flight.clone(), max_in_flight.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (r, f, m, upstream) = (r.clone(), f.clone(), m.clone(), upstream.clone());
            std::thread::spawn(move || {
                while let Some(request) = read_request(&mut stream) {
                    let n = r.fetch_add(1, Ordering::SeqCst);
                    let now = f.fetch_add(1, Ordering::SeqCst) + 1;
                    m.fetch_max(now, Ordering::SeqCst);
                    let answer = if n < fail_first {
                        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: 4\r\n\r\nbusy".to_vec()
                    } else {
                        let mut up = TcpStream::connect(&upstream).unwrap();
                        up.write_all(&request).unwrap();
                        let mut answer = Vec::new();
                        up.read_to_end(&mut answer).unwrap();
                        answer
                    };
                    f.fetch_sub(1, Ordering::SeqCst);
                    if stream.write_all(&answer).is_err() || n >= fail_first {
                        break; // upstream answers end with Connection: close
                    }
                }
            });
        }
    });
    Proxy { addr, requests }
}

fn config(endpoints: &[&str]) -> OpenAiConfig {
    let mut c = OpenAiConfig::new(format!("http://{}/v1", endpoints[0]), MODEL);
    c.endpoints = endpoints.iter().map(|e| format!("http://{e}/v1")).collect();
    c.backoff_initial_ms = 10;
    c.timeout_s = 60.0;
    c
}

fn short(text: &str) -> ChatRequest {
    ChatRequest::new(vec![Message::user(text)]).with_max_tokens(6)
}

#[test]
fn serve_answers_plain_http_and_the_openai_provider() {
    let server = start_server(&["--no-embeddings"]);
    let addr = server.addr.clone();

    // A plain HTTP client: models and a chat completion.
    let (status, models) = http(&addr, "GET", "/v1/models", None);
    assert_eq!(status, 200);
    assert_eq!(models["data"][0]["id"], MODEL);
    let (status, answer) = http(
        &addr,
        "POST",
        "/v1/chat/completions",
        Some(&json!({"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8})),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["object"], "chat.completion");
    assert!(answer["choices"][0]["message"]["content"].is_string());
    assert!(answer["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    let tokens = answer["usage"]["completion_tokens"].as_u64().unwrap();
    assert!((1..=8).contains(&tokens), "{answer}");

    // Constrained JSON through response_format.
    let schema = json!({"type": "object", "properties": {"smoker": {"type": "boolean"}}, "required": ["smoker"], "additionalProperties": false});
    let model = OpenAiChatModel::new(config(&[&addr])).unwrap();
    let r = model
        .chat(
            &ChatRequest::new(vec![Message::user("Note: never smoked. Is the patient a smoker? JSON.")])
                .with_schema(schema.clone()),
        )
        .unwrap();
    let value: Value = serde_json::from_str(&r.text).unwrap_or_else(|e| panic!("{e}: {:?}", r.text));
    assert!(value["smoker"].is_boolean(), "{value}");

    // Bounded concurrency over two endpoints of one logical model.
    let (in_flight, max_in_flight) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let a = proxy_sharing(&addr, 0, in_flight.clone(), max_in_flight.clone());
    let b = proxy_sharing(&addr, 0, in_flight, max_in_flight.clone());
    let mut c = config(&[&a.addr, &b.addr]);
    c.max_concurrency = 2;
    let pool = Arc::new(OpenAiChatModel::new(c).unwrap());
    std::thread::scope(|s| {
        for i in 0..6 {
            let pool = pool.clone();
            s.spawn(move || pool.chat(&short(&format!("Count to {i}."))).unwrap());
        }
    });
    let (na, nb) = (a.requests.load(Ordering::SeqCst), b.requests.load(Ordering::SeqCst));
    // Six first attempts alternate (3 and 3); on a loaded machine a failed
    // attempt is retried on the other endpoint, so allow one move.
    assert!(na + nb >= 6 && na.min(nb) >= 2, "requests are spread round-robin: {na} and {nb}");
    let most = max_in_flight.load(Ordering::SeqCst);
    assert!((1..=2).contains(&most), "max_concurrency = 2 over both endpoints, saw {most} in flight");

    // Retry on an injected 503 (Retry-After: 0), then success.
    let flaky = proxy(&addr, 2);
    let model = OpenAiChatModel::new(config(&[&flaky.addr])).unwrap();
    let r = model.chat(&short("Hi.")).unwrap();
    assert!(r.completion_tokens > 0);
    assert_eq!(flaky.requests.load(Ordering::SeqCst), 3, "two 503s then one forwarded request");
    // Retries exhausted: a transient error naming the status.
    let dead = proxy(&addr, usize::MAX);
    let mut c = config(&[&dead.addr]);
    c.max_retries = 2;
    let err = OpenAiChatModel::new(c).unwrap().chat(&short("Hi.")).unwrap_err();
    assert!(matches!(err, LlmError::Transient { .. }) && err.to_string().contains("503"), "{err}");
    assert_eq!(dead.requests.load(Ordering::SeqCst), 3);

    // Timeout: a long answer cannot arrive in 50 ms.
    let mut c = config(&[&addr]);
    c.timeout_s = 0.05;
    c.max_retries = 0;
    let err = OpenAiChatModel::new(c)
        .unwrap()
        .chat(&ChatRequest::new(vec![Message::user("Write a long story.")]).with_max_tokens(48))
        .unwrap_err();
    assert!(matches!(err, LlmError::Timeout { .. }), "{err}");

    // Privacy guard: patient text never leaves for a non-loopback address,
    // and nothing is sent (no server listens there).
    let remote = OpenAiChatModel::new(OpenAiConfig::new("http://10.255.255.1:9/v1", MODEL)).unwrap();
    let err = remote.chat(&short("Patient note")).unwrap_err();
    assert!(matches!(err, LlmError::PrivacyRefused { .. }), "{err}");
    // One remote endpoint in a pool is enough to refuse.
    let mixed = OpenAiChatModel::new(config(&[&addr, "10.255.255.1:9"])).unwrap();
    assert!(matches!(mixed.chat(&short("x")).unwrap_err(), LlmError::PrivacyRefused { .. }));
}

#[test]
fn chat_command_refuses_a_remote_endpoint_without_opt_in() {
    let (_dir, db) = support::temp_db();
    let (code, _, stderr) = support::run(support::evident().arg("--db").arg(&db).args([
        "llm",
        "chat",
        "--endpoint",
        "http://203.0.113.7:8000/v1",
        "Patient has diabetes.",
    ]));
    assert_eq!(code, 2);
    assert!(stderr.contains("refusing to send patient text") && stderr.contains("--allow-remote"), "{stderr}");
}

#[test]
fn serve_embeddings_with_minilm() {
    let minilm = evident_llm::models::find_model("minilm-l6").unwrap();
    assert!(minilm.is_present(), "minilm-l6 is missing; run `evident models pull minilm-l6` first");
    let server = start_server(&[]);
    let (status, body) = http(
        &server.addr,
        "POST",
        "/v1/embeddings",
        Some(&json!({"model": "minilm-l6", "input": ["chest pain", "angina", "broken ankle"]})),
    );
    assert_eq!(status, 200, "{body}");
    let vectors: Vec<Vec<f64>> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect())
        .collect();
    assert_eq!(vectors.len(), 3);
    assert_eq!(vectors[0].len(), 384);
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    assert!(
        dot(&vectors[0], &vectors[1]) > dot(&vectors[0], &vectors[2]),
        "chest pain is nearer angina than a broken ankle"
    );
}
