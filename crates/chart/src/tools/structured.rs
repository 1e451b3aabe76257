//! Structured record queries: medications, conditions and procedures from
//! the timeline documents ingestion made of FHIR and MIMIC-IV records.

use super::*;

impl RecordView<'_> {
    pub(super) fn query_records(&self, a: &RecordArgs) -> Result<ToolOutput, ToolFailure> {
        let kind = match a.record.as_str() {
            "medications" => DocKind::MedicationList,
            "conditions" => DocKind::ProblemList,
            "procedures" => DocKind::Procedure,
            other => {
                return Err(ToolError(format!("record {other:?} is not medications, conditions or procedures")).into())
            }
        };
        let window = self.window(&TimeArgs {
            scope: a.scope.clone(),
            date: a.date.clone(),
            since: a.since.clone(),
            until: a.until.clone(),
        })?;
        let words: Vec<String> = a
            .query
            .as_deref()
            .map(sanitise_query)
            .unwrap_or_default()
            .split_whitespace()
            .filter(|w| w.len() > 2 && !STOPWORDS.contains(w))
            .map(str::to_string)
            .collect();
        let store = self.lock();
        let mut documents: Vec<_> = store
            .documents(&self.patient_id)?
            .into_iter()
            .filter(|d| d.kind == kind)
            .filter(|d| d.date.is_some_and(|t| t <= window.until && window.since.is_none_or(|s| t >= s)))
            .collect();
        documents.reverse();
        // Each matching entry with how many query words it holds, newest
        // first; the entries holding the most words are kept, so that
        // "penicillin v potassium 500 mg oral tablet" keeps its own lines
        // before the newest thirty lines holding "oral" or "tablet".
        let mut matched: Vec<(usize, Evidence)> = Vec::new();
        for doc in &documents {
            for (lower, entry) in timeline_entries(&store, doc)? {
                let held = words.iter().filter(|w| lower.contains(w.as_str())).count();
                if words.is_empty() || held > 0 {
                    matched.push((held, entry));
                }
            }
            if window.most_recent && !matched.is_empty() {
                break;
            }
        }
        matched.sort_by_key(|(held, _)| std::cmp::Reverse(*held));
        let evidence: Vec<Evidence> = matched.into_iter().take(MAX_K).map(|(_, e)| e).collect();
        let note = evidence.is_empty().then(|| format!("no {} entries match in that scope", a.record));
        Ok(ToolOutput { evidence, note })
    }
}

impl RecordView<'_> {
    /// The problem-list entries on or before the reference date whose
    /// condition the question names: every word of the condition's name
    /// (its line up to the first parenthesis or bracket; "Prediabetes",
    /// "Chronic kidney disease stage 3") occurs in the question as a whole
    /// word. Newest first, at most [`MAX_K`].
    pub fn conditions_named_in(&self, question: &str) -> Result<Vec<Evidence>, evident_store::StoreError> {
        let lowered = question.to_lowercase();
        let question_words: BTreeSet<&str> = lowered.split(|c: char| !c.is_alphanumeric()).collect();
        let store = self.lock();
        let mut documents = self.problem_lists(&store)?;
        documents.reverse();
        let mut named = Vec::new();
        for doc in &documents {
            for (lower, entry) in timeline_entries(&store, doc)? {
                let name = lower.split(['(', '[']).next().unwrap_or_default();
                let words: Vec<&str> = name.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
                if !words.is_empty() && words.iter().all(|w| question_words.contains(w)) {
                    named.push(entry);
                }
            }
        }
        named.truncate(MAX_K);
        Ok(named)
    }
}

impl RecordView<'_> {
    /// The patient's problem-list documents dated on or before the
    /// reference date, oldest first, from the locked `store`.
    pub(crate) fn problem_lists(
        &self,
        store: &Store,
    ) -> Result<Vec<evident_store::DocumentSummary>, evident_store::StoreError> {
        let mut documents = store.documents(&self.patient_id)?;
        documents.retain(|d| d.kind == DocKind::ProblemList && d.date.is_some_and(|t| t <= self.as_of));
        Ok(documents)
    }
}

/// A document's timeline lines, each as its text in lower case and the
/// citable entry of its sentence.
pub(crate) fn timeline_entries(
    store: &Store,
    doc: &evident_store::DocumentSummary,
) -> Result<Vec<(String, Evidence)>, evident_store::StoreError> {
    let mut entries = Vec::new();
    for sentence in store.sentences(&doc.id)? {
        let Some((text, record)) = timeline_line(&sentence.text) else { continue };
        let entry = Evidence::Entry {
            record,
            document_id: doc.id.clone(),
            date: doc.date,
            sentence_id: sentence.ordinal,
            start: sentence.start,
            end: sentence.end,
            text: sentence.text.trim().to_string(),
        };
        entries.push((text.to_lowercase(), entry));
    }
    Ok(entries)
}

/// A timeline line `- 2020-01-02 10:00: text [Resource/id]` as (text, record).
pub(crate) fn timeline_line(sentence: &str) -> Option<(String, String)> {
    let line = sentence.trim().strip_prefix("- ")?;
    let open = line.rfind('[')?;
    let record = line[open + 1..].strip_suffix(']')?.to_string();
    if !record.contains('/') {
        return None;
    }
    let body = line[..open].trim();
    let text = body.split_once(": ").map(|(_, t)| t).unwrap_or(body);
    Some((text.to_string(), record))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeline_lines_parse() {
        assert_eq!(
            timeline_line("- 2020-01-02 10:00: metformin 500 MG Oral Tablet (active) [MedicationRequest/abc]"),
            Some(("metformin 500 MG Oral Tablet (active)".into(), "MedicationRequest/abc".into()))
        );
        assert_eq!(timeline_line("Medications on 2020-01-02"), None);
    }
}
