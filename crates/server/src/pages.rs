//! The review UI: server-rendered HTML (maud escapes every interpolated
//! value, so record text can never become markup), one stylesheet and one
//! small script served from this crate (the Content-Security-Policy
//! forbids inline script). Pages: login, the screening runs, a run's
//! worklist with filters, a patient's criteria table with cited sentences
//! highlighted and overrides and sign-off, a whole document with the cited
//! sentences marked, and the audit trail. Forms post with the session's
//! CSRF token and redirect back (303).

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use evident_app::review::{self, CriterionReview, OverrideRequest};
use evident_app::users::{random_token, Role};
use evident_match::decision::{Eligibility, TrialVerdict};
use evident_match::Decision;
use maud::{html, Markup, DOCTYPE};
use serde::Deserialize;

use crate::api::{check_id, csv_response, do_login, WorklistQuery};
use crate::auth::{self, blocking, current_user, CurrentUser, LOGIN_CSRF_COOKIE};
use crate::{ApiError, AppState};

const STYLE: &str = include_str!("../static/app.css");
const SCRIPT: &str = include_str!("../static/app.js");
/// Patients per worklist page.
pub const WORKLIST_PAGE_ROWS: usize = 100;

pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(crate::job_pages::routes())
        .route("/", get(home))
        .route("/login", get(login_page).post(login_submit))
        .route("/logout", post(logout))
        .route("/runs/{run}", get(worklist_page))
        .route("/runs/{run}/patients/{patient}", get(patient_page))
        .route("/runs/{run}/patients/{patient}/overrides", post(override_submit))
        .route("/runs/{run}/patients/{patient}/signoff", post(signoff_submit))
        .route("/runs/{run}/export.csv", get(export_csv))
        .route("/patients/{patient}/documents/{document}", get(document_page))
        .route("/audit", get(audit_page))
        .route("/audit.csv", get(audit_csv))
        .route("/static/app.css", get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE) }))
        .route("/static/app.js", get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], SCRIPT) }))
}

/// A page error: not logged in goes to the login page; the rest is shown
/// as a small page with the safe message.
pub(crate) struct PageError(pub(crate) ApiError);

impl From<ApiError> for PageError {
    fn from(e: ApiError) -> PageError {
        PageError(e)
    }
}

impl From<evident_app::AppError> for PageError {
    fn from(e: evident_app::AppError) -> PageError {
        PageError(e.into())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        if matches!(self.0, ApiError::Unauthenticated) {
            return Redirect::to("/login").into_response();
        }
        if let ApiError::Internal(detail) = &self.0 {
            eprintln!("evident serve: internal error: {detail}");
        }
        let body = layout(
            "Error",
            None,
            html! { h1 { "Error" } p.error { (self.0.message()) } p { a href="/" { "Back to the screening runs" } } },
        );
        (self.0.status(), body).into_response()
    }
}

pub(crate) type PageResult = Result<Response, PageError>;

pub(crate) fn layout(title: &str, user: Option<&CurrentUser>, content: Markup) -> Html<String> {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Evident" }
                link rel="stylesheet" href="/static/app.css";
                script src="/static/app.js" defer {}
            }
            body {
                header {
                    a.brand href="/" { "Evident review" }
                    @if let Some(user) = user {
                        nav {
                            a href="/" { "Screening runs" }
                            a href="/jobs" { "Jobs" }
                            a href="/chart" { "Ask the chart" }
                            a href="/studies" { "Studies" }
                            a href="/evaluations" { "Evaluations" }
                            a href="/audit" { "Audit trail" }
                            span.user { (user.actor.name) " (" (user.actor.role) ")" }
                            form.inline method="post" action="/logout" {
                                input type="hidden" name="csrf" value=(user.csrf_token);
                                button type="submit" id="logout" { "Log out" }
                            }
                        }
                    }
                }
                main { (content) }
            }
        }
    };
    Html(page.into_string())
}

pub(crate) async fn page_user(state: &AppState, headers: &HeaderMap) -> Result<CurrentUser, PageError> {
    current_user(state, headers).await?.ok_or(PageError(ApiError::Unauthenticated))
}

async fn login_page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Ok(Some(_)) = current_user(&state, &headers).await {
        return Redirect::to("/").into_response();
    }
    login_form(None, StatusCode::OK, state.secure_cookies())
}

