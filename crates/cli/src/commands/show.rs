//! `evident show PATIENT`: a patient's documents and a lab summary (latest
//! value per concept).

use std::collections::BTreeMap;

use evident_model::labs::LabCatalogue;
use evident_store::{LabQuery, LabRecord};
use serde::Serialize;

use crate::commands::Context;
use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct Args {
    pub patient: String,
}

#[derive(Serialize)]
struct LabSummary {
    concept_id: Option<String>,
    concept: String,
    count: usize,
    latest: LabRecord,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Outcome> {
    let store = ctx.open_store()?;
    let Some(patient) = store.patient(&args.patient)? else {
        anyhow::bail!(
            "patient {:?} is not in the store {}; `evident patients` lists them",
            args.patient,
            ctx.cli.db.display()
        );
    };
    let documents = store.documents(&patient.id)?;
    let labs = store.labs(&LabQuery { patient_id: patient.id.clone(), ..LabQuery::default() })?;
    let summary = summarise_labs(labs);
    if ctx.json() {
        crate::output::print_json(&serde_json::json!({ "patient": patient, "documents": documents, "labs": summary }))?;
        return Ok(Outcome::Found);
    }
    println!("patient {} (source {})", patient.id, patient.source);
    if let Some(name) = &patient.display_name {
        println!("  name: {name}");
    }
    if let Some(sex) = &patient.sex {
        println!("  sex: {sex}");
    }
    if let Some(birth) = &patient.birth_date {
        println!("  born: {birth}");
    }
    println!("\n{} document(s):", documents.len());
    println!("  {:<10}  {:<17}  {:>9}  {:<44}  title", "date", "kind", "sentences", "id");
    for d in &documents {
        let date = d.date.map(|d| d.date().to_string()).unwrap_or_else(|| "-".into());
        println!("  {date:<10}  {:<17}  {:>9}  {:<44}  {}", d.kind.as_str(), d.sentences, d.id, d.title);
    }
    println!("\nlabs: {} concept(s)", summary.len());
    for s in &summary {
        let value =
            s.latest.value_num.map(|v| v.to_string()).or_else(|| s.latest.value_text.clone()).unwrap_or_default();
        println!(
            "  {:<40} n={:<5} latest {} {} on {}",
            s.concept,
            s.count,
            value,
            s.latest.unit.as_deref().unwrap_or(""),
            s.latest.time.date()
        );
    }
    Ok(Outcome::Found)
}

/// One row per concept (unmapped names each their own row), latest value.
fn summarise_labs(labs: Vec<LabRecord>) -> Vec<LabSummary> {
    let catalogue = LabCatalogue::builtin();
    let mut by_concept: BTreeMap<String, LabSummary> = BTreeMap::new();
    for lab in labs {
        let concept = match &lab.concept_id {
            Some(id) => catalogue.get(id).map(|c| c.name.clone()).unwrap_or_else(|| id.clone()),
            None => format!("{} (unmapped)", lab.original_name),
        };
        let entry = by_concept.entry(concept.clone()).or_insert_with(|| LabSummary {
            concept_id: lab.concept_id.clone(),
            concept,
            count: 0,
            latest: lab.clone(),
        });
        entry.count += 1;
        if lab.time >= entry.latest.time {
            entry.latest = lab;
        }
    }
    by_concept.into_values().collect()
}
