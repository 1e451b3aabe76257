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
pub fn wls(x: &[Vec<f64>], y: &[f64], w: Option<&[f64]>, tol: f64) -> Result<Wls, RankDeficient> {
    let n = y.len();
    let p = x.len();
    let sw: Option<Vec<f64>> = w.map(|w| w.iter().map(|v| v.sqrt()).collect());
    let mut a: Vec<Vec<f64>> = x
        .iter()
        .map(|col| match &sw {
            Some(s) => col.iter().zip(s).map(|(v, s)| v * s).collect(),
            None => col.clone(),
        })
        .collect();
    let mut b: Vec<f64> = match &sw {
        Some(s) => y.iter().zip(s).map(|(v, s)| v * s).collect(),
        None => y.to_vec(),
    };
    let orig_norm: Vec<f64> = a.iter().map(|c| norm(c)).collect();
    let mut r = vec![0.0; p * p];
    for j in 0..p {
        let (done, rest) = a.split_at_mut(j + 1);
        let v = &mut done[j];
        let nrm = norm(&v[j..]);
        if !(nrm > tol * orig_norm[j]) || nrm == 0.0 {
            return Err(RankDeficient(j));
        }
        let alpha = if v[j] > 0.0 { -nrm } else { nrm };
        v[j] -= alpha;
        let vnorm2 = dot(&v[j..], &v[j..]);
        for col in rest.iter_mut() {
            let s = 2.0 * dot(&v[j..], &col[j..]) / vnorm2;
            axpy(-s, &v[j..], &mut col[j..]);
        }
        let s = 2.0 * dot(&v[j..], &b[j..]) / vnorm2;
        axpy(-s, &v[j..], &mut b[j..]);
        r[j * p + j] = alpha;
        for (k, col) in rest.iter().enumerate() {
            r[j * p + j + 1 + k] = col[j];
        }
    }
    let _ = n;
    // Back-substitute R b = Q'y.
    let mut coef = vec![0.0; p];
    for j in (0..p).rev() {
        let mut s = b[j];
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

fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

fn norm(a: &[f64]) -> f64 {
    // Scaled to avoid overflow on huge columns.
    let scale = a.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    if scale == 0.0 {
        return 0.0;
    }
    scale * a.iter().map(|v| (v / scale).powi(2)).sum::<f64>().sqrt()
}
