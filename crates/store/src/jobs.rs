//! Background jobs (migration 6): the review service's screenings and
//! chart questions, their state, progress and result. A job's row and its
//! `job_start` audit entry are written in one transaction. A job found
//! queued or running when a server starts was cut off by the previous
//! server's end: [`Store::interrupt_unfinished_jobs`] marks it so.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use crate::review::insert_audit;
use crate::{NewAuditEntry, Result, Store, StoreError};

pub const JOB_KINDS: [&str; 2] = ["screening", "chart"];
pub const JOB_STATES: [&str; 5] = ["queued", "running", "finished", "failed", "interrupted"];

/// A job to record (queued).
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub id: String,
    pub kind: String,
    pub requested_by: String,
    pub request_json: String,
    pub resumes: Option<String>,
}

/// A stored job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRecord {
    pub id: String,
    pub kind: String,
    pub state: String,
    pub requested_by: String,
    pub request_json: String,
    pub resumes: Option<String>,
    pub progress_done: i64,
    pub progress_total: Option<i64>,
    pub message: String,
    pub result_json: Option<String>,
    pub error: Option<String>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub updated_at: String,
}

impl JobRecord {
    /// Finished, failed or interrupted: nothing more will change.
    pub fn is_over(&self) -> bool {
        matches!(self.state.as_str(), "finished" | "failed" | "interrupted")
    }
}

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

const COLUMNS: &str = "id, kind, state, requested_by, request_json, resumes, progress_done, progress_total, message, \
                       result_json, error, created_at, started_at, finished_at, updated_at";

fn job_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<JobRecord> {
    Ok(JobRecord {
        id: r.get(0)?,
        kind: r.get(1)?,
        state: r.get(2)?,
        requested_by: r.get(3)?,
        request_json: r.get(4)?,
        resumes: r.get(5)?,
        progress_done: r.get(6)?,
        progress_total: r.get(7)?,
        message: r.get(8)?,
        result_json: r.get(9)?,
        error: r.get(10)?,
        created_at: r.get(11)?,
        started_at: r.get(12)?,
        finished_at: r.get(13)?,
        updated_at: r.get(14)?,
    })
}

impl Store {
    /// Records a queued job with its audit entry, in one transaction.
    pub fn put_job(&self, job: &NewJob, audit: &NewAuditEntry) -> Result<()> {
        if !JOB_KINDS.contains(&job.kind.as_str()) {
            return Err(StoreError::Invalid(format!("job kind {:?} is not one of {}", job.kind, JOB_KINDS.join(", "))));
        }
        let tx = self.conn().unchecked_transaction()?;
        let at = now();
        tx.execute(
            "INSERT INTO jobs (id, kind, state, requested_by, request_json, resumes, created_at, updated_at)
             VALUES (?1, ?2, 'queued', ?3, ?4, ?5, ?6, ?6)",
            params![job.id, job.kind, job.requested_by, job.request_json, job.resumes, at],
        )?;
        insert_audit(&tx, audit)?;
        tx.commit()?;
        Ok(())
    }

    /// Marks a queued job running.
    pub fn start_job(&self, id: &str) -> Result<()> {
        let at = now();
        let changed = self.conn().execute(
            "UPDATE jobs SET state = 'running', started_at = ?2, updated_at = ?2 WHERE id = ?1 AND state = 'queued'",
            params![id, at],
        )?;
        if changed == 0 {
            return Err(StoreError::Invalid(format!("job {id:?} is not queued")));
        }
        Ok(())
    }

    /// Records a running job's progress.
    pub fn job_progress(&self, id: &str, done: i64, total: Option<i64>, message: &str) -> Result<()> {
        self.conn().execute(
            "UPDATE jobs SET progress_done = ?2, progress_total = ?3, message = ?4, updated_at = ?5
             WHERE id = ?1 AND state = 'running'",
            params![id, done, total, message, now()],
        )?;
        Ok(())
    }

