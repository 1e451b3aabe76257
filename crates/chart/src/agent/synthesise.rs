//! Phase IV: the numbered context and the two-line answer (also every
//! comparator's answer step).

use std::collections::BTreeSet;

use evident_llm::{chat_json, RepairPolicy, StructuredAnswer};

use super::*;
use crate::answer::{citation_numbers, parse_two_line};
use crate::bank::AnswerType;
use crate::calculators::Calculator;
use crate::criteria::{CriteriaSets, Rule, Truth};
use crate::policy::EvidenceOrder;
use crate::question_names;
use crate::tools::{names_subject, phrase_spans, subject_words, subject_words_in};

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
        let t = node_tokens(&n);
        if used + t > budget_tokens && !kept.is_empty() {
            break;
        }
        used += t;
        let mut text = n.text().split_whitespace().collect::<Vec<_>>().join(" ");
        // The first item alone over the budget is shown shortened (it is
        // cited whole): a lab report of 2,633 characters, decimals and
        // record ids, made a 7,626-token answer prompt for a 4,096-token
        // model, and halving the budget could not cut the only item
        // (`6f8ccac9-G16`, a pipeline failure).
        if t > budget_tokens {
            text = shortened(&text, budget_tokens.saturating_sub(header_tokens(&n)));
        }
        kept.push(n.clone());
        shown.push(ShownNode { number: kept.len(), header: n.header(), text });
    }
    (kept, shown)
}

/// The longest start of `text` (at a character boundary) within `tokens`
/// by [`estimate_text_tokens`], marked as shortened.
fn shortened(text: &str, tokens: usize) -> String {
    const MARK: &str = " ... (shortened to fit the model's context)";
    let room = tokens.saturating_sub(estimate_text_tokens(MARK));
    let ends: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
    // The estimate grows with the length: the last end that fits.
    let fits = ends.partition_point(|&end| estimate_text_tokens(&text[..end]) <= room);
    let end = ends[fits.saturating_sub(1)];
    format!("{}{MARK}", &text[..end])
}

/// The "Context items:" block of the answer prompt for `nodes` as
/// `chart_synthesis.prompt.md` renders it, numbered and de-duplicated as
/// [`number_nodes`] does, with no budget: for checks of the answer step's
/// rules ([`recorded_yes`], the date rules) on what the tools return.
pub fn context_items(nodes: &[Evidence]) -> String {
    let (_, shown) = number_nodes(nodes, usize::MAX / 2);
    let mut block = String::from("Context items:\n");
    for n in &shown {
        block.push_str(&format!("[{}] ({}) {}\n", n.number, n.header, n.text));
    }
    block
}

/// Tokens a node takes in the synthesis prompt: the digit-aware estimate
/// ([`estimate_text_tokens`]) of its text and header, plus the number and
/// brackets. (Three characters a token undercounted the Synthea timeline
/// lines, whose record ids and values are mostly digits: simple RAG's
/// prompts overflowed the embedded model's context by up to 500 tokens.)
pub(crate) fn node_tokens(node: &Evidence) -> usize {
    estimate_text_tokens(&node.text()) + header_tokens(node)
}

/// The tokens of a node's header and number: what [`node_tokens`] counts
/// beside its text.
fn header_tokens(node: &Evidence) -> usize {
    estimate_text_tokens(&node.header()) + 6
}

/// Phase IV (and every comparator's answer step): asks for the two-line
/// answer, repairing once, then records a pipeline failure. With
/// [`AgentConfig::constrained_answer`] the two fields are decoded under a
/// schema (Evident's variant, [`synthesise_constrained`]). `nodes` are the
/// numbered context items the prompt shows (`[n]` is `nodes[n - 1]`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn synthesise(
    ctx: &Ctx<'_>,
    system: String,
    user: String,
    nodes: &[Evidence],
    max_tokens: u32,
    style_answers: &[String],
    order: EvidenceOrder,
    trace: &mut Trace,
) -> Result<Result<(TwoLine, String), PipelineFailure>, ChartError> {
    if ctx.config.constrained_answer {
        return synthesise_constrained(ctx, system, user, nodes, max_tokens, style_answers, order, trace);
    }
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

/// The citation numbers a prompt shows: its lines that start with `[n]`
/// (the numbered context items of every method's answer prompt).
pub(crate) fn shown_numbers(prompt: &str) -> Vec<usize> {
    let mut numbers: Vec<usize> = numbered_lines(prompt).map(|(n, _)| n).filter(|&n| n > 0).collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers
}

/// What the numbered context items of a prompt show that an answer may
/// take as its value: every date (YYYY-MM-DD) in their lines, and each
/// calculator result's score, stage or reported value with the
/// calculator's name, and each word-valued field of its result (a BMI
/// category, a risk group); whether one of them names the question's subject,
/// and the own dates (those of their headers) of those that do
/// ([`ShownValues::with_subject`]); and the order the policy engine
/// ranked them in.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ShownValues {
    pub items: usize,
    pub dates: Vec<String>,
    pub results: Vec<(String, String)>,
    /// (calculator, a word-valued field of its result): "obese", "high".
    pub labels: Vec<(String, String)>,
    pub subject_named: bool,
    pub subject_dates: Vec<String>,
    /// Whether every item that names the subject most fully is a
    /// structured record's line (a prescription, a condition), so that its
    /// own dates are the record's dates of it, not those of notes that
    /// mention it.
    pub subject_records_only: bool,
    pub subject_intervals: Vec<String>,
    /// The numbers of the items that name the subject most fully (those
    /// [`ShownValues::subject_dates`] come from), each with its own date.
    pub subject_items: Vec<(usize, String)>,
    /// Whether a shown structured record's line answers a yes/no question
    /// "Yes" by itself ([`recorded_yes`]).
    pub subject_recorded: bool,
    pub order: EvidenceOrder,
    /// Every figure (a maximal run of digits with inner `.`, `:`, `-` or
    /// `/`: a date, a time, a value, a code) that the items show; with the
    /// question's and the as-of date's, the only ones a reasoning may state.
    pub figures: Vec<String>,
}

impl ShownValues {
    /// Which numbered items of the prompt name what the question asks
    /// about ([`names_subject`] over its [`subject_words`]): whether any
    /// does; of those that hold the most of its words, each one's own
    /// date, the first date of its header
    /// ("(problem_list, 2017-08-26)"), oldest first, not the dates inside
    /// its line (a resolution or a stop); and the intervals they can
    /// start: from such an own date to a later date that its own line
    /// holds (a timeline line's resolution) or that is the own date of
    /// another item naming the subject (the note that stopped a therapy), or to "ongoing"
    /// when its line states no later date.
    pub fn with_subject(mut self, question: &str, prompt: &str) -> Self {
        self.subject_recorded = recorded_yes(question, prompt, None);
        let words = subject_words(question);
        if words.is_empty() {
            return self;
        }
        let mut named: Vec<(usize, &str)> =
            numbered_lines(prompt).filter(|(_, text)| names_subject(&words, text)).collect();
        self.subject_named = !named.is_empty();
        let item_dates: Vec<String> = numbered_lines(prompt).filter_map(|(_, t)| own_date(t)).map(|(d, _)| d).collect();
        // Dates and intervals come from the items that name it most fully:
        // a vital-sign line "Body mass index: 30.5" holds four of the five
        // words of "Body mass index 30+ - obesity", the condition's own
        // line all five (`0f49d2d0-G22`).
        let most = named.iter().map(|(_, t)| subject_words_in(&words, t)).max().unwrap_or_default();
        named.retain(|(_, t)| subject_words_in(&words, t) == most);
        // Of those, the ones that repeat the longest run of the question's
        // own words: "Metoprolol Tartrate 12.5 mg PO" is named by a line
        // of it, not by one of "... 12.5 mg PO/NG", which holds the same
        // words (`10005817-G21`, MIMIC-IV).
        let run = named.iter().map(|(_, t)| shared_run(question, t)).max().unwrap_or_default();
        named.retain(|(_, t)| shared_run(question, t) == run);
        // Of the structured records' items among those, the ones whose
        // entry is named by that run with the fewest other words: "D5LR
        // 1000 mL IV" is named by a line of it, not by one of "Potassium
        // Chl 20 mEq / 1000 mL D5LR 1000 mL IV", which ends with it
        // (MIMIC-IV). A note is kept as it was.
        let extra = |t: &str| record_name_extra(question, t, run);
        if let Some(fewest) = named.iter().filter_map(|(_, t)| extra(t)).min() {
            named.retain(|(_, t)| extra(t).is_none_or(|e| e == fewest));
        }
        // Each naming item's own date, the later dates its line states,
        // and whether it is a structured record's line.
        self.subject_records_only = named.iter().all(|(_, t)| cites_record(t));
        let naming: Vec<(String, Vec<String>, bool, bool)> = named
            .into_iter()
            .filter_map(|(number, text)| {
                let (own, line) = own_date(text)?;
                self.subject_items.push((number, own.clone()));
                Some((own, line))
            })
            .map(|(own, line)| {
                let stated = dates_in(line).into_iter().filter(|d| *d > own).collect();
                let lower = line.to_lowercase();
                let says_ended = ENDED.iter().any(|w| lower.contains(w));
                (own, stated, cites_record(line), says_ended)
            })
            .collect();
        // A start whose line states an end (a resolution, a stop) is not
        // ongoing, though another line of that day (the encounter) states
        // none.
        let ended: BTreeSet<&str> =
            naming.iter().filter(|(_, stated, ..)| !stated.is_empty()).map(|(own, ..)| own.as_str()).collect();
        for (own, stated, structured, says_ended) in &naming {
            let ongoing = (!(ended.contains(own.as_str()) || *structured && *says_ended)).then_some("ongoing");
            // A structured record's line states its own end, or that it
            // has none (it is ongoing): another item's date does not end
            // it (the embedded model ended an active obesity of 1981 on a
            // later check-up's date, `0f49d2d0-G22`); only one that says
            // it ended without a date may end on another item's date. A
            // note's start may end on another note's date (the note that
            // stopped the therapy).
            let others: &[String] = if *structured && !(*says_ended && stated.is_empty()) { &[] } else { &item_dates };
            let later = stated.iter().chain(others).filter(|d| *d > own).map(String::as_str);
            for end in later.chain(ongoing) {
                let interval = format!("{own}–{end}");
                if !self.subject_intervals.contains(&interval) {
                    self.subject_intervals.push(interval);
                }
            }
            if !self.subject_dates.contains(own) {
                self.subject_dates.push(own.clone());
            }
        }
        self.subject_dates.sort();
        self.subject_intervals.sort();
        self
    }

    /// The entries that structured records alone give a date, date-list or
    /// interval-list answer (Evident's rule; [`answer_schema`] holds the
    /// answer to them): where only structured records' lines name the
    /// subject, a first occurrence is the oldest of their own dates (they
    /// are sorted oldest first); a date list is every one of their dates,
    /// oldest first (the embedded model gave one of a prescription's two
    /// dates, `feb67a40-G21`, held out); an interval list is every
    /// interval they start, where each start has one end. `None` where
    /// the rule does not give the answer.
    pub(crate) fn recorded_answer(&self, answer_type: Option<AnswerType>) -> Option<&[String]> {
        if !self.subject_records_only {
            return None;
        }
        let within = |entries: &[String]| !entries.is_empty() && entries.len() <= MAX_LIST_ENTRIES;
        match answer_type? {
            AnswerType::Date if self.order == EvidenceOrder::Earliest && !self.subject_dates.is_empty() => {
                Some(&self.subject_dates[..1])
            }
            AnswerType::DateList if within(&self.subject_dates) => Some(&self.subject_dates),
            AnswerType::IntervalList if within(&self.subject_intervals) && one_end_each(&self.subject_intervals) => {
                Some(&self.subject_intervals)
            }
            _ => None,
        }
    }
}

/// The longest run of consecutive words of `question` (outside its
/// parentheses) that `text` also holds consecutively; words are split at
/// white space, lower-cased and stripped of the punctuation around them,
/// so "PO/NG" is one word and not "PO".
fn shared_run(question: &str, text: &str) -> usize {
    let words = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .map(|w| w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '%')).to_lowercase())
            .filter(|w| !w.is_empty())
            .collect()
    };
    let (q, t) = (words(&crate::tools::outside_parentheses(question)), words(text));
    // Longest common substring of the two word sequences.
    let mut best = 0;
    let mut previous = vec![0usize; t.len() + 1];
    for qw in &q {
        let mut current = vec![0usize; t.len() + 1];
        for (j, tw) in t.iter().enumerate() {
            if qw == tw {
                current[j + 1] = previous[j] + 1;
                best = best.max(current[j + 1]);
            }
        }
        previous = current;
    }
    best
}

/// For an item citing structured records: of its entries whose name (the
/// text after the entry's time stamp, up to its first parenthesis or
/// bracket) repeats `run` consecutive words of `question`, the fewest
/// name words beyond them. `None` for an item that cites no record, or
/// none of whose entries' names does.
fn record_name_extra(question: &str, text: &str, run: usize) -> Option<usize> {
    record_entries(text)
        .into_iter()
        .filter_map(|entry| {
            // "- 2129-04-06 01:00: NAME (until ...) [prescriptions/1]"
            let after_stamp = entry.split_once(": ").map_or(entry, |(_, rest)| rest);
            let name = after_stamp.split(['(', '[']).next().unwrap_or(after_stamp);
            let words = name.split_whitespace().count();
            (shared_run(question, name) == run).then(|| words.saturating_sub(run))
        })
        .min()
}

/// The verbs a yes/no question asks about its subject with ("diagnosed
/// with hypertension", "taking metformin"), which a record's line does not
/// repeat.
const YES_NO_VERBS: &[&str] = &[
    "diagnosed",
    "taking",
    "prescribed",
    "given",
    "administered",
    "treated",
    "currently",
    "documented",
    "evidence",
    "performed",
];

/// Whether a question asks whether its subject is documented ("Is chronic
/// kidney disease or renal failure documented?", "Is there documentation
/// of ..."): "documented" or "documentation" outside parentheses.
fn asks_whether_documented(question: &str) -> bool {
    let outside = crate::tools::outside_parentheses(&question.to_lowercase());
    outside.split(|c: char| !c.is_alphanumeric()).any(|w| matches!(w, "documented" | "documentation"))
}

/// Whether no two intervals ("start–end") share their start.
fn one_end_each(intervals: &[String]) -> bool {
    let starts: BTreeSet<&str> = intervals.iter().map(|i| i.split('–').next().unwrap_or(i)).collect();
    starts.len() == intervals.len()
}

/// One alternative of a yes/no question's subject ([`recorded_yes`]):
/// drug classes, or words each with the spellings that hold it too.
enum Alternative<'a> {
    Classes(Vec<&'a crate::skills::DrugClass>),
    Words(Vec<String>, Vec<Vec<Vec<String>>>),
}

/// Words that say a record's line has ended.
const ENDED: &[&str] = &["stopped", "resolved", "inactive", "completed"];

/// Evident's record rule for a yes/no question, not the paper's: whether
/// a shown structured record's entry (a prescription, a condition, a
/// procedure: [`YES_NO_RECORDS`]; [`record_entries`]) holds every word of the question's
/// subject ([`subject_words`] without dates and the verbs the question
/// asks with; a phrase that names another condition than a subject word,
/// "pulmonary hypertension", does not hold it: [`crate::conditions`]), is dated (its header's date) on or before the question's
/// date when the question names one, and, unless the question asks in
/// the perfect without a date ("Has the patient been diagnosed with
/// hypertension?", "Did the patient ever receive ..."), is still current
/// then: the newest such entry (on or before that date) states no end
/// ("stopped", "resolved", "inactive", "completed") and no later date, or
/// only an end after the question's date. Such an entry answers the question "Yes" (the embedded model
/// answered "No" beside it, citing it: `b2eeab29-G01`, `3ce34794-G07`).
///
/// With the parsing `skills`: a subject word is held by an entry that
/// holds it or every word of one of its spellings (their expansions:
/// "anaemia" in the question, "Anemia (disorder)" in the record); and a
/// subject that names drug classes and nothing else ("at least one
/// statin", "at least one opioid analgesic";
/// [`SkillLibrary::classes_named`]) is held by a prescription's entry
/// holding a substance of any of them ("Simvastatin 20 MG Oral Tablet").
/// A question whose subject is alternatives joined by "or" (outside
/// parentheses, and not where it also says "and": "Is chronic kidney
/// disease or renal failure documented?", "at least one oral
/// anticoagulant or heparin") is held by an entry that holds any one of
/// them.
pub fn recorded_yes(question: &str, prompt: &str, skills: Option<&SkillLibrary>) -> bool {
    !recorded_yes_entries(question, prompt, skills).is_empty()
}

/// The shown entries that answer a yes/no question "Yes" by
/// [`recorded_yes`], each with its item's number: every entry that names
/// the subject for a question in the perfect ("Has the patient ever ..."),
/// else the newest day's; none where the rule does not answer Yes.
pub(crate) fn recorded_yes_entries(
    question: &str,
    prompt: &str,
    skills: Option<&SkillLibrary>,
) -> Vec<(usize, String)> {
    let Some(subject) = YesNoSubject::of(question, skills) else { return vec![] };
    let lowered = question.to_lowercase();
    let question_words: Vec<&str> = lowered.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let asked_on = dates_in(question).into_iter().next();
    let perfect = asked_on.is_none()
        && (matches!(question_words.first(), Some(&("has" | "have" | "had" | "did" | "was" | "were")))
            || question_words.contains(&"ever")
            || question_words.windows(2).any(|w| matches!(w, ["has" | "have" | "had", "been"])));
    // Each shown entry that names the whole subject: its own date, and
    // whether it is current on the question's date.
    let mut naming: Vec<(String, bool, usize, &str)> = Vec::new();
    for (number, text) in numbered_lines(prompt) {
        let Some((own, line)) = own_date(text) else { continue };
        if asked_on.as_ref().is_some_and(|on| own > *on) {
            continue;
        }
        for entry in record_entries(line).into_iter().filter(|e| subject.held_by(e)) {
            let lower = entry.to_lowercase();
            let says_ended = ENDED.iter().any(|w| lower.split(|c: char| !c.is_alphanumeric()).any(|t| t == *w));
            // Its later dates, and its own day where the entry ends then
            // (a MIMIC-IV prescription "until" that day); its own date
            // otherwise is its heading or stamp ("Medications on
            // 2020-09-18 - 2020-09-18 23:57: ..."), no end.
            let mut ends: Vec<String> = dates_in(entry).into_iter().filter(|d| *d > own).collect();
            if lower.contains(&format!("until {own}")) {
                ends.push(own.clone());
            }
            let current = match &asked_on {
                // Ended, if at all, on the question's date or after it.
                Some(on) if !ends.is_empty() => ends.iter().all(|end| end >= on),
                _ => !says_ended && ends.is_empty(),
            };
            naming.push((own.clone(), current, number, entry));
        }
    }
    let entries = |naming: Vec<(String, bool, usize, &str)>| {
        naming.into_iter().map(|(_, _, number, entry)| (number, entry.trim().to_string())).collect()
    };
    if perfect {
        return entries(naming);
    }
    // The newest entry states the status then (a renewed prescription's
    // older request may be active, the newer one stopped): each of that
    // day's must be current.
    let Some(newest) = naming.iter().map(|(own, ..)| own.clone()).max() else { return vec![] };
    naming.retain(|(own, ..)| *own == newest);
    if naming.iter().all(|(_, current, ..)| *current) {
        entries(naming)
    } else {
        vec![]
    }
}

