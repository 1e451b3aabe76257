//! PostgreSQL: connecting with errors that say what to do, the load target
//! (one transaction: the schemas are dropped and rebuilt inside it, rows
//! arrive by `COPY ... FROM STDIN` in text format), and decoding result
//! values into [`Value`]s that read as SQLite's do.

use std::io::Write;
use std::path::Path;

use postgres::types::{FromSql, Type};
use postgres::{Client, NoTls};

use crate::derived::Dialect;
use crate::load::Target;
use crate::schema::{TableDef, SCHEMAS};
use crate::source::{Field, TableReader};
use crate::{DatabaseUrl, DbError, Value};

/// Connects to the URL's server, or says why not and what to check.
pub(crate) fn connect(url: &DatabaseUrl) -> Result<Client, DbError> {
    let config = url.postgres_config()?;
    config.connect(NoTls).map_err(|e| DbError::Connect {
        url: url.redacted(),
        message: format!(
            "{}; check that the server is running (scripts/setup starts one), that the database exists and that the user and password are right",
            error_text(&e)
        ),
    })
}

/// The server's message with its detail, or the client's.
pub(crate) fn error_text(error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => {
            let mut text = db.message().to_string();
            if let Some(detail) = db.detail() {
                text.push_str(&format!(" ({detail})"));
            }
            text
        }
        None => {
            let mut text = error.to_string();
            let mut source = std::error::Error::source(error);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            text
        }
    }
}

/// A load in progress: one open transaction on the admin connection.
pub(crate) struct PgTarget {
    client: Client,
}

impl PgTarget {
    pub fn begin(url: &DatabaseUrl) -> Result<PgTarget, DbError> {
        let mut client = connect(url)?;
        let mut sql = String::from("BEGIN;\n");
        for schema in SCHEMAS {
            sql.push_str(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE;\nCREATE SCHEMA {schema};\n"));
        }
        client
            .batch_execute(&sql)
            .map_err(|e| DbError::backend(format!("preparing {}", url.redacted()), error_text(&e)))?;
        Ok(PgTarget { client })
    }
}

impl Target for PgTarget {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&mut self, sql: &str, context: &str) -> Result<(), DbError> {
        self.client.batch_execute(sql).map_err(|e| DbError::backend(context, error_text(&e)))
    }

