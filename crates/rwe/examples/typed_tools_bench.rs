//! The typed statistics tools against the same fits in R, on cohorts of the
//! development tasks built from the MIMIC-IV demo (loaded into a temporary
//! SQLite database): logistic regression (lactate task), Kaplan-Meier with
//! the log-rank test and a Cox model with Efron ties (RDW task), ROC AUC
//! with DeLong's interval (anion-gap task), and on the adults' first ICU
//! stays: `describe` (age, ICU length of stay), Poisson regression of the
//! admission's diagnosis count with the log of its hospital days as offset,
//! linear regression of the ICU length of stay, Fisher's exact test (65 or
//! older by in-hospital death), and propensity-score matching and IPTW of
//! in-hospital death on an emergency admission (age and sex in the
//! propensity model, logistic outcome model). For each, the time per call
//! of the typed tool as the agent calls it (parse the action, read the CSV,
//! fit, format; median of N) beside R's time per fit in one R process
//! (`glm`, `survdiff`, `coxph`, `pROC::roc` + `ci.auc`, `quantile`, `lm`,
//! `fisher.test`, and for PSM and IPTW the propensity `glm`, the greedy
//! matching of `crates/stats/tests/r/greedy_match.R` and the outcome `glm`
//! with the HC0 sandwich written out; the mean over N fits, with and
//! without `read.csv`), and the largest relative difference between the two
//! estimates. `describe`, `linear_regression` and `fisher_test` print
//! rounded numbers and keep none as data, so their estimates are those of
//! the estimator the tool calls (`summarize`, `lm`, `fisher_test`) on the
//! same CSV columns.
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

/// The adults' first ICU stays with what the other tools need: an
/// emergency admission (PSM, IPTW), 65 or older (Fisher), the ICU length
/// of stay (describe, linear), the admission's diagnosis count and its
/// hospital days (Poisson; SQLite has no `ln`, so the bench adds the log).
fn stays_cohort() -> String {
    format!(
        "SELECT s.subject_id, s.stay_id, s.died, s.age, s.female, \
         CASE WHEN a.admission_type IN ('EW EMER.', 'DIRECT EMER.') THEN 1 ELSE 0 END AS emergency, \
         CASE WHEN s.age >= 65 THEN 1 ELSE 0 END AS older, i.los, \
         (SELECT count(*) FROM mimiciv_hosp.diagnoses_icd d WHERE d.hadm_id = s.hadm_id) AS n_dx, \
         julianday(a.dischtime) - julianday(a.admittime) AS hosp_days \
         FROM ({FIRST_STAYS}) s JOIN mimiciv_hosp.admissions a ON a.hadm_id = s.hadm_id \
         JOIN mimiciv_icu.icustays i ON i.stay_id = s.stay_id WHERE s.age >= 18"
    )
}

/// Adds `log_days = ln(hosp_days)` to the CSV at `path`.
fn add_log_days(path: &std::path::Path) {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let headers = reader.headers().unwrap().clone();
    let days = headers.iter().position(|h| h == "hosp_days").unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let mut writer = csv::Writer::from_path(path).unwrap();
    writer.write_record(headers.iter().chain(["log_days"])).unwrap();
    for row in rows {
        let log = row[days].parse::<f64>().unwrap().ln();
        writer.write_record(row.iter().chain([format!("{log:.17e}").as_str()])).unwrap();
    }
    writer.flush().unwrap();
}

