//! The application layer: what the `evident` binary (and, next, the
//! server) calls. A [`Session`] is opened over one store and one
//! configuration; the jobs are functions over it that return typed,
//! serialisable results. Jobs never print, never read argv and never pick
//! exit codes: progress goes through callbacks, and output is the caller's.

pub mod stats;
