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
//! - on CPUs with AVX-512 the products run on [`crate::sgemm`] with the
//!   weights packed once at load (elsewhere on the `gemm` crate), and the
//!   bias (and the residual, which is already in the output) is where the
//!   product's accumulators start, so no separate pass adds them;
//! - a batch runs on one thread or several: with several, dense products
//!   split their rows over the threads and attention spreads the
//!   sequences over them. [`crate::MiniLmEmbedder::embed_texts`] prefers
//!   one thread per batch with batches side by side when it has several.
//!
//! The output is the mean-pooled, L2-normalised sentence vector.

use std::path::Path;

use candle_core::{DType, Device};
use rayon::prelude::*;

use crate::kernels::{gelu_erf_in_place, layer_norm_rows_in_place, matmul, softmax_rows_in_place, MatRef, Threads};
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

    /// `dst = then([dst +] bias + a · self)`, `a` being `m x rows`
    /// row-major, `dst` `m x cols` row-major; rows are split over
    /// `threads`, and `then` runs on each block of finished rows while they
    /// are still in cache.
    #[allow(clippy::too_many_arguments)]
    fn product(
        &self,
        dst: &mut [f32],
        accumulate: bool,
        bias: &[f32],
        a: &[f32],
        m: usize,
        threads: usize,
        then: impl Fn(&mut [f32]) + Sync + Send,
    ) {
        let (k, n) = (self.rows, self.cols);
        let dst = &mut dst[..m * n];
        let Some(packed) = &self.packed else {
            if accumulate {
                add_rows(dst, bias);
            } else {
                fill_rows(dst, bias);
            }
            let pool = if threads > 1 { Threads::Pool(threads) } else { Threads::One };
            matmul(
                dst,
                n,
                true,
                MatRef { data: a, rows: m, cols: k, row_stride: k, col_stride: 1 },
                MatRef { data: &self.data, rows: k, cols: n, row_stride: n, col_stride: 1 },
                1.0,
                pool,
            );
            for_each_chunk(threads, dst, 96 * n, |_, rows| then(rows));
            return;
        };
        // Chunks of whole 12-row groups: with several threads, several per
        // thread so a preempted thread does not hold up the product; on one
        // thread, blocks small enough that `then` finds them in L2.
        let chunk_rows = if threads > 1 { m.div_ceil(threads * 4).next_multiple_of(12).max(96) } else { 192 };
        for_each_chunk(threads, dst, chunk_rows * n, |i, c| {
            let rows = c.len() / n;
            let a = &a[i * chunk_rows * k..];
            sgemm::matmul_packed(c, n, accumulate, Some(bias), a, k, rows, k, packed, n);
            then(c);
        });
    }
}

