//! `DatabaseUrl`: which database a study reads. `sqlite:PATH` is the
//! embedded default (a main file with one attached sibling file per schema,
//! see [`crate::sqlite`]); `postgres://USER:PASSWORD@HOST:PORT/DATABASE`
//! (or `postgresql://`) is a PostgreSQL server. Parsing checks the form
//! only; whether the database is there is found on connecting.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::DbError;

/// A parsed database URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// `sqlite:PATH`: the main SQLite file; the schemas `mimiciv_hosp`,
    /// `mimiciv_icu` and `mimiciv_derived` live in sibling files that
    /// every connection attaches.
    Sqlite { path: PathBuf },
    /// `postgres://...`: a libpq-style URL, kept as written.
    Postgres { url: String },
}

const EXPECTED: &str = "expected sqlite:PATH (the embedded default) or postgres://USER:PASSWORD@HOST:PORT/DATABASE";

impl DatabaseUrl {
    /// Parses `sqlite:PATH` (also `sqlite://PATH`) or `postgres://...` /
    /// `postgresql://...`.
    pub fn parse(text: &str) -> Result<DatabaseUrl, DbError> {
        let error = |message: String| DbError::Url { url: redact(text), message };
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(error(format!("no file named after sqlite:; {EXPECTED}")));
            }
            return Ok(DatabaseUrl::Sqlite { path: PathBuf::from(path) });
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            let config = postgres::Config::from_str(text)
                .map_err(|e| error(format!("not a valid PostgreSQL URL ({e}); {EXPECTED}")))?;
            if config.get_hosts().is_empty() {
                return Err(error(format!("no host; {EXPECTED}")));
            }
            if config.get_user().is_none() {
                return Err(error(format!("no user; {EXPECTED}")));
            }
            return Ok(DatabaseUrl::Postgres { url: text.to_string() });
        }
        let hint = if text.ends_with(".db") || text.ends_with(".sqlite") || !text.contains("://") {
            format!("; for a SQLite file write sqlite:{text}")
        } else {
            String::new()
        };
        Err(error(format!("{EXPECTED}{hint}")))
    }

    /// The SQLite main file, if this is a SQLite URL.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            DatabaseUrl::Sqlite { path } => Some(path),
            DatabaseUrl::Postgres { .. } => None,
        }
    }

    /// True for PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        matches!(self, DatabaseUrl::Postgres { .. })
    }

    /// The URL with its password replaced by `***`, for messages and logs.
    pub fn redacted(&self) -> String {
        match self {
            DatabaseUrl::Sqlite { path } => format!("sqlite:{}", path.display()),
            DatabaseUrl::Postgres { url } => redact(url),
        }
    }

    /// The URL as written, password included (to hand to a client such as
    /// R's DBI); never print it.
    pub fn expose(&self) -> String {
        match self {
            DatabaseUrl::Sqlite { path } => format!("sqlite:{}", path.display()),
            DatabaseUrl::Postgres { url } => url.clone(),
        }
    }

    pub(crate) fn postgres_config(&self) -> Result<postgres::Config, DbError> {
        match self {
            DatabaseUrl::Postgres { url } => {
                postgres::Config::from_str(url).map_err(|e| DbError::Url { url: redact(url), message: e.to_string() })
            }
            DatabaseUrl::Sqlite { .. } => {
                Err(DbError::Url { url: self.redacted(), message: "not a PostgreSQL URL".into() })
            }
        }
    }

    /// The same PostgreSQL server and database reached as another role.
    pub(crate) fn with_credentials(&self, user: &str, password: &str) -> Result<DatabaseUrl, DbError> {
        let DatabaseUrl::Postgres { url } = self else {
            return Err(DbError::Url { url: self.redacted(), message: "not a PostgreSQL URL".into() });
        };
        let (scheme, rest) = url.split_once("://").expect("checked on parse");
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let host_part = match rest[..authority_end].rfind('@') {
            Some(at) => &rest[at + 1..],
            None => rest,
        };
        Ok(DatabaseUrl::Postgres { url: format!("{scheme}://{user}:{password}@{host_part}") })
    }
}

/// A PostgreSQL URL's parts, for clients that take them one by one (R's
/// `DBI::dbConnect(RPostgreSQL::PostgreSQL(), host =, port =, user =,
/// password =, dbname =)`). Debug hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresParams {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    /// The database; the user's name when the URL names none (libpq's rule).
    pub dbname: String,
}

impl std::fmt::Debug for PostgresParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresParams")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &"***")
            .field("dbname", &self.dbname)
            .finish()
    }
}

