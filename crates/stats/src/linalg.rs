//! The dense linear algebra the estimators need, kept small and in-crate:
//! weighted least squares by Householder QR (as R's `lm`/`glm` use, with the
//! same 1e-7 rank tolerance), and Cholesky solve / inverse of a symmetric
//! positive-definite matrix (as `survival` uses for the Cox information).

/// A weighted least-squares solution.
#[derive(Debug, Clone)]
pub struct Wls {
    pub coef: Vec<f64>,
    /// (X'WX)^-1, row-major p x p.
    pub cov_unscaled: Vec<f64>,
}

/// Why a QR or Cholesky factorisation failed: the index of the first column
/// found to depend on the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankDeficient(pub usize);

/// Solves min || sqrt(w) (y - X b) || with X given as columns.
/// A column whose remaining norm after the previous reflections falls below
/// `tol` times its original norm is reported as linearly dependent (R's
/// `dqrdc2` criterion).
///
/// The QR is computed block by block (TSQR): each block of rows is stacked
/// under the current R and reduced with Householder reflections in a small
/// cache-resident buffer. This is the same factorisation as one Householder
/// pass over the whole matrix (R is unique up to signs) but touches each row
/// once, which is what makes million-row fits fast.
pub fn wls<C: AsRef<[f64]>>(x: &[C], y: &[f64], w: Option<&[f64]>, tol: f64) -> Result<Wls, RankDeficient> {
    const BLOCK: usize = 256;
    let n = y.len();
    let p = x.len();
    let width = p + 1;
    let rows = p + BLOCK;
    // Column-major block: column c occupies buf[c * rows .. (c + 1) * rows];
    // its first p entries hold the current R (and Q'y), the rest the new rows.
    let mut buf = vec![0.0; rows * width];
    let mut sumsq = vec![0.0; p];
    let mut sw = vec![0.0; BLOCK];
    let mut start = 0;
    while start < n {
        let m = BLOCK.min(n - start);
        for (r, s) in sw[..m].iter_mut().enumerate() {
            *s = w.map_or(1.0, |w| w[start + r].sqrt());
        }
        for c in 0..width {
            let src = if c < p { &x[c].as_ref()[start..start + m] } else { &y[start..start + m] };
            let dst = &mut buf[c * rows + p..c * rows + p + m];
            for ((d, v), s) in dst.iter_mut().zip(src).zip(&sw[..m]) {
                *d = v * s;
            }
            if c < p {
                sumsq[c] += dst.iter().map(|v| v * v).sum::<f64>();
            }
        }
        householder_cols(&mut buf, rows, p + m, width, p);
        // Rows below p are now the residual part: drop them.
        start += m;
    }
    let mut r = vec![0.0; p * p];
    let mut qty = vec![0.0; p];
    for i in 0..p {
        for j in i..p {
            r[i * p + j] = buf[j * rows + i];
        }
        qty[i] = buf[p * rows + i];
    }
    for j in 0..p {
        let orig = sumsq[j].sqrt();
        if !(r[j * p + j].abs() > tol * orig) || orig == 0.0 {
            return Err(RankDeficient(j));
        }
    }
    let mut coef = vec![0.0; p];
    for j in (0..p).rev() {
        let mut s = qty[j];
        for k in j + 1..p {
            s -= r[j * p + k] * coef[k];
        }
        coef[j] = s / r[j * p + j];
    }
    // R^-1 (upper triangular), then (R'R)^-1 = R^-1 R^-T.
    let mut rinv = vec![0.0; p * p];
    for j in 0..p {
        rinv[j * p + j] = 1.0 / r[j * p + j];
        for i in (0..j).rev() {
            let mut s = 0.0;
            for k in i + 1..=j {
                s += r[i * p + k] * rinv[k * p + j];
            }
            rinv[i * p + j] = -s / r[i * p + i];
        }
    }
    let mut cov = vec![0.0; p * p];
    for i in 0..p {
        for j in i..p {
            let mut s = 0.0;
            for k in j..p {
                s += rinv[i * p + k] * rinv[j * p + k];
            }
            cov[i * p + j] = s;
            cov[j * p + i] = s;
        }
    }
    Ok(Wls { coef, cov_unscaled: cov })
}

