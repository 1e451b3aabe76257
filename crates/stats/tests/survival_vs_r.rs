//! Cox models (Efron and Breslow ties, strata), Kaplan–Meier and log-rank
//! compared with R's `survival` on lung, veteran, colon, pbc, ovarian and
//! simulated data with heavy ties and strata; plus the survival input errors.

mod common;

use common::{close, close_all, num, nums, r_json};
use evident_stats::glm::Predictor;
use evident_stats::survival::{coxph, kaplan_meier, logrank, ConfType, Ties};
use serde_json::Value;

const PREP: &str = r#"
    chi <- function(x, df) c(x, df, pchisq(x, df, lower.tail = FALSE))
    cx <- function(f) { s <- summary(f); ci <- confint(f)
      list(coef = unname(coef(f)), se = unname(sqrt(diag(vcov(f)))), z = unname(s$coefficients[, "z"]),
           p = unname(s$coefficients[, "Pr(>|z|)"]), lo = unname(ci[, 1]), hi = unname(ci[, 2]),
           loglik = f$loglik, lr = chi(2 * diff(f$loglik), length(coef(f))), wald = chi(f$wald.test, length(coef(f))),
           score = chi(f$score, length(coef(f))),
           conc = unname(f$concordance[c("concordant", "discordant", "tied.x", "tied.y", "concordance", "std")]), iter = f$iter) }
    lung2 <- na.omit(data.frame(time = lung$time, status = lung$status - 1, age = lung$age, sex = lung$sex,
                                ecog = lung$ph.ecog, karno = lung$ph.karno, wtloss = lung$wt.loss, inst = lung$inst))
    vet <- data.frame(time = veteran$time, status = veteran$status, trt = veteran$trt, karno = veteran$karno,
                      age = veteran$age, prior = veteran$prior, small = as.numeric(veteran$celltype == "smallcell"),
                      adeno = as.numeric(veteran$celltype == "adeno"), large = as.numeric(veteran$celltype == "large"),
                      celltype = as.numeric(veteran$celltype))
    col2 <- colon[colon$etype == 2, ]
    col2 <- na.omit(data.frame(time = col2$time, status = col2$status, lev = as.numeric(col2$rx == "Lev"),
                               lev5fu = as.numeric(col2$rx == "Lev+5FU"), nodes = col2$nodes, age = col2$age,
                               obstruct = col2$obstruct, differ = col2$differ))
    pbc2 <- na.omit(data.frame(time = pbc$time, status = as.numeric(pbc$status == 2), bili = log(pbc$bili),
                               albumin = pbc$albumin, age = pbc$age, edema = pbc$edema, stage = pbc$stage, trt = pbc$trt))
    set.seed(42); n <- 400
    sim <- data.frame(time = sample(1:15, n, replace = TRUE), status = rbinom(n, 1, 0.7), x1 = rnorm(n),
                      x2 = rbinom(n, 1, 0.5), s = sample(1:3, n, replace = TRUE), g = sample(0:2, n, replace = TRUE))
    # Large enough that the Cox evaluation works through many groups of tie
    # blocks (1024 rows each), with heavy ties, strata and a shifted covariate.
    set.seed(7); n <- 9000
    big <- data.frame(x1 = rnorm(n), x2 = rbinom(n, 1, 0.4), x3 = 50 + 10 * rnorm(n), s = sample(1:3, n, replace = TRUE))
    big$time <- round(rexp(n, exp(0.5 * big$x1 - 0.3 * big$x2 + 0.02 * (big$x3 - 50))) * 20) / 20 + 0.05
    big$status <- rbinom(n, 1, 0.6)
    # Untied times: one event per event time, so thousands of rank-one terms.
    big$untied <- rexp(n, exp(0.5 * big$x1))
    # Times equal up to rounding error (as from unit conversions), which R
    # treats as tied (timefix).
    set.seed(3); n <- 80
    near <- data.frame(time = sample(1:12, n, replace = TRUE) / 7 * (1 + sample(c(0, 2e-10, -5e-10), n, replace = TRUE)),
                       status = rbinom(n, 1, 0.7), g = sample(0:1, n, replace = TRUE), x1 = rnorm(n),
                       s = sample(1:2, n, replace = TRUE))
