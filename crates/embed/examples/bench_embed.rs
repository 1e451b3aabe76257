//! Embedding-throughput benchmark (not a test). Takes real text from the
//! Synthea notes (base64 DocumentReference attachments, read by
//! `evident_testdata`; `--notes` defaults to the shared sample): the first
//! `--sentences` sentences (split by `evident_model::text::split_sentences`)
//! and the first `--sections` sections (`split_sections`), writes both sets
//! to `--texts-out` so `scripts/bench_embed.py` can time
//! sentence-transformers on the same texts, then times
//! `MiniLmEmbedder::embed` on each set (truncation at 256 tokens, as
//! sentence-transformers does, so both sides do the same work). Prints one
//! JSON object on stdout.
//!
//! cargo run --release -p evident-embed --example bench_embed -- --texts-out /tmp/bench_texts.json

use std::path::PathBuf;
use std::time::Instant;

use evident_embed::{EmbedderConfig, LongTextPolicy, MiniLmEmbedder};
use evident_model::text::{split_sections, split_sentences};

fn main() {
    let mut notes = evident_testdata::synthea_sample_notes_file();
    let mut n_sentences = 2000usize;
    let mut n_sections = 300usize;
    let mut texts_out: Option<PathBuf> = None;
    let mut batch_size = 32usize;
    let mut repeats = 2usize;
    let mut model_dir = evident_embed::default_model_dir();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--notes" => notes = value().into(),
            "--sentences" => n_sentences = value().parse().unwrap(),
            "--sections" => n_sections = value().parse().unwrap(),
            "--texts-out" => texts_out = Some(value().into()),
            "--batch-size" => batch_size = value().parse().unwrap(),
            "--repeats" => repeats = value().parse().unwrap(),
            "--model-dir" => model_dir = value().into(),
            other => panic!("unknown flag {other}"),
        }
    }

    let mut sentences = Vec::new();
    let mut sections = Vec::new();
    for note in evident_testdata::synthea_notes(&notes) {
        let text = note.text;
        for s in split_sentences(&text) {
            let t = text[s.start..s.end].trim();
            if sentences.len() < n_sentences && t.split_whitespace().count() >= 3 {
                sentences.push(t.to_string());
            }
        }
        for s in split_sections(&text) {
            if sections.len() < n_sections {
                sections.push(text[s.start..s.end].to_string());
            }
        }
        if sentences.len() >= n_sentences && sections.len() >= n_sections {
            break;
        }
    }
    if let Some(out) = &texts_out {
        std::fs::write(out, serde_json::json!({ "sentences": sentences, "sections": sections }).to_string()).unwrap();
    }

    let config = EmbedderConfig { long_text: LongTextPolicy::Truncate, batch_size, ..EmbedderConfig::default() };
    let embedder = MiniLmEmbedder::load(&model_dir, config).unwrap_or_else(|e| panic!("{e}"));
    let threads = rayon::current_num_threads();
    let mut sets = Vec::new();
    for (name, texts) in [("sentences", &sentences), ("sections", &sections)] {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let tokens: usize = embedder.token_counts(&refs).unwrap().iter().map(|n| (*n).min(254) + 2).sum();
        embedder.embed_texts(&refs[..refs.len().min(64)]).unwrap(); // warm-up
        let mut runs = Vec::new();
        for _ in 0..repeats {
            let t = Instant::now();
            let v = embedder.embed_texts(&refs).unwrap();
            assert_eq!(v.len(), refs.len());
            runs.push(t.elapsed().as_secs_f64());
        }
        let best = runs.iter().copied().fold(f64::INFINITY, f64::min);
        let row = serde_json::json!({
            "set": name,
            "texts": refs.len(),
            "tokens": tokens,
            "seconds": runs,
            "texts_per_second_best": refs.len() as f64 / best,
        });
        eprintln!("{row}");
        sets.push(row);
    }
    println!("{}", serde_json::json!({ "threads": threads, "batch_size": batch_size, "sets": sets }));
}
