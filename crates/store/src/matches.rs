//! Trial-matching runs: a run's definition, its decisions stored one task at
//! a time (each task's results in one transaction, so a run killed at any
//! moment holds whole tasks only and resumes by skipping them), the model
//! runs that did the work, and criteria augmentations kept per trial.
//! Results, definitions and augmentations are JSON text; this crate does not
//! interpret them.

use std::collections::BTreeSet;

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use crate::{Result, Store, StoreError};

/// A match run as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatchRunRecord {
    pub id: String,
    pub trial_id: String,
    pub method: String,
    pub definition_json: String,
    pub created_at: String,
    pub finished_at: Option<String>,
    /// Stored results (note-level and patient-level).
    pub results: u64,
    pub patients: u64,
}

/// One stored result of a match run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatchResultRecord {
    pub patient_id: String,
    pub task_key: String,
    pub criterion_id: String,
    /// Empty for a patient-level result.
    pub document_id: String,
    pub result_json: String,
    pub trace_json: Option<String>,
    pub model_run_id: Option<String>,
    pub created_at: String,
}

/// One result of a task, to store.
#[derive(Debug, Clone)]
pub struct NewMatchResult {
    pub criterion_id: String,
    /// Empty for a patient-level result.
    pub document_id: String,
    pub result_json: String,
    pub trace_json: Option<String>,
}

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

impl Store {
    /// Creates the run, or finds it when a run with this id exists (a
    /// resumed run). Returns whether it existed. An existing run with a
    /// different definition is refused: the id must name one definition.
    pub fn begin_match_run(&self, id: &str, trial_id: &str, method: &str, definition_json: &str) -> Result<bool> {
        let existing: Option<String> = self
            .conn()
            .query_row("SELECT definition_json FROM match_runs WHERE id = ?1", [id], |r| r.get(0))
            .optional()?;
        match existing {
            Some(def) if def == definition_json => Ok(true),
            Some(_) => Err(StoreError::Invalid(format!(
                "match run {id} exists with a different definition; choose another run name"
            ))),
            None => {
                self.conn().execute(
                    "INSERT INTO match_runs (id, trial_id, method, definition_json, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![id, trial_id, method, definition_json, now()],
                )?;
                Ok(false)
            }
        }
    }

    /// Marks the run finished (every task of every requested patient done).
    pub fn finish_match_run(&self, id: &str) -> Result<()> {
        self.conn().execute("UPDATE match_runs SET finished_at = ?2 WHERE id = ?1", params![id, now()])?;
        Ok(())
    }

    /// Records that a model run (one invocation) worked on this match run.
    pub fn link_match_model_run(&self, match_run_id: &str, model_run_id: &str) -> Result<()> {
        self.conn().execute(
            "INSERT OR IGNORE INTO match_run_model_runs (match_run_id, model_run_id) VALUES (?1, ?2)",
            params![match_run_id, model_run_id],
        )?;
        Ok(())
    }

