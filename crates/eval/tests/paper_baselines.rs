//! The two baselines docs/evaluation.md quotes beside every TrialGPT table,
//! on the 538 rows Evident's methods answered (the development split less
//! the row without criterion text, chosen as `evident eval trialgpt`
//! does), and the papers' binary figures of GPT-4 and both baselines there;
//! each figure pinned here must be the one the document quotes.
//! Reads ../shared/data and fails if it is missing.

use std::path::Path;

use evident_eval::metrics::collapse;
use evident_eval::paper::{paper_report, paper_table, prevalence_accuracy, BinaryRow, PrevalenceBy};
use evident_eval::run::pairs;
use evident_eval::{criterion_metrics, load_annotations, Prediction};
use evident_match::Decision;

fn predictions() -> Vec<Prediction> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/trialgpt/criterion_annotations_dev.json");
    let rows = load_annotations(&path).unwrap_or_else(|e| panic!("{e}; the shared data must be present"));
    pairs(&rows).iter().flat_map(|p| p.rows.iter().map(|r| r.gpt4_prediction())).collect()
}

fn q(v: f64) -> String {
    format!("{v:.3}")
}

#[test]
fn baselines_on_the_538_rows() {
    let gpt4 = predictions();
    assert_eq!(gpt4.len(), 538);
    let never: Vec<Prediction> =
        gpt4.iter().map(|r| Prediction { predicted: Some(Decision::NotMet), ..r.clone() }).collect();
    let m = criterion_metrics(&never);
    let labels: Vec<_> = gpt4.iter().map(|r| (r.criterion_type.as_str(), r.gold)).collect();
    let collapsed: Vec<_> = gpt4.iter().map(|r| (r.criterion_type.as_str(), collapse(r.gold))).collect();
    let (prev, prev_c) = (prevalence_accuracy(&labels), prevalence_accuracy(&collapsed));
    println!("always NOT MET: {} {} {}; prevalence {} {}", m.accuracy, m.accuracy_collapsed, m.kappa, prev, prev_c);

    let binary = |rows: &[Prediction]| -> Vec<BinaryRow> {
        rows.iter()
            .map(|r| BinaryRow::from_decisions(r.criterion_type.as_str(), r.criterion_type, r.gold, r.predicted))
            .collect()
    };
    let report = paper_report(&binary(&gpt4), PrevalenceBy::CriterionType);
    let gpt4_table = paper_table(&binary(&gpt4));
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
    let o = |t: &evident_eval::paper::PaperTable| {
        let s = t.overall;
        [s.accuracy, s.precision, s.recall, s.f1, s.f1_not_met, s.mean_f1, t.macro_f1].map(q).join(" ")
    };
    let split = |t: &evident_eval::paper::PaperTable| {
        let (i, e) = (t.inclusion.unwrap(), t.exclusion.unwrap());
        [i.accuracy, i.f1, e.accuracy, e.f1].map(q).join(" ")
    };
    println!("gpt4 {} | {}", o(&gpt4_table), split(&gpt4_table));
    println!("never {} | {}", o(&report.always_not_met), split(&report.always_not_met));
    println!("prevalence {} | {}", o(&report.prevalence), split(&report.prevalence));

    assert_eq!([m.accuracy, m.accuracy_collapsed, m.kappa, prev, prev_c].map(q), PINNED_FOUR_LABEL);
    assert_eq!(o(&gpt4_table), PINNED[0]);
    assert_eq!(o(&report.always_not_met), PINNED[1]);
    assert_eq!(o(&report.prevalence), PINNED[2]);
    assert_eq!(split(&gpt4_table), PINNED_SPLIT[0]);
    assert_eq!(split(&report.always_not_met), PINNED_SPLIT[1]);
    assert_eq!(split(&report.prevalence), PINNED_SPLIT[2]);

    // The document quotes exactly these figures.
    let docs = docs_text();
    let cells = |pinned: &str| pinned.split(' ').collect::<Vec<_>>().join(" | ");
    let quoted = [
        format!(
            "| baseline: always NOT MET | 538 | {} | {} | {} |",
            PINNED_FOUR_LABEL[0], PINNED_FOUR_LABEL[1], PINNED_FOUR_LABEL[2]
        ),
        format!(
            "| baseline: class prevalence (expected) | 538 | {} | {} | 0.000 |",
            PINNED_FOUR_LABEL[3], PINNED_FOUR_LABEL[4]
        ),
        format!("| GPT-4 (TrialGPT's answers) | 538 | {} |", cells(PINNED[0])),
        format!("| baseline: always NOT MET | 538 | {} |", cells(PINNED[1])),
        format!("| baseline: class prevalence (expected) | 538 | {} |", cells(PINNED[2])),
    ];
    for (who, pinned) in ["GPT-4", "always NOT MET", "class prevalence"].iter().zip(PINNED_SPLIT) {
        let v: Vec<&str> = pinned.split(' ').map(|x| if x == "0.000" { "0" } else { x }).collect();
        let line = format!("{who} {} / {} and {} / {}", v[0], v[1], v[2], v[3]);
        assert!(docs.contains(&line), "docs/evaluation.md does not quote {line:?}");
    }
    for line in quoted {
        assert!(docs.contains(&line), "docs/evaluation.md does not quote {line:?}");
    }
}

