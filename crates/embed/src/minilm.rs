//! Evident's own BERT encoder forward pass for all-MiniLM-L6-v2, in plain
//! Rust on f32 buffers (weights read from `model.safetensors` through
//! candle's loader). It computes what Hugging Face's `BertModel` computes,
//! in the same precision, but shaped for a 2-core CPU:
//!
//! - the sequences of a batch are packed end to end, never padded: every
//!   dense layer is one matrix product over all real tokens, and attention
//!   runs per sequence and head, so no work is spent on padding and no
//!   attention mask is needed;
//! - query, key and value are one product with concatenated weights, and
//!   each head reads its slice of that output through strides (no
//!   transposed copies);
//! - biases are written into the output before the product accumulates,
//!   and the residual is added the same way, so each layer makes a single
//!   pass over memory per step;
//! - on CPUs with AVX-512 the products run on [`crate::sgemm`] with the
//!   weights packed once at load (elsewhere on the `gemm` crate); dense
//!   products split their rows over the threads, attention spreads the
//!   sequences over them.
//!
//! The output is the mean-pooled, L2-normalised sentence vector.

use std::path::Path;

use candle_core::{DType, Device};
use rayon::prelude::*;

use crate::kernels::{
    gelu_erf_in_place, layer_norm_rows_in_place, matmul, softmax_rows_in_place, MatRef, Threads,
};
use crate::pooling;
use crate::sgemm;

/// A dense layer's weight, `[in, out]`: packed into 32-column panels for
/// [`sgemm`] when the CPU has AVX-512, plain row-major otherwise.
struct Weight {
    data: Vec<f32>,
    packed: Option<sgemm::Packed>,
    rows: usize,
    cols: usize,
}

impl Weight {
    /// From PyTorch's `[out, in]` layout.
    fn from_torch(weight: &[f32], out: usize, inp: usize) -> Weight {
        if sgemm::available() && out.is_multiple_of(sgemm::PANEL) {
            let mut packed = sgemm::Packed::default();
            // Element (i, o) of the [in, out] matrix is weight[o * inp + i].
            sgemm::pack_into(&mut packed, weight, inp, out, 1, inp);
            Weight { data: Vec::new(), packed: Some(packed), rows: inp, cols: out }
        } else {
            Weight { data: transpose(weight, out, inp), packed: None, rows: inp, cols: out }
        }
    }

    /// `dst = dst + a · self`, `a` being `m x rows` row-major, `dst`
    /// `m x cols` row-major; rows are split over `threads`.
    fn accumulate_product(&self, dst: &mut [f32], a: &[f32], m: usize, threads: usize) {
        let (k, n) = (self.rows, self.cols);
        let Some(packed) = &self.packed else {
            matmul(
                dst,
                n,
                true,
                MatRef { data: a, rows: m, cols: k, row_stride: k, col_stride: 1 },
                MatRef { data: &self.data, rows: k, cols: n, row_stride: n, col_stride: 1 },
                1.0,
                Threads::Pool(threads),
            );
            return;
        };
        // Chunks of whole 12-row groups, several per thread so a preempted
        // thread does not hold up the product.
        let chunk_rows = m.div_ceil(threads.max(1) * 4).next_multiple_of(12).max(96);
        dst[..m * n].par_chunks_mut(chunk_rows * n).enumerate().for_each(|(i, c)| {
            let rows = c.len() / n;
            let a = &a[i * chunk_rows * k..];
            sgemm::matmul_packed(c, n, true, a, k, rows, k, packed, n);
        });
    }
}

/// The subset of `config.json` the forward pass needs.
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct BertShape {
    pub hidden_size: usize,
    pub num_attention_heads: usize,
    pub num_hidden_layers: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_act")]
    pub hidden_act: String,
}

fn default_eps() -> f64 {
    1e-12
}

fn default_act() -> String {
    "gelu".to_string()
}

