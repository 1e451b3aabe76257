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
    ("age-baseline-mortality", r#"{}"#, 100, "hospital_expire_flag", 11.0),
    (
        "lactate-hospital-mortality",
        r#"{"labs": [{"itemid": 50813, "name": "lactate"}]}"#,
        74,
        "hospital_expire_flag",
        11.0,
    ),
    (
        "rdw-one-year-survival",
        r#"{"labs": [{"itemid": 51277, "name": "rdw"}], "death_within_days": 365}"#,
        99,
        "death_365d",
        25.0,
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
        assert!(sql.starts_with("SELECT * FROM (") && sql.contains("c.age >= 18"), "{sql}");
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
    assert!(err(r#"{"labs": [{"itemid": 1, "name": "a"}, {"itemid": 2, "name": "a"}]}"#).contains("same name"));
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
    assert_eq!(requests[0].json_schema.as_ref(), Some(&task_response_schema(env.sheet.task(), &[])));
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
    assert_eq!(requests[3].json_schema, requests[0].json_schema, "offered again after another action");
    assert!(run.steps[2].observation.starts_with("Cohort built: 100 stays"), "{}", run.steps[2].observation);
}
