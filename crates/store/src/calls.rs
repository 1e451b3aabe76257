//! Model-call accounting and audit: runs, calls (full request and
//! response, tokens, latency, cost, cache hit), the content-addressed answer
//! cache, pipeline failures, and per-run summaries with latency percentiles.
//! Requests and responses are stored as JSON text; this crate does not
//! interpret them.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use crate::{Result, Store};

/// One call to record.
#[derive(Debug, Clone)]
pub struct NewModelCall<'a> {
    pub run_id: &'a str,
    pub model: &'a str,
    pub endpoint: &'a str,
    pub cache_key: &'a str,
    pub cache_hit: bool,
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub latency_ms: f64,
    pub cost_usd: Option<f64>,
    pub contains_patient_text: bool,
    pub request_json: &'a str,
    pub response_json: Option<&'a str>,
    pub error: Option<&'a str>,
}

/// A recorded call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCallRecord {
    pub id: i64,
    pub run_id: String,
    pub started_at: String,
    pub model: String,
    pub endpoint: String,
    pub cache_key: String,
    pub cache_hit: bool,
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub latency_ms: f64,
    pub cost_usd: Option<f64>,
    pub contains_patient_text: bool,
    pub request_json: String,
    pub response_json: Option<String>,
    pub error: Option<String>,
}

/// An answer that never validated, kept verbatim.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineFailureRecord {
    pub id: i64,
    pub run_id: String,
    pub model: String,
    pub raw_text: String,
    pub errors_json: String,
    pub attempts: u32,
    pub request_json: String,
    pub created_at: String,
}

