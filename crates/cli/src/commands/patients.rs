//! `evident patients`: the patients in the store with document and lab counts.

use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(ctx: &Context, _args: &Args) -> anyhow::Result<Exit> {
    let list = evident_app::records::patients(&ctx.session)?;
    ctx.print(&list)?;
    Ok(Exit::found_if(!list.patients.is_empty()))
}
