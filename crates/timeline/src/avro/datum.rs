//! Avro binary datums: serde values to and from the bytes of one record.
//!
//! Decoding reads with the writer schema and resolves to the reader schema by field name
//! (apache-avro's resolution: writer fields unknown to the reader are dropped, reader fields
//! missing in the writer take their default). Encoding resolves the serde value to the schema
//! and then writes it with map entries in key order, so equal values give equal bytes (Java
//! writes maps in hash order; readers do not care).

use apache_avro::types::Value;
use apache_avro::Schema;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::ocf::{write_bytes, write_long};
use crate::error::{Result, TimelineError};

/// Decodes one datum written with `writer` into `T`, resolving to `reader`. The datum must be
/// consumed exactly.
pub(crate) fn decode_datum<T: DeserializeOwned>(
    writer: &Schema,
    reader: &Schema,
    datum: &[u8],
    path: &str,
) -> Result<T> {
    let err = |reason: String| TimelineError::decode(path, reason);
    let datum_reader = apache_avro::reader::datum::GenericDatumReader::builder(writer)
        .reader_schema(reader)
        .build()
        .map_err(|e| {
            err(format!(
                "cannot resolve writer schema to reader schema: {e}"
            ))
        })?;
    let mut rest = datum;
    let value = datum_reader
        .read_value(&mut rest)
        .map_err(|e| err(format!("invalid Avro datum: {e}")))?;
    if !rest.is_empty() {
        return Err(err(format!(
            "{} trailing bytes after the record",
            rest.len()
        )));
    }
    apache_avro::from_value::<T>(&value)
        .map_err(|e| err(format!("record does not match the expected type: {e}")))
}

/// Encodes `value` as one datum of `schema`.
pub(crate) fn encode_datum<T: Serialize>(
    value: &T,
    schema: &Schema,
    what: &str,
) -> Result<Vec<u8>> {
    let err = |reason: String| TimelineError::Encode {
        what: what.to_string(),
        reason,
    };
    let raw = apache_avro::to_value(value).map_err(|e| err(e.to_string()))?;
    let resolved = raw
        .resolve(schema)
        .map_err(|e| err(format!("value does not fit the schema: {e}")))?;
    let mut out = Vec::new();
    write_value(&resolved, &mut out).map_err(err)?;
    Ok(out)
}

/// Writes a value already resolved to its schema (union branches chosen, record fields in
/// schema order).
fn write_value(value: &Value, out: &mut Vec<u8>) -> std::result::Result<(), String> {
    match value {
        Value::Null => {}
        Value::Boolean(b) => out.push(u8::from(*b)),
        Value::Int(i) | Value::Date(i) | Value::TimeMillis(i) => write_long(out, i64::from(*i)),
        Value::Long(l)
        | Value::TimeMicros(l)
        | Value::TimestampMillis(l)
        | Value::TimestampMicros(l)
        | Value::TimestampNanos(l)
        | Value::LocalTimestampMillis(l)
        | Value::LocalTimestampMicros(l)
        | Value::LocalTimestampNanos(l) => write_long(out, *l),
        Value::Float(f) => out.extend_from_slice(&f.to_le_bytes()),
        Value::Double(d) => out.extend_from_slice(&d.to_le_bytes()),
        Value::Bytes(b) => write_bytes(out, b),
        Value::String(s) => write_bytes(out, s.as_bytes()),
        Value::Fixed(_, b) => out.extend_from_slice(b),
        Value::Enum(i, _) => write_long(out, i64::from(*i)),
        Value::Union(i, inner) => {
            write_long(out, i64::from(*i));
            write_value(inner, out)?;
        }
        Value::Array(items) => {
            if !items.is_empty() {
                write_long(out, len_i64(items.len()));
                for item in items {
                    write_value(item, out)?;
                }
            }
            write_long(out, 0);
        }
        Value::Map(entries) => {
            if !entries.is_empty() {
                write_long(out, len_i64(entries.len()));
                let mut sorted: Vec<(&String, &Value)> = entries.iter().collect();
                sorted.sort_by(|a, b| a.0.cmp(b.0));
                for (k, v) in sorted {
                    write_bytes(out, k.as_bytes());
                    write_value(v, out)?;
                }
            }
            write_long(out, 0);
        }
        Value::Record(fields) => {
            for (_, v) in fields {
                write_value(v, out)?;
            }
        }
        other => return Err(format!("unsupported Avro value kind {other:?}")),
    }
    Ok(())
}

fn len_i64(len: usize) -> i64 {
    i64::try_from(len).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Small {
        a: Option<String>,
        m: Option<BTreeMap<String, i64>>,
        v: Option<i32>,
    }

    const SMALL: &str = r#"{"type":"record","name":"Small","fields":[
        {"name":"a","type":["null","string"],"default":null},
        {"name":"m","type":["null",{"type":"map","values":"long"}],"default":null},
        {"name":"v","type":["int","null"],"default":1}]}"#;

    #[test]
    fn test_encode_datum_matches_apache_avro_writer_bytes() {
        let schema = Schema::parse_str(SMALL).unwrap();
        let value = Small {
            a: Some("x".into()),
            m: Some(BTreeMap::from([("k".to_string(), 5)])),
            v: None,
        };
        let ours = encode_datum(&value, &schema, "Small").unwrap();
        let theirs = apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
            .build()
            .unwrap()
            .write_value_to_vec(
                apache_avro::to_value(&value)
                    .unwrap()
                    .resolve(&schema)
                    .unwrap(),
            )
            .unwrap();
        assert_eq!(ours, theirs);
        let back: Small = decode_datum(&schema, &schema, &ours, "k").unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn test_decode_datum_missing_writer_field_takes_reader_default() {
        let writer = Schema::parse_str(
            r#"{"type":"record","name":"Small","fields":[
            {"name":"a","type":["null","string"],"default":null},
            {"name":"extra","type":"long"}]}"#,
        )
        .unwrap();
        let reader = Schema::parse_str(SMALL).unwrap();
        // a = "y" (branch 1, len 1, 'y'), extra = 7
        let datum = [2u8, 2, b'y', 14];
        let got: Small = decode_datum(&writer, &reader, &datum, "k").unwrap();
        assert_eq!(
            got,
            Small {
                a: Some("y".into()),
                m: None,
                v: Some(1)
            }
        );
        let e = decode_datum::<Small>(&writer, &reader, &[2u8, 2, b'y', 14, 0], "p/q")
            .unwrap_err()
            .to_string();
        assert!(e.contains("p/q") && e.contains("trailing"), "{e}");
    }
}
