//! Avro record values -> an Arrow batch of a given schema (casting where Spark narrowed a type).

use std::sync::Arc;

use apache_avro::schema::{Schema as AvroSchema, UuidSchema};
use apache_avro::types::Value;
use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder,
    Float32Builder, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
    Time32MillisecondBuilder, Time64MicrosecondBuilder, TimestampMicrosecondBuilder,
    TimestampMillisecondBuilder, TimestampNanosecondBuilder,
};
use arrow_array::{
    new_null_array, Array, ArrayRef, ListArray, MapArray, RecordBatch, RecordBatchOptions,
    StringArray, StructArray,
};
use arrow_schema::{DataType, SchemaRef};

use super::decimal::i128_from_be;
use super::schema::arrow_field;
use super::schema::decimal_precision_scale;
use super::schema::join;
use super::schema::map_entries_field;
use super::schema::record_fields;
use super::schema::schema_err;
use super::schema::Names;
use super::{LIST_ITEM_NAME, UTC};
use crate::{FormatError, Result};

/// Converts Avro record values (as decoded with `schema`) to a batch with the given Arrow
/// schema. Columns are matched by name: a column of `target` that `schema` lacks is all null
/// (an error if it is not nullable), Avro fields `target` does not name are dropped, and a
/// column whose natural type (see the module doc) differs from the target type is cast to it.
pub fn avro_records_to_batch(
    schema: &AvroSchema,
    records: &[Value],
    target: &SchemaRef,
) -> Result<RecordBatch> {
    let names = Names::checked(schema)?;
    let root = names.resolve(schema, "")?;
    let AvroSchema::Record(record) = root else {
        return Err(schema_err("", "top-level Avro schema must be a record"));
    };
    let rows: Vec<Option<&Value>> = records.iter().map(Some).collect();
    let rows = unwrap_records(&rows, "")?;
    let mut columns = Vec::with_capacity(target.fields().len());
    for field in target.fields() {
        let name = field.name();
        let column = match record.lookup.get(name.as_str()) {
            Some(&idx) => {
                let avro_field = record.fields.get(idx).ok_or_else(|| {
                    schema_err(name, "record lookup table points past the fields")
                })?;
                let values = field_values(&rows, idx, name);
                let array = build_array(&names, &values, &avro_field.schema, name)?;
                cast_to(array, field.data_type(), name)?
            }
            None if field.is_nullable() => new_null_array(field.data_type(), records.len()),
            None => {
                return Err(schema_err(
                    name,
                    "column is not nullable but the Avro schema has no such field",
                ))
            }
        };
        columns.push(column);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(records.len()));
    RecordBatch::try_new_with_options(target.clone(), columns, &options).map_err(|e| {
        FormatError::Arrow {
            path: "avro records".to_string(),
            reason: e.to_string(),
        }
    })
}

/// Fails with [`FormatError::Schema`], naming the field, when `schema` is recursive (a record
/// that contains itself through its fields): such schemas have no Arrow counterpart and are
/// refused before any data is decoded with them.
pub(crate) fn check_not_recursive(schema: &AvroSchema) -> Result<()> {
    Names::checked(schema).map(|_| ())
}

pub(super) fn cast_to(array: ArrayRef, to: &DataType, path: &str) -> Result<ArrayRef> {
    if array.data_type() == to {
        return Ok(array);
    }
    crate::exact_cast(&array, to).map_err(|e| {
        schema_err(
            path,
            format!("cannot cast {} to {to}: {e}", array.data_type()),
        )
    })
}

/// Strips union wrappers; `None` stands for null.
fn unwrap_value(v: Option<&Value>) -> Option<&Value> {
    let mut v = v?;
    while let Value::Union(_, inner) = v {
        v = inner;
    }
    match v {
        Value::Null => None,
        other => Some(other),
    }
}

/// The `(name, value)` pairs of an Avro record value.
type RecordFields<'v> = &'v [(String, Value)];

