//! Evaluation pages over the output folders of `evident serve
//! --evaluations DIR` (what `evident eval trialgpt`, `eval chart` and
//! `eval rwe` wrote): the list, one evaluation's table as the command
//! printed it and its result JSON, and both over the API. Read-only.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use evident_app::evaluations;
use maud::html;

use crate::api::check_id;
use crate::auth::{blocking, CurrentUser};
use crate::pages::{enc, layout, page_user, PageResult};
use crate::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new().route("/evaluations", get(list_page)).route("/evaluations/{evaluation}", get(one_page))
}

fn evaluations_dir(state: &AppState) -> Result<std::path::PathBuf, ApiError> {
    state
        .evaluations
        .as_deref()
        .cloned()
        .ok_or_else(|| ApiError::NotFound("this server shows no evaluations; start it with --evaluations DIR".into()))
}

/// `GET /api/evaluations`.
pub async fn api_list(State(state): State<AppState>, _user: CurrentUser) -> Result<Response, ApiError> {
    let dir = evaluations_dir(&state)?;
    Ok(Json(blocking(move || evaluations::list(&dir)).await?).into_response())
}

/// `GET /api/evaluations/{evaluation}`: the result as written.
pub async fn api_one(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    check_id("evaluation", &name)?;
    let dir = evaluations_dir(&state)?;
    Ok(Json(blocking(move || evaluations::show(&dir, &name)).await?).into_response())
}

async fn list_page(State(state): State<AppState>, headers: HeaderMap) -> PageResult {
    let user = page_user(&state, &headers).await?;
    let content = match state.evaluations.as_deref().cloned() {
        None => html! {
            h1 { "Evaluations" }
            p { "This server shows no evaluations: start it with " code { "evident serve --evaluations DIR" } ", DIR holding the output folders of " code { "evident eval trialgpt" } ", " code { "eval chart" } " or " code { "eval rwe" } "." }
        },
        Some(dir) => {
            let list = blocking(move || evaluations::list(&dir)).await?;
            html! {
                h1 { "Evaluations" }
                @if list.is_empty() { p { "No evaluation folder (eval.json, results.json or run-N/TASK/bundle.json)." } }
                table #evaluations {
                    thead { tr { th { "Evaluation" } th { "Kind" } th { "Methods" } th { "Size" } th { "Written (UTC)" } } }
                    tbody {
                        @for e in &list {
                            tr {
                                td { a href=(format!("/evaluations/{}", enc(&e.name))) { (e.name) } }
                                td { (serde_json::to_value(e.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()) }
                                td { (e.methods.join(", ")) }
                                td { (e.size) }
                                td { (e.written.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout("Evaluations", Some(&user), content).into_response())
}

async fn one_page(State(state): State<AppState>, headers: HeaderMap, Path(name): Path<String>) -> PageResult {
    let user = page_user(&state, &headers).await?;
    check_id("evaluation", &name)?;
    let dir = evaluations_dir(&state)?;
    let e = blocking(move || evaluations::show(&dir, &name)).await?;
    let kind = serde_json::to_value(e.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    let content = html! {
        h1 { "Evaluation " (e.name) }
        p { "evident eval " (kind) @if let Some(w) = &e.written { ", written " (w) " UTC" } "; "
            a href=(format!("/api/evaluations/{}", enc(&e.name))) { "the result as JSON" } }
        @if let Some(summary) = &e.summary {
            h2 { "Summary" }
            pre #summary { (summary) }
        }
        @if let Some(runs) = e.result.get("runs").and_then(|r| r.as_array()).filter(|_| e.summary.is_none()) {
            h2 { "Runs" }
            table #rwe-runs {
                thead { tr { th { "Run" } th { "Task" } th { "Strategy" } th { "Model" } th { "Score" } } }
                tbody {
                    @for run in runs {
                        @for t in run["tasks"].as_array().into_iter().flatten() {
                            tr {
                                td { (run["run"].as_str().unwrap_or("")) }
                                td { (t["task"].as_str().or(t["folder"].as_str()).unwrap_or("")) }
                                td { (t["strategy"].as_str().unwrap_or("")) }
                                td { (t["model"].as_str().unwrap_or("")) }
                                td { @if let Some(err) = t["error"].as_str() { (err) } @else { pre { (serde_json::to_string_pretty(&t["score"]).unwrap_or_default()) } } }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Result" }
        pre #result { (serde_json::to_string_pretty(&e.result).unwrap_or_default()) }
    };
    Ok(layout(&format!("Evaluation {}", e.name), Some(&user), content).into_response())
}
