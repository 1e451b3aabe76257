//! `evident study` end to end on the embedded model: the MIMIC-IV demo is
//! loaded into SQLite; a study process is killed with SIGKILL once its
//! first agent step is stored; the same command run again resumes: it
//! replays the stored step without repeating it, and writes the bundle
//! (the step, the database hash, the task) and the report page. The typed
//! strategy builds a cohort whose audit passes the rule checks, on SQLite
//! and on PostgreSQL (where the run's read-only role is dropped after it).
//! Evident's compiled cohort judge writes its checks from the protocol's
//! sentences.

mod common;

use common::{repo_root, shared_data, Sandbox};
use evident_db::testing::TempPgDatabase;

#[test]
fn a_killed_study_resumes_without_repeating_its_step_and_writes_bundle_and_report() {
    let s = Sandbox::new();
    let demo = shared_data().join("mimic-iv-demo");
    s.run(&["db", "load", "mimic", demo.to_str().unwrap(), "--into", "sqlite:demo.db"]).ok();
    let task = repo_root().join("crates/rwe/tasks/lactate-hospital-mortality");
    let args = [
        "--json",
        "study",
        task.to_str().unwrap(),
        "--database",
        "sqlite:demo.db",
        "--max-steps",
        "1",
        "--no-judge",
        "--out",
        "run",
    ];
    // A first process with room for two steps, killed once the first is stored.
    let mut killed_args = args.to_vec();
    killed_args[6] = "2";
    // Killed on every path out of this test, a failed assertion included.
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = KillOnDrop(s.cmd(&killed_args).stdout(std::process::Stdio::null()).spawn().unwrap());
    let steps_file = s.path().join("run/steps.jsonl");
    let started = std::time::Instant::now();
    let first_step = loop {
        let text = std::fs::read_to_string(&steps_file).unwrap_or_default();
        if text.ends_with('\n') && !text.is_empty() {
            break text.lines().next().unwrap().to_string();
        }
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!("the study ended ({status}) before storing a step");
        }
        // About a minute on an idle 2-core machine; far longer when other
        // model runs share it.
        assert!(started.elapsed().as_secs() < 3600, "no step stored in an hour");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    // SIGKILL (a no-op if the first step happened to end the run).
    drop(child);
    // Again, with one step: the stored step is replayed, not repeated.
    let first = s.run(&args).ok().json();
    let report = &first[0];
    assert_eq!(report["task"], "lactate-hospital-mortality");
    assert_eq!(report["strategy"], "r");
    assert_eq!(report["steps"], 1, "{report:#}");
    assert_eq!(report["resumed_steps"], 1);
    assert_eq!(std::fs::read_to_string(&steps_file).unwrap().lines().next().unwrap(), first_step);
    let page = std::fs::read_to_string(s.path().join("run/report.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("<h2>Step trace</h2>"), "{page}");
    assert_eq!(page.matches("<details><summary>Step ").count(), 1);
    let bundle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.path().join("run/bundle.json")).unwrap()).unwrap();
    let steps = bundle["run"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1);
    assert!(!steps[0]["output"].as_str().unwrap().is_empty());
    assert_eq!(bundle["database"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(bundle["task"]["id"], "lactate-hospital-mortality");
    assert!(s.path().join("run/workspace/db_connect.R").is_file());
    // A third time: the finished run is read back from its bundle, nothing repeated.
    let again = s.run(&args).ok().json();
    assert_eq!(again[0]["from_bundle"], true, "{:#}", again[0]);
    assert_eq!(again[0]["resumed_steps"], 1);
    assert_eq!(again[0]["steps"], 1);
    assert_eq!(std::fs::read_to_string(s.path().join("run/steps.jsonl")).unwrap().lines().count(), 1);
}

/// The typed strategy (Evident's) on the embedded model: its answer is
/// decoded under the action schema, so the first step is a valid action
/// (the 0.5B model's free-text answers were all invalid before).
#[test]
fn the_typed_strategy_takes_a_valid_first_step_on_the_embedded_model() {
    let s = Sandbox::new();
    let demo = shared_data().join("mimic-iv-demo");
    s.run(&["db", "load", "mimic", demo.to_str().unwrap(), "--into", "sqlite:demo.db"]).ok();
    let task = repo_root().join("crates/rwe/tasks/lactate-hospital-mortality");
    let args = [
        "--json",
        "study",
        task.to_str().unwrap(),
        "--database",
        "sqlite:demo.db",
        "--strategy",
        "typed",
        "--max-steps",
        "1",
        "--no-judge",
        "--out",
        "run",
    ];
    let report = s.run(&args).ok().json();
    assert_eq!(report[0]["strategy"], "typed");
    assert_eq!(report[0]["steps"], 1, "{report:#}");
    let bundle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.path().join("run/bundle.json")).unwrap()).unwrap();
    let step = &bundle["run"]["steps"][0];
    assert_eq!(step["invalid_outputs"], 0, "{step:#}");
    assert_ne!(step["action"], "(invalid output)", "{step:#}");
    let answer: serde_json::Value = serde_json::from_str(step["output"].as_str().unwrap()).unwrap();
    assert!(answer["action"]["action"].is_string(), "{answer:#}");
}

