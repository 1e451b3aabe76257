//! `evident eval chart` end to end on the embedded model: one Synthea R4
//! patient ingested, a two-question bank taken from the committed
//! development bank, the LLM baseline (one call per question, the
//! cheapest method); every answer is stored with empty review fields and
//! scored with the build that made it, results.json and the printed table
//! agree, `--skip` answers the later questions alone, and the same
//! command again resumes without repeating or duplicating an answer.

mod common;

use common::{repo_root, shared_data, Sandbox};

/// Ingests the Synthea R4 bundle of the patient a bank line asks about.
fn ingest_patient_of(sb: &Sandbox, line: &str) {
    let patient = serde_json::from_str::<serde_json::Value>(line).unwrap()["patient"].as_str().unwrap().to_string();
    let bundle = std::fs::read_dir(shared_data().join("synthea/generated-sample-data-R4"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::read_to_string(p).unwrap().contains(&format!("\"id\": \"{patient}\"")))
        .expect("the bank's first patient has a bundle");
    sb.run(&["ingest", bundle.to_str().unwrap()]).ok();
}

#[test]
fn a_tiny_bank_is_answered_scored_and_resumed() {
    let sb = Sandbox::new();
    let committed = std::fs::read_to_string(repo_root().join("examples/chart/bank/dev.jsonl")).unwrap();
    let lines: Vec<&str> = committed.lines().take(2).collect();
    ingest_patient_of(&sb, lines[0]);
    sb.write("bank.jsonl", &(lines.join("\n") + "\n"));
    let args =
        ["eval", "chart", "--questions", "bank.jsonl", "--method", "baseline", "--out", "out", "--resamples", "200"];
    // The second question alone first (`--skip 1`), then the whole bank
    // resumes from it and answers only the first.
    let skipped = sb
        .run(&["--json"].iter().chain(args.iter()).chain(["--skip", "1"].iter()).copied().collect::<Vec<_>>())
        .ok()
        .json();
    assert_eq!(skipped["new_answers"], 1, "{skipped}");
    let second = serde_json::from_str::<serde_json::Value>(lines[1]).unwrap()["id"].clone();
    let stored = std::fs::read_to_string(sb.path().join("out/answers.jsonl")).unwrap();
    assert_eq!(serde_json::from_str::<serde_json::Value>(stored.trim()).unwrap()["question_id"], second, "{stored}");
    let run = sb.run(&args).ok();
    assert!(run.stdout().contains("| baseline | 2 | 1 |"), "{}", run.stdout());
    let answers = std::fs::read_to_string(sb.path().join("out/answers.jsonl")).unwrap();
    assert_eq!(answers.lines().count(), 2);
    for line in answers.lines() {
        let a: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(a["method"], "baseline");
        assert_eq!(a["review"]["error_category"], serde_json::Value::Null);
        assert_eq!(a["review"]["citation_sufficiency"], serde_json::Value::Null);
        let score = a["score"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&score));
        assert!(a["status"] == "answered" || a["status"] == "pipeline_failure", "{a}");
        assert!(a["calls"].as_u64().unwrap() >= 1, "{a}");
        assert!(!a["model_run"].as_str().unwrap().is_empty());
        // The build that answered: 12 hex digits of the executable's hash.
        let build = a["build"].as_str().unwrap();
        assert!(build.len() == 12 && build.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
    }
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join("out/results.json")).unwrap()).unwrap();
    assert_eq!(results["questions"], 2);
    assert_eq!(results["methods"][0]["answers"], 2);
    assert_eq!(results["methods"][0]["builds"].as_object().unwrap().len(), 1, "one build: {results}");
    // An index of both answers, each linked to its own page and JSON.
    let index = std::fs::read_to_string(sb.path().join("out/index.html")).unwrap();
    for line in answers.lines() {
        let a: serde_json::Value = serde_json::from_str(line).unwrap();
        let dir = format!("pages/{}-baseline-r1", a["question_id"].as_str().unwrap());
        assert!(index.contains(&format!("<a href=\"{dir}/answer.html\">")), "{index}");
        let page = std::fs::read_to_string(sb.path().join("out").join(&dir).join("answer.html")).unwrap();
        assert!(page.contains("<!DOCTYPE html>"), "{page}");
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(sb.path().join("out").join(&dir).join("answer.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(json["answer"], a["answer"], "{json}");
    }
    // Again: nothing new, nothing duplicated.
    let again = sb.run(&["--json"].iter().chain(args.iter()).copied().collect::<Vec<_>>()).ok().json();
    assert_eq!(again["new_answers"], 0);
    assert_eq!(again["stored_answers"], 2);
    assert_eq!(std::fs::read_to_string(sb.path().join("out/answers.jsonl")).unwrap(), answers);
}

/// `--concurrency 3` with three slots (`[llm] parallel = 3`): the three
/// questions are answered at once, by one loaded model whose slots copy
/// the prompt they share; each is stored once.
#[test]
fn questions_are_answered_at_once_by_one_model() {
    let sb = Sandbox::new();
    let committed = std::fs::read_to_string(repo_root().join("examples/chart/bank/dev.jsonl")).unwrap();
    let lines: Vec<&str> = committed.lines().take(3).collect();
    let patient_of = |line: &str| serde_json::from_str::<serde_json::Value>(line).unwrap()["patient"].clone();
    assert!(lines.iter().all(|l| patient_of(l) == patient_of(lines[0])), "one patient's questions");
    ingest_patient_of(&sb, lines[0]);
    sb.write("bank.jsonl", &(lines.join("\n") + "\n"));
    sb.write("evident.toml", "[llm]\nparallel = 3\n");
    let args = [
        "--config",
        "evident.toml",
        "--json",
        "eval",
        "chart",
        "--questions",
        "bank.jsonl",
        "--method",
        "baseline",
        "--out",
        "out",
        "--resamples",
        "200",
        "--concurrency",
        "3",
    ];
    let run = sb.run(&args).ok().json();
    assert_eq!(run["new_answers"], 3, "{run}");
    let answers = std::fs::read_to_string(sb.path().join("out/answers.jsonl")).unwrap();
    let mut ids: Vec<String> = answers
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["question_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "{answers}");
    // One model for all three: the later prompts start from the first's
    // shared part (a model loaded per question would reuse nothing).
    let reused: u64 = answers
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["reused_prompt_tokens"].as_u64().unwrap())
        .sum();
    assert!(reused > 0, "{answers}");
    // The questions' model runs overlap in time.
    let runs = sb.store().model_runs().unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    let overlap = runs.iter().enumerate().any(|(i, a)| {
        runs[i + 1..].iter().any(|b| {
            let (a_end, b_end) = (a.finished_at.clone().unwrap(), b.finished_at.clone().unwrap());
            a.started_at < b_end && b.started_at < a_end
        })
    });
    assert!(overlap, "{runs:?}");
}
