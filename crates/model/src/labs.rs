//! The lab-concept catalogue: canonical concepts with stable ids and an alias
//! index from observed names and LOINC codes, loaded from a validated data
//! file (`data/lab_concepts.json`).
//!
//! As in the myeloma pipeline, names are compared in a normalised form (case
//! folded, umlauts and ß transliterated, punctuation and special characters
//! removed, whitespace collapsed) and a concept's id is the first 16 hex
//! digits of the SHA-256 of its normalised canonical name, so ids survive
//! re-ordering and re-generation of the data file. Units and reference
//! ranges are deliberately absent: they stay as the source gave them.
//!
//! MIMIC-IV labels are ambiguous across fluids ("Glucose" is measured in
//! Blood and in Urine), so the data file holds them as `"label|fluid"`
//! aliases; use [`LabCatalogue::resolve_mimic`] for MIMIC rows. Bare labels
//! of Blood items are aliases too, so free text "Glucose" means blood glucose.

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The catalogue shipped with Evident, embedded at compile time.
const BUILTIN_JSON: &str = include_str!("../data/lab_concepts.json");

/// A canonical lab concept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabConcept {
    /// `concept_id(name)`: stable across catalogue versions as long as the
    /// canonical name keeps its normalised form.
    pub id: String,
    pub name: String,
    /// Names that resolve to this concept, as written in the data file.
    pub aliases: Vec<String>,
    /// LOINC codes that resolve to this concept.
    pub loinc: Vec<String>,
    pub category: Option<String>,
}

