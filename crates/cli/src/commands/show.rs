//! `evident show PATIENT`: a patient's documents and a lab summary (latest
//! value per concept).

use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    pub patient: String,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    let overview = evident_app::records::show(&ctx.session, &args.patient)?;
    ctx.print(&overview)?;
    Ok(Exit::Found)
}
