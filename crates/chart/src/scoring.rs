//! Scoring answers against reference answers, and the statistics, as the
//! paper's "Scoring and concordance computation" defines them:
//!
//! - single-value items are binary after normalisation (the value taken
//!   from the two-line format, case, whitespace and formatting artefacts
//!   removed); "never administered" equals "not documented" when the
//!   record holds no such therapy;
//! - list items score entry-level F1; a list preceded by a status field
//!   scores 0 when the status is wrong, whatever the entries;
//! - per-question scores are averaged over runs first;
//! - concordance intervals and paired differences come from a cluster
//!   bootstrap over patients (whole patients resampled with all their
//!   questions), with the shift-to-null two-sided p-value and Bonferroni
//!   correction capped at 1.
//!
//! Pure functions; the bootstrap's random numbers come from a seeded
//! SplitMix64, so a result is reproducible from its seed.

use std::collections::BTreeMap;

use crate::answer::normalise_answer;

/// Answers that mean "the record holds no such therapy".
const NEVER_FORMS: &[&str] = &["never", "never administered", "never given", "not documented", "nd"];

/// A binary item: 1 when the normalised answer equals the reference.
/// `record_has_therapy` is false when the record holds no administration of
/// the therapy asked about, which makes "never" and "not documented" equal.
pub fn score_binary(answer: &str, reference: &str, record_has_therapy: bool) -> f64 {
    let (a, r) = (normalise_answer(answer), normalise_answer(reference));
    if a == r {
        return 1.0;
    }
    let never = |s: &str| NEVER_FORMS.contains(&s);
    if !record_has_therapy && never(&a) && never(&r) {
        return 1.0;
    }
    0.0
}

/// A list answer: an optional status before ':' and entries separated by
/// '|' (or ';' between parenthesised entries is kept inside the entry).
pub fn split_list(answer: &str) -> (Option<String>, Vec<String>) {
    let text = answer.trim();
    let (status, rest) = match text.split_once(':') {
        Some((s, r)) if !s.contains('|') && s.split_whitespace().count() <= 3 => (Some(normalise_answer(s)), r),
        _ => (None, text),
    };
    let entries: Vec<String> =
        rest.split('|').map(normalise_answer).map(|e| e.replace(' ', "")).filter(|e| !e.is_empty()).collect();
    // A bare status ("Never") is a status with no entries.
    if status.is_none() && entries.len() == 1 && NEVER_FORMS.contains(&normalise_answer(rest).as_str()) {
        return (Some(normalise_answer(rest)), vec![]);
    }
    (status, entries)
}

/// Entry-level F1 of a list answer against the reference list; a wrong
/// status scores 0. Two empty lists with the same status score 1.
pub fn score_list(answer: &str, reference: &str) -> f64 {
    let (a_status, a) = split_list(answer);
    let (r_status, r) = split_list(reference);
    if let (Some(x), Some(y)) = (&a_status, &r_status) {
        let both_never = NEVER_FORMS.contains(&x.as_str()) && NEVER_FORMS.contains(&y.as_str());
        if x != y && !both_never {
            return 0.0;
        }
    }
    if a.is_empty() && r.is_empty() {
        return 1.0;
    }
    if a.is_empty() || r.is_empty() {
        return 0.0;
    }
    let matched_a = a.iter().filter(|e| r.contains(e)).count() as f64;
    let matched_r = r.iter().filter(|e| a.contains(e)).count() as f64;
    let (precision, recall) = (matched_a / a.len() as f64, matched_r / r.len() as f64);
    if precision + recall == 0.0 {
        0.0
    } else {
        2.0 * precision * recall / (precision + recall)
    }
}

/// SplitMix64: small, seeded, good enough for resampling indices.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Per-question scores grouped by patient: patient -> scores (each already
/// the mean over runs).
pub type Clustered = BTreeMap<String, Vec<f64>>;

/// Mean over all questions.
pub fn concordance(scores: &Clustered) -> f64 {
    let (sum, n) = scores.values().flatten().fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        f64::NAN
    } else {
        sum / n as f64
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// A bootstrap estimate: the observed value and the 2.5th and 97.5th
/// percentiles of the resampled values.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Interval {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
}

/// Concordance with a cluster-bootstrap 95% interval over patients.
pub fn cluster_bootstrap(scores: &Clustered, resamples: usize, seed: u64) -> Interval {
    let patients: Vec<&Vec<f64>> = scores.values().collect();
    let mut rng = SplitMix64(seed);
    let mut stats: Vec<f64> = (0..resamples)
        .map(|_| {
            let (mut sum, mut n) = (0.0, 0usize);
            for _ in 0..patients.len() {
                let p = patients[rng.below(patients.len())];
                sum += p.iter().sum::<f64>();
                n += p.len();
            }
            sum / n.max(1) as f64
        })
        .collect();
    stats.sort_by(f64::total_cmp);
    Interval { estimate: concordance(scores), low: percentile(&stats, 0.025), high: percentile(&stats, 0.975) }
}

