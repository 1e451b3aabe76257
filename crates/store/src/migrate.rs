//! Versioned schema migrations. The store's `PRAGMA user_version` is the
//! number of the last migration applied; opening a store applies the rest,
//! each in its own transaction. A store newer than this binary is refused.
//!
//! The renumbering: until the knowledge base got its own tables, the
//! migrations were numbered 1, 2 and 4 (`0004_match_runs.sql`; there was
//! never a 3), so every store written then says `user_version = 4` while
//! holding only what is now migrations 1 to 3. Migration 3 is now the match
//! runs and migration 4 the knowledge tables. A store at version 4 without
//! the `knowledge_documents` table is therefore a store from before the
//! renumbering: it is read as version 3, and migration 4 runs (moving an old
//! knowledge base's pseudo-patient into the new tables). Every later store
//! at version 4 has that table, so the rule never misfires; it can go when
//! no such store is left to open.

use rusqlite::{Connection, OptionalExtension};

use crate::StoreError;

/// Migrations in order, numbered 1, 2, 3, ... without a gap. Never edit a
/// released entry: add a new one.
pub(crate) const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_records.sql")),
    (2, include_str!("../migrations/0002_model_calls.sql")),
    (3, include_str!("../migrations/0003_match_runs.sql")),
    (4, include_str!("../migrations/0004_knowledge.sql")),
    (5, include_str!("../migrations/0005_review.sql")),
    (6, include_str!("../migrations/0006_jobs.sql")),
    (7, include_str!("../migrations/0007_exemplars.sql")),
    (8, include_str!("../migrations/0008_database_hashes.sql")),
];

/// The version stores from before the renumbering claim, and the version
/// they really are at (see the module documentation).
const UNRENUMBERED_VERSION: i64 = 4;
const UNRENUMBERED_IS_REALLY: i64 = 3;

pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let stored: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    let latest = latest_version();
    if stored > latest {
        return Err(StoreError::TooNew { found: stored, supported: latest });
    }
    let current = if stored == UNRENUMBERED_VERSION && !has_table(conn, "knowledge_documents")? {
        UNRENUMBERED_IS_REALLY
    } else {
        stored
    };
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
    }
    Ok(())
}

fn has_table(conn: &Connection, name: &str) -> Result<bool, StoreError> {
    Ok(conn
        .query_row("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", [name], |_| Ok(()))
        .optional()?
        .is_some())
}

pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.last().map(|(v, _)| *v).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::MIGRATIONS;

    #[test]
    fn migrations_are_numbered_one_to_n_without_a_gap() {
        let numbers: Vec<i64> = MIGRATIONS.iter().map(|(v, _)| *v).collect();
        assert_eq!(numbers, (1..=MIGRATIONS.len() as i64).collect::<Vec<_>>());
    }

    /// Every file in migrations/ is in the list, under its own number.
    #[test]
    fn the_migration_files_are_the_list() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".sql"))
            .collect();
        files.sort();
        let numbers: Vec<i64> = files.iter().map(|name| name[..4].parse().unwrap()).collect();
        assert_eq!(numbers, MIGRATIONS.iter().map(|(v, _)| *v).collect::<Vec<_>>(), "{files:?}");
        for (name, (_, sql)) in files.iter().zip(MIGRATIONS) {
            assert_eq!(&std::fs::read_to_string(format!("{dir}/{name}")).unwrap(), sql, "{name}");
        }
    }
}