"#;

fn preds<'a>(d: &'a Value, names: &'a [&'a str], store: &'a mut Vec<Vec<f64>>) -> Vec<Predictor<'a>> {
    *store = names.iter().map(|n| nums(&d[n])).collect();
    names.iter().zip(store.iter()).map(|(n, c)| Predictor { name: n, values: c }).collect()
}

fn check_cox(what: &str, d: &Value, names: &[&str], strata: Option<&str>, ties: Ties, r: &Value) {
    let mut store = Vec::new();
    let x = preds(d, names, &mut store);
    let s = strata.map(|k| nums(&d[k]));
    let fit = coxph(&nums(&d["time"]), &nums(&d["status"]), &x, s.as_deref(), ties, 0.95).unwrap();
    let c = &fit.coefficients;
    close_all(&format!("{what} coef"), &c.iter().map(|c| c.estimate).collect::<Vec<_>>(), &nums(&r["coef"]));
    close_all(&format!("{what} se"), &c.iter().map(|c| c.std_error).collect::<Vec<_>>(), &nums(&r["se"]));
    close_all(&format!("{what} z"), &c.iter().map(|c| c.statistic).collect::<Vec<_>>(), &nums(&r["z"]));
    close_all(&format!("{what} p"), &c.iter().map(|c| c.p_value).collect::<Vec<_>>(), &nums(&r["p"]));
    close_all(&format!("{what} lo"), &c.iter().map(|c| c.conf_low).collect::<Vec<_>>(), &nums(&r["lo"]));
    close_all(&format!("{what} hi"), &c.iter().map(|c| c.conf_high).collect::<Vec<_>>(), &nums(&r["hi"]));
    close_all(&format!("{what} loglik"), &[fit.loglik_null, fit.loglik], &nums(&r["loglik"]));
    for (name, t) in [("lr", fit.likelihood_ratio), ("wald", fit.wald), ("score", fit.score)] {
        close_all(&format!("{what} {name}"), &[t.statistic, t.df, t.p_value], &nums(&r[name]));
    }
    let k = fit.concordance;
    close_all(
        &format!("{what} concordance"),
        &[k.concordant, k.discordant, k.tied_risk, k.tied_time, k.concordance, k.std_err],
        &nums(&r["conc"]),
    );
    assert_eq!(fit.iterations as f64, num(&r["iter"]), "{what} iterations");
}

