//! Evaluating a compiled check over one patient's facts at a screening
//! date: MET / NOT MET / NOT ENOUGH INFORMATION with the rows used as
//! evidence (lab values with their dates, units and converted values;
//! timeline sentences with their spans). Deterministic: the same facts and
//! date always give the same outcome. A check never guesses: with no value
//! it can read in the window it answers NOT ENOUGH INFORMATION and says why.

use chrono::{Days, Months, NaiveDate, NaiveDateTime};
use evident_model::age::{age_on, AnchorAge};
use serde::{Deserialize, Serialize};

use super::facts::{PatientFacts, TimelineKind, TimelineSentence};
use super::units::convert;
use super::{CodeSystem, CompiledCheck, CompiledEvent, CompiledLab, Predicate, Select, SexCheck, Window};
use crate::decision::Decision;

/// A lab value a check looked at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabEvidence {
    /// The name the source used.
    pub name: String,
    pub time: NaiveDateTime,
    /// The stored value and unit, as the source gave them.
    pub value: String,
    pub unit: Option<String>,
    /// The value in the check's unit; `None` when it cannot be read (a
    /// text value or a unit the table does not know).
    pub converted: Option<f64>,
    pub check_unit: String,
    /// The upper limit of the value's stored reference range in the check's
    /// unit, for checks against the upper limit of normal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_normal: Option<f64>,
    /// Where the value came from (`fhir` `Observation/...`, `mimic` `labevents/...`).
    pub source: String,
    pub source_id: String,
    /// Whether the decision rests on this value.
    pub used: bool,
}

/// A stored sentence a check relied on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SentenceEvidence {
    pub document_id: String,
    pub ordinal: i64,
    pub start: usize,
    pub end: usize,
    pub text: String,
}

impl From<&TimelineSentence> for SentenceEvidence {
    fn from(s: &TimelineSentence) -> Self {
        SentenceEvidence {
            document_id: s.document_id.clone(),
            ordinal: s.ordinal,
            start: s.start,
            end: s.end,
            text: s.text.clone(),
        }
    }
}

/// What a check decided and on what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckOutcome {
    /// MET, NOT MET or NOT ENOUGH INFORMATION (never NOT APPLICABLE).
    pub decision: Decision,
    /// One sentence: what was compared with what.
    pub summary: String,
    /// `None` when the patient has no dated document to screen at.
    pub screening_date: Option<NaiveDate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labs: Vec<LabEvidence>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sentences: Vec<SentenceEvidence>,
    /// Facts of the patient row used (birth date, sex).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<String>,
}

impl CheckOutcome {
    /// NOT ENOUGH INFORMATION with nothing read: no value, record or fact
    /// of the kind the check reads (as opposed to values it read and
    /// could not settle the criterion with).
    pub fn found_no_data(&self) -> bool {
        self.decision == Decision::NotEnoughInformation
            && self.labs.is_empty()
            && self.sentences.is_empty()
            && self.facts.is_empty()
    }

    fn new(decision: Decision, summary: String, screening_date: NaiveDate) -> CheckOutcome {
        CheckOutcome {
            decision,
            summary,
            screening_date: Some(screening_date),
            labs: Vec::new(),
            sentences: Vec::new(),
            facts: Vec::new(),
        }
    }

    /// The outcome for a patient with no screening date (no dated document
    /// and none given): a window cannot be placed, so nothing is decided.
    pub fn undated() -> CheckOutcome {
        CheckOutcome {
            decision: Decision::NotEnoughInformation,
            summary: "No screening date: the patient has no dated document and none was given.".into(),
            screening_date: None,
            labs: Vec::new(),
            sentences: Vec::new(),
            facts: Vec::new(),
        }
    }
}

/// Decides `check` for the patient of `facts` at `screening_date`.
pub fn evaluate(check: &CompiledCheck, facts: &PatientFacts, screening_date: NaiveDate) -> CheckOutcome {
    match &check.predicate {
        Predicate::Age { min, max } => age(*min, *max, facts, screening_date),
        Predicate::Sex(sex) => sex_check(*sex, facts, screening_date),
        Predicate::Lab(lab) => lab_check(lab, facts, screening_date),
        Predicate::Event(event) => event_check(event, facts, screening_date),
    }
}

