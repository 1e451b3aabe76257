//! The clinical skill library as data: one Markdown file per skill with a
//! front matter (`id`, `category`, `summary`, `keywords`, optional
//! `policies`; for a style skill optional `answers`, for a workflow skill
//! optional `evidence_order`), validated on load with errors that name the file and the
//! field. The built-in library (general medicine and the multiple-myeloma
//! pack, `crates/chart/skills/`) is compiled in; a user's folder adds to it.
//!
//! Selection follows the paper's Phase I: the model picks ids from the
//! summaries; style skills whose trigger keywords occur in the question are
//! added as a fallback; the base style skill is always included; policy
//! skills are attached deterministically from the `policies` of the
//! selected skills, never chosen by the model.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::policy::EvidenceOrder;

/// The base style skill (the two-line format), always selected.
pub const BASE_STYLE: &str = "style-base";

/// The answers a yes/no question may have (the baseline prompt's single
/// choice, and "Never"); a style skill's `answers` are some of them.
pub const YES_NO_ANSWERS: [&str; 5] = ["Yes", "No", "Never", "Not documented", "Unclear"];

/// The skill files shipped with Evident: (file name, text).
pub const BUILTIN_SKILLS: &[(&str, &str)] = &[
    ("general/therapy-reconstruction.md", include_str!("../skills/general/therapy-reconstruction.md")),
    ("general/current-medication-status.md", include_str!("../skills/general/current-medication-status.md")),
    ("general/first-occurrence.md", include_str!("../skills/general/first-occurrence.md")),
    ("general/staging-score-calculation.md", include_str!("../skills/general/staging-score-calculation.md")),
    ("general/lab-trend-interpretation.md", include_str!("../skills/general/lab-trend-interpretation.md")),
    ("general/eligibility-assessment.md", include_str!("../skills/general/eligibility-assessment.md")),
    (
        "general/procedure-imaging-documentation.md",
        include_str!("../skills/general/procedure-imaging-documentation.md"),
    ),
    ("general/drug-synonyms.md", include_str!("../skills/general/drug-synonyms.md")),
    ("general/date-formats.md", include_str!("../skills/general/date-formats.md")),
    ("general/clinical-abbreviations.md", include_str!("../skills/general/clinical-abbreviations.md")),
    ("general/temporal-authority.md", include_str!("../skills/general/temporal-authority.md")),
    ("general/administered-over-planned.md", include_str!("../skills/general/administered-over-planned.md")),
    ("general/contradiction-resolution.md", include_str!("../skills/general/contradiction-resolution.md")),
    ("general/style-base.md", include_str!("../skills/general/style-base.md")),
    ("general/style-single-choice.md", include_str!("../skills/general/style-single-choice.md")),
    ("general/style-current-status.md", include_str!("../skills/general/style-current-status.md")),
    ("general/style-date.md", include_str!("../skills/general/style-date.md")),
    ("general/style-score.md", include_str!("../skills/general/style-score.md")),
    ("general/style-list-intervals.md", include_str!("../skills/general/style-list-intervals.md")),
    ("general/style-eligibility.md", include_str!("../skills/general/style-eligibility.md")),
    ("myeloma/mm-regimens.md", include_str!("../skills/myeloma/mm-regimens.md")),
    ("myeloma/mm-drug-classes.md", include_str!("../skills/myeloma/mm-drug-classes.md")),
    ("myeloma/mm-imwg-response.md", include_str!("../skills/myeloma/mm-imwg-response.md")),
    ("myeloma/mm-staging.md", include_str!("../skills/myeloma/mm-staging.md")),
    ("myeloma/mm-refractoriness.md", include_str!("../skills/myeloma/mm-refractoriness.md")),
    ("myeloma/mm-transplant-eligibility.md", include_str!("../skills/myeloma/mm-transplant-eligibility.md")),
];

/// The paper's four skill categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SkillCategory {
    /// Decomposition strategies and evidence priorities; shown at tool execution.
    Workflow,
    /// Normalisation rules (synonyms, dates, abbreviations); shown at tool execution.
    Parsing,
    /// Answer structure per question type; shown at synthesis.
    Style,
    /// Precedence rules for contradictory evidence; attached deterministically.
    Policy,
}

/// One skill module.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skill {
    pub id: String,
    pub category: SkillCategory,
    pub summary: String,
    /// Lower-case words or phrases whose presence in a question triggers
    /// the skill in the keyword fallback (style skills).
    pub keywords: Vec<String>,
    /// Policy skills attached whenever this skill is selected.
    pub policies: Vec<String>,
    /// Style skills only: the answers the style allows a yes/no question
    /// (empty: the answer type's own). Evident's constrained answer step
    /// decodes among them when the question triggers the skill.
    pub answers: Vec<String>,
    /// Workflow skills only: the end of the record that answers the
    /// question (`earliest` for a first occurrence); the policy engine
    /// ranks the evidence so when the question's words trigger the skill.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence_order: Option<EvidenceOrder>,
    /// Parsing skills only: a lower-case word (an abbreviation, a
    /// spelling) and the words a record may use for it instead; Evident's
    /// query expansion adds them to a report search
    /// ([`SkillLibrary::expand_query`]).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub expansions: BTreeMap<String, String>,
    /// Parsing skills only: drug classes, each by the names a question
    /// gives it and the substances a record names instead; Evident's query
    /// expansion adds a named class's substances to a search, and the
    /// yes/no record rule takes a prescription of any of them for the
    /// class ([`SkillLibrary::classes_named`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<DrugClass>,
    /// The instructions (Markdown after the front matter).
    pub body: String,
    /// Where it came from: a built-in name or a user file path.
    pub origin: String,
}

