//! The n2c2 2018 Track 1 metric definitions (as `criteria.json` in the
//! shared data states them): per criterion, the F1 of the "met" class and
//! of the "not met" class; "overall micro F1" is the mean of the two class
//! F1s computed on counts pooled over all criteria; "overall macro F1" is
//! the mean of the two class F1s per criterion, averaged over criteria.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::metrics::prf;

/// One patient x criterion judgement: gold and predicted "met".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct N2c2Pair {
    pub criterion_id: String,
    pub gold_met: bool,
    pub predicted_met: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct BinaryCounts {
    pub true_met: usize,
    pub false_met: usize,
    pub false_not_met: usize,
    pub true_not_met: usize,
}

impl BinaryCounts {
    fn add(&mut self, p: &N2c2Pair) {
        match (p.gold_met, p.predicted_met) {
            (true, true) => self.true_met += 1,
            (false, true) => self.false_met += 1,
            (true, false) => self.false_not_met += 1,
            (false, false) => self.true_not_met += 1,
        }
    }
    /// F1 of the "met" class.
    pub fn f1_met(&self) -> f64 {
        prf(self.true_met, self.true_met + self.false_met, self.true_met + self.false_not_met).2
    }
    /// F1 of the "not met" class.
    pub fn f1_not_met(&self) -> f64 {
        prf(self.true_not_met, self.true_not_met + self.false_not_met, self.true_not_met + self.false_met).2
    }
    pub fn mean_f1(&self) -> f64 {
        (self.f1_met() + self.f1_not_met()) / 2.0
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriterionF1 {
    pub counts: BinaryCounts,
    pub f1_met: f64,
    pub f1_not_met: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct N2c2Metrics {
    pub per_criterion: BTreeMap<String, CriterionF1>,
    pub overall_micro_f1: f64,
    pub overall_macro_f1: f64,
}

pub fn n2c2_metrics(pairs: &[N2c2Pair]) -> N2c2Metrics {
    let mut by: BTreeMap<String, BinaryCounts> = BTreeMap::new();
    let mut pooled = BinaryCounts::default();
    for p in pairs {
        by.entry(p.criterion_id.clone()).or_default().add(p);
        pooled.add(p);
    }
    let overall_macro_f1 =
        if by.is_empty() { 0.0 } else { by.values().map(BinaryCounts::mean_f1).sum::<f64>() / by.len() as f64 };
    N2c2Metrics {
        per_criterion: by
            .into_iter()
            .map(|(id, c)| (id, CriterionF1 { counts: c, f1_met: c.f1_met(), f1_not_met: c.f1_not_met() }))
            .collect(),
        overall_micro_f1: pooled.mean_f1(),
        overall_macro_f1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(c: &str, g: bool, p: bool) -> N2c2Pair {
        N2c2Pair { criterion_id: c.into(), gold_met: g, predicted_met: p }
    }

    #[test]
    fn hand_computed_two_criteria() {
        // A: tm=2, fm=1, fn=0, tn=1 -> met P=2/3 R=1 F1=0.8; not met P=1 R=1/2 F1=2/3.
        // B: tm=0, fm=0, fn=1, tn=3 -> met F1=0; not met P=3/4 R=1 F1=6/7.
        let pairs = [
            pair("A", true, true),
            pair("A", true, true),
            pair("A", false, true),
            pair("A", false, false),
            pair("B", true, false),
            pair("B", false, false),
            pair("B", false, false),
            pair("B", false, false),
        ];
        let m = n2c2_metrics(&pairs);
        let a = &m.per_criterion["A"];
        assert!((a.f1_met - 0.8).abs() < 1e-12 && (a.f1_not_met - 2.0 / 3.0).abs() < 1e-12);
        let b = &m.per_criterion["B"];
        assert!((b.f1_met - 0.0).abs() < 1e-12 && (b.f1_not_met - 6.0 / 7.0).abs() < 1e-12);
        let macro_f1 = ((0.8 + 2.0 / 3.0) / 2.0 + (0.0 + 6.0 / 7.0) / 2.0) / 2.0;
        assert!((m.overall_macro_f1 - macro_f1).abs() < 1e-12);
        // Pooled: tm=2, fm=1, fn=1, tn=4 -> met P=2/3 R=2/3 F1=2/3; not met P=4/5 R=4/5 F1=0.8.
        assert!((m.overall_micro_f1 - (2.0 / 3.0 + 0.8) / 2.0).abs() < 1e-12);
    }
}