fn login_form(message: Option<&str>, status: StatusCode, secure: bool) -> Response {
    let token = random_token();
    let body = layout(
        "Log in",
        None,
        html! {
            h1 { "Log in" }
            @if let Some(m) = message { p.error role="alert" { (m) } }
            form method="post" action="/login" id="login-form" {
                input type="hidden" name="csrf" value=(token);
                label { "User name " input type="text" name="name" id="name" autocomplete="username" required; }
                label { "Password " input type="password" name="password" id="password" autocomplete="current-password" required; }
                button type="submit" id="login" { "Log in" }
            }
        },
    );
    let cookie = format!(
        "{LOGIN_CSRF_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/login; Max-Age=3600{}",
        auth::secure_attr(secure)
    );
    (status, [(header::SET_COOKIE, cookie)], body).into_response()
}

#[derive(Deserialize)]
struct LoginForm {
    name: String,
    password: String,
}

async fn login_submit(State(state): State<AppState>, headers: HeaderMap, Form(form): Form<LoginForm>) -> Response {
    match do_login(&state, &headers, form.name, form.password).await {
        Ok(login) => {
            ([(header::SET_COOKIE, auth::session_cookie(&login.token, state.secure_cookies()))], Redirect::to("/"))
                .into_response()
        }
        Err(e @ (ApiError::Forbidden(_) | ApiError::RateLimited)) => {
            login_form(Some(&e.message()), e.status(), state.secure_cookies())
        }
        Err(e) => PageError(e).into_response(),
    }
}

async fn logout(State(state): State<AppState>, headers: HeaderMap) -> PageResult {
    if let Some(token) = auth::cookie(&headers, auth::SESSION_COOKIE) {
        let s = state.session.clone();
        blocking(move || evident_app::users::logout(&s, &token)).await?;
    }
    Ok(([(header::SET_COOKIE, auth::expired_session_cookie(state.secure_cookies()))], Redirect::to("/login"))
        .into_response())
}

