//! The Evident store: one SQLite file (WAL mode, foreign keys on, bundled
//! SQLite with FTS5) holding patients, documents, their sections (indexed
//! for BM25 with porter stemming) and sentences, lab observations,
//! evaluation labels, section embeddings, model calls, match runs, the
//! knowledge base's reference documents in tables of their own, and the
//! review service's accounts, overrides, sign-offs and audit trail, and the
//! cached content hashes of study databases. Writes go
//! through a [`Writer`], one transaction, so an ingest either lands whole
//! or not at all.

mod calls;
mod database_hashes;
mod exemplars;
mod jobs;
mod knowledge;
mod matches;
mod migrate;
mod read;
mod review;
mod search;
mod write;

use std::path::Path;

use rusqlite::Connection;

pub use calls::{ModelCallRecord, ModelRunSummary, NewModelCall, PipelineFailureRecord};
pub use database_hashes::DatabaseHashRecord;
pub use exemplars::{ExemplarRecord, NewExemplar, EXEMPLAR_SOURCES};
pub use jobs::{JobRecord, NewJob, JOB_KINDS, JOB_STATES};
pub use knowledge::{KnowledgeDocument, KnowledgeHit};
pub use matches::{MatchResultRecord, MatchRunRecord, NewMatchResult};
pub use read::{DatedSentence, DocumentSummary, LabQuery, LabRecord, PatientSummary, SentenceRecord, StoreCounts};
pub use review::{
    AuditRecord, NewAuditEntry, NewOverride, OverrideRecord, SignoffRecord, UserRecord, WebSessionRecord, ROLES,
};
pub use search::{Bm25Index, ScoredSection, SectionFilter, SectionRecord};
pub use write::{PutEffect, Writer};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the store has schema version {found}, newer than this evident supports ({supported}); upgrade evident")]
    TooNew { found: i64, supported: i64 },
    /// A record that would break a store invariant; the caller's input is wrong.
    #[error("{0}")]
    Invalid(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

pub struct Store {
    conn: Connection,
    /// Read-only connections only: per run, the results fingerprint last
    /// computed and the connection's `PRAGMA data_version` then (it changes
    /// only when another connection commits, so while it stands the
    /// fingerprint does too).
    fingerprints: Option<std::sync::Mutex<FingerprintCache>>,
}

/// Per run id: (`data_version` when counted, (count, newest rowid)).
type FingerprintCache = std::collections::HashMap<String, (i64, (i64, i64))>;

impl Store {
    /// Opens the store at `path`, creating it if missing, and applies any
    /// pending migrations.
    pub fn open(path: &Path) -> Result<Store> {
        let conn = Connection::open(path)?;
        Store::setup(conn, true)
    }

    /// Opens the existing store at `path` for reading only (a second
    /// connection beside the writer: in WAL mode readers run while it
    /// writes, each statement seeing the last committed state). Migrates
    /// nothing: the store must already have this build's schema, so open
    /// it with [`Store::open`] first.
    pub fn open_read_only(path: &Path) -> Result<Store> {
        use rusqlite::OpenFlags;
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI,
        )?;
        conn.pragma_update(None, "query_only", "ON")?;
        conn.pragma_update(None, "mmap_size", 1i64 << 30)?;
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        let store = Store { conn, fingerprints: Some(Default::default()) };
        let (found, supported) = (store.schema_version()?, migrate::latest_version());
        if found > supported {
            return Err(StoreError::TooNew { found, supported });
        }
        if found < supported {
            return Err(StoreError::Invalid(format!(
                "the store {} has schema version {found}, older than this build's {supported}; open it for writing \
                 first to migrate it",
                path.display()
            )));
        }
        Ok(store)
    }

    pub fn open_in_memory() -> Result<Store> {
        Store::setup(Connection::open_in_memory()?, false)
    }

    fn setup(mut conn: Connection, wal: bool) -> Result<Store> {
        if wal {
            conn.pragma_update(None, "journal_mode", "WAL")?;
        }
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Reads (section text for retrieval hits, records for prompts) come
        // from the OS page cache without a copy per page.
        conn.pragma_update(None, "mmap_size", 1i64 << 30)?;
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        migrate::migrate(&mut conn)?;
        Ok(Store { conn, fingerprints: None })
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    pub fn schema_version(&self) -> Result<i64> {
        Ok(self.conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
    }

    /// The schema version this build writes.
    pub fn latest_schema_version() -> i64 {
        migrate::latest_version()
    }

    /// Starts one write transaction. Nothing is visible to readers, and
    /// nothing persists, until [`Writer::commit`].
    pub fn writer(&mut self) -> Result<Writer<'_>> {
        Writer::begin(&mut self.conn)
    }
}

/// Dates are stored as `YYYY-MM-DD HH:MM:SS` text so that they sort.
pub(crate) const DATE_FORMAT: &str = "%Y-%m-%d %H:%M:%S";

pub(crate) fn format_date(date: &chrono::NaiveDateTime) -> String {
    date.format(DATE_FORMAT).to_string()
}

pub(crate) fn parse_date(text: &str) -> Result<chrono::NaiveDateTime> {
    chrono::NaiveDateTime::parse_from_str(text, DATE_FORMAT)
        .map_err(|e| StoreError::Corrupt(format!("date {text:?}: {e}")))
}
