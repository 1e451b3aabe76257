//! `evident llm chat` (a quick check of any model, with an optional JSON
//! Schema) and `evident llm serve` (an OpenAI-compatible endpoint over the
//! embedded models). Chat calls are cached and recorded under a run.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use evident_llm::serve::ServeModels;
use evident_llm::{ChatModel, ChatRequest, LlmConfig, Message, Prompts, RecordingModel, StructuredOutcome};

use crate::commands::Context;
use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: LlmCommand,
}

#[derive(clap::Subcommand, Debug)]
enum LlmCommand {
    /// Ask a model one question.
    Chat(ChatArgs),
    /// Serve local models over an OpenAI-compatible HTTP API.
    Serve(ServeArgs),
}

#[derive(clap::Args, Debug)]
struct ChatArgs {
    /// The question.
    prompt: String,
    /// A known model, a GGUF path, or a name under [llm.models].
    #[arg(long, conflicts_with = "endpoint")]
    model: Option<String>,
    /// An OpenAI-compatible base URL (e.g. http://127.0.0.1:8080/v1).
    #[arg(long)]
    endpoint: Option<String>,
    /// The model name sent to --endpoint.
    #[arg(long, default_value = "default", requires = "endpoint")]
    endpoint_model: String,
    /// A JSON Schema file: the answer must be JSON valid against it.
    #[arg(long)]
    schema: Option<PathBuf>,
    /// A system message.
    #[arg(long)]
    system: Option<String>,
    #[arg(long, default_value_t = 512)]
    max_tokens: u32,
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    #[arg(long)]
    seed: Option<u64>,
    /// Do not answer from (or add to) the model cache.
    #[arg(long)]
    no_cache: bool,
    /// Allow the prompt to reach a non-loopback endpoint.
    #[arg(long)]
    allow_remote: bool,
    /// Declare that the prompt carries no patient text.
    #[arg(long)]
    no_patient_text: bool,
}

#[derive(clap::Args, Debug)]
struct ServeArgs {
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Address to bind; loopback by default.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Chat models to serve (known names or GGUF paths); default: the default model.
    #[arg(long = "model")]
    models: Vec<String>,
    /// Request threads.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Do not serve the minilm-l6 embeddings.
    #[arg(long)]
    no_embeddings: bool,
}

pub fn llm_config(ctx: &Context) -> anyhow::Result<LlmConfig> {
    let value = match &ctx.config.llm {
        Some(v) => Some(serde_json::to_value(v).context("evident.toml [llm]")?),
        None => None,
    };
    Ok(LlmConfig::from_value(value)?)
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Outcome> {
    match &args.command {
        LlmCommand::Chat(a) => chat(ctx, a),
        LlmCommand::Serve(a) => serve(ctx, a),
    }
}

fn chat(ctx: &Context, args: &ChatArgs) -> anyhow::Result<Outcome> {
    let config = llm_config(ctx)?;
    let (name, model): (String, Arc<dyn ChatModel>) = match &args.endpoint {
        Some(url) => (url.clone(), config.open_endpoint(url, &args.endpoint_model, args.allow_remote)?),
        None => {
            let name = args.model.clone().unwrap_or_else(|| config.default_model_name());
            let model = config.open_chat_model(&name, args.allow_remote)?;
            (name, model)
        }
    };
    let store = Arc::new(Mutex::new(ctx.open_store()?));
    let run_id = store.lock().unwrap().begin_model_run("llm chat")?;
    let price = config.price_for(&name, model.model_id());
    let recorded =
        RecordingModel::new(model, store.clone(), &run_id).with_cache(config.cache && !args.no_cache).with_price(price);
    let prompts = Prompts::builtin(config.prompts_dir.as_deref());
    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(Message::system(system));
    }
    let result = match &args.schema {
        None => {
            messages.push(Message::user(&args.prompt));
            let request = request(messages, args);
            let response = recorded.chat(&request)?;
            if ctx.json() {
                crate::output::print_json(&serde_json::json!({"run": run_id, "response": response}))?;
            } else {
                println!("{}", response.text);
            }
            Ok(Outcome::Found)
        }
        Some(path) => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read schema {}", path.display()))?;
            let schema: serde_json::Value =
                serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
            let schema_text = serde_json::to_string_pretty(&schema)?;
            let question = prompts
                .render("json_answer.prompt.md", serde_json::json!({"question": args.prompt, "schema": schema_text}))?;
            messages.push(Message::user(question));
            let request = request(messages, args);
            match evident_llm::chat_json(&recorded, &request, &schema, config.repair_policy(), &prompts)? {
                StructuredOutcome::Valid { value, attempts, .. } => {
                    if ctx.json() {
                        crate::output::print_json(
                            &serde_json::json!({"run": run_id, "value": value, "attempts": attempts}),
                        )?;
                    } else {
                        println!("{}", serde_json::to_string_pretty(&value)?);
                    }
                    Ok(Outcome::Found)
                }
                StructuredOutcome::PipelineFailure(f) => Err(anyhow::anyhow!(
                    "pipeline failure (recorded in run {run_id}): the answer was not valid against {} after {} attempts: {}; raw text: {}",
                    path.display(),
                    f.attempts,
                    f.errors.join("; "),
                    f.raw_text
                )),
            }
        }
    };
    store.lock().unwrap().finish_model_run(&run_id)?;
    result
}

fn request(messages: Vec<Message>, args: &ChatArgs) -> ChatRequest {
    let mut request = ChatRequest::new(messages).with_max_tokens(args.max_tokens);
    request.temperature = args.temperature;
    request.seed = args.seed;
    request.contains_patient_text = !args.no_patient_text;
    request
}

fn serve(ctx: &Context, args: &ServeArgs) -> anyhow::Result<Outcome> {
    let config = llm_config(ctx)?;
    let names = if args.models.is_empty() { vec![config.default_model_name()] } else { args.models.clone() };
    let mut chat = Vec::new();
    for name in names {
        let model = config.open_chat_model(&name, false)?;
        chat.push((name, model));
    }
    let embedder: Option<(String, Arc<dyn evident_llm::Embedder>)> = if args.no_embeddings {
        None
    } else {
        match evident_embed::MiniLmEmbedder::load_default(evident_embed::EmbedderConfig::default()) {
            Ok(e) => Some(("minilm-l6".to_string(), Arc::new(e) as Arc<dyn evident_llm::Embedder>)),
            Err(e) => {
                eprintln!("warning: not serving embeddings: {e}");
                None
            }
        }
    };
    let addr = format!("{}:{}", args.host, args.port);
    let server = evident_llm::serve::serve(&addr, ServeModels { chat, embedder }, args.workers)?;
    println!("listening on http://{}/v1", server.addr);
    std::io::stdout().flush()?;
    server.wait();
    Ok(Outcome::Found)
}
