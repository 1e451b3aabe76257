-- Trial-matching runs: each run's definition, every decision as soon as it
-- is made (so a killed run resumes without losing or repeating one), the
-- model runs that did the work, and criteria augmentations reused across
-- patients and runs.

CREATE TABLE match_runs (
    -- Derived from the definition: the same command resumes the same run.
    id              TEXT PRIMARY KEY,
    trial_id        TEXT NOT NULL,
    method          TEXT NOT NULL,
    -- Criteria set, method, retrieval settings and model ids, as JSON.
    definition_json TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    finished_at     TEXT
);

CREATE TABLE match_results (
    run_id       TEXT NOT NULL REFERENCES match_runs(id),
    patient_id   TEXT NOT NULL,
    -- The unit of work that produced the result (one model-call group);
    -- a task with any stored result is done.
    task_key     TEXT NOT NULL,
    criterion_id TEXT NOT NULL,
    -- The note assessed for note-level results; '' for a patient-level one.
    document_id  TEXT NOT NULL DEFAULT '',
    result_json  TEXT NOT NULL,
    -- Agent trace (MAKAR) or NULL.
    trace_json   TEXT,
    model_run_id TEXT,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (run_id, patient_id, criterion_id, document_id)
);
CREATE INDEX match_results_by_task ON match_results(run_id, patient_id, task_key);

CREATE TABLE match_run_model_runs (
    match_run_id TEXT NOT NULL REFERENCES match_runs(id),
    model_run_id TEXT NOT NULL REFERENCES model_runs(id),
    PRIMARY KEY (match_run_id, model_run_id)
);

CREATE TABLE criteria_augmentations (
    trial_id          TEXT NOT NULL,
    -- sha256 of the criteria set as JSON: edited criteria are augmented anew.
    criteria_hash     TEXT NOT NULL,
    criterion_id      TEXT NOT NULL,
    -- The model that wrote the augmentation (criteria are not patient data).
    model             TEXT NOT NULL,
    augmentation_json TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    PRIMARY KEY (trial_id, criteria_hash, criterion_id, model)
);
