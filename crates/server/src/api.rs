//! The JSON API. Each route is one entry of [`routes`]: its handler and
//! the metadata the OpenAPI document is generated from, side by side, so
//! a route cannot exist undocumented. Each handler checks the role and
//! calls one `evident_app` job.

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Json;
use evident_app::users::{self, AddUser, Role};
use evident_app::{records, review, runs, search};
use serde::Deserialize;

use crate::auth::{self, blocking, CurrentUser};
use crate::{eval_pages, jobs, openapi, study_pages, ApiError, AppState};

/// What the OpenAPI document says about one route.
#[derive(Debug, Clone)]
pub struct ApiDoc {
    pub method: &'static str,
    /// With `{name}` for path parameters (axum's syntax and OpenAPI's).
    pub path: &'static str,
    pub summary: &'static str,
    pub tag: &'static str,
    /// The least role that may call it; `None`: anyone.
    pub role: Option<Role>,
    /// Query parameters: (name, description, required).
    pub query: &'static [(&'static str, &'static str, bool)],
    /// JSON request body: (field, type, description, required).
    pub body: &'static [(&'static str, &'static str, &'static str, bool)],
    /// Media type of the success response.
    pub produces: &'static str,
    pub state_changing: bool,
}

const JSON: &str = "application/json";
const CSV: &str = "text/csv";

fn doc(method: &'static str, path: &'static str, tag: &'static str, summary: &'static str) -> ApiDoc {
    ApiDoc {
        method,
        path,
        summary,
        tag,
        role: Some(Role::Viewer),
        query: &[],
        body: &[],
        produces: JSON,
        state_changing: method != "get",
    }
}

