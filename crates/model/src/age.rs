//! Ages in whole years: from a birth date, and from MIMIC-IV's anchor age,
//! which is an age at some time in a (shifted) anchor year, not a birth
//! date. Ingestion writes the anchor age into the patient's demographics
//! line ([`AnchorAge::line`]); screening and chart questions read it back
//! ([`AnchorAge::parse`]) and agree on the ages it allows.

use chrono::{Datelike, NaiveDate};

/// Whole years from `birth` to `day`.
pub fn age_on(birth: NaiveDate, day: NaiveDate) -> i32 {
    let had_birthday = (day.month(), day.day()) >= (birth.month(), birth.day());
    day.year() - birth.year() - i32::from(!had_birthday)
}

/// MIMIC-IV's `anchor_age` in its `anchor_year`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnchorAge {
    pub age: i32,
    pub year: i32,
}

impl AnchorAge {
    /// MIMIC-IV gives every age over 89 in the anchor year as this.
    pub const OVER_89: i32 = 91;

    /// The demographics line ingestion stores for a MIMIC-IV patient:
    /// `Sex F; age 52 in anchor year 2180 (real years 2014 - 2016)`.
    pub fn line(sex: &str, age: &str, year: i32, real_years: &str) -> String {
        format!("Sex {sex}; age {age} in anchor year {year} (real years {real_years})")
    }

    /// The anchor age and year in a demographics line (any case).
    pub fn parse(text: &str) -> Option<AnchorAge> {
        let lower = text.to_ascii_lowercase();
        let rest = &lower[lower.find("age ")? + 4..];
        let (age, rest) = rest.split_once(" in anchor year ")?;
        let year: String = rest.chars().take_while(char::is_ascii_digit).collect();
        Some(AnchorAge { age: age.trim().parse().ok()?, year: year.parse().ok()? })
    }

    /// Over 89 in the anchor year: the real age has no upper bound.
    pub fn over_89(&self) -> bool {
        self.age >= Self::OVER_89
    }

    /// The earliest and latest birth dates the anchor allows: aged N at
    /// some time in year Y means born in Y - N - 1 or Y - N; over 89, born
    /// in Y - 90 or before (the earliest `None`: no bound).
    pub fn birth_window(&self) -> Option<(Option<NaiveDate>, NaiveDate)> {
        let at_least = self.age.min(Self::OVER_89 - 1);
        let latest = NaiveDate::from_ymd_opt(self.year - at_least, 12, 31)?;
        if self.over_89() {
            return Some((None, latest));
        }
        Some((Some(NaiveDate::from_ymd_opt(self.year - self.age - 1, 1, 1)?), latest))
    }

    /// The youngest and oldest whole ages on `day` (the oldest `None` when
    /// over 89), from [`AnchorAge::birth_window`]: one of up to three
    /// whole years.
    pub fn ages_on(&self, day: NaiveDate) -> Option<(i32, Option<i32>)> {
        let (earliest, latest) = self.birth_window()?;
        Some((age_on(latest, day).max(0), earliest.map(|e| age_on(e, day).max(0))))
    }
}

/// The oldest age a rule that needs a bound assumes when the record gives
/// none (MIMIC-IV's ages over 89).
pub const OLDEST_AGE: i32 = 120;

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    #[test]
    fn birthdays() {
        assert_eq!(age_on(d("1961-09-20"), d("2024-01-15")), 62);
        assert_eq!(age_on(d("1961-09-20"), d("2023-09-19")), 61);
        assert_eq!(age_on(d("1961-09-20"), d("2023-09-20")), 62);
        assert_eq!(age_on(d("2000-02-29"), d("2001-02-28")), 0);
    }

    #[test]
    fn the_line_ingestion_writes_parses_back() {
        let line = AnchorAge::line("F", "52", 2180, "2014 - 2016");
        assert_eq!(line, "Sex F; age 52 in anchor year 2180 (real years 2014 - 2016)");
        assert_eq!(AnchorAge::parse(&line), Some(AnchorAge { age: 52, year: 2180 }));
        assert_eq!(
            AnchorAge::parse("sex m; age 91 in anchor year 2110 (real years 2008 - 2010); date of death 2111-01-02"),
            Some(AnchorAge { age: 91, year: 2110 })
        );
        assert_eq!(AnchorAge::parse("Sex F; no age"), None);
    }

    #[test]
    fn an_anchor_age_allows_up_to_three_ages() {
        let a = AnchorAge { age: 52, year: 2180 };
        assert_eq!(a.ages_on(d("2180-07-01")), Some((51, Some(53))));
        assert_eq!(a.ages_on(d("2183-07-01")), Some((54, Some(56))));
        // 89 and 90 are real ages; only 91 means "over 89".
        assert_eq!(AnchorAge { age: 89, year: 2150 }.ages_on(d("2150-06-01")), Some((88, Some(90))));
        assert_eq!(AnchorAge { age: 91, year: 2150 }.ages_on(d("2150-06-01")), Some((89, None)));
        assert_eq!(AnchorAge { age: 91, year: 2150 }.ages_on(d("2152-06-01")), Some((91, None)));
        assert_eq!(AnchorAge { age: 52, year: 2180 }.birth_window(), Some((Some(d("2127-01-01")), d("2128-12-31"))));
        assert_eq!(AnchorAge { age: 91, year: 2150 }.birth_window(), Some((None, d("2060-12-31"))));
    }
}
