//! Report retrieval (BM25 with kind and date filters) and the whole record
//! for the full-context comparator.

use super::labs::lab_evidence;
use super::*;

impl RecordView<'_> {
    /// The canonical kinds of the patient's dated documents up to the
    /// reference date (what a kind filter can find), in canonical order.
    pub fn available_kinds(&self) -> Result<Vec<DocKind>, evident_store::StoreError> {
        let present: BTreeSet<DocKind> = self
            .lock()
            .documents(&self.patient_id)?
            .into_iter()
            .filter(|d| d.date.is_some_and(|t| t <= self.as_of))
            .map(|d| d.kind)
            .collect();
        Ok(DocKind::ALL.into_iter().filter(|k| present.contains(k)).collect())
    }

    pub(super) fn search_reports(&self, a: &ReportArgs) -> Result<ToolOutput, ToolFailure> {
        let query = sanitise_query(&a.query);
        if query.trim().is_empty() {
            return Err(ToolError(format!(
                "query {:?} has no search words left once answer words are removed",
                a.query
            ))
            .into());
        }
        let kinds = match a.kind.as_deref().map(str::trim).filter(|k| !k.is_empty() && *k != "all" && *k != "any") {
            None => vec![],
            Some(k) => match DocKind::resolve(k) {
                Some(kind) => vec![kind],
                None => {
                    let known = DocKind::ALL.map(|k| k.as_str()).join(", ");
                    return Err(ToolError(format!("kind {k:?} is unknown; use one of {known}")).into());
                }
            },
        };
        let window = self.window(&TimeArgs {
            scope: a.scope.clone(),
            date: a.date.clone(),
            since: a.since.clone(),
            until: a.until.clone(),
        })?;
        let filter = SectionFilter {
            patient_id: Some(self.patient_id.clone()),
            kinds,
            since: window.since,
            until: Some(window.until),
            most_recent_documents: window.most_recent.then_some(1),
        };
        let k = a.k.unwrap_or(DEFAULT_K).clamp(1, MAX_K);
        let hits = self.lock().search_bm25(&query, &filter, k)?;
        let evidence: Vec<Evidence> = hits.into_iter().map(|h| h.section.into()).collect();
        let note = evidence.is_empty().then(|| format!("no report matches {query:?} in that scope"));
        Ok(ToolOutput { evidence, note })
    }

    /// Every section and lab value up to the reference date (full context).
    pub fn everything(&self) -> Result<Vec<Evidence>, evident_store::StoreError> {
        let filter = SectionFilter {
            patient_id: Some(self.patient_id.clone()),
            until: Some(self.as_of),
            ..SectionFilter::default()
        };
        let store = self.lock();
        let mut out: Vec<Evidence> = store.sections(&filter)?.into_iter().map(Evidence::from).collect();
        let catalogue = LabCatalogue::builtin();
        let labs = store.labs(&LabQuery { patient_id: self.patient_id.clone(), ..LabQuery::default() })?;
        for l in labs.into_iter().filter(|l| l.time <= self.as_of) {
            let name = l.concept_id.as_deref().and_then(|id| catalogue.get(id)).map(|c| c.name.clone());
            let name = name.unwrap_or_else(|| l.original_name.clone());
            out.push(lab_evidence(&name, l));
        }
        Ok(out)
    }
}
