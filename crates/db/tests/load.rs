//! Loading the MIMIC-IV demo into SQLite and PostgreSQL: every row of
//! every file arrives (counted by the csv crate alone), in the official
//! schemas with their keys and indexes, the derived tables agree with
//! values computed here from the CSV files, and both backends hold the
//! same rows.

mod support;

use std::collections::{BTreeMap, HashMap};

use chrono::{Duration, NaiveDateTime};
use evident_db::{load_mimic, DatabaseUrl, LoadEvent, QueryLimits, ReadOnlyConnection, Value};
use support::{demo_dir, demo_records, sqlite_url, TempPgDatabase};

fn limits() -> QueryLimits {
    QueryLimits { max_rows: 1_000_000, max_text_chars: 10_000, ..QueryLimits::default() }
}

fn rows(conn: &mut ReadOnlyConnection, sql: &str) -> Vec<Vec<Value>> {
    let result = conn.query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    assert!(result.rows.len() < 1_000_000);
    result.rows
}

fn count(conn: &mut ReadOnlyConnection, table: &str) -> i64 {
    match rows(conn, &format!("SELECT count(*) FROM {table}"))[0][0] {
        Value::Integer(n) => n,
        ref other => panic!("count is {other:?}"),
    }
}

/// Rows per table file, header excluded, by the csv crate alone.
fn expected_counts() -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for module in ["hosp", "icu"] {
        for entry in std::fs::read_dir(demo_dir().join(module)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let table = format!("mimiciv_{module}.{}", name.trim_end_matches(".csv.gz"));
            counts.insert(table, demo_records(&format!("{module}/{name}")).len() as i64 - 1);
        }
    }
    counts
}

fn check_load(url: &DatabaseUrl) -> ReadOnlyConnection {
    let mut events = Vec::new();
    let report = load_mimic(&demo_dir(), url, &mut |e| events.push(e.clone())).unwrap();
    let expected = expected_counts();
    assert_eq!(expected.len(), 30, "the demo has 30 table files");
    let mut conn = ReadOnlyConnection::connect(url, limits()).unwrap();
    for (table, n) in &expected {
        let loaded = report.tables.iter().find(|t| &t.table == table).unwrap_or_else(|| panic!("{table} not loaded"));
        assert_eq!(loaded.rows as i64, *n, "{table} in the report");
        assert_eq!(count(&mut conn, table), *n, "{table} in the database");
    }
    assert_eq!(report.rows as i64, expected.values().sum::<i64>());
    // chartevents is optional and absent from the demo: an empty table and a note.
    assert_eq!(count(&mut conn, "mimiciv_icu.chartevents"), 0);
    assert!(report.notes.iter().any(|n| n.contains("chartevents.csv.gz is absent")), "{:?}", report.notes);
    assert!(matches!(events[0], LoadEvent::Started { tables: 31 }));
    assert_eq!(
        report.derived.iter().map(|d| d.table.as_str()).collect::<Vec<_>>(),
        [
            "mimiciv_derived.age",
            "mimiciv_derived.icustay_detail",
            "mimiciv_derived.first_day_lab",
            "mimiciv_derived.charlson"
        ]
    );

    // Columns are typed: integers, reals and timestamps read back as such.
    let row = &rows(
        &mut conn,
        "SELECT subject_id, valuenum, charttime FROM mimiciv_hosp.labevents WHERE labevent_id = 172061",
    )[0];
    let demo_row = demo_records("hosp/labevents.csv.gz").into_iter().find(|r| &r[0] == "172061").unwrap();
    assert_eq!(row[0], Value::Integer(demo_row[1].parse().unwrap()));
    assert_eq!(row[1], Value::Real(demo_row[9].parse().unwrap()));
    assert_eq!(row[2], Value::Text(demo_row[6].to_string()));

    // Primary keys and the cohort indexes are there.
    let tables = conn.tables().unwrap();
    let patients = tables.iter().find(|t| t.qualified_name() == "mimiciv_hosp.patients").unwrap();
    let subject = patients.columns.iter().find(|c| c.name == "subject_id").unwrap();
    assert!(subject.primary_key && !subject.nullable);
    let diagnoses = conn.describe("mimiciv_hosp.diagnoses_icd").unwrap();
    let keyed: Vec<&str> = diagnoses.columns.iter().filter(|c| c.primary_key).map(|c| c.name.as_str()).collect();
    assert_eq!(keyed, ["hadm_id", "seq_num", "icd_code", "icd_version"]);
    conn
}

