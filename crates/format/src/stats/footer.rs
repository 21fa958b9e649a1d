//! Column statistics of a parquet base file from its footer (Java
//! `ParquetUtils.readColumnStatsFromMetadata`): for each indexed top-level column, every row
//! group's chunk statistics merged — min of the mins, max of the maxes (Java's order of the
//! typed values), null counts, value counts (`num_values`, nulls included), compressed
//! (`totalSize`) and uncompressed chunk sizes added up.

use std::cmp::Ordering;

use parquet::file::metadata::ParquetMetaData;
use parquet::file::statistics::Statistics;

use super::{column_kind, wrap, ColumnKind, ColumnRange, Raw, StatsVersion};
use crate::{FormatError, Result};

fn schema_err(path: &str, column: &str, reason: impl Into<String>) -> FormatError {
    FormatError::Schema {
        field: Some(column.to_string()),
        reason: format!("{path}: {}", reason.into()),
    }
}

/// Java's order between two raw values of one column.
pub(crate) fn raw_cmp(a: &Raw, b: &Raw) -> Option<Ordering> {
    use crate::hfile::mdt_column_stats::{java_string_cmp, StatValue};
    Some(match (a, b) {
        (Raw::Bool(x), Raw::Bool(y)) => x.cmp(y),
        (Raw::Int(x), Raw::Int(y)) => x.cmp(y),
        (Raw::Long(x), Raw::Long(y)) => x.cmp(y),
        (Raw::Decimal(x), Raw::Decimal(y)) => x.cmp(y),
        (Raw::Str(x), Raw::Str(y)) => java_string_cmp(x, y),
        (Raw::Float(x), Raw::Float(y)) => StatValue::Float(*x).java_cmp(&StatValue::Float(*y))?,
        (Raw::Double(x), Raw::Double(y)) => {
            StatValue::Double(*x).java_cmp(&StatValue::Double(*y))?
        }
        (Raw::Bytes(x), Raw::Bytes(y)) => {
            StatValue::Bytes(x.clone()).java_cmp(&StatValue::Bytes(y.clone()))?
        }
        _ => return None,
    })
}

/// Keeps in `slot` the smaller (`want` = Less) or larger value of `slot` and `v`.
pub(crate) fn keep(slot: &mut Option<Raw>, v: Raw, want: Ordering) {
    match slot {
        Some(cur) => {
            if raw_cmp(&v, cur) == Some(want) {
                *slot = Some(v);
            }
        }
        None => *slot = Some(v),
    }
}

/// The signed big-endian integer in `bytes` (at most 16 bytes).
fn be_i128(bytes: &[u8], path: &str, column: &str) -> Result<i128> {
    if bytes.len() > 16 {
        return Err(schema_err(path, column, "decimal wider than 128 bits"));
    }
    let neg = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut buf = [if neg { 0xFF } else { 0 }; 16];
    let start = 16 - bytes.len();
    if let Some(dst) = buf.get_mut(start..) {
        dst.copy_from_slice(bytes);
    }
    Ok(i128::from_be_bytes(buf))
}

