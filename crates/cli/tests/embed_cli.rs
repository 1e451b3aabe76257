//! `evident embed`: computes the missing section vectors for one patient or
//! the whole store, and embeds nothing the second time. Needs
//! all-MiniLM-L6-v2 (`evident models pull minilm-l6`) and fails without it.

mod common;

use common::{repo_root, Sandbox};

#[test]
fn embed_is_idempotent_per_patient_and_for_all() {
    let sandbox = Sandbox::new();
    sandbox.run(&["ingest", repo_root().join("examples/records").to_str().unwrap()]).ok();
    let store = sandbox.store();
    let all = store.sections(&evident_store::SectionFilter::default()).unwrap().len();
    let p002 = store.sections(&evident_store::SectionFilter::patient("P002")).unwrap().len();
    drop(store);

    let first = sandbox.run(&["--json", "embed", "--patient", "P002"]).ok().json();
    assert_eq!(first["model"], "all-MiniLM-L6-v2");
    assert_eq!(first["embedded"], p002 as u64);
    let again = sandbox.run(&["--json", "embed", "--patient", "P002"]).ok().json();
    assert_eq!(again["embedded"], 0);
    assert_eq!(again["already_embedded"], p002 as u64);

    let rest = sandbox.run(&["--json", "embed", "--all"]).ok().json();
    assert_eq!(rest["embedded"], (all - p002) as u64);
    let text = sandbox.run(&["embed", "--all"]).ok().stdout();
    assert!(text.contains(&format!("embedded 0 section(s), {all} already had vectors")), "{text}");

    // Stored vectors are unit length and 384-dimensional.
    let vectors =
        sandbox.store().section_embeddings("all-MiniLM-L6-v2", &evident_store::SectionFilter::default()).unwrap();
    assert_eq!(vectors.len(), all);
    for (_, v) in vectors {
        assert_eq!(v.len(), 384);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
    }
}

#[test]
fn embed_needs_a_scope_and_a_known_patient() {
    let sandbox = Sandbox::new();
    sandbox.run(&["ingest", repo_root().join("examples/records").to_str().unwrap()]).ok();
    sandbox.run(&["embed"]).fails_with(2, "--patient");
    sandbox.run(&["embed", "--patient", "NOBODY"]).fails_with(2, "patient \"NOBODY\" is not in the store");
}
