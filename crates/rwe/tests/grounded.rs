//! `--strategy typed-grounded` (Evident's, beside the unchanged `typed`)
//! with a scripted model on the MIMIC-IV demo: an answer can only come from
//! a computed result. A typed number is refused by the schema (the `typed`
//! strategy's schema takes it), a choice is not offered before an effect or
//! test exists, `submit_answers` is left out while nothing can be submitted
//! and the `[State]` line names what to compute; after the logistic
//! regression the odds-ratio fields take its result, equal to the R
//! reference's; a field no tool's result can fill is a dead end the state
//! names, with only `finish_task` offered; the embedded model's grammar
//! engine compiles the grounded schemas and holds a decoding to them.

mod support;

use std::path::Path;

use evident_llm::{ChatRequest, SchemaValidator};
use evident_rwe::agent::actions::{parse_typed_response, Action};
use evident_rwe::agent::env::StudyEnv;
use evident_rwe::agent::{run_agent, study_prompts, AgentConfig, AgentRun, StepStore, Strategy, Termination};
use evident_rwe::database::r_database;
use evident_rwe::evident_db::{QueryLimits, ReadOnlyConnection};
use evident_rwe::provenance::{AnswerBasis, ResultValue};
use evident_rwe::sandbox::{SandboxConfig, Workspace};
use evident_rwe::{AnswerSheet, AnswerValue, Gold, Task};
use serde_json::{json, Value};
use support::{demo_sqlite, scripted};

/// A development task and its R reference.
fn dev(id: &str) -> (Task, Gold) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks").join(id);
    let task = Task::load(&dir.join("task.yaml")).unwrap().task;
    let gold = Gold::load(&dir.join("gold.json"), &task).unwrap();
    (task, gold)
}

fn lactate() -> (Task, Gold) {
    dev("lactate-hospital-mortality")
}

