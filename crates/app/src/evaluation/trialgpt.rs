//! TrialGPT's criterion-level annotations: run a method on the annotated
//! patient-trial pairs and score it against the physicians with the
//! metrics of `evident_eval` (accuracy in TrialGPT's labels and collapsed,
//! per-class P/R/F1, Cohen's kappa, evidence-sentence P/R/F1, 95%
//! bootstrap intervals over patients), beside GPT-4's answers on the same
//! rows; trial-level eligibility against the SIGIR relevance labels; and
//! the calls, tokens, time and pipeline failures of the runs that made the
//! evaluated decisions. Writes `eval.json` and `eval.md`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use evident_eval::correction::{
    correct_leave_one_patient_out, type_majority_leave_one_patient_out, CorrectionSummary, MIN_ROWS,
};
use evident_eval::run::{labelled_results, load_qrels, pairs, predictions, store_notes, trial_level, Pair};
use evident_eval::threshold::{
    threshold_leave_one_patient_out, threshold_then_correct_leave_one_patient_out, ThresholdSummary,
};
use evident_eval::{compare, load_annotations, report_row, Prediction};
use evident_match::batch::{stored_results, Method, RetrievalSettings};
use evident_match::label_correction::{CorrectionCell, CorrectionTable, FittedOn, FORMAT, VERSION};
use evident_match::report::patient_level;
use evident_match::threshold::{
    ThresholdTable, TypeThreshold, FORMAT as THRESHOLD_FORMAT, VERSION as THRESHOLD_VERSION,
};
use evident_match::{trial_verdict, CriterionType, Decision, Eligibility};
use serde::Serialize;
use serde_json::json;

use super::trialgpt_markdown::{comparison_markdown, markdown};
use crate::error::{input_error, AppError, Result};
use crate::progress::ProgressSink;
use crate::screening::{stopped, Screening, ScreeningOptions};
use crate::session::{lock, Session};

/// One TrialGPT evaluation.
#[derive(Debug, Clone)]
pub struct TrialgptRequest {
    /// The annotation file (e.g. criterion_annotations_dev.json).
    pub annotations: PathBuf,
    /// SIGIR relevance labels (query-id, corpus-id, score); default:
    /// `dataset/sigir/qrels/test.tsv` beside the annotation file, when present.
    pub qrels: Option<PathBuf>,
    /// Only the first N annotated patients (in file order).
    pub limit_patients: Option<usize>,
    /// Only these annotated patients (topic ids).
    pub topics: Vec<String>,
    /// Where eval.json and eval.md go.
    pub out: PathBuf,
    /// Also run this method with the same settings and report the paired
    /// difference.
    pub baseline: Option<Method>,
    pub options: ScreeningOptions,
    /// Evident's label correction, fitted leave one patient out
    /// ([`evident_eval::correction`]): each patient's decisions relabelled
    /// by the physicians' labels on the other patients' rows with the same
    /// criterion type and predicted label. Criterion level only; without
    /// `baseline`, the same decisions uncorrected are the baseline.
    pub label_correction: bool,
    /// With `label_correction`: write the correction fitted on all the
    /// evaluated rows here, for `evident match --label-correction`.
    pub save_correction: Option<PathBuf>,
    /// Evident's threshold on P(MET) ([`evident_eval::threshold`]): asks
    /// the model for log-probabilities at the paper's 0/1 answer
    /// (`makar-zero-shot`, `makar-aug`) and decides each patient's rows by
    /// the per-type threshold that maximises accuracy on the other
    /// patients' rows. Printed beside the model's own answers (the
    /// baseline), the label correction and the majority-by-type rule on
    /// the same decisions, each with a paired bootstrap over patients.
    pub threshold_calibration: bool,
    /// With `threshold_calibration`: write the thresholds fitted on all the
    /// evaluated rows here, for `evident match --thresholds`.
    pub save_thresholds: Option<PathBuf>,
}

/// What an evaluation found: `eval.json`'s content, and `eval.md`.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct TrialgptEvaluation {
    pub result: serde_json::Value,
    #[serde(skip)]
    pub markdown: String,
    #[serde(skip)]
    pub written: [PathBuf; 2],
}

