//! `evident study` refuses bad input with exit 2, naming the place and
//! what to do: a task without questions, a task file that does not
//! validate, a task whose text states its result, a missing gold file, and
//! a study database that does not connect. Nothing is run and no bundle is
//! written.

mod common;

use common::{repo_root, Sandbox};

const TASK: &str = "crates/rwe/tasks/lactate-hospital-mortality";

fn task_copy(sandbox: &Sandbox, edit: impl Fn(String) -> String) -> String {
    let dir = repo_root().join(TASK);
    let yaml = std::fs::read_to_string(dir.join("task.yaml")).unwrap();
    sandbox.write("task/task.yaml", &edit(yaml));
    sandbox.write("task/gold.json", &std::fs::read_to_string(dir.join("gold.json")).unwrap());
    sandbox.path().join("task").display().to_string()
}

#[test]
fn a_task_without_questions_is_refused() {
    let s = Sandbox::new();
    let task = task_copy(&s, |y| y.split("questions:").next().unwrap().to_string() + "questions: []\n");
    s.run(&["study", &task, "--database", "sqlite:nowhere.db"]).fails_with(2, "task.yaml: questions: is empty");
    assert!(!s.path().join("evident-study/bundle.json").exists());
}

#[test]
fn a_task_that_does_not_validate_is_named() {
    let s = Sandbox::new();
    let task = task_copy(&s, |y| y.replace("mode: exact", "mode: sometimes"));
    s.run(&["study", &task, "--database", "sqlite:nowhere.db"]).fails_with(2, "task.yaml: not a valid task");
    let task = task_copy(&s, |y| y.replace("ci_low: or_lactate_low", "ci_low: or_lower"));
    s.run(&["study", &task, "--database", "sqlite:nowhere.db"])
        .fails_with(2, "questions[1].fields[0].ci_low: \"or_lower\" is not a field of this question");
}

/// A task whose choice option states a gold value (the odds ratio 1.36)
/// is refused with the place, the number, the field and what to do; the
/// same number listed under leak_check_allow passes the task check (the
/// run then stops at the database).
#[test]
fn a_task_that_states_its_result_is_refused() {
    let s = Sandbox::new();
    let leaky = |y: String| {
        y.replace("C: no significant association with in-hospital death", "C: an odds ratio of about 1.36 per mmol/L")
    };
    let task = task_copy(&s, leaky);
    let refused = s
        .run(&["study", &task, "--database", "sqlite:nowhere.db"])
        .fails_with(2, "task.yaml: questions[1].choice.options.C: states 1.36, the gold value of or_lactate");
    assert!(refused.stderr().contains("reword it") && refused.stderr().contains("leak_check_allow"));
    assert!(!s.path().join("evident-study").exists());
    let task = task_copy(&s, |y| leaky(y) + "leak_check_allow:\n  - {number: 1.36, reason: a test of the exemption}\n");
    s.run(&["study", &task, "--database", "sqlite:nowhere.db"]).fails_with(2, "nowhere.db");
}

#[test]
fn missing_gold_answers_are_named() {
    let s = Sandbox::new();
    let task = task_copy(&s, |y| y);
    std::fs::remove_file(s.path().join("task/gold.json")).unwrap();
    s.run(&["study", &task, "--database", "sqlite:nowhere.db"])
        .fails_with(2, "gold.json: cannot read the gold answers");
}

#[test]
fn a_database_that_does_not_connect_is_refused() {
    let s = Sandbox::new();
    let task = repo_root().join(TASK).display().to_string();
    s.run(&["study", &task, "--database", "sqlite:/nonexistent/demo.db"]).fails_with(2, "/nonexistent/demo.db");
    s.run(&["study", &task, "--database", "mysql://x"]).fails_with(2, "expected sqlite:PATH");
    assert!(!s.path().join("evident-study").exists());
}
