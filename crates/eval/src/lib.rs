//! Evaluation: datasets ([`trialgpt`] annotation rows), metric definitions
//! ([`metrics`]: accuracy, per-class precision/recall/F1, Cohen's kappa,
//! evidence-sentence scores, patient-level bootstrap; [`n2c2`]: the n2c2
//! 2018 met/not-met F1s; [`paper`]: the papers' own tables, MAKAR's
//! per-criterion accuracy and F1 with inclusion and exclusion apart and
//! Wornow et al.'s precision, recall and micro/macro F1, each beside the
//! always-NOT-MET and class-prevalence baselines), the GPT-4 reference row computed from the
//! annotations themselves, and [`run`]: storing the annotated notes and
//! grouping rows into patient-trial pairs for the batch runner;
//! [`correction`]: Evident's label correction fitted leave-one-patient-out;
//! [`threshold`]: Evident's threshold on P(MET), fitted leave-one-patient-out.

pub mod correction;
pub mod metrics;
pub mod n2c2;
pub mod paper;
pub mod run;
pub mod threshold;
pub mod trialgpt;

pub use metrics::{
    bootstrap_by_patient, criterion_metrics, paired_bootstrap_by_patient, CriterionMetrics, Interval, PairedDifference,
    Prediction,
};
pub use n2c2::{n2c2_metrics, N2c2Metrics, N2c2Pair};
pub use trialgpt::{load_annotations, AnnotationRow};

/// An evaluation input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{path}: cannot read: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: not in the expected format: {message}")]
    Format { path: String, message: String },
}

/// The headline figures with 95% bootstrap intervals over patients.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReportRow {
    pub metrics: CriterionMetrics,
    pub accuracy: Interval,
    pub accuracy_collapsed: Interval,
    pub kappa: Interval,
    pub evidence_f1: Interval,
}

/// Bootstrap replicates and seed used for every reported interval.
pub const BOOTSTRAP_REPLICATES: usize = 2000;
pub const BOOTSTRAP_SEED: u64 = 20_240_101;

/// Paired differences `a - b` on the same rows, 95% intervals by a paired
/// bootstrap over patients.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Comparison {
    pub accuracy: PairedDifference,
    pub accuracy_collapsed: PairedDifference,
    pub kappa: PairedDifference,
    pub evidence_f1: PairedDifference,
}

pub fn compare(a: &[Prediction], b: &[Prediction]) -> Comparison {
    let d = |f: fn(&CriterionMetrics) -> f64| {
        paired_bootstrap_by_patient(a, b, BOOTSTRAP_REPLICATES, BOOTSTRAP_SEED, |rows| f(&criterion_metrics(rows)))
    };
    Comparison {
        accuracy: d(|m| m.accuracy),
        accuracy_collapsed: d(|m| m.accuracy_collapsed),
        kappa: d(|m| m.kappa),
        evidence_f1: d(|m| m.evidence_f1),
    }
}

pub fn report_row(predictions: &[Prediction]) -> ReportRow {
    let b = |f: fn(&CriterionMetrics) -> f64| {
        bootstrap_by_patient(predictions, BOOTSTRAP_REPLICATES, BOOTSTRAP_SEED, |rows| f(&criterion_metrics(rows)))
    };
    ReportRow {
        metrics: criterion_metrics(predictions),
        accuracy: b(|m| m.accuracy),
        accuracy_collapsed: b(|m| m.accuracy_collapsed),
        kappa: b(|m| m.kappa),
        evidence_f1: b(|m| m.evidence_f1),
    }
}
