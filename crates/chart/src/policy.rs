//! The deterministic policy engine of Phase IV: ranks the numbered context
//! nodes by temporal authority (most recent first; on the same day, a
//! discharge summary or specialist report before a progress note before a
//! structured list or a lab), marks statements of administration, of plans
//! and of stops, and returns a resolution the synthesis prompt receives:
//! `select` (these nodes carry the answer), `abstain` (no evidence), or
//! `conflict` (the most recent day says both given and stopped / not given).
//! A question about a first occurrence (a selected workflow skill with
//! `evidence_order: earliest`, which the question's words trigger) is
//! ranked the other way: the earliest dated evidence first, and no conflict
//! of the latest day, which says nothing about when something began.
//!
//! The paper names the policy engine's behaviour (temporal authority,
//! administered over planned, select/abstain/conflict) but not its rules;
//! the word lists and the authority order here are Evident's.

use serde::{Deserialize, Serialize};

use crate::tools::Evidence;
use evident_model::DocKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Select,
    Abstain,
    Conflict,
}

/// What a node says about an administration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Statement {
    Administered,
    Planned,
    Stopped,
    Other,
}

/// Which end of the record carries the answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceOrder {
    /// Current status and most questions: the most recent evidence decides.
    #[default]
    MostRecent,
    /// First occurrence: the earliest dated evidence decides.
    Earliest,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resolution {
    pub decision: Decision,
    /// The order the nodes were ranked in.
    pub order: EvidenceOrder,
    /// Node numbers (1-based, as cited) in order of authority.
    pub ranked: Vec<usize>,
    /// The nodes the answer should rest on.
    pub selected: Vec<usize>,
    /// Per node number, what it states.
    pub statements: Vec<(usize, Statement)>,
    /// One sentence for the synthesis prompt.
    pub note: String,
}

fn authority(e: &Evidence) -> u8 {
    match e {
        Evidence::Calculation { .. } => 0,
        Evidence::Section { kind, .. } => match kind {
            DocKind::DischargeSummary => 1,
            DocKind::Consult | DocKind::Pathology | DocKind::Radiology => 2,
            DocKind::ProgressNote | DocKind::Procedure => 3,
            DocKind::LabReport => 4,
            DocKind::MedicationList | DocKind::ProblemList => 5,
            DocKind::Other => 6,
        },
        Evidence::Entry { .. } => 5,
        Evidence::Lab { .. } | Evidence::Patient { .. } => 4,
    }
}

const STOPPED: &[&str] = &[
    "discontinued",
    "stopped",
    "ceased",
    "held",
    "on hold",
    "not given",
    "was not administered",
    "completed course",
    "(stopped)",
    "(completed)",
    "(entered-in-error)",
    "(cancelled)",
    "(resolved)",
    "no longer",
];
const PLANNED: &[&str] = &[
    "plan to",
    "planned",
    "will start",
    "will begin",
    "to start",
    "recommend",
    "consider",
    "scheduled",
    "candidate for",
    "(draft)",
    "(on-hold)",
    "referral for",
    "is to receive",
];
const ADMINISTERED: &[&str] = &[
    "administered",
    "received",
    "started",
    "was given",
    "were given",
    "started on",
    "initiated",
    "cycle",
    "c1d1",
    "infusion of",
    "(active)",
    "(completed",
    "performed",
    "underwent",
    "taking",
    "currently on",
    "continues on",
];

/// What a text states, by the first matching list in the order stopped,
/// planned, administered.
pub fn classify(text: &str) -> Statement {
    let t = text.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    if has(STOPPED) {
        Statement::Stopped
    } else if has(PLANNED) && !has(ADMINISTERED) {
        Statement::Planned
    } else if has(ADMINISTERED) {
        Statement::Administered
    } else {
        Statement::Other
    }
}

/// Resolves the numbered nodes (`nodes[i]` is cited as `i + 1`), most
/// recent first.
pub fn resolve(nodes: &[Evidence]) -> Resolution {
    resolve_in(nodes, EvidenceOrder::MostRecent)
}