/// Evident's reasoning for a "Yes" that the record rule gave
/// ([`recorded_yes_entries`]): the first entry that answers it, without
/// its codes and record citation, cited ("The record shows 2020-09-18
/// 23:57: Camila 28 Day Pack (active) [1]."). The embedded model's own
/// reasoning beside such answers repeated "The patient is receiving a
/// drug on a given date" (q16f).
pub(crate) fn recorded_yes_reasoning(entries: &[(usize, String)]) -> Option<(String, usize)> {
    let (number, entry) = entries.first()?;
    let text = entry_words(entry);
    (!text.is_empty()).then(|| (format!("The record shows {text} [{number}]."), *number))
}

/// A structured record's entry as words: without its codes and record
/// citation (whatever is in brackets), its white space collapsed, without
/// a leading list dash or a closing dot.
fn entry_words(entry: &str) -> String {
    let mut text = String::new();
    let mut rest = entry;
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        rest = rest[open..].find(']').map_or("", |close| &rest[open + close + 1..]);
    }
    text.push_str(rest);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    text.trim_start_matches(['-', ' ']).trim_end_matches(['.', ' ']).to_string()
}

/// Evident's reasoning for a date, date-list or interval-list answer that
/// structured records alone gave ([`ShownValues::recorded_answer`]): the
/// entry that names the subject in the item of each answered date (an
/// interval's start), cited ("The earliest entry the record shows is
/// Penicillin V Potassium 250 MG Oral Tablet (stopped) on 2017-08-26
/// [1].").
/// Beside such answers the embedded model copied the style skill's
/// sentences or gave a date the answer does not hold. Returns the
/// reasoning and the numbers it cites; `None` where `answer` is not the
/// records' answer or an item cannot be found.
pub(crate) fn recorded_dates_reasoning(
    question: &str,
    prompt: &str,
    answer_type: Option<AnswerType>,
    shown: &ShownValues,
    answer: &str,
) -> Option<(String, Vec<usize>)> {
    let recorded = shown.recorded_answer(answer_type)?;
    let list = match answer.split_once(": ") {
        Some(("Administered" | "Active", list)) if answer_type == Some(AnswerType::IntervalList) => list,
        _ => answer,
    };
    let entries: Vec<&str> = list.split(" | ").collect();
    if entries.len() != recorded.len() || entries.iter().zip(recorded).any(|(e, r)| *e != r.as_str()) {
        return None;
    }
    let words = subject_words(question);
    let lines: Vec<(usize, &str)> = numbered_lines(prompt).collect();
    let mut cited = Vec::new();
    let mut first_text = None;
    for entry in entries.iter().copied() {
        let start = entry.split('–').next().unwrap_or(entry);
        let (number, _) = shown.subject_items.iter().find(|(_, own)| own == start)?;
        let (_, text) = lines.iter().find(|(n, _)| n == number)?;
        let (_, line) = own_date(text)?;
        if first_text.is_none() {
            let candidates = record_entries(line);
            let naming = candidates.iter().find(|e| names_subject(&words, e)).or(candidates.first())?;
            // Without the stamp before it ("Medications on 2020-09-18 -
            // 2020-09-18 23:57: "): the answer's date is stated apart.
            let named = entry_words(naming);
            let stamped =
                named.match_indices(": ").filter(|(i, _)| named[..*i].ends_with(|c: char| c.is_ascii_digit()));
            let unstamped = stamped.last().map_or(named.as_str(), |(i, _)| &named[i + 2..]);
            first_text = Some(unstamped.to_string()).filter(|t| !t.is_empty());
        }
        cited.push(*number);
    }
    let text = first_text?;
    let on = if answer_type == Some(AnswerType::IntervalList) { "for" } else { "on" };
    let cite = |i: usize| format!("{on} {} [{}]", entries[i], cited[i]);
    let reasoning = match entries.len() {
        1 if answer_type == Some(AnswerType::Date) => {
            format!("The earliest entry the record shows is {text} {}.", cite(0))
        }
        1 => format!("The record shows {text} {}.", cite(0)),
        n => {
            let rest: Vec<String> = (1..n).map(cite).collect();
            format!("The record shows {text} {}, and again {}.", cite(0), rest.join(", "))
        }
    };
    Some((reasoning, cited))
}

/// The stretch of `part` from its first subject word to its last, as
/// written ("digoxin 0.125 mg oral tablet", not the words "0" and "125");
/// the words joined where they cannot be found in order.
fn span_of(part: &str, words: &[String]) -> String {
    let (Some(first), Some(last)) = (words.first(), words.last()) else { return String::new() };
    let start = phrase_spans(part, first).first().map(|&(start, _)| start);
    let end = start.and_then(|start| phrase_spans(part, last).into_iter().find(|&(s, _)| s >= start));
    match (start, end) {
        (Some(start), Some((_, end))) => part[start..end].to_string(),
        _ => words.join(" "),
    }
}

/// A yes/no question's subject as [`recorded_yes`] reads it: its
/// alternatives (joined by "or"), each drug classes or words with their
/// spellings from the parsing skills.
pub(crate) struct YesNoSubject<'a> {
    question: &'a str,
    /// Every subject word outside parentheses.
    words: Vec<String>,
    alternatives: Vec<Alternative<'a>>,
    /// Each alternative's words, as the question gives them.
    phrases: Vec<String>,
}

impl<'a> YesNoSubject<'a> {
    /// The subject of `question`; `None` where an alternative has no
    /// subject word.
    pub(crate) fn of(question: &'a str, skills: Option<&'a SkillLibrary>) -> Option<Self> {
        let lowered = question.to_lowercase();
        let question_words: Vec<&str> =
            lowered.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
        let at_least_one = question_words.windows(3).any(|w| w == ["at", "least", "one"]);
        let subject_of = |part: &str| -> Vec<String> {
            subject_words(part)
                .into_iter()
                .filter(|w| !YES_NO_VERBS.contains(&w.as_str()) && dates_in(w).is_empty())
                .filter(|w| !(at_least_one && matches!(w.as_str(), "least" | "one")))
                .collect()
        };
        let outside = crate::tools::outside_parentheses(&lowered);
        // "and" asks for all: one alternative, and no classes.
        let and = question_words.contains(&"and");
        let parts: Vec<&str> = if and { vec![lowered.as_str()] } else { outside.split(" or ").collect() };
        let mut alternatives = Vec::new();
        let mut phrases = Vec::new();
        for part in parts {
            let words = subject_of(part);
            phrases.push(span_of(part, &words));
            match skills.filter(|_| !and).and_then(|s| s.classes_named(&words)) {
                Some(classes) => alternatives.push(Alternative::Classes(classes)),
                None if words.is_empty() => return None,
                None => {
                    let spelled =
                        words.iter().map(|w| skills.map(|s| s.expansions_of(w)).unwrap_or_default()).collect();
                    alternatives.push(Alternative::Words(words, spelled));
                }
            }
        }
        Some(YesNoSubject { question, words: subject_of(&outside), alternatives, phrases })
    }

    /// The subject's words, for a record query.
    pub(crate) fn words(&self) -> &[String] {
        &self.words
    }

    /// The subject as a reader is told it: its alternatives' words joined
    /// by "or" ("chronic kidney disease or renal failure").
    pub(crate) fn phrase(&self) -> String {
        self.phrases.join(" or ")
    }

    /// Whether a structured record's entry ([`YES_NO_RECORDS`]) holds the
    /// subject: one alternative's every word or one of its spellings, or a
    /// prescription of a substance of one of its classes (within a
    /// combination's name too, "Piperacillin-Tazobactam"); a phrase that
    /// names another condition than a subject word ("pulmonary
    /// hypertension") holds nothing.
    pub(crate) fn held_by(&self, entry: &str) -> bool {
        if !cited_records(entry).any(|k| YES_NO_RECORDS.contains(&k)) {
            return false;
        }
        let masked = crate::conditions::DistinctConditions::builtin().masked(&self.words, self.question, entry);
        self.alternatives.iter().any(|alternative| match alternative {
            Alternative::Classes(classes) => {
                let entry_words = crate::skills::words_of(&masked);
                cited_records(entry).any(|k| MEDICATION_RECORDS.contains(&k))
                    && classes.iter().flat_map(|c| &c.substances).any(|s| entry_words.contains(s))
            }
            Alternative::Words(words, spelled) => words.iter().zip(spelled).all(|(word, others)| {
                subject_words_in(std::slice::from_ref(word), &masked) == 1
                    || others.iter().any(|other| subject_words_in(other, &masked) == other.len())
            }),
        })
    }
}

/// Whether one of a line's structured record entries ([`record_entries`])
/// holds a yes/no question's subject ([`YesNoSubject::held_by`]).
pub(crate) fn holds_yes_no_subject(subject: &YesNoSubject<'_>, line: &str) -> bool {
    record_entries(line).into_iter().any(|e| subject.held_by(e))
}

/// A numbered item's own date, the first date of its header
/// ("(problem_list, 2017-08-26) ..."), and the rest of its line.
fn own_date(text: &str) -> Option<(String, &str)> {
    let (header, line) = text.trim_start().strip_prefix('(')?.split_once(')')?;
    Some((dates_in(header).into_iter().next()?, line))
}

/// The structured records' entries of an item's line, each up to and with
/// its record citation ("... Digoxin 0.125 MG Oral Tablet (active) [RxNorm
/// 197604] [MedicationRequest/d1]"): one for a record's own line, several
/// for a section of a medication list, so that a subject's words are
/// found within one entry, not across two. Text after the last citation
/// is no entry.
fn record_entries(line: &str) -> Vec<&str> {
    let mut entries = Vec::new();
    let (mut start, mut from) = (0, 0);
    while let Some(open) = line[from..].find('[').map(|i| from + i) {
        let Some(close) = line[open..].find(']').map(|i| open + i) else { break };
        if cites_record(&line[open..=close]) {
            entries.push(&line[start..=close]);
            start = close + 1;
        }
        from = close + 1;
    }
    entries
}

/// The MIMIC-IV tables whose rows `evident ingest` writes as timeline
/// lines, each citing its row as `[table/id]` (crates/ingest/src/mimic.rs).
const MIMIC_RECORD_TABLES: [&str; 6] =
    ["patients", "admissions", "labevents", "prescriptions", "diagnoses_icd", "procedures_icd"];

/// The records whose own entry states a diagnosis, a prescription or a
/// procedure, and so may answer a yes/no question by [`recorded_yes`]:
/// the FHIR resources and MIMIC-IV tables ingestion writes them from. An
/// encounter's reason ("Encounter for problem (AMB), reason: Anemia
/// (disorder) [Encounter/..]") or a lab row is not one: the bank's gold
/// answer for `aa0b29d0-G06` ("diagnosed with anaemia?") is No beside such
/// an encounter, since no condition was recorded.
const YES_NO_RECORDS: [&str; 6] =
    ["Condition", "MedicationRequest", "Procedure", "prescriptions", "diagnoses_icd", "procedures_icd"];

/// The records of a prescription, which alone answer for a drug class.
const MEDICATION_RECORDS: [&str; 2] = ["MedicationRequest", "prescriptions"];

/// Whether a line cites a structured record: a FHIR resource
/// ("[Condition/780124dc-...]", "[MedicationRequest/m1]": a capitalised
/// resource type) or a MIMIC-IV row ("[prescriptions/90650714]": one of
/// the tables ingestion writes; a lower-case unit in brackets, "[mg/dL]",
/// is not one).
fn cites_record(line: &str) -> bool {
    cited_records(line).next().is_some()
}

/// The kinds of structured record a line cites ("Condition",
/// "prescriptions"), in order.
fn cited_records(line: &str) -> impl Iterator<Item = &str> {
    line.split('[').skip(1).filter_map(|rest| {
        let (kind, id) = rest.split_once(']').and_then(|(inside, _)| inside.split_once('/'))?;
        let fhir =
            kind.starts_with(|c: char| c.is_ascii_uppercase()) && kind.chars().all(|c| c.is_ascii_alphanumeric());
        ((fhir || MIMIC_RECORD_TABLES.contains(&kind)) && !id.is_empty()).then_some(kind)
    })
}

/// Every date (YYYY-MM-DD, not inside a longer run of digits) in a text,
/// in order.
fn dates_in(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut dates = Vec::new();
    for (i, window) in bytes.windows(10).enumerate() {
        let is_date =
            window.iter().enumerate().all(|(j, b)| if j == 4 || j == 7 { *b == b'-' } else { b.is_ascii_digit() });
        let bounded = i == 0 || !bytes[i - 1].is_ascii_digit();
        if is_date && bounded {
            // Digits and dashes only, so the window is whole characters.
            dates.push(String::from_utf8_lossy(window).into_owned());
        }
    }
    dates
}

/// The numbered context items of a prompt: each line that starts with
/// `[n]`, as its number and the rest of the line.
fn numbered_lines(prompt: &str) -> impl Iterator<Item = (usize, &str)> {
    prompt.lines().filter_map(|line| {
        let (number, text) = line.strip_prefix('[')?.split_once(']')?;
        Some((number.parse().ok()?, text))
    })
}

/// Whether a figure is a date, YYYY-MM-DD.
fn is_date(figure: &str) -> bool {
    figure.len() == 10 && chrono::NaiveDate::parse_from_str(figure, "%Y-%m-%d").is_ok()
}