/// The typed strategy on the embedded model builds a cohort from the
/// database (build_cohort, guided by the [State] line and the loop guard)
/// and the bundle's cohort passes the audit's rule checks: non-empty, every
/// identifier in the database, within the size limit.
#[test]
fn the_typed_strategy_builds_a_cohort_that_passes_the_rule_checks_on_the_embedded_model() {
    let s = Sandbox::new();
    let demo = shared_data().join("mimic-iv-demo");
    s.run(&["db", "load", "mimic", demo.to_str().unwrap(), "--into", "sqlite:demo.db"]).ok();
    let bundle = typed_study_passes_the_rule_checks(&s, "sqlite:demo.db");
    assert_eq!(bundle["database"]["hash_method"], "sqlite-files");
}

/// The same study on PostgreSQL: the demo loaded into a throwaway database
/// on the test server, the same strategy, model and step budget. The
/// cohort passes the rule checks, the bundle records the database's content
/// hash (kept in the store, so the next run reuses it) and no password, the
/// report is written, and the run's read-only role (and the one that hashed
/// the database) is dropped when it ends.
#[test]
fn the_typed_strategy_completes_a_study_on_postgresql_and_drops_its_role() {
    let pg = TempPgDatabase::new();
    let s = Sandbox::new();
    let url = pg.url.expose();
    let demo = shared_data().join("mimic-iv-demo");
    s.run(&["db", "load", "mimic", demo.to_str().unwrap(), "--into", &url]).ok();
    let bundle = typed_study_passes_the_rule_checks(&s, &url);
    assert_eq!(bundle["database"]["url"], pg.url.redacted());
    assert!(!bundle.to_string().contains(":evident@"), "the bundle holds the password");
    // The run read every row and kept the hash in the store: the next run
    // on the unchanged database takes it from there.
    let database = &bundle["database"];
    assert_eq!(
        (database["hash_method"].as_str(), database["hash_from_cache"].as_bool()),
        (Some("postgres-content"), Some(false))
    );
    let again = s.run(&["--json", "db", "hash", &url, "--method", "cached"]).ok().json();
    assert_eq!((&again["hash_from_cache"], &again["sha256"]), (&serde_json::json!(true), &database["sha256"]));
    let roles: i64 =
        pg.client().query_one("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'evident_ro_%'", &[]).unwrap().get(0);
    assert_eq!(roles, 0, "the study's read-only role outlived it");
}

