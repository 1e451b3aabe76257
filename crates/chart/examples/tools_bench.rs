//! How fast the agent's tools answer on one patient's stored record: each
//! tool is called with a fixed set of arguments (report retrieval with and
//! without kind and date filters, lab queries, structured record queries,
//! calculators reading stored labs), `rounds` times over, through
//! `RecordView::run` exactly as the agent calls it, and the p50 / p99 / max
//! per call are printed per tool. Single-threaded, the store on disk.
//!
//! ```sh
//! evident --db synthea.db ingest ../shared/data/synthea/sample-bulk-fhir-datasets-10-patients
//! cargo run --release -p evident-chart --example tools_bench -- synthea.db 79a66c97-6131-3213-f3c9-4606946ab056 20
//! ```

use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use evident_chart::{RecordView, ToolName};
use evident_store::Store;
use serde_json::{json, Value};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: tools_bench STORE.db PATIENT [ROUNDS]");
        std::process::exit(2);
    }
    let store = Store::open(Path::new(&args[1])).unwrap_or_else(|e| panic!("{}: {e}", args[1]));
    let patient = args[2].clone();
    let rounds: usize = args.get(3).map_or(20, |r| r.parse().expect("ROUNDS is a number"));
    let as_of = store
        .latest_document_date(&patient)
        .unwrap()
        .unwrap_or_else(|| panic!("patient {patient} has no dated document"));
    let documents = store.documents(&patient).unwrap().len();
    let store = Mutex::new(store);
    let view = RecordView::new(&store, patient.clone(), as_of);
    let labs = view.available_lab_concepts().unwrap();
    let lab_names: Vec<String> =
        if labs.is_empty() { vec!["Hemoglobin".into()] } else { labs.iter().take(4).cloned().collect() };
    println!(
        "patient {patient}: {documents} documents, {} lab concepts, reference date {as_of}, {rounds} rounds",
        labs.len()
    );

    let words = [
        "simvastatin",
        "hypertension",
        "metformin diabetes",
        "chest pain",
        "allergy",
        "colonoscopy",
        "emergency department",
        "pneumonia",
        "influenza vaccine",
        "blood pressure",
    ];
    let mut calls: Vec<(ToolName, &str, Value)> = Vec::new();
    for w in words {
        calls.push((ToolName::SearchReports, "search_reports (all)", json!({"query": w})));
        calls.push((ToolName::SearchReports, "search_reports (kind)", json!({"query": w, "kind": "progress_note"})));
        calls.push((
            ToolName::SearchReports,
            "search_reports (most_recent)",
            json!({"query": w, "scope": "most_recent"}),
        ));
        calls.push((
            ToolName::SearchReports,
            "search_reports (range, k 30)",
            json!({"query": w, "scope": "range", "since": "1980-01-01", "until": "1990-12-31", "k": 30}),
        ));
        calls.push((ToolName::QueryRecords, "query_records (query)", json!({"record": "medications", "query": w})));
    }
    for record in ["medications", "conditions", "procedures"] {
        calls.push((ToolName::QueryRecords, "query_records (all)", json!({"record": record})));
        calls.push((
            ToolName::QueryRecords,
            "query_records (most_recent)",
            json!({"record": record, "scope": "most_recent"}),
        ));
    }
    calls.push((ToolName::QueryLabs, "query_labs", json!({"concepts": lab_names})));
    calls.push((
        ToolName::QueryLabs,
        "query_labs (most_recent)",
        json!({"concepts": lab_names, "scope": "most_recent"}),
    ));
    calls.push((ToolName::Calculate, "calculate (iss, stored labs)", json!({"calculator": "iss"})));
    calls.push((
        ToolName::Calculate,
        "calculate (charlson, inputs)",
        json!({"calculator": "charlson", "inputs": {"diabetes_uncomplicated": true, "age_years": 70}}),
    ));

    let mut by_label: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut results: std::collections::BTreeMap<&str, usize> = Default::default();
    for _ in 0..rounds {
        for (tool, label, arguments) in &calls {
            let started = Instant::now();
            let out = view.run(*tool, arguments);
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            let found = match out {
                Ok(o) => o.evidence.len(),
                Err(e) => panic!("{label} {arguments}: {e}"),
            };
            by_label.entry(label).or_default().push(ms);
            *results.entry(label).or_default() += found;
        }
    }
    println!("{:<32} {:>6} {:>9} {:>9} {:>9} {:>11}", "tool call", "calls", "p50 ms", "p99 ms", "max ms", "items/call");
    let mut all: Vec<f64> = Vec::new();
    for (label, mut times) in by_label {
        times.sort_by(f64::total_cmp);
        all.extend(&times);
        println!(
            "{:<32} {:>6} {:>9.2} {:>9.2} {:>9.2} {:>11.1}",
            label,
            times.len(),
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            times.last().copied().unwrap_or(0.0),
            results[label] as f64 / times.len() as f64
        );
    }
    all.sort_by(f64::total_cmp);
    println!(
        "{:<32} {:>6} {:>9.2} {:>9.2} {:>9.2}",
        "all",
        all.len(),
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        all.last().copied().unwrap_or(0.0)
    );
}