async fn home(State(state): State<AppState>, headers: HeaderMap) -> PageResult {
    let user = page_user(&state, &headers).await?;
    let s = state.session.clone();
    let runs = blocking(move || review::runs(&s)).await?;
    let content = html! {
        h1 { "Screening runs" }
        @if runs.is_empty() {
            p { "No screening run is stored yet. Run " code { "evident match" } " over the store first." }
        } @else {
            table #runs {
                thead { tr { th { "Trial" } th { "Run" } th { "Method" } th { "Patients" } th { "Overrides" } th { "Sign-offs" } th { "Started" } th { "Finished" } } }
                tbody {
                    @for r in &runs {
                        tr {
                            td { (r.trial_id) br; small { (r.trial_title) } }
                            td { a href=(format!("/runs/{}", enc(&r.run_id))) { (r.run_id) } }
                            td { (r.method) }
                            td.num { (r.patients) }
                            td.num { (r.overrides) }
                            td.num { (r.signoffs) }
                            td { (r.created_at) }
                            td { (r.finished_at.as_deref().unwrap_or("not finished")) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout("Screening runs", Some(&user), content).into_response())
}

fn eligibility_text(e: Eligibility) -> &'static str {
    match e {
        Eligibility::Eligible => "eligible",
        Eligibility::NeedsReview => "needs review",
        Eligibility::NotEligible => "not eligible",
        Eligibility::Excluded => "excluded",
    }
}

fn eligibility_key(e: Eligibility) -> &'static str {
    match e {
        Eligibility::Eligible => "eligible",
        Eligibility::NeedsReview => "needs_review",
        Eligibility::NotEligible => "not_eligible",
        Eligibility::Excluded => "excluded",
    }
}

fn verdict_cell(v: &TrialVerdict) -> Markup {
    html! { span class=(format!("badge {}", eligibility_key(v.eligibility))) { (eligibility_text(v.eligibility)) } }
}

/// Percent-encodes an id for a URL path segment.
pub(crate) fn enc(id: &str) -> String {
    let mut out = String::new();
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

async fn worklist_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(run): Path<String>,
    Query(q): Query<WorklistQuery>,
) -> PageResult {
    let user = page_user(&state, &headers).await?;
    check_id("run", &run)?;
    let filter = q.filter.filter(|f| !f.is_empty()).map(|f| review::parse_eligibility(&f)).transpose()?;
    let s = state.session.clone();
    let run_id = run.clone();
    let list = blocking(move || review::worklist(&s, &run_id, filter)).await?;
    let filters = [
        (None, "all"),
        (Some(Eligibility::Eligible), "eligible"),
        (Some(Eligibility::NeedsReview), "needs review"),
        (Some(Eligibility::NotEligible), "not eligible"),
        (Some(Eligibility::Excluded), "excluded"),
    ];
    let base = format!("/runs/{}", enc(&run));
    // One page of the ranked (and filtered) patients.
    let total = list.patients.len();
    let pages = total.div_ceil(WORKLIST_PAGE_ROWS).max(1);
    let page = q.page.unwrap_or(1).clamp(1, pages);
    let first = (page - 1) * WORKLIST_PAGE_ROWS;
    let shown = &list.patients[first.min(total)..(first + WORKLIST_PAGE_ROWS).min(total)];
    let page_href = |n: usize| {
        let mut query = Vec::new();
        if let Some(e) = list.filter {
            query.push(format!("filter={}", eligibility_key(e)));
        }
        if n > 1 {
            query.push(format!("page={n}"));
        }
        if query.is_empty() {
            base.clone()
        } else {
            format!("{base}?{}", query.join("&"))
        }
    };
    let pager = html! {
        @if pages > 1 {
            nav.pager aria-label="pages" {
                "Patients " (first + 1) "–" (first + shown.len()) " of " (total) " · "
                @if page > 1 { a.prev href=(page_href(page - 1)) { "← previous" } " " }
                "page " (page) " of " (pages)
                @if page < pages { " " a.next href=(page_href(page + 1)) { "next →" } }
            }
        }
    };
    let content = html! {
        h1 { "Worklist: " (list.trial_id) }
        p.sub { (list.trial_title) " · run " code { (list.run_id) } " · " (list.method)
            @if !list.finished { " · not finished" } }
        nav.filters aria-label="filter" {
            @for (f, label) in filters {
                @let href = match f { None => base.clone(), Some(e) => format!("{base}?filter={}", eligibility_key(e)) };
                @if f == list.filter { strong.filter { (label) } } @else { a.filter href=(href) { (label) } }
            }
            a href=(format!("/runs/{}/export.csv", enc(&run))) { "Export CSV" }
            a href=(format!("/api/runs/{}/export.json", enc(&run))) { "Export JSON" }
        }
        (pager)
        table #worklist {
            thead { tr { th { "Rank" } th { "Patient" } th { "Standing" } th { "Model's standing" } th { "Score" } th { "Overrides" } th { "Signed off" } } }
            tbody {
                @for p in shown {
                    tr data-patient=(p.patient_id) {
                        td.num { (p.rank) }
                        td { a.patient href=(format!("{base}/patients/{}", enc(&p.patient_id))) { (p.patient_id) } }
                        td { (verdict_cell(&p.verdict)) }
                        td { (verdict_cell(&p.model_verdict)) }
                        td.num { (format!("{:.2}", p.model_verdict.matching_score)) }
                        td.num { (p.overrides) }
                        td { @if let Some(s) = &p.signed_off { (s.reviewer) " " small { (s.created_at) } } @else { "no" } }
                    }
                }
            }
        }
        (pager)
        @if list.patients.is_empty() { p { "No patient matches this filter." } }
    };
    Ok(layout("Worklist", Some(&user), content).into_response())
}

async fn patient_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((run, patient)): Path<(String, String)>,
) -> PageResult {
    let user = page_user(&state, &headers).await?;
    check_id("run", &run)?;
    check_id("patient", &patient)?;
    let s = state.session.clone();
    let (r, p) = (run.clone(), patient.clone());
    let review = blocking(move || review::patient(&s, &r, &p)).await?;
    let can_review = user.actor.role.can_review();
    let action = format!("/runs/{}/patients/{}", enc(&run), enc(&patient));
    let content = html! {
        p { a href=(format!("/runs/{}", enc(&run))) { "← Worklist " (review.trial_id) } }
        h1 { "Patient " (review.patient_id) }
        p { "Standing: " (verdict_cell(&review.verdict)) " · model's standing: " (verdict_cell(&review.model_verdict)) }
        table #criteria {
            thead { tr { th { "Criterion" } th { "Model's decision" } th { "Confidence" } th { "Rationale and cited sentences" } th { "Review" } } }
            tbody {
                @for c in &review.criteria { (criterion_row(c, &review.patient_id, &action, &user, can_review)) }
            }
        }
        section #signoff {
            h2 { "Sign-off" }
            @if review.signoffs.is_empty() { p { "Not signed off." } }
            ul { @for s in &review.signoffs { li.signoff { "Signed off by " (s.reviewer) " at " (s.created_at) @if !s.note.is_empty() { ": " (s.note) } } } }
            @if can_review {
                form method="post" action=(format!("{action}/signoff")) id="signoff-form" {
                    input type="hidden" name="csrf" value=(user.csrf_token);
                    label { "Note " input type="text" name="note" id="signoff-note"; }
                    button type="submit" id="signoff-button" { "Sign off this patient for this trial" }
                }
            }
        }
    };
    Ok(layout(&format!("Patient {}", review.patient_id), Some(&user), content).into_response())
}

