//! `evident eval` as a user runs it: zero-shot ICAN on one annotated
//! TrialGPT patient with the embedded model (metrics beside GPT-4's on the
//! same rows, trial-level comparison, usage; a second run resumes without
//! model calls; a baseline strategy gives a paired difference), and the
//! n2c2 2018 metric on small files in the challenge's format that the team
//! wrote, both from given predictions (hand-computed F1s) and by screening
//! with Evident.

mod common;

use common::{shared_data, Sandbox};

const STARS: &str =
    "****************************************************************************************************";

fn n2c2_file(notes: &[(&str, &str)], tags: &[(&str, &str)]) -> String {
    let text: Vec<String> = notes.iter().map(|(date, body)| format!("\n\nRecord date: {date}\n\n{body}\n\n")).collect();
    let tags: String = tags.iter().map(|(k, v)| format!("<{k} met=\"{v}\" />\n")).collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n<PatientMatching>\n<TEXT><![CDATA[{}]]></TEXT>\n<TAGS>\n{tags}</TAGS>\n</PatientMatching>\n",
        text.join(STARS)
    )
}

#[test]
fn trialgpt_ican_on_one_patient_scores_against_physicians_and_resumes() {
    let sb = Sandbox::new();
    let annotations = shared_data().join("trialgpt/criterion_annotations_dev.json");
    let args = [
        "--json",
        "eval",
        "trialgpt",
        "--annotations",
        annotations.to_str().unwrap(),
        "--topics",
        "sigir-20143",
        "--strategy",
        "ican",
        "--out",
        "eval",
    ];
    let first = sb.run(&args).ok().json();
    assert_eq!(first["rows"], 6, "sigir-20143 has 6 annotated rows: {first}");
    let ours = &first["method_row"]["metrics"];
    assert_eq!(ours["rows"], 6);
    let accuracy = ours["accuracy"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&accuracy));
    assert_eq!(first["gpt4_row"]["metrics"]["rows"], 6, "GPT-4 is scored on the same rows");
    assert!(first["usage"]["model_calls"].as_u64().unwrap() >= 6, "{}", first["usage"]);
    assert_eq!(first["pairs"], 2, "sigir-20143 is annotated against two trials");
    assert_eq!(first["trial_level"]["method"]["pairs"], 2, "both pairs have a SIGIR relevance label");
    let md = std::fs::read_to_string(sb.path().join("eval/eval.md")).unwrap();
    assert!(md.contains("| Evident ican | 6 |") && md.contains("| GPT-4 (same rows) | 6 |"), "{md}");

    // Usage is the sum of the model runs that made the pairs' decisions,
    // one per pair.
    let runs_of = |out: &serde_json::Value| -> Vec<String> {
        out["model_runs"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect()
    };
    assert_eq!(runs_of(&first).len(), 2, "one model run per pair: {}", first["model_runs"]);
    let calls_in = |runs: &[String]| -> usize { runs.iter().map(|r| sb.store().model_calls(r).unwrap().len()).sum() };
    assert_eq!(calls_in(&runs_of(&first)) as u64, first["usage"]["calls"].as_u64().unwrap());
    let all_calls = || -> u64 { sb.store().model_runs().unwrap().iter().map(|r| r.calls).sum() };
    let calls_before = all_calls();
    let second = sb.run(&args).ok().json();
    assert_eq!(second["method_row"], first["method_row"], "a rerun reads the stored decisions");
    assert_eq!(all_calls(), calls_before, "a finished evaluation makes no model call when run again");
    assert_eq!(second["usage"]["calls"], first["usage"]["calls"], "and reports what the decisions cost");

    // Another patient screened alongside does not add to this patient's
    // usage when it is evaluated alone again.
    let both = ["--json", "eval", "trialgpt", "--annotations", annotations.to_str().unwrap()];
    let both: Vec<&str> =
        both.into_iter().chain(["--topics", "sigir-20143,sigir-20155", "--strategy", "ican"]).collect();
    let wider = sb.run(&both).ok().json();
    assert!(wider["usage"]["calls"].as_u64() > first["usage"]["calls"].as_u64(), "{}", wider["usage"]);
    let alone = sb.run(&args).ok().json();
    assert_eq!(runs_of(&alone), runs_of(&first));
    for field in ["calls", "prompt_tokens", "completion_tokens"] {
        assert_eq!(alone["usage"][field], first["usage"][field], "{field}: {}", alone["usage"]);
    }

    // Against a baseline: ACAN runs too (one call per note), and the
    // difference ICAN - ACAN is reported with a paired interval.
    let with_baseline: Vec<&str> = args.iter().copied().chain(["--baseline", "acan"]).collect();
    let third = sb.run(&with_baseline).ok().json();
    assert_eq!(third["method_row"], first["method_row"], "the method's own row is unchanged");
    let base = &third["baseline"];
    assert_eq!(base["method"], "acan");
    assert_eq!(base["row"]["metrics"]["rows"], 6, "the baseline is scored on the same rows");
    let difference = &base["difference"]["accuracy"];
    let expected = accuracy - base["row"]["metrics"]["accuracy"].as_f64().unwrap();
    assert!((difference["estimate"].as_f64().unwrap() - expected).abs() < 1e-12, "{difference}");
    let (low, high) = (difference["low"].as_f64().unwrap(), difference["high"].as_f64().unwrap());
    assert!(low <= expected && expected <= high, "{difference}");
    let md = std::fs::read_to_string(sb.path().join("eval/eval.md")).unwrap();
    assert!(md.contains("## ican against acan on the same rows") && md.contains("| Evident acan | 6 |"), "{md}");
    // Against itself the difference is exactly zero in every replicate.
    let same: Vec<&str> = args.iter().copied().chain(["--baseline", "ican"]).collect();
    let fourth = sb.run(&same).ok().json();
    assert_eq!(fourth["baseline"]["difference"]["accuracy"]["high"], 0.0, "{}", fourth["baseline"]);
    assert_eq!(fourth["baseline"]["difference"]["accuracy"]["low"], 0.0, "{}", fourth["baseline"]);
}