impl fmt::Display for TrialgptEvaluation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.markdown)?;
        writeln!(f, "written: {} and {}", self.written[0].display(), self.written[1].display())
    }
}

/// One method's answers on the annotated pairs.
#[derive(Clone)]
pub(super) struct MethodEval {
    pub method: &'static str,
    /// The method as the tables name it: with " + exemplars" and
    /// " + calibration" when those levers were on, so the two arms of a
    /// paired comparison of one strategy are told apart.
    pub name: String,
    pub retrieval: RetrievalSettings,
    pub predictions: Vec<Prediction>,
    /// (predicted eligibility, SIGIR relevance label) per labelled pair.
    pub trial_items: Vec<(Eligibility, i64)>,
    /// What `model_runs` cost together.
    pub usage: evident_store::ModelRunSummary,
    /// The model runs that made the evaluated pairs' decisions.
    pub model_runs: Vec<String>,
    pub run_ids: Vec<String>,
    /// The matching model's id.
    pub model_id: String,
    /// P(MET) per prediction (same order), where the decision's trace has one.
    pub p_met: Vec<Option<f64>>,
}

type Qrels = BTreeMap<(String, String), i64>;

/// The annotated topics in file order, narrowed as the request asks.
fn chosen_topics(request: &TrialgptRequest, all_pairs: &[Pair]) -> Result<Vec<String>> {
    let mut topics: Vec<String> = Vec::new();
    for p in all_pairs {
        if !topics.contains(&p.topic) {
            topics.push(p.topic.clone());
        }
    }
    if let Some(n) = request.limit_patients {
        topics.truncate(n);
    }
    if !request.topics.is_empty() {
        if let Some(missing) = request.topics.iter().find(|t| !topics.contains(t)) {
            input_error!("topic {missing} has no annotated row in {}", request.annotations.display());
        }
        topics.retain(|t| request.topics.contains(t));
    }
    Ok(topics)
}

fn qrels_path(request: &TrialgptRequest) -> Option<PathBuf> {
    request.qrels.clone().or_else(|| {
        let default = request.annotations.parent()?.join("dataset/sigir/qrels/test.tsv");
        default.is_file().then_some(default)
    })
}

