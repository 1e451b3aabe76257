//! Evident's reader (`typed-read`) on the five development tasks: given
//! the results the typed tools name as they do in a run, with R's
//! reference numbers (each task's gold.json), every choice question reads
//! as R's reference answer; a result whose reading disagrees with another
//! relevant one, or a significant log-rank test (no direction), leaves the
//! choice to the model.

use std::path::Path;

use evident_rwe::provenance::{ResultNumber, ResultValue};
use evident_rwe::reading::{read_choice, Reading};
use evident_rwe::{Gold, Task};

fn dev(id: &str) -> (Task, Gold) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks").join(id);
    let task = Task::load(&dir.join("task.yaml")).unwrap().task;
    let gold = Gold::load(&dir.join("gold.json"), &task).unwrap();
    (task, gold)
}

fn effect(key: &str, effect: &str, ratio: f64, lo: f64, hi: f64, p: f64) -> ResultNumber {
    ResultNumber {
        key: key.into(),
        step: 1,
        tool: "t".into(),
        value: ResultValue::Effect { effect: effect.into(), ratio, conf_low: lo, conf_high: hi, p_value: p },
    }
}

fn test(key: &str, p: f64) -> ResultNumber {
    ResultNumber {
        key: key.into(),
        step: 1,
        tool: "t".into(),
        value: ResultValue::Test { test: "log-rank".into(), p_value: p },
    }
}

/// The ratio fields' numbers from R (ratio, low, high, p).
fn from_gold(gold: &Gold, names: [&str; 4]) -> (f64, f64, f64, f64) {
    let g = |n: &str| gold.fields[n];
    (g(names[0]), g(names[1]), g(names[2]), g(names[3]))
}

fn read(task: &Task, question: &str, results: &[ResultNumber]) -> Option<(String, Reading)> {
    let q = task.question(question).unwrap();
    read_choice(task, q, results).map(|r| (r.option, r.reading))
}

#[test]
fn every_development_choice_reads_as_rs_answer_from_rs_numbers() {
    // Lactate: the protocol's regression (age and sex beside it).
    let (task, gold) = dev("lactate-hospital-mortality");
    let (r, lo, hi, p) = from_gold(&gold, ["or_lactate", "or_lactate_low", "or_lactate_high", "p_lactate"]);
    let results = [
        effect("OR lactate", "odds_ratio", r, lo, hi, p),
        effect("OR age", "odds_ratio", 1.058, 0.999, 1.121, 0.0534),
        effect("OR female", "odds_ratio", 1.2, 0.3, 4.1, 0.77),
    ];
    assert_eq!(read(&task, "q_lactate", &results), Some(("A".into(), Reading::Higher)));
    assert_eq!(gold.choices["q_lactate"], "A");

    // Anion gap.
    let (task, gold) = dev("anion-gap-28day-auc");
    let (r, lo, hi, p) = from_gold(&gold, ["or_anion_gap", "or_anion_gap_low", "or_anion_gap_high", "p_anion_gap"]);
    let results =
        [effect("OR anion_gap", "odds_ratio", r, lo, hi, p), effect("OR age", "odds_ratio", 1.03, 0.99, 1.07, 0.12)];
    assert_eq!(read(&task, "q_anion_gap", &results), Some(("A".into(), Reading::Higher)));
    assert_eq!(gold.choices["q_anion_gap"], "A");

    // RDW: the log-rank test and the Cox model, both not significant.
    let (task, gold) = dev("rdw-one-year-survival");
    let (r, lo, hi, p) = from_gold(&gold, ["hr_high_rdw", "hr_low", "hr_high", "p_cox"]);
    let results = [
        test("log-rank p", gold.fields["p_logrank"]),
        effect("HR high_rdw", "hazard_ratio", r, lo, hi, p),
        effect("HR age", "hazard_ratio", 1.04, 1.01, 1.07, 0.004),
    ];
    assert_eq!(read(&task, "q_km", &results), Some(("C".into(), Reading::Null)));
    assert_eq!(read(&task, "q_cox", &results), Some(("C".into(), Reading::Null)));
    assert_eq!((gold.choices["q_km"].as_str(), gold.choices["q_cox"].as_str()), ("C", "C"));
    // A significant log-rank test has no direction: the model chooses.
    assert_eq!(read(&task, "q_km", &[test("log-rank p", 0.01)]), None);
    // A Cox model of the continuous RDW is not the protocol's comparison
    // of high RDW (typed-read run 1 read it as A; R: C): not read.
    let continuous = [effect("HR rdw", "hazard_ratio", 1.366, 1.104, 1.691, 0.0041)];
    assert_eq!(read(&task, "q_cox", &continuous), None);

    // Statin: the matched odds ratio.
    let (task, gold) = dev("statin-psm-mortality");
    let (r, lo, hi, p) = from_gold(&gold, ["or_statin", "or_statin_low", "or_statin_high", "p_statin"]);
    let results = [effect("OR statin (matched, robust)", "odds_ratio", r, lo, hi, p)];
    assert_eq!(read(&task, "q_statin", &results), Some(("C".into(), Reading::Null)));
    assert_eq!(gold.choices["q_statin"], "C");
    // Had it been significant and below 1: "a lower risk of death", B.
    let results = [effect("OR statin (matched, robust)", "odds_ratio", 0.4, 0.2, 0.8, 0.01)];
    assert_eq!(read(&task, "q_statin", &results), Some(("B".into(), Reading::Lower)));

    // Age: Fisher's test of older by in-hospital death.
    let (task, gold) = dev("age-baseline-mortality");
    let results =
        [effect("Fisher OR older by hospital_expire_flag", "odds_ratio", 2.2, 0.55, 9.7, gold.fields["p_fisher"])];
    assert_eq!(read(&task, "q_age", &results), Some(("C".into(), Reading::Null)));
    assert_eq!(gold.choices["q_age"], "C");
    // The younger side named instead, significant: turned over.
    let results = [effect("Fisher OR younger by hospital_expire_flag", "odds_ratio", 3.0, 1.2, 7.5, 0.01)];
    assert_eq!(read(&task, "q_age", &results), Some(("B".into(), Reading::Lower)));
}

#[test]
fn relevant_results_that_read_differently_leave_the_choice_to_the_model() {
    let (task, _) = dev("lactate-hospital-mortality");
    // An unadjusted and an adjusted fit of the lactate (the second keyed
    // with _2, as a run keys it), one significant.
    let results = [
        effect("OR lactate", "odds_ratio", 1.36, 1.04, 1.79, 0.027),
        effect("OR lactate_2", "odds_ratio", 1.2, 0.9, 1.6, 0.2),
    ];
    assert_eq!(read(&task, "q_lactate", &results), None);
    // No relevant result at all.
    assert_eq!(read(&task, "q_lactate", &[effect("OR age", "odds_ratio", 1.05, 1.0, 1.1, 0.04)]), None);
}
