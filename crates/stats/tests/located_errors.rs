//! Errors placed in the caller's terms: [`StatsError::locate`] renames the
//! estimator's argument columns to the caller's columns and moves a 0-based
//! row to its line in the caller's file; unlocated messages stay as they are.

use evident_stats::glm::{glm, lm, Family, GlmConfig, Predictor};
use evident_stats::htest::two_groups;
use evident_stats::survival::{coxph, kaplan_meier, ConfType, Ties};
use evident_stats::{Frame, Origin, Row, StatsError};

/// Lines of the rows in a CSV whose line 3 had a missing value: rows 0, 1,
/// 2, 3 of the complete cases are lines 2, 4, 5, 6.
const LINES: [usize; 4] = [2, 4, 5, 6];

fn origin<'a>(columns: &'a [(&'a str, &'a str)]) -> Origin<'a> {
    Origin { source: "cohort.csv", columns, lines: &LINES }
}

#[test]
fn a_negative_time_names_the_file_line_and_column() {
    let e = kaplan_meier(&[5.0, 6.0, -3.0, 7.0], &[1.0, 0.0, 1.0, 1.0], None, ConfType::Log, 0.95).unwrap_err();
    assert_eq!(
        e,
        StatsError::NegativeTime {
            analysis: "Kaplan-Meier".into(),
            column: "time".into(),
            row: Row::Index(2),
            value: -3.0
        }
    );
    let located = e.locate(&origin(&[("time", "days"), ("status", "died")]));
    assert!(located.names_source());
    assert_eq!(
        located.to_string(),
        "cohort.csv:5: column days = -3 is negative; survival times must be >= 0, check the start and end dates"
    );
}

#[test]
fn an_invalid_event_code_names_the_users_column() {
    let age = [50.0, 60.0, 70.0, 80.0];
    let x = [Predictor { name: "age", values: &age }];
    let e = coxph(&[5.0, 6.0, 7.0, 8.0], &[1.0, 0.0, 1.0, 2.0], &x, None, Ties::Efron, 0.95).unwrap_err();
    assert_eq!(
        e.locate(&origin(&[("time", "days"), ("status", "died"), ("age", "age")])).to_string(),
        "cohort.csv:6: column died = 2 is not valid for Cox model; expected 1 (event) or 0 (censored)"
    );
}

#[test]
fn a_logistic_outcome_outside_0_1_names_its_line() {
    let x = [1.0, 2.0, 3.0, 4.0];
    let e = glm(&[0.0, 1.0, 2.0, 1.0], &[Predictor { name: "x", values: &x }], Family::Binomial, &GlmConfig::default())
        .unwrap_err();
    assert_eq!(
        e.locate(&origin(&[("outcome", "low"), ("x", "x")])).to_string(),
        "cohort.csv:5: column low = 2 is not valid for logistic regression; expected 0 or 1"
    );
}

#[test]
fn column_errors_are_renamed_and_leave_the_source_to_the_caller() {
    let x = [1.0, 2.0, 3.0, 4.0];
    let twice: Vec<f64> = x.iter().map(|v| 2.0 * v).collect();
    let e = lm(
        &[1.0, 3.0, 2.0, 5.0],
        &[Predictor { name: "x", values: &x }, Predictor { name: "x2", values: &twice }],
        None,
        0.95,
    )
    .unwrap_err();
    let located = e.locate(&origin(&[("outcome", "y"), ("x", "dose"), ("x2", "dose_mg")]));
    assert!(!located.names_source());
    assert_eq!(
        located.to_string(),
        "linear regression: design matrix is singular: column `dose_mg` is a linear combination of the columns before it; drop it or merge the categories"
    );
}

#[test]
fn a_third_group_value_is_placed_and_one_group_is_counted() {
    let e = two_groups("t-test", &[1.0, 2.0, 3.0, 4.0], &[0.0, 1.0, 0.0, 2.0]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "t-test: column `group` has value 2 at row 4, expected exactly 2 distinct values (the rows above have 0 and 1)"
    );
    assert_eq!(
        e.locate(&origin(&[("outcome", "bwt"), ("group", "smoke")])).to_string(),
        "cohort.csv:6: column smoke = 2 is not valid for t-test; expected exactly 2 distinct values (the rows above have 0 and 1)"
    );
    let e = two_groups("t-test", &[1.0, 2.0, 3.0], &[1.0, 1.0, 1.0]).unwrap_err();
    assert_eq!(
        e.locate(&origin(&[("outcome", "bwt"), ("group", "smoke")])).to_string(),
        "t-test: column `smoke` is 1 in all 3 rows; it must have exactly 2 distinct values, one per group"
    );
    let split = two_groups("t-test", &[1.0, 2.0, 3.0, 4.0], &[1.0, 0.0, 1.0, 0.0]).unwrap();
    assert_eq!((split.low, split.high), (0.0, 1.0));
    assert_eq!((split.low_values, split.high_values), (vec![2.0, 4.0], vec![1.0, 3.0]));
}

#[test]
fn an_argument_not_in_the_origin_keeps_its_name_and_row() {
    let e = kaplan_meier(&[5.0, -3.0], &[1.0, 1.0], None, ConfType::Log, 0.95).unwrap_err();
    let located = e.clone().locate(&origin(&[("status", "died")]));
    assert_eq!(located, e);
    assert!(!located.names_source());
}

#[test]
fn complete_rows_say_which_rows_were_kept() {
    let frame = Frame::new().with("a", vec![1.0, f64::NAN, 3.0, 4.0]).with("b", vec![1.0, 2.0, f64::NAN, 4.0]);
    let kept = frame.complete_rows("test", &["a", "b"]).unwrap();
    assert_eq!(kept.rows, vec![0, 3]);
    assert_eq!(kept.columns, vec![vec![1.0, 4.0], vec![1.0, 4.0]]);
    assert_eq!(kept.missing.rows_used, 2);
}
