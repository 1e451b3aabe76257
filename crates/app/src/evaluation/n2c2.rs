//! The n2c2 2018 Track 1 metric (per-criterion met / not-met F1, overall
//! micro and macro F1) of one folder of annotated XML against another, or
//! of Evident's own screening of the gold files' text against their tags.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use evident_eval::paper::{paper_markdown, paper_report, BinaryRow, PaperReport, PrevalenceBy};
use evident_eval::{N2c2Metrics, N2c2Pair};
use evident_match::batch::stored_results;
use evident_match::report::patient_level;
use evident_match::{CriteriaSet, CriterionType, Decision};
use serde::Serialize;

use crate::error::{input_error, AppError, Result};
use crate::progress::{IngestProgress, ProgressSink};
use crate::screening::{stopped, Screening, ScreeningOptions};
use crate::session::{lock, Session};

/// The n2c2 2018 criteria as shipped in `criteria/n2c2-2018.yaml`.
const N2C2_CRITERIA: &str = include_str!("../../../../criteria/n2c2-2018.yaml");

/// One n2c2 evaluation.
#[derive(Debug, Clone)]
pub struct N2c2Request {
    /// Folder of gold n2c2 XML files.
    pub gold: PathBuf,
    /// Folder of predicted XML files with the same names: scored instead of
    /// screening with Evident.
    pub predicted: Option<PathBuf>,
    /// The criteria set (default: the n2c2 2018 set shipped with Evident).
    pub criteria: Option<PathBuf>,
    pub options: ScreeningOptions,
}

/// The metric, with what it was computed over.
#[derive(Debug, Serialize)]
pub struct N2c2Evaluation {
    pub metrics: N2c2Metrics,
    /// The papers' tables (accuracy, precision, recall, per criterion,
    /// micro/macro F1) beside the always-NOT-MET and class-prevalence
    /// baselines; a failed decision predicts nothing here.
    pub papers: PaperReport,
    pub files: usize,
    pub judgements: usize,
    /// Decisions that failed (left out, so scored wrong).
    pub failed_decisions: usize,
}

/// File name -> criterion -> met.
type N2c2Tags = BTreeMap<String, BTreeMap<String, bool>>;

pub fn evaluate_n2c2(session: &Session, request: &N2c2Request, progress: &dyn ProgressSink) -> Result<N2c2Evaluation> {
    let gold = read_tags(&request.gold)?;
    let (predicted, failed_decisions) = match &request.predicted {
        Some(dir) => (read_tags(dir)?, 0),
        None => screen(session, request, progress)?,
    };
    let mut pairs = Vec::new();
    let mut binary = Vec::new();
    for (file, gold_tags) in &gold {
        let Some(pred_tags) = predicted.get(file) else {
            input_error!("{} has no prediction for {file}", request.gold.display());
        };
        for (criterion, gold_met) in gold_tags {
            // A criterion without a prediction (a failed decision) is scored wrong.
            let predicted_met = pred_tags.get(criterion).copied().unwrap_or(!*gold_met);
            pairs.push(N2c2Pair { criterion_id: criterion.clone(), gold_met: *gold_met, predicted_met });
            binary.push(BinaryRow {
                criterion_id: criterion.clone(),
                criterion_type: CriterionType::Inclusion,
                gold_met: *gold_met,
                p_met: pred_tags.get(criterion).map(|met| if *met { 1.0 } else { 0.0 }),
            });
        }
    }
    let metrics = evident_eval::n2c2_metrics(&pairs);
    let papers = paper_report(&binary, PrevalenceBy::Criterion);
    Ok(N2c2Evaluation { metrics, papers, files: gold.len(), judgements: pairs.len(), failed_decisions })
}

impl fmt::Display for N2c2Evaluation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} files, {} judgements, {} failed decisions (scored wrong)",
            self.files, self.judgements, self.failed_decisions
        )?;
        writeln!(f, "{:<16} {:>8} {:>8}", "criterion", "met F1", "not F1")?;
        for (criterion, c) in &self.metrics.per_criterion {
            writeln!(f, "{criterion:<16} {:>8.4} {:>8.4}", c.f1_met, c.f1_not_met)?;
        }
        writeln!(
            f,
            "overall micro F1 {:.4}, macro F1 {:.4}",
            self.metrics.overall_micro_f1, self.metrics.overall_macro_f1
        )?;
        writeln!(f, "\nThe papers' metrics (n2c2 has inclusion criteria only):\n")?;
        write!(f, "{}", paper_markdown("predicted", &self.papers, true))
    }
}

