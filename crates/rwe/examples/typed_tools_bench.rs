//! The typed statistics tools against the same fits in R, on cohorts of the
//! development tasks built from the MIMIC-IV demo (loaded into a temporary
//! SQLite database): logistic regression (lactate task), Kaplan-Meier with
//! the log-rank test and a Cox model with Efron ties (RDW task), and ROC
//! AUC with DeLong's interval (anion-gap task). For each, the time per call
//! of the typed tool as the agent calls it (parse the action, read the CSV,
//! fit, format; median of N) beside R's time per fit in one R process
//! (`glm`, `survdiff`, `coxph`, `pROC::roc` + `ci.auc`; the mean over N
//! fits, with and without `read.csv`), and the largest relative difference
//! between the two estimates.
//!
//! cargo run --release -p evident-rwe --example typed_tools_bench -- [N]

use std::process::Command;
use std::time::Instant;

use evident_db::{load_mimic, DatabaseUrl, QueryLimits, ReadOnlyConnection};
use evident_rwe::agent::actions::parse_action;
use evident_rwe::agent::env::StudyEnv;
use evident_rwe::agent::Strategy;
use evident_rwe::analysis::AnalysisOutput;
use evident_rwe::database::r_database;
use evident_rwe::sandbox::{SandboxConfig, Workspace};
use evident_rwe::{AnswerSheet, Gold, Task};

const FIRST_STAYS: &str = "SELECT i.subject_id, i.hadm_id, i.stay_id, i.intime, a.hospital_expire_flag AS died, \
    p.anchor_age + CAST(substr(i.intime, 1, 4) AS INTEGER) - p.anchor_year AS age, \
    CASE WHEN p.gender = 'F' THEN 1 ELSE 0 END AS female, \
    julianday(p.dod) - julianday(date(i.intime)) AS dd \
    FROM mimiciv_icu.icustays i JOIN mimiciv_hosp.patients p ON p.subject_id = i.subject_id \
    JOIN mimiciv_hosp.admissions a ON a.hadm_id = i.hadm_id \
    WHERE i.intime = (SELECT min(j.intime) FROM mimiciv_icu.icustays j WHERE j.subject_id = i.subject_id)";

fn lab_cohort(item: u32, name: &str) -> String {
    format!(
        "SELECT s.subject_id, s.stay_id, s.died, s.age, s.female, m.v AS {name}, \
         CASE WHEN m.v > 15.5 THEN 1 ELSE 0 END AS high, \
         CASE WHEN s.dd IS NOT NULL AND s.dd <= 28 THEN 1 ELSE 0 END AS died_28d, \
         CASE WHEN s.dd IS NOT NULL AND s.dd <= 365 THEN 1 ELSE 0 END AS died_1y, \
         CASE WHEN s.dd IS NOT NULL AND s.dd <= 365 THEN s.dd ELSE 365 END AS days \
         FROM ({FIRST_STAYS}) s JOIN (SELECT i.stay_id, max(l.valuenum) AS v \
         FROM mimiciv_icu.icustays i JOIN mimiciv_hosp.labevents l ON l.subject_id = i.subject_id \
         WHERE l.itemid = {item} AND l.valuenum IS NOT NULL \
         AND julianday(l.charttime) BETWEEN julianday(i.intime) - 0.25 AND julianday(i.intime) + 1 \
         GROUP BY i.stay_id) m ON m.stay_id = s.stay_id WHERE s.age >= 18"
    )
}

