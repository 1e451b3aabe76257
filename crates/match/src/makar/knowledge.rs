//! The knowledge MAKAR's retrieval agent augments criteria from: the
//! [`KnowledgeSource`] capability and [`LocalKnowledgeBase`], a separate
//! Evident store file indexed from `.md`/`.txt` documents the user chooses.
//! The documents and their sections live in the store's knowledge tables
//! (`evident_store`'s `knowledge` module), apart from patient records, and
//! are searched by BM25 with the same FTS5 tokenizer as patient sections.
//!
//! A store that holds no knowledge documents (a patient store, or a file
//! nothing was indexed into) is refused for searching, so a patient store
//! is never searched by mistake. Indexing is all or nothing: every bad
//! input is reported and nothing is written unless all inputs are good.
//! Re-indexing an unchanged file is a no-op; a changed file replaces its
//! old version.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use evident_model::text::split_sections;
use evident_store::{KnowledgeDocument, KnowledgeHit, PutEffect, Store};
use serde::{Deserialize, Serialize};

use crate::zero_shot::MatchError;

/// A piece of reference text an augmentation agent was given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Passage {
    /// Where it came from: a knowledge-base document id (with the section
    /// heading when there is one) or a URL.
    pub source: String,
    pub text: String,
}

/// Something an augmentation agent can search for reference text.
pub trait KnowledgeSource: Send + Sync {
    /// The best `k` passages for `query`, best first.
    fn search(&self, query: &str, k: usize) -> Result<Vec<Passage>, MatchError>;
}

/// What indexing did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IndexReport {
    /// (document id, file, outcome) per indexed file, in path order.
    pub files: Vec<(String, PathBuf, PutEffect)>,
    pub inserted: usize,
    pub unchanged: usize,
    pub replaced: usize,
}

/// A knowledge base in its own store file. The store's connection is not
/// `Sync`, so it sits behind a mutex; searches are short.
pub struct LocalKnowledgeBase {
    store: Mutex<Store>,
    origin: String,
}

impl LocalKnowledgeBase {
    /// Opens the knowledge base at `path`, creating the file if missing
    /// (for indexing).
    pub fn open_or_create(path: &Path) -> Result<LocalKnowledgeBase, MatchError> {
        let origin = path.display().to_string();
        let store = Store::open(path)
            .map_err(|e| MatchError::Knowledge(format!("{origin}: cannot open as a knowledge base: {e}")))?;
        Ok(LocalKnowledgeBase { store: Mutex::new(store), origin })
    }

    /// Opens an existing knowledge base for searching; a missing file, or a
    /// store that holds no knowledge base, is refused.
    pub fn open(path: &Path) -> Result<LocalKnowledgeBase, MatchError> {
        let origin = path.display().to_string();
        if !path.is_file() {
            return Err(MatchError::Knowledge(format!(
                "{origin}: no such knowledge base; create it by indexing documents into {origin} (`evident kb index`)"
            )));
        }
        let kb = LocalKnowledgeBase::open_or_create(path)?;
        if kb.document_ids()?.is_empty() {
            return Err(MatchError::Knowledge(format!(
                "{origin}: holds no knowledge base (nothing indexed by `evident kb index`); is this a patient store?"
            )));
        }
        Ok(kb)
    }

