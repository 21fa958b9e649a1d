//! Computing `column_stats` and `partition_stats` records from data files, as Hudi does.
//!
//! - Column selection ([`columns_to_index`]): the table's `column_stats` index definition's
//!   `sourceFields` when `index.json` has one; else the configured
//!   `hoodie.metadata.index.column.stats.column.list`; else Java's default rule
//!   (`HoodieTableMetadataUtil.getColumnsToIndex` with the AVRO record type Spark SQL uses):
//!   the meta columns `_hoodie_commit_time`, `_hoodie_partition_path`, `_hoodie_record_key`
//!   (when the table populates meta fields), then the first
//!   `hoodie.metadata.index.column.stats.max.columns.to.index` (32) data columns whose type is
//!   supported: not a record, array, map or enum, and no decimal wider than decimal(30, 15)
//!   can hold.
//! - Per file ([`file_ranges`]): parquet base files from their footers, log files from their
//!   records ([`arbor_format::stats`]).
//! - Per partition ([`partition_ranges`]): the ranges of every file of the partition's latest
//!   file slices merged (Java `HoodieColumnRangeMetadata.merge`), written tight-bound.

use std::collections::BTreeMap;
use std::sync::Arc;

use apache_avro::Schema as AvroSchema;
use arbor_format::hfile::mdt_column_stats::{
    column_stats_key, partition_stats_key, ColumnStatsRecord,
};
use arbor_format::log::reader::ReadMode;
use arbor_format::log::{decode_data_block, read_log_bytes};
use arbor_format::stats::{batch::batch_ranges, footer::footer_ranges};
pub use arbor_format::stats::{ColumnRange, StatsVersion};
use arbor_storage::Storage;
use futures::TryStreamExt;

use crate::error::{MdtError, Result};

/// The property naming the columns to index (comma-separated).
pub const COLUMN_LIST_PROPERTY: &str = "hoodie.metadata.index.column.stats.column.list";
/// The property bounding how many data columns the default rule indexes.
pub const MAX_COLUMNS_PROPERTY: &str = "hoodie.metadata.index.column.stats.max.columns.to.index";
/// The default of [`MAX_COLUMNS_PROPERTY`].
pub const DEFAULT_MAX_COLUMNS: usize = 32;
/// The meta columns always indexed when the table populates meta fields, in Java's order (a
/// `TreeMap`, so alphabetical).
pub const ALWAYS_INDEXED_META_COLUMNS: [&str; 3] = [
    "_hoodie_commit_time",
    "_hoodie_partition_path",
    "_hoodie_record_key",
];
/// Every Hudi meta column (with `_hoodie_operation`), never chosen by the default rule.
const META_COLUMNS: [&str; 6] = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
    "_hoodie_operation",
];
/// Hudi's widest decimal wrapper: decimal(30, 15).
const DECIMAL_MAX_PRECISION: usize = 30;
const DECIMAL_MAX_SCALE: usize = 15;

fn invalid(path: &str, reason: impl Into<String>) -> MdtError {
    MdtError::Invalid {
        path: path.to_string(),
        reason: reason.into(),
    }
}

/// Java `isColumnTypeSupported` for the AVRO record type.
/// Whether Java indexes a column of `schema` at index `version`: never records, arrays, maps
/// or enums; at V1 (table version 8) only decimals that fit in decimal(30, 15) (Java 1.0's
/// `DecimalWrapper`), at V2 every decimal (Java 1.1's `isColumnTypeSupported` applies the
/// limit to V1 only).
fn is_supported(schema: &AvroSchema, version: StatsVersion) -> bool {
    let inner = match schema {
        AvroSchema::Union(u) => {
            let non_null: Vec<&AvroSchema> = u
                .variants()
                .iter()
                .filter(|v| !matches!(v, AvroSchema::Null))
                .collect();
            match non_null.as_slice() {
                [one] => *one,
                _ => return false,
            }
        }
        other => other,
    };
    match inner {
        AvroSchema::Record(_) | AvroSchema::Array(_) | AvroSchema::Map(_) | AvroSchema::Enum(_) => {
            false
        }
        AvroSchema::Decimal(d) => {
            version == StatsVersion::V2
                || (d.precision + DECIMAL_MAX_SCALE.saturating_sub(d.scale)
                    <= DECIMAL_MAX_PRECISION
                    && d.scale <= DECIMAL_MAX_SCALE)
        }
        _ => true,
    }
}

