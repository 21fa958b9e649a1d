//! The parquet data files of the LSM timeline: `<minInstant>_<maxInstant>_<level>.parquet`, one
//! row per archived instant (Avro record `HoodieLSMTimelineInstant`).
//!
//! Files are written the way Java's parquet-avro writer lays them out, so Java Hudi reads them:
//! optional UTF-8 `instantTime`, `completionTime`, `action`; optional binary `metadata` and
//! `plan`; required int32 `version`; the Avro schema under the key-value metadata key
//! `parquet.avro.schema`. Rows are sorted by instant time.

use std::fmt;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BinaryArray, Int32Array, LargeBinaryArray, LargeStringArray, RecordBatch,
    StringArray,
};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::arrow_writer::{ArrowWriter, ArrowWriterOptions};
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::error::{Result, TimelineError};

/// The Avro schema of one row, as parquet-avro stores it under [`AVRO_SCHEMA_KEY`].
pub const LSM_INSTANT_AVRO_SCHEMA: &str = concat!(
    r#"{"type":"record","name":"HoodieLSMTimelineInstant","namespace":"org.apache.hudi.avro.model","fields":["#,
    r#"{"name":"instantTime","type":["null","string"],"default":null},"#,
    r#"{"name":"completionTime","type":["null","string"],"default":null},"#,
    r#"{"name":"action","type":["null","string"],"default":null},"#,
    r#"{"name":"metadata","type":["null","bytes"],"default":null},"#,
    r#"{"name":"plan","type":["null","bytes"],"default":null},"#,
    r#"{"name":"version","type":"int","default":1}]}"#
);

/// The parquet key-value metadata key under which parquet-avro stores the Avro schema.
pub const AVRO_SCHEMA_KEY: &str = "parquet.avro.schema";

/// The row format version arbor writes (`LSM_TIMELINE_INSTANT_VERSION_1`).
pub const LSM_INSTANT_VERSION: i32 = 1;

/// The highest level a file name can carry (the level is one digit).
pub const MAX_LEVEL: u32 = 9;

/// One row of an LSM timeline data file: one archived instant with all its states folded in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LsmInstantRow {
    /// The requested time.
    pub instant_time: Option<String>,
    /// The completion time.
    pub completion_time: Option<String>,
    /// The completed action (`commit` for a completed compaction).
    pub action: Option<String>,
    /// The raw bytes of the completed instant file.
    pub metadata: Option<Bytes>,
    /// The raw bytes of the plan (clean plan, compaction plan, requested or inflight replace
    /// metadata), when the action has one.
    pub plan: Option<Bytes>,
    /// The row format version (1).
    pub version: i32,
}

/// A parsed data file name `<min>_<max>_<level>.parquet`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LsmFileName {
    /// The smallest instant time in the file.
    pub min_instant: String,
    /// The greatest instant time in the file.
    pub max_instant: String,
    /// The LSM level (0 for archival batches).
    pub level: u32,
}

impl LsmFileName {
    /// Parses a file name; `None` if it does not match `^(\d+)_(\d+)_(\d)\.parquet$`.
    pub fn parse(name: &str) -> Option<Self> {
        let stem = name.strip_suffix(".parquet")?;
        let mut parts = stem.split('_');
        let (min, max, level) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(min) || !digits(max) || level.len() != 1 || !digits(level) {
            return None;
        }
        Some(LsmFileName {
            min_instant: min.to_string(),
            max_instant: max.to_string(),
            level: level.parse().ok()?,
        })
    }
}

impl fmt::Display for LsmFileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}_{}_{}.parquet",
            self.min_instant, self.max_instant, self.level
        )
    }
}

fn arrow_schema() -> Schema {
    Schema::new(vec![
        Field::new("instantTime", DataType::Utf8, true),
        Field::new("completionTime", DataType::Utf8, true),
        Field::new("action", DataType::Utf8, true),
        Field::new("metadata", DataType::Binary, true),
        Field::new("plan", DataType::Binary, true),
        Field::new("version", DataType::Int32, false),
    ])
}

fn encode_error(reason: impl ToString) -> TimelineError {
    TimelineError::Encode {
        what: "LSM timeline data file".into(),
        reason: reason.to_string(),
    }
}

