//! Descriptives and hypothesis tests compared with R (`stats`) on datasets
//! shipped with R, reference values computed by Rscript at test time.

mod common;

use common::{close, close_all, num, nums, r_json};
use evident_stats::{describe, htest};
use serde_json::Value;

fn split(x: &[f64], g: &[f64], level: f64) -> Vec<f64> {
    x.iter().zip(g).filter(|(_, gi)| **gi == level).map(|(v, _)| *v).collect()
}

fn check_ttest(x: &[f64], y: &[f64], r: &Value, equal: bool) {
    let t = htest::t_test(x, y, equal, 0.95).unwrap();
    close("t", t.statistic, num(&r["statistic"]));
    close("df", t.df, num(&r["df"]));
    close("p", t.p_value, num(&r["p"]));
    close_all("ci", &[t.conf_low, t.conf_high], &nums(&r["ci"]));
}

#[test]
fn descriptives_match_r_on_mtcars_and_birthwt() {
    let r = r_json(
        r#"
        d <- mtcars
        q <- function(x) list(mean = mean(x), sd = sd(x), q = unname(quantile(x, c(0, .25, .5, .75, 1))))
        smd <- function(x, g) (mean(x[g == 1]) - mean(x[g == 0])) / sqrt((var(x[g == 1]) + var(x[g == 0])) / 2)
        smdb <- function(x, g) { p1 <- mean(x[g == 1]); p0 <- mean(x[g == 0]); (p1 - p0) / sqrt((p1 * (1 - p1) + p0 * (1 - p0)) / 2) }
        out(list(mpg = d$mpg, am = d$am, vs = d$vs, hp = d$hp,
                 s_mpg = q(d$mpg), s_hp = q(d$hp), s_mpg_am1 = q(d$mpg[d$am == 1]),
                 smd_mpg = smd(d$mpg, d$am), smd_vs = smdb(d$vs, d$am),
                 bwt = birthwt$bwt, q_bwt = unname(quantile(birthwt$bwt, c(.1, .33, .9))),
                 tab_cyl = as.vector(table(d$cyl)), pct_cyl = as.vector(100 * prop.table(table(d$cyl)))))
        "#,
    );
    let mpg = nums(&r["mpg"]);
    let am = nums(&r["am"]);
    let hp = nums(&r["hp"]);
    for (name, x) in [("mpg", &mpg), ("hp", &hp)] {
        let s = describe::summarize(x).unwrap();
        let rs = &r[format!("s_{name}")];
        close("mean", s.mean, num(&rs["mean"]));
        close("sd", s.sd, num(&rs["sd"]));
        close_all("quantiles", &[s.min, s.q1, s.median, s.q3, s.max], &nums(&rs["q"]));
    }
    let s1 = describe::summarize(&split(&mpg, &am, 1.0)).unwrap();
    close_all(
        "mpg am=1",
        &[s1.mean, s1.sd, s1.median],
        &[num(&r["s_mpg_am1"]["mean"]), num(&r["s_mpg_am1"]["sd"]), nums(&r["s_mpg_am1"]["q"])[2]],
    );
    let row = describe::table_one_row("mpg", &mpg, &am, 5).unwrap();
    close("smd mpg", row.smd, num(&r["smd_mpg"]));
    let row = describe::table_one_row("vs", &nums(&r["vs"]), &am, 5).unwrap();
    assert_eq!(row.kind, describe::VariableKind::Binary);
    close("smd vs", row.smd, num(&r["smd_vs"]));
    let bwt = nums(&r["bwt"]);
    close_all(
        "bwt quantiles",
        &[describe::quantile(&bwt, 0.1), describe::quantile(&bwt, 0.33), describe::quantile(&bwt, 0.9)],
        &nums(&r["q_bwt"]),
    );
    let cyl: Vec<f64> = r_json("out(mtcars$cyl)").as_array().unwrap().iter().map(num).collect();
    let c = describe::counts(&cyl);
    close_all("cyl counts", &c.iter().map(|l| l.count as f64).collect::<Vec<_>>(), &nums(&r["tab_cyl"]));
    close_all("cyl percent", &c.iter().map(|l| l.percent).collect::<Vec<_>>(), &nums(&r["pct_cyl"]));
}

