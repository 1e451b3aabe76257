//! FHIR R4: transaction/collection Bundles (`.json`) and bulk-export
//! ndjson. Patient, DocumentReference (base64 text/plain, text/markdown or
//! text/html attachments), Observation (laboratory ones become labs with
//! LOINC codes, values, reference ranges and interpretation), and
//! MedicationRequest, Condition, Procedure, Encounter and non-laboratory
//! Observations as dated timeline documents. Other resource types are
//! counted and skipped.

use std::path::Path;

use base64::Engine;
use evident_model::labs::LabCatalogue;
use evident_model::{DocKind, Document, LabObservation, LabValue, Patient};
use serde_json::Value;

use crate::dates::{parse_datetime, EXPECTED};
use crate::timeline::Timeline;
use crate::{Batch, Format, IngestError, Problem, Reader, Unit};

const SOURCE: &str = "fhir";

pub(crate) fn units(path: &Path) -> Result<Vec<Unit>, IngestError> {
    let unit = |p: &Path| {
        let ndjson = p.extension().is_some_and(|e| e == "ndjson");
        Unit {
            path: p.to_path_buf(),
            format: Format::Fhir,
            reader: if ndjson { Reader::FhirNdjson } else { Reader::FhirBundle },
        }
    };
    if !path.is_dir() {
        return Ok(vec![unit(path)]);
    }
    let mut files: Vec<_> = crate::list_dir(path)
        .map_err(|e| IngestError::Input { path: path.into(), message: e.to_string() })?
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "ndjson" || e == "json"))
        // Bulk-export status logs are not resources.
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| !n.starts_with("log.")))
        .collect();
    // Patients first, so that everything else finds its patient.
    files.sort_by_key(|p| !p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("Patient")));
    Ok(files.iter().map(|p| unit(p)).collect())
}

/// Accumulates what the resources of one file yield.
struct Reading<'a> {
    path: &'a Path,
    batch: Batch,
    problems: Vec<Problem>,
    medications: Timeline,
    conditions: Timeline,
    procedures: Timeline,
    encounters: Timeline,
    observations: Timeline,
    lab_lines: Timeline,
}