/// Every API route with its documentation.
pub fn routes() -> Vec<(ApiDoc, MethodRouter<AppState>)> {
    vec![
        (
            ApiDoc {
                role: None,
                body: &[("name", "string", "user name", true), ("password", "string", "password", true)],
                ..doc("post", "/api/login", "session", "Log in; sets the session cookie and returns the CSRF token")
            },
            post(login),
        ),
        (doc("post", "/api/logout", "session", "Log out (ends the session)"), post(logout)),
        (doc("get", "/api/me", "session", "The signed-in user, role and CSRF token"), get(me)),
        (ApiDoc { role: None, ..doc("get", "/api/openapi.json", "meta", "This document") }, get(openapi_json)),
        (doc("get", "/api/patients", "records", "Patients with document and lab counts"), get(patients)),
        (doc("get", "/api/patients/{patient}", "records", "One patient's documents and lab summary"), get(patient)),
        (
            doc(
                "get",
                "/api/patients/{patient}/documents/{document}",
                "records",
                "One document: text and sentences with byte spans",
            ),
            get(document),
        ),
        (
            ApiDoc {
                query: &[
                    ("concept", "lab concept name, alias or LOINC code", false),
                    ("since", "only values at or after this date (YYYY-MM-DD)", false),
                ],
                ..doc("get", "/api/patients/{patient}/labs", "records", "A patient's lab values in time order")
            },
            get(labs),
        ),
        (
            ApiDoc {
                query: &[("q", "the query", true), ("k", "number of hits (default 10, at most 100)", false)],
                ..doc("get", "/api/patients/{patient}/search", "records", "BM25 search of one patient's sections")
            },
            get(search_patient),
        ),
        (
            doc("get", "/api/trials", "screening", "Trials of the stored screening runs, with their criteria"),
            get(trials),
        ),
        (doc("get", "/api/runs", "screening", "Stored screening runs, newest first"), get(screening_runs)),
        (
            ApiDoc {
                query: &[("filter", "eligible, needs_review, not_eligible or excluded (overrides applied)", false)],
                ..doc(
                    "get",
                    "/api/runs/{run}/worklist",
                    "screening",
                    "A run's patients ranked, with and without overrides",
                )
            },
            get(worklist),
        ),
        (
            doc(
                "get",
                "/api/runs/{run}/patients/{patient}",
                "screening",
                "One patient's decisions with cited sentences, overrides and sign-offs",
            ),
            get(patient_review),
        ),
        (
            ApiDoc {
                role: Some(Role::Reviewer),
                body: &[
                    ("criterion_id", "string", "the criterion overridden", true),
                    ("decision", "string", "MET, NOT MET, NOT ENOUGH INFORMATION or NOT APPLICABLE", true),
                    ("reason", "string", "why (required, not empty)", true),
                ],
                ..doc(
                    "post",
                    "/api/runs/{run}/patients/{patient}/overrides",
                    "review",
                    "Override one decision (stored beside the model's, audited)",
                )
            },
            post(add_override),
        ),
        (
            ApiDoc {
                role: Some(Role::Reviewer),
                body: &[("note", "string", "optional note", false)],
                ..doc(
                    "post",
                    "/api/runs/{run}/patients/{patient}/signoff",
                    "review",
                    "Sign off a patient-trial pair (audited)",
                )
            },
            post(sign_off),
        ),
        (
            doc(
                "get",
                "/api/runs/{run}/export.json",
                "review",
                "Decisions with overrides applied and the original kept",
            ),
            get(export_json),
        ),
        (
            ApiDoc {
                produces: CSV,
                ..doc("get", "/api/runs/{run}/export.csv", "review", "Decisions with overrides applied, as CSV")
            },
            get(export_csv),
        ),
        (doc("get", "/api/audit", "review", "The audit trail, oldest first"), get(audit)),
        (ApiDoc { produces: CSV, ..doc("get", "/api/audit.csv", "review", "The audit trail as CSV") }, get(audit_csv)),
        (doc("get", "/api/model-runs", "models", "Model runs with usage (tokens, cost, latency)"), get(model_runs)),
        (doc("get", "/api/model-runs/{run}", "models", "One model run's calls"), get(model_run)),
        (
            doc("get", "/api/jobs", "jobs", "Background jobs (screenings, chart questions), newest first"),
            get(jobs::list),
        ),
        (
            ApiDoc {
                role: Some(Role::Reviewer),
                body: &[
                    ("kind", "string", "screening or chart", true),
                    ("trial_from_run", "string", "screening: re-screen with this stored run's criteria", false),
                    (
                        "criteria",
                        "string",
                        "screening: criteria text (Evident set, ClinicalTrials.gov study, or eligibility text)",
                        false,
                    ),
                    ("trial_id", "string", "screening: the trial id for eligibility text", false),
                    ("title", "string", "screening: the trial title for eligibility text", false),
                    ("patients", "array", "screening: patient ids (default every patient)", false),
                    ("patient_id", "string", "chart: the patient", false),
                    ("question", "string", "chart: the question", false),
                    ("as_of", "string", "chart: reference date YYYY-MM-DD (default the last document's date)", false),
                    ("method", "string", "screening strategy (default ican) or chart method (default agent)", false),
                    ("model", "string", "a known or configured model (default the embedded one)", false),
                ],
                ..doc("post", "/api/jobs", "jobs", "Start a background job (audited); answers 202 with the queued job")
            },
            post(jobs::create),
        ),
        (doc("get", "/api/jobs/{job}", "jobs", "One job: state, progress, result or error"), get(jobs::show)),
        (
            ApiDoc {
                produces: "text/event-stream",
                ..doc(
                    "get",
                    "/api/jobs/{job}/events",
                    "jobs",
                    "The job's progress as server-sent events (progress, then end), each with the job as JSON",
                )
            },
            get(jobs::events),
        ),
        (
            ApiDoc {
                role: Some(Role::Reviewer),
                ..doc(
                    "post",
                    "/api/jobs/{job}/resume",
                    "jobs",
                    "Start an interrupted or failed job again as a new job that resumes it (audited)",
                )
            },
            post(jobs::resume),
        ),
        (
            doc("get", "/api/studies", "studies", "Study run folders (evident serve --studies DIR) with their scores"),
            get(study_pages::api_list),
        ),
        (
            doc("get", "/api/studies/{study}", "studies", "One study run's evidence bundle (bundle.json as written)"),
            get(study_pages::api_bundle),
        ),
        (
            doc(
                "get",
                "/api/evaluations",
                "evaluations",
                "Evaluation output folders (evident serve --evaluations DIR): kind, methods, size",
            ),
            get(eval_pages::api_list),
        ),
        (
            doc(
                "get",
                "/api/evaluations/{evaluation}",
                "evaluations",
                "One evaluation: its result JSON as written (RWE: each run's task scores) and its summary table",
            ),
            get(eval_pages::api_one),
        ),
        (ApiDoc { role: Some(Role::Admin), ..doc("get", "/api/users", "admin", "Local accounts") }, get(list_users)),
        (
            ApiDoc {
                role: Some(Role::Admin),
                body: &[
                    ("name", "string", "user name", true),
                    ("role", "string", "viewer, reviewer or admin", true),
                    ("password", "string", "at least 8 characters", true),
                ],
                ..doc("post", "/api/users", "admin", "Add a local account (audited)")
            },
            post(add_user),
        ),
    ]
}

/// Refuses ids with characters no record id has (no path tricks reach a job).
pub fn check_id(what: &str, id: &str) -> Result<(), ApiError> {
    let ok = !id.is_empty() && id.len() <= 256 && !id.contains("..") && !id.chars().any(|c| c.is_control() || c == '/');
    if ok {
        Ok(())
    } else {
        Err(ApiError::BadRequest(format!("{what} id is not valid")))
    }
}

