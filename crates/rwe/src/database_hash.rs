//! The database's hash in the evidence bundle, and the cache that keeps a
//! study run on a big PostgreSQL database from reading every row every time.
//!
//! What the run asks for ([`DatabaseHashMode`], `evident study
//! --database-hash`): `full` (a content hash read now), `cached` (the
//! default: the content hash of the database's current state, read once
//! and reused while that state lasts), `catalogue` (tables, columns and
//! PostgreSQL's row-count estimates: seconds on any database) or `none`.
//! What the bundle carries ([`DatabaseHashMethod`]) says which kind it is;
//! SQLite databases are always hashed by their files (except `none`).
//!
//! The cache's key ([`postgres_state`]) is read from PostgreSQL's
//! catalogue and statistics in one statement: the server and database
//! (host, port, name, oid), the statistics' last reset, and for every
//! readable table its oid, kind, storage file (`relfilenode`: TRUNCATE,
//! VACUUM FULL, CLUSTER and rewriting ALTERs change it), columns (name,
//! type, NOT NULL), a view's definition, and the cumulative counts of rows
//! inserted, updated and deleted (`pg_stat_user_tables`; they move with
//! every write, committed or not, and never with a read, VACUUM or
//! ANALYZE); on a standby also the WAL position replayed, since replayed
//! writes do not move a standby's counters. A changed key only costs a
//! new hash; what matters is that the data cannot change under an
//! unchanged key, and it can in these cases, which [`CACHE_LIMITS`] states
//! in every bundle that carries a cached hash: a write committed in the
//! last seconds (backends report their counts at most once a second, and
//! up to a minute late under load); statistics lost and the same counts
//! written again (a crash or `pg_stat_reset` zeroes them, and the key
//! then changes unless exactly the same numbers of rows are written
//! again); a view over something outside the readable tables. With
//! `track_counts` off the counters never move, so the cache is not used.
//! The key is read again after a content hash, and the hash is cached only
//! when both reads agree, so a write during the hash is not cached under
//! the key from before it.
//!
//! A content hash runs to a deadline (`--database-hash-timeout`, default
//! [`DEFAULT_TIMEOUT`]); one that does not finish is recorded in the cache
//! for that state (a later `cached` run with no longer a limit does not
//! try again) and the bundle carries the catalogue hash instead, saying
//! why. Nothing here fails a run: whatever goes wrong, the bundle says the
//! hash was not computed and why.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use evident_db::{DatabaseUrl, DbError, QueryLimits, ReadOnlyConnection, Value};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::bundle::{sha256_files, DatabaseInfo};
use crate::database::{postgres_content_sha256_until, postgres_parts, POSTGRES_CONTENT_METHOD};

/// How long a content hash may run in a study run unless the user says
/// otherwise: long enough for the demo (seconds) and databases of a few
/// GB, short enough that a run on the full MIMIC-IV is not held for hours.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// What a bundle with a cached content hash says about the cache's limits.
pub const CACHE_LIMITS: &str = "reused while PostgreSQL's catalogue and its counts of rows inserted, updated and \
     deleted per table are unchanged; a write in the seconds before the run, or one hidden by a statistics reset \
     followed by exactly as many writes again, would not be seen (--database-hash full reads every row)";

/// The key's own version: a key of another version is another key.
const STATE_KEY_VERSION: &str = "evident postgres state key v1";

/// What the run asks the bundle's database hash to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DatabaseHashMode {
    /// The content hash, read now (and cached).
    Full,
    /// The content hash cached for the database's current state; read now
    /// (within the time limit) and cached when there is none.
    #[default]
    Cached,
    /// Tables, columns and row-count estimates from the catalogue only.
    Catalogue,
    /// No hash.
    None,
}

