//! `evident serve`: the JSON API and the review UI over the application
//! layer, the only crate that speaks HTTP. Every handler authenticates the
//! caller, checks the role, and calls one `evident_app` job on a blocking
//! thread; no orchestration lives here.
//!
//! - [`bind`]: where the server may listen (loopback unless opted in).
//! - [`auth`]: session cookies, CSRF, the login rate limit, roles.
//! - [`api`]: the JSON routes, each with the metadata the OpenAPI
//!   document is generated from ([`openapi`]).
//! - [`pages`]: the server-rendered review UI (maud escapes every value);
//!   `job_pages` (jobs, the chart question and its answer) and
//!   `study_pages` (study runs' bundles) and `eval_pages` (evaluation
//!   output folders) beside it.
//! - [`jobs`]: background jobs over HTTP: start, follow as server-sent
//!   events, resume.
//! - [`tls`]: the server's own HTTPS (rustls) from PEM files.

pub mod api;
pub mod auth;
pub mod bind;
mod error;
mod eval_pages;
mod job_pages;
pub mod jobs;
pub mod openapi;
pub mod pages;
mod study_pages;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::http::{header, HeaderValue};
use axum::Router;
use evident_app::Session;

pub use bind::{check_bind, BindError};
pub use error::ApiError;
pub use tls::TlsError;

/// What every handler shares: the session over the store, the login
/// rate limiter, and the folder of study runs the study pages read.
#[derive(Clone)]
pub struct AppState {
    pub session: Arc<Session>,
    pub limiter: Arc<auth::LoginLimiter>,
    /// A folder whose subfolders are `evident study` run folders (each
    /// with its `bundle.json`); `None`: no study pages.
    pub studies: Option<Arc<PathBuf>>,
    /// The server's TLS configuration; `None`: plain HTTP (loopback, or
    /// with the insecure-remote opt-in). With it, cookies are `Secure`.
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    /// A folder whose subfolders are `evident eval` output folders;
    /// `None`: no evaluation pages.
    pub evaluations: Option<Arc<PathBuf>>,
    /// Requests being answered at once (see [`admit`]).
    pub admission: Arc<tokio::sync::Semaphore>,
}

/// How many requests are answered at once: twice the cores, at least 4.
/// The rest wait their turn first come, first served, so under load every
/// request waits about as long as the others instead of some being
/// starved while many share the cores.
pub fn admission_permits() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get() * 2).max(4)
}

impl AppState {
    pub fn new(session: Session) -> AppState {
        AppState {
            session: Arc::new(session),
            limiter: Arc::new(auth::LoginLimiter::default()),
            studies: None,
            tls: None,
            evaluations: None,
            admission: Arc::new(tokio::sync::Semaphore::new(admission_permits())),
        }
    }

    /// With the study pages over the run folders in `dir`.
    pub fn with_studies(mut self, dir: PathBuf) -> AppState {
        self.studies = Some(Arc::new(dir));
        self
    }

    /// With the evaluation pages over the `evident eval` output folders in `dir`.
    pub fn with_evaluations(mut self, dir: PathBuf) -> AppState {
        self.evaluations = Some(Arc::new(dir));
        self
    }

    /// Served over HTTPS with `config` (see [`tls::load`]).
    pub fn with_tls(mut self, config: Arc<tokio_rustls::rustls::ServerConfig>) -> AppState {
        self.tls = Some(config);
        self
    }

    /// Whether cookies must carry `Secure` (the server speaks HTTPS).
    pub fn secure_cookies(&self) -> bool {
        self.tls.is_some()
    }
}

/// The Content-Security-Policy of every response: scripts and styles only
/// from this server's files (no inline script can run), no frames, forms
/// post only here.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

/// The whole application: API, pages, static files, security headers and
/// the CSRF check on every state-changing request.
pub fn router(state: AppState) -> Router {
    let mut api_router = Router::new();
    for (doc, method_router) in api::routes() {
        api_router = api_router.route(doc.path, method_router);
    }
    Router::new()
        .merge(api_router)
        .merge(pages::routes())
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::csrf_guard))
        .layer(axum::middleware::map_response(security_headers))
        .layer(axum::middleware::from_fn_with_state(state.clone(), admit))
        .with_state(state)
}

/// Waits for one of the [`admission_permits`] before answering, in
/// arrival order; a job's server-sent events (a stream that stays open)
/// take none.
async fn admit(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let path = request.uri().path();
    if path.starts_with("/api/jobs/") && path.ends_with("/events") {
        return next.run(request).await;
    }
    let _permit = state.admission.clone().acquire_owned().await;
    next.run(request).await
}

async fn security_headers(mut response: axum::response::Response) -> axum::response::Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Serves until the process is stopped (Ctrl-C ends it cleanly). Calls
/// `ready` with the address bound (port 0 picks a free one).
pub fn serve(session: Session, addr: SocketAddr, ready: impl FnOnce(SocketAddr)) -> std::io::Result<()> {
    serve_state(AppState::new(session), addr, ready)
}

/// [`serve`] with the state built by the caller (e.g. with study pages, or
/// TLS: then it speaks only HTTPS). Jobs a previous server process left
/// queued or running are marked interrupted first (they can be resumed).
pub fn serve_state(state: AppState, addr: SocketAddr, ready: impl FnOnce(SocketAddr)) -> std::io::Result<()> {
    match evident_app::jobs::recover(&state.session) {
        Ok(0) => {}
        Ok(n) => eprintln!("evident serve: {n} job(s) left unfinished by the previous server are marked interrupted"),
        Err(e) => return Err(std::io::Error::other(format!("cannot open the store: {e}"))),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        ready(listener.local_addr()?);
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        match state.tls.clone() {
            None => {
                let app = router(state);
                axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
                    .with_graceful_shutdown(shutdown)
                    .await
            }
            Some(config) => {
                use axum::serve::ListenerExt;
                let listener = tls::TlsListener::new(listener, config)?.tap_io(|_| {});
                let app = router(state);
                axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
                    .with_graceful_shutdown(shutdown)
                    .await
            }
        }
    })
}
