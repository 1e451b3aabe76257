//! Versioned schema migrations. The store's `PRAGMA user_version` is the
//! number of the last migration applied; opening a store applies the rest,
//! each in its own transaction. A store newer than this binary is refused.

use rusqlite::Connection;

use crate::StoreError;

/// Migrations in order. Never edit a released entry: add a new one.
pub(crate) const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_records.sql")),
    (2, include_str!("../migrations/0002_model_calls.sql")),
    (4, include_str!("../migrations/0004_match_runs.sql")),
];

pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let current: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    let latest = MIGRATIONS.last().map(|(v, _)| *v).unwrap_or(0);
    if current > latest {
        return Err(StoreError::TooNew { found: current, supported: latest });
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
    }
    Ok(())
}

pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.last().map(|(v, _)| *v).unwrap_or(0)
}