/// One thing wrong with a catalogue file. Each names the concept or alias
/// and what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogueProblem {
    #[error(
        "concepts[{index}]: name {name:?} is empty after normalisation; give the concept a name with letters or digits"
    )]
    EmptyName { index: usize, name: String },
    #[error(
        "concept {name:?} has the same normalised name {normalised:?} as concept {other:?}; merge them or rename one"
    )]
    DuplicateConcept { name: String, other: String, normalised: String },
    #[error("concept {concept:?}: alias {alias:?} is empty after normalisation; remove it")]
    EmptyAlias { concept: String, alias: String },
    #[error("alias {alias:?} (normalised {normalised:?}) maps to both {first:?} and {second:?}; keep it on one concept only")]
    AliasConflict { alias: String, normalised: String, first: String, second: String },
    #[error("concept {concept:?}: LOINC code {code:?} is malformed: {reason}")]
    MalformedLoinc { concept: String, code: String, reason: String },
    #[error("LOINC code {code} maps to both {first:?} and {second:?}; keep it on one concept only")]
    LoincConflict { code: String, first: String, second: String },
    #[error("aliases[{index}]: alias {alias:?} names concept {concept:?}, which is not in the catalogue; add the concept or fix the name")]
    UnknownConcept { index: usize, alias: String, concept: String },
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogueError {
    #[error("lab catalogue is not valid catalogue JSON: {0}; fix the file (see crates/model/data/lab_concepts.json for the format)")]
    Json(#[from] serde_json::Error),
    #[error("lab catalogue has {} problem(s):\n  {}", .0.len(), .0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n  "))]
    Invalid(Vec<CatalogueProblem>),
}

/// The data file's shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    #[serde(default)]
    #[allow(dead_code)]
    about: Option<String>,
    #[allow(dead_code)]
    version: u32,
    concepts: Vec<ConceptEntry>,
    /// Extra alias entries that point at a concept by its canonical name.
    #[serde(default)]
    aliases: Vec<AliasEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConceptEntry {
    name: String,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    loinc: Vec<String>,
    #[serde(default)]
    aliases: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AliasEntry {
    alias: String,
    concept: String,
}

/// Canonical lab concepts and the indexes that resolve names and LOINC
/// codes to them.
#[derive(Debug, Clone)]
pub struct LabCatalogue {
    concepts: Vec<LabConcept>,
    /// Normalised name or alias -> concept index.
    by_name: HashMap<String, usize>,
    /// Normalised name with spaces removed ("hb a1c" and "hba1c" meet);
    /// keys shared by two concepts are left out as ambiguous.
    by_compact: HashMap<String, usize>,
    by_loinc: HashMap<String, usize>,
    /// Search terms, pre-computed for `find`: the tokens of every
    /// normalised name and alias (and, as one token, its compact form),
    /// with the concept it belongs to.
    terms: Vec<(Vec<String>, usize)>,
}

impl LabCatalogue {
    /// The catalogue shipped in `data/lab_concepts.json`, parsed and
    /// validated once.
    ///
    /// # Panics
    /// If the embedded file is invalid; the crate's tests load it, so a bad
    /// file never ships.
    pub fn builtin() -> &'static LabCatalogue {
        static BUILTIN: OnceLock<LabCatalogue> = OnceLock::new();
        BUILTIN.get_or_init(|| {
            LabCatalogue::from_json(BUILTIN_JSON)
                .unwrap_or_else(|e| panic!("the built-in lab catalogue data/lab_concepts.json is invalid: {e}"))
        })
    }

    /// Parses and validates a catalogue, reporting every problem found.
    pub fn from_json(json: &str) -> Result<LabCatalogue, CatalogueError> {
        let file: CatalogueFile = serde_json::from_str(json)?;
        let mut problems = Vec::new();
        let mut concepts: Vec<LabConcept> = Vec::with_capacity(file.concepts.len());
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut by_loinc: HashMap<String, usize> = HashMap::new();

        // Canonical names first, so an alias that repeats another concept's
        // name reports as a conflict with that concept.
        let mut entries = Vec::new();
        for (index, entry) in file.concepts.into_iter().enumerate() {
            let normalised = normalise_name(&entry.name);
            if normalised.is_empty() {
                problems.push(CatalogueProblem::EmptyName { index, name: entry.name });
                continue;
            }
            if let Some(&other) = by_name.get(&normalised) {
                problems.push(CatalogueProblem::DuplicateConcept {
                    name: entry.name,
                    other: concepts[other].name.clone(),
                    normalised,
                });
                continue;
            }
            let i = concepts.len();
            by_name.insert(normalised, i);
            concepts.push(LabConcept {
                id: concept_id(&entry.name),
                name: entry.name.trim().to_string(),
                aliases: Vec::new(),
                loinc: Vec::new(),
                category: entry.category.filter(|c| !c.trim().is_empty()),
            });
            entries.push((i, entry.aliases, entry.loinc));
        }

        let mut add_alias =
            |concepts: &mut Vec<LabConcept>, problems: &mut Vec<CatalogueProblem>, i: usize, alias: String| {
                let normalised = normalise_name(&alias);
                if normalised.is_empty() {
                    problems.push(CatalogueProblem::EmptyAlias { concept: concepts[i].name.clone(), alias });
                    return;
                }
                match by_name.get(&normalised) {
                    Some(&j) if j == i => {}
                    Some(&j) => {
                        problems.push(CatalogueProblem::AliasConflict {
                            alias,
                            normalised,
                            first: concepts[j].name.clone(),
                            second: concepts[i].name.clone(),
                        });
                        return;
                    }
                    None => {
                        by_name.insert(normalised, i);
                    }
                }
                if !concepts[i].aliases.contains(&alias) {
                    concepts[i].aliases.push(alias);
                }
            };

        for (i, aliases, loincs) in entries {
            for alias in aliases {
                add_alias(&mut concepts, &mut problems, i, alias);
            }
            for code in loincs {
                let code = code.trim().to_string();
                if let Err(reason) = check_loinc(&code) {
                    problems.push(CatalogueProblem::MalformedLoinc { concept: concepts[i].name.clone(), code, reason });
                    continue;
                }
                match by_loinc.get(&code) {
                    Some(&j) if j == i => {}
                    Some(&j) => problems.push(CatalogueProblem::LoincConflict {
                        code,
                        first: concepts[j].name.clone(),
                        second: concepts[i].name.clone(),
                    }),
                    None => {
                        by_loinc.insert(code.clone(), i);
                        concepts[i].loinc.push(code);
                    }
                }
            }
        }
        let canonical: HashMap<String, usize> =
            concepts.iter().enumerate().map(|(i, c)| (normalise_name(&c.name), i)).collect();
        for (index, entry) in file.aliases.into_iter().enumerate() {
            match canonical.get(&normalise_name(&entry.concept)) {
                Some(&i) => add_alias(&mut concepts, &mut problems, i, entry.alias),
                None => problems.push(CatalogueProblem::UnknownConcept {
                    index,
                    alias: entry.alias,
                    concept: entry.concept,
                }),
            }
        }
        if !problems.is_empty() {
            return Err(CatalogueError::Invalid(problems));
        }

        let mut compact_owners: HashMap<String, BTreeSet<usize>> = HashMap::new();
        for (key, &i) in &by_name {
            compact_owners.entry(key.replace(' ', "")).or_default().insert(i);
        }
        let by_compact = compact_owners
            .into_iter()
            .filter(|(_, owners)| owners.len() == 1)
            .map(|(k, owners)| (k, *owners.iter().next().expect("one owner")))
            .collect();
        let mut terms: Vec<(Vec<String>, usize)> = Vec::with_capacity(by_name.len() * 2);
        for (key, &i) in &by_name {
            terms.push((key.split(' ').map(str::to_string).collect(), i));
            if key.contains(' ') {
                terms.push((vec![key.replace(' ', "")], i));
            }
        }
        // HashMap order is random; `find` must not depend on it.
        terms.sort();
        Ok(LabCatalogue { concepts, by_name, by_compact, by_loinc, terms })
    }

    pub fn concepts(&self) -> &[LabConcept] {
        &self.concepts
    }

    pub fn len(&self) -> usize {
        self.concepts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.concepts.is_empty()
    }

    /// The concept with this id.
    pub fn get(&self, id: &str) -> Option<&LabConcept> {
        self.concepts.iter().find(|c| c.id == id)
    }

    /// Resolves an observed name (canonical name or alias, in any spelling
    /// that normalises the same; "HbA1c" and "Hb A1c" also meet).
    pub fn resolve_name(&self, name: &str) -> Option<&LabConcept> {
        let key = normalise_name(name);
        if key.is_empty() {
            return None;
        }
        self.by_name.get(&key).or_else(|| self.by_compact.get(&key.replace(' ', ""))).map(|&i| &self.concepts[i])
    }

    /// Resolves a LOINC code ("2160-0"; surrounding whitespace ignored).
    pub fn resolve_loinc(&self, code: &str) -> Option<&LabConcept> {
        self.by_loinc.get(code.trim()).map(|&i| &self.concepts[i])
    }

    /// Resolves by LOINC code first, then by name.
    pub fn resolve(&self, name: &str, loinc: Option<&str>) -> Option<&LabConcept> {
        loinc.and_then(|code| self.resolve_loinc(code)).or_else(|| self.resolve_name(name))
    }

    /// Resolves a MIMIC-IV d_labitems entry by its `label|fluid` key. The
    /// bare label is not tried: it may belong to another fluid's analyte.
    pub fn resolve_mimic(&self, label: &str, fluid: &str) -> Option<&LabConcept> {
        self.resolve_name(&format!("{label}|{fluid}"))
    }

    /// Fuzzy search over the pre-computed search terms: concepts with a
    /// name or alias whose tokens match the query's tokens exactly or by
    /// prefix, best first. An exact name or alias match always comes first;
    /// among equal scores, the name or alias with fewer unmatched tokens
    /// wins, then the canonical name in alphabetical order.
    pub fn find(&self, query: &str) -> Vec<&LabConcept> {
        let key = normalise_name(query);
        if key.is_empty() {
            return Vec::new();
        }
        let tokens: Vec<&str> = key.split(' ').collect();
        let exact = self.resolve_name(query).map(|c| c.id.as_str());
        // Best (score, -unmatched) per concept.
        let mut best: HashMap<usize, (u32, i64)> = HashMap::new();
        for (terms, i) in &self.terms {
            let mut score = 0u32;
            let mut used = vec![false; terms.len()];
            for token in &tokens {
                let hit = terms.iter().enumerate().map(|(t, term)| (match_score(token, term), t)).max();
                if let Some((points, t)) = hit.filter(|(points, _)| *points > 0) {
                    score += points;
                    used[t] = true;
                }
            }
            let unmatched = used.iter().filter(|u| !**u).count() as i64;
            let entry = best.entry(*i).or_insert((0, i64::MIN));
            if (score, -unmatched) > *entry {
                *entry = (score, -unmatched);
            }
        }
        let mut scored: Vec<(u32, i64, usize)> = best
            .into_iter()
            .map(|(i, (score, neg_unmatched))| {
                let score = if Some(self.concepts[i].id.as_str()) == exact { u32::MAX } else { score };
                (score, neg_unmatched, i)
            })
            // Keep concepts that match at least half the query, in points.
            .filter(|(score, _, _)| *score > 0 && *score as u64 * 2 >= tokens.len() as u64 * 10)
            .collect();
        scored.sort_by(|a, b| {
            b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(self.concepts[a.2].name.cmp(&self.concepts[b.2].name))
        });
        scored.into_iter().map(|(_, _, i)| &self.concepts[i]).collect()
    }
}

/// Points for one query token against one search term: 10 for equal, 7
/// when the term starts with a token of 3+ characters ("kreat" finds
/// "kreatinin"), 5 when the token starts with a term of 4+ characters
/// (German compounds: "kreatininwert" finds "kreatinin").
fn match_score(token: &str, term: &str) -> u32 {
    if token == term {
        10
    } else if token.chars().count() >= 3 && term.starts_with(token) {
        7
    } else if term.chars().count() >= 4 && token.starts_with(term) {
        5
    } else {
        0
    }
}

/// Checks a LOINC code: 1 to 7 digits, a hyphen, and the Mod 10 check digit.
fn check_loinc(code: &str) -> Result<(), String> {
    let Some((body, check)) = code.split_once('-') else {
        return Err("expected digits, a hyphen and a check digit, like 2160-0".to_string());
    };
    if body.is_empty() || body.len() > 7 || !body.bytes().all(|b| b.is_ascii_digit()) {
        return Err("the part before the hyphen must be 1 to 7 digits".to_string());
    }
    if check.len() != 1 || !check.bytes().all(|b| b.is_ascii_digit()) {
        return Err("the part after the hyphen must be one check digit".to_string());
    }
    let expected = loinc_check_digit(body);
    let given = check.as_bytes()[0] - b'0';
    if given != expected {
        return Err(format!(
            "check digit is {given} but the Mod 10 check digit of {body} is {expected}; the code has a typo"
        ));
    }
    Ok(())
}

/// LOINC's Mod 10 check digit: from the right, double every other digit
/// starting with the rightmost, sum the digits of the results and of the
/// remaining digits, and take what brings the sum to a multiple of ten.
fn loinc_check_digit(body: &str) -> u8 {
    let sum: u32 = body
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let d = (b - b'0') as u32;
            if i % 2 == 0 {
                let doubled = d * 2;
                doubled / 10 + doubled % 10
            } else {
                d
            }
        })
        .sum();
    ((10 - sum % 10) % 10) as u8
}