/// What a run cost. Latency percentiles cover calls that reached a model
/// (cache hits excluded); nearest-rank method.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelRunSummary {
    pub id: String,
    pub label: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// All recorded calls, cache hits included.
    pub calls: u64,
    pub cache_hits: u64,
    /// Calls that reached a model (calls - cache hits).
    pub model_calls: u64,
    /// Calls that ended in an error.
    pub errors: u64,
    pub pipeline_failures: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost_usd: f64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p90_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub latency_max_ms: Option<f64>,
    pub models: Vec<String>,
}

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// `?, ?, ...` for an `IN` list of `n` values (`NULL` when empty, which
/// matches nothing).
fn placeholders(n: usize) -> String {
    if n == 0 {
        "NULL".to_string()
    } else {
        vec!["?"; n].join(", ")
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

impl Store {
    /// Starts a run and returns its id (`run-YYYYMMDDTHHMMSS-xxxxxx`).
    pub fn begin_model_run(&self, label: &str) -> Result<String> {
        let now_utc = chrono::Utc::now();
        let nanos = now_utc.timestamp_subsec_nanos() ^ std::process::id().rotate_left(16);
        let id = format!("run-{}-{:06x}", now_utc.format("%Y%m%dT%H%M%S"), nanos & 0xFF_FFFF);
        self.conn()
            .execute("INSERT INTO model_runs (id, label, started_at) VALUES (?1, ?2, ?3)", params![id, label, now()])?;
        Ok(id)
    }

    pub fn finish_model_run(&self, run_id: &str) -> Result<()> {
        self.conn().execute("UPDATE model_runs SET finished_at = ?2 WHERE id = ?1", params![run_id, now()])?;
        Ok(())
    }

    pub fn record_model_call(&self, call: &NewModelCall<'_>) -> Result<i64> {
        self.conn().execute(
            "INSERT INTO model_calls (run_id, started_at, model, endpoint, cache_key, cache_hit,
                prompt_tokens, completion_tokens, latency_ms, cost_usd, contains_patient_text,
                request_json, response_json, error)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                call.run_id,
                now(),
                call.model,
                call.endpoint,
                call.cache_key,
                call.cache_hit,
                call.prompt_tokens,
                call.completion_tokens,
                call.latency_ms,
                call.cost_usd,
                call.contains_patient_text,
                call.request_json,
                call.response_json,
                call.error,
            ],
        )?;
        Ok(self.conn().last_insert_rowid())
    }

    /// The cached response JSON for `cache_key`, if any.
    pub fn cached_model_response(&self, cache_key: &str) -> Result<Option<String>> {
        Ok(self
            .conn()
            .query_row("SELECT response_json FROM model_cache WHERE cache_key = ?1", [cache_key], |r| r.get(0))
            .optional()?)
    }

    pub fn put_cached_model_response(&self, cache_key: &str, model: &str, response_json: &str) -> Result<()> {
        self.conn().execute(
            "INSERT OR REPLACE INTO model_cache (cache_key, model, response_json, created_at)
             VALUES (?1, ?2, ?3, ?4)",
            params![cache_key, model, response_json, now()],
        )?;
        Ok(())
    }

    pub fn record_pipeline_failure(
        &self,
        run_id: &str,
        model: &str,
        raw_text: &str,
        errors_json: &str,
        attempts: u32,
        request_json: &str,
    ) -> Result<i64> {
        self.conn().execute(
            "INSERT INTO pipeline_failures (run_id, model, raw_text, errors_json, attempts, request_json, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![run_id, model, raw_text, errors_json, attempts, request_json, now()],
        )?;
        Ok(self.conn().last_insert_rowid())
    }

    /// Every run, newest first.
    pub fn model_runs(&self) -> Result<Vec<ModelRunSummary>> {
        let ids: Vec<String> = self
            .conn()
            .prepare("SELECT id FROM model_runs ORDER BY started_at DESC, rowid DESC")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(summary) = self.model_run(&id)? {
                out.push(summary);
            }
        }
        Ok(out)
    }

    /// The most recent run's id.
    pub fn latest_model_run(&self) -> Result<Option<String>> {
        Ok(self
            .conn()
            .query_row("SELECT id FROM model_runs ORDER BY started_at DESC, rowid DESC LIMIT 1", [], |r| r.get(0))
            .optional()?)
    }

    pub fn model_run(&self, run_id: &str) -> Result<Option<ModelRunSummary>> {
        let head: Option<(String, String, Option<String>)> = self
            .conn()
            .query_row("SELECT label, started_at, finished_at FROM model_runs WHERE id = ?1", [run_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        let Some((label, started_at, finished_at)) = head else { return Ok(None) };
        Ok(Some(self.summarize_runs(run_id.to_string(), label, started_at, finished_at, &[run_id])?))
    }

    /// One summary over several runs (e.g. the invocations of one resumed
    /// trial-matching run): sums, and latency percentiles over all their
    /// calls. `id` and `label` name the whole.
    pub fn model_runs_summary(&self, id: &str, label: &str, run_ids: &[&str]) -> Result<ModelRunSummary> {
        let in_list = placeholders(run_ids.len());
        let (started_at, finished_at): (Option<String>, Option<String>) = self.conn().query_row(
            &format!("SELECT MIN(started_at), MAX(finished_at) FROM model_runs WHERE id IN ({in_list})"),
            rusqlite::params_from_iter(run_ids),
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        self.summarize_runs(id.to_string(), label.to_string(), started_at.unwrap_or_default(), finished_at, run_ids)
    }

    fn summarize_runs(
        &self,
        id: String,
        label: String,
        started_at: String,
        finished_at: Option<String>,
        run_ids: &[&str],
    ) -> Result<ModelRunSummary> {
        let in_list = placeholders(run_ids.len());
        let ids = || rusqlite::params_from_iter(run_ids);
        let (calls, cache_hits, errors, prompt_tokens, completion_tokens, cost_usd): (i64, i64, i64, i64, i64, f64) =
            self.conn().query_row(
                &format!(
                    "SELECT COUNT(*), COALESCE(SUM(cache_hit), 0), COALESCE(SUM(error IS NOT NULL), 0),
                        COALESCE(SUM(CASE WHEN cache_hit = 0 THEN prompt_tokens END), 0),
                        COALESCE(SUM(CASE WHEN cache_hit = 0 THEN completion_tokens END), 0),
                        COALESCE(SUM(CASE WHEN cache_hit = 0 THEN cost_usd END), 0.0)
                     FROM model_calls WHERE run_id IN ({in_list})"
                ),
                ids(),
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
            )?;
        let mut latencies: Vec<f64> = self
            .conn()
            .prepare(&format!("SELECT latency_ms FROM model_calls WHERE run_id IN ({in_list}) AND cache_hit = 0"))?
            .query_map(ids(), |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        latencies.sort_by(f64::total_cmp);
        let models: Vec<String> = self
            .conn()
            .prepare(&format!("SELECT DISTINCT model FROM model_calls WHERE run_id IN ({in_list}) ORDER BY model"))?
            .query_map(ids(), |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        let pipeline_failures: i64 = self.conn().query_row(
            &format!("SELECT COUNT(*) FROM pipeline_failures WHERE run_id IN ({in_list})"),
            ids(),
            |r| r.get(0),
        )?;
        Ok(ModelRunSummary {
            id,
            label,
            started_at,
            finished_at,
            calls: calls as u64,
            cache_hits: cache_hits as u64,
            model_calls: (calls - cache_hits) as u64,
            errors: errors as u64,
            pipeline_failures: pipeline_failures as u64,
            prompt_tokens: prompt_tokens as u64,
            completion_tokens: completion_tokens as u64,
            cost_usd,
            latency_p50_ms: percentile(&latencies, 50.0),
            latency_p90_ms: percentile(&latencies, 90.0),
            latency_p99_ms: percentile(&latencies, 99.0),
            latency_max_ms: latencies.last().copied(),
            models,
        })
    }

    /// A run's calls in the order they were made.
    pub fn model_calls(&self, run_id: &str) -> Result<Vec<ModelCallRecord>> {
        let mut stmt = self.conn().prepare(
            "SELECT id, run_id, started_at, model, endpoint, cache_key, cache_hit, prompt_tokens,
                    completion_tokens, latency_ms, cost_usd, contains_patient_text, request_json,
                    response_json, error
             FROM model_calls WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(ModelCallRecord {
                id: r.get(0)?,
                run_id: r.get(1)?,
                started_at: r.get(2)?,
                model: r.get(3)?,
                endpoint: r.get(4)?,
                cache_key: r.get(5)?,
                cache_hit: r.get(6)?,
                prompt_tokens: r.get(7)?,
                completion_tokens: r.get(8)?,
                latency_ms: r.get(9)?,
                cost_usd: r.get(10)?,
                contains_patient_text: r.get(11)?,
                request_json: r.get(12)?,
                response_json: r.get(13)?,
                error: r.get(14)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    pub fn pipeline_failures(&self, run_id: &str) -> Result<Vec<PipelineFailureRecord>> {
        let mut stmt = self.conn().prepare(
            "SELECT id, run_id, model, raw_text, errors_json, attempts, request_json, created_at
             FROM pipeline_failures WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([run_id], |r| {
            Ok(PipelineFailureRecord {
                id: r.get(0)?,
                run_id: r.get(1)?,
                model: r.get(2)?,
                raw_text: r.get(3)?,
                errors_json: r.get(4)?,
                attempts: r.get(5)?,
                request_json: r.get(6)?,
                created_at: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call<'a>(run: &'a str, hit: bool, latency_ms: f64) -> NewModelCall<'a> {
        NewModelCall {
            run_id: run,
            model: "m",
            endpoint: "e",
            cache_key: "k",
            cache_hit: hit,
            prompt_tokens: 10,
            completion_tokens: 5,
            latency_ms,
            cost_usd: Some(0.5),
            contains_patient_text: true,
            request_json: "{}",
            response_json: Some("{}"),
            error: None,
        }
    }

    #[test]
    fn summary_counts_hits_tokens_cost_and_percentiles() {
        let store = Store::open_in_memory().unwrap();
        let run = store.begin_model_run("test").unwrap();
        for latency in 1..=10 {
            store.record_model_call(&call(&run, false, latency as f64)).unwrap();
        }
        store.record_model_call(&call(&run, true, 0.0)).unwrap();
        store.record_pipeline_failure(&run, "m", "raw", "[]", 3, "{}").unwrap();
        let s = store.model_run(&run).unwrap().unwrap();
        assert_eq!((s.calls, s.cache_hits, s.model_calls), (11, 1, 10));
        assert_eq!((s.prompt_tokens, s.completion_tokens), (100, 50));
        assert!((s.cost_usd - 5.0).abs() < 1e-9);
        assert_eq!(s.latency_p50_ms, Some(5.0));
        assert_eq!(s.latency_p90_ms, Some(9.0));
        assert_eq!(s.latency_max_ms, Some(10.0));
        assert_eq!(s.pipeline_failures, 1);
        assert_eq!(store.model_calls(&run).unwrap().len(), 11);
        assert_eq!(store.latest_model_run().unwrap(), Some(run));
    }

    #[test]
    fn cache_round_trip() {
        let store = Store::open_in_memory().unwrap();
        assert_eq!(store.cached_model_response("k").unwrap(), None);
        store.put_cached_model_response("k", "m", "{\"text\":1}").unwrap();
        assert_eq!(store.cached_model_response("k").unwrap().as_deref(), Some("{\"text\":1}"));
    }

    #[test]
    fn percentile_nearest_rank() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), Some(2.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 100.0), Some(4.0));
    }
}
