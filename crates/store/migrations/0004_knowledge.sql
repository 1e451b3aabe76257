-- The knowledge base: reference documents (Markdown or plain text the user
-- indexed with `evident kb index`) and their sections, indexed for BM25
-- with the same tokenizer as patient sections. Kept apart from patient
-- records: a knowledge document belongs to no patient, and a patient
-- search never sees one.

CREATE TABLE knowledge_documents (
    -- 'kb:' + the folder as given + the path inside it, or 'kb:' + the file name.
    id            TEXT PRIMARY KEY,
    -- The file it was indexed from, as given; NULL for documents moved from
    -- a store of schema version 4 before the renumbering (it kept no path).
    path          TEXT,
    title         TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    text          TEXT NOT NULL
);

CREATE TABLE knowledge_sections (
    id           INTEGER PRIMARY KEY,
    document_id  TEXT NOT NULL REFERENCES knowledge_documents(id) ON DELETE CASCADE,
    ordinal      INTEGER NOT NULL,
    heading      TEXT,
    start        INTEGER NOT NULL,  -- byte offsets into knowledge_documents.text
    end          INTEGER NOT NULL,
    text         TEXT NOT NULL,     -- = substr of the document at [start, end)
    UNIQUE (document_id, ordinal)
);

CREATE VIRTUAL TABLE knowledge_sections_fts USING fts5(
    text, heading,
    content = 'knowledge_sections', content_rowid = 'id',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER knowledge_sections_fts_insert AFTER INSERT ON knowledge_sections BEGIN
    INSERT INTO knowledge_sections_fts(rowid, text, heading) VALUES (new.id, new.text, coalesce(new.heading, ''));
END;
CREATE TRIGGER knowledge_sections_fts_delete AFTER DELETE ON knowledge_sections BEGIN
    INSERT INTO knowledge_sections_fts(knowledge_sections_fts, rowid, text, heading)
        VALUES ('delete', old.id, old.text, coalesce(old.heading, ''));
END;

-- Before this migration a knowledge base was a store whose documents all
-- belonged to the pseudo-patient 'knowledge-base' (source 'kb'). Move them
-- here, keeping ids, spans and section ids, and remove the pseudo-patient
-- with everything it owned (sentences were never read for a knowledge base;
-- there were no embeddings, labs or labels). A patient store has no such
-- patient and is unchanged.
INSERT INTO knowledge_documents (id, path, title, content_hash, text)
    SELECT d.id, NULL, d.title, d.content_hash, d.text
    FROM documents d JOIN patients p ON p.id = d.patient_id
    WHERE p.id = 'knowledge-base' AND p.source = 'kb'
    ORDER BY d.id;
INSERT INTO knowledge_sections (id, document_id, ordinal, heading, start, end, text)
    SELECT s.id, s.document_id, s.ordinal, s.heading, s.start, s.end, s.text
    FROM sections s JOIN knowledge_documents k ON k.id = s.document_id
    ORDER BY s.id;
DELETE FROM embeddings WHERE section_id IN (SELECT id FROM sections WHERE document_id IN (SELECT id FROM knowledge_documents));
DELETE FROM sentences WHERE document_id IN (SELECT id FROM knowledge_documents);
DELETE FROM sections WHERE document_id IN (SELECT id FROM knowledge_documents);
DELETE FROM documents WHERE id IN (SELECT id FROM knowledge_documents);
DELETE FROM labs WHERE patient_id = 'knowledge-base' AND EXISTS (SELECT 1 FROM patients WHERE id = 'knowledge-base' AND source = 'kb');
DELETE FROM eval_labels WHERE patient_id = 'knowledge-base' AND EXISTS (SELECT 1 FROM patients WHERE id = 'knowledge-base' AND source = 'kb');
DELETE FROM patients WHERE id = 'knowledge-base' AND source = 'kb';
