//! `evident stats`: runs one estimator of `evident-stats` on a CSV file.
//! This module only reads the CSV (numbers; empty, `NA`, `NaN` and `.` are
//! missing), picks columns, deletes incomplete rows listwise (and says how
//! many), calls the library and prints text or JSON. SVG plots are written
//! where `--svg` / `--forest` point.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use evident_stats::glm::{Coefficient, Family, GlmConfig, Predictor};
use evident_stats::propensity::{self, DistanceArithmetic, Estimand, MatchConfig, MatchOrder, OutcomeModel};
use evident_stats::survival::{self, ConfType, Ties};
use evident_stats::{describe, htest, roc, svg, Frame, MissingReport};
use serde_json::json;

use crate::commands::Context;
use crate::output::print_json;
use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: StatsCommand,
}

/// The CSV input every subcommand takes.
#[derive(clap::Args, Debug)]
pub struct Data {
    /// CSV file with a header row; numeric columns; empty, NA, NaN or . = missing.
    #[arg(long)]
    pub data: PathBuf,
    /// Confidence level for intervals.
    #[arg(long, default_value_t = 0.95)]
    pub conf_level: f64,
}

#[derive(clap::Subcommand, Debug)]
pub enum StatsCommand {
    /// Table 1: n, mean, SD, median, IQR, counts and percentages, SMD by group.
    Describe {
        #[command(flatten)]
        data: Data,
        /// Columns to describe (comma-separated); default: all but the group.
        #[arg(long, value_delimiter = ',')]
        columns: Vec<String>,
        /// 0/1 column to split by (adds SMDs).
        #[arg(long)]
        group: Option<String>,
        /// Variables with at most this many distinct values are categorical.
        #[arg(long, default_value_t = 5)]
        max_levels: usize,
    },
    /// Two-sample t-test (Welch unless --equal-var) of --outcome between the 2 values of --group.
    Ttest {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        outcome: String,
        #[arg(long)]
        group: String,
        #[arg(long)]
        equal_var: bool,
    },
    /// Wilcoxon rank-sum (Mann-Whitney) test of --outcome between the 2 values of --group.
    Wilcoxon {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        outcome: String,
        #[arg(long)]
        group: String,
    },
    /// Kruskal-Wallis test of --outcome across the values of --group.
    Kruskal {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        outcome: String,
        #[arg(long)]
        group: String,
    },
    /// Chi-square test of independence of two categorical columns.
    Chisq {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        row: String,
        #[arg(long)]
        col: String,
        /// No Yates continuity correction for 2x2 tables.
        #[arg(long)]
        no_yates: bool,
    },
    /// Fisher's exact test of two binary columns (conditional MLE odds ratio).
    Fisher {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        row: String,
        #[arg(long)]
        col: String,
    },
    /// Logistic regression: odds ratios with Wald CIs.
    Logistic {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        outcome: String,
        #[arg(long, value_delimiter = ',', required = true)]
        covariates: Vec<String>,
        /// Write a forest plot of the odds ratios (SVG).
        #[arg(long)]
        forest: Option<PathBuf>,
    },
    /// Linear regression.
    Linear {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        outcome: String,
        #[arg(long, value_delimiter = ',', required = true)]
        covariates: Vec<String>,
    },
    /// Poisson regression: rate ratios; --offset names a column already on the log scale.
    Poisson {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        outcome: String,
        #[arg(long, value_delimiter = ',', required = true)]
        covariates: Vec<String>,
        #[arg(long)]
        offset: Option<String>,
    },
    /// Cox proportional hazards: hazard ratios, Wald/LR/score tests, concordance.
    Cox {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        time: String,
        /// 1 = event, 0 = censored.
        #[arg(long)]
        event: String,
        #[arg(long, value_delimiter = ',', required = true)]
        covariates: Vec<String>,
        #[arg(long)]
        strata: Option<String>,
        #[arg(long, value_enum, default_value_t = TiesArg::Efron)]
        ties: TiesArg,
        /// Write a forest plot of the hazard ratios (SVG).
        #[arg(long)]
        forest: Option<PathBuf>,
    },
    /// Kaplan-Meier curves with Greenwood CIs and median survival.
    Km {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        time: String,
        #[arg(long)]
        event: String,
        #[arg(long)]
        group: Option<String>,
        #[arg(long, value_enum, default_value_t = ConfTypeArg::Log)]
        conf_type: ConfTypeArg,
        /// Write the curves with numbers at risk (SVG).
        #[arg(long)]
        svg: Option<PathBuf>,
    },
    /// Log-rank test, optionally stratified.
    Logrank {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        time: String,
        #[arg(long)]
        event: String,
        #[arg(long)]
        group: String,
        #[arg(long)]
        strata: Option<String>,
    },
    /// Propensity score nearest-neighbour matching on the logit, with balance.
    PsMatch {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        treatment: String,
        #[arg(long, value_delimiter = ',', required = true)]
        covariates: Vec<String>,
        /// Controls per treated unit.
        #[arg(long, default_value_t = 1)]
        ratio: usize,
        /// Caliper in SDs of the logit; 0 for none.
        #[arg(long, default_value_t = 0.2)]
        caliper: f64,
        #[arg(long, value_enum, default_value_t = OrderArg::Largest)]
        order: OrderArg,
        /// Reproduce MatchIt 4.5.1's matched sets (its truncated distances).
        #[arg(long)]
        matchit_compat: bool,
    },
    /// Inverse probability of treatment weighting with robust (sandwich) SEs.
    Iptw {
        #[command(flatten)]
        data: Data,
        #[arg(long)]
        treatment: String,
        #[arg(long, value_delimiter = ',', required = true)]
        covariates: Vec<String>,
        #[arg(long)]
        outcome: String,
        #[arg(long, value_enum, default_value_t = EstimandArg::Ate)]
        estimand: EstimandArg,
        #[arg(long, value_enum, default_value_t = OutcomeArg::Logistic)]
        outcome_model: OutcomeArg,
    },
    /// ROC AUC with DeLong CI.
    Auc {
        #[command(flatten)]
        data: Data,
        /// 1 = case, 0 = control.
        #[arg(long)]
        outcome: String,
        #[arg(long)]
        predictor: String,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum TiesArg {
    Efron,
    Breslow,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ConfTypeArg {
    Log,
    LogLog,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum OrderArg {
    Largest,
    Smallest,
    Data,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum EstimandArg {
    Ate,
    Att,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum OutcomeArg {
    Logistic,
    Linear,
}

/// Reads a numeric CSV into a [`Frame`]; every non-numeric cell is reported.
pub fn read_csv(path: &Path) -> anyhow::Result<Frame> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_path(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let headers: Vec<String> = reader.headers()?.iter().map(|h| h.to_string()).collect();
    let mut columns: Vec<Vec<f64>> = vec![Vec::new(); headers.len()];
    let mut problems = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let line = i + 2;
        let record = record.with_context(|| format!("{}:{line}: malformed CSV record", path.display()))?;
        for (j, cell) in record.iter().enumerate() {
            let value = match cell {
                "" | "NA" | "NaN" | "." => f64::NAN,
                s => match s.parse::<f64>() {
                    Ok(v) => v,
                    Err(_) => {
                        problems.push(format!(
                            "{}:{line}: column {} = {:?} is not a number; recode categories as numbers (e.g. 0/1)",
                            path.display(),
                            headers[j],
                            s
                        ));
                        f64::NAN
                    }
                },
            };
            if j < columns.len() {
                columns[j].push(value);
            }
        }
    }
    if !problems.is_empty() {
        let shown: Vec<&String> = problems.iter().take(20).collect();
        let more = if problems.len() > 20 { format!("\n({} more)", problems.len() - 20) } else { String::new() };
        bail!(
            "{} non-numeric values:\n{}{more}",
            problems.len(),
            shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
        );
    }
    let mut frame = Frame::new();
    for (h, c) in headers.iter().zip(columns) {
        frame.push(h, c);
    }
    Ok(frame)
}

/// Loads the CSV and keeps the rows complete in `columns`.
fn load(data: &Data, analysis: &str, columns: &[&str]) -> anyhow::Result<(Vec<Vec<f64>>, MissingReport)> {
    let frame = read_csv(&data.data)?;
    let (cols, report) = frame.complete_cases(analysis, columns).with_context(|| data.data.display().to_string())?;
    Ok((cols, report))
}

fn missing_line(report: &MissingReport) -> String {
    if report.rows_dropped() == 0 {
        format!("rows: {} used, none missing", report.rows_used)
    } else {
        let by: Vec<String> = report.missing_by_column.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        format!(
            "rows: {} of {} used; {} dropped for missing values ({})",
            report.rows_used,
            report.rows_in,
            report.rows_dropped(),
            by.join(", ")
        )
    }
}

fn two_groups(outcome: &[f64], group: &[f64], name: &str) -> anyhow::Result<(f64, f64, Vec<f64>, Vec<f64>)> {
    let mut levels = group.to_vec();
    levels.sort_by(|a, b| a.total_cmp(b));
    levels.dedup();
    if levels.len() != 2 {
        bail!("column {name} must have exactly 2 distinct values (it has {})", levels.len());
    }
    let pick = |lv: f64| outcome.iter().zip(group).filter(|(_, g)| **g == lv).map(|(v, _)| *v).collect::<Vec<_>>();
    Ok((levels[0], levels[1], pick(levels[0]), pick(levels[1])))
}

fn coef_table(title: &str, coefs: &[Coefficient], exp: bool) -> String {
    let mut s = format!(
        "{:<24} {:>12} {:>12} {:>10} {:>12} {:>12} {:>12}\n",
        "term", "estimate", "std.error", "statistic", "p.value", "conf.low", "conf.high"
    );
    for c in coefs {
        s.push_str(&format!(
            "{:<24} {:>12.6} {:>12.6} {:>10.4} {:>12.4e} {:>12.6} {:>12.6}\n",
            c.term, c.estimate, c.std_error, c.statistic, c.p_value, c.conf_low, c.conf_high
        ));
    }
    if exp {
        s.push_str(&format!("\n{:<24} {:>12} {:>12} {:>12}\n", "term", title, "conf.low", "conf.high"));
        for c in coefs {
            let (lo, hi) = c.exp_conf();
            s.push_str(&format!("{:<24} {:>12.6} {:>12.6} {:>12.6}\n", c.term, c.exp_estimate(), lo, hi));
        }
    }
    s
}

fn predictors<'a>(names: &'a [String], cols: &'a [Vec<f64>]) -> Vec<Predictor<'a>> {
    names.iter().zip(cols).map(|(n, c)| Predictor { name: n, values: c }).collect()
}

fn write_svg(path: &Path, svg: &str) -> anyhow::Result<()> {
    std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))
}

fn forest_rows(coefs: &[Coefficient], skip_intercept: bool) -> Vec<svg::ForestRow> {
    coefs
        .iter()
        .filter(|c| !(skip_intercept && c.term == "(Intercept)"))
        .map(|c| {
            let (lo, hi) = c.exp_conf();
            svg::ForestRow { label: c.term.clone(), estimate: c.exp_estimate(), conf_low: lo, conf_high: hi }
        })
        .collect()
}

fn emit(ctx: &Context, value: serde_json::Value, text: String) -> anyhow::Result<Outcome> {
    if ctx.json() {
        print_json(&value)?;
    } else {
        print!("{text}");
    }
    Ok(Outcome::Found)
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Outcome> {
    match &args.command {
        StatsCommand::Describe { data, columns, group, max_levels } => {
            let frame = read_csv(&data.data)?;
            let mut names: Vec<String> = if columns.is_empty() {
                frame.names().iter().filter(|n| Some(*n) != group.as_ref()).cloned().collect()
            } else {
                columns.clone()
            };
            names.dedup();
            let mut rows = Vec::new();
            let mut text = String::new();
            for name in &names {
                let mut wanted = vec![name.as_str()];
                if let Some(g) = group {
                    wanted.push(g);
                }
                let (cols, report) =
                    frame.complete_cases("describe", &wanted).with_context(|| format!("column {name}"))?;
                match group {
                    Some(_) => {
                        let row = describe::table_one_row(name, &cols[0], &cols[1], *max_levels)?;
                        text.push_str(&format!(
                            "{name} ({:?}): group 0 mean {:.4} (SD {:.4}), median {:.4} [IQR {:.4}-{:.4}] | group 1 mean {:.4} (SD {:.4}), median {:.4} [IQR {:.4}-{:.4}] | SMD {:.4} | {}\n",
                            row.kind, row.group0.mean, row.group0.sd, row.group0.median, row.group0.q1, row.group0.q3,
                            row.group1.mean, row.group1.sd, row.group1.median, row.group1.q1, row.group1.q3, row.smd, missing_line(&report)
                        ));
                        for (all, g0, g1) in &row.levels {
                            text.push_str(&format!(
                                "  = {}: {} ({:.1}%) | group 0 {} ({:.1}%) | group 1 {} ({:.1}%)\n",
                                all.level, all.count, all.percent, g0.count, g0.percent, g1.count, g1.percent
                            ));
                        }
                        rows.push(json!({ "row": row, "missing": report }));
                    }
                    None => {
                        let s = describe::summarize(&cols[0])?;
                        text.push_str(&format!(
                            "{name}: n {} mean {:.4} SD {:.4} median {:.4} IQR {:.4}-{:.4} min {:.4} max {:.4} | {}\n",
                            s.n,
                            s.mean,
                            s.sd,
                            s.median,
                            s.q1,
                            s.q3,
                            s.min,
                            s.max,
                            missing_line(&report)
                        ));
                        let levels = describe::counts(&cols[0]);
                        if levels.len() <= *max_levels {
                            for l in &levels {
                                text.push_str(&format!("  = {}: {} ({:.1}%)\n", l.level, l.count, l.percent));
                            }
                        }
                        rows.push(json!({ "variable": name, "summary": s, "levels": if levels.len() <= *max_levels { levels } else { vec![] }, "missing": report }));
                    }
                }
            }
            emit(ctx, json!({ "describe": rows }), text)
        }
        StatsCommand::Ttest { data, outcome, group, equal_var } => {
            let (cols, report) = load(data, "t-test", &[outcome, group])?;
            let (g0, g1, x0, x1) = two_groups(&cols[0], &cols[1], group)?;
            let t = htest::t_test(&x1, &x0, *equal_var, data.conf_level)?;
            let text = format!(
                "{} t-test of {outcome}: {group}={g1} vs {group}={g0}\nmeans {:.6} vs {:.6}, difference CI {:.6} to {:.6}\nt = {:.6}, df = {:.6}, p = {:.6e}\n{}\n",
                if *equal_var { "Student" } else { "Welch" }, t.mean_x, t.mean_y, t.conf_low, t.conf_high, t.statistic, t.df, t.p_value, missing_line(&report)
            );
            emit(ctx, json!({ "ttest": t, "groups": [g1, g0], "missing": report }), text)
        }
        StatsCommand::Wilcoxon { data, outcome, group } => {
            let (cols, report) = load(data, "Wilcoxon rank-sum test", &[outcome, group])?;
            let (g0, g1, x0, x1) = two_groups(&cols[0], &cols[1], group)?;
            let w = htest::wilcoxon(&x1, &x0)?;
            let text = format!(
                "Wilcoxon rank-sum test of {outcome}: {group}={g1} vs {group}={g0}\nW = {}, p = {:.6e} ({})\n{}\n",
                w.statistic,
                w.p_value,
                if w.exact { "exact" } else { "normal approximation with continuity correction" },
                missing_line(&report)
            );
            emit(ctx, json!({ "wilcoxon": w, "groups": [g1, g0], "missing": report }), text)
        }
        StatsCommand::Kruskal { data, outcome, group } => {
            let (cols, report) = load(data, "Kruskal-Wallis test", &[outcome, group])?;
            let k = htest::kruskal_wallis(&cols[0], &cols[1])?;
            let text = format!(
                "Kruskal-Wallis chi-squared = {:.6}, df = {}, p = {:.6e}\n{}\n",
                k.statistic,
                k.df,
                k.p_value,
                missing_line(&report)
            );
            emit(ctx, json!({ "kruskal": k, "missing": report }), text)
        }
        StatsCommand::Chisq { data, row, col, no_yates } => {
            let (cols, report) = load(data, "chi-square test", &[row, col])?;
            let (rl, cl, table) = crosstab(&cols[0], &cols[1]);
            let c = htest::chisq_test(&table, rl.len(), cl.len(), !no_yates)?;
            let text = format!(
                "chi-square test of {row} x {col} ({}x{} table{}): X-squared = {:.6}, df = {}, p = {:.6e}\n{}\n",
                rl.len(),
                cl.len(),
                if c.yates { ", Yates' correction" } else { "" },
                c.statistic,
                c.df,
                c.p_value,
                missing_line(&report)
            );
            emit(
                ctx,
                json!({ "chisq": c, "row_levels": rl, "col_levels": cl, "table": table, "missing": report }),
                text,
            )
        }
        StatsCommand::Fisher { data, row, col } => {
            let (cols, report) = load(data, "Fisher's exact test", &[row, col])?;
            let (rl, cl, table) = crosstab(&cols[0], &cols[1]);
            if rl.len() != 2 || cl.len() != 2 {
                bail!(
                    "Fisher's exact test needs a 2x2 table; {row} has {} values and {col} has {}",
                    rl.len(),
                    cl.len()
                );
            }
            let f = htest::fisher_test(
                table[0] as u64,
                table[1] as u64,
                table[2] as u64,
                table[3] as u64,
                data.conf_level,
            )?;
            let text = format!(
                "Fisher's exact test of {row} x {col}: odds ratio {:.6} (CI {:.6} to {:.6}), p = {:.6e}\n{}\n",
                f.odds_ratio,
                f.conf_low,
                f.conf_high,
                f.p_value,
                missing_line(&report)
            );
            emit(
                ctx,
                json!({ "fisher": f, "row_levels": rl, "col_levels": cl, "table": table, "missing": report }),
                text,
            )
        }
        StatsCommand::Logistic { data, outcome, covariates, forest } => {
            let mut wanted = vec![outcome.as_str()];
            wanted.extend(covariates.iter().map(|s| s.as_str()));
            let (cols, report) = load(data, "logistic regression", &wanted)?;
            let x = predictors(covariates, &cols[1..]);
            let fit = evident_stats::glm::glm(
                &cols[0],
                &x,
                Family::Binomial,
                &GlmConfig { conf_level: data.conf_level, ..Default::default() },
            )?;
            if let Some(path) = forest {
                write_svg(path, &svg::forest_svg(&forest_rows(&fit.coefficients, true), "Odds ratio", 1.0, true))?;
            }
            let text = format!(
                "logistic regression of {outcome}\n{}\ndeviance {:.6} on {} df; null deviance {:.6} on {} df; AIC {:.6}; {} iterations\n{}\n",
                coef_table("odds ratio", &fit.coefficients, true), fit.deviance, fit.df_residual, fit.null_deviance, fit.df_null, fit.aic, fit.iterations, missing_line(&report)
            );
            emit(ctx, json!({ "logistic": strip_glm(&fit), "missing": report }), text)
        }
        StatsCommand::Linear { data, outcome, covariates } => {
            let mut wanted = vec![outcome.as_str()];
            wanted.extend(covariates.iter().map(|s| s.as_str()));
            let (cols, report) = load(data, "linear regression", &wanted)?;
            let x = predictors(covariates, &cols[1..]);
            let fit = evident_stats::glm::lm(&cols[0], &x, None, data.conf_level)?;
            let text = format!(
                "linear regression of {outcome}\n{}\nresidual SE {:.6} on {} df; R-squared {:.6}, adjusted {:.6}; F {:.6}, p = {:.6e}\n{}\n",
                coef_table("", &fit.coefficients, false), fit.sigma, fit.df_residual, fit.r_squared, fit.adj_r_squared, fit.f_statistic, fit.f_p_value, missing_line(&report)
            );
            emit(
                ctx,
                json!({ "linear": { "coefficients": fit.coefficients, "sigma": fit.sigma, "r_squared": fit.r_squared,
                    "adj_r_squared": fit.adj_r_squared, "f_statistic": fit.f_statistic, "f_p_value": fit.f_p_value,
                    "df_residual": fit.df_residual, "n": fit.n }, "missing": report }),
                text,
            )
        }
        StatsCommand::Poisson { data, outcome, covariates, offset } => {
            let mut wanted = vec![outcome.as_str()];
            wanted.extend(covariates.iter().map(|s| s.as_str()));
            if let Some(o) = offset {
                wanted.push(o);
            }
            let (cols, report) = load(data, "Poisson regression", &wanted)?;
            let x = predictors(covariates, &cols[1..1 + covariates.len()]);
            let off = offset.as_ref().map(|_| cols[cols.len() - 1].clone());
            let fit = evident_stats::glm::glm(
                &cols[0],
                &x,
                Family::Poisson,
                &GlmConfig { offset: off.as_deref(), conf_level: data.conf_level, ..Default::default() },
            )?;
            let text = format!(
                "Poisson regression of {outcome}{}\n{}\ndeviance {:.6} on {} df; null deviance {:.6} on {} df; AIC {:.6}\n{}\n",
                offset.as_ref().map(|o| format!(" with offset {o}")).unwrap_or_default(),
                coef_table("rate ratio", &fit.coefficients, true), fit.deviance, fit.df_residual, fit.null_deviance, fit.df_null, fit.aic, missing_line(&report)
            );
            emit(ctx, json!({ "poisson": strip_glm(&fit), "missing": report }), text)
        }
        StatsCommand::Cox { data, time, event, covariates, strata, ties, forest } => {
            let mut wanted = vec![time.as_str(), event.as_str()];
            wanted.extend(covariates.iter().map(|s| s.as_str()));
            if let Some(s) = strata {
                wanted.push(s);
            }
            let (cols, report) = load(data, "Cox model", &wanted)?;
            let x = predictors(covariates, &cols[2..2 + covariates.len()]);
            let s = strata.as_ref().map(|_| cols[cols.len() - 1].clone());
            let ties = match ties {
                TiesArg::Efron => Ties::Efron,
                TiesArg::Breslow => Ties::Breslow,
            };
            let fit = survival::coxph(&cols[0], &cols[1], &x, s.as_deref(), ties, data.conf_level)?;
            if let Some(path) = forest {
                write_svg(path, &svg::forest_svg(&forest_rows(&fit.coefficients, false), "Hazard ratio", 1.0, true))?;
            }
            let text = format!(
                "Cox model ({:?} ties{}): n = {}, events = {}\n{}\nlikelihood ratio test {:.6} on {} df, p = {:.6e}\nWald test {:.6} on {} df, p = {:.6e}\nscore (log-rank) test {:.6} on {} df, p = {:.6e}\nconcordance {:.6} (se {:.6})\n{}\n",
                fit.ties, strata.as_ref().map(|s| format!(", stratified by {s}")).unwrap_or_default(), fit.n, fit.events,
                coef_table("hazard ratio", &fit.coefficients, true),
                fit.likelihood_ratio.statistic, fit.likelihood_ratio.df, fit.likelihood_ratio.p_value,
                fit.wald.statistic, fit.wald.df, fit.wald.p_value, fit.score.statistic, fit.score.df, fit.score.p_value,
                fit.concordance.concordance, fit.concordance.std_err, missing_line(&report)
            );
            emit(ctx, json!({ "cox": fit, "missing": report }), text)
        }
        StatsCommand::Km { data, time, event, group, conf_type, svg: svg_path } => {
            let mut wanted = vec![time.as_str(), event.as_str()];
            if let Some(g) = group {
                wanted.push(g);
            }
            let (cols, report) = load(data, "Kaplan-Meier", &wanted)?;
            let conf = match conf_type {
                ConfTypeArg::Log => ConfType::Log,
                ConfTypeArg::LogLog => ConfType::LogLog,
            };
            let curves = survival::kaplan_meier(
                &cols[0],
                &cols[1],
                group.as_ref().map(|_| cols[2].as_slice()),
                conf,
                data.conf_level,
            )?;
            let labels: Vec<String> = curves
                .iter()
                .map(|c| group.as_ref().map(|g| format!("{g}={}", c.group)).unwrap_or_else(|| "all".into()))
                .collect();
            if let Some(path) = svg_path {
                write_svg(path, &svg::kaplan_meier_svg(&curves, &labels, time))?;
            }
            let mut text = format!(
                "{:<16} {:>6} {:>7} {:>10} {:>10} {:>10}\n",
                "group", "n", "events", "median", "lower", "upper"
            );
            for (c, l) in curves.iter().zip(&labels) {
                text.push_str(&format!(
                    "{:<16} {:>6} {:>7} {:>10} {:>10} {:>10}\n",
                    l,
                    c.n,
                    c.events,
                    na(c.median),
                    na(c.median_lower),
                    na(c.median_upper)
                ));
            }
            text.push_str(&missing_line(&report));
            text.push('\n');
            emit(ctx, json!({ "km": curves, "labels": labels, "missing": report }), text)
        }
        StatsCommand::Logrank { data, time, event, group, strata } => {
            let mut wanted = vec![time.as_str(), event.as_str(), group.as_str()];
            if let Some(s) = strata {
                wanted.push(s);
            }
            let (cols, report) = load(data, "log-rank test", &wanted)?;
            let s = strata.as_ref().map(|_| cols[3].clone());
            let t = survival::logrank(&cols[0], &cols[1], &cols[2], s.as_deref())?;
            let mut text = format!(
                "log-rank test by {group}{}\n",
                strata.as_ref().map(|s| format!(", stratified by {s}")).unwrap_or_default()
            );
            for ((g, o), e) in t.groups.iter().zip(&t.observed).zip(&t.expected) {
                text.push_str(&format!("{group}={g}: observed {o}, expected {e:.4}\n"));
            }
            text.push_str(&format!(
                "chi-squared = {:.6} on {} df, p = {:.6e}\n{}\n",
                t.test.statistic,
                t.test.df,
                t.test.p_value,
                missing_line(&report)
            ));
            emit(ctx, json!({ "logrank": t, "missing": report }), text)
        }
        StatsCommand::PsMatch { data, treatment, covariates, ratio, caliper, order, matchit_compat } => {
            let mut wanted = vec![treatment.as_str()];
            wanted.extend(covariates.iter().map(|s| s.as_str()));
            let (cols, report) = load(data, "propensity score matching", &wanted)?;
            let x = predictors(covariates, &cols[1..]);
            let ps = propensity::propensity_scores(&cols[0], &x)?;
            let config = MatchConfig {
                ratio: *ratio,
                caliper_sd: if *caliper > 0.0 { Some(*caliper) } else { None },
                order: match order {
                    OrderArg::Largest => MatchOrder::Largest,
                    OrderArg::Smallest => MatchOrder::Smallest,
                    OrderArg::Data => MatchOrder::Data,
                },
                arithmetic: if *matchit_compat { DistanceArithmetic::MatchIt451 } else { DistanceArithmetic::Exact },
            };
            let m = propensity::match_nearest(&cols[0], &ps.logit, &config)?;
            let bal = propensity::balance(&cols[0], &x, &m.weights)?;
            let n_treated = cols[0].iter().filter(|t| **t == 1.0).count();
            let mut text = format!(
                "propensity score matching 1:{ratio} on the logit{}: {} of {} treated matched to {} controls\n{:<20} {:>12} {:>12}\n",
                m.caliper.map(|c| format!(", caliper {c:.6}")).unwrap_or_default(), m.n_treated_matched, n_treated, m.n_controls_matched,
                "covariate", "SMD before", "SMD after"
            );
            for b in &bal {
                text.push_str(&format!("{:<20} {:>12.4} {:>12.4}\n", b.covariate, b.smd_before, b.smd_after));
            }
            text.push_str(&missing_line(&report));
            text.push('\n');
            // Rows are reported 1-based, counting complete rows.
            let pairs: Vec<serde_json::Value> = m
                .pairs
                .iter()
                .map(|(t, c)| json!({ "treated": t + 1, "controls": c.iter().map(|c| c + 1).collect::<Vec<_>>() }))
                .collect();
            emit(
                ctx,
                json!({ "ps_match": { "caliper": m.caliper, "n_treated_matched": m.n_treated_matched,
                    "n_controls_matched": m.n_controls_matched, "pairs": pairs, "weights": m.weights, "balance": bal,
                    "propensity_model": ps.model.coefficients }, "missing": report }),
                text,
            )
        }
        StatsCommand::Iptw { data, treatment, covariates, outcome, estimand, outcome_model } => {
            let mut wanted = vec![treatment.as_str(), outcome.as_str()];
            wanted.extend(covariates.iter().map(|s| s.as_str()));
            let (cols, report) = load(data, "inverse probability weighting", &wanted)?;
            let x = predictors(covariates, &cols[2..]);
            let ps = propensity::propensity_scores(&cols[0], &x)?;
            let est = match estimand {
                EstimandArg::Ate => Estimand::Ate,
                EstimandArg::Att => Estimand::Att,
            };
            let w = propensity::ipw_weights(&cols[0], &ps.score, est)?;
            let model = match outcome_model {
                OutcomeArg::Logistic => OutcomeModel::Logistic,
                OutcomeArg::Linear => OutcomeModel::Linear,
            };
            let e = propensity::weighted_effect(&cols[1], &cols[0], &w, model, data.conf_level)?;
            let bal = propensity::balance(&cols[0], &x, &w)?;
            let scale = match model {
                OutcomeModel::Logistic => format!(
                    "odds ratio {:.6} (CI {:.6} to {:.6})",
                    e.estimate.exp(),
                    e.conf_low.exp(),
                    e.conf_high.exp()
                ),
                OutcomeModel::Linear => {
                    format!("mean difference {:.6} (CI {:.6} to {:.6})", e.estimate, e.conf_low, e.conf_high)
                }
            };
            let mut text = format!(
                "IPTW ({:?}) effect of {treatment} on {outcome}: {scale}; robust SE {:.6}, p = {:.6e}\n{:<20} {:>12} {:>12}\n",
                est, e.robust_se, e.p_value, "covariate", "SMD before", "SMD after"
            );
            for b in &bal {
                text.push_str(&format!("{:<20} {:>12.4} {:>12.4}\n", b.covariate, b.smd_before, b.smd_after));
            }
            text.push_str(&missing_line(&report));
            text.push('\n');
            emit(ctx, json!({ "iptw": { "estimand": est, "effect": e, "balance": bal }, "missing": report }), text)
        }
        StatsCommand::Auc { data, outcome, predictor } => {
            let (cols, report) = load(data, "ROC AUC", &[outcome, predictor])?;
            let a = roc::auc_delong(&cols[0], &cols[1], data.conf_level)?;
            let text = format!(
                "AUC of {predictor} for {outcome}: {:.6} (DeLong CI {:.6} to {:.6}); {} cases, {} controls\n{}\n",
                a.auc,
                a.conf_low,
                a.conf_high,
                a.n_cases,
                a.n_controls,
                missing_line(&report)
            );
            emit(ctx, json!({ "auc": a, "missing": report }), text)
        }
    }
}

fn na(v: f64) -> String {
    if v.is_nan() {
        "NA".into()
    } else {
        format!("{v}")
    }
}

/// A GLM fit without the per-row vectors.
fn strip_glm(fit: &evident_stats::glm::GlmFit) -> serde_json::Value {
    json!({ "family": fit.family, "coefficients": fit.coefficients,
            "exp_coefficients": fit.coefficients.iter().map(|c| { let (lo, hi) = c.exp_conf(); json!({ "term": c.term, "estimate": c.exp_estimate(), "conf_low": lo, "conf_high": hi }) }).collect::<Vec<_>>(),
            "deviance": fit.deviance, "null_deviance": fit.null_deviance, "aic": fit.aic,
            "df_residual": fit.df_residual, "df_null": fit.df_null, "iterations": fit.iterations, "n": fit.n })
}

/// Cross-tabulates two columns: sorted row levels, column levels, counts row-major.
fn crosstab(a: &[f64], b: &[f64]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let levels = |v: &[f64]| {
        let mut l = v.to_vec();
        l.sort_by(|x, y| x.total_cmp(y));
        l.dedup();
        l
    };
    let (rl, cl) = (levels(a), levels(b));
    let mut table = vec![0.0; rl.len() * cl.len()];
    for (x, y) in a.iter().zip(b) {
        let i = rl.iter().position(|v| v == x).unwrap();
        let j = cl.iter().position(|v| v == y).unwrap();
        table[i * cl.len() + j] += 1.0;
    }
    (rl, cl, table)
}