/// Householder QR in place of the first `p` columns of a column-major
/// buffer (column stride `stride`, `used` rows in use), applying the
/// reflections to all `width` columns. Rows j+1..p of column j are already
/// zero (they hold the previous R), so each reflection touches row j and the
/// new rows only.
fn householder_cols(buf: &mut [f64], stride: usize, used: usize, width: usize, p: usize) {
    let mut v = vec![0.0; used];
    for j in 0..p.min(used) {
        // Active rows: j, and p..used.
        let col = &buf[j * stride..j * stride + used];
        let scale = max_abs_lanes(&col[p..used]).max(col[j].abs());
        if scale == 0.0 {
            continue;
        }
        let inv_scale = 1.0 / scale;
        let nrm2 = (col[j] * inv_scale).powi(2) + sum_sq_scaled_lanes(&col[p..used], inv_scale);
        let nrm = scale * nrm2.sqrt();
        let alpha = if col[j] > 0.0 { -nrm } else { nrm };
        let vj = col[j] - alpha;
        v[p..used].copy_from_slice(&col[p..used]);
        let vnorm2 = vj * vj + dot_lanes(&v[p..used], &v[p..used]);
        if vnorm2 == 0.0 {
            continue;
        }
        for c in j + 1..width {
            let cc = &mut buf[c * stride..c * stride + used];
            let d = vj * cc[j] + dot_lanes(&v[p..used], &cc[p..used]);
            let f = 2.0 * d / vnorm2;
            cc[j] -= f * vj;
            for (t, vi) in cc[p..used].iter_mut().zip(&v[p..used]) {
                *t -= f * vi;
            }
        }
        let cj = &mut buf[j * stride..j * stride + used];
        cj[j] = alpha;
        cj[p..used].iter_mut().for_each(|t| *t = 0.0);
    }
}

/// Cholesky factorisation of a symmetric positive-definite row-major p x p
/// matrix in place (lower triangle holds L). A pivot below `tol` times the
/// original diagonal marks that column as dependent.
pub fn cholesky(m: &mut [f64], p: usize, tol: f64) -> Result<(), RankDeficient> {
    let diag: Vec<f64> = (0..p).map(|i| m[i * p + i]).collect();
    for j in 0..p {
        let mut s = m[j * p + j];
        for k in 0..j {
            s -= m[j * p + k] * m[j * p + k];
        }
        if !(s > tol * diag[j].abs()) {
            return Err(RankDeficient(j));
        }
        let l = s.sqrt();
        m[j * p + j] = l;
        for i in j + 1..p {
            let mut s = m[i * p + j];
            for k in 0..j {
                s -= m[i * p + k] * m[j * p + k];
            }
            m[i * p + j] = s / l;
        }
    }
    Ok(())
}

/// Solves (L L') x = b given the factor from [`cholesky`].
pub fn chol_solve(l: &[f64], p: usize, b: &[f64]) -> Vec<f64> {
    let mut y = b.to_vec();
    for i in 0..p {
        let mut s = y[i];
        for k in 0..i {
            s -= l[i * p + k] * y[k];
        }
        y[i] = s / l[i * p + i];
    }
    for i in (0..p).rev() {
        let mut s = y[i];
        for k in i + 1..p {
            s -= l[k * p + i] * y[k];
        }
        y[i] = s / l[i * p + i];
    }
    y
}

/// Inverse of a symmetric positive-definite matrix from its Cholesky factor.
pub fn chol_inverse(l: &[f64], p: usize) -> Vec<f64> {
    let mut inv = vec![0.0; p * p];
    for j in 0..p {
        let mut e = vec![0.0; p];
        e[j] = 1.0;
        let col = chol_solve(l, p, &e);
        for i in 0..p {
            inv[i * p + j] = col[i];
        }
    }
    inv
}

/// Inverse of a small symmetric positive-definite matrix.
pub fn spd_inverse(m: &[f64], p: usize, tol: f64) -> Result<Vec<f64>, RankDeficient> {
    let mut l = m.to_vec();
    cholesky(&mut l, p, tol)?;
    Ok(chol_inverse(&l, p))
}

pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Dot product with eight independent partial sums, which the compiler
/// turns into vector instructions (a plain `sum` is one serial chain of
/// additions, four times slower on long vectors).
#[inline]
pub(crate) fn dot_lanes(a: &[f64], b: &[f64]) -> f64 {
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let tail: f64 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    let mut acc = [0.0; 8];
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// sum (a_i s)^2 with eight independent partial sums.
fn sum_sq_scaled_lanes(a: &[f64], s: f64) -> f64 {
    let ca = a.chunks_exact(8);
    let tail: f64 = ca.remainder().iter().map(|x| (x * s) * (x * s)).sum();
    let mut acc = [0.0; 8];
    for x in ca {
        for l in 0..8 {
            let t = x[l] * s;
            acc[l] += t * t;
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// max |a_i| (0 for an empty slice) with eight independent maxima.
fn max_abs_lanes(a: &[f64]) -> f64 {
    let ca = a.chunks_exact(8);
    let tail = ca.remainder().iter().fold(0.0_f64, |m, x| m.max(x.abs()));
    let mut acc = [0.0_f64; 8];
    for x in ca {
        for l in 0..8 {
            let t = x[l].abs();
            acc[l] = if t > acc[l] { t } else { acc[l] };
        }
    }
    acc.iter().fold(tail, |m, x| m.max(*x))
}
