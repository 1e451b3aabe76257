//! Why a statistics job stopped, in the user's terms: the CSV file, the
//! user's column and the CSV line (the header is line 1), never an
//! estimator's argument name or a row counted among complete cases.

use std::path::PathBuf;

use evident_stats::StatsError;

/// How many non-numeric cells a refusal lists before it counts the rest.
const CELLS_SHOWN: usize = 20;

/// Why a statistics job did not produce a report.
#[derive(Debug, thiserror::Error)]
pub enum StatsJobError {
    /// The CSV file could not be opened or its header read.
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: csv::Error,
    },
    /// A record the CSV parser could not read.
    #[error("{}:{line}: malformed CSV record", path.display())]
    MalformedRecord {
        path: PathBuf,
        line: u64,
        #[source]
        source: csv::Error,
    },
    /// Cells that are neither numbers nor a missing-value marker, each as
    /// `file:line: column name = "text" is not a number; ...`.
    #[error("{}", not_numeric(problems))]
    NotNumeric { problems: Vec<String> },
    /// An estimator refused the data. `context` names the file (and, for
    /// `describe`, the variable); it is left out when the estimator's
    /// message already names `file:line`.
    #[error("{}", estimator(context, error))]
    Estimator { context: String, error: Box<StatsError> },
    /// Fisher's exact test was asked of a table larger than 2x2.
    #[error("{source_name}: Fisher's exact test needs a 2x2 table; {row} has {row_levels} values and {col} has {col_levels}")]
    NotTwoByTwo { source_name: String, row: String, col: String, row_levels: usize, col_levels: usize },
    /// A plot could not be written.
    #[error("cannot write {}", path.display())]
    WriteSvg {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn not_numeric(problems: &[String]) -> String {
    let shown = problems.iter().take(CELLS_SHOWN).map(String::as_str).collect::<Vec<_>>().join("\n");
    let more =
        if problems.len() > CELLS_SHOWN { format!("\n({} more)", problems.len() - CELLS_SHOWN) } else { String::new() };
    format!("{} non-numeric values:\n{shown}{more}", problems.len())
}

fn estimator(context: &str, error: &StatsError) -> String {
    if error.names_source() {
        error.to_string()
    } else {
        format!("{context}: {error}")
    }
}
