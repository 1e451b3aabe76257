//! Lab queries over canonical concepts.

use super::*;

impl RecordView<'_> {
    /// The canonical lab concepts the patient has values for up to the
    /// reference date, by name (what the prompt lists).
    pub fn available_lab_concepts(&self) -> Result<Vec<String>, evident_store::StoreError> {
        let labs = self.lock().labs(&LabQuery { patient_id: self.patient_id.clone(), ..LabQuery::default() })?;
        let catalogue = LabCatalogue::builtin();
        let names: BTreeSet<String> = labs
            .iter()
            .filter(|l| l.time <= self.as_of)
            .filter_map(|l| l.concept_id.as_deref().and_then(|id| catalogue.get(id)).map(|c| c.name.clone()))
            .collect();
        Ok(names.into_iter().collect())
    }

    /// The patient's lab concepts (on or before the reference date) that
    /// the question names by their name or an alias of three characters or
    /// more, as a whole phrase ignoring case ("eGFR", "LDL cholesterol");
    /// a concept named only inside another's longer phrase is not named
    /// ("cholesterol", an alias of total cholesterol, in "LDL cholesterol").
    pub fn lab_concepts_named_in(&self, question: &str) -> Result<Vec<String>, evident_store::StoreError> {
        let lowered = question.to_lowercase();
        let catalogue = LabCatalogue::builtin();
        let named: Vec<(String, Vec<(usize, usize)>)> = self
            .available_lab_concepts()?
            .into_iter()
            .filter_map(|name| {
                let c = catalogue.resolve_name(&name)?;
                let phrases = std::iter::once(&c.name).chain(&c.aliases).filter(|p| p.len() >= 3);
                let spans: Vec<(usize, usize)> =
                    phrases.flat_map(|p| phrase_spans(&lowered, &p.to_lowercase())).collect();
                (!spans.is_empty()).then_some((name, spans))
            })
            .collect();
        let inside_longer = |(s, e): (usize, usize), name: &str| {
            named
                .iter()
                .filter(|(other, _)| other != name)
                .flat_map(|(_, spans)| spans)
                .any(|&(os, oe)| os <= s && e <= oe && oe - os > e - s)
        };
        Ok(named
            .iter()
            .filter(|(name, spans)| !spans.iter().all(|&span| inside_longer(span, name)))
            .map(|(name, _)| name.clone())
            .collect())
    }

    pub(super) fn labs_of(&self, concept_id: &str) -> Result<Vec<LabRecord>, evident_store::StoreError> {
        let labs = self.lock().labs(&LabQuery {
            patient_id: self.patient_id.clone(),
            concept_ids: Some(vec![concept_id.to_string()]),
            since: None,
        })?;
        Ok(labs.into_iter().filter(|l| l.time <= self.as_of).collect())
    }

    pub(super) fn query_labs(&self, a: &LabArgs) -> Result<ToolOutput, ToolFailure> {
        let window = self.window(&TimeArgs {
            scope: a.scope.clone(),
            date: a.date.clone(),
            since: a.since.clone(),
            until: a.until.clone(),
        })?;
        let limit = if window.most_recent { 1 } else { a.limit.unwrap_or(DEFAULT_LAB_LIMIT) };
        let catalogue = LabCatalogue::builtin();
        let mut evidence = Vec::new();
        let mut unknown = Vec::new();
        for name in &a.concepts {
            let Some(concept) = catalogue.resolve_name(name) else {
                unknown.push(name.clone());
                continue;
            };
            let mut values: Vec<LabRecord> = self
                .labs_of(&concept.id)?
                .into_iter()
                .filter(|l| l.time <= window.until && window.since.is_none_or(|s| l.time >= s))
                .collect();
            values.reverse();
            evidence.extend(values.into_iter().take(limit).map(|l| lab_evidence(&concept.name, l)));
        }
        let mut notes = Vec::new();
        if !unknown.is_empty() {
            notes.push(format!("unknown lab concepts {unknown:?}; use names from the patient's list"));
        }
        if evidence.is_empty() {
            notes.push("no values in that scope".to_string());
        }
        Ok(ToolOutput { evidence, note: (!notes.is_empty()).then(|| notes.join("; ")) })
    }

    /// The latest numeric value of a concept within `days` before the
    /// reference date, as lab evidence and its number.
    pub(super) fn latest_lab(&self, concept: &str, days: i64) -> Result<Option<(Evidence, f64)>, ToolFailure> {
        let catalogue = LabCatalogue::builtin();
        let Some(c) = catalogue.resolve_name(concept) else { return Ok(None) };
        let values: Vec<(NaiveDateTime, LabRecord)> =
            self.labs_of(&c.id)?.into_iter().filter(|l| l.value_num.is_some()).map(|l| (l.time, l)).collect();
        Ok(latest_within(&values, self.as_of, days).map(|(_, l)| {
            let v = l.value_num.expect("filtered to numeric values");
            (lab_evidence(&c.name, l), v)
        }))
    }
}

pub(super) fn lab_evidence(concept: &str, l: LabRecord) -> Evidence {
    let value = match (l.value_num, &l.value_text) {
        (Some(v), _) => format!("{v}"),
        (None, Some(t)) => t.clone(),
        (None, None) => String::new(),
    };
    let reference_range = match (l.ref_low, l.ref_high, &l.ref_text) {
        (Some(lo), Some(hi), _) => Some(format!("{lo}-{hi}")),
        (None, Some(hi), _) => Some(format!("<{hi}")),
        (Some(lo), None, _) => Some(format!(">{lo}")),
        (None, None, Some(t)) => Some(t.clone()),
        _ => None,
    };
    Evidence::Lab {
        concept: concept.to_string(),
        original_name: l.original_name,
        value,
        unit: l.unit,
        reference_range,
        flag: l.flag,
        time: l.time,
        source_id: l.source_id,
    }
}