fn median_ms(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

/// The estimates a typed tool's stored output holds, in a fixed order.
fn estimates(a: &AnalysisOutput) -> Vec<f64> {
    match a {
        AnalysisOutput::Regression { terms, .. } => {
            terms.iter().flat_map(|t| [t.ratio, t.conf_low, t.conf_high, t.p_value]).collect()
        }
        AnalysisOutput::KaplanMeier { chi_square, p_value, .. } => vec![*chi_square, *p_value],
        AnalysisOutput::RocAuc { auc, conf_low, conf_high, .. } => vec![*auc, *conf_low, *conf_high],
    }
}

const R_BENCH: &str = r#"suppressPackageStartupMessages({library(survival); library(pROC)})
n <- as.integer(commandArgs(trailingOnly = TRUE)[1])
per <- function(expr_fun) { t <- system.time(for (i in seq_len(n)) r <- expr_fun())[["elapsed"]]; list(ms = 1000 * t / n, r = r) }
out <- function(name, fit_only, with_read, est) cat(name, sprintf("%.4f", fit_only$ms), sprintf("%.4f", with_read$ms), sprintf("%.15g", est), "\n")
logit <- function(d) { f <- glm(died ~ lactate + age + female, family = binomial, data = d); s <- summary(f)$coefficients; ci <- exp(confint.default(f))
  unlist(lapply(c("lactate", "age", "female"), function(v) c(exp(s[v, 1]), ci[v, 1], ci[v, 2], s[v, 4]))) }
km <- function(d) { lr <- survdiff(Surv(days, died_1y) ~ high, data = d); survfit(Surv(days, died_1y) ~ high, data = d); c(lr$chisq, pchisq(lr$chisq, 1, lower.tail = FALSE)) }
cox <- function(d) { f <- coxph(Surv(days, died_1y) ~ high + age + female, data = d, ties = "efron"); s <- summary(f)$coefficients; ci <- exp(confint(f))
  unlist(lapply(c("high", "age", "female"), function(v) c(exp(s[v, 1]), ci[v, 1], ci[v, 2], s[v, 5]))) }
auc <- function(d) { r <- roc(d$died_28d, d$anion_gap, quiet = TRUE, direction = "<"); ci <- ci.auc(r, method = "delong"); c(ci[2], ci[1], ci[3]) }
for (job in list(list("logistic_regression", "lactate.csv", logit), list("kaplan_meier_logrank", "rdw.csv", km),
                 list("cox_regression", "rdw.csv", cox), list("roc_auc", "ag.csv", auc))) {
  d <- read.csv(job[[2]]); f <- job[[3]]
  a <- per(function() f(d)); b <- per(function() f(read.csv(job[[2]])))
  out(job[[1]], a, b, a$r)
}
"#;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(50);
    let dir = tempfile::tempdir().unwrap();
    let url = DatabaseUrl::parse(&format!("sqlite:{}", dir.path().join("demo.db").display())).unwrap();
    load_mimic(&evident_testdata::shared_data().join("mimic-iv-demo"), &url, &mut |_| {}).unwrap();
    let tasks = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/lactate-hospital-mortality");
    let task = Task::load(&tasks.join("task.yaml")).unwrap().task;
    let gold = Gold::load(&tasks.join("gold.json"), &task).unwrap();
    let ws = Workspace::create(&dir.path().join("ws"), r_database(&url).unwrap(), &[]).unwrap();
    let conn = ReadOnlyConnection::connect(&url, QueryLimits { max_rows: 50_001, ..QueryLimits::default() }).unwrap();
    let mut env = StudyEnv::new(AnswerSheet::new(task, gold), ws, SandboxConfig::default(), Some(conn));
    let mut act = |json: &str| env.execute(1, &parse_action(&format!("Action: {json}"), Strategy::Typed).unwrap());
    for (item, name, file) in
        [(50813, "lactate", "lactate.csv"), (51277, "rdw", "rdw.csv"), (50868, "anion_gap", "ag.csv")]
    {
        let sql = serde_json::to_string(&lab_cohort(item, name)).unwrap();
        let obs = act(&format!(r#"{{"action": "run_sql", "params": {{"sql": {sql}, "save_as": "{file}"}}}}"#));
        println!("{file}: {}", obs.text.lines().next().unwrap_or(""));
    }
    let jobs = [
        (
            "logistic_regression",
            r#"{"action": "logistic_regression", "params": {"file": "lactate.csv", "outcome": "died", "predictors": ["lactate", "age", "female"]}}"#,
        ),
        (
            "kaplan_meier_logrank",
            r#"{"action": "kaplan_meier_logrank", "params": {"file": "rdw.csv", "time": "days", "event": "died_1y", "group": "high"}}"#,
        ),
        (
            "cox_regression",
            r#"{"action": "cox_regression", "params": {"file": "rdw.csv", "time": "days", "event": "died_1y", "predictors": ["high", "age", "female"]}}"#,
        ),
        (
            "roc_auc",
            r#"{"action": "roc_auc", "params": {"file": "ag.csv", "outcome": "died_28d", "predictor": "anion_gap"}}"#,
        ),
    ];
    let mut ours = Vec::new();
    for (tool, json) in jobs {
        let mut ms = Vec::new();
        let mut last = None;
        for _ in 0..n {
            let t = Instant::now();
            let obs = act(json);
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            last = Some(obs);
        }
        let obs = last.unwrap();
        let analysis = obs.analysis.unwrap_or_else(|| panic!("{tool}: {}", obs.text));
        ours.push((tool, median_ms(ms), estimates(&analysis)));
    }
    let root = env.workspace().root().to_path_buf();
    std::fs::write(root.join("bench.R"), R_BENCH).unwrap();
    let out =
        Command::new("Rscript").args(["--vanilla", "bench.R", &n.to_string()]).current_dir(&root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    println!("\n| tool | Evident, per call (median of {n}) | R, per fit (mean of {n}) | R, read.csv + fit | largest relative difference of the estimates |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (tool, ms, est) in ours {
        let line = text.lines().find(|l| l.starts_with(&format!("{tool} "))).unwrap_or_else(|| panic!("{text}"));
        let cells: Vec<f64> = line.split_whitespace().skip(1).map(|c| c.parse().unwrap()).collect();
        let (r_fit, r_read, r_est) = (cells[0], cells[1], &cells[2..]);
        assert_eq!(r_est.len(), est.len(), "{tool}: {line}");
        let diff = est.iter().zip(r_est).map(|(a, b)| ((a - b) / b).abs()).fold(0.0, f64::max);
        println!("| `{tool}` | {ms:.2} ms | {r_fit:.2} ms | {r_read:.2} ms | {diff:.1e} |");
    }
}
