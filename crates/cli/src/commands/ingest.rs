//! `evident ingest PATH... [--format F] [--dry-run]`: reads records into the
//! store, one transaction per file; any problem in a file keeps the whole
//! file out and makes the command exit 2 after reporting every problem.

use std::path::PathBuf;

use evident_app::records::IngestRequest;
use evident_ingest::Format;

use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Files or folders to ingest.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// auto, text (notes + manifest), fhir, mimic, n2c2 or trialgpt.
    #[arg(long, default_value = "auto")]
    pub format: Format,
    /// Read and check everything, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    let request = IngestRequest { paths: args.paths.clone(), format: args.format, dry_run: args.dry_run };
    let ingested = evident_app::records::ingest(&ctx.session, &request, &ctx.bars())?;
    ctx.print(&ingested)?;
    if let Some(refusal) = ingested.refusal() {
        if !ctx.json {
            for problem in ingested.report.problems() {
                eprintln!("error: {problem}");
            }
        }
        anyhow::bail!(refusal);
    }
    Ok(Exit::found_if(ingested.found_anything()))
}
