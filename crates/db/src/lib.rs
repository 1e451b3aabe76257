//! Clinical databases for studies. A MIMIC-IV folder is loaded into SQLite
//! (`sqlite:PATH`, the embedded default) or PostgreSQL (`postgres://...`)
//! in the official schemas and table names (`mimiciv_hosp.*`,
//! `mimiciv_icu.*`) with column types, primary keys and the indexes cohort
//! queries need, plus derived tables under `mimiciv_derived` ([`load_mimic`]);
//! agents then read it through a [`ReadOnlyConnection`] that cannot write
//! and whose every statement is row-, time- and text-limited.
//!
//! Modules: [`url`] (which database), `schema` (the MIMIC-IV tables, from
//! `data/mimiciv_schema.sql`), `source` (reading and checking a table file),
//! `load` (the load, all or nothing), [`sqlite`] (the SQLite file layout and
//! load target), `postgres` (connection, load target, value decoding),
//! `derived` (the `mimiciv_derived` tables), `readonly` (agent
//! connections), `query` (values, limits and results), [`testing`] (the
//! test PostgreSQL server, for any crate's tests).

mod derived;
mod error;
mod load;
mod postgres;
mod query;
mod readonly;
mod schema;
mod source;
pub mod sqlite;
pub mod testing;
pub mod url;

pub use error::DbError;
pub use load::{load_mimic, LoadEvent, LoadReport, TableLoad};
pub use query::{ColumnInfo, QueryLimits, QueryResult, TableInfo, Value};
pub use readonly::ReadOnlyConnection;
pub use url::{DatabaseUrl, PostgresParams};

/// The derived tables a load builds under `mimiciv_derived`, in build order.
pub const DERIVED_TABLES: [&str; 4] = ["age", "icustay_detail", "first_day_lab", "charlson"];
