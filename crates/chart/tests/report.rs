//! The HTML report: an answer's page shows the answer, the reasoning with
//! linked citations, each cited passage marked in its stored document, the
//! retrieved-but-not-cited documents apart and the trace; every string
//! from the record, the question or the model is escaped (a note holding
//! `<script>` stays text); an evaluation's index links every page with its
//! score.

mod support;

use evident_chart::report::{answer_page, documents_for, write_answer_page, write_index, IndexEntry};
use evident_chart::{ask, prompts, AgentConfig, ChartAnswer, Method, Question, RecordView, SkillLibrary};
use evident_llm::StructuredModel;
use evident_model::text::{split_sections, split_sentences};
use evident_model::{DocKind, Document};
use support::{day, scripted, store, AS_OF};

const HOSTILE: &str = "Refill.\nMetformin refilled <script>alert('x')</script> & \"quoted\".\n";

/// The agent on the fixture, with a hostile note added before the date;
/// the answer cites [1] and a number naming nothing.
fn answered(finals: &[&str]) -> (std::sync::Mutex<evident_store::Store>, ChartAnswer) {
    let store = store();
    {
        let mut s = store.lock().unwrap();
        let w = s.writer().unwrap();
        let doc = Document {
            id: "d5".into(),
            patient_id: "P1".into(),
            kind: DocKind::ProgressNote,
            date: Some(day("2023-03-01")),
            title: "refill <b>note</b>".into(),
            source: "test".into(),
            source_id: "d5".into(),
            text: HOSTILE.into(),
        };
        w.put_document(&doc, &split_sections(HOSTILE), &split_sentences(HOSTILE)).unwrap();
        w.commit().unwrap();
    }
    let mut script = vec![
        r#"{"intent": "metformin", "hypotheses": [], "required_information": ["metformin"], "missing_information": [], "complexity": "low", "skills": []}"#.to_string(),
        r#"{"steps": [{"step": 1, "objective": "find", "tool": "search_reports", "arguments": {"query": "metformin"}, "evidence_requirements": [], "stop_rule": "found"}], "stop_conditions": ["found"]}"#.to_string(),
        r#"{"action": "call_tool", "tool": "search_reports", "arguments": {"query": "metformin"}, "reason": "planned"}"#.to_string(),
        r#"{"action": "finish", "reason": "found"}"#.to_string(),
    ];
    script.extend(finals.iter().map(|t| t.to_string()));
    let model = scripted(&script);
    let view = RecordView::new(&store, "P1", day(AS_OF));
    let skills = SkillLibrary::builtin().unwrap();
    let config = AgentConfig::default();
    let q = Question {
        text: "Is <script>x</script> metformin given?",
        answer_type: None,
        method: Method::Agent,
        skills: &skills,
        config: &config,
        patient: "female".into(),
        embedder: None,
    };
    let out = ask(StructuredModel::recorded(&model), &prompts(None), &view, &q).unwrap();
    drop(view);
    (store, out)
}

#[test]
fn an_answer_page_marks_cited_passages_and_escapes_everything() {
    let (store, out) = answered(&["Answer: Yes <b>\nReasoning: It was refilled [1] and [2] and [99]."]);
    assert_eq!(out.status, "answered");
    let s = store.lock().unwrap();
    let documents = documents_for(&out, &s).unwrap();
    let page = answer_page(&out, &documents);
    assert!(!page.contains("<script"), "no script tag survives");
    assert!(!page.contains("<b>note"), "titles are escaped too");
    assert!(page.contains("Is &lt;script&gt;x&lt;/script&gt; metformin given?"));
    assert!(page.contains("<b>Answer:</b> Yes &lt;b&gt;"));
    assert!(page.contains("<a href=\"#cite-1\">[1]</a>"));
    // Every supported citation's stored text is marked in its document.
    for c in out.citations.iter().filter(|c| c.supported) {
        let Some(evident_chart::CitedSource::Text { document_id, text, .. }) = &c.source else { continue };
        assert!(documents.contains_key(document_id));
        let first_line = text.lines().find(|l| !l.trim().is_empty()).unwrap();
        let escaped = evident_chart::report::esc(first_line);
        let mark = page.find("<mark").expect("a marked passage");
        assert!(page[mark..].contains(&escaped), "{escaped} is shown marked");
    }
    // The number naming nothing is flagged.
    assert_eq!(out.unsupported_citations, 1);
    assert!(page.contains("unsupported"));
    // Retrieved, not cited, apart; the trace is collapsible.
    assert!(page.contains(&format!("Retrieved, not cited ({})", out.retrieved_not_cited.len())));
    for d in &out.retrieved_not_cited {
        assert!(page.contains(&format!("<code>{}</code>", d.document_id)));
    }
    assert!(page.contains("<details><summary>The whole trace (JSON)</summary>"));
    // The hostile note is retrieved (cited or not) and shown as text.
    assert!(out.context.iter().any(|n| n.document_id() == Some("d5")), "{:?}", out.context);
    assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quoted&quot;"));
    // A reasoning Evident wrote says so, and from what.
    assert!(!page.contains("written by Evident"));
    let mut written = out.clone();
    written.trace.reasoning_from = Some("the calculation [1] <i>".into());
    let page = answer_page(&written, &documents);
    assert!(page.contains("The reasoning was written by Evident from the calculation [1] &lt;i&gt;."));
}

