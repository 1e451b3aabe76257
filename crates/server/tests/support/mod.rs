//! A store for the server's tests, filled the way a user fills one: the
//! team-written example records (examples/records, examples/fhir) and one
//! extra patient whose note carries markup (`<script>`, an `<img onerror>`
//! attribute breakout), ingested through the app's ingest job; and one
//! screening run of the example trial whose decisions are fixture rows
//! written through the store's API (so no model is loaded). The fixture
//! decisions follow the hand-read expectations in the trial file and cite
//! real sentences of each patient's notes, found by a keyword.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use evident_app::records::{ingest, IngestRequest};
use evident_app::users::{self, AddUser, Role};
use evident_app::{Config, Session, Silent};
use evident_match::decision::{Assessment, Confidence, CriterionResult, Decision, Determination, SentenceRef};
use evident_store::{NewMatchResult, Store};

pub const RUN: &str = "EXAMPLE-T2DM-001-ican-fixture";
pub const XSS_PATIENT: &str = "PXSS";
pub const SCRIPT_TEXT: &str = "<script>window.__xss = 1; document.title = 'owned';</script>";
pub const IMG_TEXT: &str = "\"><img src=x onerror=\"window.__xss=2\">";
pub const PASSWORD: &str = "correct horse battery";

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (patient, criterion, decision, keyword of the cited sentence).
const FIXTURE: &[(&str, &str, &str, &str)] = &[
    ("P001", "t2dm", "MET", "diabetes"),
    ("P001", "metformin", "MET", "metformin"),
    ("P001", "insulin", "NOT MET", "insulin"),
    ("P002", "t2dm", "MET", "diabetes"),
    ("P002", "metformin", "NOT ENOUGH INFORMATION", "metformin"),
    ("P002", "insulin", "MET", "insulin"),
    ("P003", "t2dm", "MET", "diabetes"),
    ("P003", "metformin", "NOT MET", "metformin"),
    ("P003", "insulin", "NOT MET", "insulin"),
    ("P004", "t2dm", "NOT MET", "diabetes"),
    ("P004", "metformin", "NOT MET", "amlodipine"),
    ("P004", "insulin", "NOT MET", "diabetes"),
    ("PXSS", "t2dm", "MET", "script"),
    ("PXSS", "metformin", "NOT ENOUGH INFORMATION", "script"),
    ("PXSS", "insulin", "NOT MET", "img"),
    ("P001", "pregnancy", "NOT MET", "year-old"),
    ("P002", "pregnancy", "NOT ENOUGH INFORMATION", "year-old"),
    ("P003", "pregnancy", "NOT MET", "year-old"),
    ("P004", "pregnancy", "NOT ENOUGH INFORMATION", "year-old"),
    ("PXSS", "pregnancy", "NOT ENOUGH INFORMATION", "plan"),
];

/// The structured criteria, decided as the trial file's reviewed checks
/// decide them (stored here as plain decisions, without check rows).
const CHECKS: &[(&str, &str, &str)] = &[
    ("P001", "age", "MET"),
    ("P001", "hba1c", "MET"),
    ("P001", "egfr", "NOT MET"),
    ("P002", "age", "MET"),
    ("P002", "hba1c", "MET"),
    ("P002", "egfr", "NOT ENOUGH INFORMATION"),
    ("P003", "age", "MET"),
    ("P003", "hba1c", "MET"),
    ("P003", "egfr", "MET"),
    ("P004", "age", "MET"),
    ("P004", "hba1c", "NOT MET"),
    ("P004", "egfr", "NOT ENOUGH INFORMATION"),
    ("PXSS", "age", "MET"),
    ("PXSS", "hba1c", "MET"),
    ("PXSS", "egfr", "NOT MET"),
];

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
}

impl Fixture {
    pub fn session(&self) -> Session {
        Session::with_config(&self.db, Config::default())
    }
}

