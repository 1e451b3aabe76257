//! `evident ask` as a user runs it: a question about a Synthea patient
//! with notes, answered by the embedded model, where every citation the
//! answer marks supported resolves to the stored text (read back from the
//! store, not from the answer) and every other one names no context item;
//! and bad input (unknown patient, unparseable --as-of, an empty
//! question, a skills file or criteria file that does not validate, an unknown method or answer type)
//! refused with exit 2, a message naming the place, and no answer file
//! written; advanced RAG on a two-note record, with its HTML page; and an
//! ISS question on the example myeloma record, whose own plan reaches the
//! calculator.

mod common;

use common::{shared_data, Sandbox};
use serde_json::Value;

/// A Synthea patient with notes: 92 documents, simvastatin among her
/// medications.
const PATIENT: &str = "7bc002fa-dc52-17d6-1563-fd8901826f7d";

#[track_caller]
fn check_text_citation(sb: &Sandbox, source: &Value) {
    let store = sb.store();
    let document_id = source["document_id"].as_str().unwrap();
    let doc = store.document(document_id).unwrap().unwrap_or_else(|| panic!("{document_id} is not stored"));
    assert_eq!(doc.patient_id, PATIENT);
    let (start, end) = (source["start"].as_u64().unwrap() as usize, source["end"].as_u64().unwrap() as usize);
    assert_eq!(&doc.text[start..end], source["text"].as_str().unwrap(), "the cited span is the stored text");
    let sentences = store.sentences(document_id).unwrap();
    for id in source["sentence_ids"].as_array().unwrap() {
        let s = sentences.iter().find(|s| s.ordinal == id.as_i64().unwrap()).expect("a stored sentence");
        assert!(s.start < end && s.end > start, "sentence {id} lies in the cited span");
    }
    // Nothing after the reference date is cited.
    assert!(doc.date.unwrap().date().to_string().as_str() <= "2023-01-17");
}

/// The embedded 0.5B model does not reliably produce a cited answer on this
/// record (docs/evaluation.md has its runs), so the test holds the pipeline
/// to what it guarantees whatever the model writes: an answer whose
/// citations either resolve to the stored text or are flagged unsupported
/// because they name no context item, or a recorded pipeline failure with
/// the model's raw text; the trace, usage and model run agree; the file
/// holds the printed answer.
#[test]
fn a_synthea_question_is_answered_with_citations_that_resolve_to_stored_text() {
    let sb = Sandbox::new();
    let data = shared_data().join("synthea/sample-bulk-fhir-datasets-10-patients");
    sb.run(&["ingest", data.to_str().unwrap()]).ok();
    let run = sb.run(&["--json", "ask", PATIENT, "Has the patient been prescribed simvastatin?", "--out", "out"]);
    let out = run.json();
    assert_eq!(out["as_of"], "2023-01-17", "the default reference date is the last document's");
    assert!(out["trace"]["assessment"].is_object(), "{out}");
    let runs = sb.run(&["--json", "runs", "show", out["run"].as_str().unwrap()]).ok().json();
    assert_eq!(runs["calls"].as_array().unwrap().len() as u64, out["usage"]["calls"].as_u64().unwrap());
    match out["status"].as_str().unwrap() {
        "answered" => {
            assert_eq!(run.code(), 0);
            assert!(!out["answer"].as_str().unwrap().is_empty());
            let context = out["context"].as_array().unwrap().len() as u64;
            for c in out["citations"].as_array().unwrap() {
                if c["supported"] == true {
                    assert_eq!(c["source"]["type"], "text", "a Synthea patient without labs cites text: {c}");
                    check_text_citation(&sb, &c["source"]);
                } else {
                    assert!(
                        c["number"].as_u64().unwrap() > context,
                        "only a number naming no item is unsupported: {c}"
                    );
                }
            }
            assert_eq!(
                out["unsupported_citations"].as_u64().unwrap() as usize,
                out["citations"].as_array().unwrap().iter().filter(|c| c["supported"] == false).count()
            );
        }
        "pipeline_failure" => {
            assert_eq!(run.code(), 1, "a pipeline failure is an answer not found, not an error");
            assert!(!out["failure"].as_array().unwrap().is_empty() && out["raw_text"].is_string(), "{out}");
            assert!(runs["pipeline_failures"].as_u64().unwrap() >= 1, "the failure is recorded in the run: {runs}");
        }
        other => panic!("unknown status {other}: {out}"),
    }
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join("out/answer.json")).unwrap()).unwrap();
    assert_eq!(written["status"], out["status"]);
    assert_eq!(written["answer"], out["answer"]);
    assert_eq!(written["citations"], out["citations"]);
    let page = std::fs::read_to_string(sb.path().join("out/answer.html")).unwrap();
    assert!(page.contains("Has the patient been prescribed simvastatin?"), "the page beside answer.json");
}

