//! Benchmark of the embedded provider (not a test): for each pulled chat
//! model, prompt and generation tokens per second, unconstrained and
//! JSON-schema constrained; Evident's total time per call against the time
//! spent inside llama.cpp's own `llama_decode` in the same calls; and
//! asking 13 criteria one at a time over one patient record with and
//! without KV-cache prefix reuse, and with and without fast-forwarding the
//! tokens the schema forces (the answers of the two compared); and the
//! same 13 criteria asked by concurrent callers with 1, 2 and 4 slots
//! ([`LlamaConfig::parallel`]: their tokens decoded in one batch).
//!
//! Run: `cargo run --release -p evident-llm --features llama --example llm_bench [MODEL...]`;
//! `EVIDENT_BENCH_ONLY=parallel` runs the last section alone.

use evident_llm::models;
use evident_llm::providers::llama::{LlamaChatModel, LlamaConfig, LlamaTimings};
use evident_llm::{ChatRequest, Message, SchemaValidator};
use serde_json::json;

const RECORD: &str = "Patient: 64-year-old woman. History: type 2 diabetes mellitus diagnosed 2011, \
hypertension, hyperlipidaemia. Invasive ductal carcinoma of the left breast, stage IIA, ER positive, \
PR positive, HER2 negative, diagnosed March 2023; lumpectomy April 2023 followed by adjuvant \
radiotherapy; started letrozole 2.5 mg daily June 2023. Medications: metformin 1000 mg twice daily, \
lisinopril 20 mg daily, atorvastatin 40 mg daily, letrozole 2.5 mg daily. Labs (2024-01-15): HbA1c \
7.4%, creatinine 0.9 mg/dL, eGFR 78, ALT 22 U/L, AST 25 U/L, haemoglobin 12.8 g/dL, platelets \
240 x10^9/L, ANC 3.1 x10^9/L. ECOG performance status 0. No history of stroke or myocardial \
infarction. Former smoker, 10 pack-years, quit 2005. No known drug allergies. Not pregnant; \
postmenopausal since 2010. No prior chemotherapy. No brain metastases on MRI 2023-02.";

const CRITERIA: [&str; 13] = [
    "Age 18 years or older.",
    "Histologically confirmed HER2-negative breast cancer.",
    "ECOG performance status 0 or 1.",
    "Adequate renal function (eGFR at least 60).",
    "Adequate hepatic function (ALT and AST at most 2.5 times the upper limit of normal).",
    "No prior chemotherapy for breast cancer.",
    "Postmenopausal status.",
    "No active brain metastases.",
    "No history of stroke in the last 6 months.",
    "Not pregnant or breastfeeding.",
    "HbA1c below 8%.",
    "Currently receiving endocrine therapy.",
    "Absolute neutrophil count at least 1.5 x10^9/L.",
];

fn schema() -> serde_json::Value {
    json!({"type": "object", "properties": {
        "decision": {"type": "string", "enum": ["met", "not met", "unknown"]},
        "evidence": {"type": "string", "maxLength": 200}},
        "required": ["decision", "evidence"], "additionalProperties": false})
}

fn criterion_request(criterion: &str, constrained: bool, max_tokens: u32) -> ChatRequest {
    let mut r = ChatRequest::new(vec![
        Message::system("You screen patients for clinical trials. Answer in JSON with keys decision (met, not met or unknown) and evidence (a short quote from the record)."),
        Message::user(format!("Patient record:\n{RECORD}\n\nCriterion: {criterion}")),
    ])
    .with_max_tokens(max_tokens);
    if constrained {
        r = r.with_schema(schema());
    }
    r
}

fn load(path: &std::path::Path, reuse: bool, fast_forward: bool) -> LlamaChatModel {
    load_parallel(path, reuse, fast_forward, 1)
}