/// The first day of the window (inclusive); `None`: no lower limit.
fn window_start(window: Window, screening_date: NaiveDate) -> Option<NaiveDate> {
    match window {
        Window::Ever => None,
        Window::Days(d) => screening_date.checked_sub_days(Days::new(d.into())),
        Window::Months(m) => screening_date.checked_sub_months(Months::new(m)),
    }
}

fn in_window(date: NaiveDate, start: Option<NaiveDate>, screening_date: NaiveDate) -> bool {
    date <= screening_date && start.is_none_or(|s| date >= s)
}

fn window_text(window: Window) -> String {
    match window {
        Window::Ever => "before the screening date".to_string(),
        Window::Days(d) => format!("in the {d} days before the screening date"),
        Window::Months(m) => format!("in the {m} months before the screening date"),
    }
}

fn bounds_text(min: Option<f64>, max: Option<f64>) -> String {
    match (min, max) {
        (Some(lo), Some(hi)) => format!("{lo}–{hi}"),
        (Some(lo), None) => format!("at least {lo}"),
        (None, Some(hi)) => format!("at most {hi}"),
        (None, None) => "any".into(),
    }
}

/// The decision for an age known to lie in `[lo, hi]` (whole years).
fn decide_interval(lo: f64, hi: f64, min: Option<f64>, max: Option<f64>) -> Decision {
    let all_ok = min.is_none_or(|m| lo >= m) && max.is_none_or(|m| hi <= m);
    let none_ok = min.is_some_and(|m| hi < m) || max.is_some_and(|m| lo > m);
    if all_ok {
        Decision::Met
    } else if none_ok {
        Decision::NotMet
    } else {
        Decision::NotEnoughInformation
    }
}

fn age(min: Option<f64>, max: Option<f64>, facts: &PatientFacts, screening_date: NaiveDate) -> CheckOutcome {
    let wanted = bounds_text(min, max);
    if let Some(birth) = facts.patient.birth_date {
        let years = age_on(birth, screening_date);
        let decision = decide_interval(f64::from(years), f64::from(years), min, max);
        let verb = if decision == Decision::Met { "within" } else { "outside" };
        let mut out = CheckOutcome::new(
            decision,
            format!("Age {years} at {screening_date} (born {birth}): {verb} {wanted} years."),
            screening_date,
        );
        out.facts.push(format!("birth date {birth} (patient record, source {})", facts.patient.source));
        return out;
    }
    let anchor = facts
        .timeline
        .iter()
        .filter(|s| s.kind == TimelineKind::Demographics)
        .find_map(|s| AnchorAge::parse(&s.text).and_then(|a| Some((a, a.ages_on(screening_date)?, s))));
    if let Some((anchor, (youngest, oldest), sentence)) = anchor {
        // MIMIC-IV gives the age in the anchor year, not a birth date: on
        // any day the age is known to within a year either way; ages over
        // 89 are all given as 91.
        let (lo, hi) = (f64::from(youngest), oldest.map_or(f64::INFINITY, f64::from));
        let decision = decide_interval(lo, hi, min, max);
        let shown = match oldest {
            Some(o) => format!("{youngest}–{o}"),
            None => format!("{youngest} or over"),
        };
        let mut out = CheckOutcome::new(
            decision,
            format!(
                "Age {shown} at {screening_date} (age {} in anchor year {}); wanted {wanted} years{}.",
                anchor.age,
                anchor.year,
                if decision == Decision::NotEnoughInformation { ": the record cannot settle it" } else { "" }
            ),
            screening_date,
        );
        out.sentences.push(sentence.into());
        return out;
    }
    CheckOutcome::new(
        Decision::NotEnoughInformation,
        format!("No birth date or age in the structured record; wanted {wanted} years."),
        screening_date,
    )
}