struct Layer {
    /// `[hidden, 3 * hidden]`: columns are query | key | value.
    qkv_weight: Weight,
    qkv_bias: Vec<f32>,
    /// `[hidden, hidden]`.
    attn_out_weight: Weight,
    attn_out_bias: Vec<f32>,
    attn_norm_gamma: Vec<f32>,
    attn_norm_beta: Vec<f32>,
    /// `[hidden, intermediate]`.
    inter_weight: Weight,
    inter_bias: Vec<f32>,
    /// `[intermediate, hidden]`.
    out_weight: Weight,
    out_bias: Vec<f32>,
    out_norm_gamma: Vec<f32>,
    out_norm_beta: Vec<f32>,
}

/// The loaded encoder.
pub(crate) struct MiniLm {
    shape: BertShape,
    word_embeddings: Vec<f32>,
    /// Position embeddings with token type 0 already added (BERT's
    /// `token_type_ids` are all zero for single sentences).
    position_embeddings: Vec<f32>,
    embed_norm_gamma: Vec<f32>,
    embed_norm_beta: Vec<f32>,
    layers: Vec<Layer>,
    vocab_size: usize,
}

/// Why the checkpoint could not be turned into a [`MiniLm`].
pub(crate) type LoadResult<T> = Result<T, String>;

/// Reads a tensor as f32 and checks its shape.
fn tensor(st: &candle_core::safetensors::MmapedSafetensors, name: &str, dims: &[usize]) -> LoadResult<Vec<f32>> {
    let t = st.load(name, &Device::Cpu).map_err(|e| format!("tensor {name}: {e}"))?;
    if t.dims() != dims {
        return Err(format!("tensor {name} has shape {:?}, expected {dims:?}", t.dims()));
    }
    t.to_dtype(DType::F32)
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(|e| format!("tensor {name}: {e}"))
}

/// PyTorch `[out, in]` to row-major `[in, out]`.
fn transpose(weight: &[f32], out: usize, inp: usize) -> Vec<f32> {
    let mut t = vec![0.0; weight.len()];
    for o in 0..out {
        for i in 0..inp {
            t[i * out + o] = weight[o * inp + i];
        }
    }
    t
}

