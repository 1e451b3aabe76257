//! Where model files live: `<cache root>/models/minilm-l6/`, with the cache
//! root taken from `$EVIDENT_CACHE_DIR`, else `$XDG_CACHE_HOME/evident`,
//! else `~/.cache/evident` (the contract `evident models pull` writes to).

use std::path::PathBuf;

/// The model's id, stored beside every vector it makes.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";

/// The folder name under `<cache root>/models/`.
const MODEL_FOLDER: &str = "minilm-l6";

/// The Evident cache root.
pub fn cache_root() -> PathBuf {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("EVIDENT_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = non_empty("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("evident");
    }
    dirs::home_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join(".cache")
        .join("evident")
}

/// `<cache root>/models/minilm-l6`.
pub fn default_model_dir() -> PathBuf {
    cache_root().join("models").join(MODEL_FOLDER)
}
