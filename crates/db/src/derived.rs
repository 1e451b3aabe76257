//! The derived tables Evident writes under `mimiciv_derived`, ported from
//! MIT-LCP/mimic-code's concepts (commit 8bcbd190) for what the demo
//! supports: `age` (age at each hospital admission), `icustay_detail`
//! (hospital and ICU stay sequence, the first-ICU-stay flag, lengths of
//! stay), `first_day_lab` (first-day laboratory minima and maxima from
//! labevents, columns listed in `data/derived/first_day_lab.tsv`) and
//! `charlson` (Charlson comorbidity index from ICD-9/10 codes,
//! `data/derived/charlson.sql`).
//!
//! One SQL text per table serves both backends; where PostgreSQL and
//! SQLite spell a date operation differently, [`Dialect`] writes it. Flags
//! are the integers 1 and 0 on both (mimic-code's booleans would read as
//! `true` on one backend and `1` on the other), and timestamps are
//! compared as `YYYY-MM-DD HH:MM:SS` values, which SQLite's text order and
//! PostgreSQL's timestamp order agree on.
//!
//! Not ported, because they need `icu/chartevents`, which the demo lacks:
//! first-day vital signs, GCS, urine output, height and weight, blood
//! gases, and the severity scores built on them (SOFA, SAPS II, APS III,
//! OASIS, SIRS, LODS); nor the blood differential (see the TSV).

use std::sync::OnceLock;

/// The two SQL dialects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The calendar year of a timestamp, as an integer.
    fn year(self, x: &str) -> String {
        match self {
            Dialect::Postgres => format!("CAST(EXTRACT(YEAR FROM {x}) AS INTEGER)"),
            Dialect::Sqlite => format!("CAST(strftime('%Y', {x}) AS INTEGER)"),
        }
    }

    /// A timestamp moved by a whole number of hours.
    fn plus_hours(self, x: &str, hours: i32) -> String {
        match self {
            Dialect::Postgres => format!("({x} + INTERVAL '{hours} hours')"),
            Dialect::Sqlite => format!("datetime({x}, '{hours:+} hours')"),
        }
    }

    /// Whole days from the date of `from` to the date of `to`.
    fn days_between_dates(self, from: &str, to: &str) -> String {
        match self {
            Dialect::Postgres => format!("(CAST({to} AS DATE) - CAST({from} AS DATE))"),
            Dialect::Sqlite => format!("CAST(ROUND(julianday(date({to})) - julianday(date({from}))) AS INTEGER)"),
        }
    }

    /// Whole hours between two timestamps truncated to the hour.
    fn hours_between_truncated(self, from: &str, to: &str) -> String {
        match self {
            Dialect::Postgres => format!(
                "CAST(EXTRACT(EPOCH FROM DATE_TRUNC('hour', {to}) - DATE_TRUNC('hour', {from})) / 3600 AS BIGINT)"
            ),
            Dialect::Sqlite => format!(
                "CAST(ROUND((julianday(strftime('%Y-%m-%d %H:00:00', {to})) - julianday(strftime('%Y-%m-%d %H:00:00', {from}))) * 24) AS INTEGER)"
            ),
        }
    }

    /// `x` rounded to `digits` decimals, as a double on both backends.
    fn round(self, x: &str, digits: u32) -> String {
        match self {
            Dialect::Postgres => format!("CAST(ROUND(CAST({x} AS NUMERIC), {digits}) AS DOUBLE PRECISION)"),
            Dialect::Sqlite => format!("ROUND({x}, {digits})"),
        }
    }
}

/// One derived table: its name under `mimiciv_derived`, the `SELECT` that
/// fills it, and the columns to index.
pub(crate) struct DerivedTable {
    pub name: &'static str,
    pub select: String,
    pub indexes: &'static [&'static str],
}

