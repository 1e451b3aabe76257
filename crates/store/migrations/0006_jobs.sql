-- Background jobs of the review service (a screening, a chart question):
-- what was asked, by whom, where it stands and what it produced. The job
-- itself runs in the server process through the application layer; this
-- row is how its state outlives a browser closing, and a server restart:
-- a job found queued or running when a server starts was cut off, and is
-- marked interrupted (starting it again resumes, since the work it did is
-- stored where the job wrote it). Who started a job is also in the audit
-- log (action job_start), written in the same transaction as the row.

CREATE TABLE jobs (
    id             TEXT PRIMARY KEY,
    -- screening or chart.
    kind           TEXT NOT NULL CHECK (kind IN ('screening', 'chart')),
    state          TEXT NOT NULL CHECK (state IN ('queued', 'running', 'finished', 'failed', 'interrupted')),
    requested_by   TEXT NOT NULL REFERENCES users(name),
    -- The application layer's request, as JSON.
    request_json   TEXT NOT NULL,
    -- The job this one resumes, if any.
    resumes        TEXT REFERENCES jobs(id),
    progress_done  INTEGER NOT NULL DEFAULT 0,
    progress_total INTEGER,
    -- The last progress message (no record text).
    message        TEXT NOT NULL DEFAULT '',
    -- The result (a screening's run ids, a chart answer), as JSON.
    result_json    TEXT,
    error          TEXT,
    created_at     TEXT NOT NULL,
    started_at     TEXT,
    finished_at    TEXT,
    updated_at     TEXT NOT NULL
);
CREATE INDEX jobs_by_created ON jobs(created_at);
