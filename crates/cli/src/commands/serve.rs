//! `evident serve`: the review UI and JSON API over the store, on
//! loopback unless `--bind` names another address and TLS
//! (`--tls-cert`/`--tls-key`) or `--insecure-remote` allows it. The
//! server (crates/server) calls the same app jobs as the other commands.

use anyhow::anyhow;

use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address and port to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8080")]
    bind: String,
    /// Serve HTTPS with this certificate chain (PEM, the server's
    /// certificate first). Needs --tls-key. Read once at start: a renewed
    /// certificate needs a restart.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Allow a non-loopback --bind without TLS: logins and patient text
    /// cross the network in the clear. Prefer --tls-cert/--tls-key.
    #[arg(long)]
    insecure_remote: bool,
    /// A folder of `evident study` run folders to show on the study pages.
    #[arg(long, value_name = "DIR")]
    studies: Option<std::path::PathBuf>,
    /// A folder of `evident eval` output folders (trialgpt, chart, rwe) to
    /// show on the evaluation pages and over the API.
    #[arg(long, value_name = "DIR")]
    evaluations: Option<std::path::PathBuf>,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(evident_server::tls::load(cert, key).map_err(|e| anyhow!("{e}"))?),
        _ => None,
    };
    let addr =
        evident_server::check_bind(&args.bind, tls.is_some(), args.insecure_remote).map_err(|e| anyhow!("{e}"))?;
    let session = evident_app::Session::with_config(ctx.session.db_path(), ctx.session.config().clone());
    let db = ctx.session.db_path().display().to_string();
    let mut state = evident_server::AppState::new(session);
    if let Some(dir) = &args.studies {
        if !dir.is_dir() {
            return Err(anyhow!("--studies {}: not a folder", dir.display()));
        }
        state = state.with_studies(dir.clone());
    }
    if let Some(dir) = &args.evaluations {
        if !dir.is_dir() {
            return Err(anyhow!("--evaluations {}: not a folder", dir.display()));
        }
        state = state.with_evaluations(dir.clone());
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    if let Some(config) = tls {
        state = state.with_tls(config);
    }
    evident_server::serve_state(state, addr, |bound| {
        eprintln!("evident serve: store {db}; open {scheme}://{bound}/ (Ctrl-C stops)");
    })
    .map_err(|e| anyhow!("cannot serve on {addr}: {e}"))?;
    Ok(Exit::Found)
}
