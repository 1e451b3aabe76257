//! `evident labs PATIENT [--concept NAME] [--since DATE]`: lab values in time
//! order, with the canonical concept each maps to.

use evident_app::records::LabRequest;

use crate::commands::Context;
use crate::Exit;

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

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    let request =
        LabRequest { patient_id: args.patient.clone(), concept: args.concept.clone(), since: args.since.clone() };
    let values = evident_app::records::labs(&ctx.session, &request)?;
    ctx.print(&values)?;
    Ok(Exit::found_if(!values.rows.is_empty()))
}
