//! The model-run jobs: what each run of model calls cost (calls, cache
//! hits, tokens, cost, latency percentiles, failures), one run's calls,
//! and its full trace, optionally with note text redacted.

use std::fmt;

use evident_store::{ModelRunSummary, PipelineFailureRecord};
use serde::Serialize;

use crate::error::{AppError, Result};
use crate::session::{lock, Session};

/// Every run, newest first.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct RunList {
    pub runs: Vec<ModelRunSummary>,
}

pub fn list(session: &Session) -> Result<RunList> {
    Ok(RunList { runs: session.with_store(|store| Ok(store.model_runs()?))? })
}

fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0} ms")).unwrap_or_else(|| "-".into())
}

impl fmt::Display for RunList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<32} {:<16} {:>6} {:>6} {:>10} {:>10} {:>9} {:>9}",
            "run", "label", "calls", "hits", "prompt", "completion", "cost_usd", "p50"
        )?;
        for r in &self.runs {
            writeln!(
                f,
                "{:<32} {:<16} {:>6} {:>6} {:>10} {:>10} {:>9.4} {:>9}",
                r.id,
                r.label,
                r.calls,
                r.cache_hits,
                r.prompt_tokens,
                r.completion_tokens,
                r.cost_usd,
                ms(r.latency_p50_ms)
            )?;
        }
        Ok(())
    }
}

/// One call, without its request and response text.
#[derive(Debug, Serialize)]
pub struct CallLine {
    pub id: i64,
    pub model: String,
    pub endpoint: String,
    pub cache_hit: bool,
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub latency_ms: f64,
    pub cost_usd: Option<f64>,
    pub error: Option<String>,
}

/// One run's summary, calls and pipeline failures.
#[derive(Debug, Serialize)]
pub struct RunDetail {
    pub run: ModelRunSummary,
    pub calls: Vec<CallLine>,
    /// How many pipeline failures (JSON output counts them).
    #[serde(rename = "pipeline_failures", serialize_with = "count")]
    pub failures: Vec<PipelineFailureRecord>,
}

fn count<S: serde::Serializer>(v: &[PipelineFailureRecord], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_u64(v.len() as u64)
}

/// The run `run` names (`latest` for the newest).
fn resolve(session: &Session, run: &str) -> Result<String> {
    if run != "latest" {
        return Ok(run.to_string());
    }
    session
        .with_store(|store| Ok(store.latest_model_run()?))?
        .ok_or_else(|| AppError::Input(format!("no runs in {}", session.db_path().display())))
}

pub fn show(session: &Session, run: &str) -> Result<RunDetail> {
    let id = resolve(session, run)?;
    let store = session.store()?;
    let store = lock(&store);
    let summary = store.model_run(&id)?.ok_or_else(|| {
        AppError::Input(format!("no run {id:?} in {}; list the runs to see which exist", session.db_path().display()))
    })?;
    let calls = store
        .model_calls(&id)?
        .into_iter()
        .map(|c| CallLine {
            id: c.id,
            model: c.model,
            endpoint: c.endpoint,
            cache_hit: c.cache_hit,
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            latency_ms: c.latency_ms,
            cost_usd: c.cost_usd,
            error: c.error,
        })
        .collect();
    let failures = store.pipeline_failures(&id)?;
    Ok(RunDetail { run: summary, calls, failures })
}

impl fmt::Display for RunDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.run;
        writeln!(f, "run {} ({}), started {}", s.id, s.label, s.started_at)?;
        writeln!(f, "models: {}", s.models.join(", "))?;
        writeln!(
            f,
            "calls: {} ({} model calls, {} cache hits, {} errors, {} pipeline failures)",
            s.calls, s.model_calls, s.cache_hits, s.errors, s.pipeline_failures
        )?;
        writeln!(
            f,
            "tokens: {} prompt, {} completion; cost: ${:.6}",
            s.prompt_tokens, s.completion_tokens, s.cost_usd
        )?;
        writeln!(
            f,
            "latency: p50 {}, p90 {}, p99 {}, max {}",
            ms(s.latency_p50_ms),
            ms(s.latency_p90_ms),
            ms(s.latency_p99_ms),
            ms(s.latency_max_ms)
        )?;
        for c in &self.calls {
            writeln!(
                f,
                "  #{:<5} {:<40} {:<5} {:>6}+{:<5} {:>9.1} ms {}",
                c.id,
                c.model,
                if c.cache_hit { "hit" } else { "call" },
                c.prompt_tokens,
                c.completion_tokens,
                c.latency_ms,
                c.error.as_deref().unwrap_or("")
            )?;
        }
        for p in &self.failures {
            writeln!(f, "  pipeline failure #{} after {} attempts: {}", p.id, p.attempts, p.errors_json)?;
        }
        Ok(())
    }
}

/// One run's full trace as JSON; with `redact`, the text of calls that
/// carried patient text is replaced by its length and a hash prefix.
pub fn export(session: &Session, run: &str, redact: bool) -> Result<serde_json::Value> {
    let id = resolve(session, run)?;
    let store = session.store()?;
    let trace = evident_recorder::export_trace(&lock(&store), &id, redact)?;
    Ok(trace)
}