impl MiniLm {
    pub(crate) fn load(weights: &Path, shape: BertShape) -> LoadResult<Self> {
        if shape.hidden_act != "gelu" {
            return Err(format!("hidden_act {:?} is not supported (only BERT's erf \"gelu\")", shape.hidden_act));
        }
        if shape.num_attention_heads == 0 || !shape.hidden_size.is_multiple_of(shape.num_attention_heads) {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                shape.hidden_size, shape.num_attention_heads
            ));
        }
        // SAFETY: the file is memory-mapped read-only; nothing in this
        // process writes it, and every tensor is copied out before the map
        // is dropped at the end of this function.
        let st = unsafe { candle_core::safetensors::MmapedSafetensors::new(weights) }.map_err(|e| e.to_string())?;
        // Checkpoints saved from `BertForX` prefix every name with "bert.".
        let prefix = if st.get("embeddings.word_embeddings.weight").is_ok() { "" } else { "bert." };
        let name = |n: &str| format!("{prefix}{n}");
        let h = shape.hidden_size;
        let inter = shape.intermediate_size;

        let word = st.load(&name("embeddings.word_embeddings.weight"), &Device::Cpu).map_err(|e| e.to_string())?;
        let vocab_size = word.dims().first().copied().unwrap_or(0);
        let word_embeddings = tensor(&st, &name("embeddings.word_embeddings.weight"), &[vocab_size, h])?;
        let mut position_embeddings =
            tensor(&st, &name("embeddings.position_embeddings.weight"), &[shape.max_position_embeddings, h])?;
        let token_types = st
            .load(&name("embeddings.token_type_embeddings.weight"), &Device::Cpu)
            .map_err(|e| e.to_string())?;
        let token_type = tensor(&st, &name("embeddings.token_type_embeddings.weight"), &[token_types.dims()[0], h])?;
        for row in position_embeddings.chunks_exact_mut(h) {
            for (p, t) in row.iter_mut().zip(&token_type[..h]) {
                *p += t;
            }
        }
        let embed_norm_gamma = tensor(&st, &name("embeddings.LayerNorm.weight"), &[h])?;
        let embed_norm_beta = tensor(&st, &name("embeddings.LayerNorm.bias"), &[h])?;

        let mut layers = Vec::with_capacity(shape.num_hidden_layers);
        for l in 0..shape.num_hidden_layers {
            let p = |n: &str| name(&format!("encoder.layer.{l}.{n}"));
            let q = tensor(&st, &p("attention.self.query.weight"), &[h, h])?;
            let k = tensor(&st, &p("attention.self.key.weight"), &[h, h])?;
            let v = tensor(&st, &p("attention.self.value.weight"), &[h, h])?;
            // Stack as [3h, h] (out, in).
            let stacked: Vec<f32> = q.into_iter().chain(k).chain(v).collect();
            let qkv_weight = Weight::from_torch(&stacked, 3 * h, h);
            let mut qkv_bias = tensor(&st, &p("attention.self.query.bias"), &[h])?;
            qkv_bias.extend(tensor(&st, &p("attention.self.key.bias"), &[h])?);
            qkv_bias.extend(tensor(&st, &p("attention.self.value.bias"), &[h])?);
            layers.push(Layer {
                qkv_weight,
                qkv_bias,
                attn_out_weight: Weight::from_torch(&tensor(&st, &p("attention.output.dense.weight"), &[h, h])?, h, h),
                attn_out_bias: tensor(&st, &p("attention.output.dense.bias"), &[h])?,
                attn_norm_gamma: tensor(&st, &p("attention.output.LayerNorm.weight"), &[h])?,
                attn_norm_beta: tensor(&st, &p("attention.output.LayerNorm.bias"), &[h])?,
                inter_weight: Weight::from_torch(&tensor(&st, &p("intermediate.dense.weight"), &[inter, h])?, inter, h),
                inter_bias: tensor(&st, &p("intermediate.dense.bias"), &[inter])?,
                out_weight: Weight::from_torch(&tensor(&st, &p("output.dense.weight"), &[h, inter])?, h, inter),
                out_bias: tensor(&st, &p("output.dense.bias"), &[h])?,
                out_norm_gamma: tensor(&st, &p("output.LayerNorm.weight"), &[h])?,
                out_norm_beta: tensor(&st, &p("output.LayerNorm.bias"), &[h])?,
            });
        }
        Ok(MiniLm {
            shape,
            word_embeddings,
            position_embeddings,
            embed_norm_gamma,
            embed_norm_beta,
            layers,
            vocab_size,
        })
    }

    /// Mean-pooled, L2-normalised vectors of `seqs` (token ids including
    /// `[CLS]` and `[SEP]`), one per sequence, in order.
    ///
    /// Panics if a sequence is longer than the position table or holds an
    /// id outside the vocabulary (the tokenizer and the caller's windowing
    /// rule both out).
    pub(crate) fn embed_batch(&self, seqs: &[&[u32]]) -> Vec<Vec<f32>> {
        let h = self.shape.hidden_size;
        let eps = self.shape.layer_norm_eps as f32;
        let threads = rayon::current_num_threads();
        // Row ranges of each sequence in the packed token matrix.
        let mut starts = Vec::with_capacity(seqs.len() + 1);
        let mut total = 0usize;
        for s in seqs {
            assert!(s.len() <= self.shape.max_position_embeddings, "sequence longer than the position table");
            starts.push(total);
            total += s.len();
        }
        starts.push(total);
        if total == 0 {
            return vec![vec![0.0; h]; seqs.len()];
        }
        // Rows per parallel chunk of the element-wise steps.
        let rows_per_chunk = total.div_ceil(threads.max(1) * 4).max(1);

        // Embeddings: word + (position + token type 0), then layer norm.
        let mut hidden = vec![0.0f32; total * h];
        for (s, seq) in seqs.iter().enumerate() {
            for (pos, &id) in seq.iter().enumerate() {
                let id = id as usize;
                assert!(id < self.vocab_size, "token id {id} outside the vocabulary");
                let row = &mut hidden[(starts[s] + pos) * h..(starts[s] + pos + 1) * h];
                let word = &self.word_embeddings[id * h..(id + 1) * h];
                let position = &self.position_embeddings[pos * h..(pos + 1) * h];
                for ((r, w), p) in row.iter_mut().zip(word).zip(position) {
                    *r = w + p;
                }
            }
        }
        hidden
            .par_chunks_mut(rows_per_chunk * h)
            .for_each(|rows| layer_norm_rows_in_place(rows, &self.embed_norm_gamma, &self.embed_norm_beta, eps));

        let inter = self.shape.intermediate_size;
        let mut qkv = vec![0.0f32; total * 3 * h];
        let mut context = vec![0.0f32; total * h];
        let mut intermediate = vec![0.0f32; total * inter];
        for layer in &self.layers {
            // Q | K | V for every token: bias, then accumulate the product.
            fill_rows(&mut qkv, &layer.qkv_bias);
            layer.qkv_weight.accumulate_product(&mut qkv, &hidden, total, threads);
            self.attention(&qkv, &mut context, seqs, &starts);
            // hidden = LayerNorm(hidden + bias + context · W_o)
            add_rows(&mut hidden, &layer.attn_out_bias);
            layer.attn_out_weight.accumulate_product(&mut hidden, &context, total, threads);
            hidden
                .par_chunks_mut(rows_per_chunk * h)
                .for_each(|rows| layer_norm_rows_in_place(rows, &layer.attn_norm_gamma, &layer.attn_norm_beta, eps));
            // intermediate = GELU(bias + hidden · W_i)
            fill_rows(&mut intermediate, &layer.inter_bias);
            layer.inter_weight.accumulate_product(&mut intermediate, &hidden, total, threads);
            intermediate.par_chunks_mut(rows_per_chunk * inter).for_each(gelu_erf_in_place);
            // hidden = LayerNorm(hidden + bias + intermediate · W_out)
            add_rows(&mut hidden, &layer.out_bias);
            layer.out_weight.accumulate_product(&mut hidden, &intermediate, total, threads);
            hidden
                .par_chunks_mut(rows_per_chunk * h)
                .for_each(|rows| layer_norm_rows_in_place(rows, &layer.out_norm_gamma, &layer.out_norm_beta, eps));
        }

        (0..seqs.len())
            .map(|s| {
                let rows = &hidden[starts[s] * h..starts[s + 1] * h];
                let mut v = pooling::mean_rows(rows, h);
                pooling::l2_normalize(&mut v);
                v
            })
            .collect()
    }

    /// Scaled dot-product attention of every sequence and head, written
    /// into `context` (`[total, hidden]`, heads side by side).
    fn attention(&self, qkv: &[f32], context: &mut [f32], seqs: &[&[u32]], starts: &[usize]) {
        let h = self.shape.hidden_size;
        let heads = self.shape.num_attention_heads;
        let head_dim = h / heads;
        let scale = 1.0 / (head_dim as f32).sqrt();
        let packed = sgemm::available() && head_dim.is_multiple_of(sgemm::PANEL);
        // Each sequence's context rows are disjoint; split them up front so
        // the parallel tasks each own theirs.
        let mut per_seq: Vec<(usize, &mut [f32])> = Vec::with_capacity(seqs.len());
        let mut rest = context;
        for s in 0..seqs.len() {
            let (mine, tail) = rest.split_at_mut((starts[s + 1] - starts[s]) * h);
            per_seq.push((s, mine));
            rest = tail;
        }
        per_seq.into_par_iter().for_each_init(Scratch::default, |scratch, (s, ctx)| {
            let len = starts[s + 1] - starts[s];
            if len == 0 {
                return;
            }
            let rows = &qkv[starts[s] * 3 * h..starts[s + 1] * 3 * h];
            for head in 0..heads {
                let q_col = head * head_dim;
                let (k_col, v_col) = (h + q_col, 2 * h + q_col);
                if packed {
                    // Scores row stride: len rounded up to whole panels; the
                    // padding columns hold zeros and are never read.
                    let width = len.next_multiple_of(sgemm::PANEL);
                    pack_keys(&mut scratch.keys, rows, 3 * h, k_col, head_dim, len, width);
                    scratch.scores.resize(len * width, 0.0);
                    sgemm::matmul_packed(
                        &mut scratch.scores,
                        width,
                        false,
                        &rows[q_col..],
                        3 * h,
                        len,
                        head_dim,
                        &scratch.keys,
                        width,
                    );
                    softmax_rows_in_place(&mut scratch.scores, width, len, scale);
                    sgemm::pack_into(&mut scratch.values, &rows[v_col..], len, head_dim, 3 * h, 1);
                    sgemm::matmul_packed(
                        &mut ctx[q_col..],
                        h,
                        false,
                        &scratch.scores,
                        width,
                        len,
                        len,
                        &scratch.values,
                        head_dim,
                    );
                } else {
                    scratch.scores.resize(len * len, 0.0);
                    let q = MatRef { data: &rows[q_col..], rows: len, cols: head_dim, row_stride: 3 * h, col_stride: 1 };
                    // K transposed: element (d, j) is K[j, d].
                    let k_t =
                        MatRef { data: &rows[k_col..], rows: head_dim, cols: len, row_stride: 1, col_stride: 3 * h };
                    matmul(&mut scratch.scores, len, false, q, k_t, 1.0, Threads::One);
                    softmax_rows_in_place(&mut scratch.scores, len, len, scale);
                    let v = MatRef { data: &rows[v_col..], rows: len, cols: head_dim, row_stride: 3 * h, col_stride: 1 };
                    let p = MatRef { data: &scratch.scores, rows: len, cols: len, row_stride: len, col_stride: 1 };
                    matmul(&mut ctx[q_col..], h, false, p, v, 1.0, Threads::One);
                }
            }
        });
    }
}

