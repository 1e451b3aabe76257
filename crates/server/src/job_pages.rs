//! Pages for background jobs: the job list with the form that starts a
//! screening, the chart question form, and one job's page (its progress,
//! followed over server-sent events by the page's script; its result: the
//! screening's worklists, or the chart answer with its two lines, cited
//! passages, the documents retrieved but not cited apart, and the trace).
//! The answer is rendered here from the job's stored JSON.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect};
use axum::routing::{get, post};
use axum::{Form, Router};
use evident_app::jobs::{self, ChartJob, JobRequest, JobView, ScreeningJob};
use evident_app::users::Role;
use evident_app::{records, review};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::Value;

use crate::api::check_id;
use crate::auth::{blocking, CurrentUser};
use crate::jobs::{resume_job, start_job};
use crate::pages::{enc, layout, page_user, PageResult};
use crate::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/jobs", get(jobs_page))
        .route("/jobs/screening", post(screening_submit))
        .route("/jobs/{job}", get(job_page))
        .route("/jobs/{job}/resume", post(resume_submit))
        .route("/chart", get(chart_page).post(chart_submit))
        .merge(crate::study_pages::routes())
        .merge(crate::eval_pages::routes())
}

fn progress_text(j: &JobView) -> String {
    match j.progress_total {
        Some(t) => format!("{} of {t}", j.progress_done),
        None => String::new(),
    }
}

fn job_rows(list: &[JobView]) -> Markup {
    html! {
        table #jobs {
            thead { tr { th { "Job" } th { "Kind" } th { "State" } th { "Progress" } th { "Started by" } th { "Created" } th { "What" } } }
            tbody {
                @for j in list {
                    tr.job data-job=(j.id) {
                        td { a href=(format!("/jobs/{}", enc(&j.id))) { code { (j.id) } } }
                        td { (j.kind) }
                        td { span class=(format!("state {}", j.state)) { (j.state) } }
                        td { (progress_text(j)) }
                        td { (j.requested_by) }
                        td { (j.created_at) }
                        td { (describe_request(&j.request)) }
                    }
                }
            }
        }
    }
}

fn describe_request(r: &Value) -> String {
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match r.get("kind").and_then(Value::as_str) {
        Some("chart") => format!("{}: {}", s("patient_id"), s("question")),
        Some("screening") => {
            let trial = if s("trial_from_run").is_empty() {
                s("trial_id")
            } else {
                format!("trial of {}", s("trial_from_run"))
            };
            format!("{trial} ({})", r.get("method").and_then(Value::as_str).unwrap_or("ican"))
        }
        _ => String::new(),
    }
}

async fn jobs_page(State(state): State<AppState>, headers: HeaderMap) -> PageResult {
    let user = page_user(&state, &headers).await?;
    let s = state.session.clone();
    let (list, runs) = blocking(move || Ok((jobs::list(&s, 200)?, review::runs(&s)?))).await?;
    let content = html! {
        h1 { "Jobs" }
        p.sub { "Screenings and chart questions run in the background by the server; closing the browser does not stop them." }
        @if user.actor.role.can_review() {
            section #start-screening {
                h2 { "Start a screening" }
                @if runs.is_empty() {
                    p { "No stored screening run to take a trial's criteria from; start one with the API (criteria text) or " code { "evident match" } "." }
                } @else {
                    form method="post" action="/jobs/screening" id="screening-form" {
                        input type="hidden" name="csrf" value=(user.csrf_token);
                        label { "Trial (the criteria of a stored run) "
                            select name="trial_from_run" id="trial_from_run" {
                                @for r in &runs { option value=(r.run_id) { (r.trial_id) " · " (r.run_id) } }
                            }
                        }
                        label { "Strategy "
                            select name="method" id="screening-method" {
                                @for m in jobs::screening_methods() { option value=(m) selected[m == "ican"] { (m) } }
                            }
                        }
                        label { "Patients (comma-separated; empty: every patient) " input type="text" name="patients" id="screening-patients"; }
                        button type="submit" id="start-screening-button" { "Start" }
                    }
                }
            }
        }
        h2 { "Recent jobs" }
        @if list.is_empty() { p { "No job yet." } } @else { (job_rows(&list)) }
    };
    Ok(layout("Jobs", Some(&user), content).into_response())
}

#[derive(Deserialize)]
struct ScreeningForm {
    trial_from_run: String,
    #[serde(default)]
    method: String,
    #[serde(default)]
    patients: String,
}

async fn screening_submit(
    State(state): State<AppState>,
    user: CurrentUser,
    Form(form): Form<ScreeningForm>,
) -> PageResult {
    user.require(Role::Reviewer)?;
    check_id("run", &form.trial_from_run)?;
    let patients: Vec<String> =
        form.patients.split([',', ' ', '\n']).map(str::trim).filter(|p| !p.is_empty()).map(str::to_string).collect();
    let request = JobRequest::Screening(ScreeningJob {
        trial_from_run: Some(form.trial_from_run),
        patients: (!patients.is_empty()).then_some(patients),
        method: Some(form.method).filter(|m| !m.is_empty()),
        ..ScreeningJob::default()
    });
    let job = start_job(&state, user.actor, request).await?;
    Ok(Redirect::to(&format!("/jobs/{}", enc(&job.id))).into_response())
}