#[test]
fn n2c2_metric_from_given_predictions_matches_hand_computation() {
    let sb = Sandbox::new();
    let note = [("2085-03-14", "HbA1c 7.2. No drug use.")];
    sb.write("gold/101.xml", &n2c2_file(&note, &[("HBA1C", "met"), ("DRUG-ABUSE", "met")]));
    sb.write("gold/102.xml", &n2c2_file(&note, &[("HBA1C", "not met"), ("DRUG-ABUSE", "not met")]));
    sb.write("pred/101.xml", &n2c2_file(&note, &[("HBA1C", "met"), ("DRUG-ABUSE", "not met")]));
    sb.write("pred/102.xml", &n2c2_file(&note, &[("HBA1C", "met"), ("DRUG-ABUSE", "not met")]));
    let out = sb.run(&["--json", "eval", "n2c2", "gold", "--predicted", "pred"]).ok().json();
    let m = &out["metrics"];
    // HBA1C: met P 1/2 R 1 F1 2/3; not met: nothing predicted, F1 0.
    // DRUG-ABUSE: met: nothing predicted, F1 0; not met P 1/2 R 1 F1 2/3.
    let close = |v: &serde_json::Value, x: f64| (v.as_f64().unwrap() - x).abs() < 1e-12;
    assert!(close(&m["per_criterion"]["HBA1C"]["f1_met"], 2.0 / 3.0), "{m}");
    assert!(close(&m["per_criterion"]["HBA1C"]["f1_not_met"], 0.0));
    assert!(close(&m["per_criterion"]["DRUG-ABUSE"]["f1_not_met"], 2.0 / 3.0));
    // Pooled: met TP 1, predicted 2, gold 2 -> F1 1/2; not met TP 1,
    // predicted 2, gold 2 -> 1/2. Micro = 1/2; macro = mean(1/3, 1/3).
    assert!(close(&m["overall_micro_f1"], 0.5));
    assert!(close(&m["overall_macro_f1"], 1.0 / 3.0));
    assert_eq!(out["judgements"], 4);

    sb.run(&["eval", "n2c2", "gold", "--predicted", "nowhere"]).fails_with(2, "cannot read the folder nowhere");
    sb.write("pred2/101.xml", &n2c2_file(&note, &[("HBA1C", "maybe")]));
    sb.run(&["eval", "n2c2", "gold", "--predicted", "pred2"]).fails_with(2, "101.xml");
}

#[test]
fn n2c2_by_screening_with_the_embedded_model() {
    let sb = Sandbox::new();
    sb.write(
        "gold/201.xml",
        &n2c2_file(
            &[(
                "2091-05-02",
                "55 year old man with type 2 diabetes and coronary artery disease. Myocardial infarction in 2088, on aspirin 81 mg daily. HbA1c today 8.1%. Creatinine 1.0. Speaks English and makes his own decisions. No alcohol or drug use.",
            )],
            &[
                ("ABDOMINAL", "not met"),
                ("ADVANCED-CAD", "met"),
                ("ALCOHOL-ABUSE", "not met"),
                ("ASP-FOR-MI", "met"),
                ("CREATININE", "not met"),
                ("DIETSUPP-2MOS", "not met"),
                ("DRUG-ABUSE", "not met"),
                ("ENGLISH", "met"),
                ("HBA1C", "met"),
                ("KETO-1YR", "not met"),
                ("MAJOR-DIABETES", "not met"),
                ("MAKES-DECISIONS", "met"),
                ("MI-6MOS", "not met"),
            ],
        ),
    );
    let out = sb.run(&["--json", "eval", "n2c2", "gold", "--strategy", "ican"]).ok().json();
    assert_eq!(out["judgements"], 13, "{out}");
    let micro = out["metrics"]["overall_micro_f1"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&micro));
    let decided = sb.store().match_runs().unwrap();
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0].results, 13, "one stored decision per criterion (failed ones included)");
}

#[test]
fn an_unknown_baseline_is_refused_before_any_screening() {
    let sb = Sandbox::new();
    let annotations = shared_data().join("trialgpt/criterion_annotations_dev.json");
    let args = [
        "eval",
        "trialgpt",
        "--annotations",
        annotations.to_str().unwrap(),
        "--topics",
        "sigir-20143",
        "--baseline",
        "icann",
    ];
    sb.run(&args).fails_with(2, "--baseline \"icann\" is not a strategy; use one of acan");
    assert_eq!(sb.counts().documents, 0, "nothing is stored when the command is refused");
}
