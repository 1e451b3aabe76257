//! Propensity score matching compared with MatchIt 4.5 (identical matched
//! sets and weights, balance SMDs), IPW effects with HC0 sandwich SEs
//! compared with weighted `glm`/`lm` plus the sandwich formula, and ROC AUC
//! with DeLong CI compared with pROC.

mod common;

use common::{close, close_all, num, nums, r_json};
use evident_stats::glm::Predictor;
use evident_stats::propensity::{
    balance, iptw_effect, ipw_weights, match_nearest, matched_effect, propensity_scores, weighted_effect,
    DistanceArithmetic, Estimand, MatchConfig, MatchOrder, OutcomeModel,
};
use evident_stats::roc::auc_delong;
use serde_json::Value;

const LALONDE: &str = r#"
    suppressPackageStartupMessages(library(MatchIt))
    data("lalonde", package = "MatchIt")
    d <- data.frame(treat = lalonde$treat, age = lalonde$age, educ = lalonde$educ,
                    black = as.numeric(lalonde$race == "black"), hispan = as.numeric(lalonde$race == "hispan"),
                    married = lalonde$married, nodegree = lalonde$nodegree, re74 = lalonde$re74, re75 = lalonde$re75,
                    re78 = lalonde$re78)
    f <- treat ~ age + educ + black + hispan + married + nodegree + re74 + re75
    mres <- function(m) { mm <- m$match.matrix; idx <- matrix(as.integer(mm), nrow(mm))
      s <- summary(m); cov <- setdiff(rownames(s$sum.all), "distance")
      list(treated = as.integer(rownames(mm)), controls = idx, weights = unname(m$weights), distance = unname(m$distance),
           smd_before = unname(s$sum.all[cov, "Std. Mean Diff."]), smd_after = unname(s$sum.matched[cov, "Std. Mean Diff."])) }
"#;

const COVS: [&str; 8] = ["age", "educ", "black", "hispan", "married", "nodegree", "re74", "re75"];

fn check_matching(what: &str, d: &Value, r: &Value, config: &MatchConfig) {
    let cols: Vec<Vec<f64>> = COVS.iter().map(|n| nums(&d[n])).collect();
    let x: Vec<Predictor> = COVS.iter().zip(&cols).map(|(n, c)| Predictor { name: n, values: c }).collect();
    let treat = nums(&d["treat"]);
    let ps = propensity_scores(&treat, &x).unwrap();
    close_all(&format!("{what} distance"), &ps.logit, &nums(&r["distance"]));
    let m = match_nearest(&treat, &ps.logit, config).unwrap();
    // Matched sets must be identical: same controls, same order, per treated unit.
    let treated: Vec<usize> = nums(&r["treated"]).iter().map(|v| *v as usize - 1).collect();
    let controls = r["controls"].as_array().unwrap();
    assert_eq!(m.pairs.len(), treated.len(), "{what}: number of treated");
    for ((t, ours), (rt, rc)) in m.pairs.iter().zip(treated.iter().zip(controls)) {
        assert_eq!(t, rt, "{what}: treated order");
        let theirs: Vec<usize> = rc
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| !v.is_null() && v.as_str() != Some("NA"))
            .map(|v| num(v) as usize - 1)
            .collect();
        assert_eq!(ours, &theirs, "{what}: controls of treated row {}", t + 1);
    }
    close_all(&format!("{what} weights"), &m.weights, &nums(&r["weights"]));
    let b = balance(&treat, &x, &m.weights).unwrap();
    close_all(
        &format!("{what} smd before"),
        &b.iter().map(|b| b.smd_before).collect::<Vec<_>>(),
        &nums(&r["smd_before"]),
    );
    close_all(&format!("{what} smd after"), &b.iter().map(|b| b.smd_after).collect::<Vec<_>>(), &nums(&r["smd_after"]));
}

#[test]
fn nearest_neighbour_matching_is_matchits() {
    let r = r_json(&format!(
        "{LALONDE}
        m1 <- matchit(f, data = d, method = 'nearest', distance = 'glm', link = 'linear.logit', caliper = 0.2)
        m2 <- matchit(f, data = d, method = 'nearest', distance = 'glm', link = 'linear.logit', caliper = 0.2, ratio = 2)
        m3 <- matchit(f, data = d, method = 'nearest', distance = 'glm', link = 'linear.logit')
        m4 <- matchit(f, data = d, method = 'nearest', distance = 'glm', link = 'linear.logit', caliper = 0.05, m.order = 'smallest', ratio = 3)
        out(list(d = d, m1 = mres(m1), m2 = mres(m2), m3 = mres(m3), m4 = mres(m4)))"
    ));
    let compat = MatchConfig { arithmetic: DistanceArithmetic::MatchIt451, ..Default::default() };
    check_matching("1:1 caliper 0.2", &r["d"], &r["m1"], &compat);
    check_matching("1:2 caliper 0.2", &r["d"], &r["m2"], &MatchConfig { ratio: 2, ..compat });
    check_matching("1:1 no caliper", &r["d"], &r["m3"], &MatchConfig { caliper_sd: None, ..compat });
    check_matching(
        "1:3 caliper 0.05 smallest",
        &r["d"],
        &r["m4"],
        &MatchConfig { ratio: 3, caliper_sd: Some(0.05), order: MatchOrder::Smallest, ..compat },
    );
}

