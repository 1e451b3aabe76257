//! Who is asking, and may they: the session cookie (HttpOnly,
//! SameSite=Strict), the CSRF check every state-changing request passes
//! through, the login rate limit, and role checks.
//!
//! CSRF: each login session has a random token; a POST must carry it in
//! the `X-CSRF-Token` header or a `csrf` form field. The login form (no
//! session yet) uses a double-submit cookie; the JSON login needs a JSON
//! body, which a cross-site form cannot send.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::{to_bytes, Body};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use evident_app::users::{self, Actor, Role};

use crate::{ApiError, AppState};

pub const SESSION_COOKIE: &str = "evident_session";
pub const LOGIN_CSRF_COOKIE: &str = "evident_login_csrf";
pub const CSRF_HEADER: &str = "x-csrf-token";
/// Bodies of state-changing requests are read whole to find the token.
const MAX_FORM_BYTES: usize = 64 * 1024;

/// Failed logins allowed per name (and per client address) in the window.
pub const LOGIN_FAILURES_ALLOWED: usize = 5;
pub const LOGIN_WINDOW: Duration = Duration::from_secs(300);

/// Counts failed logins per key (a user name, a client address); a key
/// with too many recent failures is refused until the oldest ages out.
#[derive(Default)]
pub struct LoginLimiter {
    failures: Mutex<HashMap<String, Vec<Instant>>>,
}

impl LoginLimiter {
    pub fn is_blocked(&self, keys: &[String]) -> bool {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        keys.iter().any(|k| {
            let list = failures.entry(k.clone()).or_default();
            list.retain(|t| now.duration_since(*t) < LOGIN_WINDOW);
            list.len() >= LOGIN_FAILURES_ALLOWED
        })
    }

    pub fn failed(&self, keys: &[String]) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        for k in keys {
            failures.entry(k.clone()).or_default().push(Instant::now());
        }
    }
}

/// The signed-in user of a request, with the session's CSRF token.
#[derive(Debug, Clone)]
pub struct CurrentUser {
    pub actor: Actor,
    pub csrf_token: String,
}

impl CurrentUser {
    /// Refuses unless the user's role is at least `role`.
    pub fn require(&self, role: Role) -> Result<(), ApiError> {
        if self.actor.role >= role {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "this needs the {role} role; {} is a {}",
                self.actor.name, self.actor.role
            )))
        }
    }
}

/// The cookie named `name`, if the request has it.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then(|| v.to_string())
    })
}

/// Looks the session cookie up in the store.
pub async fn current_user(state: &AppState, headers: &HeaderMap) -> Result<Option<CurrentUser>, ApiError> {
    let Some(token) = cookie(headers, SESSION_COOKIE) else {
        return Ok(None);
    };
    if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let session = state.session.clone();
    let found = blocking(move || users::authenticate(&session, &token)).await?;
    Ok(found.map(|(actor, csrf_token)| CurrentUser { actor, csrf_token }))
}

impl FromRequestParts<AppState> for CurrentUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(user) = parts.extensions.get::<CurrentUser>() {
            return Ok(user.clone());
        }
        current_user(state, &parts.headers).await?.ok_or(ApiError::Unauthenticated)
    }
}

/// Runs an app job on a blocking thread.
pub async fn blocking<T: Send + 'static>(
    job: impl FnOnce() -> evident_app::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    match tokio::task::spawn_blocking(job).await {
        Ok(result) => Ok(result?),
        Err(e) => Err(ApiError::Internal(format!("a job panicked: {e}"))),
    }
}

/// `; Secure` when the server speaks HTTPS (the browser then never sends
/// the cookie over plain HTTP), else nothing.
pub fn secure_attr(secure: bool) -> &'static str {
    if secure {
        "; Secure"
    } else {
        ""
    }
}

/// The `Set-Cookie` value of a login session.
pub fn session_cookie(token: &str, secure: bool) -> String {
    format!(
        "{SESSION_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
        users::SESSION_HOURS * 3600,
        secure_attr(secure)
    )
}

pub fn expired_session_cookie(secure: bool) -> String {
    format!("{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{}", secure_attr(secure))
}

/// Every request other than GET and HEAD must carry the CSRF token of its
/// session (or, for the login form, of its double-submit cookie; for the
/// JSON login, a JSON body). Reads form bodies whole to find the field,
/// then hands the request on unchanged.
pub async fn csrf_guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        return next.run(request).await;
    }
    let path = request.uri().path().to_string();
    let is_form = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let is_json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let header_token = request.headers().get(CSRF_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string);
    let (parts, body) = request.into_parts();
    let bytes = match to_bytes(body, MAX_FORM_BYTES).await {
        Ok(b) => b,
        Err(_) => return ApiError::BadRequest("request body too large".into()).into_response(),
    };
    let form_token = if is_form { form_field(&bytes, "csrf") } else { None };
    let sent = header_token.or(form_token);
    let ok = if path == "/api/login" {
        is_json
    } else if path == "/login" {
        let expected = cookie(&parts.headers, LOGIN_CSRF_COOKIE);
        matches!((&sent, &expected), (Some(s), Some(e)) if !e.is_empty() && constant_time_eq(s, e))
    } else {
        match current_user(&state, &parts.headers).await {
            Ok(Some(user)) => {
                let ok = sent.as_deref().is_some_and(|s| constant_time_eq(s, &user.csrf_token));
                if ok {
                    let mut request = Request::from_parts(parts, Body::from(bytes));
                    request.extensions_mut().insert(user);
                    return next.run(request).await;
                }
                false
            }
            Ok(None) => return ApiError::Unauthenticated.into_response(),
            Err(e) => return e.into_response(),
        }
    };
    if !ok {
        return ApiError::Csrf.into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// One field of an urlencoded form.
pub fn form_field(bytes: &[u8], name: &str) -> Option<String> {
    let fields: Vec<(String, String)> = serde_urlencoded::from_bytes(bytes).ok()?;
    fields.into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
