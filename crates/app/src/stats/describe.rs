//! Table 1: each variable summarised (n, mean, SD, median, IQR, range and,
//! for few distinct values, counts), or split by a 0/1 group with the
//! standardised mean difference. Each variable keeps its own complete rows.

use std::fmt;

use evident_stats::describe::{self, ContinuousSummary, LevelCount, TableOneRow};
use evident_stats::MissingReport;
use serde::Serialize;

use super::error::StatsJobError;
use super::request::DescribeRequest;
use super::table::CsvTable;
use super::text::missing_line;

/// `{"describe": [...]}`: one entry per variable.
#[derive(Debug, Clone, Serialize)]
pub struct DescribeReport {
    pub describe: Vec<DescribedVariable>,
}

/// One variable of a Table 1.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum DescribedVariable {
    /// Split by the group.
    ByGroup { row: TableOneRow, missing: MissingReport },
    /// Overall; `levels` only when the variable has at most `max_levels`
    /// distinct values (else empty).
    Overall { variable: String, summary: ContinuousSummary, levels: Vec<LevelCount>, missing: MissingReport },
}

pub(super) fn describe(table: &CsvTable, request: &DescribeRequest) -> Result<DescribeReport, StatsJobError> {
    let group = request.group.as_deref();
    let mut names: Vec<String> = if request.columns.is_empty() {
        table.names().iter().filter(|n| Some(n.as_str()) != group).cloned().collect()
    } else {
        request.columns.clone()
    };
    names.dedup();
    let mut variables = Vec::new();
    for name in &names {
        let context = format!("{}: column {name}", table.source_name());
        let mut wanted = vec![name.as_str()];
        wanted.extend(group);
        let kept = table.complete_in(&context, "describe", &wanted)?;
        let arguments = [("x", name.as_str()), ("group", group.unwrap_or_default())];
        let variable = match group {
            Some(_) => {
                let row = describe::table_one_row(name, &kept.columns[0], &kept.columns[1], request.max_levels)
                    .map_err(|e| kept.locate(e, &arguments))?;
                DescribedVariable::ByGroup { row, missing: kept.missing }
            }
            None => {
                let summary = describe::summarize(&kept.columns[0]).map_err(|e| kept.locate(e, &arguments))?;
                let mut levels = describe::counts(&kept.columns[0]);
                if levels.len() > request.max_levels {
                    levels.clear();
                }
                DescribedVariable::Overall { variable: name.clone(), summary, levels, missing: kept.missing }
            }
        };
        variables.push(variable);
    }
    Ok(DescribeReport { describe: variables })
}

impl fmt::Display for DescribeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for variable in &self.describe {
            match variable {
                DescribedVariable::ByGroup { row, missing } => {
                    let (g0, g1) = (&row.group0, &row.group1);
                    writeln!(
                        f,
                        "{} ({:?}): group 0 mean {:.4} (SD {:.4}), median {:.4} [IQR {:.4}-{:.4}] | group 1 mean {:.4} (SD {:.4}), median {:.4} [IQR {:.4}-{:.4}] | SMD {:.4} | {}",
                        row.variable, row.kind, g0.mean, g0.sd, g0.median, g0.q1, g0.q3,
                        g1.mean, g1.sd, g1.median, g1.q1, g1.q3, row.smd, missing_line(missing)
                    )?;
                    for (all, g0, g1) in &row.levels {
                        writeln!(
                            f,
                            "  = {}: {} ({:.1}%) | group 0 {} ({:.1}%) | group 1 {} ({:.1}%)",
                            all.level, all.count, all.percent, g0.count, g0.percent, g1.count, g1.percent
                        )?;
                    }
                }
                DescribedVariable::Overall { variable, summary: s, levels, missing } => {
                    writeln!(
                        f,
                        "{variable}: n {} mean {:.4} SD {:.4} median {:.4} IQR {:.4}-{:.4} min {:.4} max {:.4} | {}",
                        s.n,
                        s.mean,
                        s.sd,
                        s.median,
                        s.q1,
                        s.q3,
                        s.min,
                        s.max,
                        missing_line(missing)
                    )?;
                    for l in levels {
                        writeln!(f, "  = {}: {} ({:.1}%)", l.level, l.count, l.percent)?;
                    }
                }
            }
        }
        Ok(())
    }
}
