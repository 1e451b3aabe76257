//! `evident eval` as a user runs it: zero-shot ICAN on one annotated
//! TrialGPT patient with the embedded model (metrics beside GPT-4's on the
//! same rows, trial-level comparison, usage; a second run resumes without
//! model calls; a baseline strategy gives a paired difference), and the
//! n2c2 2018 metric on small files in the challenge's format that the team
//! wrote, both from given predictions (hand-computed F1s) and by screening
//! with Evident. Figures that depend on the model are recomputed in the
//! test from the decisions the command stored; GPT-4's from the annotation
//! file.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{shared_data, Sandbox};
use serde_json::Value;

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

/// The decision a TrialGPT label stands for (the criterion type is implied
/// by the label): written here from the annotation guide, not taken from
/// evident-eval, so the figures below are computed independently.
fn decision_of_label(label: &str) -> &'static str {
    match label {
        "included" | "excluded" => "MET",
        "not included" | "not excluded" => "NOT MET",
        "not enough information" => "NOT ENOUGH INFORMATION",
        "not applicable" => "NOT APPLICABLE",
        other => panic!("unknown TrialGPT label {other:?}"),
    }
}

/// met / not met / unknown, as docs/evaluation.md defines the collapsed space.
fn collapsed(decision: &str) -> &'static str {
    match decision {
        "MET" => "met",
        "NOT MET" | "NOT APPLICABLE" => "not met",
        "NOT ENOUGH INFORMATION" => "unknown",
        other => panic!("unknown decision {other:?}"),
    }
}

/// A stored result's decision (`None` for a failed one).
fn stored_decision(result_json: &str) -> Option<String> {
    let result: Value = serde_json::from_str(result_json).unwrap();
    let outcome = &result["outcome"];
    (outcome["status"] == "assessed").then(|| outcome["decision"].as_str().unwrap().to_string())
}

/// The annotation file's rows for one topic.
fn annotated_rows(annotations: &std::path::Path, topic: &str) -> Vec<Value> {
    let all: Value = serde_json::from_str(&std::fs::read_to_string(annotations).unwrap()).unwrap();
    all.as_array().unwrap().iter().filter(|r| r["patient_id"] == topic).cloned().collect()
}

fn sentence_ids(row: &Value, field: &str) -> BTreeSet<i64> {
    serde_json::from_str::<Vec<i64>>(row[field].as_str().unwrap()).unwrap().into_iter().collect()
}