#[test]
fn cox_matches_coxph_on_r_datasets() {
    let r = r_json(&format!(
        "{PREP}
        out(list(lung = lung2, vet = vet, colon = col2, pbc = pbc2, sim = sim,
          lung_e = cx(coxph(Surv(time, status) ~ age + sex + ecog + karno + wtloss, data = lung2)),
          lung_b = cx(coxph(Surv(time, status) ~ age + sex + ecog + karno + wtloss, data = lung2, ties = 'breslow')),
          vet_e = cx(coxph(Surv(time, status) ~ trt + karno + age + prior + small + adeno + large, data = vet)),
          vet_s = cx(coxph(Surv(time, status) ~ trt + karno + age + strata(celltype), data = vet)),
          colon_e = cx(coxph(Surv(time, status) ~ lev + lev5fu + nodes + age + obstruct + differ, data = col2)),
          colon_b = cx(coxph(Surv(time, status) ~ lev + lev5fu + nodes + age + obstruct + differ, data = col2, ties = 'breslow')),
          pbc_e = cx(coxph(Surv(time, status) ~ bili + albumin + age + edema + trt + strata(stage), data = pbc2)),
          ova_e = cx(coxph(Surv(futime, fustat) ~ rx + age + ecog.ps, data = ovarian)),
          ovarian = ovarian,
          sim_e = cx(coxph(Surv(time, status) ~ x1 + x2 + strata(s), data = sim)),
          sim_b = cx(coxph(Surv(time, status) ~ x1 + x2 + strata(s), data = sim, ties = 'breslow')),
          big = big,
          big_e = cx(coxph(Surv(time, status) ~ x1 + x2 + x3, data = big)),
          big_s = cx(coxph(Surv(time, status) ~ x1 + x2 + x3 + strata(s), data = big)),
          big_b = cx(coxph(Surv(time, status) ~ x1 + x2 + x3 + strata(s), data = big, ties = 'breslow')),
          big_u = cx(coxph(Surv(untied, status) ~ x1 + x2 + x3, data = big)),
          near = near,
          near_e = cx(coxph(Surv(time, status) ~ x1 + g, data = near))))"
    ));
    let lung = ["age", "sex", "ecog", "karno", "wtloss"];
    check_cox("lung efron", &r["lung"], &lung, None, Ties::Efron, &r["lung_e"]);
    check_cox("lung breslow", &r["lung"], &lung, None, Ties::Breslow, &r["lung_b"]);
    let vet = ["trt", "karno", "age", "prior", "small", "adeno", "large"];
    check_cox("veteran efron", &r["vet"], &vet, None, Ties::Efron, &r["vet_e"]);
    check_cox("veteran strata", &r["vet"], &["trt", "karno", "age"], Some("celltype"), Ties::Efron, &r["vet_s"]);
    let colon = ["lev", "lev5fu", "nodes", "age", "obstruct", "differ"];
    check_cox("colon efron", &r["colon"], &colon, None, Ties::Efron, &r["colon_e"]);
    check_cox("colon breslow", &r["colon"], &colon, None, Ties::Breslow, &r["colon_b"]);
    let pbc = ["bili", "albumin", "age", "edema", "trt"];
    check_cox("pbc strata", &r["pbc"], &pbc, Some("stage"), Ties::Efron, &r["pbc_e"]);
    let mut ova = r["ovarian"].clone();
    ova["time"] = ova["futime"].clone();
    ova["status"] = ova["fustat"].clone();
    check_cox("ovarian", &ova, &["rx", "age", "ecog.ps"], None, Ties::Efron, &r["ova_e"]);
    check_cox("sim efron", &r["sim"], &["x1", "x2"], Some("s"), Ties::Efron, &r["sim_e"]);
    check_cox("sim breslow", &r["sim"], &["x1", "x2"], Some("s"), Ties::Breslow, &r["sim_b"]);
    let big = ["x1", "x2", "x3"];
    check_cox("big efron", &r["big"], &big, None, Ties::Efron, &r["big_e"]);
    check_cox("big strata efron", &r["big"], &big, Some("s"), Ties::Efron, &r["big_s"]);
    check_cox("big strata breslow", &r["big"], &big, Some("s"), Ties::Breslow, &r["big_b"]);
    let mut untied = r["big"].clone();
    untied["time"] = untied["untied"].clone();
    check_cox("big untied efron", &untied, &big, None, Ties::Efron, &r["big_u"]);
    check_cox("near-tied times", &r["near"], &["x1", "g"], None, Ties::Efron, &r["near_e"]);
}