#[test]
fn t_tests_match_r() {
    let r = r_json(
        r#"
        tt <- function(x, y, v) { t <- t.test(x, y, var.equal = v); list(statistic = unname(t$statistic), df = unname(t$parameter), p = t$p.value, ci = as.vector(t$conf.int)) }
        b <- birthwt
        out(list(mpg = mtcars$mpg, am = mtcars$am, bwt = b$bwt, smoke = b$smoke,
                 welch = tt(mtcars$mpg[mtcars$am == 1], mtcars$mpg[mtcars$am == 0], FALSE),
                 student = tt(mtcars$mpg[mtcars$am == 1], mtcars$mpg[mtcars$am == 0], TRUE),
                 bw_welch = tt(b$bwt[b$smoke == 0], b$bwt[b$smoke == 1], FALSE),
                 bw_student = tt(b$bwt[b$smoke == 0], b$bwt[b$smoke == 1], TRUE)))
        "#,
    );
    let (mpg, am) = (nums(&r["mpg"]), nums(&r["am"]));
    check_ttest(&split(&mpg, &am, 1.0), &split(&mpg, &am, 0.0), &r["welch"], false);
    check_ttest(&split(&mpg, &am, 1.0), &split(&mpg, &am, 0.0), &r["student"], true);
    let (bwt, smoke) = (nums(&r["bwt"]), nums(&r["smoke"]));
    check_ttest(&split(&bwt, &smoke, 0.0), &split(&bwt, &smoke, 1.0), &r["bw_welch"], false);
    check_ttest(&split(&bwt, &smoke, 0.0), &split(&bwt, &smoke, 1.0), &r["bw_student"], true);
}

#[test]
fn wilcoxon_matches_r_exact_and_approximate() {
    let r = r_json(
        r#"
        set.seed(5)
        x <- round(rnorm(12, 1), 6); y <- round(rnorm(15), 6)
        x2 <- round(rnorm(30, 0.3), 6); y2 <- round(rnorm(45), 6)
        w <- function(a, b) { t <- suppressWarnings(wilcox.test(a, b)); list(w = unname(t$statistic), p = t$p.value) }
        m1 <- mtcars$mpg[mtcars$am == 1]; m0 <- mtcars$mpg[mtcars$am == 0]
        b1 <- birthwt$bwt[birthwt$smoke == 1]; b0 <- birthwt$bwt[birthwt$smoke == 0]
        out(list(x = x, y = y, x2 = x2, y2 = y2, m1 = m1, m0 = m0, b1 = b1, b0 = b0,
                 exact = w(x, y), exact2 = w(x2, y2), ties = w(m1, m0), large = w(b1, b0), rev = w(y, x)))
        "#,
    );
    for (a, b, key, exact) in [
        ("x", "y", "exact", true),
        ("x2", "y2", "exact2", true),
        ("m1", "m0", "ties", false),
        ("b1", "b0", "large", false),
        ("y", "x", "rev", true),
    ] {
        let t = htest::wilcoxon(&nums(&r[a]), &nums(&r[b])).unwrap();
        assert_eq!(t.exact, exact, "{key}");
        close(&format!("{key} W"), t.statistic, num(&r[key]["w"]));
        close(&format!("{key} p"), t.p_value, num(&r[key]["p"]));
    }
}

#[test]
fn chisq_fisher_kruskal_match_r() {
    let r = r_json(
        r#"
        b <- birthwt
        t1 <- table(b$smoke, b$low)
        t2 <- table(b$race, b$low)
        t3 <- table(infert$education, infert$case)
        cs <- function(t, correct) { x <- suppressWarnings(chisq.test(t, correct = correct)); list(stat = unname(x$statistic), df = unname(x$parameter), p = x$p.value) }
        fi <- function(m) { f <- fisher.test(m); list(p = f$p.value, or = unname(f$estimate), ci = as.vector(f$conf.int)) }
        kw <- function(x, g) { k <- kruskal.test(x, g); list(stat = unname(k$statistic), df = unname(k$parameter), p = k$p.value) }
        tables <- list(as.vector(t(t1)), c(3, 1, 1, 3), c(10, 0, 3, 7), c(2, 15, 12, 3), c(1, 30, 25, 2), c(7, 2, 0, 9))
        out(list(t1 = as.vector(t(t1)), t2 = as.vector(t(t2)), t3 = as.vector(t(t3)),
                 t1_yates = cs(t1, TRUE), t1_plain = cs(t1, FALSE), t2r = cs(t2, TRUE), t3r = cs(t3, FALSE),
                 tables = tables, fisher = lapply(tables, function(v) fi(matrix(v, 2, byrow = TRUE))),
                 mpg = mtcars$mpg, cyl = mtcars$cyl, kw_mtcars = kw(mtcars$mpg, mtcars$cyl),
                 bwt = b$bwt, race = b$race, kw_bwt = kw(b$bwt, b$race)))
        "#,
    );
    let t1 = nums(&r["t1"]);
    for (key, yates) in [("t1_yates", true), ("t1_plain", false)] {
        let c = htest::chisq_test(&t1, 2, 2, yates).unwrap();
        close(key, c.statistic, num(&r[key]["stat"]));
        close(key, c.p_value, num(&r[key]["p"]));
    }
    let c = htest::chisq_test(&nums(&r["t2"]), 3, 2, true).unwrap();
    close("race x low", c.statistic, num(&r["t2r"]["stat"]));
    close("race x low p", c.p_value, num(&r["t2r"]["p"]));
    close("race df", c.df, num(&r["t2r"]["df"]));
    let c = htest::chisq_test(&nums(&r["t3"]), 3, 2, false).unwrap();
    close("infert", c.p_value, num(&r["t3r"]["p"]));
    for (i, (tab, f)) in r["tables"].as_array().unwrap().iter().zip(r["fisher"].as_array().unwrap()).enumerate() {
        let v: Vec<u64> = nums(tab).iter().map(|x| *x as u64).collect();
        let ours = htest::fisher_test(v[0], v[1], v[2], v[3], 0.95).unwrap();
        close(&format!("fisher {i} p"), ours.p_value, num(&f["p"]));
        close(&format!("fisher {i} or"), ours.odds_ratio, num(&f["or"]));
        close_all(&format!("fisher {i} ci"), &[ours.conf_low, ours.conf_high], &nums(&f["ci"]));
    }
    for (x, g, key) in [("mpg", "cyl", "kw_mtcars"), ("bwt", "race", "kw_bwt")] {
        let k = htest::kruskal_wallis(&nums(&r[x]), &nums(&r[g])).unwrap();
        close(key, k.statistic, num(&r[key]["stat"]));
        close(key, k.df, num(&r[key]["df"]));
        close(key, k.p_value, num(&r[key]["p"]));
    }
}

