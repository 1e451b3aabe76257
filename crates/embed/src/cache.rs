//! Where the model files live: `<cache root>/models/minilm-l6/`, under the
//! cache root that `evident models pull` writes to (one rule, kept in
//! `evident_llm::models`).

use std::path::PathBuf;

pub use evident_llm::models::cache_root;

/// The model's id, stored beside every vector it makes.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";

/// The folder name under `<cache root>/models/`.
const MODEL_FOLDER: &str = "minilm-l6";

/// `<cache root>/models/minilm-l6`.
pub fn default_model_dir() -> PathBuf {
    evident_llm::models::model_dir(MODEL_FOLDER)
}