/// The figures of a text: maximal runs of ASCII digits joined by single
/// `.`, `:`, `-` or `/` ("1996-02-04", "21:51", "0.69", "2", the "2" of
/// "CHA2DS2-VASc").
pub(crate) fn figures_in(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() {
            if chars[i].is_ascii_digit() {
                i += 1;
            } else if ".:-/".contains(chars[i]) && chars.get(i + 1).is_some_and(char::is_ascii_digit) {
                i += 2;
            } else {
                break;
            }
        }
        let figure: String = chars[start..i].iter().collect();
        // A decimal's trailing zeros may be left off ("4.0" is stated "4").
        let trimmed = match figure.split_once('.') {
            Some((_, decimals)) if !decimals.contains(['.', ':', '-', '/']) => {
                Some(figure.trim_end_matches('0').trim_end_matches('.').to_string())
            }
            _ => None,
        };
        for f in std::iter::once(figure).chain(trimmed) {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out
}

pub(crate) fn shown_values(prompt: &str) -> ShownValues {
    let mut shown = ShownValues::default();
    for (_, text) in numbered_lines(prompt) {
        shown.items += 1;
        for figure in figures_in(text) {
            if !shown.figures.contains(&figure) {
                shown.figures.push(figure);
            }
        }
        for date in dates_in(text) {
            if !shown.dates.contains(&date) {
                shown.dates.push(date);
            }
        }
        let calculation =
            text.split_once(" calculator: inputs ").and_then(|(head, r)| Some((head, r.rsplit_once("; result ")?.1)));
        if let Some((head, result)) = calculation {
            let name = head.rsplit(' ').next().unwrap_or_default().to_string();
            let Ok(output) = serde_json::from_str::<Value>(result.trim()) else { continue };
            let value = result_value(&output);
            for (key, v) in output.as_object().into_iter().flatten() {
                let label = v.as_str().filter(|_| !matches!(key.as_str(), "unit" | "calculator" | "stage"));
                if let Some(label) = label.map(|l| (name.clone(), l.to_string())) {
                    if !shown.labels.contains(&label) {
                        shown.labels.push(label);
                    }
                }
            }
            let result = value.map(|v| (name, v));
            shown.results.extend(result.filter(|r| !shown.results.contains(r)));
        }
    }
    shown
}

/// The value a calculation's result answers with, as the answer schema
/// reads it: its stage, else its score, else its reported value.
fn result_value(output: &Value) -> Option<String> {
    match (&output["stage"], &output["score"], &output["reported"]) {
        (Value::String(stage), _, _) => Some(stage.clone()),
        (_, Value::Number(n), _) | (_, _, Value::Number(n)) => n.as_f64().map(|v| format!("{v}")),
        _ => None,
    }
}

/// Evident's answer to a score question (with the constrained answer step
/// and the calculators) where the context's calculations by the
/// calculators the question names all give one value: the answer
/// schema already holds the answer to that value, so Evident writes the
/// rest of the baseline prompt's format, "<value>; <date of the inputs>;
/// <source>" ("4; 2020-03-01; cha2ds2-vasc calculation"), the date the
/// newest item the calculation read, or the reference date where it read
/// the patient's age (which is the age on that date).
fn calculated_score(
    question: &str,
    answer_type: Option<AnswerType>,
    nodes: &[Evidence],
    as_of: NaiveDateTime,
) -> Option<String> {
    if answer_type != Some(AnswerType::Score) {
        return None;
    }
    let named: Vec<(&str, String, NaiveDateTime)> = nodes
        .iter()
        .filter_map(|node| {
            let Evidence::Calculation { calculator, output, used, .. } = node else { return None };
            Calculator::from_name(calculator).filter(|c| question_names(question, *c))?;
            let dated = used.iter().all(|e| e.date().is_some());
            let date = node.date().filter(|_| dated).unwrap_or(as_of);
            Some((calculator.as_str(), result_value(output)?, date))
        })
        .collect();
    let (calculator, value, date) = named.first()?;
    if named.iter().any(|(_, other, _)| other != value) {
        return None;
    }
    Some(format!("{value}; {}; {calculator} calculation", super::date_of(*date)))
}

/// Evident's (with the constrained answer step and the calculators): where
/// a score or category answer (or one of a question without its answer
/// type) is the result of a context item's
/// calculation by a calculator the question names, the reasoning is
/// written from that calculation, cited: the calculator, its result and
/// what it read from the record ("cha2ds2-vasc gives 5 [2], from the
/// record: age 71-73 years, female, hypertension, stroke tia
/// thromboembolism."). Beside such answers the embedded model wrote "The
/// CHA2DS2-VASc score is calculated based on lab values and; the findings
/// with the deterministic calculators. ... No[1]." (q16f); its reasoning
/// stays in the trace's raw answer. Returns the reasoning and the item's
/// number.
pub(crate) fn calculation_reasoning(
    question: &str,
    answer_type: Option<AnswerType>,
    answer: &str,
    nodes: &[Evidence],
) -> Option<(String, usize)> {
    let head = answer.split(';').next().unwrap_or_default().trim();
    nodes.iter().enumerate().find_map(|(i, node)| {
        let Evidence::Calculation { calculator, inputs, output, .. } = node else { return None };
        if !Calculator::from_name(calculator).is_some_and(|c| question_names(question, c)) {
            return None;
        }
        let value = result_value(output)?;
        let category = output["category"].as_str();
        let is_category = || category.is_some_and(|c| c.eq_ignore_ascii_case(head));
        let answered = match answer_type {
            Some(AnswerType::Score) => value == head,
            Some(AnswerType::Category) => is_category(),
            // A question asked without its answer type (`evident ask`).
            None => value == head || is_category(),
            Some(_) => false,
        };
        if !answered {
            return None;
        }
        let unit = output["unit"].as_str().map(|u| format!(" {u}")).unwrap_or_default();
        let category = category.map(|c| format!(" ({c})")).unwrap_or_default();
        let read: Vec<String> =
            inputs.as_object().into_iter().flatten().filter_map(|(key, v)| input_words(key, v)).collect();
        let from = if read.is_empty() { String::new() } else { format!(", from the record: {}", read.join(", ")) };
        Some((format!("{calculator} gives {value}{unit}{category} [{}]{from}.", i + 1), i + 1))
    })
}

/// Evident's (with the constrained answer step and the calculators): where
/// a yes/no answer (or one of a question without its answer
/// type) is the result of a context item's check of the criteria set the
/// question names, the reasoning is written from that check, cited: the
/// set, its result and the status of each criterion that decides it
/// ([`Rule::deciding`]) with what it read from the record
/// ("statin-criteria gives Yes [1]: age 40-75 years: met (58);
/// documented diabetes: met (2013-03-29 16:42: Diabetes mellitus type 2
/// (disorder) (active))."). Returns the reasoning and the item's number.
pub(crate) fn criteria_reasoning(
    question: &str,
    answer_type: Option<AnswerType>,
    answer: &str,
    nodes: &[Evidence],
    criteria: &CriteriaSets,
) -> Option<(String, usize)> {
    if !matches!(answer_type, Some(AnswerType::YesNo | AnswerType::YesNoUnclear) | None) {
        return None;
    }
    let set = criteria.named_in(question)?;
    nodes.iter().enumerate().find_map(|(i, node)| {
        let Evidence::Calculation { calculator, inputs, output, .. } = node else { return None };
        if *calculator != set.id || output["result"].as_str() != Some(answer) {
            return None;
        }
        let status: Vec<(&str, &str)> = output["criteria"]
            .as_array()?
            .iter()
            .filter_map(|c| Some((c["criterion"].as_str()?, c["status"].as_str()?)))
            .collect();
        let status_of = |label: &str| status.iter().find(|(l, _)| *l == label).map(|(_, s)| *s);
        let truth = |atom: &Rule| match atom.label().and_then(status_of) {
            Some("met") => Truth::Met,
            Some("not met") => Truth::NotMet,
            _ => Truth::Unknown,
        };
        // Only the criteria that decide the result (a met "any" by the
        // parts met): the embedded model's anaemia check listed both
        // sexes' haemoglobin limits beside the problem-list entry that
        // gave its Yes.
        let read: Vec<String> = set
            .rule
            .deciding(&truth)
            .into_iter()
            .filter_map(|atom| {
                let label = atom.label()?;
                let status = status_of(label)?;
                let value = match &inputs[label] {
                    // A sex criterion met needs no word more ("male: met").
                    Value::String(_) if matches!(atom, Rule::Sex(_)) && status == "met" => {
                        return Some(format!("{label}: {status}"))
                    }
                    Value::String(s) if matches!(atom, Rule::Sex(_)) => format!("recorded {s}"),
                    Value::String(s) => entry_words(s),
                    Value::Number(n) => n.to_string(),
                    _ => return Some(format!("{label}: {status}")),
                };
                Some(format!("{label}: {status} ({value})"))
            })
            .collect();
        Some((format!("{calculator} gives {answer} [{}]: {}.", i + 1, read.join("; ")), i + 1))
    })
}

/// A calculator input as words: a true finding by its name, a false one
/// not at all (but `female` false is "male"), a number with its unit.
fn input_words(key: &str, value: &Value) -> Option<String> {
    const UNITS: [(&str, &str); 8] = [
        ("_ml_min_1_73m2", "mL/min/1.73 m2"),
        ("_years", "years"),
        ("_percent", "%"),
        ("_mg_dl", "mg/dL"),
        ("_g_dl", "g/dL"),
        ("_mg_l", "mg/L"),
        ("_kg", "kg"),
        ("_m", "m"),
    ];
    let (name, unit) =
        UNITS.iter().find_map(|(suffix, unit)| key.strip_suffix(suffix).map(|name| (name, *unit))).unwrap_or((key, ""));
    let name = name.replace('_', " ");
    let value = match value {
        Value::Bool(true) => return Some(name),
        Value::Bool(false) if key == "female" => return Some("male".into()),
        Value::Bool(false) => return None,
        // To two decimals (Synthea stores "78.35762647441827" kg); the
        // calculation used the stored value, and the cited item shows it.
        Value::Number(n) if n.is_f64() => {
            let shown = format!("{:.2}", n.as_f64().unwrap_or_default());
            shown.trim_end_matches('0').trim_end_matches('.').to_string()
        }
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => return None,
    };
    Some(if unit.is_empty() { format!("{name} {value}") } else { format!("{name} {value} {unit}") })
}

/// The options a question lists in parentheses, "(G1, G2, G3a)": two or
/// more, comma-separated, the first such list.
pub(crate) fn question_options(question: &str) -> Vec<String> {
    question
        .split('(')
        .skip(1)
        .filter_map(|rest| rest.split_once(')'))
        .map(|(inside, _)| {
            inside.split(',').map(|o| o.trim().to_string()).filter(|o| !o.is_empty()).collect::<Vec<_>>()
        })
        .find(|options| options.len() >= 2)
        .unwrap_or_default()
}

/// Whether a question's option is `label`: the whole option, or its first
/// words before what it states about itself ("prediabetes 5.7-6.4%" is
/// "prediabetes"; "diabetes" is not "prediabetes 5.7-6.4%"). Case is
/// ignored.
fn option_named(option: &str, label: &str) -> bool {
    option.len() >= label.len()
        && option.is_char_boundary(label.len())
        && option[..label.len()].eq_ignore_ascii_case(label)
        && option[label.len()..].chars().next().is_none_or(|c| c == ' ')
}

/// Values as one regular-expression alternation, each matched literally.
fn alternatives<S: AsRef<str>>(values: impl IntoIterator<Item = S>) -> String {
    let literal = |v: &str| {
        v.chars().fold(String::new(), |mut out, c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                out.push('\\');
            }
            out.push(c);
            out
        })
    };
    values.into_iter().map(|v| literal(v.as_ref())).collect::<Vec<_>>().join("|")
}

/// Above this many candidate intervals (a subject named on many days of
/// a long full context) an interval list is any short line again, so the
/// answer grammar stays small.
const MAX_INTERVALS: usize = 200;

/// The most entries a list answer holds (the bank's questions ask for at
/// most 12).
const MAX_LIST_ENTRIES: usize = 12;

/// The answer step's schema: a one-line answer, and a reasoning of one to
/// three cited passages whose `[n]` can only be a number in `numbers` (no
/// citation at all when nothing was shown). Patterns carry their own
/// length bounds so the answer always fits its token limit. With the
/// question's answer type the answer is held to its schema: one of the
/// choices (those the agent's triggered style skills allow, when they
/// list any: `style_answers`; Yes, No or Unclear alone for the paper's
/// format without "Not documented"); a date that a shown item holds (any date
/// when nothing is shown), and a list of dates (" | " between them) only
/// of those; once a shown item names the question's subject, "Not
/// documented" and "Unclear" are no longer choices for either (it is
/// documented, and its date is shown: a 0.5B model answered "Not
/// documented" with the one line that answered a first-occurrence
/// question before it), a list's dates are the own dates of the items
/// that name it, and so are a date's when the evidence order is earliest
/// (the first-occurrence skill answers with the document's date; the
/// same model then took a line's resolution date); an interval list,
/// once a shown item names the subject, of intervals those items start
/// (to a later date in the line or of another item, or ongoing), after
/// an optional status, Administered or Active (any short line again
/// beyond [`MAX_INTERVALS`] candidates); a score or stage first: the
/// value of a shown calculator the question names when there is one
/// (nothing else: the score is computed), else one a shown calculator
/// computed; a category among the options the question lists; else any
/// short line. A yes/no answer (with or without "Never" and "Not
/// documented") is the result of a shown check of the criteria set the
/// question names, where that is a choice; else "Yes" alone where a shown
/// record's entry answers it ([`recorded_yes`]; Evident's rules).
pub(crate) fn answer_schema(
    numbers: &[usize],
    question: &str,
    answer_type: Option<AnswerType>,
    shown: &ShownValues,
    style_answers: &[String],
    criteria: &CriteriaSets,
) -> Value {
    const TEXT: &str = r"[^\[\]\n\r]";
    const UNKNOWN: &str = "Not documented|Unclear";
    // The choices a yes/no answer keeps. The result of a shown check of
    // the criteria set the question names is the answer, where it is a
    // choice (the embedded model answered "Not documented" to a yes/no
    // anaemia question beside the check's Yes: `ca3d7b05-G15`). Else,
    // where a shown record's line answers the question ([`recorded_yes`]),
    // "Yes" is the answer, when it is a choice at all. A question that
    // asks whether its subject is documented is answered "No" when it is
    // not: "Not documented" would say the same, and is no choice (the
    // embedded model answered "Not documented" to "Is chronic kidney
    // disease or renal failure documented?", gold No: `77f70af5-G08`).
    fn held<'c>(shown: &ShownValues, named: Option<&str>, documented: bool, mut choices: Vec<&'c str>) -> Vec<&'c str> {
        let checked = |o: &&str| shown.labels.iter().any(|(name, label)| Some(name.as_str()) == named && label == o);
        if choices.iter().any(checked) {
            choices.retain(checked);
            return choices;
        }
        if shown.subject_recorded && choices.contains(&"Yes") {
            return vec!["Yes"];
        }
        if documented && choices.len() > 1 {
            choices.retain(|c| *c != "Not documented");
        }
        choices
    }
    let documented = asks_whether_documented(question);
    let named = criteria.named_in(question).map(|set| set.id.as_str());
    let recorded = |choices| held(shown, named, documented, choices);
    // The records' own answer ([`ShownValues::recorded_answer`]), its
    // entries in order.
    let recorded_list = shown
        .recorded_answer(answer_type)
        .map(|entries| entries.iter().map(|e| alternatives([e])).collect::<Vec<_>>().join(" \\| "));
    let answer = match answer_type {
        // An interval list the records give has entries, so no status
        // field ("Administered: ") says more than they do, and the answer
        // is one value (whose reasoning Evident writes, asking no model).
        Some(AnswerType::Date | AnswerType::DateList | AnswerType::IntervalList) if recorded_list.is_some() => {
            format!("^(?:{})$", recorded_list.as_deref().unwrap_or_default())
        }
        Some(AnswerType::YesNo) if !style_answers.is_empty() => {
            format!("^(?:{})$", alternatives(recorded(style_answers.iter().map(String::as_str).collect())))
        }
        Some(AnswerType::YesNo) => {
            let choices = recorded(vec!["Yes", "No", "Never", "Not documented", "Unclear"]);
            format!("^(?:{})$", alternatives(choices))
        }
        Some(AnswerType::YesNoUnclear) => {
            let options = ["Yes", "No", "Unclear"];
            let styled: Vec<&str> = options
                .into_iter()
                .filter(|o| style_answers.is_empty() || style_answers.iter().any(|s| s == o))
                .collect();
            let styled = if styled.is_empty() { &options[..] } else { &styled };
            format!("^(?:{})$", alternatives(recorded(styled.to_vec())))
        }
        Some(AnswerType::Date) if shown.items == 0 => format!("^(?:[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}|{UNKNOWN})$"),
        Some(AnswerType::Date) if shown.dates.is_empty() => format!("^(?:{UNKNOWN})$"),
        Some(AnswerType::Date) if shown.order == EvidenceOrder::Earliest && !shown.subject_dates.is_empty() => {
            format!("^(?:{})$", alternatives(&shown.subject_dates))
        }
        Some(AnswerType::Date) if shown.subject_named => format!("^(?:{})$", alternatives(&shown.dates)),
        Some(AnswerType::Date) => format!("^(?:{}|{UNKNOWN})$", alternatives(&shown.dates)),
        Some(AnswerType::DateList) if !shown.dates.is_empty() => {
            let dates = if shown.subject_dates.is_empty() { &shown.dates } else { &shown.subject_dates };
            let list = format!("(?:{0})(?: \\| (?:{0})){{0,{1}}}", alternatives(dates), MAX_LIST_ENTRIES - 1);
            if shown.subject_named {
                format!("^{list}$")
            } else {
                format!("^(?:{list}|{UNKNOWN})$")
            }
        }
        Some(AnswerType::Score) => {
            // What may follow the score ("3; 2020-10-01; labs"): a date the
            // items, the question or the as-of date show, then words, or
            // words alone; no other figure. The embedded model wrote "5;
            // 2025-06-19" for a score on 2125-06-19 (`10022281-G31`).
            let mut dates: Vec<String> =
                shown.figures.iter().cloned().chain(figures_in(question)).filter(|f| is_date(f)).collect();
            dates.sort();
            dates.dedup();
            const WORDS: &str = r"[^\[\]\n\r0-9]{1,60}";
            let tail = if dates.is_empty() {
                format!("(?:; {WORDS})?")
            } else {
                format!("(?:; (?:(?:{})(?:; {WORDS})?|{WORDS}))?", alternatives(&dates))
            };
            let named: Vec<&str> = shown
                .results
                .iter()
                .filter(|(name, _)| Calculator::from_name(name).is_some_and(|c| question_names(question, c)))
                .map(|(_, v)| v.as_str())
                .collect();
            let computed = || alternatives(shown.results.iter().map(|(_, v)| v));
            match (named.is_empty(), shown.results.is_empty()) {
                (false, _) => format!("^(?:{}){tail}$", alternatives(named)),
                (true, false) => format!("^(?:(?:{}){tail}|{UNKNOWN})$", computed()),
                (true, true) => {
                    format!("^(?:(?:[0-9]{{1,3}}(?:\\.[0-9]{{1,2}})?|I|II|III|IV){tail}|{UNKNOWN})$")
                }
            }
        }
        // An option that a shown result of a calculator the question names
        // gives (the BMI calculator's "obese") is the answer; the embedded
        // model answered "Not documented" beside it (`6f8ccac9-G26`).
        Some(AnswerType::Category) => match question_options(question) {
            options if options.is_empty() => format!("^{TEXT}{{1,40}}$"),
            options => {
                // An option may state its range after its name ("prediabetes
                // 5.7-6.4%"): the name is the answer then.
                let calculated: Vec<&str> = options
                    .iter()
                    .filter_map(|o| {
                        shown.labels.iter().find_map(|(name, label)| {
                            let named = Calculator::from_name(name).is_some_and(|c| question_names(question, c));
                            (named && option_named(o, label)).then(|| &o[..label.len()])
                        })
                    })
                    .collect();
                if calculated.is_empty() {
                    format!("^(?:{}|{UNKNOWN})$", alternatives(options))
                } else {
                    format!("^(?:{})$", alternatives(calculated))
                }
            }
        },
        Some(AnswerType::IntervalList)
            if !shown.subject_intervals.is_empty() && shown.subject_intervals.len() <= MAX_INTERVALS =>
        {
            let entries = alternatives(&shown.subject_intervals);
            format!("^(?:(?:Administered|Active): )?(?:{entries})(?: \\| (?:{entries})){{0,11}}$")
        }
        Some(AnswerType::DateList | AnswerType::IntervalList) | None => format!("^{TEXT}{{1,80}}$"),
    };
    // The reasoning states no figure that neither the items nor the
    // question show: the embedded model copied the style skill's example
    // dates ("2021-01-04–2021-06-30") into a reasoning about 1996
    // (`feb67a40-G21`, held out). Where items or the question show figures,
    // a figure is whole: never next to another figure, nor joined to one
    // by a single `.`, `:`, `-` or `/` ("2" and "1" shown do not make
    // "2.1" or "21"; "Beta-2" stays). The figures' alternation is repeated
    // a fixed few times (at most 8 figures between citations), not once
    // per character (160 copies of it made the regular expression too
    // large to compile).
    let mut figures = shown.figures.clone();
    figures.extend(figures_in(question));
    // Longest first, so that a date is not read as its year alone.
    figures.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    figures.dedup();
    // The reasoning is prose (Evident's): it opens with a letter, never
    // with a copied item's "[1] (problem_list, ...", and holds no `|`,
    // `_`, `{` or `}` (a lab table's, an item kind's, a calculation's
    // inputs), no two spaces or two dots in a row (outside the figures),
    // and no Han, kana, Hangul, full-width forms ("６"), digits other than
    // the figures' ("₁₃₈₀", "²²", "①") or combining marks: 11 of the
    // embedded model's 16 reasonings on q16f broke one of these (copied
    // item headers and lab tables, runs of spaces and dots, a Korean
    // syllable; docs/chart.md), and once these were refused it wrote
    // superscript digits ("₁₃₈₀ mg/dL"), circled digits and runs of
    // combining overlines instead (q16f again). Runs of text before and
    // after the figures are at most 100 characters.
    // (The validator reads patterns as ECMA-262 without Unicode classes,
    // so the digits and marks outside ASCII are named by their blocks:
    // super- and subscripts, enclosed and circled digits, combining
    // marks. More blocks made the patterns of digit-heavy contexts too
    // large to compile.)
    const NEVER: &str = concat!(
        "\\[\\]\\n\\r|_{}\u{b2}\u{b3}\u{b9}\u{300}-\u{36f}\u{2070}-\u{209f}\u{2460}-\u{24ff}",
        "\u{3000}-\u{9fff}\u{ac00}-\u{d7af}\u{ff00}-\u{ffef}"
    );
    const START: &str = "[A-Za-z]";
    // What may end a run: one dot, one space, both, or nothing.
    const TAIL: &str = "\\.? ?";
    // A character other than a digit, a dot or a space, after at most one
    // dot and one space.
    let unit = format!("(?:{TAIL}[^{NEVER}0-9. ])");
    let joiner_free = format!("[^{NEVER}0-9.:/\\-]");
    let citation = || {
        let alternatives = numbers.iter().map(usize::to_string).collect::<Vec<_>>().join("|");
        format!("\\[(?:{alternatives})\\]")
    };
    // Where the answer has one value only (a rule, a check or the records
    // gave it, and Evident then writes the reasoning from what gave it),
    // the model's reasoning is one short clause without figures, cited:
    // beside such a "Yes" the embedded model wrote Arabic-Indic digits and
    // long decimals until the 512-token limit cut it off, twice
    // (`6f8ccac9-G15`, a pipeline failure).
    let reasoning = if one_value(&answer).is_some() {
        if numbers.is_empty() {
            format!("^{START}{unit}{{0,120}}{TAIL}$")
        } else {
            format!("^{START}{unit}{{0,80}}{TAIL}{}{TAIL}$", citation())
        }
    } else if figures.is_empty() {
        if numbers.is_empty() {
            format!("^{START}{unit}{{0,199}}{TAIL}$")
        } else {
            format!("^{START}{unit}{{0,100}}{TAIL}(?:{}{unit}{{0,100}}{TAIL}){{1,3}}$", citation())
        }
    } else {
        let figure = format!("(?:{})", alternatives(&figures));
        // Between two figures: one character that joins nothing, or more.
        let gap = format!("(?:{joiner_free}|{unit}{{1,60}}{TAIL})");
        let figures_on = format!("{figure}(?:{gap}{figure}){{0,7}}{unit}{{0,100}}{TAIL}");
        let text = format!("{unit}{{0,100}}{TAIL}(?:{figures_on})?");
        if numbers.is_empty() {
            format!("^(?:{START}{text}|{figures_on})$")
        } else {
            format!("^{START}{text}(?:{}{text}){{1,3}}$", citation())
        }
    };
    json!({"type": "object", "properties": {
        "answer": {"type": "string", "pattern": answer},
        "reasoning": {"type": "string", "pattern": reasoning}},
        "required": ["answer", "reasoning"], "additionalProperties": false})
}