impl<'a> Reading<'a> {
    fn new(path: &'a Path) -> Reading<'a> {
        Reading {
            path,
            batch: Batch::default(),
            problems: Vec::new(),
            medications: Timeline::new(SOURCE, "medications", "Medications", DocKind::MedicationList),
            conditions: Timeline::new(SOURCE, "conditions", "Conditions", DocKind::ProblemList),
            procedures: Timeline::new(SOURCE, "procedures", "Procedures", DocKind::Procedure),
            encounters: Timeline::new(SOURCE, "encounters", "Encounters", DocKind::Other),
            observations: Timeline::new(SOURCE, "observations", "Observations", DocKind::Other),
            lab_lines: Timeline::new(SOURCE, "labs", "Laboratory results", DocKind::LabReport),
        }
    }

    fn problem(&mut self, place: &str, field: &str, message: impl Into<String>, hint: &str) {
        self.problems.push(Problem::new(self.path, place, Some(field), message, hint));
    }

    fn finish(mut self) -> (Batch, Vec<Problem>) {
        for timeline in
            [self.medications, self.conditions, self.procedures, self.encounters, self.observations, self.lab_lines]
        {
            self.batch.documents.extend(timeline.into_documents());
        }
        (self.batch, self.problems)
    }

    /// Reads one resource; `place` locates it (`line 3` or `$.entry[4].resource`).
    fn resource(&mut self, r: &Value, place: &str) {
        let Some(kind) = r.get("resourceType").and_then(Value::as_str) else {
            self.problem(place, "resourceType", "is missing", "every FHIR resource names its resourceType");
            return;
        };
        match kind {
            "Patient" => self.patient(r, place),
            "DocumentReference" => self.document_reference(r, place),
            "Observation" => self.observation(r, place),
            "MedicationRequest" => self.medication_request(r, place),
            "Condition" => self.condition(r, place),
            "Procedure" => self.procedure(r, place),
            "Encounter" => self.encounter(r, place),
            other => *self.batch.skipped.entry(format!("{other} resources (not read)")).or_default() += 1,
        }
    }

    fn id(&mut self, r: &Value, place: &str) -> Option<String> {
        let id = str_at(r, &["id"]);
        if id.is_none() {
            self.problem(place, "id", "is missing", "every resource needs an id");
        }
        id.map(String::from)
    }

    fn subject(&mut self, r: &Value, place: &str) -> Option<String> {
        let reference = str_at(r, &["subject", "reference"]).or_else(|| str_at(r, &["patient", "reference"]));
        match reference.and_then(patient_id_from_reference) {
            Some(id) => Some(id),
            None => {
                self.problem(
                    place,
                    "subject.reference",
                    format!("= {reference:?} does not name a Patient"),
                    "expected \"Patient/<id>\" or \"urn:uuid:<id>\"",
                );
                None
            }
        }
    }

    fn time(&mut self, r: &Value, place: &str, candidates: &[&[&str]]) -> Option<chrono::NaiveDateTime> {
        for path in candidates {
            if let Some(text) = str_at(r, path) {
                return match parse_datetime(text) {
                    Some(t) => Some(t),
                    None => {
                        self.problem(
                            place,
                            &path.join("."),
                            format!("= {text:?} is not a date ({EXPECTED})"),
                            "fix the date in the source",
                        );
                        None
                    }
                };
            }
        }
        let names: Vec<String> = candidates.iter().map(|p| p.join(".")).collect();
        self.problem(
            place,
            &names[0],
            "is missing",
            &format!("one of {} is needed to date this record", names.join(", ")),
        );
        None
    }

    fn patient(&mut self, r: &Value, place: &str) {
        let Some(id) = self.id(r, place) else { return };
        let birth_date = match str_at(r, &["birthDate"]) {
            Some(text) => match chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
                Ok(d) => Some(d),
                Err(_) => {
                    self.problem(
                        place,
                        "birthDate",
                        format!("= {text:?} is not a date (expected YYYY-MM-DD)"),
                        "fix the date in the source",
                    );
                    None
                }
            },
            None => None,
        };
        let name = r.get("name").and_then(|n| n.get(0)).map(|n| {
            let given: Vec<&str> = n
                .get("given")
                .and_then(Value::as_array)
                .map(|g| g.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let family = n.get("family").and_then(Value::as_str).unwrap_or("");
            format!("{} {family}", given.join(" ")).trim().to_string()
        });
        self.batch.patients.push(Patient {
            id,
            source: SOURCE.into(),
            birth_date,
            sex: str_at(r, &["gender"]).map(String::from),
            display_name: name.filter(|n| !n.is_empty()),
        });
    }

    fn document_reference(&mut self, r: &Value, place: &str) {
        let (Some(id), Some(patient_id)) = (self.id(r, place), self.subject(r, place)) else { return };
        let date = self.time(r, place, &[&["date"], &["context", "period", "start"]]);
        let attachments = r.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
        let mut text = None;
        for (i, content) in attachments.iter().enumerate() {
            let attachment = content.get("attachment").unwrap_or(&Value::Null);
            let content_type = str_at(attachment, &["contentType"]).unwrap_or("text/plain").to_lowercase();
            let Some(data) = str_at(attachment, &["data"]) else { continue };
            let field = format!("content[{i}].attachment.data");
            let bytes = match base64::engine::general_purpose::STANDARD.decode(data.trim()) {
                Ok(b) => b,
                Err(e) => {
                    self.problem(place, &field, format!("is not valid base64 ({e})"), "re-export the attachment");
                    return;
                }
            };
            let Ok(decoded) = String::from_utf8(bytes) else {
                self.problem(place, &field, "does not decode to UTF-8 text", "only text attachments can be ingested");
                return;
            };
            if content_type.starts_with("text/html") {
                text = Some(evident_model::text::html_to_text(&decoded));
            } else if content_type.starts_with("text/plain") || content_type.starts_with("text/markdown") {
                text = Some(decoded);
            } else {
                continue;
            }
            break;
        }
        let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
            *self
                .batch
                .skipped
                .entry("DocumentReferences without inline text (text/plain, text/markdown or text/html)".into())
                .or_default() += 1;
            return;
        };
        let codings =
            r.get("type").and_then(|t| t.get("coding")).and_then(Value::as_array).cloned().unwrap_or_default();
        let kind = codings
            .iter()
            .filter_map(|c| {
                str_at(c, &["code"])
                    .and_then(DocKind::resolve)
                    .or_else(|| str_at(c, &["display"]).and_then(DocKind::resolve))
            })
            .next()
            .or_else(|| str_at(r, &["type", "text"]).and_then(DocKind::resolve))
            .unwrap_or(DocKind::Other);
        let title = str_at(r, &["type", "text"])
            .or_else(|| codings.first().and_then(|c| str_at(c, &["display"])))
            .or_else(|| str_at(r, &["description"]))
            .unwrap_or("Clinical note")
            .to_string();
        self.batch.documents.push(Document {
            id: format!("fhir:DocumentReference/{id}"),
            patient_id,
            kind,
            date,
            title,
            source: SOURCE.into(),
            source_id: format!("DocumentReference/{id}"),
            text,
        });
    }

