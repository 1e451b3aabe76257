//! The application layer: what the `evident` binary (and, next, the
//! server) calls. A [`Session`] is opened over one store and one
//! configuration; the jobs are functions over it that return typed results
//! (`Serialize`, and `Display` where a text rendering is wanted). Jobs
//! never print, never read argv and never pick exit codes: progress goes
//! to a [`ProgressSink`], and output is the caller's.
//!
//! - [`records`]: ingest, patients, show, labs.
//! - [`search`]: search one patient's record; embed sections.
//! - [`screening`]: screen patients against trials and write the report.
//! - [`evaluation`]: TrialGPT's annotations and the n2c2 2018 metric.
//! - [`knowledge`]: MAKAR's local knowledge base.
//! - [`llm`]: ask a model, serve the local models, the model registry.
//! - [`runs`]: what model runs cost, and their traces.
//! - [`stats`]: one estimator on a CSV table.
//! - [`study`]: an observational-study task run by the study agent; RWE-bench's metrics over tasks.
//! - [`review`]: stored screening runs under review: worklist, a patient's decisions, overrides, sign-offs, audit, exports.
//! - [`users`]: local accounts, roles and login sessions for the review service.
//! - [`db`]: load MIMIC-IV into SQLite or PostgreSQL; one read-only query.
//! - [`chart`]: one question about one patient's record, answered with citations.
//! - [`jobs`]: background jobs of the review service (a screening, a chart question), their state in the store.
//! - [`studies`]: study run folders and their evidence bundles, for the review service.
//! - [`synthetic`]: a synthetic screening run (no model) for the review service's load and fault tests.
//!
//! Every model is built in [`models`]: the recorder, the cache and the
//! privacy guard are applied there, whichever job asks. A new job (a chart
//! question, a study) is a new module here with a request type, a result
//! type and a function over the [`Session`]; the front ends then only add
//! argument parsing and printing.

pub mod chart;
mod config;
pub mod db;
mod error;
pub mod evaluation;
pub mod evaluations;
pub mod exemplars;
pub mod jobs;
pub mod knowledge;
pub mod llm;
mod models;
mod progress;
pub mod records;
pub mod review;
pub mod runs;
pub mod screening;
pub mod search;
mod session;
pub mod stats;
pub mod studies;
pub mod study;
pub mod synthetic;
pub mod users;

pub use config::{Config, RetrievalConfig};
pub use error::{AppError, Result};
pub use models::{EmbedderChoice, ModelChoice};
pub use progress::{ProgressEvent, ProgressSink, Silent};
pub use session::{Session, SharedStore};
