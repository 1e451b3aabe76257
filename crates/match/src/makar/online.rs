//! MAKAR's online search agent: queries a configurable search endpoint
//! that speaks SearXNG's JSON format (`GET {endpoint}?q=...&format=json`
//! answering `{"results": [{"title", "url", "content"}]}`). Off by default:
//! a [`super::MakarMatcher`] without an [`OnlineSearch`] never offers the
//! agent to its router, and forcing it is refused. Only criterion text is
//! sent, never patient text.

use std::time::Duration;

use serde::Deserialize;

use super::knowledge::Passage;
use crate::zero_shot::MatchError;

/// A search endpoint and the HTTP client that queries it.
pub struct OnlineSearch {
    endpoint: String,
    agent: ureq::Agent,
    timeout: Duration,
}

#[derive(Deserialize)]
struct SearxAnswer {
    #[serde(default)]
    results: Vec<SearxResult>,
}

#[derive(Deserialize)]
struct SearxResult {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    content: String,
}

impl OnlineSearch {
    /// `endpoint` is the search URL without query (for SearXNG,
    /// `http://host:8888/search`). Only http and https are accepted.
    pub fn new(endpoint: &str, timeout: Duration) -> Result<OnlineSearch, MatchError> {
        let endpoint = endpoint.trim();
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(MatchError::OnlineSearch(format!(
                "endpoint {endpoint:?} is not an http:// or https:// URL; give the search URL, e.g. http://localhost:8888/search"
            )));
        }
        if endpoint.contains('?') {
            return Err(MatchError::OnlineSearch(format!(
                "endpoint {endpoint:?} already has a query string; give it without one (q and format=json are added)"
            )));
        }
        let agent: ureq::Agent =
            ureq::Agent::config_builder().timeout_global(Some(timeout)).http_status_as_error(false).build().into();
        Ok(OnlineSearch { endpoint: endpoint.to_string(), agent, timeout })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The first `k` results with text, as passages whose source is the
    /// URL (and title).
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<Passage>, MatchError> {
        let endpoint = &self.endpoint;
        let mut response = self
            .agent
            .get(endpoint)
            .query("q", query)
            .query("format", "json")
            .header("Accept", "application/json")
            .call()
            .map_err(|e| match e {
                ureq::Error::Timeout(_) => MatchError::OnlineSearch(format!(
                    "{endpoint}: no answer within {} s; check the search service or raise the timeout",
                    self.timeout.as_secs_f64()
                )),
                other => MatchError::OnlineSearch(format!(
                    "{endpoint}: request failed: {other}; is the search service running?"
                )),
            })?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(16 << 20)
            .read_to_string()
            .map_err(|e| MatchError::OnlineSearch(format!("{endpoint}: cannot read the answer: {e}")))?;
        if status != 200 {
            let start: String = body.chars().take(200).collect();
            return Err(MatchError::OnlineSearch(format!(
                "{endpoint}: HTTP {status}: {start}; for SearXNG, enable the json format under search.formats in settings.yml"
            )));
        }
        let answer: SearxAnswer = serde_json::from_str(&body).map_err(|e| {
            MatchError::OnlineSearch(format!(
                "{endpoint}: the answer is not SearXNG JSON ({e}); expected {{\"results\": [{{\"title\", \"url\", \"content\"}}]}}"
            ))
        })?;
        Ok(answer
            .results
            .into_iter()
            .filter(|r| !r.content.trim().is_empty())
            .take(k)
            .map(|r| Passage {
                source: if r.title.trim().is_empty() { r.url } else { format!("{} ({})", r.url, r.title.trim()) },
                text: r.content.trim().to_string(),
            })
            .collect())
    }
}
