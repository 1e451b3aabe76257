//! How fast checks decide: loads every patient's facts from a store, then
//! decides every reviewed check of a criteria set for every patient at the
//! patient's most recent dated document, and reports patient-criterion
//! decisions per second; then does the same over `replicas` copies of the
//! loaded facts (a synthetic population built by replicating the real
//! patients; the copies are references to the same facts in memory, so
//! they stay in cache and the figure is an upper bound for distinct
//! patients), single-threaded.
//!
//! ```sh
//! evident --db mimic.db ingest ../shared/data/mimic-iv-demo
//! cargo run --release -p evident-match --example checks_bench -- mimic.db criteria/mimic-iv-demo-checks.yaml 1000
//! ```

use std::path::Path;
use std::time::Instant;

use evident_match::checks::{evaluate, FactNeeds, PatientFacts};
use evident_match::decision::Decision;
use evident_match::CriteriaSet;
use evident_store::Store;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: checks_bench STORE.db CRITERIA.yaml [REPLICAS]");
        std::process::exit(2);
    }
    let store = Store::open(Path::new(&args[1])).unwrap_or_else(|e| panic!("{}: {e}", args[1]));
    let set = CriteriaSet::load(Path::new(&args[2])).unwrap_or_else(|e| panic!("{e}"));
    let replicas: usize = args.get(3).map_or(1000, |r| r.parse().expect("REPLICAS is a number"));
    let checks: Vec<_> = set.criteria.iter().filter_map(|c| c.reviewed_check()).collect();
    assert!(!checks.is_empty(), "the set has no reviewed checks");

    let started = Instant::now();
    let ids: Vec<String> = store.patients().unwrap().into_iter().map(|p| p.patient.id).collect();
    let all: Vec<PatientFacts> = ids.iter().map(|id| PatientFacts::load(&store, id).unwrap().unwrap()).collect();
    let load_all_s = started.elapsed().as_secs_f64();
    // What screening does: read only the labs and timeline kinds the checks name.
    let needs = FactNeeds::of(checks.iter());
    let started = Instant::now();
    let facts: Vec<PatientFacts> =
        ids.iter().map(|id| PatientFacts::load_needed(&store, id, &needs).unwrap().unwrap()).collect();
    let load_s = started.elapsed().as_secs_f64();
    let all_labs: usize = all.iter().map(|f| f.labs.len()).sum();
    let all_lines: usize = all.iter().map(|f| f.timeline.len()).sum();
    println!(
        "load all facts: {load_all_s:.3} s ({:.1} patients/s; {all_labs} lab values, {all_lines} timeline sentences)",
        all.len() as f64 / load_all_s
    );
    let labs: usize = facts.iter().map(|f| f.labs.len()).sum();
    let lines: usize = facts.iter().map(|f| f.timeline.len()).sum();

    let decide = |facts: &[&PatientFacts]| {
        let mut counts = [0usize; 3];
        for f in facts {
            let Some(date) = f.latest_document else { continue };
            for c in &checks {
                match evaluate(c, f, date).decision {
                    Decision::Met => counts[0] += 1,
                    Decision::NotMet => counts[1] += 1,
                    _ => counts[2] += 1,
                }
            }
        }
        counts
    };
    let started = Instant::now();
    let counts = decide(&facts.iter().collect::<Vec<_>>());
    let real_s = started.elapsed().as_secs_f64();
    let n = facts.len() * checks.len();
    println!(
        "store {}: {} patients ({labs} lab values, {lines} timeline sentences), {} checks",
        args[1],
        facts.len(),
        checks.len()
    );
    println!("load the facts the checks read: {load_s:.3} s ({:.1} patients/s)", facts.len() as f64 / load_s);
    println!(
        "decide: {n} decisions in {real_s:.3} s = {:.0} decisions/s (met {}, not met {}, not enough information {})",
        n as f64 / real_s,
        counts[0],
        counts[1],
        counts[2]
    );
    println!("load and decide: {:.0} decisions/s", n as f64 / (load_s + real_s));

    let population: Vec<&PatientFacts> = (0..replicas).flat_map(|_| facts.iter()).collect();
    let started = Instant::now();
    let replicated = decide(&population);
    let replicated_s = started.elapsed().as_secs_f64();
    let m = population.len() * checks.len();
    assert_eq!(replicated[0], counts[0] * replicas, "replicas decide as the originals do");
    println!(
        "decide, {} patients ({} replicas in memory): {m} decisions in {replicated_s:.2} s = {:.0} decisions/s",
        population.len(),
        replicas,
        m as f64 / replicated_s
    );
}
