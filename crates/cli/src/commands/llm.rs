//! `evident llm chat` (a quick check of any model, with an optional JSON
//! Schema) and `evident llm serve` (an OpenAI-compatible endpoint over the
//! embedded models). Chat calls are cached and recorded under a run.

use std::io::Write;
use std::path::PathBuf;

use evident_app::llm::{ChatJob, ServeJob};

use crate::args::ModelArgs;
use crate::commands::Context;
use crate::Exit;

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
    #[command(flatten)]
    llm: ModelArgs,
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

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    match &args.command {
        LlmCommand::Chat(a) => chat(ctx, a),
        LlmCommand::Serve(a) => serve(ctx, a),
    }
}

fn chat(ctx: &Context, args: &ChatArgs) -> anyhow::Result<Exit> {
    let job = ChatJob {
        prompt: args.prompt.clone(),
        model: args.llm.choice(),
        schema: args.schema.clone(),
        system: args.system.clone(),
        max_tokens: args.max_tokens,
        temperature: args.temperature,
        seed: args.seed,
        use_cache: !args.no_cache,
        contains_patient_text: !args.no_patient_text,
    };
    ctx.print(&evident_app::llm::chat(&ctx.session, &job)?)?;
    Ok(Exit::Found)
}

fn serve(ctx: &Context, args: &ServeArgs) -> anyhow::Result<Exit> {
    let job = ServeJob {
        address: format!("{}:{}", args.host, args.port),
        models: args.models.clone(),
        workers: args.workers,
        embeddings: !args.no_embeddings,
    };
    let serving = evident_app::llm::serve(&ctx.session, &job)?;
    if let Some(why) = &serving.embeddings_unavailable {
        eprintln!("warning: not serving embeddings: {why}");
    }
    println!("listening on http://{}/v1", serving.server.addr);
    std::io::stdout().flush()?;
    serving.server.wait();
    Ok(Exit::Found)
}