/// Calls `f(index, chunk)` on consecutive `chunk_len`-long pieces of
/// `data`: over the rayon pool when `threads > 1`, in order on the calling
/// thread otherwise (a batch embedded on one thread of a parallel
/// [`crate::MiniLmEmbedder::embed_texts`] must not fan out again).
fn for_each_chunk<F>(threads: usize, data: &mut [f32], chunk_len: usize, f: F)
where
    F: Fn(usize, &mut [f32]) + Sync + Send,
{
    if threads > 1 {
        data.par_chunks_mut(chunk_len).enumerate().for_each(|(i, c)| f(i, c));
    } else {
        data.chunks_mut(chunk_len).enumerate().for_each(|(i, c)| f(i, c));
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
        let token_types =
            st.load(&name("embeddings.token_type_embeddings.weight"), &Device::Cpu).map_err(|e| e.to_string())?;
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
    /// `[CLS]` and `[SEP]`), one per sequence, in order, computed on
    /// `threads` threads of the current rayon pool (1: on the calling
    /// thread alone). Each sequence's vector is the same to the bit
    /// whatever else is in the batch and however many threads run it:
    /// every output row is summed in the same order either way.
    ///
    /// Panics if a sequence is longer than the position table or holds an
    /// id outside the vocabulary (the tokenizer and the caller's windowing
    /// rule both out).
    pub(crate) fn embed_batch<'a>(&'a self, seqs: &[&[u32]], threads: usize) -> Vec<Vec<f32>> {
        let h = self.shape.hidden_size;
        let eps = self.shape.layer_norm_eps as f32;
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

        // The activations live in this thread's buffers from the last
        // batch (taken, not borrowed, so a nested call just allocates);
        // every element is written before it is read.
        let mut buffers = BUFFERS.take();
        let Buffers { hidden, qkv, context, intermediate } = &mut buffers;
        let inter = self.shape.intermediate_size;
        for (buffer, len) in [(&mut *hidden, h), (&mut *qkv, 3 * h), (&mut *context, h), (&mut *intermediate, inter)] {
            buffer.resize(total * len, 0.0);
        }

        // Embeddings: word + (position + token type 0), then layer norm.
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
        for_each_chunk(threads, hidden, rows_per_chunk * h, |_, rows| {
            layer_norm_rows_in_place(rows, &self.embed_norm_gamma, &self.embed_norm_beta, eps)
        });

        let norm = |gamma: &'a [f32], beta: &'a [f32]| {
            move |rows: &mut [f32]| layer_norm_rows_in_place(rows, gamma, beta, eps)
        };
        for layer in &self.layers {
            // Q | K | V for every token.
            layer.qkv_weight.product(&mut *qkv, false, &layer.qkv_bias, &*hidden, total, threads, |_| ());
            self.attention(&*qkv, &mut *context, seqs, &starts, threads);
            // hidden = LayerNorm(hidden + bias + context · W_o)
            let attn_norm = norm(&layer.attn_norm_gamma, &layer.attn_norm_beta);
            layer.attn_out_weight.product(
                &mut *hidden,
                true,
                &layer.attn_out_bias,
                &*context,
                total,
                threads,
                attn_norm,
            );
            // intermediate = GELU(bias + hidden · W_i)
            layer.inter_weight.product(
                &mut *intermediate,
                false,
                &layer.inter_bias,
                &*hidden,
                total,
                threads,
                gelu_erf_in_place,
            );
            // hidden = LayerNorm(hidden + bias + intermediate · W_out)
            let out_norm = norm(&layer.out_norm_gamma, &layer.out_norm_beta);
            layer.out_weight.product(&mut *hidden, true, &layer.out_bias, &*intermediate, total, threads, out_norm);
        }

        let vectors = (0..seqs.len())
            .map(|s| {
                let rows = &hidden[starts[s] * h..starts[s + 1] * h];
                let mut v = pooling::mean_rows(rows, h);
                pooling::l2_normalize(&mut v);
                v
            })
            .collect();
        // Batches of sentences need a few MB; one huge batch should not pin
        // its buffers for the life of the thread.
        if buffers.floats() <= KEEP_FLOATS {
            BUFFERS.set(buffers);
        }
        vectors
    }

    /// Scaled dot-product attention of every sequence and head, written
    /// into `context` (`[total, hidden]`, heads side by side).
    fn attention(&self, qkv: &[f32], context: &mut [f32], seqs: &[&[u32]], starts: &[usize], threads: usize) {
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
        let one_sequence = |scratch: &mut Scratch, (s, ctx): (usize, &mut [f32])| {
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
                        None,
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
                        None,
                        &scratch.scores,
                        width,
                        len,
                        len,
                        &scratch.values,
                        head_dim,
                    );
                } else {
                    scratch.scores.resize(len * len, 0.0);
                    let q =
                        MatRef { data: &rows[q_col..], rows: len, cols: head_dim, row_stride: 3 * h, col_stride: 1 };
                    // K transposed: element (d, j) is K[j, d].
                    let k_t =
                        MatRef { data: &rows[k_col..], rows: head_dim, cols: len, row_stride: 1, col_stride: 3 * h };
                    matmul(&mut scratch.scores, len, false, q, k_t, 1.0, Threads::One);
                    softmax_rows_in_place(&mut scratch.scores, len, len, scale);
                    let v =
                        MatRef { data: &rows[v_col..], rows: len, cols: head_dim, row_stride: 3 * h, col_stride: 1 };
                    let p = MatRef { data: &scratch.scores, rows: len, cols: len, row_stride: len, col_stride: 1 };
                    matmul(&mut ctx[q_col..], h, false, p, v, 1.0, Threads::One);
                }
            }
        };
        if threads > 1 {
            per_seq.into_par_iter().for_each_init(Scratch::default, one_sequence);
        } else {
            let mut scratch = Scratch::default();
            per_seq.into_iter().for_each(|job| one_sequence(&mut scratch, job));
        }
    }
}

/// A thread's activation buffers, kept between batches.
#[derive(Default)]
struct Buffers {
    hidden: Vec<f32>,
    qkv: Vec<f32>,
    context: Vec<f32>,
    intermediate: Vec<f32>,
}

/// Buffers larger than this (128 MB: a batch of about 9,700 tokens, more
/// than the default 32 windows of 256 tokens) are freed after their batch
/// instead of kept.
const KEEP_FLOATS: usize = 32 << 20;

impl Buffers {
    fn floats(&self) -> usize {
        self.hidden.capacity() + self.qkv.capacity() + self.context.capacity() + self.intermediate.capacity()
    }
}

thread_local! {
    static BUFFERS: std::cell::Cell<Buffers> = std::cell::Cell::new(Buffers::default());
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
fn pack_keys(
    out: &mut sgemm::Packed,
    rows: &[f32],
    row_stride: usize,
    col: usize,
    head_dim: usize,
    len: usize,
    width: usize,
) {
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
