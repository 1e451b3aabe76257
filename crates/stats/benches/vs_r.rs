//! Benchmark: logistic regression and Cox (Efron) on simulated data with 10
//! covariates at 10k, 100k and 1M rows, timed in the same run as R's `glm`
//! and `coxph` on the same data, with the largest relative difference of the
//! estimates. Run: `cargo bench -p evident-stats --bench vs_r [-- 10000 100000]`.
//! R simulates the data and writes it as raw doubles; both sides read the
//! same numbers. Timings exclude reading the data on both sides.

use std::process::Command;
use std::time::Instant;

use evident_stats::glm::{glm, Family, GlmConfig, Predictor};
use evident_stats::survival::{coxph, Ties};

const R_SCRIPT: &str = r#"
args <- commandArgs(TRUE); n <- as.integer(args[1]); dir <- args[2]
suppressPackageStartupMessages(library(survival))
set.seed(2024)
p <- 10
X <- matrix(rnorm(n * p), n, p); X[, 9] <- rbinom(n, 1, 0.3); X[, 10] <- rbinom(n, 1, 0.5)
colnames(X) <- paste0("x", 1:p)
b <- seq(-0.5, 0.5, length.out = p)
y <- rbinom(n, 1, plogis(-0.5 + X %*% b))
t <- round(rexp(n, exp(X %*% b)) * 100) / 100 + 0.01
cens <- round(rexp(n, 0.5) * 100) / 100 + 0.01
time <- pmin(t, cens); status <- as.numeric(t <= cens)
con <- file(file.path(dir, "data.bin"), "wb"); writeBin(c(as.vector(X), y, time, status), con); close(con)
df <- data.frame(X, y = y, time = time, status = status)
tg <- system.time(fg <- glm(y ~ x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9 + x10, family = binomial, data = df))[["elapsed"]]
tc <- system.time(fc <- coxph(Surv(time, status) ~ x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9 + x10, data = df, ties = "efron"))[["elapsed"]]
cat(format(c(tg, tc, coef(fg), sqrt(diag(vcov(fg))), coef(fc), sqrt(diag(vcov(fc)))), digits = 17), "\n", file = file.path(dir, "r.txt"))
"#;

fn max_rel(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| ((x - y) / y).abs()).fold(0.0, f64::max)
}

fn main() {
    let sizes: Vec<usize> = {
        let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
        if args.is_empty() {
            vec![10_000, 100_000, 1_000_000]
        } else {
            args
        }
    };
    println!("| rows | model | R (s) | Rust (s) | speed-up | max rel. diff coef | max rel. diff SE | iterations |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for n in sizes {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("bench.R");
        std::fs::write(&script, R_SCRIPT).unwrap();
        let status = Command::new("Rscript")
            .arg("--vanilla")
            .arg(&script)
            .arg(n.to_string())
            .arg(dir.path())
            .status()
            .expect("Rscript");
        assert!(status.success());
        let bytes = std::fs::read(dir.path().join("data.bin")).unwrap();
        let v: Vec<f64> = bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
        let p = 10;
        let cols: Vec<Vec<f64>> = (0..p).map(|j| v[j * n..(j + 1) * n].to_vec()).collect();
        let y = &v[p * n..(p + 1) * n];
        let time = &v[(p + 1) * n..(p + 2) * n];
        let status = &v[(p + 2) * n..(p + 3) * n];
        let names: Vec<String> = (1..=p).map(|j| format!("x{j}")).collect();
        let x: Vec<Predictor> = names.iter().zip(&cols).map(|(n, c)| Predictor { name: n, values: c }).collect();
        let r: Vec<f64> = std::fs::read_to_string(dir.path().join("r.txt"))
            .unwrap()
            .split_whitespace()
            .map(|s| s.parse().unwrap())
            .collect();
        let (r_glm_s, r_cox_s) = (r[0], r[1]);
        let r_glm_coef = &r[2..13];
        let r_glm_se = &r[13..24];
        let r_cox_coef = &r[24..34];
        let r_cox_se = &r[34..44];

        let start = Instant::now();
        let fit = glm(y, &x, Family::Binomial, &GlmConfig::default()).unwrap();
        let rust_glm_s = start.elapsed().as_secs_f64();
        let coef: Vec<f64> = fit.coefficients.iter().map(|c| c.estimate).collect();
        let se: Vec<f64> = fit.coefficients.iter().map(|c| c.std_error).collect();
        println!(
            "| {n} | logistic (IRLS) | {r_glm_s:.3} | {rust_glm_s:.3} | {:.1}x | {:.1e} | {:.1e} | {} |",
            r_glm_s / rust_glm_s,
            max_rel(&coef, r_glm_coef),
            max_rel(&se, r_glm_se),
            fit.iterations
        );

        let start = Instant::now();
        let fit = coxph(time, status, &x, None, Ties::Efron, 0.95).unwrap();
        let rust_cox_s = start.elapsed().as_secs_f64();
        let coef: Vec<f64> = fit.coefficients.iter().map(|c| c.estimate).collect();
        let se: Vec<f64> = fit.coefficients.iter().map(|c| c.std_error).collect();
        println!(
            "| {n} | Cox (Efron) | {r_cox_s:.3} | {rust_cox_s:.3} | {:.1}x | {:.1e} | {:.1e} | {} |",
            r_cox_s / rust_cox_s,
            max_rel(&coef, r_cox_coef),
            max_rel(&se, r_cox_se),
            fit.iterations
        );
    }
}
