//! Readers for real record formats.