/// A drug class: the names a question may give it ("statin", "opioid
/// analgesic", "oral anticoagulant"; lower-case words) and its substances,
/// each one lower-case word a prescription's line holds ("simvastatin").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrugClass {
    pub names: Vec<String>,
    pub substances: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    id: Option<String>,
    category: Option<String>,
    summary: Option<String>,
    keywords: Option<Vec<String>>,
    #[serde(default)]
    policies: Vec<String>,
    #[serde(default)]
    answers: Vec<String>,
    #[serde(default)]
    evidence_order: Option<String>,
    #[serde(default)]
    expansions: BTreeMap<String, String>,
    #[serde(default)]
    classes: Vec<DrugClass>,
}

/// A skill file that does not validate: the file, the field and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct SkillError {
    pub file: String,
    /// The front-matter field at fault, or `front matter` / `body` / `file`.
    pub field: String,
    pub message: String,
}

fn err(file: &str, field: &str, message: impl Into<String>) -> SkillError {
    SkillError { file: file.to_string(), field: field.to_string(), message: message.into() }
}

/// Parses one skill file. `origin` names it in errors.
pub fn parse_skill(origin: &str, text: &str) -> Result<Skill, SkillError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text.strip_prefix("---\n") else {
        return Err(err(origin, "front matter", "the file must start with a line `---`, the front matter, and `---`"));
    };
    let Some(end) = rest.find("\n---\n").or_else(|| rest.strip_suffix("\n---").map(|r| r.len())) else {
        return Err(err(origin, "front matter", "no closing `---` line after the front matter"));
    };
    let (yaml, body) = (&rest[..end], rest[end..].trim_start_matches("\n---").trim());
    let front: FrontMatter = serde_yaml::from_str(yaml).map_err(|e| {
        let message = e.to_string();
        // "unknown field `x`" names x; a path ("classes[0]: ...") its
        // field; otherwise the first field named.
        const FIELDS: [&str; 9] =
            ["id", "category", "summary", "keywords", "policies", "answers", "evidence_order", "expansions", "classes"];
        let at_path = message.split(['[', '.', ':']).next().filter(|f| FIELDS.contains(f));
        let field = match message.strip_prefix("unknown field `").and_then(|r| r.split('`').next()) {
            Some(unknown) => unknown.to_string(),
            None => at_path
                .or_else(|| FIELDS.into_iter().find(|f| message.contains(&format!("`{f}`"))))
                .unwrap_or("front matter")
                .to_string(),
        };
        err(
            origin,
            &field,
            format!(
                "{message}; fields are id, category, summary, keywords, policies, answers, evidence_order, \
                 expansions and classes"
            ),
        )
    })?;
    let id = front
        .id
        .ok_or_else(|| err(origin, "id", "missing; give the skill a lower-case id such as `first-occurrence`"))?;
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        return Err(err(origin, "id", format!("{id:?} is not an id; use lower-case letters, digits and '-'")));
    }
    let category =
        front.category.ok_or_else(|| err(origin, "category", "missing; use workflow, parsing, style or policy"))?;
    let category = match category.as_str() {
        "workflow" => SkillCategory::Workflow,
        "parsing" => SkillCategory::Parsing,
        "style" => SkillCategory::Style,
        "policy" => SkillCategory::Policy,
        other => {
            return Err(err(
                origin,
                "category",
                format!("{other:?} is not a category; use workflow, parsing, style or policy"),
            ))
        }
    };
    let summary = front.summary.unwrap_or_default().trim().to_string();
    if summary.is_empty() {
        return Err(err(origin, "summary", "missing or empty; one sentence saying when the skill applies"));
    }
    if summary.len() > 300 {
        return Err(err(
            origin,
            "summary",
            format!("{} characters; keep it under 300 (the model reads every summary)", summary.len()),
        ));
    }
    let keywords = front
        .keywords
        .ok_or_else(|| err(origin, "keywords", "missing; list trigger words, or [] for none"))?
        .into_iter()
        .map(|k| k.trim().to_lowercase())
        .collect::<Vec<_>>();
    if let Some(i) = keywords.iter().position(|k| k.is_empty()) {
        return Err(err(origin, "keywords", format!("entry {} is empty", i + 1)));
    }
    if body.is_empty() {
        return Err(err(origin, "body", "the skill has no instructions after the front matter"));
    }
    if !front.answers.is_empty() && category != SkillCategory::Style {
        return Err(err(origin, "answers", "only a style skill may list answers; remove the field"));
    }
    let evidence_order = match front.evidence_order.as_deref() {
        None => None,
        Some(_) if category != SkillCategory::Workflow => {
            return Err(err(origin, "evidence_order", "only a workflow skill may set it; remove the field"))
        }
        Some("earliest") => Some(EvidenceOrder::Earliest),
        Some("most_recent") => Some(EvidenceOrder::MostRecent),
        Some(other) => {
            return Err(err(
                origin,
                "evidence_order",
                format!("{other:?} is not an order; use earliest or most_recent"),
            ))
        }
    };
    if !front.expansions.is_empty() && category != SkillCategory::Parsing {
        return Err(err(origin, "expansions", "only a parsing skill may list expansions; remove the field"));
    }
    for (word, expansion) in &front.expansions {
        if word.is_empty() || !word.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
            return Err(err(
                origin,
                "expansions",
                format!("{word:?} is not a word; a key is one lower-case word of letters and digits"),
            ));
        }
        if expansion.trim().is_empty() {
            return Err(err(
                origin,
                "expansions",
                format!("{word:?} has an empty expansion; give the words it stands for"),
            ));
        }
    }
    if !front.classes.is_empty() && category != SkillCategory::Parsing {
        return Err(err(origin, "classes", "only a parsing skill may list drug classes; remove the field"));
    }
    let lower_words = |text: &str, joiners: &[char]| {
        !text.is_empty()
            && text.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || joiners.contains(&c))
            && text.starts_with(|c: char| c.is_ascii_alphanumeric())
    };
    for (i, class) in front.classes.iter().enumerate() {
        let at = |what: String| err(origin, "classes", format!("class {}: {what}", i + 1));
        if class.names.is_empty() || class.substances.is_empty() {
            return Err(at("give its names and its substances, each a non-empty list".into()));
        }
        if let Some(name) = class.names.iter().find(|n| !lower_words(n, &[' ', '-'])) {
            return Err(at(format!("name {name:?} is not lower-case words (letters, digits, spaces, hyphens)")));
        }
        if let Some(substance) = class.substances.iter().find(|n| !lower_words(n, &[])) {
            return Err(at(format!("substance {substance:?} is not one lower-case word of letters and digits")));
        }
    }
    for (i, a) in front.answers.iter().enumerate() {
        if !YES_NO_ANSWERS.contains(&a.as_str()) {
            return Err(err(
                origin,
                "answers",
                format!("entry {} {a:?} is not a yes/no answer; use some of {}", i + 1, YES_NO_ANSWERS.join(", ")),
            ));
        }
        if front.answers[..i].contains(a) {
            return Err(err(origin, "answers", format!("entry {} {a:?} is listed twice", i + 1)));
        }
    }
    Ok(Skill {
        id,
        category,
        summary,
        keywords,
        policies: front.policies,
        answers: front.answers,
        evidence_order,
        expansions: front.expansions.into_iter().map(|(w, e)| (w, e.trim().to_lowercase())).collect(),
        classes: front.classes,
        body: body.to_string(),
        origin: origin.to_string(),
    })
}