impl DatabaseHashMode {
    pub const NAMES: [&'static str; 4] = ["full", "cached", "catalogue", "none"];

    pub fn from_name(name: &str) -> Option<DatabaseHashMode> {
        match name {
            "full" => Some(DatabaseHashMode::Full),
            "cached" => Some(DatabaseHashMode::Cached),
            "catalogue" => Some(DatabaseHashMode::Catalogue),
            "none" => Some(DatabaseHashMode::None),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DatabaseHashMode::Full => "full",
            DatabaseHashMode::Cached => "cached",
            DatabaseHashMode::Catalogue => "catalogue",
            DatabaseHashMode::None => "none",
        }
    }
}

/// Which kind of hash a bundle carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DatabaseHashMethod {
    /// SHA-256 over the SQLite files in order (main file, then each schema
    /// file): identifies the files byte for byte.
    SqliteFiles,
    /// SHA-256 over every readable table's name, row count and
    /// order-independent digest of its rows
    /// ([`crate::database::postgres_content_sha256`]): identifies the rows.
    PostgresContent,
    /// SHA-256 over every readable table's name, kind, columns (name, type,
    /// NOT NULL) and PostgreSQL's estimate of its rows rounded to two
    /// significant digits ([`postgres_catalogue_sha256`]): identifies the
    /// schema and the size of the load, not its rows.
    PostgresCatalogue,
    /// No hash: the run asked for none, or computing one failed (the note
    /// says why).
    NotComputed,
}

impl DatabaseHashMethod {
    /// How `report.html` names it.
    pub fn describe(self) -> &'static str {
        match self {
            DatabaseHashMethod::SqliteFiles => "SHA-256 of the SQLite files",
            DatabaseHashMethod::PostgresContent => "SHA-256 of every row of every readable table",
            DatabaseHashMethod::PostgresCatalogue => {
                "catalogue only: tables, columns and estimated row counts (not the rows)"
            }
            DatabaseHashMethod::NotComputed => "not computed",
        }
    }
}

/// One entry of the content-hash cache: the hash of one database state,
/// or the record that computing it ran past a time limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedDatabaseHash {
    /// SHA-256 of the state ([`postgres_state`]).
    pub state_key: String,
    /// `host:port/database`, for a person reading the cache.
    pub database: String,
    /// The algorithm ([`POSTGRES_CONTENT_METHOD`]); an entry of another is
    /// not used.
    pub method: String,
    /// The hash; `None` when computing it ran past `timeout_ms`.
    pub sha256: Option<String>,
    /// The limit a hash that did not finish ran under.
    pub timeout_ms: Option<u64>,
    pub tables: u64,
    /// How long computing it took (or ran before it was stopped).
    pub elapsed_ms: u64,
    /// The Evident version that computed it.
    pub evident_version: String,
    /// When it finished, UTC, RFC 3339.
    pub computed_at: String,
}

/// Where content hashes are kept between runs (Evident's store, through
/// `evident_app`). Errors are text: a cache that fails is reported in the
/// bundle's note and the run goes on without it.
pub trait DatabaseHashCache {
    fn get(&mut self, state_key: &str) -> Result<Option<CachedDatabaseHash>, String>;
    /// Adds or replaces the entry of `entry.state_key`.
    fn put(&mut self, entry: &CachedDatabaseHash) -> Result<(), String>;
}

/// A cache in memory, for one process (and tests: `puts` counts writes).
#[derive(Debug, Default)]
pub struct MemoryHashCache {
    pub entries: BTreeMap<String, CachedDatabaseHash>,
    pub puts: usize,
}

impl DatabaseHashCache for MemoryHashCache {
    fn get(&mut self, state_key: &str) -> Result<Option<CachedDatabaseHash>, String> {
        Ok(self.entries.get(state_key).cloned())
    }

    fn put(&mut self, entry: &CachedDatabaseHash) -> Result<(), String> {
        self.puts += 1;
        self.entries.insert(entry.state_key.clone(), entry.clone());
        Ok(())
    }
}

/// What the run asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseHashRequest {
    pub mode: DatabaseHashMode,
    /// How long a content hash may run; `None`: no limit.
    pub timeout: Option<Duration>,
}

impl Default for DatabaseHashRequest {
    fn default() -> Self {
        DatabaseHashRequest { mode: DatabaseHashMode::Cached, timeout: Some(DEFAULT_TIMEOUT) }
    }
}