async fn resume_submit(State(state): State<AppState>, user: CurrentUser, Path(job): Path<String>) -> PageResult {
    user.require(Role::Reviewer)?;
    check_id("job", &job)?;
    let job = resume_job(&state, user.actor, job).await?;
    Ok(Redirect::to(&format!("/jobs/{}", enc(&job.id))).into_response())
}

async fn chart_page(State(state): State<AppState>, headers: HeaderMap) -> PageResult {
    let user = page_user(&state, &headers).await?;
    let s = state.session.clone();
    let (patients, list) = blocking(move || Ok((records::patients(&s)?, jobs::list(&s, 200)?))).await?;
    let asked: Vec<JobView> = list.into_iter().filter(|j| j.kind == "chart").collect();
    let content = html! {
        h1 { "Ask the chart" }
        p.sub { "One question about one patient's record, answered in two lines (answer, reasoning) with citations to the stored text. It runs in the background; the answer page follows it." }
        @if user.actor.role.can_review() {
            form method="post" action="/chart" id="chart-form" {
                input type="hidden" name="csrf" value=(user.csrf_token);
                label { "Patient "
                    select name="patient_id" id="chart-patient" {
                        @for p in &patients.patients { option value=(p.patient.id) { (p.patient.id) } }
                    }
                }
                label { "Question " textarea name="question" id="chart-question" rows="3" cols="80" required {} }
                label { "Reference date (YYYY-MM-DD; empty: the last document's date) " input type="text" name="as_of" id="chart-as-of"; }
                label { "Method "
                    select name="method" id="chart-method" {
                        @for m in jobs::chart_methods() { option value=(m) selected[m == "agent"] { (m) } }
                    }
                }
                label { "Answer type "
                    select name="answer_type" id="chart-answer-type" {
                        option value="" selected { "not stated" }
                        @for t in jobs::chart_answer_types() { option value=(t) { (t) } }
                    }
                }
                button type="submit" id="ask-button" { "Ask" }
            }
        } @else {
            p { "Asking needs the reviewer or admin role." }
        }
        h2 { "Questions asked" }
        @if asked.is_empty() { p { "None yet." } } @else { (job_rows(&asked)) }
    };
    Ok(layout("Ask the chart", Some(&user), content).into_response())
}

#[derive(Deserialize)]
struct ChartForm {
    patient_id: String,
    question: String,
    #[serde(default)]
    as_of: String,
    #[serde(default)]
    method: String,
    #[serde(default)]
    answer_type: String,
}

async fn chart_submit(State(state): State<AppState>, user: CurrentUser, Form(form): Form<ChartForm>) -> PageResult {
    user.require(Role::Reviewer)?;
    check_id("patient", &form.patient_id)?;
    let request = JobRequest::Chart(ChartJob {
        patient_id: form.patient_id,
        question: form.question,
        as_of: Some(form.as_of).filter(|a| !a.trim().is_empty()),
        method: Some(form.method).filter(|m| !m.trim().is_empty()),
        model: None,
        answer_type: Some(form.answer_type).filter(|t| !t.trim().is_empty()),
    });
    let job = start_job(&state, user.actor, request).await?;
    Ok(Redirect::to(&format!("/jobs/{}", enc(&job.id))).into_response())
}

async fn job_page(State(state): State<AppState>, headers: HeaderMap, Path(job): Path<String>) -> PageResult {
    let user = page_user(&state, &headers).await?;
    check_id("job", &job)?;
    let s = state.session.clone();
    let j = blocking(move || jobs::get(&s, &job)).await?;
    let content = html! {
        p { a href="/jobs" { "← Jobs" } }
        h1 { "Job " code { (j.id) } }
        section #job data-job=(j.id) data-state=(j.state) {
            p { (j.kind) " · started by " (j.requested_by) " at " (j.created_at)
                @if let Some(r) = &j.resumes { " · resumes " a href=(format!("/jobs/{}", enc(r))) { code { (r) } } } }
            p { "State: " strong #job-state class=(format!("state {}", j.state)) { (j.state) } }
            p {
                progress #job-progress max=(j.progress_total.unwrap_or(1).max(1)) value=(j.progress_done) {}
                " " span #job-message { (j.message) }
            }
            p.sub { (describe_request(&j.request)) }
        }
        @if let Some(e) = &j.error { p.error #job-error { (e) } }
        @if matches!(j.state.as_str(), "interrupted" | "failed") && user.actor.role.can_review() {
            form method="post" action=(format!("/jobs/{}/resume", enc(&j.id))) id="resume-form" {
                input type="hidden" name="csrf" value=(user.csrf_token);
                button type="submit" id="resume-button" { "Resume (a new job that continues where this one stopped)" }
            }
        }
        @if let Some(result) = &j.result {
            @if j.kind == "screening" { (screening_result(result)) } @else { (chart_answer(result)) }
        }
    };
    Ok(layout(&format!("Job {}", j.id), Some(&user), content).into_response())
}

fn screening_result(result: &Value) -> Markup {
    let runs: Vec<&str> = result
        .get("runs")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    html! {
        section #screening-result {
            h2 { "Result" }
            ul { @for r in runs { li { "Worklist: " a.worklist href=(format!("/runs/{}", enc(r))) { (r) } } } }
        }
    }
}