pub fn evaluate_trialgpt(
    session: &Session,
    request: &TrialgptRequest,
    progress: &dyn ProgressSink,
) -> Result<TrialgptEvaluation> {
    let started = Instant::now();
    let rows = load_annotations(&request.annotations)?;
    let mut all_pairs = pairs(&rows);
    let topics = chosen_topics(request, &all_pairs)?;
    all_pairs.retain(|p| topics.contains(&p.topic));
    let qrels_path = qrels_path(request);
    let qrels = qrels_path.as_deref().map(load_qrels).transpose()?;

    session.with_store(|store| {
        store_notes(store, &rows).map_err(|e| AppError::Input(format!("{}: {e}", request.annotations.display())))
    })?;
    if request.threshold_calibration && request.label_correction {
        input_error!(
            "--threshold-calibration prints the label correction beside it on the same decisions; give only --threshold-calibration"
        );
    }
    if request.save_thresholds.is_some() && !request.threshold_calibration {
        input_error!("--save-thresholds needs --threshold-calibration");
    }
    let options = ScreeningOptions {
        probabilities: request.options.probabilities || request.threshold_calibration,
        ..request.options.clone()
    };
    let mut ours = evaluate(session, &options, &all_pairs, qrels.as_ref(), progress)?;
    // The threshold relabels the stored decisions by their P(MET) (no model
    // call); the model's own answers are its baseline, and the label
    // correction and the majority-by-type rule on the same decisions are
    // printed beside it.
    let mut thresholded_from = None;
    let thresholds = request.threshold_calibration.then(|| {
        let raw = ours.clone();
        let (decided, summary) = threshold_leave_one_patient_out(&raw.predictions, &raw.p_met);
        ours.predictions = decided;
        ours.name.push_str(" + threshold");
        let (corrected, _) = correct_leave_one_patient_out(&raw.predictions);
        let majority = type_majority_leave_one_patient_out(&raw.predictions);
        let both = threshold_then_correct_leave_one_patient_out(&raw.predictions, &raw.p_met);
        thresholded_from = Some(raw);
        (summary, corrected, majority, both)
    });
    // The label correction relabels the stored decisions (no model call);
    // the decisions as the model gave them are its baseline.
    let mut uncorrected = None;
    let correction = request.label_correction.then(|| {
        let (corrected, summary) = correct_leave_one_patient_out(&ours.predictions);
        uncorrected = Some(ours.clone());
        ours.predictions = corrected;
        ours.name.push_str(" + label correction");
        summary
    });
    // What the correction gives when the model's label carries nothing.
    let type_majority = correction.as_ref().map(|_| type_majority_leave_one_patient_out(&ours.predictions));
    // With exemplars or calibration, the baseline is the same strategy
    // without them unless another is named; a baseline never uses them.
    let levers = request.options.exemplars.is_some() || request.options.calibrate;
    let baseline_method = request.baseline.or(levers.then_some(request.options.method));
    let uncorrected = uncorrected.or(thresholded_from);
    let baseline = match (request.baseline, uncorrected, baseline_method) {
        (None, Some(uncorrected), _) => Some(uncorrected),
        (_, _, Some(method)) => {
            let options = ScreeningOptions {
                method,
                exemplars: None,
                calibrate: false,
                probabilities: false,
                thresholds: None,
                ..request.options.clone()
            };
            Some(evaluate(session, &options, &all_pairs, qrels.as_ref(), progress)?)
        }
        (_, _, None) => None,
    };

    let gpt4: Vec<Prediction> = all_pairs.iter().flat_map(|p| p.rows.iter().map(|r| r.gpt4_prediction())).collect();
    let (expert_items, gpt4_items): (Vec<_>, Vec<_>) = all_pairs
        .iter()
        .filter_map(|pair| {
            let label = qrels.as_ref()?.get(&(pair.topic.clone(), pair.set.trial_id.clone()))?;
            let expert = trial_verdict(&pair.set, &labelled_results(pair, false)).eligibility;
            let gpt4 = trial_verdict(&pair.set, &labelled_results(pair, true)).eligibility;
            Some(((expert, *label), (gpt4, *label)))
        })
        .unzip();
    let ours_row = report_row(&ours.predictions);
    let gpt4_row = report_row(&gpt4);
    let baseline_row = baseline.as_ref().map(|b| report_row(&b.predictions));
    let comparison = baseline.as_ref().map(|b| compare(&ours.predictions, &b.predictions));
    let papers = super::trialgpt_markdown::papers(&ours.predictions, &gpt4);
    let trial = qrels.as_ref().map(|_| {
        json!({
            "qrels": qrels_path,
            "method": trial_level(&ours.trial_items),
            "baseline": baseline.as_ref().map(|b| trial_level(&b.trial_items)),
            "physician_labels": trial_level(&expert_items),
            "gpt4_labels": trial_level(&gpt4_items),
        })
    });
    let result = json!({
        "annotations": request.annotations,
        "method": ours.method,
        "retrieval": ours.retrieval,
        "patients": topics.len(),
        "pairs": all_pairs.len(),
        "rows": ours.predictions.len(),
        "method_row": ours_row,
        "exemplars": request.options.exemplars.as_ref().map(|e| json!({
            "bank": e.bank, "k": e.k, "min_similarity": e.min_similarity,
            "match": e.matching.as_str(), "leave_one_patient_out": true,
        })),
        "calibrate": request.options.calibrate,
        "label_correction": correction.as_ref().map(|c| json!({
            "summary": c,
            "type_majority_row": type_majority.as_ref().map(|t| report_row(t)),
            "difference_vs_type_majority": type_majority.as_ref().map(|t| compare(&ours.predictions, t)),
        })),
        "threshold_calibration": thresholds.as_ref().map(|(summary, corrected, majority, both)| json!({
            "summary": summary,
            "threshold_then_correction_row": report_row(both),
            "label_correction_vs_type_majority": compare(corrected, majority),
            "difference_vs_threshold_then_correction": compare(&ours.predictions, both),
            "label_correction_row": report_row(corrected),
            "difference_vs_label_correction": compare(&ours.predictions, corrected),
            "type_majority_row": report_row(majority),
            "difference_vs_type_majority": compare(&ours.predictions, majority),
        })),
        "label_confusion": super::trialgpt_markdown::label_confusion(&ours.predictions),
        "gpt4_row": gpt4_row,
        "papers_metrics": papers,
        "baseline": baseline.as_ref().map(|b| json!({
            "method": b.method,
            "row": baseline_row,
            "usage": b.usage,
            "model_runs": b.model_runs,
            "runs": b.run_ids,
            "difference": comparison,
        })),
        "trial_level": trial,
        "usage": ours.usage,
        "model_runs": ours.model_runs,
        "wall_seconds_this_invocation": started.elapsed().as_secs_f64(),
        "runs": ours.run_ids,
    });
    let mut md = markdown(&ours, &ours_row, &gpt4_row, &expert_items, &gpt4_items, topics.len());
    md.push_str(&super::trialgpt_markdown::papers_markdown(&ours.name, &papers));
    md.push_str(&super::trialgpt_markdown::levers_markdown(
        request.options.exemplars.as_ref(),
        request.options.calibrate,
    ));
    if let Some(c) = &correction {
        md.push_str(&super::trialgpt_markdown::correction_markdown(c));
        if let Some(t) = &type_majority {
            md.push_str(&super::trialgpt_markdown::type_majority_markdown(
                &ours.name,
                &report_row(t),
                &compare(&ours.predictions, t),
            ));
        }
    }
    if let Some((summary, corrected, majority, both)) = &thresholds {
        md.push_str(&super::trialgpt_markdown::threshold_markdown(
            &ours,
            summary,
            &[
                (
                    "label correction (leave one patient out)",
                    report_row(corrected),
                    compare(&ours.predictions, corrected),
                ),
                (
                    "majority label by type (leave one patient out)",
                    report_row(majority),
                    compare(&ours.predictions, majority),
                ),
                (
                    "threshold, then label correction (nested leave one patient out)",
                    report_row(both),
                    compare(&ours.predictions, both),
                ),
            ],
        ));
        let c = compare(corrected, majority);
        md.push_str(&format!(
            "Label correction minus majority label by type, same rows, paired bootstrap over patients: accuracy {:+.3} ({:+.3} to {:+.3}), kappa {:+.3} ({:+.3} to {:+.3}).\n",
            c.accuracy.estimate, c.accuracy.low, c.accuracy.high, c.kappa.estimate, c.kappa.low, c.kappa.high
        ));
    }
    md.push_str(&super::trialgpt_markdown::confusion_markdown(&ours.predictions));
    if let (Some(b), Some(b_row), Some(c)) = (&baseline, &baseline_row, &comparison) {
        md.push_str(&comparison_markdown(&ours, b, b_row, c));
    }
    let mut result = result;
    if let (Some(path), Some(summary)) = (&request.save_correction, &correction) {
        let table = save_correction(path, request, &ours, summary, topics.len())?;
        md.push_str(&format!(
            "\nLabel correction table (fitted on all {} rows of the {} evaluated patients, not leave one patient out) written to {}: {} cells, for `evident match --strategy {} --label-correction {}`.\n",
            table.fitted_on.rows,
            table.fitted_on.patients,
            path.display(),
            table.cells.len(),
            table.strategy,
            path.display()
        ));
        result["saved_correction"] = json!(path);
    }
    if let (Some(path), Some((summary, _, _, _))) = (&request.save_thresholds, &thresholds) {
        let table = save_thresholds(path, request, &ours, summary, topics.len())?;
        let shown: Vec<String> =
            table.thresholds.iter().map(|t| format!("{} {:.3}", t.criterion_type.as_str(), t.threshold)).collect();
        md.push_str(&format!(
            "\nThreshold table (fitted on all {} rows of the {} evaluated patients, not leave one patient out: {}) written to {}, for `evident match --strategy {} --thresholds {}`.\n",
            table.fitted_on.rows,
            table.fitted_on.patients,
            shown.join(", "),
            path.display(),
            table.strategy,
            path.display()
        ));
        result["saved_thresholds"] = json!(path);
    }
    let written = write_outputs(&request.out, &result, &md)?;
    Ok(TrialgptEvaluation { result, markdown: md, written })
}

