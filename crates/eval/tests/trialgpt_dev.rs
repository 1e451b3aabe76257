//! The GPT-4 reference row on the TrialGPT development annotations: GPT-4's
//! labels and sentence ids scored against the physicians with the same
//! metric code Evident's strategies use. Reads ../shared/data and fails if
//! it is missing. Prints the figures recorded in docs/evaluation.md and
//! checks each one to the precision the document quotes it.

use std::path::Path;

use evident_eval::run::{pairs, Pair};
use evident_eval::{load_annotations, report_row, trialgpt::note_document_id, ReportRow};
use evident_match::{Assessment, Confidence, CriterionResult, Determination, SentenceRef};

fn rows() -> Vec<evident_eval::AnnotationRow> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/trialgpt/criterion_annotations_dev.json");
    load_annotations(&path).unwrap_or_else(|e| panic!("{e}; the shared data must be present"))
}

#[test]
fn dev_split_shape() {
    let rows = rows();
    assert_eq!(rows.len(), 539);
    let patients: std::collections::BTreeSet<_> = rows.iter().map(|r| r.patient_id.as_str()).collect();
    assert_eq!(patients.len(), 27);
    // The first row's note has 9 numbered sentences, 0..=8.
    let s = rows[0].sentences();
    assert_eq!(s.len(), 9);
    assert_eq!(s[0].0, 0);
    assert!(s[0].1.starts_with("A 58-year-old African-American woman"));
    assert_eq!(rows[0].criteria_set().unwrap().criteria.len(), 1);
    let without_text: Vec<_> = rows.iter().filter(|r| r.criteria_set().is_none()).map(|r| r.annotation_id).collect();
    assert_eq!(without_text, [883]);
}

/// `value` printed to three decimals, as docs/evaluation.md quotes it.
#[track_caller]
fn assert_quoted(value: f64, quoted: &str, what: &str) {
    assert_eq!(format!("{value:.3}"), quoted, "{what}: {value} does not print as the quoted {quoted}");
}

/// A results-table row of docs/evaluation.md after the predictor's name:
/// rows, accuracy, collapsed accuracy and kappa with their intervals,
/// collapsed kappa, evidence P / R / F1 (F1 interval), failures.
fn table_cells(row: &ReportRow) -> String {
    let m = &row.metrics;
    let interval = |i: &evident_eval::Interval| format!("{:.3} ({:.3}-{:.3})", i.estimate, i.low, i.high);
    format!(
        "| {} | {} | {} | {} | {:.3} | {:.3} / {:.3} / {:.3} ({:.3}-{:.3}) | {} |",
        m.rows,
        interval(&row.accuracy),
        interval(&row.accuracy_collapsed),
        interval(&row.kappa),
        m.kappa_collapsed,
        m.evidence_precision,
        m.evidence_recall,
        m.evidence_f1,
        row.evidence_f1.low,
        row.evidence_f1.high,
        m.failed
    )
}

/// Every figure docs/evaluation.md quotes for GPT-4 on the 539 rows of the
/// development split (the results table, the per-class line and the
/// evidence counts in its notes). A change to the metric or bootstrap code
/// that moves any of them fails here, and the document must be updated.
#[test]
fn gpt4_reference_row() {
    let rows = rows();
    let predictions: Vec<_> = rows.iter().map(|r| r.gpt4_prediction()).collect();
    let row = report_row(&predictions);
    let m = &row.metrics;
    println!("{}", serde_json::to_string_pretty(&row).unwrap());
    // Cross-check accuracy by direct string comparison of the raw labels.
    let agree = rows.iter().filter(|r| r.gpt4_eligibility == r.expert_eligibility).count();
    assert_eq!(m.accuracy, agree as f64 / rows.len() as f64);
    assert_eq!(row.accuracy.estimate, m.accuracy);
    // Deterministic: the same figures on a second run.
    assert_eq!(report_row(&predictions), row);

    assert_eq!(
        table_cells(&row),
        "| 539 | 0.896 (0.846-0.935) | 0.935 (0.904-0.960) | 0.842 (0.768-0.902) | 0.887 | 1.000 / 0.814 / 0.898 (0.852-0.943) | 0 |"
    );

    // Per class, precision / recall / F1 (support).
    let per_class = [
        ("included", ["1.000", "0.926", "0.962"], 81),
        ("not included", ["0.714", "0.833", "0.769"], 12),
        ("excluded", ["0.600", "1.000", "0.750"], 6),
        ("not excluded", ["0.963", "0.882", "0.921"], 263),
        ("not enough information", ["0.888", "0.888", "0.888"], 143),
        ("not applicable", ["0.589", "0.971", "0.733"], 34),
    ];
    let classes: Vec<&str> = m.per_class.keys().map(String::as_str).collect();
    let mut quoted_classes: Vec<&str> = per_class.iter().map(|c| c.0).collect();
    quoted_classes.sort();
    assert_eq!(classes, quoted_classes, "the document quotes every class");
    for (class, [precision, recall, f1], support) in per_class {
        let c = &m.per_class[class];
        assert_quoted(c.precision, precision, &format!("{class} precision"));
        assert_quoted(c.recall, recall, &format!("{class} recall"));
        assert_quoted(c.f1, f1, &format!("{class} F1"));
        assert_eq!(c.support, support, "{class} support");
    }

    // "276 cited, 339 gold": every cited sentence is among the physician's.
    let cited: usize = rows.iter().map(|r| r.gpt4_sentence_ids().len()).sum();
    let gold: usize = rows.iter().map(|r| r.expert_sentence_ids().len()).sum();
    let cited_in_gold: usize =
        rows.iter().map(|r| r.gpt4_sentence_ids().intersection(&r.expert_sentence_ids()).count()).sum();
    assert_eq!((cited, gold, cited_in_gold), (276, 339, 276));

    // The document quotes exactly these figures.
    let docs = docs_text();
    let quoted = format!("| GPT-4 (TrialGPT's own answers, from the file) {}", table_cells(&row));
    assert!(docs.contains(&quoted), "docs/evaluation.md does not quote {quoted:?}");
    for (class, [precision, recall, f1], support) in per_class {
        let line = format!("{class} {precision} / {recall} / {f1} ({support})");
        assert!(docs.contains(&line), "docs/evaluation.md does not quote {line:?}");
    }
    assert!(docs.contains("(276 cited, 339 gold"), "the evidence counts");
}