/// A database's state as the cache sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresState {
    /// SHA-256 of everything the key reads.
    pub key: String,
    /// Readable tables (views included).
    pub tables: usize,
    /// Why the counters cannot vouch for the content, when they cannot
    /// (`track_counts` off): the cache is then not used.
    pub untrusted: Option<String>,
}

/// The readable tables, as `postgres_tables` in `evident_db` lists them.
const READABLE: &str = r"c.relkind IN ('r', 'v', 'm', 'p')
       AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'
       AND has_table_privilege(c.oid, 'SELECT')";

/// A table's columns as one text: name, type, NOT NULL, in order.
const COLUMNS: &str = "(SELECT string_agg(quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod) \
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END, ', ' ORDER BY a.attnum) \
       FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)";

/// Reads the state key of the database `conn` is on (one statement on the
/// catalogue and the statistics views; milliseconds). `server` is the
/// host, port and name the URL gives (the key of one database reached
/// under two host names differs, which only costs a hash).
pub fn postgres_state(conn: &mut ReadOnlyConnection, server: &str) -> Result<PostgresState, DbError> {
    let database = conn.query(
        "SELECT d.oid::bigint, d.datname::text, current_setting('track_counts'), pg_is_in_recovery()::text, \
         CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()::text END, \
         (SELECT extract(epoch FROM s.stats_reset)::text FROM pg_stat_database s WHERE s.datid = d.oid) \
         FROM pg_database d WHERE d.datname = current_database()",
    )?;
    let tables = conn.query(&format!(
        "SELECT n.nspname::text, c.relname::text, c.oid::bigint, c.relkind::text, c.relfilenode::bigint, {COLUMNS}, \
         CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) END, s.n_tup_ins, s.n_tup_upd, s.n_tup_del \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid \
         WHERE {READABLE} ORDER BY 1, 2"
    ))?;
    if tables.rows.len() >= conn.limits().max_rows {
        return Err(DbError::Query { message: "more tables than the connection's row limit".into() });
    }
    let mut hasher = Sha256::new();
    hasher.update(format!("{STATE_KEY_VERSION}\n{POSTGRES_CONTENT_METHOD}\n{server}\n").as_bytes());
    let mut untrusted = None;
    for row in database.rows.iter().chain(&tables.rows) {
        let cells: Vec<String> = row.iter().map(Value::to_text).collect();
        hasher.update(format!("{}\n", cells.join("\t")).as_bytes());
    }
    if let Some(row) = database.rows.first() {
        if row.get(2).map(Value::to_text).as_deref() == Some("off") {
            untrusted = Some("track_counts is off on this server, so its row counters do not move".to_string());
        }
    }
    Ok(PostgresState { key: hex::encode(hasher.finalize()), tables: tables.rows.len(), untrusted })
}

/// The catalogue hash ([`DatabaseHashMethod::PostgresCatalogue`]): every
/// readable table's qualified name, kind, columns and estimated rows
/// (`reltuples` after VACUUM or ANALYZE, else the live-row counter),
/// rounded to two significant digits so that a new ANALYZE's estimate
/// rarely changes it. Seconds on any database; the same schema loaded
/// with about as many rows hashes the same. Returns the hash and the
/// tables' count.
pub fn postgres_catalogue_sha256(conn: &mut ReadOnlyConnection) -> Result<(String, usize), DbError> {
    let result = conn.query(&format!(
        "SELECT n.nspname::text, c.relname::text, c.relkind::text, {COLUMNS}, \
         CASE WHEN c.relkind IN ('r', 'm') THEN \
           CASE WHEN c.reltuples >= 0 THEN c.reltuples::bigint ELSE s.n_live_tup END END \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid \
         WHERE {READABLE} ORDER BY 1, 2"
    ))?;
    if result.rows.len() >= conn.limits().max_rows {
        return Err(DbError::Query { message: "more tables than the connection's row limit".into() });
    }
    let mut hasher = Sha256::new();
    hasher.update(b"evident postgres catalogue v1\n");
    for row in &result.rows {
        let mut cells: Vec<String> = row.iter().take(4).map(Value::to_text).collect();
        cells.push(match row.get(4).and_then(Value::as_f64) {
            Some(rows) => two_significant_digits(rows as i64).to_string(),
            None => "-".to_string(),
        });
        hasher.update(format!("{}\n", cells.join("\t")).as_bytes());
    }
    Ok((hex::encode(hasher.finalize()), result.rows.len()))
}

