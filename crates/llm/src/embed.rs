//! The `Embedder` capability: text in, unit-length vectors out.

/// Why an embedding call failed, in terms of what the caller should do.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The model files are missing or unreadable: the user must fetch them.
    #[error("embedding model not available: {0}")]
    ModelUnavailable(String),
    /// The backend failed on this input; retrying will not help.
    #[error("embedding failed: {0}")]
    Failed(String),
}

/// A sentence-embedding model. Vectors are L2-normalised, so the dot product
/// of two vectors is their cosine similarity.
pub trait Embedder: Send + Sync {
    /// A stable id for the model (stored beside every vector so vectors from
    /// different models are never compared).
    fn model_id(&self) -> &str;
    fn dimensions(&self) -> usize;
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}
