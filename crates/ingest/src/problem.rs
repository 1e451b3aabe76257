//! A problem with one input record: where it is, what is wrong, and what
//! the user can do about it.

use std::path::Path;

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    pub file: String,
    /// `line 418`, `line 3, $.content[0].attachment.data`, or empty for the whole file.
    pub place: String,
    pub field: Option<String>,
    pub message: String,
    pub hint: String,
}

impl Problem {
    pub fn new(
        file: &Path,
        place: impl Into<String>,
        field: Option<&str>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Problem {
        Problem {
            file: file.display().to_string(),
            place: place.into(),
            field: field.map(String::from),
            message: message.into(),
            hint: hint.into(),
        }
    }
}

impl std::fmt::Display for Problem {
    /// `file:place: field = message; hint`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file)?;
        if !self.place.is_empty() {
            write!(f, ":{}", self.place)?;
        }
        write!(f, ": ")?;
        if let Some(field) = &self.field {
            write!(f, "{field} ")?;
        }
        write!(f, "{}", self.message)?;
        if !self.hint.is_empty() {
            write!(f, "; {}", self.hint)?;
        }
        Ok(())
    }
}

/// Reads a whole input file as UTF-8 text, or says why it cannot.
pub(crate) fn read_text(path: &Path) -> Result<String, Problem> {
    std::fs::read_to_string(path).map_err(|e| {
        Problem::new(
            path,
            "",
            None,
            format!("cannot read as UTF-8 text: {e}"),
            "check the path and the file's encoding",
        )
    })
}