fn text(v: &Value, key: &str) -> String {
    match v.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// A cited source: stored text (its span marked in its document, one
/// click away), a lab value, or a calculation with what it read.
fn cited_source(patient: &str, source: &Value) -> Markup {
    match source.get("type").and_then(Value::as_str) {
        Some("text") => {
            let doc = text(source, "document_id");
            let href = format!(
                "/patients/{}/documents/{}?span={}-{}",
                enc(patient),
                enc(&doc),
                text(source, "start"),
                text(source, "end")
            );
            html! {
                a.document href=(href) { (doc) @let d = text(source, "date"); @if !d.is_empty() { " · " (d) } }
                p.passage { mark.cited { (text(source, "text")) } }
            }
        }
        Some("lab") => html! {
            span.lab { "Lab " (text(source, "name")) " = " (text(source, "value")) " " (text(source, "unit")) " on " (text(source, "time")) " (" (text(source, "source_id")) ")" }
        },
        Some("calculation") => html! {
            span.calc { (text(source, "calculator")) " → " code { (text(source, "output")) } }
            ul { @for u in source.get("used").and_then(Value::as_array).into_iter().flatten() { li { (cited_source(patient, u)) } } }
        },
        _ => html! { code { (source.to_string()) } },
    }
}

fn chart_answer(result: &Value) -> Markup {
    let patient = text(result, "patient");
    let citations = result.get("citations").and_then(Value::as_array).cloned().unwrap_or_default();
    let not_cited = result.get("retrieved_not_cited").and_then(Value::as_array).cloned().unwrap_or_default();
    let trace = result.get("trace").cloned().unwrap_or(Value::Null);
    let usage = result.get("usage").cloned().unwrap_or(Value::Null);
    html! {
        section #chart-answer {
            h2 { "Answer" }
            p.sub { "Patient " (patient) " · as of " (text(result, "as_of")) " · method " (text(result, "method")) " · model run " code { (text(result, "run")) } }
            p.question { strong { "Question: " } (text(result, "question")) }
            @if text(result, "status") == "answered" {
                p #answer-line { strong { "Answer: " } (text(result, "answer")) }
                p #reasoning-line { strong { "Reasoning: " } (text(result, "reasoning")) }
            } @else {
                p.error #pipeline-failure { "No valid answer (pipeline failure): "
                    @for f in result.get("failure").and_then(Value::as_array).into_iter().flatten() { (f.as_str().unwrap_or("")) "; " } }
                details { summary { "The model's last text" } pre { (text(result, "raw_text")) } }
            }
        }
        section #citations {
            h2 { "Cited" }
            @if citations.is_empty() { p { "No citation." } }
            ol.citations {
                @for c in &citations {
                    li.citation data-number=(text(c, "number")) {
                        strong { "[" (text(c, "number")) "] " }
                        @match c.get("source") {
                            Some(source) if !source.is_null() => { (cited_source(&patient, source)) }
                            _ => { span.error.unsupported { "Unsupported: no context item has this number" } }
                        }
                    }
                }
            }
        }
        section #retrieved-not-cited {
            h2 { "Retrieved, not cited" }
            @if not_cited.is_empty() { p { "None." } }
            ul {
                @for d in &not_cited {
                    li { a href=(format!("/patients/{}/documents/{}", enc(&patient), enc(&text(d, "document_id")))) { (text(d, "document_id")) }
                        " · " (text(d, "kind")) " · " (text(d, "date")) }
                }
            }
        }
        section #trace {
            h2 { "Trace" }
            table.trace {
                tbody {
                    tr { th { "Stopped because" } td { (text(&trace, "stopped_because")) } }
                    tr { th { "Skills" } td { (text(&trace, "skills")) } }
                    tr { th { "Context tokens" } td { (text(&trace, "context_tokens")) } }
                    tr { th { "Synthesis attempts" } td { (text(&trace, "synthesis_attempts")) } }
                    tr { th { "Usage" } td { code { (usage.to_string()) } } }
                }
            }
            @if let Some(plan) = trace.get("plan").filter(|p| !p.is_null()) {
                details { summary { "Plan" } pre { (serde_json::to_string_pretty(plan).unwrap_or_default()) } }
            }
            @for (i, round) in trace.get("rounds").and_then(Value::as_array).into_iter().flatten().enumerate() {
                details.round { summary { "Round " (i + 1) } pre { (serde_json::to_string_pretty(round).unwrap_or_default()) } }
            }
        }
    }
}