/// Encodes rows as the bytes of one data file, sorted by instant time (stable, so rows with
/// equal times keep their order).
pub fn write_lsm_file(rows: &[LsmInstantRow]) -> Result<Bytes> {
    let mut sorted: Vec<&LsmInstantRow> = rows.iter().collect();
    sorted.sort_by(|a, b| a.instant_time.cmp(&b.instant_time));
    let strings = |f: fn(&LsmInstantRow) -> Option<&str>| -> ArrayRef {
        Arc::new(sorted.iter().map(|r| f(r)).collect::<StringArray>())
    };
    let binaries = |f: fn(&LsmInstantRow) -> Option<&[u8]>| -> ArrayRef {
        Arc::new(sorted.iter().map(|r| f(r)).collect::<BinaryArray>())
    };
    let columns: Vec<ArrayRef> = vec![
        strings(|r| r.instant_time.as_deref()),
        strings(|r| r.completion_time.as_deref()),
        strings(|r| r.action.as_deref()),
        binaries(|r| r.metadata.as_deref()),
        binaries(|r| r.plan.as_deref()),
        Arc::new(Int32Array::from_iter_values(
            sorted.iter().map(|r| r.version),
        )),
    ];
    let schema = Arc::new(arrow_schema());
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(encode_error)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_key_value_metadata(Some(vec![
            KeyValue::new(
                AVRO_SCHEMA_KEY.to_string(),
                LSM_INSTANT_AVRO_SCHEMA.to_string(),
            ),
            KeyValue::new("writer.model.name".to_string(), "avro".to_string()),
        ]))
        .build();
    let options = ArrowWriterOptions::new()
        .with_properties(props)
        .with_skip_arrow_metadata(true)
        .with_schema_root("HoodieLSMTimelineInstant".to_string());
    let mut buf = Vec::new();
    let mut writer =
        ArrowWriter::try_new_with_options(&mut buf, schema, options).map_err(encode_error)?;
    writer.write(&batch).map_err(encode_error)?;
    writer.close().map_err(encode_error)?;
    Ok(Bytes::from(buf))
}

/// Decodes the rows of one data file; `path` names the file in errors
/// ([`TimelineError::Archive`] for anything unreadable).
pub fn read_lsm_file(path: &str, bytes: Bytes) -> Result<Vec<LsmInstantRow>> {
    let bad = |reason: String| TimelineError::Archive {
        path: path.to_string(),
        reason,
    };
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| bad(format!("not a readable parquet file: {e}")))?
        .build()
        .map_err(|e| bad(format!("cannot read parquet file: {e}")))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| bad(format!("cannot read record batch: {e}")))?;
        let instant_time = string_column(&batch, "instantTime").map_err(&bad)?;
        let completion_time = string_column(&batch, "completionTime").map_err(&bad)?;
        let action = string_column(&batch, "action").map_err(&bad)?;
        let metadata = binary_column(&batch, "metadata").map_err(&bad)?;
        let plan = binary_column(&batch, "plan").map_err(&bad)?;
        let version = int_column(&batch, "version").map_err(&bad)?;
        let columns = instant_time
            .into_iter()
            .zip(completion_time)
            .zip(action)
            .zip(metadata)
            .zip(plan)
            .zip(version);
        for (((((instant_time, completion_time), action), metadata), plan), version) in columns {
            rows.push(LsmInstantRow {
                instant_time,
                completion_time,
                action,
                metadata,
                plan,
                version,
            });
        }
    }
    Ok(rows)
}

/// The values of an optional string column (absent column: all null).
fn string_column(batch: &RecordBatch, name: &str) -> Result<Vec<Option<String>>, String> {
    let Some(col) = batch.column_by_name(name) else {
        return Ok(vec![None; batch.num_rows()]);
    };
    let any = col.as_any();
    let utf8 =
        |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| format!("column {name} is not UTF-8"));
    if let Some(a) = any.downcast_ref::<StringArray>() {
        Ok(a.iter().map(|v| v.map(str::to_string)).collect())
    } else if let Some(a) = any.downcast_ref::<LargeStringArray>() {
        Ok(a.iter().map(|v| v.map(str::to_string)).collect())
    } else if let Some(a) = any.downcast_ref::<BinaryArray>() {
        a.iter().map(|v| v.map(utf8).transpose()).collect()
    } else if let Some(a) = any.downcast_ref::<LargeBinaryArray>() {
        a.iter().map(|v| v.map(utf8).transpose()).collect()
    } else {
        Err(format!(
            "column {name} has type {}, expected string",
            col.data_type()
        ))
    }
}