    fn observation(&mut self, r: &Value, place: &str) {
        let (Some(id), Some(patient_id)) = (self.id(r, place), self.subject(r, place)) else { return };
        let Some(time) = self.time(r, place, &[&["effectiveDateTime"], &["effectivePeriod", "start"], &["issued"]])
        else {
            return;
        };
        let loinc = codings(r, "code")
            .find(|c| str_at(c, &["system"]) == Some("http://loinc.org"))
            .and_then(|c| str_at(c, &["code"]))
            .map(String::from);
        let name = str_at(r, &["code", "text"])
            .or_else(|| codings(r, "code").find_map(|c| str_at(c, &["display"])))
            .unwrap_or("unnamed observation")
            .to_string();
        let is_lab = r.get("category").and_then(Value::as_array).is_some_and(|cats| {
            cats.iter().any(|c| codings(c, "").any(|cc| str_at(cc, &["code"]) == Some("laboratory")))
        });
        let value = observation_value(r);
        let record = format!("Observation/{id}");
        if !is_lab {
            let shown = match (&value, components_text(r)) {
                (Some((v, unit)), _) => {
                    format!("{name}: {}{}", value_text(v), unit.as_ref().map(|u| format!(" {u}")).unwrap_or_default())
                }
                (None, Some(components)) => format!("{name}: {components}"),
                (None, None) => name.clone(),
            };
            self.observations.push(&patient_id, time, shown, record);
            return;
        }
        let Some((value, unit)) = value else {
            *self.batch.skipped.entry("laboratory Observations without a value".into()).or_default() += 1;
            return;
        };
        let range = r.get("referenceRange").and_then(|rr| rr.get(0));
        let ref_low = range.and_then(|rr| rr.get("low")).and_then(|l| l.get("value")).and_then(Value::as_f64);
        let ref_high = range.and_then(|rr| rr.get("high")).and_then(|h| h.get("value")).and_then(Value::as_f64);
        let ref_text = range.and_then(|rr| str_at(rr, &["text"])).map(String::from);
        let flag = r
            .get("interpretation")
            .and_then(|i| i.get(0))
            .and_then(|i| codings(i, "").find_map(|c| str_at(c, &["code"])).or_else(|| str_at(i, &["text"])))
            .map(String::from);
        let concept = LabCatalogue::builtin().resolve(&name, loinc.as_deref());
        if concept.is_none() {
            *self
                .batch
                .unmapped_lab_names
                .entry(format!("{name} (LOINC {})", loinc.as_deref().unwrap_or("none")))
                .or_default() += 1;
        }
        let shown = format!(
            "{name}: {}{}{}{}",
            value_text(&value),
            unit.as_deref().map(|u| format!(" {u}")).unwrap_or_default(),
            range_text(ref_low, ref_high, ref_text.as_deref()),
            flag.as_deref().map(|f| format!(" [{f}]")).unwrap_or_default()
        );
        self.lab_lines.push(&patient_id, time, shown, record.clone());
        self.batch.labs.push(LabObservation {
            patient_id,
            concept_id: concept.map(|c| c.id.clone()),
            original_name: name,
            loinc,
            value,
            unit,
            ref_low,
            ref_high,
            ref_text,
            flag,
            time,
            source: SOURCE.into(),
            source_id: record,
        });
    }

