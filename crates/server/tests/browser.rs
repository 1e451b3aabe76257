//! The review UI in a real browser: headless Chromium (Debian's `chromium`
//! and `chromium-driver`, installed by scripts/setup) driven over the
//! WebDriver protocol by a small client here. The server runs on a
//! loopback port over the fixture store (example records, fixture
//! decisions; no model). A reviewer logs in, opens the example trial's
//! worklist, filters it, opens a patient, follows a highlighted citation
//! to the whole document, overrides a decision with a reason, signs off,
//! and finds both in the audit trail and the export; the markup patient's
//! page runs none of its record's script. Screenshots of the main pages go
//! to `<target>/tmp/evident-server-screenshots/`.

mod support;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};
use support::{fixture, stored_answer, PASSWORD, RUN, XSS_PATIENT};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .proxy(None)
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// chromedriver, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_driver() -> Driver {
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver is not installed; scripts/setup installs Debian's chromium and chromium-driver");
    let driver = Driver { child, url: format!("http://127.0.0.1:{port}") };
    let started = Instant::now();
    loop {
        if let Ok(mut r) = agent().get(&format!("{}/status", driver.url)).call() {
            let status: Value = r.body_mut().read_json().unwrap();
            if status["value"]["ready"] == true {
                return driver;
            }
        }
        assert!(started.elapsed() < Duration::from_secs(30), "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One browser session.
struct Browser {
    base: String,
    agent: ureq::Agent,
}

impl Browser {
    fn open(driver: &Driver, profile: &std::path::Path) -> Browser {
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,1000",
        ];
        let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": "/usr/bin/chromium", "args": args }
        } } });
        let agent = agent();
        let answer: Value =
            agent.post(&format!("{}/session", driver.url)).send_json(&caps).unwrap().body_mut().read_json().unwrap();
        let id = answer["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {answer}"));
        let browser = Browser { base: format!("{}/session/{id}", driver.url), agent };
        // A click that submits a form returns before the next page has
        // loaded when the server is slow (Argon2 on a loaded machine): let
        // element lookups wait for the new page's elements.
        browser.call("POST", "/timeouts", json!({ "implicit": 15_000 }));
        browser
    }

    /// Waits (up to 15 s) until the text of `css` contains `needle`, and
    /// returns it: a submitted form's new page may not have loaded yet.
    fn wait_text(&self, css: &str, needle: &str) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        // Read in the page itself, so that a page replaced between finding
        // the element and reading it is no error (no stale element).
        let script = format!("const e = document.querySelector({}); return e ? e.innerText : '';", json!(css));
        loop {
            let text = self.run(&script).as_str().unwrap_or_default().to_string();
            if text.contains(needle) || std::time::Instant::now() > deadline {
                return text;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (up to 15 s) until the current URL satisfies `ok`, and returns it.
    fn wait_url(&self, ok: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let url = self.url();
            if ok(&url) || std::time::Instant::now() > deadline {
                return url;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.base);
        let mut response = match method {
            "GET" => self.agent.get(&url).call(),
            "DELETE" => self.agent.delete(&url).call(),
            _ => self.agent.post(&url).send_json(&body),
        }
        .unwrap();
        let status = response.status();
        let value: Value = response.body_mut().read_json().unwrap();
        assert!(status.is_success(), "{method} {path}: {status} {value}");
        value["value"].clone()
    }

    fn go(&self, url: &str) {
        self.call("POST", "/url", json!({ "url": url }));
    }

    fn url(&self) -> String {
        self.call("GET", "/url", Value::Null).as_str().unwrap().to_string()
    }

    fn find(&self, css: &str) -> String {
        let v = self.call("POST", "/element", json!({ "using": "css selector", "value": css }));
        v[ELEMENT].as_str().unwrap_or_else(|| panic!("{css}: {v}")).to_string()
    }

    fn count(&self, css: &str) -> usize {
        self.call("POST", "/elements", json!({ "using": "css selector", "value": css })).as_array().unwrap().len()
    }

    fn click(&self, css: &str) {
        let e = self.find(css);
        self.call("POST", &format!("/element/{e}/click"), json!({}));
    }

    fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css);
        self.call("POST", &format!("/element/{e}/value"), json!({ "text": text }));
    }

    fn text(&self, css: &str) -> String {
        let e = self.find(css);
        self.call("GET", &format!("/element/{e}/text"), Value::Null).as_str().unwrap().to_string()
    }

    fn run(&self, script: &str) -> Value {
        self.call("POST", "/execute/sync", json!({ "script": script, "args": [] }))
    }

    fn screenshot(&self, name: &str) {
        let png = self.call("GET", "/screenshot", Value::Null);
        let bytes = base64::engine::general_purpose::STANDARD.decode(png.as_str().unwrap()).unwrap();
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("evident-server-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), bytes).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.agent.delete(&self.base).call();
    }
}

