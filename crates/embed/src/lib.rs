//! The all-MiniLM-L6-v2 sentence embedder (Evident's own BERT forward pass
//! in [`minilm`] on its AVX-512 matrix kernel, or the `gemm` crate where
//! there is no AVX-512, + tokenizers), built to reproduce
//! sentence-transformers' output: WordPiece tokenisation with
//! the model's own `tokenizer.json`, truncation at `max_seq_length` from
//! `sentence_bert_config.json` (256 for this model), mean pooling over the
//! attention mask, and L2 normalisation. It implements
//! [`evident_llm::Embedder`], so retrieval never sees the model internals.
//!
//! Texts longer than the window are handled by [`LongTextPolicy`]: the
//! default splits the token sequence into consecutive windows of at most
//! `max_seq_length` tokens (including `[CLS]`/`[SEP]`), embeds every window,
//! averages the window vectors weighted by their token count and normalises
//! again, so the tail of a long section still counts. `Truncate` embeds the
//! first window only, exactly as sentence-transformers does. For texts that
//! fit in one window both policies give the same vector.

mod cache;
mod kernels;
mod minilm;
mod pooling;
mod sgemm;

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use tokenizers::Tokenizer;

use minilm::{BertShape, MiniLm};

pub use cache::{cache_root, default_model_dir, MODEL_NAME};
pub use evident_llm::{EmbedError, Embedder};
pub use sgemm::PORTABLE_ENV;

/// Which matrix kernel this process uses: `"avx512"` (Evident's own) or
/// `"portable"` (the `gemm` crate; CPUs without AVX-512, or
/// [`PORTABLE_ENV`] set).
pub fn matrix_kernel() -> &'static str {
    if sgemm::available() {
        "avx512"
    } else {
        "portable"
    }
}

