//! Linear, logistic and Poisson regression compared with R's `lm` and `glm`
//! (Wald CIs as `confint.default`) on mtcars, MASS::birthwt, infert and
//! esoph; plus the bad-input errors with their exact messages.

mod common;

use common::{close, close_all, num, nums, r_json};
use evident_stats::glm::{glm, lm, Family, GlmConfig, Predictor};
use evident_stats::StatsError;
use serde_json::Value;

fn preds<'a>(names: &'a [&'a str], cols: &'a [Vec<f64>]) -> Vec<Predictor<'a>> {
    names.iter().zip(cols).map(|(n, c)| Predictor { name: n, values: c }).collect()
}

fn columns(r: &Value, names: &[&str]) -> Vec<Vec<f64>> {
    names.iter().map(|n| nums(&r["data"][n])).collect()
}

const GLM_REF: &str = r#"
    ref <- function(f) { s <- summary(f); ci <- confint.default(f)
      list(coef = unname(coef(f)), se = unname(s$coefficients[, 2]), stat = unname(s$coefficients[, 3]),
           p = unname(s$coefficients[, 4]), lo = unname(ci[, 1]), hi = unname(ci[, 2]),
           deviance = deviance(f), null = f$null.deviance, aic = AIC(f), iter = f$iter) }
"#;

fn check_coefs(what: &str, coefs: &[evident_stats::glm::Coefficient], r: &Value) {
    close_all(&format!("{what} coef"), &coefs.iter().map(|c| c.estimate).collect::<Vec<_>>(), &nums(&r["coef"]));
    close_all(&format!("{what} se"), &coefs.iter().map(|c| c.std_error).collect::<Vec<_>>(), &nums(&r["se"]));
    close_all(&format!("{what} stat"), &coefs.iter().map(|c| c.statistic).collect::<Vec<_>>(), &nums(&r["stat"]));
    close_all(&format!("{what} p"), &coefs.iter().map(|c| c.p_value).collect::<Vec<_>>(), &nums(&r["p"]));
    close_all(&format!("{what} lo"), &coefs.iter().map(|c| c.conf_low).collect::<Vec<_>>(), &nums(&r["lo"]));
    close_all(&format!("{what} hi"), &coefs.iter().map(|c| c.conf_high).collect::<Vec<_>>(), &nums(&r["hi"]));
}

#[test]
fn linear_regression_matches_lm_on_mtcars() {
    let r = r_json(&format!(
        "{GLM_REF}
        f <- lm(mpg ~ wt + hp + qsec + am + disp, data = mtcars); s <- summary(f); ci <- confint(f)
        out(list(data = mtcars, fit = list(coef = unname(coef(f)), se = unname(s$coefficients[, 2]), stat = unname(s$coefficients[, 3]),
           p = unname(s$coefficients[, 4]), lo = unname(ci[, 1]), hi = unname(ci[, 2]), sigma = s$sigma, r2 = s$r.squared,
           adj = s$adj.r.squared, f = unname(s$fstatistic[1]),
           fp = unname(pf(s$fstatistic[1], s$fstatistic[2], s$fstatistic[3], lower.tail = FALSE)))))"
    ));
    let names = ["wt", "hp", "qsec", "am", "disp"];
    let cols = columns(&r, &names);
    let fit = lm(&nums(&r["data"]["mpg"]), &preds(&names, &cols), None, 0.95).unwrap();
    check_coefs("lm", &fit.coefficients, &r["fit"]);
    close("sigma", fit.sigma, num(&r["fit"]["sigma"]));
    close("r2", fit.r_squared, num(&r["fit"]["r2"]));
    close("adj r2", fit.adj_r_squared, num(&r["fit"]["adj"]));
    close("F", fit.f_statistic, num(&r["fit"]["f"]));
    close("F p", fit.f_p_value, num(&r["fit"]["fp"]));
}

#[test]
fn logistic_regression_matches_glm_on_birthwt_and_infert() {
    let r = r_json(&format!(
        "{GLM_REF}
        b <- birthwt; b$race2 <- as.numeric(b$race == 2); b$race3 <- as.numeric(b$race == 3)
        f1 <- glm(low ~ age + lwt + race2 + race3 + smoke + ptl + ht + ui + ftv, family = binomial, data = b)
        f2 <- glm(case ~ spontaneous + induced + age + parity, family = binomial, data = infert)
        out(list(data = b, infert = infert, f1 = ref(f1), f2 = ref(f2)))"
    ));
    let names = ["age", "lwt", "race2", "race3", "smoke", "ptl", "ht", "ui", "ftv"];
    let cols = columns(&r, &names);
    let fit = glm(&nums(&r["data"]["low"]), &preds(&names, &cols), Family::Binomial, &GlmConfig::default()).unwrap();
    check_coefs("birthwt", &fit.coefficients, &r["f1"]);
    close("deviance", fit.deviance, num(&r["f1"]["deviance"]));
    close("null deviance", fit.null_deviance, num(&r["f1"]["null"]));
    close("aic", fit.aic, num(&r["f1"]["aic"]));
    assert_eq!(fit.iterations as f64, num(&r["f1"]["iter"]));
    let names = ["spontaneous", "induced", "age", "parity"];
    let cols: Vec<Vec<f64>> = names.iter().map(|n| nums(&r["infert"][n])).collect();
    let fit = glm(&nums(&r["infert"]["case"]), &preds(&names, &cols), Family::Binomial, &GlmConfig::default()).unwrap();
    check_coefs("infert", &fit.coefficients, &r["f2"]);
    close("aic", fit.aic, num(&r["f2"]["aic"]));
    // Odds ratios and their CIs are exp of the above.
    let c = &fit.coefficients[1];
    close("OR", c.exp_estimate(), nums(&r["f2"]["coef"])[1].exp());
}

