//! Statistics on a table: read a CSV, pick columns, run one estimator of
//! `evident-stats`. (Being moved here from the CLI.)