/// The lower-case words of `text` (split at anything not a letter or digit).
pub(crate) fn words_of(text: &str) -> Vec<String> {
    text.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(String::from).collect()
}

/// Whether `words` holds `run` as consecutive words.
fn holds_run(words: &[String], run: &[String]) -> bool {
    !run.is_empty() && words.windows(run.len()).any(|w| w == run)
}

/// The skills, by id, validated as a whole: ids unique, every `policies`
/// entry names a policy skill, the base style skill present.
#[derive(Debug, Clone)]
pub struct SkillLibrary {
    skills: BTreeMap<String, Skill>,
}

impl SkillLibrary {
    /// The built-in library.
    pub fn builtin() -> Result<SkillLibrary, SkillError> {
        SkillLibrary::from_files(BUILTIN_SKILLS.iter().map(|(n, t)| (format!("builtin:{n}"), t.to_string())))
    }

    /// The built-in library plus every `*.md` file in `dir` (sorted by
    /// name). A user skill may not reuse a built-in id.
    pub fn with_user_dir(dir: &Path) -> Result<SkillLibrary, SkillError> {
        let shown = dir.display().to_string();
        let entries =
            std::fs::read_dir(dir).map_err(|e| err(&shown, "file", format!("cannot read the skills folder: {e}")))?;
        let mut paths: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        paths.sort();
        if paths.is_empty() {
            return Err(err(&shown, "file", "the skills folder holds no *.md skill files"));
        }
        let mut files: Vec<(String, String)> =
            BUILTIN_SKILLS.iter().map(|(n, t)| (format!("builtin:{n}"), t.to_string())).collect();
        for path in paths {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(&path).map_err(|e| err(&name, "file", format!("cannot read: {e}")))?;
            files.push((name, text));
        }
        SkillLibrary::from_files(files)
    }

