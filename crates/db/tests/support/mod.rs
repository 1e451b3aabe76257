//! What the database tests share: the demo folder, the test PostgreSQL
//! server and throwaway databases on it.
//!
//! The server is found at `EVIDENT_TEST_POSTGRES` when set, else at the URL
//! `scripts/setup` writes to `~/.cache/evident/test-postgres-url` when it
//! starts Debian's cluster, else at
//! `postgres://evident:evident@127.0.0.1:5432/evident`. The URL's role must
//! be allowed to create databases and roles (setup makes it a superuser).

#![allow(dead_code)]

use std::path::PathBuf;
use std::str::FromStr;

use evident_db::DatabaseUrl;

pub fn demo_dir() -> PathBuf {
    evident_testdata::shared_data().join("mimic-iv-demo")
}

pub fn admin_url() -> String {
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

/// A database created for one test on the test server, dropped with it.
pub struct TempPgDatabase {
    pub name: String,
    pub url: DatabaseUrl,
    admin: String,
}

impl TempPgDatabase {
    pub fn new() -> TempPgDatabase {
        let admin = admin_url();
        let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap_or_else(|e| {
            panic!("the test PostgreSQL server at {admin} does not answer ({e}); run scripts/setup, which starts it, or set EVIDENT_TEST_POSTGRES")
        });
        let name = format!("evident_test_{}_{:08x}", std::process::id(), rand_u32());
        client.batch_execute(&format!("CREATE DATABASE {name}")).expect("create the test database");
        let url = match admin.rfind('/') {
            Some(slash) if admin[..slash].contains('@') || admin[..slash].ends_with(|c: char| c.is_ascii_digit()) => {
                format!("{}/{name}", &admin[..slash])
            }
            _ => panic!("the test URL {admin} must name a database"),
        };
        TempPgDatabase { name, url: DatabaseUrl::from_str(&url).unwrap(), admin }
    }

    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url.expose(), postgres::NoTls).unwrap()
    }
}

impl Drop for TempPgDatabase {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

fn rand_u32() -> u32 {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
    nanos ^ (std::process::id() << 16)
}
