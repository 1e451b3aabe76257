#!/usr/bin/env python3
"""Gold eligibility for criteria/mimic-iv-demo-checks.yaml, computed in SQL
straight from the MIMIC-IV demo's CSV tables (not from Evident's store), so
that it is independent of Evident's ingestion, lab catalogue, unit table and
checks. Writes one CSV row per patient and criterion:
patient_id,criterion_id,gold  with gold MET, NOT MET or NOT ENOUGH INFORMATION
(nothing recorded in the window, as the criteria define it).

Definitions (the clinical reading of each criterion, chosen before looking
at Evident's answers):
- screening date: the day of the patient's latest dated record among
  admissions (admittime), labevents with a value (charttime), prescriptions
  (starttime), procedures_icd (chartdate), and January 1 of the anchor year.
- age: anchor_age + (screening year - anchor_year), MIMIC-IV's documented
  approximation (anchor ages of 91 stand for "over 89").
- labs: label and fluid from d_labitems ('Creatinine'/Blood, 'Hemoglobin'/Blood,
  'Platelet Count'/Blood, 'Potassium' or 'Potassium, Whole Blood'/Blood,
  '% Hemoglobin A1c'/Blood), valuenum in the table's own unit; the most recent
  row by charttime (then labevent_id) on or before the screening date.
- creatinine-uln: blood creatinine rows with a value in the 12 months up to
  the screening date; MET when any valuenum exceeds its own row's
  ref_range_upper; NOT MET when every row has a valuenum and a
  ref_range_upper and none exceeds it; otherwise (no row, or rows that
  cannot be compared and none exceeding) NOT ENOUGH INFORMATION.
- diagnoses: ICD code prefixes in diagnoses_icd, dated at the admission's
  admittime; NOT ENOUGH INFORMATION when the patient has no diagnosis row
  on or before the screening date.
- prescriptions: drug name contains the word (case-insensitive) with a
  starttime in the window; NOT ENOUGH INFORMATION when no prescription at
  all is in the window.

Usage: scripts/mimic-checks-gold.py ../shared/data/mimic-iv-demo/hosp > gold.csv
"""

import csv
import gzip
import re
import sqlite3
import sys
from pathlib import Path

TABLES = {
    "patients": ["subject_id", "gender", "anchor_age", "anchor_year"],
    "admissions": ["subject_id", "hadm_id", "admittime"],
    "labevents": ["labevent_id", "subject_id", "itemid", "charttime", "value", "valuenum", "ref_range_upper"],
    "d_labitems": ["itemid", "label", "fluid"],
    "prescriptions": ["subject_id", "starttime", "drug"],
    "diagnoses_icd": ["subject_id", "hadm_id", "icd_code", "icd_version"],
    "procedures_icd": ["subject_id", "chartdate"],
}


def load(db, hosp):
    for table, columns in TABLES.items():
        with gzip.open(hosp / f"{table}.csv.gz", "rt", newline="") as f:
            reader = csv.DictReader(f)
            rows = [[r[c] if r[c] != "" else None for c in columns] for r in reader]
        db.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
        db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(columns))})", rows)
    db.execute("CREATE INDEX lab_by_subject ON labevents(subject_id, itemid)")


SCREENING = """
CREATE TABLE screening AS
SELECT subject_id, max(day) AS day FROM (
    SELECT subject_id, date(admittime) AS day FROM admissions
    UNION ALL SELECT subject_id, date(charttime) FROM labevents WHERE value IS NOT NULL OR valuenum IS NOT NULL
    UNION ALL SELECT subject_id, date(starttime) FROM prescriptions WHERE starttime IS NOT NULL
    UNION ALL SELECT subject_id, date(chartdate) FROM procedures_icd
    UNION ALL SELECT subject_id, printf('%04d-01-01', anchor_year) FROM patients
) GROUP BY subject_id
"""

LABS = {
    "creatinine": ("label = 'Creatinine'", lambda v: v > 1.5),
    "anemia": ("label = 'Hemoglobin'", lambda v: v < 10),
    "potassium": ("label IN ('Potassium', 'Potassium, Whole Blood')", lambda v: 3.5 <= v <= 5.0),
    "hba1c": ("label = '% Hemoglobin A1c'", lambda v: v >= 6.5),
}