/// Resolves the numbered nodes in the given order.
pub fn resolve_in(nodes: &[Evidence], order: EvidenceOrder) -> Resolution {
    if nodes.is_empty() {
        return Resolution {
            decision: Decision::Abstain,
            order,
            ranked: vec![],
            selected: vec![],
            statements: vec![],
            note: "No evidence was retrieved: answer \"Not documented\" unless the question needs no record.".into(),
        };
    }
    let statements: Vec<(usize, Statement)> = (0..nodes.len()).map(|i| (i + 1, classify(&nodes[i].text()))).collect();
    if order == EvidenceOrder::Earliest {
        return earliest(nodes, statements);
    }
    let statement = |i: usize| statements[i].1;
    let ranked = rank(nodes, order);
    let ranked_numbers: Vec<usize> = ranked.iter().map(|i| i + 1).collect();

    // Conflict: on the most recent day that says anything about an
    // administration, one node says given and another stopped.
    let relevant: Vec<usize> = ranked.iter().copied().filter(|&i| statement(i) != Statement::Other).collect();
    if let Some(&first) = relevant.first() {
        let day = nodes[first].date().map(|d| d.date());
        let same_day: Vec<usize> =
            relevant.iter().copied().filter(|&i| nodes[i].date().map(|d| d.date()) == day).collect();
        let given = same_day.iter().any(|&i| statement(i) == Statement::Administered);
        let stopped = same_day.iter().any(|&i| statement(i) == Statement::Stopped);
        if given && stopped {
            return Resolution {
                decision: Decision::Conflict,
                order,
                ranked: ranked_numbers,
                selected: same_day.iter().map(|i| i + 1).collect(),
                statements,
                note: "The most recent documents of the same day disagree (given and stopped): answer \"Unclear\" and cite both, unless one is clearly more specific.".into(),
            };
        }
    }
    let administered: Vec<usize> =
        ranked.iter().copied().filter(|&i| statement(i) == Statement::Administered).collect();
    let planned: Vec<usize> = ranked.iter().copied().filter(|&i| statement(i) == Statement::Planned).collect();
    let (selected, note) = if !administered.is_empty() {
        let mut s: Vec<usize> = administered.iter().take(3).map(|i| i + 1).collect();
        if let Some(stop) = ranked.iter().copied().find(|&i| statement(i) == Statement::Stopped) {
            if nodes[stop].date() >= nodes[administered[0]].date() {
                s.insert(0, stop + 1);
            }
        }
        (
            s,
            "Documented administration outranks plans; the most recent statement decides the current status."
                .to_string(),
        )
    } else if !planned.is_empty() {
        (
            planned.iter().take(3).map(|i| i + 1).collect(),
            "Only plans or recommendations were found: a plan is not an administration.".to_string(),
        )
    } else {
        (
            ranked.iter().take(3).map(|i| i + 1).collect(),
            "The most recent, most authoritative evidence comes first.".to_string(),
        )
    };
    Resolution { decision: Decision::Select, order, ranked: ranked_numbers, selected, statements, note }
}

/// Node positions by day in `order` (most recent first: undated last as
/// the oldest; earliest first: undated last), then authority on the same
/// day, then time of day in the same direction, then position.
fn rank(nodes: &[Evidence], order: EvidenceOrder) -> Vec<usize> {
    let mut ranked: Vec<usize> = (0..nodes.len()).collect();
    ranked.sort_by(|&a, &b| {
        let (da, db) = (nodes[a].date(), nodes[b].date());
        let (day, time) = match order {
            EvidenceOrder::MostRecent => (db.map(|d| d.date()).cmp(&da.map(|d| d.date())), db.cmp(&da)),
            EvidenceOrder::Earliest => {
                ((da.is_none(), da.map(|d| d.date())).cmp(&(db.is_none(), db.map(|d| d.date()))), da.cmp(&db))
            }
        };
        day.then(authority(&nodes[a]).cmp(&authority(&nodes[b]))).then(time).then(a.cmp(&b))
    });
    ranked
}