/// Checks that every non-null value is a record; returns their field lists.
fn unwrap_records<'v>(
    values: &[Option<&'v Value>],
    path: &str,
) -> Result<Vec<Option<RecordFields<'v>>>> {
    values
        .iter()
        .map(|v| match unwrap_value(*v) {
            None => Ok(None),
            Some(Value::Record(fields)) => Ok(Some(fields.as_slice())),
            Some(other) => Err(value_err(path, "record", other)),
        })
        .collect()
}

fn field_values<'v>(
    rows: &[Option<RecordFields<'v>>],
    idx: usize,
    name: &str,
) -> Vec<Option<&'v Value>> {
    rows.iter()
        .map(|row| {
            let fields = (*row)?;
            match fields.get(idx) {
                Some((n, v)) if n == name => Some(v),
                _ => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            }
        })
        .collect()
}

fn value_err(path: &str, expected: &str, found: &Value) -> FormatError {
    let mut shown = format!("{found:?}");
    if shown.len() > 80 {
        let mut cut = 80;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push_str("...");
    }
    schema_err(
        path,
        format!("expected an Avro {expected} value, found {shown}"),
    )
}

fn arrow_build_err(path: &str, e: impl std::fmt::Display) -> FormatError {
    FormatError::Arrow {
        path: path.to_string(),
        reason: e.to_string(),
    }
}

macro_rules! build_primitive {
    ($values:expr, $path:expr, $builder:expr, $expected:literal, $($pat:pat => $out:expr),+ $(,)?) => {{
        let mut builder = $builder;
        for v in $values {
            match unwrap_value(*v) {
                None => builder.append_null(),
                $(Some($pat) => builder.append_value($out),)+
                Some(other) => return Err(value_err($path, $expected, other)),
            }
        }
        Arc::new(builder.finish()) as ArrayRef
    }};
}

