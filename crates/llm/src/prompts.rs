//! Prompt templates as files (minijinja). Each crate ships its templates
//! compiled in (`include_str!` of `prompts/*.prompt.md`); a user directory,
//! when given, overrides any template of the same name, so prompts can be
//! tuned without rebuilding.

use std::path::{Path, PathBuf};

/// The templates of this crate.
pub const BUILTIN_PROMPTS: &[(&str, &str)] = &[
    ("repair.prompt.md", include_str!("../prompts/repair.prompt.md")),
    ("repair_cut_off.prompt.md", include_str!("../prompts/repair_cut_off.prompt.md")),
    ("json_answer.prompt.md", include_str!("../prompts/json_answer.prompt.md")),
];

/// A template could not be found, parsed or rendered.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("prompt template {name}: {message}")]
    Template { name: String, message: String },
}

/// A set of named templates: built-ins, overridden by files in a directory.
pub struct Prompts {
    env: minijinja::Environment<'static>,
    override_dir: Option<PathBuf>,
}

impl Prompts {
    /// `builtins` are (file name, source) pairs; a file of the same name in
    /// `override_dir` wins over the built-in.
    pub fn new(builtins: &[(&'static str, &'static str)], override_dir: Option<&Path>) -> Self {
        let mut env = minijinja::Environment::new();
        env.set_keep_trailing_newline(true);
        let builtins: Vec<(String, String)> = builtins.iter().map(|(n, s)| (n.to_string(), s.to_string())).collect();
        let dir = override_dir.map(Path::to_path_buf);
        let loader_dir = dir.clone();
        env.set_loader(move |name| {
            if let Some(dir) = &loader_dir {
                let path = dir.join(name);
                match std::fs::read_to_string(&path) {
                    Ok(text) => return Ok(Some(text)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(minijinja::Error::new(
                            minijinja::ErrorKind::TemplateNotFound,
                            format!("cannot read {}: {e}", path.display()),
                        ))
                    }
                }
            }
            Ok(builtins.iter().find(|(n, _)| n == name).map(|(_, s)| s.clone()))
        });
        Prompts { env, override_dir: dir }
    }

    /// This crate's templates, overridable from `override_dir`.
    pub fn builtin(override_dir: Option<&Path>) -> Self {
        Prompts::new(BUILTIN_PROMPTS, override_dir)
    }

    pub fn override_dir(&self) -> Option<&Path> {
        self.override_dir.as_deref()
    }

    /// Renders template `name` with `context` (any serialisable value).
    pub fn render<S: serde::Serialize>(&self, name: &str, context: S) -> Result<String, PromptError> {
        let err = |e: minijinja::Error| PromptError::Template { name: name.to_string(), message: format!("{e:#}") };
        let template = self.env.get_template(name).map_err(err)?;
        template.render(context).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> String {
        serde_json::to_string_pretty(&json!({
            "type": "object",
            "properties": {"eligible": {"type": "boolean"}},
            "required": ["eligible"]
        }))
        .unwrap()
    }

    #[test]
    fn repair_prompt_snapshot() {
        let prompts = Prompts::builtin(None);
        let text = prompts
            .render("repair.prompt.md", json!({"errors": ["\"eligible\" is a required property"], "schema": schema()}))
            .unwrap();
        insta::assert_snapshot!(text);
    }

    #[test]
    fn repair_cut_off_prompt_snapshot() {
        let text = Prompts::builtin(None)
            .render("repair_cut_off.prompt.md", json!({"completion_tokens": 512, "attempt": 2, "attempts": 3}))
            .unwrap();
        insta::assert_snapshot!(text);
    }

    #[test]
    fn json_answer_prompt_snapshot() {
        let prompts = Prompts::builtin(None);
        let text = prompts
            .render("json_answer.prompt.md", json!({"question": "Is the patient older than 65?", "schema": schema()}))
            .unwrap();
        insta::assert_snapshot!(text);
    }

    #[test]
    fn user_directory_overrides_builtin() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("repair.prompt.md"), "fix: {{ errors | length }}").unwrap();
        let prompts = Prompts::builtin(Some(dir.path()));
        let text = prompts.render("repair.prompt.md", json!({"errors": ["a", "b"]})).unwrap();
        assert_eq!(text, "fix: 2");
        // Templates not in the directory still come from the built-ins.
        let other = prompts.render("json_answer.prompt.md", json!({"question": "q", "schema": "{}"})).unwrap();
        assert!(other.starts_with("q\n"));
    }

    #[test]
    fn an_override_that_cannot_be_read_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("repair.prompt.md");
        // Latin-1 "é": the file exists but is not UTF-8 text.
        std::fs::write(&path, b"r\xe9parer {{ errors }}").unwrap();
        let err = Prompts::builtin(Some(dir.path())).render("repair.prompt.md", json!({"errors": []})).unwrap_err();
        let message = err.to_string();
        assert!(message.contains(&format!("cannot read {}", path.display())), "{message}");
    }

    #[test]
    fn unknown_template_is_an_error_naming_it() {
        let prompts = Prompts::builtin(None);
        let err = prompts.render("nope.prompt.md", json!({})).unwrap_err();
        assert!(err.to_string().contains("nope.prompt.md"));
    }
}
