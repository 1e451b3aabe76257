//! `evident serve`: the review UI and JSON API over the store, on
//! loopback unless `--bind` names another address and `--insecure-remote`
//! allows it. The server (crates/server) calls the same app jobs as the
//! other commands.

use anyhow::anyhow;

use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address and port to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8080")]
    bind: String,
    /// Allow a non-loopback --bind. This server has no TLS: logins and
    /// patient text cross the network in the clear. Prefer a TLS proxy on
    /// the same host.
    #[arg(long)]
    insecure_remote: bool,
    /// A folder of `evident study` run folders to show on the study pages.
    #[arg(long, value_name = "DIR")]
    studies: Option<std::path::PathBuf>,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    let addr = evident_server::check_bind(&args.bind, args.insecure_remote).map_err(|e| anyhow!("{e}"))?;
    let session = evident_app::Session::with_config(ctx.session.db_path(), ctx.session.config().clone());
    let db = ctx.session.db_path().display().to_string();
    let mut state = evident_server::AppState::new(session);
    if let Some(dir) = &args.studies {
        if !dir.is_dir() {
            return Err(anyhow!("--studies {}: not a folder", dir.display()));
        }
        state = state.with_studies(dir.clone());
    }
    evident_server::serve_state(state, addr, |bound| {
        eprintln!("evident serve: store {db}; open http://{bound}/ (Ctrl-C stops)");
    })
    .map_err(|e| anyhow!("cannot serve on {addr}: {e}"))?;
    Ok(Exit::Found)
}
