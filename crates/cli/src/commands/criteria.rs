//! `evident criteria`: trial criteria as coordinators hold them. `split`
//! reads eligibility text (or a ClinicalTrials.gov study, or a set) and
//! writes an Evident criteria set to edit; `compile` has a model propose a
//! check per criterion, marked proposed until a person reviews it.

use std::path::PathBuf;

use evident_app::screening::{compile_criteria, split_criteria, CompileRequest, SplitRequest, TrialNames, TrialSource};
use evident_app::ModelChoice;

use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(clap::Subcommand, Debug)]
pub enum Sub {
    /// Split eligibility text ("Inclusion Criteria:" / "Exclusion Criteria:"
    /// with bulleted or numbered items) into an Evident criteria set.
    Split(SplitArgs),
    /// Have a model propose a check over the structured record for each
    /// criterion that has none; proposals are validated and marked proposed.
    Compile(CompileArgs),
}

#[derive(clap::Args, Debug)]
pub struct CompileArgs {
    /// The trial, in any form `evident match` reads (`-`: standard input).
    pub trial: PathBuf,
    /// Write the set with its proposed checks here (YAML); default: print it.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The trial id of criteria given as text (default: the file name).
    #[arg(long)]
    pub trial_id: Option<String>,
    #[arg(long)]
    pub title: Option<String>,
    /// The model that proposes (default: the embedded default model).
    #[arg(long, conflicts_with = "endpoint")]
    pub model: Option<String>,
    /// An OpenAI-compatible endpoint; criteria are not patient data, so it may be remote.
    #[arg(long)]
    pub endpoint: Option<String>,
    #[arg(long, default_value = "default", requires = "endpoint")]
    pub endpoint_model: String,
    /// Do not answer from (or add to) the model cache.
    #[arg(long)]
    pub no_cache: bool,
}

#[derive(clap::Args, Debug)]
pub struct SplitArgs {
    /// The criteria: a .txt/.md file, `-` for standard input, or a
    /// ClinicalTrials.gov API v2 study JSON.
    pub file: PathBuf,
    /// Write the set here (YAML); default: print it.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The trial id (default: the file name).
    #[arg(long)]
    pub trial_id: Option<String>,
    #[arg(long)]
    pub title: Option<String>,
}

fn stdin_for(path: &std::path::Path) -> anyhow::Result<Option<String>> {
    if path.as_os_str() != "-" {
        return Ok(None);
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .map_err(|e| anyhow::anyhow!("cannot read the criteria from standard input: {e}"))?;
    Ok(Some(text))
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    match &args.command {
        Sub::Compile(a) => {
            let stdin = stdin_for(&a.trial)?;
            let request = CompileRequest {
                source: TrialSource::from_path(&a.trial, stdin.as_deref()),
                names: TrialNames { trial_id: a.trial_id.clone(), title: a.title.clone() },
                out: a.out.clone(),
                model: ModelChoice {
                    model: a.model.clone(),
                    endpoint: a.endpoint.clone(),
                    endpoint_model: a.endpoint_model.clone(),
                    // Compilation requests carry criteria, never patient text.
                    allow_remote: false,
                },
                use_cache: !a.no_cache,
            };
            ctx.print(&compile_criteria(&ctx.session, &request)?)?;
            Ok(Exit::Found)
        }
        Sub::Split(a) => {
            let stdin = stdin_for(&a.file)?;
            let request = SplitRequest {
                source: TrialSource::from_path(&a.file, stdin.as_deref()),
                names: TrialNames { trial_id: a.trial_id.clone(), title: a.title.clone() },
                out: a.out.clone(),
            };
            ctx.print(&split_criteria(&request)?)?;
            Ok(Exit::Found)
        }
    }
}
