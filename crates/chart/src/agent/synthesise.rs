//! Phase IV: the numbered context and the two-line answer (also every
//! comparator's answer step).

use std::collections::BTreeSet;

use super::*;
use crate::answer::parse_two_line;

/// A numbered node as the synthesis prompt shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ShownNode {
    pub number: usize,
    pub header: String,
    pub text: String,
}

/// Numbers the nodes (de-duplicated by key; sections by section id) and
/// shortens them to fit `budget_tokens` in all, newest first kept whole.
pub(crate) fn number_nodes(nodes: &[Evidence], budget_tokens: usize) -> (Vec<Evidence>, Vec<ShownNode>) {
    let mut seen = BTreeSet::new();
    let unique: Vec<Evidence> = nodes.iter().filter(|n| seen.insert(n.key())).cloned().collect();
    let mut used = 0usize;
    let mut kept = Vec::new();
    let mut shown = Vec::new();
    for n in unique {
        let t = (n.text().len() + n.header().len()).div_ceil(3) + 6;
        if used + t > budget_tokens && !kept.is_empty() {
            break;
        }
        used += t;
        kept.push(n.clone());
        shown.push(ShownNode {
            number: kept.len(),
            header: n.header(),
            text: n.text().split_whitespace().collect::<Vec<_>>().join(" "),
        });
    }
    (kept, shown)
}

/// Phase IV (and every comparator's answer step): asks for the two-line
/// answer, repairing once, then records a pipeline failure.
pub(crate) fn synthesise(
    ctx: &Ctx<'_>,
    system: String,
    user: String,
    max_tokens: u32,
    trace: &mut Trace,
) -> Result<Result<(TwoLine, String), PipelineFailure>, ChartError> {
    let mut messages = vec![Message::system(system), Message::user(user)];
    let mut last_error = String::new();
    for attempt in 1..=2u32 {
        let request = ctx.request(messages.clone(), max_tokens);
        let response = ctx.model.chat.chat(&request)?;
        trace.synthesis_attempts = attempt;
        match parse_two_line(&response.text) {
            Ok(two) => return Ok(Ok((two, response.text))),
            Err(e) => {
                last_error = e.0.clone();
                if attempt == 2 {
                    let failure = PipelineFailure {
                        model: ctx.model.model_id().to_string(),
                        raw_text: response.text,
                        errors: vec![last_error.clone()],
                        attempts: 2,
                        request,
                    };
                    ctx.model.failures.record_pipeline_failure(&failure)?;
                    return Ok(Err(failure));
                }
                messages.push(Message::assistant(response.text));
                messages.push(Message::user(ctx.render("chart_answer_repair.prompt.md", json!({"error": e.0}))?));
            }
        }
    }
    unreachable!("the loop returns on its second attempt ({last_error})")
}