    fn medication_request(&mut self, r: &Value, place: &str) {
        let (Some(id), Some(patient_id)) = (self.id(r, place), self.subject(r, place)) else { return };
        let Some(time) = self.time(r, place, &[&["authoredOn"]]) else { return };
        let drug = concept_text(r, "medicationCodeableConcept")
            .or_else(|| str_at(r, &["medicationReference", "display"]).map(String::from))
            .unwrap_or_else(|| "unnamed medication".into());
        let status = str_at(r, &["status"]).unwrap_or("unknown status");
        let dosage = r
            .get("dosageInstruction")
            .and_then(|d| d.get(0))
            .and_then(|d| str_at(d, &["text"]))
            .map(|t| format!(", {t}"))
            .unwrap_or_default();
        let reason = r
            .get("reasonReference")
            .and_then(|rr| rr.get(0))
            .and_then(|rr| str_at(rr, &["display"]))
            .or_else(|| r.get("reasonCode").and_then(|rc| rc.get(0)).and_then(|rc| str_at(rc, &["text"])))
            .map(|t| format!(", for {t}"))
            .unwrap_or_default();
        let codes = codes_text(r.get("medicationCodeableConcept"));
        self.medications.push(
            &patient_id,
            time,
            format!("{drug} ({status}{dosage}{reason}){codes}"),
            format!("MedicationRequest/{id}"),
        );
    }

    fn condition(&mut self, r: &Value, place: &str) {
        let (Some(id), Some(patient_id)) = (self.id(r, place), self.subject(r, place)) else { return };
        let Some(time) = self.time(r, place, &[&["onsetDateTime"], &["recordedDate"], &["onsetPeriod", "start"]])
        else {
            return;
        };
        let name = concept_text(r, "code").unwrap_or_else(|| "unnamed condition".into());
        let status = codings(r, "clinicalStatus").find_map(|c| str_at(c, &["code"])).unwrap_or("unknown status");
        let resolved = str_at(r, &["abatementDateTime"])
            .map(|d| format!(", resolved {}", &d[..d.len().min(10)]))
            .unwrap_or_default();
        let codes = codes_text(r.get("code"));
        self.conditions.push(
            &patient_id,
            time,
            format!("{name} ({status}{resolved}){codes}"),
            format!("Condition/{id}"),
        );
    }

    fn procedure(&mut self, r: &Value, place: &str) {
        let (Some(id), Some(patient_id)) = (self.id(r, place), self.subject(r, place)) else { return };
        let Some(time) = self.time(r, place, &[&["performedDateTime"], &["performedPeriod", "start"]]) else { return };
        let name = concept_text(r, "code").unwrap_or_else(|| "unnamed procedure".into());
        let status = str_at(r, &["status"]).unwrap_or("unknown status");
        let codes = codes_text(r.get("code"));
        self.procedures.push(&patient_id, time, format!("{name} ({status}){codes}"), format!("Procedure/{id}"));
    }

    fn encounter(&mut self, r: &Value, place: &str) {
        let (Some(id), Some(patient_id)) = (self.id(r, place), self.subject(r, place)) else { return };
        let Some(time) = self.time(r, place, &[&["period", "start"]]) else { return };
        let kind = r.get("type").and_then(|t| t.get(0)).and_then(|t| {
            str_at(t, &["text"])
                .map(String::from)
                .or_else(|| codings(t, "").find_map(|c| str_at(c, &["display"])).map(String::from))
        });
        let class = str_at(r, &["class", "code"]);
        let reason = r
            .get("reasonCode")
            .and_then(|rc| rc.get(0))
            .and_then(concept_text_of)
            .map(|t| format!(", reason: {t}"))
            .unwrap_or_default();
        let text = format!(
            "{}{}{reason}",
            kind.unwrap_or_else(|| "Encounter".into()),
            class.map(|c| format!(" ({c})")).unwrap_or_default()
        );
        self.encounters.push(&patient_id, time, text, format!("Encounter/{id}"));
    }
}

fn str_at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    path.iter().try_fold(v, |v, key| v.get(key))?.as_str().filter(|s| !s.trim().is_empty())
}

/// The codings of `v[field]` (or of `v` itself when `field` is empty).
fn codings<'v>(v: &'v Value, field: &str) -> impl Iterator<Item = &'v Value> {
    let concept = if field.is_empty() { Some(v) } else { v.get(field) };
    concept.and_then(|c| c.get("coding")).and_then(Value::as_array).into_iter().flatten()
}

/// The codes of a concept in the systems a check can name, written into the
/// timeline line as ` [SNOMED 44054006, ICD-10 E11.9]` (empty when it has
/// none): the store keeps FHIR conditions, medications and procedures as
/// text, so the codes are stored where the line is. Codings of other
/// systems, and codes with characters a code does not have, are left out.
fn codes_text(concept: Option<&Value>) -> String {
    let Some(concept) = concept else { return String::new() };
    let mut codes: Vec<String> = Vec::new();
    for coding in codings(concept, "") {
        let (Some(system), Some(code)) = (str_at(coding, &["system"]), str_at(coding, &["code"])) else { continue };
        let Some(label) = code_system_label(system) else { continue };
        let code = code.trim();
        if code.is_empty() || !code.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-') {
            continue;
        }
        let text = format!("{label} {code}");
        if !codes.contains(&text) {
            codes.push(text);
        }
    }
    if codes.is_empty() {
        String::new()
    } else {
        format!(" [{}]", codes.join(", "))
    }
}

