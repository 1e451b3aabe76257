//! `evident embed [--patient P | --all]`: computes the all-MiniLM-L6-v2
//! vectors that stored sections lack, with a progress bar, and stores them.
//! Running it again embeds nothing.

use evident_app::search::EmbedRequest;

use crate::args::EmbedderArgs;
use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["patient", "all"])))]
pub struct Args {
    /// Only this patient's sections.
    #[arg(long)]
    pub patient: Option<String>,
    /// Every section in the store.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub model: EmbedderArgs,
    /// Sections per stored batch.
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    let request =
        EmbedRequest { patient_id: args.patient.clone(), embedder: args.model.choice(), batch_size: args.batch_size };
    let embedded = evident_app::search::embed(&ctx.session, &request, &ctx.bars())?;
    ctx.print(&embedded)?;
    Ok(Exit::found_if(embedded.sections > 0))
}