fn criterion_row(c: &CriterionReview, patient: &str, action: &str, user: &CurrentUser, can_review: bool) -> Markup {
    let view = &c.view;
    let assessment = view.result.as_ref().and_then(|r| r.outcome.assessment());
    html! {
        tr.criterion id=(format!("criterion-{}", view.criterion.id)) data-criterion=(view.criterion.id) {
            td {
                strong { (view.criterion.id) } " (" (view.criterion.criterion_type.as_str()) ")" br;
                (view.criterion.text)
            }
            td.decision {
                span.model-decision { (view.label) }
                br; small { "decided by " (view.decided_by.as_str()) }
            }
            td { @if let Some(a) = assessment { (format!("{:?}", a.confidence).to_lowercase()) } }
            td {
                @if let Some(a) = assessment { p.rationale { (a.rationale) } }
                @for e in &view.evidence {
                    div.evidence {
                        a.document href=(format!("/patients/{}/documents/{}?cite={}", enc(patient), enc(&e.document_id),
                            e.passages.iter().flatten().filter(|(_, _, cited)| *cited).map(|(o, _, _)| o.to_string()).collect::<Vec<_>>().join(",")))
                            { (e.title) @if let Some(d) = e.date { " · " (d.date()) } }
                        @for passage in &e.passages {
                            p.passage {
                                @for (ordinal, text, cited) in passage {
                                    @if *cited { mark.cited data-ordinal=(ordinal) { (text) } " " } @else { span { (text) } " " }
                                }
                            }
                        }
                    }
                }
                @for problem in &view.problems { p.problem { (problem) } }
            }
            td.review {
                @if let Some(effective) = &c.effective_decision {
                    @if !c.overrides.is_empty() { p.effective { "In effect: " strong { (effective) } } }
                }
                @for o in &c.overrides {
                    p.override { "Overridden to " strong { (o.decision) } " by " (o.reviewer) " at " (o.created_at) ": " (o.reason) }
                }
                @if can_review {
                    form.override method="post" action=(format!("{action}/overrides")) {
                        input type="hidden" name="csrf" value=(user.csrf_token);
                        input type="hidden" name="criterion_id" value=(view.criterion.id);
                        select name="decision" aria-label="new decision" {
                            @for d in Decision::ALL { option value=(d.as_str()) { (d.as_str()) } }
                        }
                        input type="text" name="reason" placeholder="reason (required)" required aria-label="reason";
                        button type="submit" { "Override" }
                    }
                }
            }
        }
    }
}

#[derive(Deserialize)]
struct OverrideForm {
    criterion_id: String,
    decision: String,
    reason: String,
}

async fn override_submit(
    State(state): State<AppState>,
    user: CurrentUser,
    Path((run, patient)): Path<(String, String)>,
    Form(form): Form<OverrideForm>,
) -> PageResult {
    user.require(Role::Reviewer)?;
    check_id("run", &run)?;
    check_id("patient", &patient)?;
    let s = state.session.clone();
    let back = format!("/runs/{}/patients/{}#criterion-{}", enc(&run), enc(&patient), enc(&form.criterion_id));
    let request = OverrideRequest {
        run_id: run,
        patient_id: patient,
        criterion_id: form.criterion_id,
        decision: form.decision,
        reason: form.reason,
    };
    blocking(move || review::override_decision(&s, &user.actor, &request)).await?;
    Ok(Redirect::to(&back).into_response())
}

#[derive(Deserialize)]
struct SignoffForm {
    #[serde(default)]
    note: String,
}

async fn signoff_submit(
    State(state): State<AppState>,
    user: CurrentUser,
    Path((run, patient)): Path<(String, String)>,
    Form(form): Form<SignoffForm>,
) -> PageResult {
    user.require(Role::Reviewer)?;
    check_id("run", &run)?;
    check_id("patient", &patient)?;
    let s = state.session.clone();
    let back = format!("/runs/{}/patients/{}#signoff", enc(&run), enc(&patient));
    blocking(move || review::sign_off(&s, &user.actor, &run, &patient, &form.note)).await?;
    Ok(Redirect::to(&back).into_response())
}

