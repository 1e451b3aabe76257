//! Checks Evident's own MiniLM forward pass (packed batches, AVX-512
//! kernels) against an independent implementation, candle-transformers'
//! `BertModel`, on texts from one token up to the full 256-token window,
//! so long sequences (which the sentence-transformers fixture covers only
//! once) are compared too. Fails, never skips, when the model folder is
//! missing: run `evident models pull minilm-l6` first.

mod common;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use common::{cosine, load};
use evident_embed::{default_model_dir, Embedder, LongTextPolicy};

#[derive(serde::Deserialize)]
struct Reference {
    items: Vec<Item>,
}

#[derive(serde::Deserialize)]
struct Item {
    sentence: String,
}

#[test]
fn forward_pass_matches_candle_bert_up_to_the_full_window() {
    let dir = default_model_dir();
    let embedder = load(LongTextPolicy::Truncate);

    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/minilm/reference.json");
    let reference: Reference = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let sentences: Vec<&str> = reference.items.iter().map(|i| i.sentence.as_str()).collect();
    // Single sentences, then runs of 2, 5, 10 and all sentences joined
    // (the longest ones are cut at 256 tokens).
    let mut texts: Vec<String> = sentences.iter().map(|s| s.to_string()).collect();
    for run in [2, 5, 10, sentences.len()] {
        for chunk in sentences.chunks(run).take(3) {
            texts.push(chunk.join(" "));
        }
    }
    texts.push("x".to_string());
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ours = embedder.embed(&refs).unwrap();

    // candle: one sequence per forward pass (no padding), mean-pooled.
    let device = Device::Cpu;
    let config: Config = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    // SAFETY: read-only map of the model file, which nothing writes.
    let vb =
        unsafe { VarBuilder::from_mmaped_safetensors(&[dir.join("model.safetensors")], DType::F32, &device) }.unwrap();
    let bert = BertModel::load(vb, &config).unwrap();
    let mut tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    tokenizer.with_truncation(None).unwrap();
    tokenizer.with_padding(None);
    let cls = tokenizer.token_to_id("[CLS]").unwrap();
    let sep = tokenizer.token_to_id("[SEP]").unwrap();

    let mut longest = 0;
    for (text, vector) in refs.iter().zip(&ours) {
        let content = tokenizer.encode(*text, false).unwrap().get_ids().to_vec();
        let mut ids = vec![cls];
        ids.extend_from_slice(&content[..content.len().min(embedder.max_seq_length() - 2)]);
        ids.push(sep);
        longest = longest.max(ids.len());
        let n = ids.len();
        let input = Tensor::from_vec(ids, (1, n), &device).unwrap();
        let hidden = bert.forward(&input, &input.zeros_like().unwrap(), None).unwrap();
        let mean: Vec<f32> = hidden.mean(1).unwrap().squeeze(0).unwrap().to_vec1().unwrap();
        let c = cosine(&mean, vector);
        assert!(c >= 0.99999, "cosine {c} against candle for a {n}-token text: {text:?}");
    }
    assert_eq!(longest, embedder.max_seq_length(), "the texts should reach the full window");
}
