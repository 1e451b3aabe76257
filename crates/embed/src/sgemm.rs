//! An AVX-512 f32 matrix product for a right-hand side packed ahead of
//! time: `C (m x n) = [C +] [bias +] A (m x k) · B (k x n)` with `B` stored as
//! panels of 32 columns (`panel[k * 32 + c] = B[k, 32p + c]`) and `n` a
//! multiple of 32. The weights of every dense layer are packed once at
//! load; attention packs each head's `K^T` and `V` (a few KB) per call.
//!
//! Why not the `gemm` crate alone: on this code base's CPU (Sapphire/Emerald
//! Rapids, rustc 1.95) its AVX-512 micro-kernel spills accumulators to the
//! stack in the inner loop and reaches about a fifth of PyTorch's
//! single-core throughput. The micro-kernel here keeps 12 rows x 32
//! columns (24 zmm accumulators) in registers, broadcasting one element of
//! `A` per row and step straight from `A`'s rows (no packed copy of `A`:
//! rustc turned the transposing copy into scatter instructions that cost
//! 15% of the product, and the twelve row streams stay in L1 anyway).
//! On the best of repeated runs it reaches 160–180 GFLOP/s per core on
//! MiniLM's shapes, as PyTorch's oneDNN kernels do on the same machine.
//! Callers fall back to the `gemm` crate on CPUs without AVX-512 (see
//! [`available`]).

/// Columns per packed panel (two zmm registers).
pub(crate) const PANEL: usize = 32;
/// Rows per micro-kernel call (24 accumulators + 2 panel vectors + 1
/// broadcast = 27 of the 32 zmm registers).
const ROWS: usize = 12;

/// Setting this environment variable (to anything but `0`) makes the
/// embedder take the portable path even on an AVX-512 CPU: the test suite
/// uses it so that the path CPUs without AVX-512 take is tested everywhere.
pub const PORTABLE_ENV: &str = "EVIDENT_EMBED_PORTABLE";

/// Whether this CPU runs the AVX-512 path (and it is not switched off by
/// [`PORTABLE_ENV`]); decided once per process.
pub(crate) fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        if std::env::var_os(PORTABLE_ENV).is_some_and(|v| v != "0") {
            return false;
        }
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512f")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// One cache line of floats; [`Packed`] is built from these so every
/// panel row starts on a cache line (an unaligned 64-byte load straddles
/// two lines and halves the load throughput the micro-kernel needs).
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// A packed right-hand side, 64-byte aligned.
#[derive(Clone, Default)]
pub(crate) struct Packed {
    lines: Vec<Line>,
    len: usize,
}

impl Packed {
    /// Resizes to `len` floats (a multiple of 16), all zero.
    pub(crate) fn reset_zeroed(&mut self, len: usize) {
        assert_eq!(len % 16, 0);
        self.lines.clear();
        self.lines.resize(len / 16, Line::default());
        self.len = len;
    }

    pub(crate) fn as_slice(&self) -> &[f32] {
        // SAFETY: Line is repr(C) around [f32; 16] with no padding (64
        // bytes, align 64), so the lines are len contiguous floats.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<f32>(), self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [f32] {
        // SAFETY: as in as_slice, and the borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<f32>(), self.len) }
    }
}

/// Packs `b` (element (i, j) at `b[i * row_stride + j * col_stride]`,
/// `k x n`, `n` a multiple of [`PANEL`]) into `out`.
pub(crate) fn pack_into(out: &mut Packed, b: &[f32], k: usize, n: usize, row_stride: usize, col_stride: usize) {
    assert_eq!(n % PANEL, 0, "packed width {n} is not a multiple of {PANEL}");
    out.reset_zeroed(k * n);
    let dst = out.as_mut_slice();
    let mut at = 0;
    for p in 0..n / PANEL {
        for i in 0..k {
            for c in 0..PANEL {
                dst[at] = b[i * row_stride + (p * PANEL + c) * col_stride];
                at += 1;
            }
        }
    }
}

