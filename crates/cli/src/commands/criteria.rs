//! `evident criteria`: trial criteria as coordinators hold them. `split`
//! reads eligibility text (or a ClinicalTrials.gov study, or a set) and
//! writes an Evident criteria set to edit.

use std::path::PathBuf;

use evident_app::screening::{split_criteria, SplitRequest, TrialNames, TrialSource};

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

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    match &args.command {
        Sub::Split(a) => {
            let stdin = if a.file.as_os_str() == "-" {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                    .map_err(|e| anyhow::anyhow!("cannot read the criteria from standard input: {e}"))?;
                Some(text)
            } else {
                None
            };
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
