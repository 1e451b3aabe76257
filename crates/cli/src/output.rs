//! Printing results and errors, as text or JSON.

use serde::Serialize;

/// Prints the error chain once, as `error: outer: inner`, or as a JSON
/// object on stdout when `--json` was given.
pub fn print_error(err: &anyhow::Error, json: bool) {
    let chain: Vec<String> = err.chain().map(|e| e.to_string()).collect();
    if json {
        println!("{}", serde_json::json!({ "error": chain.join(": ") }));
    } else {
        eprintln!("error: {}", chain.join(": "));
    }
}

/// Prints any serialisable value as pretty JSON.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
