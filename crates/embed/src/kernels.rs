//! The CPU kernels of the MiniLM forward pass: a strided f32 matrix product
//! (the `gemm` crate, AVX-512 when the CPU has it), row softmax, layer norm
//! and exact (erf) GELU. The element-wise kernels are branch-free loops the
//! compiler vectorises; each is compiled three times (AVX-512, AVX2+FMA,
//! baseline) and the best one for the running CPU is picked at run time.
//! `exp` and `erf` are polynomial approximations accurate to a few float
//! ulps (the unit tests below check them against f64 `libm`), so results
//! differ from PyTorch's only by float rounding.

/// Compiles `$body` (a function of the listed arguments) once per CPU level
/// and dispatches on the running CPU's features.
macro_rules! dispatch {
    (fn $name:ident($($arg:ident: $ty:ty),*) $body:block) => {
        pub(crate) fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn body($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) { body($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) { body($($arg),*) }
                if std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                {
                    // SAFETY: the features were detected on this CPU.
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the features were detected on this CPU.
                    return unsafe { avx2($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}

/// `exp(x)` for x <= 88 (Cephes `expf`: range reduction by ln 2 in two
/// parts and a degree-6 polynomial; relative error about 1e-7). Inputs
/// below -87 give about 1e-38 instead of a subnormal, which softmax ignores.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 * 2^23: adding and subtracting it rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let x = if x < -87.0 { -87.0 } else { x };
    let x = if x > 88.0 { 88.0 } else { x };
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    // n as an integer, read from t's low mantissa bits (an `as i32` cast
    // would add saturation checks that stop vectorisation).
    let n_int = t.to_bits().wrapping_sub(ROUND.to_bits());
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * (r * r) + r + 1.0;
    // n is in [-126, 127], so the biased exponent is in [1, 254].
    y * f32::from_bits(n_int.wrapping_add(127) << 23)
}

/// `erf(x)`: the rational approximation Eigen and XLA use for f32
/// (odd degree-13 numerator over even degree-8 denominator on [-4, 4];
/// |erf| is 1 in f32 beyond that).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let x = if x > 4.0 { 4.0 } else { x };
    let x = if x < -4.0 { -4.0 } else { x };
    let x2 = x * x;
    let mut p = -2.726_142_3e-10f32;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 - 2.101_024e-6;
    p = p * x2 - 5.692_506_4e-5;
    p = p * x2 - 7.349_906_3e-4;
    p = p * x2 - 2.954_6e-3;
    p = p * x2 - 1.609_603_3e-2;
    p *= x;
    let mut q = -1.456_607_2e-5f32;
    q = q * x2 - 2.133_740_6e-4;
    q = q * x2 - 1.682_827e-3;
    q = q * x2 - 7.373_329e-3;
    q = q * x2 - 1.426_474e-2;
    p / q
}

dispatch! {
    fn gelu_erf_in_place(values: &mut [f32]) {
        // BERT's "gelu": x * Phi(x) with the exact normal CDF.
        const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
        for v in values {
            let x = *v;
            *v = 0.5 * x * (1.0 + erf(x * FRAC_1_SQRT_2));
        }
    }
}

/// Lanes of the reductions below: 16 independent accumulators let the
/// compiler keep them in one AVX-512 register (a single running float sum
/// cannot be vectorised without reordering the additions).
const LANES: usize = 16;

/// Largest element of `row` (negative infinity when empty).
#[inline(always)]
fn row_max(row: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = row.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a = if x > *a { x } else { *a };
        }
    }
    let mut max = f32::NEG_INFINITY;
    for &x in acc.iter().chain(tail) {
        max = if x > max { x } else { max };
    }
    max
}

/// Sum of `f(x)` over `row`, accumulated in [`LANES`] partial sums.
#[inline(always)]
fn row_sum(row: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = row.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a += f(x);
        }
    }
    acc.iter().sum::<f32>() + tail.iter().map(|&x| f(x)).sum::<f32>()
}

/// Replaces each `x` of `row` by `exp(f(x))` and returns the sum of the
/// first `valid` results. `row`'s length is a multiple of [`LANES`] (the
/// entries past `valid` are scratch), so every step is a whole vector:
/// a scalar tail cost as much as the vector body on 166-token rows.
#[inline(always)]
fn exp_in_place_sum(row: &mut [f32], valid: usize, f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    for (c, chunk) in row.chunks_exact_mut(LANES).enumerate() {
        for (lane, (a, x)) in acc.iter_mut().zip(chunk).enumerate() {
            *x = exp(f(*x));
            *a += if c * LANES + lane < valid { *x } else { 0.0 };
        }
    }
    acc.iter().sum::<f32>()
}

