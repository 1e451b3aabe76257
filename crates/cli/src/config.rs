//! `evident.toml`: optional configuration. Each section is handed to the
//! crate that owns it, which validates it with its own types.

use std::path::Path;

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[llm]`: models, endpoints, prices, privacy (parsed by `evident-llm`).
    #[serde(default)]
    pub llm: Option<toml::Value>,
    /// `[retrieval]`: embedding model location and fusion weights.
    #[serde(default)]
    pub retrieval: Option<toml::Value>,
}

impl Config {
    /// Reads `path` if it exists; a missing file means defaults.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(e) => anyhow::bail!("cannot read config {}: {e}", path.display()),
        };
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }
}
