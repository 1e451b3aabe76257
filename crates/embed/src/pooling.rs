//! Mean pooling and L2 normalisation, written to match
//! sentence-transformers' `Pooling(mean)` and `Normalize` modules:
//! the mean over the real (unpadded) tokens divides by `max(count, 1e-9)` and
//! normalisation divides by `max(norm, 1e-12)` (torch's `F.normalize`).

/// Mean of the `dimensions`-wide rows of `tokens` (one row per real
/// token: sequences are never padded, so every row counts).
pub(crate) fn mean_rows(tokens: &[f32], dimensions: usize) -> Vec<f32> {
    let mut sum = vec![0.0f32; dimensions];
    let mut count = 0.0f32;
    for token in tokens.chunks_exact(dimensions) {
        count += 1.0;
        for (s, x) in sum.iter_mut().zip(token) {
            *s += x;
        }
    }
    let denominator = count.max(1e-9);
    for s in &mut sum {
        *s /= denominator;
    }
    sum
}

/// Scales `v` to unit length in place (a zero vector stays zero).
pub(crate) fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    for x in v {
        *x /= norm;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_averages_rows() {
        let tokens = [1.0, 2.0, 3.0, 4.0, 5.0, 9.0];
        assert_eq!(mean_rows(&tokens, 2), vec![3.0, 5.0]);
        assert_eq!(mean_rows(&[], 2), vec![0.0, 0.0]);
    }

    #[test]
    fn normalise_gives_unit_length_and_keeps_zero() {
        let mut v = vec![3.0, 4.0];
        l2_normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut z = vec![0.0, 0.0];
        l2_normalize(&mut z);
        assert_eq!(z, vec![0.0, 0.0]);
    }
}
