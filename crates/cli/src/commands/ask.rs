//! `evident ask PATIENT "QUESTION"`: one question about one patient's
//! whole record, answered in the two-line format (`Answer:` /
//! `Reasoning:` with citations `[n]`), each citation shown with the stored
//! text or lab value it resolves to. `--json` prints the answer with its
//! citations, the retrieved-but-not-cited documents, the trace and usage.

use std::path::PathBuf;

use evident_app::chart::AskRequest;

use crate::args::ModelArgs;
use crate::commands::Context;
use crate::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    pub patient: String,
    pub question: String,
    /// The reference date (YYYY-MM-DD): nothing dated after it is seen.
    /// Default: the date of the patient's last document.
    #[arg(long)]
    pub as_of: Option<String>,
    /// The question's answer schema (yes_no, yes_no_unclear, date,
    /// category, score, date_list, interval_list): stated in every method's answer prompt
    /// and, on the embedded model, the form the answer is decoded in.
    #[arg(long)]
    pub answer_type: Option<String>,
    /// agent, baseline, full-context (the newest documents and labs that
    /// fit the model's context: raise `[llm] context_size` to show more),
    /// simple-rag (dense top 10, MiniLM),
    /// advanced-rag (up to 8 rewritten queries, hybrid trigram BM25 +
    /// MiniLM, reranked, top 20), iterative-rag (sub-queries, hybrid,
    /// reranked, sufficiency loop of up to 3 rounds), or an ablation of the agent
    /// (agent-no-skills, agent-all-skills, agent-no-filters,
    /// agent-no-calculators, agent-no-memory, agent-reactive), or
    /// agent-paper-broadening (the paper's broadening, never without the
    /// kind filter), agent-paper-plan (the paper's plan schema, without
    /// Evident's typed plan), agent-paper-scope (scopes as the model
    /// wrote them, without Evident's whole-history scope), or
    /// agent-paper-queries (report queries as the model wrote them,
    /// without Evident's expansions from the parsing skills), or
    /// agent-reasoning-first (Evident's variant: on the embedded model the
    /// reasoning is decoded before the answer).
    #[arg(long, default_value = "agent")]
    pub method: String,
    /// A folder of skill files (Markdown with front matter) added to the
    /// built-in skill library.
    #[arg(long)]
    pub skills: Option<PathBuf>,
    /// A JSON file of criteria sets (the format of
    /// crates/chart/data/criteria_sets.json) added to the built-in ones: a
    /// question that names one of them by a phrase of its `named_by` gets
    /// its check.
    #[arg(long)]
    pub criteria: Option<PathBuf>,
    /// Write answer.json and answer.html (the answer, its cited passages
    /// highlighted in their documents, and the trace) into this folder.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub llm: ModelArgs,
    /// Do not serve answers from the model cache.
    #[arg(long)]
    pub no_cache: bool,
    /// The agent's (and its ablations') sampling temperature, 0-2 (default
    /// 0, greedy); the comparators sample at the paper's 0.2.
    #[arg(long)]
    pub temperature: Option<f32>,
    /// The sampling seed (default: the model's own; the embedded model's is
    /// fixed, so a sampled answer repeats until the seed changes).
    #[arg(long)]
    pub seed: Option<u64>,
}

pub fn run(ctx: &Context, args: &Args) -> anyhow::Result<Exit> {
    let request = AskRequest {
        patient_id: args.patient.clone(),
        question: args.question.clone(),
        answer_type: args.answer_type.clone(),
        as_of: args.as_of.clone(),
        method: args.method.clone(),
        skills_dir: args.skills.clone(),
        criteria_file: args.criteria.clone(),
        model: args.llm.choice(),
        use_cache: !args.no_cache,
        temperature: args.temperature,
        seed: args.seed,
        out_dir: args.out.clone(),
    };
    let result = evident_app::chart::ask(&ctx.session, &request).map_err(|e| match e {
        evident_app::AppError::Input(m) if m.starts_with("reference date") => {
            anyhow::anyhow!("--as-of: {}", m.trim_start_matches("reference date "))
        }
        evident_app::AppError::Input(m) if m.starts_with("skill file") => anyhow::anyhow!("--skills: {m}"),
        evident_app::AppError::Input(m) if m.starts_with("criteria file") => anyhow::anyhow!("--criteria: {m}"),
        evident_app::AppError::Input(m) if m.starts_with("answer type") => anyhow::anyhow!("--answer-type: {m}"),
        evident_app::AppError::Input(m) if m.starts_with("temperature") => anyhow::anyhow!("--temperature: {m}"),
        other => other.into(),
    })?;
    ctx.print(&result)?;
    Ok(Exit::found_if(result.answer.status == "answered"))
}