/// Runs the age-baseline task with the typed strategy for three steps on
/// `database` and checks the bundle: a cohort audit whose rule checks all
/// passed, built by build_cohort with its SQL kept, a database hash, and
/// the report page beside it. Returns the bundle.
fn typed_study_passes_the_rule_checks(s: &Sandbox, database: &str) -> serde_json::Value {
    let task = repo_root().join("crates/rwe/tasks/age-baseline-mortality");
    let args = [
        "--json",
        "study",
        task.to_str().unwrap(),
        "--database",
        database,
        "--strategy",
        "typed",
        "--max-steps",
        "3",
        "--no-judge",
        "--out",
        "run",
    ];
    let report = s.run(&args).ok().json();
    let bundle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(s.path().join("run/bundle.json")).unwrap()).unwrap();
    let steps: Vec<&str> =
        bundle["run"]["steps"].as_array().unwrap().iter().map(|s| s["action"].as_str().unwrap()).collect();
    let audit = &bundle["cohort_audit"];
    assert!(audit.is_object(), "no cohort audit file after {steps:?}: {report:#}");
    let checks = audit["rules"]["checks"].as_array().unwrap();
    assert!(checks.iter().all(|c| c["passed"] == true), "{checks:#?} after {steps:?}");
    assert!(audit["rules"]["rows"].as_u64().unwrap() > 0);
    assert!(steps.contains(&"build_cohort"), "{steps:?}");
    assert!(s.path().join("run/workspace/cohort.sql").is_file());
    assert_eq!(bundle["database"]["sha256"].as_str().unwrap().len(), 64);
    let page = std::fs::read_to_string(s.path().join("run/report.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("<h2>Step trace</h2>"), "{page}");
    bundle
}

/// Evident's compiled cohort judge on the embedded model, as a user runs
/// it: one call writes checks whose criteria are sentences of the
/// protocol; every case is then judged by them (none is left unjudged
/// when there is a check), and the table names the judge.
#[test]
fn the_compiled_judge_writes_checks_from_the_protocols_sentences_on_the_embedded_model() {
    let s = Sandbox::new();
    let demo = shared_data().join("mimic-iv-demo");
    s.run(&["db", "load", "mimic", demo.to_str().unwrap(), "--into", "sqlite:demo.db"]).ok();
    let task = repo_root().join("crates/rwe/tasks/lactate-hospital-mortality");
    let task_arg = task.to_str().unwrap();
    let counts = ["--members", "10", "--counterfactuals", "3", "--adversarial", "1", "--runs", "1"];
    let mut args =
        vec!["--json", "eval", "cohort-judge", task_arg, "--database", "sqlite:demo.db", "--judge", "compiled"];
    args.extend(counts);
    let out = s.run(&args).ok().json();
    assert_eq!(out["strategy"], "compiled", "{out}");
    let compiled = &out["compiled"][0];
    assert!(compiled.is_object(), "the embedded model's answer validated: {out}");
    let methods = std::fs::read_to_string(task.join("task.yaml")).unwrap();
    let definition: String = methods.split_whitespace().collect::<Vec<_>>().join(" ");
    let checks = compiled["checks"].as_array().unwrap();
    for check in checks {
        let criterion = check["criterion"].as_str().unwrap();
        assert!(definition.contains(criterion), "{criterion:?} is not a sentence of the protocol");
    }
    let c = &out["confusion"][0];
    let count = |k: &str| c[k].as_u64().unwrap();
    assert_eq!(count("tp") + count("fn") + count("tn") + count("fp") + count("unjudged"), 14, "{c}");
    assert_eq!(count("unjudged") == 0, !checks.is_empty(), "{out}");
    // The table names the judge (the answer now comes from the cache).
    let plain =
        [&["eval", "cohort-judge", task_arg, "--database", "sqlite:demo.db", "--judge", "compiled"][..], &counts]
            .concat();
    let plain = s.run(&plain).ok().stdout();
    assert!(plain.contains("(compiled judge) | 10 / 3 / 1 | 1 |"), "{plain}");
    // The judge and --no-judge together make no sense.
    s.run(&["study", task_arg, "--database", "sqlite:demo.db", "--judge", "compiled", "--no-judge"])
        .fails_with(2, "--no-judge");
}
