//! Phase I: the question assessment and the skill selection.

use evident_llm::{chat_json, RepairPolicy, StructuredAnswer};

use super::*;
use crate::skills::SkillCategory;

/// Phase I.
pub(crate) fn assess(ctx: &Ctx<'_>) -> Result<Assessment, ChartError> {
    let listed = ctx.skills.selectable_for(ctx.question);
    let selectable: Vec<Value> = listed
        .iter()
        .map(|s| json!({"id": s.id, "category": format!("{:?}", s.category).to_lowercase(), "summary": s.summary}))
        .collect();
    let ids: Vec<&str> = listed.iter().map(|s| s.id.as_str()).collect();
    let schema = json!({"type": "object", "properties": {
        "intent": {"type": "string", "maxLength": 120},
        "hypotheses": short_list_schema(2),
        "required_information": short_list_schema(3),
        "missing_information": short_list_schema(3),
        "complexity": {"type": "string", "enum": ["low", "medium", "high"]},
        "skills": {"type": "array", "items": {"type": "string", "enum": ids}, "maxItems": 6}},
        "required": ["intent", "required_information", "missing_information", "complexity", "skills"],
        "additionalProperties": false});
    let user = ctx.render(
        "chart_assess.prompt.md",
        json!({"question": ctx.question, "answer_schema": ctx.answer_schema(), "as_of": ctx.as_of(), "skills": selectable}),
    )?;
    let request = ctx.request(vec![Message::system(ctx.baseline()?), Message::user(user)], 384);
    let answer = chat_json(ctx.model, &request, &schema, RepairPolicy { repair_attempts: 1 }, ctx.prompts)?;
    let mut a = match answer {
        StructuredAnswer::Valid { value, .. } => Assessment {
            intent: value["intent"].as_str().unwrap_or_default().to_string(),
            hypotheses: strings(&value, "hypotheses"),
            required_information: strings(&value, "required_information"),
            missing_information: strings(&value, "missing_information"),
            complexity: value["complexity"].as_str().unwrap_or_default().to_string(),
            chosen_skills: strings(&value, "skills"),
            ..Assessment::default()
        },
        StructuredAnswer::PipelineFailure(_) => Assessment { failed: true, ..Assessment::default() },
    };
    a.selection =
        if ctx.config.all_skills { ctx.skills.select_all() } else { ctx.skills.select(ctx.question, &a.chosen_skills) };
    Ok(a)
}

/// The categories shown at tool execution (Phases II and III).
pub(super) const EXECUTION_SKILLS: [SkillCategory; 2] = [SkillCategory::Workflow, SkillCategory::Parsing];

/// The workflow and parsing skills, those in `summarised` by their summary.
pub(super) fn workflow_block(
    ctx: &Ctx<'_>,
    selection: &Selection,
    summarised: &std::collections::BTreeSet<String>,
) -> String {
    if !ctx.config.use_skills {
        return String::new();
    }
    ctx.skills.render_fitted(selection, &EXECUTION_SKILLS, summarised)
}

pub(crate) fn style_block(ctx: &Ctx<'_>, selection: &Selection) -> String {
    if !ctx.config.use_skills {
        return String::new();
    }
    ctx.skills.render(selection, &[SkillCategory::Style, SkillCategory::Policy])
}