#[test]
fn a_failed_answer_page_and_the_index_are_written_whole() {
    let (store, out) = answered(&["no format at all <script>", "still none </script>"]);
    assert_eq!(out.status, "pipeline_failure");
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("answer.html");
    write_answer_page(&page, &out, &store.lock().unwrap()).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<script"));
    assert!(!dir.path().join("answer.html.partial").exists());
    let entries = vec![
        IndexEntry {
            id: "q1".into(),
            patient: "P1".into(),
            method: "agent".into(),
            level: Some("1".into()),
            question: "Is <script> given?".into(),
            answer: Some("Yes".into()),
            status: "answered".into(),
            gold: Some("Yes".into()),
            score: Some(1.0),
            href: "q1/answer.html".into(),
            ..IndexEntry::default()
        },
        IndexEntry {
            id: "q2".into(),
            status: "pipeline_failure".into(),
            score: Some(0.0),
            href: "q2/answer.html".into(),
            ..IndexEntry::default()
        },
        IndexEntry {
            id: "q3".into(),
            status: "answered".into(),
            answer: Some("a; b".into()),
            score: Some(0.5),
            href: "q3/answer.html".into(),
            ..IndexEntry::default()
        },
        IndexEntry {
            id: "q4".into(),
            status: "answered".into(),
            answer: Some("x".into()),
            href: "q4/answer.html".into(),
            ..IndexEntry::default()
        },
    ];
    let index = dir.path().join("index.html");
    write_index(&index, "Chart evaluation <dev>", &entries).unwrap();
    let html = std::fs::read_to_string(&index).unwrap();
    assert!(!html.contains("<script") && !html.contains("<dev>"));
    assert!(html.contains("<a href=\"q1/answer.html\">q1</a>"));
    assert!(html.contains(">correct</span>") && html.contains(">incorrect</span>"));
    assert!(html.contains("partly correct (0.50)") && html.contains("no gold answer"));
    assert!(html.contains("4 answers; 3 with a gold answer, mean score 0.500; 1 pipeline failures."));
}

/// A cited criteria check shows its result and each criterion's status,
/// with what each read.
#[test]
fn a_cited_criteria_check_shows_each_criterions_status() {
    let store = support::store_with_diabetes();
    let model = scripted(&[
        r#"{"intent": "statin", "hypotheses": [], "required_information": ["age"], "missing_information": [], "complexity": "low", "skills": []}"#,
        r#"{"steps": [{"step": 1, "objective": "find", "tool": "search_reports", "arguments": {"query": "diabetes"}, "evidence_requirements": [], "stop_rule": "found"}], "stop_conditions": ["found"]}"#,
        r#"{"action": "call_tool", "tool": "search_reports", "arguments": {"query": "diabetes"}, "reason": "planned"}"#,
        r#"{"action": "finish", "reason": "found"}"#,
        "Answer: Yes\nReasoning: The check is met [1].",
    ]);
    let view = RecordView::new(&store, "P1", day(AS_OF));
    let skills = SkillLibrary::builtin().unwrap();
    let config = AgentConfig::default();
    let q = Question {
        text: "Does the patient meet the statin criteria on 2023-12-31?",
        answer_type: None,
        method: Method::Agent,
        skills: &skills,
        config: &config,
        patient: "female".into(),
        embedder: None,
    };
    let out = ask(StructuredModel::recorded(&model), &prompts(None), &view, &q).unwrap();
    drop(view);
    let s = store.lock().unwrap();
    let page = answer_page(&out, &documents_for(&out, &s).unwrap());
    assert!(page.contains("criteria check <b>statin-criteria</b>: <b>Yes</b>"), "{page}");
    assert!(page.contains("<li>age 40-75 years: <b>met</b></li>"), "{page}");
    assert!(page.contains("<li>documented diabetes: <b>met</b></li>"), "{page}");
    assert!(page.contains("Diabetes (active)"), "the problem-list line it read");
}
