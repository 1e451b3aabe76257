//! The R sandbox and the cohort audit against the MIMIC-IV demo loaded by
//! `evident-db` into SQLite: sandboxed R, through the workspace's ready
//! connection script, rebuilds a development task's cohort and matches the
//! reference analysis (which read the csv.gz files, not this database); it
//! cannot write the database; and the rule checks pass a real cohort and
//! catch a fabricated patient.

mod support;

use std::path::{Path, PathBuf};

use evident_db::{QueryLimits, ReadOnlyConnection};
use evident_rwe::audit::{rule_checks, AuditTable, AUDIT_FILE};
use evident_rwe::database::r_database;
use evident_rwe::sandbox::{SandboxConfig, Workspace};
use evident_rwe::{Gold, Task};
use support::demo_sqlite;

fn workspace(dir: &Path) -> Workspace {
    let db = r_database(demo_sqlite()).unwrap();
    Workspace::create(&dir.join("ws"), db, &[]).unwrap()
}

fn task_gold(id: &str) -> Gold {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks").join(id);
    let task = Task::load(&dir.join("task.yaml")).unwrap().task;
    Gold::load(&dir.join("gold.json"), &task).unwrap()
}

/// R an agent could write for the lactate task: the cohort by SQL through
/// `db_connect.R`, the audit file, and the baseline counts.
const LACTATE_COHORT_R: &str = r#"
source("db_connect.R")
stays <- dbGetQuery(con, "
  SELECT i.subject_id, i.hadm_id, i.stay_id, i.intime, a.hospital_expire_flag,
         p.anchor_age + CAST(substr(i.intime, 1, 4) AS INTEGER) - p.anchor_year AS age
  FROM mimiciv_icu.icustays i
  JOIN mimiciv_hosp.patients p ON p.subject_id = i.subject_id
  JOIN mimiciv_hosp.admissions a ON a.hadm_id = i.hadm_id
  WHERE i.intime = (SELECT min(j.intime) FROM mimiciv_icu.icustays j WHERE j.subject_id = i.subject_id)")
lab <- dbGetQuery(con, "
  SELECT i.stay_id, max(l.valuenum) AS lactate
  FROM mimiciv_icu.icustays i
  JOIN mimiciv_hosp.labevents l ON l.subject_id = i.subject_id
  WHERE l.itemid = 50813 AND l.valuenum IS NOT NULL
    AND julianday(l.charttime) BETWEEN julianday(i.intime) - 0.25 AND julianday(i.intime) + 1
  GROUP BY i.stay_id")
cohort <- merge(stays[stays$age >= 18, ], lab, by = "stay_id")
write.csv(cohort[, c("subject_id", "hadm_id", "stay_id", "age", "lactate")], "cohort_audit.csv", row.names = FALSE)
cat("n_patients", nrow(cohort), "\n")
cat("n_deaths", sum(cohort$hospital_expire_flag), "\n")
"#;

#[test]
fn sandboxed_r_rebuilds_a_task_cohort_and_the_rules_pass_it() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    let r = ws.run_code(&SandboxConfig::default(), "cohort", LACTATE_COHORT_R).unwrap();
    assert!(r.succeeded(), "{}", r.observation(6000));
    let gold = task_gold("lactate-hospital-mortality");
    assert!(r.stdout.contains(&format!("n_patients {} ", gold.fields["n_patients"])), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("n_deaths {} ", gold.fields["n_deaths"])), "{}", r.stdout);

    let table = AuditTable::read(&ws.root().join(AUDIT_FILE)).unwrap();
    let mut conn = ReadOnlyConnection::connect(demo_sqlite(), QueryLimits::default()).unwrap();
    let report = rule_checks(&table, &mut conn).unwrap();
    assert!(report.passed(), "{:?}", report.checks);
    assert_eq!(report.rows, 74);

    // The same file with one fabricated patient and one fabricated stay.
    let text = std::fs::read_to_string(ws.root().join(AUDIT_FILE)).unwrap();
    let fabricated = format!("{text}19999999,29999999,39999999,70,2.5\n");
    let path: PathBuf = dir.path().join("fabricated.csv");
    std::fs::write(&path, fabricated).unwrap();
    let report = rule_checks(&AuditTable::read(&path).unwrap(), &mut conn).unwrap();
    let failed: Vec<&str> = report.checks.iter().filter(|c| !c.passed).map(|c| c.rule.as_str()).collect();
    assert_eq!(failed, vec!["subject_id_exists", "hadm_id_exists", "stay_id_exists"]);
    assert!(report.checks.iter().any(|c| c.detail.contains("1 not in mimiciv_hosp.patients (19999999)")));
}

#[test]
fn sandboxed_r_cannot_write_the_loaded_database() {
    let dir = tempfile::tempdir().unwrap();
    let ws = workspace(dir.path());
    for sql in [
        "DELETE FROM mimiciv_hosp.patients",
        "UPDATE mimiciv_hosp.admissions SET hospital_expire_flag = 1",
        "DROP TABLE mimiciv_icu.icustays",
        "CREATE TABLE mimiciv_hosp.fabricated (x INTEGER)",
    ] {
        let r = ws
            .run_code(
                &SandboxConfig::default(),
                "write",
                &format!("source(\"db_connect.R\")\ndbExecute(con, \"{sql}\")"),
            )
            .unwrap();
        assert!(!r.succeeded(), "{sql} succeeded");
    }
    let mut conn = ReadOnlyConnection::connect(demo_sqlite(), QueryLimits::default()).unwrap();
    let n = conn.query("SELECT count(*) FROM mimiciv_hosp.patients").unwrap();
    assert_eq!(n.rows[0][0].as_f64(), Some(100.0));
}
