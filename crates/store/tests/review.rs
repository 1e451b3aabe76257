//! The review tables (migration 5): an override is a row beside the model's
//! decision, which stays as it was; overrides, sign-offs and the audit log
//! refuse UPDATE and DELETE; an override or sign-off lands with its audit
//! entry or not at all.

use evident_store::{NewAuditEntry, NewOverride, Store, StoreError};

fn audit(action: &str) -> NewAuditEntry {
    NewAuditEntry {
        actor: "ana".into(),
        action: action.into(),
        subject: "run-1/p-1/inc-1".into(),
        before_json: Some("\"NOT MET\"".into()),
        after_json: Some("\"MET\"".into()),
        reason: "the note says so".into(),
    }
}

fn store_with_run() -> Store {
    store_at(None)
}

fn store_at(path: Option<&std::path::Path>) -> Store {
    let store = match path {
        Some(path) => Store::open(path).unwrap(),
        None => Store::open_in_memory().unwrap(),
    };
    store.put_user("ana", "reviewer", "$argon2id$fake", &audit("user_add")).unwrap();
    store.begin_match_run("run-1", "t-1", "ican", "{}").unwrap();
    store
}

fn override_of(reason: &str) -> NewOverride {
    NewOverride {
        run_id: "run-1".into(),
        patient_id: "p-1".into(),
        criterion_id: "inc-1".into(),
        decision: "MET".into(),
        reason: reason.into(),
        reviewer: "ana".into(),
    }
}

#[test]
fn overrides_and_the_audit_log_are_append_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = store_at(Some(&path));
    let id = store.put_override(&override_of("seen in the 2023 note"), &audit("override")).unwrap();
    let second = store.put_override(&override_of("second look"), &audit("override")).unwrap();
    assert!(second > id);
    store.put_signoff("run-1", "p-1", "ana", "", &audit("sign_off")).unwrap();
    let rows = store.overrides("run-1", Some("p-1")).unwrap();
    assert_eq!(rows.iter().map(|r| r.reason.as_str()).collect::<Vec<_>>(), ["seen in the 2023 note", "second look"]);
    assert_eq!(store.audit_log().unwrap().len(), 4);
    let conn = rusqlite::Connection::open(&path).unwrap();
    for sql in [
        "UPDATE decision_overrides SET decision = 'NOT MET'",
        "DELETE FROM decision_overrides",
        "UPDATE audit_log SET actor = 'mallory'",
        "DELETE FROM audit_log",
        "UPDATE signoffs SET note = ''",
        "DELETE FROM signoffs",
    ] {
        let err = conn.execute(sql, []).unwrap_err();
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    assert_eq!(store.overrides("run-1", None).unwrap().len(), 2);
}

#[test]
fn an_override_without_a_reason_is_refused_and_nothing_is_written() {
    let store = store_with_run();
    let err = store.put_override(&override_of("   "), &audit("override")).unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    assert!(store.overrides("run-1", None).unwrap().is_empty());
    assert_eq!(store.audit_log().unwrap().len(), 1, "only the user_add entry");
}

#[test]
fn an_override_of_an_unknown_run_writes_no_audit_entry() {
    let store = store_with_run();
    let mut new = override_of("reason");
    new.run_id = "no-such-run".into();
    assert!(store.put_override(&new, &audit("override")).is_err());
    assert_eq!(store.audit_log().unwrap().len(), 1);
}

#[test]
fn users_are_unique_and_roles_are_checked() {
    let store = store_with_run();
    assert!(matches!(store.put_user("ana", "viewer", "x", &audit("user_add")), Err(StoreError::Invalid(_))));
    assert!(matches!(store.put_user("bob", "root", "x", &audit("user_add")), Err(StoreError::Invalid(_))));
    assert_eq!(store.users().unwrap().len(), 1);
    assert_eq!(store.user("ana").unwrap().unwrap().role, "reviewer");
}

#[test]
fn sessions_expire_and_end() {
    let store = store_with_run();
    store.put_web_session("h1", "ana", "csrf1", "2030-01-01T00:00:00.000Z").unwrap();
    assert_eq!(store.web_session("h1", "2029-01-01T00:00:00.000Z").unwrap().unwrap().role, "reviewer");
    assert!(store.web_session("h1", "2031-01-01T00:00:00.000Z").unwrap().is_none());
    store.end_web_session("h1", "2029-01-01T00:00:00.000Z").unwrap();
    assert!(store.web_session("h1", "2029-01-01T00:00:00.000Z").unwrap().is_none());
}

/// A read-only connection beside the writer sees each commit at once,
/// cannot write, and refuses a store not yet migrated by a writer.
#[test]
fn a_read_only_connection_reads_beside_the_writer_and_cannot_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    std::fs::write(dir.path().join("empty.db"), b"").unwrap();
    assert!(Store::open_read_only(&dir.path().join("empty.db")).is_err(), "an unmigrated store is refused");
    let writer = store_at(Some(&path));
    let reader = Store::open_read_only(&path).unwrap();
    assert_eq!(reader.users().unwrap().len(), 1);
    writer.put_user("bo", "viewer", "$argon2id$fake", &audit("user_add")).unwrap();
    assert_eq!(reader.users().unwrap().len(), 2, "the reader sees the writer's commit");
    let refused = reader.put_user("cy", "viewer", "$argon2id$fake", &audit("user_add"));
    assert!(refused.is_err(), "the reader cannot write");
    assert_eq!(writer.users().unwrap().len(), 2);
}

/// The results fingerprint a read-only connection keeps follows the
/// writer's commits: unchanged while nothing is written, changed at once
/// when a result is.
#[test]
fn a_read_only_connection_sees_the_results_fingerprint_change() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let mut writer = store_at(Some(&path));
    let reader = Store::open_read_only(&path).unwrap();
    let result = |c: &str| evident_store::NewMatchResult {
        criterion_id: c.into(),
        document_id: String::new(),
        result_json: "{}".into(),
        trace_json: None,
    };
    assert_eq!(reader.match_results_fingerprint("run-1").unwrap(), (0, 0));
    writer.put_match_task("run-1", "p-1", "c:a", None, &[result("a")]).unwrap();
    let first = reader.match_results_fingerprint("run-1").unwrap();
    assert_eq!(first.0, 1);
    assert_eq!(reader.match_results_fingerprint("run-1").unwrap(), first, "nothing written: the same");
    // A write elsewhere (a user) leaves the run's fingerprint as it was.
    writer.put_user("bo", "viewer", "$argon2id$fake", &audit("user_add")).unwrap();
    assert_eq!(reader.match_results_fingerprint("run-1").unwrap(), first);
    writer.put_match_task("run-1", "p-2", "c:a", None, &[result("a"), result("b")]).unwrap();
    let second = reader.match_results_fingerprint("run-1").unwrap();
    assert_eq!(second.0, 3);
    assert_ne!(second, first);
    assert_eq!(writer.match_results_fingerprint("run-1").unwrap(), second, "the writer counts every time");
}