#[track_caller]
fn assert_close(value: &Value, expected: f64, what: &str) {
    let got = value.as_f64().unwrap_or_else(|| panic!("{what} is not a number: {value}"));
    assert!((got - expected).abs() < 1e-12, "{what}: {got}, expected {expected}");
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
    assert_eq!(first["patients"], 1);
    assert_eq!(first["pairs"], 2, "sigir-20143 is annotated against two trials");
    let ours = &first["method_row"]["metrics"];
    assert_eq!(ours["rows"], 6);
    assert!(first["usage"]["model_calls"].as_u64().unwrap() >= 6, "{}", first["usage"]);

    // GPT-4's row does not depend on our model: recomputed here from the
    // annotation file. By hand: GPT-4 agrees with the physician on 3 of the
    // 6 rows (annotations 43, 47, 48), on 4 once collapsed (44: not
    // applicable vs not excluded are both "not met"), and cites 4 sentences,
    // all among the physician's 5.
    let rows = annotated_rows(&annotations, "sigir-20143");
    assert_eq!(rows.len(), 6);
    let label = |r: &Value, who: &str| decision_of_label(r[format!("{who}_eligibility")].as_str().unwrap());
    let agree = rows.iter().filter(|r| label(r, "gpt4") == label(r, "expert")).count();
    let agree_collapsed = rows.iter().filter(|r| collapsed(label(r, "gpt4")) == collapsed(label(r, "expert"))).count();
    assert_eq!((agree, agree_collapsed), (3, 4));
    let (mut cited, mut gold, mut cited_in_gold) = (0, 0, 0);
    for r in &rows {
        let (g, e) = (sentence_ids(r, "gpt4_sentences"), sentence_ids(r, "expert_sentences"));
        cited += g.len();
        gold += e.len();
        cited_in_gold += g.intersection(&e).count();
    }
    assert_eq!((cited, gold, cited_in_gold), (4, 5, 4));
    let gpt4 = &first["gpt4_row"]["metrics"];
    assert_eq!(gpt4["rows"], 6, "GPT-4 is scored on the same rows");
    assert_eq!(gpt4["failed"], 0);
    assert_close(&gpt4["accuracy"], agree as f64 / 6.0, "GPT-4 accuracy");
    assert_close(&gpt4["accuracy_collapsed"], agree_collapsed as f64 / 6.0, "GPT-4 collapsed accuracy");
    assert_close(&gpt4["evidence_precision"], cited_in_gold as f64 / cited as f64, "GPT-4 evidence precision");
    assert_close(&gpt4["evidence_recall"], cited_in_gold as f64 / gold as f64, "GPT-4 evidence recall");
    assert_close(&first["gpt4_row"]["accuracy"]["estimate"], 0.5, "GPT-4 accuracy estimate");

    // Our row, recomputed from the decisions the command stored (one match
    // run per pair, one decision per annotated criterion).
    let expert: BTreeMap<String, &'static str> =
        rows.iter().map(|r| (format!("annotation-{}", r["annotation_id"]), label(r, "expert"))).collect();
    let mut decided: BTreeMap<String, Option<String>> = BTreeMap::new();
    for run in first["runs"].as_array().unwrap() {
        for r in sb.store().match_results(run.as_str().unwrap()).unwrap() {
            let previous = decided.insert(r.criterion_id.clone(), stored_decision(&r.result_json));
            assert!(previous.is_none(), "{} decided twice", r.criterion_id);
        }
    }
    assert_eq!(decided.keys().collect::<Vec<_>>(), expert.keys().collect::<Vec<_>>(), "one decision per row");
    let correct = decided.iter().filter(|(id, d)| d.as_deref() == Some(expert[*id])).count();
    let failed = decided.values().filter(|d| d.is_none()).count();
    let accuracy = correct as f64 / 6.0;
    assert_close(&ours["accuracy"], accuracy, "our accuracy from the stored decisions");
    assert_eq!(ours["failed"], failed);
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
    // The same totals as `evident runs list` shows for those runs.
    let listed = sb.run(&["--json", "runs", "list"]).ok().json();
    for field in ["calls", "cache_hits", "model_calls", "prompt_tokens", "completion_tokens"] {
        let total: u64 = listed
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| runs_of(&first).iter().any(|id| r["id"] == id.as_str()))
            .map(|r| r[field].as_u64().unwrap())
            .sum();
        assert_eq!(Some(total), first["usage"][field].as_u64(), "{field}: runs list {listed}");
    }
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
    // The label correction relabels the stored decisions without a model
    // call; its baseline is the same decisions uncorrected.
    let calls_before = all_calls();
    let corrected: Vec<&str> = both.iter().copied().chain(["--label-correction"]).collect();
    let corrected = sb.run(&corrected).ok().json();
    assert_eq!(all_calls(), calls_before, "the correction asks no model");
    assert_eq!(corrected["baseline"]["row"], wider["method_row"], "{}", corrected["baseline"]);
    assert_eq!(corrected["baseline"]["method"], "ican");
    assert_eq!(corrected["method_row"]["metrics"]["rows"], wider["method_row"]["metrics"]["rows"]);
    let c = &corrected["label_correction"]["summary"];
    assert!(c["changed"].as_u64().is_some() && c["fitted_on_all"].as_array().is_some_and(|a| !a.is_empty()), "{c}");
    let majority = &corrected["label_correction"]["type_majority_row"]["metrics"];
    assert_eq!(majority["rows"], wider["method_row"]["metrics"]["rows"], "{majority}");
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

