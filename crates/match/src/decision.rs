//! Decisions: the per-criterion labels (MET / NOT MET / NOT ENOUGH
//! INFORMATION / NOT APPLICABLE) and their TrialGPT wording per criterion
//! type; the per-criterion result with its cited sentences; note-level
//! pooling (Wornow et al. Table S1); trial-level eligibility; TrialGPT's
//! matching score and rankings.
//!
//! Polarity: a decision always says whether the patient *meets the text of
//! the criterion*. For an exclusion, MET means the patient is excluded.
//!
//! TrialGPT's matching score, as in `trialgpt_ranking/rank_results.py`
//! (`get_matching_score`): `included / (included + not_included +
//! not_enough_information)` over the inclusion criteria ("not applicable"
//! is left out of the denominator; 0 when the denominator is 0), minus 1 if
//! any inclusion is "not included", minus 1 if any exclusion is "excluded".
//! Range [-2, 1]. Failed decisions count in none of the terms.

use std::collections::BTreeMap;

use chrono::{Months, NaiveDateTime};
use serde::{Deserialize, Serialize};

use crate::criteria::{CriteriaSet, CriterionType, Pooling};

/// Whether the patient meets the text of a criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Decision {
    #[serde(rename = "MET")]
    Met,
    #[serde(rename = "NOT MET")]
    NotMet,
    #[serde(rename = "NOT ENOUGH INFORMATION")]
    NotEnoughInformation,
    #[serde(rename = "NOT APPLICABLE")]
    NotApplicable,
}

impl Decision {
    pub const ALL: [Decision; 4] =
        [Decision::Met, Decision::NotMet, Decision::NotEnoughInformation, Decision::NotApplicable];

    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Met => "MET",
            Decision::NotMet => "NOT MET",
            Decision::NotEnoughInformation => "NOT ENOUGH INFORMATION",
            Decision::NotApplicable => "NOT APPLICABLE",
        }
    }

    pub fn parse(text: &str) -> Option<Decision> {
        Decision::ALL.into_iter().find(|d| d.as_str().eq_ignore_ascii_case(text.trim()))
    }

    /// TrialGPT's wording: inclusion -> included / not included, exclusion ->
    /// excluded / not excluded; both share "not enough information" and
    /// "not applicable".
    pub fn trialgpt_label(self, criterion_type: CriterionType) -> &'static str {
        match (self, criterion_type) {
            (Decision::Met, CriterionType::Inclusion) => "included",
            (Decision::NotMet, CriterionType::Inclusion) => "not included",
            (Decision::Met, CriterionType::Exclusion) => "excluded",
            (Decision::NotMet, CriterionType::Exclusion) => "not excluded",
            (Decision::NotEnoughInformation, _) => "not enough information",
            (Decision::NotApplicable, _) => "not applicable",
        }
    }

    /// Reads a TrialGPT label for a criterion of the given type. A label of
    /// the other type's wording ("excluded" for an inclusion) is refused.
    pub fn from_trialgpt_label(label: &str, criterion_type: CriterionType) -> Option<Decision> {
        let label = label.trim().to_ascii_lowercase();
        Decision::ALL.into_iter().find(|d| d.trialgpt_label(criterion_type) == label)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

/// One sentence of a patient's record: the document and the sentence's
/// ordinal within it (as stored by `evident_store`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SentenceRef {
    pub document_id: String,
    pub ordinal: i64,
}

/// The model's assessment of one criterion, as parsed from valid output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    pub medications_and_supplements: Vec<String>,
    pub rationale: String,
    pub decision: Decision,
    pub confidence: Confidence,
    /// The sentences the model relied on, in the order it cited them.
    pub evidence: Vec<SentenceRef>,
}

/// Why there is no assessment: the model's answer never validated (after
/// repair), or the call itself failed. Never replaced by a guess.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionFailure {
    pub errors: Vec<String>,
    /// The last answer exactly as the model wrote it (empty when the call failed).
    pub raw_text: String,
}

/// The outcome for one criterion of one patient (or one note, before pooling).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionResult {
    pub criterion_id: String,
    pub criterion_type: CriterionType,
    /// The note assessed, for note-level (ACIN/ICIN) results; `None` when
    /// the whole record was assessed or after pooling.
    #[serde(default)]
    pub document_id: Option<String>,
    /// The date of that note (most_recent pooling uses it).
    #[serde(default)]
    pub document_date: Option<NaiveDateTime>,
    pub outcome: Determination,
    /// Citations that do not resolve to a sentence of the record (or of the
    /// text the model was shown). Non-empty means the decision is flagged.
    #[serde(default)]
    pub unresolved_citations: Vec<String>,
}