/// The actions a typed schema offers, by name.
fn action_names(schema: &Value) -> Vec<String> {
    schema["properties"]["action"]["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["properties"]["action"]["const"].as_str().unwrap().to_string())
        .collect()
}

fn names(request: &ChatRequest) -> Vec<String> {
    action_names(request.json_schema.as_ref().unwrap())
}

fn env_for(run_dir: &Path, task: Task, gold: Gold) -> StudyEnv {
    let ws = Workspace::create(&run_dir.join("workspace"), r_database(demo_sqlite()).unwrap(), &[]).unwrap();
    let conn =
        ReadOnlyConnection::connect(demo_sqlite(), QueryLimits { max_rows: 50_001, ..QueryLimits::default() }).unwrap();
    StudyEnv::new(AnswerSheet::new(task, gold), ws, SandboxConfig::default(), Some(conn))
}

/// A grounded environment on a development task, with its run folder.
fn grounded_env(id: &str) -> (tempfile::TempDir, StudyEnv) {
    let (task, gold) = dev(id);
    let run_dir = tempfile::tempdir().unwrap();
    let mut env = env_for(run_dir.path(), task, gold);
    env.set_grounded(true);
    (run_dir, env)
}

/// An action's parameters from JSON text.
fn params(json: &str) -> serde_json::Map<String, Value> {
    serde_json::from_str::<Value>(json).unwrap().as_object().unwrap().clone()
}

fn act(action: &str, params: &str) -> String {
    format!(r#"{{"thought": "t", "action": {{"action": "{action}", "params": {params}}}}}"#)
}

fn submit(answers: &str) -> String {
    act("submit_answers", &format!(r#"{{"answers": {answers}}}"#))
}

/// The grounded `build_cohort`: the protocol's lab by itemid only (Evident
/// names the column after its label).
const BUILD: &str = r#"{"labs": [{"itemid": 50813}]}"#;
/// The same criteria under `typed`, whose schema asks for the name.
const BUILD_TYPED: &str = r#"{"labs": [{"itemid": 50813, "name": "lactate"}]}"#;
const LOGISTIC: &str =
    r#"{"file": "cohort_audit.csv", "outcome": "hospital_expire_flag", "predictors": ["lactate", "age", "female"]}"#;

/// The lactate task's four effect fields, each from the regression's lactate term.
const LACTATE_EFFECT: &str = r#"{"or_lactate": {"from_result": "OR lactate"}, "or_lactate_low": {"from_result": "OR lactate"}, "or_lactate_high": {"from_result": "OR lactate"}, "p_lactate": {"from_result": "OR lactate"}}"#;

fn run(dir: &Path, env: &mut StudyEnv, strategy: Strategy, script: &[String]) -> (AgentRun, Vec<ChatRequest>) {
    let model = scripted(script);
    let config = AgentConfig::paper(strategy);
    let store = StepStore::new(dir);
    let run = run_agent(&model, &scripted::<&str>(&[]), env, &study_prompts(None), &config, &store, &[]).unwrap();
    (run, model.requests())
}

/// The branch of one action in a request's schema, if offered.
fn branch(request: &ChatRequest, action: &str) -> Option<Value> {
    request.json_schema.as_ref().unwrap()["properties"]["action"]["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["properties"]["action"]["const"] == action)
        .map(|b| b["properties"]["params"].clone())
}

/// The open answers `submit_answers` offers in a request, with their schemas.
fn offered(request: &ChatRequest) -> Option<Value> {
    branch(request, "submit_answers").map(|b| b["properties"]["answers"]["anyOf"][0]["properties"].clone())
}

fn ids(open: &Value) -> Vec<String> {
    open.as_object().unwrap().keys().cloned().collect()
}

/// The lactate task end to end under the grounded strategy: a guessed
/// count and a choice before any analysis are invalid outputs, not run; a
/// count takes only a result by key; with the counts answered nothing is
/// offerable, so `submit_answers` is left out and the state says what to
/// compute; after the regression the choice is offered and the odds ratio,
/// its CI and p-value come from its result, the R reference's numbers; no
/// answer is unsupported.
#[test]
fn answers_come_only_from_computed_results() {
    let dir = tempfile::tempdir().unwrap();
    let (task, gold) = lactate();
    let mut env = env_for(dir.path(), task, gold.clone());
    let guessed = submit(r#"{"n_patients": 74}"#);
    let early_choice = submit(r#"{"q_lactate": "A"}"#);
    let counts_from_stays = submit(r#"{"n_patients": {"from_result": "stays"}, "n_deaths": {"from_result": "stays"}}"#);
    let script = vec![
        act("build_cohort", BUILD),
        guessed.clone(),
        early_choice.clone(),
        counts_from_stays.clone(),
        submit(r#"{"n_patients": {"from_result": "stays"}}"#),
        submit(
            r#"{"n_deaths": {"from_result": "hospital_expire_flag"}, "median_lactate": {"from_result": "lactate"}}"#,
        ),
        early_choice.clone(),
        act("logistic_regression", LOGISTIC),
        submit(r#"{"q_lactate": "A"}"#),
        submit(LACTATE_EFFECT),
    ];
    let (run, requests) = run(dir.path(), &mut env, Strategy::TypedGrounded, &script);
    assert_eq!(run.termination, Termination::Completed, "{:?}", run.steps.last());
    let actions: Vec<&str> = run.steps.iter().map(|s| s.action.as_str()).collect();
    assert_eq!(
        actions,
        ["build_cohort", "submit_answers", "submit_answers", "logistic_regression", "submit_answers", "submit_answers"]
    );
    // Step 2: the guessed 74, the early choice and the deaths counted from
    // the stays were refused by the schema.
    assert_eq!(run.steps[1].invalid_outputs, 3);
    assert_eq!(run.steps[3].invalid_outputs, 1, "the choice again, before the regression");

    // Before the audit file: no submit_answers, and build_cohort must keep
    // the protocol's lactate, by itemid only.
    assert!(offered(&requests[0]).is_none());
    let cohort = branch(&requests[0], "build_cohort").unwrap();
    assert_eq!(cohort["required"], json!(["labs"]));
    assert!(cohort["properties"].get("death_within_days").is_none(), "in-hospital death: run 5 gave it 24 days");
    assert_eq!(cohort["properties"]["labs"]["items"]["properties"], json!({"itemid": {"enum": [50813]}}));
    let validator = SchemaValidator::new(requests[0].json_schema.as_ref().unwrap()).unwrap();
    assert!(validator.check(&act("build_cohort", "{}")).is_err(), "run 2 and 4 left the lactate out");
    assert!(validator.check(&act("build_cohort", BUILD_TYPED)).is_err(), "Evident names the column");
    // After the cohort (and its baseline table): the patients from the
    // stays, the deaths from the death column, the median from the lactate
    // column, each alone; no choice.
    let open = offered(&requests[1]).unwrap();
    assert_eq!(ids(&open), ["n_patients", "n_deaths", "median_lactate"], "no choice");
    assert_eq!(
        open["n_patients"],
        json!({"type": "object", "properties": {"from_result": {"enum": ["stays"]}}, "required": ["from_result"], "additionalProperties": false})
    );
    assert_eq!(open["n_deaths"]["properties"]["from_result"]["enum"], json!(["hospital_expire_flag"]));
    assert_eq!(open["median_lactate"]["properties"]["from_result"]["enum"], json!(["lactate"]));
    let validator = SchemaValidator::new(requests[1].json_schema.as_ref().unwrap()).unwrap();
    assert!(validator.check(&guessed).is_err(), "a typed count is refused");
    assert!(validator.check(&early_choice).is_err(), "a choice before any effect is refused");
    assert!(validator.check(&counts_from_stays).is_err(), "run 4 counted deaths from the stays");
    assert!(validator.check(&script[4]).is_ok());
    // The typed strategy's schema in the same state takes the guess: the
    // grounded variant is what refuses it.
    let typed_dir = tempfile::tempdir().unwrap();
    let mut typed = env_for(typed_dir.path(), lactate().0, gold.clone());
    let params = serde_json::from_str::<Value>(BUILD_TYPED).unwrap().as_object().unwrap().clone();
    typed.execute(1, &Action::BuildCohort { params });
    let typed_schema = typed.response_schema(&[]);
    assert!(SchemaValidator::new(&typed_schema).unwrap().check(&guessed).is_ok());
    assert!(SchemaValidator::new(&typed_schema).unwrap().check(&early_choice).is_ok());
    assert!(SchemaValidator::new(&typed_schema).unwrap().check(&counts_from_stays).is_ok());
    // Each refusal told the model what it can submit and what to compute.
    let retry = &requests[2].messages.last().unwrap().content;
    assert!(retry.starts_with("Invalid response: submit_answers: n_patients:"), "{retry}");
    assert!(retry.contains("[State] cohort_audit.csv: 74 rows"), "{retry}");
    assert!(
        retry
            .contains("Can submit now: n_patients (stays); n_deaths (hospital_expire_flag); median_lactate (lactate)."),
        "{retry}"
    );

    // With the baseline answered nothing can be submitted: submit_answers
    // is left out, and the state names the tool.
    assert!(offered(&requests[6]).is_none(), "{:?}", requests[6].json_schema);
    let state = run.steps[2].observation.split("[State]").nth(1).unwrap();
    assert!(
        state.contains(
            "Compute on cohort_audit.csv: q_lactate with logistic_regression. Nothing can be submitted yet: answers come only from computed results."
        ),
        "{state}"
    );
    let retry = &requests[7].messages.last().unwrap().content;
    assert!(retry.starts_with("Invalid response: submit_answers is not offered now"), "{retry}");
    assert!(retry.contains("Nothing can be submitted yet"), "{retry}");

    // After the regression: the choice, and (once revealed) the fields from
    // its lactate term only.
    assert_eq!(ids(&offered(&requests[8]).unwrap()), ["q_lactate"]);
    let open = offered(&requests[9]).unwrap();
    assert_eq!(ids(&open), ["or_lactate", "or_lactate_low", "or_lactate_high", "p_lactate"]);
    assert_eq!(open["or_lactate"]["properties"]["from_result"]["enum"], json!(["OR lactate"]));
    let answers = &run.steps.last().unwrap().answers;
    let number = |id: &str| match &answers[id].value {
        AnswerValue::Number(x) => *x,
        other => panic!("{id}: {other:?}"),
    };
    for field in ["or_lactate", "or_lactate_low", "or_lactate_high", "p_lactate"] {
        let want = gold.fields[field];
        assert!((number(field) - want).abs() <= 1e-6 * want.abs(), "{field}: {} against R's {want}", number(field));
        assert_eq!(
            answers[field].basis,
            Some(AnswerBasis::FromResult { key: "OR lactate".into(), step: 4, tool: "logistic_regression".into() })
        );
    }
    for (field, key) in [("n_deaths", "hospital_expire_flag"), ("median_lactate", "lactate")] {
        assert!((number(field) - gold.fields[field]).abs() < 1e-9, "{field}");
        assert_eq!(
            answers[field].basis,
            Some(AnswerBasis::FromResult { key: key.into(), step: 1, tool: "build_cohort".into() })
        );
    }
    assert_eq!(answers["q_lactate"].basis, Some(AnswerBasis::AfterAnalysis { keys: vec!["OR lactate".into()] }));
    assert!(answers.values().all(|a| a.basis.as_ref().is_some_and(|b| !b.is_unsupported())), "{answers:?}");

    // The grounded system prompt and task message say so; the request is pinned.
    let first = &requests[0].messages;
    assert!(first[0].content.contains("a typed number is not accepted"));
    assert!(first[1].content.contains("fields take {\"from_result\": KEY}"));
    let rendered: String =
        first.iter().map(|m| format!("--- {:?}\n{}\n", m.role, m.content)).collect::<Vec<_>>().join("");
    insta::assert_snapshot!("rwe_agent_typed_grounded_first_request", rendered);
}

/// Driven directly, the grounded environment refuses what its schema
/// leaves out (a typed number, a result not about the field, a choice
/// before its question's effect) with what to use, and records nothing;
/// the `typed` strategy's accepts them.
#[test]
fn the_grounded_environment_refuses_typed_numbers_and_early_choices() {
    let dir = tempfile::tempdir().unwrap();
    let (task, gold) = lactate();
    let mut env = env_for(dir.path(), task, gold);
    env.set_grounded(true);
    env.execute(1, &Action::BuildCohort { params: params(BUILD) });
    let answers = |j: &str| Action::SubmitAnswers { answers: params(j).into_iter().collect() };
    let obs = env.execute(
        2,
        &answers(r#"{"n_patients": 74, "q_lactate": "A", "n_deaths": {"from_result": "stays"}, "median_lactate": {"from_result": "stays"}}"#),
    );
    assert!(
        obs.text.contains("n_patients: not recorded: a field takes only {\"from_result\": KEY}, a result a tool computed, not a typed number (compute it with describe)"),
        "{}",
        obs.text
    );
    assert!(
        obs.text.contains(
            "n_deaths: not recorded: result stays is not about what n_deaths counts; use hospital_expire_flag"
        ),
        "{}",
        obs.text
    );
    assert!(
        obs.text.contains("median_lactate: not recorded: no result stays")
            || obs.text.contains("median_lactate: not recorded: result stays"),
        "{}",
        obs.text
    );
    assert!(
        obs.text.contains("q_lactate: not recorded: a choice is answered once the effect or test of its question has been computed (compute it with logistic_regression)"),
        "{}",
        obs.text
    );
    assert!(env.sheet.answers().is_empty());
    // A regression without the lactate is not the question's analysis.
    let fit = |predictors: &str| Action::Statistics {
        tool: evident_rwe::agent::actions::StatsTool::LogisticRegression,
        params: params(&format!(
            r#"{{"file": "cohort_audit.csv", "outcome": "hospital_expire_flag", "predictors": {predictors}}}"#
        )),
    };
    env.execute(3, &fit(r#"["age", "female"]"#));
    let obs = env.execute(4, &answers(r#"{"q_lactate": "A", "n_deaths": {"from_result": "OR age"}}"#));
    assert!(obs.text.contains("q_lactate: not recorded: a choice is answered once the effect"), "{}", obs.text);
    assert!(env.sheet.answers().is_empty(), "{}", obs.text);
    env.execute(5, &fit(r#"["lactate", "age", "female"]"#));
    let obs = env.execute(6, &answers(r#"{"q_lactate": "A"}"#));
    assert!(obs.text.contains("q_lactate: accepted (after OR lactate)"), "{}", obs.text);
    // The same first submission under `typed`: recorded, flagged.
    let typed_dir = tempfile::tempdir().unwrap();
    let mut typed = env_for(typed_dir.path(), lactate().0, lactate().1);
    typed.execute(1, &Action::BuildCohort { params: params(BUILD_TYPED) });
    typed.execute(2, &answers(r#"{"n_patients": 74, "q_lactate": "A"}"#));
    assert_eq!(typed.sheet.answers().keys().collect::<Vec<_>>(), ["n_patients", "q_lactate"]);
    assert!(typed.sheet.answers()["q_lactate"].basis.as_ref().unwrap().is_unsupported());
}

/// A field no tool's result can fill (here the odds ratio's role changed to
/// a mean difference, which no typed tool estimates) is a dead end: the
/// state names it as left unanswered, and once only such fields remain
/// the schema offers nothing but finish_task, so the run ends instead of
/// looping.
#[test]
fn a_field_no_tool_can_fill_is_named_and_the_run_finishes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/lactate-hospital-mortality");
    let yaml = std::fs::read_to_string(dir.join("task.yaml")).unwrap();
    assert!(yaml.contains("role: odds_ratio"));
    let task = Task::from_yaml_str(&yaml.replace("role: odds_ratio", "role: mean_difference"), "t.yaml").unwrap();
    let gold = Gold::from_json_str(&std::fs::read_to_string(dir.join("gold.json")).unwrap(), &task, "g").unwrap();
    let run_dir = tempfile::tempdir().unwrap();
    let mut env = env_for(run_dir.path(), task, gold);
    let script = vec![
        act("build_cohort", BUILD),
        act("describe", r#"{"file": "cohort_audit.csv", "columns": ["lactate", "hospital_expire_flag"]}"#),
        act("logistic_regression", LOGISTIC),
        submit(
            r#"{"q_lactate": "A", "n_patients": {"from_result": "rows"}, "n_deaths": {"from_result": "hospital_expire_flag"}, "median_lactate": {"from_result": "lactate"}}"#,
        ),
        act("finish_task", "{}"),
    ];
    let (run, requests) = run(run_dir.path(), &mut env, Strategy::TypedGrounded, &script);
    assert_eq!(run.termination, Termination::Finished, "{:?}", run.steps.last());
    assert_eq!(run.steps.len(), 5);
    // The ratio, its bounds and its p-value (a mean difference's, which no
    // odds ratio gives) are never offered.
    let state = run.steps[3].observation.split("[State]").nth(1).unwrap();
    assert!(
        state.contains(
            "No tool's result can fill or_lactate (ratio), or_lactate_low (ci), or_lactate_high (ci), p_lactate (pvalue): left unanswered"
        ),
        "{state}"
    );
    assert!(state.ends_with("Nothing left that a result can fill. Next: finish_task."), "{state}");
    let last = requests[4].json_schema.as_ref().unwrap()["properties"]["action"]["anyOf"].clone();
    let names: Vec<&str> =
        last.as_array().unwrap().iter().map(|b| b["properties"]["action"]["const"].as_str().unwrap()).collect();
    assert_eq!(names, ["finish_task"], "only finish_task once only dead ends remain");
}

/// The grounded schemas compile in llguidance (the embedded model's grammar
/// engine, compact whitespace as the llama provider sets it), and a
/// decoding under them can write a result key but not a typed number, a
/// choice before the analysis, or a key that cannot fill the field.
#[test]
fn the_embedded_grammar_holds_the_grounded_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let (task, gold) = lactate();
    let mut env = env_for(dir.path(), task, gold);
    env.set_grounded(true);
    let tok_env = toktrie::ApproximateTokEnv::single_byte_env();
    let factory = llguidance::ParserFactory::new_simple(&tok_env).unwrap();
    // How many bytes of `answer` a decoding under `schema` can produce.
    let accepted = |schema: &Value, answer: &str| {
        let mut schema = schema.clone();
        schema["x-guidance"] = json!({"whitespace_flexible": false});
        let grammar = llguidance::api::TopLevelGrammar::from_json_schema(schema);
        let mut matcher = llguidance::Matcher::new(factory.create_parser(grammar));
        assert!(!matcher.is_error(), "llguidance compiles the schema");
        let tokens = tok_env.tokenize_bytes(answer.as_bytes());
        (matcher.validate_tokens(&tokens).unwrap(), tokens.len())
    };
    let refused_at = |schema: &Value, answer: &str, wrong: &str| {
        let (n, _) = accepted(schema, answer);
        let at = answer.find(wrong).unwrap();
        assert!(n >= at && n < at + wrong.len(), "refused at {wrong}: {n} of {answer}");
    };
    let whole = |schema: &Value, answer: &str| {
        let (n, all) = accepted(schema, answer);
        assert_eq!(n, all, "accepted whole: {answer}");
    };
    // Before the cohort, and after it with nothing offerable but the counts.
    let before = env.response_schema(&[]);
    whole(&before, r#"{"thought":"build","action":{"action":"build_cohort","params":{"labs":[{"itemid":50813}]}}}"#);
    refused_at(&before, r#"{"thought":"build","action":{"action":"build_cohort","params":{"min_age":18}}}"#, "}}}");
    refused_at(
        &before,
        r#"{"thought":"build","action":{"action":"build_cohort","params":{"labs":[{"itemid":50868}]}}}"#,
        "50868",
    );
    refused_at(&before, r#"{"thought":"answer","action":{"action":"submit_answers","params":{}}}"#, "submit_answers");
    env.execute(1, &Action::BuildCohort { params: params(BUILD) });
    let counts = env.response_schema(&[]);
    whole(
        &counts,
        r#"{"thought":"answer","action":{"action":"submit_answers","params":{"answers":{"n_patients":{"from_result":"stays"}}}}}"#,
    );
    refused_at(
        &counts,
        r#"{"thought":"answer","action":{"action":"submit_answers","params":{"answers":{"n_patients":74}}}}"#,
        "74",
    );
    refused_at(
        &counts,
        r#"{"thought":"answer","action":{"action":"submit_answers","params":{"answers":{"q_lactate":"A"}}}}"#,
        "q_lactate",
    );
    // The protocol's model, whole: lactate alone (run 5's lactate chunk) or
    // days to death as a predictor cannot be written.
    let fit = r#"{"thought":"fit","action":{"action":"logistic_regression","params":{"file":"cohort_audit.csv","outcome":"hospital_expire_flag","predictors":["lactate","age","female"]}}}"#;
    whole(&counts, fit);
    refused_at(&counts, &fit.replace(r#","age","female""#, ""), "]}}}");
    refused_at(&counts, &fit.replace("hospital_expire_flag", "days_to_death"), "days_to_death");
    // After the regression: the choice, and the effect's keys for a ratio.
    let fit = Action::Statistics {
        tool: evident_rwe::agent::actions::StatsTool::LogisticRegression,
        params: params(LOGISTIC),
    };
    env.execute(2, &fit);
    let answer = Action::SubmitAnswers { answers: vec![("q_lactate".into(), json!("A"))] };
    env.execute(3, &answer);
    let fields = env.response_schema(&[]);
    whole(
        &fields,
        r#"{"thought":"answer","action":{"action":"submit_answers","params":{"answers":{"or_lactate":{"from_result":"OR lactate"},"p_lactate":{"from_result":"OR lactate"}}}}}"#,
    );
    refused_at(
        &fields,
        r#"{"thought":"answer","action":{"action":"submit_answers","params":{"answers":{"or_lactate":{"from_result":"OR age"}}}}}"#,
        "OR age",
    );
    refused_at(
        &fields,
        r#"{"thought":"answer","action":{"action":"submit_answers","params":{"answers":{"or_lactate":{"from_result":"stays"}}}}}"#,
        "stays",
    );
    refused_at(
        &fields,
        r#"{"thought":"answer","action":{"action":"submit_answers","params":{"answers":{"or_lactate":1.36}}}}"#,
        "1.36",
    );
    assert!(parse_typed_response(
        r#"{"thought":"a","action":{"action":"finish_task","params":{}}}"#,
        Strategy::TypedGrounded
    )
    .is_ok());
}

/// The anion-gap task, where run 4 named the anion-gap column `lactate`,
/// counted the 28-day deaths from the stays (100; the reference has 14)
/// and ran six regressions past the reference's odds ratio without
/// answering: the grounded `build_cohort` takes the protocol's itemid and
/// its 28 days, Evident names the column `anion_gap`; the 28-day deaths
/// are offered from `death_28d` alone, not from in-hospital deaths; and
/// after two actions past answers it could submit, only `submit_answers`
/// is offered, which the state says.
#[test]
fn the_protocol_shapes_the_cohort_and_passing_up_answers_ends_in_submitting_them() {
    let (task, gold) = dev("anion-gap-28day-auc");
    let run_dir = tempfile::tempdir().unwrap();
    let mut env = env_for(run_dir.path(), task, gold.clone());
    let logistic = r#"{"file": "cohort_audit.csv", "outcome": "death_28d", "predictors": ["anion_gap", "age"]}"#;
    let script = vec![
        act("build_cohort", r#"{"labs": [{"itemid": 50868}], "death_within_days": 28}"#),
        act(
            "describe",
            r#"{"file": "cohort_audit.csv", "columns": ["anion_gap", "death_28d", "hospital_expire_flag"]}"#,
        ),
        act("logistic_regression", logistic),
        act("roc_auc", r#"{"file": "cohort_audit.csv", "outcome": "death_28d", "predictor": "anion_gap"}"#),
        act("describe", r#"{"file": "cohort_audit.csv", "columns": ["age"]}"#),
        submit(r#"{"n_deaths_28d": {"from_result": "death_28d"}}"#),
        act("finish_task", "{}"),
        act("roc_auc", r#"{"file": "cohort_audit.csv", "outcome": "death_28d", "predictor": "anion_gap"}"#),
        submit(r#"{"n_patients": {"from_result": "stays"}, "q_anion_gap": "A"}"#),
        submit(
            r#"{"or_anion_gap": {"from_result": "OR anion_gap"}, "or_anion_gap_low": {"from_result": "OR anion_gap"}, "or_anion_gap_high": {"from_result": "OR anion_gap"}, "p_anion_gap": {"from_result": "OR anion_gap"}, "auc_anion_gap": {"from_result": "AUC anion_gap"}}"#,
        ),
    ];
    let (run, requests) = run(run_dir.path(), &mut env, Strategy::TypedGrounded, &script);
    let cohort = branch(&requests[0], "build_cohort").unwrap();
    assert_eq!(cohort["properties"]["death_within_days"], json!({"const": 28}));
    assert_eq!(cohort["required"], json!(["labs", "death_within_days"]));
    assert!(cohort["properties"].get("groups").is_none(), "every count here has its column: no groups");
    let columns = std::fs::read_to_string(run_dir.path().join("workspace/cohort_audit.csv")).unwrap();
    assert!(columns.lines().next().unwrap().ends_with(",anion_gap,death_28d,followup_28d"), "{columns}");

    // After describe: the deaths within 28 days from their own column only.
    let open = offered(&requests[2]).unwrap();
    assert_eq!(open["n_deaths_28d"]["properties"]["from_result"]["enum"], json!(["death_28d"]));
    assert_eq!(open["n_patients"]["properties"]["from_result"]["enum"], json!(["stays", "rows"]));
    // Steps 2 and 3 went past the patients (and, with the odds ratio of
    // the anion gap, past the choice): step 4's request offers nothing but
    // submit_answers, so the scripted ROC curve and describe there are
    // invalid outputs.
    assert!(names(&requests[2]).len() > 1);
    assert!(!names(&requests[0]).contains(&"finish_task".to_string()), "no finishing before the cohort");
    assert_eq!(names(&requests[3]), ["submit_answers"]);
    assert_eq!(run.steps[3].action, "submit_answers");
    assert_eq!(run.steps[3].invalid_outputs, 2, "{:?}", run.steps[3]);
    let state = run.steps[2].observation.split("[State]").nth(1).unwrap();
    assert!(state.contains("q_anion_gap (choice)"), "{state}");
    assert!(
        state.contains("2 actions in a row went past answers you can submit: only submit_answers is offered now."),
        "{state}"
    );
    // Submitting resets it; finish_task is not offered while a tool could
    // still fill an open question (run 5's age task stopped at step 4).
    assert!(names(&requests[6]).len() > 1, "{:?}", names(&requests[6]));
    assert!(!names(&requests[6]).contains(&"finish_task".to_string()));
    assert_eq!(run.steps[4].invalid_outputs, 1, "the early finish_task");
    assert_eq!(run.steps[4].action, "roc_auc");
    assert_eq!(run.termination, Termination::Completed, "{:?}", run.steps.last());
    let answers = &run.steps.last().unwrap().answers;
    for field in ["or_anion_gap", "or_anion_gap_low", "or_anion_gap_high", "p_anion_gap", "auc_anion_gap"] {
        let AnswerValue::Number(x) = answers[field].value else { panic!("{field}") };
        let want = gold.fields[field];
        assert!((x - want).abs() <= 1e-6 * want.abs(), "{field}: {x} against R's {want}");
    }
    assert_eq!(run.steps[3].answers["n_deaths_28d"].value, AnswerValue::Number(gold.fields["n_deaths_28d"]));
}

/// The grounded builder names a lab column after its `d_labitems` label
/// and takes an itemid stated twice as one criterion; its schema allows no
/// more labs than the protocol names.
#[test]
fn a_lab_stated_twice_is_one_column_named_from_its_label() {
    let (_run_dir, mut env) = grounded_env("anion-gap-28day-auc");
    let schema = env.response_schema(&[]);
    let twice = act("build_cohort", r#"{"labs": [{"itemid": 50868}, {"itemid": 50868}], "death_within_days": 28}"#);
    assert!(SchemaValidator::new(&schema).unwrap().check(&twice).is_err(), "one lab in this protocol");
    let params =
        serde_json::from_str::<Value>(r#"{"labs": [{"itemid": 50868}, {"itemid": 50868}], "death_within_days": 28}"#)
            .unwrap()
            .as_object()
            .unwrap()
            .clone();
    let obs = env.execute(1, &Action::BuildCohort { params });
    assert!(obs.text.starts_with("Cohort built: 100 stays"), "{}", obs.text);
    assert!(obs.text.contains("Columns of cohort_audit.csv: subject_id, hadm_id, stay_id, intime, age, female, hospital_expire_flag, first_icu_stay, days_to_death, anion_gap, death_28d, followup_28d"), "{}", obs.text);
}

/// Run 5's age task built its cohort without the `older` group and then
/// finished with five baseline fields open: the state now says that no
/// column is named for older and the cohort must be built again with it,
/// and finish_task is not offered while a tool could fill an open field.
#[test]
fn a_field_no_column_is_named_for_asks_for_the_cohort_again() {
    let (run_dir, mut env) = grounded_env("age-baseline-mortality");
    env.execute(1, &Action::BuildCohort { params: params("{}") });
    let state = env.state_note();
    assert!(
        state.contains("n_older (named for older; no column of cohort_audit.csv is: build the cohort again with it)"),
        "{state}"
    );
    // The cohort's baseline table is computed with it: the deaths, women
    // and median age can be submitted at once (run 5's lactate task never
    // described hospital_expire_flag).
    assert!(
        state.contains("Can submit now: n_patients (stays); n_female (female); pct_female (female); median_age (age); n_deaths (hospital_expire_flag)."),
        "{state}"
    );
    assert!(!action_names(&env.response_schema(&[])).contains(&"finish_task".to_string()));
    // n_older names what no column carries: groups are offered, cutting age.
    let schema = env.response_schema(&[]);
    let cohort = schema["properties"]["action"]["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["properties"]["action"]["const"] == "build_cohort")
        .unwrap()["properties"]["params"]
        .clone();
    for branch in cohort["properties"]["groups"]["items"]["anyOf"].as_array().unwrap() {
        assert_eq!(branch["properties"]["column"], json!({"enum": ["age"]}), "run 5 cut hadm_id");
        assert_eq!(branch["properties"]["name"], json!({"const": "older"}), "named for n_older");
        assert_eq!(branch["properties"]["at_least"], json!({"const": 65.0}), "sixty-five years or more");
    }
    assert_eq!(cohort["properties"]["groups"]["maxItems"], json!(1), "run 6 cut two named older");
    // The embedded model's grammar engine holds the named groups.
    let tok_env = toktrie::ApproximateTokEnv::single_byte_env();
    let factory = llguidance::ParserFactory::new_simple(&tok_env).unwrap();
    let mut grammar_schema = schema.clone();
    grammar_schema["x-guidance"] = json!({"whitespace_flexible": false});
    let grammar = llguidance::api::TopLevelGrammar::from_json_schema(grammar_schema);
    let mut matcher = llguidance::Matcher::new(factory.create_parser(grammar));
    let answer = r#"{"thought":"t","action":{"action":"build_cohort","params":{"groups":[{"name":"older","column":"age","at_least":65}]}}}"#;
    let tokens = tok_env.tokenize_bytes(answer.as_bytes());
    assert_eq!(matcher.validate_tokens(&tokens).unwrap(), tokens.len(), "{answer}");
    let renamed = answer.replace(r#""name":"older""#, r#""name":"age""#);
    let tokens = tok_env.tokenize_bytes(renamed.as_bytes());
    assert!(matcher.reset().is_ok() && matcher.validate_tokens(&tokens).unwrap() < tokens.len(), "{renamed}");
    let obs = env.execute(
        2,
        &Action::BuildCohort { params: params(r#"{"groups": [{"name": "older", "column": "age", "at_least": 65}]}"#) },
    );
    assert!(obs.text.contains("older is 1 where age >= 65"), "{}", obs.text);
    assert!(!env.state_note().contains("no column of cohort_audit.csv is"), "{}", env.state_note());
    assert!(env.state_note().contains("n_older (older)"), "{}", env.state_note());
    let older = obs.results.iter().find(|r| r.key == "older").expect("the group's count");
    assert_eq!(older.value, ResultValue::Binary { ones: 46, n: 100 }, "R: 46 older patients");
    // Driven directly, a group named twice is one group.
    let obs = env.execute(
        3,
        &Action::BuildCohort {
            params: params(
                r#"{"groups": [{"name": "older", "column": "age", "at_least": 65}, {"name": "older", "column": "age", "at_least": 18}]}"#,
            ),
        },
    );
    assert!(obs.text.contains("older is 1 where age >= 65.") && !obs.text.contains("where age >= 18"), "{}", obs.text);
    // A group that splits nothing is refused (a run cut older at 18, the
    // cohort's minimum age), and the cohort stays as it was.
    let before = std::fs::read(run_dir.path().join("workspace/cohort_audit.csv")).unwrap();
    let obs = env.execute(
        4,
        &Action::BuildCohort { params: params(r#"{"groups": [{"name": "older", "column": "age", "at_least": 18}]}"#) },
    );
    assert!(
        obs.text.contains("group older (age >= 18) is 1 for all 100 stays with a value, so it splits nothing; cut it at the value the protocol gives; nothing was written"),
        "{}",
        obs.text
    );
    assert_eq!(std::fs::read(run_dir.path().join("workspace/cohort_audit.csv")).unwrap(), before);
}

/// Run 5's anion-gap task had only its choice left from step 5 and spent
/// its budget on SQL, R and table descriptions: after three actions in a
/// row that ran none of the tools the open questions need, with nothing to
/// submit, only those tools and build_cohort are offered, which the state
/// says; running one of them lifts it.
#[test]
fn idling_with_nothing_to_submit_ends_in_the_tools_the_questions_need() {
    let (task, gold) = dev("anion-gap-28day-auc");
    let run_dir = tempfile::tempdir().unwrap();
    let mut env = env_for(run_dir.path(), task, gold);
    let look = |table: &str| act("describe_table", &format!(r#"{{"table": "{table}"}}"#));
    let script = vec![
        act("build_cohort", r#"{"labs": [{"itemid": 50868}], "death_within_days": 28}"#),
        act("describe", r#"{"file": "cohort_audit.csv", "columns": ["death_28d"]}"#),
        submit(r#"{"n_patients": {"from_result": "stays"}, "n_deaths_28d": {"from_result": "death_28d"}}"#),
        look("mimiciv_hosp.patients"),
        look("mimiciv_hosp.admissions"),
        look("mimiciv_icu.icustays"),
        look("mimiciv_hosp.labevents"),
        act(
            "logistic_regression",
            r#"{"file": "cohort_audit.csv", "outcome": "death_28d", "predictors": ["anion_gap", "age"]}"#,
        ),
        submit(r#"{"q_anion_gap": "A"}"#),
        act("roc_auc", r#"{"file": "cohort_audit.csv", "outcome": "death_28d", "predictor": "anion_gap"}"#),
        submit(
            r#"{"or_anion_gap": {"from_result": "OR anion_gap"}, "or_anion_gap_low": {"from_result": "OR anion_gap"}, "or_anion_gap_high": {"from_result": "OR anion_gap"}, "p_anion_gap": {"from_result": "OR anion_gap"}, "auc_anion_gap": {"from_result": "AUC anion_gap"}}"#,
        ),
    ];
    let (run, requests) = run(run_dir.path(), &mut env, Strategy::TypedGrounded, &script);
    assert!(names(&requests[5]).contains(&"describe_table".to_string()), "two idle actions: {:?}", names(&requests[5]));
    assert_eq!(names(&requests[6]), ["build_cohort", "logistic_regression", "roc_auc"]);
    assert_eq!(run.steps[6].invalid_outputs, 1, "the fourth describe_table");
    assert_eq!(run.steps[6].action, "logistic_regression");
    let state = run.steps[5].observation.split("[State]").nth(1).unwrap();
    assert!(
        state.contains("3 actions in a row computed nothing these need: only logistic_regression, roc_auc and build_cohort are offered now."),
        "{state}"
    );
    // Held to the regression, the model is held to the choice it computed;
    // then the lever lifts.
    assert_eq!(names(&requests[8]), ["submit_answers"]);
    assert!(names(&requests[9]).len() > 3, "lifted: {:?}", names(&requests[9]));
    assert_eq!(run.steps[7].action, "submit_answers");
    assert_eq!(run.termination, Termination::Completed, "{:?}", run.steps.last());
}

/// Run 5's anion-gap regression put `days_to_death` among its predictors
/// (complete separation): in the grounded schema a tool's outcome is the
/// protocol's outcome column, a survival time its follow-up column, and no
/// column derived from the outcome is a predictor, a covariate or a group;
/// where the protocol names a model whose every term is a column, that set
/// is the only one a regression (a propensity model) takes; `describe`
/// still takes every column (the baseline counts need it), and the `typed`
/// strategy's schema is unchanged.
#[test]
fn a_regression_takes_the_protocols_outcome_and_no_outcome_derived_predictor() {
    let tool = |schema: &Value, action: &str| -> Value {
        schema["properties"]["action"]["anyOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["properties"]["action"]["const"] == action)
            .unwrap_or_else(|| panic!("{action} offered"))["properties"]["params"]
            .clone()
    };
    let derived = ["hospital_expire_flag", "days_to_death", "death_28d", "followup_28d"];

    let (_run_dir, mut env) = grounded_env("anion-gap-28day-auc");
    env.execute(
        1,
        &Action::BuildCohort { params: params(r#"{"labs": [{"itemid": 50868}], "death_within_days": 28}"#) },
    );
    let schema = env.response_schema(&[]);
    let logistic = tool(&schema, "logistic_regression");
    assert_eq!(logistic["properties"]["outcome"], json!({"enum": ["death_28d"]}));
    // The protocol's model: the anion gap and age, and nothing else.
    assert_eq!(logistic["properties"]["predictors"], json!({"const": ["anion_gap", "age"]}));
    assert_eq!(tool(&schema, "poisson_regression")["properties"]["predictors"], json!({"const": ["anion_gap", "age"]}));
    // A single predictor (the ROC curve's) is any exposure column.
    let roc = tool(&schema, "roc_auc");
    let predictors: Vec<String> = serde_json::from_value(roc["properties"]["predictor"]["enum"].clone()).unwrap();
    assert_eq!(predictors, ["age", "female", "anion_gap"]);
    assert_eq!(roc["properties"]["outcome"], json!({"enum": ["death_28d"]}));
    let described: Vec<String> =
        serde_json::from_value(tool(&schema, "describe")["properties"]["columns"]["items"]["enum"].clone()).unwrap();
    for c in derived {
        assert!(!predictors.contains(&c.to_string()) && described.contains(&c.to_string()), "{c}");
    }
    // The run-5 action does not validate against the grounded schema.
    let validator = SchemaValidator::new(&schema).unwrap();
    for predictors in [r#"["anion_gap", "age", "days_to_death"]"#, r#"["anion_gap"]"#, r#"["age", "anion_gap"]"#] {
        let bad = act(
            "logistic_regression",
            &format!(r#"{{"file": "cohort_audit.csv", "outcome": "death_28d", "predictors": {predictors}}}"#),
        );
        assert!(validator.check(&bad).is_err(), "{predictors}");
    }
    let good = act(
        "logistic_regression",
        r#"{"file": "cohort_audit.csv", "outcome": "death_28d", "predictors": ["anion_gap", "age"]}"#,
    );
    assert!(validator.check(&good).is_ok(), "{:?}", validator.check(&good));

    // Typed keeps every 0/1 column as an outcome.
    env.set_grounded(false);
    let typed = tool(&env.response_schema(&[]), "logistic_regression");
    let outcomes: Vec<String> = serde_json::from_value(typed["properties"]["outcome"]["enum"].clone()).unwrap();
    assert!(outcomes.contains(&"hospital_expire_flag".to_string()) && outcomes.contains(&"death_28d".to_string()));

    // One-year survival: the follow-up is the time, death within 365 days
    // the event, and the high-RDW group an exposure.
    let (_run_dir, mut env) = grounded_env("rdw-one-year-survival");
    // Runs 5 and 6 named the group `age`: its name is what n_high_rdw
    // counts (n_normal_rdw is its zeros), its column the protocol's RDW.
    let groups = tool(&env.response_schema(&[]), "build_cohort")["properties"]["groups"]["items"]["anyOf"].clone();
    for branch in groups.as_array().unwrap() {
        assert_eq!(branch["properties"]["name"], json!({"const": "high_rdw"}));
        assert_eq!(branch["properties"]["column"], json!({"enum": ["rdw"]}));
        assert_eq!(branch["properties"]["above"], json!({"const": 15.5}), "run 6 cut at 15.5 inclusive: 30, R 27");
    }
    env.execute(
        1,
        &Action::BuildCohort {
            params: params(
                r#"{"labs": [{"itemid": 51277}], "death_within_days": 365, "groups": [{"name": "high_rdw", "column": "rdw", "above": 15.5}]}"#,
            ),
        },
    );
    let schema = env.response_schema(&[]);
    let cox = tool(&schema, "cox_regression");
    assert_eq!(cox["properties"]["time"], json!({"enum": ["followup_365d"]}));
    assert_eq!(cox["properties"]["event"], json!({"enum": ["death_365d"]}));
    assert_eq!(cox["properties"]["predictors"], json!({"const": ["high_rdw", "age", "female"]}));
    // The compared group is the one the protocol's Exposure names (a run
    // at cc692e6 compared survival by sex).
    let km = tool(&schema, "kaplan_meier_logrank");
    assert_eq!(km["properties"]["group"], json!({"enum": ["high_rdw"]}));

    // The propensity model takes the protocol's covariates.
    let (_run_dir, mut env) = grounded_env("statin-psm-mortality");
    // Run 6 named the drug and a creatinine group `avastatin`: the drug
    // column is named for n_statin, and no group is offered (the matched
    // counts are propensity matching's).
    let cohort = tool(&env.response_schema(&[]), "build_cohort");
    assert_eq!(cohort["properties"]["drug"]["properties"]["name"], json!({"enum": ["statin"]}));
    assert!(cohort["properties"].get("groups").is_none(), "{cohort}");
    let obs = env.execute(
        1,
        &Action::BuildCohort {
            params: params(
                r#"{"labs": [{"itemid": 50912}], "death_within_days": 365, "drug": {"name": "statin", "contains": ["statin"]}}"#,
            ),
        },
    );
    assert!(obs.text.starts_with("Cohort built"), "{}", obs.text);
    let psm = tool(&env.response_schema(&[]), "propensity_matching");
    assert_eq!(psm["properties"]["covariates"], json!({"const": ["age", "female", "creatinine"]}));
    assert_eq!(psm["properties"]["outcome"], json!({"enum": ["death_365d"]}));
    // The protocol's caliper, 0.2 SD (run 9 matched with 3.2: 44 pairs, R 31).
    assert_eq!(psm["properties"]["caliper"], json!({"const": 0.2}));
    assert_eq!(
        evident_rwe::agent::actions::protocol_caliper("with a caliper of 0.25 standard deviations."),
        Some(0.25)
    );
    assert_eq!(evident_rwe::agent::actions::protocol_caliper("nearest neighbour matching"), None);
}

/// Run 6's anion-gap task rebuilt the same cohort between failing SQL
/// queries, and each rebuild counted as work, so only the needed tools were
/// never offered: an identical rebuild is idle, and one made while only
/// the needed tools and build_cohort are offered leaves only the tools.
#[test]
fn rebuilding_the_same_cohort_is_idle() {
    let (_run_dir, mut env) = grounded_env("anion-gap-28day-auc");
    let build = || Action::BuildCohort { params: params(r#"{"labs": [{"itemid": 50868}], "death_within_days": 28}"#) };
    env.execute(1, &build());
    let answers = params(r#"{"n_patients": {"from_result": "stays"}, "n_deaths_28d": {"from_result": "death_28d"}}"#);
    let obs = env.execute(2, &Action::SubmitAnswers { answers: answers.into_iter().collect() });
    assert!(obs.text.contains("n_deaths_28d: accepted (14"), "{}", obs.text);
    for step in 3..=5 {
        assert!(action_names(&env.response_schema(&[])).len() > 3, "step {step}");
        env.execute(step, &build());
    }
    assert_eq!(action_names(&env.response_schema(&[])), ["build_cohort", "logistic_regression", "roc_auc"]);
    assert!(env.state_note().contains("only logistic_regression, roc_auc and build_cohort are offered now"));
    env.execute(6, &build());
    assert_eq!(action_names(&env.response_schema(&[])), ["logistic_regression", "roc_auc"]);
    assert!(
        env.state_note().contains(
            "4 actions in a row computed nothing these need: only logistic_regression, roc_auc are offered now."
        ),
        "{}",
        env.state_note()
    );
}

/// Run 2 of typed-read's RDW task answered three fields from a cohort with
/// the `high_rdw` group, then built it again without the group, and its Cox
/// model took the continuous RDW: once an answer is recorded the stays and
/// columns are fixed. A `build_cohort` keeps the fixed cohort's criteria
/// and columns, says which of its own it did not follow, and adds its new
/// columns (run 1 of the age task at 100 steps, its `older` group missing
/// when it first answered, was refused a rebuild over every ICU stay and
/// never answered the two questions the group was for); SQL saved as the
/// cohort file that drops a column or changes the stays is refused, and
/// nothing is written.
#[test]
fn once_an_answer_is_recorded_the_cohort_is_fixed() {
    let (run_dir, mut env) = grounded_env("rdw-one-year-survival");
    let workspace = run_dir.path().join("workspace");
    let file = workspace.join("cohort_audit.csv");
    let with_group = r#"{"labs": [{"itemid": 51277}], "groups": [{"name": "high_rdw", "column": "rdw", "above": 15.5}], "death_within_days": 365}"#;
    let without_group = r#"{"labs": [{"itemid": 51277}], "death_within_days": 365}"#;
    // Before any answer the cohort may change freely. Its `rdw` column
    // names n_high_rdw's "rdw", but only the group counts it, so the state
    // says to build the cohort again with it.
    let obs = env.execute(1, &Action::BuildCohort { params: params(without_group) });
    assert!(obs.text.starts_with("Cohort built: 99 stays"), "{}", obs.text);
    let rebuild = "n_high_rdw (named for high and rdw; no column of cohort_audit.csv is: build the cohort again with it), n_normal_rdw (named for normal and rdw; no column of cohort_audit.csv is: build the cohort again with it)";
    assert!(env.state_note().contains(rebuild), "{}", env.state_note());
    let obs = env.execute(2, &Action::BuildCohort { params: params(with_group) });
    assert!(obs.text.contains("high_rdw is 1 where rdw > 15.5"), "{}", obs.text);
    assert!(!env.state_note().contains("no column of cohort_audit.csv is"), "{}", env.state_note());
    let answers = params(r#"{"n_high_rdw": {"from_result": "high_rdw"}}"#);
    let obs = env.execute(3, &Action::SubmitAnswers { answers: answers.into_iter().collect() });
    assert!(obs.text.contains("n_high_rdw: accepted (27"), "{}", obs.text);
    let before = std::fs::read(&file).unwrap();
    // Without the group, or over adults of 60 and over: the cohort as it was.
    let obs = env.execute(4, &Action::BuildCohort { params: params(without_group) });
    assert!(obs.text.starts_with("Cohort built: 99 stays"), "{}", obs.text);
    assert_eq!(std::fs::read(&file).unwrap(), before);
    let older = r#"{"min_age": 60, "labs": [{"itemid": 51277}], "groups": [{"name": "high_rdw", "column": "rdw", "above": 15.5}], "death_within_days": 365}"#;
    let obs = env.execute(5, &Action::BuildCohort { params: params(older) });
    assert!(
        obs.text.starts_with("The cohort is fixed (n_high_rdw was answered from it), so its criteria and columns were kept: age at ICU admission >= 18.\nCohort built: 99 stays"),
        "{}",
        obs.text
    );
    assert_eq!(std::fs::read(&file).unwrap(), before);
    // Every ICU stay, no RDW required, an `older` group: the same 99 stays
    // with the new column.
    let wider = r#"{"first_icu_stay_only": false, "groups": [{"name": "older", "column": "age", "at_least": 65}]}"#;
    let obs = env.execute(6, &Action::BuildCohort { params: params(wider) });
    assert!(
        obs.text.starts_with("The cohort is fixed (n_high_rdw was answered from it), so its criteria and columns were kept: first ICU stay only; stays with a rdw value only.\nCohort built: 99 stays"),
        "{}",
        obs.text
    );
    let header = std::fs::read_to_string(&file).unwrap().lines().next().unwrap().to_string();
    assert!(header.ends_with(",rdw,high_rdw,older,death_365d,followup_365d"), "{header}");
    let with_older = std::fs::read(&file).unwrap();
    // Nor may SQL saved as the cohort file replace it.
    let sql = "SELECT subject_id, hadm_id, stay_id FROM mimiciv_icu.icustays LIMIT 10";
    let obs = env.execute(7, &Action::RunSql { sql: sql.into(), save_as: Some("cohort_audit.csv".into()) });
    assert!(
        obs.text
            .starts_with("The action failed: cohort_audit.csv not saved: the cohort is fixed: n_high_rdw was answered")
            && obs.text.contains("this one would drop the columns intime, age"),
        "{}",
        obs.text
    );
    assert_eq!(std::fs::read(&file).unwrap(), with_older);
    // SQL that keeps the stays and columns is saved, and the criteria no
    // longer describe the file: a rebuild is then checked as SQL is.
    assert!(workspace.join("cohort_spec.json").is_file());
    let cohort_sql = std::fs::read_to_string(workspace.join("cohort.sql")).unwrap();
    let sql = format!(
        "SELECT c.*, CASE WHEN c.days_to_death <= 365 THEN 1 ELSE 0 END AS death_365d, \
         CASE WHEN c.days_to_death <= 365 THEN max(c.days_to_death, 0) ELSE 365 END AS followup_365d FROM ({}) c",
        cohort_sql.trim().trim_end_matches(';')
    );
    let obs = env.execute(8, &Action::RunSql { sql, save_as: Some("cohort_audit.csv".into()) });
    assert!(obs.text.contains("Saved all 99 rows to cohort_audit.csv."), "{}", obs.text);
    assert!(!workspace.join("cohort_spec.json").exists());
    let obs = env.execute(9, &Action::BuildCohort { params: params(older) });
    assert!(
        obs.text.starts_with("The action failed: the cohort is fixed: n_high_rdw was answered")
            && obs.text.contains("this one would drop the column older; nothing was written"),
        "{}",
        obs.text
    );
}

/// A model whose context holds `max_chars` characters of messages: a
/// longer prompt is a context overflow, as llama.cpp reports it.
struct SmallContext {
    inner: support::Scripted,
    max_chars: usize,
}

impl evident_llm::ChatModel for SmallContext {
    fn model_id(&self) -> &str {
        "small-context"
    }
    fn chat(&self, request: &ChatRequest) -> Result<evident_llm::ChatResponse, evident_llm::LlmError> {
        let chars: usize = request.messages.iter().map(|m| m.content.chars().count()).sum();
        if chars > self.max_chars {
            return Err(evident_llm::LlmError::ContextOverflow {
                prompt_tokens: chars as u32 / 4,
                context_size: self.max_chars as u32 / 4,
            });
        }
        self.inner.chat(request)
    }
}

/// Run 6's anion-gap task read the 100-row cohort file and its next prompt
/// did not fit the 8,192-token model, which ended the run: the typed
/// strategies cut the longest observation in half and ask again, and the
/// run goes on.
#[test]
fn an_observation_too_long_for_the_context_is_cut_and_the_run_goes_on() {
    let (task, gold) = lactate();
    let run_dir = tempfile::tempdir().unwrap();
    let mut env = env_for(run_dir.path(), task, gold);
    let script = vec![
        act("build_cohort", BUILD),
        act("read_file", r#"{"path": "cohort_audit.csv"}"#),
        act("describe", r#"{"file": "cohort_audit.csv", "columns": ["age"]}"#),
    ];
    let model = SmallContext { inner: scripted(&script), max_chars: 16_000 };
    let mut config = AgentConfig::paper(Strategy::TypedGrounded);
    config.max_steps = 3;
    let store = StepStore::new(run_dir.path());
    let run = run_agent(&model, &scripted::<&str>(&[]), &mut env, &study_prompts(None), &config, &store, &[]).unwrap();
    assert_eq!(run.termination, Termination::StepBudget, "{:?}", run.steps.last());
    assert_eq!(run.steps[2].action, "describe");
    let requests = model.inner.requests();
    let sizes: Vec<usize> =
        requests.iter().map(|r| r.messages.iter().map(|m| m.content.chars().count()).sum()).collect();
    let last = &requests.last().unwrap().messages;
    assert!(sizes.len() == 3 && sizes[2] <= 16_000, "{sizes:?}");
    assert!(last.iter().any(|m| m.content.ends_with("(the observation was cut to fit the model's context)")));
    // The step keeps what the tool returned, whole.
    assert!(run.steps[1].observation.chars().count() > 5_000, "{}", run.steps[1].observation.len());
}

/// Run 6's RDW task, its group refused twice, listed tables and files for
/// 17 steps and never built its cohort: after three actions without a
/// cohort only build_cohort and run_sql are offered, which the state says.
#[test]
fn three_actions_without_a_cohort_leave_only_the_cohort_builders() {
    let (_run_dir, mut env) = grounded_env("rdw-one-year-survival");
    for step in 1..=2 {
        env.execute(step, &Action::ListTables);
        assert!(action_names(&env.response_schema(&[])).contains(&"list_files".to_string()), "step {step}");
    }
    env.execute(3, &Action::ListFiles { path: ".".into() });
    assert_eq!(action_names(&env.response_schema(&[])), ["build_cohort", "run_sql"]);
    assert!(env.state_note().ends_with("3 actions without a cohort: only build_cohort and run_sql are offered now."));
}

/// Run 6's anion-gap task, with only the AUC open, ran logistic, Poisson,
/// linear and Cox regressions for six steps, and each logistic regression
/// reset the idle count because its question needed one: a waiting field
/// needs only its own tool, so the compute-only lever offers the ROC curve.
/// Run 7 computed the AUC under that lever and ran two more regressions,
/// to its step budget: once the held tool gives something to submit, only
/// `submit_answers` is offered.
#[test]
fn a_waiting_field_needs_only_its_own_tool() {
    let (_run_dir, mut env) = grounded_env("anion-gap-28day-auc");
    let submit = |j: &str| Action::SubmitAnswers { answers: params(j).into_iter().collect() };
    env.execute(
        1,
        &Action::BuildCohort { params: params(r#"{"labs": [{"itemid": 50868}], "death_within_days": 28}"#) },
    );
    env.execute(
        2,
        &submit(r#"{"n_patients": {"from_result": "stays"}, "n_deaths_28d": {"from_result": "death_28d"}}"#),
    );
    let fit = Action::Statistics {
        tool: evident_rwe::agent::actions::StatsTool::LogisticRegression,
        params: params(r#"{"file": "cohort_audit.csv", "outcome": "death_28d", "predictors": ["anion_gap", "age"]}"#),
    };
    env.execute(3, &fit);
    env.execute(4, &submit(r#"{"q_anion_gap": "A"}"#));
    let obs = env.execute(
        5,
        &submit(
            r#"{"or_anion_gap": {"from_result": "OR anion_gap"}, "or_anion_gap_low": {"from_result": "OR anion_gap"}, "or_anion_gap_high": {"from_result": "OR anion_gap"}, "p_anion_gap": {"from_result": "OR anion_gap"}}"#,
        ),
    );
    assert!(obs.text.contains("Still to answer: auc_anion_gap"), "{}", obs.text);
    env.execute(6, &fit);
    env.execute(7, &Action::ListTables);
    env.execute(8, &Action::ListTables);
    assert_eq!(action_names(&env.response_schema(&[])), ["build_cohort", "roc_auc"]);
    // Held to the tool, the model is held to the answer it computed.
    env.execute(
        9,
        &Action::Statistics {
            tool: evident_rwe::agent::actions::StatsTool::RocAuc,
            params: params(r#"{"file": "cohort_audit.csv", "outcome": "death_28d", "predictor": "anion_gap"}"#),
        },
    );
    assert_eq!(action_names(&env.response_schema(&[])), ["submit_answers"]);
}

/// The narrowing levers never leave an empty schema: with only the ROC
/// curve offered and the ROC curve excluded (it failed twice in a row),
/// the schema offers the state's other actions.
#[test]
fn a_lever_whose_tools_are_all_excluded_offers_the_rest() {
    let (_run_dir, mut env) = grounded_env("anion-gap-28day-auc");
    let submit = |j: &str| Action::SubmitAnswers { answers: params(j).into_iter().collect() };
    let build = || Action::BuildCohort { params: params(r#"{"labs": [{"itemid": 50868}], "death_within_days": 28}"#) };
    env.execute(1, &build());
    env.execute(
        2,
        &submit(r#"{"n_patients": {"from_result": "stays"}, "n_deaths_28d": {"from_result": "death_28d"}}"#),
    );
    for step in 3..=6 {
        env.execute(step, &build());
    }
    assert_eq!(action_names(&env.response_schema(&[])), ["logistic_regression", "roc_auc"]);
    let names = action_names(&env.response_schema(&["logistic_regression", "roc_auc"]));
    assert!(names.len() > 2 && names.contains(&"describe".to_string()), "{names:?}");
}

/// Run 7's statin task spent 6 of its 14 steps on SQL that selected from
/// `mimiciv_hosp.*`: in the grounded strategy an exploring action that has
/// failed 4 times in the run is not offered again, and the observation of
/// the fourth failure says so.
#[test]
fn an_exploring_action_that_failed_four_times_is_not_offered_again() {
    let dir = tempfile::tempdir().unwrap();
    let (task, gold) = lactate();
    let mut env = env_for(dir.path(), task, gold);
    let sql = |n: u32| act("run_sql", &format!(r#"{{"sql": "SELECT * FROM mimiciv_hosp.nothing_{n}"}}"#));
    let script = vec![
        act("build_cohort", BUILD),
        submit(
            r#"{"n_patients": {"from_result": "stays"}, "n_deaths": {"from_result": "hospital_expire_flag"}, "median_lactate": {"from_result": "lactate"}}"#,
        ),
        sql(1),
        act("describe", r#"{"file": "cohort_audit.csv", "columns": ["age"]}"#),
        sql(2),
        act("logistic_regression", LOGISTIC),
        submit(r#"{"q_lactate": "A"}"#),
        sql(3),
        submit(r#"{"or_lactate": {"from_result": "OR lactate"}}"#),
        sql(4),
        submit(
            r#"{"or_lactate_low": {"from_result": "OR lactate"}, "or_lactate_high": {"from_result": "OR lactate"}, "p_lactate": {"from_result": "OR lactate"}}"#,
        ),
    ];
    let (run, requests) = run(dir.path(), &mut env, Strategy::TypedGrounded, &script);
    assert_eq!(run.termination, Termination::Completed, "{:?}", run.steps.last());
    assert!(run.steps.iter().all(|s| s.invalid_outputs == 0), "{:?}", run.steps);
    let failed_sql: Vec<&str> =
        run.steps.iter().filter(|s| s.action == "run_sql").map(|s| s.observation.as_str()).collect();
    assert_eq!(failed_sql.len(), 4);
    assert!(
        failed_sql[3].contains("run_sql has failed 4 times in this run; it is not offered again."),
        "{}",
        failed_sql[3]
    );
    assert!(!failed_sql[2].contains("not offered again"));
    assert!(names(&requests[9]).contains(&"run_sql".to_string()), "three failures: {:?}", names(&requests[9]));
    assert!(!names(&requests[10]).contains(&"run_sql".to_string()), "{:?}", names(&requests[10]));
}

/// `typed-read` (Evident's) on the lactate task: after the protocol's
/// regression the choice is offered only as the option its result reads as
/// (the lactate odds ratio 1.36, CI 1.04-1.79, p 0.027: "higher lactate
/// was associated with a higher risk", A, R's answer), another letter is
/// an invalid output, and the accepted choice records that Evident read
/// it, not the model. Under `typed-grounded` the same state offers every
/// letter and takes B.
#[test]
fn a_typed_read_choice_is_the_option_its_result_reads_as() {
    let dir = tempfile::tempdir().unwrap();
    let (task, gold) = lactate();
    let mut env = env_for(dir.path(), task, gold.clone());
    let script = vec![
        act("build_cohort", BUILD),
        submit(
            r#"{"n_patients": {"from_result": "stays"}, "n_deaths": {"from_result": "hospital_expire_flag"}, "median_lactate": {"from_result": "lactate"}}"#,
        ),
        act("logistic_regression", LOGISTIC),
        submit(r#"{"q_lactate": "B"}"#),
        submit(r#"{"q_lactate": "A"}"#),
        submit(LACTATE_EFFECT),
    ];
    let (read, requests) = run(dir.path(), &mut env, Strategy::TypedRead, &script);
    assert_eq!(read.termination, Termination::Completed, "{:?}", read.steps.last());
    let actions: Vec<&str> = read.steps.iter().map(|s| s.action.as_str()).collect();
    assert_eq!(actions, ["build_cohort", "submit_answers", "logistic_regression", "submit_answers", "submit_answers"]);
    assert_eq!(read.steps[3].invalid_outputs, 1, "B was refused by the schema");
    assert_eq!(offered(&requests[3]).unwrap()["q_lactate"], json!({"type": "string", "enum": ["A"]}));
    assert_eq!(gold.choices["q_lactate"], "A");
    let answers = &read.steps.last().unwrap().answers;
    assert_eq!(answers["q_lactate"].value, AnswerValue::Choice("A".into()));
    match &answers["q_lactate"].basis {
        Some(AnswerBasis::Read { option, keys, why }) => {
            assert_eq!(option, "A");
            assert_eq!(keys, &["OR lactate".to_string()]);
            assert!(why.starts_with("read by Evident at p < 0.05: OR lactate: odds ratio 1.36"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        read.steps[3].observation.contains("q_lactate: accepted (option A read by Evident"),
        "{}",
        read.steps[3].observation
    );

    // Driven directly: typed-read refuses B with the reading; typed-grounded
    // offers every letter and records B.
    let answers = |j: &str| Action::SubmitAnswers { answers: params(j).into_iter().collect() };
    let fit = Action::Statistics {
        tool: evident_rwe::agent::actions::StatsTool::LogisticRegression,
        params: params(LOGISTIC),
    };
    for reads in [true, false] {
        let (_dir, mut env) = grounded_env("lactate-hospital-mortality");
        env.set_reads(reads);
        env.execute(1, &Action::BuildCohort { params: params(BUILD) });
        env.execute(2, &fit);
        let offered = &env.response_schema(&[]);
        let letters = offered["properties"]["action"]["anyOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["properties"]["action"]["const"] == "submit_answers")
            .map(|b| {
                b["properties"]["params"]["properties"]["answers"]["anyOf"][0]["properties"]["q_lactate"]["enum"]
                    .clone()
            })
            .unwrap();
        let obs = env.execute(3, &answers(r#"{"q_lactate": "B"}"#));
        if reads {
            assert_eq!(letters, json!(["A"]));
            assert!(obs.text.contains("q_lactate: not recorded: the computed results read as option A (read by Evident at p < 0.05: OR lactate"), "{}", obs.text);
            assert!(env.sheet.answers().is_empty());
        } else {
            assert_eq!(letters, json!(["A", "B", "C"]));
            assert!(obs.text.contains("q_lactate: accepted (after OR lactate)"), "{}", obs.text);
        }
    }
}
