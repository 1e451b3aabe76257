//! ClinicalTrials.gov API v2 study JSON (`/api/v2/studies/{nct}`) read into
//! a criteria set: `protocolSection.eligibilityModule.eligibilityCriteria`
//! split into inclusion and exclusion items by [`crate::plain`], and
//! `minimumAge`, `maximumAge` and `sex` as structured inclusion criteria,
//! each with the reviewed check that states it over the record.

use serde_json::Value;

use crate::checks::{Check, CheckStatus, SexCheck};
use crate::criteria::{CriteriaError, CriteriaSet, Criterion, CriterionType, Structured};
use crate::plain::split_criteria_text;

/// Reads a study from API v2 JSON text; `origin` names the input in errors.
pub fn criteria_from_ctgov_json(text: &str, origin: &str) -> Result<CriteriaSet, CriteriaError> {
    let err = |message: String| CriteriaError::ClinicalTrialsGov { path: origin.to_string(), message };
    let study: Value = serde_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
    let protocol = study
        .get("protocolSection")
        .ok_or_else(|| err("no protocolSection; download the study with /api/v2/studies/NCT...?format=json".into()))?;
    let nct_id = protocol
        .pointer("/identificationModule/nctId")
        .and_then(Value::as_str)
        .ok_or_else(|| err("no protocolSection.identificationModule.nctId".into()))?;
    let title = protocol
        .pointer("/identificationModule/briefTitle")
        .or_else(|| protocol.pointer("/identificationModule/officialTitle"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let eligibility = protocol
        .get("eligibilityModule")
        .ok_or_else(|| err(format!("study {nct_id} has no protocolSection.eligibilityModule")))?;

    let mut criteria = Vec::new();
    // The registry states these as data, so each carries the check that
    // says exactly what the field says; it is marked reviewed because no
    // model wrote it.
    let structured = |id: &str, text: String, s: Structured| {
        let check = match &s {
            Structured::MinimumAge { years } => Check::age(Some(*years), None, CheckStatus::Reviewed),
            Structured::MaximumAge { years } => Check::age(None, Some(*years), CheckStatus::Reviewed),
            Structured::Sex { sex } if sex == "female" => Check::sex(SexCheck::Female, CheckStatus::Reviewed),
            Structured::Sex { .. } => Check::sex(SexCheck::Male, CheckStatus::Reviewed),
        };
        Criterion {
            id: id.to_string(),
            criterion_type: CriterionType::Inclusion,
            text,
            refined: None,
            pooling: None,
            window_months: None,
            structured: Some(s),
            check: Some(check),
        }
    };
    if let Some(age) = eligibility.get("minimumAge").and_then(Value::as_str) {
        let years = age_in_years(age)
            .ok_or_else(|| err(format!("eligibilityModule.minimumAge {age:?} is not an age like \"18 Years\"")))?;
        criteria.push(structured("age-min", format!("Age at least {age}."), Structured::MinimumAge { years }));
    }
    if let Some(age) = eligibility.get("maximumAge").and_then(Value::as_str) {
        let years = age_in_years(age)
            .ok_or_else(|| err(format!("eligibilityModule.maximumAge {age:?} is not an age like \"75 Years\"")))?;
        criteria.push(structured("age-max", format!("Age at most {age}."), Structured::MaximumAge { years }));
    }
    match eligibility.get("sex").and_then(Value::as_str) {
        None | Some("ALL") => {}
        Some("FEMALE") => criteria.push(structured("sex", "Female.".into(), Structured::Sex { sex: "female".into() })),
        Some("MALE") => criteria.push(structured("sex", "Male.".into(), Structured::Sex { sex: "male".into() })),
        Some(other) => return Err(err(format!("eligibilityModule.sex {other:?} is not ALL, FEMALE or MALE"))),
    }
    let text = eligibility.get("eligibilityCriteria").and_then(Value::as_str).unwrap_or_default();
    let split = split_criteria_text(text);
    let mut set = split.into_criteria_set(nct_id, title, Some(format!("https://clinicaltrials.gov/study/{nct_id}")));
    criteria.append(&mut set.criteria);
    set.criteria = criteria;
    set.validate(origin)?;
    Ok(set)
}

/// "18 Years", "6 Months", "2 Weeks", "30 Days" as years.
fn age_in_years(text: &str) -> Option<f64> {
    let mut parts = text.split_whitespace();
    let n: f64 = parts.next()?.parse().ok()?;
    let unit = parts.next().unwrap_or("Years").to_ascii_lowercase();
    let per_year = match unit.trim_end_matches('s') {
        "year" => 1.0,
        "month" => 12.0,
        "week" => 52.1775,
        "day" => 365.25,
        "hour" => 365.25 * 24.0,
        "minute" => 365.25 * 24.0 * 60.0,
        _ => return None,
    };
    Some(n / per_year)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of a real API v2 answer (fields trimmed to what is read).
    const STUDY: &str = r#"{
  "protocolSection": {
    "identificationModule": {
      "nctId": "NCT01397994",
      "briefTitle": "Study to Assess Efficacy of Nicorandil+Atenolol vs Atenolol in Treatment of Chronic Stable Angina."
    },
    "statusModule": {"overallStatus": "COMPLETED"},
    "eligibilityModule": {
      "eligibilityCriteria": "Inclusion Criteria:\n\n* Patients of chronic stable angina with abnormal Exercise Myocardial Perfusion Spect Scan with reversible and partially reversible ischemic changes.\n* Exercise tolerance test positive\n\nExclusion Criteria:\n\n* Known case of Cardiomyopathy.\n* Hypersensitivity to nicorandil or atenolol\n  * including any excipient",
      "healthyVolunteers": false,
      "sex": "ALL",
      "minimumAge": "18 Years",
      "maximumAge": "65 Years",
      "stdAges": ["ADULT"]
    }
  }
}"#;

    #[test]
    fn reads_items_and_structured_criteria() {
        let set = criteria_from_ctgov_json(STUDY, "study.json").unwrap();
        assert_eq!(set.trial_id, "NCT01397994");
        assert!(set.title.starts_with("Study to Assess"));
        let ids: Vec<_> = set.criteria.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["age-min", "age-max", "inc-1", "inc-2", "exc-1", "exc-2"]);
        assert_eq!(set.criteria[0].structured, Some(Structured::MinimumAge { years: 18.0 }));
        assert_eq!(set.criteria[1].structured, Some(Structured::MaximumAge { years: 65.0 }));
        assert_eq!(set.criteria[1].check, Some(Check::age(None, Some(65.0), CheckStatus::Reviewed)));
        assert!(set.criteria[2].check.is_none(), "text items carry no check");
        assert_eq!(set.criteria[4].criterion_type, CriterionType::Exclusion);
        assert_eq!(set.criteria[5].text, "Hypersensitivity to nicorandil or atenolol; including any excipient");
    }

    #[test]
    fn sex_and_months() {
        let study = STUDY.replace("\"ALL\"", "\"FEMALE\"").replace("\"18 Years\"", "\"6 Months\"");
        let set = criteria_from_ctgov_json(&study, "s").unwrap();
        assert_eq!(set.criteria[0].structured, Some(Structured::MinimumAge { years: 0.5 }));
        assert_eq!(set.criterion("sex").unwrap().structured, Some(Structured::Sex { sex: "female".into() }));
    }

    #[test]
    fn errors_name_the_missing_field() {
        let e = criteria_from_ctgov_json("{\"studies\": []}", "search.json").unwrap_err().to_string();
        assert!(e.starts_with("search.json: not a ClinicalTrials.gov API v2 study: no protocolSection"), "{e}");
        let bad_age = STUDY.replace("\"65 Years\"", "\"N/A\"");
        let e = criteria_from_ctgov_json(&bad_age, "s.json").unwrap_err().to_string();
        assert!(e.contains("maximumAge \"N/A\""), "{e}");
    }
}