/// The short name a timeline line gives a FHIR code system.
fn code_system_label(system: &str) -> Option<&'static str> {
    Some(match system.trim_end_matches('/') {
        "http://snomed.info/sct" => "SNOMED",
        "http://www.nlm.nih.gov/research/umls/rxnorm" => "RxNorm",
        "http://loinc.org" => "LOINC",
        "http://hl7.org/fhir/sid/icd-10" | "http://hl7.org/fhir/sid/icd-10-cm" => "ICD-10",
        "http://hl7.org/fhir/sid/icd-9-cm" | "http://hl7.org/fhir/sid/icd-9" => "ICD-9",
        "http://hl7.org/fhir/sid/ndc" => "NDC",
        _ => return None,
    })
}

fn concept_text_of(concept: &Value) -> Option<String> {
    str_at(concept, &["text"]).or_else(|| codings(concept, "").find_map(|c| str_at(c, &["display"]))).map(String::from)
}

fn concept_text(r: &Value, field: &str) -> Option<String> {
    r.get(field).and_then(concept_text_of)
}

fn observation_value(r: &Value) -> Option<(LabValue, Option<String>)> {
    if let Some(q) = r.get("valueQuantity") {
        let value = q.get("value").and_then(Value::as_f64)?;
        let unit = str_at(q, &["unit"]).or_else(|| str_at(q, &["code"])).map(String::from);
        return Some((LabValue::Numeric(value), unit));
    }
    if let Some(s) = str_at(r, &["valueString"]) {
        return Some((LabValue::Text(s.into()), None));
    }
    if let Some(c) = r.get("valueCodeableConcept").and_then(concept_text_of) {
        return Some((LabValue::Text(c), None));
    }
    if let Some(b) = r.get("valueBoolean").and_then(Value::as_bool) {
        return Some((LabValue::Text(b.to_string()), None));
    }
    r.get("valueInteger").and_then(Value::as_f64).map(|v| (LabValue::Numeric(v), None))
}

