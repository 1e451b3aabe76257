//! Errors as HTTP answers: a 4xx with a safe message for what the caller
//! can fix, a 500 with a fixed message for everything else (the detail
//! goes to the server's log, which never carries note text: the app
//! layer's messages name ids and inputs, not record contents).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use evident_app::AppError;

#[derive(Debug)]
pub enum ApiError {
    /// Not logged in (or the session expired).
    Unauthenticated,
    /// Logged in, but the role does not allow it.
    Forbidden(String),
    /// A state-changing request without the session's CSRF token.
    Csrf,
    /// Too many failed logins.
    RateLimited,
    BadRequest(String),
    NotFound(String),
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthenticated => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::Csrf => StatusCode::FORBIDDEN,
            ApiError::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message the caller sees.
    pub fn message(&self) -> String {
        match self {
            ApiError::Unauthenticated => "log in first".into(),
            ApiError::Forbidden(m) | ApiError::BadRequest(m) | ApiError::NotFound(m) => m.clone(),
            ApiError::Csrf => "missing or wrong CSRF token; reload the page and try again".into(),
            ApiError::RateLimited => "too many failed logins; wait a few minutes and try again".into(),
            ApiError::Internal(_) => "internal error; the server's log has the detail".into(),
        }
    }
}

impl From<AppError> for ApiError {
    fn from(e: AppError) -> ApiError {
        match e {
            AppError::NotFound(message) => ApiError::NotFound(message),
            AppError::Input(message) => ApiError::BadRequest(message),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(detail) = &self {
            eprintln!("evident serve: internal error: {detail}");
        }
        (self.status(), Json(serde_json::json!({ "error": self.message() }))).into_response()
    }
}