/// Normalises a lab name: case folding, transliteration of umlauts and ß
/// (ä→ae, ö→oe, ü→ue, ß→ss) and of Greek letters used in lab names
/// (β→beta, κ→kappa, λ→lambda), accents dropped, every character that is
/// not a letter or digit treated as a separator, whitespace collapsed.
/// Separators become single spaces rather than vanishing so that
/// "Glucose|Urine" and "Glucose, urine" meet as "glucose urine".
pub fn normalise_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut pending_space = false;
    let push = |s: &str, out: &mut String, pending: &mut bool| {
        if *pending && !out.is_empty() {
            out.push(' ');
        }
        *pending = false;
        out.push_str(s);
    };
    for c in name.chars().flat_map(char::to_lowercase) {
        let mapped: Option<&str> = match c {
            'ä' => Some("ae"),
            'ö' => Some("oe"),
            'ü' => Some("ue"),
            'ß' => Some("ss"),
            'α' => Some("alpha"),
            'β' => Some("beta"),
            'γ' => Some("gamma"),
            'δ' => Some("delta"),
            'κ' => Some("kappa"),
            'λ' => Some("lambda"),
            'µ' | 'μ' => Some("u"),
            'à' | 'á' | 'â' | 'ã' | 'å' => Some("a"),
            'è' | 'é' | 'ê' | 'ë' => Some("e"),
            'ì' | 'í' | 'î' | 'ï' => Some("i"),
            'ò' | 'ó' | 'ô' | 'õ' | 'ø' => Some("o"),
            'ù' | 'ú' | 'û' => Some("u"),
            'ç' => Some("c"),
            'ñ' => Some("n"),
            'æ' => Some("ae"),
            'œ' => Some("oe"),
            _ => None,
        };
        if let Some(s) = mapped {
            push(s, &mut out, &mut pending_space);
        } else if c.is_alphanumeric() {
            let mut buf = [0u8; 4];
            push(c.encode_utf8(&mut buf), &mut out, &mut pending_space);
        } else if matches!(c, '\u{200b}' | '\u{200c}' | '\u{200d}' | '\u{2060}' | '\u{feff}' | '\u{ad}') {
            // Zero-width and soft-hyphen characters vanish (Synthea writes
            // "Mass/\u{200b}volume").
        } else {
            pending_space = true;
        }
    }
    out
}

