//! Arrow batches -> Avro record values, ready for `apache_avro::to_avro_datum`.

use std::collections::HashMap;

use apache_avro::schema::{InnerDecimalSchema, RecordSchema, Schema as AvroSchema, UuidSchema};
use apache_avro::types::Value;
use apache_avro::Decimal;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type,
    Time32MillisecondType, Time64MicrosecondType, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;

use super::decimal::i128_to_be;
use super::schema::arrow_type;
use super::schema::join;
use super::schema::schema_err;
use super::schema::Names;
use super::to_arrow::cast_to;
use crate::{FormatError, Result};

/// Converts every row of `batch` to an Avro record value of `schema` (a record schema), ready
/// for `apache_avro::to_avro_datum`. Columns are matched to fields by name; a field without a
/// column is written as null (an error if the field is not nullable). Columns whose type differs
/// from the field's natural Arrow type (e.g. `Int16` for an Avro `int`, `Utf8View` for a
/// `string`) are cast first.
pub fn batch_to_avro_records(batch: &RecordBatch, schema: &AvroSchema) -> Result<Vec<Value>> {
    let names = Names::checked(schema)?;
    let root = names.resolve(schema, "")?;
    let AvroSchema::Record(record) = root else {
        return Err(schema_err("", "top-level Avro schema must be a record"));
    };
    let columns: Vec<(&str, ArrayRef)> = batch
        .schema_ref()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| (f.name().as_str(), c.clone()))
        .collect();
    let rows = struct_to_values(&names, record, &columns, batch.num_rows(), None, "")?;
    Ok(rows.into_iter().map(|r| r.unwrap_or(Value::Null)).collect())
}

/// Builds record values from named columns; `None` rows are null structs.
fn struct_to_values(
    names: &Names<'_>,
    record: &RecordSchema,
    columns: &[(&str, ArrayRef)],
    len: usize,
    valid: Option<&arrow::buffer::NullBuffer>,
    path: &str,
) -> Result<Vec<Option<Value>>> {
    let mut per_field: Vec<std::vec::IntoIter<Value>> = Vec::with_capacity(record.fields.len());
    for f in &record.fields {
        let p = join(path, &f.name);
        let values = match columns.iter().find(|(n, _)| *n == f.name) {
            Some((_, array)) => array_to_values(names, array, &f.schema, &p)?,
            None => {
                let n = names.nullable(&f.schema, &p)?;
                match n.branches {
                    Some((null_idx, v)) if null_idx != v => {
                        vec![Value::Union(null_idx, Box::new(Value::Null)); len]
                    }
                    _ => {
                        return Err(schema_err(
                            &p,
                            "field is not nullable and the batch has no such column",
                        ))
                    }
                }
            }
        };
        per_field.push(values.into_iter());
    }
    let mut out = Vec::with_capacity(len);
    for row in 0..len {
        let mut fields = Vec::with_capacity(record.fields.len());
        for (f, it) in record.fields.iter().zip(per_field.iter_mut()) {
            let v = it
                .next()
                .ok_or_else(|| schema_err(&join(path, &f.name), "column shorter than batch"))?;
            fields.push((f.name.clone(), v));
        }
        let is_valid = valid.is_none_or(|n| n.is_valid(row));
        out.push(is_valid.then_some(Value::Record(fields)));
    }
    Ok(out)
}

fn downcast_err(path: &str, expected: &str, found: &DataType) -> FormatError {
    schema_err(
        path,
        format!("expected an Arrow {expected} column, found {found}"),
    )
}

/// Converts a column to Avro values of `schema` (wrapping in the null union where there is one).
fn array_to_values(
    names: &Names<'_>,
    array: &ArrayRef,
    schema: &AvroSchema,
    path: &str,
) -> Result<Vec<Value>> {
    let n = names.nullable(schema, path)?;
    let natural = arrow_type(names, n.inner, path)?;
    let array = match (&natural, array.data_type()) {
        // Nested types are converted child by child (names of nested fields may differ).
        (DataType::Struct(_), DataType::Struct(_))
        | (DataType::List(_), DataType::List(_) | DataType::LargeList(_))
        | (DataType::Map(_, _), DataType::Map(_, _)) => array.clone(),
        _ => cast_to(array.clone(), &natural, path)?,
    };
    let inner = inner_values(names, &array, n.inner, path)?;
    inner
        .into_iter()
        .map(|v| match (v, n.branches) {
            (None, Some((null_idx, value_idx))) if null_idx != value_idx => {
                Ok(Value::Union(null_idx, Box::new(Value::Null)))
            }
            (None, _) => Err(schema_err(path, "null value in a non-nullable field")),
            (Some(v), Some((_, value_idx))) => Ok(Value::Union(value_idx, Box::new(v))),
            (Some(v), None) => Ok(v),
        })
        .collect()
}