/// The raw (min, max) of one chunk's statistics, as Java Hudi reads them
/// (`ParquetUtils.readColumnStatsFromMetadata` takes parquet-java's `genericGetMin/Max`
/// without checking `hasNonNullValue`): a boolean or numeric chunk with no non-null value
/// (all nulls) counts as `false`/zero, and is merged into the file's range like any chunk;
/// byte-array chunks without values count as absent. Safe for data skipping: the range only
/// widens, and an all-null file matches no comparison anyway.
fn chunk_min_max(
    stats: &Statistics,
    kind: &ColumnKind,
    path: &str,
    column: &str,
) -> Result<(Option<Raw>, Option<Raw>)> {
    use crate::hfile::mdt_column_stats::value_type as vt;
    let decimal = kind.ordinal == vt::DECIMAL;
    let string = kind.ordinal == vt::STRING;
    let conv_bytes = |b: &[u8]| -> Result<Raw> {
        if decimal {
            Ok(Raw::Decimal(be_i128(b, path, column)?))
        } else if string {
            String::from_utf8(b.to_vec())
                .map(Raw::Str)
                .map_err(|_| schema_err(path, column, "string statistics are not UTF-8"))
        } else {
            Ok(Raw::Bytes(b.to_vec()))
        }
    };
    Ok(match stats {
        Statistics::Boolean(s) => (
            Some(s.min_opt().map_or(Raw::Bool(false), |v| Raw::Bool(*v))),
            Some(s.max_opt().map_or(Raw::Bool(false), |v| Raw::Bool(*v))),
        ),
        Statistics::Int32(s) => {
            let c = |v: &i32| {
                if decimal {
                    Raw::Decimal(i128::from(*v))
                } else {
                    Raw::Int(*v)
                }
            };
            (
                Some(c(s.min_opt().unwrap_or(&0))),
                Some(c(s.max_opt().unwrap_or(&0))),
            )
        }
        Statistics::Int64(s) => {
            let c = |v: &i64| {
                if decimal {
                    Raw::Decimal(i128::from(*v))
                } else {
                    Raw::Long(*v)
                }
            };
            (
                Some(c(s.min_opt().unwrap_or(&0))),
                Some(c(s.max_opt().unwrap_or(&0))),
            )
        }
        Statistics::Float(s) => (
            Some(Raw::Float(s.min_opt().copied().unwrap_or(0.0))),
            Some(Raw::Float(s.max_opt().copied().unwrap_or(0.0))),
        ),
        Statistics::Double(s) => (
            Some(Raw::Double(s.min_opt().copied().unwrap_or(0.0))),
            Some(Raw::Double(s.max_opt().copied().unwrap_or(0.0))),
        ),
        Statistics::ByteArray(s) => (
            s.min_opt().map(|v| conv_bytes(v.data())).transpose()?,
            s.max_opt().map(|v| conv_bytes(v.data())).transpose()?,
        ),
        Statistics::FixedLenByteArray(s) => (
            s.min_opt().map(|v| conv_bytes(v.data())).transpose()?,
            s.max_opt().map(|v| conv_bytes(v.data())).transpose()?,
        ),
        Statistics::Int96(_) => {
            return Err(schema_err(
                path,
                column,
                "INT96 columns have no column statistics",
            ))
        }
    })
}

/// The statistics of each of `columns` that the file has (top-level columns, in `columns`
/// order; columns the file lacks are left out, like Java). `path` names the file in errors:
/// a column of a type column stats do not cover (nested, INT96, unsigned), string statistics
/// that are not UTF-8, a decimal wider than 128 bits, or a V1 decimal that would lose digits.
pub fn footer_ranges(
    metadata: &ParquetMetaData,
    columns: &[String],
    version: StatsVersion,
    path: &str,
) -> Result<Vec<ColumnRange>> {
    let descr = metadata.file_metadata().schema_descr();
    let arrow =
        parquet::arrow::parquet_to_arrow_schema(descr, None).map_err(|e| FormatError::Parquet {
            path: path.to_string(),
            reason: format!("schema cannot be mapped to Arrow: {e}"),
        })?;
    let mut out = Vec::new();
    for column in columns {
        let Ok(field) = arrow.field_with_name(column) else {
            continue;
        };
        let kind = column_kind(field.data_type()).ok_or_else(|| {
            schema_err(
                path,
                column,
                format!("type {} has no column statistics", field.data_type()),
            )
        })?;
        let Some(col_idx) = (0..descr.num_columns()).find(|i| {
            descr
                .column(*i)
                .path()
                .parts()
                .iter()
                .map(String::as_str)
                .eq([column.as_str()])
        }) else {
            return Err(schema_err(path, column, "not a top-level primitive column"));
        };
        let (mut min, mut max) = (None, None);
        let mut range = ColumnRange::empty(column, kind.value_type(version));
        for rg in metadata.row_groups() {
            let chunk = rg.column(col_idx);
            range.value_count += chunk.num_values();
            range.total_size += chunk.compressed_size();
            range.total_uncompressed_size += chunk.uncompressed_size();
            if let Some(stats) = chunk.statistics() {
                let nulls = stats.null_count_opt().unwrap_or(0);
                range.null_count += i64::try_from(nulls)
                    .map_err(|_| schema_err(path, column, "null count overflows"))?;
                let (lo, hi) = chunk_min_max(stats, &kind, path, column)?;
                if let Some(lo) = lo {
                    keep(&mut min, lo, Ordering::Less);
                }
                if let Some(hi) = hi {
                    keep(&mut max, hi, Ordering::Greater);
                }
            }
        }
        range.min = min
            .map(|v| wrap(v, &kind, version, column, path))
            .transpose()?;
        range.max = max
            .map(|v| wrap(v, &kind, version, column, path))
            .transpose()?;
        out.push(range);
    }
    Ok(out)
}
