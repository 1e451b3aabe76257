//! Evaluation datasets and metrics.