/// The derived tables in the order they must be built (charlson reads age).
pub(crate) fn derived_tables(dialect: Dialect) -> Vec<DerivedTable> {
    vec![
        DerivedTable { name: "age", select: age(dialect), indexes: &["subject_id", "hadm_id"] },
        DerivedTable {
            name: "icustay_detail",
            select: icustay_detail(dialect),
            indexes: &["subject_id", "hadm_id", "stay_id"],
        },
        DerivedTable { name: "first_day_lab", select: first_day_lab(dialect), indexes: &["subject_id", "stay_id"] },
        DerivedTable { name: "charlson", select: charlson(dialect), indexes: &["subject_id", "hadm_id"] },
    ]
}

/// mimic-code demographics/age.sql: anchor_age plus the years from the
/// anchor year to the admission year.
fn age(d: Dialect) -> String {
    format!(
        "SELECT ad.subject_id, ad.hadm_id, ad.admittime, pa.anchor_age, pa.anchor_year,
  pa.anchor_age + {} - pa.anchor_year AS age
FROM mimiciv_hosp.admissions AS ad
INNER JOIN mimiciv_hosp.patients AS pa ON ad.subject_id = pa.subject_id",
        d.year("ad.admittime")
    )
}

/// mimic-code demographics/icustay_detail.sql, with 1/0 flags.
fn icustay_detail(d: Dialect) -> String {
    format!(
        "SELECT ie.subject_id, ie.hadm_id, ie.stay_id,
  pat.gender, pat.dod,
  adm.admittime, adm.dischtime,
  {los_hospital} AS los_hospital,
  pat.anchor_age + {year} - pat.anchor_year AS admission_age,
  adm.race, adm.hospital_expire_flag,
  DENSE_RANK() OVER (PARTITION BY adm.subject_id ORDER BY adm.admittime) AS hospstay_seq,
  CASE WHEN DENSE_RANK() OVER (PARTITION BY adm.subject_id ORDER BY adm.admittime) = 1 THEN 1 ELSE 0 END AS first_hosp_stay,
  ie.intime AS icu_intime, ie.outtime AS icu_outtime,
  {los_icu} AS los_icu,
  DENSE_RANK() OVER (PARTITION BY ie.hadm_id ORDER BY ie.intime) AS icustay_seq,
  CASE WHEN DENSE_RANK() OVER (PARTITION BY ie.hadm_id ORDER BY ie.intime) = 1 THEN 1 ELSE 0 END AS first_icu_stay
FROM mimiciv_icu.icustays AS ie
INNER JOIN mimiciv_hosp.admissions AS adm ON ie.hadm_id = adm.hadm_id
INNER JOIN mimiciv_hosp.patients AS pat ON ie.subject_id = pat.subject_id",
        los_hospital = d.days_between_dates("adm.admittime", "adm.dischtime"),
        year = d.year("adm.admittime"),
        los_icu = d.round(&format!("{} / 24.0", d.hours_between_truncated("ie.intime", "ie.outtime")), 2),
    )
}

/// One first-day lab column pair.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FirstDayLab {
    pub name: String,
    pub itemid: i64,
    pub positive: bool,
    pub max: Option<f64>,
}

/// The rows of `data/first_day_lab.tsv`, checked (compiled in; the tests
/// read it, so a malformed file cannot ship).
pub(crate) fn first_day_labs() -> &'static [FirstDayLab] {
    static LABS: OnceLock<Vec<FirstDayLab>> = OnceLock::new();
    LABS.get_or_init(|| {
        parse_first_day_labs(include_str!("../data/derived/first_day_lab.tsv"))
            .unwrap_or_else(|e| panic!("data/derived/first_day_lab.tsv: {e}"))
    })
}

fn parse_first_day_labs(text: &str) -> Result<Vec<FirstDayLab>, String> {
    let mut labs: Vec<FirstDayLab> = Vec::new();
    for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l)) {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let [name, itemid, positive, max, _group] = fields[..] else {
            return Err(format!("line {n}: expected 5 tab-separated fields, found {}", fields.len()));
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
            return Err(format!("line {n}: name {name:?} is not a lower-case SQL identifier"));
        }
        if labs.iter().any(|l| l.name == name) {
            return Err(format!("line {n}: {name} is listed twice"));
        }
        let itemid = itemid.parse().map_err(|_| format!("line {n}: itemid {itemid:?} is not an integer"))?;
        let positive = match positive {
            "yes" => true,
            "no" => false,
            other => return Err(format!("line {n}: positive is {other:?}, expected yes or no")),
        };
        let max = match max {
            "-" => None,
            v => Some(v.parse().map_err(|_| format!("line {n}: max {v:?} is not a number or -"))?),
        };
        labs.push(FirstDayLab { name: name.to_string(), itemid, positive, max });
    }
    Ok(labs)
}

