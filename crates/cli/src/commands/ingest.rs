//! `evident ingest PATH... [--format F] [--dry-run]`: reads records into the
//! store, one transaction per file; any problem in a file keeps the whole
//! file out and makes the command exit 2 after reporting every problem.

use std::path::PathBuf;

use evident_ingest::{Format, IngestReport, Progress, Unit};
use indicatif::{ProgressBar, ProgressStyle};

use crate::commands::Context;
use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Files or folders to ingest.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// auto, text (notes + manifest), fhir, mimic, n2c2 or trialgpt.
    #[arg(long, default_value = "auto")]
    pub format: Format,
    /// Read and check everything, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

struct Bar(ProgressBar);

impl Progress for Bar {
    fn start_unit(&self, unit: &Unit, index: usize, total: usize) {
        let name = unit.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        self.0.set_prefix(format!("[{}/{total}] {name}", index + 1));
        self.0.set_position(0);
        self.0.set_length(0);
    }
    fn documents_written(&self, done: usize, total: usize) {
        self.0.set_length(total as u64);
        self.0.set_position(done as u64);
    }
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Outcome> {
    let units = evident_ingest::plan(&args.paths, args.format)?;
    let mut store = ctx.open_store()?;
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix} {bar:30} {pos}/{len} documents {elapsed}").expect("valid template"),
    );
    let report = evident_ingest::ingest(&mut store, &units, args.dry_run, &Bar(bar.clone()))?;
    bar.finish_and_clear();
    if ctx.json() {
        crate::output::print_json(&report)?;
    } else {
        print_summary(&report);
    }
    let problems: Vec<_> = report.problems().collect();
    if !problems.is_empty() {
        if !ctx.json() {
            for p in &problems {
                eprintln!("error: {p}");
            }
        }
        let files = report.units.iter().filter(|u| !u.problems.is_empty()).count();
        anyhow::bail!(
            "{} problem(s) in {files} file(s); those files were not ingested and the store is unchanged for them",
            problems.len()
        );
    }
    let anything = report.units.iter().any(|u| {
        u.patients
            + u.documents_inserted
            + u.documents_replaced
            + u.documents_unchanged
            + u.labs_written
            + u.labs_unchanged
            > 0
    });
    Ok(if anything { Outcome::Found } else { Outcome::NothingFound })
}

fn print_summary(report: &IngestReport) {
    let verb = if report.dry_run { "would write" } else { "wrote" };
    let mut unmapped_total = std::collections::BTreeMap::<&str, usize>::new();
    for u in &report.units {
        let status = if !u.problems.is_empty() {
            format!("NOT INGESTED ({} problem(s))", u.problems.len())
        } else {
            format!(
                "{verb} {} patient(s), {} new / {} changed / {} unchanged document(s), {} lab value(s) ({} unchanged, {} unmapped)",
                u.patients, u.documents_inserted, u.documents_replaced, u.documents_unchanged, u.labs_written, u.labs_unchanged, u.labs_unmapped
            )
        };
        println!("{}: {status}", u.path.display());
        for (reason, n) in &u.skipped {
            println!("  skipped {n} {reason}");
        }
        for (name, n) in &u.unmapped_lab_names {
            *unmapped_total.entry(name).or_default() += n;
        }
    }
    if !unmapped_total.is_empty() {
        let rows: usize = unmapped_total.values().sum();
        println!(
            "lab names not mapped to a concept: {} name(s), {rows} value(s); most frequent:",
            unmapped_total.len()
        );
        let mut names: Vec<_> = unmapped_total.into_iter().collect();
        names.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        for (name, n) in names.iter().take(10) {
            println!("  {n:>7}  {name}");
        }
    }
}