    fn from_files(files: impl IntoIterator<Item = (String, String)>) -> Result<SkillLibrary, SkillError> {
        let mut skills: BTreeMap<String, Skill> = BTreeMap::new();
        for (origin, text) in files {
            let skill = parse_skill(&origin, &text)?;
            if let Some(first) = skills.get(&skill.id) {
                return Err(err(
                    &origin,
                    "id",
                    format!("{:?} is already the id of {}; choose another id", skill.id, first.origin),
                ));
            }
            skills.insert(skill.id.clone(), skill);
        }
        for skill in skills.values() {
            for policy in &skill.policies {
                match skills.get(policy) {
                    Some(p) if p.category == SkillCategory::Policy => {}
                    Some(_) => return Err(err(&skill.origin, "policies", format!("{policy:?} is not a policy skill"))),
                    None => return Err(err(&skill.origin, "policies", format!("no skill has the id {policy:?}"))),
                }
            }
        }
        if !skills.contains_key(BASE_STYLE) {
            return Err(err("skill library", "id", format!("the base style skill {BASE_STYLE:?} is missing")));
        }
        Ok(SkillLibrary { skills })
    }

    pub fn get(&self, id: &str) -> Option<&Skill> {
        self.skills.get(id)
    }

    pub fn all(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values()
    }

    pub fn len(&self) -> usize {
        self.skills.len()
    }

    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// Skills the model may choose (every category but policy), for the
    /// summary prompt.
    pub fn selectable(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values().filter(|s| s.category != SkillCategory::Policy)
    }

    /// The selectable skills in the order Phase I lists them for
    /// `question`: those with more of their trigger keywords in the
    /// question first, then the rest, each group in id order. (Listed in
    /// id order alone, the embedded model chose the first six ids for 10 of
    /// the 12 development questions whatever they asked, so the skills a
    /// question needed, e.g. `mm-staging`, were never chosen.) The model
    /// still chooses; the order only puts the likely ones in reach.
    pub fn selectable_for(&self, question: &str) -> Vec<&Skill> {
        let question = format!(" {} ", question.to_lowercase());
        let mut skills: Vec<(usize, &Skill)> = self
            .selectable()
            .map(|s| (s.keywords.iter().filter(|k| contains_phrase(&question, &k.to_lowercase())).count(), s))
            .collect();
        // Stable: equal counts keep id order.
        skills.sort_by_key(|s| std::cmp::Reverse(s.0));
        skills.into_iter().map(|(_, s)| s).collect()
    }

    /// Phase I's selection from the ids the model chose: unknown ids and
    /// policy ids are dropped (and reported), style skills triggered by the
    /// question's keywords are added, the base style skill always, then the
    /// policies the selected skills name.
    pub fn select(&self, question: &str, chosen: &[String]) -> Selection {
        let question = format!(" {} ", question.to_lowercase());
        let mut ids: BTreeSet<String> = BTreeSet::new();
        let mut ignored = Vec::new();
        for id in chosen {
            match self.skills.get(id.trim()) {
                Some(s) if s.category != SkillCategory::Policy => {
                    ids.insert(s.id.clone());
                }
                _ => ignored.push(id.clone()),
            }
        }
        let mut by_keyword = Vec::new();
        for skill in self.skills.values().filter(|s| s.category == SkillCategory::Style) {
            if !ids.contains(&skill.id) && skill.keywords.iter().any(|k| contains_phrase(&question, k)) {
                ids.insert(skill.id.clone());
                by_keyword.push(skill.id.clone());
            }
        }
        ids.insert(BASE_STYLE.to_string());
        let policies: BTreeSet<String> = ids.iter().flat_map(|id| self.skills[id].policies.iter().cloned()).collect();
        ids.extend(policies.iter().cloned());
        Selection {
            ids: ids.into_iter().collect(),
            by_keyword,
            attached_policies: policies.into_iter().collect(),
            ignored,
        }
    }

    /// The yes/no answers the selected style skills allow the question:
    /// those listed by every selected style skill that the question's own
    /// words trigger and that lists any (in the first one's order); empty
    /// when none does. Keyed on the question, not on the model's choice,
    /// so a style skill the model picked for an unrelated question does
    /// not narrow its answer.
    pub fn style_answers(&self, selection: &Selection, question: &str) -> Vec<String> {
        let mut answers: Option<Vec<String>> = None;
        for skill in self.triggered(selection, question) {
            if skill.category != SkillCategory::Style || skill.answers.is_empty() {
                continue;
            }
            answers = Some(match answers {
                None => skill.answers.clone(),
                Some(so_far) => so_far.into_iter().filter(|a| skill.answers.contains(a)).collect(),
            });
        }
        answers.unwrap_or_default()
    }

