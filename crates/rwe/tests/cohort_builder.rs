//! Evident's typed cohort builder (`build_cohort`) and loop guard on the
//! MIMIC-IV demo: the criteria of each development protocol give the R
//! reference's cohort on SQLite and on PostgreSQL, with the attrition
//! table, and the audit's rule checks pass; a typed agent that repeats its
//! previous action is asked again without it; every typed observation ends
//! with the workspace state; the typed strategy cannot type the audit file.

mod support;

use std::path::Path;

use evident_db::testing::TempPgDatabase;
use evident_db::{load_mimic, DatabaseUrl, QueryLimits, ReadOnlyConnection};
use evident_rwe::agent::actions::{parse_typed_response, task_response_schema, Action};
use evident_rwe::agent::cohort::{build_cohort, CohortSpec};
use evident_rwe::agent::env::StudyEnv;
use evident_rwe::agent::{run_agent, study_prompts, AgentConfig, StepStore, Strategy, Termination};
use evident_rwe::audit::{rule_checks, AuditTable, AUDIT_FILE};
use evident_rwe::database::r_database;
use evident_rwe::sandbox::{SandboxConfig, Workspace};
use evident_rwe::{AnswerSheet, Gold, Task};
use support::{demo_sqlite, scripted};

fn demo() -> std::path::PathBuf {
    evident_testdata::shared_data().join("mimic-iv-demo")
}

fn connect(url: &DatabaseUrl) -> ReadOnlyConnection {
    ReadOnlyConnection::connect(url, QueryLimits { max_rows: 50_001, ..QueryLimits::default() }).unwrap()
}

fn spec(json: &str) -> CohortSpec {
    CohortSpec::from_params(serde_json::from_str::<serde_json::Value>(json).unwrap().as_object().unwrap()).unwrap()
}

/// Each development protocol's criteria as build_cohort parameters, and
/// what the task's R reference (gold.json, README) counts.
const PROTOCOLS: &[(&str, &str, usize, &str, f64)] = &[
    (
        "age-baseline-mortality",
        r#"{"groups": [{"name": "older", "column": "age", "at_least": 65}]}"#,
        100,
        "older",
        46.0,
    ),
    (
        "lactate-hospital-mortality",
        r#"{"labs": [{"itemid": 50813, "name": "lactate"}]}"#,
        74,
        "hospital_expire_flag",
        11.0,
    ),
    (
        "rdw-one-year-survival",
        r#"{"labs": [{"itemid": 51277, "name": "rdw"}], "death_within_days": 365, "groups": [{"name": "high_rdw", "column": "rdw", "above": 15.5}]}"#,
        99,
        "high_rdw",
        27.0,
    ),
    (
        "anion-gap-28day-auc",
        r#"{"min_age": 18, "first_icu_stay_only": true, "labs": [{"itemid": 50868, "name": "anion_gap"}], "death_within_days": 28}"#,
        100,
        "death_28d",
        14.0,
    ),
    ("statin-psm-mortality", STATIN, 100, "statin", 44.0),
];

const STATIN: &str = r#"{"labs": [{"itemid": 50912, "name": "creatinine"}], "drug": {"name": "statin", "contains": ["atorvastatin", "simvastatin", "pravastatin", "rosuvastatin", "lovastatin", "fluvastatin", "pitavastatin"]}, "death_within_days": 365}"#;

fn column_sum(table: &AuditTable, name: &str) -> f64 {
    let i = table.columns.iter().position(|c| c == name).unwrap_or_else(|| panic!("no column {name}"));
    table.rows.iter().map(|r| r[i].parse::<f64>().unwrap()).sum()
}

fn check_protocols(url: &DatabaseUrl) {
    let mut conn = connect(url);
    for (task, params, n, column, total) in PROTOCOLS {
        let dir = tempfile::tempdir().unwrap();
        let text = build_cohort(&mut conn, dir.path(), &spec(params)).unwrap();
        let table = AuditTable::read(&dir.path().join(AUDIT_FILE)).unwrap();
        assert_eq!(table.rows.len(), *n, "{task}: {text}");
        assert_eq!(column_sum(&table, column), *total, "{task}: {column}");
        let rules = rule_checks(&table, &mut conn).unwrap();
        assert!(rules.passed(), "{task}: {rules:?}");
        assert!(text.starts_with(&format!("Cohort built: {n} stays")), "{text}");
        // The attrition table reads back and ends at the cohort's size.
        let attrition = evident_rwe::report::AttritionReport::read(dir.path(), Some(table.rows.len()));
        assert_eq!(attrition.agrees_with_audit(), Some(true), "{task}: {attrition:?}");
        let sql = std::fs::read_to_string(dir.path().join("cohort.sql")).unwrap();
        assert!(sql.starts_with("SELECT c.*") && sql.contains("c.age >= 18"), "{sql}");
    }
    // The lactate cohort gives the reference's odds ratio through the typed tool.
    let dir = tempfile::tempdir().unwrap();
    build_cohort(&mut conn, dir.path(), &spec(PROTOCOLS[1].1)).unwrap();
    let attrition = std::fs::read_to_string(dir.path().join("attrition.csv")).unwrap();
    assert_eq!(
        attrition,
        "step,kind,remaining\n\"ICU stays in the database\",source,140\n\"first ICU stay of each patient\",inclusion,100\n\
         \"age at ICU admission >= 18\",inclusion,100\n\
         \"excluded: no lactate (itemid 50813, Lactate) from 6 h before to 24 h after ICU admission\",exclusion,74\n"
    );
}

#[test]
fn each_protocols_criteria_give_the_reference_cohort_on_sqlite() {
    check_protocols(demo_sqlite());
}

