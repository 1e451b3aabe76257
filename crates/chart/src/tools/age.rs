//! The patient's age on the reference date as the record gives it: one
//! age from a stored birth date; a range from MIMIC-IV's anchor age, which
//! is an age at some time in a (shifted) anchor year, not a birth date.

use super::*;

/// The ages in whole years the record allows on the reference date, and
/// the item that says so.
#[derive(Debug, Clone)]
pub struct Age {
    pub youngest: i32,
    /// `None`: no upper bound (MIMIC-IV's ages over 89).
    pub oldest: Option<i32>,
    pub evidence: Evidence,
}

impl Age {
    /// Met when every age allowed lies in `[min, max]`, not met when none
    /// does, unknown when the range straddles a bound.
    pub fn within(&self, min: Option<i32>, max: Option<i32>) -> crate::criteria::Truth {
        use crate::criteria::Truth;
        let all = min.is_none_or(|m| self.youngest >= m) && max.is_none_or(|m| self.oldest.is_some_and(|o| o <= m));
        let none = min.is_some_and(|m| self.oldest.is_some_and(|o| o < m)) || max.is_some_and(|m| self.youngest > m);
        if all {
            Truth::Met
        } else if none {
            Truth::NotMet
        } else {
            Truth::Unknown
        }
    }

    /// `55`, `55-57` or `90 or over`.
    pub fn words(&self) -> String {
        match self.shown() {
            Value::String(s) => s,
            other => other.to_string(),
        }
    }

    /// `55`, or `"55-57"`, or `"90 or over"`.
    pub fn shown(&self) -> Value {
        match self.oldest {
            Some(o) if o == self.youngest => json!(o),
            Some(o) => json!(format!("{}-{o}", self.youngest)),
            None => json!(format!("{} or over", self.youngest)),
        }
    }
}

impl RecordView<'_> {
    /// The patient's age on the reference date: from the stored birth date
    /// (citing the patient), else from MIMIC-IV's anchor age on the
    /// demographics line dated on or before the reference date (citing the
    /// line): aged N at some time in year Y means born in Y - N - 1 or
    /// Y - N, so on the reference date the age is one of up to three whole
    /// years. `None` when the record gives neither.
    pub fn age(&self) -> Result<Option<Age>, evident_store::StoreError> {
        let day = self.as_of.date();
        let store = self.lock();
        let Some(patient) = store.patient(&self.patient_id)? else { return Ok(None) };
        if let Some(birth) = patient.birth_date {
            let age = age_on(birth, day);
            let evidence = Evidence::Patient {
                patient_id: patient.id,
                birth_date: Some(birth),
                sex: patient.sex,
                as_of: self.as_of,
            };
            return Ok(Some(Age { youngest: age, oldest: Some(age), evidence }));
        }
        let documents = store.documents(&self.patient_id)?;
        let candidates =
            documents.iter().filter(|d| d.kind == DocKind::Other && d.date.is_some_and(|t| t <= self.as_of));
        for doc in candidates {
            for (line, entry) in timeline_entries(&store, doc)? {
                let Evidence::Entry { record, .. } = &entry else { continue };
                if !record.starts_with("patients/") {
                    continue;
                }
                let Some((youngest, oldest)) = AnchorAge::parse(&line).and_then(|a| a.ages_on(day)) else { continue };
                return Ok(Some(Age { youngest, oldest, evidence: entry }));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::criteria::Truth;

    fn age(youngest: i32, oldest: Option<i32>) -> Age {
        let evidence = Evidence::Patient {
            patient_id: "p".into(),
            birth_date: None,
            sex: None,
            as_of: NaiveDate::from_ymd_opt(2020, 1, 1).unwrap().and_hms_opt(0, 0, 0).unwrap(),
        };
        Age { youngest, oldest, evidence }
    }

    #[test]
    fn a_range_decides_only_where_every_age_in_it_agrees() {
        assert_eq!(age(56, Some(58)).within(Some(40), Some(75)), Truth::Met);
        assert_eq!(age(74, Some(76)).within(Some(40), Some(75)), Truth::Unknown);
        assert_eq!(age(76, Some(78)).within(Some(40), Some(75)), Truth::NotMet);
        assert_eq!(age(37, Some(39)).within(Some(40), None), Truth::NotMet);
        assert_eq!(age(90, None).within(Some(40), Some(75)), Truth::NotMet);
        assert_eq!(age(90, None).within(Some(18), None), Truth::Met);
        assert_eq!(age(90, None).within(None, Some(95)), Truth::Unknown);
        assert_eq!(age(64, Some(64)).within(Some(65), None), Truth::NotMet);
        assert_eq!(
            [age(57, Some(57)), age(56, Some(58)), age(90, None)].map(|a| a.shown()),
            [json!(57), json!("56-58"), json!("90 or over")]
        );
        assert_eq!([age(57, Some(57)), age(56, Some(58))].map(|a| a.words()), ["57", "56-58"]);
    }
}
