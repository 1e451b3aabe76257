//! The content hashes of study databases (migration 8), cached per
//! database state for the evidence bundle: one row per state key, either
//! the hash or the record that computing it ran past a time limit. What
//! the key reads, and what it cannot see, is `evident_rwe::database_hash`'s.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use crate::{Result, Store, StoreError};

/// One cached database hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DatabaseHashRecord {
    pub state_key: String,
    /// `host:port/database`.
    pub database: String,
    /// The hash's algorithm.
    pub method: String,
    /// The hash; `None` when computing it ran past `timeout_ms`.
    pub sha256: Option<String>,
    pub timeout_ms: Option<i64>,
    pub tables: i64,
    pub elapsed_ms: i64,
    pub evident_version: String,
    /// UTC, RFC 3339.
    pub computed_at: String,
}

impl Store {
    /// The cached hash of the state `state_key`, if any.
    pub fn database_hash(&self, state_key: &str) -> Result<Option<DatabaseHashRecord>> {
        Ok(self
            .conn
            .query_row(
                "SELECT state_key, database, method, sha256, timeout_ms, tables, elapsed_ms, evident_version, computed_at
                 FROM database_hashes WHERE state_key = ?1",
                params![state_key],
                |r| {
                    Ok(DatabaseHashRecord {
                        state_key: r.get(0)?,
                        database: r.get(1)?,
                        method: r.get(2)?,
                        sha256: r.get(3)?,
                        timeout_ms: r.get(4)?,
                        tables: r.get(5)?,
                        elapsed_ms: r.get(6)?,
                        evident_version: r.get(7)?,
                        computed_at: r.get(8)?,
                    })
                },
            )
            .optional()?)
    }

    /// Adds or replaces the hash of `record.state_key`. A record must hold
    /// either a hash or the limit it ran past, not both.
    pub fn put_database_hash(&self, record: &DatabaseHashRecord) -> Result<()> {
        if record.sha256.is_some() == record.timeout_ms.is_some() {
            return Err(StoreError::Invalid(format!(
                "database hash {}: give either the hash or the time limit it ran past",
                record.state_key
            )));
        }
        self.conn.execute(
            "INSERT OR REPLACE INTO database_hashes
             (state_key, database, method, sha256, timeout_ms, tables, elapsed_ms, evident_version, computed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                record.state_key,
                record.database,
                record.method,
                record.sha256,
                record.timeout_ms,
                record.tables,
                record.elapsed_ms,
                record.evident_version,
                record.computed_at
            ],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_reads_back_and_a_new_one_of_the_same_state_replaces_it() {
        let store = Store::open_in_memory().unwrap();
        assert_eq!(store.database_hash("k").unwrap(), None);
        let timed_out = DatabaseHashRecord {
            state_key: "k".into(),
            database: "127.0.0.1:5432/mimic".into(),
            method: "evident postgres content v1".into(),
            sha256: None,
            timeout_ms: Some(600_000),
            tables: 31,
            elapsed_ms: 600_004,
            evident_version: "0.1.0".into(),
            computed_at: "2026-11-29T07:00:00Z".into(),
        };
        store.put_database_hash(&timed_out).unwrap();
        assert_eq!(store.database_hash("k").unwrap().as_ref(), Some(&timed_out));
        let computed = DatabaseHashRecord {
            sha256: Some("ab".repeat(32)),
            timeout_ms: None,
            computed_at: "2026-11-29T09:00:00Z".into(),
            ..timed_out.clone()
        };
        store.put_database_hash(&computed).unwrap();
        assert_eq!(store.database_hash("k").unwrap(), Some(computed));
        let both = DatabaseHashRecord { sha256: Some("ab".repeat(32)), ..timed_out };
        assert!(matches!(store.put_database_hash(&both), Err(StoreError::Invalid(_))));
    }
}