#[test]
fn each_protocols_criteria_give_the_reference_cohort_on_postgres() {
    let pg = TempPgDatabase::new();
    load_mimic(&demo(), &pg.url, &mut |_| {}).unwrap();
    check_protocols(&pg.url);
}

#[test]
fn bad_criteria_say_what_to_fix() {
    let err = |json: &str| {
        CohortSpec::from_params(serde_json::from_str::<serde_json::Value>(json).unwrap().as_object().unwrap())
            .unwrap_err()
    };
    assert!(err(r#"{"labs": [{"itemid": 50813, "name": "1; DROP"}]}"#).contains("not a usable column name"));
    assert!(err(r#"{"labs": [{"itemid": 50813, "name": "age"}]}"#).contains("not a usable column name"));
    assert!(err(r#"{"labs": [{"name": "lactate"}]}"#).contains("needs \"itemid\""));
    assert!(err(r#"{"drug": {"name": "statin", "contains": ["x' OR 1=1 --"]}}"#).contains("letters, digits"));
    assert!(err(r#"{"min_age": -3}"#).contains("whole number"));
    assert!(err(r#"{"labs": [{"itemid": 1, "name": "a"}, {"itemid": 2, "name": "a"}]}"#)
        .contains("the lab itemid 1 and the lab itemid 2 are both named \"a\""));
    let clash = err(
        r#"{"labs": [{"itemid": 50912, "name": "statin"}], "drug": {"name": "statin", "contains": ["atorvastatin"]}}"#,
    );
    assert!(clash.contains("the lab itemid 50912 and the drug are both named \"statin\""), "{clash}");
    assert!(clash.contains("name a lab after what it measures"), "{clash}");
    let e = err(r#"{"groups": [{"name": "high", "column": "lactate", "above": 2}]}"#);
    assert!(e.contains("group high cuts column \"lactate\", which is not one of age"), "{e}");
    let e = err(r#"{"groups": [{"name": "older", "column": "age"}]}"#);
    assert!(e.contains("needs one of \"at_least\" or \"above\""), "{e}");
    let e = err(r#"{"groups": [{"name": "female", "column": "age", "at_least": 65}]}"#);
    assert!(e.contains("not a usable column name: the cohort already has a column female"), "{e}");
}

/// Criteria that name no laboratory item, match no prescription or leave
/// nobody are refused with what to do, and nothing is written.
#[test]
fn criteria_that_cannot_hold_a_cohort_are_refused_and_write_nothing() {
    let mut conn = connect(demo_sqlite());
    let dir = tempfile::tempdir().unwrap();
    let refused = |conn: &mut ReadOnlyConnection, json: &str| build_cohort(conn, dir.path(), &spec(json)).unwrap_err();
    let e = refused(&mut conn, r#"{"labs": [{"itemid": 6, "name": "stays without one excluded"}]}"#);
    assert!(e.starts_with("itemid 6 is not a laboratory item"), "{e}");
    let e = refused(&mut conn, r#"{"drug": {"name": "x", "contains": ["one of the words"]}}"#);
    assert!(e.starts_with("no prescription name contains any of [\"one of the words\"]"), "{e}");
    let e = refused(&mut conn, r#"{"min_age": 120}"#);
    assert!(e.starts_with("these criteria leave no stay (ICU stays in the database: 140;"), "{e}");
    assert!(e.contains("age at ICU admission >= 120: 0"), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing written");
}

fn typed_env(run_dir: &Path, task: &str) -> StudyEnv {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks").join(task);
    let task = Task::load(&dir.join("task.yaml")).unwrap().task;
    let gold = Gold::load(&dir.join("gold.json"), &task).unwrap();
    let ws = Workspace::create(&run_dir.join("workspace"), r_database(demo_sqlite()).unwrap(), &[]).unwrap();
    StudyEnv::new(AnswerSheet::new(task, gold), ws, SandboxConfig::default(), Some(connect(demo_sqlite())))
}

/// The typed agent repeating its previous action: the repeat is not run,
/// the turn asks again under a schema without that action, and the step
/// records the refused repeat; every observation ends with the state; an
/// audit file typed with write_file is refused.
#[test]
fn a_repeated_action_is_asked_again_without_it_and_observations_carry_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let list = r#"{"thought": "look", "action": {"action": "list_files", "params": {"path": "."}}}"#;
    let script = [
        list,
        list,
        r#"{"thought": "write it", "action": {"action": "write_file", "params": {"path": "./cohort_audit.csv", "content": "the cohort"}}}"#,
        r#"{"thought": "build", "action": {"action": "build_cohort", "params": {}}}"#,
        r#"{"thought": "answer", "action": {"action": "submit_answers", "params": {"answers": {"n_patients": 100, "q_age": "C"}}}}"#,
        r#"{"thought": "stop", "action": {"action": "finish_task", "params": {}}}"#,
    ];
    let model = scripted(&script);
    let mut env = typed_env(dir.path(), "age-baseline-mortality");
    let config = AgentConfig::paper(Strategy::Typed);
    let store = StepStore::new(dir.path());
    let run = run_agent(&model, &scripted::<&str>(&[]), &mut env, &study_prompts(None), &config, &store, &[]).unwrap();
    assert_eq!(run.termination, Termination::Finished);
    let actions: Vec<&str> = run.steps.iter().map(|s| s.action.as_str()).collect();
    assert_eq!(actions, ["list_files", "write_file", "build_cohort", "submit_answers", "finish_task"]);
    assert_eq!(run.steps[1].repeats_refused, 1);
    assert_eq!(run.steps[0].repeats_refused, 0);
    let requests = model.requests();
    let start = typed_env(tempfile::tempdir().unwrap().path(), "age-baseline-mortality").response_schema(&[]);
    assert_eq!(requests[0].json_schema.as_ref(), Some(&start));
    let second = requests[2].json_schema.as_ref().unwrap().to_string();
    assert!(!second.contains("\"list_files\"") && second.contains("\"build_cohort\""), "{second}");
    let notice = &requests[2].messages.last().unwrap().content;
    assert!(notice.starts_with("This repeats one of your last actions exactly (list_files"), "{notice}");
    assert!(notice.contains("[State] No cohort_audit.csv yet"), "{notice}");
    // Observations: the state before and after the cohort.
    assert!(run.steps[0].observation.ends_with("or run_sql with save_as \"cohort_audit.csv\"."));
    assert!(run.steps[1].observation.contains("is written from the database: use build_cohort"));
    assert!(
        run.steps[2].observation.contains("Cohort built: 100 stays (100 patients)"),
        "{}",
        run.steps[2].observation
    );
    assert!(
        run.steps[2].observation.contains("[State] cohort_audit.csv: 100 rows; columns subject_id, hadm_id, stay_id"),
        "{}",
        run.steps[2].observation
    );
    let state = |i: usize| run.steps[i].observation.split("[State]").nth(1).unwrap().to_string();
    assert!(state(2).contains("Unanswered: n_patients, n_female") && state(2).contains("q_age"), "{}", state(2));
    assert!(!state(3).contains("q_age") && !state(3).contains("n_patients"), "{}", state(3));
    assert!(state(3).contains("mortality_older_pct"), "revealed by the right choice: {}", state(3));
    // A resumed run replays the refused repeat as stored.
    let stored = StepStore::new(dir.path()).load().unwrap();
    assert_eq!(stored[1].repeats_refused, 1);
    assert!(matches!(parse_typed_response(&stored[1].output, Strategy::Typed), Ok(Action::WriteFile { .. })));
}

/// The statin task's matched comparison through the typed tools on
/// build_cohort's cohort: the propensity tool's default (1:1, logit, caliper
/// 0.2 SD, exact distances) gives the reference's 31 pairs, 17 deaths and,
/// on its model-based line, the reference's Wald odds ratio (gold.json,
/// written by base-R matching; MatchIt 4.5.1's truncated distances gave 44
/// pairs).
#[test]
fn the_statin_cohort_and_the_propensity_tool_give_the_reference_match() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = typed_env(dir.path(), "statin-psm-mortality");
    let params = serde_json::from_str::<serde_json::Value>(STATIN).unwrap().as_object().unwrap().clone();
    let built = env.execute(1, &Action::BuildCohort { params });
    assert!(built.text.starts_with("Cohort built: 100 stays"), "{}", built.text);
    let psm = serde_json::json!({"file": "cohort_audit.csv", "treatment": "statin", "covariates": ["age", "female", "creatinine"], "outcome": "death_365d"});
    let action = Action::Statistics {
        tool: evident_rwe::agent::actions::StatsTool::PropensityMatching,
        params: psm.as_object().unwrap().clone(),
    };
    let out = env.execute(2, &action).text;
    assert!(out.contains("31 of 44 treated matched to 31 controls (62 units)"), "{out}");
    assert!(out.contains("outcome events in the matched sample: 17"), "{out}");
    assert!(out.contains("model-based (Wald) on the matched sample: estimate 0.612500, 95% CI 0.197944 to 1.895261, p-value 3.950011e-1"), "{out}");
}

/// build_cohort's schema offers only the criteria a protocol has: the
/// itemids it names, a drug column where it mentions prescriptions.
#[test]
fn the_cohort_schema_follows_the_protocol() {
    let schema = |task: &str| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks").join(task);
        let task = Task::load(&dir.join("task.yaml")).unwrap().task;
        let all = task_response_schema(&task, &[]);
        let branch = all["properties"]["action"]["anyOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["properties"]["action"]["const"] == "build_cohort")
            .unwrap()
            .clone();
        branch["properties"]["params"]["properties"].clone()
    };
    let age = schema("age-baseline-mortality");
    assert!(age.get("labs").is_none() && age.get("drug").is_none() && age.get("min_age").is_some(), "{age}");
    let lactate = schema("lactate-hospital-mortality");
    assert_eq!(lactate["labs"]["items"]["properties"]["itemid"], serde_json::json!({"enum": [50813]}));
    assert!(lactate.get("drug").is_none());
    let statin = schema("statin-psm-mortality");
    assert_eq!(statin["labs"]["items"]["properties"]["itemid"], serde_json::json!({"enum": [50912]}));
    assert!(statin.get("drug").is_some());
}

/// An action that failed twice in a row is left out of the next answer's
/// schema, and the second failure says so.
#[test]
fn an_action_failing_twice_in_a_row_is_not_offered_next() {
    let dir = tempfile::tempdir().unwrap();
    let script = [
        r#"{"thought": "a", "action": {"action": "run_sql", "params": {"sql": "SELECT FROM"}}}"#,
        r#"{"thought": "b", "action": {"action": "run_sql", "params": {"sql": "SELECT x FROM nowhere"}}}"#,
        r#"{"thought": "c", "action": {"action": "build_cohort", "params": {"min_age": 18}}}"#,
        r#"{"thought": "stop", "action": {"action": "finish_task", "params": {}}}"#,
    ];
    let model = scripted(&script);
    let mut env = typed_env(dir.path(), "age-baseline-mortality");
    let config = AgentConfig::paper(Strategy::Typed);
    let run = run_agent(
        &model,
        &scripted::<&str>(&[]),
        &mut env,
        &study_prompts(None),
        &config,
        &StepStore::new(dir.path()),
        &[],
    )
    .unwrap();
    assert_eq!(run.termination, Termination::Finished);
    assert!(!run.steps[0].observation.contains("failed twice"), "{}", run.steps[0].observation);
    assert!(run.steps[1].observation.contains("run_sql failed twice in a row; your next answer cannot use it."));
    let requests = model.requests();
    assert_eq!(requests[1].json_schema, requests[0].json_schema);
    let third = requests[2].json_schema.as_ref().unwrap().to_string();
    assert!(!third.contains("\"run_sql\"") && third.contains("\"build_cohort\""), "{third}");
    let fourth = requests[3].json_schema.as_ref().unwrap().to_string();
    assert!(fourth.contains("\"run_sql\""), "offered again after another action");
    assert!(run.steps[2].observation.starts_with("Cohort built: 100 stays"), "{}", run.steps[2].observation);
}

fn run_typed(dir: &Path, task: &str, script: &[&str]) -> (evident_rwe::agent::AgentRun, Vec<evident_llm::ChatRequest>) {
    let model = scripted(script);
    let mut env = typed_env(dir, task);
    let config = AgentConfig::paper(Strategy::Typed);
    let store = StepStore::new(dir);
    let run = run_agent(&model, &scripted::<&str>(&[]), &mut env, &study_prompts(None), &config, &store, &[]).unwrap();
    (run, model.requests())
}

/// The branch of one action in a typed request's schema, if offered.
fn branch(request: &evident_llm::ChatRequest, action: &str) -> Option<serde_json::Value> {
    let schema = request.json_schema.as_ref().unwrap();
    schema["properties"]["action"]["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["properties"]["action"]["const"] == action)
        .map(|b| b["properties"]["params"].clone())
}

/// submit_answers' schema names only the open questions (visible and
/// unanswered), a choice's value is one of its option letters, a count a
/// whole number; it is not offered before the audit file exists. An answer
/// to a made-up id, an option the question does not have or a count with a
/// fraction is an invalid output, told what is open, and not run.
#[test]
fn submit_answers_offers_only_the_open_questions_with_their_types() {
    use evident_llm::SchemaValidator;
    let dir = tempfile::tempdir().unwrap();
    let made_up = r#"{"thought": "answer", "action": {"action": "submit_answers", "params": {"answers": {"1": "A"}}}}"#;
    let no_option =
        r#"{"thought": "answer", "action": {"action": "submit_answers", "params": {"answers": {"q_age": "D"}}}}"#;
    let fraction =
        r#"{"thought": "answer", "action": {"action": "submit_answers", "params": {"answers": {"n_patients": 99.5}}}}"#;
    let good = r#"{"thought": "answer", "action": {"action": "submit_answers", "params": {"answers": {"q_age": "C", "n_patients": 100}}}}"#;
    let script = [
        r#"{"thought": "build", "action": {"action": "build_cohort", "params": {}}}"#,
        made_up,
        no_option,
        fraction,
        good,
        r#"{"thought": "stop", "action": {"action": "finish_task", "params": {}}}"#,
    ];
    let (run, requests) = run_typed(dir.path(), "age-baseline-mortality", &script);
    assert_eq!(run.termination, Termination::Finished);
    let actions: Vec<&str> = run.steps.iter().map(|s| s.action.as_str()).collect();
    assert_eq!(actions, ["build_cohort", "submit_answers", "finish_task"]);
    assert_eq!(run.steps[1].invalid_outputs, 3, "three answers refused by the schema, not run");
    assert!(
        run.steps[1].observation.starts_with("q_age: accepted (UNSUPPORTED: chosen before any effect or test was computed)\nn_patients: accepted (100, matches stays of step 1)"),
        "{}",
        run.steps[1].observation
    );
    assert!(branch(&requests[0], "submit_answers").is_none(), "not offered before the audit file");
    let submit = branch(&requests[1], "submit_answers").unwrap();
    let open = &submit["properties"]["answers"]["anyOf"][0]["properties"];
    let ids: Vec<&str> = open.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(ids, ["n_patients", "n_female", "pct_female", "median_age", "n_older", "n_deaths", "q_age"]);
    assert_eq!(open["q_age"], serde_json::json!({"type": "string", "enum": ["A", "B", "C"]}));
    // A count takes a whole number, or build_cohort's count of stays by reference.
    assert_eq!(open["n_patients"]["anyOf"][0], serde_json::json!({"type": "integer", "minimum": 0}));
    assert_eq!(open["n_patients"]["anyOf"][1]["properties"]["from_result"]["enum"], serde_json::json!(["stays"]));
    assert_eq!(open["pct_female"], serde_json::json!({"type": "number", "minimum": 0, "maximum": 100}));
    let validator = SchemaValidator::new(requests[1].json_schema.as_ref().unwrap()).unwrap();
    for refused in [made_up, no_option, fraction] {
        assert!(validator.check(refused).is_err(), "the decoding grammar refuses {refused}");
    }
    assert!(validator.check(good).is_ok());
    let retry = |i: usize| requests[i].messages.last().unwrap().content.clone();
    assert!(
        retry(2).contains("\"1\" is not an open question; the open questions are n_patients, n_female"),
        "{}",
        retry(2)
    );
    assert!(retry(3).contains("q_age: "), "{}", retry(3));
    assert!(retry(4).contains("n_patients: "), "{}", retry(4));
    // After the right choice: answered ids gone, its fields revealed with
    // their types (a p-value from 0 to 1).
    let open =
        branch(&requests[5], "submit_answers").unwrap()["properties"]["answers"]["anyOf"][0]["properties"].clone();
    let ids: Vec<&str> = open.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        ids,
        [
            "n_female",
            "pct_female",
            "median_age",
            "n_older",
            "n_deaths",
            "mortality_older_pct",
            "mortality_younger_pct",
            "p_fisher"
        ]
    );
    assert_eq!(open["p_fisher"], serde_json::json!({"type": "number", "minimum": 0, "maximum": 1}));
}

/// The statistics tools act only on the workspace's CSV tables, each
/// column parameter one of that table's numeric columns (identifiers left
/// out), a 0/1 column where the tool needs one; no tool is offered before a
/// table exists. A made-up column, a path that is not a workspace table, or
/// a continuous outcome for a logistic model is an invalid output, not run.
#[test]
fn statistics_tools_take_only_the_columns_of_the_tables_built() {
    use evident_llm::SchemaValidator;
    let dir = tempfile::tempdir().unwrap();
    let logistic = |file: &str, outcome: &str| {
        format!(
            r#"{{"thought": "fit", "action": {{"action": "logistic_regression", "params": {{"file": "{file}", "outcome": "{outcome}", "predictors": ["lactate", "age", "female"]}}}}}}"#
        )
    };
    let made_up = logistic("cohort_audit.csv", "died");
    let elsewhere = logistic("/path/to/cohort_audit.csv", "hospital_expire_flag");
    let continuous = logistic("cohort_audit.csv", "age");
    let good = logistic("cohort_audit.csv", "hospital_expire_flag");
    let script = [
        r#"{"thought": "build", "action": {"action": "build_cohort", "params": {"labs": [{"itemid": 50813, "name": "lactate"}]}}}"#,
        &made_up,
        &elsewhere,
        &continuous,
        &good,
        r#"{"thought": "a table", "action": {"action": "write_file", "params": {"path": "extra.csv", "content": "older,score\n0,1.5\n1,2\n"}}}"#,
        r#"{"thought": "stop", "action": {"action": "finish_task", "params": {}}}"#,
    ];
    let (run, requests) = run_typed(dir.path(), "lactate-hospital-mortality", &script);
    assert_eq!(run.termination, Termination::Finished);
    let actions: Vec<&str> = run.steps.iter().map(|s| s.action.as_str()).collect();
    assert_eq!(actions, ["build_cohort", "logistic_regression", "write_file", "finish_task"]);
    assert_eq!(run.steps[1].invalid_outputs, 3);
    assert!(run.steps[1].observation.contains("lactate, 1.3595"), "{}", run.steps[1].observation);
    assert!(branch(&requests[0], "logistic_regression").is_none() && branch(&requests[0], "describe").is_none());
    let fit = branch(&requests[1], "logistic_regression").unwrap();
    assert_eq!(fit["properties"]["file"], serde_json::json!({"const": "cohort_audit.csv"}));
    assert_eq!(fit["properties"]["outcome"], serde_json::json!({"enum": ["female", "hospital_expire_flag"]}));
    let numeric = serde_json::json!(["age", "female", "hospital_expire_flag", "days_to_death", "lactate"]);
    assert_eq!(fit["properties"]["predictors"]["items"], serde_json::json!({"enum": numeric}));
    let validator = SchemaValidator::new(requests[1].json_schema.as_ref().unwrap()).unwrap();
    for refused in [&made_up, &elsewhere, &continuous] {
        assert!(validator.check(refused).is_err(), "the decoding grammar refuses {refused}");
    }
    let retry = |i: usize| requests[i].messages.last().unwrap().content.clone();
    assert!(retry(2).contains("logistic_regression: at /outcome: \"died\""), "{}", retry(2));
    assert!(retry(3).contains("file \"/path/to/cohort_audit.csv\" is not offered"), "{}", retry(3));
    assert!(retry(4).contains("at /outcome: \"age\""), "{}", retry(4));
    // A second table: each tool's file is one of the two, with its own columns.
    let fit = branch(&requests[6], "logistic_regression").unwrap();
    let tables = fit["anyOf"].as_array().unwrap();
    assert_eq!(tables.len(), 2);
    assert_eq!(tables[1]["properties"]["file"], serde_json::json!({"const": "extra.csv"}));
    assert_eq!(tables[1]["properties"]["outcome"], serde_json::json!({"enum": ["older"]}));
    assert_eq!(tables[1]["properties"]["predictors"]["items"], serde_json::json!({"enum": ["older", "score"]}));
}

/// run_sql with save_as "cohort_audit.csv" replaces the audit file only
/// with a result that passes the audit's rule checks: a result without a
/// record identifier, with a fabricated patient, or empty is refused with
/// the failed rules, and the file is left as it was (or not written).
#[test]
fn run_sql_does_not_overwrite_the_audit_file_with_a_failing_cohort() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = typed_env(dir.path(), "age-baseline-mortality");
    let audit = dir.path().join("workspace").join(AUDIT_FILE);
    let save = |sql: &str| Action::RunSql { sql: sql.to_string(), save_as: Some(AUDIT_FILE.to_string()) };
    let first = env.execute(1, &save("SELECT subject_id FROM mimiciv_hosp.patients"));
    assert!(
        first.text.starts_with("The action failed: cohort_audit.csv not saved: the result fails the cohort audit's rule checks: identifiers"),
        "{}",
        first.text
    );
    assert!(first.text.contains("no file was written") && !audit.exists(), "{}", first.text);
    let built = env.execute(2, &Action::BuildCohort { params: serde_json::Map::new() });
    assert!(built.text.starts_with("Cohort built: 100 stays"), "{}", built.text);
    let good = std::fs::read(&audit).unwrap();
    for (sql, rule) in [
        ("SELECT subject_id, anchor_age FROM mimiciv_hosp.patients", "identifiers"),
        (
            "SELECT 99999999 AS subject_id, stay_id FROM mimiciv_icu.icustays",
            "subject_id_exists (1 not in mimiciv_hosp.patients (99999999))",
        ),
        ("SELECT subject_id, stay_id FROM mimiciv_icu.icustays WHERE stay_id < 0", "non_empty (0 rows)"),
    ] {
        let out = env.execute(3, &save(sql)).text;
        assert!(out.starts_with("The action failed: cohort_audit.csv not saved"), "{out}");
        assert!(out.contains(rule) && out.contains("the existing file is unchanged"), "{sql}: {out}");
        assert_eq!(std::fs::read(&audit).unwrap(), good, "{sql}: the audit file is unchanged");
    }
    // A result that passes replaces it; other files are saved as before.
    let out = env.execute(4, &save("SELECT subject_id, hadm_id, stay_id FROM mimiciv_icu.icustays")).text;
    assert!(out.ends_with("Saved all 140 rows to cohort_audit.csv."), "{out}");
    assert_ne!(std::fs::read(&audit).unwrap(), good);
    let other = Action::RunSql { sql: "SELECT 1 AS x".into(), save_as: Some("x.csv".into()) };
    assert!(env.execute(5, &other).text.ends_with("Saved all 1 rows to x.csv."));
}

/// The typed schema after the cohort compiles in llguidance, the embedded
/// model's grammar engine (as the llama provider sets it up: compact
/// whitespace), and a decoding under it can write a valid answer but not a
/// made-up question id, a made-up column or a file that is not a table.
#[test]
fn the_embedded_grammar_holds_the_post_cohort_schema() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = typed_env(dir.path(), "lactate-hospital-mortality");
    let params = serde_json::json!({"labs": [{"itemid": 50813, "name": "lactate"}]});
    env.execute(1, &Action::BuildCohort { params: params.as_object().unwrap().clone() });
    let mut schema = env.response_schema(&[]);
    schema["x-guidance"] = serde_json::json!({"whitespace_flexible": false});
    let tok_env = toktrie::ApproximateTokEnv::single_byte_env();
    let factory = llguidance::ParserFactory::new_simple(&tok_env).unwrap();
    // How many bytes of `answer` a decoding under the schema can produce.
    let accepted = |answer: &str| {
        let grammar = llguidance::api::TopLevelGrammar::from_json_schema(schema.clone());
        let mut matcher = llguidance::Matcher::new(factory.create_parser(grammar));
        assert!(!matcher.is_error(), "llguidance compiles the schema");
        let tokens = tok_env.tokenize_bytes(answer.as_bytes());
        let n = matcher.validate_tokens(&tokens).unwrap();
        (n, tokens.len())
    };
    let ok = [
        r#"{"thought":"fit","action":{"action":"logistic_regression","params":{"file":"cohort_audit.csv","outcome":"hospital_expire_flag","predictors":["lactate","age"]}}}"#,
        r#"{"thought":"answer","action":{"action":"submit_answers","params":{"answers":{"n_patients":74,"q_lactate":"A"}}}}"#,
        r#"{"thought":"answer","action":{"action":"submit_answers","params":{"answers":{"n_patients":{"from_result":"stays"},"q_lactate":"A"}}}}"#,
    ];
    for answer in ok {
        let (n, all) = accepted(answer);
        assert_eq!(n, all, "accepted whole: {answer}");
    }
    let refused = [
        (r#"{"thought":"answer","action":{"action":"submit_answers","params":{"answers":{"1":"A"}}}}"#, r#""1""#),
        (
            r#"{"thought":"answer","action":{"action":"submit_answers","params":{"answers":{"q_lactate":"E"}}}}"#,
            r#""E""#,
        ),
        (
            r#"{"thought":"answer","action":{"action":"submit_answers","params":{"answers":{"n_patients":{"from_result":"made_up"}}}}}"#,
            r#""made_up""#,
        ),
        (
            r#"{"thought":"fit","action":{"action":"logistic_regression","params":{"file":"cohort_audit.csv","outcome":"died","predictors":["lactate"]}}}"#,
            r#""died""#,
        ),
        (
            r#"{"thought":"fit","action":{"action":"describe","params":{"file":"/path/to/cohort_audit.csv","columns":["age"]}}}"#,
            r#""/path"#,
        ),
    ];
    for (answer, wrong) in refused {
        let (n, _) = accepted(answer);
        let at = answer.find(wrong).unwrap();
        assert!(n > at && n < at + wrong.len(), "refused at {wrong}: {n} of {answer}");
    }
}

/// describe_table names one of the database's tables, read_file one of the
/// workspace's files, execute_r_script one of its R scripts: the audit
/// file named as a database table, a misspelt table or a placeholder path
/// is an invalid output, not run (the 0.5B model sent each of these).
#[test]
fn tables_and_files_are_named_from_what_exists() {
    let dir = tempfile::tempdir().unwrap();
    let describe = |t: &str| {
        format!(r#"{{"thought": "look", "action": {{"action": "describe_table", "params": {{"table": "{t}"}}}}}}"#)
    };
    let read =
        |p: &str| format!(r#"{{"thought": "read", "action": {{"action": "read_file", "params": {{"path": "{p}"}}}}}}"#);
    let script = [
        describe("cohort_audit.csv"),
        describe("imiciv_hosp.patients"),
        describe("mimiciv_hosp.patients"),
        read("/path/to/your/workspace/db_connect.R"),
        read("db_connect.R"),
        r#"{"thought": "run", "action": {"action": "execute_r_script", "params": {"path": "/path/to/db_connect.R"}}}"#
            .into(),
        r#"{"thought": "stop", "action": {"action": "finish_task", "params": {}}}"#.into(),
    ];
    let script: Vec<&str> = script.iter().map(String::as_str).collect();
    let (run, requests) = run_typed(dir.path(), "age-baseline-mortality", &script);
    let actions: Vec<&str> = run.steps.iter().map(|s| s.action.as_str()).collect();
    assert_eq!(actions, ["describe_table", "read_file", "finish_task"]);
    assert_eq!(run.steps.iter().map(|s| s.invalid_outputs).collect::<Vec<_>>(), [2, 1, 1]);
    // The table's description is one line of JSON (the [State] line follows).
    let first_line = run.steps[0].observation.lines().next().unwrap();
    let described: serde_json::Value = serde_json::from_str(first_line).expect(&run.steps[0].observation);
    assert_eq!(described["name"], "patients");
    let tables = branch(&requests[0], "describe_table").unwrap()["properties"]["table"]["enum"].clone();
    let tables: Vec<&str> = tables.as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert!(tables.contains(&"mimiciv_icu.icustays") && tables.contains(&"mimiciv_derived.age"), "{tables:?}");
    assert!(!tables.contains(&"cohort_audit.csv"));
    assert_eq!(
        branch(&requests[3], "read_file").unwrap()["properties"]["path"],
        serde_json::json!({"enum": ["db_connect.R"]})
    );
    assert_eq!(
        branch(&requests[5], "execute_r_script").unwrap()["properties"]["path"],
        serde_json::json!({"enum": ["db_connect.R"]})
    );
    let retry = requests[1].messages.last().unwrap().content.clone();
    assert!(retry.contains("describe_table: at /table: \"cohort_audit.csv\""), "{retry}");
}

/// Answers computed, not guessed (Evident's typed strategy): each
/// statistics tool's numbers are kept under keys `"STEP:NAME"`, listed
/// after its text; a field can then be submitted as `{"from_result": KEY}`
/// (only the keys of results that can fill that field's type are offered),
/// and Evident fills in the number from the stored result. Every accepted
/// answer records its basis; a typed number no tool produced is accepted,
/// scored and flagged unsupported, in the trace and in the stored answers;
/// a resumed run keeps the results citable.
#[test]
fn answers_cite_the_results_they_come_from_and_guesses_are_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let act = |action: &str, params: &str| {
        format!(r#"{{"thought": "t", "action": {{"action": "{action}", "params": {params}}}}}"#)
    };
    let script = [
        act("build_cohort", r#"{"labs": [{"itemid": 50813, "name": "lactate"}]}"#),
        act("describe", r#"{"file": "cohort_audit.csv", "columns": ["lactate", "hospital_expire_flag"]}"#),
        act(
            "logistic_regression",
            r#"{"file": "cohort_audit.csv", "outcome": "hospital_expire_flag", "predictors": ["lactate", "age", "female"]}"#,
        ),
        act(
            "submit_answers",
            r#"{"answers": {"q_lactate": "A", "n_patients": {"from_result": "rows"}, "n_deaths": {"from_result": "hospital_expire_flag"}, "median_lactate": {"from_result": "lactate"}}}"#,
        ),
        // The age term is not the exposure, but it is a result that can fill
        // a ratio: the model's choice, recorded as such.
        act(
            "submit_answers",
            r#"{"answers": {"or_lactate": {"from_result": "OR lactate"}, "or_lactate_low": {"from_result": "OR lactate"}, "or_lactate_high": {"from_result": "OR lactate"}, "p_lactate": 0.5}}"#,
        ),
    ];
    let script: Vec<&str> = script.iter().map(String::as_str).collect();
    let (run, requests) = run_typed(dir.path(), "lactate-hospital-mortality", &script);
    assert_eq!(run.termination, Termination::Completed, "{:?}", run.steps.last());
    let actions: Vec<&str> = run.steps.iter().map(|s| s.action.as_str()).collect();
    assert_eq!(actions, ["build_cohort", "describe", "logistic_regression", "submit_answers", "submit_answers"]);
    // The state names, for what no result fills yet, the tool that computes it.
    let state = run.steps[0].observation.split("[State]").nth(1).unwrap();
    assert!(state.contains("Results can fill: n_patients (stays); n_deaths (stays)."), "{state}");
    assert!(
        state
            .contains("Compute on cohort_audit.csv: median_lactate with describe; q_lactate with logistic_regression."),
        "{state}"
    );
    // Once the cohort exists, the tables and files are named by the schema
    // (describe_table, read_file): listing them is not offered.
    assert!(branch(&requests[0], "list_tables").is_some() && branch(&requests[0], "list_files").is_some());
    assert!(branch(&requests[1], "list_tables").is_none() && branch(&requests[1], "list_files").is_none());
    assert!(branch(&requests[1], "describe_table").is_some() && branch(&requests[1], "read_file").is_some());
    // Each tool's observation lists its results after its text.
    let describe = &run.steps[1].observation;
    assert!(
        describe.starts_with("lactate: n 74") && describe.contains("\nResults you can submit by reference"),
        "{describe}"
    );
    assert!(describe.contains("- rows: 74 (count)"), "{describe}");
    assert!(describe.contains("- hospital_expire_flag: 11 of 74 are 1"), "{describe}");
    assert!(
        run.steps[2].observation.contains("- OR lactate: odds ratio 1.360 (95% CI 1.035-1.785)"),
        "{}",
        run.steps[2].observation
    );
    // The schema after the regression: a field takes its own value or a
    // result that can fill its type, nothing else.
    let open =
        branch(&requests[3], "submit_answers").unwrap()["properties"]["answers"]["anyOf"][0]["properties"].clone();
    assert_eq!(
        open["n_patients"]["anyOf"][1]["properties"]["from_result"]["enum"],
        serde_json::json!(["stays", "rows", "hospital_expire_flag"])
    );
    assert_eq!(open["median_lactate"]["anyOf"][1]["properties"]["from_result"]["enum"], serde_json::json!(["lactate"]));
    assert_eq!(open["q_lactate"], serde_json::json!({"type": "string", "enum": ["A", "B", "C"]}));
    let validator = evident_llm::SchemaValidator::new(requests[3].json_schema.as_ref().unwrap()).unwrap();
    assert!(validator.check(script[3]).is_ok());
    let wrong_type = act("submit_answers", r#"{"answers": {"n_patients": {"from_result": "lactate"}}}"#);
    assert!(validator.check(&wrong_type).is_err(), "a continuous column cannot fill a count");
    let ratio = branch(&requests[4], "submit_answers").unwrap()["properties"]["answers"]["anyOf"][0]["properties"]
        ["or_lactate"]
        .clone();
    assert_eq!(
        ratio["anyOf"][1]["properties"]["from_result"]["enum"],
        serde_json::json!(["OR lactate", "OR age", "OR female"])
    );
    // Resolved from the tools' numbers: the reference analysis's values.
    let answers = &run.steps[4].answers;
    let number = |id: &str| match &answers[id].value {
        evident_rwe::AnswerValue::Number(x) => *x,
        other => panic!("{id}: {other:?}"),
    };
    assert_eq!(number("n_patients"), 74.0);
    assert_eq!(number("n_deaths"), 11.0);
    assert!((number("median_lactate") - 2.65).abs() < 1e-9);
    assert!((number("or_lactate") - 1.35954266204054).abs() < 1e-6, "{}", number("or_lactate"));
    assert!((number("or_lactate_low") - 1.0353942321175).abs() < 1e-6);
    assert!((number("or_lactate_high") - 1.78517147630635).abs() < 1e-6);
    use evident_rwe::provenance::AnswerBasis;
    assert_eq!(
        answers["or_lactate"].basis,
        Some(AnswerBasis::FromResult { key: "OR lactate".into(), step: 3, tool: "logistic_regression".into() })
    );
    assert_eq!(
        answers["q_lactate"].basis,
        Some(AnswerBasis::AfterAnalysis { keys: vec!["OR lactate".into(), "OR age".into(), "OR female".into()] })
    );
    assert!(
        matches!(&answers["p_lactate"].basis, Some(AnswerBasis::Unsupported { reason }) if reason.contains("0.5 matches no number"))
    );
    let trace = &run.steps[4].observation;
    assert!(trace.contains("or_lactate: accepted (1.35954"), "{trace}");
    assert!(trace.contains("from result OR lactate)"), "{trace}");
    assert!(trace.contains("p_lactate: accepted (0.5, UNSUPPORTED: 0.5 matches no number a tool produced)"), "{trace}");
    // Stored with the step, so a resumed run (and the bundle) keeps them.
    let stored = StepStore::new(dir.path()).load().unwrap();
    assert_eq!(stored[4].answers, *answers);
    assert_eq!(stored[2].results.len(), 3);
    let mut resumed = typed_env(dir.path(), "lactate-hospital-mortality");
    resumed.replay(&stored);
    assert_eq!(resumed.results().len(), stored.iter().map(|s| s.results.len()).sum::<usize>());
}

/// A typed number that matches, at its precision, what a tool printed is
/// recorded as matching that result; a reference to a result that cannot
/// fill the field is refused with the reason and not recorded.
#[test]
fn typed_numbers_are_traced_to_tool_output_and_bad_references_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = typed_env(dir.path(), "lactate-hospital-mortality");
    let params = |j: &str| serde_json::from_str::<serde_json::Value>(j).unwrap().as_object().unwrap().clone();
    env.execute(1, &Action::BuildCohort { params: params(r#"{"labs": [{"itemid": 50813, "name": "lactate"}]}"#) });
    let describe = Action::Statistics {
        tool: evident_rwe::agent::actions::StatsTool::Describe,
        params: params(r#"{"file": "cohort_audit.csv", "columns": ["lactate"]}"#),
    };
    env.execute(2, &describe);
    let submit = |answers: &str| Action::SubmitAnswers { answers: params(answers).into_iter().collect() };
    let obs = env.execute(3, &submit(r#"{"median_lactate": 2.6, "n_patients": {"from_result": "lactate"}, "n_deaths": {"from_result": "nothing"}}"#));
    assert!(obs.text.contains("median_lactate: accepted (2.6, matches lactate of step 2)"), "{}", obs.text);
    assert!(obs.text.contains("n_patients: not recorded: result lactate"), "{}", obs.text);
    assert!(obs.text.contains("n_deaths: not recorded: no result nothing"), "{}", obs.text);
    assert_eq!(env.sheet.answers().keys().collect::<Vec<_>>(), ["median_lactate"]);
    // A number the agent's own SQL printed supports a typed answer; 140 is
    // in build_cohort's attrition text (the database's ICU stays), but no
    // result of a count's type holds it: a guess, flagged.
    let sql = Action::RunSql { sql: "SELECT 11 AS deaths".into(), save_as: None };
    env.execute(4, &sql);
    let obs = env.execute(5, &submit(r#"{"n_deaths": 11, "n_patients": 140}"#));
    assert!(obs.text.contains("n_deaths: accepted (11, matches observation of step 4)"), "{}", obs.text);
    assert!(
        obs.text.contains("n_patients: accepted (140, UNSUPPORTED: 140 matches no number a tool produced)"),
        "{}",
        obs.text
    );
}