/// `n` rounded to two significant digits (half away from zero).
fn two_significant_digits(n: i64) -> i64 {
    let mut scale = 1i64;
    while n.abs() / scale >= 100 {
        scale *= 10;
    }
    let half = scale / 2;
    if scale == 1 {
        n
    } else {
        (n + if n >= 0 { half } else { -half }) / scale * scale
    }
}

/// The bundle's record of the database at `url`: its URL and the hash the
/// request asks for, through `cache` for a PostgreSQL content hash. Never
/// fails: a hash that could not be computed is recorded as such, with why.
pub fn database_info(
    url: &DatabaseUrl,
    request: &DatabaseHashRequest,
    cache: &mut dyn DatabaseHashCache,
) -> DatabaseInfo {
    let mut info = DatabaseInfo {
        url: url.redacted(),
        sha256: None,
        hash_method: DatabaseHashMethod::NotComputed,
        hash_requested: request.mode,
        hash_computed_at: None,
        hash_elapsed_ms: None,
        hash_from_cache: false,
        hash_state_key: None,
        hash_note: None,
    };
    if request.mode == DatabaseHashMode::None {
        info.hash_note = Some("not computed: the run asked for none (--database-hash none)".into());
        return info;
    }
    match url.sqlite_path() {
        Some(main) => sqlite_hash(main, request, &mut info),
        None => postgres_hash(url, request, cache, &mut info),
    }
    info
}

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn seconds(d: Option<Duration>) -> String {
    match d {
        Some(d) => format!("{} s", d.as_secs_f64()),
        None => "no limit".to_string(),
    }
}

fn sqlite_hash(main: &Path, request: &DatabaseHashRequest, info: &mut DatabaseInfo) {
    let started = Instant::now();
    let files = evident_db::sqlite::attached_schemas(main).map_err(|e| e.to_string()).and_then(|schemas| {
        let mut files: Vec<&Path> = vec![main];
        files.extend(schemas.iter().map(|(_, p)| p.as_path()));
        sha256_files(&files).map_err(|e| format!("{}: {e}", main.display()))
    });
    match files {
        Ok(sha256) => {
            info.sha256 = Some(sha256);
            info.hash_method = DatabaseHashMethod::SqliteFiles;
            info.hash_computed_at = Some(now());
            info.hash_elapsed_ms = Some(started.elapsed().as_millis() as u64);
            if request.mode != DatabaseHashMode::Full {
                info.hash_note = Some(format!(
                    "SQLite databases are hashed by their files, read now whatever --database-hash says \
                     (asked: {}; only none is honoured)",
                    request.mode.as_str()
                ));
            }
        }
        Err(e) => info.hash_note = Some(format!("not computed: reading the SQLite files failed: {e}")),
    }
}

fn postgres_hash(
    url: &DatabaseUrl,
    request: &DatabaseHashRequest,
    cache: &mut dyn DatabaseHashCache,
    info: &mut DatabaseInfo,
) {
    let server = postgres_parts(&url.expose())
        .map(|p| format!("{}:{}/{}", p.host, p.port, p.dbname))
        .unwrap_or_else(|| url.redacted());
    // The catalogue statements take milliseconds; a content statement gets
    // the time left before the deadline (`query_with_timeout`).
    // Rows are read as values; the text an agent would read is not needed.
    let limits = QueryLimits { max_rows: 1_000_000, timeout: Duration::from_secs(300), max_text_chars: 1_000 };
    let mut conn = match ReadOnlyConnection::connect(url, limits) {
        Ok(conn) => conn,
        Err(e) => {
            info.hash_note = Some(format!("not computed: connecting to hash the database failed: {e}"));
            return;
        }
    };
    let mut notes: Vec<String> = Vec::new();
    let fallback = match request.mode {
        DatabaseHashMode::Catalogue => None,
        DatabaseHashMode::Full | DatabaseHashMode::Cached => {
            match content_hash(&mut conn, &server, request, cache, info, &mut notes) {
                Ok(()) => {
                    finish(conn, info, notes);
                    return;
                }
                Err(why) => Some(why),
            }
        }
        DatabaseHashMode::None => unreachable!("handled by database_info"),
    };
    let started = Instant::now();
    match postgres_catalogue_sha256(&mut conn) {
        Ok((sha256, _)) => {
            info.sha256 = Some(sha256);
            info.hash_method = DatabaseHashMethod::PostgresCatalogue;
            info.hash_computed_at = Some(now());
            info.hash_elapsed_ms = Some(started.elapsed().as_millis() as u64);
            info.hash_from_cache = false;
            if let Some(why) = fallback {
                notes.insert(0, format!("the content hash was not computed ({why}); this is the catalogue hash"));
            }
        }
        Err(e) => {
            info.sha256 = None;
            info.hash_method = DatabaseHashMethod::NotComputed;
            let why = fallback.map(|w| format!("the content hash: {w}; ")).unwrap_or_default();
            notes.insert(0, format!("not computed: {why}the catalogue hash: {e}"));
        }
    }
    finish(conn, info, notes);
}