#[test]
fn a_reviewer_overrides_a_decision_and_signs_off_in_chromium() {
    let f = fixture();
    let (tx, rx) = std::sync::mpsc::channel();
    let session = f.session();
    std::thread::spawn(move || {
        evident_server::serve(session, "127.0.0.1:0".parse().unwrap(), |addr| tx.send(addr).unwrap()).unwrap();
    });
    let addr = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    let site = format!("http://{addr}");
    let driver = start_driver();
    let profile = tempfile::tempdir().unwrap();
    let b = Browser::open(&driver, profile.path());

    // Log in.
    b.go(&format!("{site}/"));
    assert!(b.url().ends_with("/login"), "{}", b.url());
    b.type_into("#name", "rita");
    b.type_into("#password", PASSWORD);
    b.screenshot("login");
    b.click("#login");
    assert_eq!(b.wait_url(|u| !u.ends_with("/login")), format!("{site}/"));
    assert!(b.text("#runs").contains("EXAMPLE-T2DM-001"));

    // The worklist, ranked, and its filters.
    b.click(&format!("#runs a[href='/runs/{RUN}']"));
    assert_eq!(b.count("#worklist tbody tr"), 5);
    assert_eq!(b.text("#worklist tbody tr:first-child a.patient"), "P001", "the eligible patient ranks first");
    b.screenshot("worklist");
    b.click("nav.filters a[href$='filter=excluded']");
    b.wait_url(|u| u.ends_with("filter=excluded"));
    let excluded: Vec<String> = (1..=b.count("#worklist tbody tr"))
        .map(|i| b.text(&format!("#worklist tbody tr:nth-child({i}) a.patient")))
        .collect();
    assert_eq!(excluded, ["P002", "P003"]);

    // A patient: the insulin decision with its cited sentence highlighted.
    b.click("#worklist a.patient[href$='/patients/P002']");
    let insulin = "tr#criterion-insulin";
    assert_eq!(b.text(&format!("{insulin} .model-decision")), "excluded");
    let cited = b.text(&format!("{insulin} mark.cited"));
    assert!(cited.to_lowercase().contains("insulin"), "{cited}");
    b.screenshot("patient");

    // One click to the whole document, the same sentence marked there.
    b.click(&format!("{insulin} a.document"));
    let url = b.wait_url(|u| u.contains("/documents/"));
    assert!(url.contains("/patients/P002/documents/"), "{url}");
    assert_eq!(b.text("#document mark.cited"), cited);
    b.screenshot("document");
    b.run("history.back(); return null;");
    std::thread::sleep(Duration::from_millis(300));

    // Override with a reason; the model's decision stays beside it.
    b.click(&format!("{insulin} select[name='decision'] option[value='NOT MET']"));
    b.type_into(&format!("{insulin} input[name='reason']"), "glargine stopped in 2021 per pharmacy record");
    b.click(&format!("{insulin} form.override button"));
    let shown = b.wait_text(&format!("{insulin} .override"), "Overridden");
    assert!(shown.contains("Overridden to NOT MET by rita"), "{shown}");
    assert!(shown.contains("glargine stopped in 2021 per pharmacy record"), "{shown}");
    assert_eq!(b.text(&format!("{insulin} .model-decision")), "excluded", "the model's decision is still shown");

    // Sign off.
    b.type_into("#signoff-note", "checked against pharmacy");
    b.click("#signoff-button");
    assert!(b.wait_text("li.signoff", "Signed off by rita").contains("Signed off by rita"));
    b.screenshot("patient-reviewed");

    // Both in the audit trail (newest first) and in the export.
    b.go(&format!("{site}/audit"));
    let audit = b.text("#audit");
    assert!(audit.contains("sign_off") && audit.contains("override"), "{audit}");
    assert!(audit.contains("glargine stopped in 2021 per pharmacy record"));
    b.screenshot("audit");
    let export = b.run(&format!(
        "const r = new XMLHttpRequest(); r.open('GET', '/runs/{RUN}/export.csv', false); r.send(); return r.responseText;"
    ));
    let line = export.as_str().unwrap().lines().find(|l| l.contains("P002,insulin")).unwrap().to_string();
    assert!(line.contains(",MET,model,NOT MET,glargine stopped in 2021 per pharmacy record,rita,"), "{line}");

    // A record's markup is text: nothing of it runs.
    b.go(&format!("{site}/runs/{RUN}/patients/{XSS_PATIENT}"));
    assert!(b.text("#criteria").contains("<script>window.__xss = 1;"), "the markup is shown as text");
    assert_eq!(b.run("return [typeof window.__xss, document.title.includes('owned')];"), json!(["undefined", false]));
    b.click("tr#criterion-t2dm a.document");
    assert_eq!(
        b.run("return [typeof window.__xss, document.querySelectorAll('img').length];"),
        json!(["undefined", 0])
    );

    // A chart answer: a stored one as `evident ask` writes it (no model in this test), opened from the
    // chart page's list of questions asked.
    let (job, _, _, _) = stored_answer(&f);
    b.go(&format!("{site}/chart"));
    assert_eq!(b.count("#chart-form"), 1, "a reviewer may ask");
    b.screenshot("chart-ask");
    b.click(&format!("a[href='/jobs/{job}']"));
    b.wait_url(|u| u.ends_with(&format!("/jobs/{job}")));
    // The two lines, the model's markup shown as text.
    assert_eq!(b.text("#answer-line"), "Answer: Yes <b>metformin</b>.");
    assert!(b.text("#reasoning-line").starts_with("Reasoning: The note says so [1]"), "{}", b.text("#reasoning-line"));
    assert_eq!(b.count("#answer-line b"), 0);
    // The citation's passage highlighted (a marked, coloured span), the unsupported one said so.
    let cited = b.text("#citations li.citation[data-number='1'] mark.cited");
    assert!(!cited.is_empty());
    let background = b.run("return getComputedStyle(document.querySelector('#citations mark.cited')).backgroundColor;");
    assert_ne!(background, json!("rgba(0, 0, 0, 0)"), "the cited passage is highlighted");
    assert!(b.text("#citations li.citation[data-number='2']").contains("Unsupported"));
    // The documents retrieved but not cited, apart from the cited ones.
    assert!(b.text("#retrieved-not-cited").contains("P001-other"));
    assert!(!b.text("#citations").contains("P001-other"));
    // The trace.
    let trace = b.text("#trace");
    assert!(trace.contains("enough evidence") && trace.contains("medications") && trace.contains("Round 1"), "{trace}");
    b.screenshot("chart-answer");
    // One click to the whole document, the cited span marked there.
    b.click("#citations li.citation[data-number='1'] a.document");
    let url = b.wait_url(|u| u.contains("/documents/"));
    assert!(url.contains("/patients/P001/documents/") && url.contains("span="), "{url}");
    assert_eq!(b.text("#document mark.cited"), cited);
    b.screenshot("chart-document");
}