/// The columns to index by Java's rule (module doc) at index `version` for a table whose Avro
/// schema (with or without meta fields) is `avro_schema_json`. `configured` is the column list property's
/// value, if set (its meta columns and unsupported or unknown columns are dropped, as Java
/// does; the always-indexed meta columns come first either way). Fails, naming `path`, when
/// the schema cannot be parsed or is not a record.
pub fn columns_to_index(
    avro_schema_json: &str,
    populate_meta_fields: bool,
    configured: Option<&str>,
    max_columns: usize,
    version: StatsVersion,
    path: &str,
) -> Result<Vec<String>> {
    let schema = AvroSchema::parse_str(avro_schema_json)
        .map_err(|e| invalid(path, format!("table schema cannot be parsed: {e}")))?;
    let AvroSchema::Record(record) = &schema else {
        return Err(invalid(path, "table schema is not a record"));
    };
    let mut out: Vec<String> = if populate_meta_fields {
        ALWAYS_INDEXED_META_COLUMNS
            .iter()
            .map(|c| c.to_string())
            .collect()
    } else {
        Vec::new()
    };
    let field_schema = |name: &str| {
        record
            .fields
            .iter()
            .find(|f| f.name == name)
            .map(|f| &f.schema)
    };
    match configured.map(str::trim).filter(|c| !c.is_empty()) {
        Some(list) => {
            for col in list.split(',').map(str::trim).filter(|c| !c.is_empty()) {
                if ALWAYS_INDEXED_META_COLUMNS.contains(&col) || out.iter().any(|c| c == col) {
                    continue;
                }
                if field_schema(col).is_some_and(|f| is_supported(f, version)) {
                    out.push(col.to_string());
                }
            }
        }
        None => {
            out.extend(
                record
                    .fields
                    .iter()
                    .filter(|f| is_supported(&f.schema, version))
                    .filter(|f| !META_COLUMNS.contains(&f.name.as_str()))
                    .take(max_columns)
                    .map(|f| f.name.clone()),
            );
        }
    }
    Ok(out)
}

/// Whether `file_name` is a log file (`.<fileId>_<instant>.log.<v>_<token>`).
pub fn is_log_file(file_name: &str) -> bool {
    file_name.starts_with('.') && file_name.contains(".log.")
}

/// The statistics of `columns` in the data file `key` (relative to the table base; a parquet
/// or Lance base file, or a log file), as Hudi computes them for `version`: a parquet file's
/// from its footer, the others' from their values. Fails, naming the file, when it cannot be
/// read or holds a column type column stats do not cover.
pub async fn file_ranges(
    storage: &Arc<dyn Storage>,
    key: &str,
    columns: &[String],
    version: StatsVersion,
) -> Result<Vec<ColumnRange>> {
    let name = key.rsplit('/').next().unwrap_or(key);
    let format_err = |source| MdtError::Format {
        path: key.to_string(),
        source,
    };
    if is_log_file(name) {
        let (bytes, _) = storage.get(key).await?;
        let contents = read_log_bytes(&bytes, key, ReadMode::Lenient).map_err(format_err)?;
        let mut batches = Vec::new();
        for block in contents.blocks.iter().filter(|b| b.block_type.is_data()) {
            batches.extend(decode_data_block(block, key, None).map_err(format_err)?);
        }
        batch_ranges(&batches, columns, version, key).map_err(format_err)
    } else if arbor_format::base::BaseFormat::of_key(key).map_err(format_err)?
        == arbor_format::base::BaseFormat::Parquet
    {
        let metadata = arbor_format::base::base_file_metadata(storage.as_ref(), key, None)
            .await
            .map_err(format_err)?;
        footer_ranges(&metadata, columns, version, key).map_err(format_err)
    } else {
        let reader = arbor_format::base::BaseFileReader::open(Arc::clone(storage), key)
            .await
            .map_err(format_err)?;
        let schema = reader.schema();
        let present: Vec<String> = columns
            .iter()
            .filter(|c| schema.field_with_name(c).is_ok())
            .cloned()
            .collect();
        let options = arbor_format::base::ReadOptions {
            projection: Some(present),
            ..Default::default()
        };
        let batches: Vec<_> = reader
            .stream(&options)
            .map_err(format_err)?
            .try_collect()
            .await
            .map_err(format_err)?;
        batch_ranges(&batches, columns, version, key).map_err(format_err)
    }
}

/// The partition statistics of `files` (each file's ranges, in any order): per column, every
/// file's range merged, in `columns` order; a column no file has is left out.
pub fn partition_ranges<'a>(
    columns: &[String],
    files: impl IntoIterator<Item = &'a [ColumnRange]>,
) -> Vec<ColumnRange> {
    let mut merged: BTreeMap<&str, ColumnRange> = BTreeMap::new();
    for ranges in files {
        for r in ranges {
            match merged.get_mut(r.column.as_str()) {
                Some(acc) => *acc = acc.merge(r),
                None => {
                    if let Some(c) = columns.iter().find(|c| **c == r.column) {
                        merged.insert(c.as_str(), r.clone());
                    }
                }
            }
        }
    }
    columns
        .iter()
        .filter_map(|c| merged.remove(c.as_str()))
        .collect()
}

