//! Parsing the date and time forms real sources use. Offsets are dropped:
//! times are stored as the source's local wall-clock time, which is what a
//! clinician reading the record sees.

use chrono::{DateTime, NaiveDate, NaiveDateTime};

pub const EXPECTED: &str = "expected YYYY-MM-DD, YYYY-MM-DD HH:MM[:SS] or an ISO 8601 / FHIR dateTime";

/// Parses `2020-01-31`, `2020-01-31 08:15[:00]`, `2020-01-31T08:15:00[.123][Z|+01:00]`,
/// and FHIR partial dates `2020` and `2020-01` (the first day).
pub fn parse_datetime(text: &str) -> Option<NaiveDateTime> {
    let t = text.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Some(dt.naive_local());
    }
    for format in [
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(t, format) {
            return Some(dt);
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return d.and_hms_opt(0, 0, 0);
    }
    if t.len() == 7 {
        if let Ok(d) = NaiveDate::parse_from_str(&format!("{t}-01"), "%Y-%m-%d") {
            return d.and_hms_opt(0, 0, 0);
        }
    }
    if t.len() == 4 && t.chars().all(|c| c.is_ascii_digit()) {
        return NaiveDate::from_ymd_opt(t.parse().ok()?, 1, 1)?.and_hms_opt(0, 0, 0);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::parse_datetime;

    #[track_caller]
    fn check(input: &str, expected: Option<&str>) {
        let got = parse_datetime(input).map(|d| d.format("%Y-%m-%d %H:%M:%S").to_string());
        assert_eq!(got.as_deref(), expected, "{input:?}");
    }

    #[test]
    fn real_forms_parse() {
        check("2020-01-31", Some("2020-01-31 00:00:00"));
        check("2148-08-16 00:00:00", Some("2148-08-16 00:00:00"));
        check("1987-11-19T00:22:16.824-05:00", Some("1987-11-19 00:22:16"));
        check("2010-03-02T15:22:53Z", Some("2010-03-02 15:22:53"));
        check("2021-06", Some("2021-06-01 00:00:00"));
        check("1999", Some("1999-01-01 00:00:00"));
        check("2020-01-31 08:15", Some("2020-01-31 08:15:00"));
    }

    #[test]
    fn impossible_or_day_first_dates_fail() {
        check("31/02/2023", None);
        check("2023-02-31", None);
        check("yesterday", None);
        check("", None);
    }
}
