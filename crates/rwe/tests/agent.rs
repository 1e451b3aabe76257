//! The study agent's control flow with a scripted model on the MIMIC-IV
//! demo loaded into SQLite: Figure 17 answers parsed into actions, R run in
//! the sandbox, answers refused before the cohort audit file, gated fields
//! revealed, the run ending when every visible question is answered; a
//! killed run resumes without repeating a step; more than five invalid
//! outputs in one turn end the run; memory compression with Figure 18.

mod support;

use std::path::Path;
use std::sync::OnceLock;

use evident_db::{load_mimic, DatabaseUrl};
use evident_llm::Role;
use evident_rwe::agent::env::StudyEnv;
use evident_rwe::agent::{run_agent, study_prompts, AgentConfig, StepStore, Strategy, Termination};
use evident_rwe::database::r_database;
use evident_rwe::sandbox::{SandboxConfig, Workspace};
use evident_rwe::{score_task, AnswerSheet, Gold, Task};
use support::{scripted, Scripted};

fn demo_url() -> &'static DatabaseUrl {
    static DB: OnceLock<(tempfile::TempDir, DatabaseUrl)> = OnceLock::new();
    &DB.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let url = DatabaseUrl::parse(&format!("sqlite:{}", dir.path().join("demo.db").display())).unwrap();
        load_mimic(&evident_testdata::shared_data().join("mimic-iv-demo"), &url, &mut |_| {}).unwrap();
        (dir, url)
    })
    .1
}

fn task_and_gold() -> (Task, Gold) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/lactate-hospital-mortality");
    let task = Task::load(&dir.join("task.yaml")).unwrap().task;
    let gold = Gold::load(&dir.join("gold.json"), &task).unwrap();
    (task, gold)
}

fn env(run_dir: &Path) -> StudyEnv {
    let (task, gold) = task_and_gold();
    let db = r_database(demo_url()).unwrap();
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
    assert!(first.messages[0].content.contains("**ALWAYS RESPOND IN THIS FORMAT EXACTLY**"));
    assert!(first.messages[1].content.contains("- q_lactate (choice): In the multivariable logistic regression"));
    assert!(!first.messages[1].content.contains("or_lactate ("), "gated fields are hidden at the start");
    let rendered: String =
        first.messages.iter().map(|m| format!("--- {:?}\n{}\n", m.role, m.content)).collect::<Vec<_>>().join("");
    insta::assert_snapshot!("rwe_agent_first_request", rendered);
    let (task, gold) = task_and_gold();
    let score = score_task(&task, &gold, env.sheet.answers(), run.steps.len() as u32, true);
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
    let db = r_database(demo_url()).unwrap();
    let ws = Workspace::create(&dir.path().join("workspace"), db, &[]).unwrap();
    let conn =
        ReadOnlyConnection::connect(demo_url(), QueryLimits { max_rows: 50_001, ..QueryLimits::default() }).unwrap();
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
