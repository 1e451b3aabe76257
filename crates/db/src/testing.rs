//! For tests of any crate that needs a PostgreSQL database: where the test
//! server is, and a throwaway database on it.
//!
//! The server is found at `EVIDENT_TEST_POSTGRES` when that is set, else at
//! the URL `scripts/setup` writes to `~/.cache/evident/test-postgres-url`
//! when it starts Debian's cluster, else at
//! `postgres://evident:evident@127.0.0.1:5432/evident`. Its role must be
//! allowed to create databases and roles (setup makes it a superuser).
//! Tests fail, saying so, when no server answers: setup guarantees one.

use std::path::PathBuf;

use crate::DatabaseUrl;

/// The test server's admin URL (see the module documentation).
pub fn test_postgres_url() -> String {
    if let Ok(url) = std::env::var("EVIDENT_TEST_POSTGRES") {
        return url;
    }
    if let Some(home) = std::env::var_os("HOME") {
        let file = PathBuf::from(home).join(".cache/evident/test-postgres-url");
        if let Ok(url) = std::fs::read_to_string(file) {
            return url.trim().to_string();
        }
    }
    "postgres://evident:evident@127.0.0.1:5432/evident".to_string()
}

/// A database created on the test server for one test and dropped (with
/// any sessions still on it) when this value is.
pub struct TempPgDatabase {
    /// The database's name, `evident_test_PID_RANDOM`.
    pub name: String,
    /// The admin URL of this database (the test role, this database).
    pub url: DatabaseUrl,
    admin: String,
}

impl TempPgDatabase {
    /// Creates the database; panics, saying what to do, when the test
    /// server does not answer.
    pub fn new() -> TempPgDatabase {
        let admin = test_postgres_url();
        let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap_or_else(|e| {
            panic!(
                "the test PostgreSQL server at {} does not answer ({}); run scripts/setup, which starts it, or set EVIDENT_TEST_POSTGRES",
                DatabaseUrl::parse(&admin).map(|u| u.redacted()).unwrap_or_default(),
                crate::postgres::error_text(&e)
            )
        });
        let name = format!("evident_test_{}_{:08x}", std::process::id(), rand::random::<u32>());
        client.batch_execute(&format!("CREATE DATABASE {name}")).expect("create the test database");
        let base = DatabaseUrl::parse(&admin).expect("the test URL is a PostgreSQL URL");
        let url = base.with_database(&name);
        TempPgDatabase { name, url, admin }
    }

    /// A plain client on this database, as the test role.
    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url.expose(), postgres::NoTls).expect("connect to the test database")
    }
}

impl Default for TempPgDatabase {
    fn default() -> Self {
        TempPgDatabase::new()
    }
}

impl Drop for TempPgDatabase {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}
