//! Real-world-evidence studies in the shape of RWE-bench (Evident's third
//! job): a task is a study protocol (background and objective, research
//! methods, questions) plus a database URL. This crate holds the task format
//! and its validation ([`task`]), the gold answers an independent reference
//! analysis wrote ([`gold`]), the environment's answer sheet that gates
//! fill-in fields behind their choice questions ([`sheet`]), RWE-bench's
//! metrics ([`metrics`]), the check that a protocol does not leak its results
//! ([`leak`]), the R sandbox ([`sandbox`]), the cohort audit ([`audit`]) with
//! Evident's compiled judge beside the paper's ([`compiled_judge`]), the
//! agent ([`agent`]), Evident's reader of a result against a choice's
//! options ([`reading`]), the typed tools' outputs as data ([`analysis`]),
//! and the evidence bundle ([`bundle`]) with its page ([`report`]) and
//! the database's hash in it ([`database_hash`]).

pub mod agent;
pub mod analysis;
pub mod audit;
pub mod bundle;
pub mod cohort_eval;
pub mod compiled_judge;
pub mod database;
pub mod database_hash;
pub mod gold;
pub mod leak;
pub mod metrics;
pub mod provenance;
pub mod reading;
pub mod report;
pub mod sandbox;
pub mod sheet;
pub mod task;

/// The database layer studies run on, re-exported for callers of this crate.
pub use evident_db;
pub use gold::{Gold, GoldError};
pub use metrics::{aggregate_runs, score_task, MetricSummary, RunMetrics, TaskScore};
pub use sheet::{AnswerSheet, AnswerValue, RecordedAnswer, SubmitItem, SubmitOutcome, SubmitReport};
pub use task::{Field, FieldKind, Protocol, PvalueMode, PvalueSign, Question, ResultType, Task, TaskError};