fn load_parallel(path: &std::path::Path, reuse: bool, fast_forward: bool, parallel: u32) -> LlamaChatModel {
    let mut config = LlamaConfig::new(path);
    config.parallel = parallel;
    config.threads = Some(std::env::var("EVIDENT_BENCH_THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(2));
    config.prefix_reuse = reuse;
    config.fast_forward = fast_forward;
    LlamaChatModel::load(config).expect("load model")
}

#[derive(Default)]
struct Sum {
    t: LlamaTimings,
    n: u32,
}

impl Sum {
    fn add(&mut self, t: LlamaTimings) {
        self.t.prompt_tokens += t.prompt_tokens - t.reused_prompt_tokens;
        self.t.completion_tokens += t.completion_tokens;
        self.t.prompt_decode_ms += t.prompt_decode_ms;
        self.t.generation_decode_ms += t.generation_decode_ms;
        self.t.sampling_ms += t.sampling_ms;
        self.t.total_ms += t.total_ms;
        self.n += 1;
    }
    fn report(&self, label: &str) {
        let t = &self.t;
        let gen_ms = t.total_ms - t.prompt_decode_ms;
        println!(
            "| {label} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {:.3} |",
            self.n,
            t.prompt_tokens as f64 / (t.prompt_decode_ms / 1000.0),
            t.completion_tokens as f64 / (gen_ms / 1000.0),
            t.completion_tokens as f64 / (t.generation_decode_ms / 1000.0),
            t.total_ms,
            t.prompt_decode_ms + t.generation_decode_ms,
            (t.prompt_decode_ms + t.generation_decode_ms) / t.total_ms,
        );
    }
}

fn bench_calls() -> usize {
    std::env::var("EVIDENT_BENCH_CALLS").ok().and_then(|t| t.parse().ok()).unwrap_or(4)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<String> = if args.is_empty() {
        models::known_models()
            .into_iter()
            .filter(|m| m.kind == models::ModelKind::Chat && m.is_present())
            .map(|m| m.name)
            .collect()
    } else {
        args
    };
    for name in names {
        let path = models::resolve_gguf(&name).expect("model present");
        println!("\n## {name}\n");
        if std::env::var("EVIDENT_BENCH_ONLY").as_deref() == Ok("parallel") {
            bench_parallel(&path);
            continue;
        }
        let started = std::time::Instant::now();
        let model = load(&path, false, true);
        println!("load: {:.0} ms\n", started.elapsed().as_secs_f64() * 1000.0);
        println!("| mode | calls | prompt tok/s | generation tok/s (Evident) | generation tok/s (llama_decode only) | Evident total ms | llama_decode ms | decode / total |");
        println!("|---|---|---|---|---|---|---|---|");
        let validator = SchemaValidator::new(&schema()).unwrap();
        for constrained in [false, true] {
            let mut sum = Sum::default();
            let mut valid = 0;
            // Without prefix reuse every call reads the whole prompt.
            for criterion in CRITERIA.iter().take(bench_calls()) {
                let (r, t) = model.chat_with_timings(&criterion_request(criterion, constrained, 48)).unwrap();
                valid += usize::from(validator.check(&r.text).is_ok());
                sum.add(t);
            }
            sum.report(if constrained { "constrained (JSON schema)" } else { "unconstrained" });
            println!("<!-- {name} constrained={constrained}: {valid}/{} schema-valid -->", bench_calls());
        }
        drop(model);
        println!("\nprefix reuse, 13 criteria one at a time over one record, constrained, 48 tokens max:\n");
        println!("| KV prefix reuse | total s | prompt tokens decoded | reused |");
        println!("|---|---|---|---|");
        for reuse in [false, true] {
            let model = load(&path, reuse, true);
            let (mut total, mut decoded, mut reused) = (0.0, 0, 0);
            for criterion in CRITERIA {
                let (_, t) = model.chat_with_timings(&criterion_request(criterion, true, 48)).unwrap();
                total += t.total_ms;
                decoded += t.prompt_tokens - t.reused_prompt_tokens;
                reused += t.reused_prompt_tokens;
            }
            println!("| {} | {:.1} | {decoded} | {reused} |", if reuse { "on" } else { "off" }, total / 1000.0);
        }
        println!("\nfast-forward, the same 13 criteria, prefix reuse on, constrained, 96 tokens max:\n");
        println!(
            "| fast-forward | total s | generation s | completion tokens | forced (batched) | answers as with it off |"
        );
        println!("|---|---|---|---|---|---|");
        let mut answers_off: Vec<String> = Vec::new();
        for fast_forward in [false, true] {
            let model = load(&path, true, fast_forward);
            let (mut total, mut generation, mut completion, mut forced, mut same) = (0.0, 0.0, 0, 0, 0);
            for (i, criterion) in CRITERIA.iter().enumerate() {
                let (r, t) = model.chat_with_timings(&criterion_request(criterion, true, 96)).unwrap();
                total += t.total_ms;
                generation += t.total_ms - t.prompt_decode_ms;
                completion += t.completion_tokens;
                forced += t.forced_tokens;
                if fast_forward {
                    let off = answers_off.get(i).map(String::as_str).unwrap_or_default();
                    same += usize::from(off == r.text);
                    if off != r.text {
                        println!("<!-- criterion {}: off {off} | on {} -->", i + 1, r.text);
                    }
                } else {
                    answers_off.push(r.text);
                }
            }
            let same = if fast_forward { format!("{same} of {}", CRITERIA.len()) } else { "-".into() };
            println!(
                "| {} | {:.1} | {:.1} | {completion} | {forced} | {same} |",
                if fast_forward { "on" } else { "off" },
                total / 1000.0,
                generation / 1000.0
            );
        }
        bench_parallel(&path);
    }
}

/// The 13 criteria asked by as many threads as the model has slots (one
/// criterion at a time per thread, all at once), 96 tokens max, prefix
/// reuse and fast-forward on; the answers compared with one slot's.
fn bench_parallel(path: &std::path::Path) {
    println!("\nconcurrent callers, the 13 criteria, constrained, 96 tokens max, prefix reuse and fast-forward on:\n");
    println!("| slots (parallel) and callers | wall s | completion tokens | tokens/s | decodes shared | choosing tokens s | answers as with one slot |");
    println!("|---|---|---|---|---|---|---|");
    let mut single: Vec<String> = Vec::new();
    for parallel in [1u32, 2, 4] {
        let model = load_parallel(path, true, true, parallel);
        let next = std::sync::atomic::AtomicUsize::new(0);
        let answers = std::sync::Mutex::new(vec![(String::new(), LlamaTimings::default()); CRITERIA.len()]);
        let started = std::time::Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..parallel {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(criterion) = CRITERIA.get(i) else { break };
                    let (r, t) = model.chat_with_timings(&criterion_request(criterion, true, 96)).unwrap();
                    answers.lock().unwrap()[i] = (r.text, t);
                });
            }
        });
        let wall = started.elapsed().as_secs_f64();
        let answers = answers.into_inner().unwrap();
        let completion: u32 = answers.iter().map(|(_, t)| t.completion_tokens).sum();
        let shared: u32 = answers.iter().map(|(_, t)| t.shared_decodes).sum();
        let sampling: f64 = answers.iter().map(|(_, t)| t.sampling_ms).sum::<f64>() / 1000.0;
        let same = if parallel == 1 {
            single = answers.iter().map(|(a, _)| a.clone()).collect();
            "-".to_string()
        } else {
            for (i, ((a, _), b)) in answers.iter().zip(&single).enumerate() {
                if a != b {
                    println!("<!-- criterion {}: one slot {b} | {parallel} slots {a} -->", i + 1);
                }
            }
            format!("{} of {}", answers.iter().zip(&single).filter(|((a, _), b)| a == *b).count(), CRITERIA.len())
        };
        println!(
            "| {parallel} | {wall:.1} | {completion} | {:.1} | {shared} | {sampling:.1} | {same} |",
            completion as f64 / wall
        );
    }
}