fn index_names_sqlite(path: &std::path::Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(path.with_file_name("mimic.db.mimiciv_hosp")).unwrap();
    let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY name").unwrap();
    stmt.query_map([], |r| r.get(0)).unwrap().map(|r| r.unwrap()).collect()
}

#[test]
fn the_demo_loads_into_sqlite_in_the_official_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(dir.path());
    let mut conn = check_load(&url);
    let indexes = index_names_sqlite(url.sqlite_path().unwrap());
    for expected in [
        "labevents_subject_id_idx",
        "labevents_hadm_id_idx",
        "labevents_itemid_idx",
        "labevents_charttime_storetime_idx",
    ] {
        assert!(indexes.contains(&expected.to_string()), "{expected} not in {indexes:?}");
    }
    check_derived_against_the_csv_files(&mut conn);
    // The layout a client outside Evident attaches.
    let schemas = evident_db::sqlite::attached_schemas(url.sqlite_path().unwrap()).unwrap();
    let names: Vec<&str> = schemas.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(names, ["mimiciv_hosp", "mimiciv_icu", "mimiciv_derived"]);
    assert!(schemas.iter().all(|(_, f)| f.is_file()));
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn the_demo_loads_into_postgresql_and_reads_the_same_as_in_sqlite() {
    let pg = TempPgDatabase::new();
    let mut pg_conn = check_load(&pg.url);
    let indexes: Vec<String> = pg
        .client()
        .query("SELECT indexname FROM pg_indexes WHERE schemaname = 'mimiciv_hosp' AND tablename = 'labevents'", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for expected in ["labevents_pkey", "labevents_subject_id_idx", "labevents_itemid_idx"] {
        assert!(indexes.contains(&expected.to_string()), "{expected} not in {indexes:?}");
    }
    check_derived_against_the_csv_files(&mut pg_conn);

    let dir = tempfile::tempdir().unwrap();
    let sqlite = sqlite_url(dir.path());
    load_mimic(&demo_dir(), &sqlite, &mut |_| {}).unwrap();
    let mut sqlite_conn = ReadOnlyConnection::connect(&sqlite, limits()).unwrap();
    for (table, order) in [
        ("mimiciv_derived.age", "hadm_id"),
        ("mimiciv_derived.icustay_detail", "stay_id"),
        ("mimiciv_derived.first_day_lab", "stay_id"),
        ("mimiciv_derived.charlson", "hadm_id"),
        ("mimiciv_hosp.patients", "subject_id"),
        ("mimiciv_hosp.admissions", "hadm_id"),
        ("mimiciv_icu.icustays", "stay_id"),
        ("mimiciv_hosp.diagnoses_icd", "hadm_id, seq_num"),
        ("mimiciv_hosp.labevents", "labevent_id"),
    ] {
        let sql = format!("SELECT * FROM {table} ORDER BY {order}");
        let a = sqlite_conn.query(&sql).unwrap();
        let b = pg_conn.query(&sql).unwrap();
        assert_eq!(a.columns, b.columns, "{table}");
        assert_eq!(a.rows.len(), b.rows.len(), "{table}");
        assert!(!a.rows.is_empty(), "{table}");
        for (i, (x, y)) in a.rows.iter().zip(&b.rows).enumerate() {
            for (c, (u, v)) in x.iter().zip(y).enumerate() {
                let same = match (u, v) {
                    (Value::Real(p), Value::Real(q)) => (p - q).abs() <= 1e-12 * p.abs().max(1.0),
                    _ => u == v,
                };
                assert!(same, "{table} row {i} column {}: SQLite {u:?}, PostgreSQL {v:?}", a.columns[c]);
            }
        }
    }
    pg_conn.close().unwrap();
}

fn timestamp(text: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").unwrap()
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Integer(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// Each derived table against the same quantity computed here from the
/// CSV files.
fn check_derived_against_the_csv_files(conn: &mut ReadOnlyConnection) {
    // Age at admission: anchor_age + admission year - anchor_year.
    let patients: HashMap<String, (i64, i64)> = demo_records("hosp/patients.csv.gz")
        .iter()
        .skip(1)
        .map(|r| (r[0].to_string(), (r[2].parse().unwrap(), r[3].parse().unwrap())))
        .collect();
    let admissions = demo_records("hosp/admissions.csv.gz");
    let ages: HashMap<i64, i64> =
        rows(conn, "SELECT hadm_id, age FROM mimiciv_derived.age").iter().map(|r| (int(&r[0]), int(&r[1]))).collect();
    assert_eq!(ages.len(), admissions.len() - 1);
    for r in admissions.iter().skip(1) {
        let (anchor_age, anchor_year) = patients[&r[0]];
        let year: i64 = r[2][..4].parse().unwrap();
        assert_eq!(ages[&r[1].parse::<i64>().unwrap()], anchor_age + year - anchor_year, "hadm {}", &r[1]);
    }

    // First ICU stay: the earliest intime within its admission.
    let stays = demo_records("icu/icustays.csv.gz");
    let mut first_intime: HashMap<String, NaiveDateTime> = HashMap::new();
    for r in stays.iter().skip(1) {
        let t = timestamp(&r[5]);
        first_intime.entry(r[1].to_string()).and_modify(|f| *f = (*f).min(t)).or_insert(t);
    }
    let flags = rows(conn, "SELECT hadm_id, icu_intime, first_icu_stay FROM mimiciv_derived.icustay_detail");
    assert_eq!(flags.len(), stays.len() - 1);
    let mut firsts = 0;
    for r in &flags {
        let Value::Text(intime) = &r[1] else { panic!() };
        let expected = first_intime[&int(&r[0]).to_string()] == timestamp(intime);
        assert_eq!(int(&r[2]) == 1, expected, "{r:?}");
        firsts += expected as usize;
    }
    assert_eq!(firsts, first_intime.len());

    // First-day creatinine: per specimen the largest valid value, then per
    // stay the min and max over specimens from 6 h before to 24 h after ICU
    // admission (mimic-code's first_day_lab over its chemistry concept).
    let mut specimens: HashMap<(String, String), (NaiveDateTime, f64)> = HashMap::new();
    for r in demo_records("hosp/labevents.csv.gz").iter().skip(1) {
        if &r[4] != "50912" || r[9].is_empty() {
            continue;
        }
        let v: f64 = r[9].parse().unwrap();
        if v <= 0.0 || v > 150.0 {
            continue;
        }
        let entry = specimens.entry((r[1].to_string(), r[3].to_string())).or_insert((timestamp(&r[6]), v));
        entry.1 = entry.1.max(v);
        entry.0 = entry.0.max(timestamp(&r[6]));
    }
    let derived: HashMap<i64, (Value, Value)> =
        rows(conn, "SELECT stay_id, creatinine_min, creatinine_max FROM mimiciv_derived.first_day_lab")
            .into_iter()
            .map(|r| (int(&r[0]), (r[1].clone(), r[2].clone())))
            .collect();
    let mut with_values = 0;
    for r in stays.iter().skip(1) {
        let intime = timestamp(&r[5]);
        let values: Vec<f64> = specimens
            .iter()
            .filter(|((subject, _), (t, _))| {
                subject == &r[0] && *t >= intime - Duration::hours(6) && *t <= intime + Duration::hours(24)
            })
            .map(|(_, (_, v))| *v)
            .collect();
        let got = &derived[&r[2].parse::<i64>().unwrap()];
        if values.is_empty() {
            assert_eq!(got, &(Value::Null, Value::Null), "stay {}", &r[2]);
        } else {
            with_values += 1;
            let min = values.iter().cloned().fold(f64::INFINITY, f64::min);
            let max = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            assert_eq!(got, &(Value::Real(min), Value::Real(max)), "stay {}", &r[2]);
        }
    }
    assert!(with_values > 100, "only {with_values} stays have a first-day creatinine");

    // Charlson: myocardial infarction from the ICD codes, and the index
    // never below the age score.
    let mut infarct: HashMap<String, bool> = HashMap::new();
    for r in demo_records("hosp/diagnoses_icd.csv.gz").iter().skip(1) {
        let code = &r[3];
        let hit = match &r[4] {
            "9" => code.starts_with("410") || code.starts_with("412"),
            _ => code.starts_with("I21") || code.starts_with("I22") || code.starts_with("I252"),
        };
        *infarct.entry(r[1].to_string()).or_default() |= hit;
    }
    let charlson = rows(
        conn,
        "SELECT hadm_id, myocardial_infarct, age_score, charlson_comorbidity_index FROM mimiciv_derived.charlson",
    );
    assert_eq!(charlson.len(), admissions.len() - 1);
    let mut infarcts = 0;
    for r in &charlson {
        let expected = infarct.get(&int(&r[0]).to_string()).copied().unwrap_or(false);
        assert_eq!(int(&r[1]) == 1, expected, "{r:?}");
        infarcts += expected as usize;
        assert!(int(&r[3]) >= int(&r[2]), "{r:?}");
    }
    assert!(infarcts > 0, "no admission with a myocardial infarction: the check would prove nothing");
}
