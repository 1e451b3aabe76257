//! n2c2 2018 Track 1 XML, on small files in the challenge's format written
//! by the team (the real notes are under a data-use agreement).

mod common;

use common::Sandbox;

const STARS: &str =
    "****************************************************************************************************";

fn n2c2_file(notes: &[(&str, &str)], tags: &[(&str, &str)]) -> String {
    let text: Vec<String> = notes.iter().map(|(date, body)| format!("\n\nRecord date: {date}\n\n{body}\n\n")).collect();
    let tags: String = tags.iter().map(|(k, v)| format!("<{k} met=\"{v}\" />\n")).collect();
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n<PatientMatching>\n<TEXT><![CDATA[{}]]></TEXT>\n<TAGS>\n{tags}</TAGS>\n</PatientMatching>\n", text.join(STARS))
}

#[test]
fn notes_split_on_asterisks_with_record_dates_and_tags_as_labels() {
    let sandbox = Sandbox::new();
    let xml = n2c2_file(
        &[
            ("2085-03-14", "Patient with CAD s/p MI in 2080. On aspirin 81 mg daily & metoprolol."),
            ("2086-07-01", "HbA1c 7.2. Creatinine 1.4. Continues aspirin."),
        ],
        &[("ASP-FOR-MI", "met"), ("HBA1C", "met"), ("DRUG-ABUSE", "not met")],
    );
    sandbox.write("n2c2/101.xml", &xml);
    sandbox.write("n2c2/102.xml", &n2c2_file(&[("2090-01-02", "Healthy.")], &[("HBA1C", "not met")]));
    sandbox.run(&["ingest", sandbox.path().join("n2c2").to_str().unwrap()]).ok();
    let store = sandbox.store();
    let docs = store.documents("101").unwrap();
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0].date.unwrap().date().to_string(), "2085-03-14");
    let first = store.document(&docs[0].id).unwrap().unwrap();
    assert!(first.text.starts_with("Record date: 2085-03-14"), "{:?}", first.text);
    assert!(first.text.contains("aspirin 81 mg daily & metoprolol"), "CDATA text is kept verbatim");
    let labels = store.labels("n2c2-2018").unwrap();
    assert_eq!(labels["101"]["ASP-FOR-MI"], "met");
    assert_eq!(labels["101"]["DRUG-ABUSE"], "not met");
    assert_eq!(labels["102"]["HBA1C"], "not met");
}

#[test]
fn a_bad_met_value_and_a_note_without_a_record_date_are_reported() {
    let sandbox = Sandbox::new();
    sandbox.write("bad.xml", &n2c2_file(&[("2085-03-14", "x")], &[("HBA1C", "maybe")]));
    sandbox.run(&["ingest", "bad.xml"]).fails_with(2, "expected \"met\" or \"not met\"");
    let no_date = n2c2_file(&[("2085-03-14", "x")], &[]).replace("Record date: 2085-03-14", "Seen today");
    sandbox.write("nodate.xml", &no_date);
    sandbox.run(&["ingest", "nodate.xml"]).fails_with(2, "nodate.xml:note 1: Record date is missing");
    assert_eq!(sandbox.counts().patients, 0);
}
