-- Patient records: patients, documents with their sections and sentences,
-- lab observations, evaluation labels, and section embeddings.

CREATE TABLE patients (
    id            TEXT PRIMARY KEY,
    source        TEXT NOT NULL,
    birth_date    TEXT,
    sex           TEXT,
    display_name  TEXT
);

CREATE TABLE documents (
    id            TEXT PRIMARY KEY,
    patient_id    TEXT NOT NULL REFERENCES patients(id) ON DELETE CASCADE,
    kind          TEXT NOT NULL,
    date          TEXT,            -- 'YYYY-MM-DD HH:MM:SS', sortable
    title         TEXT NOT NULL,
    source        TEXT NOT NULL,
    source_id     TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    text          TEXT NOT NULL,
    UNIQUE (source, source_id)
);
CREATE INDEX documents_by_patient ON documents(patient_id, date);

CREATE TABLE sections (
    id           INTEGER PRIMARY KEY,
    document_id  TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal      INTEGER NOT NULL,
    heading      TEXT,
    start        INTEGER NOT NULL,  -- byte offsets into documents.text
    end          INTEGER NOT NULL,
    text         TEXT NOT NULL,     -- = substr of the document at [start, end)
    UNIQUE (document_id, ordinal)
);

CREATE VIRTUAL TABLE sections_fts USING fts5(
    text, heading,
    content = 'sections', content_rowid = 'id',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER sections_fts_insert AFTER INSERT ON sections BEGIN
    INSERT INTO sections_fts(rowid, text, heading) VALUES (new.id, new.text, coalesce(new.heading, ''));
END;
CREATE TRIGGER sections_fts_delete AFTER DELETE ON sections BEGIN
    INSERT INTO sections_fts(sections_fts, rowid, text, heading) VALUES ('delete', old.id, old.text, coalesce(old.heading, ''));
END;

CREATE TABLE sentences (
    document_id  TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal      INTEGER NOT NULL,  -- the sentence id within its document
    start        INTEGER NOT NULL,
    end          INTEGER NOT NULL,
    PRIMARY KEY (document_id, ordinal)
) WITHOUT ROWID;

CREATE TABLE labs (
    id             INTEGER PRIMARY KEY,
    patient_id     TEXT NOT NULL REFERENCES patients(id) ON DELETE CASCADE,
    concept_id     TEXT,            -- NULL when the name could not be mapped
    original_name  TEXT NOT NULL,
    loinc          TEXT,
    value_num      REAL,
    value_text     TEXT,
    unit           TEXT,
    ref_low        REAL,
    ref_high       REAL,
    ref_text       TEXT,
    flag           TEXT,
    time           TEXT NOT NULL,
    source         TEXT NOT NULL,
    source_id      TEXT NOT NULL,
    UNIQUE (source, source_id),
    CHECK ((value_num IS NULL) <> (value_text IS NULL))
);
CREATE INDEX labs_by_patient ON labs(patient_id, concept_id, time);

-- Labels that come with a source for evaluation (n2c2 TAGS), never shown to models.
CREATE TABLE eval_labels (
    patient_id  TEXT NOT NULL REFERENCES patients(id) ON DELETE CASCADE,
    label_set   TEXT NOT NULL,
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    PRIMARY KEY (patient_id, label_set, key)
) WITHOUT ROWID;

CREATE TABLE embeddings (
    section_id  INTEGER NOT NULL REFERENCES sections(id) ON DELETE CASCADE,
    model       TEXT NOT NULL,
    dims        INTEGER NOT NULL,
    vector      BLOB NOT NULL,      -- little-endian f32 x dims
    PRIMARY KEY (section_id, model)
) WITHOUT ROWID;
