//! Background jobs through the router: who may start one, a bad request
//! refused before anything is recorded, a job that runs on its own thread
//! and ends (here failing at once: a model that does not exist) with its
//! state and error in the store and an `end` server-sent event, a job left
//! running by a previous server marked interrupted and resumed as a new
//! job, every start in the audit trail; the chart answer page rendered
//! from a stored answer with its citation highlighted in its document; and
//! the study pages over a run folder's bundle.

mod support;

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use evident_app::jobs::{self, ChartJob, JobRequest};
use evident_app::users::{Actor, Role};
use evident_server::{router, AppState};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use support::{fixture, stored_answer, Fixture, PASSWORD, RUN};
use tower::ServiceExt;

struct Client {
    app: Router,
    cookie: String,
    csrf: String,
}

impl Client {
    async fn login(app: &Router, name: &str) -> Client {
        let mut c = Client { app: app.clone(), cookie: String::new(), csrf: String::new() };
        let (status, headers, body) =
            c.send("POST", "/api/login", Some(json!({ "name": name, "password": PASSWORD })), false).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        c.cookie = headers[header::SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_string();
        c.csrf = serde_json::from_str::<Value>(&body).unwrap()["csrf_token"].as_str().unwrap().to_string();
        c
    }

    async fn send(
        &self,
        method: &str,
        uri: &str,
        body: Option<Value>,
        csrf: bool,
    ) -> (StatusCode, axum::http::HeaderMap, String) {
        let mut request = Request::builder().method(method).uri(uri).header(header::COOKIE, &self.cookie);
        if csrf {
            request = request.header("x-csrf-token", &self.csrf);
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
        (status, headers, String::from_utf8_lossy(&bytes).into_owned())
    }

    async fn get(&self, uri: &str) -> (StatusCode, String) {
        let (s, _, b) = self.send("GET", uri, None, false).await;
        (s, b)
    }

    async fn post(&self, uri: &str, body: Value) -> (StatusCode, Value) {
        let (s, _, b) = self.send("POST", uri, Some(body), true).await;
        (s, serde_json::from_str(&b).unwrap_or(Value::String(b)))
    }
}

async fn wait_over(c: &Client, id: &str) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) = c.get(&format!("/api/jobs/{id}")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let job: Value = serde_json::from_str(&body).unwrap();
        if matches!(job["state"].as_str(), Some("finished" | "failed" | "interrupted")) {
            return job;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "job {id} did not end: {job}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn app(f: &Fixture) -> Router {
    router(AppState::new(f.session()))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_runs_in_the_background_and_its_end_is_stored_streamed_and_audited() {
    let f = fixture();
    let app = app(&f);
    let vera = Client::login(&app, "vera").await;
    let rita = Client::login(&app, "rita").await;
    let screening =
        json!({ "kind": "screening", "trial_from_run": RUN, "patients": ["P001"], "model": "no-such-model" });

    let (status, body) = vera.post("/api/jobs", screening.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "a viewer starts no job: {body}");
    let (status, _, _) = rita.send("POST", "/api/jobs", Some(screening.clone()), false).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "no CSRF token, no job");
    let (status, body) =
        rita.post("/api/jobs", json!({ "kind": "chart", "patient_id": "NOPE", "question": "x?" })).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = rita.post("/api/jobs", json!({ "kind": "screening", "trial_from_run": "no-run" })).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body) = rita.post("/api/jobs", json!({ "kind": "screening", "method": "ican" })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"].as_str().unwrap().contains("needs the trial"), "{body}");
    let bad_type = json!({ "kind": "chart", "patient_id": "P001", "question": "x?", "answer_type": "number" });
    let (status, body) = rita.post("/api/jobs", bad_type).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"].as_str().unwrap().contains("answer type \"number\" is unknown; use one of yes_no"), "{body}");
    let (_, list) = rita.get("/api/jobs").await;
    assert_eq!(list, "[]", "refused requests record nothing");

    let (status, job) = rita.post("/api/jobs", screening).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let id = job["id"].as_str().unwrap().to_string();
    assert_eq!(job["requested_by"], "rita");
    let ended = wait_over(&rita, &id).await;
    assert_eq!(ended["state"], "failed", "{ended}");
    assert!(ended["error"].as_str().unwrap().contains("no-such-model"), "{ended}");
    assert!(ended["started_at"].is_string() && ended["finished_at"].is_string(), "{ended}");