#[test]
fn exact_arithmetic_matching_keeps_the_caliper_and_matches_an_r_reference() {
    let r = r_json(&format!(
        "{LALONDE}
        source(file.path(R_DIR, 'greedy_match.R'))
        dist <- predict(glm(f, data = d, family = binomial))
        out(list(d = d, dist = unname(dist), m1 = greedy_match(d$treat, dist, 1, 0.2), m2 = greedy_match(d$treat, dist, 2, 0.2),
                 m3 = greedy_match(d$treat, dist, 3, 0.05, 'smallest')))"
    ));
    let treat = nums(&r["d"]["treat"]);
    let dist = nums(&r["dist"]);
    for (key, config) in [
        ("m1", MatchConfig::default()),
        ("m2", MatchConfig { ratio: 2, ..Default::default() }),
        ("m3", MatchConfig { ratio: 3, caliper_sd: Some(0.05), order: MatchOrder::Smallest, ..Default::default() }),
    ] {
        let m = match_nearest(&treat, &dist, &config).unwrap();
        let caliper = m.caliper.unwrap();
        for ((t, controls), rrow) in m.pairs.iter().zip(r[key].as_array().unwrap()) {
            let theirs: Vec<usize> = rrow
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| v.as_str() != Some("NA"))
                .map(|v| num(v) as usize - 1)
                .collect();
            assert_eq!(controls, &theirs, "{key}: controls of treated row {}", t + 1);
            for c in controls {
                assert!((dist[*t] - dist[*c]).abs() <= caliper, "{key}: pair outside the caliper");
            }
        }
    }
}

#[test]
fn ipw_effects_match_weighted_glm_with_sandwich() {
    let r = r_json(&format!(
        "{LALONDE}
        ps <- fitted(glm(f, data = d, family = binomial))
        hc0 <- function(fit, y, w) {{ X <- model.matrix(fit); b <- summary(fit)$cov.unscaled
          V <- b %*% crossprod(X * (w * (y - fitted(fit)))) %*% b; est <- coef(fit)[2]; se <- sqrt(V[2, 2])
          c(est, se, 2 * pnorm(-abs(est / se)), est - qnorm(.975) * se, est + qnorm(.975) * se) }}
        d$emp <- as.numeric(d$re78 > 0)
        res <- list()
        for (e in c('ATE', 'ATT')) {{
          w <- if (e == 'ATE') d$treat / ps + (1 - d$treat) / (1 - ps) else d$treat + (1 - d$treat) * ps / (1 - ps)
          fl <- suppressWarnings(glm(emp ~ treat, weights = w, family = quasibinomial, data = d))
          fo <- lm(re78 ~ treat, weights = w, data = d)
          res[[e]] <- list(w = w, logistic = hc0(fl, d$emp, w), linear = hc0(fo, d$re78, w))
        }}
        out(list(d = d, ps = unname(ps), res = res))"
    ));
    let d = &r["d"];
    let cols: Vec<Vec<f64>> = COVS.iter().map(|n| nums(&d[n])).collect();
    let x: Vec<Predictor> = COVS.iter().zip(&cols).map(|(n, c)| Predictor { name: n, values: c }).collect();
    let treat = nums(&d["treat"]);
    let ps = propensity_scores(&treat, &x).unwrap();
    close_all("ps", &ps.score, &nums(&r["ps"]));
    for (key, est) in [("ATE", Estimand::Ate), ("ATT", Estimand::Att)] {
        let w = ipw_weights(&treat, &ps.score, est).unwrap();
        close_all(&format!("{key} weights"), &w, &nums(&r["res"][key]["w"]));
        for (model, y, name) in [(OutcomeModel::Logistic, "emp", "logistic"), (OutcomeModel::Linear, "re78", "linear")]
        {
            let e = weighted_effect(&nums(&d[y]), &treat, &w, model, 0.95).unwrap();
            close_all(
                &format!("{key} {name}"),
                &[e.estimate, e.robust_se, e.p_value, e.conf_low, e.conf_high],
                &nums(&r["res"][key][name]),
            );
        }
    }
}