    fn count(&mut self, qualified: &str) -> Result<u64, DbError> {
        let row = self
            .client
            .query_one(&format!("SELECT count(*) FROM {qualified}"), &[])
            .map_err(|e| DbError::backend(format!("counting {qualified}"), error_text(&e)))?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    fn append(&mut self, table: &TableDef, reader: &mut TableReader, path: &Path) -> Result<u64, DbError> {
        let columns: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
        let sql = format!("COPY {} ({}) FROM STDIN", table.qualified_name(), columns.join(", "));
        let context = format!("loading {}", table.qualified_name());
        let mut writer = self.client.copy_in(&sql).map_err(|e| DbError::backend(&context, error_text(&e)))?;
        let mut row = Vec::with_capacity(columns.len());
        let mut lines: Vec<u64> = Vec::new();
        let mut buffer: Vec<u8> = Vec::with_capacity(1 << 20);
        while let Some(line) = reader.next_row(&mut row)? {
            lines.push(line);
            write_text_row(&mut buffer, &row);
            if buffer.len() >= 1 << 20 {
                writer.write_all(&buffer).map_err(|e| DbError::backend(&context, e))?;
                buffer.clear();
            }
        }
        let sent = writer.write_all(&buffer).map_err(|e| DbError::backend(&context, e));
        sent.and_then(|_| writer.finish().map_err(|e| copy_error(&e, &lines, path, table)))
    }

    fn index_sql(&self, table: &TableDef) -> Vec<String> {
        table.index_sql(true)
    }

    fn derived_index_sql(&self, table: &str, column: &str) -> String {
        format!("CREATE INDEX {table}_{column}_idx ON mimiciv_derived.{table} ({column})")
    }

    fn finish(mut self: Box<Self>) -> Result<(), DbError> {
        self.client
            .batch_execute("ANALYZE; COMMIT;")
            .map_err(|e| DbError::backend("committing the load", error_text(&e)))
    }
}

/// A row refused by the server during COPY, named by the file's line:
/// the server says "COPY table, line N", N counting the rows sent.
fn copy_error(error: &postgres::Error, lines: &[u64], path: &Path, table: &TableDef) -> DbError {
    let text = error_text(error);
    let line = error
        .as_db_error()
        .and_then(|db| db.where_())
        .and_then(|w| w.split("line ").nth(1))
        .and_then(|n| n.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<usize>().ok())
        .and_then(|n| lines.get(n.wrapping_sub(1)).copied());
    match line {
        Some(line) => DbError::Input {
            path: path.to_path_buf(),
            line: Some(line),
            message: format!(
                "row refused by {}: {text}{}",
                table.qualified_name(),
                if text.contains("duplicate key") {
                    format!(
                        " (primary key {} repeats an earlier row); remove the duplicate",
                        table.primary_key.join(", ")
                    )
                } else {
                    String::new()
                }
            ),
        },
        None => DbError::backend(format!("loading {}", table.qualified_name()), text),
    }
}

/// One row in COPY's text format: tab-separated, `\N` for NULL, with
/// backslash, tab, newline and carriage return escaped.
fn write_text_row(out: &mut Vec<u8>, row: &[Option<Field>]) {
    for (i, field) in row.iter().enumerate() {
        if i > 0 {
            out.push(b'\t');
        }
        match field {
            None => out.extend_from_slice(b"\\N"),
            Some(Field::Integer(v)) => out.extend_from_slice(v.to_string().as_bytes()),
            Some(Field::Real(v)) => out.extend_from_slice(format!("{v:?}").as_bytes()),
            Some(Field::Text(v)) => {
                for b in v.bytes() {
                    match b {
                        b'\\' => out.extend_from_slice(b"\\\\"),
                        b'\t' => out.extend_from_slice(b"\\t"),
                        b'\n' => out.extend_from_slice(b"\\n"),
                        b'\r' => out.extend_from_slice(b"\\r"),
                        _ => out.push(b),
                    }
                }
            }
        }
    }
    out.push(b'\n');
}

/// PostgreSQL `numeric` read as a double (binary format: digit count,
/// weight, sign, scale, then base-10000 digits); made exact by going
/// through its decimal text.
struct Numeric(Option<f64>);

impl<'a> FromSql<'a> for Numeric {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let word = |i: usize| -> Result<u16, Box<dyn std::error::Error + Sync + Send>> {
            raw.get(i * 2..i * 2 + 2).map(|b| u16::from_be_bytes([b[0], b[1]])).ok_or_else(|| "short numeric".into())
        };
        let ndigits = word(0)? as usize;
        let weight = word(1)? as i16 as i64;
        let sign = word(2)?;
        match sign {
            0xC000 => return Ok(Numeric(Some(f64::NAN))),
            0xD000 => return Ok(Numeric(Some(f64::INFINITY))),
            0xF000 => return Ok(Numeric(Some(f64::NEG_INFINITY))),
            _ => {}
        }
        if ndigits == 0 {
            return Ok(Numeric(Some(0.0)));
        }
        let mut digits = String::with_capacity(ndigits * 4 + 8);
        if sign == 0x4000 {
            digits.push('-');
        }
        for i in 0..ndigits {
            digits.push_str(&format!("{:04}", word(4 + i)?));
        }
        let exponent = 4 * (weight - ndigits as i64 + 1);
        Ok(Numeric(Some(format!("{digits}e{exponent}").parse()?)))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
}

/// Decodes column `i` of a row by its type; timestamps and dates as
/// MIMIC-IV's text. A type Evident does not read is an error that says
/// how to cast it.
pub(crate) fn value(row: &postgres::Row, i: usize) -> Result<Value, DbError> {
    let column = &row.columns()[i];
    let ty = column.type_();
    let get_error =
        |e: postgres::Error| DbError::Query { message: format!("column {}: {}", column.name(), error_text(&e)) };
    let value = match *ty {
        Type::BOOL => row.try_get::<_, Option<bool>>(i).map_err(get_error)?.map(Value::Bool),
        Type::INT2 => row.try_get::<_, Option<i16>>(i).map_err(get_error)?.map(|v| Value::Integer(v.into())),
        Type::INT4 => row.try_get::<_, Option<i32>>(i).map_err(get_error)?.map(|v| Value::Integer(v.into())),
        Type::INT8 => row.try_get::<_, Option<i64>>(i).map_err(get_error)?.map(Value::Integer),
        Type::OID => row.try_get::<_, Option<u32>>(i).map_err(get_error)?.map(|v| Value::Integer(v.into())),
        Type::FLOAT4 => row.try_get::<_, Option<f32>>(i).map_err(get_error)?.map(|v| Value::Real(v.into())),
        Type::FLOAT8 => row.try_get::<_, Option<f64>>(i).map_err(get_error)?.map(Value::Real),
        Type::NUMERIC => row.try_get::<_, Option<Numeric>>(i).map_err(get_error)?.and_then(|n| n.0).map(Value::Real),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            row.try_get::<_, Option<String>>(i).map_err(get_error)?.map(Value::Text)
        }
        Type::TIMESTAMP => row
            .try_get::<_, Option<chrono::NaiveDateTime>>(i)
            .map_err(get_error)?
            .map(|t| Value::Text(format_timestamp(t))),
        Type::TIMESTAMPTZ => row
            .try_get::<_, Option<chrono::DateTime<chrono::Utc>>>(i)
            .map_err(get_error)?
            .map(|t| Value::Text(format_timestamp(t.naive_utc()))),
        Type::DATE => row
            .try_get::<_, Option<chrono::NaiveDate>>(i)
            .map_err(get_error)?
            .map(|d| Value::Text(d.format("%Y-%m-%d").to_string())),
        _ => {
            return Err(DbError::Query {
                message: format!(
                    "column {} has type {}, which Evident does not read; cast it, e.g. CAST({} AS TEXT)",
                    column.name(),
                    ty.name(),
                    column.name()
                ),
            })
        }
    };
    Ok(value.unwrap_or(Value::Null))
}

