//! Statistics for observational studies on plain numeric tables.