/// Advanced RAG on the embedded model and MiniLM, on a two-note record
/// whose note holds markup: one rewrite call and one answer call (or a
/// recorded pipeline failure), hybrid retrieval of the stored sections,
/// and an HTML page in which the note's markup is text.
#[test]
fn advanced_rag_answers_on_the_embedded_model_and_its_page_escapes_the_record() {
    let sb = Sandbox::new();
    sb.write(
        "notes/manifest.csv",
        "patient_id,doc_id,kind,date,file\nR1,r1-a,progress note,2024-02-01,a.txt\nR1,r1-b,progress note,2024-03-01,b.txt\n",
    );
    sb.write("notes/a.txt", "Progress note.\nStarted metformin 500 mg twice daily for type 2 diabetes.\n");
    sb.write("notes/b.txt", "Progress note.\nKnee pain <script>alert(1)</script>; metformin continued.\n");
    sb.run(&["ingest", "notes"]).ok();
    let run = sb.run(&[
        "--json",
        "ask",
        "R1",
        "Is the patient taking metformin?",
        "--method",
        "advanced-rag",
        "--out",
        "out",
    ]);
    let out = run.json();
    assert_eq!(out["method"], "advanced-rag");
    let rounds = out["trace"]["rounds"].as_array().unwrap();
    assert_eq!(rounds[0]["action"], "rewrite");
    assert!(rounds[0]["arguments"]["queries"].as_array().unwrap().len() <= 8);
    assert_eq!(rounds[1]["action"], "retrieve");
    assert!(!out["context"].as_array().unwrap().is_empty(), "the stored sections are retrieved: {out}");
    let calls = out["usage"]["calls"].as_u64().unwrap();
    match out["status"].as_str().unwrap() {
        "answered" => assert!((2..=4).contains(&calls), "{calls} calls"),
        "pipeline_failure" => assert_eq!(run.code(), 1),
        other => panic!("unknown status {other}: {out}"),
    }
    let page = std::fs::read_to_string(sb.path().join("out/answer.html")).unwrap();
    assert!(!page.contains("<script"), "the record's markup is text on the page");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn bad_input_exits_2_naming_the_place_and_writes_nothing() {
    let sb = Sandbox::new();
    sb.write("notes/manifest.csv", "patient_id,doc_id,kind,date,file\nX1,x1-note,progress note,2024-03-01,x1.txt\n");
    sb.write("notes/x1.txt", "Progress note.\nThe patient takes metformin 500 mg twice daily.\n");
    sb.run(&["ingest", "notes"]).ok();
    let ask = |args: &[&str]| {
        let mut all = vec!["ask"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--out", "out"]);
        sb.run(&all)
    };
    ask(&["NOPE", "Is she on metformin?"]).fails_with(2, "patient \"NOPE\" is not in the store");
    ask(&["X1", "Is she on metformin?", "--as-of", "2024-13-01"])
        .fails_with(2, "--as-of: \"2024-13-01\" is not a date");
    ask(&["X1", "   "]).fails_with(2, "the question is empty");
    ask(&["X1", "Is she on metformin?", "--method", "magic"]).fails_with(2, "method \"magic\" is unknown");
    ask(&["X1", "Is she on metformin?", "--answer-type", "essay"])
        .fails_with(2, "--answer-type: answer type \"essay\" is unknown; use one of yes_no, yes_no_unclear, date");
    sb.write("skills/renal.md", "---\nid: renal\ncategory: knowledge\nsummary: s\nkeywords: []\n---\nbody\n");
    ask(&["X1", "Is she on metformin?", "--skills", "skills"]).fails_with(2, "renal.md: category: \"knowledge\"");
    sb.write(
        "local.json",
        r#"{"version": 1, "sets": [{"id": "adults", "title": "Adults", "source": "a local protocol",
            "named_by": ["adult criteria"], "rule": {"age": {"label": "adult", "min": 80, "max": 18}}}]}"#,
    );
    ask(&["X1", "Does she meet the adult criteria?", "--criteria", "local.json"])
        .fails_with(2, "--criteria: criteria file local.json: criteria sets have 1 problem(s):\n  sets[0].rule.age: min 80 is above max 18");
    ask(&["X1", "Does she meet the adult criteria?", "--criteria", "none.json"])
        .fails_with(2, "--criteria: criteria file none.json: cannot read the criteria file");
    ask(&["X1", "Is she on metformin?", "--temperature", "3"])
        .fails_with(2, "--temperature: temperature 3 is outside 0-2; 0 is greedy decoding");
    assert!(!sb.path().join("out").exists(), "nothing is written for a refused question");
}

