//! The API and pages through the router (tower's `oneshot`, no socket):
//! the OpenAPI document matches the checked-in copy, logins and roles,
//! CSRF refusal, the login rate limit, an override kept beside the model's
//! decision (and in the audit trail and the export), escaping of record
//! text containing markup, and path validation.

mod support;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use evident_server::{router, AppState};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use support::{fixture, Fixture, PASSWORD, RUN, SCRIPT_TEXT, XSS_PATIENT};
use tower::ServiceExt;

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

struct Client {
    app: Router,
    cookie: Option<String>,
    csrf: Option<String>,
}

impl Client {
    fn new(f: &Fixture) -> Client {
        Client { app: router(AppState::new(f.session())), cookie: None, csrf: None }
    }

    async fn send(&self, method: &str, uri: &str, body: Option<Value>, csrf: Option<&str>) -> Answer {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(cookie) = &self.cookie {
            request = request.header(header::COOKIE, cookie);
        }
        if let Some(token) = csrf {
            request = request.header("x-csrf-token", token);
        }
        let request = match body {
            Some(b) => request.header(header::CONTENT_TYPE, "application/json").body(Body::from(b.to_string())),
            None => request.body(Body::empty()),
        }
        .unwrap();
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Answer { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
    }

    async fn get(&self, uri: &str) -> Answer {
        self.send("GET", uri, None, None).await
    }

    /// POST with this client's CSRF token.
    async fn post(&self, uri: &str, body: Value) -> Answer {
        let csrf = self.csrf.clone();
        self.send("POST", uri, Some(body), csrf.as_deref()).await
    }

    async fn login(f: &Fixture, name: &str) -> Client {
        let mut c = Client::new(f);
        let a = c.send("POST", "/api/login", Some(json!({ "name": name, "password": PASSWORD })), None).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        let set_cookie = a.headers[header::SET_COOKIE].to_str().unwrap().to_string();
        assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"), "{set_cookie}");
        c.cookie = Some(set_cookie.split(';').next().unwrap().to_string());
        c.csrf = Some(a.json()["csrf_token"].as_str().unwrap().to_string());
        c
    }
}

fn override_uri(patient: &str) -> String {
    format!("/api/runs/{RUN}/patients/{patient}/overrides")
}

#[tokio::test]
async fn the_openapi_document_is_the_checked_in_one() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(evident_server::openapi::CHECKED_IN);
    let generated = evident_server::openapi::document_text();
    if std::env::var_os("EVIDENT_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} differs from the routes' documentation; run `EVIDENT_BLESS=1 cargo nextest run -p evident-server openapi` and review the diff",
        path.display()
    );
    let f = fixture();
    let served = Client::new(&f).get("/api/openapi.json").await;
    assert_eq!(served.status, StatusCode::OK);
    assert_eq!(served.json(), evident_server::openapi::document());
    let doc = served.json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/api/runs/{run}/patients/{patient}/overrides"]["post"]["requestBody"].is_object());
}

#[tokio::test]
async fn without_a_session_the_api_says_401_and_pages_go_to_the_login() {
    let f = fixture();
    let c = Client::new(&f);
    assert_eq!(c.get("/api/patients").await.status, StatusCode::UNAUTHORIZED);
    let home = c.get("/").await;
    assert_eq!(home.status, StatusCode::SEE_OTHER);
    assert_eq!(home.headers[header::LOCATION], "/login");
    let login = c.get("/login").await;
    assert_eq!(login.status, StatusCode::OK);
    assert!(login.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap().contains("script-src 'self'"));
}

#[tokio::test]
async fn a_viewer_reads_but_cannot_override_sign_off_or_add_users() {
    let f = fixture();
    let vera = Client::login(&f, "vera").await;
    let patients = vera.get("/api/patients").await;
    assert_eq!(patients.status, StatusCode::OK);
    assert_eq!(
        patients.json()["patients"].as_array().map(Vec::len).or(patients.json().as_array().map(Vec::len)),
        Some(5)
    );
    let refused = vera
        .post(&override_uri("P002"), json!({ "criterion_id": "insulin", "decision": "NOT MET", "reason": "x" }))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(refused.json()["error"].as_str().unwrap().contains("reviewer"), "{}", refused.body);
    let signoff = vera.post(&format!("/api/runs/{RUN}/patients/P002/signoff"), json!({})).await;
    assert_eq!(signoff.status, StatusCode::FORBIDDEN);
    let rita = Client::login(&f, "rita").await;
    let add = rita.post("/api/users", json!({ "name": "eve", "role": "admin", "password": "longenough" })).await;
    assert_eq!(add.status, StatusCode::FORBIDDEN);
    let adam = Client::login(&f, "adam").await;
    let add = adam.post("/api/users", json!({ "name": "eve", "role": "viewer", "password": "longenough" })).await;
    assert_eq!(add.status, StatusCode::CREATED, "{}", add.body);
    let audit = adam.get("/api/audit").await.json();
    assert!(audit.as_array().unwrap().iter().any(|e| e["action"] == "user_add" && e["actor"] == "adam"));
}