dispatch! {
    fn softmax_rows_in_place(values: &mut [f32], row_stride: usize, row_len: usize, scale: f32) {
        // softmax(scale * x) over the first row_len entries of each row;
        // scale > 0, so the largest scaled entry is scale * max. Entries
        // from row_len up to the next multiple of 16 (within the stride)
        // are overwritten with scratch values.
        let padded = row_len.next_multiple_of(LANES).min(row_stride);
        let whole = padded - padded % LANES;
        for row in values.chunks_exact_mut(row_stride) {
            let max = row_max(&row[..row_len]);
            let (body, tail) = row[..padded].split_at_mut(whole);
            let mut sum = exp_in_place_sum(body, row_len.min(whole), |x| (x - max) * scale);
            for x in tail.iter_mut() {
                *x = exp((*x - max) * scale);
                sum += *x;
            }
            let inv = 1.0 / sum;
            for x in row[..padded].iter_mut() {
                *x *= inv;
            }
        }
    }
}

dispatch! {
    fn layer_norm_rows_in_place(values: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
        let width = gamma.len();
        let inv_width = 1.0 / width as f32;
        for row in values.chunks_exact_mut(width) {
            let mean = row_sum(row, |x| x) * inv_width;
            let var = row_sum(row, |x| (x - mean) * (x - mean)) * inv_width;
            let inv_std = 1.0 / (var + eps).sqrt();
            for ((x, g), b) in row.iter_mut().zip(gamma).zip(beta) {
                *x = (*x - mean) * inv_std * g + b;
            }
        }
    }
}

/// How many threads a matrix product may use.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Threads {
    One,
    Pool(usize),
}

/// A row-major f32 matrix view: element (i, j) at `i * row_stride + j * col_stride`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MatRef<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl MatRef<'_> {
    fn check(&self) {
        if self.rows > 0 && self.cols > 0 {
            let last = (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride;
            assert!(last < self.data.len(), "matrix view reaches past its buffer");
        }
    }
}