/// What became of one criterion: assessed (a decision with its evidence),
/// or failed (the model's answer never validated; stored with its raw text
/// and counted as neither met nor not met).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Determination {
    Assessed(Assessment),
    Failed(DecisionFailure),
}

impl Determination {
    /// The assessment, unless the decision failed.
    pub fn assessment(&self) -> Option<&Assessment> {
        match self {
            Determination::Assessed(a) => Some(a),
            Determination::Failed(_) => None,
        }
    }
}

impl CriterionResult {
    pub fn decision(&self) -> Option<Decision> {
        match &self.outcome {
            Determination::Assessed(a) => Some(a.decision),
            Determination::Failed(_) => None,
        }
    }

    pub fn is_flagged(&self) -> bool {
        !self.unresolved_citations.is_empty()
    }

    /// TrialGPT wording, or "failed".
    pub fn label(&self) -> &'static str {
        self.decision().map_or("failed", |d| d.trialgpt_label(self.criterion_type))
    }
}

/// Pools note-level results for one criterion into one patient-level result
/// (Wornow et al. Appendix C, Table S1), on the decisions' order
/// MET > NOT ENOUGH INFORMATION > NOT MET for `max` and the reverse for
/// `min`; NOT APPLICABLE counts only when every note says so. `most_recent`
/// takes the most recent dated note within `window_months` before
/// `reference` (the latest note date when `None`); with no dated note in the
/// window the result is NOT ENOUGH INFORMATION.
///
/// The pooled result keeps the chosen note's rationale and confidence and
/// the union of all citations of the notes that agree with it. Failed notes
/// are skipped; if every note failed, the first failure is returned.
pub fn pool(
    notes: &[CriterionResult],
    pooling: Pooling,
    window_months: Option<u32>,
    reference: Option<NaiveDateTime>,
) -> Option<CriterionResult> {
    let first = notes.first()?;
    let assessed: Vec<&CriterionResult> = notes.iter().filter(|n| n.decision().is_some()).collect();
    if assessed.is_empty() {
        let mut failed = first.clone();
        failed.document_id = None;
        failed.document_date = None;
        return Some(failed);
    }
    let rank_max = |d: Decision| match d {
        Decision::Met => 3,
        Decision::NotEnoughInformation => 2,
        Decision::NotMet => 1,
        Decision::NotApplicable => 0,
    };
    let rank_min = |d: Decision| match d {
        Decision::NotMet => 3,
        Decision::NotEnoughInformation => 2,
        Decision::Met => 1,
        Decision::NotApplicable => 0,
    };
    let chosen: Option<&CriterionResult> = match pooling {
        Pooling::Max => assessed
            .iter()
            .copied()
            .max_by_key(|n| (rank_max(n.decision().unwrap()), std::cmp::Reverse(n.document_date))),
        Pooling::Min => assessed
            .iter()
            .copied()
            .max_by_key(|n| (rank_min(n.decision().unwrap()), std::cmp::Reverse(n.document_date))),
        Pooling::MostRecent => {
            let reference = reference.or_else(|| assessed.iter().filter_map(|n| n.document_date).max());
            let start = match (reference, window_months) {
                (Some(r), Some(m)) => r.checked_sub_months(Months::new(m)),
                _ => None,
            };
            assessed
                .iter()
                .copied()
                .filter(|n| match (n.document_date, start, reference) {
                    (Some(d), Some(s), Some(r)) => d >= s && d <= r,
                    (Some(d), None, Some(r)) => d <= r,
                    _ => false,
                })
                .max_by_key(|n| n.document_date)
        }
    };
    let mut pooled = match chosen {
        Some(c) => (*c).clone(),
        None => CriterionResult {
            criterion_id: first.criterion_id.clone(),
            criterion_type: first.criterion_type,
            document_id: None,
            document_date: None,
            outcome: Determination::Assessed(Assessment {
                medications_and_supplements: Vec::new(),
                rationale: format!(
                    "No dated note within the {} month window; the notes cannot settle this criterion.",
                    window_months.unwrap_or(0)
                ),
                decision: Decision::NotEnoughInformation,
                confidence: Confidence::Low,
                evidence: Vec::new(),
            }),
            unresolved_citations: Vec::new(),
        },
    };
    if let (Determination::Assessed(a), Some(decision)) = (&mut pooled.outcome, chosen.and_then(|c| c.decision())) {
        if pooling != Pooling::MostRecent {
            for n in &assessed {
                if n.decision() == Some(decision) {
                    if let Determination::Assessed(other) = &n.outcome {
                        for e in &other.evidence {
                            if !a.evidence.contains(e) {
                                a.evidence.push(e.clone());
                            }
                        }
                    }
                }
            }
        }
    }
    // Flags of the pooled notes stay visible.
    pooled.unresolved_citations = notes.iter().flat_map(|n| n.unresolved_citations.iter().cloned()).collect();
    pooled.document_id = None;
    pooled.document_date = None;
    Some(pooled)
}