/// A paired difference A - B over the same questions.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PairedDifference {
    pub difference: Interval,
    /// Two-sided shift-to-null p-value: the share of resampled differences
    /// whose distance from their mean is at least the observed difference.
    pub p_value: f64,
    /// `p_value` times the number of comparisons, capped at 1.
    pub p_bonferroni: f64,
}

/// Paired cluster bootstrap of A - B; `a` and `b` hold the same patients
/// with the same questions in the same order.
pub fn paired_difference(
    a: &Clustered,
    b: &Clustered,
    resamples: usize,
    seed: u64,
    comparisons: usize,
) -> PairedDifference {
    let diffs: Clustered = a
        .iter()
        .map(|(p, xs)| {
            let ys = &b[p];
            assert_eq!(xs.len(), ys.len(), "patient {p} has different questions in the two methods");
            (p.clone(), xs.iter().zip(ys).map(|(x, y)| x - y).collect())
        })
        .collect();
    let patients: Vec<&Vec<f64>> = diffs.values().collect();
    let observed = concordance(&diffs);
    let mut rng = SplitMix64(seed);
    let mut stats: Vec<f64> = (0..resamples)
        .map(|_| {
            let (mut sum, mut n) = (0.0, 0usize);
            for _ in 0..patients.len() {
                let p = patients[rng.below(patients.len())];
                sum += p.iter().sum::<f64>();
                n += p.len();
            }
            sum / n.max(1) as f64
        })
        .collect();
    let mean = stats.iter().sum::<f64>() / stats.len() as f64;
    let extreme = stats.iter().filter(|s| (*s - mean).abs() >= observed.abs()).count();
    let p_value = extreme as f64 / stats.len() as f64;
    stats.sort_by(f64::total_cmp);
    PairedDifference {
        difference: Interval { estimate: observed, low: percentile(&stats, 0.025), high: percentile(&stats, 0.975) },
        p_value,
        p_bonferroni: (p_value * comparisons as f64).min(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_scoring_normalises_and_treats_never_as_not_documented_without_therapy() {
        assert_eq!(score_binary("**Yes**.", "yes", true), 1.0);
        assert_eq!(score_binary("No", "Not documented", false), 0.0);
        assert_eq!(score_binary("Never", "Not documented", false), 1.0);
        assert_eq!(score_binary("Never", "Not documented", true), 0.0);
    }

    #[test]
    fn list_f1_and_a_wrong_status_scores_zero() {
        let reference = "Administered: 2021-01-04–2021-06-30 | 2022-02-01–ongoing";
        assert_eq!(score_list(reference, reference), 1.0);
        // One of two entries: precision 1, recall 0.5, F1 2/3.
        let half = score_list("Administered: 2021-01-04–2021-06-30", reference);
        assert!((half - 2.0 / 3.0).abs() < 1e-12, "{half}");
        assert_eq!(score_list("Never", reference), 0.0);
        assert_eq!(score_list("Planned: 2021-01-04–2021-06-30 | 2022-02-01–ongoing", reference), 0.0);
        assert_eq!(score_list("Never", "Not documented"), 1.0);
    }

    fn clustered(rows: &[(&str, &[f64])]) -> Clustered {
        rows.iter().map(|(p, s)| (p.to_string(), s.to_vec())).collect()
    }

    #[test]
    fn the_cluster_bootstrap_resamples_whole_patients() {
        // Every patient scores the same: every resample gives the same mean.
        let same = clustered(&[("a", &[1.0, 0.0]), ("b", &[0.0, 1.0]), ("c", &[0.5, 0.5])]);
        let i = cluster_bootstrap(&same, 1000, 7);
        assert_eq!((i.estimate, i.low, i.high), (0.5, 0.5, 0.5));
        // Patients differ: the interval widens and holds the estimate.
        let mixed = clustered(&[("a", &[1.0, 1.0]), ("b", &[0.0, 0.0]), ("c", &[1.0, 0.0]), ("d", &[1.0, 1.0])]);
        let i = cluster_bootstrap(&mixed, 2000, 7);
        assert!(i.low < i.estimate && i.estimate < i.high, "{i:?}");
        assert_eq!(cluster_bootstrap(&mixed, 2000, 7), i, "same seed, same interval");
    }

    #[test]
    fn paired_differences_shift_to_null_and_bonferroni() {
        let a = clustered(&[("a", &[1.0, 1.0]), ("b", &[1.0, 1.0]), ("c", &[1.0, 0.0]), ("d", &[1.0, 1.0])]);
        let b = clustered(&[("a", &[0.0, 0.0]), ("b", &[0.0, 1.0]), ("c", &[0.0, 0.0]), ("d", &[0.0, 0.0])]);
        let d = paired_difference(&a, &b, 2000, 1, 6);
        assert!((d.difference.estimate - 0.75).abs() < 1e-12);
        assert!(d.p_value < 0.01, "{d:?}");
        assert!(d.p_bonferroni <= 1.0 && d.p_bonferroni >= d.p_value);
        // No difference at all: p = 1.
        let d = paired_difference(&a, &a, 500, 1, 6);
        assert_eq!((d.difference.estimate, d.p_value, d.p_bonferroni), (0.0, 1.0, 1.0));
    }
}
