//! The study database as the rest of this crate needs it, over
//! `evident-db`: identifier lookups for the cohort audit's rule checks on a
//! [`ReadOnlyConnection`], and how sandboxed R reaches a [`DatabaseUrl`]
//! (the SQLite files to mount read-only, or PostgreSQL's Unix socket), and
//! the content hash of a PostgreSQL database for the evidence bundle.

use std::collections::BTreeSet;
use std::time::Instant;

use evident_db::{DatabaseUrl, DbError, ReadOnlyConnection, Value};
use sha2::{Digest, Sha256};

use crate::audit::{IdColumn, IdentifierLookup};
use crate::sandbox::RDatabase;

/// Identifiers are looked up this many at a time (below the connection's
/// row limit).
const CHUNK: usize = 500;

impl IdentifierLookup for ReadOnlyConnection {
    fn existing(&mut self, column: IdColumn, ids: &[i64]) -> Result<BTreeSet<i64>, String> {
        let mut found = BTreeSet::new();
        for chunk in ids.chunks(CHUNK) {
            let list: Vec<String> = chunk.iter().map(i64::to_string).collect();
            let sql = format!(
                "SELECT DISTINCT {c} FROM {t} WHERE {c} IN ({})",
                list.join(", "),
                c = column.name(),
                t = column.table()
            );
            let result = self.query(&sql).map_err(|e| e.to_string())?;
            for row in result.rows {
                match row.first() {
                    Some(Value::Integer(id)) => {
                        found.insert(*id);
                    }
                    Some(other) => {
                        if let Some(id) = other.as_f64() {
                            found.insert(id as i64);
                        }
                    }
                    None => {}
                }
            }
        }
        Ok(found)
    }
}

/// How sandboxed R reaches `url`. For PostgreSQL the URL should be the
/// run's read-only role ([`ReadOnlyConnection::agent_url`]); R reaches the
/// server through a forwarded Unix socket, since the sandbox has no network.
pub fn r_database(url: &DatabaseUrl) -> Result<RDatabase, DbError> {
    match url {
        DatabaseUrl::Sqlite { path } => {
            let main = path.canonicalize().map_err(|e| DbError::Connect {
                url: url.redacted(),
                message: format!("{e}; load the database first"),
            })?;
            let attach = evident_db::sqlite::attached_schemas(&main)?;
            Ok(RDatabase::Sqlite { main, attach })
        }
        DatabaseUrl::Postgres { .. } => {
            let parts = postgres_parts(&url.expose()).ok_or_else(|| DbError::Connect {
                url: url.redacted(),
                message: "cannot read user, port and database from the URL".into(),
            })?;
            Ok(RDatabase::Postgres {
                host: parts.host,
                port: parts.port,
                dbname: parts.dbname,
                user: parts.user,
                password: parts.password,
            })
        }
    }
}

/// A deterministic SHA-256 of a PostgreSQL database's content, for the
/// evidence bundle: every table the connection can read (for a study
/// database, `mimiciv_hosp`, `mimiciv_icu` and `mimiciv_derived`), in
/// schema and name order, each as its qualified name, row count and a
/// digest of its rows. A row is rendered by `row_to_json` (column names
/// included, timestamps in ISO 8601 whatever the session's `DateStyle`,
/// floats in PostgreSQL's shortest exact form under the default
/// `extra_float_digits`) and hashed with MD5; a table's digest is the
/// exact sums of the two 64-bit halves of its rows' hashes. The sums make
/// the digest independent of row order without sorting the table or
/// building one string of it (PostgreSQL's text values stop at 1 GB, which
/// `labevents` of the full MIMIC-IV passes); the database is read once.
/// It identifies a load; it is not a defence against rows crafted to
/// collide. The same content loaded twice hashes the same; any changed,
/// added or removed row, table or column name changes it. It is not the
/// SQLite files' hash, so the two backends' hashes of one load differ.
/// Each table is read in a statement of its own (no snapshot across
/// tables); the whole hash stops at the connection's time limit.
///
/// It reads every row: seconds on the demo, hours on the full MIMIC-IV.
/// Study runs reach it through [`crate::database_hash`], which caches it
/// per database state and stops it at a deadline.
pub fn postgres_content_sha256(conn: &mut ReadOnlyConnection) -> Result<String, DbError> {
    let timeout = conn.limits().timeout;
    postgres_content_sha256_until(conn, Instant::now() + timeout).map_err(|e| e.error)
}

/// Where [`postgres_content_sha256_until`] stopped: the table it was
/// hashing (1-based, of how many) and the error.
#[derive(Debug)]
pub struct ContentHashError {
    pub table: String,
    pub table_number: usize,
    pub tables: usize,
    pub error: DbError,
}

