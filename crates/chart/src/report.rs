//! The HTML report of chart answers, as the paper's review application
//! showed them: one self-contained page per answered question (the answer,
//! the reasoning with its citations linked, each cited passage highlighted
//! in its document's stored text, the retrieved-but-not-cited documents
//! listed apart, the numbered context and the trace, collapsible), and an
//! index page for an evaluation (every question linking to its page, with
//! correct / partly correct / incorrect where a gold answer exists).
//!
//! Every string that comes from a record, a question or a model is
//! HTML-escaped; the pages carry no script and load nothing from outside.
//! Pages are written to a temporary file and renamed, so a page on disk is
//! whole or absent.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use evident_model::Document;
use evident_store::{Store, StoreError};
use serde::Serialize;

pub use evident_model::text::escape_html as esc;

use crate::{ChartAnswer, Citation, CitedSource, Evidence};

/// Characters of a document shown before the first and after the last
/// marked span (the whole document is one click away).
const EXCERPT_CONTEXT: usize = 700;
/// Documents longer than this are shown as the excerpt only.
const WHOLE_DOCUMENT_LIMIT: usize = 400_000;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write {}: {source}; check that the folder exists and is writable", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// One answered question on an evaluation's index page.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IndexEntry {
    /// The question's id in its bank (or any label).
    pub id: String,
    pub patient: String,
    pub method: String,
    /// Complexity level, when the bank gives one.
    pub level: Option<String>,
    pub category: Option<String>,
    pub question: String,
    /// The answer line, `None` for a pipeline failure.
    pub answer: Option<String>,
    /// `answered` or `pipeline_failure`.
    pub status: String,
    pub gold: Option<String>,
    /// The score against the gold answer (1 correct, 0 incorrect, between
    /// for a list's F1); `None` without a gold answer.
    pub score: Option<f64>,
    /// The answer page, relative to the index page; empty where there is none.
    pub href: String,
}

