//! Background jobs over HTTP: start one (the app layer records it and its
//! audit entry), hand it to a thread of this process that calls
//! [`evident_app::jobs::run`], and follow it as server-sent events read
//! from the store (so a client that reconnects, or one that comes after a
//! restart, sees the same state). No orchestration lives here: what a job
//! does, and that one runs at a time, is the app layer's.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use evident_app::jobs::{self, JobRequest, JobView};
use evident_app::users::{Actor, Role};
use evident_app::Session;

use crate::api::check_id;
use crate::auth::{blocking, CurrentUser};
use crate::{ApiError, AppState};

/// How often an event stream reads the job's row.
const POLL: Duration = Duration::from_millis(400);

/// Records the job and starts it on a thread of its own.
pub async fn start_job(state: &AppState, actor: Actor, request: JobRequest) -> Result<JobView, ApiError> {
    let s = state.session.clone();
    let job = blocking(move || jobs::start(&s, &actor, &request)).await?;
    spawn(state.session.clone(), job.id.clone());
    Ok(job)
}

/// Resumes an interrupted or failed job as a new one, started at once.
pub async fn resume_job(state: &AppState, actor: Actor, job_id: String) -> Result<JobView, ApiError> {
    let s = state.session.clone();
    let job = blocking(move || jobs::resume(&s, &actor, &job_id)).await?;
    spawn(state.session.clone(), job.id.clone());
    Ok(job)
}

fn spawn(session: Arc<Session>, job_id: String) {
    let name = format!("evident-{job_id}");
    let started = std::thread::Builder::new().name(name).spawn(move || {
        if let Err(e) = jobs::run(&session, &job_id) {
            eprintln!("evident serve: job {job_id} could not be recorded: {e}");
        }
    });
    if let Err(e) = started {
        eprintln!("evident serve: cannot start a job thread: {e}");
    }
}

pub async fn create(
    State(state): State<AppState>,
    user: CurrentUser,
    Json(request): Json<JobRequest>,
) -> Result<Response, ApiError> {
    user.require(Role::Reviewer)?;
    let job = start_job(&state, user.actor, request).await?;
    Ok((StatusCode::ACCEPTED, Json(job)).into_response())
}

pub async fn resume(
    State(state): State<AppState>,
    user: CurrentUser,
    Path(job): Path<String>,
) -> Result<Response, ApiError> {
    user.require(Role::Reviewer)?;
    check_id("job", &job)?;
    let job = resume_job(&state, user.actor, job).await?;
    Ok((StatusCode::ACCEPTED, Json(job)).into_response())
}

pub async fn list(State(state): State<AppState>, _user: CurrentUser) -> Result<Response, ApiError> {
    let s = state.session.clone();
    Ok(Json(blocking(move || jobs::list(&s, 200)).await?).into_response())
}

pub async fn show(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(job): Path<String>,
) -> Result<Response, ApiError> {
    check_id("job", &job)?;
    let s = state.session.clone();
    Ok(Json(blocking(move || jobs::get(&s, &job)).await?).into_response())
}

/// The job's state as server-sent events: a `progress` event whenever its
/// row changes, then one `end` event when it is over, and the stream
/// closes. Each event's data is the job as `GET /api/jobs/{job}` gives it.
pub async fn events(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(job): Path<String>,
) -> Result<Response, ApiError> {
    check_id("job", &job)?;
    let s = state.session.clone();
    let id = job.clone();
    // Unknown jobs are a 404 before the stream starts.
    blocking(move || jobs::get(&s, &id)).await?;
    let session = state.session.clone();
    let stream =
        futures_util::stream::unfold((session, job, None::<String>, false), |(session, job, seen, over)| async move {
            if over {
                return None;
            }
            loop {
                let s = session.clone();
                let id = job.clone();
                let current = match tokio::task::spawn_blocking(move || jobs::get(&s, &id)).await {
                    Ok(Ok(view)) => view,
                    _ => return None,
                };
                if seen.as_deref() != Some(current.updated_at.as_str()) || current.is_over() {
                    let name = if current.is_over() { "end" } else { "progress" };
                    let event = Event::default().event(name).json_data(&current).unwrap_or_default();
                    let over = current.is_over();
                    return Some((Ok::<Event, Infallible>(event), (session, job, Some(current.updated_at), over)));
                }
                tokio::time::sleep(POLL).await;
            }
        });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}