fn sex_check(sex: SexCheck, facts: &PatientFacts, screening_date: NaiveDate) -> CheckOutcome {
    let wanted = match sex {
        SexCheck::Female => "female",
        SexCheck::Male => "male",
    };
    let Some(recorded) = facts.patient.sex.as_deref() else {
        return CheckOutcome::new(
            Decision::NotEnoughInformation,
            format!("No sex in the structured record; wanted {wanted}."),
            screening_date,
        );
    };
    let known = match recorded.trim().to_ascii_lowercase().as_str() {
        "f" | "female" | "woman" => Some(SexCheck::Female),
        "m" | "male" | "man" => Some(SexCheck::Male),
        _ => None,
    };
    let decision = match known {
        Some(s) if s == sex => Decision::Met,
        Some(_) => Decision::NotMet,
        None => Decision::NotEnoughInformation,
    };
    let mut out =
        CheckOutcome::new(decision, format!("Sex recorded as {recorded:?}; wanted {wanted}."), screening_date);
    out.facts.push(format!("sex {recorded} (patient record, source {})", facts.patient.source));
    out
}

/// Whether a row's value satisfies the check; `false` when it cannot be read.
fn satisfies_row(lab: &CompiledLab, row: &LabEvidence) -> bool {
    row.converted.is_some_and(|v| satisfies(lab, v) && (!lab.above_normal || row.upper_normal.is_some_and(|h| v > h)))
}

fn satisfies(lab: &CompiledLab, v: f64) -> bool {
    let lower_ok = lab.lower.is_none_or(|(b, inclusive)| if inclusive { v >= b } else { v > b });
    let upper_ok = lab.upper.is_none_or(|(b, inclusive)| if inclusive { v <= b } else { v < b });
    lower_ok && upper_ok
}

fn comparison_text(lab: &CompiledLab) -> String {
    if lab.above_normal {
        return "above the upper limit of its reference range".to_string();
    }
    let unit = &lab.unit.name;
    let lower = lab.lower.map(|(b, inc)| if inc { format!("≥ {b}") } else { format!("> {b}") });
    let upper = lab.upper.map(|(b, inc)| if inc { format!("≤ {b}") } else { format!("< {b}") });
    match (lower, upper) {
        (Some(l), Some(u)) => format!("{l} and {u} {unit}"),
        (Some(l), None) => format!("{l} {unit}"),
        (None, Some(u)) => format!("{u} {unit}"),
        (None, None) => unit.clone(),
    }
}

