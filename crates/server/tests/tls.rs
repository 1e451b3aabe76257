//! The server's own TLS: a self-signed certificate made here (rcgen), the
//! server started with it on loopback, an HTTPS client that trusts only
//! that certificate logs in (the session cookie carries `Secure`) and
//! reads the API; plain HTTP to the same port gets no answer; bad
//! certificate and key files are refused naming the file and the fault.

use std::path::Path;
use std::time::Duration;

use evident_app::users::{self, AddUser, Role};
use evident_app::{Config, Session};
use ureq::tls::{Certificate, RootCerts, TlsConfig};

const PASSWORD: &str = "correct horse battery";

struct Pem {
    cert: String,
    key: String,
}

fn self_signed() -> Pem {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    Pem { cert: made.cert.pem(), key: made.key_pair.serialize_pem() }
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn https_with_a_trusted_certificate_works_and_plain_http_to_the_port_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let pem = self_signed();
    let cert = write(dir.path(), "cert.pem", &pem.cert);
    let key = write(dir.path(), "key.pem", &pem.key);
    let config = evident_server::tls::load(&cert, &key).unwrap();

    let db = dir.path().join("evident.db");
    let session = Session::with_config(&db, Config::default());
    users::add(&session, &AddUser { name: "rita".into(), role: Role::Reviewer, password: PASSWORD.into() }, "test")
        .unwrap();
    let state = evident_server::AppState::new(session).with_tls(config);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        evident_server::serve_state(state, "127.0.0.1:0".parse().unwrap(), |addr| tx.send(addr).unwrap()).unwrap();
    });
    let addr = rx.recv_timeout(Duration::from_secs(30)).unwrap();

    let trusted = Certificate::from_pem(pem.cert.as_bytes()).unwrap();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(TlsConfig::builder().root_certs(RootCerts::new_with_certs(&[trusted])).build())
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();

    // The OpenAPI document needs no login.
    let mut doc = agent.get(&format!("https://localhost:{}/api/openapi.json", addr.port())).call().unwrap();
    assert_eq!(doc.status(), 200);
    assert!(doc.body_mut().read_to_string().unwrap().contains("\"openapi\""));

    // Log in over HTTPS (by IP address too: the certificate names it); the cookie is Secure.
    let login = agent
        .post(&format!("https://{addr}/api/login"))
        .send_json(serde_json::json!({ "name": "rita", "password": PASSWORD }))
        .unwrap();
    assert_eq!(login.status(), 200);
    let set_cookie = login.headers().get("set-cookie").unwrap().to_str().unwrap().to_string();
    assert!(set_cookie.contains("; Secure"), "{set_cookie}");
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"), "{set_cookie}");
    // With the cookie, the signed-in user reads the API.
    let cookie = set_cookie.split(';').next().unwrap().to_string();
    let mut me = agent.get(&format!("https://{addr}/api/me")).header("cookie", &cookie).call().unwrap();
    assert_eq!(me.status(), 200);
    let me: serde_json::Value = me.body_mut().read_json().unwrap();
    assert_eq!(me["name"], "rita");

    // The login page's CSRF cookie is Secure as well.
    let page = agent.get(&format!("https://{addr}/login")).call().unwrap();
    let login_cookie = page.headers().get("set-cookie").unwrap().to_str().unwrap();
    assert!(login_cookie.starts_with("evident_login_csrf=") && login_cookie.contains("; Secure"), "{login_cookie}");

    // A client that does not trust the certificate is refused the handshake.
    let untrusting: ureq::Agent =
        ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(20))).build().into();
    assert!(untrusting.get(&format!("https://{addr}/api/openapi.json")).call().is_err());

    // Plain HTTP to the TLS port gets no HTTP answer at all.
    let plain: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    let answer = plain.get(&format!("http://{addr}/api/openapi.json")).call();
    assert!(answer.is_err(), "plain HTTP to the TLS port was answered: {:?}", answer.map(|r| r.status()));

    // And the server still serves HTTPS after the failed handshakes.
    assert_eq!(agent.get(&format!("https://{addr}/api/me")).header("cookie", &cookie).call().unwrap().status(), 200);
}

#[test]
fn plain_http_cookies_are_not_marked_secure() {
    assert!(!evident_server::auth::session_cookie(&"a".repeat(64), false).contains("Secure"));
    assert!(evident_server::auth::session_cookie(&"a".repeat(64), true).ends_with("; Secure"));
}

#[test]
fn bad_certificate_and_key_files_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let pem = self_signed();
    let other = self_signed();
    let cert = write(dir.path(), "cert.pem", &pem.cert);
    let key = write(dir.path(), "key.pem", &pem.key);
    let missing = dir.path().join("nowhere.pem");
    let empty = write(dir.path(), "empty.pem", "");
    let not_pem = write(dir.path(), "notes.txt", "just some text\n");
    let other_key = write(dir.path(), "other-key.pem", &other.key);
    let broken =
        write(dir.path(), "broken.pem", "-----BEGIN CERTIFICATE-----\n!!!not base64!!!\n-----END CERTIFICATE-----\n");

    let err = |c: &Path, k: &Path| evident_server::tls::load(c, k).unwrap_err().0;

    let e = err(&missing, &key);
    assert!(e.starts_with(&format!("--tls-cert {}: cannot read it", missing.display())), "{e}");
    let e = err(&cert, &missing);
    assert!(e.starts_with(&format!("--tls-key {}: cannot read it", missing.display())), "{e}");
    let e = err(&empty, &key);
    assert!(e.contains("empty.pem") && e.contains("empty"), "{e}");
    let e = err(&not_pem, &key);
    assert!(e.contains("notes.txt") && e.contains("holds no certificate"), "{e}");
    let e = err(&broken, &key);
    assert!(e.contains("broken.pem") && e.contains("not a readable PEM certificate"), "{e}");
    // A certificate given as the key: no private key in it.
    let e = err(&cert, &cert);
    assert!(e.starts_with(&format!("--tls-key {}: holds no private key", cert.display())), "{e}");
    // Another certificate's key.
    let e = err(&cert, &other_key);
    assert!(e.contains("cert.pem") && e.contains("other-key.pem") && e.contains("cannot be used together"), "{e}");
    assert!(evident_server::tls::load(&cert, &key).is_ok());
}
