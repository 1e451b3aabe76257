-- The review service: local accounts, login sessions, reviewers'
-- overrides and sign-offs, and the audit trail. Overrides, sign-offs and
-- the audit log are append-only (triggers refuse UPDATE and DELETE): an
-- override is a new row beside the model's decision in match_results,
-- which it never changes; a later override supersedes an earlier one by
-- being newer, and both stay.

CREATE TABLE users (
    name          TEXT PRIMARY KEY,
    role          TEXT NOT NULL CHECK (role IN ('viewer', 'reviewer', 'admin')),
    -- Argon2 in PHC string form (algorithm, parameters, salt, hash).
    password_hash TEXT NOT NULL,
    created_at    TEXT NOT NULL
);

CREATE TABLE web_sessions (
    -- sha256 of the cookie's value: a copy of the store gives no session.
    token_hash TEXT PRIMARY KEY,
    user_name  TEXT NOT NULL REFERENCES users(name),
    -- Sent back with every state-changing request.
    csrf_token TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);

CREATE TABLE decision_overrides (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id       TEXT NOT NULL REFERENCES match_runs(id),
    patient_id   TEXT NOT NULL,
    criterion_id TEXT NOT NULL,
    -- MET, NOT MET, NOT ENOUGH INFORMATION or NOT APPLICABLE.
    decision     TEXT NOT NULL,
    reason       TEXT NOT NULL CHECK (length(trim(reason)) > 0),
    reviewer     TEXT NOT NULL REFERENCES users(name),
    created_at   TEXT NOT NULL
);
CREATE INDEX decision_overrides_by_patient ON decision_overrides(run_id, patient_id, criterion_id);

CREATE TABLE signoffs (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id     TEXT NOT NULL REFERENCES match_runs(id),
    patient_id TEXT NOT NULL,
    reviewer   TEXT NOT NULL REFERENCES users(name),
    note       TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
CREATE INDEX signoffs_by_patient ON signoffs(run_id, patient_id);

CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          TEXT NOT NULL,
    actor       TEXT NOT NULL,
    -- override, sign_off, job_start, user_add.
    action      TEXT NOT NULL,
    -- What was acted on, e.g. run/patient/criterion.
    subject     TEXT NOT NULL,
    before_json TEXT,
    after_json  TEXT,
    reason      TEXT NOT NULL DEFAULT ''
);

CREATE TRIGGER decision_overrides_append_only_update BEFORE UPDATE ON decision_overrides
BEGIN SELECT RAISE(ABORT, 'decision_overrides is append-only'); END;
CREATE TRIGGER decision_overrides_append_only_delete BEFORE DELETE ON decision_overrides
BEGIN SELECT RAISE(ABORT, 'decision_overrides is append-only'); END;
CREATE TRIGGER signoffs_append_only_update BEFORE UPDATE ON signoffs
BEGIN SELECT RAISE(ABORT, 'signoffs is append-only'); END;
CREATE TRIGGER signoffs_append_only_delete BEFORE DELETE ON signoffs
BEGIN SELECT RAISE(ABORT, 'signoffs is append-only'); END;
CREATE TRIGGER audit_log_append_only_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_append_only_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
