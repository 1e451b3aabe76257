//! Checks the embedder against sentence-transformers' own vectors
//! (tests/fixtures/minilm/reference.json, made by scripts/embed_reference.py
//! from the same model files), on this CPU's matrix kernel and on the
//! portable one. Fails, never skips, when the model folder is
//! missing: run `evident models pull minilm-l6` first.

use std::path::PathBuf;

mod common;

use common::{cosine, load};
use evident_embed::{Embedder, EmbedderConfig, LongTextPolicy, MiniLmEmbedder};

#[derive(serde::Deserialize)]
struct Reference {
    max_seq_length: usize,
    items: Vec<Item>,
}

#[derive(serde::Deserialize)]
struct Item {
    sentence: String,
    tokens: usize,
    vector: Vec<f32>,
}

fn reference() -> Reference {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/minilm/reference.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; regenerate with scripts/embed_reference.py", path.display()));
    serde_json::from_str(&text).expect("reference.json parses")
}

#[test]
fn matches_sentence_transformers_on_clinical_sentences() {
    let reference = reference();
    assert!(reference.items.len() >= 40, "fixture should hold ~40 sentences");
    let embedder = load(LongTextPolicy::Truncate);
    eprintln!("matrix kernel: {}", evident_embed::matrix_kernel());
    assert_eq!(embedder.max_seq_length(), reference.max_seq_length);
    assert_eq!(embedder.dimensions(), 384);
    let texts: Vec<&str> = reference.items.iter().map(|i| i.sentence.as_str()).collect();
    // Token counts agree with the Python tokenizer.
    let counts = embedder.token_counts(&texts).unwrap();
    for (item, n) in reference.items.iter().zip(&counts) {
        assert_eq!(item.tokens, *n, "token count for {:?}", item.sentence);
    }
    let vectors = embedder.embed(&texts).unwrap();
    let mut worst = (1.0f32, "");
    for (item, v) in reference.items.iter().zip(&vectors) {
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "vector for {:?} has norm {norm}", item.sentence);
        let c = cosine(&item.vector, v);
        if c < worst.0 {
            worst = (c, &item.sentence);
        }
        assert!(c >= 0.999, "cosine {c} < 0.999 for {:?}", item.sentence);
    }
    eprintln!("lowest cosine {:.6} for {:?}", worst.0, worst.1);
}

/// The path CPUs without AVX-512 take (the `gemm` crate) gives the same
/// vectors: this binary's reference tests run again in a child process with
/// the portable path forced.
#[test]
fn the_portable_path_matches_too() {
    if std::env::var_os(evident_embed::PORTABLE_ENV).is_some() {
        return; // already the child
    }
    for test in
        ["matches_sentence_transformers_on_clinical_sentences", "batching_order_and_threads_do_not_change_vectors"]
    {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--nocapture", "--test-threads", "1"])
            .env(evident_embed::PORTABLE_ENV, "1")
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && text.contains("1 passed"), "{test} on the portable path:\n{text}");
        assert!(text.contains("matrix kernel: portable"), "{test} did not take the portable path:\n{text}");
    }
}

/// A text's vector does not depend on what it is batched with, on the
/// order of the texts, or on the number of threads: every output row is
/// summed in the same order whatever the batch, so the bits are equal.
#[test]
fn batching_order_and_threads_do_not_change_vectors() {
    let reference = reference();
    let embedder = load(LongTextPolicy::Truncate);
    eprintln!("matrix kernel: {}", evident_embed::matrix_kernel());
    let texts: Vec<&str> = reference.items.iter().map(|i| i.sentence.as_str()).collect();
    let in_pool = |threads: usize, texts: &[&str]| {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap().install(|| embedder.embed(texts).unwrap())
    };
    // 40 texts: two threads run several smaller batches side by side, one
    // thread runs batches of 32 and 8.
    let two_threads = in_pool(2, &texts);
    let one_thread = in_pool(1, &texts);
    let reversed: Vec<&str> = texts.iter().rev().copied().collect();
    let mut backwards = in_pool(2, &reversed);
    backwards.reverse();
    for (i, text) in texts.iter().enumerate() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let want = bits(&two_threads[i]);
        assert_eq!(bits(&one_thread[i]), want, "one thread changed the vector of {text:?}");
        assert_eq!(bits(&backwards[i]), want, "order changed the vector of {text:?}");
        if i % 7 == 0 {
            let alone = in_pool(2, &[text]);
            assert_eq!(bits(&alone[0]), want, "batching changed the vector of {text:?}");
        }
    }
}

#[test]
fn long_texts_average_their_windows() {
    let reference = reference();
    let long = reference.items.iter().find(|i| i.tokens > 256).expect("fixture has a long text");
    let windows = load(LongTextPolicy::AverageWindows);
    let truncate = load(LongTextPolicy::Truncate);
    assert_ne!(windows.model_id(), truncate.model_id());

    // Short texts: both policies give the sentence-transformers vector.
    let short = &reference.items[0];
    let a = windows.embed(&[&short.sentence]).unwrap();
    assert!(cosine(&a[0], &short.vector) >= 0.999);

    // Long text: the averaged vector differs from the truncated one but is
    // still close to it (same topic), and unit length.
    let averaged = windows.embed(&[&long.sentence]).unwrap().remove(0);
    let truncated = truncate.embed(&[&long.sentence]).unwrap().remove(0);
    let c = cosine(&averaged, &truncated);
    assert!(c < 0.99999 && c > 0.8, "averaged vs truncated cosine {c}");
    let norm: f32 = averaged.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4);
}

#[test]
fn missing_model_folder_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let err = MiniLmEmbedder::load(dir.path(), EmbedderConfig::default()).err().expect("must fail");
    let message = err.to_string();
    assert!(message.contains("evident models pull minilm-l6"), "{message}");
    assert!(message.contains("model.safetensors"), "{message}");
}

#[test]
fn empty_text_embeds_like_sentence_transformers() {
    // sentence-transformers embeds "" as [CLS][SEP]; we must not panic.
    let embedder = load(LongTextPolicy::AverageWindows);
    let v = embedder.embed(&[""]).unwrap();
    assert_eq!(v[0].len(), 384);
}