/// The pairs of the first `n` patients in the file's order (`--limit-patients n`).
fn first_patients(pairs: &[Pair], n: usize) -> Vec<Pair> {
    let mut topics: Vec<&str> = Vec::new();
    for p in pairs {
        if !topics.contains(&p.topic.as_str()) && topics.len() < n {
            topics.push(&p.topic);
        }
    }
    pairs.iter().filter(|p| topics.contains(&p.topic.as_str())).cloned().collect()
}

/// docs/evaluation.md with every run of whitespace made one space (its
/// prose wraps lines).
fn docs_text() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/evaluation.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// GPT-4's row on the rows Evident's methods answered, as
/// docs/evaluation.md quotes it beside them: the whole split less the row
/// without criterion text (538 rows), and the first 18 patients (363 rows,
/// the ACAN comparison). Rows are chosen as `evident eval trialgpt` does.
#[test]
fn gpt4_rows_beside_the_methods() {
    let pairs = pairs(&rows());
    let gpt4_row = |pairs: &[Pair]| {
        report_row(&pairs.iter().flat_map(|p| p.rows.iter().map(|r| r.gpt4_prediction())).collect::<Vec<_>>())
    };
    assert_eq!(
        table_cells(&gpt4_row(&pairs)),
        "| 538 | 0.896 (0.846-0.935) | 0.935 (0.904-0.960) | 0.842 (0.767-0.902) | 0.887 | 1.000 / 0.814 / 0.898 (0.852-0.943) | 0 |"
    );
    let mut first_18: Vec<&str> = Vec::new();
    for p in &pairs {
        if !first_18.contains(&p.topic.as_str()) && first_18.len() < 18 {
            first_18.push(&p.topic);
        }
    }
    let on_first_18: Vec<Pair> = pairs.iter().filter(|p| first_18.contains(&p.topic.as_str())).cloned().collect();
    assert_eq!(
        table_cells(&gpt4_row(&on_first_18)),
        "| 363 | 0.876 (0.815-0.924) | 0.920 (0.879-0.953) | 0.810 (0.719-0.883) | 0.864 | 1.000 / 0.782 / 0.877 (0.810-0.936) | 0 |"
    );
    let docs = docs_text();
    // The exemplar comparisons' subsets (the first 9 and the first 3
    // patients): GPT-4's accuracy and kappa with their intervals.
    for (n, quoted) in
        [(9, "| 0.802 (0.687-0.878) | 0.693 (0.544-0.788) |"), (3, "| 0.816 (0.500-0.871) | 0.729 (0.143-0.792) |")]
    {
        let row = gpt4_row(&first_patients(&pairs, n));
        let i = |i: &evident_eval::Interval| format!("{:.3} ({:.3}-{:.3})", i.estimate, i.low, i.high);
        assert_eq!(format!("| {} | {} |", i(&row.accuracy), i(&row.kappa)), quoted, "first {n} patients");
        let line = format!("| GPT-4 (TrialGPT's answers) {quoted}");
        assert!(docs.contains(&line), "docs/evaluation.md does not quote {line:?}");
    }
    for rows in [&pairs[..], &on_first_18[..]] {
        let quoted = format!("| GPT-4 (TrialGPT's answers, same rows) {}", table_cells(&gpt4_row(rows)));
        assert!(docs.contains(&quoted), "docs/evaluation.md does not quote {quoted:?}");
    }
}

#[test]
fn evident_results_score_like_their_labels() {
    // Feeding GPT-4's answers through Evident's result type must give the
    // same numbers as scoring them directly.
    let rows = rows();
    let via_results: Vec<_> = rows
        .iter()
        .map(|r| {
            let doc = note_document_id(&r.patient_id);
            let result = CriterionResult {
                criterion_id: format!("annotation-{}", r.annotation_id),
                criterion_type: r.criterion_type,
                document_id: None,
                document_date: None,
                outcome: Determination::Assessed(Assessment {
                    medications_and_supplements: vec![],
                    rationale: r.gpt4_explanation.clone(),
                    decision: r.gpt4_decision(),
                    confidence: Confidence::High,
                    evidence: r
                        .gpt4_sentence_ids()
                        .into_iter()
                        .map(|o| SentenceRef { document_id: doc.clone(), ordinal: o })
                        .collect(),
                }),
                unresolved_citations: vec![],
            };
            r.prediction_from(&result)
        })
        .collect();
    let direct: Vec<_> = rows.iter().map(|r| r.gpt4_prediction()).collect();
    assert_eq!(via_results, direct);
}
