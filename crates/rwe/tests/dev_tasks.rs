//! The committed development task set (`crates/rwe/tasks/`): every task loads
//! and validates, its gold answers validate against it, its text leaks no
//! result, the demo supports it (at least 30 units and 8 events), and its
//! independent reference analysis in R, run again on the demo's csv.gz
//! files, reproduces the committed gold answers.

use std::path::{Path, PathBuf};
use std::process::Command;

use evident_rwe::leak::find_leaks;
use evident_rwe::task::{FieldKind, ResultType};
use evident_rwe::{Gold, Task};

fn tasks_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks")
}

/// Each task with the fields that hold its number of units and of events.
const SUPPORT: &[(&str, &[&str], &str)] = &[
    ("lactate-hospital-mortality", &["n_patients"], "n_deaths"),
    ("rdw-one-year-survival", &["n_high_rdw", "n_normal_rdw"], "n_deaths_1y"),
    ("statin-psm-mortality", &["n_statin", "n_no_statin"], "n_deaths_matched"),
    ("age-baseline-mortality", &["n_patients"], "n_deaths"),
    ("anion-gap-28day-auc", &["n_patients"], "n_deaths_28d"),
];

fn task_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(tasks_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("task.yaml").is_file())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn every_task_validates_with_its_gold_and_leaks_nothing() {
    let dirs = task_dirs();
    assert!(dirs.len() >= 5, "the development set has {} tasks", dirs.len());
    for dir in &dirs {
        let loaded = Task::load(&dir.join("task.yaml")).unwrap();
        let task = &loaded.task;
        assert_eq!(dir.file_name().unwrap().to_str().unwrap(), task.id, "folder and id agree");
        let gold = Gold::load(&dir.join("gold.json"), task).unwrap();
        assert_eq!(find_leaks(task, &gold), vec![], "{}", task.id);
        assert!(dir.join("reference.R").is_file(), "{} has its reference analysis", task.id);
        // Baseline fields are never gated; primary results always are.
        for q in &task.questions {
            assert_eq!(q.is_gated(), q.result_type == ResultType::PrimaryResults, "{} {}", task.id, q.id);
        }
        assert!(task.fields().any(|(_, f)| matches!(f, FieldKind::Ratio { .. } | FieldKind::Pvalue { .. })));
        let (_, units, events) = SUPPORT.iter().find(|(id, ..)| *id == task.id).expect("task listed in SUPPORT");
        let n: f64 = units.iter().map(|u| gold.fields[*u]).sum();
        assert!(n >= 30.0, "{}: {n} units", task.id);
        assert!(gold.fields[*events] >= 8.0, "{}: {} events", task.id, gold.fields[*events]);
    }
}

#[test]
fn reference_analyses_reproduce_the_gold_answers() {
    let demo = evident_testdata::shared_data().join("mimic-iv-demo");
    let out = tempfile::tempdir().unwrap();
    for dir in task_dirs() {
        let task = Task::load(&dir.join("task.yaml")).unwrap().task;
        let written = out.path().join(format!("{}.json", task.id));
        let run = Command::new("Rscript").arg(dir.join("reference.R")).arg(&demo).arg(&written).output().unwrap();
        assert!(run.status.success(), "{}: {}", task.id, String::from_utf8_lossy(&run.stderr));
        let fresh = Gold::load(&written, &task).unwrap();
        let committed = Gold::load(&dir.join("gold.json"), &task).unwrap();
        assert_eq!(fresh.choices, committed.choices, "{}", task.id);
        for (name, v) in &committed.fields {
            let w = fresh.fields[name];
            assert!((v - w).abs() <= 1e-9 * v.abs().max(1.0), "{} {name}: committed {v}, R now {w}", task.id);
        }
    }
}
