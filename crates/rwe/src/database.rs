//! The study database as the rest of this crate needs it, over
//! `evident-db`: identifier lookups for the cohort audit's rule checks on a
//! [`ReadOnlyConnection`], and how sandboxed R reaches a [`DatabaseUrl`]
//! (the SQLite files to mount read-only, or PostgreSQL's Unix socket).

use std::collections::BTreeSet;

use evident_db::{DatabaseUrl, DbError, ReadOnlyConnection, Value};

use crate::audit::{IdColumn, IdentifierLookup};
use crate::sandbox::RDatabase;

/// Identifiers are looked up this many at a time (below the connection's
/// row limit).
const CHUNK: usize = 500;

impl IdentifierLookup for ReadOnlyConnection {
    fn existing(&mut self, column: IdColumn, ids: &[i64]) -> Result<BTreeSet<i64>, String> {
        let mut found = BTreeSet::new();
        for chunk in ids.chunks(CHUNK) {
            let list: Vec<String> = chunk.iter().map(i64::to_string).collect();
            let sql = format!(
                "SELECT DISTINCT {c} FROM {t} WHERE {c} IN ({})",
                list.join(", "),
                c = column.name(),
                t = column.table()
            );
            let result = self.query(&sql).map_err(|e| e.to_string())?;
            for row in result.rows {
                match row.first() {
                    Some(Value::Integer(id)) => {
                        found.insert(*id);
                    }
                    Some(other) => {
                        if let Some(id) = other.as_f64() {
                            found.insert(id as i64);
                        }
                    }
                    None => {}
                }
            }
        }
        Ok(found)
    }
}

/// How sandboxed R reaches `url`. For PostgreSQL the URL should be the
/// run's read-only role ([`ReadOnlyConnection::agent_url`]); R reaches the
/// server through a forwarded Unix socket, since the sandbox has no network.
pub fn r_database(url: &DatabaseUrl) -> Result<RDatabase, DbError> {
    match url {
        DatabaseUrl::Sqlite { path } => {
            let main = path.canonicalize().map_err(|e| DbError::Connect {
                url: url.redacted(),
                message: format!("{e}; load the database first"),
            })?;
            let attach = evident_db::sqlite::attached_schemas(&main)?;
            Ok(RDatabase::Sqlite { main, attach })
        }
        DatabaseUrl::Postgres { .. } => {
            let parts = postgres_parts(&url.expose()).ok_or_else(|| DbError::Connect {
                url: url.redacted(),
                message: "cannot read user, port and database from the URL".into(),
            })?;
            Ok(RDatabase::Postgres {
                host: parts.host,
                port: parts.port,
                dbname: parts.dbname,
                user: parts.user,
                password: parts.password,
            })
        }
    }
}

struct PostgresParts {
    host: String,
    user: String,
    password: String,
    port: u16,
    dbname: String,
}

/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?...]`.
fn postgres_parts(url: &str) -> Option<PostgresParts> {
    let rest = url.strip_prefix("postgres://").or_else(|| url.strip_prefix("postgresql://"))?;
    let (auth, rest) = rest.rsplit_once('@')?;
    let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
    let (hostport, db) = rest.split_once('/')?;
    let dbname = db.split('?').next()?.to_string();
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().ok()?),
        None => (hostport.to_string(), 5432),
    };
    Some(PostgresParts { host, user: decode(user), password: decode(password), port, dbname: decode(&dbname) })
}

/// Percent-decoding of a URL component.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_urls_give_their_parts() {
        let p = postgres_parts("postgres://rwe_run_7:s%40cret@localhost:5433/mimic?sslmode=disable").unwrap();
        assert_eq!(
            (p.user.as_str(), p.password.as_str(), p.port, p.dbname.as_str()),
            ("rwe_run_7", "s@cret", 5433, "mimic")
        );
        let p = postgres_parts("postgresql://evident@db/mimic").unwrap();
        assert_eq!((p.user.as_str(), p.password.as_str(), p.port), ("evident", "", 5432));
        assert!(postgres_parts("sqlite:x").is_none());
    }
}