fn check_km(what: &str, d: &Value, group: Option<&str>, conf: ConfType, r: &Value) {
    let g = group.map(|k| nums(&d[k]));
    let curves = kaplan_meier(&nums(&d["time"]), &nums(&d["status"]), g.as_deref(), conf, 0.95).unwrap();
    let cat =
        |f: &dyn Fn(&evident_stats::survival::KmCurve) -> Vec<f64>| curves.iter().flat_map(f).collect::<Vec<f64>>();
    close_all(&format!("{what} time"), &cat(&|c| c.time.clone()), &nums(&r["time"]));
    close_all(&format!("{what} n.risk"), &cat(&|c| c.n_risk.clone()), &nums(&r["n.risk"]));
    close_all(&format!("{what} n.event"), &cat(&|c| c.n_event.clone()), &nums(&r["n.event"]));
    close_all(&format!("{what} n.censor"), &cat(&|c| c.n_censor.clone()), &nums(&r["n.censor"]));
    close_all(&format!("{what} surv"), &cat(&|c| c.surv.clone()), &nums(&r["surv"]));
    close_all(&format!("{what} std.err"), &cat(&|c| c.std_err.clone()), &nums(&r["std.err"]));
    close_all(&format!("{what} lower"), &cat(&|c| c.lower.clone()), &nums(&r["lower"]));
    close_all(&format!("{what} upper"), &cat(&|c| c.upper.clone()), &nums(&r["upper"]));
    close_all(&format!("{what} median"), &cat(&|c| vec![c.median]), &nums(&r["median"]));
    close_all(&format!("{what} median lcl"), &cat(&|c| vec![c.median_lower]), &nums(&r["lcl"]));
    close_all(&format!("{what} median ucl"), &cat(&|c| vec![c.median_upper]), &nums(&r["ucl"]));
}

#[test]
fn kaplan_meier_matches_survfit() {
    let r = r_json(&format!(
        "{PREP}
        km <- function(f) {{ t <- summary(f)$table; if (is.null(dim(t))) t <- t(as.matrix(t))
          list(time = f$time, n.risk = f$n.risk, n.event = f$n.event, n.censor = f$n.censor, surv = f$surv,
               std.err = f$std.err, lower = f$lower, upper = f$upper,
               median = unname(t[, 'median']), lcl = unname(t[, '0.95LCL']), ucl = unname(t[, '0.95UCL'])) }}
        lung3 <- data.frame(time = lung$time, status = lung$status - 1, sex = lung$sex)
        out(list(lung = lung3, vet = vet, sim = sim, near = near, ovarian = data.frame(time = ovarian$futime, status = ovarian$fustat, rx = ovarian$rx),
          near_km = km(survfit(Surv(time, status) ~ g, data = near)),
          lung_log = km(survfit(Surv(time, status) ~ sex, data = lung3)),
          lung_ll = km(survfit(Surv(time, status) ~ sex, data = lung3, conf.type = 'log-log')),
          lung_all = km(survfit(Surv(time, status) ~ 1, data = lung3)),
          vet_log = km(survfit(Surv(time, status) ~ trt, data = vet)),
          vet_ll = km(survfit(Surv(time, status) ~ celltype, data = vet, conf.type = 'log-log')),
          ova = km(survfit(Surv(time, status) ~ rx, data = data.frame(time = ovarian$futime, status = ovarian$fustat, rx = ovarian$rx))),
          sim_log = km(survfit(Surv(time, status) ~ g, data = sim))))"
    ));
    check_km("lung by sex (log)", &r["lung"], Some("sex"), ConfType::Log, &r["lung_log"]);
    check_km("lung by sex (log-log)", &r["lung"], Some("sex"), ConfType::LogLog, &r["lung_ll"]);
    check_km("lung overall", &r["lung"], None, ConfType::Log, &r["lung_all"]);
    check_km("veteran by trt", &r["vet"], Some("trt"), ConfType::Log, &r["vet_log"]);
    check_km("veteran by celltype (log-log)", &r["vet"], Some("celltype"), ConfType::LogLog, &r["vet_ll"]);
    check_km("ovarian by rx", &r["ovarian"], Some("rx"), ConfType::Log, &r["ova"]);
    check_km("simulated ties", &r["sim"], Some("g"), ConfType::Log, &r["sim_log"]);
    check_km("near-tied times", &r["near"], Some("g"), ConfType::Log, &r["near_km"]);
}