#[derive(Deserialize)]
struct LoginBody {
    name: String,
    password: String,
}

/// Logs in for the JSON API and the pages alike.
pub async fn do_login(
    state: &AppState,
    headers: &axum::http::HeaderMap,
    name: String,
    password: String,
) -> Result<users::Login, ApiError> {
    let _ = headers;
    let keys = vec![format!("user:{name}")];
    if state.limiter.is_blocked(&keys) {
        return Err(ApiError::RateLimited);
    }
    let session = state.session.clone();
    let found = blocking(move || users::login(&session, &name, &password)).await?;
    match found {
        Some(login) => Ok(login),
        None => {
            state.limiter.failed(&keys);
            Err(ApiError::Forbidden("wrong user name or password".into()))
        }
    }
}

async fn login(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    Json(body): Json<LoginBody>,
) -> Result<Response, ApiError> {
    let login = do_login(&state, &headers, body.name, body.password).await?;
    let json =
        serde_json::json!({ "name": login.actor.name, "role": login.actor.role, "csrf_token": login.csrf_token });
    Ok(([(header::SET_COOKIE, auth::session_cookie(&login.token, state.secure_cookies()))], Json(json)).into_response())
}

async fn logout(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Result<Response, ApiError> {
    if let Some(token) = auth::cookie(&headers, auth::SESSION_COOKIE) {
        let session = state.session.clone();
        blocking(move || users::logout(&session, &token)).await?;
    }
    Ok(([(header::SET_COOKIE, auth::expired_session_cookie(state.secure_cookies()))], StatusCode::NO_CONTENT)
        .into_response())
}

async fn me(user: CurrentUser) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "name": user.actor.name, "role": user.actor.role, "csrf_token": user.csrf_token }))
}

async fn openapi_json() -> Json<serde_json::Value> {
    Json(openapi::document())
}

async fn patients(State(state): State<AppState>, _user: CurrentUser) -> Result<Response, ApiError> {
    let s = state.session.clone();
    Ok(Json(blocking(move || records::patients(&s)).await?).into_response())
}

async fn patient(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(patient): Path<String>,
) -> Result<Response, ApiError> {
    check_id("patient", &patient)?;
    let s = state.session.clone();
    Ok(Json(blocking(move || records::show(&s, &patient)).await?).into_response())
}

