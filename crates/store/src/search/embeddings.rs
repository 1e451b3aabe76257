//! Section embeddings for dense retrieval: storing one model's vectors
//! (little-endian f32), reading them back with their sections, and listing
//! the sections that still lack a vector from a model.

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter};

use super::{finish_section, section_from_row, SectionFilter, SectionRecord, SECTION_COLUMNS};
use crate::{Result, Store, StoreError};

impl Store {
    /// Sections the filter admits that have no vector from `model` yet.
    pub fn sections_missing_embedding(&self, model: &str, filter: &SectionFilter) -> Result<Vec<SectionRecord>> {
        self.sections_where(
            filter,
            "NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.section_id = s.id AND e.model = ?)",
            &[Value::Text(model.to_string())],
        )
    }

    /// Stores vectors for sections, replacing any earlier vector from the
    /// same model. All vectors of one call must have the same length.
    pub fn put_embeddings(&mut self, model: &str, items: &[(i64, Vec<f32>)]) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO embeddings (section_id, model, dims, vector) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(section_id, model) DO UPDATE SET dims = excluded.dims, vector = excluded.vector",
            )?;
            for (section_id, vector) in items {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                stmt.execute(params![section_id, model, vector.len() as i64, bytes])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The sections the filter admits that have a vector from `model`,
    /// with that vector.
    pub fn section_embeddings(&self, model: &str, filter: &SectionFilter) -> Result<Vec<(SectionRecord, Vec<f32>)>> {
        let (condition, mut values) = filter.document_condition();
        values.push(Value::Text(model.to_string()));
        let sql = format!(
            "SELECT {SECTION_COLUMNS}, e.dims, e.vector
             FROM sections s JOIN documents d ON d.id = s.document_id
             JOIN embeddings e ON e.section_id = s.id
             WHERE {condition} AND e.model = ?
             ORDER BY d.date IS NULL, d.date, d.id, s.ordinal"
        );
        let mut stmt = self.conn().prepare(&sql)?;
        let rows = stmt.query_map(params_from_iter(values), |r| {
            Ok((section_from_row(r)?, r.get::<_, i64>(9)?, r.get::<_, Vec<u8>>(10)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (s, dims, bytes) = row?;
            if bytes.len() != dims as usize * 4 {
                return Err(StoreError::Corrupt(format!(
                    "embedding of section {} has {} bytes for {dims} dimensions",
                    s.0.section_id,
                    bytes.len()
                )));
            }
            let vector = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            out.push((finish_section(s)?, vector));
        }
        Ok(out)
    }
}