fn write_outputs(out: &Path, result: &serde_json::Value, md: &str) -> Result<[PathBuf; 2]> {
    std::fs::create_dir_all(out).map_err(|e| AppError::file(out, e))?;
    let (json_path, md_path) = (out.join("eval.json"), out.join("eval.md"));
    std::fs::write(&json_path, serde_json::to_string_pretty(result)?).map_err(|e| AppError::file(&json_path, e))?;
    std::fs::write(&md_path, md).map_err(|e| AppError::file(&md_path, e))?;
    Ok([md_path, json_path])
}

/// Screens every pair with one method (resuming stored decisions), each
/// pair in a model run of its own, and reads its answers back.
fn evaluate(
    session: &Session,
    options: &ScreeningOptions,
    all_pairs: &[Pair],
    qrels: Option<&Qrels>,
    progress: &dyn ProgressSink,
) -> Result<MethodEval> {
    let patients: Vec<String> = all_pairs.iter().map(|p| p.patient_id.clone()).collect();
    let strategy = options.method.as_str();
    let label = format!("eval trialgpt {strategy}");
    let screening = Screening::open(session, options, &patients, &label, progress)?;
    let mut run_ids = Vec::new();
    for (i, pair) in all_pairs.iter().enumerate() {
        let shown = format!("{strategy} {} x {} ({}/{})", pair.topic, pair.set.trial_id, i + 1, all_pairs.len());
        // A model run per pair: the usage below counts the pairs evaluated
        // and no others screened in the same invocation.
        let pair_label = format!("{label}: {} x {}", pair.topic, pair.set.trial_id);
        let patient = std::slice::from_ref(&pair.patient_id);
        match screening.screen_in_own_run(&pair.set, patient, &pair_label, &shown, progress) {
            Ok(o) => run_ids.push(o.run_id),
            Err(e) => {
                screening.finish()?;
                let what = format!("evaluation of {strategy} at {} x {}", pair.topic, pair.set.trial_id);
                return Err(stopped(&what, e));
            }
        }
    }
    screening.finish()?;

    let st = lock(screening.store());
    let mut predictions_out: Vec<Prediction> = Vec::new();
    let mut trial_items = Vec::new();
    let mut model_runs: Vec<String> = Vec::new();
    let mut p_met: Vec<Option<f64>> = Vec::new();
    for (pair, run_id) in all_pairs.iter().zip(&run_ids) {
        let mut stored = Vec::new();
        let mut traces = BTreeMap::new();
        for p in stored_results(&st, run_id)?.into_iter().filter(|p| p.patient_id == pair.patient_id) {
            stored.extend(p.stored);
            traces.extend(p.traces);
        }
        let results = patient_level(&pair.set, screening.method, &stored);
        predictions_out.extend(predictions(pair, &results));
        p_met.extend(pair.rows.iter().map(|row| {
            let trace = traces.get(&format!("annotation-{}", row.annotation_id));
            trace.and_then(|t| t.get("p_met")).and_then(serde_json::Value::as_f64)
        }));
        if let Some(label) = qrels.and_then(|q| q.get(&(pair.topic.clone(), pair.set.trial_id.clone()))) {
            trial_items.push((trial_verdict(&pair.set, &results).eligibility, *label));
        }
        // The model runs that made the evaluated pairs' decisions
        // (decisions resumed from earlier invocations name theirs).
        for row in st.match_results(run_id)? {
            if let (true, Some(m)) = (row.patient_id == pair.patient_id, row.model_run_id) {
                if !model_runs.contains(&m) {
                    model_runs.push(m);
                }
            }
        }
    }
    let ids: Vec<&str> = model_runs.iter().map(String::as_str).collect();
    let usage = st.model_runs_summary(&screening.model_run_id, &label, &ids)?;
    let model_id = screening.matching_model_id().to_string();
    let mut name = screening.method.as_str().to_string();
    if options.exemplars.is_some() {
        name.push_str(" + exemplars");
    }
    if options.calibrate {
        name.push_str(" + calibration");
    }
    Ok(MethodEval {
        method: screening.method.as_str(),
        name,
        retrieval: screening.batch.retrieval,
        predictions: predictions_out,
        trial_items,
        usage,
        model_runs,
        run_ids,
        model_id,
        p_met,
    })
}