/// Per-thread buffers of the attention step.
#[derive(Default)]
struct Scratch {
    scores: Vec<f32>,
    keys: sgemm::Packed,
    values: sgemm::Packed,
}

/// Packs one head's `K^T` (`head_dim x len`, zero-padded to `width`
/// columns) for [`sgemm::matmul_packed`]; `K[j, d]` is
/// `rows[j * row_stride + col + d]`.
fn pack_keys(out: &mut sgemm::Packed, rows: &[f32], row_stride: usize, col: usize, head_dim: usize, len: usize, width: usize) {
    out.reset_zeroed(head_dim * width);
    let out = out.as_mut_slice();
    for p in 0..width / sgemm::PANEL {
        let panel = &mut out[p * head_dim * sgemm::PANEL..(p + 1) * head_dim * sgemm::PANEL];
        for c in 0..sgemm::PANEL.min(len - p * sgemm::PANEL) {
            let key = &rows[(p * sgemm::PANEL + c) * row_stride + col..][..head_dim];
            for (d, &x) in key.iter().enumerate() {
                panel[d * sgemm::PANEL + c] = x;
            }
        }
    }
}

/// Sets every `bias.len()`-wide row of `rows` to `bias`.
fn fill_rows(rows: &mut [f32], bias: &[f32]) {
    for row in rows.chunks_exact_mut(bias.len()) {
        row.copy_from_slice(bias);
    }
}

/// Adds `bias` to every `bias.len()`-wide row of `rows`.
fn add_rows(rows: &mut [f32], bias: &[f32]) {
    for row in rows.chunks_exact_mut(bias.len()) {
        for (r, b) in row.iter_mut().zip(bias) {
            *r += b;
        }
    }
}
