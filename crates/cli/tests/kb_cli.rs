//! `evident kb index|search` through the binary on the shipped example
//! knowledge pack (knowledge/example): indexing is idempotent, search finds
//! the right definitions and quotes the indexed text, bad input gets errors
//! that name the file, and a patient store is refused as a knowledge base.

mod common;

use common::{repo_root, Sandbox};

fn pack() -> String {
    repo_root().join("knowledge/example").to_str().unwrap().to_string()
}

#[test]
fn index_then_search_the_example_pack() {
    let sandbox = Sandbox::new();
    let first = sandbox.run(&["--json", "kb", "index", &pack()]).ok().json();
    let inserted = first["inserted"].as_u64().unwrap();
    assert!((8..=15).contains(&inserted), "{first}");
    assert!(sandbox.path().join("knowledge.db").is_file(), "default --kb is ./knowledge.db");
    // Indexing again changes nothing.
    let again = sandbox.run(&["--json", "kb", "index", &pack()]).ok().json();
    assert_eq!((again["inserted"].as_u64(), again["unchanged"].as_u64()), (Some(0), Some(inserted)));

    let found = sandbox.run(&["--json", "kb", "search", "eGFR below 30", "-k", "2"]).ok().json();
    let hits = found["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[0]["document_id"], "kb:example/kidney-function-ckd-egfr.md");
    // The quoted text is the file's text at the span.
    let file = std::fs::read_to_string(repo_root().join("knowledge/example/kidney-function-ckd-egfr.md")).unwrap();
    let (start, end) = (hits[0]["start"].as_u64().unwrap() as usize, hits[0]["end"].as_u64().unwrap() as usize);
    assert_eq!(hits[0]["text"].as_str().unwrap(), &file[start..end]);

    let text = sandbox.run(&["kb", "search", "myocardial infarction troponin"]).ok().stdout();
    assert!(text.starts_with("1. kb:example/myocardial-infarction.md"), "{text}");
    assert!(text.contains("   | "), "the passage is quoted");
}

#[test]
fn an_explicit_kb_file_and_no_match() {
    let sandbox = Sandbox::new();
    sandbox.run(&["kb", "index", &pack(), "--kb", "packs/clinical.db"]).fails_with(2, "packs/clinical.db");
    std::fs::create_dir(sandbox.path().join("packs")).unwrap();
    let out = sandbox.run(&["kb", "index", &pack(), "--kb", "packs/clinical.db"]).ok().stdout();
    assert!(out.contains("packs/clinical.db has"), "{out}");
    sandbox
        .run(&["kb", "search", "zzzqqq", "--kb", "packs/clinical.db"])
        .fails_with(1, "nothing in packs/clinical.db matches");
}

#[test]
fn bad_input_is_reported_with_the_file_and_nothing_is_written() {
    let sandbox = Sandbox::new();
    sandbox.write("notes/empty.md", "\n");
    sandbox.write("notes/table.csv", "a,b\n");
    let run = sandbox.run(&["kb", "index", &pack(), "notes/empty.md", "notes/table.csv", "nope.txt"]);
    let run = run.fails_with(2, "3 problem(s); nothing was indexed");
    let err = run.stderr();
    for needle in
        ["notes/empty.md: the file is empty", "notes/table.csv: not a .md or .txt file", "nope.txt: no such file"]
    {
        assert!(err.contains(needle), "{needle} in {err}");
    }
    // An empty folder is an error too.
    std::fs::create_dir(sandbox.path().join("blank")).unwrap();
    sandbox.run(&["kb", "index", "blank"]).fails_with(2, "blank: the folder holds no .md or .txt files");
    sandbox.run(&["kb", "search", "HbA1c"]).fails_with(2, "holds no knowledge base");
}

#[test]
fn searching_a_missing_or_patient_store_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.run(&["kb", "search", "HbA1c", "--kb", "missing.db"]).fails_with(2, "missing.db: no such knowledge base");
    sandbox.run(&["ingest", repo_root().join("examples/records").to_str().unwrap()]).ok();
    sandbox.run(&["kb", "search", "HbA1c", "--kb", "evident.db"]).fails_with(2, "evident.db: holds no knowledge base");
    sandbox.write("garbage.db", "this is not sqlite");
    sandbox.run(&["kb", "search", "HbA1c", "--kb", "garbage.db"]).fails_with(2, "garbage.db");
    sandbox.run(&["kb", "search", "HbA1c", "-k", "0"]).fails_with(2, "asks for no passages");
}
