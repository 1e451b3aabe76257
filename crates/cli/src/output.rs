//! Printing results and errors, as text or JSON. A job's result is
//! printed through [`print`]: its `Display` as text, or its `Serialize`
//! form as pretty JSON with `--json`.

use std::fmt::Display;

use evident_app::AppError;
use serde::Serialize;

/// Prints `value` as JSON (`json`) or as its text.
pub fn print<T: Serialize + Display>(value: &T, json: bool) -> anyhow::Result<()> {
    if json {
        print_json(value)
    } else {
        print!("{value}");
        Ok(())
    }
}

/// Prints any serialisable value as pretty JSON.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Prints the error chain once, as `error: outer: inner`, or as a JSON
/// object on stdout when `--json` was given, with what to type to fix it
/// when the library's advice has a flag.
pub fn print_error(err: &anyhow::Error, json: bool) {
    let mut text = err.chain().map(|e| e.to_string()).collect::<Vec<_>>().join(": ");
    if let Some(hint) = flag_hint(err) {
        text.push_str("; ");
        text.push_str(hint);
    }
    if json {
        println!("{}", serde_json::json!({ "error": text }));
    } else {
        eprintln!("error: {text}");
    }
}

/// The command-line spelling of the advice an error gives in library terms.
fn flag_hint(err: &anyhow::Error) -> Option<&'static str> {
    let privacy = err.downcast_ref::<AppError>().is_some_and(AppError::is_privacy_refusal);
    privacy.then_some("pass --allow-remote if this is intended")
}
