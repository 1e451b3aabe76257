//! Evaluation output folders for the review service (`evident serve
//! --evaluations DIR`): the folders `evident eval trialgpt` (`eval.json`,
//! `eval.md`), `evident eval chart` (`results.json`, `summary.md`,
//! `answers.jsonl`) and `evident eval rwe` (`run-N/TASK/bundle.json`)
//! wrote under one folder, each read as it was written. An evaluation is
//! named by its folder's name; a name that is not one plain folder name is
//! refused, so no path reaches outside the folder.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

use crate::error::{AppError, Result};

/// Which command wrote the folder, known by the files in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EvaluationKind {
    Trialgpt,
    Chart,
    Rwe,
}

/// One evaluation folder, with a few numbers from its result.
#[derive(Debug, Clone, Serialize)]
pub struct EvaluationLine {
    pub name: String,
    pub kind: EvaluationKind,
    /// The method(s) evaluated (TrialGPT: the method and any baseline;
    /// chart: every method; RWE: the strategies of the runs' bundles).
    pub methods: Vec<String>,
    /// What was evaluated: patients and pairs, questions, tasks and runs.
    pub size: String,
    /// When the result file was last written (UTC, RFC 3339).
    pub written: Option<String>,
}

/// One evaluation: its result as written and the table the command
/// printed beside it.
#[derive(Debug, Clone, Serialize)]
pub struct Evaluation {
    pub name: String,
    pub kind: EvaluationKind,
    /// TrialGPT: `eval.json`; chart: `results.json`; RWE: per run folder
    /// and task, the bundle's task, strategy, model and score.
    pub result: Value,
    /// `eval.md` or `summary.md` (RWE writes none).
    pub summary: Option<String>,
    pub written: Option<String>,
}

fn check_name(name: &str) -> Result<()> {
    crate::studies::check_folder_name(name, "evaluation")
}

/// `run-N` folders of an RWE evaluation that hold task folders with a bundle.
fn rwe_runs(folder: &Path) -> Vec<(String, Vec<PathBuf>)> {
    let Ok(entries) = std::fs::read_dir(folder) else { return Vec::new() };
    let mut runs: Vec<(String, Vec<PathBuf>)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix("run-")?;
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let mut tasks: Vec<PathBuf> = std::fs::read_dir(e.path())
                .ok()?
                .flatten()
                .map(|t| t.path())
                .filter(|t| t.join("bundle.json").is_file())
                .collect();
            tasks.sort();
            (!tasks.is_empty()).then_some((name, tasks))
        })
        .collect();
    runs.sort_by_key(|(name, _)| name[4..].parse::<u64>().unwrap_or(u64::MAX));
    runs
}

fn kind_of(folder: &Path) -> Option<EvaluationKind> {
    if folder.join("eval.json").is_file() {
        Some(EvaluationKind::Trialgpt)
    } else if folder.join("results.json").is_file() {
        Some(EvaluationKind::Chart)
    } else if !rwe_runs(folder).is_empty() {
        Some(EvaluationKind::Rwe)
    } else {
        None
    }
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| AppError::file(path, e))?;
    serde_json::from_str(&text).map_err(|e| AppError::Input(format!("{}: not valid JSON: {e}", path.display())))
}