/// `c = [c +] [bias +] a · b_packed`, single-threaded. `a` is `m x k` with
/// row stride `lda` (columns contiguous); `c` is `m x n` with row stride
/// `ldc`; `bias` (`n` values) is added to every row. The sum is formed as
/// `((c + bias) + a[0]·b[0]) + a[1]·b[1] + ...`, exactly what adding the
/// bias into `c` first and then accumulating gives, in one pass.
/// Panics unless [`available`] (check first) and the slices are big enough.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_packed(
    c: &mut [f32],
    ldc: usize,
    accumulate: bool,
    bias: Option<&[f32]>,
    a: &[f32],
    lda: usize,
    m: usize,
    k: usize,
    b_packed: &Packed,
    n: usize,
) {
    let b_packed = b_packed.as_slice();
    assert!(available(), "matmul_packed needs AVX-512");
    assert_eq!(n % PANEL, 0);
    assert_eq!(b_packed.len(), k * n, "packed operand has the wrong size");
    if m == 0 || n == 0 {
        return;
    }
    assert!(k == 0 || (m - 1) * lda + k <= a.len(), "left operand reaches past its buffer");
    assert!((m - 1) * ldc + n <= c.len(), "output reaches past its buffer");
    if let Some(bias) = bias {
        assert_eq!(bias.len(), n, "bias has the wrong length");
    }
    let bias = bias.map_or(std::ptr::null(), <[f32]>::as_ptr);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX-512 was detected (assert above) and every access stays
    // within the bounds just checked: rows < m, columns < n, depth < k;
    // `bias` is null or holds n values.
    unsafe {
        avx512::matmul(c.as_mut_ptr(), ldc, accumulate, bias, a.as_ptr(), lda, m, k, b_packed.as_ptr(), n);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{PANEL, ROWS};

    /// Rows that share each panel slice while it is in L1. Blocks of 8 to
    /// 48 groups and depth slices of 128 to 384 all measured within this
    /// machine's run-to-run noise (about 15%).
    const ROW_BLOCK: usize = ROWS * 24;
    /// Depth slice: a panel slice (`DEPTH x 32`, 24 KB) plus one row
    /// group's slice of `A` (`12 x DEPTH`, 9 KB) stay in the 48 KB L1.
    const DEPTH: usize = 192;

    /// See [`super::matmul_packed`]; `bias` is null or `n` values.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn matmul(
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
        bias: *const f32,
        a: *const f32,
        lda: usize,
        m: usize,
        k: usize,
        b: *const f32,
        n: usize,
    ) {
        let mut block = 0;
        while block < m {
            let block_rows = (m - block).min(ROW_BLOCK);
            let mut depth = 0;
            // k == 0 still runs once so that `c` gets its bias (or zeros)
            // when not accumulating.
            loop {
                let depth_len = (k - depth).min(DEPTH);
                // The first slice starts from c (if accumulating) and the
                // bias; later slices continue from what c holds.
                let (load_c, bias) = if depth == 0 { (accumulate, bias) } else { (true, std::ptr::null()) };
                for p in 0..n / PANEL {
                    let panel = b.add(p * k * PANEL + depth * PANEL);
                    let bias = if bias.is_null() { bias } else { bias.add(p * PANEL) };
                    let mut g = 0;
                    while g * ROWS < block_rows {
                        let rows = (block_rows - g * ROWS).min(ROWS);
                        let a_g = a.add((block + g * ROWS) * lda + depth);
                        let c_g = c.add((block + g * ROWS) * ldc + p * PANEL);
                        let args = (c_g, ldc, load_c, bias, a_g, lda, depth_len, panel);
                        match rows {
                            12 => kernel::<12>(args),
                            11 => kernel::<11>(args),
                            10 => kernel::<10>(args),
                            9 => kernel::<9>(args),
                            8 => kernel::<8>(args),
                            7 => kernel::<7>(args),
                            6 => kernel::<6>(args),
                            5 => kernel::<5>(args),
                            4 => kernel::<4>(args),
                            3 => kernel::<3>(args),
                            2 => kernel::<2>(args),
                            _ => kernel::<1>(args),
                        }
                        g += 1;
                    }
                }
                depth += depth_len;
                if depth >= k {
                    break;
                }
            }
            block += block_rows;
        }
    }

    /// A micro-kernel call: `(c, ldc, load_c, bias, a, lda, depth, panel)`.
    type KernelArgs = (*mut f32, usize, bool, *const f32, *const f32, usize, usize, *const f32);

    /// `R` rows x 32 columns of `c` over `depth` steps: the accumulators
    /// start from `c` (if `load_c`) plus `bias` (if not null), then take
    /// one broadcast element of each of the `R` rows of `a` (row stride
    /// `lda`) times the panel row per step.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn kernel<const R: usize>((c, ldc, load_c, bias, a, lda, depth, panel): KernelArgs) {
        let (bias_lo, bias_hi) = if bias.is_null() {
            (_mm512_setzero_ps(), _mm512_setzero_ps())
        } else {
            (_mm512_loadu_ps(bias), _mm512_loadu_ps(bias.add(16)))
        };
        let mut lo = [bias_lo; R];
        let mut hi = [bias_hi; R];
        if load_c {
            for r in 0..R {
                lo[r] = _mm512_add_ps(_mm512_loadu_ps(c.add(r * ldc)), bias_lo);
                hi[r] = _mm512_add_ps(_mm512_loadu_ps(c.add(r * ldc + 16)), bias_hi);
            }
        }
        for d in 0..depth {
            let b_lo = _mm512_loadu_ps(panel.add(d * PANEL));
            let b_hi = _mm512_loadu_ps(panel.add(d * PANEL + 16));
            for r in 0..R {
                let x = _mm512_set1_ps(*a.add(r * lda + d));
                lo[r] = _mm512_fmadd_ps(x, b_lo, lo[r]);
                hi[r] = _mm512_fmadd_ps(x, b_hi, hi[r]);
            }
        }
        for r in 0..R {
            _mm512_storeu_ps(c.add(r * ldc), lo[r]);
            _mm512_storeu_ps(c.add(r * ldc + 16), hi[r]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_product_matches_naive_product() {
        if !available() {
            eprintln!("no AVX-512 on this CPU: the packed path is never taken here");
            return;
        }
        // Shapes cover full and partial row groups, more rows than one
        // row block, depths past one slice, and several panels.
        for (m, k, n) in
            [(1, 3, 32), (13, 7, 64), (29, 40, 96), (100, 5, 32), (110, 400, 64), (5, 0, 32), (300, 200, 32)]
        {
            let lda = k + 3;
            let ldc = n + 5;
            let a: Vec<f32> = (0..m * lda).map(|i| ((i * 37) % 19) as f32 * 0.1 - 0.9).collect();
            // B given transposed (n x k storage), as PyTorch stores weights.
            let bt: Vec<f32> = (0..n * k).map(|i| ((i * 13) % 23) as f32 * 0.05 - 0.5).collect();
            let bias: Vec<f32> = (0..n).map(|j| (j % 7) as f32 * 0.25 - 0.5).collect();
            let mut packed = Packed::default();
            pack_into(&mut packed, &bt, k, n, 1, k);
            for accumulate in [false, true] {
                for with_bias in [false, true] {
                    let mut c = vec![0.5f32; m * ldc];
                    let b = with_bias.then_some(&bias[..]);
                    matmul_packed(&mut c, ldc, accumulate, b, &a, lda, m, k, &packed, n);
                    for i in 0..m {
                        for j in 0..ldc {
                            let want = if j < n {
                                let dot: f32 = (0..k).map(|d| a[i * lda + d] * bt[j * k + d]).sum();
                                dot + if accumulate { 0.5 } else { 0.0 } + if with_bias { bias[j] } else { 0.0 }
                            } else {
                                0.5
                            };
                            let got = c[i * ldc + j];
                            assert!((got - want).abs() < 1e-4, "m={m} k={k} n={n} ({i},{j}): {got} vs {want}");
                        }
                    }
                }
            }
        }
    }

    /// The bias start is the same arithmetic as adding the bias into `c`
    /// and accumulating, to the bit: the forward pass relies on it.
    #[test]
    fn bias_start_equals_adding_the_bias_first() {
        if !available() {
            return;
        }
        let (m, k, n) = (37, 450, 64);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 31) % 17) as f32 * 0.13 - 1.0).collect();
        let bt: Vec<f32> = (0..n * k).map(|i| ((i * 11) % 29) as f32 * 0.07 - 1.0).collect();
        let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.37 - 3.0).collect();
        let residual: Vec<f32> = (0..m * n).map(|i| ((i * 7) % 13) as f32 * 0.3 - 2.0).collect();
        let mut packed = Packed::default();
        pack_into(&mut packed, &bt, k, n, 1, k);
        for accumulate in [false, true] {
            let start = if accumulate { residual.clone() } else { vec![0.0; m * n] };
            let mut fused = start.clone();
            matmul_packed(&mut fused, n, accumulate, Some(&bias), &a, k, m, k, &packed, n);
            let mut two_pass = start;
            for row in two_pass.chunks_exact_mut(n) {
                for (x, b) in row.iter_mut().zip(&bias) {
                    *x += b;
                }
            }
            matmul_packed(&mut two_pass, n, true, None, &a, k, m, k, &packed, n);
            assert!(fused.iter().zip(&two_pass).all(|(x, y)| x.to_bits() == y.to_bits()));
        }
    }
}
