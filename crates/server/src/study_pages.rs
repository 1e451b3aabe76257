//! Study pages over the run folders of `evident serve --studies DIR`:
//! the list of runs, and one run's evidence bundle rendered here from its
//! JSON (task, results and score, the cohort audit with any attrition
//! table, the answers, and the agent's trace step by step), plus the
//! bundle itself as JSON.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use evident_app::studies;
use maud::{html, Markup};
use serde_json::Value;

use crate::api::check_id;
use crate::auth::{blocking, CurrentUser};
use crate::pages::{enc, layout, page_user, PageResult};
use crate::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new().route("/studies", get(studies_page)).route("/studies/{study}", get(study_page))
}

fn studies_dir(state: &AppState) -> Result<std::path::PathBuf, ApiError> {
    state
        .studies
        .as_deref()
        .cloned()
        .ok_or_else(|| ApiError::NotFound("this server shows no studies; start it with --studies DIR".into()))
}

/// `GET /api/studies`.
pub async fn api_list(State(state): State<AppState>, _user: CurrentUser) -> Result<Response, ApiError> {
    let dir = studies_dir(&state)?;
    Ok(Json(blocking(move || studies::list(&dir)).await?).into_response())
}

/// `GET /api/studies/{study}`: the bundle as written.
pub async fn api_bundle(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(study): Path<String>,
) -> Result<Response, ApiError> {
    check_id("study", &study)?;
    let dir = studies_dir(&state)?;
    Ok(Json(blocking(move || studies::bundle(&dir, &study)).await?).into_response())
}

async fn studies_page(State(state): State<AppState>, headers: HeaderMap) -> PageResult {
    let user = page_user(&state, &headers).await?;
    let content = match state.studies.as_deref().cloned() {
        None => {
            html! { h1 { "Studies" } p { "This server shows no studies: start it with " code { "evident serve --studies DIR" } ", DIR holding " code { "evident study" } " run folders." } }
        }
        Some(dir) => {
            let list = blocking(move || studies::list(&dir)).await?;
            html! {
                h1 { "Studies" }
                @if list.is_empty() { p { "No run folder with a bundle.json." } }
                table #studies {
                    thead { tr { th { "Run" } th { "Task" } th { "Strategy" } th { "Model" } th { "Success" } th { "Steps" } } }
                    tbody {
                        @for s in &list {
                            tr {
                                td { a href=(format!("/studies/{}", enc(&s.name))) { (s.name) } }
                                td { (s.task.as_deref().unwrap_or("")) }
                                td { (s.strategy.as_deref().unwrap_or("")) }
                                td { (s.model.as_deref().unwrap_or("")) }
                                td { (s.success.map(|b| if b { "yes" } else { "no" }).unwrap_or("")) }
                                td.num { (s.steps.map(|n| n.to_string()).unwrap_or_default()) }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout("Studies", Some(&user), content).into_response())
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// An object's scalar fields as a two-column table; nested values as JSON.
fn fields(v: &Value) -> Markup {
    html! {
        table.fields {
            tbody {
                @if let Some(map) = v.as_object() {
                    @for (k, x) in map {
                        tr { th { (k) } td {
                            @if x.is_object() || x.is_array() { pre { (serde_json::to_string_pretty(x).unwrap_or_default()) } }
                            @else { (scalar(x)) }
                        } }
                    }
                }
            }
        }
    }
}

/// Every `attrition` array of step objects anywhere in the bundle.
fn find_attrition<'a>(v: &'a Value, out: &mut Vec<&'a Vec<Value>>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                match x {
                    Value::Array(steps)
                        if k == "attrition"
                            || k == "steps"
                                && steps.iter().all(|s| s.get("remaining").is_some())
                                && !steps.is_empty() =>
                    {
                        out.push(steps)
                    }
                    Value::Object(inner) if k == "attrition" => {
                        if let Some(Value::Array(steps)) = inner.get("steps") {
                            out.push(steps);
                        }
                    }
                    _ => find_attrition(x, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|x| find_attrition(x, out)),
        _ => {}
    }
}

async fn study_page(State(state): State<AppState>, headers: HeaderMap, Path(study): Path<String>) -> PageResult {
    let user = page_user(&state, &headers).await?;
    check_id("study", &study)?;
    let dir = studies_dir(&state)?;
    let name = study.clone();
    let b = blocking(move || studies::bundle(&dir, &name)).await?;
    let task = b.get("task").cloned().unwrap_or(Value::Null);
    let audit = b.get("cohort_audit").cloned().unwrap_or(Value::Null);
    let mut attrition = Vec::new();
    find_attrition(&audit, &mut attrition);
    let steps = b.pointer("/run/steps").and_then(Value::as_array).cloned().unwrap_or_default();
    let content = html! {
        p { a href="/studies" { "← Studies" } }
        h1 { "Study " (study) }
        p.sub { (scalar(task.get("title").unwrap_or(&Value::Null))) " · task " code { (scalar(task.get("id").unwrap_or(&Value::Null))) }
            " · strategy " (scalar(b.get("strategy").unwrap_or(&Value::Null))) " · model " (scalar(b.get("model").unwrap_or(&Value::Null)))
            " · " a href=(format!("/api/studies/{}", enc(&study))) { "bundle.json" } }
        section #results {
            h2 { "Results" }
            h3 { "Score" } (fields(b.get("score").unwrap_or(&Value::Null)))
            h3 { "Answers" } (fields(b.get("answers").unwrap_or(&Value::Null)))
        }
        section #attrition {
            h2 { "Attrition" }
            @if attrition.is_empty() { p { "The bundle has no attrition table." } }
            @for table in &attrition {
                table.attrition {
                    thead { tr { th { "Step" } th { "Kind" } th { "Remaining" } th { "Removed" } } }
                    tbody { @for s in table.iter() { tr {
                        td { (scalar(s.get("description").unwrap_or(&Value::Null))) }
                        td { (scalar(s.get("kind").unwrap_or(&Value::Null))) }
                        td.num { (scalar(s.get("remaining").unwrap_or(&Value::Null))) }
                        td.num { (scalar(s.get("removed").unwrap_or(&Value::Null))) }
                    } } }
                }
            }
        }
        section #audit {
            h2 { "Cohort audit" }
            @if audit.is_null() { p { "No cohort audit (the agent exported no cohort)." } } @else { (fields(&audit)) }
            h3 { "Database" } (fields(b.get("database").unwrap_or(&Value::Null)))
        }
        section #trace {
            h2 { "Trace (" (steps.len()) " steps, termination " (scalar(b.pointer("/run/termination").unwrap_or(&Value::Null))) ")" }
            @for s in &steps {
                details.step {
                    summary { "Step " (scalar(s.get("step").unwrap_or(&Value::Null))) ": " code { (scalar(s.get("action").unwrap_or(&Value::Null)).chars().take(160).collect::<String>()) } }
                    h4 { "Output" } pre { (scalar(s.get("output").unwrap_or(&Value::Null))) }
                    h4 { "Observation" } pre { (scalar(s.get("observation").unwrap_or(&Value::Null))) }
                }
            }
        }
    };
    Ok(layout(&format!("Study {study}"), Some(&user), content).into_response())
}