fn lab_check(lab: &CompiledLab, facts: &PatientFacts, screening_date: NaiveDate) -> CheckOutcome {
    let start = window_start(lab.window, screening_date);
    let of_concept: Vec<_> = facts.labs.iter().filter(|l| l.concept_id.as_deref() == Some(&lab.concept_id)).collect();
    let mut rows: Vec<LabEvidence> = of_concept
        .iter()
        .filter(|l| in_window(l.time.date(), start, screening_date))
        .map(|l| {
            let from = l.unit.as_deref().and_then(|u| lab.units.find(u));
            let converted = match (l.value_num, from) {
                (Some(v), Some(from)) => Some(convert(v, from, &lab.unit)),
                _ => None,
            };
            // The stored range is in the value's own unit.
            let upper_normal = match (l.ref_high, from) {
                (Some(h), Some(from)) if lab.above_normal => Some(convert(h, from, &lab.unit)),
                _ => None,
            };
            // Against the upper limit of normal a value without a stored
            // range cannot be read.
            let converted = converted.filter(|_| !lab.above_normal || upper_normal.is_some());
            let value = match (l.value_num, &l.value_text) {
                (Some(v), _) => format!("{v}"),
                (None, Some(t)) => t.clone(),
                (None, None) => String::new(),
            };
            LabEvidence {
                name: l.original_name.clone(),
                time: l.time,
                value,
                unit: l.unit.clone(),
                converted,
                check_unit: lab.unit.name.clone(),
                upper_normal,
                source: l.source.clone(),
                source_id: l.source_id.clone(),
                used: false,
            }
        })
        .collect();
    let wanted = comparison_text(lab);
    let name = &lab.concept_name;
    let window = window_text(lab.window);
    if rows.is_empty() {
        let outside = of_concept.len();
        let mut summary = format!("No {name} value {window} ({screening_date}); wanted {wanted}.");
        if outside > 0 {
            summary.push_str(&format!(" {outside} value(s) lie outside the window."));
        }
        return CheckOutcome::new(Decision::NotEnoughInformation, summary, screening_date);
    }
    let shown = |r: &LabEvidence| {
        let unit = r.unit.as_deref().unwrap_or("no unit");
        let converted = match r.converted {
            Some(c) if r.unit.as_deref().and_then(|u| lab.units.find(u)) != Some(&lab.unit) => {
                format!(" (= {} {})", round(c), lab.unit.name)
            }
            _ => String::new(),
        };
        let limit = match r.upper_normal {
            Some(h) => format!(" (upper limit of normal {} {})", round(h), lab.unit.name),
            None => String::new(),
        };
        format!("{} {unit}{converted}{limit} on {}", r.value, r.time.date())
    };
    let unreadable = |r: &LabEvidence| {
        format!(
            "{name} {} {} on {} cannot be read in {} (a text value or a unit the table does not know{})",
            r.value,
            r.unit.as_deref().unwrap_or("(no unit)"),
            r.time.date(),
            lab.unit.name,
            if lab.above_normal { ", or no reference range stored with it" } else { "" }
        )
    };
    let (decision, summary) = match lab.select {
        Select::MostRecent => {
            let last = rows.len() - 1;
            rows[last].used = true;
            let r = &rows[last];
            match r.converted {
                None => (Decision::NotEnoughInformation, format!("The most recent {}.", unreadable(r))),
                Some(_) if satisfies_row(lab, r) => {
                    (Decision::Met, format!("Most recent {name} {}: {wanted} holds.", shown(r)))
                }
                Some(_) => (Decision::NotMet, format!("Most recent {name} {}: {wanted} does not hold.", shown(r))),
            }
        }
        Select::Any => {
            let hits: Vec<usize> = (0..rows.len()).filter(|&i| satisfies_row(lab, &rows[i])).collect();
            let unread = rows.iter().filter(|r| r.converted.is_none()).count();
            if let Some(&first) = hits.last() {
                for &i in &hits {
                    rows[i].used = true;
                }
                (
                    Decision::Met,
                    format!(
                        "{} of {} {name} values {window} satisfy {wanted}, the latest {}.",
                        hits.len(),
                        rows.len(),
                        shown(&rows[first])
                    ),
                )
            } else if unread > 0 {
                for r in rows.iter_mut().filter(|r| r.converted.is_none()) {
                    r.used = true;
                }
                (
                    Decision::NotEnoughInformation,
                    format!("No readable {name} value {window} satisfies {wanted}, but {unread} cannot be read."),
                )
            } else {
                for r in rows.iter_mut() {
                    r.used = true;
                }
                (Decision::NotMet, format!("None of {} {name} values {window} satisfies {wanted}.", rows.len()))
            }
        }
        Select::All => {
            let misses: Vec<usize> =
                (0..rows.len()).filter(|&i| rows[i].converted.is_some() && !satisfies_row(lab, &rows[i])).collect();
            let unread = rows.iter().filter(|r| r.converted.is_none()).count();
            if let Some(&last) = misses.last() {
                for &i in &misses {
                    rows[i].used = true;
                }
                (
                    Decision::NotMet,
                    format!(
                        "{} of {} {name} values {window} fail {wanted}, the latest {}.",
                        misses.len(),
                        rows.len(),
                        shown(&rows[last])
                    ),
                )
            } else if unread > 0 {
                for r in rows.iter_mut().filter(|r| r.converted.is_none()) {
                    r.used = true;
                }
                (
                    Decision::NotEnoughInformation,
                    format!("Every readable {name} value {window} satisfies {wanted}, but {unread} cannot be read."),
                )
            } else {
                for r in rows.iter_mut() {
                    r.used = true;
                }
                (Decision::Met, format!("All {} {name} values {window} satisfy {wanted}.", rows.len()))
            }
        }
    };
    let mut out = CheckOutcome::new(decision, summary, screening_date);
    out.labs = rows;
    out
}