fn components_text(r: &Value) -> Option<String> {
    let parts: Vec<String> = r
        .get("component")?
        .as_array()?
        .iter()
        .filter_map(|c| {
            let name = c.get("code").and_then(concept_text_of)?;
            let (value, unit) = observation_value(c)?;
            Some(format!("{name} {}{}", value_text(&value), unit.map(|u| format!(" {u}")).unwrap_or_default()))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn value_text(value: &LabValue) -> String {
    match value {
        LabValue::Numeric(v) => format!("{v}"),
        LabValue::Text(t) => t.clone(),
    }
}

pub(crate) fn range_text(low: Option<f64>, high: Option<f64>, text: Option<&str>) -> String {
    match (low, high, text) {
        (Some(l), Some(h), _) => format!(" (ref {l}-{h})"),
        (Some(l), None, _) => format!(" (ref >= {l})"),
        (None, Some(h), _) => format!(" (ref <= {h})"),
        (None, None, Some(t)) => format!(" (ref {t})"),
        _ => String::new(),
    }
}

fn patient_id_from_reference(reference: &str) -> Option<String> {
    let id = reference.strip_prefix("Patient/").or_else(|| reference.strip_prefix("urn:uuid:"))?;
    (!id.is_empty()).then(|| id.to_string())
}

pub(crate) fn read_ndjson(path: &Path) -> (Batch, Vec<Problem>) {
    let mut reading = Reading::new(path);
    let text = match crate::problem::read_text(path) {
        Ok(t) => t,
        Err(problem) => {
            reading.problems.push(problem);
            return reading.finish();
        }
    };
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let place = format!("line {}", i + 1);
        match serde_json::from_str::<Value>(line) {
            Ok(resource) => reading.resource(&resource, &place),
            Err(e) => reading.problems.push(Problem::new(
                path,
                format!("line {}, column {}", i + 1, e.column()),
                None,
                format!("is not valid JSON ({e})"),
                "bulk ndjson holds one complete resource per line; the file may be truncated: re-export it",
            )),
        }
    }
    reading.finish()
}

pub(crate) fn read_bundle(path: &Path) -> (Batch, Vec<Problem>) {
    let mut reading = Reading::new(path);
    let text = match crate::problem::read_text(path) {
        Ok(t) => t,
        Err(problem) => {
            reading.problems.push(problem);
            return reading.finish();
        }
    };
    let root: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            let hint = if e.is_eof() {
                "the file ends too early: it may be truncated; re-export it"
            } else {
                "fix the JSON syntax"
            };
            reading.problems.push(Problem::new(
                path,
                format!("line {}, column {}", e.line(), e.column()),
                None,
                format!("is not valid JSON ({e})"),
                hint,
            ));
            return reading.finish();
        }
    };
    match root.get("resourceType").and_then(Value::as_str) {
        Some("Bundle") => {
            let entries = root.get("entry").and_then(Value::as_array).cloned().unwrap_or_default();
            // Patients first, so that the patient check sees them regardless of order.
            let (patients, others): (Vec<_>, Vec<_>) = entries
                .iter()
                .enumerate()
                .partition(|(_, e)| e.get("resource").and_then(|r| str_at(r, &["resourceType"])) == Some("Patient"));
            for (i, entry) in patients.into_iter().chain(others) {
                match entry.get("resource") {
                    Some(resource) => reading.resource(resource, &format!("$.entry[{i}].resource")),
                    None => reading.problems.push(Problem::new(
                        path,
                        format!("$.entry[{i}]"),
                        Some("resource"),
                        "is missing",
                        "bundle entries must carry a resource",
                    )),
                }
            }
        }
        Some(_) => reading.resource(&root, "$"),
        None => reading.problems.push(Problem::new(
            path,
            "$",
            Some("resourceType"),
            "is missing: this is not a FHIR resource or Bundle",
            "pass a FHIR R4 Bundle, a resource, or bulk ndjson",
        )),
    }
    reading.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn codes_of_known_systems_go_into_the_line() {
        let concept = json!({"coding": [
            {"system": "http://snomed.info/sct", "code": "44054006", "display": "Diabetes"},
            {"system": "http://hl7.org/fhir/sid/icd-10-cm", "code": "E11.9"},
            {"system": "http://example.org/local", "code": "X1"},
            {"system": "http://snomed.info/sct", "code": "44054006"},
            {"system": "http://snomed.info/sct", "code": "1] [Condition/forged"}
        ], "text": "Diabetes"});
        assert_eq!(codes_text(Some(&concept)), " [SNOMED 44054006, ICD-10 E11.9]");
        assert_eq!(codes_text(Some(&json!({"text": "no codings"}))), "");
        assert_eq!(codes_text(None), "");
    }

    #[test]
    fn a_condition_line_carries_its_snomed_code() {
        let bundle = json!({"resourceType": "Bundle", "entry": [
            {"resource": {"resourceType": "Patient", "id": "p1", "birthDate": "1960-01-01", "gender": "female"}},
            {"resource": {"resourceType": "Condition", "id": "c1", "subject": {"reference": "Patient/p1"},
              "onsetDateTime": "2020-03-04T10:00:00Z",
              "clinicalStatus": {"coding": [{"code": "active"}]},
              "code": {"coding": [{"system": "http://snomed.info/sct", "code": "38341003", "display": "Hypertension"}],
                       "text": "Hypertension"}}},
            {"resource": {"resourceType": "MedicationRequest", "id": "m1", "subject": {"reference": "Patient/p1"},
              "authoredOn": "2020-03-04T11:00:00Z", "status": "active",
              "medicationCodeableConcept": {"coding": [{"system": "http://www.nlm.nih.gov/research/umls/rxnorm",
                "code": "314076", "display": "lisinopril 10 MG Oral Tablet"}], "text": "lisinopril 10 MG Oral Tablet"}}}
        ]});
        let dir = std::env::temp_dir().join(format!("evident-fhir-codes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bundle.json");
        std::fs::write(&path, bundle.to_string()).unwrap();
        let (batch, problems) = read_bundle(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        let text: String = batch.documents.iter().map(|d| d.text.as_str()).collect();
        assert!(text.contains("- 2020-03-04 10:00: Hypertension (active) [SNOMED 38341003] [Condition/c1]"), "{text}");
        assert!(
            text.contains("lisinopril 10 MG Oral Tablet (active) [RxNorm 314076] [MedicationRequest/m1]"),
            "{text}"
        );
    }
}