/// Reads the tags of every `.xml` file in a folder.
fn read_tags(dir: &Path) -> Result<N2c2Tags> {
    let mut out = BTreeMap::new();
    let entries = std::fs::read_dir(dir)
        .map_err(|e| AppError::Input(format!("cannot read the folder {}: {e}", dir.display())))?;
    for entry in entries {
        let path = entry.map_err(|e| AppError::file(dir, e))?.path();
        if path.extension().is_none_or(|e| !e.eq_ignore_ascii_case("xml")) {
            continue;
        }
        let xml = std::fs::read_to_string(&path).map_err(|e| AppError::file(&path, e))?;
        let file =
            evident_ingest::n2c2::parse(&xml).map_err(|e| AppError::Input(format!("{}: {e}", path.display())))?;
        let mut tags = BTreeMap::new();
        for (criterion, value) in file.tags {
            let met = match value.as_str() {
                "met" => true,
                "not met" => false,
                other => {
                    input_error!(
                        "{}: tag {criterion} has met={other:?}; expected \"met\" or \"not met\"",
                        path.display()
                    )
                }
            };
            tags.insert(criterion, met);
        }
        let name = path.file_name().expect("a file").to_string_lossy().into_owned();
        out.insert(name, tags);
    }
    if out.is_empty() {
        input_error!("{} holds no .xml files", dir.display());
    }
    Ok(out)
}

/// Ingests the gold files (their text; the tags stay evaluation labels),
/// screens each patient with the criteria set, and returns file name ->
/// criterion -> predicted met (MET is met; NOT MET, NOT ENOUGH INFORMATION
/// and NOT APPLICABLE are not met, as the challenge is binary), with the
/// number of failed decisions (left out, so scored wrong).
fn screen(session: &Session, request: &N2c2Request, progress: &dyn ProgressSink) -> Result<(N2c2Tags, usize)> {
    let set = match &request.criteria {
        Some(path) => CriteriaSet::load(path)?,
        None => CriteriaSet::from_yaml_str(N2C2_CRITERIA, "criteria/n2c2-2018.yaml")?,
    };
    let units = evident_ingest::plan(std::slice::from_ref(&request.gold), evident_ingest::Format::N2c2)?;
    let report =
        session.with_store(|store| Ok(evident_ingest::ingest(store, &units, false, &IngestProgress(progress))?))?;
    let problems: Vec<String> = report.problems().map(|p| p.to_string()).collect();
    if !problems.is_empty() {
        input_error!("{}: {}", request.gold.display(), problems.join("; "));
    }
    let files: Vec<(String, String)> = units
        .iter()
        .map(|u| {
            let name = u.path.file_name().expect("a file").to_string_lossy().into_owned();
            let patient = u.path.file_stem().expect("a file").to_string_lossy().into_owned();
            (name, patient)
        })
        .collect();
    let patients: Vec<String> = files.iter().map(|(_, p)| p.clone()).collect();
    let label = format!("eval n2c2 {}", request.options.method.as_str());
    let screening = Screening::open(session, &request.options, &patients, &label, progress)?;
    let outcome = screening.screen(&set, &patients, None, "n2c2", progress);
    screening.finish()?;
    let outcome = outcome.map_err(|e| stopped("the n2c2 screening", e))?;
    let stored = stored_results(&lock(screening.store()), &outcome.run_id)?;
    let mut out = BTreeMap::new();
    let mut failures = 0;
    for (file, patient) in files {
        let results: Vec<_> =
            stored.iter().filter(|p| p.patient_id == patient).flat_map(|p| p.stored.clone()).collect();
        let mut tags = BTreeMap::new();
        for r in patient_level(&set, screening.method, &results) {
            match r.decision() {
                Some(d) => {
                    tags.insert(r.criterion_id.clone(), d == Decision::Met);
                }
                None => failures += 1,
            }
        }
        out.insert(file, tags);
    }
    Ok((out, failures))
}