/// A patient's standing for one trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Eligibility {
    /// Every inclusion MET (or not applicable), no exclusion MET, nothing unknown.
    Eligible,
    /// No criterion rules the patient out, but some are NOT ENOUGH
    /// INFORMATION or failed: a reviewer must look.
    NeedsReview,
    /// Some inclusion criterion is NOT MET (and no exclusion is MET).
    NotEligible,
    /// Some exclusion criterion is MET.
    Excluded,
}

/// Counts of labels for one patient and trial, by criterion type.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelCounts {
    pub included: usize,
    pub not_included: usize,
    pub inclusion_unknown: usize,
    pub inclusion_not_applicable: usize,
    pub excluded: usize,
    pub not_excluded: usize,
    pub exclusion_unknown: usize,
    pub exclusion_not_applicable: usize,
    /// Decisions that failed (no valid model answer).
    pub failed: usize,
    /// Decisions with unresolved citations.
    pub flagged: usize,
}

/// A patient's trial-level summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialVerdict {
    pub eligibility: Eligibility,
    pub counts: LabelCounts,
    /// TrialGPT's matching score (see the module documentation).
    pub matching_score: f64,
}

/// Counts the labels of patient-level results (one per criterion).
pub fn count_labels(results: &[CriterionResult]) -> LabelCounts {
    let mut c = LabelCounts::default();
    for r in results {
        if r.is_flagged() {
            c.flagged += 1;
        }
        match (r.criterion_type, r.decision()) {
            (_, None) => c.failed += 1,
            (CriterionType::Inclusion, Some(Decision::Met)) => c.included += 1,
            (CriterionType::Inclusion, Some(Decision::NotMet)) => c.not_included += 1,
            (CriterionType::Inclusion, Some(Decision::NotEnoughInformation)) => c.inclusion_unknown += 1,
            (CriterionType::Inclusion, Some(Decision::NotApplicable)) => c.inclusion_not_applicable += 1,
            (CriterionType::Exclusion, Some(Decision::Met)) => c.excluded += 1,
            (CriterionType::Exclusion, Some(Decision::NotMet)) => c.not_excluded += 1,
            (CriterionType::Exclusion, Some(Decision::NotEnoughInformation)) => c.exclusion_unknown += 1,
            (CriterionType::Exclusion, Some(Decision::NotApplicable)) => c.exclusion_not_applicable += 1,
        }
    }
    c
}

/// TrialGPT's matching score from label counts.
pub fn matching_score(c: &LabelCounts) -> f64 {
    let denominator = c.included + c.not_included + c.inclusion_unknown;
    let mut score = if denominator == 0 { 0.0 } else { c.included as f64 / denominator as f64 };
    if c.not_included > 0 {
        score -= 1.0;
    }
    if c.excluded > 0 {
        score -= 1.0;
    }
    score
}

/// Trial-level eligibility and score from patient-level results. A
/// criterion of `set` with no result counts as failed (not decided).
pub fn trial_verdict(set: &CriteriaSet, results: &[CriterionResult]) -> TrialVerdict {
    let mut counts = count_labels(results);
    let missing = set.criteria.iter().filter(|c| !results.iter().any(|r| r.criterion_id == c.id)).count();
    counts.failed += missing;
    let eligibility = if counts.excluded > 0 {
        Eligibility::Excluded
    } else if counts.not_included > 0 {
        Eligibility::NotEligible
    } else if counts.inclusion_unknown + counts.exclusion_unknown + counts.failed > 0 {
        Eligibility::NeedsReview
    } else {
        Eligibility::Eligible
    };
    TrialVerdict { eligibility, matching_score: matching_score(&counts), counts }
}

/// Orders (id, verdict) pairs best first: eligibility (eligible, needs
/// review, not eligible, excluded), then matching score descending, then id.
/// Used both to rank patients for a trial and trials for a patient.
pub fn rank(items: &mut [(String, &TrialVerdict)]) {
    items.sort_by(|(ia, a), (ib, b)| {
        a.eligibility.cmp(&b.eligibility).then(b.matching_score.total_cmp(&a.matching_score)).then(ia.cmp(ib))
    });
}

