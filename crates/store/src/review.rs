//! The review service's tables (migration 5): local accounts, login
//! sessions, reviewers' overrides and sign-offs, and the audit trail.
//! An override or a sign-off is written in the same transaction as its
//! audit entry, so neither exists without the other. Overrides, sign-offs
//! and audit entries are only ever inserted: the schema's triggers refuse
//! UPDATE and DELETE, and this module offers neither. The model's decision
//! in `match_results` is never touched here.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use crate::{Result, Store, StoreError};

/// A local account. The hash is Argon2 in PHC form; this crate does not
/// interpret it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UserRecord {
    pub name: String,
    pub role: String,
    #[serde(skip)]
    pub password_hash: String,
    pub created_at: String,
}

/// A login session, found by the hash of its cookie.
#[derive(Debug, Clone, PartialEq)]
pub struct WebSessionRecord {
    pub user_name: String,
    pub role: String,
    pub csrf_token: String,
    pub expires_at: String,
}

/// A reviewer's decision for one criterion, stored beside the model's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverrideRecord {
    pub id: i64,
    pub run_id: String,
    pub patient_id: String,
    pub criterion_id: String,
    pub decision: String,
    pub reason: String,
    pub reviewer: String,
    pub created_at: String,
}

/// A reviewer's sign-off of one patient-trial pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignoffRecord {
    pub id: i64,
    pub run_id: String,
    pub patient_id: String,
    pub reviewer: String,
    pub note: String,
    pub created_at: String,
}

/// One entry of the audit trail: who, when, what, before, after, why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    pub id: i64,
    pub at: String,
    pub actor: String,
    pub action: String,
    pub subject: String,
    pub before_json: Option<String>,
    pub after_json: Option<String>,
    pub reason: String,
}

/// An audit entry to append (the time is the store's).
#[derive(Debug, Clone, PartialEq)]
pub struct NewAuditEntry {
    pub actor: String,
    pub action: String,
    pub subject: String,
    pub before_json: Option<String>,
    pub after_json: Option<String>,
    pub reason: String,
}

/// An override to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOverride {
    pub run_id: String,
    pub patient_id: String,
    pub criterion_id: String,
    pub decision: String,
    pub reason: String,
    pub reviewer: String,
}

pub const ROLES: [&str; 3] = ["viewer", "reviewer", "admin"];

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

impl Store {
    /// Adds an account, with its audit entry. An existing name is refused.
    pub fn put_user(&self, name: &str, role: &str, password_hash: &str, audit: &NewAuditEntry) -> Result<()> {
        if !ROLES.contains(&role) {
            return Err(StoreError::Invalid(format!("role {role:?} is not one of {}", ROLES.join(", "))));
        }
        let tx = self.conn().unchecked_transaction()?;
        let exists = tx.query_row("SELECT 1 FROM users WHERE name = ?1", [name], |_| Ok(())).optional()?.is_some();
        if exists {
            return Err(StoreError::Invalid(format!("a user named {name:?} exists already")));
        }
        tx.execute(
            "INSERT INTO users (name, role, password_hash, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![name, role, password_hash, now()],
        )?;
        insert_audit(&tx, audit)?;
        tx.commit()?;
        Ok(())
    }

    pub fn user(&self, name: &str) -> Result<Option<UserRecord>> {
        Ok(self
            .conn()
            .query_row("SELECT name, role, password_hash, created_at FROM users WHERE name = ?1", [name], user_row)
            .optional()?)
    }