/// The end-to-end PSM and IPTW tools against base R: PS by `glm`, 1:1
/// caliper-0.2 matching by `greedy_match.R`, the outcome model on the
/// matched units (or weighted) and the HC0 sandwich written out.
#[test]
fn matched_and_iptw_effects_match_base_r() {
    let r = r_json(&format!(
        "{LALONDE}
        source(file.path(R_DIR, 'greedy_match.R'))
        d$emp <- as.numeric(d$re78 > 0)
        fit_ps <- glm(f, data = d, family = binomial); ps <- fitted(fit_ps); dist <- predict(fit_ps)
        hc0 <- function(fit, y, w) {{ X <- model.matrix(fit); b <- summary(fit)$cov.unscaled
          V <- b %*% crossprod(X * (w * (y - fitted(fit)))) %*% b; est <- coef(fit)[2]; se <- sqrt(V[2, 2])
          c(est, se, 2 * pnorm(-abs(est / se)), est - qnorm(.975) * se, est + qnorm(.975) * se) }}
        m <- greedy_match(d$treat, dist, 1, 0.2)
        tr <- which(d$treat == 1); keep <- sort(c(tr[!is.na(m[, 1])], m[!is.na(m[, 1]), 1]))
        dm <- d[keep, ]; w <- rep(1, nrow(dm))
        fl <- suppressWarnings(glm(emp ~ treat, weights = w, family = quasibinomial, data = dm))
        fo <- lm(re78 ~ treat, weights = w, data = dm)
        wa <- d$treat / ps + (1 - d$treat) / (1 - ps)
        il <- suppressWarnings(glm(emp ~ treat, weights = wa, family = quasibinomial, data = d))
        io <- lm(re78 ~ treat, weights = wa, data = d)
        out(list(d = d, n_matched = length(keep), psm_logistic = hc0(fl, dm$emp, w), psm_linear = hc0(fo, dm$re78, w),
                 iptw_logistic = hc0(il, d$emp, wa), iptw_linear = hc0(io, d$re78, wa)))"
    ));
    let d = &r["d"];
    let cols: Vec<Vec<f64>> = COVS.iter().map(|n| nums(&d[n])).collect();
    let x: Vec<Predictor> = COVS.iter().zip(&cols).map(|(n, c)| Predictor { name: n, values: c }).collect();
    let treat = nums(&d["treat"]);
    let parts =
        |e: &evident_stats::propensity::WeightedEffect| [e.estimate, e.robust_se, e.p_value, e.conf_low, e.conf_high];
    for (model, y, name) in [(OutcomeModel::Logistic, "emp", "logistic"), (OutcomeModel::Linear, "re78", "linear")] {
        let y = nums(&d[y]);
        let m = matched_effect(&y, &treat, &x, &MatchConfig::default(), model, 0.95).unwrap();
        assert_eq!(m.n_matched as f64, num(&r["n_matched"]), "matched units");
        close_all(&format!("psm {name}"), &parts(&m.effect), &nums(&r[format!("psm_{name}").as_str()]));
        let w = iptw_effect(&y, &treat, &x, Estimand::Ate, model, 0.95).unwrap();
        close_all(&format!("iptw {name}"), &parts(&w.effect), &nums(&r[format!("iptw_{name}").as_str()]));
    }
}

#[test]
fn auc_matches_proc_delong() {
    let r = r_json(
        r#"
        suppressPackageStartupMessages(library(pROC))
        b <- birthwt
        p <- fitted(glm(low ~ age + lwt + smoke + ht + ui + ptl, family = binomial, data = b))
        a <- function(resp, pred) { r <- roc(resp, pred, quiet = TRUE, levels = c(0, 1)); ci <- ci.auc(r, method = 'delong')
          list(auc = as.numeric(r$auc), lo = ci[1], hi = ci[3], var = var(r), dir = r$direction) }
        out(list(low = b$low, p = unname(p), lwt = b$lwt, age = b$age, ptl = b$ptl,
                 fitted = a(b$low, p), lwt_auc = a(b$low, b$lwt), age_auc = a(b$low, b$age), ptl_auc = a(b$low, b$ptl)))
        "#,
    );
    let low = nums(&r["low"]);
    for (pred, key) in [("p", "fitted"), ("lwt", "lwt_auc"), ("age", "age_auc"), ("ptl", "ptl_auc")] {
        let a = auc_delong(&low, &nums(&r[pred]), 0.95).unwrap();
        close(&format!("{key} auc"), a.auc, num(&r[key]["auc"]));
        close(&format!("{key} var"), a.variance, num(&r[key]["var"]));
        close(&format!("{key} lo"), a.conf_low, num(&r[key]["lo"]));
        close(&format!("{key} hi"), a.conf_high, num(&r[key]["hi"]));
        assert_eq!(a.cases_higher, r[key]["dir"] == "<", "{key} direction");
    }
}