/// Numeric columns of a workspace CSV, rows with a missing value dropped
/// (as the tools read them).
fn columns(path: &std::path::Path, names: &[&str]) -> Vec<Vec<f64>> {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let headers = reader.headers().unwrap().clone();
    let idx: Vec<usize> = names.iter().map(|n| headers.iter().position(|h| h == *n).unwrap()).collect();
    let mut cols = vec![Vec::new(); names.len()];
    for record in reader.records() {
        let record = record.unwrap();
        let values: Option<Vec<f64>> = idx.iter().map(|&i| record[i].trim().parse::<f64>().ok()).collect();
        if let Some(v) = values {
            v.into_iter().zip(cols.iter_mut()).for_each(|(x, c)| c.push(x));
        }
    }
    cols
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

/// The estimates of a tool that keeps no analysis as data (its text
/// rounds them), from the estimator it calls on the same columns:
/// `describe` (n, mean, SD, median, quartiles of each column),
/// `linear_regression` (every term's coefficient, CI and p-value) and
/// `fisher_test` (odds ratio, CI, p-value).
fn other_estimates(tool: &str, obs: &evident_rwe::agent::env::Observation, stays: &std::path::Path) -> Vec<f64> {
    match tool {
        "fisher_test" => {
            let c = columns(stays, &["older", "died"]);
            let count = |r: f64, k: f64| c[0].iter().zip(&c[1]).filter(|(a, b)| **a == r && **b == k).count() as u64;
            let f = evident_stats::htest::fisher_test(
                count(1.0, 1.0),
                count(1.0, 0.0),
                count(0.0, 1.0),
                count(0.0, 0.0),
                0.95,
            )
            .unwrap();
            vec![f.odds_ratio, f.conf_low, f.conf_high, f.p_value]
        }
        "describe" => columns(stays, &["age", "los"])
            .iter()
            .flat_map(|c| {
                let s = evident_stats::describe::summarize(c).unwrap();
                [s.n as f64, s.mean, s.sd, s.median, s.q1, s.q3]
            })
            .collect(),
        "linear_regression" => {
            let c = columns(stays, &["los", "age", "female"]);
            let x = [
                evident_stats::glm::Predictor { name: "age", values: &c[1] },
                evident_stats::glm::Predictor { name: "female", values: &c[2] },
            ];
            let fit = evident_stats::glm::lm(&c[0], &x, None, 0.95).unwrap();
            fit.coefficients.iter().flat_map(|c| [c.estimate, c.conf_low, c.conf_high, c.p_value]).collect()
        }
        _ => panic!("{tool}: no analysis kept: {}", obs.text),
    }
}

/// The greedy matching the PSM tool is checked against in `crates/stats`.
const GREEDY_MATCH: &str = include_str!("../../stats/tests/r/greedy_match.R");

const R_BENCH: &str = r#"suppressPackageStartupMessages({library(survival); library(pROC)})
source("greedy_match.R")
n <- as.integer(commandArgs(trailingOnly = TRUE)[1])
per <- function(expr_fun) { t <- system.time(for (i in seq_len(n)) r <- expr_fun())[["elapsed"]]; list(ms = 1000 * t / n, r = r) }
out <- function(name, fit_only, with_read, est) cat(name, sprintf("%.4f", fit_only$ms), sprintf("%.4f", with_read$ms), sprintf("%.15g", est), "\n")
logit <- function(d) { f <- glm(died ~ lactate + age + female, family = binomial, data = d); s <- summary(f)$coefficients; ci <- exp(confint.default(f))
  unlist(lapply(c("lactate", "age", "female"), function(v) c(exp(s[v, 1]), ci[v, 1], ci[v, 2], s[v, 4]))) }
km <- function(d) { lr <- survdiff(Surv(days, died_1y) ~ high, data = d); survfit(Surv(days, died_1y) ~ high, data = d); c(lr$chisq, pchisq(lr$chisq, 1, lower.tail = FALSE)) }
cox <- function(d) { f <- coxph(Surv(days, died_1y) ~ high + age + female, data = d, ties = "efron"); s <- summary(f)$coefficients; ci <- exp(confint(f))
  unlist(lapply(c("high", "age", "female"), function(v) c(exp(s[v, 1]), ci[v, 1], ci[v, 2], s[v, 5]))) }
auc <- function(d) { r <- roc(d$died_28d, d$anion_gap, quiet = TRUE, direction = "<"); ci <- ci.auc(r, method = "delong"); c(ci[2], ci[1], ci[3]) }
desc <- function(d) unlist(lapply(c("age", "los"), function(v) { x <- d[[v]][!is.na(d[[v]])]; q <- unname(quantile(x, c(.25, .5, .75), type = 7))
  c(length(x), mean(x), sd(x), q[2], q[1], q[3]) }))
pois <- function(d) { f <- glm(n_dx ~ age + female + offset(log_days), family = poisson, data = d); s <- summary(f)$coefficients; ci <- exp(confint.default(f))
  unlist(lapply(c("age", "female"), function(v) c(exp(s[v, 1]), ci[v, 1], ci[v, 2], s[v, 4]))) }
lin <- function(d) { f <- lm(los ~ age + female, data = d); s <- summary(f)$coefficients; ci <- confint(f)
  unlist(lapply(c("(Intercept)", "age", "female"), function(v) c(s[v, 1], ci[v, 1], ci[v, 2], s[v, 4]))) }
fish <- function(d) { f <- fisher.test(table(factor(d$older, levels = c(1, 0)), factor(d$died, levels = c(1, 0))))
  c(f$estimate, f$conf.int[1], f$conf.int[2], f$p.value) }
hc0 <- function(fit, y, w) { X <- model.matrix(fit); b <- summary(fit)$cov.unscaled
  V <- b %*% crossprod(X * (w * (y - fitted(fit)))) %*% b; est <- coef(fit)[2]; se <- sqrt(V[2, 2])
  c(exp(est), exp(est - qnorm(.975) * se), exp(est + qnorm(.975) * se), 2 * pnorm(-abs(est / se))) }
psm <- function(d) { dist <- predict(glm(emergency ~ age + female, data = d, family = binomial))
  m <- greedy_match(d$emergency, dist, 1, 0.2); tr <- which(d$emergency == 1); keep <- sort(c(tr[!is.na(m[, 1])], m[!is.na(m[, 1]), 1]))
  dm <- d[keep, ]; w <- rep(1, nrow(dm)); hc0(suppressWarnings(glm(died ~ emergency, weights = w, family = quasibinomial, data = dm)), dm$died, w) }
iptw <- function(d) { ps <- fitted(glm(emergency ~ age + female, data = d, family = binomial)); w <- d$emergency / ps + (1 - d$emergency) / (1 - ps)
  hc0(suppressWarnings(glm(died ~ emergency, weights = w, family = quasibinomial, data = d)), d$died, w) }
for (job in list(list("logistic_regression", "lactate.csv", logit), list("kaplan_meier_logrank", "rdw.csv", km),
                 list("cox_regression", "rdw.csv", cox), list("roc_auc", "ag.csv", auc),
                 list("describe", "stays.csv", desc), list("poisson_regression", "stays.csv", pois),
                 list("linear_regression", "stays.csv", lin), list("fisher_test", "stays.csv", fish),
                 list("propensity_matching", "stays.csv", psm), list("iptw", "stays.csv", iptw))) {
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
    let root = env.workspace().root().to_path_buf();
    let mut act = |json: &str| env.execute(1, &parse_action(&format!("Action: {json}"), Strategy::Typed).unwrap());
    let cohorts = [
        (lab_cohort(50813, "lactate"), "lactate.csv"),
        (lab_cohort(51277, "rdw"), "rdw.csv"),
        (lab_cohort(50868, "anion_gap"), "ag.csv"),
        (stays_cohort(), "stays.csv"),
    ];
    for (sql, file) in cohorts {
        let sql = serde_json::to_string(&sql).unwrap();
        let obs = act(&format!(r#"{{"action": "run_sql", "params": {{"sql": {sql}, "save_as": "{file}"}}}}"#));
        println!("{file}: {}", obs.text.lines().next().unwrap_or(""));
    }
    let stays = root.join("stays.csv");
    add_log_days(&stays);
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
        ("describe", r#"{"action": "describe", "params": {"file": "stays.csv", "columns": ["age", "los"]}}"#),
        (
            "poisson_regression",
            r#"{"action": "poisson_regression", "params": {"file": "stays.csv", "outcome": "n_dx", "predictors": ["age", "female"], "offset": "log_days"}}"#,
        ),
        (
            "linear_regression",
            r#"{"action": "linear_regression", "params": {"file": "stays.csv", "outcome": "los", "predictors": ["age", "female"]}}"#,
        ),
        (
            "fisher_test",
            r#"{"action": "fisher_test", "params": {"file": "stays.csv", "row": "older", "column": "died"}}"#,
        ),
        (
            "propensity_matching",
            r#"{"action": "propensity_matching", "params": {"file": "stays.csv", "treatment": "emergency", "covariates": ["age", "female"], "outcome": "died"}}"#,
        ),
        (
            "iptw",
            r#"{"action": "iptw", "params": {"file": "stays.csv", "treatment": "emergency", "covariates": ["age", "female"], "outcome": "died", "estimand": "ate"}}"#,
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
        let est = match &obs.analysis {
            Some(analysis) => estimates(analysis),
            None => other_estimates(tool, &obs, &stays),
        };
        ours.push((tool, median_ms(ms), est));
    }
    std::fs::write(root.join("greedy_match.R"), GREEDY_MATCH).unwrap();
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
        let diff = est.iter().zip(r_est).map(|(a, b)| (a - b).abs() / b.abs().max(1e-300)).fold(0.0, f64::max);
        println!("| `{tool}` | {ms:.2} ms | {r_fit:.2} ms | {r_read:.2} ms | {diff:.1e} |");
    }
}
