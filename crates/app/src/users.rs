//! Local accounts for the review service: add a user with a role (viewer,
//! reviewer, admin) and a password kept as an Argon2id hash, log in (a
//! random session token, of which the store keeps only the sha256, and a
//! CSRF token for the session), find the user behind a token, log out.
//! What a role may do is decided by [`Role`]; the front end asks it.

use std::fmt;

use argon2::password_hash::rand_core::{OsRng, RngCore};
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use evident_store::{NewAuditEntry, UserRecord};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{input_error, AppError, Result};
use crate::session::Session;

/// How long a login lasts.
pub const SESSION_HOURS: i64 = 12;
/// Passwords shorter than this are refused.
pub const MIN_PASSWORD_CHARS: usize = 8;

/// What a user may do: a viewer reads; a reviewer also overrides decisions
/// and signs off; an admin also manages users and starts jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Reviewer,
    Admin,
}

impl Role {
    pub fn parse(text: &str) -> Result<Role> {
        match text.trim().to_ascii_lowercase().as_str() {
            "viewer" => Ok(Role::Viewer),
            "reviewer" => Ok(Role::Reviewer),
            "admin" => Ok(Role::Admin),
            _ => input_error!("role {text:?} is not known; use viewer, reviewer or admin"),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Reviewer => "reviewer",
            Role::Admin => "admin",
        }
    }

    /// Overrides decisions and signs off.
    pub fn can_review(self) -> bool {
        self >= Role::Reviewer
    }

    /// Manages users and starts jobs.
    pub fn can_administer(self) -> bool {
        self == Role::Admin
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A signed-in user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Actor {
    pub name: String,
    pub role: Role,
}

/// A user to add.
#[derive(Debug, Clone)]
pub struct AddUser {
    pub name: String,
    pub role: Role,
    pub password: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct UserAdded {
    pub name: String,
    pub role: Role,
}

impl fmt::Display for UserAdded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "added user {} ({})", self.name, self.role)
    }
}

/// Adds a local account; `by` is who added it (the audit trail's actor).
pub fn add(session: &Session, request: &AddUser, by: &str) -> Result<UserAdded> {
    let name = request.name.trim();
    if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-@".contains(c)) {
        input_error!("user name {name:?} must be 1 to 64 letters, digits or . _ - @");
    }
    if request.password.chars().count() < MIN_PASSWORD_CHARS {
        input_error!("the password must have at least {MIN_PASSWORD_CHARS} characters");
    }
    let salt = SaltString::generate(&mut OsRng);
    let hash = Argon2::default()
        .hash_password(request.password.as_bytes(), &salt)
        .map_err(|e| AppError::Setup(format!("cannot hash the password: {e}")))?
        .to_string();
    let audit = NewAuditEntry {
        actor: by.to_string(),
        action: "user_add".into(),
        subject: format!("user/{name}"),
        before_json: None,
        after_json: Some(serde_json::json!({ "name": name, "role": request.role.as_str() }).to_string()),
        reason: String::new(),
    };
    session.with_store(|store| match store.put_user(name, request.role.as_str(), &hash, &audit) {
        Err(evident_store::StoreError::Invalid(message)) => Err(AppError::Input(message)),
        other => Ok(other?),
    })?;
    Ok(UserAdded { name: name.to_string(), role: request.role })
}

/// The accounts, without their hashes.
pub fn list(session: &Session) -> Result<Vec<UserRecord>> {
    session.with_store(|store| Ok(store.users()?))
}

/// A new login: the cookie's token (never stored), the session's CSRF
/// token and who logged in.
#[derive(Debug, Clone)]
pub struct Login {
    pub token: String,
    pub csrf_token: String,
    pub actor: Actor,
}

/// Checks a name and password; on success starts a session. A wrong name
/// and a wrong password take the same time and give the same `None`.
pub fn login(session: &Session, name: &str, password: &str) -> Result<Option<Login>> {
    let user = session.with_store(|store| Ok(store.user(name)?))?;
    // An unknown user is checked against a fixed hash, so that timing does
    // not tell which names exist.
    let stored = user.as_ref().map(|u| u.password_hash.clone()).unwrap_or_else(|| dummy_hash().to_string());
    let parsed = PasswordHash::new(&stored)
        .map_err(|e| AppError::Setup(format!("a stored password hash is unreadable: {e}")))?;
    let verified = Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok();
    let user = match (user, verified) {
        (Some(user), true) => user,
        _ => return Ok(None),
    };
    let actor = Actor { name: user.name.clone(), role: Role::parse(&user.role)? };
    let token = random_token();
    let csrf_token = random_token();
    let expires = (chrono::Utc::now() + chrono::Duration::hours(SESSION_HOURS)).format(TIME_FORMAT).to_string();
    session
        .with_store(|store| Ok(store.put_web_session(&token_hash(&token), &actor.name, &csrf_token, &expires)?))?;
    Ok(Some(Login { token, csrf_token, actor }))
}

/// The user and CSRF token behind a session token, if it is live.
pub fn authenticate(session: &Session, token: &str) -> Result<Option<(Actor, String)>> {
    let now = chrono::Utc::now().format(TIME_FORMAT).to_string();
    let found = session.with_reader(|store| Ok(store.web_session(&token_hash(token), &now)?))?;
    match found {
        None => Ok(None),
        Some(s) => Ok(Some((Actor { name: s.user_name, role: Role::parse(&s.role)? }, s.csrf_token))),
    }
}

/// Ends a session.
pub fn logout(session: &Session, token: &str) -> Result<()> {
    let now = chrono::Utc::now().format(TIME_FORMAT).to_string();
    session.with_store(|store| Ok(store.end_web_session(&token_hash(token), &now)?))
}

const TIME_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.3fZ";

/// An Argon2id hash of a random password nobody knows, made once.
fn dummy_hash() -> &'static str {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default().hash_password(random_token().as_bytes(), &salt).map(|h| h.to_string()).unwrap_or_default()
    })
}

/// 32 random bytes from the OS, as hex.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}