/// A first-occurrence question: dated nodes oldest first (on the same day,
/// by authority), undated ones last; the earliest three that are not mere
/// plans are selected (plans too when nothing else was found).
fn earliest(nodes: &[Evidence], statements: Vec<(usize, Statement)>) -> Resolution {
    let ranked = rank(nodes, EvidenceOrder::Earliest);
    let occurred: Vec<usize> = ranked.iter().copied().filter(|&i| statements[i].1 != Statement::Planned).collect();
    let pool = if occurred.is_empty() { &ranked } else { &occurred };
    Resolution {
        decision: Decision::Select,
        order: EvidenceOrder::Earliest,
        ranked: ranked.iter().map(|i| i + 1).collect(),
        selected: pool.iter().take(3).map(|i| i + 1).collect(),
        statements,
        note: "The question asks when something first happened: the earliest dated evidence comes first. Answer with the date of the earliest item that states it, that item's own date, not a later date in the same line (a resolution, a stop or an end).".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn section(kind: DocKind, date: &str, text: &str) -> Evidence {
        let date = NaiveDate::parse_from_str(date, "%Y-%m-%d").unwrap().and_hms_opt(12, 0, 0);
        Evidence::Section {
            document_id: format!("d-{date:?}-{text}"),
            section_id: 1,
            kind,
            date,
            heading: None,
            start: 0,
            end: text.len(),
            text: text.into(),
        }
    }

    /// A first-occurrence question ranks oldest first and selects the
    /// earliest items that are not mere plans; the latest day's given and
    /// stopped is no conflict for it.
    #[test]
    fn a_first_occurrence_ranks_the_earliest_first() {
        let nodes = vec![
            section(DocKind::ProgressNote, "2019-03-01", "Amoxicillin started."),
            section(DocKind::ProgressNote, "2019-03-01", "Amoxicillin stopped."),
            section(DocKind::ProgressNote, "2009-01-01", "Plan to start amoxicillin."),
            section(DocKind::MedicationList, "2009-11-17", "Amoxicillin 250 MG (stopped, ended 2010-01-02)"),
        ];
        assert_eq!(resolve(&nodes).decision, Decision::Conflict, "most recent: the latest day disagrees");
        let r = resolve_in(&nodes, EvidenceOrder::Earliest);
        assert_eq!((r.decision, r.order), (Decision::Select, EvidenceOrder::Earliest));
        assert_eq!(r.ranked, [3, 4, 1, 2]);
        assert_eq!(r.selected, [4, 1, 2], "the plan is not an occurrence");
        assert!(r.note.contains("earliest"), "{}", r.note);
    }

    #[test]
    fn nothing_retrieved_abstains() {
        assert_eq!(resolve(&[]).decision, Decision::Abstain);
    }

    #[test]
    fn recency_then_authority() {
        let nodes = vec![
            section(DocKind::ProgressNote, "2020-01-01", "Seen in clinic."),
            section(DocKind::ProgressNote, "2022-05-01", "Seen in clinic."),
            section(DocKind::DischargeSummary, "2022-05-01", "Discharged home."),
        ];
        assert_eq!(resolve(&nodes).ranked, vec![3, 2, 1]);
    }

    #[test]
    fn administered_outranks_planned() {
        let nodes = vec![
            section(DocKind::ProgressNote, "2023-03-01", "Plan to start lenalidomide next month."),
            section(DocKind::ProgressNote, "2023-04-02", "Lenalidomide cycle 1 was given, 25 mg."),
        ];
        let r = resolve(&nodes);
        assert_eq!((r.decision, r.selected.clone()), (Decision::Select, vec![2]));
        let only_plan = resolve(&nodes[..1]);
        assert!(only_plan.note.contains("plan is not an administration"), "{only_plan:?}");
    }

    #[test]
    fn same_day_given_and_stopped_is_a_conflict() {
        let nodes = vec![
            section(DocKind::ProgressNote, "2023-04-02", "Metformin was given this morning."),
            section(DocKind::ProgressNote, "2023-04-02", "Metformin discontinued because of AKI."),
            section(DocKind::ProgressNote, "2021-01-01", "Metformin started."),
        ];
        let r = resolve(&nodes);
        assert_eq!(r.decision, Decision::Conflict);
        assert_eq!(r.selected, vec![1, 2]);
    }

    #[test]
    fn a_later_stop_is_selected_with_the_administration() {
        let nodes = vec![
            section(DocKind::ProgressNote, "2021-01-01", "Metformin started."),
            section(DocKind::ProgressNote, "2023-06-01", "Metformin stopped for GI intolerance."),
        ];
        let r = resolve(&nodes);
        assert_eq!(r.decision, Decision::Select);
        assert_eq!(r.selected, vec![2, 1]);
    }
}