#[test]
fn distribution_tails_match_r() {
    let r = r_json(
        r#"
        z <- c(-40, -20, -8.5, -3, -1.96, 0, 0.5, 5, 12, 37)
        tv <- c(0.1, 2, 4.5, 12, 35); dfs <- c(1, 2.5, 7, 30, 250)
        out(list(z = z, pnorm = pnorm(z), pnormu = pnorm(z, lower.tail = FALSE),
                 ps = c(1e-300, 1e-20, 1e-8, 0.025, 0.3, 0.5, 0.975, 1 - 1e-10), qnorm = qnorm(c(1e-300, 1e-20, 1e-8, 0.025, 0.3, 0.5, 0.975, 1 - 1e-10)),
                 tv = tv, dfs = dfs, pt = outer(tv, dfs, function(t, d) pt(t, d, lower.tail = FALSE)),
                 qt = outer(c(0.6, 0.975, 0.999999), dfs, function(p, d) qt(p, d)),
                 chi = outer(c(0.01, 3.84, 50, 400), c(1, 3, 10.5), function(x, d) pchisq(x, d, lower.tail = FALSE)),
                 f = pf(c(0.5, 4, 30, 200), 3, 17.5, lower.tail = FALSE)))
        "#,
    );
    use evident_stats::dist::*;
    let z = nums(&r["z"]);
    close_all("pnorm", &z.iter().map(|v| pnorm(*v)).collect::<Vec<_>>(), &nums(&r["pnorm"]));
    close_all("pnorm upper", &z.iter().map(|v| pnorm_upper(*v)).collect::<Vec<_>>(), &nums(&r["pnormu"]));
    close_all("qnorm", &nums(&r["ps"]).iter().map(|p| qnorm(*p)).collect::<Vec<_>>(), &nums(&r["qnorm"]));
    let tv = nums(&r["tv"]);
    let dfs = nums(&r["dfs"]);
    let rpt = r["pt"].as_array().unwrap();
    for (i, t) in tv.iter().enumerate() {
        for (j, d) in dfs.iter().enumerate() {
            close(&format!("pt({t},{d})"), pt_upper(*t, *d), num(&rpt[i][j]));
        }
    }
    let rqt = r["qt"].as_array().unwrap();
    for (i, p) in [0.6, 0.975, 0.999999].iter().enumerate() {
        for (j, d) in dfs.iter().enumerate() {
            close(&format!("qt({p},{d})"), qt(*p, *d), num(&rqt[i][j]));
        }
    }
    let rchi = r["chi"].as_array().unwrap();
    for (i, x) in [0.01, 3.84, 50.0, 400.0].iter().enumerate() {
        for (j, d) in [1.0, 3.0, 10.5].iter().enumerate() {
            close(&format!("pchisq({x},{d})"), pchisq_upper(*x, *d), num(&rchi[i][j]));
        }
    }
    close_all(
        "pf",
        &[0.5, 4.0, 30.0, 200.0].iter().map(|f| pf_upper(*f, 3.0, 17.5)).collect::<Vec<_>>(),
        &nums(&r["f"]),
    );
}
