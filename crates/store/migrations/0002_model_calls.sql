-- Model calls: runs, every call with its full request and response, the
-- content-addressed answer cache, and pipeline failures (answers that never
-- validated, kept verbatim).

CREATE TABLE model_runs (
    id          TEXT PRIMARY KEY,
    label       TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    finished_at TEXT
);

CREATE TABLE model_calls (
    id                    INTEGER PRIMARY KEY,
    run_id                TEXT NOT NULL REFERENCES model_runs(id),
    started_at            TEXT NOT NULL,
    model                 TEXT NOT NULL,
    endpoint              TEXT NOT NULL,
    -- sha256 of model id + canonical request JSON.
    cache_key             TEXT NOT NULL,
    cache_hit             INTEGER NOT NULL CHECK (cache_hit IN (0, 1)),
    prompt_tokens         INTEGER NOT NULL DEFAULT 0,
    completion_tokens     INTEGER NOT NULL DEFAULT 0,
    latency_ms            REAL NOT NULL,
    cost_usd              REAL,
    contains_patient_text INTEGER NOT NULL CHECK (contains_patient_text IN (0, 1)),
    request_json          TEXT NOT NULL,
    -- NULL when the call failed; then error says why.
    response_json         TEXT,
    error                 TEXT
);
CREATE INDEX model_calls_by_run ON model_calls(run_id);

CREATE TABLE model_cache (
    cache_key     TEXT PRIMARY KEY,
    model         TEXT NOT NULL,
    response_json TEXT NOT NULL,
    created_at    TEXT NOT NULL
);

CREATE TABLE pipeline_failures (
    id           INTEGER PRIMARY KEY,
    run_id       TEXT NOT NULL REFERENCES model_runs(id),
    model        TEXT NOT NULL,
    raw_text     TEXT NOT NULL,
    errors_json  TEXT NOT NULL,
    attempts     INTEGER NOT NULL,
    request_json TEXT NOT NULL,
    created_at   TEXT NOT NULL
);
CREATE INDEX pipeline_failures_by_run ON pipeline_failures(run_id);