#[tokio::test]
async fn a_state_changing_request_without_the_csrf_token_is_refused_and_changes_nothing() {
    let f = fixture();
    let rita = Client::login(&f, "rita").await;
    let body = json!({ "criterion_id": "insulin", "decision": "NOT MET", "reason": "stopped in 2023" });
    let missing = rita.send("POST", &override_uri("P002"), Some(body.clone()), None).await;
    assert_eq!(missing.status, StatusCode::FORBIDDEN);
    assert!(missing.json()["error"].as_str().unwrap().contains("CSRF"));
    let wrong = rita.send("POST", &override_uri("P002"), Some(body.clone()), Some(&"0".repeat(64))).await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN);
    // Another session's token is no better.
    let other = Client::login(&f, "adam").await;
    let foreign = rita.send("POST", &override_uri("P002"), Some(body), other.csrf.as_deref()).await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN);
    // A form post to the page route without the field is refused too.
    let form = Request::builder()
        .method("POST")
        .uri(format!("/runs/{RUN}/patients/P002/signoff"))
        .header(header::COOKIE, rita.cookie.clone().unwrap())
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from("note=hi"))
        .unwrap();
    assert_eq!(rita.app.clone().oneshot(form).await.unwrap().status(), StatusCode::FORBIDDEN);
    let review = rita.get(&format!("/api/runs/{RUN}/patients/P002")).await.json();
    assert!(review["criteria"].as_array().unwrap().iter().all(|c| c["overrides"].as_array().unwrap().is_empty()));
    assert!(review["signoffs"].as_array().unwrap().is_empty());
    assert!(rita.get("/api/audit").await.json().as_array().unwrap().iter().all(|e| e["action"] == "user_add"));
}

#[tokio::test]
async fn an_override_is_stored_beside_the_model_decision_which_stays() {
    let f = fixture();
    let rita = Client::login(&f, "rita").await;
    let before = rita.get(&format!("/api/runs/{RUN}/worklist")).await.json();
    let p002 =
        |w: &Value| w["patients"].as_array().unwrap().iter().find(|p| p["patient_id"] == "P002").cloned().unwrap();
    assert_eq!(p002(&before)["verdict"]["eligibility"], "excluded");

    let empty = rita
        .post(&override_uri("P002"), json!({ "criterion_id": "insulin", "decision": "NOT MET", "reason": "  " }))
        .await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST, "{}", empty.body);
    let stored = rita
        .post(
            &override_uri("P002"),
            json!({ "criterion_id": "insulin", "decision": "NOT MET", "reason": "glargine stopped in 2021 per pharmacy" }),
        )
        .await;
    assert_eq!(stored.status, StatusCode::CREATED, "{}", stored.body);

    let review = rita.get(&format!("/api/runs/{RUN}/patients/P002")).await.json();
    let insulin =
        review["criteria"].as_array().unwrap().iter().find(|c| c["view"]["criterion"]["id"] == "insulin").unwrap();
    assert_eq!(insulin["view"]["result"]["outcome"]["decision"], "MET", "the model's decision is kept");
    assert_eq!(insulin["view"]["label"], "excluded");
    assert_eq!(insulin["overrides"][0]["decision"], "NOT MET");
    assert_eq!(insulin["overrides"][0]["reviewer"], "rita");
    assert_eq!(insulin["effective_decision"], "NOT MET");
    assert_eq!(review["model_verdict"]["eligibility"], "excluded");
    assert_ne!(review["verdict"]["eligibility"], "excluded");

    // The row in match_results is byte-for-byte what it was.
    let store = evident_store::Store::open(&f.db).unwrap();
    let row = store
        .match_results(RUN)
        .unwrap()
        .into_iter()
        .find(|r| r.patient_id == "P002" && r.criterion_id == "insulin")
        .unwrap();
    assert!(row.result_json.contains("\"decision\":\"MET\""), "{}", row.result_json);

    let export = rita.get(&format!("/api/runs/{RUN}/export.json")).await.json();
    let line = export
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["patient_id"] == "P002" && r["criterion_id"] == "insulin")
        .unwrap();
    assert_eq!(
        (line["model_decision"].as_str(), line["override_decision"].as_str(), line["final_decision"].as_str()),
        (Some("MET"), Some("NOT MET"), Some("NOT MET"))
    );
    let csv = rita.get(&format!("/api/runs/{RUN}/export.csv")).await;
    assert!(csv.headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/csv"));
    assert!(
        csv.body
            .lines()
            .any(|l| l.contains("P002,insulin,exclusion,MET,model,NOT MET,glargine stopped in 2021 per pharmacy,rita")),
        "{}",
        csv.body
    );

    let signed = rita.post(&format!("/api/runs/{RUN}/patients/P002/signoff"), json!({ "note": "checked" })).await;
    assert_eq!(signed.status, StatusCode::CREATED, "{}", signed.body);
    let audit = rita.get("/api/audit").await.json();
    let entries: Vec<&Value> = audit.as_array().unwrap().iter().filter(|e| e["actor"] == "rita").collect();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["action"], "override");
    assert_eq!(entries[0]["subject"], format!("{RUN}/P002/insulin"));
    assert_eq!(entries[0]["before_json"], "\"MET\"");
    assert_eq!(entries[0]["after_json"], "\"NOT MET\"");
    assert_eq!(entries[0]["reason"], "glargine stopped in 2021 per pharmacy");
    assert_eq!(entries[1]["action"], "sign_off");
    let audit_csv = rita.get("/api/audit.csv").await;
    assert!(audit_csv.body.contains("glargine stopped in 2021 per pharmacy"));
}