/// The example myeloma record (`examples/chart/myeloma`), ingested as its
/// README says, and an ISS question answered by the agent on the embedded
/// model: the model's own plan calls the ISS calculator, which reads the
/// stored beta-2-microglobulin and albumin of 2024-01-08 (inside the 90-day
/// window of 2024-01-22) and stages I; the calculation and its inputs are
/// context items, and every citation resolves to what the store holds.
#[test]
fn an_iss_question_on_the_example_myeloma_record_runs_the_calculator_end_to_end() {
    let sb = Sandbox::new();
    let example = common::repo_root().join("examples/chart/myeloma");
    let bundle = example.join("patient-and-labs.json");
    sb.run(&["ingest", example.to_str().unwrap(), bundle.to_str().unwrap()]).ok();
    let question = "What is the ISS stage on 2024-01-22, from albumin and beta-2-microglobulin within 90 days?";
    let run = sb.run(&["--json", "ask", "MM001", question, "--as-of", "2024-01-22"]);
    let out = run.json();
    assert_eq!(out["status"], "answered", "{out}");
    assert_eq!(run.code(), 0);
    // The calculator ran from the model's own plan and action.
    let rounds = out["trace"]["rounds"].as_array().unwrap();
    let calc = rounds
        .iter()
        .find(|r| r["action"] == "call_tool" && r["tool"] == "calculate")
        .unwrap_or_else(|| panic!("no calculator call in {}", out["trace"]));
    assert_eq!(calc["arguments"]["calculator"], "iss", "{calc}");
    assert_eq!(calc["evidence_found"], 1, "{calc}");
    // Its result, with the stored inputs it read.
    let context = out["context"].as_array().unwrap();
    let node = context.iter().find(|n| n["type"] == "calculation").expect("the calculation is a context item");
    assert_eq!(node["calculator"], "iss");
    assert_eq!(node["output"]["stage"], "I", "{node}");
    assert_eq!(node["inputs"]["beta2_microglobulin_mg_l"], 2.9, "{node}");
    assert_eq!(node["inputs"]["albumin_g_dl"], 3.9, "{node}");
    let used = node["used"].as_array().unwrap();
    assert_eq!(used.len(), 2, "{node}");
    assert!(used.iter().all(|u| u["time"].as_str().unwrap().starts_with("2024-01-08")), "{node}");
    // Every citation resolves to stored text, a stored lab value or a
    // calculation over stored lab values.
    let store = sb.store();
    let labs = store
        .labs(&evident_store::LabQuery { patient_id: "MM001".into(), ..evident_store::LabQuery::default() })
        .unwrap();
    let check_lab = |l: &Value| {
        let stored = labs.iter().find(|s| s.source_id == l["source_id"].as_str().unwrap()).expect("a stored lab");
        assert_eq!(stored.value_num.map(|v| v.to_string()).as_deref(), l["value"].as_str(), "{l}");
    };
    let citations = out["citations"].as_array().unwrap();
    for c in citations {
        assert_eq!(c["supported"], true, "{c}");
        let source = &c["source"];
        match source["type"].as_str().unwrap() {
            "text" => {
                let doc = store.document(source["document_id"].as_str().unwrap()).unwrap().expect("stored");
                let (start, end) =
                    (source["start"].as_u64().unwrap() as usize, source["end"].as_u64().unwrap() as usize);
                assert_eq!(&doc.text[start..end], source["text"].as_str().unwrap());
                assert!(doc.date.unwrap().date().to_string().as_str() <= "2024-01-22");
            }
            "lab" => check_lab(source),
            "calculation" => source["used"].as_array().unwrap().iter().for_each(check_lab),
            other => panic!("unknown source {other}: {c}"),
        }
    }
    assert_eq!(out["unsupported_citations"], 0);
}

