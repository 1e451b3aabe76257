//! `evident patients`: the patients in the store with document and lab counts.

use crate::commands::Context;
use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(ctx: &Context, _args: &Args) -> anyhow::Result<Outcome> {
    let store = ctx.open_store()?;
    let patients = store.patients()?;
    if ctx.json() {
        crate::output::print_json(&patients)?;
    } else {
        println!(
            "{:<40} {:<9} {:<7} {:>9} {:>8}  {:<10}  {:<10}",
            "patient", "source", "sex", "documents", "labs", "first", "last"
        );
        for p in &patients {
            let day = |d: &Option<chrono::NaiveDateTime>| d.map(|d| d.date().to_string()).unwrap_or_else(|| "-".into());
            println!(
                "{:<40} {:<9} {:<7} {:>9} {:>8}  {:<10}  {:<10}",
                p.patient.id,
                p.patient.source,
                p.patient.sex.as_deref().unwrap_or("-"),
                p.documents,
                p.labs,
                day(&p.first_date),
                day(&p.last_date)
            );
        }
        println!("{} patient(s)", patients.len());
    }
    Ok(if patients.is_empty() { Outcome::NothingFound } else { Outcome::Found })
}