#[tokio::test]
async fn record_text_with_markup_is_escaped_on_every_page() {
    let f = fixture();
    let rita = Client::login(&f, "rita").await;
    let review = rita.get(&format!("/runs/{RUN}/patients/{XSS_PATIENT}")).await;
    assert_eq!(review.status, StatusCode::OK, "{}", review.body);
    let documents = evident_app::records::show(&f.session(), XSS_PATIENT).unwrap().documents;
    let document = rita.get(&format!("/patients/{XSS_PATIENT}/documents/{}?cite=0,1,2", documents[0].id)).await;
    assert_eq!(document.status, StatusCode::OK, "{}", document.body);
    let worklist = rita.get(&format!("/runs/{RUN}")).await;
    for (page, body) in [("patient", &review.body), ("document", &document.body), ("worklist", &worklist.body)] {
        assert!(!body.contains(SCRIPT_TEXT), "{page}: raw script tag");
        assert!(!body.contains("<img"), "{page}: raw img tag");
        assert!(!body.contains("<b>bold"), "{page}: raw b tag from a title");
        // The only script element is the UI's own file.
        assert_eq!(body.matches("<script").count(), 1, "{page}");
    }
    assert!(review.body.contains("&lt;script&gt;window.__xss = 1;"), "the rationale is shown, escaped");
    assert!(document.body.contains("&lt;script&gt;window.__xss = 1;"), "the note is shown, escaped");
    assert!(document.body.contains("&quot;&gt;&lt;img src=x onerror=&quot;window.__xss=2&quot;&gt;"));
    assert!(document.body.contains("<mark class=\"cited\""), "cited sentences are marked");
}