/// The one value an answer pattern (as [`answer_schema`] writes them)
/// admits: `^(?:...)$` or `^...$` around literal characters and escapes,
/// no alternation, group, class or repetition; `None` where it admits
/// more than one.
fn one_value(pattern: &str) -> Option<String> {
    let inner = pattern.strip_prefix('^')?.strip_suffix('$')?;
    let inner = inner.strip_prefix("(?:").and_then(|p| p.strip_suffix(')')).unwrap_or(inner);
    let mut value = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => value.push(chars.next()?),
            '|' | '(' | ')' | '[' | ']' | '?' | '*' | '+' | '{' | '}' | '.' | '^' | '$' => return None,
            _ => value.push(c),
        }
    }
    (!value.is_empty()).then_some(value)
}

/// The answer schema with the reasoning decoded first: the decoder
/// writes an object's properties in the schema's order.
fn reasoning_first(mut schema: Value) -> Value {
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        if let Some(answer) = properties.shift_remove("answer") {
            properties.insert("answer".into(), answer);
        }
    }
    if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
        required.sort_by_key(|name| name.as_str() == Some("answer"));
    }
    schema
}

/// A list answer with each entry once, in the order first given (the
/// grammar lets an entry repeat, and a 0.5B model wrote the one
/// prescription date of a list twelve times); the raw answer stays in
/// the trace.
fn distinct_entries(answer: &str) -> String {
    let (status, list) = match answer.split_once(": ") {
        Some((status, list)) if !status.contains('|') => (Some(status), list),
        _ => (None, answer),
    };
    let mut seen: Vec<&str> = Vec::new();
    for entry in list.split(" | ") {
        if !seen.contains(&entry) {
            seen.push(entry);
        }
    }
    let list = seen.join(" | ");
    match status {
        Some(status) => format!("{status}: {list}"),
        None => list,
    }
}

/// A reasoning with each sentence or clause (to its `. ` or `; `) once, in
/// the order first given: the embedded model wrote "The most recent, most
/// authoritative evidence comes first." three times in one reasoning. The
/// raw reasoning stays in the trace.
fn distinct_sentences(reasoning: &str) -> String {
    let mut pieces: Vec<&str> = Vec::new();
    let mut rest = reasoning;
    while let Some(at) = rest.find(". ").into_iter().chain(rest.find("; ")).min() {
        pieces.push(&rest[..at + 2]);
        rest = &rest[at + 2..];
    }
    pieces.push(rest);
    let mut kept: Vec<&str> = Vec::new();
    for piece in pieces {
        let said = |p: &&str| p.trim_end_matches([' ', '.', ';']) == piece.trim_end_matches([' ', '.', ';']);
        if piece.trim().is_empty() || !kept.iter().any(said) {
            kept.push(piece);
        }
    }
    let kept = kept.concat();
    let kept = kept.trim();
    match kept.strip_suffix(';') {
        Some(clause) => format!("{clause}."),
        None => kept.to_string(),
    }
}

/// A reasoning Evident wrote from what gave the answer, and what that was.
struct Written {
    reasoning: String,
    /// What it was written from, for the trace ("the calculation [2]").
    from: String,
}

/// Evident's reasoning for `answer` where a calculator or a criteria check
/// the question names gave it (with the calculators), or the record's
/// entries did (a "Yes", dates); `None` where none gave it.
fn written_reasoning(
    ctx: &Ctx<'_>,
    prompt: &str,
    nodes: &[Evidence],
    shown: &ShownValues,
    recorded: &[(usize, String)],
    answer: &str,
) -> Option<Written> {
    let (question, answer_type) = (ctx.question, ctx.answer_type);
    let one = |(reasoning, number): (String, usize), what: &str| Written {
        reasoning,
        from: format!("the {what} [{number}]"),
    };
    let checked = || {
        calculation_reasoning(question, answer_type, answer, nodes).map(|written| one(written, "calculation")).or_else(
            || {
                criteria_reasoning(question, answer_type, answer, nodes, ctx.view.criteria())
                    .map(|written| one(written, "criteria check"))
            },
        )
    };
    let recorded_yes = || {
        recorded_yes_reasoning(recorded).filter(|_| answer == "Yes").map(|(reasoning, number)| Written {
            reasoning,
            from: format!("the record's entry [{number}] that answers Yes"),
        })
    };
    let recorded_dates = || {
        recorded_dates_reasoning(question, prompt, answer_type, shown, answer).map(|(reasoning, cited)| {
            let numbers: Vec<String> = cited.iter().map(|n| format!("[{n}]")).collect();
            let from = format!("the record's entries {} that give the answer's dates", numbers.join(", "));
            Written { reasoning, from }
        })
    };
    ctx.config.use_calculators.then(checked).flatten().or_else(recorded_yes).or_else(recorded_dates)
}

/// Evident's reasoning for an answer of absence ("No", "Not documented",
/// "Never") where the agent's searches found nothing at all: the context
/// is empty, and the structured lookup of the question's subject
/// ([`super::execute::yes_no_lookup`]) ran over the medications, conditions
/// and procedures and found no entry that names it. It says what was
/// searched and that nothing was found, which is true whatever the answer;
/// the answer stays the model's. Beside such answers the embedded model
/// wrote reasons the record could not give ("The patient did not receive
/// dialysis before any search", `1fc53917-G14`). `None` elsewhere, and
/// for the methods that run no structured lookup (the comparators, the
/// paper's broadening), whose searches it could not speak for.
fn nothing_found_reasoning(ctx: &Ctx<'_>, rounds: &[Round], nodes: &[Evidence], answer: &str) -> Option<Written> {
    let absence = ["No", "Not documented", "Never"].iter().any(|a| a.eq_ignore_ascii_case(answer.trim()));
    if !absence || !nodes.is_empty() {
        return None;
    }
    let looked_up: Vec<&Round> = rounds.iter().filter(|r| r.action == super::execute::YES_NO_LOOKUP).collect();
    let records = |r: &&Round| r.arguments.as_ref().and_then(|a| a["record"].as_str()).map(String::from);
    let searched: BTreeSet<String> = looked_up.iter().filter_map(records).collect();
    if searched != BTreeSet::from(["conditions", "medications", "procedures"].map(String::from))
        || looked_up.iter().any(|r| r.evidence_found > 0)
    {
        return None;
    }
    let skills = (ctx.config.use_skills && ctx.config.expand_queries).then_some(ctx.skills);
    let subject = YesNoSubject::of(ctx.question, skills)?;
    let query = looked_up[0].arguments.as_ref().and_then(|a| a["query"].as_str()).unwrap_or_default();
    let also: Vec<&str> = query.split_whitespace().filter(|w| !subject.words().iter().any(|s| s == w)).collect();
    let mut queries: Vec<String> = Vec::new();
    for r in rounds.iter().filter(|r| r.tool.as_deref() == Some("search_reports") && !r.action.contains("blocked")) {
        if let Some(q) = r.arguments.as_ref().and_then(|a| a["query"].as_str()) {
            let q = format!("\"{}\"", q.trim());
            if !queries.contains(&q) {
                queries.push(q);
            }
        }
    }
    let reports = match queries.as_slice() {
        [] => String::new(),
        [one] => format!("the report search {one} found nothing, and "),
        [first @ .., last] => format!("the report searches {} and {last} found nothing, and ", first.join(", ")),
    };
    let phrase = subject.phrase();
    let names = match also.as_slice() {
        [] => phrase.clone(),
        [one] => format!("{phrase}, nor {one}"),
        [first @ .., last] => format!("{phrase}, nor any of {} or {last}", first.join(", ")),
    };
    let reasoning = format!(
        "The record up to {} has nothing on {phrase}: {reports}no medication, condition or procedure entry names {names}.",
        super::date_of(ctx.view.as_of())
    );
    Some(Written { reasoning, from: "the searches, which found nothing".into() })
}

