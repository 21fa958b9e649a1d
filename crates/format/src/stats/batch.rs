//! Column statistics of a log file from its records (Java `collectColumnRangeMetadata` over
//! the records of the file's data blocks, unmerged): min/max in Java's order of the typed
//! values, null counts and value counts over the records; sizes are 0 (Java does not mix
//! log-block sizes with parquet's). A file without records has, for every column, no
//! min/max, zero counts and (V2) the value type `NULL`.

use std::cmp::Ordering;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, Time32MillisecondType, Time64MicrosecondType, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, TimeUnit};

use super::footer::keep;
use super::{column_kind, wrap, ColumnKind, ColumnRange, Raw, StatsVersion};
use crate::hfile::mdt_column_stats::{value_type, ValueTypeInfo};
use crate::{FormatError, Result};

fn schema_err(path: &str, column: &str, reason: impl Into<String>) -> FormatError {
    FormatError::Schema {
        field: Some(column.to_string()),
        reason: format!("{path}: {}", reason.into()),
    }
}

/// The raw value at row `i` of `array` (`None` when null).
fn raw_at(array: &dyn Array, i: usize, path: &str, column: &str) -> Result<Option<Raw>> {
    if array.is_null(i) {
        return Ok(None);
    }
    Ok(Some(match array.data_type() {
        DataType::Boolean => Raw::Bool(array.as_boolean().value(i)),
        DataType::Int8 => Raw::Int(i32::from(array.as_primitive::<Int8Type>().value(i))),
        DataType::Int16 => Raw::Int(i32::from(array.as_primitive::<Int16Type>().value(i))),
        DataType::Int32 => Raw::Int(array.as_primitive::<Int32Type>().value(i)),
        DataType::Date32 => Raw::Int(array.as_primitive::<Date32Type>().value(i)),
        DataType::Time32(TimeUnit::Millisecond) => {
            Raw::Int(array.as_primitive::<Time32MillisecondType>().value(i))
        }
        DataType::Int64 => Raw::Long(array.as_primitive::<Int64Type>().value(i)),
        DataType::Time64(TimeUnit::Microsecond) => {
            Raw::Long(array.as_primitive::<Time64MicrosecondType>().value(i))
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            Raw::Long(array.as_primitive::<TimestampMillisecondType>().value(i))
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            Raw::Long(array.as_primitive::<TimestampMicrosecondType>().value(i))
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            Raw::Long(array.as_primitive::<TimestampNanosecondType>().value(i))
        }
        DataType::Float32 => Raw::Float(array.as_primitive::<Float32Type>().value(i)),
        DataType::Float64 => Raw::Double(array.as_primitive::<Float64Type>().value(i)),
        DataType::Decimal128(_, _) => Raw::Decimal(array.as_primitive::<Decimal128Type>().value(i)),
        DataType::Utf8 => Raw::Str(array.as_string::<i32>().value(i).to_string()),
        DataType::LargeUtf8 => Raw::Str(array.as_string::<i64>().value(i).to_string()),
        DataType::Binary => Raw::Bytes(array.as_binary::<i32>().value(i).to_vec()),
        DataType::LargeBinary => Raw::Bytes(array.as_binary::<i64>().value(i).to_vec()),
        DataType::FixedSizeBinary(_) => Raw::Bytes(array.as_fixed_size_binary().value(i).to_vec()),
        other => {
            return Err(schema_err(
                path,
                column,
                format!("type {other} has no column statistics"),
            ))
        }
    }))
}

/// The statistics of each of `columns` over the records in `batches` (the data blocks of one
/// log file), in `columns` order. A column the records lack gets an empty range (Java: no
/// values). `path` names the file in errors (a column type column stats do not cover, a V1
/// decimal that would lose digits).
pub fn batch_ranges(
    batches: &[RecordBatch],
    columns: &[String],
    version: StatsVersion,
    path: &str,
) -> Result<Vec<ColumnRange>> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let null_type = match version {
        StatsVersion::V1 => None,
        StatsVersion::V2 => Some(ValueTypeInfo {
            type_ordinal: value_type::NULL,
            additional_info: None,
        }),
    };
    let mut out = Vec::new();
    for column in columns {
        if rows == 0 {
            out.push(ColumnRange::empty(column, null_type.clone()));
            continue;
        }
        let mut kind: Option<ColumnKind> = None;
        let (mut min, mut max) = (None, None);
        let mut range = ColumnRange::empty(column, null_type.clone());
        for batch in batches {
            let Some(array) = batch.column_by_name(column) else {
                continue;
            };
            let k = column_kind(array.data_type()).ok_or_else(|| {
                schema_err(
                    path,
                    column,
                    format!("type {} has no column statistics", array.data_type()),
                )
            })?;
            kind.get_or_insert(k);
            range.value_count += i64::try_from(array.len()).unwrap_or(i64::MAX);
            for i in 0..array.len() {
                match raw_at(array.as_ref(), i, path, column)? {
                    None => range.null_count += 1,
                    Some(v) => {
                        keep(&mut min, v.clone(), Ordering::Less);
                        keep(&mut max, v, Ordering::Greater);
                    }
                }
            }
        }
        if let Some(kind) = kind {
            range.value_type = kind.value_type(version);
            range.min = min
                .map(|v| wrap(v, &kind, version, column, path))
                .transpose()?;
            range.max = max
                .map(|v| wrap(v, &kind, version, column, path))
                .transpose()?;
        }
        out.push(range);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use std::sync::Arc;

    use arrow_array::{Decimal128Array, Int64Array, StringArray};
    use arrow_schema::{Field, Schema};

    use super::*;
    use crate::hfile::mdt_column_stats::StatValue;

    #[test]
    fn test_batch_ranges_min_max_nulls_and_types() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
            Field::new("d", DataType::Decimal128(10, 2), true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec![Some("b"), None, Some("a")])),
                Arc::new(Int64Array::from(vec![Some(3), Some(-1), None])),
                Arc::new(
                    Decimal128Array::from(vec![Some(7500), Some(-5), Some(0)])
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
            ],
        )
        .unwrap();
        let cols: Vec<String> = ["s", "n", "d", "missing"].map(String::from).to_vec();
        let r = batch_ranges(&[batch], &cols, StatsVersion::V2, "f").unwrap();
        assert_eq!(r[0].min, Some(StatValue::String("a".into())));
        assert_eq!(r[0].max, Some(StatValue::String("b".into())));
        assert_eq!((r[0].null_count, r[0].value_count), (1, 3));
        assert_eq!(r[1].min, Some(StatValue::Long(-1)));
        assert_eq!(
            r[1].value_type.as_ref().unwrap().type_ordinal,
            value_type::LONG
        );
        assert_eq!(r[2].min, Some(StatValue::Bytes(vec![0xFB])));
        assert_eq!(r[2].max, Some(StatValue::Bytes(vec![29, 76])));
        assert_eq!(
            r[2].value_type.as_ref().unwrap().additional_info.as_deref(),
            Some("10,2")
        );
        assert_eq!(r[3].value_count, 0);
        assert_eq!(r[0].total_size, 0);
        let empty = batch_ranges(&[], &cols, StatsVersion::V2, "f").unwrap();
        assert!(empty
            .iter()
            .all(|r| r.min.is_none()
                && r.value_type.as_ref().unwrap().type_ordinal == value_type::NULL));
    }
}