impl DatabaseUrl {
    /// The parts of a PostgreSQL URL (None for SQLite). The host is the
    /// first TCP host (a Unix-socket URL gives its folder).
    pub fn postgres_params(&self) -> Option<PostgresParams> {
        let config = self.postgres_config().ok()?;
        let host = match config.get_hosts().first()? {
            postgres::config::Host::Tcp(host) => host.clone(),
            postgres::config::Host::Unix(path) => path.display().to_string(),
        };
        let user = config.get_user()?.to_string();
        Some(PostgresParams {
            host,
            port: config.get_ports().first().copied().unwrap_or(5432),
            password: config.get_password().map(|p| String::from_utf8_lossy(p).into_owned()).unwrap_or_default(),
            dbname: config.get_dbname().map(str::to_string).unwrap_or_else(|| user.clone()),
            user,
        })
    }

    /// The same PostgreSQL server and role, another database (SQLite URLs
    /// are returned unchanged).
    pub fn with_database(&self, database: &str) -> DatabaseUrl {
        let DatabaseUrl::Postgres { url } = self else { return self.clone() };
        let (scheme, rest) = url.split_once("://").expect("checked on parse");
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let query = rest[authority_end..].find('?').map(|q| &rest[authority_end + q..]).unwrap_or("");
        DatabaseUrl::Postgres { url: format!("{scheme}://{}/{database}{query}", &rest[..authority_end]) }
    }
}

impl FromStr for DatabaseUrl {
    type Err = DbError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        DatabaseUrl::parse(text)
    }
}

/// Shows the redacted form: a password never reaches a message by accident.
impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// `scheme://user:secret@host/db` -> `scheme://user:***@host/db`; other
/// text unchanged.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else { return url.to_string() };
    match rest[..at].split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_name_a_file() {
        assert_eq!(DatabaseUrl::parse("sqlite:demo.db").unwrap(), DatabaseUrl::Sqlite { path: "demo.db".into() });
        assert_eq!(DatabaseUrl::parse("sqlite:///tmp/x.db").unwrap(), DatabaseUrl::Sqlite { path: "/tmp/x.db".into() });
        let err = DatabaseUrl::parse("sqlite:").unwrap_err().to_string();
        assert!(err.contains("no file named"), "{err}");
    }

    #[test]
    fn postgres_urls_keep_their_text_and_hide_the_password() {
        let url = DatabaseUrl::parse("postgres://evident:secret@127.0.0.1:5432/mimic").unwrap();
        assert!(url.is_postgres());
        assert_eq!(url.to_string(), "postgres://evident:***@127.0.0.1:5432/mimic");
        assert_eq!(url.expose(), "postgres://evident:secret@127.0.0.1:5432/mimic");
        let other = url.with_credentials("ro_1", "pw").unwrap();
        assert_eq!(other.expose(), "postgres://ro_1:pw@127.0.0.1:5432/mimic");
        assert!(DatabaseUrl::parse("postgresql://u@localhost/db").is_ok());
        assert_eq!(url.with_database("other").expose(), "postgres://evident:secret@127.0.0.1:5432/other");
        let params = url.postgres_params().unwrap();
        assert_eq!((params.host.as_str(), params.port, params.user.as_str()), ("127.0.0.1", 5432, "evident"));
        assert_eq!((params.password.as_str(), params.dbname.as_str()), ("secret", "mimic"));
        assert!(!format!("{params:?}").contains("secret"));
        assert_eq!(DatabaseUrl::parse("postgres://u@h").unwrap().postgres_params().unwrap().dbname, "u");
        let with_query = DatabaseUrl::parse("postgres://u:p@h/db?sslmode=disable").unwrap();
        assert_eq!(with_query.with_database("x").expose(), "postgres://u:p@h/x?sslmode=disable");
    }

    #[test]
    fn other_urls_are_refused_with_the_expected_forms() {
        let err = DatabaseUrl::parse("demo.db").unwrap_err();
        assert!(err.is_input());
        let text = err.to_string();
        assert!(text.contains("expected sqlite:PATH") && text.contains("write sqlite:demo.db"), "{text}");
        let text = DatabaseUrl::parse("mysql://u:p@h/db").unwrap_err().to_string();
        assert!(text.contains("postgres://USER:PASSWORD@HOST"), "{text}");
        assert!(!text.contains(":p@"), "password leaked: {text}");
        let text = DatabaseUrl::parse("postgres://u:p@h:notaport/db").unwrap_err().to_string();
        assert!(text.contains("not a valid PostgreSQL URL"), "{text}");
    }
}