/// A statin-criteria question on a Synthea R4 patient of the development
/// bank (gold answer Yes: diabetes documented since 2001, aged 40-75),
/// answered by the agent on the embedded model: the criteria set the
/// question names is checked on the record (a calculate round), the check
/// is the first context item, the answer (decoded as yes / no / unclear,
/// the schema of a question naming a criteria set) is its result, and
/// every citation resolves to the store (a check's criteria to the stored
/// patient, the problem-list line and stored labs).
#[test]
fn a_statin_criteria_question_is_answered_from_the_criteria_check() {
    let sb = Sandbox::new();
    let patient = "ffd502c9-23e1-4f8f-bc8a-87373acad280";
    let bundle = std::fs::read_dir(shared_data().join("synthea/generated-sample-data-R4"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::read_to_string(p).unwrap().contains(&format!("\"id\": \"{patient}\"")))
        .expect("the patient's bundle");
    sb.run(&["ingest", bundle.to_str().unwrap()]).ok();
    let question = "Does the patient meet the statin criteria on 2020-09-07, that is, age 40-75 years with documented \
                    diabetes, or an LDL cholesterol of at least 190 mg/dL within 365 days?";
    let run = sb.run(&["--json", "ask", patient, question, "--as-of", "2020-09-07"]);
    let out = run.json();
    assert_eq!(out["status"], "answered", "{out}");
    let rounds = out["trace"]["rounds"].as_array().unwrap();
    let check = rounds
        .iter()
        .find(|r| r["action"].as_str().unwrap().starts_with("criteria check"))
        .unwrap_or_else(|| panic!("no criteria check in {}", out["trace"]));
    assert_eq!(check["arguments"]["calculator"], "statin-criteria", "{check}");
    let first = &out["context"][0];
    assert_eq!((first["type"].as_str(), first["calculator"].as_str()), (Some("calculation"), Some("statin-criteria")));
    assert_eq!(first["output"]["result"], "Yes", "{first}");
    assert_eq!(out["answer"], "Yes", "{out}");
    let store = sb.store();
    for c in out["citations"].as_array().unwrap().iter().filter(|c| c["supported"] == true) {
        let source = &c["source"];
        let sources: Vec<&Value> = match source["type"].as_str().unwrap() {
            "calculation" => source["used"].as_array().unwrap().iter().collect(),
            _ => vec![source],
        };
        for s in sources {
            match s["type"].as_str().unwrap() {
                "text" => {
                    let doc = store.document(s["document_id"].as_str().unwrap()).unwrap().expect("stored");
                    let (start, end) = (s["start"].as_u64().unwrap() as usize, s["end"].as_u64().unwrap() as usize);
                    assert_eq!(&doc.text[start..end], s["text"].as_str().unwrap());
                    assert!(doc.date.unwrap().date().to_string().as_str() <= "2020-09-07");
                }
                "patient" => assert_eq!(s["patient_id"], patient),
                "lab" => assert!(s["time"].as_str().unwrap() <= "2020-09-07T23:59:59", "{s}"),
                other => panic!("unknown source {other}: {c}"),
            }
        }
    }
}