/// The embedded model's log-probabilities at the paper's 0/1 answer: every
/// request asks for them, every decision's trace has a P(MET), and the
/// model's greedy answer is the side of 0.5 its P(MET) is on (greedy
/// decoding under the 0/1 grammar picks the likelier digit), so P(MET) is
/// read at the token that was decided.
#[test]
fn trialgpt_threshold_calibration_reads_p_met_from_the_embedded_model() {
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
        "makar-zero-shot",
        "--threshold-calibration",
        "--out",
        "eval",
    ];
    let out = sb.run(&args).ok().json();
    assert_eq!(out["rows"], 6, "{out}");
    assert_eq!(out["threshold_calibration"]["summary"]["rows_with_probability"], 6, "{out}");
    let store = sb.store();
    let mut decisions = 0;
    for run in out["runs"].as_array().unwrap() {
        for r in store.match_results(run.as_str().unwrap()).unwrap() {
            let trace: Value = serde_json::from_str(r.trace_json.as_deref().unwrap()).unwrap();
            let p = trace["p_met"].as_f64().unwrap_or_else(|| panic!("no P(MET): {trace}"));
            assert!(p > 0.0 && p < 1.0, "{p}");
            let decision = stored_decision(&r.result_json).expect("assessed");
            assert_eq!(decision == "MET", p >= 0.5, "P(MET) {p} but the model answered {decision}");
            decisions += 1;
        }
    }
    assert_eq!(decisions, 6);
    for run in out["model_runs"].as_array().unwrap() {
        for call in store.model_calls(run.as_str().unwrap()).unwrap() {
            let request: Value = serde_json::from_str(&call.request_json).unwrap();
            assert_eq!(request["logprobs"]["top"], 20, "every request asks: {request}");
            let response: Value = serde_json::from_str(call.response_json.as_deref().unwrap()).unwrap();
            let first = &response["logprobs"][0];
            assert_eq!(first["token"], response["text"], "one token, the answer: {response}");
            assert_eq!(first["top"].as_array().unwrap().len(), 20, "{response}");
        }
    }
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
    let gold = [
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
    ];
    let note = [(
        "2091-05-02",
        "55 year old man with type 2 diabetes and coronary artery disease. Myocardial infarction in 2088, on aspirin 81 mg daily. HbA1c today 8.1%. Creatinine 1.0. Speaks English and makes his own decisions. No alcohol or drug use.",
    )];
    sb.write("gold/201.xml", &n2c2_file(&note, &gold));
    let out = sb.run(&["--json", "eval", "n2c2", "gold", "--strategy", "ican"]).ok().json();
    assert_eq!(out["judgements"], 13, "{out}");
    let runs = sb.store().match_runs().unwrap();
    assert_eq!(runs.len(), 1);
    // The set's four reviewed checks (HbA1c, creatinine, ketoacidosis, MI)
    // find no structured data in a note-only record and leave their
    // criteria to the model: their outcomes are stored beside the model's
    // 13 decisions.
    assert_eq!(runs[0].results, 13 + 4, "one stored decision per criterion (failed ones included) and 4 checks");
    let (checks, decisions): (Vec<_>, Vec<_>) =
        sb.store().match_results(&runs[0].id).unwrap().into_iter().partition(|r| r.document_id == "#check");
    assert_eq!(checks.len(), 4);
    for c in &checks {
        let check: serde_json::Value = serde_json::from_str(&c.result_json).unwrap();
        assert_eq!(check["deferred"], true, "{}: {check}", c.criterion_id);
        assert_eq!(check["outcome"]["decision"], "NOT ENOUGH INFORMATION", "{}", c.criterion_id);
    }

    // The F1s recomputed from the stored decisions: MET is "met", every
    // other decision "not met", a failed decision is scored wrong.
    let gold: BTreeMap<&str, bool> = gold.iter().map(|(c, v)| (*c, *v == "met")).collect();
    let mut counts: BTreeMap<String, [usize; 4]> = BTreeMap::new(); // tm, fm, fn, tn
    let mut failed = 0;
    for r in decisions {
        let gold_met = gold[r.criterion_id.as_str()];
        let decision = stored_decision(&r.result_json);
        failed += usize::from(decision.is_none());
        let predicted_met = decision.map_or(!gold_met, |d| d == "MET");
        let c = counts.entry(r.criterion_id.clone()).or_default();
        c[match (gold_met, predicted_met) {
            (true, true) => 0,
            (false, true) => 1,
            (true, false) => 2,
            (false, false) => 3,
        }] += 1;
    }
    assert_eq!(counts.len(), 13, "one decision per criterion");
    assert_eq!(out["failed_decisions"], failed);
    let f1 = |tp: usize, false_positive: usize, false_negative: usize| {
        if tp == 0 {
            0.0
        } else {
            2.0 * tp as f64 / (2 * tp + false_positive + false_negative) as f64
        }
    };
    let mean_f1 = |[tm, fm, fnm, tn]: [usize; 4]| (f1(tm, fm, fnm) + f1(tn, fnm, fm)) / 2.0;
    let mut pooled = [0; 4];
    for c in counts.values() {
        (0..4).for_each(|i| pooled[i] += c[i]);
    }
    let macro_f1 = counts.values().map(|c| mean_f1(*c)).sum::<f64>() / counts.len() as f64;
    assert_close(&out["metrics"]["overall_micro_f1"], mean_f1(pooled), "micro F1 from the stored decisions");
    assert_close(&out["metrics"]["overall_macro_f1"], macro_f1, "macro F1 from the stored decisions");
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