#[derive(Deserialize)]
struct DocumentQuery {
    /// Sentence ordinals to mark, comma-separated.
    cite: Option<String>,
    /// Byte spans to mark (`start-end`, comma-separated): a chart answer's
    /// citations; a sentence overlapping one is marked.
    span: Option<String>,
}

async fn document_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((patient, document)): Path<(String, String)>,
    Query(q): Query<DocumentQuery>,
) -> PageResult {
    let user = page_user(&state, &headers).await?;
    check_id("patient", &patient)?;
    check_id("document", &document)?;
    let mut cited: Vec<i64> =
        q.cite.unwrap_or_default().split(',').filter_map(|s| s.trim().parse().ok()).take(1000).collect();
    let spans: Vec<(usize, usize)> = q
        .span
        .unwrap_or_default()
        .split(',')
        .filter_map(|s| s.split_once('-').and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?))))
        .take(1000)
        .collect();
    let s = state.session.clone();
    let doc = blocking(move || review::document(&s, &patient, &document)).await?;
    for sentence in &doc.sentences {
        if spans.iter().any(|&(start, end)| sentence.start < end && start < sentence.end) {
            cited.push(sentence.ordinal);
        }
    }
    // The text between sentences (whitespace, headings the splitter left
    // out) is shown too, so the whole document reads as stored.
    let mut pieces: Vec<(String, Option<i64>)> = Vec::new();
    let mut at = 0usize;
    for s in &doc.sentences {
        if s.start > at && s.start <= doc.text.len() {
            pieces.push((doc.text.get(at..s.start).unwrap_or("").to_string(), None));
        }
        pieces.push((s.text.clone(), Some(s.ordinal)));
        at = s.end.max(at);
    }
    if at < doc.text.len() {
        pieces.push((doc.text.get(at..).unwrap_or("").to_string(), None));
    }
    let content = html! {
        h1 { (doc.title) }
        p.sub { "Patient " (doc.patient_id) " · " (doc.kind.as_str()) @if let Some(d) = doc.date { " · " (d) } " · " code { (doc.id) } }
        div #document.document {
            @for (text, ordinal) in &pieces {
                @match ordinal {
                    Some(o) if cited.contains(o) => { mark.cited id=(format!("s{o}")) data-ordinal=(o) { (text) } }
                    Some(o) => { span id=(format!("s{o}")) data-ordinal=(o) { (text) } }
                    None => { (text) }
                }
            }
        }
    };
    Ok(layout(&doc.title, Some(&user), content).into_response())
}

async fn audit_page(State(state): State<AppState>, headers: HeaderMap) -> PageResult {
    let user = page_user(&state, &headers).await?;
    let s = state.session.clone();
    let entries = blocking(move || review::audit(&s)).await?;
    let content = html! {
        h1 { "Audit trail" }
        p { a href="/audit.csv" { "Export CSV" } " · " a href="/api/audit" { "JSON" } }
        table #audit {
            thead { tr { th { "#" } th { "When" } th { "Who" } th { "What" } th { "Subject" } th { "Before" } th { "After" } th { "Reason" } } }
            tbody {
                @for e in entries.iter().rev() {
                    tr.audit-entry {
                        td.num { (e.id) } td { (e.at) } td { (e.actor) } td { (e.action) } td { (e.subject) }
                        td { code { (e.before_json.as_deref().unwrap_or("")) } }
                        td { code { (e.after_json.as_deref().unwrap_or("")) } }
                        td { (e.reason) }
                    }
                }
            }
        }
    };
    Ok(layout("Audit trail", Some(&user), content).into_response())
}

async fn export_csv(State(state): State<AppState>, headers: HeaderMap, Path(run): Path<String>) -> PageResult {
    page_user(&state, &headers).await?;
    check_id("run", &run)?;
    let s = state.session.clone();
    let text = blocking(move || review::export(&s, &run).and_then(|rows| review::export_csv(&rows))).await?;
    Ok(csv_response(text, "decisions.csv"))
}

async fn audit_csv(State(state): State<AppState>, headers: HeaderMap) -> PageResult {
    page_user(&state, &headers).await?;
    let s = state.session.clone();
    let text = blocking(move || review::audit(&s).and_then(|rows| review::audit_csv(&rows))).await?;
    Ok(csv_response(text, "audit.csv"))
}
