//! What the embedder's test binaries share: loading the model from the
//! user's cache (failing, never skipping, when it is missing) and cosine
//! similarity.

use evident_embed::{default_model_dir, EmbedderConfig, LongTextPolicy, MiniLmEmbedder};

pub fn load(policy: LongTextPolicy) -> MiniLmEmbedder {
    let dir = default_model_dir();
    MiniLmEmbedder::load(&dir, EmbedderConfig { long_text: policy, ..EmbedderConfig::default() }).unwrap_or_else(|e| {
        panic!(
            "cannot load all-MiniLM-L6-v2 from {}: {e}\n\
                 run `evident models pull minilm-l6` (or set EVIDENT_CACHE_DIR) before the tests",
            dir.display()
        )
    })
}

pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}