/// The correction fitted on every evaluated row, as a table `evident match
/// --label-correction` reads, written to `path`.
fn save_correction(
    path: &Path,
    request: &TrialgptRequest,
    ours: &MethodEval,
    summary: &CorrectionSummary,
    patients: usize,
) -> Result<CorrectionTable> {
    let cells = summary
        .fitted_on_all
        .iter()
        .map(|c| {
            let decision = |s: &str| Decision::parse(s).expect("the correction writes Evident's labels");
            CorrectionCell {
                criterion_type: if c.criterion_type == "inclusion" {
                    CriterionType::Inclusion
                } else {
                    CriterionType::Exclusion
                },
                predicted: decision(c.predicted),
                rows: c.rows,
                physicians: c.physicians.iter().map(|(d, n)| (decision(d), *n)).collect(),
                corrected: decision(c.corrected),
            }
        })
        .collect();
    let command = format!("{} --label-correction --save-correction {}", fitting_command(request, ours), path.display());
    let table = CorrectionTable {
        format: FORMAT.to_string(),
        version: VERSION,
        strategy: ours.method.to_string(),
        model: ours.model_id.clone(),
        exemplars: request.options.exemplars.as_ref().map(|e| e.bank.clone()),
        calibrate: request.options.calibrate,
        min_rows: MIN_ROWS,
        fitted_on: FittedOn {
            source: "physicians' labels of the TrialGPT criterion annotations, every evaluated patient's rows (not leave one patient out)".to_string(),
            annotations: request.annotations.display().to_string(),
            patients,
            rows: ours.predictions.len(),
            command,
            created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            evident: env!("CARGO_PKG_VERSION").to_string(),
        },
        cells,
    };
    super::write_atomically(path, (serde_json::to_string_pretty(&table)? + "\n").as_bytes())?;
    Ok(table)
}