fn finish(conn: ReadOnlyConnection, info: &mut DatabaseInfo, mut notes: Vec<String>) {
    if let Err(e) = conn.close() {
        notes.push(format!("dropping the hash's read-only role failed: {e}"));
    }
    if !notes.is_empty() {
        info.hash_note = Some(notes.join("; "));
    }
}

/// The content hash, from the cache or read now; `Err` says why there is
/// none (the caller falls back to the catalogue hash).
fn content_hash(
    conn: &mut ReadOnlyConnection,
    server: &str,
    request: &DatabaseHashRequest,
    cache: &mut dyn DatabaseHashCache,
    info: &mut DatabaseInfo,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    let state = match postgres_state(conn, server) {
        Ok(state) => {
            if let Some(why) = &state.untrusted {
                notes.push(format!("the cache was not used: {why}"));
            }
            Some(state)
        }
        Err(e) => {
            notes.push(format!("the cache was not used: reading the database's state failed: {e}"));
            None
        }
    };
    let cacheable = state.as_ref().filter(|s| s.untrusted.is_none());
    info.hash_state_key = cacheable.map(|s| s.key.clone());
    let timeout_ms = request.timeout.map(|t| t.as_millis() as u64);
    if let (Some(state), DatabaseHashMode::Cached) = (cacheable, request.mode) {
        match cache.get(&state.key) {
            Ok(Some(entry)) if entry.method == POSTGRES_CONTENT_METHOD => {
                if let Some(sha256) = entry.sha256 {
                    info.sha256 = Some(sha256);
                    info.hash_method = DatabaseHashMethod::PostgresContent;
                    info.hash_computed_at = Some(entry.computed_at);
                    info.hash_elapsed_ms = Some(entry.elapsed_ms);
                    info.hash_from_cache = true;
                    notes.push(format!("from Evident's cache: {CACHE_LIMITS}"));
                    return Ok(());
                }
                // Tried before on this very state and ran past a limit no
                // shorter than this one: not tried again.
                let tried = entry.timeout_ms.unwrap_or(0);
                if timeout_ms.is_some_and(|t| t <= tried) {
                    return Err(format!(
                        "on {} a content hash of this same database state ran past its limit of {} s, which is \
                         no shorter than this run's; compute it once with a longer --database-hash-timeout \
                         (0: none) or `evident db hash URL`, and later runs reuse it",
                        entry.computed_at,
                        tried / 1000
                    ));
                }
            }
            Ok(_) => {}
            Err(e) => notes.push(format!("reading the cache failed: {e}")),
        }
    }
    let started = Instant::now();
    let year = Duration::from_secs(365 * 24 * 3600);
    let deadline = started.checked_add(request.timeout.unwrap_or(year).min(year)).unwrap_or(started + year);
    let result = postgres_content_sha256_until(conn, deadline);
    let elapsed_ms = started.elapsed().as_millis() as u64;
    // Cached only when the state did not change while the rows were read.
    let after = cacheable.and_then(|s| postgres_state(conn, server).ok().filter(|a| a.key == s.key));
    let entry = |sha256: Option<String>, timeout_ms: Option<u64>| CachedDatabaseHash {
        state_key: cacheable.map(|s| s.key.clone()).unwrap_or_default(),
        database: server.to_string(),
        method: POSTGRES_CONTENT_METHOD.to_string(),
        sha256,
        timeout_ms,
        tables: cacheable.map_or(0, |s| s.tables as u64),
        elapsed_ms,
        evident_version: env!("CARGO_PKG_VERSION").to_string(),
        computed_at: now(),
    };
    match result {
        Ok(sha256) => {
            let entry = entry(Some(sha256.clone()), None);
            info.sha256 = Some(sha256);
            info.hash_method = DatabaseHashMethod::PostgresContent;
            info.hash_computed_at = Some(entry.computed_at.clone());
            info.hash_elapsed_ms = Some(elapsed_ms);
            info.hash_from_cache = false;
            if after.is_some() {
                if let Err(e) = cache.put(&entry) {
                    notes.push(format!("writing the cache failed: {e}"));
                }
            } else if cacheable.is_some() {
                info.hash_state_key = None;
                notes.push("not cached: the database changed while it was read".into());
            }
            Ok(())
        }
        Err(e) if e.timed_out() => {
            if after.is_some() {
                if let Err(e) = cache.put(&entry(None, timeout_ms)) {
                    notes.push(format!("writing the cache failed: {e}"));
                }
            }
            Err(format!(
                "it ran past its limit of {} after {} of {} tables, stopped at {}; compute it once with a longer \
                 --database-hash-timeout (0: none) or `evident db hash URL`, and later runs reuse it",
                seconds(request.timeout),
                e.table_number.saturating_sub(1),
                e.tables,
                e.table
            ))
        }
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_estimates_keep_two_significant_digits() {
        let cases = [(0, 0), (7, 7), (99, 99), (100, 100), (104, 100), (105, 110), (313_645_063, 310_000_000)];
        for (n, rounded) in cases {
            assert_eq!(two_significant_digits(n), rounded, "{n}");
        }
    }

    #[test]
    fn modes_read_back_from_their_names() {
        for name in DatabaseHashMode::NAMES {
            assert_eq!(DatabaseHashMode::from_name(name).unwrap().as_str(), name);
        }
        assert_eq!(DatabaseHashMode::default(), DatabaseHashMode::Cached);
        assert!(DatabaseHashMode::from_name("fast").is_none());
    }

    /// A SQLite bundle carries the files' hash under every mode but none.
    #[test]
    fn sqlite_databases_are_hashed_by_their_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("study.db");
        rusqlite::Connection::open(&path).unwrap().execute_batch("CREATE TABLE t (x integer);").unwrap();
        let url = DatabaseUrl::parse(&format!("sqlite:{}", path.display())).unwrap();
        let files = sha256_files(&[path.as_path()]).unwrap();
        for mode in [DatabaseHashMode::Full, DatabaseHashMode::Cached, DatabaseHashMode::Catalogue] {
            let info = database_info(
                &url,
                &DatabaseHashRequest { mode, ..Default::default() },
                &mut MemoryHashCache::default(),
            );
            assert_eq!(info.hash_method, DatabaseHashMethod::SqliteFiles, "{mode:?}");
            assert_eq!(info.sha256.as_deref(), Some(files.as_str()));
            assert_eq!(info.hash_note.is_some(), mode != DatabaseHashMode::Full);
        }
        let none = database_info(
            &url,
            &DatabaseHashRequest { mode: DatabaseHashMode::None, ..Default::default() },
            &mut MemoryHashCache::default(),
        );
        assert_eq!((none.hash_method, none.sha256), (DatabaseHashMethod::NotComputed, None));
        let missing = DatabaseUrl::parse(&format!("sqlite:{}", dir.path().join("gone.db").display())).unwrap();
        let failed = database_info(&missing, &DatabaseHashRequest::default(), &mut MemoryHashCache::default());
        assert_eq!(failed.hash_method, DatabaseHashMethod::NotComputed);
        assert!(failed.hash_note.unwrap().starts_with("not computed: reading the SQLite files failed"));
    }
}