/// The files a model folder must hold.
pub const REQUIRED_FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// Why the embedder could not be loaded or could not embed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedLoadError {
    #[error(
        "model folder {dir} has no {file}; run `evident models pull minilm-l6` \
         or point --model-dir at a folder holding {files}",
        files = REQUIRED_FILES.join(", ")
    )]
    MissingFile { dir: PathBuf, file: &'static str },
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a valid {what}: {message}; re-fetch the model with `evident models pull minilm-l6`")]
    BadFile { path: PathBuf, what: &'static str, message: String },
    #[error("inference failed: {0}")]
    Inference(#[from] candle_core::Error),
    #[error("tokenisation failed: {0}")]
    Tokenize(String),
}

impl From<EmbedLoadError> for EmbedError {
    fn from(err: EmbedLoadError) -> Self {
        match err {
            EmbedLoadError::MissingFile { .. } | EmbedLoadError::Io { .. } | EmbedLoadError::BadFile { .. } => {
                EmbedError::ModelUnavailable(err.to_string())
            }
            EmbedLoadError::Inference(_) | EmbedLoadError::Tokenize(_) => EmbedError::Failed(err.to_string()),
        }
    }
}

/// How texts longer than the model's window are embedded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LongTextPolicy {
    /// Consecutive windows, vectors averaged by token count, renormalised.
    #[default]
    AverageWindows,
    /// The first window only (sentence-transformers' behaviour).
    Truncate,
}

/// Knobs for [`MiniLmEmbedder`]. Defaults reproduce sentence-transformers
/// for texts within the window.
#[derive(Debug, Clone)]
pub struct EmbedderConfig {
    /// Window length in tokens including `[CLS]` and `[SEP]`. `None` reads
    /// `max_seq_length` from `sentence_bert_config.json` (256 for MiniLM-L6),
    /// falling back to the model's position limit.
    pub max_seq_length: Option<usize>,
    pub long_text: LongTextPolicy,
    /// Sequences per forward pass (at most). A batch is packed end to end,
    /// never padded; texts are sorted by length first (as
    /// sentence-transformers does). With several threads and more texts
    /// than one batch, batches may be made smaller so that every thread
    /// gets several; the vectors are the same either way.
    pub batch_size: usize,
}

impl Default for EmbedderConfig {
    fn default() -> Self {
        EmbedderConfig { max_seq_length: None, long_text: LongTextPolicy::AverageWindows, batch_size: 32 }
    }
}

/// all-MiniLM-L6-v2 on the CPU.
pub struct MiniLmEmbedder {
    model: MiniLm,
    tokenizer: Tokenizer,
    dimensions: usize,
    /// Invariant: 3 <= max_seq_length <= max_position_embeddings.
    max_seq_length: usize,
    cls_id: u32,
    sep_id: u32,
    config: EmbedderConfig,
    model_id: String,
}

#[derive(serde::Deserialize)]
struct SentenceBertConfig {
    max_seq_length: usize,
}

#[derive(serde::Deserialize)]
struct PositionLimit {
    max_position_embeddings: usize,
    hidden_size: usize,
}

fn read_text(path: &Path) -> Result<String, EmbedLoadError> {
    std::fs::read_to_string(path).map_err(|source| EmbedLoadError::Io { path: path.to_path_buf(), source })
}

impl MiniLmEmbedder {
    /// Loads the model from the cache folder (`<cache root>/models/minilm-l6`).
    pub fn load_default(config: EmbedderConfig) -> Result<Self, EmbedLoadError> {
        Self::load(&default_model_dir(), config)
    }

    /// Loads from any folder holding `model.safetensors`, `tokenizer.json`
    /// and `config.json` (and optionally `sentence_bert_config.json`).
    pub fn load(dir: &Path, config: EmbedderConfig) -> Result<Self, EmbedLoadError> {
        for file in REQUIRED_FILES {
            if !dir.join(file).is_file() {
                return Err(EmbedLoadError::MissingFile { dir: dir.to_path_buf(), file });
            }
        }
        let config_path = dir.join("config.json");
        let config_text = read_text(&config_path)?;
        let bad = |path: &Path, what: &'static str, message: String| EmbedLoadError::BadFile {
            path: path.to_path_buf(),
            what,
            message,
        };
        let bert_shape: BertShape =
            serde_json::from_str(&config_text).map_err(|e| bad(&config_path, "BERT config", e.to_string()))?;
        let limits: PositionLimit =
            serde_json::from_str(&config_text).map_err(|e| bad(&config_path, "BERT config", e.to_string()))?;

        let st_path = dir.join("sentence_bert_config.json");
        let st_max = if st_path.is_file() {
            let st: SentenceBertConfig = serde_json::from_str(&read_text(&st_path)?)
                .map_err(|e| bad(&st_path, "sentence-transformers config", e.to_string()))?;
            Some(st.max_seq_length)
        } else {
            None
        };
        let max_seq_length = config
            .max_seq_length
            .or(st_max)
            .unwrap_or(limits.max_position_embeddings)
            .clamp(3, limits.max_position_embeddings);

        let tok_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tok_path).map_err(|e| bad(&tok_path, "tokenizer", e.to_string()))?;
        // tokenizer.json ships with truncation at 128 and fixed padding; we
        // window and pad ourselves, so both are switched off.
        tokenizer.with_truncation(None).map_err(|e| bad(&tok_path, "tokenizer", e.to_string()))?;
        tokenizer.with_padding(None);
        let id = |token: &str| {
            tokenizer
                .token_to_id(token)
                .ok_or_else(|| bad(&tok_path, "BERT tokenizer", format!("no {token} token in the vocabulary")))
        };
        let (cls_id, sep_id) = (id("[CLS]")?, id("[SEP]")?);

        let weights = dir.join("model.safetensors");
        let model = MiniLm::load(&weights, bert_shape).map_err(|e| bad(&weights, "BERT checkpoint", e))?;

        let model_id = match config.long_text {
            LongTextPolicy::AverageWindows => MODEL_NAME.to_string(),
            LongTextPolicy::Truncate => format!("{MODEL_NAME}/truncate-{max_seq_length}"),
        };
        Ok(MiniLmEmbedder {
            model,
            tokenizer,
            dimensions: limits.hidden_size,
            max_seq_length,
            cls_id,
            sep_id,
            config,
            model_id,
        })
    }

    /// Window length in tokens, including `[CLS]` and `[SEP]`.
    pub fn max_seq_length(&self) -> usize {
        self.max_seq_length
    }

    /// Number of tokens (without special tokens) each text tokenises to.
    pub fn token_counts(&self, texts: &[&str]) -> Result<Vec<usize>, EmbedLoadError> {
        Ok(self.tokenize(texts)?.iter().map(Vec::len).collect())
    }

    fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, EmbedLoadError> {
        let encodings = self
            .tokenizer
            .encode_batch_fast(texts.to_vec(), false)
            .map_err(|e| EmbedLoadError::Tokenize(e.to_string()))?;
        Ok(encodings.into_iter().map(|e| e.get_ids().to_vec()).collect())
    }

    /// Embeds `texts`, one unit vector each, in input order.
    pub fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedLoadError> {
        let content = self.max_seq_length - 2;
        // Every text becomes one or more windows: (text index, token ids).
        let mut windows: Vec<(usize, Vec<u32>)> = Vec::with_capacity(texts.len());
        for (i, ids) in self.tokenize(texts)?.into_iter().enumerate() {
            let chunks: Vec<&[u32]> = if ids.is_empty() {
                vec![&[][..]]
            } else {
                match self.config.long_text {
                    LongTextPolicy::Truncate => vec![&ids[..ids.len().min(content)]],
                    LongTextPolicy::AverageWindows => ids.chunks(content).collect(),
                }
            };
            for chunk in chunks {
                let mut w = Vec::with_capacity(chunk.len() + 2);
                w.push(self.cls_id);
                w.extend_from_slice(chunk);
                w.push(self.sep_id);
                windows.push((i, w));
            }
        }

        // Sort by length (as sentence-transformers does) so a batch holds
        // similar lengths.
        let mut order: Vec<usize> = (0..windows.len()).collect();
        order.sort_by_key(|&w| std::cmp::Reverse(windows[w].1.len()));
        let mut window_vectors: Vec<Vec<f32>> = vec![Vec::new(); windows.len()];
        let threads = rayon::current_num_threads();
        let batch_size = self.config.batch_size.max(1);
        let forward = |batch: &[usize], threads: usize| {
            let seqs: Vec<&[u32]> = batch.iter().map(|&w| windows[w].1.as_slice()).collect();
            self.model.embed_batch(&seqs, threads)
        };
        if threads > 1 && order.len() > batch_size {
            // Several batches: each thread runs whole batches, so threads
            // never wait for each other inside a forward pass. Batches of
            // about equal token counts, at least eight per thread, taken
            // longest first from a shared counter, keep the threads evenly
            // loaded to the end; vectors do not depend on how texts are
            // batched (see `MiniLm::embed_batch`).
            let batches = token_batches(&order, |w| windows[w].1.len(), batch_size, 8 * threads);
            let next = std::sync::atomic::AtomicUsize::new(0);
            let done: Vec<Vec<(usize, Vec<Vec<f32>>)>> = (0..threads)
                .into_par_iter()
                .map(|_| {
                    let mut mine = Vec::new();
                    loop {
                        let b = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(batch) = batches.get(b) else { break };
                        mine.push((b, forward(batch, 1)));
                    }
                    mine
                })
                .collect();
            for (b, vectors) in done.into_iter().flatten() {
                for (&w, v) in batches[b].iter().zip(vectors) {
                    window_vectors[w] = v;
                }
            }
        } else {
            // One batch (a query, a short list): all threads work on it.
            for batch in order.chunks(batch_size) {
                for (&w, v) in batch.iter().zip(forward(batch, threads)) {
                    window_vectors[w] = v;
                }
            }
        }

        // Combine windows per text, weighted by window length (content tokens).
        let mut sums: Vec<Vec<f32>> = vec![vec![0.0; self.dimensions]; texts.len()];
        for ((text, ids), v) in windows.iter().zip(&window_vectors) {
            let weight = (ids.len() - 2).max(1) as f32;
            for (s, x) in sums[*text].iter_mut().zip(v) {
                *s += weight * x;
            }
        }
        // A single window is already unit length; normalising again only
        // divides out its weight.
        for sum in &mut sums {
            pooling::l2_normalize(sum);
        }
        Ok(sums)
    }
}

