//! Patient text reaches only loopback model endpoints unless the user
//! allowed otherwise, whichever job makes the request: each job that
//! calls a model is pointed at a non-loopback endpoint (by URL, and by a
//! configured model name) and must be refused before anything is sent.
//! And nothing outside the application and model layers builds a
//! provider, a recorder or the guard itself, so no front end can bypass it.

use std::path::{Path, PathBuf};

use evident_app::evaluation::{N2c2Request, TrialgptRequest};
use evident_app::llm::ChatJob;
use evident_app::records::IngestRequest;
use evident_app::screening::{ScreeningOptions, TrialsRequest};
use evident_app::{AppError, Config, ModelChoice, Session, Silent};

/// A private-network address: not loopback, and nothing listens there.
const REMOTE: &str = "http://10.255.255.1:9/v1";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A session over a fresh store holding the example records, whose
/// configuration also names a remote server as model `remote`.
fn session(dir: &Path) -> Session {
    let config = format!("[llm.models.remote]\nkind = \"openai\"\nendpoints = [\"{REMOTE}\"]\nmodel = \"m\"\n");
    let config = Config::parse(&config, Path::new("evident.toml")).unwrap();
    let session = Session::with_config(&dir.join("evident.db"), config);
    let request = IngestRequest {
        paths: vec![repo().join("examples/records")],
        format: evident_ingest::Format::Auto,
        dry_run: false,
    };
    let ingested = evident_app::records::ingest(&session, &request, &Silent).unwrap();
    assert!(ingested.refusal().is_none());
    session
}

/// The two ways to name a remote model: by URL and by configured name.
fn remote_choices() -> [ModelChoice; 2] {
    [ModelChoice::endpoint(REMOTE, "m"), ModelChoice::named("remote")]
}

/// A short question that carries patient text, to `model`.
fn chat_job(model: ModelChoice) -> ChatJob {
    ChatJob {
        prompt: "Summarise: HbA1c 8.2%".into(),
        model,
        schema: None,
        system: None,
        max_tokens: 16,
        temperature: 0.0,
        seed: None,
        use_cache: false,
        contains_patient_text: true,
    }
}

fn assert_refused<T: std::fmt::Debug>(job: &str, result: Result<T, AppError>) {
    let err = result.expect_err(job);
    assert!(err.is_privacy_refusal(), "{job}: expected a privacy refusal, got: {err}");
    assert!(err.to_string().contains("10.255.255.1"), "{job}: the refusal names the endpoint: {err}");
}

#[test]
fn a_chat_with_patient_text_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path());
    for model in remote_choices() {
        assert_refused("llm chat", evident_app::llm::chat(&session, &chat_job(model)));
    }
}

#[test]
fn a_screening_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path());
    for matching in remote_choices() {
        let request = TrialsRequest {
            trials: vec![repo().join("examples/trials/t2dm-example.yaml")],
            stdin: None,
            names: Default::default(),
            patients: Some(vec!["P001".into()]),
            out: dir.path().join("report"),
            run_name: None,
            options: ScreeningOptions { matching, use_cache: false, ..ScreeningOptions::default() },
        };
        assert_refused("match", evident_app::screening::screen_trials(&session, &request, &Silent));
    }
}

#[test]
fn an_n2c2_evaluation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path());
    let gold = dir.path().join("gold");
    std::fs::create_dir_all(&gold).unwrap();
    let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n<PatientMatching>\n<TEXT><![CDATA[\n\nRecord date: 2085-03-14\n\nOn aspirin for MI.\n\n]]></TEXT>\n<TAGS>\n<ASP-FOR-MI met=\"met\" />\n</TAGS>\n</PatientMatching>\n";
    std::fs::write(gold.join("101.xml"), xml).unwrap();
    for matching in remote_choices() {
        let options = ScreeningOptions { matching, use_cache: false, ..ScreeningOptions::default() };
        let request = N2c2Request { gold: gold.clone(), predicted: None, criteria: None, options };
        assert_refused("eval n2c2", evident_app::evaluation::evaluate_n2c2(&session, &request, &Silent));
    }
}

#[test]
fn a_trialgpt_evaluation_is_refused() {
    let annotations = repo().join("../shared/data/trialgpt/criterion_annotations_dev.json");
    assert!(annotations.is_file(), "{} is missing: the tests read the shared data", annotations.display());
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path());
    for matching in remote_choices() {
        let request = TrialgptRequest {
            annotations: annotations.clone(),
            qrels: None,
            limit_patients: Some(1),
            topics: vec![],
            out: dir.path().join("eval"),
            baseline: None,
            options: ScreeningOptions { matching, use_cache: false, ..ScreeningOptions::default() },
            label_correction: false,
            save_correction: None,
            threshold_calibration: false,
            save_thresholds: None,
        };
        assert_refused("eval trialgpt", evident_app::evaluation::evaluate_trialgpt(&session, &request, &Silent));
    }
}

#[test]
fn a_chart_question_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path());
    for model in remote_choices() {
        let request = evident_app::chart::AskRequest {
            patient_id: "P001".into(),
            question: "What is the most recent HbA1c?".into(),
            answer_type: None,
            as_of: None,
            method: "agent".into(),
            skills_dir: None,
            criteria_file: None,
            model,
            use_cache: false,
            temperature: None,
            seed: None,
            out_dir: None,
        };
        assert_refused("ask", evident_app::chart::ask(&session, &request));
    }
}

#[test]
fn the_same_requests_go_out_when_the_user_allows_remote_endpoints() {
    // Allowed, the request is sent and fails on the network instead: the
    // refusal above is the guard, not an unreachable address.
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path());
    let model = ModelChoice { allow_remote: true, ..ModelChoice::endpoint("http://127.0.0.1:9/v1", "m") };
    let err = evident_app::llm::chat(&session, &chat_job(model)).unwrap_err();
    assert!(!err.is_privacy_refusal() && err.llm_error().is_some(), "{err}");
}

/// Source files outside the application and model layers that name a
/// provider constructor, the recorder or the guard.
#[test]
fn only_the_application_and_model_layers_build_models() {
    let needles = [
        "OpenAiChatModel::new",
        "LlamaChatModel::load",
        "RecordingModel::new",
        "open_chat_model(",
        "open_endpoint(",
        "check_destination(",
    ];
    let allowed = ["crates/app/src/", "crates/llm/", "crates/recorder/"];
    let mut offenders = Vec::new();
    let crates = repo().join("crates");
    let mut stack = vec![crates.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(repo()).unwrap().to_string_lossy().replace('\\', "/");
            // Tests may build fakes and real models directly.
            if allowed.iter().any(|a| relative.starts_with(a)) || relative.contains("/tests/") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for needle in needles {
                if text.contains(needle) {
                    offenders.push(format!("{relative}: {needle}"));
                }
            }
        }
    }
    assert!(offenders.is_empty(), "models are built outside crates/app and the model layer:\n{}", offenders.join("\n"));
}