    /// `query` with the substances of each drug class it names (by the
    /// class's longest name that it holds) and the expansions the
    /// library's parsing skills list for its words appended (each once,
    /// and not when the query already holds all of them), and the names
    /// and words expanded; `None` when none is.
    pub fn expand_query(&self, query: &str) -> Option<(String, Vec<String>)> {
        let mut words = words_of(query);
        let mut expanded_query = query.trim().to_string();
        let mut expanded = Vec::new();
        // A drug class the query names (its longest name) gains its substances.
        let named: Vec<(String, &DrugClass)> = self
            .classes()
            .filter_map(|class| {
                let name = class.names.iter().filter(|n| holds_run(&words, &words_of(n))).max_by_key(|n| n.len())?;
                Some((name.clone(), class))
            })
            .collect();
        for (name, class) in named {
            let new: Vec<&String> = class.substances.iter().filter(|s| !words.contains(s)).collect();
            if new.is_empty() {
                continue;
            }
            expanded_query =
                format!("{expanded_query} {}", new.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "));
            words.extend(new.into_iter().cloned());
            expanded.push(name);
        }
        for word in words.clone() {
            for skill in self.skills.values().filter(|s| s.category == SkillCategory::Parsing) {
                let Some(expansion) = skill.expansions.get(&word) else { continue };
                let new: Vec<&str> = expansion.split_whitespace().filter(|w| !words.iter().any(|q| q == w)).collect();
                if new.is_empty() || expanded.contains(&word) {
                    continue;
                }
                expanded_query = format!("{expanded_query} {}", new.join(" "));
                words.extend(new.iter().map(|w| w.to_string()));
                expanded.push(word.clone());
            }
        }
        (!expanded.is_empty()).then_some((expanded_query, expanded))
    }

    /// The drug classes of the library's parsing skills.
    pub fn classes(&self) -> impl Iterator<Item = &DrugClass> {
        self.skills.values().filter(|s| s.category == SkillCategory::Parsing).flat_map(|s| &s.classes)
    }

    /// The drug classes a subject names when its words (a question's
    /// subject words; hyphenated words are split) are, in order, names of
    /// classes and nothing else ("statin"; "oral anticoagulant heparin",
    /// the "or" gone); each name the longest that fits. `None` when a word
    /// is left over ("statin therapy") or there are no words.
    pub fn classes_named(&self, subject: &[String]) -> Option<Vec<&DrugClass>> {
        let words: Vec<String> = subject.iter().flat_map(|w| words_of(w)).collect();
        let names: Vec<(Vec<String>, &DrugClass)> =
            self.classes().flat_map(|c| c.names.iter().map(move |n| (words_of(n), c))).collect();
        let mut named = Vec::new();
        let mut at = 0;
        while at < words.len() {
            let (name, class) =
                names.iter().filter(|(name, _)| words[at..].starts_with(name)).max_by_key(|(name, _)| name.len())?;
            named.push(*class);
            at += name.len();
        }
        (!named.is_empty()).then_some(named)
    }

    /// The expansions the library's parsing skills list for one word
    /// ("anaemia" -> "anemia", "ckd" -> "chronic kidney disease"), each as
    /// its words.
    pub fn expansions_of(&self, word: &str) -> Vec<Vec<String>> {
        let word = word.to_lowercase();
        self.skills
            .values()
            .filter(|s| s.category == SkillCategory::Parsing)
            .filter_map(|s| s.expansions.get(&word))
            .map(|e| e.split_whitespace().map(String::from).collect())
            .collect()
    }

    /// The order the policy engine ranks evidence in: that of a selected
    /// workflow skill which sets one and which the question's own words
    /// trigger (`earliest` wins over `most_recent`); else most recent.
    pub fn evidence_order(&self, selection: &Selection, question: &str) -> EvidenceOrder {
        let orders: Vec<EvidenceOrder> = self.triggered(selection, question).filter_map(|s| s.evidence_order).collect();
        if orders.contains(&EvidenceOrder::Earliest) {
            EvidenceOrder::Earliest
        } else {
            EvidenceOrder::MostRecent
        }
    }

    /// The selected skills that one of the question's own words triggers
    /// (a trigger keyword occurs in it as a phrase), in id order.
    fn triggered<'a>(&'a self, selection: &'a Selection, question: &str) -> impl Iterator<Item = &'a Skill> + 'a {
        let question = format!(" {} ", question.to_lowercase());
        selection
            .ids
            .iter()
            .filter_map(|id| self.skills.get(id))
            .filter(move |s| s.keywords.iter().any(|k| contains_phrase(&question, k)))
    }

    /// Whether the question's own words trigger the skill `id` (one of its
    /// keywords occurs in the question as a phrase), selected or not.
    pub fn triggers(&self, id: &str, question: &str) -> bool {
        let question = format!(" {} ", question.to_lowercase());
        self.skills.get(id).is_some_and(|s| s.keywords.iter().any(|k| contains_phrase(&question, &k.to_lowercase())))
    }

    /// Every skill: the "unfiltered" ablation.
    pub fn select_all(&self) -> Selection {
        Selection {
            ids: self.skills.keys().cloned().collect(),
            by_keyword: Vec::new(),
            attached_policies: Vec::new(),
            ignored: Vec::new(),
        }
    }

    /// The instructions of the selected skills of the given categories, in
    /// id order, each under its id.
    pub fn render(&self, selection: &Selection, categories: &[SkillCategory]) -> String {
        self.render_fitted(selection, categories, &BTreeSet::new())
    }