async fn document(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path((patient, document)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_id("patient", &patient)?;
    check_id("document", &document)?;
    let s = state.session.clone();
    Ok(Json(blocking(move || review::document(&s, &patient, &document)).await?).into_response())
}

#[derive(Deserialize)]
struct LabsQuery {
    concept: Option<String>,
    since: Option<String>,
}

async fn labs(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(patient): Path<String>,
    Query(q): Query<LabsQuery>,
) -> Result<Response, ApiError> {
    check_id("patient", &patient)?;
    let s = state.session.clone();
    let request = records::LabRequest { patient_id: patient, concept: q.concept, since: q.since };
    Ok(Json(blocking(move || records::labs(&s, &request)).await?).into_response())
}

#[derive(Deserialize)]
struct SearchQuery {
    q: String,
    k: Option<usize>,
}

async fn search_patient(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(patient): Path<String>,
    Query(q): Query<SearchQuery>,
) -> Result<Response, ApiError> {
    check_id("patient", &patient)?;
    let s = state.session.clone();
    let request = search::SearchRequest {
        patient_id: patient,
        query: q.q,
        kinds: Vec::new(),
        since: None,
        until: None,
        recent: None,
        mode: evident_retrieve::Mode::Bm25,
        fusion: search::FusionKind::ReciprocalRank,
        alpha: None,
        k: q.k.unwrap_or(10).clamp(1, 100),
        embedder: evident_app::EmbedderChoice::default(),
    };
    Ok(Json(blocking(move || search::search(&s, &request, &evident_app::Silent)).await?).into_response())
}

async fn trials(State(state): State<AppState>, _user: CurrentUser) -> Result<Response, ApiError> {
    let s = state.session.clone();
    Ok(Json(blocking(move || review::trials(&s)).await?).into_response())
}

async fn screening_runs(State(state): State<AppState>, _user: CurrentUser) -> Result<Response, ApiError> {
    let s = state.session.clone();
    Ok(Json(blocking(move || review::runs(&s)).await?).into_response())
}

#[derive(Deserialize)]
pub struct WorklistQuery {
    pub filter: Option<String>,
    /// The worklist page's page number, from 1 (the API answers every patient).
    pub page: Option<usize>,
}

async fn worklist(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(run): Path<String>,
    Query(q): Query<WorklistQuery>,
) -> Result<Response, ApiError> {
    check_id("run", &run)?;
    let s = state.session.clone();
    let filter = q.filter.filter(|f| !f.is_empty()).map(|f| review::parse_eligibility(&f)).transpose()?;
    Ok(Json(blocking(move || review::worklist(&s, &run, filter)).await?).into_response())
}

async fn patient_review(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path((run, patient)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_id("run", &run)?;
    check_id("patient", &patient)?;
    let s = state.session.clone();
    Ok(Json(blocking(move || review::patient(&s, &run, &patient)).await?).into_response())
}

#[derive(Deserialize)]
struct OverrideBody {
    criterion_id: String,
    decision: String,
    reason: String,
}

async fn add_override(
    State(state): State<AppState>,
    user: CurrentUser,
    Path((run, patient)): Path<(String, String)>,
    Json(body): Json<OverrideBody>,
) -> Result<Response, ApiError> {
    user.require(Role::Reviewer)?;
    check_id("run", &run)?;
    check_id("patient", &patient)?;
    let s = state.session.clone();
    let request = review::OverrideRequest {
        run_id: run,
        patient_id: patient,
        criterion_id: body.criterion_id,
        decision: body.decision,
        reason: body.reason,
    };
    let stored = blocking(move || review::override_decision(&s, &user.actor, &request)).await?;
    Ok((StatusCode::CREATED, Json(stored)).into_response())
}

#[derive(Deserialize)]
struct SignoffBody {
    #[serde(default)]
    note: String,
}

async fn sign_off(
    State(state): State<AppState>,
    user: CurrentUser,
    Path((run, patient)): Path<(String, String)>,
    Json(body): Json<SignoffBody>,
) -> Result<Response, ApiError> {
    user.require(Role::Reviewer)?;
    check_id("run", &run)?;
    check_id("patient", &patient)?;
    let s = state.session.clone();
    let stored = blocking(move || review::sign_off(&s, &user.actor, &run, &patient, &body.note)).await?;
    Ok((StatusCode::CREATED, Json(stored)).into_response())
}

async fn export_json(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(run): Path<String>,
) -> Result<Response, ApiError> {
    check_id("run", &run)?;
    let s = state.session.clone();
    Ok(Json(blocking(move || review::export(&s, &run)).await?).into_response())
}

async fn export_csv(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(run): Path<String>,
) -> Result<Response, ApiError> {
    check_id("run", &run)?;
    let s = state.session.clone();
    let text = blocking(move || review::export(&s, &run).and_then(|rows| review::export_csv(&rows))).await?;
    Ok(csv_response(text, "decisions.csv"))
}

async fn audit(State(state): State<AppState>, _user: CurrentUser) -> Result<Response, ApiError> {
    let s = state.session.clone();
    Ok(Json(blocking(move || review::audit(&s)).await?).into_response())
}

async fn audit_csv(State(state): State<AppState>, _user: CurrentUser) -> Result<Response, ApiError> {
    let s = state.session.clone();
    let text = blocking(move || review::audit(&s).and_then(|rows| review::audit_csv(&rows))).await?;
    Ok(csv_response(text, "audit.csv"))
}

pub fn csv_response(text: String, file: &str) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{file}\"")),
        ],
        text,
    )
        .into_response()
}

async fn model_runs(State(state): State<AppState>, _user: CurrentUser) -> Result<Response, ApiError> {
    let s = state.session.clone();
    Ok(Json(blocking(move || runs::list(&s)).await?).into_response())
}

async fn model_run(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(run): Path<String>,
) -> Result<Response, ApiError> {
    check_id("model run", &run)?;
    let s = state.session.clone();
    Ok(Json(blocking(move || runs::show(&s, &run)).await?).into_response())
}

async fn list_users(State(state): State<AppState>, user: CurrentUser) -> Result<Response, ApiError> {
    user.require(Role::Admin)?;
    let s = state.session.clone();
    Ok(Json(blocking(move || users::list(&s)).await?).into_response())
}

#[derive(Deserialize)]
struct AddUserBody {
    name: String,
    role: String,
    password: String,
}

async fn add_user(
    State(state): State<AppState>,
    user: CurrentUser,
    Json(body): Json<AddUserBody>,
) -> Result<Response, ApiError> {
    user.require(Role::Admin)?;
    let role = Role::parse(&body.role)?;
    let s = state.session.clone();
    let request = AddUser { name: body.name, role, password: body.password };
    let added = blocking(move || users::add(&s, &request, &user.actor.name)).await?;
    Ok((StatusCode::CREATED, Json(added)).into_response())
}