fn round(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Whether `name` (lower case) occurs in `text` (lower case) as whole words.
fn has_words(text: &str, name: &str) -> bool {
    let mut from = 0;
    while let Some(pos) = text[from..].find(name) {
        let at = from + pos;
        let end = at + name.len();
        let before_ok = text[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
        let after_ok = text[end..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        if before_ok && after_ok {
            return true;
        }
        from = at + name.chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// The codes a timeline line carries: MIMIC-IV's `ICD-10 E119: ...` and
/// `ICD-9 25000: ...`, and the bracketed codings ingestion writes for FHIR
/// resources (`[SNOMED 44054006, ICD-10 E11.9, RxNorm 314076]`). Codes
/// come back without dots, upper case.
fn line_codes(text: &str) -> Vec<(CodeSystem, String)> {
    let mut out: Vec<(CodeSystem, String)> = Vec::new();
    let mut push = |system: CodeSystem, code: &str| {
        let code = code.replace('.', "").to_ascii_uppercase();
        if !code.is_empty() && !out.iter().any(|(s, c)| *s == system && *c == code) {
            out.push((system, code));
        }
    };
    // ICD codes anywhere in the line (MIMIC-IV writes them first).
    let mut rest = text;
    while let Some(pos) = rest.find("ICD-") {
        rest = &rest[pos + 4..];
        let system = if rest.starts_with("10 ") {
            CodeSystem::Icd10
        } else if rest.starts_with("9 ") {
            CodeSystem::Icd9
        } else {
            continue;
        };
        let after = rest.split_once(' ').map_or("", |(_, a)| a);
        let code: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '.').collect();
        push(system, &code);
    }
    // SNOMED and RxNorm only inside brackets, so a name that happens to
    // contain the word is not read as a code.
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']') else { break };
        for item in rest[open + 1..open + close].split(", ") {
            let system = match item.split_once(' ') {
                Some(("SNOMED", _)) => CodeSystem::Snomed,
                Some(("RxNorm", _)) => CodeSystem::RxNorm,
                _ => continue,
            };
            let code = item.split_once(' ').map_or("", |(_, c)| c.trim());
            if code.chars().all(|c| c.is_ascii_alphanumeric()) {
                push(system, code);
            }
        }
        rest = &rest[open + close + 1..];
    }
    out
}

fn event_matches(event: &CompiledEvent, text: &str) -> bool {
    if !event.codes.is_empty() {
        let carried = line_codes(text);
        if event.codes.iter().any(|(system, code)| carried.iter().any(|(s, c)| s == system && system.matches(code, c)))
        {
            return true;
        }
    }
    if !event.names.is_empty() {
        let lower = text.to_lowercase();
        return event.names.iter().any(|n| has_words(&lower, n));
    }
    false
}

/// A sentence that records something (a timeline line ends with the id of
/// its record in brackets), not a document's title line alone.
fn is_record_line(text: &str) -> bool {
    text.contains('[') && !text.contains("entered-in-error")
}

fn event_check(event: &CompiledEvent, facts: &PatientFacts, screening_date: NaiveDate) -> CheckOutcome {
    let start = window_start(event.window, screening_date);
    let kind = event.kind.as_str();
    let window = window_text(event.window);
    let lines: Vec<&TimelineSentence> = facts
        .timeline
        .iter()
        .filter(|s| s.kind == event.kind && is_record_line(&s.text) && in_window(s.date.date(), start, screening_date))
        .collect();
    let wanted = {
        let mut parts: Vec<String> = event.codes.iter().map(|(s, c)| format!("{}:{c}", s.label())).collect();
        parts.extend(event.names.iter().cloned());
        parts.join(", ")
    };
    if lines.is_empty() {
        return CheckOutcome::new(
            Decision::NotEnoughInformation,
            format!("No {kind} records {window} ({screening_date}) in the structured record, so presence of {wanted} cannot be told."),
            screening_date,
        );
    }
    let hits: Vec<&TimelineSentence> = lines.iter().copied().filter(|s| event_matches(event, &s.text)).collect();
    let found = !hits.is_empty();
    let decision = if found == event.present { Decision::Met } else { Decision::NotMet };
    let summary = if found {
        format!("{} {kind} record(s) {window} match {wanted}.", hits.len())
    } else {
        format!("None of {} {kind} record(s) {window} matches {wanted}.", lines.len())
    };
    let mut out = CheckOutcome::new(decision, summary, screening_date);
    // Evidence: the matching lines; with none, the lines that were read
    // (at most 20, the most recent).
    let shown: Vec<&TimelineSentence> = if found { hits } else { lines.iter().rev().take(20).rev().copied().collect() };
    out.sentences = shown.into_iter().map(SentenceEvidence::from).collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_words_only() {
        assert!(has_words("metformin 500 mg (active)", "metformin"));
        assert!(!has_words("metformins", "metformin"));
        assert!(has_words("insulin glargine", "insulin glargine"));
        assert!(!has_words("noninsulin agent", "insulin"));
        assert!(has_words("x insulin-dependent", "insulin"));
    }

    #[test]
    fn fhir_codes_are_read_from_brackets() {
        let line = "- 2020-03-04 10:00: Hypertension (active) [SNOMED 38341003, ICD-10 I10] [Condition/c1]";
        assert_eq!(
            line_codes(line),
            [(CodeSystem::Icd10, "I10".to_string()), (CodeSystem::Snomed, "38341003".to_string())]
        );
        let med = "- 2020-03-04 11:00: lisinopril 10 MG Oral Tablet (active) [RxNorm 314076] [MedicationRequest/m1]";
        assert_eq!(line_codes(med), [(CodeSystem::RxNorm, "314076".to_string())]);
        // The word outside brackets is not a code.
        assert!(line_codes("SNOMED 123 review (done) [Procedure/p1]").is_empty());
        assert!(CodeSystem::Snomed.matches("38341003", "38341003"));
        assert!(!CodeSystem::Snomed.matches("3834100", "38341003"));
        assert!(CodeSystem::Icd10.matches("I1", "I10"));
    }

    #[test]
    fn icd_codes_are_read_from_mimic_lines() {
        let line = "- 2180-05-06 22:23: ICD-10 E119: Type 2 diabetes mellitus without complications (#3 of admission 2) [diagnoses_icd/2/3]";
        assert_eq!(line_codes(line), [(CodeSystem::Icd10, "E119".to_string())]);
        assert_eq!(line_codes("ICD-9 25000: Diabetes"), [(CodeSystem::Icd9, "25000".to_string())]);
        assert!(line_codes("no codes here").is_empty());
    }

    #[test]
    fn an_age_range_decides_only_where_every_age_in_it_agrees() {
        assert_eq!(decide_interval(60.0, 62.0, Some(18.0), Some(75.0)), Decision::Met);
        assert_eq!(decide_interval(74.0, 76.0, Some(18.0), Some(75.0)), Decision::NotEnoughInformation);
        assert_eq!(decide_interval(80.0, f64::INFINITY, Some(18.0), Some(75.0)), Decision::NotMet);
    }

    fn mimic_patient(anchor_age: i32) -> PatientFacts {
        let text = evident_model::age::AnchorAge::line("F", &anchor_age.to_string(), 2150, "2014 - 2016");
        let patient = evident_model::Patient {
            id: "1".into(),
            source: "mimic".into(),
            birth_date: None,
            sex: Some("F".into()),
            display_name: None,
        };
        let date = NaiveDate::from_ymd_opt(2150, 1, 1).unwrap().and_hms_opt(0, 0, 0).unwrap();
        let sentence = TimelineSentence {
            kind: TimelineKind::Demographics,
            document_id: "d".into(),
            ordinal: 0,
            start: 0,
            end: text.len(),
            text,
            date,
        };
        PatientFacts { patient, labs: vec![], timeline: vec![sentence], latest_document: Some(date.date()) }
    }

    #[test]
    fn only_an_anchor_age_of_91_is_over_89() {
        let on = NaiveDate::from_ymd_opt(2150, 6, 1).unwrap();
        let ninety = age(Some(90.0), None, &mimic_patient(89), on);
        assert_eq!(ninety.decision, Decision::NotEnoughInformation, "{}", ninety.summary);
        assert!(ninety.summary.starts_with("Age 88–90 at 2150-06-01"), "{}", ninety.summary);
        let under_95 = age(None, Some(95.0), &mimic_patient(89), on);
        assert_eq!(under_95.decision, Decision::Met, "89 is a real age: {}", under_95.summary);
        let over = age(None, Some(95.0), &mimic_patient(91), on);
        assert_eq!(over.decision, Decision::NotEnoughInformation, "{}", over.summary);
        assert!(over.summary.starts_with("Age 89 or over"), "{}", over.summary);
        assert_eq!(age(Some(18.0), None, &mimic_patient(91), on).decision, Decision::Met);
    }
}