/// The values of an optional binary column (absent column: all null).
fn binary_column(batch: &RecordBatch, name: &str) -> Result<Vec<Option<Bytes>>, String> {
    let Some(col) = batch.column_by_name(name) else {
        return Ok(vec![None; batch.num_rows()]);
    };
    let any = col.as_any();
    let copy = |v: Option<&[u8]>| v.map(Bytes::copy_from_slice);
    if let Some(a) = any.downcast_ref::<BinaryArray>() {
        Ok(a.iter().map(copy).collect())
    } else if let Some(a) = any.downcast_ref::<LargeBinaryArray>() {
        Ok(a.iter().map(copy).collect())
    } else {
        Err(format!(
            "column {name} has type {}, expected binary",
            col.data_type()
        ))
    }
}

/// The values of the `version` column (absent or null: 1).
fn int_column(batch: &RecordBatch, name: &str) -> Result<Vec<i32>, String> {
    let Some(col) = batch.column_by_name(name) else {
        return Ok(vec![LSM_INSTANT_VERSION; batch.num_rows()]);
    };
    match col.as_any().downcast_ref::<Int32Array>() {
        Some(a) => Ok((0..a.len())
            .map(|i| {
                if a.is_null(i) {
                    LSM_INSTANT_VERSION
                } else {
                    a.value(i)
                }
            })
            .collect()),
        None => Err(format!(
            "column {name} has type {}, expected int32",
            col.data_type()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    fn row(t: &str, meta: &[u8]) -> LsmInstantRow {
        LsmInstantRow {
            instant_time: Some(t.to_string()),
            completion_time: Some(format!("{t}9")),
            action: Some("commit".into()),
            metadata: Some(Bytes::copy_from_slice(meta)),
            plan: None,
            version: 1,
        }
    }

    #[test]
    fn test_write_lsm_file_round_trip_sorted_by_instant_time() {
        let rows = vec![row("20250102", b"b\x00\xff"), row("20250101", b"a")];
        let bytes = write_lsm_file(&rows).unwrap();
        let back = read_lsm_file("f", bytes).unwrap();
        assert_eq!(back, vec![rows[1].clone(), rows[0].clone()]);
    }

    #[test]
    fn test_write_lsm_file_carries_avro_schema_and_parquet_avro_types() {
        let bytes = write_lsm_file(&[row("20250101", b"x")]).unwrap();
        let reader = SerializedFileReader::new(bytes).unwrap();
        let meta = reader.metadata().file_metadata();
        let kv = meta.key_value_metadata().unwrap();
        let schema = kv
            .iter()
            .find(|k| k.key == AVRO_SCHEMA_KEY)
            .and_then(|k| k.value.clone())
            .unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&schema).unwrap();
        assert_eq!(parsed["name"], "HoodieLSMTimelineInstant");
        assert!(kv.iter().all(|k| k.key != "ARROW:schema"));
        let descr = meta.schema_descr();
        let names: Vec<_> = descr
            .columns()
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "instantTime",
                "completionTime",
                "action",
                "metadata",
                "plan",
                "version"
            ]
        );
        let version = descr.column(5);
        assert_eq!(version.physical_type(), parquet::basic::Type::INT32);
        assert_eq!(version.max_def_level(), 0, "version must be required");
        assert_eq!(
            descr.column(0).logical_type_ref(),
            Some(&parquet::basic::LogicalType::String)
        );
    }

    #[test]
    fn test_read_lsm_file_garbage_fails_with_path() {
        let err =
            read_lsm_file("h/x_y_0.parquet", Bytes::from_static(b"PAR1nonsense")).unwrap_err();
        assert!(
            matches!(err, TimelineError::Archive { ref path, .. } if path == "h/x_y_0.parquet")
        );
    }

    #[test]
    fn test_lsm_file_name_parse_round_trip_and_rejects() {
        let n = LsmFileName::parse("20250101000000000_20250102000000000_1.parquet").unwrap();
        assert_eq!(n.level, 1);
        assert_eq!(n.min_instant, "20250101000000000");
        assert_eq!(
            n.to_string(),
            "20250101000000000_20250102000000000_1.parquet"
        );
        for bad in [
            "a_b_0.parquet",
            "1_2_10.parquet",
            "1_2_0.parquet.crc",
            "1_2.parquet",
            "1_2_3_4.parquet",
            "manifest_1",
            "_version_",
        ] {
            assert!(LsmFileName::parse(bad).is_none(), "{bad}");
        }
    }
}
