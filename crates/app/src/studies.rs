//! Study runs for the review service: the run folders `evident study`
//! wrote under one folder, and one run's evidence bundle (`bundle.json`)
//! read as it was written. A run is named by its folder's name; a name
//! that is not one plain folder name is refused, so no path reaches
//! outside the folder.

use std::path::Path;

use serde::Serialize;

use crate::error::{input_error, AppError, Result};

/// One study run folder with a bundle.
#[derive(Debug, Clone, Serialize)]
pub struct StudyLine {
    pub name: String,
    pub task: Option<String>,
    pub strategy: Option<String>,
    pub model: Option<String>,
    pub success: Option<bool>,
    pub steps: Option<u64>,
}

/// Refuses a name that is not one plain folder name (empty, `.`, `..`, a
/// path separator or a control character), so a name from a request can
/// never reach outside the folder it is looked up in. `what` names it in
/// the message ("study run", "evaluation").
pub(crate) fn check_folder_name(name: &str, what: &str) -> Result<()> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control);
    if !plain {
        input_error!("{what} name {name:?} is not a folder name");
    }
    Ok(())
}

fn check_name(name: &str) -> Result<()> {
    check_folder_name(name, "study run")
}

/// One run's bundle, as written.
pub fn bundle(dir: &Path, name: &str) -> Result<serde_json::Value> {
    check_name(name)?;
    let path = dir.join(name).join("bundle.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(AppError::NotFound(format!("study run {name:?} has no bundle.json")))
        }
        Err(e) => return Err(AppError::file(&path, e)),
    };
    Ok(serde_json::from_str(&text)?)
}

/// The run folders under `dir` that hold a bundle, by name.
pub fn list(dir: &Path) -> Result<Vec<StudyLine>> {
    let entries = std::fs::read_dir(dir).map_err(|e| AppError::file(dir, e))?;
    let mut lines = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if check_name(&name).is_err() || !entry.path().join("bundle.json").is_file() {
            continue;
        }
        let b = bundle(dir, &name).unwrap_or(serde_json::Value::Null);
        let s = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_str()).map(str::to_string);
        lines.push(StudyLine {
            task: s(b.pointer("/task/id")).or_else(|| s(b.pointer("/score/task"))),
            strategy: s(b.get("strategy")),
            model: s(b.get("model")),
            success: b.pointer("/score/success").and_then(|v| v.as_bool()),
            steps: b.pointer("/score/steps").and_then(|v| v.as_u64()),
            name,
        });
    }
    lines.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(lines)
}
