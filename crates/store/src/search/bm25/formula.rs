//! BM25 as FTS5's `bm25()` computes it, defined once: the constants
//! k1 = 1.2 and b = 0.75, the IDF `ln((N - n + 0.5) / (n + 0.5))` floored at
//! 1e-6, and a term's contribution `idf * f * (k1 + 1) / (f + k1 * (1 - b +
//! b * length / average length))`, where a row's length counts the tokens
//! of its text and heading. The per-query scan ([`super::scan`]) and the
//! in-memory index ([`super::index`]) score with these functions only, so
//! their scores agree with each other and with FTS5 to the last bit that
//! the order of additions allows.

/// Term-frequency saturation.
pub(crate) const K1: f64 = 1.2;
/// Length normalisation.
pub(crate) const B: f64 = 0.75;

/// FTS5's IDF of a term found in `hits` of `rows` rows. Terms in more than
/// half the rows would get a negative IDF; FTS5 gives them 1e-6 instead,
/// so a match never lowers a score.
pub(crate) fn idf(rows: usize, hits: usize) -> f64 {
    let idf = ((rows as f64 - hits as f64 + 0.5) / (hits as f64 + 0.5)).ln();
    if idf <= 0.0 {
        1e-6
    } else {
        idf
    }
}

/// The average row length in tokens; 1 for an empty corpus (nothing is
/// scored then, but the index still computes its norms).
pub(crate) fn average_length(lengths: &[u32]) -> f64 {
    if lengths.is_empty() {
        return 1.0;
    }
    let tokens: u64 = lengths.iter().map(|&l| u64::from(l)).sum();
    tokens as f64 / lengths.len() as f64
}

/// The row's length normalisation, `k1 * (1 - b + b * length / average)`.
pub(crate) fn length_norm(length: u32, average_length: f64) -> f64 {
    K1 * (1.0 - B + B * f64::from(length) / average_length)
}

/// One query phrase's contribution to a row's score: its IDF times the
/// saturated frequency `f * (k1 + 1) / (f + norm)`, `norm` being the row's
/// [`length_norm`].
pub(crate) fn term_score(idf: f64, frequency: u32, norm: f64) -> f64 {
    let f = f64::from(frequency);
    idf * ((f * (K1 + 1.0)) / (f + norm))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The figures worked by hand from FTS5's formula (fts5_aux.c).
    #[test]
    fn idf_and_term_score_match_hand_computed_figures() {
        // 10 rows, 2 hits: ln(8.5 / 2.5).
        assert_eq!(idf(10, 2), (8.5f64 / 2.5).ln());
        // In more than half the rows: the floor.
        assert_eq!(idf(10, 6), 1e-6);
        assert_eq!(idf(3, 3), 1e-6);
        // A row of average length: norm = k1, score = idf * f * 2.2 / (f + 1.2).
        assert_eq!(length_norm(20, 20.0), 1.2);
        assert!((term_score(1.5, 2, 1.2) - 1.5 * 4.4 / 3.2).abs() < 1e-15);
        // Twice the average length: 1.2 * (0.25 + 1.5) = 2.1.
        assert!((length_norm(40, 20.0) - 2.1).abs() < 1e-15);
        assert_eq!(average_length(&[3, 4, 8]), 5.0);
        assert_eq!(average_length(&[]), 1.0);
    }
}