DIAGNOSES = {
    "diabetes": [("9", "250"), ("10", "E08"), ("10", "E09"), ("10", "E10"), ("10", "E11"), ("10", "E13")],
    "heart-failure": [("9", "428"), ("10", "I50")],
    "ckd": [("9", "585"), ("10", "N18")],
}


def main():
    hosp = Path(sys.argv[1])
    db = sqlite3.connect(":memory:")
    load(db, hosp)
    db.execute(SCREENING)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["patient_id", "criterion_id", "gold"])
    patients = db.execute(
        "SELECT p.subject_id, gender, CAST(anchor_age AS INT), CAST(anchor_year AS INT), s.day "
        "FROM patients p JOIN screening s USING (subject_id) ORDER BY p.subject_id"
    ).fetchall()
    met = lambda b: "MET" if b else "NOT MET"
    for subject, gender, anchor_age, anchor_year, day in patients:
        row = lambda cid, gold: out.writerow([subject, cid, gold])
        age = anchor_age + int(day[:4]) - anchor_year
        row("age65", met(age >= 65))
        row("female", met(gender == "F"))
        for cid, (label, test) in LABS.items():
            last = db.execute(
                f"SELECT valuenum FROM labevents l JOIN d_labitems d USING (itemid) "
                f"WHERE subject_id = ? AND d.fluid = 'Blood' AND d.{label} "
                f"AND (l.value IS NOT NULL OR l.valuenum IS NOT NULL) AND date(charttime) <= ? "
                f"ORDER BY charttime DESC, CAST(labevent_id AS INT) DESC LIMIT 1",
                (subject, day),
            ).fetchone()
            if last is None or last[0] is None:
                row(cid, "NOT ENOUGH INFORMATION")
            else:
                row(cid, met(test(float(last[0]))))
        start = db.execute("SELECT date(?, '-12 months')", (day,)).fetchone()[0]
        platelets = db.execute(
            "SELECT CAST(valuenum AS REAL) FROM labevents l JOIN d_labitems d USING (itemid) "
            "WHERE subject_id = ? AND d.fluid = 'Blood' AND d.label = 'Platelet Count' AND valuenum IS NOT NULL "
            "AND date(charttime) BETWEEN ? AND ?",
            (subject, start, day),
        ).fetchall()
        row("thrombocytopenia", "NOT ENOUGH INFORMATION" if not platelets else met(any(v < 100 for (v,) in platelets)))
        creatinine = db.execute(
            "SELECT valuenum, ref_range_upper FROM labevents l JOIN d_labitems d USING (itemid) "
            "WHERE subject_id = ? AND d.fluid = 'Blood' AND d.label = 'Creatinine' "
            "AND (l.value IS NOT NULL OR l.valuenum IS NOT NULL) AND date(charttime) BETWEEN ? AND ?",
            (subject, start, day),
        ).fetchall()
        comparable = [(float(v), float(h)) for (v, h) in creatinine if v is not None and h is not None]
        if any(v > h for (v, h) in comparable):
            row("creatinine-uln", "MET")
        elif creatinine and len(comparable) == len(creatinine):
            row("creatinine-uln", "NOT MET")
        else:
            row("creatinine-uln", "NOT ENOUGH INFORMATION")
        diagnoses = db.execute(
            "SELECT icd_version, icd_code FROM diagnoses_icd d JOIN admissions a USING (hadm_id) "
            "WHERE d.subject_id = ? AND date(a.admittime) <= ?",
            (subject, day),
        ).fetchall()
        for cid, prefixes in DIAGNOSES.items():
            if not diagnoses:
                row(cid, "NOT ENOUGH INFORMATION")
            else:
                hit = any(v == pv and c.startswith(pc) for (v, c) in diagnoses for (pv, pc) in prefixes)
                row(cid, met(hit))
        drugs = [
            d
            for (d,) in db.execute(
                "SELECT drug FROM prescriptions WHERE subject_id = ? AND starttime IS NOT NULL "
                "AND date(starttime) BETWEEN ? AND ?",
                (subject, start, day),
            )
        ]
        has = lambda word: any(re.search(rf"(?<![a-z0-9]){word}(?![a-z0-9])", (d or "").lower()) for d in drugs)
        row("insulin", "NOT ENOUGH INFORMATION" if not drugs else met(has("insulin")))
        row("no-warfarin", "NOT ENOUGH INFORMATION" if not drugs else met(not has("warfarin")))


if __name__ == "__main__":
    main()