/// Groups results by patient and trial: `(patient, trial) -> results`.
pub type ResultTable = BTreeMap<(String, String), Vec<CriterionResult>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::criteria::Criterion;

    fn result(id: &str, ty: CriterionType, d: Decision) -> CriterionResult {
        CriterionResult {
            criterion_id: id.into(),
            criterion_type: ty,
            document_id: None,
            document_date: None,
            outcome: Determination::Assessed(Assessment {
                medications_and_supplements: vec![],
                rationale: format!("{id} {}", d.as_str()),
                decision: d,
                confidence: Confidence::High,
                evidence: vec![],
            }),
            unresolved_citations: vec![],
        }
    }

    fn note(d: Decision, date: &str, doc: &str, ordinal: i64) -> CriterionResult {
        let mut r = result("C", CriterionType::Inclusion, d);
        r.document_id = Some(doc.into());
        r.document_date =
            Some(chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").unwrap().and_hms_opt(0, 0, 0).unwrap());
        if let Determination::Assessed(a) = &mut r.outcome {
            a.evidence.push(SentenceRef { document_id: doc.into(), ordinal });
        }
        r
    }

    fn set(criteria: &[(&str, CriterionType)]) -> CriteriaSet {
        CriteriaSet {
            trial_id: "T".into(),
            title: String::new(),
            source: None,
            criteria: criteria
                .iter()
                .map(|(id, ty)| Criterion {
                    id: id.to_string(),
                    criterion_type: *ty,
                    text: "x".into(),
                    refined: None,
                    pooling: None,
                    window_months: None,
                    structured: None,
                    check: None,
                })
                .collect(),
        }
    }

    use CriterionType::{Exclusion as Exc, Inclusion as Inc};
    use Decision::*;

    #[test]
    fn trialgpt_wording_round_trips_per_type() {
        for d in Decision::ALL {
            for ty in [Inc, Exc] {
                assert_eq!(Decision::from_trialgpt_label(d.trialgpt_label(ty), ty), Some(d));
            }
        }
        assert_eq!(Met.trialgpt_label(Exc), "excluded");
        assert_eq!(NotMet.trialgpt_label(Exc), "not excluded");
        assert_eq!(Decision::from_trialgpt_label("excluded", Inc), None);
        assert_eq!(Decision::from_trialgpt_label("Not Included", Inc), Some(NotMet));
        assert_eq!(serde_json::to_string(&NotEnoughInformation).unwrap(), "\"NOT ENOUGH INFORMATION\"");
    }

    #[test]
    fn meeting_an_exclusion_excludes_the_patient() {
        let s = set(&[("i1", Inc), ("e1", Exc)]);
        let v = trial_verdict(&s, &[result("i1", Inc, Met), result("e1", Exc, Met)]);
        assert_eq!(v.eligibility, Eligibility::Excluded);
        assert_eq!(v.matching_score, 0.0); // 1/1 - 1
                                           // Not meeting the exclusion is what an eligible patient needs.
        let v = trial_verdict(&s, &[result("i1", Inc, Met), result("e1", Exc, NotMet)]);
        assert_eq!(v.eligibility, Eligibility::Eligible);
        assert_eq!(v.matching_score, 1.0);
        // An exclusion MET wins over an inclusion NOT MET.
        let v = trial_verdict(&s, &[result("i1", Inc, NotMet), result("e1", Exc, Met)]);
        assert_eq!(v.eligibility, Eligibility::Excluded);
        assert_eq!(v.matching_score, -2.0);
    }

    #[test]
    fn unknowns_and_failures_need_review_and_missing_counts_as_failed() {
        let s = set(&[("i1", Inc), ("i2", Inc), ("e1", Exc)]);
        let v = trial_verdict(
            &s,
            &[result("i1", Inc, Met), result("i2", Inc, NotEnoughInformation), result("e1", Exc, NotMet)],
        );
        assert_eq!(v.eligibility, Eligibility::NeedsReview);
        assert_eq!(v.matching_score, 0.5);
        let v = trial_verdict(&s, &[result("i1", Inc, Met), result("i2", Inc, Met)]);
        assert_eq!((v.eligibility, v.counts.failed), (Eligibility::NeedsReview, 1));
        let v = trial_verdict(
            &s,
            &[result("i1", Inc, Met), result("i2", Inc, NotMet), result("e1", Exc, NotEnoughInformation)],
        );
        assert_eq!(v.eligibility, Eligibility::NotEligible);
        assert_eq!(v.matching_score, 0.5 - 1.0);
    }

    #[test]
    fn not_applicable_is_out_of_the_denominator() {
        let c = count_labels(&[
            result("a", Inc, Met),
            result("b", Inc, NotApplicable),
            result("c", Inc, NotEnoughInformation),
            result("d", Inc, NotEnoughInformation),
        ]);
        assert!((matching_score(&c) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(matching_score(&LabelCounts::default()), 0.0);
    }

    #[test]
    fn ranking_orders_by_eligibility_then_score() {
        let a =
            TrialVerdict { eligibility: Eligibility::NeedsReview, counts: LabelCounts::default(), matching_score: 0.9 };
        let b =
            TrialVerdict { eligibility: Eligibility::Eligible, counts: LabelCounts::default(), matching_score: 1.0 };
        let c =
            TrialVerdict { eligibility: Eligibility::NeedsReview, counts: LabelCounts::default(), matching_score: 0.5 };
        let d =
            TrialVerdict { eligibility: Eligibility::Excluded, counts: LabelCounts::default(), matching_score: 0.0 };
        let mut items =
            vec![("d".to_string(), &d), ("c".to_string(), &c), ("a".to_string(), &a), ("b".to_string(), &b)];
        rank(&mut items);
        let order: Vec<_> = items.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(order, ["b", "a", "c", "d"]);
    }

    #[test]
    fn max_pooling_any_met_wins_and_unions_agreeing_evidence() {
        let notes =
            [note(NotMet, "2020-01-01", "d1", 1), note(Met, "2020-02-01", "d2", 2), note(Met, "2021-01-01", "d3", 3)];
        let p = pool(&notes, Pooling::Max, None, None).unwrap();
        assert_eq!(p.decision(), Some(Met));
        let Determination::Assessed(a) = &p.outcome else { panic!() };
        let docs: Vec<_> = a.evidence.iter().map(|e| e.document_id.as_str()).collect();
        assert_eq!(docs, ["d2", "d3"]);
        let notes = [note(NotMet, "2020-01-01", "d1", 1), note(NotEnoughInformation, "2020-02-01", "d2", 2)];
        assert_eq!(pool(&notes, Pooling::Max, None, None).unwrap().decision(), Some(NotEnoughInformation));
    }

    #[test]
    fn min_pooling_one_not_met_wins() {
        let notes =
            [note(Met, "2020-01-01", "d1", 1), note(NotMet, "2020-02-01", "d2", 2), note(Met, "2021-01-01", "d3", 3)];
        assert_eq!(pool(&notes, Pooling::Min, None, None).unwrap().decision(), Some(NotMet));
        let all_met = [note(Met, "2020-01-01", "d1", 1), note(Met, "2020-02-01", "d2", 2)];
        assert_eq!(pool(&all_met, Pooling::Min, None, None).unwrap().decision(), Some(Met));
    }

    #[test]
    fn most_recent_pooling_uses_the_latest_note_in_the_window() {
        // MI-6MOS: an MI 2 years ago (MET then) but the latest note says NOT MET.
        let notes =
            [note(Met, "2019-01-01", "d1", 1), note(NotMet, "2021-01-01", "d2", 2), note(Met, "2020-12-01", "d3", 3)];
        let p = pool(&notes, Pooling::MostRecent, Some(6), None).unwrap();
        assert_eq!(p.decision(), Some(NotMet));
        // Reference date after every note: nothing in the window.
        let reference = chrono::NaiveDate::from_ymd_opt(2023, 1, 1).unwrap().and_hms_opt(0, 0, 0);
        let p = pool(&notes, Pooling::MostRecent, Some(6), reference).unwrap();
        assert_eq!(p.decision(), Some(NotEnoughInformation));
        // A reference date earlier than the last note picks the note before it.
        let reference = chrono::NaiveDate::from_ymd_opt(2020, 12, 15).unwrap().and_hms_opt(0, 0, 0);
        assert_eq!(pool(&notes, Pooling::MostRecent, Some(6), reference).unwrap().decision(), Some(Met));
    }

    #[test]
    fn failed_notes_are_skipped_and_all_failed_stays_failed() {
        let mut failed = note(Met, "2022-01-01", "d9", 1);
        failed.outcome =
            Determination::Failed(DecisionFailure { errors: vec!["not JSON".into()], raw_text: "oops".into() });
        let notes = [failed.clone(), note(NotMet, "2020-01-01", "d1", 1)];
        assert_eq!(pool(&notes, Pooling::Max, None, None).unwrap().decision(), Some(NotMet));
        let p = pool(&[failed], Pooling::Max, None, None).unwrap();
        assert!(matches!(p.outcome, Determination::Failed(_)));
        assert_eq!(p.label(), "failed");
    }
}
