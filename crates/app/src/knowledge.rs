//! The knowledge-base jobs: index `.md`/`.txt` documents into the local
//! knowledge base MAKAR's retrieval agent searches (all or nothing; every
//! bad input reported), and search it by BM25 as the agent would. The
//! work is done by `evident_match::makar::LocalKnowledgeBase`; a knowledge
//! base is its own file, apart from the session's patient store.

use std::fmt;
use std::path::{Path, PathBuf};

use evident_match::makar::LocalKnowledgeBase;
use evident_store::KnowledgeHit;
use serde::Serialize;
use serde_json::Value;

use crate::error::{input_error, Result};

/// One indexed file.
#[derive(Debug, Serialize)]
pub struct IndexedFile {
    pub id: String,
    pub path: String,
    /// `inserted`, `unchanged` or `replaced`.
    pub outcome: Value,
}

/// What indexing did.
#[derive(Debug, Serialize)]
pub struct Indexed {
    pub kb: String,
    pub inserted: usize,
    pub unchanged: usize,
    pub replaced: usize,
    /// Documents in the knowledge base now.
    pub documents: usize,
    pub files: Vec<IndexedFile>,
}

/// Indexes `paths` (files or folders, searched recursively) into the
/// knowledge base at `kb`, creating it if missing.
pub fn index(kb: &Path, paths: &[PathBuf]) -> Result<Indexed> {
    let base = LocalKnowledgeBase::open_or_create(kb)?;
    let report = base.index(paths)?;
    let documents = base.document_ids()?.len();
    let files = report
        .files
        .iter()
        .map(|(id, path, outcome)| {
            Ok(IndexedFile {
                id: id.clone(),
                path: path.display().to_string(),
                outcome: serde_json::to_value(outcome)?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(Indexed {
        kb: kb.display().to_string(),
        inserted: report.inserted,
        unchanged: report.unchanged,
        replaced: report.replaced,
        documents,
        files,
    })
}

impl fmt::Display for Indexed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for file in &self.files {
            let outcome = file.outcome.as_str().unwrap_or_default();
            writeln!(f, "{outcome:<9} {}  ({})", file.id, file.path)?;
        }
        writeln!(
            f,
            "{} new, {} unchanged, {} replaced; {} has {} document(s)",
            self.inserted, self.unchanged, self.replaced, self.kb, self.documents
        )
    }
}

/// One passage found.
#[derive(Debug, Serialize)]
pub struct Passage {
    pub document_id: String,
    pub heading: Option<String>,
    pub start: usize,
    pub end: usize,
    pub score: f64,
    pub text: String,
}

/// The best passages for a query, best first.
#[derive(Debug, Serialize)]
pub struct Passages {
    pub kb: String,
    pub query: String,
    pub k: usize,
    pub hits: Vec<Passage>,
}

/// The best `k` passages of the knowledge base at `kb` for `query`.
pub fn search(kb: &Path, query: &str, k: usize) -> Result<Passages> {
    if k == 0 {
        input_error!("k = 0 asks for no passages; give 1 or more");
    }
    let base = LocalKnowledgeBase::open(kb)?;
    let hits = base.search_hits(query, k)?.into_iter().map(passage).collect();
    Ok(Passages { kb: kb.display().to_string(), query: query.to_string(), k, hits })
}

fn passage(hit: KnowledgeHit) -> Passage {
    Passage {
        document_id: hit.document_id,
        heading: hit.heading,
        start: hit.start,
        end: hit.end,
        score: hit.score,
        text: hit.text,
    }
}

impl fmt::Display for Passages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.hits.is_empty() {
            return writeln!(f, "nothing in {} matches {:?}", self.kb, self.query);
        }
        for (i, hit) in self.hits.iter().enumerate() {
            let heading = hit.heading.as_deref().map(|h| format!("  [{h}]")).unwrap_or_default();
            writeln!(
                f,
                "{}. {}{heading}  bytes {}..{}  score {:.4}",
                i + 1,
                hit.document_id,
                hit.start,
                hit.end,
                hit.score
            )?;
            for line in hit.text.lines() {
                writeln!(f, "   | {line}")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
