//! Arrow schemas -> Avro schema JSON, byte-for-byte as Spark writes it.

use std::fmt::Write as _;

use apache_avro::schema::Schema as AvroSchema;
use arrow_schema::{DataType, Field, Fields, Schema as ArrowSchema, SchemaRef, TimeUnit};

use super::schema::join;
use super::schema::parse_avro_schema;
use super::schema::schema_err;
use crate::{meta, Result};

/// A JSON value with ordered object keys, so schemas come out byte-for-byte as Spark writes them.
enum Json {
    Null,
    Num(i64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    fn str(s: impl Into<String>) -> Self {
        Json::Str(s.into())
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Num(n) => {
                let _ = write!(out, "{n}");
            }
            Json::Str(s) => {
                out.push_str(&serde_json::Value::String(s.clone()).to_string());
            }
            Json::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Obj(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String((*k).to_string()).to_string());
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// Writes the Avro schema JSON Spark (Hudi's `AvroConversionUtils`) derives from a struct type:
/// a record `name` in `namespace`; nullable fields as `["null", T]` with `"default": null`;
/// meta fields with `"doc": ""`; nested records named after their field in namespace
/// `<namespace>.<record name>`; decimals as `fixed` named `fixed` in namespace
/// `<namespace>.<record name>.<field>` of the minimal size for the precision; timestamps with a
/// zone as `timestamp-*`, without as `local-timestamp-*`.
pub fn arrow_schema_to_avro_json(
    schema: &ArrowSchema,
    name: &str,
    namespace: &str,
) -> Result<String> {
    let json = record_json(schema.fields(), name, namespace, "")?;
    let mut out = String::new();
    json.write(&mut out);
    Ok(out)
}

/// [`arrow_schema_to_avro_json`], parsed.
pub fn arrow_schema_to_avro(schema: &SchemaRef, name: &str, namespace: &str) -> Result<AvroSchema> {
    parse_avro_schema(&arrow_schema_to_avro_json(schema, name, namespace)?)
}

fn record_json(fields: &Fields, name: &str, namespace: &str, path: &str) -> Result<Json> {
    let child_ns = if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}.{name}")
    };
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        let p = join(path, f.name());
        let ty = field_type_json(f, &child_ns, &p)?;
        let mut entry = vec![("name", Json::str(f.name().as_str())), ("type", ty)];
        if path.is_empty() && meta::is_meta_column(f.name()) {
            entry.push(("doc", Json::str("")));
        }
        if f.is_nullable() {
            entry.push(("default", Json::Null));
        }
        out.push(Json::Obj(entry));
    }
    let mut obj = vec![("type", Json::str("record")), ("name", Json::str(name))];
    if !namespace.is_empty() {
        obj.push(("namespace", Json::str(namespace)));
    }
    obj.push(("fields", Json::Arr(out)));
    Ok(Json::Obj(obj))
}

/// The type of a field; `namespace` is that of the enclosing record's children.
fn field_type_json(field: &Field, namespace: &str, path: &str) -> Result<Json> {
    let ty = type_json(field.data_type(), field.name(), namespace, path)?;
    Ok(if field.is_nullable() {
        Json::Arr(vec![Json::str("null"), ty])
    } else {
        ty
    })
}

fn logical(base: &str, logical: &str) -> Json {
    Json::Obj(vec![
        ("type", Json::str(base)),
        ("logicalType", Json::str(logical)),
    ])
}

/// Minimal bytes of a two's complement integer holding every `precision`-digit number (Spark's
/// `minBytesForPrecision`).
fn min_bytes_for_precision(precision: u8) -> i64 {
    let mut n: i32 = 1;
    while 2f64.powi(8 * n - 1) < 10f64.powi(i32::from(precision)) {
        n += 1;
    }
    i64::from(n)
}

fn type_json(dt: &DataType, field_name: &str, namespace: &str, path: &str) -> Result<Json> {
    let json = match dt {
        DataType::Boolean => Json::str("boolean"),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => {
            Json::str("int")
        }
        DataType::Int64 | DataType::UInt32 => Json::str("long"),
        DataType::Float32 => Json::str("float"),
        DataType::Float64 => Json::str("double"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Json::str("string"),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => Json::str("bytes"),
        DataType::FixedSizeBinary(n) => Json::Obj(vec![
            ("type", Json::str("fixed")),
            ("name", Json::str("fixed")),
            ("namespace", Json::str(format!("{namespace}.{field_name}"))),
            ("size", Json::Num(i64::from(*n))),
        ]),
        DataType::Decimal128(p, s) => {
            if *s < 0 {
                return Err(schema_err(path, format!("negative decimal scale {s}")));
            }
            Json::Obj(vec![
                ("type", Json::str("fixed")),
                ("name", Json::str("fixed")),
                ("namespace", Json::str(format!("{namespace}.{field_name}"))),
                ("size", Json::Num(min_bytes_for_precision(*p))),
                ("logicalType", Json::str("decimal")),
                ("precision", Json::Num(i64::from(*p))),
                ("scale", Json::Num(i64::from(*s))),
            ])
        }
        DataType::Date32 => logical("int", "date"),
        DataType::Time32(TimeUnit::Millisecond) => logical("int", "time-millis"),
        DataType::Time64(TimeUnit::Microsecond) => logical("long", "time-micros"),
        DataType::Timestamp(unit, tz) => {
            let base = match unit {
                TimeUnit::Millisecond => "timestamp-millis",
                TimeUnit::Microsecond => "timestamp-micros",
                TimeUnit::Nanosecond => "timestamp-nanos",
                TimeUnit::Second => {
                    return Err(schema_err(path, "timestamps in seconds have no Avro type"))
                }
            };
            if tz.is_some() {
                logical("long", base)
            } else {
                logical("long", &format!("local-{base}"))
            }
        }
        // Spark names a nested record after its field, in the children's namespace.
        DataType::Struct(fields) => record_json(fields, field_name, namespace, path)?,
        DataType::List(item) | DataType::LargeList(item) | DataType::ListView(item) => {
            let items = if item.is_nullable() {
                Json::Arr(vec![
                    Json::str("null"),
                    type_json(item.data_type(), field_name, namespace, path)?,
                ])
            } else {
                type_json(item.data_type(), field_name, namespace, path)?
            };
            Json::Obj(vec![("type", Json::str("array")), ("items", items)])
        }
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(schema_err(path, "map entries are not a struct"));
            };
            let (Some(key), Some(value)) = (kv.first(), kv.get(1)) else {
                return Err(schema_err(path, "map entries need a key and a value field"));
            };
            if !matches!(
                key.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) {
                return Err(schema_err(
                    path,
                    format!("Avro map keys are strings, found {}", key.data_type()),
                ));
            }
            let values = if value.is_nullable() {
                Json::Arr(vec![
                    Json::str("null"),
                    type_json(value.data_type(), field_name, namespace, path)?,
                ])
            } else {
                type_json(value.data_type(), field_name, namespace, path)?
            };
            Json::Obj(vec![("type", Json::str("map")), ("values", values)])
        }
        other => {
            return Err(schema_err(
                path,
                format!("Arrow type {other} has no Avro counterpart"),
            ))
        }
    };
    Ok(json)
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )]

    use super::*;

    #[test]
    fn test_min_bytes_for_precision_spark_values_match() {
        assert_eq!(min_bytes_for_precision(10), 5);
        assert_eq!(min_bytes_for_precision(15), 7);
        assert_eq!(min_bytes_for_precision(38), 16);
        assert_eq!(min_bytes_for_precision(1), 1);
    }
}
