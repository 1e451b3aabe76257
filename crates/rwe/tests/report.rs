//! The study report on a scripted typed-strategy run of the RDW task on the
//! MIMIC-IV demo in SQLite: the agent saves its cohort by SQL as the audit
//! file, writes its attrition table, runs Kaplan-Meier with the log-rank
//! test and a Cox model through the typed tools, and answers. The page
//! holds the attrition table checked against the audit file, the baseline
//! table, the rule checks, the answers beside the reference, the curves
//! and the forest plot as inline SVG, and the trace, with every agent
//! string escaped; the Kaplan-Meier analysis stored with its step matches
//! the task's R reference.

mod support;

use std::path::Path;

use evident_db::{load_mimic, DatabaseUrl, QueryLimits, ReadOnlyConnection};
use evident_rwe::agent::env::StudyEnv;
use evident_rwe::agent::{run_agent, study_prompts, AgentConfig, StepStore, Strategy, Termination};
use evident_rwe::analysis::AnalysisOutput;
use evident_rwe::audit::{rule_checks, AuditTable, CohortAudit, AUDIT_FILE};
use evident_rwe::bundle::{read_bundle, write_bundle, Bundle};
use evident_rwe::database::r_database;
use evident_rwe::database_hash::{database_info, DatabaseHashMethod, DatabaseHashRequest, MemoryHashCache};
use evident_rwe::report::{baseline_table, render_report, write_report, AttritionReport};
use evident_rwe::sandbox::{SandboxConfig, Workspace};
use evident_rwe::{score_task, AnswerSheet, Gold, Task};
use support::scripted;

const COHORT_SQL: &str = "SELECT s.subject_id, s.hadm_id, s.stay_id, s.age, s.female, m.rdw, \
  CASE WHEN m.rdw > 15.5 THEN 1 ELSE 0 END AS high_rdw, \
  CASE WHEN s.dd IS NOT NULL AND s.dd <= 365 THEN 1 ELSE 0 END AS died, \
  CASE WHEN s.dd IS NOT NULL AND s.dd <= 365 THEN s.dd ELSE 365 END AS days \
  FROM (SELECT i.subject_id, i.hadm_id, i.stay_id, \
    p.anchor_age + CAST(substr(i.intime, 1, 4) AS INTEGER) - p.anchor_year AS age, \
    CASE WHEN p.gender = 'F' THEN 1 ELSE 0 END AS female, \
    julianday(p.dod) - julianday(date(i.intime)) AS dd \
    FROM mimiciv_icu.icustays i JOIN mimiciv_hosp.patients p ON p.subject_id = i.subject_id \
    WHERE i.intime = (SELECT min(j.intime) FROM mimiciv_icu.icustays j WHERE j.subject_id = i.subject_id)) s \
  JOIN (SELECT i.stay_id, max(l.valuenum) AS rdw FROM mimiciv_icu.icustays i \
    JOIN mimiciv_hosp.labevents l ON l.subject_id = i.subject_id \
    WHERE l.itemid = 51277 AND l.valuenum IS NOT NULL \
    AND julianday(l.charttime) BETWEEN julianday(i.intime) - 0.25 AND julianday(i.intime) + 1 \
    GROUP BY i.stay_id) m ON m.stay_id = s.stay_id \
  WHERE s.age >= 18";

