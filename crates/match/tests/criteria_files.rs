//! The criteria-set files shipped in the repository load, validate, and
//! agree with their sources (the n2c2 set with the shared criteria.json).

use std::path::{Path, PathBuf};

use evident_match::{CriteriaSet, CriterionType, Pooling};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn n2c2_set_matches_the_shared_definitions() {
    let set = CriteriaSet::load(&repo().join("criteria/n2c2-2018.yaml")).unwrap();
    let source = repo().join("../shared/data/n2c2-2018/criteria.json");
    let text = std::fs::read_to_string(&source)
        .unwrap_or_else(|e| panic!("{}: {e}; the shared data must be present", source.display()));
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let defs = json["criteria"].as_array().unwrap();
    assert_eq!(defs.len(), 13);
    assert_eq!(set.criteria.len(), 13);
    for (c, d) in set.criteria.iter().zip(defs) {
        assert_eq!(c.id, d["id"].as_str().unwrap());
        assert_eq!(c.text, d["original"].as_str().unwrap(), "{}", c.id);
        assert_eq!(c.refined.as_deref(), d["refined"].as_str(), "{}", c.id);
        let pooling = match d["pooling"].as_str().unwrap() {
            "max" => Pooling::Max,
            "min" => Pooling::Min,
            "most_recent" => Pooling::MostRecent,
            other => panic!("unknown pooling {other}"),
        };
        assert_eq!(c.pooling, Some(pooling), "{}", c.id);
        assert_eq!(c.window_months.map(u64::from), d["window_months"].as_u64(), "{}", c.id);
    }
    // The criteria stated over structured data carry reviewed checks, each
    // leaving the criterion to the notes when the record has no such data
    // (n2c2's records are notes only).
    let checked: Vec<&str> =
        set.criteria.iter().filter(|c| c.reviewed_check().is_some()).map(|c| c.id.as_str()).collect();
    assert_eq!(checked, ["CREATININE", "HBA1C", "KETO-1YR", "MI-6MOS"]);
    for c in set.criteria.iter().filter(|c| c.reviewed_check().is_some()) {
        assert_eq!(c.reviewed_check().unwrap().if_no_data, evident_match::checks::IfNoData::Text, "{}", c.id);
    }
}

#[test]
fn example_trial_loads() {
    let set = CriteriaSet::load(&repo().join("examples/trials/t2dm-example.yaml")).unwrap();
    assert_eq!(set.inclusions().count(), 4);
    assert_eq!(set.exclusions().count(), 3);
    let insulin = set.criterion("insulin").unwrap();
    assert_eq!(insulin.criterion_type, CriterionType::Exclusion);
    assert_eq!((insulin.pooling, insulin.window_months), (Some(Pooling::MostRecent), Some(3)));
}

#[test]
fn mimic_demo_check_set_loads_with_a_reviewed_check_per_criterion() {
    let set = CriteriaSet::load(&repo().join("criteria/mimic-iv-demo-checks.yaml")).unwrap();
    assert!(set.criteria.len() >= 10);
    for c in &set.criteria {
        assert!(c.reviewed_check().is_some(), "{} has a reviewed check", c.id);
    }
}
