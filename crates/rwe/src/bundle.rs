//! The evidence bundle of one study run, `bundle.json`, written atomically
//! (a temporary file renamed into place): the task and its protocol, the
//! database (URL without password, and the hash the run asked for, saying
//! which kind it is: of the SQLite files, of PostgreSQL's rows by
//! [`crate::database::postgres_content_sha256`] (cached per database state
//! by [`crate::database_hash`]), or of its catalogue only), the
//! cohort audit, the cohort's definition as SQL, the attrition table and
//! the cohort's baseline table,
//! every answer with the step that produced it, the scores,
//! the full trace of steps, usage, and hashes of the task file and the code
//! (crate version and prompt files).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::agent::{AgentRun, Strategy, AGENT_PROMPTS};
use crate::audit::{CohortAudit, RWE_PROMPTS};
use crate::database_hash::{DatabaseHashMethod, DatabaseHashMode};
use crate::metrics::TaskScore;
use crate::report::{AttritionReport, BaselineRow};
use crate::sheet::RecordedAnswer;
use crate::task::Task;

/// What a bundle records about the database: where it is and which hash
/// of it the run carries ([`crate::database_hash::database_info`] makes it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatabaseInfo {
    /// The URL with any password replaced.
    pub url: String,
    /// The hash, hex; `None` when not computed (`hash_note` says why).
    /// Which kind it is, is `hash_method`: for SQLite, SHA-256 over the
    /// files in order (main file, then each schema file); for PostgreSQL,
    /// SHA-256 over every readable table's name, row count and
    /// order-independent digest of its rows
    /// ([`crate::database::postgres_content_sha256`]), or over the
    /// catalogue only. The two backends' hashes of the same data differ.
    pub sha256: Option<String>,
    pub hash_method: DatabaseHashMethod,
    /// What the run asked for (`--database-hash`).
    pub hash_requested: DatabaseHashMode,
    /// When the hash was computed (UTC); for one from the cache, when it
    /// was first computed, not when this run read it.
    pub hash_computed_at: Option<String>,
    /// How long computing it took then.
    pub hash_elapsed_ms: Option<u64>,
    /// True when the content hash came from Evident's cache: the
    /// database's state key was the one it was computed under.
    pub hash_from_cache: bool,
    /// The state key a PostgreSQL content hash is cached under
    /// ([`crate::database_hash::postgres_state`]).
    pub hash_state_key: Option<String>,
    /// Why there is no hash or not the kind asked for, and a cached hash's
    /// limits.
    pub hash_note: Option<String>,
}

impl std::fmt::Display for DatabaseInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "database: {}", self.url)?;
        writeln!(f, "hash: {} (asked: {})", self.hash_method.describe(), self.hash_requested.as_str())?;
        writeln!(f, "sha256: {}", self.sha256.as_deref().unwrap_or("-"))?;
        if let Some(at) = &self.hash_computed_at {
            let took = self.hash_elapsed_ms.map(|ms| format!(" in {:.1} s", ms as f64 / 1000.0)).unwrap_or_default();
            let cached = if self.hash_from_cache { ", from Evident's cache" } else { "" };
            writeln!(f, "computed: {at}{took}{cached}")?;
        }
        if let Some(key) = &self.hash_state_key {
            writeln!(f, "state key: {key}")?;
        }
        write!(f, "note: {}", self.hash_note.as_deref().unwrap_or("-"))
    }
}

/// The whole bundle.
#[derive(Debug, Clone, Serialize)]
pub struct Bundle<'a> {
    pub evident_version: &'static str,
    pub task: &'a Task,
    pub task_sha256: String,
    pub prompts_sha256: String,
    pub strategy: Strategy,
    pub model: String,
    pub database: DatabaseInfo,
    pub cohort_audit: Option<&'a CohortAudit>,
    /// The cohort's definition as SQL (`cohort.sql`, written by
    /// `build_cohort` or by the `run_sql` that saved the cohort file);
    /// `None` where the workspace holds none (an R-built cohort: its code
    /// is in the trace).
    pub cohort_sql: Option<String>,
    /// The agent's attrition table (`attrition.csv`), or why there is none.
    pub attrition: &'a AttritionReport,
    /// The exported cohort's variables, summarised.
    pub baseline: &'a [BaselineRow],
    pub answers: &'a BTreeMap<String, RecordedAnswer>,
    pub score: &'a TaskScore,
    pub run: &'a AgentRun,
}

/// A finished run's `bundle.json` read back: what a rerun needs to tell
/// whether the bundle answers it (the inputs it was made from) and to
/// report it again without running the agent or the judge.
#[derive(Debug, Clone, Deserialize)]
pub struct StoredBundle {
    pub evident_version: String,
    pub task_sha256: String,
    pub prompts_sha256: String,
    pub strategy: Strategy,
    pub model: String,
    pub database: StoredDatabase,
    pub cohort_audit: Option<CohortAudit>,
    pub score: TaskScore,
    pub run: AgentRun,
}

/// The part of [`DatabaseInfo`] a rerun compares.
#[derive(Debug, Clone, Deserialize)]
pub struct StoredDatabase {
    pub url: String,
}

/// The bundle in `dir`, if there is one that reads as this version's
/// bundles do (`None`: none, or one of another shape, which a rerun
/// replaces).
pub fn read_bundle(dir: &Path) -> Option<StoredBundle> {
    let text = std::fs::read_to_string(dir.join("bundle.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// The cohort's definition, `cohort.sql` in a run's workspace, if there is
/// a non-empty one.
pub fn read_cohort_sql(workspace: &Path) -> Option<String> {
    let text = std::fs::read_to_string(workspace.join(crate::agent::cohort::COHORT_SQL_FILE)).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// SHA-256 of a file's bytes, hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut f = std::fs::File::open(path)?;
    std::io::copy(&mut f, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// SHA-256 over several files in order.
pub fn sha256_files(paths: &[&Path]) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    for p in paths {
        let mut f = std::fs::File::open(p)?;
        std::io::copy(&mut f, &mut hasher)?;
    }
    Ok(hex::encode(hasher.finalize()))
}

/// SHA-256 of the built-in prompt files the run used.
pub fn prompts_sha256() -> String {
    let mut hasher = Sha256::new();
    for (name, text) in AGENT_PROMPTS.iter().chain(RWE_PROMPTS) {
        hasher.update(name.as_bytes());
        hasher.update(text.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// Writes `bundle` to `dir/bundle.json` through a temporary file, so a
/// reader never sees half a bundle.
pub fn write_bundle(dir: &Path, bundle: &Bundle) -> std::io::Result<std::path::PathBuf> {
    let path = dir.join("bundle.json");
    let tmp = dir.join(".bundle.json.tmp");
    let text = serde_json::to_string_pretty(bundle).map_err(std::io::Error::other)?;
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}
