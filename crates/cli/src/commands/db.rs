//! `evident db load mimic DIR --into URL`: loads a MIMIC-IV folder into
//! SQLite (`sqlite:PATH`) or PostgreSQL (`postgres://...`) and prints the
//! rows per table and the time; `evident db query URL SQL`: runs one
//! read-only statement and prints its rows; `evident db hash URL`: computes
//! the hash a study's evidence bundle carries and caches a PostgreSQL
//! content hash in the store. Each calls one `evident_app` job.

use std::path::PathBuf;
use std::time::Duration;

use evident_app::db::{LoadRequest, QueryRequest};
use evident_app::study::DatabaseHashMode;

use crate::args::hash_request;

use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: DbCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum DbCommand {
    /// Load a database from source files.
    Load {
        #[command(subcommand)]
        source: LoadSource,
    },
    /// Run one read-only SQL statement (SELECT, WITH ... SELECT) and print its rows.
    Query {
        /// sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE (for PostgreSQL, a
        /// role that may create roles: the statement runs as a read-only role made for it).
        url: String,
        /// The statement.
        sql: String,
        /// Rows printed at most.
        #[arg(long, default_value_t = 100)]
        max_rows: usize,
        /// Seconds the statement may run.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
    },
    /// Compute the hash a study's evidence bundle carries for this database and, for a
    /// PostgreSQL content hash, keep it in the store, so that every study run on the same
    /// database state reuses it (on the full MIMIC-IV, reading every row once takes hours).
    Hash {
        /// sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE (for PostgreSQL, a
        /// role that may create roles: the rows are read as a read-only role made for it).
        url: String,
        /// full (read every row now, and cache it), cached (reuse the cached hash of this
        /// state if there is one), catalogue (tables, columns, estimated row counts) or none.
        #[arg(long, default_value = "full", value_parser = DatabaseHashMode::NAMES)]
        method: String,
        /// Seconds the content hash may run (0: no limit).
        #[arg(long, default_value_t = 0)]
        timeout: u64,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum LoadSource {
    /// A MIMIC-IV folder (hosp/ and icu/, csv.gz as downloaded from PhysioNet), into the
    /// official schemas mimiciv_hosp and mimiciv_icu, with derived tables in mimiciv_derived.
    Mimic {
        /// The MIMIC-IV folder.
        dir: PathBuf,
        /// Where to load it: sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE.
        #[arg(long = "into", value_name = "URL")]
        into: String,
    },
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    match &args.command {
        DbCommand::Load { source: LoadSource::Mimic { dir, into } } => {
            let bars = ctx.bars();
            let summary = evident_app::db::load(&LoadRequest { source: dir.clone(), url: into.clone() }, &bars)?;
            drop(bars);
            ctx.print(&summary)?;
            Ok(Exit::Found)
        }
        DbCommand::Query { url, sql, max_rows, timeout } => {
            let request = QueryRequest {
                url: url.clone(),
                sql: sql.clone(),
                max_rows: *max_rows,
                timeout: Duration::from_secs(*timeout),
            };
            let output = evident_app::db::query(&request)?;
            ctx.print(&output)?;
            Ok(Exit::found_if(!output.0.rows.is_empty()))
        }
        DbCommand::Hash { url, method, timeout } => {
            let info = evident_app::study::database_hash(&ctx.session, url, &hash_request(method, *timeout))?;
            ctx.print(&info)?;
            Ok(Exit::found_if(info.sha256.is_some()))
        }
    }
}