fn written(path: &Path) -> Option<String> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(chrono::DateTime::<chrono::Utc>::from(modified).to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

fn result_file(folder: &Path, kind: EvaluationKind) -> PathBuf {
    match kind {
        EvaluationKind::Trialgpt => folder.join("eval.json"),
        EvaluationKind::Chart => folder.join("results.json"),
        EvaluationKind::Rwe => folder.to_path_buf(),
    }
}

/// One evaluation folder under `dir`, read as written.
pub fn show(dir: &Path, name: &str) -> Result<Evaluation> {
    check_name(name)?;
    let folder = dir.join(name);
    let Some(kind) = kind_of(&folder) else {
        return Err(AppError::NotFound(format!(
            "evaluation {name:?} is not an evaluation folder (no eval.json, results.json or run-N/TASK/bundle.json)"
        )));
    };
    let (result, summary) = match kind {
        EvaluationKind::Trialgpt => {
            (read_json(&folder.join("eval.json"))?, std::fs::read_to_string(folder.join("eval.md")).ok())
        }
        EvaluationKind::Chart => {
            (read_json(&folder.join("results.json"))?, std::fs::read_to_string(folder.join("summary.md")).ok())
        }
        EvaluationKind::Rwe => {
            let runs: Vec<Value> = rwe_runs(&folder)
                .into_iter()
                .map(|(run, tasks)| {
                    let tasks: Vec<Value> = tasks
                        .iter()
                        .map(|t| {
                            let folder_name = t.file_name().map(|n| n.to_string_lossy().into_owned());
                            match read_json(&t.join("bundle.json")) {
                                Ok(b) => json!({
                                    "folder": folder_name,
                                    "task": b.pointer("/task/id").or_else(|| b.pointer("/score/task")),
                                    "strategy": b.get("strategy"),
                                    "model": b.get("model"),
                                    "score": b.get("score"),
                                }),
                                Err(e) => json!({ "folder": folder_name, "error": e.to_string() }),
                            }
                        })
                        .collect();
                    json!({ "run": run, "tasks": tasks })
                })
                .collect();
            (json!({ "runs": runs }), None)
        }
    };
    Ok(Evaluation { name: name.to_string(), kind, result, summary, written: written(&result_file(&folder, kind)) })
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(|v| v.as_str()).map(|s| vec![s.to_string()]).unwrap_or_default()
}

/// The evaluation folders under `dir`, by name.
pub fn list(dir: &Path) -> Result<Vec<EvaluationLine>> {
    let entries = std::fs::read_dir(dir).map_err(|e| AppError::file(dir, e))?;
    let mut lines = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if check_name(&name).is_err() || kind_of(&entry.path()).is_none() {
            continue;
        }
        let Ok(e) = show(dir, &name) else { continue };
        let r = &e.result;
        let n = |p: &str| r.pointer(p).and_then(Value::as_u64).map(|n| n.to_string()).unwrap_or_else(|| "?".into());
        let (methods, size) = match e.kind {
            EvaluationKind::Trialgpt => {
                let mut m = strings(r.get("method"));
                m.extend(strings(r.pointer("/baseline/method")));
                (m, format!("{} patients, {} pairs, {} criterion rows", n("/patients"), n("/pairs"), n("/rows")))
            }
            EvaluationKind::Chart => {
                let m = r
                    .get("methods")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().flat_map(|m| strings(m.get("method"))).collect())
                    .unwrap_or_default();
                (m, format!("{} questions, {} patients", n("/questions"), n("/patients")))
            }
            EvaluationKind::Rwe => {
                let runs = r["runs"].as_array().cloned().unwrap_or_default();
                let tasks: Vec<&Value> =
                    runs.iter().flat_map(|run| run["tasks"].as_array().into_iter().flatten()).collect();
                let mut m: Vec<String> = tasks.iter().flat_map(|t| strings(t.get("strategy"))).collect();
                m.sort();
                m.dedup();
                let distinct: std::collections::BTreeSet<String> =
                    tasks.iter().flat_map(|t| strings(t.get("task"))).collect();
                (m, format!("{} tasks, {} runs", distinct.len(), runs.len()))
            }
        };
        lines.push(EvaluationLine { name, kind: e.kind, methods, size, written: e.written });
    }
    lines.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_told_apart_by_their_files_and_names_cannot_leave_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("tg")).unwrap();
        std::fs::write(
            d.join("tg/eval.json"),
            r#"{"method":"ican","baseline":{"method":"text"},"patients":2,"pairs":3,"rows":40}"#,
        )
        .unwrap();
        std::fs::write(d.join("tg/eval.md"), "| method | accuracy |\n").unwrap();
        std::fs::create_dir_all(d.join("ch")).unwrap();
        std::fs::write(
            d.join("ch/results.json"),
            r#"{"questions":3,"patients":1,"methods":[{"method":"agent"},{"method":"baseline"}]}"#,
        )
        .unwrap();
        std::fs::create_dir_all(d.join("rw/run-1/lactate")).unwrap();
        std::fs::write(
            d.join("rw/run-1/lactate/bundle.json"),
            r#"{"task":{"id":"lactate"},"strategy":"r","model":"m","score":{"success":false}}"#,
        )
        .unwrap();
        std::fs::create_dir_all(d.join("rw/run-2/lactate")).unwrap();
        std::fs::write(d.join("rw/run-2/lactate/bundle.json"), "not json").unwrap();
        std::fs::create_dir_all(d.join("empty")).unwrap();

        let lines = list(d).unwrap();
        let got: Vec<(&str, EvaluationKind, Vec<String>, &str)> =
            lines.iter().map(|l| (l.name.as_str(), l.kind, l.methods.clone(), l.size.as_str())).collect();
        assert_eq!(
            got,
            vec![
                ("ch", EvaluationKind::Chart, vec!["agent".into(), "baseline".into()], "3 questions, 1 patients"),
                ("rw", EvaluationKind::Rwe, vec!["r".into()], "1 tasks, 2 runs"),
                (
                    "tg",
                    EvaluationKind::Trialgpt,
                    vec!["ican".into(), "text".into()],
                    "2 patients, 3 pairs, 40 criterion rows"
                ),
            ]
        );
        let tg = show(d, "tg").unwrap();
        assert_eq!(tg.summary.as_deref(), Some("| method | accuracy |\n"));
        assert_eq!(tg.result["pairs"], 3);
        let rw = show(d, "rw").unwrap();
        assert_eq!(rw.result["runs"][0]["tasks"][0]["score"]["success"], false);
        assert!(rw.result["runs"][1]["tasks"][0]["error"].as_str().unwrap().contains("not valid JSON"));
        assert!(matches!(show(d, "empty"), Err(AppError::NotFound(_))));
        assert!(matches!(show(d, "nowhere"), Err(AppError::NotFound(_))));
        assert!(matches!(show(d, ".."), Err(AppError::Input(_))));
        assert!(matches!(show(d, "../tg"), Err(AppError::Input(_))));
    }
}
