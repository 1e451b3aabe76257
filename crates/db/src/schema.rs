//! The MIMIC-IV schema Evident loads, read from
//! [`data/mimiciv_schema.sql`](../data/mimiciv_schema.sql): each table's
//! schema, columns with their SQL types, primary key and indexes, and
//! whether a MIMIC-IV folder may lack it. The same `CREATE TABLE` text runs
//! on SQLite and PostgreSQL (SQLite gives `TIMESTAMP`, `DATE` and
//! `VARCHAR(n)` columns their type affinity and keeps the declared type);
//! only index statements differ, because SQLite names the schema on the
//! index and PostgreSQL on the table.

use std::sync::OnceLock;

/// How a column's CSV text is checked and stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColumnKind {
    /// SMALLINT, INTEGER or BIGINT, with the type's range.
    Integer { min: i64, max: i64 },
    /// DOUBLE PRECISION, FLOAT, REAL, NUMERIC.
    Real,
    /// VARCHAR(n) (`max_chars` n) or TEXT.
    Text { max_chars: Option<usize> },
    /// TIMESTAMP or TIMESTAMP(p): `YYYY-MM-DD HH:MM:SS[.fff]`, stored as written.
    Timestamp,
    /// DATE: `YYYY-MM-DD`.
    Date,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ColumnDef {
    pub name: String,
    /// As written in the schema file, e.g. `VARCHAR(40)`.
    pub sql_type: String,
    pub kind: ColumnKind,
    pub not_null: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableDef {
    /// `mimiciv_hosp` or `mimiciv_icu`.
    pub schema: String,
    pub name: String,
    pub columns: Vec<ColumnDef>,
    pub primary_key: Vec<String>,
    pub indexes: Vec<Vec<String>>,
    /// A MIMIC-IV folder may lack this table (the demo lacks chartevents).
    pub optional: bool,
}

impl TableDef {
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    /// The folder of a MIMIC-IV download the table's file is in.
    pub fn module(&self) -> &str {
        self.schema.strip_prefix("mimiciv_").unwrap_or(&self.schema)
    }

    /// `CREATE TABLE`, the same text on both backends.
    pub fn create_sql(&self) -> String {
        let mut entries: Vec<String> = self
            .columns
            .iter()
            .map(|c| format!("{} {}{}", c.name, c.sql_type, if c.not_null { " NOT NULL" } else { "" }))
            .collect();
        if !self.primary_key.is_empty() {
            entries.push(format!("PRIMARY KEY ({})", self.primary_key.join(", ")));
        }
        format!("CREATE TABLE {} (\n  {}\n)", self.qualified_name(), entries.join(",\n  "))
    }

    /// One `CREATE INDEX` per index, for SQLite (`schema.index ON table`)
    /// or PostgreSQL (`index ON schema.table`).
    pub fn index_sql(&self, postgres: bool) -> Vec<String> {
        self.indexes
            .iter()
            .map(|columns| {
                let index = format!("{}_{}_idx", self.name, columns.join("_"));
                if postgres {
                    format!("CREATE INDEX {index} ON {} ({})", self.qualified_name(), columns.join(", "))
                } else {
                    format!("CREATE INDEX {}.{index} ON {} ({})", self.schema, self.name, columns.join(", "))
                }
            })
            .collect()
    }
}

/// The schemas a MIMIC-IV load creates, in order; derived tables go to
/// the last.
pub(crate) const SCHEMAS: [&str; 3] = ["mimiciv_hosp", "mimiciv_icu", "mimiciv_derived"];

/// Every table of the schema file, in file order. The file is compiled in
/// and checked by this module's tests, so a malformed one cannot ship.
pub(crate) fn tables() -> &'static [TableDef] {
    static TABLES: OnceLock<Vec<TableDef>> = OnceLock::new();
    TABLES.get_or_init(|| {
        parse(include_str!("../data/mimiciv_schema.sql")).unwrap_or_else(|e| panic!("data/mimiciv_schema.sql: {e}"))
    })
}