/// mimic-code firstday/first_day_lab.sql over its measurement concepts:
/// each specimen's value per item (the concept tables' MAX per specimen),
/// then per ICU stay the minimum and maximum over specimens charted from 6
/// hours before ICU admission to 24 hours after.
fn first_day_lab(d: Dialect) -> String {
    let labs = first_day_labs();
    let per_specimen: Vec<String> = labs
        .iter()
        .map(|lab| {
            let mut condition = format!("le.itemid = {}", lab.itemid);
            if lab.positive {
                condition.push_str(" AND le.valuenum > 0");
            }
            if let Some(max) = lab.max {
                condition.push_str(&format!(" AND le.valuenum <= {max}"));
            }
            format!("    MAX(CASE WHEN {condition} THEN le.valuenum ELSE NULL END) AS {}", lab.name)
        })
        .collect();
    let itemids: Vec<String> = labs.iter().map(|l| l.itemid.to_string()).collect();
    let per_stay: Vec<String> =
        labs.iter().map(|lab| format!("  MIN(lab.{0}) AS {0}_min, MAX(lab.{0}) AS {0}_max", lab.name)).collect();
    format!(
        "WITH lab AS (
  SELECT le.subject_id, le.specimen_id, MAX(le.charttime) AS charttime,
{per_specimen}
  FROM mimiciv_hosp.labevents AS le
  WHERE le.itemid IN ({itemids}) AND le.valuenum IS NOT NULL
  GROUP BY le.subject_id, le.specimen_id
)
SELECT ie.subject_id, ie.stay_id,
{per_stay}
FROM mimiciv_icu.icustays AS ie
LEFT JOIN lab
  ON lab.subject_id = ie.subject_id
  AND lab.charttime >= {from}
  AND lab.charttime <= {to}
GROUP BY ie.subject_id, ie.stay_id",
        per_specimen = per_specimen.join(",\n"),
        itemids = itemids.join(", "),
        per_stay = per_stay.join(",\n"),
        from = d.plus_hours("ie.intime", -6),
        to = d.plus_hours("ie.intime", 24),
    )
}

/// mimic-code comorbidity/charlson.sql (`data/derived/charlson.sql`).
fn charlson(d: Dialect) -> String {
    let sql = include_str!("../data/derived/charlson.sql");
    let code: String = sql.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n");
    match d {
        Dialect::Postgres => code,
        // SQLite's scalar MAX with several arguments is GREATEST.
        Dialect::Sqlite => code.replace("GREATEST(", "MAX("),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_day_lab_list_reads() {
        let labs = first_day_labs();
        assert_eq!(labs.len(), 33);
        let creatinine = labs.iter().find(|l| l.name == "creatinine").unwrap();
        assert_eq!(
            creatinine,
            &FirstDayLab { name: "creatinine".into(), itemid: 50912, positive: true, max: Some(150.0) }
        );
        assert!(parse_first_day_labs("a\t1\tmaybe\t-\tx").unwrap_err().contains("line 1: positive"));
        assert!(parse_first_day_labs("a\t1\tyes\t-\tx\na\t2\tyes\t-\tx").unwrap_err().contains("twice"));
    }

    #[test]
    fn sqlite_reads_greatest_as_max() {
        let sql = charlson(Dialect::Sqlite);
        assert!(!sql.contains("GREATEST(") && sql.contains("MAX(mild_liver_disease, 3 * severe_liver_disease)"));
        assert!(charlson(Dialect::Postgres).contains("GREATEST(mild_liver_disease"));
    }
}
