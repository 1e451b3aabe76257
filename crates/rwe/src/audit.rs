//! The cohort audit.
