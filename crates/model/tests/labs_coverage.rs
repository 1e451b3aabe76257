//! The built-in lab catalogue against real data in `../shared/data`: the
//! MIMIC-IV demo's labevents (rows with a value, by d_labitems label and
//! fluid), every laboratory LOINC code in the Synthea R4 sample bundles,
//! the n2c2 labs and the myeloma markers. These tests fail, never skip, when
//! the shared data is missing. Run with `--nocapture` to see the numbers.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::PathBuf;

use evident_model::labs::{concept_id, normalise_name, LabCatalogue};

fn shared_data() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    assert!(
        dir.is_dir(),
        "shared data not found at {}; these tests need ../shared/data beside the checkout",
        dir.display()
    );
    dir
}

fn gz_csv(path: PathBuf) -> csv::Reader<flate2::read::GzDecoder<std::fs::File>> {
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    csv::Reader::from_reader(flate2::read::GzDecoder::new(file))
}

#[test]
fn builtin_catalogue_is_valid_and_ids_are_hashes_of_names() {
    let catalogue = LabCatalogue::builtin();
    assert!(catalogue.len() > 150, "{}", catalogue.len());
    for concept in catalogue.concepts() {
        assert_eq!(concept.id, concept_id(&concept.name));
        assert_eq!(catalogue.resolve_name(&concept.name).map(|c| &c.id), Some(&concept.id), "{}", concept.name);
        for alias in &concept.aliases {
            assert_eq!(catalogue.resolve_name(alias).map(|c| &c.name), Some(&concept.name), "alias {alias}");
        }
        for code in &concept.loinc {
            assert_eq!(catalogue.resolve_loinc(code).map(|c| &c.name), Some(&concept.name), "LOINC {code}");
        }
    }
}

#[test]
fn mimic_iv_demo_labevents_coverage() {
    let hosp = shared_data().join("mimic-iv-demo/hosp");
    let catalogue = LabCatalogue::builtin();
    let mut items: HashMap<String, (String, String)> = HashMap::new();
    for row in gz_csv(hosp.join("d_labitems.csv.gz")).records() {
        let row = row.expect("d_labitems row");
        items.insert(row[0].to_string(), (row[1].to_string(), row[2].to_string()));
    }
    let mut reader = gz_csv(hosp.join("labevents.csv.gz"));
    let headers = reader.headers().expect("labevents header").clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("labevents has no {name}"));
    let (itemid, value, valuenum) = (col("itemid"), col("value"), col("valuenum"));
    let mut rows_with_value = 0usize;
    let mut mapped_rows = 0usize;
    let mut unmapped: BTreeMap<String, usize> = BTreeMap::new();
    let mut distinct_items: HashMap<String, bool> = HashMap::new();
    for row in reader.records() {
        let row = row.expect("labevents row");
        if row[value].trim().is_empty() && row[valuenum].trim().is_empty() {
            continue;
        }
        rows_with_value += 1;
        let (label, fluid) =
            items.get(&row[itemid]).unwrap_or_else(|| panic!("itemid {} not in d_labitems", &row[itemid]));
        let mapped = catalogue.resolve_mimic(label, fluid).is_some();
        distinct_items.insert(row[itemid].to_string(), mapped);
        if mapped {
            mapped_rows += 1;
        } else {
            *unmapped.entry(format!("{label}|{fluid}")).or_default() += 1;
        }
    }
    let row_share = mapped_rows as f64 / rows_with_value as f64;
    let mapped_items = distinct_items.values().filter(|m| **m).count();
    let mut top_unmapped: Vec<_> = unmapped.into_iter().collect();
    top_unmapped.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    println!(
        "MIMIC-IV demo: {mapped_rows}/{rows_with_value} labevent rows with a value mapped ({:.2}%), \
         {mapped_items}/{} distinct items; most frequent unmapped: {:?}",
        row_share * 100.0,
        distinct_items.len(),
        &top_unmapped[..top_unmapped.len().min(10)]
    );
    assert!(rows_with_value > 90_000, "{rows_with_value}");
    assert!(row_share >= 0.95, "only {:.2}% of MIMIC rows map", row_share * 100.0);

    // Spot checks: fluid decides the analyte.
    let name = |label: &str, fluid: &str| catalogue.resolve_mimic(label, fluid).map(|c| c.name.as_str());
    assert_eq!(name("Glucose", "Blood"), Some("Glucose"));
    assert_eq!(name("Glucose", "Urine"), Some("Glucose, urine"));
    assert_eq!(name("Hemoglobin", "Blood"), Some("Hemoglobin"));
    assert_eq!(name("Free Kappa/Free Lambda Ratio", "Blood"), Some("Kappa/lambda free light chain ratio"));
    assert_eq!(name("pH", "Urine"), Some("pH, urine"));
    assert_eq!(name("Lymphocytes", "Ascites"), Some("Lymphocytes, ascites"));
}

/// Every Observation with category `laboratory` in the Synthea R4 bundles,
/// as (LOINC code, display) pairs with counts.
fn synthea_lab_codes() -> BTreeMap<(String, String), usize> {
    let dir = shared_data().join("synthea/generated-sample-data-R4");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 40, "expected 40 bundles in {}", dir.display());
    let mut codes = BTreeMap::new();
    for path in paths {
        let mut text = String::new();
        std::fs::File::open(&path).and_then(|mut f| f.read_to_string(&mut text)).expect("read bundle");
        let bundle: serde_json::Value = serde_json::from_str(&text).expect("bundle json");
        for entry in bundle["entry"].as_array().expect("entry array") {
            let resource = &entry["resource"];
            if resource["resourceType"] != "Observation" {
                continue;
            }
            let is_lab = resource["category"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|cat| cat["coding"].as_array().into_iter().flatten().any(|c| c["code"] == "laboratory"));
            if !is_lab {
                continue;
            }
            for coding in resource["code"]["coding"].as_array().expect("code.coding") {
                if coding["system"] == "http://loinc.org" {
                    let key = (
                        coding["code"].as_str().expect("code").to_string(),
                        coding["display"].as_str().unwrap_or("").to_string(),
                    );
                    *codes.entry(key).or_default() += 1;
                }
            }
        }
    }
    codes
}