/// A store with the examples, the markup patient, the fixture run and
/// three users: viewer `vera`, reviewer `rita`, admin `adam`.
pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("evident.db");
    let notes = dir.path().join("xss");
    std::fs::create_dir_all(notes.join("notes")).unwrap();
    std::fs::write(
        notes.join("manifest.csv"),
        "patient_id,doc_id,kind,date,file,title\nPXSS,PXSS-hp-2024-01,progress note,2024-01-10,notes/xss.md,\"Visit <b>bold</b> \"\"><img src=x onerror=alert(1)>\"\n",
    )
    .unwrap();
    std::fs::write(
        notes.join("notes/xss.md"),
        format!(
            "# History\nThe patient has type 2 diabetes on metformin. The referral letter contained {SCRIPT_TEXT} in its footer.\n\n# Plan\nA pasted line read {IMG_TEXT} and nothing else. Continue metformin.\n"
        ),
    )
    .unwrap();
    let session = Session::with_config(&db, Config::default());
    let request = IngestRequest {
        paths: vec![repo().join("examples/records"), repo().join("examples/fhir"), notes],
        format: evident_ingest::Format::Auto,
        dry_run: false,
    };
    let ingested = ingest(&session, &request, &Silent).unwrap();
    assert!(ingested.refusal().is_none(), "{ingested}");
    let set = evident_app::screening::load_trial(&repo().join("examples/trials/t2dm-example.yaml")).unwrap();
    let mut store = Store::open(&db).unwrap();
    let definition = serde_json::json!({ "criteria": set, "method": "ican", "fixture": true });
    store.begin_match_run(RUN, &set.trial_id, "ican", &definition.to_string()).unwrap();
    let rows = FIXTURE
        .iter()
        .map(|(p, c, d, k)| (*p, *c, *d, Some(*k)))
        .chain(CHECKS.iter().map(|(p, c, d)| (*p, *c, *d, None)));
    for (patient, criterion, decision, keyword) in rows {
        let c = set.criteria.iter().find(|x| x.id == criterion).unwrap();
        let evidence = match keyword {
            Some(k) => cite(&store, patient, k),
            None => Vec::new(),
        };
        let rationale = match patient {
            "PXSS" => format!("The note quotes {SCRIPT_TEXT} and {IMG_TEXT}."),
            _ => format!("Fixture decision for {criterion}: read off the notes by hand."),
        };
        let result = CriterionResult {
            criterion_id: criterion.to_string(),
            criterion_type: c.criterion_type,
            document_id: None,
            document_date: None,
            outcome: Determination::Assessed(Assessment {
                medications_and_supplements: Vec::new(),
                rationale,
                decision: Decision::parse(decision).unwrap(),
                confidence: Confidence::Medium,
                evidence,
            }),
            unresolved_citations: Vec::new(),
        };
        let new = NewMatchResult {
            criterion_id: criterion.to_string(),
            document_id: String::new(),
            result_json: serde_json::to_string(&result).unwrap(),
            trace_json: None,
        };
        store.put_match_task(RUN, patient, &format!("{patient}/{criterion}"), None, &[new]).unwrap();
    }
    store.finish_match_run(RUN).unwrap();
    drop(store);
    for (name, role) in [("vera", Role::Viewer), ("rita", Role::Reviewer), ("adam", Role::Admin)] {
        users::add(&session, &AddUser { name: name.into(), role, password: PASSWORD.into() }, "test").unwrap();
    }
    Fixture { dir, db }
}

/// The first sentence of the patient's notes containing `keyword`.
fn cite(store: &Store, patient: &str, keyword: &str) -> Vec<SentenceRef> {
    for doc in store.documents(patient).unwrap() {
        for s in store.sentences(&doc.id).unwrap() {
            if s.text.to_lowercase().contains(keyword) {
                return vec![SentenceRef { document_id: doc.id.clone(), ordinal: s.ordinal }];
            }
        }
    }
    Vec::new()
}

/// A stored chart answer as `evident ask` writes it, citing the first
/// sentence of one of P001's notes.
pub fn stored_answer(f: &Fixture) -> (String, String, usize, usize) {
    let session = f.session();
    let (doc, start, end, text) = session
        .with_store(|s| {
            let doc = s.documents("P001")?.into_iter().next().unwrap();
            let sentence = s.sentences(&doc.id)?.into_iter().next().unwrap();
            Ok((doc.id, sentence.start, sentence.end, sentence.text))
        })
        .unwrap();
    let answer = serde_json::json!({
        "run": "run-chart-1", "patient": "P001", "question": "Does P001 take metformin?", "as_of": "2024-01-15",
        "method": "agent", "status": "answered", "answer": "Yes <b>metformin</b>.",
        "reasoning": "The note says so [1]; [2] is not a context item.", "raw_text": "",
        "citations": [
            { "number": 1, "supported": true, "source": { "type": "text", "document_id": doc, "section_id": null,
              "sentence_ids": [], "start": start, "end": end, "text": text, "date": "2024-01-15" } },
            { "number": 2, "supported": false, "source": null }
        ],
        "unsupported_citations": 1,
        "retrieved_not_cited": [ { "document_id": "P001-other", "date": "2023-06-01", "kind": "discharge summary" } ],
        "context": [], "trace": { "stopped_because": "enough evidence", "skills": ["medications"], "plan": null,
            "rounds": [ { "tool": "search", "query": "metformin" } ], "context_tokens": 812, "synthesis_attempts": 1 },
        "usage": { "calls": 3 }, "failure": null
    });
    let actor = evident_app::users::Actor { name: "rita".into(), role: Role::Reviewer };
    let request = evident_app::jobs::JobRequest::Chart(evident_app::jobs::ChartJob {
        patient_id: "P001".into(),
        question: "Does P001 take metformin?".into(),
        ..Default::default()
    });
    let job = evident_app::jobs::start(&session, &actor, &request).unwrap();
    session
        .with_store(|s| {
            s.start_job(&job.id)?;
            Ok(s.end_job(&job.id, "finished", Some(&answer.to_string()), None)?)
        })
        .unwrap();
    (job.id, doc, start, end)
}
