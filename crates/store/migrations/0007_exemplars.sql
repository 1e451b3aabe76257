-- The exemplar bank: adjudicated criterion-level decisions (a criterion,
-- the patient sentences that decide it, the adjudicated label and a short
-- rationale) that screening shows a model as worked examples. Each row
-- says where it came from: an annotation file, a reviewer's override or a
-- sign-off, with the reviewer and the time. The criterion text's vector
-- (and the model that made it) is stored beside it, so a bank is searched
-- by dense similarity without embedding it again; an exemplar a review
-- recorded has none until a bank is next opened (the review path loads
-- no model).
CREATE TABLE exemplars (
    id INTEGER PRIMARY KEY,
    bank TEXT NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('annotation', 'override', 'signoff')),
    -- Unique within (bank, source): file and annotation id, or run, patient
    -- and criterion. Putting the same reference again replaces the row.
    source_ref TEXT NOT NULL,
    patient_id TEXT NOT NULL,
    trial_id TEXT NOT NULL,
    criterion_id TEXT NOT NULL,
    criterion_type TEXT NOT NULL CHECK (criterion_type IN ('inclusion', 'exclusion')),
    criterion_text TEXT NOT NULL,
    -- JSON array of the relevant patient sentences' texts.
    sentences_json TEXT NOT NULL,
    label TEXT NOT NULL CHECK (label IN ('MET', 'NOT MET', 'NOT ENOUGH INFORMATION', 'NOT APPLICABLE')),
    rationale TEXT NOT NULL,
    reviewer TEXT,
    decided_at TEXT NOT NULL,
    embedding_model TEXT,
    -- f32 little-endian, as section embeddings.
    embedding BLOB,
    UNIQUE (bank, source, source_ref)
);
CREATE INDEX exemplars_bank ON exemplars (bank, id);
