//! `evident labs PATIENT [--concept NAME] [--since DATE]`: lab values in time
//! order, with the canonical concept each maps to.

use evident_model::labs::LabCatalogue;
use evident_store::LabQuery;

use crate::commands::Context;
use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct Args {
    pub patient: String,
    /// A concept name, alias or LOINC code (e.g. "creatinine", "HbA1c", "2160-0").
    #[arg(long)]
    pub concept: Option<String>,
    /// Only values at or after this date (YYYY-MM-DD).
    #[arg(long)]
    pub since: Option<String>,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Outcome> {
    let store = ctx.open_store()?;
    if store.patient(&args.patient)?.is_none() {
        anyhow::bail!(
            "patient {:?} is not in the store {}; `evident patients` lists them",
            args.patient,
            ctx.cli.db.display()
        );
    }
    let catalogue = LabCatalogue::builtin();
    let concept_ids = match &args.concept {
        None => None,
        Some(name) => {
            let exact = catalogue.resolve(name, Some(name.as_str()));
            let found: Vec<_> = match exact {
                Some(c) => vec![c],
                None => catalogue.find(name),
            };
            if found.is_empty() {
                anyhow::bail!("--concept {name:?} matches no lab concept; try a common name such as \"creatinine\" or a LOINC code");
            }
            Some(found.iter().map(|c| c.id.clone()).collect())
        }
    };
    let since = match &args.since {
        None => None,
        Some(text) => Some(
            evident_ingest::parse_datetime(text)
                .ok_or_else(|| anyhow::anyhow!("--since {text:?} is not a date (expected YYYY-MM-DD)"))?,
        ),
    };
    let labs = store.labs(&LabQuery { patient_id: args.patient.clone(), concept_ids, since })?;
    if ctx.json() {
        let rows: Vec<_> = labs
            .iter()
            .map(|l| {
                let concept = l.concept_id.as_deref().and_then(|id| catalogue.get(id)).map(|c| c.name.clone());
                serde_json::json!({ "concept": concept, "lab": l })
            })
            .collect();
        crate::output::print_json(&rows)?;
    } else {
        for l in &labs {
            let concept = l
                .concept_id
                .as_deref()
                .and_then(|id| catalogue.get(id))
                .map(|c| c.name.as_str())
                .unwrap_or("(unmapped)");
            let value = l.value_num.map(|v| v.to_string()).or_else(|| l.value_text.clone()).unwrap_or_default();
            let range = match (l.ref_low, l.ref_high, &l.ref_text) {
                (Some(lo), Some(hi), _) => format!(" (ref {lo}-{hi})"),
                (_, _, Some(t)) => format!(" (ref {t})"),
                _ => String::new(),
            };
            let flag = l.flag.as_deref().map(|f| format!(" [{f}]")).unwrap_or_default();
            println!(
                "{}  {:<28} {:<32} {} {}{range}{flag}",
                l.time.format("%Y-%m-%d %H:%M"),
                concept,
                l.original_name,
                value,
                l.unit.as_deref().unwrap_or("")
            );
        }
        println!("{} value(s)", labs.len());
    }
    Ok(if labs.is_empty() { Outcome::NothingFound } else { Outcome::Found })
}
