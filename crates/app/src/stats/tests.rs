//! The job on small tables: each report's JSON keys in the order `evident
//! stats --json` printed them before the job moved here, its text, and
//! lines counted in the file (blank lines and dropped rows included).

use std::path::Path;

use serde_json::Value;

use super::*;

fn write(dir: &Path, csv: &str) -> std::path::PathBuf {
    let path = dir.join("t.csv");
    std::fs::write(&path, csv).unwrap();
    path
}

fn keys(report: &StatsReport) -> Vec<String> {
    match serde_json::to_value(report).unwrap() {
        Value::Object(map) => map.keys().cloned().collect(),
        other => panic!("not an object: {other}"),
    }
}

const SMALL: &str = "y,x,g\n1,0,0\n0,1,1\n1,1,0\n0,0,1\n1,1,1\n0,0,0\n1,0,1\n";

#[test]
fn reports_keep_their_json_keys_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let data = write(dir.path(), SMALL);
    let run_with = |estimator| run(&StatsRequest { data: data.clone(), conf_level: 0.95, estimator }).unwrap();
    let fisher = run_with(Estimator::Fisher(CrossTabRequest { row: "x".into(), col: "y".into(), yates: false }));
    assert_eq!(keys(&fisher), ["fisher", "row_levels", "col_levels", "table", "missing"]);
    let ttest =
        run_with(Estimator::TTest(TwoSampleRequest { outcome: "y".into(), group: "g".into(), equal_var: false }));
    assert_eq!(keys(&ttest), ["ttest", "groups", "missing"]);
    let describe =
        run_with(Estimator::Describe(DescribeRequest { columns: vec!["y".into()], group: None, max_levels: 5 }));
    let json = serde_json::to_value(&describe).unwrap();
    let first: Vec<&String> = json["describe"][0].as_object().unwrap().keys().collect();
    assert_eq!(first, ["variable", "summary", "levels", "missing"]);
    assert_eq!(
        describe.to_string(),
        "y: n 7 mean 0.5714 SD 0.5345 median 1.0000 IQR 0.0000-1.0000 min 0.0000 max 1.0000 | rows: 7 used, none missing\n  = 0: 3 (42.9%)\n  = 1: 4 (57.1%)\n"
    );
}

#[test]
fn the_fisher_text_is_what_evident_stats_printed() {
    let dir = tempfile::tempdir().unwrap();
    let data = write(dir.path(), SMALL);
    let estimator = Estimator::Fisher(CrossTabRequest { row: "x".into(), col: "y".into(), yates: false });
    let report = run(&StatsRequest { data, conf_level: 0.95, estimator }).unwrap();
    // R: fisher.test(table(x, y)) gives odds ratio 1.810068 (CI 0.046943 to
    // 175.846210), p = 1.
    let StatsReport::Fisher(fisher) = &report else { panic!("{report:?}") };
    assert_eq!(fisher.crosstab.table, [2.0, 2.0, 1.0, 2.0]);
    assert_eq!(
        report.to_string(),
        "Fisher's exact test of x x y: odds ratio 1.810068 (CI 0.046943 to 175.846210), p = 1.000000e0\nrows: 7 used, none missing\n"
    );
}

#[test]
fn rows_remember_their_line_across_blank_lines_and_missing_values() {
    let dir = tempfile::tempdir().unwrap();
    let data = write(dir.path(), "days,died\n5,1\n\n6,NA\n-2,1\n");
    let estimator = Estimator::KaplanMeier(KaplanMeierRequest {
        time: "days".into(),
        event: "died".into(),
        group: None,
        conf_type: evident_stats::survival::ConfType::Log,
        curves_svg: None,
    });
    let err = run(&StatsRequest { data: data.clone(), conf_level: 0.95, estimator }).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:5: column days = -2 is negative; survival times must be >= 0, check the start and end dates",
            data.display()
        )
    );
}

#[test]
fn every_non_numeric_cell_is_reported_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let data = write(dir.path(), "a,b\n1,x\n\n2,3\nyes,no\n");
    let err = CsvTable::read(&data).unwrap_err();
    let file = data.display();
    assert_eq!(
        err.to_string(),
        format!(
            "3 non-numeric values:\n{file}:2: column b = \"x\" is not a number; recode categories as numbers (e.g. 0/1)\n{file}:5: column a = \"yes\" is not a number; recode categories as numbers (e.g. 0/1)\n{file}:5: column b = \"no\" is not a number; recode categories as numbers (e.g. 0/1)"
        )
    );
}