/// Splits `order` (longest first) into consecutive batches of at most
/// `max_seqs` sequences and about `1 / parts` of all tokens each (a batch
/// always takes at least one sequence).
fn token_batches(order: &[usize], len: impl Fn(usize) -> usize, max_seqs: usize, parts: usize) -> Vec<&[usize]> {
    let total: usize = order.iter().map(|&w| len(w)).sum();
    let budget = total.div_ceil(parts.max(1)).max(1);
    let mut batches = Vec::new();
    let mut rest = order;
    while !rest.is_empty() {
        let mut tokens = 0;
        let mut take = 0;
        while take < rest.len() && take < max_seqs.max(1) && (take == 0 || tokens + len(rest[take]) <= budget) {
            tokens += len(rest[take]);
            take += 1;
        }
        let (batch, tail) = rest.split_at(take);
        batches.push(batch);
        rest = tail;
    }
    batches
}

impl Embedder for MiniLmEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_texts(texts).map_err(EmbedError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::token_batches;

    #[test]
    fn token_batches_split_by_tokens_and_keep_order() {
        let lens = [256, 256, 200, 100, 50, 10, 10, 10];
        let order: Vec<usize> = (0..lens.len()).collect();
        let batches = token_batches(&order, |w| lens[w], 32, 4);
        assert_eq!(batches, vec![&[0][..], &[1], &[2], &[3, 4, 5, 6, 7]]);
        // The sequence cap still applies, and one over-long text is a batch.
        let batches = token_batches(&order, |w| lens[w], 2, 1);
        assert_eq!(batches, vec![&[0, 1][..], &[2, 3], &[4, 5], &[6, 7]]);
        let batches = token_batches(&order[..1], |_| 500, 32, 8);
        assert_eq!(batches, vec![&[0][..]]);
    }
}
