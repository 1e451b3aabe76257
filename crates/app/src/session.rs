//! A [`Session`]: one store and one configuration, resolved once (the
//! front end hands over its flags and environment as paths; the
//! configuration file is read and validated here). Every job takes a
//! session. The store is opened (created and migrated if needed) the first
//! time a job asks for it, so jobs that need no store (statistics, the
//! model registry) never create one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use evident_store::Store;

use crate::config::Config;
use crate::error::{AppError, Result};

/// A shared handle on the store: the SQLite connection is used by one
/// thread at a time, and the model recorder writes through the same one.
pub use evident_recorder::SharedStore;

/// One store and one configuration.
pub struct Session {
    db: PathBuf,
    config: Config,
    store: OnceLock<SharedStore>,
}

impl Session {
    /// A session over the store at `db` with the configuration file at
    /// `config_file` (read now if it exists; missing means defaults).
    pub fn open(db: &Path, config_file: &Path) -> Result<Session> {
        Ok(Session::with_config(db, Config::load(config_file)?))
    }

    /// A session with a configuration already built (tests, the server).
    pub fn with_config(db: &Path, config: Config) -> Session {
        Session { db: db.to_path_buf(), config, store: OnceLock::new() }
    }

    /// Where the store is.
    pub fn db_path(&self) -> &Path {
        &self.db
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The store, opened on first use.
    pub fn store(&self) -> Result<SharedStore> {
        if let Some(store) = self.store.get() {
            return Ok(store.clone());
        }
        let opened = Store::open(&self.db)
            .map_err(|e| AppError::Setup(format!("cannot open store {}: {e}", self.db.display())))?;
        Ok(self.store.get_or_init(|| Arc::new(Mutex::new(opened))).clone())
    }

    /// Runs `f` with the store locked.
    pub fn with_store<T>(&self, f: impl FnOnce(&mut Store) -> Result<T>) -> Result<T> {
        let store = self.store()?;
        let mut guard = lock(&store);
        f(&mut guard)
    }

    /// Fails with a message that says how to list patients when `patient`
    /// is not in the store.
    pub fn require_patient(&self, store: &Store, patient: &str) -> Result<()> {
        match store.patient(patient)? {
            Some(_) => Ok(()),
            None => Err(self.unknown_patient(patient)),
        }
    }

    /// The error for a patient id that is not in the store.
    pub fn unknown_patient(&self, patient: &str) -> AppError {
        AppError::NotFound(format!(
            "patient {patient:?} is not in the store {}; list the patients to see who is",
            self.db.display()
        ))
    }
}

/// Locks the store; a panic in another thread does not make it unusable
/// (every write is one transaction, so nothing is half-written).
pub fn lock(store: &SharedStore) -> MutexGuard<'_, Store> {
    store.lock().unwrap_or_else(|e| e.into_inner())
}