fn build_array(
    names: &Names<'_>,
    values: &[Option<&Value>],
    schema: &AvroSchema,
    path: &str,
) -> Result<ArrayRef> {
    let n = names.nullable(schema, path)?;
    let len = values.len();
    let array: ArrayRef = match n.inner {
        AvroSchema::Null => new_null_array(&DataType::Null, len),
        AvroSchema::Boolean => {
            build_primitive!(values, path, BooleanBuilder::with_capacity(len), "boolean",
            Value::Boolean(b) => *b)
        }
        AvroSchema::Int => build_primitive!(values, path, Int32Builder::with_capacity(len), "int",
            Value::Int(i) => *i),
        AvroSchema::Long => {
            build_primitive!(values, path, Int64Builder::with_capacity(len), "long",
            Value::Long(i) => *i, Value::Int(i) => i64::from(*i))
        }
        AvroSchema::Float => {
            build_primitive!(values, path, Float32Builder::with_capacity(len), "float",
            Value::Float(f) => *f)
        }
        AvroSchema::Double => {
            build_primitive!(values, path, Float64Builder::with_capacity(len), "double",
            Value::Double(f) => *f, Value::Float(f) => f64::from(*f))
        }
        AvroSchema::Bytes => build_primitive!(values, path, BinaryBuilder::new(), "bytes",
            Value::Bytes(b) => b),
        AvroSchema::Uuid(UuidSchema::Bytes) => {
            build_primitive!(values, path, BinaryBuilder::new(), "uuid",
            Value::Bytes(b) => b, Value::Uuid(u) => u.as_bytes())
        }
        AvroSchema::String | AvroSchema::Enum(_) | AvroSchema::Uuid(UuidSchema::String) => {
            build_primitive!(values, path, StringBuilder::new(), "string",
                Value::String(s) => s, Value::Enum(_, s) => s, Value::Uuid(u) => u.to_string())
        }
        AvroSchema::Fixed(f) | AvroSchema::Uuid(UuidSchema::Fixed(f)) => {
            let size =
                i32::try_from(f.size).map_err(|_| schema_err(path, "fixed size too large"))?;
            let mut builder = FixedSizeBinaryBuilder::with_capacity(len, size);
            for v in values {
                match unwrap_value(*v) {
                    None => builder.append_null(),
                    Some(Value::Fixed(_, b)) | Some(Value::Bytes(b)) => builder
                        .append_value(b)
                        .map_err(|e| arrow_build_err(path, e))?,
                    Some(Value::Uuid(u)) => builder
                        .append_value(u.as_bytes())
                        .map_err(|e| arrow_build_err(path, e))?,
                    Some(other) => return Err(value_err(path, "fixed", other)),
                }
            }
            Arc::new(builder.finish())
        }
        AvroSchema::Decimal(d) => {
            let (p, s) = decimal_precision_scale(d, path)?;
            let mut builder = Decimal128Builder::with_capacity(len);
            for v in values {
                match unwrap_value(*v) {
                    None => builder.append_null(),
                    Some(Value::Decimal(dec)) => {
                        let bytes = Vec::<u8>::try_from(dec)
                            .map_err(|e| schema_err(path, format!("decimal bytes: {e}")))?;
                        builder.append_value(i128_from_be(&bytes, path)?)
                    }
                    Some(Value::Bytes(b)) | Some(Value::Fixed(_, b)) => {
                        builder.append_value(i128_from_be(b, path)?)
                    }
                    Some(other) => return Err(value_err(path, "decimal", other)),
                }
            }
            Arc::new(
                builder
                    .finish()
                    .with_precision_and_scale(p, s)
                    .map_err(|e| arrow_build_err(path, e))?,
            )
        }
        AvroSchema::Date => {
            build_primitive!(values, path, Date32Builder::with_capacity(len), "date",
            Value::Date(d) => *d, Value::Int(d) => *d)
        }
        AvroSchema::TimeMillis => {
            build_primitive!(values, path, Time32MillisecondBuilder::with_capacity(len), "time-millis",
            Value::TimeMillis(t) => *t, Value::Int(t) => *t)
        }
        AvroSchema::TimeMicros => {
            build_primitive!(values, path, Time64MicrosecondBuilder::with_capacity(len), "time-micros",
            Value::TimeMicros(t) => *t, Value::Long(t) => *t)
        }
        AvroSchema::TimestampMillis | AvroSchema::LocalTimestampMillis => {
            let tz = matches!(n.inner, AvroSchema::TimestampMillis).then(|| Arc::from(UTC));
            let a = build_primitive!(values, path, TimestampMillisecondBuilder::with_capacity(len).with_timezone_opt(tz), "timestamp-millis",
                Value::TimestampMillis(t) => *t, Value::LocalTimestampMillis(t) => *t, Value::Long(t) => *t);
            a
        }
        AvroSchema::TimestampMicros | AvroSchema::LocalTimestampMicros => {
            let tz = matches!(n.inner, AvroSchema::TimestampMicros).then(|| Arc::from(UTC));
            let a = build_primitive!(values, path, TimestampMicrosecondBuilder::with_capacity(len).with_timezone_opt(tz), "timestamp-micros",
                Value::TimestampMicros(t) => *t, Value::LocalTimestampMicros(t) => *t, Value::Long(t) => *t);
            a
        }
        AvroSchema::TimestampNanos | AvroSchema::LocalTimestampNanos => {
            let tz = matches!(n.inner, AvroSchema::TimestampNanos).then(|| Arc::from(UTC));
            let a = build_primitive!(values, path, TimestampNanosecondBuilder::with_capacity(len).with_timezone_opt(tz), "timestamp-nanos",
                Value::TimestampNanos(t) => *t, Value::LocalTimestampNanos(t) => *t, Value::Long(t) => *t);
            a
        }
        AvroSchema::Record(record) => {
            let rows = unwrap_records(values, path)?;
            let fields = record_fields(names, record, path)?;
            let mut children = Vec::with_capacity(record.fields.len());
            for (idx, f) in record.fields.iter().enumerate() {
                let child_path = join(path, &f.name);
                let child_values = field_values(&rows, idx, &f.name);
                children.push(build_array(names, &child_values, &f.schema, &child_path)?);
            }
            let nulls = rows.iter().map(Option::is_some).collect::<Vec<_>>();
            let nulls = nulls.contains(&false).then(|| nulls.into());
            if fields.is_empty() {
                Arc::new(StructArray::new_empty_fields(len, nulls))
            } else {
                Arc::new(
                    StructArray::try_new(fields, children, nulls)
                        .map_err(|e| arrow_build_err(path, e))?,
                )
            }
        }
        AvroSchema::Array(a) => {
            let item_field = arrow_field(names, LIST_ITEM_NAME, &a.items, path)?;
            let mut offsets = Vec::with_capacity(len + 1);
            let mut valid = Vec::with_capacity(len);
            let mut items: Vec<Option<&Value>> = Vec::new();
            offsets.push(0i32);
            for v in values {
                match unwrap_value(*v) {
                    None => valid.push(false),
                    Some(Value::Array(elems)) => {
                        items.extend(elems.iter().map(Some));
                        valid.push(true);
                    }
                    Some(other) => return Err(value_err(path, "array", other)),
                }
                offsets.push(offset_i32(items.len(), path)?);
            }
            let child = build_array(names, &items, &a.items, path)?;
            let nulls = valid.contains(&false).then(|| valid.into());
            Arc::new(
                ListArray::try_new(
                    item_field,
                    arrow::buffer::OffsetBuffer::new(offsets.into()),
                    child,
                    nulls,
                )
                .map_err(|e| arrow_build_err(path, e))?,
            )
        }
        AvroSchema::Map(m) => {
            let entries_field = map_entries_field(names, &m.types, path)?;
            let mut offsets = Vec::with_capacity(len + 1);
            let mut valid = Vec::with_capacity(len);
            let mut keys: Vec<&str> = Vec::new();
            let mut vals: Vec<Option<&Value>> = Vec::new();
            offsets.push(0i32);
            for v in values {
                match unwrap_value(*v) {
                    None => valid.push(false),
                    Some(Value::Map(entries)) => {
                        // Avro maps are unordered; sort by key so the output is deterministic.
                        let mut sorted: Vec<_> = entries.iter().collect();
                        sorted.sort_by(|a, b| a.0.cmp(b.0));
                        for (k, v) in sorted {
                            keys.push(k);
                            vals.push(Some(v));
                        }
                        valid.push(true);
                    }
                    Some(other) => return Err(value_err(path, "map", other)),
                }
                offsets.push(offset_i32(keys.len(), path)?);
            }
            let DataType::Struct(entry_fields) = entries_field.data_type() else {
                return Err(schema_err(path, "map entries are not a struct"));
            };
            let key_array: ArrayRef = Arc::new(StringArray::from(keys));
            let value_array = build_array(names, &vals, &m.types, path)?;
            let entries =
                StructArray::try_new(entry_fields.clone(), vec![key_array, value_array], None)
                    .map_err(|e| arrow_build_err(path, e))?;
            let nulls = valid.contains(&false).then(|| valid.into());
            Arc::new(
                MapArray::try_new(
                    entries_field,
                    arrow::buffer::OffsetBuffer::new(offsets.into()),
                    entries,
                    nulls,
                    false,
                )
                .map_err(|e| arrow_build_err(path, e))?,
            )
        }
        AvroSchema::Union(_) | AvroSchema::Ref { .. } => {
            return Err(schema_err(path, "nested union or unresolved reference"))
        }
        AvroSchema::BigDecimal => {
            return Err(schema_err(
                path,
                "big-decimal has no fixed precision and scale",
            ))
        }
        AvroSchema::Duration(_) => return Err(schema_err(path, "duration is not supported")),
    };
    Ok(array)
}

fn offset_i32(n: usize, path: &str) -> Result<i32> {
    i32::try_from(n).map_err(|_| schema_err(path, "more than i32::MAX list or map items"))
}
