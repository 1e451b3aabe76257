//! The structured outputs of the typed statistics tools, stored with the
//! step that produced them (in `steps.jsonl`, so a resumed run keeps them)
//! and drawn by the study report: regression tables become forest plots,
//! Kaplan-Meier analyses become survival curves. The agent reads the text
//! observation; these are the same numbers, kept as data.
//!
//! Numbers that are not finite (an estimate a degenerate fit could not
//! give) are written as JSON `null` and read back as NaN, so a stored step
//! always reads back.

use serde::{Deserialize, Deserializer, Serialize};

use evident_stats::survival::KmCurve;

fn finite_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

fn finite_or_nan_vec<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    Ok(Vec::<Option<f64>>::deserialize(d)?.into_iter().map(|v| v.unwrap_or(f64::NAN)).collect())
}

/// One term of a fitted regression, on the ratio scale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectRow {
    pub term: String,
    #[serde(deserialize_with = "finite_or_nan")]
    pub ratio: f64,
    #[serde(deserialize_with = "finite_or_nan")]
    pub conf_low: f64,
    #[serde(deserialize_with = "finite_or_nan")]
    pub conf_high: f64,
    #[serde(deserialize_with = "finite_or_nan")]
    pub p_value: f64,
}

/// One group's Kaplan-Meier curve (the steps `survfit` reports).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KmGroup {
    #[serde(deserialize_with = "finite_or_nan")]
    pub group: f64,
    pub n: usize,
    pub events: usize,
    #[serde(deserialize_with = "finite_or_nan_vec")]
    pub time: Vec<f64>,
    #[serde(deserialize_with = "finite_or_nan_vec")]
    pub surv: Vec<f64>,
    #[serde(deserialize_with = "finite_or_nan_vec")]
    pub n_risk: Vec<f64>,
    #[serde(deserialize_with = "finite_or_nan_vec")]
    pub n_event: Vec<f64>,
    #[serde(deserialize_with = "finite_or_nan_vec")]
    pub n_censor: Vec<f64>,
}

impl KmGroup {
    pub fn from_curve(c: &KmCurve) -> KmGroup {
        KmGroup {
            group: c.group,
            n: c.n,
            events: c.events,
            time: c.time.clone(),
            surv: c.surv.clone(),
            n_risk: c.n_risk.clone(),
            n_event: c.n_event.clone(),
            n_censor: c.n_censor.clone(),
        }
    }

    /// The curve as `evident_stats::svg` draws it (no confidence band).
    pub fn to_curve(&self) -> KmCurve {
        let nan = vec![f64::NAN; self.time.len()];
        KmCurve {
            group: self.group,
            n: self.n,
            events: self.events,
            time: self.time.clone(),
            n_risk: self.n_risk.clone(),
            n_event: self.n_event.clone(),
            n_censor: self.n_censor.clone(),
            surv: self.surv.clone(),
            std_err: nan.clone(),
            lower: nan.clone(),
            upper: nan,
            median: f64::NAN,
            median_lower: f64::NAN,
            median_upper: f64::NAN,
        }
    }
}

/// What one typed statistics tool computed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AnalysisOutput {
    /// Logistic (odds ratios) or Cox (hazard ratios) regression.
    Regression {
        /// The tool, e.g. `cox_regression`.
        tool: String,
        /// What the ratios are, e.g. "hazard ratio (Efron ties)".
        effect: String,
        file: String,
        n: usize,
        terms: Vec<EffectRow>,
    },
    /// Kaplan-Meier curves by group and the log-rank test between them.
    KaplanMeier {
        file: String,
        time: String,
        event: String,
        group: String,
        curves: Vec<KmGroup>,
        #[serde(deserialize_with = "finite_or_nan")]
        chi_square: f64,
        df: usize,
        #[serde(deserialize_with = "finite_or_nan")]
        p_value: f64,
    },
    /// ROC AUC with DeLong's interval.
    RocAuc {
        file: String,
        outcome: String,
        predictor: String,
        #[serde(deserialize_with = "finite_or_nan")]
        auc: f64,
        #[serde(deserialize_with = "finite_or_nan")]
        conf_low: f64,
        #[serde(deserialize_with = "finite_or_nan")]
        conf_high: f64,
        cases: usize,
        controls: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_numbers_read_back_as_nan() {
        let out = AnalysisOutput::Regression {
            tool: "logistic_regression".into(),
            effect: "odds ratio".into(),
            file: "c.csv".into(),
            n: 3,
            terms: vec![EffectRow {
                term: "x".into(),
                ratio: f64::INFINITY,
                conf_low: 1.0,
                conf_high: f64::NAN,
                p_value: 0.5,
            }],
        };
        let text = serde_json::to_string(&out).unwrap();
        assert!(text.contains("\"ratio\":null"), "{text}");
        let back: AnalysisOutput = serde_json::from_str(&text).unwrap();
        let AnalysisOutput::Regression { terms, .. } = back else { panic!("{text}") };
        assert!(terms[0].ratio.is_nan() && terms[0].conf_high.is_nan());
        assert_eq!(terms[0].p_value, 0.5);
    }
}
