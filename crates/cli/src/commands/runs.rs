//! `evident runs list|show|export`: what model-call runs cost (calls,
//! cache hits, tokens, cost, latency percentiles, failures) and their full
//! trace, optionally with note text redacted.

use crate::commands::Context;
use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: RunsCommand,
}

#[derive(clap::Subcommand, Debug)]
enum RunsCommand {
    /// All runs, newest first.
    List,
    /// One run's summary and calls (`latest` for the newest).
    Show { run: String },
    /// One run's full trace as JSON.
    Export {
        run: String,
        /// Replace message and answer text of calls that carried patient text.
        #[arg(long)]
        redact: bool,
    },
}

fn fmt_ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0} ms")).unwrap_or_else(|| "-".into())
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Outcome> {
    let store = ctx.open_store()?;
    let resolve = |run: &str| -> anyhow::Result<String> {
        if run == "latest" {
            store.latest_model_run()?.ok_or_else(|| anyhow::anyhow!("no runs in {}", ctx.cli.db.display()))
        } else {
            Ok(run.to_string())
        }
    };
    match &args.command {
        RunsCommand::List => {
            let runs = store.model_runs()?;
            if ctx.json() {
                crate::output::print_json(&runs)?;
            } else {
                println!(
                    "{:<32} {:<16} {:>6} {:>6} {:>10} {:>10} {:>9} {:>9}",
                    "run", "label", "calls", "hits", "prompt", "completion", "cost_usd", "p50"
                );
                for r in &runs {
                    println!(
                        "{:<32} {:<16} {:>6} {:>6} {:>10} {:>10} {:>9.4} {:>9}",
                        r.id,
                        r.label,
                        r.calls,
                        r.cache_hits,
                        r.prompt_tokens,
                        r.completion_tokens,
                        r.cost_usd,
                        fmt_ms(r.latency_p50_ms)
                    );
                }
            }
            Ok(if runs.is_empty() { Outcome::NothingFound } else { Outcome::Found })
        }
        RunsCommand::Show { run } => {
            let id = resolve(run)?;
            let summary = store
                .model_run(&id)?
                .ok_or_else(|| anyhow::anyhow!("no run {id:?} in {}; see `evident runs list`", ctx.cli.db.display()))?;
            let calls = store.model_calls(&id)?;
            let failures = store.pipeline_failures(&id)?;
            if ctx.json() {
                let calls: Vec<_> = calls
                    .iter()
                    .map(|c| {
                        serde_json::json!({
                            "id": c.id, "model": c.model, "endpoint": c.endpoint, "cache_hit": c.cache_hit,
                            "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                            "latency_ms": c.latency_ms, "cost_usd": c.cost_usd, "error": c.error,
                        })
                    })
                    .collect();
                crate::output::print_json(
                    &serde_json::json!({"run": summary, "calls": calls, "pipeline_failures": failures.len()}),
                )?;
            } else {
                println!("run {} ({}), started {}", summary.id, summary.label, summary.started_at);
                println!("models: {}", summary.models.join(", "));
                println!(
                    "calls: {} ({} model calls, {} cache hits, {} errors, {} pipeline failures)",
                    summary.calls, summary.model_calls, summary.cache_hits, summary.errors, summary.pipeline_failures
                );
                println!(
                    "tokens: {} prompt, {} completion; cost: ${:.6}",
                    summary.prompt_tokens, summary.completion_tokens, summary.cost_usd
                );
                println!(
                    "latency: p50 {}, p90 {}, p99 {}, max {}",
                    fmt_ms(summary.latency_p50_ms),
                    fmt_ms(summary.latency_p90_ms),
                    fmt_ms(summary.latency_p99_ms),
                    fmt_ms(summary.latency_max_ms)
                );
                for c in &calls {
                    println!(
                        "  #{:<5} {:<40} {:<5} {:>6}+{:<5} {:>9.1} ms {}",
                        c.id,
                        c.model,
                        if c.cache_hit { "hit" } else { "call" },
                        c.prompt_tokens,
                        c.completion_tokens,
                        c.latency_ms,
                        c.error.as_deref().unwrap_or("")
                    );
                }
                for f in &failures {
                    println!("  pipeline failure #{} after {} attempts: {}", f.id, f.attempts, f.errors_json);
                }
            }
            Ok(Outcome::Found)
        }
        RunsCommand::Export { run, redact } => {
            let id = resolve(run)?;
            let trace = evident_llm::export_trace(&store, &id, *redact)?;
            crate::output::print_json(&trace)?;
            Ok(Outcome::Found)
        }
    }
}