    /// The model runs of a match run, oldest first.
    pub fn match_model_runs(&self, match_run_id: &str) -> Result<Vec<String>> {
        let mut stmt = self.conn().prepare(
            "SELECT l.model_run_id FROM match_run_model_runs l JOIN model_runs m ON m.id = l.model_run_id
             WHERE l.match_run_id = ?1 ORDER BY m.started_at, m.rowid",
        )?;
        let rows = stmt.query_map([match_run_id], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The tasks of one patient that are done in a run.
    pub fn match_tasks_done(&self, run_id: &str, patient_id: &str) -> Result<BTreeSet<String>> {
        let mut stmt =
            self.conn().prepare("SELECT DISTINCT task_key FROM match_results WHERE run_id = ?1 AND patient_id = ?2")?;
        let rows = stmt.query_map([run_id, patient_id], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Stores all results of one task in one transaction. A result that is
    /// already stored is an error (a task is never run twice).
    pub fn put_match_task(
        &mut self,
        run_id: &str,
        patient_id: &str,
        task_key: &str,
        model_run_id: Option<&str>,
        results: &[NewMatchResult],
    ) -> Result<()> {
        if results.is_empty() {
            return Err(StoreError::Invalid(format!("task {task_key} of patient {patient_id} has no result to store")));
        }
        let created = now();
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare(
                "INSERT INTO match_results (run_id, patient_id, task_key, criterion_id, document_id, result_json,
                    trace_json, model_run_id, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?;
            for r in results {
                stmt.execute(params![
                    run_id,
                    patient_id,
                    task_key,
                    r.criterion_id,
                    r.document_id,
                    r.result_json,
                    r.trace_json,
                    model_run_id,
                    created
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Every stored result of a run, by patient, criterion and document.
    pub fn match_results(&self, run_id: &str) -> Result<Vec<MatchResultRecord>> {
        let mut stmt = self.conn().prepare(
            "SELECT patient_id, task_key, criterion_id, document_id, result_json, trace_json, model_run_id, created_at
             FROM match_results WHERE run_id = ?1 ORDER BY patient_id, criterion_id, document_id",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(MatchResultRecord {
                patient_id: r.get(0)?,
                task_key: r.get(1)?,
                criterion_id: r.get(2)?,
                document_id: r.get(3)?,
                result_json: r.get(4)?,
                trace_json: r.get(5)?,
                model_run_id: r.get(6)?,
                created_at: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// One run, or `None`.
    pub fn match_run(&self, id: &str) -> Result<Option<MatchRunRecord>> {
        Ok(self.match_runs_where("WHERE r.id = ?1", [id])?.into_iter().next())
    }

    /// All runs, newest first.
    pub fn match_runs(&self) -> Result<Vec<MatchRunRecord>> {
        self.match_runs_where("", [])
    }

    fn match_runs_where<P: rusqlite::Params>(&self, clause: &str, params: P) -> Result<Vec<MatchRunRecord>> {
        let sql = format!(
            "SELECT r.id, r.trial_id, r.method, r.definition_json, r.created_at, r.finished_at,
                    (SELECT COUNT(*) FROM match_results m WHERE m.run_id = r.id),
                    (SELECT COUNT(DISTINCT patient_id) FROM match_results m WHERE m.run_id = r.id)
             FROM match_runs r {clause} ORDER BY r.created_at DESC, r.rowid DESC"
        );
        let mut stmt = self.conn().prepare(&sql)?;
        let rows = stmt.query_map(params, |r| {
            Ok(MatchRunRecord {
                id: r.get(0)?,
                trial_id: r.get(1)?,
                method: r.get(2)?,
                definition_json: r.get(3)?,
                created_at: r.get(4)?,
                finished_at: r.get(5)?,
                results: r.get::<_, i64>(6)? as u64,
                patients: r.get::<_, i64>(7)? as u64,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// A stored augmentation of one criterion, if any.
    pub fn criteria_augmentation(
        &self,
        trial_id: &str,
        criteria_hash: &str,
        criterion_id: &str,
        model: &str,
    ) -> Result<Option<String>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT augmentation_json FROM criteria_augmentations
                 WHERE trial_id = ?1 AND criteria_hash = ?2 AND criterion_id = ?3 AND model = ?4",
                params![trial_id, criteria_hash, criterion_id, model],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Stores (or replaces) the augmentation of one criterion.
    pub fn put_criteria_augmentation(
        &self,
        trial_id: &str,
        criteria_hash: &str,
        criterion_id: &str,
        model: &str,
        augmentation_json: &str,
    ) -> Result<()> {
        self.conn().execute(
            "INSERT OR REPLACE INTO criteria_augmentations
                (trial_id, criteria_hash, criterion_id, model, augmentation_json, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![trial_id, criteria_hash, criterion_id, model, augmentation_json, now()],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(criterion: &str, doc: &str) -> NewMatchResult {
        NewMatchResult {
            criterion_id: criterion.into(),
            document_id: doc.into(),
            result_json: format!("{{\"c\":\"{criterion}\"}}"),
            trace_json: None,
        }
    }

    #[test]
    fn tasks_are_stored_whole_and_never_twice() {
        let mut store = Store::open_in_memory().unwrap();
        assert!(!store.begin_match_run("r1", "T", "ican", "{}").unwrap());
        assert!(store.begin_match_run("r1", "T", "ican", "{}").unwrap());
        let err = store.begin_match_run("r1", "T", "ican", "{\"other\":1}").unwrap_err();
        assert!(err.to_string().contains("different definition"), "{err}");

        store.put_match_task("r1", "P1", "c:a", None, &[result("a", "")]).unwrap();
        store.put_match_task("r1", "P1", "c:*", None, &[result("b", "D1"), result("c", "D1")]).unwrap();
        assert_eq!(store.match_tasks_done("r1", "P1").unwrap(), BTreeSet::from(["c:a".into(), "c:*".into()]));
        assert!(store.match_tasks_done("r1", "P2").unwrap().is_empty());

        // A doubled result fails and leaves the other results of the task out.
        let err = store.put_match_task("r1", "P1", "again", None, &[result("d", ""), result("a", "")]);
        assert!(err.is_err());
        assert_eq!(store.match_results("r1").unwrap().len(), 3);
        assert!(store.put_match_task("r1", "P1", "empty", None, &[]).is_err());

        let run = store.match_run("r1").unwrap().unwrap();
        assert_eq!((run.results, run.patients), (3, 1));
    }

    #[test]
    fn augmentations_are_kept_per_trial_criteria_and_model() {
        let store = Store::open_in_memory().unwrap();
        store.put_criteria_augmentation("T", "h1", "c1", "m", "{\"x\":1}").unwrap();
        assert_eq!(store.criteria_augmentation("T", "h1", "c1", "m").unwrap().as_deref(), Some("{\"x\":1}"));
        assert_eq!(store.criteria_augmentation("T", "h2", "c1", "m").unwrap(), None);
        assert_eq!(store.criteria_augmentation("T", "h1", "c1", "other").unwrap(), None);
    }
}