/// An answer of the typed strategy: one JSON object, thought and action.
fn answer(thought: &str, action: &str) -> String {
    format!(r#"{{"thought": {}, "action": {action}}}"#, serde_json::to_string(thought).unwrap())
}

#[test]
fn the_report_shows_attrition_audit_answers_plots_and_trace_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let url = DatabaseUrl::parse(&format!("sqlite:{}", dir.path().join("demo.db").display())).unwrap();
    load_mimic(&evident_testdata::shared_data().join("mimic-iv-demo"), &url, &mut |_| {}).unwrap();
    let task_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/rdw-one-year-survival");
    let task = Task::load(&task_dir.join("task.yaml")).unwrap().task;
    let gold = Gold::load(&task_dir.join("gold.json"), &task).unwrap();
    let run_dir = dir.path().join("run");
    let ws = Workspace::create(&run_dir.join("workspace"), r_database(&url).unwrap(), &[]).unwrap();
    let limits = QueryLimits { max_rows: 50_001, ..QueryLimits::default() };
    let conn = ReadOnlyConnection::connect(&url, limits.clone()).unwrap();
    let mut env = StudyEnv::new(AnswerSheet::new(task.clone(), gold.clone()), ws, SandboxConfig::default(), Some(conn));

    let sql = serde_json::to_string(COHORT_SQL).unwrap();
    let attrition = serde_json::to_string(
        "step,remaining\nfirst ICU stays of adults,100\nwith a first-day RDW,99\n<b>bold</b> & \"quoted\",99\n",
    )
    .unwrap();
    let script = vec![
        answer(
            "build the cohort <script>alert(1)</script>",
            &format!(r#"{{"action": "run_sql", "params": {{"sql": {sql}, "save_as": "{AUDIT_FILE}"}}}}"#),
        ),
        answer(
            "attrition",
            &format!(r#"{{"action": "write_file", "params": {{"path": "attrition.csv", "content": {attrition}}}}}"#),
        ),
        answer(
            "survival",
            r#"{"action": "kaplan_meier_logrank", "params": {"file": "cohort_audit.csv", "time": "days", "event": "died", "group": "high_rdw"}}"#,
        ),
        answer(
            "cox",
            r#"{"action": "cox_regression", "params": {"file": "cohort_audit.csv", "time": "days", "event": "died", "predictors": ["high_rdw", "age", "female"]}}"#,
        ),
        answer(
            "answer",
            r#"{"action": "submit_answers", "params": {"answers": {"q_km": "C", "q_cox": "A", "n_high_rdw": 27, "n_normal_rdw": 72, "n_deaths_1y": 25}}}"#,
        ),
        answer("p", r#"{"action": "submit_answers", "params": {"answers": {"p_logrank": 0.0912}}}"#),
    ];
    let model = scripted(&script);
    let memory = scripted::<&str>(&[]);
    let store = StepStore::new(&run_dir);
    let config = AgentConfig::paper(Strategy::Typed);
    let run = run_agent(&model, &memory, &mut env, &study_prompts(None), &config, &store, &[]).unwrap();
    assert_eq!(run.termination, Termination::Completed, "{:#?}", run.steps.last());
    assert!(run.steps[0].observation.contains("Saved all 99 rows"), "{}", run.steps[0].observation);

    // The Kaplan-Meier analysis is stored with its step, and agrees with R.
    let Some(AnalysisOutput::KaplanMeier { curves, p_value, .. }) = &run.steps[2].analysis else {
        panic!("{:?}", run.steps[2])
    };
    assert_eq!(curves.iter().map(|c| c.n).collect::<Vec<_>>(), vec![72, 27]);
    let want = gold.fields["p_logrank"];
    assert!((p_value - want).abs() <= 1e-6 * want, "{p_value} against R's {want}");
    // It survives the steps file (a resumed run draws the same plots; JSON
    // keeps doubles to about the last bit).
    let Some(AnalysisOutput::KaplanMeier { curves: stored, p_value: stored_p, .. }) =
        &store.load().unwrap()[2].analysis
    else {
        panic!("the stored step lost its analysis")
    };
    assert_eq!(
        stored.iter().map(|c| (c.n, c.time.clone())).collect::<Vec<_>>(),
        curves.iter().map(|c| (c.n, c.time.clone())).collect::<Vec<_>>()
    );
    assert!(stored.iter().zip(curves).all(|(a, b)| a.surv.iter().zip(&b.surv).all(|(x, y)| (x - y).abs() < 1e-12)));
    assert!((stored_p - p_value).abs() < 1e-15);

    let ws_root = env.workspace().root().to_path_buf();
    let table = AuditTable::read(&ws_root.join(AUDIT_FILE)).unwrap();
    let mut lookup = ReadOnlyConnection::connect(&url, limits).unwrap();
    let audit = CohortAudit { rules: rule_checks(&table, &mut lookup).unwrap(), judge: None, database_judge: None };
    assert!(audit.rules.passed(), "{:?}", audit.rules);
    let attrition = AttritionReport::read(&ws_root, Some(table.rows.len()));
    assert_eq!(attrition.agrees_with_audit(), Some(true), "{attrition:?}");
    let baseline = baseline_table(&table);
    let score = score_task(&task, &gold, env.sheet.answers(), run.steps.len() as u32, audit.qualified());
    let bundle = Bundle {
        evident_version: "test",
        task: &task,
        task_sha256: "0".repeat(64),
        prompts_sha256: "1".repeat(64),
        strategy: Strategy::Typed,
        model: "scripted".into(),
        database: database_info(&url, &DatabaseHashRequest::default(), &mut MemoryHashCache::default()),
        cohort_audit: Some(&audit),
        cohort_sql: evident_rwe::bundle::read_cohort_sql(&ws_root),
        attrition: &attrition,
        baseline: &baseline,
        answers: env.sheet.answers(),
        score: &score,
        run: &run,
    };
    let html = render_report(&bundle, &gold);
    let path = write_report(&run_dir, &html).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), html);

    // The database hash says which kind it is: a SQLite database's files,
    // read now whatever the mode asked (the default, cached).
    assert_eq!(bundle.database.hash_method, DatabaseHashMethod::SqliteFiles);
    let files = bundle.database.sha256.as_deref().expect("the SQLite files are hashed");
    assert!(
        html.contains(&format!(
            "<tr><th>database hash</th><td>SHA-256 of the SQLite files (asked: cached): SHA-256 {files}; computed "
        )),
        "{html}"
    );

    // Attrition, checked against the audit file.
    assert!(
        html.contains(
            "<tr><td>with a first-day RDW</td><td>exclusion</td><td class=\"n\">1</td><td class=\"n\">99</td></tr>"
        ),
        "{html}"
    );
    assert!(html.contains("The last step leaves 99 units, the rows of the exported cohort."));
    // The cohort's definition: the query that saved the cohort file.
    let sql = bundle.cohort_sql.as_deref().expect("run_sql's save_as keeps its query as cohort.sql");
    assert!(sql.ends_with(';') && sql.contains("51277"), "{sql}");
    assert!(
        html.contains(&format!("<h3>Cohort definition (SQL)</h3>\n<pre>{}</pre>", evident_rwe::report::escape(sql))),
        "{html}"
    );
    // Baseline table of the exported cohort.
    assert!(
        html.contains(
            "<tr><td>high_rdw</td><td class=\"n\">99</td><td class=\"n\">0</td><td>27 (27.3%) with value 1</td></tr>"
        ),
        "{html}"
    );
    // Rule checks.
    assert!(html.contains("<tr><td>subject_id_exists</td><td><span class=\"pass\">passed</span></td>"), "{html}");
    // Not judged: the cohort was not screened, and success after screening
    // is shown as not measured rather than as false.
    assert!(html.contains("Cohort: <strong>not screened (the rules passed; the judge did not run)</strong>"), "{html}");
    assert!(html.contains("success with a qualified cohort – ·"), "{html}");
    // Answers with their steps beside the reference; q_cox was answered
    // wrongly, so its fields were never revealed.
    // Each answer with its basis: the choice came after the log-rank test
    // and the Cox fit, the p-value typed matches the log-rank result.
    assert!(html.contains("C. survival did not differ significantly between the groups — <em>the agent&#39;s answer (step 5), after log-rank p, HR high_rdw, HR age, HR female, reference</em>"), "{html}");
    assert!(
        html.contains(
            "<tr><td>p_logrank</td><td>pvalue (exact, =)</td><td class=\"n\">0.0912</td><td class=\"n\">6</td><td>matches log-rank p of step 3</td>"
        ),
        "{html}"
    );
    assert!(
        html.contains(
            "<tr><td>hr_high_rdw</td><td>ratio</td><td class=\"n\"><span class=\"fail\">never revealed</span></td>"
        ),
        "{html}"
    );
    // The curves and the forest plot, inline.
    assert_eq!(html.matches("<svg").count(), 2, "{html}");
    assert!(html.contains("high_rdw = 1"));
    // Every agent string is escaped: no markup of the agent's reaches the page.
    assert!(!html.contains("<script"), "{html}");
    assert!(html.contains("build the cohort &lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!html.contains("<b>bold</b>"));
    assert!(html.contains("&lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot;"));
    assert_eq!(html.matches("<details>").count(), run.steps.len(), "one trace entry per step");

    // The bundle reads back as written: a rerun can report the finished
    // run from it (score, audit, every step with its analysis).
    write_bundle(&run_dir, &bundle).unwrap();
    let stored = read_bundle(&run_dir).expect("the bundle just written reads back");
    assert_eq!((stored.evident_version.as_str(), stored.model.as_str()), ("test", "scripted"));
    assert_eq!(stored.strategy, Strategy::Typed);
    assert_eq!(stored.database.url, bundle.database.url);
    assert_eq!(stored.score, score);
    assert_eq!(stored.cohort_audit.as_ref(), Some(&audit));
    // Steps compared as text: JSON keeps the analyses' doubles to about
    // the last bit, as above.
    assert_eq!((stored.run.termination, stored.run.prompt_tokens), (run.termination, run.prompt_tokens));
    let actions = |r: &evident_rwe::agent::AgentRun| -> Vec<(String, String)> {
        r.steps.iter().map(|st| (st.action.clone(), st.observation.clone())).collect()
    };
    assert_eq!(actions(&stored.run), actions(&run));

    // Judged by Evident's compiled judge: the page lists the checks the
    // rows were held to (escaped), those set apart and why, and the facts
    // given no check; the judgement reads back from the bundle.
    use evident_rwe::compiled_judge::{CompiledCriteria, CriterionCheck, FactRole, JudgeStrategy, Test};
    let check = |criterion: &str, fact: &str, test, value: &str| CriterionCheck {
        criterion: criterion.into(),
        fact: fact.into(),
        test,
        value: value.into(),
    };
    let mut compiled = CompiledCriteria::validated(
        vec![
            check("Adults <age 18 & over>.", "age", Test::AtLeast, "18"),
            check("Ids.", "stay_id", Test::IsNumber, ""),
        ],
        &[],
    );
    compiled.other_facts.push(FactRole { fact: "dd".into(), role: "outcome".into() });
    let judged = CohortAudit {
        judge: Some(evident_rwe::audit::JudgeReport {
            model: "scripted".into(),
            strategy: JudgeStrategy::Compiled,
            compiled: Some(compiled),
            sampled: 0,
            judged: 0,
            excluded: 0,
            exclusion_rate: None,
            cases: Vec::new(),
        }),
        ..audit.clone()
    };
    let with_judge = Bundle { cohort_audit: Some(&judged), ..bundle };
    let html = render_report(&with_judge, &gold);
    assert!(html.contains("Evident&#39;s compiled judge: the checks below, run on each row"), "{html}");
    assert!(
        html.contains("<tr><td>Adults &lt;age 18 &amp; over&gt;.</td><td><code>age at_least 18</code></td></tr>"),
        "{html}"
    );
    assert!(html.contains("not run: an identifier decides no criterion"), "{html}");
    assert!(html.contains("<td class=\"muted\">(outcome)</td><td><code>dd</code>: no check</td>"), "{html}");
    write_bundle(&run_dir, &with_judge).unwrap();
    assert_eq!(read_bundle(&run_dir).unwrap().cohort_audit.as_ref(), Some(&judged));
}