/// Evident's answer step for a constrained decoder: the same prompt, the
/// answer and reasoning decoded as JSON under [`answer_schema`], so that
/// the two lines always come back and every `[n]` names a shown item; two
/// attempts (one JSON repair), then a recorded pipeline failure. Where a
/// calculator, a criteria check or the record's entries gave the answer,
/// Evident writes the reasoning from it ([`written_reasoning`]); and where
/// the schema then admits that one answer only, or a calculator the
/// question names gives its score ([`calculated_score`]), no model is
/// asked: its reasoning would be replaced, and beside such answers the
/// embedded model had written runs of digits to its token limit
/// (`6f8ccac9-G15`).
#[allow(clippy::too_many_arguments)]
fn synthesise_constrained(
    ctx: &Ctx<'_>,
    system: String,
    user: String,
    nodes: &[Evidence],
    max_tokens: u32,
    style_answers: &[String],
    order: EvidenceOrder,
    trace: &mut Trace,
) -> Result<Result<(TwoLine, String), PipelineFailure>, ChartError> {
    let mut shown = ShownValues { order, ..shown_values(&user).with_subject(ctx.question, &user) };
    let mut recorded = vec![];
    if ctx.config.use_skills && ctx.config.expand_queries {
        recorded = recorded_yes_entries(ctx.question, &user, Some(ctx.skills));
        shown.subject_recorded = !recorded.is_empty();
    }
    shown.figures.extend(figures_in(&super::date_of(ctx.view.as_of())));
    let schema =
        answer_schema(&shown_numbers(&user), ctx.question, ctx.answer_type, &shown, style_answers, ctx.view.criteria());
    let calculated = || {
        let score = || calculated_score(ctx.question, ctx.answer_type, nodes, ctx.view.as_of());
        ctx.config.use_calculators.then(score).flatten()
    };
    let decided = schema["properties"]["answer"]["pattern"].as_str().and_then(one_value).or_else(calculated);
    if let Some(answer) = decided {
        if let Some(written) = written_reasoning(ctx, &user, nodes, &shown, &recorded, &answer) {
            trace.synthesis_attempts = 0;
            trace.reasoning_from =
                Some(format!("{} (Evident's; the answer was decided, so no model was asked)", written.from));
            let cited = citation_numbers(&written.reasoning);
            return Ok(Ok((TwoLine { answer, reasoning: written.reasoning, cited }, String::new())));
        }
    }
    let schema = if ctx.config.reasoning_first { reasoning_first(schema) } else { schema };
    let request = ctx.request(vec![Message::system(system), Message::user(user.clone())], max_tokens);
    match chat_json(ctx.model, &request, &schema, RepairPolicy { repair_attempts: 1 }, ctx.prompts)? {
        StructuredAnswer::Valid { value, raw_text, attempts } => {
            trace.synthesis_attempts = attempts;
            // A small model sometimes repeats the label inside the field.
            let field = |key: &str, label: &str| {
                let text = value[key].as_str().unwrap_or_default().trim();
                let unlabelled = match text.get(..label.len()) {
                    Some(head) if head.eq_ignore_ascii_case(label) => text[label.len()..].trim(),
                    _ => text,
                };
                unlabelled.to_string()
            };
            let (answer, mut reasoning) =
                (field("answer", "answer:"), distinct_sentences(&field("reasoning", "reasoning:")));
            let answer =
                if ctx.answer_type.is_some_and(AnswerType::is_list) { distinct_entries(&answer) } else { answer };
            let written = written_reasoning(ctx, &user, nodes, &shown, &recorded, &answer)
                .or_else(|| nothing_found_reasoning(ctx, &trace.rounds, nodes, &answer));
            if let Some(written) = written {
                reasoning = written.reasoning;
                trace.reasoning_from =
                    Some(format!("{} (Evident's; the model's reasoning is in the raw answer)", written.from));
            }
            let cited = citation_numbers(&reasoning);
            Ok(Ok((TwoLine { answer, reasoning, cited }, raw_text)))
        }
        StructuredAnswer::PipelineFailure(f) => {
            trace.synthesis_attempts = f.attempts;
            Ok(Err(f))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::subject_first;

    /// The answer schema with the built-in criteria sets.
    fn schema_of(
        numbers: &[usize],
        question: &str,
        answer_type: Option<AnswerType>,
        shown: &ShownValues,
        style_answers: &[String],
    ) -> Value {
        answer_schema(numbers, question, answer_type, shown, style_answers, CriteriaSets::builtin())
    }

    /// An undated lab-report section of document `id`.
    fn section(id: &str, text: &str) -> Evidence {
        Evidence::Section {
            document_id: id.into(),
            section_id: 1,
            kind: evident_model::DocKind::LabReport,
            date: None,
            heading: None,
            start: 0,
            end: text.len(),
            text: text.into(),
        }
    }

    #[test]
    fn when_the_context_must_be_cut_the_items_naming_the_subject_come_first() {
        let nodes = vec![
            section("lab", "Laboratory results: Potassium 4.1 mmol/L; Sodium 140 mmol/L"),
            section("rx", "Penicillin V Potassium 500 MG Oral Tablet (stopped)"),
        ];
        let question = "When was Penicillin V Potassium 500 MG Oral Tablet first prescribed?";
        let ids = |nodes: &[Evidence]| nodes.iter().map(|n| n.document_id().unwrap().to_string()).collect::<Vec<_>>();
        let all: usize = nodes.iter().map(node_tokens).sum();
        assert_eq!(ids(&subject_first(&nodes, question, all)), ["lab", "rx"], "everything fits: order kept");
        assert_eq!(ids(&subject_first(&nodes, question, all - 1)), ["rx", "lab"]);
        let (kept, _) = number_nodes(&subject_first(&nodes, question, node_tokens(&nodes[1])), node_tokens(&nodes[1]));
        assert_eq!(ids(&kept), ["rx"], "what is cut does not name the subject");
        let other = "When was Amoxicillin first prescribed?";
        assert_eq!(ids(&subject_first(&nodes, other, 1)), ["lab", "rx"], "nothing names it: order kept");
        // The result of a calculator the question names comes before both
        // (`d5525459-G26`: an encounter section left it no room).
        let bmi = Evidence::Calculation {
            calculator: "bmi".into(),
            inputs: json!({"weight_kg": 78.12778726668415, "height_m": 1.6841131599876}),
            output: json!({"category": "overweight"}),
            used: vec![],
        };
        let with_bmi = [nodes.clone(), vec![bmi]].concat();
        let category = "What is the adult BMI category (underweight, normal, overweight, obese) on 2018-01-25?";
        let first = subject_first(&with_bmi, category, 1);
        assert!(matches!(&first[0], Evidence::Calculation { calculator, .. } if calculator == "bmi"), "{first:?}");
        assert!(matches!(subject_first(&with_bmi, question, 1).last(), Some(Evidence::Calculation { .. })));
    }

    #[test]
    fn context_items_are_the_answer_prompts_block() {
        let day = chrono::NaiveDate::from_ymd_opt(2020, 9, 18).and_then(|d| d.and_hms_opt(23, 57, 0));
        let entry = Evidence::Entry {
            record: "MedicationRequest/b740cba5".into(),
            document_id: "m".into(),
            date: day,
            sentence_id: 3,
            start: 0,
            end: 0,
            text: "- 2020-09-18 23:57: Camila 28 Day Pack (active) [MedicationRequest/b740cba5]".into(),
        };
        let section = Evidence::Section {
            document_id: "m".into(),
            section_id: 7,
            kind: evident_model::DocKind::MedicationList,
            date: day,
            heading: Some("Medications".into()),
            start: 0,
            end: 0,
            text: "Medications on 2020-09-18\n  - 2020-09-18 23:57: Camila 28 Day Pack (active)".into(),
        };
        let nodes = [entry.clone(), section, entry];
        let (_, shown) = number_nodes(&nodes, usize::MAX / 2);
        let context = json!({"question": "Q?", "as_of": "2020-12-17", "patient": "P", "nodes": shown});
        let prompt = crate::prompts(None).render("chart_synthesis.prompt.md", context).unwrap();
        let block = context_items(&nodes);
        assert!(prompt.contains(&block), "{block}\n---\n{prompt}");
        assert_eq!(block.lines().count(), 3, "the repeated entry once: {block}");
    }

    #[test]
    fn nodes_are_counted_digit_by_digit_so_a_record_line_full_of_ids_fits() {
        let line = |i: usize| {
            Evidence::Entry {
            record: format!("Observation/{i:08}-1234-5678-9012-345678901234"),
            document_id: "d".into(),
            date: chrono::NaiveDate::from_ymd_opt(2020, 1, 2).and_then(|d| d.and_hms_opt(0, 0, 0)),
            sentence_id: i as i64,
            start: 0,
            end: 0,
            text: format!(
                "- 2020-01-02 16:42: Body Mass Index: 29.289064877000932 kg/m2 [Observation/{i:08}-1234-5678-9012-345678901234]"
            ),
        }
        };
        let node = line(1);
        let digits = node.text().bytes().filter(u8::is_ascii_digit).count();
        assert!(node_tokens(&node) > digits, "every digit counts as a token");
        let nodes: Vec<Evidence> = (0..40).map(line).collect();
        let (kept, shown) = number_nodes(&nodes, 500);
        assert_eq!(kept.len(), shown.len());
        assert!(kept.iter().map(node_tokens).sum::<usize>() <= 500);
        assert!(kept.len() < nodes.len() && !kept.is_empty());
    }

    #[test]
    fn the_answer_schema_admits_only_shown_citation_numbers() {
        let prompt = "Context items:\n[1] (progress_note, 2020-01-02) text\n[2] (lab, 2020-01-03) x\nWrite.";
        assert_eq!(shown_numbers(prompt), vec![1, 2]);
        let validator =
            evident_llm::SchemaValidator::new(&schema_of(&[1, 2], "q", None, &ShownValues::default(), &[])).unwrap();
        assert!(validator.check(r#"{"answer": "Yes", "reasoning": "Simvastatin is listed [2]."}"#).is_ok());
        assert!(validator.check(r#"{"answer": "Yes", "reasoning": "Listed [1] and [2]."}"#).is_ok());
        assert!(validator.check(r#"{"answer": "Yes", "reasoning": "Listed [3]."}"#).is_err(), "no item 3");
        assert!(validator.check(r#"{"answer": "Yes", "reasoning": "Listed, no citation."}"#).is_err());
        assert!(validator.check(r#"{"answer": "Yes\nReasoning: x", "reasoning": "x [1]"}"#).is_err());
        let none = evident_llm::SchemaValidator::new(&schema_of(&[], "q", None, &ShownValues::default(), &[])).unwrap();
        assert!(none.check(r#"{"answer": "Not documented", "reasoning": "Nothing was found."}"#).is_ok());
        assert!(none.check(r#"{"answer": "No", "reasoning": "See [1]."}"#).is_err());
    }

    #[test]
    fn a_list_answer_names_each_entry_once() {
        assert_eq!(distinct_entries("2017-12-04 | 2017-12-04 | 2018-01-02 | 2017-12-04"), "2017-12-04 | 2018-01-02");
        assert_eq!(
            distinct_entries("Administered: 2019-01-01–ongoing | 2019-01-01–ongoing"),
            "Administered: 2019-01-01–ongoing"
        );
        assert_eq!(distinct_entries("Not documented"), "Not documented");
    }

    #[test]
    fn the_answer_type_holds_the_answer_to_its_schema() {
        let check = |t: AnswerType, answer: &str| {
            let validator =
                evident_llm::SchemaValidator::new(&schema_of(&[1], "q", Some(t), &ShownValues::default(), &[]))
                    .unwrap();
            validator.check(&json!({"answer": answer, "reasoning": "From the record [1]."}).to_string()).is_ok()
        };
        for ok in ["Yes", "No", "Not documented", "Unclear", "Never"] {
            assert!(check(AnswerType::YesNo, ok), "{ok}");
        }
        assert!(!check(AnswerType::YesNo, "The patient takes it"));
        // A triggered style skill's answers narrow a yes/no answer (the
        // eligibility style: met, not met, or unclear; never "Not documented").
        let styled = ["Yes".to_string(), "No".to_string(), "Unclear".to_string()];
        let eligibility = evident_llm::SchemaValidator::new(&schema_of(
            &[1],
            "q",
            Some(AnswerType::YesNo),
            &ShownValues::default(),
            &styled,
        ))
        .unwrap();
        let answers =
            |a: &str| eligibility.check(&json!({"answer": a, "reasoning": "From the record [1]."}).to_string());
        assert!(answers("No").is_ok() && answers("Unclear").is_ok());
        assert!(answers("Not documented").is_err() && answers("Never").is_err());
        assert!(!check(AnswerType::YesNo, "Yes, since 2019"));
        // The paper's Yes / No / Unclear format: nothing found is "No".
        for ok in ["Yes", "No", "Unclear"] {
            assert!(check(AnswerType::YesNoUnclear, ok), "{ok}");
        }
        assert!(!check(AnswerType::YesNoUnclear, "Not documented") && !check(AnswerType::YesNoUnclear, "Never"));
        let narrowed = evident_llm::SchemaValidator::new(&schema_of(
            &[1],
            "q",
            Some(AnswerType::YesNoUnclear),
            &ShownValues::default(),
            &["Yes".to_string(), "Not documented".to_string()],
        ))
        .unwrap();
        let narrowed = |a: &str| narrowed.check(&json!({"answer": a, "reasoning": "x [1]."}).to_string()).is_ok();
        assert!(
            narrowed("Yes") && !narrowed("No") && !narrowed("Not documented"),
            "the style's options within the format"
        );
        assert!(check(AnswerType::Date, "2017-08-26"));
        assert!(check(AnswerType::Date, "Not documented"));
        assert!(!check(AnswerType::Date, "2020-09-30 conditions age sex"));
        assert!(!check(AnswerType::Date, "August 2017"));
        assert!(check(AnswerType::Score, "0; conditions, age and sex"));
        assert!(!check(AnswerType::Score, "0; 2020-09-30; conditions, age and sex"), "a date nothing shows");
        assert!(check(AnswerType::Score, "II"));
        assert!(check(AnswerType::Score, "2.5"));
        assert!(!check(AnswerType::Score, "2020-09-30 conditions age sex"), "the value comes first");
        assert!(check(AnswerType::Category, "Overweight"));
        assert!(check(AnswerType::IntervalList, "Administered: 2019-01-01–ongoing"));
    }

    #[test]
    fn a_date_or_score_answer_is_one_the_shown_items_hold() {
        let prompt = "Question: When was it first documented?\nReference date: 2020-07-13\nContext items:\n\
            [1] (problem_list, 2017-08-26) Conditions – 2017-08-26 20:43: Polyp of colon (resolved 2019-01-18)–\n\
            [2] (calculation, 2020-09-30) cha2ds2-vasc calculator: inputs {\"age_years\":32}; result {\"score\":0.0,\"items\":[]}\n\
            [3] (calculation, 2020-09-30) r-iss calculator: inputs {}; result {\"stage\":\"II\",\"points\":null}\n\
            Write the two lines now.";
        let shown = shown_values(prompt);
        assert_eq!(shown.items, 3);
        assert_eq!(shown.dates, ["2017-08-26", "2019-01-18", "2020-09-30"], "the reference date is no item's");
        assert_eq!(shown.results, [("cha2ds2-vasc".to_string(), "0".to_string()), ("r-iss".into(), "II".into())]);
        let question = "When was it first documented?";
        let check = |t: AnswerType, answer: &str| {
            let validator =
                evident_llm::SchemaValidator::new(&schema_of(&[1, 2, 3], question, Some(t), &shown, &[])).unwrap();
            validator.check(&json!({"answer": answer, "reasoning": "From the record [1]."}).to_string()).is_ok()
        };
        assert!(check(AnswerType::Date, "2017-08-26"));
        assert!(check(AnswerType::Date, "Not documented"));
        assert!(!check(AnswerType::Date, "2020-07-13"), "a date no item shows");
        assert!(check(AnswerType::Score, "0; 2020-09-30; conditions, age, sex"));
        assert!(check(AnswerType::Score, "II"));
        assert!(!check(AnswerType::Score, "3"), "not a computed value");
        assert!(check(AnswerType::Score, "Not documented"), "no calculator the question names ran");
        // A score the question names and a calculator computed is the answer.
        let named = |answer: &str| {
            let schema = schema_of(
                &[1, 2, 3],
                "What is the CHA2DS2-VASc score on 2020-09-30?",
                Some(AnswerType::Score),
                &shown,
                &[],
            );
            let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
            validator.check(&json!({"answer": answer, "reasoning": "Computed [2]."}).to_string()).is_ok()
        };
        assert!(named("0; 2020-09-30; age and sex"));
        assert!(named("0; age and sex"));
        // A date neither an item nor the question shows does not follow
        // the score (`10022281-G31`: "5; 2025-06-19" for 2125-06-19), nor
        // another figure.
        assert!(!named("0; 2025-09-30"), "a date nothing shows");
        assert!(!named("0; 2019-01-18; age 32"), "a figure after the date");
        assert!(named("0; 2019-01-18"), "item 1's date");
        assert!(!named("II"), "another calculator's value");
        assert!(!named("Not documented"));
        // A category among the options the question lists.
        let bmi = "What is the adult BMI category (underweight, normal, overweight, obese) on 2021-02-22?";
        assert_eq!(question_options(bmi), ["underweight", "normal", "overweight", "obese"]);
        let hba1c = "Which glycaemic range (normal below 5.7%, prediabetes 5.7-6.4%, diabetes 6.5% or more) is it?";
        assert_eq!(question_options(hba1c)[1], "prediabetes 5.7-6.4%");
        let category = |question: &str, answer: &str| {
            let schema = schema_of(&[1], question, Some(AnswerType::Category), &shown, &[]);
            let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
            validator.check(&json!({"answer": answer, "reasoning": "From [1]."}).to_string()).is_ok()
        };
        assert!(category(bmi, "overweight") && category(bmi, "Not documented"));
        assert!(!category(bmi, "Overweight (BMI 29.3)"));
        assert!(category(hba1c, "prediabetes 5.7-6.4%"));
        assert!(!category(hba1c, "prediabetes 5x7-6.4%"), "a dot is a dot");
        assert!(category("What is the stage?", "Stage II (from the note)"), "no options listed: a short line");
        // A category the BMI calculator computed is the answer; another
        // calculator's label, or a question that does not name it, is not.
        let computed = shown_values(
            "Context items:\n\
            [1] (calculation, 2020-01-15) bmi calculator: inputs {\"weight_kg\":87.2,\"height_m\":1.7}; result {\"value\":30.3,\"unit\":\"kg/m2\",\"reported\":30.3,\"category\":\"obese\",\"calculator\":\"bmi\"}\n",
        );
        assert_eq!(computed.labels, [("bmi".to_string(), "obese".to_string())]);
        let computed_category = |question: &str, answer: &str| {
            let schema = schema_of(&[1], question, Some(AnswerType::Category), &computed, &[]);
            let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
            validator.check(&json!({"answer": answer, "reasoning": "From [1]."}).to_string()).is_ok()
        };
        assert!(computed_category(bmi, "obese"));
        assert!(!computed_category(bmi, "Not documented") && !computed_category(bmi, "overweight"));
        let unnamed = "What is the weight class (underweight, normal, overweight, obese)?";
        assert!(computed_category(unnamed, "Not documented"), "the question does not name the BMI calculator");
        // An option that states its range after its name: the computed
        // range's name alone is the answer ("diabetes" is not
        // "prediabetes 5.7-6.4%").
        let range = shown_values(
            "Context items:\n\
            [1] (calculation, 2020-12-17) glycaemic-range calculator: inputs {\"hba1c_percent\":5.93}; result {\"value\":5.93,\"unit\":\"%\",\"reported\":5.9,\"category\":\"prediabetes\",\"calculator\":\"glycaemic-range\"}\n",
        );
        assert_eq!(range.labels, [("glycaemic-range".to_string(), "prediabetes".to_string())]);
        let ranged = |answer: &str| {
            let schema = schema_of(&[1], hba1c, Some(AnswerType::Category), &range, &[]);
            let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
            validator.check(&json!({"answer": answer, "reasoning": "From [1]."}).to_string()).is_ok()
        };
        assert!(ranged("prediabetes"));
        for other in ["prediabetes 5.7-6.4%", "diabetes", "normal", "Not documented"] {
            assert!(!ranged(other), "{other}");
        }
        assert!(option_named("Prediabetes 5.7-6.4%", "prediabetes") && option_named("normal", "normal"));
        assert!(!option_named("prediabetes 5.7-6.4%", "diabetes") && !option_named("normally", "normal"));
        let nothing = shown_values("Context items:\n(none: nothing was found in the record)\n");
        assert_eq!(nothing, ShownValues::default());
        let no_dates = ShownValues { items: 1, ..ShownValues::default() };
        let validator =
            evident_llm::SchemaValidator::new(&schema_of(&[1], "q", Some(AnswerType::Date), &no_dates, &[])).unwrap();
        assert!(validator.check(r#"{"answer": "2019-01-01", "reasoning": "x [1]"}"#).is_err());
        assert!(validator.check(r#"{"answer": "Not documented", "reasoning": "x [1]"}"#).is_ok());
    }

    #[test]
    fn a_shown_check_of_the_criteria_set_the_question_names_is_the_answer() {
        let checked = shown_values(
            "Context items:\n\
            [1] (calculation, inputs up to 2020-09-07) statin-criteria calculator: inputs {\"age 40-75 years\":60}; result {\"result\":\"Yes\",\"criteria\":[{\"criterion\":\"age 40-75 years\",\"status\":\"met\"}]}\n",
        );
        assert_eq!(checked.labels, [("statin-criteria".to_string(), "Yes".to_string())]);
        let answers = |question: &str, style: &[String]| {
            let schema = schema_of(&[1], question, Some(AnswerType::YesNoUnclear), &checked, style);
            let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
            ["Yes", "No", "Unclear"]
                .into_iter()
                .filter(|a| validator.check(&json!({"answer": a, "reasoning": "Met [1]."}).to_string()).is_ok())
                .collect::<Vec<_>>()
        };
        let statin = "Does the patient meet the statin criteria on 2020-09-07, that is, age 40-75 years ...?";
        assert_eq!(answers(statin, &[]), ["Yes"]);
        assert_eq!(answers("Is the patient eligible for metformin on 2020-09-07?", &[]), ["Yes", "No", "Unclear"]);
        // A style that does not allow the check's result leaves the style's.
        assert_eq!(answers(statin, &["No".to_string(), "Unclear".to_string()]), ["No", "Unclear"]);
        // A yes/no question (with "Never" and "Not documented" besides) is
        // held to the check's result too.
        let schema = schema_of(&[1], statin, Some(AnswerType::YesNo), &checked, &[]);
        let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
        let allowed: Vec<&str> = ["Yes", "No", "Never", "Not documented", "Unclear"]
            .into_iter()
            .filter(|a| validator.check(&json!({"answer": a, "reasoning": "Met [1]."}).to_string()).is_ok())
            .collect();
        assert_eq!(allowed, ["Yes"]);
    }

    #[test]
    fn dates_and_intervals_come_from_the_items_that_name_the_subject_most_fully() {
        let question = "In which documented intervals was Body mass index 30+ - obesity (finding) active?";
        let prompt = "Context items:\n\
            [1] (record Condition, 1981-09-20) - 1981-09-20 06:58: Body mass index 30+ - obesity (finding) (active) [Condition/c1]\n\
            [2] (other, 2006-12-10) Observations - 2006-12-10 06:58: Body mass index (BMI) [Ratio]: 30.5 kg/m2 [Observation/o1]\n";
        let shown = shown_values(prompt).with_subject(question, prompt);
        assert!(shown.subject_named);
        assert_eq!(shown.subject_dates, ["1981-09-20"], "the vital sign holds four of the five words");
        assert_eq!(shown.subject_intervals, ["1981-09-20–ongoing"], "an active condition's line states no end");
        // A resolved one ends on its stated date only.
        let resolved = prompt.replace("(active)", "(resolved, resolved 2010-01-01)");
        let shown = shown_values(&resolved).with_subject(question, &resolved);
        assert_eq!(shown.subject_intervals, ["1981-09-20–2010-01-01"]);
        // One that says it ended without a date ends on a later item's.
        let undated = prompt.replace("(active)", "(inactive)");
        let shown = shown_values(&undated).with_subject(question, &undated);
        assert_eq!(shown.subject_intervals, ["1981-09-20–2006-12-10"]);
        assert!(cites_record("- 2019-01-01 09:00: Simvastatin 20 MG (active) [MedicationRequest/m1]"));
        assert!(!cites_record("Dara-Kd [1] stopped [a/b] on 2022-09-05"));
        assert!(cites_record(
            "- 2180-05-07 01:00: Spironolactone 50 mg PO/NG (until 2180-05-07 09:00) [prescriptions/90650714]"
        ));
        assert!(cites_record("- 2157-11-20: Hypertension (ICD-9 4019) [diagnoses_icd/22595853/3]"));
        assert!(!cites_record("Creatinine 1.1 [mg/dL]") && !cites_record("[prescriptions/]"));
        let q = "Which prescription dates of Metoprolol Tartrate 12.5 mg PO are documented (at most 12, YYYY-MM-DD)?";
        assert_eq!(shared_run(q, "- 2132-12-17 19:00: Metoprolol Tartrate 12.5 mg PO (until 2132-12-17 18:00)"), 5);
        assert_eq!(shared_run(q, "- 2132-12-16 09:00: Metoprolol Tartrate 12.5 mg PO/NG (until 2132-12-16 09:00)"), 4);
        assert_eq!(shared_run(q, "Metoprolol was given; 12.5 mg PO daily"), 3, "(12.5 mg PO)");
        // A compound product whose name ends with the drug's does not name
        // it where the drug's own line does; a note stays.
        let d5lr = "Context items:\n\
            [1] (medication_list, 2129-04-06) - 2129-04-06 01:00: D5LR 1000 mL IV (until 2129-04-06 16:00) [prescriptions/1]\n\
            [2] (medication_list, 2129-04-08) - 2129-04-08 02:00: Potassium Chl 20 mEq / 1000 mL D5LR 1000 mL IV (until 2129-04-09 02:00) [prescriptions/2]\n";
        let dates = "Which prescription dates of D5LR 1000 mL IV are documented (at most 12, YYYY-MM-DD)?";
        assert_eq!(shown_values(d5lr).with_subject(dates, d5lr).subject_dates, ["2129-04-06"]);
        let with_note = format!("{d5lr}[3] (progress_note, 2129-04-10) Started D5LR 1000 mL IV again.\n");
        let shown = shown_values(&with_note).with_subject(dates, &with_note);
        assert_eq!(shown.subject_dates, ["2129-04-06", "2129-04-10"]);
        assert!(!shown.subject_records_only);
    }

    #[test]
    fn once_an_item_names_the_subject_a_date_answer_is_one_of_its_dates() {
        let prompt = "Context items:\n\
            [1] (medication_list, 2017-12-04) Medications – 2017-12-04 12:55: Acetaminophen 325 MG Oral Tablet (stopped)\n\
            [2] (encounter, 2020-12-30) Encounters – 2020-12-30 12:55: Encounter for check up (procedure)\n";
        let accepts = |question: &str, t: AnswerType, answer: &str| {
            let shown = shown_values(prompt).with_subject(question, prompt);
            let validator =
                evident_llm::SchemaValidator::new(&schema_of(&[1, 2], question, Some(t), &shown, &[])).unwrap();
            validator.check(&json!({"answer": answer, "reasoning": "From the record [1]."}).to_string()).is_ok()
        };
        let first = "When was Acetaminophen 325 MG Oral Tablet first prescribed?";
        assert!(shown_values(prompt).with_subject(first, prompt).subject_named);
        assert!(accepts(first, AnswerType::Date, "2017-12-04"));
        assert!(!accepts(first, AnswerType::Date, "Not documented"), "item 1 documents it");
        assert!(!accepts(first, AnswerType::Date, "Unclear"));
        let list =
            "Which prescription dates of Acetaminophen 325 MG Oral Tablet are documented (at most 12, YYYY-MM-DD)?";
        assert!(accepts(list, AnswerType::DateList, "2017-12-04"));
        assert!(!accepts(list, AnswerType::DateList, "2017-12-04 | 2020-12-30"), "item 2 does not name it");
        assert!(!accepts(list, AnswerType::DateList, "2017-12-04 | 2019-01-01"), "a date no item shows");
        assert!(!accepts(list, AnswerType::DateList, "2017-12-04, 2020-12-30"), "entries are separated by |");
        assert!(!accepts(list, AnswerType::DateList, "Not documented"));
        // Nothing shown names the subject: the unknown answers stay.
        let other = "When was Penicillin V Potassium 500 MG Oral Tablet first prescribed?";
        assert!(!shown_values(prompt).with_subject(other, prompt).subject_named);
        assert!(accepts(other, AnswerType::Date, "Not documented"));
        assert!(accepts(other, AnswerType::Date, "2017-12-04"));
        let other_list = "Which prescription dates of Penicillin V Potassium 500 MG Oral Tablet are documented?";
        assert!(accepts(other_list, AnswerType::DateList, "Not documented"));
        assert!(accepts(other_list, AnswerType::DateList, "2020-12-30"));
    }

    #[test]
    fn a_date_list_from_structured_records_only_is_all_of_their_dates() {
        // `feb67a40-G21` (held out): two prescriptions, the model gave one.
        let prompt = "Context items:\n\
            [1] (medication_list, 1996-02-04) Medications – 1996-02-04 21:51: Acetaminophen 325 MG Oral Tablet (stopped) [RxNorm 313782] [MedicationRequest/b]\n\
            [2] (medication_list, 1991-07-30) Medications – 1991-07-30 21:51: Acetaminophen 325 MG Oral Tablet (stopped) [RxNorm 313782] [MedicationRequest/a]\n\
            [3] (encounter, 1996-02-04) Encounters – 1996-02-04 21:51: Encounter for check up (procedure)\n";
        let list =
            "Which prescription dates of Acetaminophen 325 MG Oral Tablet are documented (at most 12, YYYY-MM-DD)?";
        let shown = shown_values(prompt).with_subject(list, prompt);
        assert!(shown.subject_records_only);
        let schema = schema_of(&[1, 2, 3], list, Some(AnswerType::DateList), &shown, &[]);
        let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
        let accepts =
            |answer: &str| validator.check(&json!({"answer": answer, "reasoning": "From [1]."}).to_string()).is_ok();
        assert!(accepts("1991-07-30 | 1996-02-04"));
        assert!(!accepts("1996-02-04"), "one of the two");
        assert!(!accepts("1996-02-04 | 1991-07-30"), "oldest first");
        assert!(!accepts("Not documented"));
        // A note that names it too: the model chooses among the dates, as before.
        let with_note = format!(
            "{prompt}[4] (progress_note, 1995-05-01) Note – Takes acetaminophen 325 mg oral tablet as needed.\n"
        );
        let shown = shown_values(&with_note).with_subject(list, &with_note);
        assert!(!shown.subject_records_only);
        let schema = schema_of(&[1, 2, 3, 4], list, Some(AnswerType::DateList), &shown, &[]);
        let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
        assert!(validator.check(&json!({"answer": "1996-02-04", "reasoning": "From [1]."}).to_string()).is_ok());
    }

    /// A question asking whether its subject is documented is answered
    /// "No" when it is not (`77f70af5-G08`), not "Not documented"; other
    /// yes/no questions keep the paper's choices.
    #[test]
    fn a_question_asking_whether_something_is_documented_is_answered_no_not_not_documented() {
        let choices = |question: &str, style: &[String]| {
            let prompt = "Context items:\n[1] (progress_note, 2020-01-01) Follow-up. Knee pain.\n";
            let shown = shown_values(prompt).with_subject(question, prompt);
            let schema = schema_of(&[1], question, Some(AnswerType::YesNo), &shown, style);
            let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
            ["Yes", "No", "Never", "Not documented", "Unclear"]
                .into_iter()
                .filter(|a| validator.check(&json!({"answer": a, "reasoning": "From [1]."}).to_string()).is_ok())
                .collect::<Vec<_>>()
        };
        let ckd = "Is chronic kidney disease or renal failure documented?";
        assert_eq!(choices(ckd, &[]), ["Yes", "No", "Never", "Unclear"]);
        assert_eq!(choices("Is there documentation of a fall?", &[]), ["Yes", "No", "Never", "Unclear"]);
        let style = ["Yes".to_string(), "Not documented".to_string()];
        assert_eq!(choices(ckd, &style), ["Yes"], "a style skill's choices lose it too");
        let only = ["Not documented".to_string()];
        assert_eq!(choices(ckd, &only), ["Not documented"], "never no choice at all");
        assert_eq!(choices("Is the patient taking metformin?", &[]).len(), 5);
        assert_eq!(choices("Is metformin (documented in notes) taken?", &[]).len(), 5, "outside parentheses only");
    }

    #[test]
    fn a_record_entry_that_answers_a_yes_no_question_makes_yes_the_answer() {
        let choices = |question: &str, t: AnswerType, prompt: &str| {
            let shown = shown_values(prompt).with_subject(question, prompt);
            let validator =
                evident_llm::SchemaValidator::new(&schema_of(&[1], question, Some(t), &shown, &[])).unwrap();
            ["Yes", "No", "Never", "Not documented", "Unclear"]
                .into_iter()
                .filter(|a| validator.check(&json!({"answer": a, "reasoning": "From [1]."}).to_string()).is_ok())
                .collect::<Vec<_>>()
        };
        // `b2eeab29-G01`: the prescription's own line, active, dated before the question's date.
        let digoxin = "Context items:\n\
            [1] (record MedicationRequest, 2016-02-07) - 2016-02-07 10:00: Digoxin 0.125 MG Oral Tablet (active) [RxNorm 197604] [MedicationRequest/d1]\n";
        let on = |date: &str| format!("Is the patient receiving Digoxin 0.125 MG Oral Tablet on {date}?");
        assert_eq!(choices(&on("2021-03-28"), AnswerType::YesNo, digoxin), ["Yes"]);
        assert_eq!(choices(&on("2015-01-01"), AnswerType::YesNo, digoxin).len(), 5, "prescribed after that date");
        let stopped = digoxin.replace("(active)", "(stopped)");
        assert_eq!(
            choices(&on("2021-03-28"), AnswerType::YesNo, &stopped).len(),
            5,
            "stopped, no date: the model reads"
        );
        let other_dose = digoxin.replace("0.125", "0.25");
        assert_eq!(choices(&on("2021-03-28"), AnswerType::YesNo, &other_dose).len(), 5, "another dose");
        let ended = digoxin.replace("(active)", "(stopped, stopped 2020-01-01)");
        assert_eq!(choices(&on("2019-06-01"), AnswerType::YesNo, &ended), ["Yes"], "stopped after the date");
        assert_eq!(choices(&on("2021-03-28"), AnswerType::YesNo, &ended).len(), 5, "stopped before it");
        // The newest request on or before the date states the status then.
        let renewed = format!(
            "{digoxin}[2] (record MedicationRequest, 2019-05-01) - 2019-05-01 10:00: Digoxin 0.125 MG Oral Tablet (stopped) [MedicationRequest/d2]\n"
        );
        assert_eq!(choices(&on("2021-03-28"), AnswerType::YesNo, &renewed).len(), 5, "renewed, then stopped");
        assert_eq!(choices(&on("2018-01-01"), AnswerType::YesNo, &renewed), ["Yes"], "before the renewal");
        // A medication list's section: the subject's words within one entry, not across two.
        let section = "Context items:\n\
            [1] (medication_list, 2016-02-07, Medications) - 2016-02-07 10:00: Digoxin 0.25 MG Injection (active) [MedicationRequest/a] - 2016-02-07 10:00: Aspirin 0.125 MG Oral Tablet (active) [MedicationRequest/b]\n";
        assert_eq!(choices(&on("2021-03-28"), AnswerType::YesNo, section).len(), 5);
        let both = section.replace("Aspirin", "Digoxin");
        assert_eq!(choices(&on("2021-03-28"), AnswerType::YesNo, &both), ["Yes"]);
        // `3ce34794-G07`: the perfect asks whether it ever was, resolved or not.
        let hypertension = "Context items:\n\
            [1] (problem_list, 1959-10-05) Conditions - 1959-10-05 08:00: Hypertension (active) [Condition/c1]\n";
        let diagnosed = "Has the patient been diagnosed with hypertension?";
        assert_eq!(choices(diagnosed, AnswerType::YesNoUnclear, hypertension), ["Yes"]);
        let resolved = hypertension.replace("(active)", "(resolved, resolved 1990-01-01)");
        assert_eq!(choices(diagnosed, AnswerType::YesNoUnclear, &resolved), ["Yes"]);
        // A note is read by the model, and so is a line that does not name the whole subject.
        let note = "Context items:\n[1] (progress_note, 1959-10-05) History of hypertension.\n";
        assert_eq!(choices(diagnosed, AnswerType::YesNoUnclear, note), ["Yes", "No", "Unclear"]);
        // A spelling the parsing skills list holds the word (`806be451-G06`).
        let anemia = hypertension.replace("Hypertension", "Anemia (disorder)");
        let anaemia = "Has the patient been diagnosed with anaemia?";
        assert_eq!(choices(anaemia, AnswerType::YesNoUnclear, &anemia), ["Yes", "No", "Unclear"], "no spellings");
        let library = SkillLibrary::builtin().unwrap();
        let spellings = Some(&library);
        assert!(recorded_yes(anaemia, &anemia, spellings));
        assert!(!recorded_yes(anaemia, hypertension, spellings));
        // An encounter's reason is no diagnosis recorded (`aa0b29d0-G06`,
        // gold No: found by the agent's report search, 1966).
        let encounter = "Context items:\n\
            [1] (other, 1966-10-10) Encounters on 1966-10-10 - 1966-10-10 16:42: Encounter for problem (AMB), reason: Anemia (disorder) [Encounter/ea7d76f1]\n";
        assert!(!recorded_yes(anaemia, encounter, spellings));
        // A drug class is held by a prescription of one of its substances
        // (the parsing skills' classes), not by a note or a condition.
        let simvastatin = "Context items:\n\
            [1] (medication_list, 2019-01-01) - 2019-01-01 09:00: Simvastatin 20 MG Oral Tablet (stopped) [MedicationRequest/m1]\n";
        let statin = "Has the patient received at least one statin?";
        assert!(recorded_yes(statin, simvastatin, spellings));
        assert!(!recorded_yes(statin, simvastatin, None), "without the skills, no classes");
        assert!(!recorded_yes(statin, &simvastatin.replace("MedicationRequest", "Condition"), spellings));
        let either = "Has the patient received at least one oral anticoagulant or heparin?";
        let heparin = simvastatin.replace("Simvastatin 20 MG Oral Tablet", "Heparin 5000 UNT/ML Injectable Solution");
        assert!(recorded_yes(either, &heparin, spellings));
        assert!(recorded_yes(either, &simvastatin.replace("Simvastatin", "Warfarin Sodium"), spellings));
        assert!(!recorded_yes(either, simvastatin, spellings));
        // An oral anticoagulant is not a heparin; "and" asks for both.
        assert!(!recorded_yes("Has the patient received at least one oral anticoagulant?", &heparin, spellings));
        assert!(!recorded_yes("Has the patient received a statin and an opioid?", simvastatin, spellings));
        // Alternatives joined by "or" (outside parentheses): any one.
        let kidney = "Context items:\n\
            [1] (problem_list, 2019-01-01) - 2019-01-01 09:00: Acute renal failure syndrome (disorder) (active) [Condition/k1]\n";
        let ckd_or = "Is chronic kidney disease or renal failure documented?";
        assert!(recorded_yes(ckd_or, kidney, spellings));
        // "renal" and "kidney" name one organ (the parsing skills' spellings).
        assert!(recorded_yes(ckd_or, &kidney.replace("renal", "kidney"), spellings));
        assert!(!recorded_yes("Is chronic kidney disease documented?", kidney, spellings));
        assert!(!recorded_yes("Is chronic kidney disease and renal failure documented?", kidney, spellings));
        // A word beside the class names something else.
        assert!(!recorded_yes("Has the patient received statin therapy counselling?", simvastatin, spellings));
        let opioid = simvastatin.replace("Simvastatin 20 MG", "Acetaminophen 325 MG / Oxycodone Hydrochloride 5 MG");
        assert!(recorded_yes("Has the patient received at least one opioid analgesic?", &opioid, spellings));
        let tazobactam = simvastatin.replace("Simvastatin 20 MG Oral Tablet", "Piperacillin-Tazobactam 4.5 g IV");
        assert!(recorded_yes("Has the patient received at least one penicillin?", &tazobactam, spellings));
        let amoxicillin = simvastatin.replace("Simvastatin 20 MG", "Amoxicillin 250 MG / Clavulanate 125 MG");
        assert!(recorded_yes(
            "Has the patient received at least one penicillin-class antibiotic?",
            &amoxicillin,
            spellings
        ));
        // A completed procedure answers a question in the perfect, which
        // may stand in a clause ("... that a chest X-ray has been
        // performed"); the words the question asks with are no subject.
        let xray = "Context items:\n\
            [1] (procedure, 2019-01-01) - 2019-01-01 00:31: Plain chest X-ray (procedure) (completed) [SNOMED 399208008] [Procedure/bee9918b]\n";
        let performed = "Is there documented evidence that a chest X-ray has been performed?";
        assert!(recorded_yes(performed, xray, spellings));
        assert!(!recorded_yes("Is there documented evidence that a chest CT has been performed?", xray, spellings));
        // Pulmonary hypertension is not hypertension (`10015272-G07`, MIMIC-IV).
        let pulmonary = "Context items:\n\
            [1] (problem_list, 2137-06-01) - 2137-06-01: Other secondary pulmonary hypertension (ICD-10 I272) [diagnoses_icd/27993466/9]\n";
        assert!(!recorded_yes(diagnosed, pulmonary, spellings));
        assert!(recorded_yes("Has the patient been diagnosed with pulmonary hypertension?", pulmonary, spellings));
        // A section's heading and a line's stamp state its own date, no
        // end (`f3721a5a-G01`: the agent's context item).
        let camila = "Context items:\n\
            [1] (medication_list, 2020-09-18) Medications on 2020-09-18 - 2020-09-18 23:57: Camila 28 Day Pack (active) [RxNorm 748962] [MedicationRequest/b740cba5]\n";
        assert!(recorded_yes("Is the patient receiving Camila 28 Day Pack on 2020-12-17?", camila, spellings));
        // A prescription that ended on its own day, before the question's
        // date, is not current (`10007928-G01`).
        let pantoprazole = "Context items:\n\
            [1] (medication_list, 2129-04-06) - 2129-04-06 01:00: Pantoprazole 80 mg IV (until 2129-04-06 16:00) [prescriptions/27558242]\n";
        assert!(!recorded_yes(
            "Is the patient receiving Pantoprazole 80 mg IV on 2129-04-11?",
            pantoprazole,
            spellings
        ));
        assert!(recorded_yes("Is the patient receiving Pantoprazole 80 mg IV on 2129-04-06?", pantoprazole, spellings));
        let kidney = "Has the patient been diagnosed with chronic kidney disease?";
        let sinusitis = hypertension.replace("Hypertension", "Chronic sinusitis");
        assert_eq!(choices(kidney, AnswerType::YesNoUnclear, &sinusitis), ["Yes", "No", "Unclear"]);
    }

    #[test]
    fn a_reasoning_states_only_figures_the_items_or_the_question_show() {
        assert_eq!(
            figures_in("CHA2DS2-VASc 3 on 2019-01-04 21:51, eGFR 81.9 mL/min/1.73 m2."),
            ["2", "3", "2019-01-04", "21:51", "81.9", "1.73"]
        );
        let prompt = "Context items:\n\
            [1] (medication_list, 1996-02-04) Medications – 1996-02-04 21:51: Acetaminophen 325 MG Oral Tablet (stopped) [MedicationRequest/3f2e]\n";
        let question = "Has the patient received Acetaminophen in the last 12 months?";
        let shown = shown_values(prompt).with_subject(question, prompt);
        assert!(["3", "2"].iter().all(|f| shown.figures.contains(&f.to_string())), "{:?}", shown.figures);
        let schema = schema_of(&[1], question, Some(AnswerType::YesNo), &shown, &[]);
        let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
        let says =
            |reasoning: &str| validator.check(&json!({"answer": "No", "reasoning": reasoning}).to_string()).is_ok();
        assert!(says("Acetaminophen 325 MG was prescribed on 1996-02-04 [1]."));
        assert!(says("No prescription in the last 12 months [1]."), "the question's figure");
        assert!(!says("The most recent administration is 2021-01-04–2021-06-30 [1]."), "the style skill's example");
        assert!(!says("Acetaminophen 500 MG was prescribed on 1996-02-04 [1]."), "a dose no item shows");
        assert!(!says("Prescribed 3.2 times [1]."), "3 and 2 are shown, 3.2 is not");
        assert!(!says("Prescribed 32 times [1]."), "nor 32");
        assert!(says("Prescribed on 1996-02-04, at 21:51 [1]."), "a figure, then a comma");
        assert!(says("Beta-325 and 325-beta, 325 [1]."), "a hyphen beside a figure in words");
    }

    /// A context of 60 lab items (each with its own long decimal, date,
    /// time and record id): the reasoning's figure alternation still
    /// compiles for the validator and for the embedded model's grammar
    /// engine, and a figure of the last item is accepted. (With the
    /// alternation repeated once per character it did not compile.)
    /// The reasoning is prose: the embedded model's degenerate reasonings
    /// of q16f (binary 04990f5, docs/evaluation.md) are refused, as the
    /// grammar it decodes under refuses them; plain cited sentences pass.
    #[test]
    fn a_reasoning_is_cited_prose_not_copied_items_tables_or_runs() {
        let prompt = "Context items:\n\
            [1] (problem_list, 1977-08-08) Conditions on 1977-08-08 - 1977-08-08 15:24: Chronic sinusitis (disorder) (active)\n\
            [2] (lab_report, 2012-09-21) Laboratory results on 2012-09-21 - 2012-09-21 13:45: Glucose: 97.9 mg/dL | 2012-09-21 13:45: Urea Nitrogen: 19.7 mg/dL\n";
        let question = "Is chronic sinusitis documented?";
        let shown = shown_values(prompt).with_subject(question, prompt);
        let schema = schema_of(&[1, 2], question, Some(AnswerType::YesNo), &shown, &[]);
        let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
        let says =
            |reasoning: &str| validator.check(&json!({"answer": "Yes", "reasoning": reasoning}).to_string()).is_ok();
        assert!(says("Chronic sinusitis is on the problem list since 1977-08-08 [1]."));
        assert!(says("Sinusitis is documented [1]. Glucose was 97.9 mg/dL on 2012-09-21 [2]."));
        assert!(says("Chronic sinusitis (disorder) is active, e.g. on 1977-08-08 [1]; no other item [2]."));
        for degenerate in [
            "[1] (problem_list, 1977-08-08) Conditions on 1977-08-08 - 1977-08-08 15:24: Chronic sinusitis [1]",
            "Conditions on 1977-08-08 (problem_list) [1].",
            "Glucose: 97.9 mg/dL | 2012-09-21 13:45: Urea Nitrogen [2].",
            "The patient's BMI was recorded on                          [1].",
            "Results on 2012-09-21 ............................ [2].",
            "The patient received transfusions before any\u{ac80} [1].",
            "The patient was male, \u{ff16} years old [1].",
            "Scored [1] (calculation) cha2ds2-vasc calculator: inputs {",
            "LDL cholesterol of at least \u{2081}\u{2083} mg/dL [1].",
            "Recorded on \u{b2}\u{b2}-\u{b2}\u{b2} [1].",
            "HbA1c is at \u{305} \u{305} [1].",
            "Four citations [1], [2], [1] and [2].",
        ] {
            assert!(!says(degenerate), "{degenerate}");
        }
        // Without figures or items, the same.
        let bare = schema_of(&[], "Is it documented?", Some(AnswerType::YesNo), &ShownValues::default(), &[]);
        let validator = evident_llm::SchemaValidator::new(&bare).unwrap();
        let says =
            |reasoning: &str| validator.check(&json!({"answer": "No", "reasoning": reasoning}).to_string()).is_ok();
        assert!(says("Nothing in the record mentions it."));
        assert!(!says("Nothing  in the record."));
        assert!(!says(" Nothing."));
        let env = toktrie::ApproximateTokEnv::single_byte_env();
        let factory = llguidance::ParserFactory::new_simple(&env).unwrap();
        factory.create_parser(llguidance::api::TopLevelGrammar::from_json_schema(schema)).unwrap();
    }

    #[test]
    fn a_calculators_answer_is_reasoned_from_its_calculation() {
        let calculation = |calculator: &str, inputs: Value, output: Value| Evidence::Calculation {
            calculator: calculator.into(),
            inputs,
            output,
            used: vec![],
        };
        let nodes = vec![
            calculation("r-iss", json!({}), json!({"stage": "II", "points": null})),
            calculation(
                "cha2ds2-vasc",
                json!({"age_years": "71-73", "female": false, "hypertension": true, "diabetes": false,
                       "stroke_tia_thromboembolism": true}),
                json!({"score": 4.0, "items": [["hypertension", 1.0], ["stroke_tia_thromboembolism", 2.0]]}),
            ),
            calculation(
                "bmi",
                json!({"weight_kg": 92.03762647441827, "height_m": 1.7400000000000002}),
                json!({"value": 30.387, "unit": "kg/m2", "reported": 30.4, "category": "obese"}),
            ),
        ];
        let score = "What is the CHA2DS2-VASc score on 2125-06-19?";
        assert_eq!(
            calculation_reasoning(score, Some(AnswerType::Score), "4; 2125-06-19", &nodes),
            Some((
                "cha2ds2-vasc gives 4 [2], from the record: age 71-73 years, male, hypertension, stroke tia thromboembolism."
                    .to_string(),
                2
            ))
        );
        assert_eq!(calculation_reasoning(score, None, "4", &nodes).map(|r| r.1), Some(2), "asked without a type");
        assert_eq!(calculation_reasoning(score, Some(AnswerType::Score), "3", &nodes), None, "not the result");
        assert_eq!(calculation_reasoning(score, Some(AnswerType::YesNo), "4", &nodes), None);
        let stage = "What is the R-ISS stage?";
        assert_eq!(
            calculation_reasoning(stage, Some(AnswerType::Score), "II", &nodes),
            Some(("r-iss gives II [1].".into(), 1))
        );
        assert_eq!(calculation_reasoning("What is the ISS stage?", Some(AnswerType::Score), "II", &nodes), None);
        let bmi = "What is the adult BMI category (underweight, normal, overweight, obese) on 2021-02-22?";
        assert_eq!(
            calculation_reasoning(bmi, Some(AnswerType::Category), "obese", &nodes).map(|r| r.0),
            Some("bmi gives 30.4 kg/m2 (obese) [3], from the record: weight 92.04 kg, height 1.74 m.".into()),
            "inputs shown to two decimals"
        );
    }

    /// A score a calculator the question names gives is written in the
    /// baseline prompt's format: the date of the newest lab it read, or
    /// the reference date where it read the patient's age; none where two
    /// calculations disagree or the question asks no score.
    #[test]
    fn a_calculated_score_is_written_with_the_date_of_its_inputs() {
        let at = |d: &str| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").unwrap().and_hms_opt(9, 0, 0).unwrap();
        let lab = |day: &str| Evidence::Lab {
            concept: "Albumin".into(),
            original_name: "Albumin".into(),
            value: "3.1".into(),
            unit: Some("g/dL".into()),
            reference_range: None,
            flag: None,
            time: at(day),
            source_id: format!("lab-{day}"),
        };
        let patient =
            Evidence::Patient { patient_id: "P".into(), birth_date: None, sex: None, as_of: at("2020-06-01") };
        let calculation = |calculator: &str, output: Value, used: Vec<Evidence>| Evidence::Calculation {
            calculator: calculator.into(),
            inputs: json!({}),
            output,
            used,
        };
        let as_of = at("2020-06-01");
        let iss = calculation("iss", json!({"stage": "II"}), vec![lab("2020-03-01"), lab("2020-04-15")]);
        let vasc = calculation("cha2ds2-vasc", json!({"score": 3.0}), vec![patient, lab("2019-01-01")]);
        let nodes = vec![iss.clone(), vasc];
        let score = Some(AnswerType::Score);
        let ask = |question: &str, nodes: &[Evidence]| calculated_score(question, score, nodes, as_of);
        assert_eq!(
            ask("What is the ISS stage on 2020-06-01?", &nodes).as_deref(),
            Some("II; 2020-04-15; iss calculation")
        );
        assert_eq!(
            ask("What is the CHA2DS2-VASc score on 2020-06-01?", &nodes).as_deref(),
            Some("3; 2020-06-01; cha2ds2-vasc calculation")
        );
        assert_eq!(ask("What is the R-ISS stage?", &nodes), None, "no R-ISS calculation");
        let other = calculation("iss", json!({"stage": "III"}), vec![lab("2020-05-01")]);
        assert_eq!(ask("What is the ISS stage?", &[iss.clone(), other]), None, "two values");
        let question = "What is the ISS stage?";
        assert_eq!(calculated_score(question, Some(AnswerType::Category), &[iss], as_of), None);
    }

    #[test]
    fn an_answer_of_one_value_leaves_the_model_a_short_reasoning() {
        assert_eq!(one_value("^(?:Yes)$").as_deref(), Some("Yes"));
        assert_eq!(one_value("^(?:2017\\-08\\-26)$").as_deref(), Some("2017-08-26"));
        assert_eq!(one_value("^2017-08-26 \\| 2019-03-01$").as_deref(), Some("2017-08-26 | 2019-03-01"));
        assert_eq!(one_value("^(?:Yes|No)$"), None);
        assert_eq!(one_value("^(?:(?:Administered|Active): )?2017-08-26–ongoing$"), None);
        assert_eq!(one_value("^(?:4)(?:; [^0-9]{1,60})?$"), None);
        assert_eq!(one_value("^(?:)$"), None);
        let checked = ShownValues {
            labels: vec![("clinically-relevant-anaemia".into(), "Yes".into())],
            figures: vec!["15.13646438169292".into()],
            ..ShownValues::default()
        };
        let question = "Is clinically relevant anaemia present on 2020-01-15?";
        let schema = schema_of(&[1, 2], question, Some(AnswerType::YesNo), &checked, &[]);
        let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
        let check = |reasoning: &str| validator.check(&json!({"answer": "Yes", "reasoning": reasoning}).to_string());
        assert!(check("The check gives Yes [1].").is_ok());
        assert!(check("Haemoglobin 15.13646438169292 g/dL [2].").is_err(), "no figures");
        assert!(check(&format!("{} [1].", "The check gives Yes".repeat(6))).is_err(), "short");
        assert!(check("The check gives Yes [1], and the list [2].").is_err(), "one citation");
        // Where the answer is open, figures and citations are as before.
        let open = ShownValues { labels: vec![], ..checked };
        let schema = schema_of(&[1, 2], question, Some(AnswerType::YesNo), &open, &[]);
        let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
        let answer = json!({"answer": "No", "reasoning": "Haemoglobin 15.13646438169292 g/dL [2], not low [1]."});
        assert!(validator.check(&answer.to_string()).is_ok());
    }

    #[test]
    fn a_criteria_checks_answer_is_reasoned_from_the_check() {
        let check = Evidence::Calculation {
            calculator: "statin-criteria".into(),
            inputs: json!({"age 40-75 years": 58, "documented diabetes":
                "- 2013-03-29 16:42: Diabetes mellitus type 2 (disorder) (active) [SNOMED 44054006] [Condition/c1]",
                "LDL cholesterol of at least 190 mg/dL within 365 days": "no value within 365 days"}),
            output: json!({"result": "Yes", "criteria": [
                {"criterion": "age 40-75 years", "status": "met"},
                {"criterion": "documented diabetes", "status": "met"},
                {"criterion": "LDL cholesterol of at least 190 mg/dL within 365 days", "status": "not met"}]}),
            used: vec![],
        };
        let nodes = vec![section("lab", "LDL 120 mg/dL"), check];
        let question = "Does the patient meet the statin criteria on 2020-05-01?";
        let sets = CriteriaSets::builtin();
        let yes_no_unclear = Some(AnswerType::YesNoUnclear);
        assert_eq!(
            criteria_reasoning(question, yes_no_unclear, "Yes", &nodes, sets),
            Some((
                "statin-criteria gives Yes [2]: age 40-75 years: met (58); documented diabetes: met (2013-03-29 \
                 16:42: Diabetes mellitus type 2 (disorder) (active))."
                    .to_string(),
                2
            ))
        );
        // Not the check's result, another set, or another answer type:
        // the model's reasoning stays.
        assert_eq!(criteria_reasoning(question, yes_no_unclear, "No", &nodes, sets), None);
        let anaemia = "Does the patient have clinically relevant anaemia on 2020-05-01?";
        assert_eq!(criteria_reasoning(anaemia, yes_no_unclear, "Yes", &nodes, sets), None);
        assert_eq!(criteria_reasoning(question, Some(AnswerType::Date), "Yes", &nodes, sets), None);
        assert_eq!(criteria_reasoning(question, Some(AnswerType::YesNo), "Yes", &nodes, sets).map(|r| r.1), Some(2));
    }

    #[test]
    fn dates_the_records_give_are_reasoned_from_their_entries() {
        let prompt = "Context items:\n\
            [1] (lab_report, 2016-01-05) Glucose 97 mg/dL\n\
            [2] (medication_list, 2017-08-26) Medications on 2017-08-26 - 2017-08-26 10:02: Penicillin V Potassium 250 MG Oral Tablet (stopped) [RxNorm 834102] [MedicationRequest/p1]\n\
            [3] (medication_list, 2019-03-01) Medications on 2019-03-01 - 2019-03-01 09:15: Penicillin V Potassium 250 MG Oral Tablet (stopped) [RxNorm 834102] [MedicationRequest/p2]\n";
        let first = "When was Penicillin V Potassium 250 MG Oral Tablet first prescribed?";
        let shown = ShownValues { order: EvidenceOrder::Earliest, ..shown_values(prompt).with_subject(first, prompt) };
        assert_eq!(shown.subject_items, [(2, "2017-08-26".to_string()), (3, "2019-03-01".to_string())]);
        let date = Some(AnswerType::Date);
        assert_eq!(
            recorded_dates_reasoning(first, prompt, date, &shown, "2017-08-26"),
            Some((
                "The earliest entry the record shows is Penicillin V Potassium 250 MG Oral Tablet (stopped) on 2017-08-26 [2]."
                    .to_string(),
                vec![2]
            ))
        );
        // Not the records' answer: the model's reasoning stays.
        assert_eq!(recorded_dates_reasoning(first, prompt, date, &shown, "2019-03-01"), None);
        let dates = "On which dates was Penicillin V Potassium 250 MG Oral Tablet prescribed?";
        let shown = shown_values(prompt).with_subject(dates, prompt);
        let list = Some(AnswerType::DateList);
        assert_eq!(
            recorded_dates_reasoning(dates, prompt, list, &shown, "2017-08-26 | 2019-03-01").map(|r| r.0),
            Some(
                "The record shows Penicillin V Potassium 250 MG Oral Tablet (stopped) on 2017-08-26 [2], and again on 2019-03-01 [3]."
                    .to_string()
            )
        );
        // A note naming it too: the records alone no longer give the answer.
        let noted =
            format!("{prompt}[4] (progress_note, 2018-02-02) Penicillin V Potassium 250 MG Oral Tablet restarted.\n");
        let shown = shown_values(&noted).with_subject(dates, &noted);
        assert_eq!(recorded_dates_reasoning(dates, &noted, list, &shown, "2017-08-26 | 2019-03-01"), None);
    }

    #[test]
    fn a_recorded_yes_is_reasoned_from_the_entry_that_answers_it() {
        let prompt = "Context items:\n\
            [1] (lab_report, 2020-09-01) Glucose 97 mg/dL\n\
            [2] (medication_list, 2020-09-18) Medications on 2020-09-18 - 2020-09-18 23:57: Camila 28 Day Pack (active) [RxNorm 748962] [MedicationRequest/b740cba5]\n";
        let question = "Is the patient receiving Camila 28 Day Pack on 2020-12-17?";
        let entries = recorded_yes_entries(question, prompt, None);
        assert_eq!(entries.len(), 1, "{entries:?}");
        assert_eq!(
            recorded_yes_reasoning(&entries),
            Some((
                "The record shows Medications on 2020-09-18 - 2020-09-18 23:57: Camila 28 Day Pack (active) [2]."
                    .to_string(),
                2
            ))
        );
        // No entry answers Yes: nothing is written.
        let stopped = prompt.replace("(active)", "(stopped)");
        assert!(recorded_yes_entries(question, &stopped, None).is_empty());
        assert_eq!(recorded_yes_reasoning(&[]), None);
    }

    #[test]
    fn an_only_item_over_the_budget_is_shown_shortened_and_kept_whole() {
        let text: String = (0..60)
            .map(|i| format!("- 2020-01-15 20:51: Glucose: 64.33400015383{i:02} mg/dL [Observation/99c18803-0c77-401c-90a9-8{i:02}]\n"))
            .collect();
        let node = section("labs", &text);
        let budget = node_tokens(&node) / 4;
        let (kept, shown) = number_nodes(std::slice::from_ref(&node), budget);
        assert_eq!(kept, std::slice::from_ref(&node), "cited whole");
        assert!(shown[0].text.ends_with("(shortened to fit the model's context)"), "{}", shown[0].text);
        let tokens = estimate_text_tokens(&shown[0].text) + estimate_text_tokens(&shown[0].header) + 6;
        assert!(tokens <= budget, "{tokens} > {budget}");
        assert!(shown[0].text.starts_with("- 2020-01-15 20:51: Glucose: 64.3340001538300 mg/dL"));
        // Within the budget, it is shown whole.
        let (_, whole) = number_nodes(std::slice::from_ref(&node), node_tokens(&node));
        assert!(!whole[0].text.contains("shortened"));
    }

    #[test]
    fn a_sentence_said_twice_is_kept_once() {
        let twice = "The most recent evidence comes first. The most recent evidence comes first. Yes [1].";
        assert_eq!(distinct_sentences(twice), "The most recent evidence comes first. Yes [1].");
        let clauses = "A drug is given on a date; A drug is given on a date. A drug is given on a date.";
        assert_eq!(distinct_sentences(clauses), "A drug is given on a date.");
        assert_eq!(distinct_sentences("Said once [1]. Said twice [2]."), "Said once [1]. Said twice [2].");
    }

    #[test]
    fn many_shown_figures_still_compile() {
        let mut prompt = String::from("Context items:\n");
        for i in 1..=60 {
            prompt.push_str(&format!(
                "[{i}] (lab, 2020-{:02}-{:02}) Creatinine {}.{:012} mg/dL at 2020-{:02}-{:02} {:02}:{:02} [Observation/{:08x}-4b2c-9d1e-{:012x}]\n",
                i % 12 + 1, i % 28 + 1, i, i * 7_919, i % 12 + 1, i % 28 + 1, i % 24, i % 60, i * 7_777, i * 31_337
            ));
        }
        let question = "Is the creatinine of the last 365 days above 1.5 mg/dL?";
        let shown = shown_values(&prompt).with_subject(question, &prompt);
        assert!(shown.figures.len() > 200, "{}", shown.figures.len());
        let numbers: Vec<usize> = (1..=60).collect();
        let schema = schema_of(&numbers, question, Some(AnswerType::YesNo), &shown, &[]);
        let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
        let reasoning = format!("Creatinine was 60.{:012} mg/dL on 2020-01-05 [60], above 1.5.", 60 * 7_919);
        assert!(validator.check(&json!({"answer": "Yes", "reasoning": reasoning}).to_string()).is_ok());
        assert!(validator
            .check(&json!({"answer": "Yes", "reasoning": "Creatinine 2.1 mg/dL [60]."}).to_string())
            .is_err());
        let env = toktrie::ApproximateTokEnv::single_byte_env();
        let factory = llguidance::ParserFactory::new_simple(&env).unwrap();
        factory.create_parser(llguidance::api::TopLevelGrammar::from_json_schema(schema)).unwrap();
    }

    #[test]
    fn a_first_occurrence_date_is_the_own_date_of_an_item_that_names_the_subject() {
        let prompt = "Context items:\n\
            [1] (problem_list, 2017-08-26) Conditions on 2017-08-26 - 2017-08-26 20:43: Polyp of colon (resolved, resolved 2019-01-18)\n\
            [2] (other, 2018-03-01) Observations on 2018-03-01 - 2018-03-01 09:00: Polyp size 5 mm\n";
        let question = "When was Polyp of colon first documented?";
        let accepts = |order: EvidenceOrder, answer: &str| {
            let shown = ShownValues { order, ..shown_values(prompt).with_subject(question, prompt) };
            let schema = schema_of(&[1, 2], question, Some(AnswerType::Date), &shown, &[]);
            let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
            validator.check(&json!({"answer": answer, "reasoning": "From [1]."}).to_string()).is_ok()
        };
        let shown = shown_values(prompt).with_subject(question, prompt);
        assert_eq!(shown.subject_dates, ["2017-08-26"], "item 2 does not name polyp of colon");
        assert!(accepts(EvidenceOrder::Earliest, "2017-08-26"));
        assert!(!accepts(EvidenceOrder::Earliest, "2019-01-18"), "the line's resolution date");
        assert!(!accepts(EvidenceOrder::Earliest, "2018-03-01"));
        let intervals = |answer: &str| {
            let q = "In which documented intervals was Polyp of colon active (onset–resolution or onset–ongoing)?";
            let shown = shown_values(prompt).with_subject(q, prompt);
            let schema = schema_of(&[1, 2], q, Some(AnswerType::IntervalList), &shown, &[]);
            let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
            validator.check(&json!({"answer": answer, "reasoning": "From [1]."}).to_string()).is_ok()
        };
        assert_eq!(shown.subject_intervals, ["2017-08-26–2018-03-01", "2017-08-26–2019-01-18"]);
        assert!(intervals("2017-08-26–2019-01-18"));
        assert!(intervals("Active: 2017-08-26–2019-01-18 | 2017-08-26–2018-03-01"));
        assert!(!intervals("2017-08-26–ongoing"), "its line states the resolution");
        // An encounter of the same day names it and states no end: the
        // day's condition line does, so that start is still not ongoing.
        let with_encounter =
            format!("{prompt}[3] (encounter, 2017-08-26) Encounter for symptom, reason: Polyp of colon\n");
        let shown = shown_values(&with_encounter).with_subject(question, &with_encounter);
        assert!(!shown.subject_intervals.iter().any(|i| i.ends_with("ongoing")), "{:?}", shown.subject_intervals);
        assert!(!intervals("2018-03-01–ongoing"), "item 2 does not name it");
        assert!(!intervals("2017-08-26–2016-01-01"), "no date before the start, and none not shown");
        assert!(!intervals("Notdocumented: 2017-08-26–2019-01-18"), "a status is Administered or Active");
        assert!(!intervals("Not documented"));
        let therapy = "Context items:\n\
            [1] (progress_note, 2021-01-11) Cycle 1 day 1 of Dara-Kd administered: carfilzomib 20 mg/m2.\n\
            [2] (progress_note, 2022-09-05) Progression. Dara-Kd stopped.\n";
        let q = "In which documented intervals was carfilzomib administered (start–end or ongoing)?";
        let shown = shown_values(therapy).with_subject(q, therapy);
        assert_eq!(
            shown.subject_intervals,
            ["2021-01-11–2022-09-05", "2021-01-11–ongoing"],
            "the stop is another note's"
        );
        // Without the earliest order, any date an item shows.
        assert!(accepts(EvidenceOrder::MostRecent, "2019-01-18"));
        assert!(!accepts(EvidenceOrder::MostRecent, "Not documented"));
    }
}

/// The date rules on both development banks, without a model, each
/// question shown two ways: the record's lines that name its subject, and
/// what the agent's tools return for it, rendered by [`context_items`]
/// (a medication list's sections come with their headings, whose dates
/// are no prescription's). The date-list rule: for
/// every prescription-dates question (template G21) with every line of
/// the patient's medication list that names the drug shown up to its
/// date, the dates the answer step
/// allows are the gold dates; on MIMIC-IV (lines citing
/// `[prescriptions/..]`) in all 55, though the question's route "PO"
/// is also a word of "PO/NG" lines (the line that repeats the question's
/// name most fully names it), and a compound product's name may end
/// with the drug's ("Potassium Chl 20 mEq / 1000 mL D5LR 1000 mL IV" for
/// "D5LR 1000 mL IV": the entry whose name holds the fewest other words
/// names it; 54 before).
#[cfg(test)]
mod date_rules_on_the_banks {
    use super::*;

    /// A store of `folder` ingested as `evident ingest` does, and the bank.
    fn ingested(folder: &str, file: &str) -> (tempfile::TempDir, std::sync::Mutex<evident_store::Store>, String) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = evident_store::Store::open(&dir.path().join("evident.db")).unwrap();
        let data = evident_testdata::shared_data().join(folder);
        let units = evident_ingest::plan(&[data], evident_ingest::Format::Auto).unwrap();
        evident_ingest::ingest(&mut store, &units, false, &evident_ingest::NoProgress).unwrap();
        let path = format!("{}/../../examples/chart/bank/{file}", env!("CARGO_MANIFEST_DIR"));
        (dir, std::sync::Mutex::new(store), std::fs::read_to_string(path).unwrap())
    }

    /// What the agent's record query (of `record`, over the whole
    /// history) and report search return for `question`, its query
    /// expanded as the agent expands it, as the answer prompt shows them.
    fn by_the_tools(
        store: &std::sync::Mutex<evident_store::Store>,
        patient: &str,
        as_of: chrono::NaiveDateTime,
        record: &str,
        question: &str,
    ) -> String {
        let skills = crate::SkillLibrary::builtin().unwrap();
        let query = skills.expand_query(question).map_or(question.to_string(), |(q, _)| q);
        let view = RecordView::new(store, patient, as_of);
        let mut items = Vec::new();
        let call = json!({"record": record, "query": query});
        items.extend(view.run(ToolName::QueryRecords, &call).unwrap().evidence);
        items.extend(view.run(ToolName::SearchReports, &json!({"query": query})).unwrap().evidence);
        context_items(&items)
    }

    /// The context items of every line of `kind` documents dated up to
    /// `as_of` that `keep` keeps, numbered as the answer prompt numbers
    /// them.
    fn items(
        store: &std::sync::Mutex<evident_store::Store>,
        patient: &str,
        as_of: chrono::NaiveDateTime,
        kind: evident_model::DocKind,
        keep: impl Fn(&str) -> bool,
    ) -> String {
        let store = store.lock().unwrap();
        let mut prompt = String::from("Context items:\n");
        let mut n = 0;
        for doc in store.documents(patient).unwrap() {
            let Some(date) = doc.date.filter(|d| *d <= as_of) else { continue };
            if doc.kind != kind {
                continue;
            }
            for sentence in store.sentences(&doc.id).unwrap() {
                let line = sentence.text.trim();
                if keep(line) {
                    n += 1;
                    prompt.push_str(&format!("[{n}] ({}, {}) {line}\n", doc.kind, date.format("%Y-%m-%d")));
                }
            }
        }
        prompt
    }

    fn as_of(q: &serde_json::Value) -> chrono::NaiveDateTime {
        let day = chrono::NaiveDate::parse_from_str(q["reference_date"].as_str().unwrap(), "%Y-%m-%d");
        day.unwrap().and_hms_opt(23, 59, 59).unwrap()
    }

    /// Whether Evident writes the reasoning for `answer` (the records'
    /// answer, [`recorded_dates_reasoning`]); where it does, each answered
    /// date is in the reasoning, cited by an item whose own date it is (an
    /// interval's start), and the reasoning names the subject.
    fn is_written(question: &str, prompt: &str, answer_type: AnswerType, shown: &ShownValues, answer: &str) -> bool {
        let Some((reasoning, cited)) = recorded_dates_reasoning(question, prompt, Some(answer_type), shown, answer)
        else {
            return false;
        };
        let own: Vec<(usize, String)> =
            numbered_lines(prompt).filter_map(|(n, t)| own_date(t).map(|(d, _)| (n, d))).collect();
        let list = answer.strip_prefix("Active: ").unwrap_or(answer);
        for entry in list.split(" | ") {
            let start = entry.split('–').next().unwrap();
            let cited_by = own.iter().find(|(n, d)| d == start && reasoning.contains(&format!("{entry} [{n}]")));
            assert!(cited_by.is_some(), "{question}: {entry} uncited in {reasoning}");
        }
        assert_eq!(cited, citation_numbers(&reasoning).into_iter().collect::<Vec<_>>(), "{reasoning}");
        assert!(names_subject(&subject_words(question), &reasoning), "{question}: {reasoning}");
        true
    }

    /// The first-occurrence rule: for every question of both banks asking
    /// when a condition was first documented or a medication first
    /// prescribed (templates G23, G24), under the agent's earliest
    /// evidence order, the one date the answer step allows is the gold
    /// date on all 24 Synthea questions and 115 of MIMIC-IV's 117 with
    /// the lines of the problem or medication list that name the subject
    /// shown; with what the agent's tools return for the question shown
    /// (its record query and report search, sections with their
    /// headings), on all 24 and 116 (`10025463-G24` too, where every line
    /// naming the subject left no one date). Before the fewest-other-words
    /// rule of the date list below, 114 and 115. Evident writes the
    /// reasoning from the records' entries ([`is_written`]) wherever
    /// records alone give the one date: all 24 Synthea questions both
    /// ways, 116 and 117 of MIMIC-IV's (one of them not the gold date).
    #[test]
    fn the_first_occurrence_rule_gives_the_gold_first_date() {
        for (folder, file, questions, exact, reasoned) in [
            ("synthea/generated-sample-data-R4", "dev.jsonl", 24, [24, 24], [24, 24]),
            ("mimic-iv-demo", "dev-mimic.jsonl", 117, [115, 116], [116, 117]),
        ] {
            let (_dir, store, bank) = ingested(folder, file);
            let (mut asked, mut same, mut written, mut other) = (0, [0; 2], [0; 2], Vec::new());
            for q in bank.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()) {
                let (kind, record) = match q["template"].as_str().unwrap() {
                    "G23" => (evident_model::DocKind::ProblemList, "conditions"),
                    "G24" => (evident_model::DocKind::MedicationList, "medications"),
                    _ => continue,
                };
                asked += 1;
                let question = q["question"].as_str().unwrap();
                let words = subject_words(question);
                let patient = q["patient"].as_str().unwrap();
                let shown_ways = [
                    items(&store, patient, as_of(&q), kind, |line| names_subject(&words, line)),
                    by_the_tools(&store, patient, as_of(&q), record, question),
                ];
                for (way, prompt) in shown_ways.iter().enumerate() {
                    let shown = ShownValues {
                        order: EvidenceOrder::Earliest,
                        ..shown_values(prompt).with_subject(question, prompt)
                    };
                    let numbers = shown_numbers(prompt);
                    let schema =
                        answer_schema(&numbers, question, Some(AnswerType::Date), &shown, &[], CriteriaSets::builtin());
                    let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
                    let allows =
                        |a: &str| validator.check(&json!({"answer": a, "reasoning": "From [1]."}).to_string()).is_ok();
                    let gold = q["gold_answer"].as_str().unwrap();
                    let allowed: Vec<&String> = shown.dates.iter().filter(|d| allows(d)).collect();
                    if let [only] = &allowed[..] {
                        written[way] += usize::from(is_written(question, prompt, AnswerType::Date, &shown, only));
                    }
                    if allowed.len() == 1 && allowed[0] == gold {
                        same[way] += 1;
                    } else {
                        other.push(format!("{} (way {way}): gold {gold}, allowed {allowed:?}", q["id"]));
                    }
                }
            }
            assert_eq!((asked, same, written), (questions, exact, reasoned), "{file}: {other:?}");
        }
    }

    /// The interval-list rule: for every question of the Synthea bank
    /// asking in which intervals a condition was active (template G22;
    /// MIMIC-IV's bank has none), with the problem list's lines that name
    /// the condition shown, and with what the agent's tools return for the
    /// question shown, the intervals the answer step offers are exactly
    /// the gold intervals on the questions counted here, and hold every
    /// gold interval on all; the one answer it allows is all of them, with
    /// no status field, and Evident writes the reasoning from the records'
    /// entries on all of them (so no model is asked).
    #[test]
    fn the_interval_rule_offers_the_gold_intervals() {
        let (_dir, store, bank) = ingested("synthea/generated-sample-data-R4", "dev.jsonl");
        let (mut asked, mut same, mut written, mut other) = (0, [0; 2], [0; 2], Vec::new());
        for q in bank.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()) {
            if q["template"] != "G22" {
                continue;
            }
            asked += 1;
            let question = q["question"].as_str().unwrap();
            let words = subject_words(question);
            let patient = q["patient"].as_str().unwrap();
            let conditions = evident_model::DocKind::ProblemList;
            let shown_ways = [
                items(&store, patient, as_of(&q), conditions, |line| names_subject(&words, line)),
                by_the_tools(&store, patient, as_of(&q), "conditions", question),
            ];
            for (way, prompt) in shown_ways.iter().enumerate() {
                let shown = shown_values(prompt).with_subject(question, prompt);
                let mut gold: Vec<&str> = q["gold_answer"].as_str().unwrap().split(" | ").collect();
                gold.sort();
                let id = format!("{} (way {way})", q["id"]);
                let offered: Vec<&str> = shown.subject_intervals.iter().map(String::as_str).collect();
                assert!(gold.iter().all(|g| offered.contains(g)), "{id}: gold {gold:?}, offered {offered:?}");
                // Only records name it: the answer is every interval.
                assert!(shown.subject_records_only, "{id}");
                let numbers = shown_numbers(prompt);
                let schema = answer_schema(
                    &numbers,
                    question,
                    Some(AnswerType::IntervalList),
                    &shown,
                    &[],
                    CriteriaSets::builtin(),
                );
                let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
                let answer = |a: &str| json!({"answer": a, "reasoning": "Listed [1]."}).to_string();
                // The one answer it allows: every interval, no status field.
                let whole = offered.join(" | ");
                assert!(validator.check(&answer(&whole)).is_ok(), "{id}: {whole}");
                assert!(validator.check(&answer(&format!("Active: {whole}"))).is_err(), "{id}");
                assert_eq!(schema["properties"]["answer"]["pattern"].as_str().and_then(one_value), Some(whole.clone()));
                written[way] += usize::from(is_written(question, prompt, AnswerType::IntervalList, &shown, &whole));
                if offered.len() > 1 {
                    assert!(validator.check(&answer(offered[0])).is_err(), "{id}: one of them only");
                }
                if offered == gold {
                    same[way] += 1;
                } else {
                    other.push(format!("{id}: gold {gold:?}, offered {offered:?}"));
                }
            }
        }
        assert_eq!((asked, same, written), (16, [16, 16], [16, 16]), "{other:?}");
    }

    /// The date-list rule: for every question of both banks asking the
    /// dates a medication was prescribed (template G21), the one answer
    /// the answer step allows (the dates of the structured lines that name
    /// the subject most fully) is the gold list on all 13 Synthea
    /// questions and all 55 of MIMIC-IV's with every medication line naming
    /// the drug's first word shown, and the same with what the agent's
    /// tools return for the question shown (54 and 54 before a compound
    /// product's line stopped naming the drug its name ends with); where
    /// it is not, every gold date must be among the allowed ones. Evident
    /// writes the reasoning from the records' entries on all of them.
    #[test]
    fn the_date_list_rule_gives_the_gold_prescription_dates() {
        for (folder, file, questions, exact, reasoned) in [
            ("synthea/generated-sample-data-R4", "dev.jsonl", 13, [13, 13], [13, 13]),
            ("mimic-iv-demo", "dev-mimic.jsonl", 55, [55, 55], [55, 55]),
        ] {
            let (_dir, store, bank) = ingested(folder, file);
            let (mut asked, mut same, mut written, mut other) = (0, [0; 2], [0; 2], Vec::new());
            for q in bank.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()) {
                if q["template"] != "G21" {
                    continue;
                }
                asked += 1;
                let question = q["question"].as_str().unwrap();
                let of = question.split_once(" of ").unwrap().1;
                let drug = of.split_whitespace().next().unwrap().to_lowercase();
                let patient = q["patient"].as_str().unwrap();
                // What a search for the drug finds: every line naming its
                // first word (all of them, the whole list would make the
                // reasoning's pattern too large to compile); and what the
                // agent's tools return.
                let medications = evident_model::DocKind::MedicationList;
                let shown_ways = [
                    items(&store, patient, as_of(&q), medications, |line| line.to_lowercase().contains(&drug)),
                    by_the_tools(&store, patient, as_of(&q), "medications", question),
                ];
                for (way, prompt) in shown_ways.iter().enumerate() {
                    let shown = shown_values(prompt).with_subject(question, prompt);
                    let numbers = shown_numbers(prompt);
                    let schema = answer_schema(
                        &numbers,
                        question,
                        Some(AnswerType::DateList),
                        &shown,
                        &[],
                        CriteriaSets::builtin(),
                    );
                    let validator = evident_llm::SchemaValidator::new(&schema).unwrap();
                    let gold = q["gold_answer"].as_str().unwrap();
                    let allowed = shown.subject_dates.join(" | ");
                    let answer = |a: &str| json!({"answer": a, "reasoning": "Listed [1]."}).to_string();
                    let id = format!("{} (way {way})", q["id"]);
                    assert!(shown.subject_records_only, "{id}: {prompt}");
                    assert!(validator.check(&answer(&allowed)).is_ok(), "{id}: {allowed}");
                    written[way] += usize::from(is_written(question, prompt, AnswerType::DateList, &shown, &allowed));
                    if allowed == gold {
                        same[way] += 1;
                    } else {
                        other.push(format!("{id}: gold {gold}, allowed {allowed}"));
                        assert!(validator.check(&answer(gold)).is_err(), "{id}: one answer only");
                        let dates: Vec<&str> = allowed.split(" | ").collect();
                        assert!(gold.split(" | ").all(|d| dates.contains(&d)), "{id}: gold {gold}, allowed {allowed}");
                    }
                }
            }
            assert_eq!((asked, same, written), (questions, exact, reasoned), "{file}: {other:?}");
        }
    }
}

#[cfg(test)]
mod subject_phrase_tests {
    use super::YesNoSubject;

    /// A yes/no subject is told as the question writes it: its
    /// alternatives joined by "or", a strength with its decimal point.
    #[test]
    fn a_yes_no_subject_is_told_as_the_question_writes_it() {
        let skills = crate::skills::SkillLibrary::builtin().unwrap();
        let phrase = |q: &str| YesNoSubject::of(q, Some(&skills)).unwrap().phrase();
        assert_eq!(phrase("Has the patient been diagnosed with diabetes mellitus?"), "diabetes mellitus");
        assert_eq!(
            phrase("Is chronic kidney disease or renal failure documented?"),
            "chronic kidney disease or renal failure"
        );
        assert_eq!(
            phrase("Has the patient received at least one oral anticoagulant or heparin?"),
            "oral anticoagulant or heparin"
        );
        assert_eq!(phrase("Is there documented evidence that a colonoscopy has been performed?"), "colonoscopy");
        assert_eq!(
            phrase("Is the patient receiving Digoxin 0.125 MG Oral Tablet on 2021-03-28?"),
            "digoxin 0.125 mg oral tablet"
        );
    }
}
