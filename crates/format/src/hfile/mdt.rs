//! The MDT `files` partition values stored in HFiles: Avro `HoodieMetadataRecord`s of type 1
//! (`__all_partitions__`) and 2 (one partition's files), spec §6.3.

use std::collections::HashMap;
use std::sync::OnceLock;

use apache_avro::types::Value;
use apache_avro::Schema;

use crate::{FormatError, Result};

/// The `HoodieMetadataRecord` writer schema (Java 1.1 / table version 9) as JSON, as stored in
/// the HFile file-info `schema` entry and the log block `SCHEMA` header.
pub const METADATA_RECORD_SCHEMA_JSON: &str = include_str!("HoodieMetadataRecord.avsc");

/// Record type of the `__all_partitions__` record of the `files` partition.
pub const RECORD_TYPE_ALL_PARTITIONS: i32 = 1;
/// Record type of a per-partition file listing of the `files` partition.
pub const RECORD_TYPE_FILES: i32 = 2;

/// The parsed [`METADATA_RECORD_SCHEMA_JSON`] (parsed once).
pub fn metadata_record_schema() -> Result<&'static Schema> {
    static SCHEMA: OnceLock<std::result::Result<Schema, String>> = OnceLock::new();
    SCHEMA
        .get_or_init(|| Schema::parse_str(METADATA_RECORD_SCHEMA_JSON).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| FormatError::Schema {
            field: None,
            reason: format!("HoodieMetadataRecord schema: {e}"),
        })
}

pub use super::mdt_files_record::{FilesEntry, FilesRecord};

fn avro_err(path: &str, reason: impl Into<String>) -> FormatError {
    FormatError::Avro {
        path: path.to_string(),
        reason: reason.into(),
    }
}

fn unwrap_union(v: &Value) -> &Value {
    match v {
        Value::Union(_, inner) => inner,
        other => other,
    }
}

/// Decodes one HFile value of the `files` partition written with `writer_schema` (take it
/// from the file-info `schema` entry; [`metadata_record_schema`] for files written by arbor).
/// `path` names the file in errors.
pub fn decode_files_record(
    value: &[u8],
    writer_schema: &Schema,
    path: &str,
) -> Result<FilesRecord> {
    // The direct decoder answers as the generic decoding below; anything it refuses is
    // decoded generically, which reports what is wrong.
    if let Ok(record) = super::mdt_files_direct::decode(value, writer_schema) {
        return Ok(record);
    }
    decode_files_record_generic(value, writer_schema, path)
}

/// The direct decoding alone (`None` where [`decode_files_record`] would fall back to the
/// generic one). For tests that check the direct decoder reads real files itself.
#[doc(hidden)]
pub fn decode_files_record_direct(value: &[u8], writer_schema: &Schema) -> Option<FilesRecord> {
    super::mdt_files_direct::decode(value, writer_schema).ok()
}

/// [`decode_files_record`] through apache-avro's generic values (the reference the direct
/// decoder is tested against, and its fallback).
pub(super) fn decode_files_record_generic(
    value: &[u8],
    writer_schema: &Schema,
    path: &str,
) -> Result<FilesRecord> {
    let mut reader = value;
    let datum_reader = apache_avro::reader::datum::GenericDatumReader::builder(writer_schema)
        .build()
        .map_err(|e| avro_err(path, format!("HoodieMetadataRecord schema unusable: {e}")))?;
    let decoded = datum_reader
        .read_value(&mut reader)
        .map_err(|e| avro_err(path, format!("HoodieMetadataRecord cannot be decoded: {e}")))?;
    if !reader.is_empty() {
        return Err(avro_err(
            path,
            format!("{} trailing bytes after HoodieMetadataRecord", reader.len()),
        ));
    }
    let Value::Record(fields) = decoded else {
        return Err(avro_err(path, "HoodieMetadataRecord is not a record"));
    };
    let mut out = FilesRecord::default();
    for (name, v) in &fields {
        match (name.as_str(), unwrap_union(v)) {
            ("type", Value::Int(t)) => out.record_type = *t,
            ("_hoodie_file_name", Value::String(s)) => out.file_name = Some(s.clone()),
            ("filesystemMetadata", Value::Map(map)) => {
                for (file, info) in map {
                    let Value::Record(info) = unwrap_union(info) else {
                        return Err(avro_err(
                            path,
                            format!("filesystemMetadata[{file}] is not a record"),
                        ));
                    };
                    let mut entry = FilesEntry {
                        size: 0,
                        is_deleted: false,
                    };
                    for (f, fv) in info {
                        match (f.as_str(), unwrap_union(fv)) {
                            ("size", Value::Long(s)) => entry.size = *s,
                            ("isDeleted", Value::Boolean(d)) => entry.is_deleted = *d,
                            _ => {}
                        }
                    }
                    out.files.insert(file.clone(), entry);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Encodes a `files`-partition record with [`metadata_record_schema`] the way Spark writes it
/// (`key` empty, other `_hoodie_*` fields and other payloads null).
pub fn encode_files_record(record: &FilesRecord) -> Result<Vec<u8>> {
    let schema = metadata_record_schema()?;
    let null = || Value::Union(0, Box::new(Value::Null));
    let file_name = match &record.file_name {
        Some(n) => Value::Union(1, Box::new(Value::String(n.clone()))),
        None => null(),
    };
    let map: HashMap<String, Value> = record
        .files
        .iter()
        .map(|(name, e)| {
            let info = Value::Record(vec![
                ("size".to_string(), Value::Long(e.size)),
                ("isDeleted".to_string(), Value::Boolean(e.is_deleted)),
            ]);
            (name.clone(), info)
        })
        .collect();
    let value = Value::Record(vec![
        ("_hoodie_commit_time".into(), null()),
        ("_hoodie_commit_seqno".into(), null()),
        ("_hoodie_record_key".into(), null()),
        ("_hoodie_partition_path".into(), null()),
        ("_hoodie_file_name".into(), file_name),
        ("key".into(), Value::String(String::new())),
        ("type".into(), Value::Int(record.record_type)),
        (
            "filesystemMetadata".into(),
            Value::Union(1, Box::new(Value::Map(map))),
        ),
        ("BloomFilterMetadata".into(), null()),
        ("ColumnStatsMetadata".into(), null()),
        ("recordIndexMetadata".into(), null()),
        ("SecondaryIndexMetadata".into(), null()),
    ]);
    let err =
        |e: apache_avro::Error| avro_err("HoodieMetadataRecord", format!("cannot be encoded: {e}"));
    let writer = apache_avro::writer::datum::GenericDatumWriter::builder(schema)
        .build()
        .map_err(err)?;
    let mut out = Vec::new();
    writer.write_value_ref(&mut out, &value).map_err(err)?;
    Ok(out)
}
