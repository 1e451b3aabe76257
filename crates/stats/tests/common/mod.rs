//! Test helpers: run an R script with `Rscript` (which must be installed:
//! a missing R fails the test, it never skips it), parse the JSON it prints,
//! and compare numbers at a relative tolerance.
#![allow(dead_code)]

use std::process::Command;

use serde_json::Value;

/// The relative tolerance every comparison with R uses.
pub const REL_TOL: f64 = 1e-6;

/// Runs `script` (R code whose last act is `cat(jsonlite::toJSON(..., digits = NA))`)
/// and returns the parsed JSON. Scripts may `source()` files in tests/r.
pub fn r_json(script: &str) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("script.R");
    let r_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/r");
    let full = format!(
        "suppressPackageStartupMessages({{library(jsonlite); library(survival); library(MASS)}})\nR_DIR <- '{r_dir}'\nout <- function(x) cat(toJSON(x, dataframe = 'columns', digits = NA, auto_unbox = TRUE, na = 'string'))\n{script}\n"
    );
    std::fs::write(&path, full).unwrap();
    let output = Command::new("Rscript")
        .arg("--vanilla")
        .arg(&path)
        .output()
        .expect("Rscript must be installed (apt-get install r-base-core r-cran-survival r-cran-mass r-cran-matchit r-cran-proc r-cran-jsonlite)");
    assert!(output.status.success(), "Rscript failed: {}\n{}", String::from_utf8_lossy(&output.stderr), script);
    let text = String::from_utf8(output.stdout).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("R printed no JSON ({e}): {text}"))
}

/// A JSON number or array of numbers as f64s; null becomes NaN.
pub fn nums(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(a) => a.iter().map(num).collect(),
        other => vec![num(other)],
    }
}

pub fn num(v: &Value) -> f64 {
    match v {
        Value::Null => f64::NAN,
        Value::String(s) if s == "Inf" => f64::INFINITY,
        Value::String(s) if s == "-Inf" => f64::NEG_INFINITY,
        Value::String(s) if s == "NaN" || s == "NA" => f64::NAN,
        _ => v.as_f64().unwrap_or_else(|| panic!("not a number: {v}")),
    }
}

/// Asserts |a - b| <= REL_TOL * |b| (or both infinite alike, or both NaN).
/// Values that R reports as essentially zero (|b| < 1e-12) compare absolutely.
#[track_caller]
pub fn close(what: &str, ours: f64, r: f64) {
    if r.is_nan() {
        assert!(ours.is_nan(), "{what}: ours {ours}, R NA");
        return;
    }
    if r.is_infinite() {
        assert_eq!(ours, r, "{what}");
        return;
    }
    let err = (ours - r).abs();
    let ok = if r.abs() < 1e-12 { err < 1e-12 } else { err <= REL_TOL * r.abs() };
    assert!(ok, "{what}: ours {ours:.15e}, R {r:.15e}, relative error {:.3e}", err / r.abs());
}

#[track_caller]
pub fn close_all(what: &str, ours: &[f64], r: &[f64]) {
    assert_eq!(ours.len(), r.len(), "{what}: lengths differ (ours {}, R {})", ours.len(), r.len());
    for (i, (a, b)) in ours.iter().zip(r).enumerate() {
        close(&format!("{what}[{i}]"), *a, *b);
    }
}