#[test]
fn poisson_with_offset_matches_glm_on_esoph_and_simulated_data() {
    let r = r_json(&format!(
        "{GLM_REF}
        e <- data.frame(ncases = esoph$ncases, agegp = as.numeric(esoph$agegp), alcgp = as.numeric(esoph$alcgp),
                        tobgp = as.numeric(esoph$tobgp), logn = log(esoph$ncases + esoph$ncontrols))
        f1 <- glm(ncases ~ agegp + alcgp + tobgp + offset(logn), family = poisson, data = e)
        set.seed(11); n <- 500
        s <- data.frame(x1 = rnorm(n), x2 = rbinom(n, 1, 0.4), t = round(runif(n, 0.5, 5), 3))
        s$y <- rpois(n, s$t * exp(-1 + 0.3 * s$x1 - 0.5 * s$x2))
        f2 <- glm(y ~ x1 + x2, offset = log(t), family = poisson, data = s)
        out(list(data = e, sim = s, f1 = ref(f1), f2 = ref(f2)))"
    ));
    let names = ["agegp", "alcgp", "tobgp"];
    let cols = columns(&r, &names);
    let offset = nums(&r["data"]["logn"]);
    let config = GlmConfig { offset: Some(&offset), ..Default::default() };
    let fit = glm(&nums(&r["data"]["ncases"]), &preds(&names, &cols), Family::Poisson, &config).unwrap();
    check_coefs("esoph", &fit.coefficients, &r["f1"]);
    close("deviance", fit.deviance, num(&r["f1"]["deviance"]));
    close("null deviance", fit.null_deviance, num(&r["f1"]["null"]));
    close("aic", fit.aic, num(&r["f1"]["aic"]));
    let names = ["x1", "x2"];
    let cols: Vec<Vec<f64>> = names.iter().map(|n| nums(&r["sim"][n])).collect();
    let offset: Vec<f64> = nums(&r["sim"]["t"]).iter().map(|t| t.ln()).collect();
    let config = GlmConfig { offset: Some(&offset), ..Default::default() };
    let fit = glm(&nums(&r["sim"]["y"]), &preds(&names, &cols), Family::Poisson, &config).unwrap();
    check_coefs("sim", &fit.coefficients, &r["f2"]);
    close("aic", fit.aic, num(&r["f2"]["aic"]));
    close("null deviance", fit.null_deviance, num(&r["f2"]["null"]));
}

#[test]
fn regression_bad_input_errors() {
    let y = vec![0.0, 1.0, 0.0, 1.0, 1.0, 0.0];
    let x = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let konst = vec![3.0; 6];
    let e = glm(
        &y,
        &[Predictor { name: "x", values: &x }, Predictor { name: "site", values: &konst }],
        Family::Binomial,
        &GlmConfig::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "logistic regression: covariate `site` is constant (every row is 3); drop it from the model"
    );
    let x2: Vec<f64> = x.iter().map(|v| 2.0 * v + 1.0).collect();
    let e = lm(
        &x,
        &[
            Predictor { name: "x", values: &y },
            Predictor { name: "a", values: &x },
            Predictor { name: "b", values: &x2 },
        ],
        None,
        0.95,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "linear regression: design matrix is singular: column `b` is a linear combination of the columns before it; drop it or merge the categories"
    );
    let sep_y = vec![0.0, 0.0, 0.0, 1.0, 1.0, 1.0];
    let e = glm(&sep_y, &[Predictor { name: "x", values: &x }], Family::Binomial, &GlmConfig::default()).unwrap_err();
    assert!(matches!(e, StatsError::Separation { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "logistic regression: complete separation: fitted probabilities are numerically 0 or 1 for 4 of 6 rows, so the odds ratios are infinite; drop or merge the covariate that predicts the outcome perfectly, or use penalised (Firth) regression"
    );
    let e = glm(&[], &[Predictor { name: "x", values: &[] }], Family::Poisson, &GlmConfig::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Poisson regression: no rows to analyse (0 rows given, 0 dropped for missing values); check the cohort filter and the missing values"
    );
    let e = glm(
        &[0.0, 1.0, 2.0],
        &[Predictor { name: "x", values: &[1.0, f64::NAN, 2.0] }],
        Family::Poisson,
        &GlmConfig::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Poisson regression: column `x` has value NaN at row 2, expected a finite number; remove missing values first (listwise deletion)"
    );
}

#[test]
fn listwise_deletion_reports_counts() {
    use evident_stats::Frame;
    let f = Frame::new()
        .with("y", vec![1.0, 0.0, f64::NAN, 1.0, 0.0])
        .with("x", vec![f64::NAN, 2.0, f64::NAN, 4.0, 5.0])
        .with("z", vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    let (cols, report) = f.complete_cases("logistic regression", &["y", "x", "z"]).unwrap();
    assert_eq!(cols[2], vec![2.0, 4.0, 5.0]);
    assert_eq!(report.rows_in, 5);
    assert_eq!(report.rows_used, 3);
    assert_eq!(report.rows_dropped(), 2);
    assert_eq!(report.missing_by_column, vec![("y".to_string(), 1), ("x".to_string(), 2)]);
    let all_missing = Frame::new().with("y", vec![f64::NAN, f64::NAN]);
    let e = all_missing.complete_cases("Cox model", &["y"]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Cox model: no rows to analyse (2 rows given, 2 dropped for missing values); check the cohort filter and the missing values"
    );
}
