//! Sandboxed R against PostgreSQL: the demo loaded into a throwaway
//! database on the server scripts/setup starts; R, with no network, reaches
//! it through the server's Unix socket as the run's read-only role, reads
//! the same cohort as from SQLite, and cannot write; the content hash the
//! evidence bundle records for a PostgreSQL database, and its cache.

use evident_db::testing::TempPgDatabase;
use evident_db::{load_mimic, DatabaseUrl, QueryLimits, ReadOnlyConnection};
use evident_rwe::database::{postgres_content_sha256, r_database};
use evident_rwe::database_hash::{
    database_info, DatabaseHashMethod, DatabaseHashMode, DatabaseHashRequest, MemoryHashCache,
};
use evident_rwe::sandbox::{RDatabase, SandboxConfig, Workspace};

#[test]
fn sandboxed_r_reads_postgres_through_the_socket_and_cannot_write() {
    let pg = TempPgDatabase::new();
    load_mimic(&evident_testdata::shared_data().join("mimic-iv-demo"), &pg.url, &mut |_| {}).unwrap();
    let conn = ReadOnlyConnection::connect(&pg.url, QueryLimits::default()).unwrap();
    let db = r_database(conn.agent_url()).unwrap();
    match &db {
        RDatabase::Postgres { user, .. } => assert_ne!(
            Some(user.as_str()),
            pg.url.expose().split("//").nth(1).and_then(|r| r.split(':').next()),
            "R uses the run's role, not the admin"
        ),
        RDatabase::Sqlite { .. } => panic!("a PostgreSQL URL"),
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::create(&dir.path().join("ws"), db, &[]).unwrap();
    let r = ws
        .run_code(
            &SandboxConfig::default(),
            "read",
            r#"source("db_connect.R")
               cat("patients", dbGetQuery(con, "SELECT count(*) AS n FROM mimiciv_hosp.patients")$n, "\n")
               first <- dbGetQuery(con, "SELECT count(DISTINCT subject_id) AS n FROM mimiciv_icu.icustays")$n
               cat("first_stays", first, "\n")
               ok <- tryCatch({ dbExecute(con, "DELETE FROM mimiciv_hosp.patients"); TRUE }, error = function(e) FALSE)
               cat("deleted", ok, "\n")"#,
        )
        .unwrap();
    assert!(r.succeeded(), "{}", r.observation(6000));
    assert!(r.stdout.contains("patients 100 "), "{}", r.stdout);
    assert!(r.stdout.contains("first_stays 100 "), "{}", r.stdout);
    assert!(r.stdout.contains("deleted FALSE"), "{}", r.stdout);
    drop(conn);
}

/// A run's read-only role left behind by a killed process is dropped when
/// the next run starts; a live run's role (its session holds the advisory
/// lock keyed by the role's name) is kept, whichever database it is on.
#[test]
fn a_killed_runs_role_is_dropped_when_the_next_run_starts_and_a_live_runs_is_kept() {
    let pg = TempPgDatabase::new();
    let exists = |role: &str| -> bool {
        let n: i64 =
            pg.client().query_one("SELECT count(*) FROM pg_roles WHERE rolname = $1", &[&role]).unwrap().get(0);
        n == 1
    };
    // What a killed run leaves: a role named like a run's, valid for a day,
    // whose process (and so its lock) is gone.
    let stale = format!("evident_ro_999999_{}", &pg.name[pg.name.len() - 8..]);
    let live = format!("evident_ro_999998_{}", &pg.name[pg.name.len() - 8..]);
    let mut admin = pg.client();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {stale} LOGIN VALID UNTIL 'infinity'; CREATE ROLE {live} LOGIN VALID UNTIL 'infinity';"
        ))
        .unwrap();
    // A live run in another process: a session holding the role's lock.
    let mut holder = pg.client();
    holder.execute("SELECT pg_advisory_lock(1165388132, hashtext($1))", &[&live]).unwrap();
    let first = ReadOnlyConnection::connect(&pg.url, QueryLimits::default()).unwrap();
    assert!(!exists(&stale), "the killed run's role was not dropped");
    assert!(exists(&live), "a live run's role was dropped");
    // The first run's own role survives a second run starting beside it.
    let DatabaseUrl::Postgres { url } = first.agent_url() else { panic!("a PostgreSQL URL") };
    let first_role = url.split("://").nth(1).unwrap().split(':').next().unwrap().to_string();
    let mut second = ReadOnlyConnection::connect(&pg.url, QueryLimits::default()).unwrap();
    assert!(exists(&first_role), "a second run dropped the first run's role");
    // The live run's process dies: its session ends, the next start drops it.
    drop(holder);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let third = ReadOnlyConnection::connect(&pg.url, QueryLimits::default()).unwrap();
    assert!(!exists(&live), "the role of a run whose process ended was kept");
    assert!(exists(&first_role));
    second.query("SELECT 1").unwrap();
    for conn in [first, second, third] {
        conn.close().unwrap();
    }
    assert!(!exists(&first_role), "close drops the run's role");
    admin.batch_execute(&format!("DROP ROLE IF EXISTS {stale}; DROP ROLE IF EXISTS {live};")).unwrap();
}