/// `dst = (accumulate ? dst : 0) + scale * lhs * rhs`, with `dst` row-major
/// (`rows x cols`, row stride `dst_row_stride`, columns contiguous).
pub(crate) fn matmul(
    dst: &mut [f32],
    dst_row_stride: usize,
    accumulate: bool,
    lhs: MatRef<'_>,
    rhs: MatRef<'_>,
    scale: f32,
    threads: Threads,
) {
    let (m, k, n) = (lhs.rows, lhs.cols, rhs.cols);
    assert_eq!(rhs.rows, k, "inner dimensions differ");
    lhs.check();
    rhs.check();
    if m == 0 || n == 0 {
        return;
    }
    assert!((m - 1) * dst_row_stride + n <= dst.len(), "output reaches past its buffer");
    let parallelism = match threads {
        Threads::One => gemm::Parallelism::None,
        Threads::Pool(n) if n > 1 => gemm::Parallelism::Rayon(n),
        Threads::Pool(_) => gemm::Parallelism::None,
    };
    // SAFETY: every index the product touches was bounds-checked above
    // against its slice, the output does not alias the inputs (it is a
    // distinct &mut), and all strides are non-negative.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_row_stride as isize,
            accumulate,
            lhs.data.as_ptr(),
            lhs.col_stride as isize,
            lhs.row_stride as isize,
            rhs.data.as_ptr(),
            rhs.col_stride as isize,
            rhs.row_stride as isize,
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(lo: f64, hi: f64, n: usize) -> impl Iterator<Item = f32> {
        (0..=n).map(move |i| (lo + (hi - lo) * i as f64 / n as f64) as f32)
    }

    #[test]
    fn exp_is_within_a_few_ulps() {
        for x in grid(-80.0, 80.0, 200_000) {
            let want = (x as f64).exp();
            let got = exp(x) as f64;
            assert!(((got - want) / want).abs() < 4e-7, "exp({x}) = {got}, want {want}");
        }
        assert!(exp(-1000.0) < 1e-37 && exp(-1000.0) >= 0.0);
    }

    #[test]
    fn erf_is_within_a_few_ulps() {
        let mut worst = 0.0f64;
        for x in grid(-6.0, 6.0, 200_000) {
            let want = libm::erf(x as f64);
            let got = erf(x) as f64;
            worst = worst.max((got - want).abs());
        }
        assert!(worst < 1e-6, "erf max abs error {worst}");
    }

    #[test]
    fn gelu_matches_the_exact_formula() {
        let xs: Vec<f32> = grid(-10.0, 10.0, 10_007).collect();
        let mut got = xs.clone();
        gelu_erf_in_place(&mut got);
        for (x, g) in xs.iter().zip(&got) {
            let x = *x as f64;
            let want = 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2));
            assert!((*g as f64 - want).abs() < 2e-6 * (1.0 + want.abs()), "gelu({x}) = {g}, want {want}");
        }
    }

    #[test]
    fn softmax_rows_sum_to_one_and_match_f64() {
        // Unpadded rows, and rows whose stride leaves padding: the padding
        // holds values that would dominate the row if it were read.
        let row_len = 37;
        for (stride, scale) in [(37, 1.0f32), (48, 0.5), (64, 0.176_776_7)] {
            let original: Vec<f32> = (0..stride * 5)
                .map(|i| if i % stride < row_len { ((i * 7919) % 101) as f32 * 0.37 - 15.0 } else { 50.0 })
                .collect();
            let mut values = original.clone();
            softmax_rows_in_place(&mut values, stride, row_len, scale);
            for (row, orig) in values.chunks(stride).zip(original.chunks(stride)) {
                let (row, orig) = (&row[..row_len], &orig[..row_len]);
                let scaled: Vec<f64> = orig.iter().map(|&x| x as f64 * scale as f64).collect();
                let max = scaled.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
                let sum: f64 = scaled.iter().map(|&x| (x - max).exp()).sum();
                for (got, x) in row.iter().zip(&scaled) {
                    let want = (x - max).exp() / sum;
                    assert!((*got as f64 - want).abs() < 1e-6, "stride {stride}: softmax {got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn layer_norm_matches_f64() {
        let width = 384;
        let gamma: Vec<f32> = (0..width).map(|i| 0.5 + (i % 7) as f32 * 0.1).collect();
        let beta: Vec<f32> = (0..width).map(|i| (i % 5) as f32 * 0.01).collect();
        let mut values: Vec<f32> = (0..width * 3).map(|i| ((i * 31) % 97) as f32 * 0.1 + 3.0).collect();
        let original = values.clone();
        layer_norm_rows_in_place(&mut values, &gamma, &beta, 1e-12);
        for (row, orig) in values.chunks(width).zip(original.chunks(width)) {
            let mean = orig.iter().map(|&x| x as f64).sum::<f64>() / width as f64;
            let var = orig.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / width as f64;
            for i in 0..width {
                let want = (orig[i] as f64 - mean) / (var + 1e-12).sqrt() * gamma[i] as f64 + beta[i] as f64;
                assert!((row[i] as f64 - want).abs() < 1e-4, "layer norm {} vs {want}", row[i]);
            }
        }
    }

    #[test]
    fn strided_matmul_matches_naive_product() {
        // lhs: 5x3 view with row stride 4 (a column block of a wider buffer);
        // rhs: the transpose of a 7x3 buffer (row stride 1, column stride 3).
        let lhs_buf: Vec<f32> = (0..20).map(|i| i as f32 * 0.5 - 3.0).collect();
        let rhs_buf: Vec<f32> = (0..21).map(|i| (i % 5) as f32 - 1.5).collect();
        let lhs = MatRef { data: &lhs_buf, rows: 5, cols: 3, row_stride: 4, col_stride: 1 };
        let rhs = MatRef { data: &rhs_buf, rows: 3, cols: 7, row_stride: 1, col_stride: 3 };
        let mut dst = vec![1.0f32; 5 * 9];
        for threads in [Threads::One, Threads::Pool(2)] {
            dst.iter_mut().for_each(|x| *x = 1.0);
            matmul(&mut dst, 9, true, lhs, rhs, 0.25, threads);
            for i in 0..5 {
                for j in 0..9 {
                    let want = if j < 7 {
                        1.0 + 0.25 * (0..3).map(|p| lhs_buf[i * 4 + p] * rhs_buf[j * 3 + p]).sum::<f32>()
                    } else {
                        1.0
                    };
                    assert!((dst[i * 9 + j] - want).abs() < 1e-5, "({i},{j}): {} vs {want}", dst[i * 9 + j]);
                }
            }
        }
    }
}