#[test]
fn logrank_matches_survdiff() {
    let r = r_json(&format!(
        "{PREP}
        sd <- function(f) list(chisq = f$chisq, df = length(f$n) - 1, p = pchisq(f$chisq, length(f$n) - 1, lower.tail = FALSE),
                               obs = if (is.matrix(f$obs)) rowSums(f$obs) else f$obs, exp = if (is.matrix(f$exp)) rowSums(f$exp) else f$exp)
        lung3 <- data.frame(time = lung$time, status = lung$status - 1, sex = lung$sex, ecog = lung$ph.ecog)
        lung3 <- lung3[!is.na(lung3$ecog), ]
        out(list(lung = lung3, vet = vet, sim = sim, near = near,
          near_g = sd(survdiff(Surv(time, status) ~ g + strata(s), data = near)),
          lung_sex = sd(survdiff(Surv(time, status) ~ sex, data = lung3)),
          lung_strat = sd(survdiff(Surv(time, status) ~ sex + strata(ecog), data = lung3)),
          vet_cell = sd(survdiff(Surv(time, status) ~ celltype, data = vet)),
          vet_strat = sd(survdiff(Surv(time, status) ~ trt + strata(celltype), data = vet)),
          sim_g = sd(survdiff(Surv(time, status) ~ g + strata(s), data = sim))))"
    ));
    for (what, d, g, s) in [
        ("lung_sex", "lung", "sex", None),
        ("lung_strat", "lung", "sex", Some("ecog")),
        ("vet_cell", "vet", "celltype", None),
        ("vet_strat", "vet", "trt", Some("celltype")),
        ("sim_g", "sim", "g", Some("s")),
        ("near_g", "near", "g", Some("s")),
    ] {
        let strata = s.map(|k| nums(&r[d][k]));
        let t = logrank(&nums(&r[d]["time"]), &nums(&r[d]["status"]), &nums(&r[d][g]), strata.as_deref()).unwrap();
        close(&format!("{what} chisq"), t.test.statistic, num(&r[what]["chisq"]));
        close(&format!("{what} df"), t.test.df, num(&r[what]["df"]));
        close(&format!("{what} p"), t.test.p_value, num(&r[what]["p"]));
        close_all(&format!("{what} observed"), &t.observed, &nums(&r[what]["obs"]));
        close_all(&format!("{what} expected"), &t.expected, &nums(&r[what]["exp"]));
    }
}

#[test]
fn survival_bad_input_errors() {
    let x = [1.0, 2.0, 3.0, 4.0];
    let p = [Predictor { name: "age", values: &x }];
    let e = coxph(&[5.0, 6.0, 7.0, 8.0], &[0.0; 4], &p, None, Ties::Efron, 0.95).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Cox model: all 4 observations are censored, so there are no events to estimate from; check the event column (1 = event, 0 = censored)"
    );
    let e = kaplan_meier(&[5.0, -2.0, 7.0], &[1.0, 1.0, 0.0], None, ConfType::Log, 0.95).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Kaplan-Meier: time at row 2 is negative (-2); survival times must be >= 0, check the start and end dates"
    );
    let e = logrank(&[1.0, 2.0], &[1.0, 2.0], &[0.0, 1.0], None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "log-rank test: column `status` has value 2 at row 2, expected 1 (event) or 0 (censored)"
    );
    let k = [2.0; 4];
    let e = coxph(&[5.0, 6.0, 7.0, 8.0], &[1.0; 4], &[Predictor { name: "site", values: &k }], None, Ties::Efron, 0.95)
        .unwrap_err();
    assert_eq!(e.to_string(), "Cox model: covariate `site` is constant (every row is 2); drop it from the model");
    let e = coxph(&[], &[], &[Predictor { name: "age", values: &[] }], None, Ties::Efron, 0.95).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Cox model: no rows to analyse (0 rows given, 0 dropped for missing values); check the cohort filter and the missing values"
    );
}