    pub fn users(&self) -> Result<Vec<UserRecord>> {
        let mut stmt = self.conn().prepare("SELECT name, role, password_hash, created_at FROM users ORDER BY name")?;
        let rows = stmt.query_map([], user_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Stores a login session under the hash of its cookie.
    pub fn put_web_session(&self, token_hash: &str, user: &str, csrf_token: &str, expires_at: &str) -> Result<()> {
        self.conn().execute(
            "INSERT INTO web_sessions (token_hash, user_name, csrf_token, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![token_hash, user, csrf_token, now(), expires_at],
        )?;
        Ok(())
    }

    /// The session with this cookie hash that has not expired at `now`
    /// (a timestamp in the same format as `expires_at`).
    pub fn web_session(&self, token_hash: &str, now: &str) -> Result<Option<WebSessionRecord>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT s.user_name, u.role, s.csrf_token, s.expires_at
                 FROM web_sessions s JOIN users u ON u.name = s.user_name
                 WHERE s.token_hash = ?1 AND s.expires_at > ?2",
                params![token_hash, now],
                |r| {
                    Ok(WebSessionRecord {
                        user_name: r.get(0)?,
                        role: r.get(1)?,
                        csrf_token: r.get(2)?,
                        expires_at: r.get(3)?,
                    })
                },
            )
            .optional()?)
    }

    /// Ends a session (logout), and drops every session expired at `now`.
    pub fn end_web_session(&self, token_hash: &str, now: &str) -> Result<()> {
        self.conn()
            .execute("DELETE FROM web_sessions WHERE token_hash = ?1 OR expires_at <= ?2", params![token_hash, now])?;
        Ok(())
    }

    /// Stores an override beside the model's decision, with its audit
    /// entry, in one transaction. Returns the override's id.
    pub fn put_override(&self, new: &NewOverride, audit: &NewAuditEntry) -> Result<i64> {
        if new.reason.trim().is_empty() {
            return Err(StoreError::Invalid("an override needs a reason".into()));
        }
        let tx = self.conn().unchecked_transaction()?;
        tx.execute(
            "INSERT INTO decision_overrides (run_id, patient_id, criterion_id, decision, reason, reviewer, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![new.run_id, new.patient_id, new.criterion_id, new.decision, new.reason, new.reviewer, now()],
        )?;
        let id = tx.last_insert_rowid();
        insert_audit(&tx, audit)?;
        tx.commit()?;
        Ok(id)
    }

    /// A run's overrides (of one patient, or all), oldest first.
    pub fn overrides(&self, run_id: &str, patient_id: Option<&str>) -> Result<Vec<OverrideRecord>> {
        let mut stmt = self.conn().prepare(
            "SELECT id, run_id, patient_id, criterion_id, decision, reason, reviewer, created_at
             FROM decision_overrides WHERE run_id = ?1 AND (?2 IS NULL OR patient_id = ?2) ORDER BY id",
        )?;
        let rows = stmt
            .query_map(params![run_id, patient_id], |r| {
                Ok(OverrideRecord {
                    id: r.get(0)?,
                    run_id: r.get(1)?,
                    patient_id: r.get(2)?,
                    criterion_id: r.get(3)?,
                    decision: r.get(4)?,
                    reason: r.get(5)?,
                    reviewer: r.get(6)?,
                    created_at: r.get(7)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Stores a sign-off with its audit entry, in one transaction.
    pub fn put_signoff(
        &self,
        run_id: &str,
        patient_id: &str,
        reviewer: &str,
        note: &str,
        audit: &NewAuditEntry,
    ) -> Result<i64> {
        let tx = self.conn().unchecked_transaction()?;
        tx.execute(
            "INSERT INTO signoffs (run_id, patient_id, reviewer, note, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![run_id, patient_id, reviewer, note, now()],
        )?;
        let id = tx.last_insert_rowid();
        insert_audit(&tx, audit)?;
        tx.commit()?;
        Ok(id)
    }

    /// A run's sign-offs (of one patient, or all), oldest first.
    pub fn signoffs(&self, run_id: &str, patient_id: Option<&str>) -> Result<Vec<SignoffRecord>> {
        let mut stmt = self.conn().prepare(
            "SELECT id, run_id, patient_id, reviewer, note, created_at FROM signoffs
             WHERE run_id = ?1 AND (?2 IS NULL OR patient_id = ?2) ORDER BY id",
        )?;
        let rows = stmt
            .query_map(params![run_id, patient_id], |r| {
                Ok(SignoffRecord {
                    id: r.get(0)?,
                    run_id: r.get(1)?,
                    patient_id: r.get(2)?,
                    reviewer: r.get(3)?,
                    note: r.get(4)?,
                    created_at: r.get(5)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Appends one audit entry on its own (a job start). Returns its id.
    pub fn append_audit(&self, entry: &NewAuditEntry) -> Result<i64> {
        insert_audit(self.conn(), entry)
    }

    /// A fingerprint of a screening run's stored results (how many, and
    /// the newest row): it changes whenever a result is added or
    /// replaced, so a view built from them can be kept until it does.
    pub fn match_results_fingerprint(&self, run_id: &str) -> Result<(i64, i64)> {
        let count = || -> Result<(i64, i64)> {
            Ok(self.conn().query_row(
                "SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM match_results WHERE run_id = ?1",
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        };
        // A read-only connection counts again only when another connection
        // has committed since it last counted (the count scans the run's
        // index entries: 20,000 for 1,000 patients x 20 criteria).
        let Some(cache) = &self.fingerprints else { return count() };
        let version: i64 = self.conn().pragma_query_value(None, "data_version", |r| r.get(0))?;
        if let Some((seen, fingerprint)) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(run_id) {
            if *seen == version {
                return Ok(*fingerprint);
            }
        }
        let fingerprint = count()?;
        cache.lock().unwrap_or_else(|e| e.into_inner()).insert(run_id.to_string(), (version, fingerprint));
        Ok(fingerprint)
    }

    /// The audit trail, oldest first.
    pub fn audit_log(&self) -> Result<Vec<AuditRecord>> {
        let mut stmt = self.conn().prepare(
            "SELECT id, at, actor, action, subject, before_json, after_json, reason FROM audit_log ORDER BY id",
        )?;
        let rows = stmt
            .query_map([], |r| {
                Ok(AuditRecord {
                    id: r.get(0)?,
                    at: r.get(1)?,
                    actor: r.get(2)?,
                    action: r.get(3)?,
                    subject: r.get(4)?,
                    before_json: r.get(5)?,
                    after_json: r.get(6)?,
                    reason: r.get(7)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }
}

fn user_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<UserRecord> {
    Ok(UserRecord { name: r.get(0)?, role: r.get(1)?, password_hash: r.get(2)?, created_at: r.get(3)? })
}

pub(crate) fn insert_audit(conn: &rusqlite::Connection, e: &NewAuditEntry) -> Result<i64> {
    conn.execute(
        "INSERT INTO audit_log (at, actor, action, subject, before_json, after_json, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![now(), e.actor, e.action, e.subject, e.before_json, e.after_json, e.reason],
    )?;
    Ok(conn.last_insert_rowid())
}
