//! The study agent's control flow with a scripted model on the MIMIC-IV
//! demo loaded into SQLite: Figure 17 answers parsed into actions, R run in
//! the sandbox, answers refused before the cohort audit file, gated fields
//! revealed, the run ending when every visible question is answered; a
//! killed run resumes without repeating a step; more than five invalid
//! outputs in one turn end the run; memory compression with Figure 18.

mod support;

use std::path::Path;

use evident_llm::Role;
use evident_rwe::agent::env::StudyEnv;
use evident_rwe::agent::{run_agent, study_prompts, AgentConfig, StepStore, Strategy, Termination};
use evident_rwe::database::r_database;
use evident_rwe::sandbox::{SandboxConfig, Workspace};
use evident_rwe::{score_task, AnswerSheet, Gold, Task};
use support::{demo_sqlite, scripted, Scripted};

fn task_and_gold() -> (Task, Gold) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/lactate-hospital-mortality");
    let task = Task::load(&dir.join("task.yaml")).unwrap().task;
    let gold = Gold::load(&dir.join("gold.json"), &task).unwrap();
    (task, gold)
}

fn env(run_dir: &Path) -> StudyEnv {
    let (task, gold) = task_and_gold();
    let db = r_database(demo_sqlite()).unwrap();
    let ws = Workspace::create(&run_dir.join("workspace"), db, &[]).unwrap();
    StudyEnv::new(AnswerSheet::new(task, gold), ws, SandboxConfig::default(), None)
}

fn answer(thought: &str, action: &str) -> String {
    format!(
        "Reflection: {thought}\nResearch Plan and Status: 1. cohort 2. audit 3. analysis\nFact Check: none\nThought: {thought}\nAction: ```json\n{action}\n```"
    )
}

const COHORT_R: &str = r#"cat("run\n", file = "runs.log", append = TRUE)
source("db_connect.R")
stays <- dbGetQuery(con, "SELECT i.subject_id, i.hadm_id, i.stay_id, i.intime, a.hospital_expire_flag, p.anchor_age + CAST(substr(i.intime, 1, 4) AS INTEGER) - p.anchor_year AS age, CASE WHEN p.gender = 'F' THEN 1 ELSE 0 END AS female FROM mimiciv_icu.icustays i JOIN mimiciv_hosp.patients p ON p.subject_id = i.subject_id JOIN mimiciv_hosp.admissions a ON a.hadm_id = i.hadm_id WHERE i.intime = (SELECT min(j.intime) FROM mimiciv_icu.icustays j WHERE j.subject_id = i.subject_id)")
lab <- dbGetQuery(con, "SELECT i.stay_id, max(l.valuenum) AS lactate FROM mimiciv_icu.icustays i JOIN mimiciv_hosp.labevents l ON l.subject_id = i.subject_id WHERE l.itemid = 50813 AND l.valuenum IS NOT NULL AND julianday(l.charttime) BETWEEN julianday(i.intime) - 0.25 AND julianday(i.intime) + 1 GROUP BY i.stay_id")
cohort <- merge(stays[stays$age >= 18, ], lab, by = "stay_id")
write.csv(cohort[, c("subject_id", "hadm_id", "stay_id", "age", "female", "lactate")], "cohort_audit.csv", row.names = FALSE)
fit <- glm(hospital_expire_flag ~ lactate + age + female, family = binomial, data = cohort)
cat(nrow(cohort), sum(cohort$hospital_expire_flag), median(cohort$lactate), exp(coef(fit)[["lactate"]]), exp(confint.default(fit)["lactate", ]), summary(fit)$coefficients["lactate", 4], "\n")"#;

