//! A [`Session`]: one store and one configuration, resolved once (the
//! front end hands over its flags and environment as paths; the
//! configuration file is read and validated here). Every job takes a
//! session. The store is opened (created and migrated if needed) the first
//! time a job asks for it, so jobs that need no store (statistics, the
//! model registry) never create one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

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
    readers: ReadPool,
    /// The chat models opened so far, by what chose them: a session loads
    /// an embedded model once, and its jobs share its slots and KV cache.
    pub(crate) providers: Mutex<std::collections::BTreeMap<String, OpenedModel>>,
}

/// Read-only connections to the store beside the one writer, opened as
/// needed up to [`READERS`] and kept for reuse.
#[derive(Default)]
struct ReadPool {
    /// (idle connections, connections opened).
    state: Mutex<(Vec<Store>, usize)>,
    returned: Condvar,
}

/// A chat model opened by a session: its name and the provider.
pub(crate) type OpenedModel = (String, Arc<dyn evident_llm::ChatModel>);

/// At most this many read-only connections per session.
pub const READERS: usize = 4;

impl Session {
    /// A session over the store at `db` with the configuration file at
    /// `config_file` (read now if it exists; missing means defaults).
    pub fn open(db: &Path, config_file: &Path) -> Result<Session> {
        Ok(Session::with_config(db, Config::load(config_file)?))
    }

    /// A session with a configuration already built (tests, the server).
    pub fn with_config(db: &Path, config: Config) -> Session {
        Session {
            db: db.to_path_buf(),
            config,
            store: OnceLock::new(),
            readers: ReadPool::default(),
            providers: Mutex::default(),
        }
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

    /// Runs `f` on a read-only connection of its own (at most
    /// [`READERS`] at once; more callers wait for one to come back), so
    /// reads run beside each other and beside the writer instead of
    /// queueing on the store's lock. The writer is opened first, so the
    /// store exists and is migrated. For reads only: `f` cannot write.
    pub fn with_reader<T>(&self, f: impl FnOnce(&mut Store) -> Result<T>) -> Result<T> {
        self.store()?;
        let reader = {
            let mut state = self.readers.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(reader) = state.0.pop() {
                    break reader;
                }
                if state.1 < READERS {
                    state.1 += 1;
                    drop(state);
                    match Store::open_read_only(&self.db) {
                        Ok(reader) => break reader,
                        Err(e) => {
                            let mut state = self.readers.state.lock().unwrap_or_else(|e| e.into_inner());
                            state.1 -= 1;
                            self.readers.returned.notify_one();
                            return Err(AppError::Setup(format!(
                                "cannot open store {} for reading: {e}",
                                self.db.display()
                            )));
                        }
                    }
                }
                state = self.readers.returned.wait(state).unwrap_or_else(|e| e.into_inner());
            }
        };
        // Given back even if `f` panics (a panic leaves no write half-done: the connection only reads).
        struct GiveBack<'a>(&'a ReadPool, Option<Store>);
        impl Drop for GiveBack<'_> {
            fn drop(&mut self) {
                if let Some(reader) = self.1.take() {
                    let mut state = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
                    state.0.push(reader);
                    self.0.returned.notify_one();
                }
            }
        }
        let mut lent = GiveBack(&self.readers, Some(reader));
        f(lent.1.as_mut().expect("lent until dropped"))
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
