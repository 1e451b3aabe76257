//! `evident.toml`: the optional configuration file, read once when a
//! [`Session`](crate::Session) opens. Each section is validated by the
//! crate that owns it: `[llm]` by `evident-llm` ([`LlmConfig`]),
//! `[retrieval]` here ([`RetrievalConfig`]). A missing file means defaults;
//! an unknown section or key is refused with the file's name.

use std::path::{Path, PathBuf};

use evident_llm::LlmConfig;
use serde::Deserialize;

use crate::error::{AppError, Result};

/// The whole file, each section still untyped.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    /// `[llm]`: models, endpoints, prices, privacy.
    #[serde(default)]
    llm: Option<toml::Value>,
    /// `[retrieval]`: embedding model location and fusion weights.
    #[serde(default)]
    retrieval: Option<toml::Value>,
}

/// `[retrieval]`.
#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrievalConfig {
    /// Folder of the embedding model.
    pub model_dir: Option<PathBuf>,
    /// Default weight of the dense score in weighted fusion.
    pub alpha: Option<f64>,
}

/// The configuration, typed and validated.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The file it came from (which may not exist: then defaults).
    pub path: PathBuf,
    pub llm: LlmConfig,
    pub retrieval: RetrievalConfig,
}

impl Config {
    /// Reads and validates `path`; a missing file gives the defaults.
    pub fn load(path: &Path) -> Result<Config> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Config { path: path.to_path_buf(), ..Config::default() })
            }
            Err(e) => return Err(AppError::file(path, e)),
        };
        Config::parse(&text, path)
    }

    /// Parses the text of a configuration file; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        let bad = |e: &dyn std::fmt::Display| AppError::Setup(format!("{}: {e}", path.display()));
        let file: ConfigFile = toml::from_str(text).map_err(|e| bad(&e))?;
        let llm = match file.llm {
            None => LlmConfig::default(),
            Some(value) => {
                let value = serde_json::to_value(value).map_err(|e| bad(&format!("[llm]: {e}")))?;
                LlmConfig::from_value(Some(value)).map_err(|e| bad(&e))?
            }
        };
        let retrieval = match file.retrieval {
            None => RetrievalConfig::default(),
            Some(value) => value.try_into().map_err(|e| bad(&format!("[retrieval]: {e}")))?,
        };
        Ok(Config { path: path.to_path_buf(), llm, retrieval })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_sections_and_keys_are_refused_with_the_file_name() {
        let path = Path::new("conf/evident.toml");
        let err = Config::parse("[retreival]\nalpha = 0.3\n", path).unwrap_err().to_string();
        assert!(err.starts_with("conf/evident.toml: ") && err.contains("retreival"), "{err}");
        let err = Config::parse("[retrieval]\nalfa = 0.3\n", path).unwrap_err().to_string();
        assert!(err.contains("[retrieval]") && err.contains("alfa"), "{err}");
        let err = Config::parse("[llm]\nalow_remote = true\n", path).unwrap_err().to_string();
        assert!(err.contains("alow_remote"), "{err}");
    }

    #[test]
    fn sections_are_typed() {
        let config =
            Config::parse("[llm]\ncontext_size = 16384\n[retrieval]\nalpha = 0.25\n", Path::new("e.toml")).unwrap();
        assert_eq!(config.llm.context_size, 16384);
        assert_eq!(config.retrieval.alpha, Some(0.25));
        assert!(!config.llm.allow_remote);
    }

    #[test]
    fn a_missing_file_means_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::load(&dir.path().join("absent.toml")).unwrap();
        assert_eq!(config.llm, LlmConfig::default());
        assert_eq!(config.retrieval, RetrievalConfig::default());
    }
}