fn parse(text: &str) -> Result<Vec<TableDef>, String> {
    let mut tables: Vec<TableDef> = Vec::new();
    // Comments go, except the OPTIONAL marker on a CREATE TABLE line.
    let cleaned: String = text
        .lines()
        .map(|line| match line.split_once("--") {
            Some((code, comment)) if comment.trim() == "OPTIONAL" => format!("{code} OPTIONAL_TABLE"),
            Some((code, _)) => code.to_string(),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    for statement in cleaned.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some(rest) = statement.strip_prefix("CREATE TABLE ") {
            tables.push(parse_table(rest)?);
        } else if let Some(rest) = statement.strip_prefix("CREATE INDEX ON ") {
            let (name, columns) = rest.split_once('(').ok_or_else(|| format!("index without columns: {statement}"))?;
            let name = name.trim();
            let table = tables
                .iter_mut()
                .find(|t| t.qualified_name() == name)
                .ok_or_else(|| format!("index on {name}, which is not defined above it"))?;
            let columns = split_columns(columns)?;
            for c in &columns {
                if !table.columns.iter().any(|d| &d.name == c) {
                    return Err(format!("index on {name} names column {c}, which it does not have"));
                }
            }
            table.indexes.push(columns);
        } else {
            return Err(format!("expected CREATE TABLE or CREATE INDEX ON, found: {statement}"));
        }
    }
    Ok(tables)
}

fn parse_table(rest: &str) -> Result<TableDef, String> {
    let optional = rest.contains("OPTIONAL_TABLE");
    let rest = rest.replace("OPTIONAL_TABLE", "");
    let (qualified, body) = rest.split_once('(').ok_or_else(|| format!("table without columns: {rest}"))?;
    let (schema, name) = qualified
        .trim()
        .split_once('.')
        .ok_or_else(|| format!("table {} is not schema-qualified", qualified.trim()))?;
    if !SCHEMAS[..2].contains(&schema) {
        return Err(format!("table {schema}.{name}: schema must be mimiciv_hosp or mimiciv_icu"));
    }
    let body = body.trim().strip_suffix(')').ok_or_else(|| format!("table {name}: no closing parenthesis"))?;
    let mut table = TableDef {
        schema: schema.to_string(),
        name: name.to_string(),
        columns: Vec::new(),
        primary_key: Vec::new(),
        indexes: Vec::new(),
        optional,
    };
    for entry in body.split(",\n").map(str::trim).filter(|e| !e.is_empty()) {
        if let Some(pk) = entry.strip_prefix("PRIMARY KEY") {
            table.primary_key = split_columns(pk.trim().trim_start_matches('('))?;
            continue;
        }
        let (column, rest) = entry.split_once(' ').ok_or_else(|| format!("{name}: column without a type: {entry}"))?;
        let (sql_type, not_null) = match rest.strip_suffix(" NOT NULL") {
            Some(t) => (t.trim(), true),
            None => (rest.trim(), false),
        };
        let kind = column_kind(sql_type).ok_or_else(|| format!("{name}.{column}: unknown type {sql_type}"))?;
        table.columns.push(ColumnDef { name: column.to_string(), sql_type: sql_type.to_string(), kind, not_null });
    }
    for c in &table.primary_key {
        if !table.columns.iter().any(|d| &d.name == c) {
            return Err(format!("primary key of {name} names column {c}, which it does not have"));
        }
    }
    Ok(table)
}

/// `a, b)` -> [a, b].
fn split_columns(text: &str) -> Result<Vec<String>, String> {
    let inner = text.trim().strip_suffix(')').ok_or_else(|| format!("no closing parenthesis in {text}"))?;
    Ok(inner.split(',').map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect())
}

fn column_kind(sql_type: &str) -> Option<ColumnKind> {
    let upper = sql_type.to_ascii_uppercase();
    Some(match upper.as_str() {
        "SMALLINT" => ColumnKind::Integer { min: i16::MIN as i64, max: i16::MAX as i64 },
        "INTEGER" => ColumnKind::Integer { min: i32::MIN as i64, max: i32::MAX as i64 },
        "BIGINT" => ColumnKind::Integer { min: i64::MIN, max: i64::MAX },
        "DOUBLE PRECISION" | "FLOAT" | "REAL" | "NUMERIC" => ColumnKind::Real,
        "TEXT" => ColumnKind::Text { max_chars: None },
        "DATE" => ColumnKind::Date,
        _ if upper == "TIMESTAMP" || (upper.starts_with("TIMESTAMP(") && upper.ends_with(')')) => ColumnKind::Timestamp,
        _ => {
            let n = upper.strip_prefix("VARCHAR(")?.strip_suffix(')')?.parse().ok()?;
            ColumnKind::Text { max_chars: Some(n) }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_file_holds_every_official_table() {
        let tables = tables();
        let names: Vec<String> = tables.iter().map(TableDef::qualified_name).collect();
        for expected in [
            "mimiciv_hosp.patients",
            "mimiciv_hosp.admissions",
            "mimiciv_hosp.labevents",
            "mimiciv_hosp.diagnoses_icd",
            "mimiciv_icu.icustays",
            "mimiciv_icu.chartevents",
            "mimiciv_icu.inputevents",
        ] {
            assert!(names.contains(&expected.to_string()), "{expected} missing from {names:?}");
        }
        assert_eq!(tables.len(), 31);
        let optional: Vec<&str> = tables.iter().filter(|t| t.optional).map(|t| t.name.as_str()).collect();
        assert_eq!(optional, ["chartevents"]);
        let patients = tables.iter().find(|t| t.name == "patients").unwrap();
        assert_eq!(patients.primary_key, ["subject_id"]);
        assert_eq!(patients.columns[1].kind, ColumnKind::Text { max_chars: Some(1) });
        assert!(patients.columns[1].not_null);
        let labevents = tables.iter().find(|t| t.name == "labevents").unwrap();
        for key in [vec!["subject_id".to_string()], vec!["hadm_id".into()], vec!["itemid".into()]] {
            assert!(labevents.indexes.contains(&key), "labevents lacks an index on {key:?}");
        }
    }

    #[test]
    fn index_statements_name_the_schema_where_each_backend_wants_it() {
        let icustays = tables().iter().find(|t| t.name == "icustays").unwrap();
        let sqlite = icustays.index_sql(false);
        let postgres = icustays.index_sql(true);
        assert!(sqlite.contains(&"CREATE INDEX mimiciv_icu.icustays_subject_id_idx ON icustays (subject_id)".into()));
        assert!(postgres.contains(&"CREATE INDEX icustays_subject_id_idx ON mimiciv_icu.icustays (subject_id)".into()));
    }

    #[test]
    fn malformed_schema_text_is_refused() {
        assert!(parse("CREATE TABLE x (a INTEGER);").unwrap_err().contains("schema-qualified"));
        assert!(parse("CREATE TABLE mimiciv_hosp.x (\n  a WIDGET\n);").unwrap_err().contains("unknown type"));
        assert!(parse("CREATE TABLE mimiciv_hosp.x (\n  a INTEGER\n);\nCREATE INDEX ON mimiciv_hosp.x (b);")
            .unwrap_err()
            .contains("names column b"));
    }
}