/// The bundle's PostgreSQL content hash: two loads of the demo into two
/// databases hash the same; changing one value of one row changes it, and
/// changing it back restores it (the hash reads the content, not where or
/// in what order the rows are stored). A new empty table changes it too.
#[test]
fn the_postgres_content_hash_is_the_same_for_the_same_load_and_changes_with_a_row() {
    let demo = evident_testdata::shared_data().join("mimic-iv-demo");
    let hash = |pg: &TempPgDatabase| {
        let mut conn = ReadOnlyConnection::connect(&pg.url, QueryLimits::default()).unwrap();
        let hash = postgres_content_sha256(&mut conn).unwrap();
        conn.close().unwrap();
        hash
    };
    let (a, b) = (TempPgDatabase::new(), TempPgDatabase::new());
    std::thread::scope(|scope| {
        for pg in [&a, &b] {
            scope.spawn(|| load_mimic(&demo, &pg.url, &mut |_| {}).unwrap());
        }
    });
    let loaded = hash(&a);
    assert_eq!(loaded.len(), 64);
    assert!(loaded.bytes().all(|c| c.is_ascii_hexdigit()), "{loaded}");
    assert_eq!(hash(&b), loaded, "two loads of the same folder");
    let mut client = b.client();
    let one_row = "UPDATE mimiciv_hosp.patients SET anchor_age = anchor_age + 1 \
                   WHERE subject_id = (SELECT min(subject_id) FROM mimiciv_hosp.patients)";
    client.batch_execute(one_row).unwrap();
    let changed = hash(&b);
    assert_ne!(changed, loaded, "one changed value");
    client.batch_execute(&one_row.replace("+ 1", "- 1")).unwrap();
    assert_eq!(hash(&b), loaded, "the value changed back (the row now stored elsewhere)");
    client.batch_execute("CREATE TABLE mimiciv_derived.extra (x integer)").unwrap();
    assert_ne!(hash(&b), loaded, "a new empty table");
}

