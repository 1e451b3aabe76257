//! [`SectionFilter`]: which sections a query may see (patient, document
//! kinds, date range, the N most recent documents), and the SQL condition
//! on `documents d` that admits exactly those.

use chrono::NaiveDateTime;
use evident_model::DocKind;
use rusqlite::types::Value;

use crate::format_date;

/// Which sections a query may return. The default matches every section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SectionFilter {
    pub patient_id: Option<String>,
    /// Only documents of these kinds; empty for all kinds.
    pub kinds: Vec<DocKind>,
    /// Only documents dated at or after this time (undated documents are excluded).
    pub since: Option<NaiveDateTime>,
    /// Only documents dated at or before this time (undated documents are excluded).
    pub until: Option<NaiveDateTime>,
    /// Only the N most recent documents that pass the other filters.
    pub most_recent_documents: Option<usize>,
}

impl SectionFilter {
    pub fn patient(id: impl Into<String>) -> SectionFilter {
        SectionFilter { patient_id: Some(id.into()), ..SectionFilter::default() }
    }

    /// Whether the filter admits every section of the store.
    pub(crate) fn admits_everything(&self) -> bool {
        self == &SectionFilter::default()
    }

    /// The SQL condition on `d` (documents) and its parameters.
    pub(crate) fn document_condition(&self) -> (String, Vec<Value>) {
        let mut clauses = Vec::new();
        let mut values = Vec::new();
        if let Some(p) = &self.patient_id {
            clauses.push("d.patient_id = ?".to_string());
            values.push(Value::Text(p.clone()));
        }
        if !self.kinds.is_empty() {
            clauses.push(format!("d.kind IN ({})", vec!["?"; self.kinds.len()].join(",")));
            values.extend(self.kinds.iter().map(|k| Value::Text(k.as_str().to_string())));
        }
        if let Some(since) = &self.since {
            clauses.push("d.date >= ?".to_string());
            values.push(Value::Text(format_date(since)));
        }
        if let Some(until) = &self.until {
            clauses.push("d.date <= ?".to_string());
            values.push(Value::Text(format_date(until)));
        }
        let mut condition = if clauses.is_empty() { "1".to_string() } else { clauses.join(" AND ") };
        if let Some(n) = self.most_recent_documents {
            condition = format!(
                "d.id IN (SELECT d.id FROM documents d WHERE {condition} ORDER BY d.date IS NULL, d.date DESC, d.id LIMIT {n})"
            );
        }
        (condition, values)
    }
}
