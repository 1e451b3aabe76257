-- The content hashes of PostgreSQL study databases that evidence bundles
-- carry, cached per database state: reading every row of the full MIMIC-IV
-- takes hours, so a study run reuses the hash computed under the same state
-- key (catalogue, storage files and write counters of the readable tables;
-- evident_rwe::database_hash says what the key reads and what it cannot
-- see). A row is either a hash or the record that computing one ran past
-- a time limit, so later runs under no longer a limit do not try again.
-- One row per state; a new computation of the same state replaces it.

CREATE TABLE database_hashes (
    state_key       TEXT PRIMARY KEY,
    -- host:port/database, for a person reading the table.
    database        TEXT NOT NULL,
    -- The hash's algorithm (evident postgres content v1).
    method          TEXT NOT NULL,
    -- The hash, hex; NULL when computing it ran past timeout_ms.
    sha256          TEXT,
    timeout_ms      INTEGER,
    tables          INTEGER NOT NULL,
    elapsed_ms      INTEGER NOT NULL,
    evident_version TEXT NOT NULL,
    computed_at     TEXT NOT NULL,
    CHECK ((sha256 IS NULL) = (timeout_ms IS NOT NULL))
);