#[tokio::test]
async fn failed_logins_are_rate_limited() {
    let f = fixture();
    let c = Client::new(&f);
    for _ in 0..evident_server::auth::LOGIN_FAILURES_ALLOWED {
        let a = c.send("POST", "/api/login", Some(json!({ "name": "rita", "password": "wrong password" })), None).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN);
    }
    let right = c.send("POST", "/api/login", Some(json!({ "name": "rita", "password": PASSWORD })), None).await;
    assert_eq!(right.status, StatusCode::TOO_MANY_REQUESTS, "{}", right.body);
    // Another user is not locked out by rita's failures.
    let vera = c.send("POST", "/api/login", Some(json!({ "name": "vera", "password": PASSWORD })), None).await;
    assert_eq!(vera.status, StatusCode::OK);
    // A form login without its double-submit cookie is refused as CSRF.
    let form = Request::builder()
        .method("POST")
        .uri("/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("name=vera&password={}&csrf=abc", PASSWORD.replace(' ', "+"))))
        .unwrap();
    assert_eq!(c.app.clone().oneshot(form).await.unwrap().status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn ids_that_could_reach_outside_a_record_are_refused() {
    let f = fixture();
    let vera = Client::login(&f, "vera").await;
    let traversal = vera.get("/api/patients/P001/documents/..%2F..%2Fetc%2Fpasswd").await;
    assert_eq!(traversal.status, StatusCode::BAD_REQUEST, "{}", traversal.body);
    // Another patient's document is not found under this patient.
    let p001 = vera.get("/api/patients/P001").await.json();
    let p001_doc = p001["documents"][0]["id"].as_str().unwrap().to_string();
    let cross = vera.get(&format!("/api/patients/P002/documents/{p001_doc}")).await;
    assert_eq!(cross.status, StatusCode::NOT_FOUND, "{}", cross.body);
    let unknown = vera.get("/api/runs/no-such-run/worklist").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.body);
    let filter = vera.get(&format!("/api/runs/{RUN}/worklist?filter=bogus")).await;
    assert_eq!(filter.status, StatusCode::BAD_REQUEST);
    let eligible = vera.get(&format!("/api/runs/{RUN}/worklist?filter=eligible")).await.json();
    let ids: Vec<&str> =
        eligible["patients"].as_array().unwrap().iter().map(|p| p["patient_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["P001"]);
    let shown = vera.get("/api/patients/P001").await.json();
    let first = shown["documents"][0]["id"].as_str().unwrap_or_else(|| panic!("{shown}")).to_string();
    let doc = vera.get(&format!("/api/patients/P001/documents/{first}")).await.json();
    assert!(!doc["sentences"].as_array().unwrap_or_else(|| panic!("{doc}")).is_empty());
    let search = vera.get("/api/patients/P001/search?q=metformin").await;
    assert_eq!(search.status, StatusCode::OK, "{}", search.body);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_worklist_page_shows_a_hundred_patients_a_page_and_the_api_all() {
    let f = fixture();
    let run = evident_app::synthetic::write_synthetic_run(&f.session(), f.dir.path(), 250, 2).unwrap();
    let vera = Client::login(&f, "vera").await;
    let rows = |page: &str| page.matches("<tr data-patient=").count();
    let first = vera.get(&format!("/runs/{}", run.run_id)).await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(rows(&first.body), 100);
    assert!(first.body.contains("Patients 1–100 of 250"), "{}", first.body);
    assert!(first.body.contains(&format!("href=\"/runs/{}?page=2\"", run.run_id)));
    let last = vera.get(&format!("/runs/{}?page=3", run.run_id)).await;
    assert_eq!(rows(&last.body), 50);
    assert!(last.body.contains("<td class=\"num\">201</td>"), "ranks go on across pages");
    assert!(last.body.contains(&format!("href=\"/runs/{}?page=2\"", run.run_id)) && !last.body.contains("next →"));
    // A page past the end shows the last one; a page that is not a number is a 400.
    assert_eq!(rows(&vera.get(&format!("/runs/{}?page=99", run.run_id)).await.body), 50);
    assert_eq!(vera.get(&format!("/runs/{}?page=x", run.run_id)).await.status, StatusCode::BAD_REQUEST);
    // The API answers every patient.
    let api = vera.get(&format!("/api/runs/{}/worklist", run.run_id)).await;
    assert_eq!(api.json()["patients"].as_array().unwrap().len(), 250);
    // The example run's five patients fit on one page: no pager.
    assert!(!vera.get(&format!("/runs/{RUN}")).await.body.contains("class=\"pager\""));
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_wait_for_an_admission_permit_except_a_jobs_event_stream() {
    let f = fixture();
    let mut state = AppState::new(f.session());
    state.admission = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
    let held = state.admission.clone().acquire_owned().await.unwrap();
    let app = router(state);
    let get = |uri: &'static str| {
        let app = app.clone();
        async move { app.oneshot(Request::builder().uri(uri).body(Body::empty()).unwrap()).await.unwrap().status() }
    };
    // An event stream is answered while every permit is taken (here: refused, no session).
    let events = tokio::time::timeout(std::time::Duration::from_secs(5), get("/api/jobs/job-1/events")).await;
    assert_eq!(events.expect("the event stream needs no permit"), StatusCode::UNAUTHORIZED);
    // Anything else waits for the permit, and is answered once it is given back.
    let waiting = tokio::spawn(get("/api/openapi.json"));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "answered without a permit");
    drop(held);
    let status = tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await.unwrap().unwrap();
    assert_eq!(status, StatusCode::OK);
}