    /// As [`SkillLibrary::render`], but the skills in `summarised` show
    /// their one-line summary instead of their instructions (how a prompt
    /// too long for the model's context is shortened).
    pub fn render_fitted(
        &self,
        selection: &Selection,
        categories: &[SkillCategory],
        summarised: &BTreeSet<String>,
    ) -> String {
        let mut out = String::new();
        for id in &selection.ids {
            let Some(skill) = self.skills.get(id) else { continue };
            if categories.contains(&skill.category) {
                if summarised.contains(id) {
                    out.push_str(&format!(
                        "### {} ({:?}, summary only)\n{}\n\n",
                        skill.id, skill.category, skill.summary
                    ));
                } else {
                    out.push_str(&format!("### {} ({:?})\n{}\n\n", skill.id, skill.category, skill.body));
                }
            }
        }
        out.trim_end().to_string()
    }

    /// The selected skills of the given categories from the highest
    /// priority to the lowest: first those the model chose (in its order),
    /// then the rest with more of their trigger keywords in the question
    /// first, then by id. A prompt too long for the model's context shows
    /// the lowest-priority ones by their summaries first.
    pub fn by_priority(
        &self,
        selection: &Selection,
        categories: &[SkillCategory],
        question: &str,
        chosen: &[String],
    ) -> Vec<String> {
        let question = format!(" {} ", question.to_lowercase());
        let mut ids: Vec<(usize, std::cmp::Reverse<usize>, &String)> = selection
            .ids
            .iter()
            .filter(|id| self.skills.get(*id).is_some_and(|s| categories.contains(&s.category)))
            .map(|id| {
                let rank = chosen.iter().position(|c| c.trim() == id).unwrap_or(usize::MAX);
                let hits =
                    self.skills[id].keywords.iter().filter(|k| contains_phrase(&question, &k.to_lowercase())).count();
                (rank, std::cmp::Reverse(hits), id)
            })
            .collect();
        ids.sort();
        ids.into_iter().map(|(_, _, id)| id.clone()).collect()
    }
}

/// Whether `phrase` occurs in `text` (both lower case; `text` padded with
/// spaces) at word boundaries.
fn contains_phrase(text: &str, phrase: &str) -> bool {
    let bytes = text.as_bytes();
    text.match_indices(phrase).any(|(i, _)| {
        let before = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        let after = bytes.get(i + phrase.len()).is_none_or(|b| !b.is_ascii_alphanumeric());
        before && after
    })
}