    /// Ends a job: `finished` with its result, `failed` or `interrupted`
    /// with its error.
    pub fn end_job(&self, id: &str, state: &str, result_json: Option<&str>, error: Option<&str>) -> Result<()> {
        if !matches!(state, "finished" | "failed" | "interrupted") {
            return Err(StoreError::Invalid(format!("a job cannot end as {state:?}")));
        }
        let at = now();
        self.conn().execute(
            "UPDATE jobs SET state = ?2, result_json = ?3, error = ?4, finished_at = ?5, updated_at = ?5
             WHERE id = ?1 AND state IN ('queued', 'running')",
            params![id, state, result_json, error, at],
        )?;
        Ok(())
    }

    /// Marks every queued or running job interrupted (a server starting:
    /// the process that ran them is gone). Returns how many.
    pub fn interrupt_unfinished_jobs(&self, reason: &str) -> Result<usize> {
        let at = now();
        Ok(self.conn().execute(
            "UPDATE jobs SET state = 'interrupted', error = ?1, finished_at = ?2, updated_at = ?2
             WHERE state IN ('queued', 'running')",
            params![reason, at],
        )?)
    }

    pub fn job(&self, id: &str) -> Result<Option<JobRecord>> {
        Ok(self.conn().query_row(&format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1"), [id], job_row).optional()?)
    }

    /// Jobs, newest first, at most `limit`.
    pub fn jobs(&self, limit: usize) -> Result<Vec<JobRecord>> {
        let mut stmt =
            self.conn().prepare(&format!("SELECT {COLUMNS} FROM jobs ORDER BY created_at DESC, id DESC LIMIT ?1"))?;
        let rows = stmt.query_map([limit as i64], job_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audit(subject: &str) -> NewAuditEntry {
        NewAuditEntry {
            actor: "rita".into(),
            action: "job_start".into(),
            subject: subject.into(),
            before_json: None,
            after_json: None,
            reason: String::new(),
        }
    }

    #[test]
    fn a_job_goes_queued_running_finished_and_an_unfinished_one_is_interrupted_on_restart() {
        let store = Store::open_in_memory().unwrap();
        store
            .put_user("rita", "reviewer", "x", &NewAuditEntry { action: "user_add".into(), ..audit("user/rita") })
            .unwrap();
        let new = |id: &str| NewJob {
            id: id.into(),
            kind: "chart".into(),
            requested_by: "rita".into(),
            request_json: "{}".into(),
            resumes: None,
        };
        store.put_job(&new("j1"), &audit("job/j1")).unwrap();
        store.put_job(&new("j2"), &audit("job/j2")).unwrap();
        assert!(store.put_job(&NewJob { kind: "other".into(), ..new("j3") }, &audit("x")).is_err());
        assert_eq!(store.job("j1").unwrap().unwrap().state, "queued");
        store.start_job("j1").unwrap();
        assert!(store.start_job("j1").is_err(), "a running job cannot start again");
        store.job_progress("j1", 3, Some(10), "3 of 10").unwrap();
        let j1 = store.job("j1").unwrap().unwrap();
        assert_eq!((j1.state.as_str(), j1.progress_done, j1.progress_total), ("running", 3, Some(10)));
        store.end_job("j1", "finished", Some("{\"ok\":true}"), None).unwrap();
        store.job_progress("j1", 4, Some(10), "late").unwrap();
        let j1 = store.job("j1").unwrap().unwrap();
        assert!(j1.is_over());
        assert_eq!(j1.progress_done, 3, "an ended job's progress no longer changes");
        store.start_job("j2").unwrap();
        assert_eq!(store.interrupt_unfinished_jobs("server restarted").unwrap(), 1);
        let j2 = store.job("j2").unwrap().unwrap();
        assert_eq!((j2.state.as_str(), j2.error.as_deref()), ("interrupted", Some("server restarted")));
        assert_eq!(store.jobs(10).unwrap().len(), 2);
        let starts = store.audit_log().unwrap().into_iter().filter(|a| a.action == "job_start").count();
        assert_eq!(starts, 2, "the refused job wrote no audit entry");
    }
}