/// The bundle's database hash through the cache, as study runs get it: the
/// first run reads every row and caches the hash under the database's
/// state key; a second run on the unchanged database is given no time at
/// all to read a row and still carries the content hash, the one computed
/// by the first run (same time, nothing written to the cache). A new row
/// in this throwaway copy changes the key: with no time, the bundle gets
/// the catalogue hash and says the content hash ran past its limit, which
/// the cache remembers for that state (not tried again under no longer a
/// limit); with time, a new content hash. `catalogue` and `none` are what
/// the bundle says they are, and a server that does not answer leaves a
/// bundle whose hash is not computed, with why.
#[test]
fn a_second_run_reuses_the_cached_content_hash_and_a_new_row_invalidates_it() {
    let pg = TempPgDatabase::new();
    load_mimic(&evident_testdata::shared_data().join("mimic-iv-demo"), &pg.url, &mut |_| {}).unwrap();
    let direct = {
        let mut conn = ReadOnlyConnection::connect(&pg.url, QueryLimits::default()).unwrap();
        let hash = postgres_content_sha256(&mut conn).unwrap();
        conn.close().unwrap();
        hash
    };
    let mut cache = MemoryHashCache::default();
    let cached = DatabaseHashRequest::default();
    assert_eq!(cached.mode, DatabaseHashMode::Cached, "the default");
    let no_time = DatabaseHashRequest { mode: DatabaseHashMode::Cached, timeout: Some(std::time::Duration::ZERO) };

    let first = database_info(&pg.url, &cached, &mut cache);
    assert_eq!(first.hash_method, DatabaseHashMethod::PostgresContent, "{first:?}");
    assert_eq!(first.sha256.as_deref(), Some(direct.as_str()), "the content hash itself");
    assert!(!first.hash_from_cache && first.hash_note.is_none(), "{first:?}");
    assert_eq!(cache.puts, 1);
    let key = first.hash_state_key.clone().expect("a state key");
    let entry = &cache.entries[&key];
    assert_eq!(
        (entry.sha256.as_deref(), &entry.computed_at),
        (Some(direct.as_str()), first.hash_computed_at.as_ref().unwrap())
    );

    // The second run: no time to read any row, so only the cache can give it.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let second = database_info(&pg.url, &no_time, &mut cache);
    assert_eq!(second.hash_method, DatabaseHashMethod::PostgresContent, "{second:?}");
    assert!(second.hash_from_cache);
    assert_eq!(second.sha256, first.sha256);
    assert_eq!(second.hash_computed_at, first.hash_computed_at, "the first run's time, not this one's");
    assert_eq!(second.hash_state_key.as_deref(), Some(key.as_str()));
    assert!(second.hash_note.as_deref().unwrap().starts_with("from Evident's cache: reused while"), "{second:?}");
    assert_eq!(cache.puts, 1, "nothing computed, nothing written");

    // full reads every row again, whatever the cache holds.
    let full = database_info(&pg.url, &DatabaseHashRequest { mode: DatabaseHashMode::Full, ..cached }, &mut cache);
    assert_eq!(
        (full.hash_method, full.hash_from_cache, &full.sha256),
        (DatabaseHashMethod::PostgresContent, false, &first.sha256)
    );
    assert_ne!(full.hash_computed_at, first.hash_computed_at);
    assert_eq!(cache.puts, 2);

    // A new row (its counts reported to the statistics at once).
    let mut client = pg.client();
    client
        .batch_execute(
            "CREATE TEMP TABLE one AS SELECT * FROM mimiciv_hosp.patients ORDER BY subject_id LIMIT 1;
             UPDATE one SET subject_id = subject_id + 1000000000;
             INSERT INTO mimiciv_hosp.patients SELECT * FROM one;",
        )
        .unwrap();
    client.batch_execute("SELECT pg_stat_force_next_flush()").unwrap();
    drop(client);

    let third = database_info(&pg.url, &no_time, &mut cache);
    assert_ne!(third.hash_state_key.as_deref(), Some(key.as_str()), "the new row changes the state key");
    assert_eq!(third.hash_method, DatabaseHashMethod::PostgresCatalogue, "{third:?}");
    assert!(!third.hash_from_cache);
    let note = third.hash_note.clone().unwrap();
    assert!(note.starts_with("the content hash was not computed (it ran past its limit of 0 s after 0 of "), "{note}");
    assert_eq!(cache.puts, 3, "the timed-out attempt is remembered for the new state");
    // Under no longer a limit it is not tried again.
    let fourth = database_info(&pg.url, &no_time, &mut cache);
    assert_eq!(fourth.hash_method, DatabaseHashMethod::PostgresCatalogue);
    assert!(fourth.hash_note.unwrap().contains("no shorter than this run's"));
    assert_eq!(cache.puts, 3);
    // With time, the new state's content hash: not the old one.
    let fifth = database_info(&pg.url, &cached, &mut cache);
    assert_eq!((fifth.hash_method, fifth.hash_from_cache), (DatabaseHashMethod::PostgresContent, false));
    assert_ne!(fifth.sha256, first.sha256, "the new row is in the hash");
    assert_eq!(fifth.hash_state_key, third.hash_state_key);
    assert_eq!(cache.puts, 4);

    // catalogue and none, as the bundle records them.
    let catalogue =
        database_info(&pg.url, &DatabaseHashRequest { mode: DatabaseHashMode::Catalogue, ..cached }, &mut cache);
    assert_eq!(catalogue.hash_method, DatabaseHashMethod::PostgresCatalogue);
    let hex = catalogue.sha256.clone().unwrap();
    assert!(hex.len() == 64 && hex != direct && Some(&hex) != fifth.sha256.as_ref());
    let json = serde_json::to_value(&catalogue).unwrap();
    assert_eq!(
        (json["hash_method"].as_str(), json["hash_requested"].as_str()),
        (Some("postgres-catalogue"), Some("catalogue"))
    );
    let none = database_info(&pg.url, &DatabaseHashRequest { mode: DatabaseHashMode::None, ..cached }, &mut cache);
    let json = serde_json::to_value(&none).unwrap();
    assert_eq!((json["hash_method"].as_str(), json["sha256"].is_null()), (Some("not-computed"), true));
    assert!(json["hash_note"].as_str().unwrap().contains("--database-hash none"));
    assert_eq!(cache.puts, 4);

    // No server: the hash is not computed, and the bundle says why.
    let nowhere = DatabaseUrl::parse("postgres://evident:evident@127.0.0.1:1/nowhere").unwrap();
    let lost = database_info(&nowhere, &cached, &mut cache);
    assert_eq!((lost.hash_method, lost.sha256), (DatabaseHashMethod::NotComputed, None));
    assert!(lost.hash_note.unwrap().starts_with("not computed: connecting to hash the database failed"));
}