    // The stream of an ended job: one `end` event carrying the job, then it closes.
    let (status, headers, events) = vera.send("GET", &format!("/api/jobs/{id}/events"), None, false).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/event-stream");
    assert!(events.starts_with("event: end\ndata: {"), "{events}");
    assert!(events.contains("\"state\":\"failed\""), "{events}");
    let (status, _) = vera.get("/api/jobs/job-0000000000000000/events").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (_, page) = vera.get(&format!("/jobs/{id}")).await;
    assert!(page.contains("data-state=\"failed\"") && page.contains("no-such-model"), "{page}");
    assert!(!page.contains("resume-form"), "a viewer gets no resume button");
    let (_, audit) = vera.get("/api/audit").await;
    let audit: Value = serde_json::from_str(&audit).unwrap();
    let starts: Vec<&Value> = audit.as_array().unwrap().iter().filter(|e| e["action"] == "job_start").collect();
    assert_eq!(starts.len(), 1, "{audit}");
    assert_eq!(
        (starts[0]["actor"].as_str(), starts[0]["subject"].as_str()),
        (Some("rita"), Some(&*format!("job/{id}")))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_left_running_by_a_stopped_server_is_interrupted_and_resumes_as_a_new_job() {
    let f = fixture();
    let session = f.session();
    let actor = Actor { name: "rita".into(), role: Role::Reviewer };
    let request = JobRequest::Chart(ChartJob {
        patient_id: "P001".into(),
        question: "Is P001 on metformin?".into(),
        ..Default::default()
    });
    // As a server that died would leave it: recorded and started, never ended.
    let job = jobs::start(&session, &actor, &request).unwrap();
    session.with_store(|s| Ok(s.start_job(&job.id)?)).unwrap();
    drop(session);
    assert_eq!(jobs::recover(&f.session()).unwrap(), 1, "the next server's start marks it");
    let app = app(&f);
    let rita = Client::login(&app, "rita").await;
    let (_, old) = rita.get(&format!("/api/jobs/{}", job.id)).await;
    let old: Value = serde_json::from_str(&old).unwrap();
    assert_eq!(old["state"], "interrupted", "{old}");
    let (_, page) = rita.get(&format!("/jobs/{}", job.id)).await;
    assert!(page.contains("resume-form"), "{page}");

    let (status, again) = rita.post(&format!("/api/jobs/{}/resume", job.id), json!({})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{again}");
    assert_eq!(again["resumes"], job.id.as_str());
    assert_eq!(again["request"], old["request"]);
    assert_ne!(again["id"], job.id.as_str());
    let (status, body) = rita.post(&format!("/api/jobs/{}/resume", job.id), json!({})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "an interrupted job may be resumed again: {body}");
    let (_, audit) = rita.get("/api/audit").await;
    let audit: Value = serde_json::from_str(&audit).unwrap();
    let resumes = audit
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "job_start" && e["reason"] == format!("resumes {}", job.id))
        .count();
    assert_eq!(resumes, 2, "{audit}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_chart_answer_page_shows_two_lines_cited_passages_the_not_cited_apart_and_the_trace() {
    let f = fixture();
    let (id, doc, start, end) = stored_answer(&f);
    let app = app(&f);
    let vera = Client::login(&app, "vera").await;
    let (status, page) = vera.get(&format!("/jobs/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Yes &lt;b&gt;metformin&lt;/b&gt;."), "answer escaped: {page}");
    assert!(page.contains("id=\"reasoning-line\""));
    let link = format!("/patients/P001/documents/{}?span={start}-{end}", doc.replace(':', "%3A"));
    assert!(page.contains(&link), "{page}");
    assert!(page.contains("Unsupported: no context item has this number"));
    let not_cited = &page[page.find("id=\"retrieved-not-cited\"").unwrap()..];
    assert!(not_cited.contains("P001-other"), "{not_cited}");
    assert!(page.contains("enough evidence") && page.contains("Round 1"));
    // The citation's link marks the cited sentence in the whole document.
    let (status, document) = vera.get(&link).await;
    assert_eq!(status, StatusCode::OK);
    assert!(document.contains("<mark class=\"cited\" id=\"s"), "{document}");
    let (_, form) = vera.get("/chart").await;
    assert!(form.contains("Asking needs the reviewer"), "a viewer gets no form");
    let rita = Client::login(&app, "rita").await;
    let (_, form) = rita.get("/chart").await;
    assert!(form.contains("id=\"chart-form\"") && form.contains(&id));
    assert!(form.contains("id=\"chart-answer-type\"") && form.contains("<option value=\"interval_list\">"), "{form}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_study_pages_show_a_run_folders_bundle_and_refuse_paths() {
    let f = fixture();
    let studies = f.dir.path().join("studies");
    std::fs::create_dir_all(studies.join("run-1")).unwrap();
    let bundle = json!({
        "task": { "id": "lactate-mortality", "title": "Lactate <i>and</i> mortality" }, "strategy": "typed", "model": "qwen",
        "database": { "url": "sqlite:demo.db", "sha256": "abc" },
        "cohort_audit": { "rules": { "attrition": { "steps": [
            { "kind": "source", "description": "ICU stays", "remaining": 100, "removed": 0 },
            { "kind": "inclusion", "description": "adults", "remaining": 80, "removed": 20 } ] } }, "judge": null },
        "answers": { "q1": { "value": "yes", "step": 2 } },
        "score": { "task": "lactate-mortality", "success": true, "steps": 3 },
        "run": { "steps": [ { "step": 1, "action": "query(\"SELECT 1\")", "output": "o", "observation": "1 row" } ], "termination": "submitted" }
    });
    std::fs::write(studies.join("run-1/bundle.json"), bundle.to_string()).unwrap();
    let app = router(AppState::new(f.session()).with_studies(studies));
    let vera = Client::login(&app, "vera").await;
    let (_, list) = vera.get("/api/studies").await;
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!((list[0]["name"].as_str(), list[0]["success"].as_bool()), (Some("run-1"), Some(true)));
    let (status, page) = vera.get("/studies/run-1").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("Lactate &lt;i&gt;and&lt;/i&gt; mortality"));
    assert!(page.contains("adults") && page.contains("<td class=\"num\">20</td>"), "attrition: {page}");
    assert!(page.contains("1 row") && page.contains("submitted"));
    let (status, _) = vera.get("/api/studies/run-1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(vera.get("/api/studies/nope").await.0, StatusCode::NOT_FOUND);
    assert_eq!(vera.get("/api/studies/..").await.0, StatusCode::BAD_REQUEST);
    assert_eq!(vera.get("/api/studies/%2e%2e%2fetc").await.0, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_evaluation_pages_list_eval_output_folders_show_one_and_refuse_paths() {
    let f = fixture();
    let dir = f.dir.path().join("evaluations");
    // As `evident eval trialgpt --out dir/trialgpt-dev` writes it (a few of its fields).
    std::fs::create_dir_all(dir.join("trialgpt-dev")).unwrap();
    let eval = json!({ "method": "ican", "patients": 2, "pairs": 3, "rows": 41,
        "method_row": { "criterion_accuracy": 0.61 }, "baseline": { "method": "text" } });
    std::fs::write(dir.join("trialgpt-dev/eval.json"), eval.to_string()).unwrap();
    std::fs::write(dir.join("trialgpt-dev/eval.md"), "| method | <b>accuracy</b> |\n|---|---|\n| ican | 61.0 |\n")
        .unwrap();
    // As `evident eval chart --out dir/chart-subset` writes it.
    std::fs::create_dir_all(dir.join("chart-subset")).unwrap();
    let results = json!({ "questions": 3, "patients": 1, "methods": [
        { "method": "agent", "concordance": { "estimate": 0.667 } }, { "method": "baseline" } ] });
    std::fs::write(dir.join("chart-subset/results.json"), results.to_string()).unwrap();
    std::fs::write(dir.join("chart-subset/summary.md"), "| Method | Concordance |\n").unwrap();
    // As `evident eval rwe --out dir/rwe` writes it: run-N/TASK/bundle.json.
    std::fs::create_dir_all(dir.join("rwe/run-1/lactate")).unwrap();
    let bundle = json!({ "task": { "id": "lactate" }, "strategy": "typed", "model": "qwen",
        "score": { "task": "lactate", "success": true, "acc": 1.0 } });
    std::fs::write(dir.join("rwe/run-1/lactate/bundle.json"), bundle.to_string()).unwrap();
    std::fs::create_dir_all(dir.join("not-an-eval")).unwrap();

    let app = router(AppState::new(f.session()).with_evaluations(dir));
    let vera = Client::login(&app, "vera").await;
    let (status, list) = vera.get("/api/evaluations").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let list: Value = serde_json::from_str(&list).unwrap();
    let names: Vec<(&str, &str)> =
        list.as_array().unwrap().iter().map(|e| (e["name"].as_str().unwrap(), e["kind"].as_str().unwrap())).collect();
    assert_eq!(names, [("chart-subset", "chart"), ("rwe", "rwe"), ("trialgpt-dev", "trialgpt")]);
    assert_eq!(list[2]["methods"], json!(["ican", "text"]));

    let (status, one) = vera.get("/api/evaluations/trialgpt-dev").await;
    assert_eq!(status, StatusCode::OK);
    let one: Value = serde_json::from_str(&one).unwrap();
    assert_eq!(one["result"], eval, "the result as written");
    assert!(one["summary"].as_str().unwrap().contains("| ican | 61.0 |"));
    let (_, rwe) = vera.get("/api/evaluations/rwe").await;
    let rwe: Value = serde_json::from_str(&rwe).unwrap();
    assert_eq!(rwe["result"]["runs"][0]["tasks"][0]["score"]["acc"], 1.0);

    let (status, page) = vera.get("/evaluations").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("href=\"/evaluations/chart-subset\"") && page.contains("3 questions, 1 patients"), "{page}");
    let (status, page) = vera.get("/evaluations/trialgpt-dev").await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("&lt;b&gt;accuracy&lt;/b&gt;"), "the summary is escaped: {page}");
    let (_, page) = vera.get("/evaluations/rwe").await;
    assert!(page.contains("id=\"rwe-runs\"") && page.contains("typed"), "{page}");

    assert_eq!(vera.get("/api/evaluations/not-an-eval").await.0, StatusCode::NOT_FOUND);
    assert_eq!(vera.get("/api/evaluations/..").await.0, StatusCode::BAD_REQUEST);
    assert_eq!(vera.get("/api/evaluations/%2e%2e%2fetc").await.0, StatusCode::BAD_REQUEST);
    // Without --evaluations: a 404 that says how to start the server.
    let plain = Client::login(&router(AppState::new(f.session())), "vera").await;
    let (status, body) = plain.get("/api/evaluations").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("--evaluations DIR"), "{body}");
}