/// A concept's stable id: the first 16 hex digits of the SHA-256 of its
/// normalised canonical name.
pub fn concept_id(canonical_name: &str) -> String {
    let digest = Sha256::digest(normalise_name(canonical_name).as_bytes());
    hex::encode(&digest[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check_normalise(input: &str, expected: &str) {
        assert_eq!(normalise_name(input), expected, "{input:?}");
    }

    #[test]
    fn normalisation() {
        check_normalise("Hämoglobin", "haemoglobin");
        check_normalise("GRÖßE", "groesse");
        check_normalise("Übelkeit", "uebelkeit");
        check_normalise("crp (c-reakt. pr)", "crp c reakt pr");
        check_normalise("  Calcium,   Total ", "calcium total");
        check_normalise("β2-Mikroglobulin", "beta2 mikroglobulin");
        check_normalise("Glucose|Urine", "glucose urine");
        check_normalise("% Hemoglobin A1c", "hemoglobin a1c");
        check_normalise("Glucose [Mass/\u{200b}volume] in Urine", "glucose mass volume in urine");
        check_normalise("---", "");
        check_normalise("", "");
    }

    #[test]
    fn concept_ids_are_stable_hashes_of_the_normalised_name() {
        assert_eq!(concept_id("Creatinine"), concept_id("  CREATININE. "));
        assert_eq!(concept_id("Creatinine").len(), 16);
        assert_ne!(concept_id("Creatinine"), concept_id("Creatinine, urine"));
        // sha256("creatinine"), first 8 bytes.
        assert_eq!(concept_id("Creatinine"), hex::encode(&Sha256::digest(b"creatinine")[..8]));
    }

    #[test]
    fn loinc_check_digits() {
        for good in ["2160-0", "718-7", "4548-4", "33914-3", "14959-1", "57905-2", "1-8"] {
            assert_eq!(check_loinc(good), Ok(()), "{good}");
        }
        for bad in ["2160-1", "2160", "21a0-0", "-0", "2160-00", "12345678-9", "718-8"] {
            assert!(check_loinc(bad).is_err(), "{bad}");
        }
    }

    fn problems(json: &str) -> Vec<CatalogueProblem> {
        match LabCatalogue::from_json(json) {
            Err(CatalogueError::Invalid(p)) => p,
            other => panic!("expected validation problems, got {other:?}"),
        }
    }

    #[test]
    fn validation_reports_every_problem() {
        let json = r#"{"version": 1, "concepts": [
            {"name": "Creatinine", "loinc": ["2160-0", "2160-1"], "aliases": ["Cr", "Kreatinin"]},
            {"name": "  ..  ", "aliases": []},
            {"name": "CREATININE", "aliases": []},
            {"name": "Calcium", "loinc": ["2160-0"], "aliases": ["cr", "?!"]}
        ], "aliases": [{"alias": "Krea", "concept": "Kreatinin-Wert"}]}"#;
        let got = problems(json);
        assert_eq!(got.len(), 7, "{got:#?}");
        assert!(matches!(&got[0], CatalogueProblem::EmptyName { index: 1, .. }));
        assert!(
            matches!(&got[1], CatalogueProblem::DuplicateConcept { name, other, .. } if name == "CREATININE" && other == "Creatinine")
        );
        assert!(matches!(&got[2], CatalogueProblem::MalformedLoinc { code, .. } if code == "2160-1"));
        assert!(
            matches!(&got[3], CatalogueProblem::AliasConflict { alias, first, second, .. } if alias == "cr" && first == "Creatinine" && second == "Calcium")
        );
        assert!(matches!(&got[4], CatalogueProblem::EmptyAlias { alias, .. } if alias == "?!"));
        assert!(matches!(&got[5], CatalogueProblem::LoincConflict { code, .. } if code == "2160-0"));
        assert!(matches!(&got[6], CatalogueProblem::UnknownConcept { index: 0, .. }));
        let json = r#"{"version": 1, "concepts": [{"name": "Creatinine"}], "aliases": [{"alias": "Krea", "concept": "Kreatinin-Wert"}]}"#;
        let got = problems(json);
        assert!(
            matches!(&got[..], [CatalogueProblem::UnknownConcept { alias, concept, .. }] if alias == "Krea" && concept == "Kreatinin-Wert")
        );
        let message = LabCatalogue::from_json(json).unwrap_err().to_string();
        assert!(message.contains("Kreatinin-Wert") && message.contains("not in the catalogue"), "{message}");
    }

    #[test]
    fn syntax_errors_and_unknown_fields_are_errors() {
        assert!(matches!(LabCatalogue::from_json("{"), Err(CatalogueError::Json(_))));
        assert!(matches!(
            LabCatalogue::from_json(r#"{"version": 1, "concepts": [{"name": "X", "unit": "mg"}]}"#),
            Err(CatalogueError::Json(_))
        ));
    }

    #[test]
    fn small_catalogue_resolves() {
        let cat = LabCatalogue::from_json(
            r#"{"version": 1, "concepts": [
                {"name": "Hemoglobin A1c", "loinc": ["4548-4"], "aliases": ["HbA1c", "Glykohämoglobin"]},
                {"name": "Glucose, urine", "aliases": ["Glucose|Urine"]},
                {"name": "Glucose", "aliases": ["Glucose|Blood"]}
            ], "aliases": [{"alias": "A1c", "concept": "hemoglobin a1c"}]}"#,
        )
        .unwrap();
        let name = |c: Option<&LabConcept>| c.map(|c| c.name.clone());
        assert_eq!(name(cat.resolve_name("Hb A1c")), Some("Hemoglobin A1c".into()));
        assert_eq!(name(cat.resolve_name("GLYKOHAEMOGLOBIN")), Some("Hemoglobin A1c".into()));
        assert_eq!(name(cat.resolve_name("a1c")), Some("Hemoglobin A1c".into()));
        assert_eq!(name(cat.resolve_loinc(" 4548-4 ")), Some("Hemoglobin A1c".into()));
        assert_eq!(name(cat.resolve("Glucose", Some("4548-4"))), Some("Hemoglobin A1c".into()));
        assert_eq!(name(cat.resolve("Glucose", Some("9999-9"))), Some("Glucose".into()));
        assert_eq!(name(cat.resolve_mimic("Glucose", "Urine")), Some("Glucose, urine".into()));
        assert_eq!(name(cat.resolve_mimic("Glucose", "Blood")), Some("Glucose".into()));
        assert_eq!(cat.resolve_mimic("Glucose", "Ascites"), None);
        assert_eq!(cat.resolve_name("sodium"), None);
        assert_eq!(cat.resolve_name(""), None);
    }
}
