//! Block encoders producing the bytes Spark (and the prototype accepted by hudi-rs 0.5.0)
//! writes.

use apache_avro::types::Value;
use apache_avro::writer::datum::GenericDatumWriter;
use arrow_array::RecordBatch;
use bytes::{BufMut, Bytes, BytesMut};

use super::block::{
    BlockMetadata, BlockType, CommandBlockType, HeaderKey, BLOCK_CONTENT_VERSION,
    LOG_FORMAT_VERSION, MAGIC,
};
use super::delete::{encode_delete_records, DeleteRecord};
use crate::avro_arrow::{batch_to_avro_records, parse_avro_schema};
use crate::{FormatError, Result};

fn put_map(buf: &mut BytesMut, map: &BlockMetadata) -> Result<()> {
    buf.put_i32(len_i32(map.len(), "metadata entry count")?);
    for (key, value) in map {
        buf.put_i32(key.id());
        buf.put_i32(len_i32(value.len(), "metadata value")?);
        buf.put_slice(value.as_bytes());
    }
    Ok(())
}

fn len_i32(n: usize, what: &str) -> Result<i32> {
    i32::try_from(n).map_err(|_| FormatError::Avro {
        path: "log block".to_string(),
        reason: format!("{what} of {n} bytes exceeds i32"),
    })
}

/// Encodes one block: magic, length, format version 1, type, header, content, footer and the
/// reverse pointer (spec §5.1). Headers are written in key-id order.
pub fn encode_block(
    block_type: BlockType,
    header: &BlockMetadata,
    content: &[u8],
    footer: &BlockMetadata,
) -> Result<Bytes> {
    let mut body = BytesMut::with_capacity(content.len() + 256);
    body.put_i32(LOG_FORMAT_VERSION);
    body.put_i32(block_type.id());
    put_map(&mut body, header)?;
    body.put_i64(content.len() as i64);
    body.put_slice(content);
    put_map(&mut body, footer)?;
    // L counts everything after the length field, including the 8-byte reverse pointer.
    let block_len = body.len() as i64 + 8;
    let mut out = BytesMut::with_capacity(MAGIC.len() + 8 + body.len() + 8);
    out.put_slice(MAGIC);
    out.put_i64(block_len);
    out.put_slice(&body);
    out.put_i64(block_len + MAGIC.len() as i64);
    Ok(out.freeze())
}

fn header(instant: &str, schema_json: Option<&str>) -> BlockMetadata {
    let mut h = BlockMetadata::new();
    h.insert(HeaderKey::InstantTime, instant.to_string());
    if let Some(schema) = schema_json {
        h.insert(HeaderKey::Schema, schema.to_string());
    }
    h
}

/// Encodes an Avro data block of `records` (values of the record schema `schema_json`, which
/// should include the meta fields): header `{INSTANT_TIME, SCHEMA}`, content version 3, the
/// record count and per record an `i32` length and the Avro binary datum.
pub fn encode_avro_data_block(
    instant: &str,
    schema_json: &str,
    records: &[Value],
) -> Result<Bytes> {
    encode_avro_data_block_with(instant, schema_json, records, &[])
}

/// [`encode_avro_data_block`] with more header entries (e.g. `COMPACTED_BLOCK_TIMES` of a log
/// compaction's block).
pub fn encode_avro_data_block_with(
    instant: &str,
    schema_json: &str,
    records: &[Value],
    extra: &[(HeaderKey, String)],
) -> Result<Bytes> {
    let schema = parse_avro_schema(schema_json)?;
    let mut content = BytesMut::new();
    content.put_i32(BLOCK_CONTENT_VERSION);
    content.put_i32(len_i32(records.len(), "record count")?);
    let avro_err = |what: String| FormatError::Avro {
        path: format!("avro data block of instant {instant}"),
        reason: what,
    };
    let writer = GenericDatumWriter::builder(&schema)
        .build()
        .map_err(|e| avro_err(e.to_string()))?;
    let mut datum = Vec::new();
    for (i, record) in records.iter().enumerate() {
        datum.clear();
        writer
            .write_value_ref(&mut datum, record)
            .map_err(|e| avro_err(format!("record {i} does not match the schema: {e}")))?;
        content.put_i32(len_i32(datum.len(), "record")?);
        content.put_slice(&datum);
    }
    let mut h = header(instant, Some(schema_json));
    for (k, v) in extra {
        h.insert(*k, v.clone());
    }
    encode_block(BlockType::AvroData, &h, &content, &BlockMetadata::new())
}

/// [`encode_avro_data_block`] of the rows of `batch` (columns matched to schema fields by
/// name; see [`batch_to_avro_records`]).
pub fn encode_avro_data_block_from_batch(
    instant: &str,
    schema_json: &str,
    batch: &RecordBatch,
) -> Result<Bytes> {
    let schema = parse_avro_schema(schema_json)?;
    let records = batch_to_avro_records(batch, &schema)?;
    encode_avro_data_block(instant, schema_json, &records)
}

/// Encodes a parquet data block: header `{INSTANT_TIME, SCHEMA}`, content = a whole parquet
/// file (no version prefix).
pub fn encode_parquet_data_block(
    instant: &str,
    schema_json: &str,
    parquet: &[u8],
) -> Result<Bytes> {
    encode_block(
        BlockType::ParquetData,
        &header(instant, Some(schema_json)),
        parquet,
        &BlockMetadata::new(),
    )
}

/// Encodes a delete block: header `{INSTANT_TIME}` (plus `SCHEMA` when given, as Spark writes
/// the table schema there), content `i32 3`, `i32 n`, then `n` bytes of the Avro datum of a
/// `HoodieDeleteRecordList`.
pub fn encode_delete_block(
    instant: &str,
    schema_json: Option<&str>,
    records: &[DeleteRecord],
) -> Result<Bytes> {
    encode_delete_block_with(instant, schema_json, records, &[])
}

/// [`encode_delete_block`] with more header entries.
pub fn encode_delete_block_with(
    instant: &str,
    schema_json: Option<&str>,
    records: &[DeleteRecord],
    extra: &[(HeaderKey, String)],
) -> Result<Bytes> {
    let datum = encode_delete_records(records);
    let mut content = BytesMut::with_capacity(datum.len() + 8);
    content.put_i32(BLOCK_CONTENT_VERSION);
    content.put_i32(len_i32(datum.len(), "delete record list")?);
    content.put_slice(&datum);
    let mut h = header(instant, schema_json);
    for (k, v) in extra {
        h.insert(*k, v.clone());
    }
    encode_block(BlockType::Delete, &h, &content, &BlockMetadata::new())
}

/// Encodes a rollback command block: header `{INSTANT_TIME, TARGET_INSTANT_TIME,
/// COMMAND_BLOCK_TYPE="0"}`, empty content.
pub fn encode_command_block(instant: &str, target_instant: &str) -> Result<Bytes> {
    let mut h = header(instant, None);
    h.insert(HeaderKey::TargetInstantTime, target_instant.to_string());
    h.insert(
        HeaderKey::CommandBlockType,
        CommandBlockType::Rollback.as_header_value().to_string(),
    );
    encode_block(BlockType::Command, &h, &[], &BlockMetadata::new())
}