/// Both baselines on the exemplar comparisons' subsets (the first 9 and
/// the first 3 patients in the file's order), as the document quotes them.
#[test]
fn baselines_on_the_exemplar_subsets() {
    let all = predictions();
    let docs = docs_text();
    for (n, never_quoted, prevalence_quoted) in [(9, "0.564", "0.567"), (3, "0.510", "0.488")] {
        let mut topics: Vec<&str> = Vec::new();
        for r in &all {
            if !topics.contains(&r.patient_id.as_str()) && topics.len() < n {
                topics.push(&r.patient_id);
            }
        }
        let rows: Vec<Prediction> = all.iter().filter(|r| topics.contains(&r.patient_id.as_str())).cloned().collect();
        let never: Vec<Prediction> =
            rows.iter().map(|r| Prediction { predicted: Some(Decision::NotMet), ..r.clone() }).collect();
        let labels: Vec<_> = rows.iter().map(|r| (r.criterion_type.as_str(), r.gold)).collect();
        assert_eq!(
            (q(criterion_metrics(&never).accuracy), q(prevalence_accuracy(&labels))),
            (never_quoted.to_string(), prevalence_quoted.to_string()),
            "first {n} patients ({} rows)",
            rows.len()
        );
        for line in [
            format!("| baseline: always NOT MET | {never_quoted} | 0.000 |"),
            format!("| baseline: class prevalence (expected) | {prevalence_quoted} | 0.000 |"),
        ] {
            assert!(docs.contains(&line), "docs/evaluation.md does not quote {line:?}");
        }
    }
}

/// docs/evaluation.md with every run of whitespace made one space (its
/// prose wraps lines).
fn docs_text() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/evaluation.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Always NOT MET accuracy, collapsed accuracy, kappa; class prevalence
/// expected accuracy and collapsed accuracy (docs/evaluation.md).
const PINNED_FOUR_LABEL: [&str; 5] = ["0.509", "0.572", "0.000", "0.526", "0.607"];
/// Binary view: accuracy, precision, recall, F1 (met), F1 (not met), micro
/// F1 (n2c2), macro F1 over the two criterion types; GPT-4, always NOT
/// MET, class prevalence.
const PINNED: [&str; 3] = [
    "0.981 0.953 0.931 0.942 0.989 0.965 0.919",
    "0.838 0.000 0.000 0.000 0.912 0.456 0.428",
    "0.809 0.409 0.409 0.409 0.886 0.647 0.500",
];
/// Inclusion accuracy and F1, exclusion accuracy and F1.
const PINNED_SPLIT: [&str; 3] = ["0.968 0.962 0.989 0.750", "0.562 0.000 0.983 0.000", "0.508 0.438 0.967 0.017"];