/// The evaluation command that fits a table on these rows with these
/// options (without the lever's own switches), as the table records it.
fn fitting_command(request: &TrialgptRequest, ours: &MethodEval) -> String {
    let mut command =
        format!("evident eval trialgpt --annotations {} --strategy {}", request.annotations.display(), ours.method);
    if let Some(n) = request.limit_patients {
        command.push_str(&format!(" --limit-patients {n}"));
    }
    if !request.topics.is_empty() {
        command.push_str(&format!(" --topics {}", request.topics.join(",")));
    }
    if let Some(e) = &request.options.exemplars {
        command.push_str(&format!(" --exemplars {} --exemplars-k {}", e.bank, e.k));
    }
    if request.options.calibrate {
        command.push_str(" --calibrate");
    }
    command
}

/// The thresholds fitted on every evaluated row, as a table `evident match
/// --thresholds` reads, written to `path`.
fn save_thresholds(
    path: &Path,
    request: &TrialgptRequest,
    ours: &MethodEval,
    summary: &ThresholdSummary,
    patients: usize,
) -> Result<ThresholdTable> {
    let command =
        format!("{} --threshold-calibration --save-thresholds {}", fitting_command(request, ours), path.display());
    let table = ThresholdTable {
        format: THRESHOLD_FORMAT.to_string(),
        version: THRESHOLD_VERSION,
        strategy: ours.method.to_string(),
        model: ours.model_id.clone(),
        exemplars: request.options.exemplars.as_ref().map(|e| e.bank.clone()),
        calibrate: request.options.calibrate,
        fitted_on: FittedOn {
            source: "physicians' labels of the TrialGPT criterion annotations, every evaluated patient's rows with a P(MET) (not leave one patient out)".to_string(),
            annotations: request.annotations.display().to_string(),
            patients,
            rows: summary.rows_with_probability,
            command,
            created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            evident: env!("CARGO_PKG_VERSION").to_string(),
        },
        thresholds: summary
            .fitted_on_all
            .iter()
            .map(|t| TypeThreshold {
                criterion_type: t.criterion_type,
                threshold: t.threshold,
                rows: t.rows,
                correct: t.correct,
                correct_at_argmax: t.correct_at_argmax,
            })
            .collect(),
    };
    super::write_atomically(path, (serde_json::to_string_pretty(&table)? + "\n").as_bytes())?;
    Ok(table)
}