macro_rules! primitive_values {
    ($array:expr, $path:expr, $t:ty, $name:literal, $wrap:expr) => {{
        let a = $array
            .as_primitive_opt::<$t>()
            .ok_or_else(|| downcast_err($path, $name, $array.data_type()))?;
        a.iter()
            .map(|v| v.map($wrap))
            .collect::<Vec<Option<Value>>>()
    }};
}

fn inner_values(
    names: &Names<'_>,
    array: &ArrayRef,
    schema: &AvroSchema,
    path: &str,
) -> Result<Vec<Option<Value>>> {
    let values = match schema {
        AvroSchema::Null => vec![None; array.len()],
        AvroSchema::Boolean => {
            let a = array
                .as_boolean_opt()
                .ok_or_else(|| downcast_err(path, "boolean", array.data_type()))?;
            a.iter().map(|v| v.map(Value::Boolean)).collect()
        }
        AvroSchema::Int => primitive_values!(array, path, Int32Type, "int32", Value::Int),
        AvroSchema::Long => primitive_values!(array, path, Int64Type, "int64", Value::Long),
        AvroSchema::Float => primitive_values!(array, path, Float32Type, "float32", Value::Float),
        AvroSchema::Double => primitive_values!(array, path, Float64Type, "float64", Value::Double),
        AvroSchema::Date => primitive_values!(array, path, Date32Type, "date32", Value::Date),
        AvroSchema::TimeMillis => {
            primitive_values!(
                array,
                path,
                Time32MillisecondType,
                "time32(ms)",
                Value::TimeMillis
            )
        }
        AvroSchema::TimeMicros => {
            primitive_values!(
                array,
                path,
                Time64MicrosecondType,
                "time64(us)",
                Value::TimeMicros
            )
        }
        AvroSchema::TimestampMillis => primitive_values!(
            array,
            path,
            TimestampMillisecondType,
            "timestamp(ms)",
            Value::TimestampMillis
        ),
        AvroSchema::TimestampMicros => primitive_values!(
            array,
            path,
            TimestampMicrosecondType,
            "timestamp(us)",
            Value::TimestampMicros
        ),
        AvroSchema::TimestampNanos => primitive_values!(
            array,
            path,
            TimestampNanosecondType,
            "timestamp(ns)",
            Value::TimestampNanos
        ),
        AvroSchema::LocalTimestampMillis => primitive_values!(
            array,
            path,
            TimestampMillisecondType,
            "timestamp(ms)",
            Value::LocalTimestampMillis
        ),
        AvroSchema::LocalTimestampMicros => primitive_values!(
            array,
            path,
            TimestampMicrosecondType,
            "timestamp(us)",
            Value::LocalTimestampMicros
        ),
        AvroSchema::LocalTimestampNanos => primitive_values!(
            array,
            path,
            TimestampNanosecondType,
            "timestamp(ns)",
            Value::LocalTimestampNanos
        ),
        AvroSchema::String | AvroSchema::Uuid(UuidSchema::String) => {
            let a = array
                .as_string_opt::<i32>()
                .ok_or_else(|| downcast_err(path, "utf8", array.data_type()))?;
            a.iter()
                .map(|v| v.map(|s| Value::String(s.to_string())))
                .collect()
        }
        AvroSchema::Enum(e) => {
            let a = array
                .as_string_opt::<i32>()
                .ok_or_else(|| downcast_err(path, "utf8", array.data_type()))?;
            a.iter()
                .map(|v| {
                    v.map(|s| {
                        let idx = e
                            .symbols
                            .iter()
                            .position(|sym| sym == s)
                            .and_then(|i| u32::try_from(i).ok())
                            .ok_or_else(|| {
                                schema_err(
                                    path,
                                    format!("{s:?} is not a symbol of enum {}", e.name),
                                )
                            })?;
                        Ok(Value::Enum(idx, s.to_string()))
                    })
                    .transpose()
                })
                .collect::<Result<Vec<_>>>()?
        }
        AvroSchema::Bytes | AvroSchema::Uuid(UuidSchema::Bytes) => {
            let a = array
                .as_binary_opt::<i32>()
                .ok_or_else(|| downcast_err(path, "binary", array.data_type()))?;
            a.iter()
                .map(|v| v.map(|b| Value::Bytes(b.to_vec())))
                .collect()
        }
        AvroSchema::Fixed(f) | AvroSchema::Uuid(UuidSchema::Fixed(f)) => {
            let a = array
                .as_fixed_size_binary_opt()
                .ok_or_else(|| downcast_err(path, "fixed-size binary", array.data_type()))?;
            a.iter()
                .map(|v| v.map(|b| Value::Fixed(f.size, b.to_vec())))
                .collect()
        }
        AvroSchema::Decimal(d) => {
            let a = array
                .as_primitive_opt::<Decimal128Type>()
                .ok_or_else(|| downcast_err(path, "decimal128", array.data_type()))?;
            let size = match &d.inner {
                InnerDecimalSchema::Fixed(f) => Some(f.size),
                InnerDecimalSchema::Bytes => None,
            };
            a.iter()
                .map(|v| {
                    v.map(|x| i128_to_be(x, size, path).map(|b| Value::Decimal(Decimal::from(b))))
                        .transpose()
                })
                .collect::<Result<Vec<_>>>()?
        }
        AvroSchema::Record(record) => {
            let s = array
                .as_struct_opt()
                .ok_or_else(|| downcast_err(path, "struct", array.data_type()))?;
            let columns: Vec<(&str, ArrayRef)> = s
                .fields()
                .iter()
                .zip(s.columns())
                .map(|(f, c)| (f.name().as_str(), c.clone()))
                .collect();
            struct_to_values(names, record, &columns, s.len(), s.nulls(), path)?
        }
        AvroSchema::Array(items) => {
            if let Some(l) = array.as_list_opt::<i32>() {
                let offsets: Vec<usize> = l.value_offsets().iter().map(|o| *o as usize).collect();
                list_values(names, l.values(), &offsets, l.nulls(), &items.items, path)?
            } else if let Some(l) = array.as_list_opt::<i64>() {
                let offsets: Vec<usize> = l.value_offsets().iter().map(|o| *o as usize).collect();
                list_values(names, l.values(), &offsets, l.nulls(), &items.items, path)?
            } else {
                return Err(downcast_err(path, "list", array.data_type()));
            }
        }
        AvroSchema::Map(m) => {
            let map = array
                .as_map_opt()
                .ok_or_else(|| downcast_err(path, "map", array.data_type()))?;
            let keys = cast_to(map.keys().clone(), &DataType::Utf8, path)?;
            let keys = keys
                .as_string_opt::<i32>()
                .ok_or_else(|| downcast_err(path, "utf8 map key", keys.data_type()))?;
            let values = array_to_values(names, map.values(), &m.types, path)?;
            let offsets: Vec<usize> = map.value_offsets().iter().map(|o| *o as usize).collect();
            let mut out = Vec::with_capacity(map.len());
            for (row, w) in offsets.windows(2).enumerate() {
                let (Some(&start), Some(&end)) = (w.first(), w.get(1)) else {
                    continue;
                };
                if map.is_null(row) {
                    out.push(None);
                    continue;
                }
                let mut entries = HashMap::with_capacity(end.saturating_sub(start));
                for i in start..end {
                    if keys.is_null(i) {
                        return Err(schema_err(path, "null map key"));
                    }
                    let v = values
                        .get(i)
                        .cloned()
                        .ok_or_else(|| schema_err(path, "map offsets past the values"))?;
                    entries.insert(keys.value(i).to_string(), v);
                }
                out.push(Some(Value::Map(entries)));
            }
            out
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
    Ok(values)
}

fn list_values(
    names: &Names<'_>,
    child: &ArrayRef,
    offsets: &[usize],
    nulls: Option<&arrow::buffer::NullBuffer>,
    items: &AvroSchema,
    path: &str,
) -> Result<Vec<Option<Value>>> {
    let child_values = array_to_values(names, child, items, path)?;
    let mut out = Vec::with_capacity(offsets.len().saturating_sub(1));
    for (row, w) in offsets.windows(2).enumerate() {
        let (Some(&start), Some(&end)) = (w.first(), w.get(1)) else {
            continue;
        };
        if nulls.is_some_and(|n| n.is_null(row)) {
            out.push(None);
            continue;
        }
        let elems = child_values
            .get(start..end)
            .ok_or_else(|| schema_err(path, "list offsets past the values"))?;
        out.push(Some(Value::Array(elems.to_vec())));
    }
    Ok(out)
}