    /// An empty knowledge base in memory (tests, one-off runs).
    pub fn in_memory() -> Result<LocalKnowledgeBase, MatchError> {
        let store =
            Store::open_in_memory().map_err(|e| MatchError::Knowledge(format!("in-memory knowledge base: {e}")))?;
        Ok(LocalKnowledgeBase { store: Mutex::new(store), origin: "(in memory)".into() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        // A panic while holding the lock cannot leave a half-written
        // transaction (it rolls back on drop), so a poisoned lock is usable.
        self.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Indexes the `.md` and `.txt` files named by `paths` (files, or
    /// folders searched recursively). Reports every bad input at once and
    /// writes nothing unless all are good.
    pub fn index(&self, paths: &[PathBuf]) -> Result<IndexReport, MatchError> {
        let documents = read_documents(paths)?;
        let mut store = self.lock();
        let origin = &self.origin;
        let fail = |e: evident_store::StoreError| MatchError::Knowledge(format!("{origin}: cannot write: {e}"));
        let writer = store.writer().map_err(fail)?;
        let mut report = IndexReport::default();
        for (path, doc) in documents {
            let outcome = writer
                .put_knowledge_document(&doc, &split_sections(&doc.text))
                .map_err(|e| MatchError::Knowledge(format!("{}: cannot index: {e}", path.display())))?;
            match outcome {
                PutEffect::Inserted => report.inserted += 1,
                PutEffect::Unchanged => report.unchanged += 1,
                PutEffect::Replaced => report.replaced += 1,
            }
            report.files.push((doc.id, path, outcome));
        }
        writer.commit().map_err(fail)?;
        Ok(report)
    }

    /// The ids of the indexed documents.
    pub fn document_ids(&self) -> Result<Vec<String>, MatchError> {
        let store = self.lock();
        store.knowledge_document_ids().map_err(|e| MatchError::Knowledge(format!("{}: cannot read: {e}", self.origin)))
    }

    /// The best `k` sections for `query` by BM25, with scores and spans.
    pub fn search_hits(&self, query: &str, k: usize) -> Result<Vec<KnowledgeHit>, MatchError> {
        let store = self.lock();
        store
            .search_knowledge(query, k)
            .map_err(|e| MatchError::Knowledge(format!("{}: search for {query:?} failed: {e}", self.origin)))
    }
}

impl KnowledgeSource for LocalKnowledgeBase {
    fn search(&self, query: &str, k: usize) -> Result<Vec<Passage>, MatchError> {
        Ok(self
            .search_hits(query, k)?
            .into_iter()
            .map(|h| Passage {
                source: match &h.heading {
                    Some(heading) => format!("{} ({heading})", h.document_id),
                    None => h.document_id.clone(),
                },
                text: h.text,
            })
            .collect())
    }
}

fn is_indexable(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("md") || e.eq_ignore_ascii_case("txt"))
}

/// Files under `dir`, recursively, sorted; hidden entries skipped.
fn walk(dir: &Path, out: &mut Vec<PathBuf>, problems: &mut Vec<String>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            problems.push(format!("{}: cannot list the folder: {e}", dir.display()));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.')) {
            continue;
        }
        if path.is_dir() {
            walk(&path, out, problems);
        } else if is_indexable(&path) {
            out.push(path);
        }
    }
}

/// Reads every input into a document, or returns all problems at once.
fn read_documents(paths: &[PathBuf]) -> Result<Vec<(PathBuf, KnowledgeDocument)>, MatchError> {
    let mut problems = Vec::new();
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    if paths.is_empty() {
        problems.push("no documents given; name .md or .txt files or folders that hold them".to_string());
    }
    for arg in paths {
        if arg.is_dir() {
            let mut found = Vec::new();
            walk(arg, &mut found, &mut problems);
            if found.is_empty() {
                problems.push(format!("{}: the folder holds no .md or .txt files", arg.display()));
            }
            // Ids name the folder as given and the path inside it, so the
            // same folder indexed again finds the same documents.
            let root = arg.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            for path in found {
                let inner = path.strip_prefix(arg).unwrap_or(&path).to_string_lossy().replace('\\', "/");
                let id = if root.is_empty() { inner } else { format!("{root}/{inner}") };
                files.push((path, id));
            }
        } else if arg.is_file() {
            if is_indexable(arg) {
                let id = arg.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                files.push((arg.clone(), id));
            } else {
                problems.push(format!(
                    "{}: not a .md or .txt file; the knowledge base indexes plain text and Markdown",
                    arg.display()
                ));
            }
        } else {
            problems.push(format!("{}: no such file or folder", arg.display()));
        }
    }
    let mut seen = std::collections::BTreeMap::new();
    let mut documents = Vec::new();
    for (path, id) in files {
        let id = format!("kb:{id}");
        if let Some(first) = seen.insert(id.clone(), path.clone()) {
            problems.push(format!(
                "{}: would get the same id {id} as {}; index one of them, or rename it",
                path.display(),
                first.display()
            ));
            continue;
        }
        let text = match std::fs::read(&path) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(e) => {
                    problems.push(format!(
                        "{}: not UTF-8 text (invalid byte at offset {}); save it as UTF-8",
                        path.display(),
                        e.utf8_error().valid_up_to()
                    ));
                    continue;
                }
            },
            Err(e) => {
                problems.push(format!("{}: cannot read: {e}", path.display()));
                continue;
            }
        };
        if text.trim().is_empty() {
            problems.push(format!("{}: the file is empty; remove it or write the text in it", path.display()));
            continue;
        }
        let title = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .and_then(|l| l.strip_prefix("# "))
            .map(str::to_string)
            .unwrap_or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default());
        let document = KnowledgeDocument { id, path: Some(path.display().to_string()), title, text };
        documents.push((path, document));
    }
    if problems.is_empty() {
        Ok(documents)
    } else {
        Err(MatchError::Knowledge(format!(
            "{} problem(s); nothing was indexed:\n  {}",
            problems.len(),
            problems.join("\n  ")
        )))
    }
}
