//! `evident stats` end to end: R writes its datasets to CSV in a tempdir and
//! computes reference values; the built binary reads the CSVs and its JSON
//! output must agree with R to 1e-6 relative. Bad input must exit 2 with the
//! exact message, naming the user's file, column and CSV line (the header is
//! line 1; rows dropped for missing values still count). R (with survival,
//! MASS, MatchIt, pROC, jsonlite) must be installed: a missing R fails the
//! tests that compare with it.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn r_json(dir: &Path, script: &str) -> Value {
    let path = dir.join("script.R");
    let full = format!(
        "suppressPackageStartupMessages({{library(jsonlite); library(survival); library(MASS)}})\nsetwd('{}')\nout <- function(x) cat(toJSON(x, dataframe = 'columns', digits = NA, auto_unbox = TRUE, na = 'string'))\n{script}\n",
        dir.display()
    );
    std::fs::write(&path, full).unwrap();
    let o = Command::new("Rscript").arg("--vanilla").arg(&path).output().expect("Rscript must be installed");
    assert!(o.status.success(), "R failed: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn evident(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_evident"))
        .current_dir(dir)
        .arg("--db")
        .arg(dir.join("unused.db"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

fn json_of(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json", "stats"];
    all.extend_from_slice(args);
    let (code, out, err) = evident(dir, &all);
    assert_eq!(code, 0, "evident {args:?} failed: {err}{out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) if s == "Inf" => f64::INFINITY,
        Value::String(s) if s == "NA" || s == "NaN" => f64::NAN,
        Value::Null => f64::NAN,
        _ => v.as_f64().unwrap_or_else(|| panic!("not a number: {v}")),
    }
}

fn nums(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(a) => a.iter().map(num).collect(),
        other => vec![num(other)],
    }
}

#[track_caller]
fn close(what: &str, ours: f64, r: f64) {
    if r.is_nan() {
        assert!(ours.is_nan(), "{what}: ours {ours}, R NA");
        return;
    }
    assert!((ours - r).abs() <= 1e-6 * r.abs().max(1e-12), "{what}: ours {ours}, R {r}");
}

#[track_caller]
fn close_all(what: &str, ours: &[f64], r: &[f64]) {
    assert_eq!(ours.len(), r.len(), "{what}: lengths");
    for (i, (a, b)) in ours.iter().zip(r).enumerate() {
        close(&format!("{what}[{i}]"), *a, *b);
    }
}

fn field(rows: &Value, key: &str) -> Vec<f64> {
    rows.as_array().unwrap().iter().map(|c| num(&c[key])).collect()
}

#[test]
fn cox_km_logrank_on_lung_csv_match_r() {
    let dir = tempfile::tempdir().unwrap();
    let r = r_json(
        dir.path(),
        r#"
        d <- data.frame(time = lung$time, status = lung$status - 1, age = lung$age, sex = lung$sex, ecog = lung$ph.ecog, wtloss = lung$wt.loss)
        write.csv(d, "lung.csv", row.names = FALSE, na = "NA")
        f <- coxph(Surv(time, status) ~ age + sex + ecog + wtloss, data = d)
        km <- survfit(Surv(time, status) ~ sex, data = d); t <- summary(km)$table
        lr <- survdiff(Surv(time, status) ~ sex, data = d)
        out(list(coef = unname(coef(f)), se = unname(sqrt(diag(vcov(f)))), n = f$n, nmiss = length(f$na.action),
                 conc = unname(f$concordance["concordance"]), lr = 2 * diff(f$loglik),
                 median = unname(t[, "median"]), lcl = unname(t[, "0.95LCL"]), ucl = unname(t[, "0.95UCL"]),
                 chisq = lr$chisq))
        "#,
    );
    let j = json_of(
        dir.path(),
        &[
            "cox",
            "--data",
            "lung.csv",
            "--time",
            "time",
            "--event",
            "status",
            "--covariates",
            "age,sex,ecog,wtloss",
            "--forest",
            "forest.svg",
        ],
    );
    close_all("cox coef", &field(&j["cox"]["coefficients"], "estimate"), &nums(&r["coef"]));
    close_all("cox se", &field(&j["cox"]["coefficients"], "std_error"), &nums(&r["se"]));
    close("concordance", num(&j["cox"]["concordance"]["concordance"]), num(&r["conc"]));
    close("LR", num(&j["cox"]["likelihood_ratio"]["statistic"]), num(&r["lr"]));
    assert_eq!(num(&j["missing"]["rows_used"]), num(&r["n"]));
    assert_eq!(num(&j["missing"]["rows_in"]) - num(&j["missing"]["rows_used"]), num(&r["nmiss"]));
    assert!(std::fs::read_to_string(dir.path().join("forest.svg")).unwrap().contains("class=\"estimate\""));

    let j = json_of(
        dir.path(),
        &["km", "--data", "lung.csv", "--time", "time", "--event", "status", "--group", "sex", "--svg", "km.svg"],
    );
    close_all("median", &field(&j["km"], "median"), &nums(&r["median"]));
    close_all("median lcl", &field(&j["km"], "median_lower"), &nums(&r["lcl"]));
    close_all("median ucl", &field(&j["km"], "median_upper"), &nums(&r["ucl"]));
    let svg = std::fs::read_to_string(dir.path().join("km.svg")).unwrap();
    assert_eq!(svg.matches("class=\"km-curve\"").count(), 2);
    assert!(svg.contains("Number at risk"));

    let j = json_of(
        dir.path(),
        &["logrank", "--data", "lung.csv", "--time", "time", "--event", "status", "--group", "sex"],
    );
    close("log-rank", num(&j["logrank"]["test"]["statistic"]), num(&r["chisq"]));

    // Text output names the rows dropped for missing values.
    let (code, out, _) = evident(
        dir.path(),
        &[
            "stats",
            "cox",
            "--data",
            "lung.csv",
            "--time",
            "time",
            "--event",
            "status",
            "--covariates",
            "age,ecog,wtloss",
        ],
    );
    assert_eq!(code, 0);
    assert!(out.contains("rows: 213 of 228 used; 15 dropped for missing values (ecog: 1, wtloss: 14)"), "{out}");
}

#[test]
fn regression_tests_and_auc_on_birthwt_csv_match_r() {
    let dir = tempfile::tempdir().unwrap();
    let r = r_json(
        dir.path(),
        r#"
        suppressPackageStartupMessages(library(pROC))
        b <- birthwt; write.csv(b, "birthwt.csv", row.names = FALSE)
        f <- glm(low ~ age + lwt + smoke + ht + ui, family = binomial, data = b)
        t <- t.test(bwt ~ smoke, data = b)
        fi <- fisher.test(table(b$smoke, b$low))
        w <- wilcox.test(bwt ~ smoke, data = b)
        a <- roc(b$low, b$lwt, quiet = TRUE, levels = c(0, 1)); ci <- ci.auc(a, method = "delong")
        out(list(coef = unname(coef(f)), lo = unname(confint.default(f)[, 1]), aic = AIC(f), t = unname(t$statistic), tp = t$p.value,
                 or = unname(fi$estimate), orci = as.vector(fi$conf.int), fp = fi$p.value, wp = w$p.value,
                 auc = as.numeric(a$auc), auclo = ci[1], auchi = ci[3]))
        "#,
    );
    let j = json_of(
        dir.path(),
        &["logistic", "--data", "birthwt.csv", "--outcome", "low", "--covariates", "age,lwt,smoke,ht,ui"],
    );
    close_all("logistic coef", &field(&j["logistic"]["coefficients"], "estimate"), &nums(&r["coef"]));
    close_all("logistic lo", &field(&j["logistic"]["coefficients"], "conf_low"), &nums(&r["lo"]));
    close("aic", num(&j["logistic"]["aic"]), num(&r["aic"]));
    // R's formula interface puts smoke = 0 first: t = mean(0) - mean(1).
    let j = json_of(dir.path(), &["ttest", "--data", "birthwt.csv", "--outcome", "bwt", "--group", "smoke"]);
    close("t", -num(&j["ttest"]["statistic"]), num(&r["t"]));
    close("t p", num(&j["ttest"]["p_value"]), num(&r["tp"]));
    let j = json_of(dir.path(), &["fisher", "--data", "birthwt.csv", "--row", "smoke", "--col", "low"]);
    close("fisher or", num(&j["fisher"]["odds_ratio"]), num(&r["or"]));
    close_all("fisher ci", &[num(&j["fisher"]["conf_low"]), num(&j["fisher"]["conf_high"])], &nums(&r["orci"]));
    close("fisher p", num(&j["fisher"]["p_value"]), num(&r["fp"]));
    let j = json_of(dir.path(), &["wilcoxon", "--data", "birthwt.csv", "--outcome", "bwt", "--group", "smoke"]);
    close("wilcoxon p", num(&j["wilcoxon"]["p_value"]), num(&r["wp"]));
    let j = json_of(dir.path(), &["auc", "--data", "birthwt.csv", "--outcome", "low", "--predictor", "lwt"]);
    close("auc", num(&j["auc"]["auc"]), num(&r["auc"]));
    close_all(
        "auc ci",
        &[num(&j["auc"]["conf_low"]), num(&j["auc"]["conf_high"])],
        &[num(&r["auclo"]), num(&r["auchi"])],
    );
    let j =
        json_of(dir.path(), &["describe", "--data", "birthwt.csv", "--columns", "age,bwt,race", "--group", "smoke"]);
    assert_eq!(j["describe"].as_array().unwrap().len(), 3);
}

#[test]
fn ps_match_reproduces_matchit_sets_from_csv() {
    let dir = tempfile::tempdir().unwrap();
    let r = r_json(
        dir.path(),
        r#"
        suppressPackageStartupMessages(library(MatchIt)); data("lalonde", package = "MatchIt")
        d <- data.frame(treat = lalonde$treat, age = lalonde$age, educ = lalonde$educ, black = as.numeric(lalonde$race == "black"),
                        married = lalonde$married, re74 = lalonde$re74, re75 = lalonde$re75)
        write.csv(d, "lalonde.csv", row.names = FALSE)
        m <- matchit(treat ~ age + educ + black + married + re74 + re75, data = d, distance = "glm", link = "linear.logit", caliper = 0.2)
        out(list(controls = as.integer(m$match.matrix[, 1])))
        "#,
    );
    let j = json_of(
        dir.path(),
        &[
            "ps-match",
            "--data",
            "lalonde.csv",
            "--treatment",
            "treat",
            "--covariates",
            "age,educ,black,married,re74,re75",
            "--matchit-compat",
        ],
    );
    let ours: Vec<f64> = j["ps_match"]["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["controls"].as_array().unwrap().first().map_or(f64::NAN, num))
        .collect();
    let theirs = nums(&r["controls"]);
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(&theirs) {
        assert!(a == b || (a.is_nan() && b.is_nan()), "matched control {a} vs MatchIt {b}");
    }
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("censored.csv"), "time,status,age\n5,0,60\n6,0,61\n7,0,70\n").unwrap();
    let (code, _, err) = evident(
        d,
        &["stats", "cox", "--data", "censored.csv", "--time", "time", "--event", "status", "--covariates", "age"],
    );
    assert_eq!(code, 2);
    assert_eq!(
        err.trim(),
        "error: censored.csv: Cox model: all 3 observations are censored, so there are no events to estimate from; check the event column (1 = event, 0 = censored)"
    );
    std::fs::write(d.join("text.csv"), "y,x\n1,2\n0,male\n").unwrap();
    let (code, _, err) =
        evident(d, &["stats", "logistic", "--data", "text.csv", "--outcome", "y", "--covariates", "x"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("text.csv:3: column x = \"male\" is not a number; recode categories as numbers (e.g. 0/1)"),
        "{err}"
    );
    std::fs::write(d.join("empty.csv"), "y,x\nNA,1\n1,NA\n").unwrap();
    let (code, _, err) = evident(d, &["stats", "linear", "--data", "empty.csv", "--outcome", "y", "--covariates", "x"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("linear regression: no rows to analyse (2 rows given, 2 dropped for missing values)"),
        "{err}"
    );
    std::fs::write(d.join("sep.csv"), "y,x\n0,1\n0,2\n0,3\n1,4\n1,5\n1,6\n").unwrap();
    let (code, _, err) = evident(d, &["stats", "logistic", "--data", "sep.csv", "--outcome", "y", "--covariates", "x"]);
    assert_eq!(code, 2);
    assert!(err.contains("complete separation"), "{err}");
}

/// Writes `csv` as `cohort.csv` in a fresh directory, runs `evident stats
/// ARGS --data cohort.csv`, and checks that it exits 2 with `expected` as
/// the whole error.
#[track_caller]
fn refused(csv: &str, args: &[&str], expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cohort.csv"), csv).unwrap();
    let mut all = vec!["stats"];
    all.extend_from_slice(&args[..1]);
    all.extend_from_slice(&["--data", "cohort.csv"]);
    all.extend_from_slice(&args[1..]);
    let (code, out, err) = evident(dir.path(), &all);
    assert_eq!(code, 2, "evident {all:?} should refuse: {out}{err}");
    assert_eq!(err.trim(), format!("error: {expected}"));
}

/// Line 3 has a missing value, so the bad row on line 4 is the 2nd
/// complete row: the message must say line 4 and the user's column.
#[test]
fn a_negative_time_names_the_file_line_and_column() {
    refused(
        "days,died,age\n5,1,60\n6,,61\n-3,1,70\n8,0,55\n9,1,66\n",
        &["cox", "--time", "days", "--event", "died", "--covariates", "age"],
        "cohort.csv:4: column days = -3 is negative; survival times must be >= 0, check the start and end dates",
    );
    refused(
        "days,died\n5,1\nNA,1\n-3,1\n8,0\n",
        &["km", "--time", "days", "--event", "died"],
        "cohort.csv:4: column days = -3 is negative; survival times must be >= 0, check the start and end dates",
    );
}

#[test]
fn an_invalid_code_names_the_file_line_and_column() {
    refused(
        "days,died,age\n5,1,60\n6,1,\n7,2,70\n8,0,55\n",
        &["cox", "--time", "days", "--event", "died", "--covariates", "age"],
        "cohort.csv:4: column died = 2 is not valid for Cox model; expected 1 (event) or 0 (censored)",
    );
    refused(
        "days,died,arm\n5,1,0\n6,1,NA\n7,2,1\n8,0,1\n",
        &["logrank", "--time", "days", "--event", "died", "--group", "arm"],
        "cohort.csv:4: column died = 2 is not valid for log-rank test; expected 1 (event) or 0 (censored)",
    );
    // The treatment of a propensity model must be 0/1.
    refused(
        "treated,age\n0,20\n1,\n1,25\n2,30\n0,35\n",
        &["ps-match", "--treatment", "treated", "--covariates", "age"],
        "cohort.csv:5: column treated = 2 is not valid for propensity score model; expected 1 (treated) or 0 (comparator)",
    );
    refused(
        "case,score\n0,1.5\n1,NA\n1,2.5\n3,0.5\n",
        &["auc", "--outcome", "case", "--predictor", "score"],
        "cohort.csv:5: column case = 3 is not valid for ROC AUC; expected 1 (case) or 0 (control)",
    );
}

#[test]
fn an_outcome_outside_the_familys_range_names_its_line() {
    refused(
        "low,age\n0,20\n1,\n2,25\n1,30\n0,35\n",
        &["logistic", "--outcome", "low", "--covariates", "age"],
        "cohort.csv:4: column low = 2 is not valid for logistic regression; expected 0 or 1",
    );
    refused(
        "visits,age\n1,20\nNA,21\n3,25\n-1,30\n0,35\n",
        &["poisson", "--outcome", "visits", "--covariates", "age"],
        "cohort.csv:5: column visits = -1 is not valid for Poisson regression; expected a count >= 0",
    );
    // IPTW's weighted outcome model, after a valid propensity model.
    refused(
        "treated,age,died\n0,20,0\n1,22,1\n1,,1\n1,25,2\n0,30,1\n0,33,0\n1,36,0\n0,40,1\n",
        &["iptw", "--treatment", "treated", "--covariates", "age", "--outcome", "died"],
        "cohort.csv:5: column died = 2 is not valid for logistic regression; expected 0 or 1",
    );
}

#[test]
fn a_constant_or_collinear_covariate_names_the_file_and_column() {
    refused(
        "days,died,age,site\n5,1,60,1\n6,1,NA,2\n7,0,70,1\n8,1,55,1\n9,0,66,1\n",
        &["cox", "--time", "days", "--event", "died", "--covariates", "age,site"],
        "cohort.csv: Cox model: covariate `site` is constant (every row is 1); drop it from the model",
    );
    refused(
        "y,dose,dose_mg\n1,1,1000\n3,NA,4\n2,2,2000\n5,3,3000\n4,4,4000\n",
        &["linear", "--outcome", "y", "--covariates", "dose,dose_mg"],
        "cohort.csv: linear regression: design matrix is singular: column `dose_mg` is a linear combination of the columns before it; drop it or merge the categories",
    );
}

#[test]
fn a_group_without_exactly_2_values_names_the_file_line_and_column() {
    refused(
        "bwt,smoke\n3000,0\n2500,\n2600,1\n2700,0\n3100,2\n",
        &["ttest", "--outcome", "bwt", "--group", "smoke"],
        "cohort.csv:6: column smoke = 2 is not valid for t-test; expected exactly 2 distinct values (the rows above have 0 and 1)",
    );
    refused(
        "bwt,smoke\n3000,1\n2500,NA\n2600,1\n",
        &["wilcoxon", "--outcome", "bwt", "--group", "smoke"],
        "cohort.csv: Wilcoxon rank-sum test: column `smoke` is 1 in all 2 rows; it must have exactly 2 distinct values, one per group",
    );
}

#[test]
fn json_errors_carry_the_same_message() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cohort.csv"), "days,died\n5,1\nNA,1\n-3,1\n").unwrap();
    let (code, out, _) =
        evident(dir.path(), &["--json", "stats", "km", "--data", "cohort.csv", "--time", "days", "--event", "died"]);
    assert_eq!(code, 2);
    let error: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        error["error"],
        "cohort.csv:4: column days = -3 is negative; survival times must be >= 0, check the start and end dates"
    );
}