const STYLE: &str = r#"
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;color:#1d2327;line-height:1.45}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:2px solid #ccd;padding-bottom:.2rem}h3{font-size:1.05rem;margin-top:1.4rem}
table{border-collapse:collapse;width:100%;margin:.6rem 0}th,td{border:1px solid #d5d8dc;padding:.35rem .5rem;vertical-align:top;text-align:left;font-size:.92rem}
th{background:#f3f4f6}.muted{color:#666;font-size:.88rem}
.pill{display:inline-block;padding:.05rem .5rem;border-radius:.8rem;font-size:.85rem;font-weight:600;white-space:nowrap}
.correct,.answered{background:#d9f2e0;color:#145a2c}.incorrect,.pipeline_failure,.unsupported{background:#fadbd8;color:#7b1d14}.partly-correct,.no-gold{background:#fdf0c9;color:#6b4e00}
.answer{font-size:1.1rem;margin:.4rem 0}.reasoning{margin:.4rem 0 1rem}
mark{background:#ffe58a;padding:0 .1rem}.label{font-weight:700;color:#7a5b00;font-size:.8rem;vertical-align:super}
.doc{white-space:pre-wrap;margin:.3rem 0 .5rem;padding:.5rem .7rem;background:#fafafa;border-left:3px solid #c9d1d9;font-size:.9rem;max-height:40rem;overflow:auto}
.problem{color:#7b1d14;font-weight:600}details{margin:.3rem 0}summary{cursor:pointer;color:#2d5d9f}pre{white-space:pre-wrap;font-size:.82rem;background:#f6f8fa;padding:.5rem}
"#;

fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>",
        esc(title)
    )
}

fn pill(class: &str, text: &str) -> String {
    format!("<span class=\"pill {}\">{}</span>", esc(class), esc(text))
}

/// The reasoning, escaped, with each `[n]` linked to its citation.
fn linked_reasoning(reasoning: &str) -> String {
    let mut out = String::new();
    let mut rest = reasoning;
    while let Some(open) = rest.find('[') {
        out.push_str(&esc(&rest[..open]));
        let after = &rest[open + 1..];
        match after.find(']') {
            Some(close) if !after[..close].is_empty() && after[..close].chars().all(|c| c.is_ascii_digit()) => {
                let n = &after[..close];
                let _ = write!(out, "<a href=\"#cite-{n}\">[{n}]</a>");
                rest = &after[close + 1..];
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(&esc(rest));
    out
}

/// The documents a page shows: those cited (also through a calculation)
/// and those retrieved but not cited, read from the store.
pub fn documents_for(answer: &ChartAnswer, store: &Store) -> Result<BTreeMap<String, Document>, StoreError> {
    let mut ids = BTreeSet::new();
    for c in &answer.citations {
        if let Some(s) = &c.source {
            text_document_ids(s, &mut ids);
        }
    }
    ids.extend(answer.retrieved_not_cited.iter().map(|d| d.document_id.clone()));
    let mut out = BTreeMap::new();
    for id in ids {
        if let Some(doc) = store.document(&id)? {
            out.insert(id, doc);
        }
    }
    Ok(out)
}

fn text_document_ids(source: &CitedSource, ids: &mut BTreeSet<String>) {
    match source {
        CitedSource::Text { document_id, .. } => {
            ids.insert(document_id.clone());
        }
        CitedSource::Lab { .. } => {}
        CitedSource::Calculation { used, .. } => used.iter().for_each(|u| text_document_ids(u, ids)),
        CitedSource::Patient { .. } => {}
    }
}

/// A marked span of a document: byte range and the citation numbers
/// that cite it.
struct Span {
    start: usize,
    end: usize,
    number: usize,
}

fn spans_of(source: &CitedSource, number: usize, out: &mut BTreeMap<String, Vec<Span>>) {
    match source {
        CitedSource::Text { document_id, start, end, .. } => {
            out.entry(document_id.clone()).or_default().push(Span { start: *start, end: *end, number })
        }
        CitedSource::Lab { .. } => {}
        CitedSource::Calculation { used, .. } => used.iter().for_each(|u| spans_of(u, number, out)),
        CitedSource::Patient { .. } => {}
    }
}

/// The largest char boundary of `text` at or below `i`.
fn floor_boundary(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// `text[from..to]`, escaped, with the parts inside `spans` in `<mark>`
/// and a `[n]` label where each span begins (with the anchor the
/// citation table links to when `anchors`).
fn marked(text: &str, from: usize, to: usize, spans: &[Span], anchors: bool) -> String {
    let mut cuts: BTreeSet<usize> = [from, to].into();
    for s in spans {
        cuts.insert(s.start.clamp(from, to));
        cuts.insert(s.end.clamp(from, to));
    }
    let cuts: Vec<usize> = cuts.into_iter().collect();
    let mut out = String::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        for s in spans.iter().filter(|s| s.start == a) {
            let id = if anchors { format!(" id=\"passage-{}\"", s.number) } else { String::new() };
            let _ = write!(out, "<span class=\"label\"{id}>[{}]</span>", s.number);
        }
        let Some(piece) = text.get(a..b) else { continue };
        let covering: Vec<String> =
            spans.iter().filter(|s| s.start <= a && b <= s.end).map(|s| format!("[{}]", s.number)).collect();
        if covering.is_empty() {
            out.push_str(&esc(piece));
        } else {
            let _ = write!(out, "<mark title=\"cited as {}\">{}</mark>", esc(&covering.join(" ")), esc(piece));
        }
    }
    out
}

fn write_document(h: &mut String, doc: &Document, spans: &[Span]) {
    let valid: Vec<&Span> =
        spans.iter().filter(|s| s.start < s.end && doc.text.get(s.start..s.end).is_some()).collect();
    let spans: Vec<Span> = valid.iter().map(|s| Span { start: s.start, end: s.end, number: s.number }).collect();
    let numbers: BTreeSet<usize> = spans.iter().map(|s| s.number).collect();
    let _ = write!(
        h,
        "<h3>{} <span class=\"muted\">({}, {}; {} characters) cited as {}</span></h3>",
        esc(&doc.title),
        esc(doc.kind.as_str()),
        esc(&doc.date.map(|d| d.format("%Y-%m-%d").to_string()).unwrap_or_else(|| "undated".into())),
        doc.text.len(),
        esc(&numbers.iter().map(|n| format!("[{n}]")).collect::<Vec<_>>().join(" ")),
    );
    let _ = write!(h, "<div class=\"muted\">document <code>{}</code></div>", esc(&doc.id));
    let first = spans.iter().map(|s| s.start).min().unwrap_or(0);
    let last = spans.iter().map(|s| s.end).max().unwrap_or(0);
    let from = floor_boundary(&doc.text, first.saturating_sub(EXCERPT_CONTEXT));
    let to = floor_boundary(&doc.text, last + EXCERPT_CONTEXT);
    let whole = from == 0 && to == doc.text.len();
    let _ = write!(
        h,
        "<div class=\"doc\">{}{}{}</div>",
        if from > 0 { "… " } else { "" },
        marked(&doc.text, from, to, &spans, true),
        if to < doc.text.len() { " …" } else { "" }
    );
    if !whole {
        if doc.text.len() <= WHOLE_DOCUMENT_LIMIT {
            let _ = write!(
                h,
                "<details><summary>the whole document</summary><div class=\"doc\">{}</div></details>",
                marked(&doc.text, 0, doc.text.len(), &spans, false)
            );
        } else {
            h.push_str("<div class=\"muted\">The document is too long to show whole here.</div>");
        }
    }
}

fn source_line(source: &CitedSource) -> String {
    match source {
        CitedSource::Text { document_id, section_id, sentence_ids, start, end, date, .. } => format!(
            "text of <code>{}</code> ({}){}, sentences {}, bytes {start}..{end}: highlighted below",
            esc(document_id),
            esc(date.as_deref().unwrap_or("undated")),
            section_id.map(|s| format!(", section {s}")).unwrap_or_default(),
            esc(&format!("{sentence_ids:?}"))
        ),
        CitedSource::Lab { name, value, unit, time, source_id, concept } => format!(
            "lab value <b>{}</b> = <b>{}</b>{} on {} <span class=\"muted\">({}; source {})</span>",
            esc(name),
            esc(value),
            unit.as_ref().map(|u| format!(" {}", esc(u))).unwrap_or_default(),
            esc(time),
            esc(concept),
            esc(source_id)
        ),
        // A criteria check: its result and each criterion's status.
        CitedSource::Calculation { calculator, output, used } if output["criteria"].is_array() => {
            let criteria: Vec<String> = output["criteria"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    let text = |k: &str| esc(c[k].as_str().unwrap_or_default());
                    format!("<li>{}: <b>{}</b></li>", text("criterion"), text("status"))
                })
                .collect();
            let read: Vec<String> = used.iter().map(|u| format!("<li>{}</li>", source_line(u))).collect();
            format!(
                "criteria check <b>{}</b>: <b>{}</b><ul>{}</ul>from<ul>{}</ul>",
                esc(calculator),
                esc(output["result"].as_str().unwrap_or_default()),
                criteria.join(""),
                read.join("")
            )
        }
        CitedSource::Calculation { calculator, output, used } => {
            let inputs: Vec<String> = used.iter().map(|u| format!("<li>{}</li>", source_line(u))).collect();
            format!(
                "calculator <b>{}</b>: <code>{}</code>, from<ul>{}</ul>",
                esc(calculator),
                esc(&output.to_string()),
                inputs.join("")
            )
        }
        CitedSource::Patient { patient_id, text, .. } => {
            format!("{} <span class=\"muted\">(stored patient {})</span>", esc(text), esc(patient_id))
        }
    }
}

fn write_citations(h: &mut String, citations: &[Citation]) {
    if citations.is_empty() {
        h.push_str("<p class=\"muted\">The answer cites nothing.</p>");
        return;
    }
    h.push_str("<table><tr><th>Citation</th><th>What it resolves to</th></tr>");
    for c in citations {
        let what = match &c.source {
            Some(s) => source_line(s),
            None => format!(
                "{} no context item has this number, or its item no longer matches the stored record",
                pill("unsupported", "unsupported")
            ),
        };
        let _ = write!(
            h,
            "<tr id=\"cite-{}\"><td><a href=\"#passage-{}\">[{}]</a></td><td>{what}</td></tr>",
            c.number, c.number, c.number
        );
    }
    h.push_str("</table>");
}

fn write_context(h: &mut String, context: &[Evidence]) {
    let _ =
        write!(h, "<details><summary>The {} numbered context items the answer could cite</summary><ol>", context.len());
    for n in context {
        let _ = write!(h, "<li><b>{}</b> {}</li>", esc(&n.header()), esc(&n.text()));
    }
    h.push_str("</ol></details>");
}

fn write_trace(h: &mut String, answer: &ChartAnswer) {
    let t = &answer.trace;
    h.push_str("<h2>Trace</h2>");
    let _ = write!(h, "<p>Stopped because: {}</p>", esc(&t.stopped_because));
    if !t.skills.is_empty() {
        let _ = write!(h, "<p>Skills: {}</p>", esc(&t.skills.join(", ")));
    }
    if let Some(a) = &t.assessment {
        let _ = write!(
            h,
            "<details><summary>Phase I: assessment</summary><p>Intent: {}<br>Required: {}<br>Missing: {}<br>Complexity: {}</p></details>",
            esc(&a.intent),
            esc(&a.required_information.join("; ")),
            esc(&a.missing_information.join("; ")),
            esc(&a.complexity)
        );
    }
    if let Some(p) = &t.plan {
        let _ = write!(h, "<details><summary>Phase II: plan ({} steps, {} attempts)</summary><table><tr><th>Step</th><th>Objective</th><th>Tool</th><th>Arguments</th><th>Stop rule</th></tr>", p.steps.len(), p.attempts);
        for s in &p.steps {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                s.step,
                esc(&s.objective),
                esc(&s.tool),
                esc(&s.arguments.to_string()),
                esc(&s.stop_rule)
            );
        }
        let _ = write!(h, "</table><p>Stop conditions: {}</p></details>", esc(&p.stop_conditions.join("; ")));
    }
    if !t.rounds.is_empty() {
        let _ = write!(h, "<details><summary>Rounds ({})</summary><table><tr><th>Round</th><th>Action</th><th>Tool and arguments</th><th>Found / new</th><th>Reason and notices</th></tr>", t.rounds.len());
        for r in &t.rounds {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{} <code>{}</code>{}</td><td>{} / {}{}</td><td>{}{}</td></tr>",
                r.round,
                esc(&r.action),
                esc(r.tool.as_deref().unwrap_or("")),
                esc(&r.arguments.as_ref().map(|a| a.to_string()).unwrap_or_default()),
                if r.adjustments.is_empty() {
                    String::new()
                } else {
                    format!("<div class=\"muted\">{}</div>", esc(&r.adjustments.join("; ")))
                },
                r.evidence_found,
                r.new_evidence,
                if r.cached { " (cached)" } else { "" },
                esc(&r.reason),
                r.notice.as_ref().map(|n| format!("<div class=\"muted\">{}</div>", esc(n))).unwrap_or_default()
            );
        }
        h.push_str("</table></details>");
    }
    if let Some(p) = &t.policy {
        let _ = write!(h, "<p>Policy engine: {}</p>", esc(&serde_json::to_string(p).unwrap_or_default()));
    }
    let _ = write!(
        h,
        "<details><summary>The whole trace (JSON)</summary><pre>{}</pre></details>",
        esc(&serde_json::to_string_pretty(t).unwrap_or_default())
    );
}

/// One answer as a self-contained HTML page. `documents` holds the stored
/// documents to show (see [`documents_for`]); a cited document missing
/// from it is named, not shown.
pub fn answer_page(answer: &ChartAnswer, documents: &BTreeMap<String, Document>) -> String {
    let mut h = head(&format!("Evident: {}", answer.question));
    let _ = write!(h, "<h1>{}</h1>", esc(&answer.question));
    let _ = write!(
        h,
        "<p class=\"muted\">Patient <code>{}</code>, as of {}, method <b>{}</b>. {}</p>",
        esc(&answer.patient),
        esc(&answer.as_of),
        esc(answer.method.as_str()),
        pill(&answer.status, &answer.status.replace('_', " "))
    );
    match (&answer.answer, &answer.reasoning) {
        (Some(a), Some(r)) => {
            let _ = write!(h, "<div class=\"answer\"><b>Answer:</b> {}</div>", esc(a));
            let _ = write!(h, "<div class=\"reasoning\"><b>Reasoning:</b> {}</div>", linked_reasoning(r));
            if let Some(from) = &answer.trace.reasoning_from {
                let _ = write!(h, "<p class=\"muted\">The reasoning was written by Evident from {}.</p>", esc(from));
            }
        }
        _ => {
            let _ = write!(
                h,
                "<p class=\"problem\">No valid answer (pipeline failure): {}</p><details><summary>the model's last text</summary><pre>{}</pre></details>",
                esc(&answer.failure.clone().unwrap_or_default().join("; ")),
                esc(&answer.raw_text)
            );
        }
    }
    if answer.unsupported_citations > 0 {
        let _ = write!(
            h,
            "<p class=\"problem\">{} citation(s) do not resolve to a context item: flagged below.</p>",
            answer.unsupported_citations
        );
    }
    h.push_str("<h2>Citations</h2>");
    write_citations(&mut h, &answer.citations);

    let mut spans: BTreeMap<String, Vec<Span>> = BTreeMap::new();
    for c in &answer.citations {
        if let Some(s) = &c.source {
            spans_of(s, c.number, &mut spans);
        }
    }
    if !spans.is_empty() {
        h.push_str("<h2>Cited passages in their documents</h2>");
        for (id, doc_spans) in &spans {
            match documents.get(id) {
                Some(doc) => write_document(&mut h, doc, doc_spans),
                None => {
                    let _ =
                        write!(h, "<p class=\"problem\">Document <code>{}</code> is not in the store.</p>", esc(id));
                }
            }
        }
    }

    let _ = write!(h, "<h2>Retrieved, not cited ({})</h2>", answer.retrieved_not_cited.len());
    if answer.retrieved_not_cited.is_empty() {
        h.push_str("<p class=\"muted\">Every retrieved document is cited.</p>");
    } else {
        h.push_str("<table><tr><th>Document</th><th>Kind</th><th>Date</th><th>What was retrieved</th></tr>");
        for d in &answer.retrieved_not_cited {
            let items: Vec<String> = answer
                .context
                .iter()
                .filter(|n| n.document_id() == Some(d.document_id.as_str()))
                .map(|n| format!("<div class=\"doc\">{}</div>", esc(&n.text())))
                .collect();
            let title = documents.get(&d.document_id).map(|doc| doc.title.as_str()).unwrap_or("");
            let _ = write!(
                h,
                "<tr><td><code>{}</code><div class=\"muted\">{}</div></td><td>{}</td><td>{}</td><td><details><summary>{} item(s)</summary>{}</details></td></tr>",
                esc(&d.document_id),
                esc(title),
                esc(&d.kind),
                esc(d.date.as_deref().unwrap_or("undated")),
                items.len(),
                items.join("")
            );
        }
        h.push_str("</table>");
    }
    write_context(&mut h, &answer.context);
    write_trace(&mut h, answer);
    let u = &answer.usage;
    let _ = write!(
        h,
        "<p class=\"muted\">{} model calls, {} prompt tokens ({} reused), {} completion tokens; {:.1} s in all, {:.1} s outside model calls.</p>",
        u.calls,
        u.prompt_tokens,
        u.reused_prompt_tokens,
        u.completion_tokens,
        u.wall_ms as f64 / 1000.0,
        u.non_llm_ms as f64 / 1000.0
    );
    h.push_str("</body></html>\n");
    h
}

fn write_whole(path: &Path, html: &str) -> Result<(), ReportError> {
    let partial = path.with_extension("html.partial");
    std::fs::write(&partial, html).map_err(|source| ReportError::Write { path: partial.clone(), source })?;
    std::fs::rename(&partial, path).map_err(|source| ReportError::Write { path: path.to_path_buf(), source })
}

/// Writes `answer`'s page to `path` (e.g. `DIR/answer.html`), reading the
/// documents it shows from `store`.
pub fn write_answer_page(path: &Path, answer: &ChartAnswer, store: &Store) -> Result<(), ReportError> {
    let documents = documents_for(answer, store)?;
    write_whole(path, &answer_page(answer, &documents))
}

fn score_pill(entry: &IndexEntry) -> String {
    match entry.score {
        None => pill("no-gold", "no gold answer"),
        Some(s) if s >= 1.0 - 1e-9 => pill("correct", "correct"),
        Some(s) if s <= 1e-9 => pill("incorrect", "incorrect"),
        Some(s) => pill("partly-correct", &format!("partly correct ({s:.2})")),
    }
}

/// An evaluation's index page: one row per answered question, linking to
/// its page.
pub fn index_page(title: &str, entries: &[IndexEntry]) -> String {
    let mut h = head(title);
    let _ = write!(h, "<h1>{}</h1>", esc(title));
    let scored: Vec<f64> = entries.iter().filter_map(|e| e.score).collect();
    let failures = entries.iter().filter(|e| e.status == "pipeline_failure").count();
    let _ = write!(h, "<p class=\"muted\">{} answers", entries.len());
    if !scored.is_empty() {
        let _ = write!(
            h,
            "; {} with a gold answer, mean score {:.3}",
            scored.len(),
            scored.iter().sum::<f64>() / scored.len() as f64
        );
    }
    let _ = write!(h, "; {failures} pipeline failures.</p>");
    h.push_str("<table><tr><th>Question</th><th>Patient</th><th>Level</th><th>Method</th><th>Question text</th><th>Answer</th><th>Gold</th><th>Score</th></tr>");
    for e in entries {
        let answer = match &e.answer {
            Some(a) => esc(a),
            None => pill(&e.status, &e.status.replace('_', " ")),
        };
        // An answer stored without a page (an earlier build's) is listed unlinked.
        let id =
            if e.href.is_empty() { esc(&e.id) } else { format!("<a href=\"{}\">{}</a>", esc(&e.href), esc(&e.id)) };
        let _ = write!(
            h,
            "<tr><td>{id}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{answer}</td><td>{}</td><td>{}</td></tr>",
            esc(&e.patient),
            esc(&[e.level.as_deref(), e.category.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(", ")),
            esc(&e.method),
            esc(&e.question),
            esc(e.gold.as_deref().unwrap_or("")),
            score_pill(e)
        );
    }
    h.push_str("</table></body></html>\n");
    h
}

/// Writes an evaluation's index page to `path` (e.g. `OUT/index.html`).
pub fn write_index(path: &Path, title: &str, entries: &[IndexEntry]) -> Result<(), ReportError> {
    write_whole(path, &index_page(title, entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_citations_become_links_and_the_rest_is_escaped() {
        assert_eq!(
            linked_reasoning("a <b> [1] and [x] [2]"),
            "a &lt;b&gt; <a href=\"#cite-1\">[1]</a> and [x] <a href=\"#cite-2\">[2]</a>"
        );
        assert_eq!(linked_reasoning("open [ end"), "open [ end");
    }

    #[test]
    fn overlapping_spans_are_marked_with_every_number() {
        let text = "alpha beta gamma delta";
        let spans = [Span { start: 0, end: 10, number: 1 }, Span { start: 6, end: 16, number: 2 }];
        let out = marked(text, 0, text.len(), &spans, true);
        assert!(
            out.starts_with(
                "<span class=\"label\" id=\"passage-1\">[1]</span><mark title=\"cited as [1]\">alpha </mark>"
            ),
            "{out}"
        );
        assert!(out.contains("<mark title=\"cited as [1] [2]\">beta</mark>"), "{out}");
        assert!(out.contains("<mark title=\"cited as [2]\"> gamma</mark> delta"), "{out}");
    }

    #[test]
    fn boundaries_never_split_a_character() {
        assert_eq!(floor_boundary("aé", 2), 1);
        assert_eq!(floor_boundary("aé", 99), 3);
    }
}