#[test]
fn synthea_laboratory_loinc_codes_all_resolve() {
    let catalogue = LabCatalogue::builtin();
    let codes = synthea_lab_codes();
    let observations: usize = codes.values().sum();
    let unresolved: Vec<_> = codes.keys().filter(|(code, _)| catalogue.resolve_loinc(code).is_none()).collect();
    let by_display = codes.keys().filter(|(_, display)| catalogue.resolve_name(display).is_some()).count();
    let distinct: std::collections::BTreeSet<&str> = codes.keys().map(|(code, _)| code.as_str()).collect();
    println!(
        "Synthea R4: {} distinct laboratory LOINC codes ({} code/display pairs) in {observations} observations; \
         {} pairs resolve by code, {by_display} also by display name alone",
        distinct.len(),
        codes.len(),
        codes.len() - unresolved.len()
    );
    assert!(distinct.len() >= 60, "{}", distinct.len());
    assert!(unresolved.is_empty(), "LOINC codes without a concept: {unresolved:?}");
    // LOINC first: a display that names another concept does not win.
    let a1c = catalogue.resolve("Glucose", Some("4548-4")).expect("4548-4");
    assert_eq!(a1c.name, "Hemoglobin A1c");
}

#[track_caller]
fn check(name: &str, concept: &str) {
    let catalogue = LabCatalogue::builtin();
    assert_eq!(catalogue.resolve_name(name).map(|c| c.name.as_str()), Some(concept), "{name:?}");
}

#[test]
fn n2c2_labs_resolve() {
    check("HbA1c", "Hemoglobin A1c");
    check("Hgb A1c", "Hemoglobin A1c");
    check("hemoglobin A1C", "Hemoglobin A1c");
    check("A1c", "Hemoglobin A1c");
    check("creatinine", "Creatinine");
    check("Cr", "Creatinine");
    check("Creat", "Creatinine");
}

#[test]
fn myeloma_markers_resolve_in_english_and_german() {
    check("Free kappa light chains", "Kappa free light chain, serum");
    check("freie Kappa-Leichtketten", "Kappa free light chain, serum");
    check("κ free light chain", "Kappa free light chain, serum");
    check("FLC lambda", "Lambda free light chain, serum");
    check("Freie Lambda-Leichtketten", "Lambda free light chain, serum");
    check("Kappa/Lambda-Quotient", "Kappa/lambda free light chain ratio");
    check("FLC ratio", "Kappa/lambda free light chain ratio");
    check("M-Gradient", "M-protein, serum");
    check("M-spike", "M-protein, serum");
    check("Paraprotein", "M-protein, serum");
    check("IgG", "Immunoglobulin G");
    check("Immunglobulin A", "Immunoglobulin A");
    check("IgM", "Immunoglobulin M");
    check("β2-Mikroglobulin", "Beta-2-microglobulin");
    check("beta-2 microglobulin", "Beta-2-microglobulin");
    check("LDH", "Lactate dehydrogenase");
    check("Laktatdehydrogenase", "Lactate dehydrogenase");
    check("Albumin", "Albumin");
    check("Kalzium", "Calcium");
    check("Calcium, total", "Calcium");
    check("Kreatinin", "Creatinine");
    check("Hämoglobin", "Hemoglobin");
    check("HAEMOGLOBIN", "Hemoglobin");
    check("Hb", "Hemoglobin");
    check("CRP", "C-reactive protein");
    check("crp (c-reakt. pr)", "C-reactive protein");
    check("crp (c-reakt. protein)", "C-reactive protein");
    check("C-reaktives Protein", "C-reactive protein");
}

#[test]
fn unknown_names_do_not_resolve() {
    let catalogue = LabCatalogue::builtin();
    for name in ["", "poetry", "Blood pressure", "zzz", "Temperature"] {
        assert!(catalogue.resolve_name(name).is_none(), "{name:?} resolved to {:?}", catalogue.resolve_name(name));
    }
}

#[test]
fn find_is_fuzzy() {
    let catalogue = LabCatalogue::builtin();
    let names = |q: &str| catalogue.find(q).into_iter().map(|c| c.name.as_str()).collect::<Vec<_>>();
    assert_eq!(names("kreatinin").first(), Some(&"Creatinine"));
    assert_eq!(names("creat").first().copied(), Some("Creatinine"));
    let kappa = names("kappa");
    assert!(
        kappa.contains(&"Kappa free light chain, serum") && kappa.contains(&"Kappa/lambda free light chain ratio"),
        "{kappa:?}"
    );
    let urine_glucose = names("glucose urine");
    assert_eq!(urine_glucose.first(), Some(&"Glucose, urine"), "{urine_glucose:?}");
    let light_chain = names("light chain lambda");
    assert_eq!(light_chain.first(), Some(&"Lambda free light chain, serum"), "{light_chain:?}");
    assert!(names("").is_empty());
    assert!(names("xylophone").is_empty());
}

#[test]
fn normalised_aliases_match_the_paper_rules() {
    assert_eq!(normalise_name("Straße"), "strasse");
    assert_eq!(normalise_name("KÖRPER-Größe (cm)"), "koerper groesse cm");
}