/// `2180-07-23 12:35:00`, with fractional seconds only when there are any
/// (as MIMIC-IV writes them).
fn format_timestamp(t: chrono::NaiveDateTime) -> String {
    use chrono::Timelike;
    if t.nanosecond() == 0 {
        t.format("%Y-%m-%d %H:%M:%S").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M:%S%.f").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_text_rows_escape_what_the_format_reserves() {
        let mut out = Vec::new();
        write_text_row(
            &mut out,
            &[Some(Field::Integer(7)), None, Some(Field::Real(0.1)), Some(Field::Text("a\tb\\c\nd".into()))],
        );
        assert_eq!(String::from_utf8(out).unwrap(), "7\t\\N\t0.1\ta\\tb\\\\c\\nd\n");
    }

    #[test]
    fn numerics_decode_from_their_binary_form() {
        // 12345.678 = digits [1, 2345, 6780], weight 1, scale 3.
        let mut raw = Vec::new();
        for w in [3u16, 1, 0, 3, 1, 2345, 6780] {
            raw.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(Numeric::from_sql(&Type::NUMERIC, &raw).unwrap().0, Some(12345.678));
        // -0.05 = digits [500], weight -1, negative.
        let mut raw = Vec::new();
        for w in [1u16, (-1i16) as u16, 0x4000, 2, 500] {
            raw.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(Numeric::from_sql(&Type::NUMERIC, &raw).unwrap().0, Some(-0.05));
    }
}
