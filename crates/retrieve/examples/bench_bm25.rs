//! BM25 query-latency benchmark (not a test). Builds a store from the real
//! Synthea notes (base64 DocumentReference attachments, sectioned by
//! `evident_model::text::split_sections`), grows it by replicating those
//! documents under new ids until it holds at least each requested number of
//! sections, and times `Store::search_bm25` for a fixed query list at every
//! size: top 10 over the whole corpus (FTS5), and top 10 within one patient
//! (the per-patient path the product uses; every query is run for each of
//! the 13 round-0 patients, whose records are copies of the base patients'
//! at every size); then the same through the in-memory `Bm25Index`, built
//! once over the whole corpus and once per probe patient, both the ranking
//! alone (what rank_bm25's `get_scores` + top 10 does) and with the
//! winners' sections read from SQLite. Writes the base sections with their patient to
//! `--corpus-out` so `scripts/bench_bm25.py` can time rank_bm25 on the same
//! texts. Prints one JSON object on stdout.
//!
//! `--notes` defaults to the shared Synthea sample
//! (`evident_testdata::synthea_sample_notes_file`).
//!
//! cargo run --release -p evident-retrieve --example bench_bm25 -- \
//!     --db /tmp/bench_bm25.db --sizes 10000,100000,1000000 --corpus-out /tmp/bench_sections.jsonl

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use evident_model::text::split_sections;
use evident_model::{DocKind, Document, Patient};
use evident_store::{SectionFilter, Store};

/// Queries of the kind a chart reviewer or an agent sends.
pub const QUERIES: &[&str] = &[
    "chest pain",
    "shortness of breath",
    "hypertension",
    "diabetes mellitus type 2",
    "hemoglobin a1c",
    "metformin",
    "chronic kidney disease",
    "acute bronchitis",
    "viral sinusitis",
    "smoking history",
    "lisinopril 10 mg oral tablet",
    "chemotherapy",
    "influenza vaccine",
    "allergy to penicillin",
    "prediabetes",
    "anemia",
    "myocardial infarction",
    "obesity body mass index",
    "urinary tract infection",
    "pregnancy",
    "fracture of forearm",
    "depression screening",
    "asthma inhaler",
    "sprain of ankle",
    "medication review due",
    "stress",
    "full-time employment",
    "no known allergies",
    "acetaminophen 325 mg",
    "colonoscopy",
];