/// Steps 1-4 of a good run: an early submission (refused: no audit file),
/// the cohort and analysis in R, the choice with the baseline, the
/// revealed fields.
fn good_script() -> Vec<String> {
    let code = serde_json::to_string(COHORT_R).unwrap();
    vec![
        answer("answer first", r#"{"action": "submit_answers", "params": {"answers": {"n_patients": 74}}}"#),
        answer("build the cohort", &format!(r#"{{"action": "execute_r", "params": {{"code": {code}}}}}"#)),
        answer(
            "submit",
            r#"{"action": "submit_answers", "params": {"answers": {"q_lactate": "A", "n_patients": 74, "n_deaths": 11, "median_lactate": 2.65}}}"#,
        ),
        answer(
            "fields",
            r#"{"action": "submit_answers", "params": {"answers": {"or_lactate": 1.3595, "or_lactate_low": 1.0354, "or_lactate_high": 1.7852, "p_lactate": 0.0271}}}"#,
        ),
    ]
}

#[test]
fn a_scripted_run_answers_everything_and_scores() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = env(dir.path());
    let model = scripted(&good_script());
    let memory = scripted::<&str>(&[]);
    let store = StepStore::new(dir.path());
    let config = AgentConfig::paper(Strategy::R);
    let run = run_agent(&model, &memory, &mut env, &study_prompts(None), &config, &store, &[]).unwrap();
    assert_eq!(run.termination, Termination::Completed);
    assert_eq!(run.steps.len(), 4);
    assert!(
        run.steps[0].observation.contains("answers are accepted only after the cohort audit file exists"),
        "{}",
        run.steps[0].observation
    );
    assert!(run.steps[1].observation.starts_with("The R code ran successfully."), "{}", run.steps[1].observation);
    assert!(run.steps[1].observation.contains("74 11 2.65 1.359"), "{}", run.steps[1].observation);
    assert!(
        run.steps[2].observation.contains("New follow-up fields:\n- or_lactate (ratio)"),
        "{}",
        run.steps[2].observation
    );
    // The request carried the paper's temperature and the Figure 17 system prompt.
    let first = &model.requests()[0];
    assert_eq!(first.temperature, 0.6);
    assert_eq!(first.seed, None, "the model's own seed unless a run sets one");
    assert!(first.messages[0].content.contains("**ALWAYS RESPOND IN THIS FORMAT EXACTLY**"));
    assert!(first.messages[1].content.contains("- q_lactate (choice): In the multivariable logistic regression"));
    assert!(!first.messages[1].content.contains("or_lactate ("), "gated fields are hidden at the start");
    let rendered: String =
        first.messages.iter().map(|m| format!("--- {:?}\n{}\n", m.role, m.content)).collect::<Vec<_>>().join("");
    insta::assert_snapshot!("rwe_agent_first_request", rendered);
    let (task, gold) = task_and_gold();
    let score = score_task(&task, &gold, env.sheet.answers(), run.steps.len() as u32, Some(true));
    assert!(score.success && score.complete, "{score:?}");
}

#[test]
fn a_killed_run_resumes_without_repeating_a_step() {
    let dir = tempfile::tempdir().unwrap();
    let script = good_script();
    let store = StepStore::new(dir.path());
    let config = AgentConfig::paper(Strategy::R);
    let prompts = study_prompts(None);
    let memory = scripted::<&str>(&[]);
    // The first process runs two steps, then its model goes away.
    let first = scripted(&script[..2]);
    let err = run_agent(&first, &memory, &mut env(dir.path()), &prompts, &config, &store, &[]).unwrap_err();
    assert!(err.to_string().contains("script exhausted"), "{err}");
    assert_eq!(store.load().unwrap().len(), 2);
    // A new process with a fresh environment over the same run folder.
    let second = scripted(&script[2..]);
    let mut env2 = env(dir.path());
    let run = run_agent(&second, &memory, &mut env2, &prompts, &config, &store, &[]).unwrap();
    assert_eq!((run.resumed_steps, run.steps.len(), run.termination), (2, 4, Termination::Completed));
    // The R step ran once, and the resumed model saw the stored history.
    assert_eq!(std::fs::read_to_string(dir.path().join("workspace/runs.log")).unwrap(), "run\n");
    let seen = &second.requests()[0].messages;
    assert_eq!(seen.len(), 2 + 2 * 2);
    assert_eq!(seen[4].content, script[1]);
    // A run's seed reaches every request (an evaluation's run r > 1 sets r,
    // `evident_app::evaluation::chart::run_seed`).
    let seeded = AgentConfig { seed: Some(3), ..config.clone() };
    let fresh = tempfile::tempdir().unwrap();
    let model = scripted(&script);
    run_agent(&model, &memory, &mut env(fresh.path()), &prompts, &seeded, &StepStore::new(fresh.path()), &[]).unwrap();
    assert!(model.requests().iter().all(|r| r.seed == Some(3)));
    // A third start finds the run ended and calls no model.
    let third = scripted::<&str>(&[]);
    let again = run_agent(&third, &memory, &mut env(dir.path()), &prompts, &config, &store, &[]).unwrap();
    assert_eq!((again.resumed_steps, again.termination), (4, Termination::Completed));
    assert!(third.requests().is_empty());
}

#[test]
fn more_than_five_invalid_outputs_in_a_turn_end_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let model =
        scripted(&["I will look at the data.", "Action: run it", "x", "y", "z", "Action: {\"action\": \"run_sql\"}"]);
    let memory = scripted::<&str>(&[]);
    let store = StepStore::new(dir.path());
    let run = run_agent(
        &model,
        &memory,
        &mut env(dir.path()),
        &study_prompts(None),
        &AgentConfig::paper(Strategy::R),
        &store,
        &[],
    )
    .unwrap();
    assert_eq!(run.termination, Termination::InvalidOutputs);
    assert_eq!((run.steps.len(), run.steps[0].invalid_outputs), (1, 6));
    assert!(run.steps[0].observation.contains("unknown action \"run_sql\""), "{}", run.steps[0].observation);
    // Each retry told the model what was wrong.
    let last = model.requests().pop().unwrap();
    assert_eq!(last.messages.len(), 2 + 2 * 5);
    assert!(last.messages.last().unwrap().content.starts_with("Invalid response: no `Action:` section"));
}

#[test]
fn long_histories_are_compressed_with_the_memory_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let list = answer("look", r#"{"action": "list_files", "params": {}}"#);
    let finish = answer("stop", r#"{"action": "finish_task", "params": {}}"#);
    let model = scripted(&[list.clone(), list.clone(), list.clone(), finish]);
    let memory = scripted(&["{\"progress_summary\": \"listed files three times\"}"]);
    let store = StepStore::new(dir.path());
    // A budget the first message alone nearly fills: compression before step 4.
    let config = AgentConfig { max_memory_tokens: 1500, ..AgentConfig::paper(Strategy::R) };
    let run = run_agent(&model, &memory, &mut env(dir.path()), &study_prompts(None), &config, &store, &[]).unwrap();
    assert_eq!(run.termination, Termination::Finished);
    let compressed: Vec<u32> = run.steps.iter().filter(|s| s.memory.is_some()).map(|s| s.step).collect();
    assert!(!compressed.is_empty(), "no compression");
    let m = &memory.requests()[0];
    assert!(m.messages[0].content.starts_with("You are a Data Analysis Research Assistant."));
    assert!(m.messages[1].content.starts_with("Environment:\n# Study protocol"), "from the first input");
    let after = &model.requests()[compressed[0] as usize - 1].messages;
    assert_eq!(after.len(), 4);
    assert_eq!(after[1].role, Role::User);
    assert!(after[1].content.starts_with("Memory of your work so far"));
    assert!(after[1].content.contains("listed files three times"));
}

/// The typed strategy's tools on the demo, driven directly: a cohort saved
/// by SQL, then Evident's estimators on it, which match the tasks' R
/// reference analyses (logistic regression with Wald CI; ROC AUC).
#[test]
fn typed_tools_reproduce_the_reference_analyses() {
    use evident_rwe::agent::actions::parse_action;
    use evident_rwe::evident_db::{QueryLimits, ReadOnlyConnection};
    let dir = tempfile::tempdir().unwrap();
    let (task, gold) = task_and_gold();
    let db = r_database(demo_sqlite()).unwrap();
    let ws = Workspace::create(&dir.path().join("workspace"), db, &[]).unwrap();
    let conn =
        ReadOnlyConnection::connect(demo_sqlite(), QueryLimits { max_rows: 50_001, ..QueryLimits::default() }).unwrap();
    let mut env = StudyEnv::new(AnswerSheet::new(task, gold.clone()), ws, SandboxConfig::default(), Some(conn));
    let mut act = |step: u32, json: &str| {
        let action = parse_action(&format!("Action: {json}"), Strategy::Typed).unwrap();
        env.execute(step, &action).text
    };
    let first_stays = "SELECT i.subject_id, i.hadm_id, i.stay_id, i.intime, a.hospital_expire_flag AS died, \
        p.anchor_age + CAST(substr(i.intime, 1, 4) AS INTEGER) - p.anchor_year AS age, \
        CASE WHEN p.gender = 'F' THEN 1 ELSE 0 END AS female, \
        CASE WHEN p.dod IS NOT NULL AND julianday(p.dod) - julianday(date(i.intime)) <= 28 THEN 1 ELSE 0 END AS died_28d \
        FROM mimiciv_icu.icustays i JOIN mimiciv_hosp.patients p ON p.subject_id = i.subject_id \
        JOIN mimiciv_hosp.admissions a ON a.hadm_id = i.hadm_id \
        WHERE i.intime = (SELECT min(j.intime) FROM mimiciv_icu.icustays j WHERE j.subject_id = i.subject_id)";
    let lab = |item: u32, name: &str| {
        format!(
            "SELECT s.*, m.v AS {name} FROM ({first_stays}) s JOIN (SELECT i.stay_id, max(l.valuenum) AS v \
             FROM mimiciv_icu.icustays i JOIN mimiciv_hosp.labevents l ON l.subject_id = i.subject_id \
             WHERE l.itemid = {item} AND l.valuenum IS NOT NULL \
             AND julianday(l.charttime) BETWEEN julianday(i.intime) - 0.25 AND julianday(i.intime) + 1 \
             GROUP BY i.stay_id) m ON m.stay_id = s.stay_id"
        )
    };
    let sql = serde_json::to_string(&lab(50813, "lactate")).unwrap();
    let saved = act(1, &format!(r#"{{"action": "run_sql", "params": {{"sql": {sql}, "save_as": "cohort.csv"}}}}"#));
    assert!(saved.contains("Saved all 74 rows to cohort.csv."), "{saved}");
    // A text column, or one that is not there, is named with its reason;
    // the numeric column is still described. With no numeric column at all
    // the call fails.
    let described =
        act(2, r#"{"action": "describe", "params": {"file": "cohort.csv", "columns": ["intime", "age", "weight"]}}"#);
    assert!(described.contains("intime: not described: no numeric value in any row"), "{described}");
    assert!(described.contains("weight: not described: no column \"weight\""), "{described}");
    assert!(described.contains("age: n 74 (missing 0), mean "), "{described}");
    let none = act(2, r#"{"action": "describe", "params": {"file": "cohort.csv", "columns": ["intime"]}}"#);
    assert!(none.starts_with("The action failed: intime: not described"), "{none}");
    let fit = act(
        2,
        r#"{"action": "logistic_regression", "params": {"file": "cohort.csv", "outcome": "died", "predictors": ["lactate", "age", "female"]}}"#,
    );
    // R: OR 1.35954 (1.03539-1.78517), P = 0.0270872.
    let line = fit.lines().find(|l| l.starts_with("lactate,")).unwrap_or_else(|| panic!("{fit}"));
    // "term, ratio, low-high, p"
    let parts: Vec<&str> = line.split(", ").collect();
    let (low, high) = parts[2].split_once('-').unwrap();
    let cells: Vec<f64> = [parts[1], low, high, parts[3]].iter().map(|c| c.trim().parse::<f64>().unwrap()).collect();
    let expected = [
        gold.fields["or_lactate"],
        gold.fields["or_lactate_low"],
        gold.fields["or_lactate_high"],
        gold.fields["p_lactate"],
    ];
    for (got, want) in cells.iter().zip(expected) {
        assert!((got - want).abs() <= 1e-4 * want.abs(), "{line} against {expected:?}");
    }
    let sql = serde_json::to_string(&lab(50868, "anion_gap")).unwrap();
    act(3, &format!(r#"{{"action": "run_sql", "params": {{"sql": {sql}, "save_as": "ag.csv"}}}}"#));
    let auc = act(
        4,
        r#"{"action": "roc_auc", "params": {"file": "ag.csv", "outcome": "died_28d", "predictor": "anion_gap"}}"#,
    );
    let ag_gold = Gold::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/anion-gap-28day-auc/gold.json"),
        &Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/anion-gap-28day-auc/task.yaml")).unwrap().task,
    )
    .unwrap();
    assert!(auc.starts_with(&format!("AUC {:.6}", ag_gold.fields["auc_anion_gap"])), "{auc}");
    // Paths outside the workspace are refused.
    let refused = act(5, r#"{"action": "read_file", "params": {"path": "../steps.jsonl"}}"#);
    assert!(refused.starts_with("The action failed: ../steps.jsonl: use a path inside the workspace"), "{refused}");
}

/// A model whose context window fills: the run ends as `ContextFull`, the
/// ending is stored as a step (a resumed run ends the same way without a
/// call), and what was answered before still counts.
#[test]
fn a_full_context_window_ends_the_run_and_keeps_its_steps() {
    use evident_llm::{ChatModel, ChatRequest, ChatResponse, LlmError};
    struct Filling(Scripted);
    impl ChatModel for Filling {
        fn model_id(&self) -> &str {
            "filling"
        }
        fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
            if self.0.exhausted() {
                return Err(LlmError::ContextOverflow { prompt_tokens: 5000, context_size: 4096 });
            }
            self.0.chat(request)
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let script = good_script();
    let model = Filling(scripted(&script[..2]));
    let memory = scripted::<&str>(&[]);
    let store = StepStore::new(dir.path());
    let config = AgentConfig::paper(Strategy::R);
    let run = run_agent(&model, &memory, &mut env(dir.path()), &study_prompts(None), &config, &store, &[]).unwrap();
    assert_eq!((run.termination, run.steps.len()), (Termination::ContextFull, 3));
    assert_eq!(run.steps[2].action, "(context full)");
    assert!(run.steps[2].observation.contains("4096"), "{}", run.steps[2].observation);
    // The cohort step ran; the stored run ends the same way when resumed.
    assert!(dir.path().join("workspace/cohort_audit.csv").is_file());
    let again =
        run_agent(&scripted::<&str>(&[]), &memory, &mut env(dir.path()), &study_prompts(None), &config, &store, &[])
            .unwrap();
    assert_eq!((again.termination, again.resumed_steps), (Termination::ContextFull, 3));
}

fn typed_env(run_dir: &Path) -> StudyEnv {
    use evident_rwe::evident_db::{QueryLimits, ReadOnlyConnection};
    let (task, gold) = task_and_gold();
    let db = r_database(demo_sqlite()).unwrap();
    let ws = Workspace::create(&run_dir.join("workspace"), db, &[]).unwrap();
    let conn =
        ReadOnlyConnection::connect(demo_sqlite(), QueryLimits { max_rows: 50_001, ..QueryLimits::default() }).unwrap();
    StudyEnv::new(AnswerSheet::new(task, gold), ws, SandboxConfig::default(), Some(conn))
}

const LACTATE_SQL: &str = "SELECT i.subject_id, i.hadm_id, i.stay_id, a.hospital_expire_flag AS died, \
    p.anchor_age + CAST(substr(i.intime, 1, 4) AS INTEGER) - p.anchor_year AS age, \
    CASE WHEN p.gender = 'F' THEN 1 ELSE 0 END AS female, m.v AS lactate \
    FROM mimiciv_icu.icustays i JOIN mimiciv_hosp.patients p ON p.subject_id = i.subject_id \
    JOIN mimiciv_hosp.admissions a ON a.hadm_id = i.hadm_id \
    JOIN (SELECT i.stay_id, max(l.valuenum) AS v FROM mimiciv_icu.icustays i \
    JOIN mimiciv_hosp.labevents l ON l.subject_id = i.subject_id WHERE l.itemid = 50813 AND l.valuenum IS NOT NULL \
    AND julianday(l.charttime) BETWEEN julianday(i.intime) - 0.25 AND julianday(i.intime) + 1 GROUP BY i.stay_id) m \
    ON m.stay_id = i.stay_id \
    WHERE i.intime = (SELECT min(j.intime) FROM mimiciv_icu.icustays j WHERE j.subject_id = i.subject_id)";

/// The typed strategy (Evident's) answers one JSON object per step,
/// decoded under the action schema: every request carries the schema, the
/// system prompt asks for JSON, an answer that is not the object is an
/// invalid output told what to fix, and the scripted answers (which the
/// schema accepts) run their actions.
#[test]
fn the_typed_strategy_decodes_one_json_action_under_the_schema() {
    use evident_llm::SchemaValidator;
    use evident_rwe::agent::actions::response_schema;
    let dir = tempfile::tempdir().unwrap();
    let sql = serde_json::to_string(LACTATE_SQL).unwrap();
    let script = vec![
        format!(
            r#"{{"thought": "build the cohort", "action": {{"action": "run_sql", "params": {{"sql": {sql}, "save_as": "cohort_audit.csv"}}}}}}"#
        ),
        r#"{"thought": "fit", "action": {"action": "logistic_regression", "params": {"file": "cohort_audit.csv", "outcome": "died", "predictors": ["lactate", "age", "female"]}}}"#.to_string(),
        "Reflection: done\nAction: finish".to_string(),
        r#"{"thought": "stop", "action": {"action": "finish_task", "params": {}}}"#.to_string(),
    ];
    let schema = response_schema(Strategy::Typed);
    let validator = SchemaValidator::new(&schema).unwrap();
    for (i, answer) in script.iter().enumerate() {
        assert_eq!(validator.check(answer).is_ok(), i != 2, "schema on answer {i}: {answer}");
    }
    let model = scripted(&script);
    let memory = scripted::<&str>(&[]);
    let store = StepStore::new(dir.path());
    let config = AgentConfig::paper(Strategy::Typed);
    let mut typed = typed_env(dir.path());
    let run = run_agent(&model, &memory, &mut typed, &study_prompts(None), &config, &store, &[]).unwrap();
    assert_eq!((run.termination, run.steps.len()), (Termination::Finished, 3));
    assert!(
        run.steps[0].observation.contains("Saved all 74 rows to cohort_audit.csv."),
        "{}",
        run.steps[0].observation
    );
    assert!(run.steps[1].observation.contains("lactate, 1.3595"), "{}", run.steps[1].observation);
    assert_eq!(run.steps[2].invalid_outputs, 1);
    let requests = model.requests();
    // Every request carries the schema of the run's state: build_cohort's
    // narrowed to the protocol and, before any table exists, no statistics
    // tool and no submit_answers; each scripted action fits its request's.
    let start = typed_env(tempfile::tempdir().unwrap().path()).response_schema(&[]);
    assert_eq!(requests[0].json_schema.as_ref(), Some(&start));
    let offered = |i: usize| requests[i].json_schema.as_ref().unwrap().to_string();
    assert!(!offered(0).contains("\"logistic_regression\"") && !offered(0).contains("\"submit_answers\""));
    assert!(offered(1).contains("\"logistic_regression\"") && offered(1).contains("\"submit_answers\""));
    for (i, r) in requests.iter().enumerate().filter(|(i, _)| *i != 2) {
        let schema = r.json_schema.as_ref().unwrap();
        assert!(SchemaValidator::new(schema).unwrap().check(&script[i.min(3)]).is_ok(), "answer {i}");
    }
    assert!(requests[0].messages[0].content.contains("ALWAYS RESPOND WITH ONE JSON OBJECT"));
    let rendered: String =
        requests[0].messages.iter().map(|m| format!("--- {:?}\n{}\n", m.role, m.content)).collect::<Vec<_>>().join("");
    insta::assert_snapshot!("rwe_agent_typed_first_request", rendered);
    let repair = &requests[3].messages.last().unwrap().content;
    assert!(repair.starts_with("Invalid response: the answer is not one JSON object"), "{repair}");
    // The paper's strategy stays free text: no schema on its requests.
    let r_model = scripted(&[answer("stop", r#"{"action": "finish_task", "params": {}}"#)]);
    let r_dir = tempfile::tempdir().unwrap();
    run_agent(
        &r_model,
        &memory,
        &mut env(r_dir.path()),
        &study_prompts(None),
        &AgentConfig::paper(Strategy::R),
        &StepStore::new(r_dir.path()),
        &[],
    )
    .unwrap();
    assert!(r_model.requests()[0].json_schema.is_none());
}

/// On a small-context model the history is compressed at Evident's
/// fraction of the window (the paper's 32,768 tokens would never be
/// reached on 4,096), with Figure 18's memory prompt.
#[test]
fn a_small_context_window_compresses_at_a_fraction_of_it() {
    use evident_rwe::agent::MEMORY_CONTEXT_FRACTION;
    let paper = AgentConfig::paper(Strategy::R);
    assert_eq!(paper.memory_threshold(), 32_768);
    let small = AgentConfig { context_tokens: Some(4096), ..AgentConfig::paper(Strategy::R) };
    assert_eq!(small.memory_threshold(), (4096.0 * MEMORY_CONTEXT_FRACTION) as usize);
    let large = AgentConfig { context_tokens: Some(131_072), ..AgentConfig::paper(Strategy::R) };
    assert_eq!(large.memory_threshold(), 32_768);

    let dir = tempfile::tempdir().unwrap();
    // The first request is ~2,100 tokens and each observation (a 1,200-character R print) ~400: the
    // window's 75% (3,072) is passed after three steps, and not again after the compression.
    let print = answer("look", r#"{"action": "execute_r", "params": {"code": "cat(strrep('x', 1200))"}}"#);
    let finish = answer("stop", r#"{"action": "finish_task", "params": {}}"#);
    let model = scripted(&[print.clone(), print.clone(), print, finish]);
    let memory = scripted(&["{\"progress_summary\": \"printed three times\"}"; 3]);
    let store = StepStore::new(dir.path());
    let run = run_agent(&model, &memory, &mut env(dir.path()), &study_prompts(None), &small, &store, &[]).unwrap();
    assert_eq!(run.termination, Termination::Finished);
    let compressed: Vec<u32> = run.steps.iter().filter(|s| s.memory.is_some()).map(|s| s.step).collect();
    let sizes: Vec<usize> = model.requests().iter().map(|r| r.messages.iter().map(|m| m.content.len()).sum()).collect();
    assert_eq!(compressed, vec![4], "compressed once the history passed the threshold; request sizes {sizes:?}");
    let m = &memory.requests()[0];
    assert!(m.messages[0].content.starts_with("You are a Data Analysis Research Assistant."), "Figure 18's prompt");
    assert!(m.messages[1].content.starts_with("Environment:\n# Study protocol"), "from the first input");
    let after = &model.requests()[3].messages;
    assert_eq!(after.len(), 4);
    assert!(after[1].content.contains("printed three times"));
    // The answer's cap is what the threshold leaves of the window.
    assert_eq!(small.response_tokens(), 1024);
    assert_eq!(paper.response_tokens(), 4096);
    // With the paper's threshold alone the same run never compresses.
    let dir2 = tempfile::tempdir().unwrap();
    let print = answer("look", r#"{"action": "execute_r", "params": {"code": "cat(strrep('x', 1200))"}}"#);
    let finish = answer("stop", r#"{"action": "finish_task", "params": {}}"#);
    let model = scripted(&[print.clone(), print.clone(), print, finish]);
    let run = run_agent(
        &model,
        &memory,
        &mut env(dir2.path()),
        &study_prompts(None),
        &paper,
        &StepStore::new(dir2.path()),
        &[],
    )
    .unwrap();
    assert!(run.steps.iter().all(|s| s.memory.is_none()));
}

/// The Poisson, linear, propensity-matching and IPTW tools on a workspace
/// CSV give what `evident-stats` gives on the same columns (whose
/// estimators are checked against R in `crates/stats/tests`): the tools
/// read the right columns, pass the offset and options, and report them.
#[test]
fn poisson_linear_psm_and_iptw_tools_report_the_estimators() {
    use evident_rwe::agent::actions::parse_typed_response;
    use evident_stats::glm::{glm, lm, Family, GlmConfig, Predictor};
    use evident_stats::propensity::{iptw_effect, matched_effect, Estimand, MatchConfig, OutcomeModel};
    let dir = tempfile::tempdir().unwrap();
    let mut typed = typed_env(dir.path());
    // A deterministic table: age, female, treated (depends on age), a count
    // with exposure, a 0/1 outcome and a length of stay.
    let mut seed = 12345u64;
    let mut unif = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut rows = String::from("age,female,treated,visits,log_days,died,los\n");
    let mut cols: Vec<Vec<f64>> = vec![Vec::new(); 7];
    for _ in 0..160 {
        let age = 40.0 + (unif() * 50.0).floor();
        let female = f64::from(unif() < 0.45);
        let treated = f64::from(unif() < 1.0 / (1.0 + (-(age - 65.0) / 10.0).exp()));
        let days = 5.0 + (unif() * 60.0).floor();
        let visits = (unif() * 3.0 * days / 30.0 + treated).floor();
        let died = f64::from(unif() < 0.15 + 0.004 * (age - 40.0) - 0.08 * treated);
        let los = 3.0 + 0.05 * age + 1.5 * treated + 4.0 * unif();
        let row = [age, female, treated, visits, days.ln(), died, los];
        rows.push_str(&row.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(","));
        rows.push('\n');
        row.iter().zip(cols.iter_mut()).for_each(|(v, c)| c.push(*v));
    }
    std::fs::write(dir.path().join("workspace/t.csv"), rows).unwrap();
    let mut act = |step: u32, action: &str| {
        let text = format!(r#"{{"thought": "t", "action": {action}}}"#);
        typed.execute(step, &parse_typed_response(&text, Strategy::Typed).unwrap()).text
    };
    let x = |names: &[&str], idx: &[usize]| -> Vec<(String, Vec<f64>)> {
        names.iter().zip(idx).map(|(n, i)| (n.to_string(), cols[*i].clone())).collect()
    };
    let preds = |v: &[(String, Vec<f64>)]| -> Vec<(String, Vec<f64>)> { v.to_vec() };
    let age_female = preds(&x(&["age", "female"], &[0, 1]));
    let p: Vec<Predictor> = age_female.iter().map(|(n, v)| Predictor { name: n, values: v }).collect();
    let with_treated = x(&["treated", "age"], &[2, 0]);
    let pt: Vec<Predictor> = with_treated.iter().map(|(n, v)| Predictor { name: n, values: v }).collect();

    let pois = act(
        1,
        r#"{"action": "poisson_regression", "params": {"file": "t.csv", "outcome": "visits", "predictors": ["treated", "age"], "offset": "log_days"}}"#,
    );
    let fit =
        glm(&cols[3], &pt, Family::Poisson, &GlmConfig { offset: Some(&cols[4]), ..GlmConfig::default() }).unwrap();
    let c = &fit.coefficients[1];
    let (lo, hi) = c.exp_conf();
    assert!(pois.contains("rate ratio"), "{pois}");
    assert!(pois.contains(&format!("treated, {:.6}, {lo:.6}-{hi:.6}, {:.6e}", c.exp_estimate(), c.p_value)), "{pois}");

    let lin = act(
        2,
        r#"{"action": "linear_regression", "params": {"file": "t.csv", "outcome": "los", "predictors": ["treated", "age"]}}"#,
    );
    let fit = lm(&cols[6], &pt, None, 0.95).unwrap();
    let c = &fit.coefficients[1];
    assert!(lin.contains(&format!("treated, {:.6}, {:.6} to {:.6}", c.estimate, c.conf_low, c.conf_high)), "{lin}");
    assert!(lin.contains(&format!("R-squared {:.6}", fit.r_squared)), "{lin}");

    let psm = act(
        3,
        r#"{"action": "propensity_matching", "params": {"file": "t.csv", "treatment": "treated", "covariates": ["age", "female"], "outcome": "died"}}"#,
    );
    let m = matched_effect(&cols[5], &cols[2], &p, &MatchConfig::default(), OutcomeModel::Logistic, 0.95).unwrap();
    let e = &m.effect;
    assert!(psm.contains(&format!("{} of", m.matching.n_treated_matched)), "{psm}");
    assert!(
        psm.contains(&format!(
            "odds ratio {:.6}, 95% CI {:.6}-{:.6}",
            e.estimate.exp(),
            e.conf_low.exp(),
            e.conf_high.exp()
        )),
        "{psm}"
    );
    assert!(psm.contains("age, ") && psm.contains("SMD after matching"), "{psm}");
    let keep: Vec<usize> = (0..cols[2].len()).filter(|&i| m.matching.weights[i] > 0.0).collect();
    let (ym, tm): (Vec<f64>, Vec<f64>) = keep.iter().map(|&i| (cols[5][i], cols[2][i])).unzip();
    let wald =
        glm(&ym, &[Predictor { name: "treated", values: &tm }], Family::Binomial, &GlmConfig::default()).unwrap();
    let c = &wald.coefficients[1];
    assert!(
        psm.contains(&format!(
            "model-based (Wald) on the matched sample: estimate {:.6}, 95% CI {:.6} to {:.6}",
            c.estimate.exp(),
            c.conf_low.exp(),
            c.conf_high.exp()
        )),
        "{psm}"
    );

    let iptw = act(
        4,
        r#"{"action": "iptw", "params": {"file": "t.csv", "treatment": "treated", "covariates": ["age", "female"], "outcome": "los", "estimand": "att", "outcome_model": "linear"}}"#,
    );
    let w = iptw_effect(&cols[6], &cols[2], &p, Estimand::Att, OutcomeModel::Linear, 0.95).unwrap();
    let e = &w.effect;
    assert!(iptw.contains("weights for the ATT"), "{iptw}");
    assert!(
        iptw.contains(&format!("mean difference {:.6}, 95% CI {:.6} to {:.6}", e.estimate, e.conf_low, e.conf_high)),
        "{iptw}"
    );
    // A bad option is named.
    let bad = act(
        5,
        r#"{"action": "iptw", "params": {"file": "t.csv", "treatment": "treated", "covariates": ["age"], "outcome": "died", "estimand": "atc"}}"#,
    );
    assert!(bad.starts_with("The action failed:") && bad.contains("atc"), "{bad}");
}

/// A model that counts its prompt tokens (the embedded model tokenises with
/// its chat template) decides when memory compression runs; characters / 4
/// is only the fallback for one that cannot. Here the count is twice the
/// estimate, as whitespace-heavy JSON tokenises: the same short run is
/// compressed as soon as the history allows, and never on the estimate.
#[test]
fn memory_compression_uses_the_models_token_count_where_it_has_one() {
    use evident_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Message};
    struct Counting(Scripted, std::sync::Mutex<usize>);
    impl ChatModel for Counting {
        fn model_id(&self) -> &str {
            self.0.model_id()
        }
        fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
            self.0.chat(request)
        }
        fn count_tokens(&self, messages: &[Message]) -> Option<usize> {
            *self.1.lock().unwrap() += 1;
            Some(messages.iter().map(|m| m.content.chars().count()).sum::<usize>() / 2)
        }
    }
    let small = AgentConfig { context_tokens: Some(4096), ..AgentConfig::paper(Strategy::R) };
    let list = answer("look", r#"{"action": "list_files", "params": {}}"#);
    let finish = answer("stop", r#"{"action": "finish_task", "params": {}}"#);
    let script = [list.clone(), list.clone(), list, finish];
    let memory = scripted(&["{\"progress_summary\": \"listed files\"}"; 3]);
    let compressed_steps = |model: &dyn ChatModel| {
        let dir = tempfile::tempdir().unwrap();
        let store = StepStore::new(dir.path());
        let run = run_agent(model, &memory, &mut env(dir.path()), &study_prompts(None), &small, &store, &[]).unwrap();
        assert_eq!(run.termination, Termination::Finished);
        run.steps.iter().filter(|s| s.memory.is_some()).map(|s| s.step).collect::<Vec<u32>>()
    };
    let counting = Counting(scripted(&script), std::sync::Mutex::new(0));
    assert_eq!(compressed_steps(&counting), vec![3], "at the first step with a history to compress");
    assert!(*counting.1.lock().unwrap() >= 1, "the model was asked");
    assert_eq!(compressed_steps(&scripted(&script)), Vec::<u32>::new(), "characters / 4 stays under 3,072");
}
