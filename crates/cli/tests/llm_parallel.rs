//! Slots on the default embedded model (`LlamaConfig::parallel`):
//! concurrent requests are decoded together in one batch, each in its own
//! sequence of the KV cache, and neither sees the other's text; a request
//! that arrives while another slot holds its prompt's prefix starts from a
//! copy of that prefix instead of decoding it again.

#[path = "llm_support.rs"]
mod support;

use std::sync::Barrier;

use evident_llm::providers::llama::{LlamaChatModel, LlamaConfig, LlamaTimings};
use evident_llm::{ChatModel, ChatRequest, Message};

/// A shared instruction long enough (over 64 tokens) to be worth copying.
const SYSTEM: &str = "You are a clerk in a hospital's records office. You read one registration \
form at a time and answer questions about it. Answer with exactly what the form says, copying \
names letter for letter, and add nothing else: no greeting, no explanation, no punctuation at \
the end. If the form does not say, answer unknown. Forms are confidential; never mention \
another form.";

fn request(name: &str) -> ChatRequest {
    ChatRequest::new(vec![
        Message::system(SYSTEM),
        Message::user(format!("Registration form. Patient name: {name}. Ward: 4B.\n\nWhat is the patient's name?")),
    ])
    .with_max_tokens(16)
}

fn model(parallel: u32) -> LlamaChatModel {
    let mut config = LlamaConfig::new(support::pulled_gguf(evident_llm::models::DEFAULT_CHAT_MODEL));
    config.parallel = parallel;
    LlamaChatModel::load(config).unwrap()
}

#[test]
fn concurrent_requests_share_batches_and_keep_to_their_own_text() {
    let model = model(2);
    assert_eq!(model.parallelism(), 2);
    // Slot 0 learns the shared instruction.
    let (first, _) = model.chat_with_timings(&request("Alice Marchetti")).unwrap();
    assert!(first.text.contains("Alice Marchetti"), "{}", first.text);

    let names = ["Bruno Okafor", "Carla Lindqvist"];
    let barrier = Barrier::new(names.len());
    let answers: Vec<(String, LlamaTimings)> = std::thread::scope(|scope| {
        let handles: Vec<_> = names
            .iter()
            .map(|name| {
                let (model, barrier) = (&model, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let (answer, timings) = model.chat_with_timings(&request(name)).unwrap();
                    (answer.text, timings)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (name, (text, timings)) in names.iter().zip(&answers) {
        let other = names.iter().find(|n| *n != name).unwrap();
        assert!(text.contains(name), "{name}: {text}");
        assert!(!text.contains(other) && !text.contains("Alice"), "{name}: {text}");
        // Either slot starts from the instruction: its own cache or a copy.
        assert!(timings.reused_prompt_tokens >= 64, "{name}: {timings:?}");
        assert!(timings.reused_prompt_tokens < timings.prompt_tokens, "{name}: {timings:?}");
    }
    let shared: u32 = answers.iter().map(|(_, t)| t.shared_decodes).sum();
    assert!(shared > 0, "the two requests were never decoded together: {answers:?}");
}

#[test]
fn one_slot_answers_one_request_at_a_time() {
    let model = model(1);
    assert_eq!(model.parallelism(), 1);
    let answers: Vec<LlamaTimings> = std::thread::scope(|scope| {
        let handles: Vec<_> = ["Dana Whitfield", "Emeka Nwosu"]
            .into_iter()
            .map(|name| {
                let model = &model;
                scope.spawn(move || model.chat_with_timings(&request(name)).unwrap().1)
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(answers.iter().all(|t| t.shared_decodes == 0), "{answers:?}");
}
