//! Statistics for observational studies on plain numeric tables: Table 1
//! descriptives, two-sample and contingency tests, linear / logistic /
//! Poisson regression, Cox models, Kaplan–Meier and log-rank, propensity
//! score matching and weighting, ROC AUC, and SVG plots of the results.
//!
//! The crate sees numbers and column names only: no IO, no free text, no
//! clock. Every estimator follows the algorithm of the R function it is
//! checked against (named in each module) so that the results agree with R
//! to 1e-6 relative; `tests/` runs R at test time to prove it.
//!
//! Errors ([`StatsError`]) name the estimator's argument and the 0-based row
//! of the slices it was given; a caller that knows where the rows came from
//! places them in its own file, columns and lines with
//! [`StatsError::locate`]. Option enums (ties, CI type, matching order,
//! estimand, outcome model) parse from and print as their spellings
//! ([`spelling`]).

// `!(a > b)` is used on purpose: it is true for NaN, which must fail the check.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod describe;
pub mod dist;
pub mod error;
pub mod frame;
pub mod glm;
pub mod htest;
pub mod linalg;
pub mod propensity;
pub mod roc;
pub mod spelling;
pub mod survival;
pub mod svg;
pub mod zeroin;

pub use error::{Origin, Result, Row, StatsError};
pub use frame::{CompleteRows, Frame, MissingReport};