/// The `column_stats` records (by MDT key) of `file_name` in data partition `partition` (`""`
/// when non-partitioned).
pub fn file_records(
    partition: &str,
    file_name: &str,
    ranges: &[ColumnRange],
) -> BTreeMap<String, ColumnStatsRecord> {
    ranges
        .iter()
        .map(|r| {
            (
                column_stats_key(&r.column, partition, file_name),
                r.to_record(file_name, false),
            )
        })
        .collect()
}

/// The tombstones (by MDT key) of every column of `file_name` in `partition` (Java
/// `HoodieColumnRangeMetadata.stub` records with `isDeleted`): for files a clean, rollback or
/// restore removed.
pub fn file_tombstones(
    partition: &str,
    file_name: &str,
    columns: &[String],
) -> BTreeMap<String, ColumnStatsRecord> {
    columns
        .iter()
        .map(|c| {
            let mut rec = ColumnRange::empty(c, None).to_record(file_name, false);
            rec.min_value = None;
            rec.max_value = None;
            rec.value_count = None;
            rec.null_count = None;
            rec.total_size = None;
            rec.total_uncompressed_size = None;
            rec.is_deleted = true;
            (column_stats_key(c, partition, file_name), rec)
        })
        .collect()
}

/// The tight-bound `partition_stats` records (by MDT key) of `partition` (`""` when
/// non-partitioned; the record's `fileName` is the partition path as Java writes it, `"."`
/// for non-partitioned tables is not used: Java writes the path as is).
pub fn partition_records(
    partition: &str,
    ranges: &[ColumnRange],
) -> BTreeMap<String, ColumnStatsRecord> {
    ranges
        .iter()
        .map(|r| {
            (
                partition_stats_key(&r.column, partition),
                r.to_record(partition, true),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const SCHEMA: &str = r#"{"type":"record","name":"r","fields":[
        {"name":"_hoodie_commit_time","type":["null","string"]},
        {"name":"_hoodie_commit_seqno","type":["null","string"]},
        {"name":"id","type":"string"},
        {"name":"nested","type":{"type":"record","name":"n","fields":[]}},
        {"name":"tags","type":{"type":"array","items":"string"}},
        {"name":"amount","type":["null",{"type":"bytes","logicalType":"decimal","precision":15,"scale":2}]},
        {"name":"huge","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":2}},
        {"name":"raw","type":"bytes"},
        {"name":"ts","type":"long"}
    ]}"#;

    #[test]
    fn test_default_rule_meta_first_then_supported_fields() {
        // V1 (table version 8): decimals must fit decimal(30, 15).
        let cols = columns_to_index(SCHEMA, true, None, 32, StatsVersion::V1, "t").unwrap();
        assert_eq!(
            cols,
            vec![
                "_hoodie_commit_time",
                "_hoodie_partition_path",
                "_hoodie_record_key",
                "id",
                "amount",
                "raw",
                "ts"
            ]
        );
        // V2 (table version 9): every decimal, as Java 1.1 and 1.2.
        let cols = columns_to_index(SCHEMA, true, None, 32, StatsVersion::V2, "t").unwrap();
        assert_eq!(
            cols,
            vec![
                "_hoodie_commit_time",
                "_hoodie_partition_path",
                "_hoodie_record_key",
                "id",
                "amount",
                "huge",
                "raw",
                "ts"
            ]
        );
        let cols = columns_to_index(SCHEMA, false, None, 2, StatsVersion::V1, "t").unwrap();
        assert_eq!(cols, vec!["id", "amount"]);
    }

    #[test]
    fn test_configured_list_filters_unknown_and_unsupported() {
        let cols = columns_to_index(
            SCHEMA,
            true,
            Some("ts, nested,nope,_hoodie_record_key,id"),
            32,
            StatsVersion::V1,
            "t",
        )
        .unwrap();
        assert_eq!(
            cols,
            vec![
                "_hoodie_commit_time",
                "_hoodie_partition_path",
                "_hoodie_record_key",
                "ts",
                "id"
            ]
        );
        assert!(columns_to_index("{", true, None, 32, StatsVersion::V2, "x/t").is_err());
    }

    #[test]
    fn test_tombstones_and_log_names() {
        let t = file_tombstones("p", "f.parquet", &["a".to_string()]);
        let rec = t.values().next().unwrap();
        assert!(rec.is_deleted && rec.value_count.is_none());
        assert!(is_log_file(".abc-0_20260101.log.1_0-1-1"));
        assert!(!is_log_file("abc-0_0-1-1_20260101.parquet"));
    }
}