/// The skills a question runs with.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Selection {
    /// Every selected id (model-chosen, keyword-triggered, base style,
    /// attached policies), sorted.
    pub ids: Vec<String>,
    /// Style skills added by the keyword fallback.
    pub by_keyword: Vec<String>,
    /// Policy skills attached from the selected skills.
    pub attached_policies: Vec<String>,
    /// Ids the model chose that are unknown or not selectable.
    pub ignored: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_library_validates() {
        let lib = SkillLibrary::builtin().unwrap();
        assert_eq!(lib.len(), BUILTIN_SKILLS.len());
        for category in [SkillCategory::Workflow, SkillCategory::Parsing, SkillCategory::Style, SkillCategory::Policy] {
            assert!(lib.all().any(|s| s.category == category), "{category:?}");
        }
    }

    /// A style skill's `answers` narrow a yes/no answer only for a question
    /// whose own words trigger it, and only a style skill may list them.
    #[test]
    fn a_query_gains_the_expansions_of_its_words_once() {
        let lib = SkillLibrary::builtin().unwrap();
        let (query, words) = lib.expand_query("last BMI before 2020").unwrap();
        assert_eq!(query, "last BMI before 2020 body mass index");
        assert_eq!(words, ["bmi"]);
        assert_eq!(lib.expand_query("anaemia").unwrap().0, "anaemia anemia");
        // Nothing new to add: the words are there already, or none is known.
        assert_eq!(lib.expand_query("bmi body mass index"), None);
        assert_eq!(lib.expand_query("colonoscopy"), None);
        assert_eq!(lib.expansions_of("Anaemia"), [["anemia"]]);
        assert_eq!(lib.expansions_of("ckd"), [["chronic", "kidney", "disease"]]);
        assert!(lib.expansions_of("colonoscopy").is_empty());
        let (query, _) = lib.expand_query("HbA1c and A1c").unwrap();
        assert_eq!(query, "HbA1c and A1c hemoglobin", "words the query holds are not added again");
        // A drug class gains its substances: records name the substance.
        let (query, words) = lib.expand_query("penicillin-class antibiotic").unwrap();
        assert!(query.starts_with("penicillin-class antibiotic amoxicillin ampicillin"), "{query}");
        assert_eq!(words, ["penicillin-class antibiotic"]);
        let (query, words) = lib.expand_query("statins").unwrap();
        assert_eq!(
            query,
            "statins atorvastatin simvastatin rosuvastatin pravastatin lovastatin fluvastatin pitavastatin"
        );
        assert_eq!(words, ["statins"]);
    }

    #[test]
    fn a_subject_names_drug_classes_only_when_class_names_are_all_its_words() {
        let lib = SkillLibrary::builtin().unwrap();
        let words = |text: &str| text.split_whitespace().map(String::from).collect::<Vec<_>>();
        let named = |text: &str| {
            lib.classes_named(&words(text))
                .map(|classes| classes.iter().map(|c| c.names[0].clone()).collect::<Vec<_>>())
        };
        assert_eq!(named("statin").unwrap(), ["statin"]);
        assert_eq!(named("oral anticoagulant heparin").unwrap(), ["oral anticoagulant", "heparin"]);
        assert_eq!(named("opioid analgesic").unwrap(), ["opioid"]);
        assert_eq!(named("penicillin-class antibiotic").unwrap(), ["penicillin"]);
        assert_eq!(named("statin therapy"), None);
        assert_eq!(named(""), None);
    }

    #[test]
    fn drug_classes_are_for_parsing_skills_with_names_and_substances() {
        let skill = |category: &str, classes: &str| {
            parse_skill(
                "x.md",
                &format!(
                    "---\nid: x\ncategory: {category}\nsummary: s\nkeywords: []\nclasses: {classes}\n---\nBody.\n"
                ),
            )
        };
        let ok = skill("parsing", "[{names: [statin], substances: [simvastatin]}]").unwrap();
        assert_eq!(ok.classes[0].substances, ["simvastatin"]);
        assert_eq!(skill("style", "[{names: [statin], substances: [simvastatin]}]").unwrap_err().field, "classes");
        let no_substances = skill("parsing", "[{names: [statin], substances: []}]").unwrap_err();
        assert!(no_substances.message.contains("class 1"), "{no_substances}");
        let two_words = skill("parsing", "[{names: [statin], substances: [simvastatin 20]}]").unwrap_err();
        assert!(two_words.message.contains("one lower-case word"), "{two_words}");
        assert!(skill("parsing", "[{names: [Statin], substances: [simvastatin]}]")
            .unwrap_err()
            .message
            .contains("lower-case"));
        assert_eq!(skill("parsing", "[{name: [statin]}]").unwrap_err().field, "classes");
    }

    #[test]
    fn expansions_are_for_parsing_skills_and_name_one_word() {
        let skill = |category: &str, expansions: &str| {
            parse_skill(
                "x.md",
                &format!("---\nid: x\ncategory: {category}\nsummary: s\nkeywords: []\nexpansions: {expansions}\n---\nBody.\n"),
            )
        };
        assert_eq!(skill("parsing", "{bmi: Body Mass Index}").unwrap().expansions["bmi"], "body mass index");
        assert_eq!(skill("style", "{bmi: body mass index}").unwrap_err().field, "expansions");
        assert!(skill("parsing", "{\"chest x\": radiograph}").unwrap_err().message.contains("one lower-case word"));
        assert!(skill("parsing", "{bmi: \" \"}").unwrap_err().message.contains("empty expansion"));
    }

    #[test]
    fn style_answers_come_from_the_style_skills_the_question_triggers() {
        let lib = SkillLibrary::builtin().unwrap();
        let eligibility = "Does the patient meet the statin criteria, that is, age 40-75 with documented diabetes?";
        let selection = lib.select(eligibility, &[]);
        assert!(selection.ids.contains(&"style-eligibility".to_string()), "{selection:?}");
        assert_eq!(lib.style_answers(&selection, eligibility), ["Yes", "No", "Unclear"]);
        // The model chose every style skill for an unrelated question: no narrowing.
        let other = "Has the patient ever been prescribed an opioid?";
        let all: Vec<String> = lib.all().filter(|s| s.category == SkillCategory::Style).map(|s| s.id.clone()).collect();
        assert!(lib.style_answers(&lib.select(other, &all), other).is_empty());
        // Only style skills, only yes/no answers, each once.
        let file = |category: &str, answers: &str| {
            format!("---\nid: x\ncategory: {category}\nsummary: s\nkeywords: []\nanswers: {answers}\n---\nDo it.\n")
        };
        check_error(&file("workflow", "[\"Yes\"]"), "answers", "only a style skill");
        check_error(&file("style", "[\"Yes\", \"Maybe\"]"), "answers", "entry 2 \"Maybe\" is not a yes/no answer");
        check_error(&file("style", "[\"No\", \"No\"]"), "answers", "listed twice");
        assert_eq!(parse_skill("x.md", &file("style", "[\"Yes\", \"No\"]")).unwrap().answers, ["Yes", "No"]);
    }

    /// A first-occurrence question, whose words trigger the selected
    /// `first-occurrence` skill, is ranked earliest first; the same skill
    /// chosen for a question about today is not.
    #[test]
    fn the_evidence_order_comes_from_a_triggered_workflow_skill() {
        let lib = SkillLibrary::builtin().unwrap();
        let first = "When was Escherichia coli urinary tract infection first documented?";
        let chosen = ["first-occurrence".to_string()];
        assert_eq!(lib.evidence_order(&lib.select(first, &chosen), first), EvidenceOrder::Earliest);
        assert_eq!(lib.evidence_order(&lib.select(first, &[]), first), EvidenceOrder::MostRecent, "not selected");
        let today = "Is the patient receiving metformin on 2020-10-01?";
        assert_eq!(lib.evidence_order(&lib.select(today, &chosen), today), EvidenceOrder::MostRecent);
        let file = |category: &str, order: &str| {
            format!(
                "---\nid: x\ncategory: {category}\nsummary: s\nkeywords: []\nevidence_order: {order}\n---\nDo it.\n"
            )
        };
        check_error(&file("style", "earliest"), "evidence_order", "only a workflow skill");
        check_error(&file("workflow", "oldest"), "evidence_order", "\"oldest\" is not an order");
        assert_eq!(
            parse_skill("x.md", &file("workflow", "earliest")).unwrap().evidence_order,
            Some(EvidenceOrder::Earliest)
        );
    }

    #[track_caller]
    fn check_error(text: &str, field: &str, says: &str) {
        let e = parse_skill("x.md", text).unwrap_err();
        assert_eq!((e.file.as_str(), e.field.as_str()), ("x.md", field), "{e}");
        assert!(e.message.contains(says), "{e}");
    }

    #[test]
    fn bad_skill_files_name_the_field() {
        check_error("no front matter", "front matter", "start with");
        check_error("---\nid: a\n", "front matter", "closing");
        check_error("---\ncategory: style\nsummary: s\nkeywords: []\n---\nbody", "id", "missing");
        check_error("---\nid: Bad Id\ncategory: style\nsummary: s\nkeywords: []\n---\nbody", "id", "not an id");
        check_error("---\nid: a\ncategory: knowledge\nsummary: s\nkeywords: []\n---\nbody", "category", "knowledge");
        check_error("---\nid: a\ncategory: style\nsummary: ''\nkeywords: []\n---\nbody", "summary", "empty");
        check_error("---\nid: a\ncategory: style\nsummary: s\n---\nbody", "keywords", "missing");
        check_error("---\nid: a\ncategory: style\nsummary: s\nkeywords: []\n---\n", "body", "no instructions");
        check_error(
            "---\nid: a\ncategory: style\nsummary: s\nkeywords: []\ntrigger: x\n---\nb",
            "trigger",
            "unknown field",
        );
        check_error("---\nid: a\ncategory: style\nsummary: s\nkeywords: 3\n---\nb", "keywords", "expected a sequence");
    }

    #[test]
    fn a_user_folder_adds_skills_and_may_not_reuse_ids() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("renal.md"),
            "---\nid: renal-dosing\ncategory: workflow\nsummary: Renal dose adjustment.\nkeywords: [renal]\npolicies: [temporal-authority]\n---\nCheck eGFR.\n",
        )
        .unwrap();
        let lib = SkillLibrary::with_user_dir(dir.path()).unwrap();
        assert_eq!(lib.len(), BUILTIN_SKILLS.len() + 1);
        assert!(lib.get("renal-dosing").is_some());

        std::fs::write(
            dir.path().join("z.md"),
            "---\nid: style-base\ncategory: style\nsummary: s\nkeywords: []\n---\nb\n",
        )
        .unwrap();
        let e = SkillLibrary::with_user_dir(dir.path()).unwrap_err();
        assert!(e.file.ends_with("z.md") && e.field == "id", "{e}");

        std::fs::remove_file(dir.path().join("z.md")).unwrap();
        std::fs::write(
            dir.path().join("y.md"),
            "---\nid: y\ncategory: workflow\nsummary: s\nkeywords: []\npolicies: [nope]\n---\nb\n",
        )
        .unwrap();
        let e = SkillLibrary::with_user_dir(dir.path()).unwrap_err();
        assert!(e.file.ends_with("y.md") && e.field == "policies" && e.message.contains("nope"), "{e}");
    }

    #[test]
    fn selection_adds_keyword_styles_the_base_style_and_attached_policies() {
        let lib = SkillLibrary::builtin().unwrap();
        let chosen = vec!["current-medication-status".to_string(), "temporal-authority".into(), "made-up".into()];
        let s = lib.select("Is the patient currently receiving metformin?", &chosen);
        assert!(s.ids.contains(&"current-medication-status".to_string()));
        assert!(s.ids.contains(&BASE_STYLE.to_string()));
        assert_eq!(s.by_keyword, vec!["style-current-status".to_string()]);
        // Policies come from the selected skills, not from the model's choice.
        assert_eq!(s.attached_policies, vec!["administered-over-planned".to_string(), "temporal-authority".into()]);
        assert_eq!(s.ignored, vec!["temporal-authority".to_string(), "made-up".into()]);

        let s = lib.select("Is the patient eligible for ASCT?", &[]);
        assert!(s.by_keyword.contains(&"style-eligibility".to_string()), "{s:?}");
        // "eligible" must not fire on a word that only contains it.
        let s = lib.select("Ineligible? noncurrent", &[]);
        assert!(s.by_keyword.is_empty(), "{s:?}");
    }

    #[test]
    fn rendering_splits_workflow_from_style() {
        let lib = SkillLibrary::builtin().unwrap();
        let s = lib.select("Has the patient received dialysis?", &["procedure-imaging-documentation".to_string()]);
        let workflow = lib.render(&s, &[SkillCategory::Workflow, SkillCategory::Parsing, SkillCategory::Policy]);
        let style = lib.render(&s, &[SkillCategory::Style]);
        assert!(workflow.contains("### procedure-imaging-documentation") && !workflow.contains("### style-base"));
        assert!(style.contains("### style-base") && !style.contains("procedure-imaging"));
    }
}