struct Args {
    notes: PathBuf,
    db: PathBuf,
    sizes: Vec<usize>,
    corpus_out: Option<PathBuf>,
    repeats: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        notes: evident_testdata::synthea_sample_notes_file(),
        db: PathBuf::from("/tmp/evident_bench_bm25.db"),
        sizes: vec![10_000, 100_000, 1_000_000],
        corpus_out: None,
        repeats: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--notes" => args.notes = value().into(),
            "--db" => args.db = value().into(),
            "--sizes" => args.sizes = value().split(',').map(|s| s.parse().expect("--sizes: numbers")).collect(),
            "--corpus-out" => args.corpus_out = Some(value().into()),
            "--repeats" => args.repeats = value().parse().expect("--repeats: a number"),
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

/// (patient id, note text) for every base64 text attachment.
fn read_notes(path: &std::path::Path) -> Vec<(String, String)> {
    evident_testdata::synthea_notes(path).into_iter().map(|note| (note.patient_id, note.text)).collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn summarise(mut ms: Vec<f64>) -> serde_json::Value {
    ms.sort_by(f64::total_cmp);
    serde_json::json!({
        "queries": ms.len(),
        "p50_ms": percentile(&ms, 50.0),
        "p99_ms": percentile(&ms, 99.0),
        "mean_ms": ms.iter().sum::<f64>() / ms.len() as f64,
        "max_ms": ms.last().copied().unwrap_or(0.0),
    })
}

fn main() {
    let args = parse_args();
    let notes = read_notes(&args.notes);
    let sectioned: Vec<(String, String, Vec<evident_model::SectionSpan>)> = notes
        .into_iter()
        .map(|(p, t)| {
            let s = split_sections(&t);
            (p, t, s)
        })
        .collect();
    let base_sections: usize = sectioned.iter().map(|(_, _, s)| s.len()).sum();
    eprintln!("{} notes, {} base sections", sectioned.len(), base_sections);
    if let Some(out) = &args.corpus_out {
        let mut f = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
        for (patient, text, sections) in &sectioned {
            for s in sections {
                let row = serde_json::json!({ "patient": patient, "text": &text[s.start..s.end] });
                writeln!(f, "{row}").unwrap();
            }
        }
    }

    let _ = std::fs::remove_file(&args.db);
    let _ = std::fs::remove_file(args.db.with_extension("db-wal"));
    let _ = std::fs::remove_file(args.db.with_extension("db-shm"));
    let mut store = Store::open(&args.db).unwrap();
    let mut stored_sections = 0usize;
    let mut round = 0usize;
    let mut results = Vec::new();
    let mut probe_patients: Vec<String> = sectioned.iter().map(|(p, _, _)| format!("r0-{p}")).collect();
    probe_patients.sort();
    probe_patients.dedup();
    for &target in &args.sizes {
        let started = Instant::now();
        // Whole rounds of the base notes; the last round stops at the target.
        'grow: while stored_sections < target {
            let w = store.writer().unwrap();
            let mut seen = std::collections::HashSet::new();
            for (i, (patient, text, sections)) in sectioned.iter().enumerate() {
                let pid = format!("r{round}-{patient}");
                if seen.insert(pid.clone()) {
                    w.upsert_patient(&Patient {
                        id: pid.clone(),
                        source: "bench".into(),
                        birth_date: None,
                        sex: None,
                        display_name: None,
                    })
                    .unwrap();
                }
                let id = format!("r{round}-n{i}");
                let doc = Document {
                    id: id.clone(),
                    patient_id: pid,
                    kind: DocKind::ProgressNote,
                    date: chrono::NaiveDate::from_ymd_opt(2000 + (i % 20) as i32, 1 + (i % 12) as u32, 1)
                        .and_then(|d| d.and_hms_opt(0, 0, 0)),
                    title: id.clone(),
                    source: "bench".into(),
                    source_id: id,
                    text: text.clone(),
                };
                w.put_document(&doc, sections, &[]).unwrap();
                stored_sections += sections.len();
                if stored_sections >= target {
                    w.commit().unwrap();
                    round += 1;
                    break 'grow;
                }
            }
            w.commit().unwrap();
            round += 1;
        }
        let build_s = started.elapsed().as_secs_f64();
        let all = SectionFilter::default();
        let patients: Vec<SectionFilter> = probe_patients.iter().map(|p| SectionFilter::patient(p.clone())).collect();
        // Warm the page cache once, then time every query `repeats` times.
        for q in QUERIES {
            store.search_bm25(q, &all, 10).unwrap();
            for one in &patients {
                store.search_bm25(q, one, 10).unwrap();
            }
        }
        // The in-memory index: built once per corpus (and once per probe
        // patient), as rank_bm25 builds its index once.
        let t = Instant::now();
        let index_all = store.bm25_index(&all).unwrap();
        let index_build_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let patient_indexes: Vec<_> = patients.iter().map(|f| store.bm25_index(f).unwrap()).collect();
        let patient_index_build_s = t.elapsed().as_secs_f64();
        let mut index_rank_ms = Vec::new();
        let mut index_search_ms = Vec::new();
        let mut patient_index_rank_ms = Vec::new();
        let mut patient_index_search_ms = Vec::new();
        for q in QUERIES {
            store.search_bm25_index(&index_all, q, 10).unwrap();
        }
        for _ in 0..args.repeats {
            for q in QUERIES {
                let t = Instant::now();
                let ranked = store.rank_bm25_index(&index_all, q, 10).unwrap();
                index_rank_ms.push(t.elapsed().as_secs_f64() * 1e3);
                let t = Instant::now();
                let found = store.search_bm25_index(&index_all, q, 10).unwrap();
                index_search_ms.push(t.elapsed().as_secs_f64() * 1e3);
                assert_eq!(ranked.len(), found.len());
                for index in &patient_indexes {
                    let t = Instant::now();
                    store.rank_bm25_index(index, q, 10).unwrap();
                    patient_index_rank_ms.push(t.elapsed().as_secs_f64() * 1e3);
                    let t = Instant::now();
                    store.search_bm25_index(index, q, 10).unwrap();
                    patient_index_search_ms.push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
        let mut corpus_ms = Vec::new();
        let mut patient_ms = Vec::new();
        let mut by_patient: Vec<Vec<f64>> = vec![Vec::new(); patients.len()];
        let mut hits = 0usize;
        let mut patient_hits = 0usize;
        for _ in 0..args.repeats {
            for q in QUERIES {
                let t = Instant::now();
                hits += store.search_bm25(q, &all, 10).unwrap().len();
                corpus_ms.push(t.elapsed().as_secs_f64() * 1e3);
                for (i, one) in patients.iter().enumerate() {
                    let t = Instant::now();
                    patient_hits += store.search_bm25(q, one, 10).unwrap().len();
                    let ms = t.elapsed().as_secs_f64() * 1e3;
                    patient_ms.push(ms);
                    by_patient[i].push(ms);
                }
            }
        }
        let row = serde_json::json!({
            "sections": stored_sections,
            "documents": round * sectioned.len(),
            "build_seconds": build_s,
            "whole_corpus_top10": summarise(corpus_ms),
            "index": {
                "build_seconds": index_build_s,
                "postings": index_all.postings(),
                "patient_indexes_build_seconds": patient_index_build_s,
                "whole_corpus_rank_top10": summarise(index_rank_ms),
                "whole_corpus_search_top10": summarise(index_search_ms),
                "one_patient_rank_top10": summarise(patient_index_rank_ms),
                "one_patient_search_top10": summarise(patient_index_search_ms),
            },
            "one_patient_top10": summarise(patient_ms),
            "one_patient_top10_by_patient": probe_patients
                .iter()
                .zip(by_patient)
                .map(|(p, ms)| {
                    let sections = store.sections(&SectionFilter::patient(p.clone())).unwrap().len();
                    serde_json::json!({ "patient": p, "sections": sections, "top10": summarise(ms) })
                })
                .collect::<Vec<_>>(),
            "mean_hits": hits as f64 / (args.repeats * QUERIES.len()) as f64,
            "mean_patient_hits": patient_hits as f64 / (args.repeats * QUERIES.len() * patients.len()) as f64,
        });
        eprintln!("{row}");
        results.push(row);
    }
    let db_bytes = std::fs::metadata(&args.db).map(|m| m.len()).unwrap_or(0);
    println!(
        "{}",
        serde_json::json!({
            "notes": sectioned.len(),
            "base_sections": base_sections,
            "queries": QUERIES,
            "probe_patients": probe_patients.iter().map(|p| p.trim_start_matches("r0-")).collect::<Vec<_>>(),
            "repeats": args.repeats,
            "db_bytes": db_bytes,
            "sizes": results,
        })
    );
}