impl ContentHashError {
    /// True when the deadline passed (a statement was cancelled at it, or
    /// it came before the table's turn).
    pub fn timed_out(&self) -> bool {
        matches!(self.error, DbError::Timeout { .. })
    }
}

impl std::fmt::Display for ContentHashError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.table.is_empty() {
            write!(f, "listing the tables: {}", self.error)
        } else {
            write!(f, "hashing {} (table {} of {}): {}", self.table, self.table_number, self.tables, self.error)
        }
    }
}

/// [`postgres_content_sha256`] that stops at `deadline`: each table's
/// statement runs with the time left (`SET LOCAL statement_timeout`), so
/// the whole hash ends by the deadline, finished or not.
pub fn postgres_content_sha256_until(
    conn: &mut ReadOnlyConnection,
    deadline: Instant,
) -> Result<String, ContentHashError> {
    let mut tables =
        conn.tables().map_err(|error| ContentHashError { table: String::new(), table_number: 0, tables: 0, error })?;
    tables.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
    let quote = |ident: &str| format!("\"{}\"", ident.replace('"', "\"\""));
    let half = |from: u8| format!("coalesce(sum(('x' || substr(h, {from}, 16))::bit(64)::bigint::numeric), 0)::text");
    let mut hasher = Sha256::new();
    hasher.update(POSTGRES_CONTENT_METHOD.as_bytes());
    hasher.update(b"\n");
    let count = tables.len();
    for (i, table) in tables.iter().enumerate() {
        let fail =
            |error| ContentHashError { table: table.qualified_name(), table_number: i + 1, tables: count, error };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(fail(DbError::Timeout { limit_ms: 0 }));
        }
        let sql = format!(
            "SELECT count(*)::text, {}, {} FROM (SELECT md5(row_to_json(t)::text) AS h FROM {}.{} t) rows",
            half(1),
            half(17),
            quote(&table.schema),
            quote(&table.name)
        );
        let result = conn.query_with_timeout(&sql, Some(left)).map_err(fail)?;
        let row = result
            .rows
            .first()
            .ok_or_else(|| fail(DbError::Query { message: "the aggregate returned no row".to_string() }))?;
        let cells: Vec<String> = row.iter().map(Value::to_text).collect();
        hasher.update(format!("{}\t{}\n", table.qualified_name(), cells.join("\t")).as_bytes());
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The content hash's algorithm, its first line: a cached hash is reused
/// only under the same one.
pub const POSTGRES_CONTENT_METHOD: &str = "evident postgres content v1";

pub(crate) struct PostgresParts {
    pub(crate) host: String,
    user: String,
    password: String,
    pub(crate) port: u16,
    pub(crate) dbname: String,
}

/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?...]`.
pub(crate) fn postgres_parts(url: &str) -> Option<PostgresParts> {
    let rest = url.strip_prefix("postgres://").or_else(|| url.strip_prefix("postgresql://"))?;
    let (auth, rest) = rest.rsplit_once('@')?;
    let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
    let (hostport, db) = rest.split_once('/')?;
    let dbname = db.split('?').next()?.to_string();
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().ok()?),
        None => (hostport.to_string(), 5432),
    };
    Some(PostgresParts { host, user: decode(user), password: decode(password), port, dbname: decode(&dbname) })
}

/// Percent-decoding of a URL component.
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Evident's own facts about one audit row, assembled from the database by
/// its identifiers (not from the agent's columns): sex and age, the
/// admission (type, times, in-hospital death), the ICU stay (unit, times,
/// length, which stay of the patient it is), the date of death, the
/// admission's diagnoses with their titles (first 15 by sequence) and the
/// stay's first-day laboratory values from `mimiciv_derived.first_day_lab`.
/// The same SQL runs on SQLite and PostgreSQL. A row whose identifiers are
/// not in the database gets a fact saying so.
pub fn database_facts(
    conn: &mut ReadOnlyConnection,
    subject_id: Option<i64>,
    hadm_id: Option<i64>,
    stay_id: Option<i64>,
) -> Result<Vec<crate::audit::Fact>, String> {
    use crate::audit::Fact;
    fn push(facts: &mut Vec<Fact>, name: &str, value: &Value) {
        if !matches!(value, Value::Null) {
            facts.push(Fact { name: name.to_string(), value: value.to_text() });
        }
    }
    type Row = (Vec<String>, Vec<Value>);
    fn one(conn: &mut ReadOnlyConnection, sql: String) -> Result<Option<Row>, String> {
        let r = conn.query(&sql).map_err(|e| e.to_string())?;
        Ok(r.rows.into_iter().next().map(|row| (r.columns, row)))
    }
    let mut facts = Vec::new();
    // The stay names its admission and patient when the row does not.
    let mut hadm_id = hadm_id;
    let mut subject_id = subject_id;
    if let Some(stay) = stay_id {
        let sql = format!(
            "SELECT s.subject_id, s.hadm_id, s.first_careunit, s.intime, s.outtime, s.los, \
             (SELECT count(*) FROM mimiciv_icu.icustays j WHERE j.subject_id = s.subject_id AND j.intime <= s.intime) AS icu_stay_number \
             FROM mimiciv_icu.icustays s WHERE s.stay_id = {stay}"
        );
        match one(conn, sql)? {
            None => return Ok(vec![Fact { name: "stay_id".into(), value: format!("{stay} (not in the database)") }]),
            Some((columns, row)) => {
                subject_id = subject_id.or(row[0].as_f64().map(|v| v as i64));
                hadm_id = hadm_id.or(row[1].as_f64().map(|v| v as i64));
                for (c, v) in columns.iter().zip(&row).skip(2) {
                    push(&mut facts, &format!("icu_{c}").replace("icu_icu_", "icu_"), v);
                }
            }
        }
    }
    let mut anchor: Option<(f64, f64)> = None;
    if let Some(subject) = subject_id {
        let sql = format!(
            "SELECT gender, anchor_age, anchor_year, dod FROM mimiciv_hosp.patients WHERE subject_id = {subject}"
        );
        match one(conn, sql)? {
            None => {
                return Ok(vec![Fact { name: "subject_id".into(), value: format!("{subject} (not in the database)") }])
            }
            Some((_, row)) => {
                push(&mut facts, "sex", &row[0]);
                push(&mut facts, "date_of_death", &row[3]);
                if let (Some(age), Some(year)) = (row[1].as_f64(), row[2].as_f64()) {
                    anchor = Some((age, year));
                }
            }
        }
    }
    if let Some(hadm) = hadm_id {
        let sql = format!(
            "SELECT admittime, dischtime, admission_type, hospital_expire_flag FROM mimiciv_hosp.admissions WHERE hadm_id = {hadm}"
        );
        match one(conn, sql)? {
            None => return Ok(vec![Fact { name: "hadm_id".into(), value: format!("{hadm} (not in the database)") }]),
            Some((columns, row)) => {
                let admit = row[0].to_text();
                if let (Some((age, year)), Ok(admit_year)) = (anchor, admit.get(..4).unwrap_or("").parse::<f64>()) {
                    facts.push(Fact { name: "age_at_admission".into(), value: format!("{}", age + admit_year - year) });
                }
                for (c, v) in columns.iter().zip(&row) {
                    push(&mut facts, c, v);
                }
            }
        }
        let sql = format!(
            "SELECT d.icd_version, d.icd_code, t.long_title FROM mimiciv_hosp.diagnoses_icd d \
             LEFT JOIN mimiciv_hosp.d_icd_diagnoses t ON t.icd_code = d.icd_code AND t.icd_version = d.icd_version \
             WHERE d.hadm_id = {hadm} ORDER BY d.seq_num"
        );
        let r = conn.query(&sql).map_err(|e| e.to_string())?;
        let listed: Vec<String> = r
            .rows
            .iter()
            .take(15)
            .map(|row| format!("ICD-{} {} {}", row[0].to_text(), row[1].to_text().trim(), row[2].to_text()))
            .collect();
        if !listed.is_empty() {
            let more = r.rows.len().saturating_sub(15);
            let tail = if more > 0 { format!("; and {more} more") } else { String::new() };
            facts.push(Fact { name: "diagnoses".into(), value: format!("{}{tail}", listed.join("; ")) });
        }
    }
    if let Some(stay) = stay_id {
        let r = conn
            .query(&format!("SELECT * FROM mimiciv_derived.first_day_lab WHERE stay_id = {stay}"))
            .map_err(|e| e.to_string())?;
        if let Some(row) = r.rows.first() {
            let labs: Vec<String> = r
                .columns
                .iter()
                .zip(row)
                .filter(|(c, v)| {
                    !matches!(v, Value::Null) && !["subject_id", "stay_id", "hadm_id"].contains(&c.as_str())
                })
                .map(|(c, v)| format!("{c} {}", v.to_text()))
                .collect();
            if !labs.is_empty() {
                facts.push(Fact { name: "first_day_labs".into(), value: labs.join(", ") });
            }
        }
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_urls_give_their_parts() {
        let p = postgres_parts("postgres://rwe_run_7:s%40cret@localhost:5433/mimic?sslmode=disable").unwrap();
        assert_eq!(
            (p.user.as_str(), p.password.as_str(), p.port, p.dbname.as_str()),
            ("rwe_run_7", "s@cret", 5433, "mimic")
        );
        let p = postgres_parts("postgresql://evident@db/mimic").unwrap();
        assert_eq!((p.user.as_str(), p.password.as_str(), p.port), ("evident", "", 5432));
        assert!(postgres_parts("sqlite:x").is_none());
    }
}
