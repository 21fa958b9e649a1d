//! Data blocks: Avro data blocks to Avro records, Avro and parquet data blocks to Arrow.

use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::schema::Schema as AvroSchema;
use apache_avro::types::Value;
use arrow_array::{new_null_array, RecordBatch, RecordBatchOptions};
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::block::{BlockType, LogBlock, BLOCK_CONTENT_VERSION};
use crate::avro_arrow::{
    avro_records_to_batch, avro_schema_to_arrow, check_not_recursive, parse_avro_schema,
    DirectDecoder,
};
use crate::{FormatError, Result};

/// Most records reserved up front when decoding an Avro data block (the count is read from
/// the block, so it is not trusted for a larger allocation).
const MAX_RESERVED_RECORDS: usize = 4096;

/// The decoded content of an Avro data block.
#[derive(Debug, Clone)]
pub struct AvroDataBlock {
    /// The writer schema from the block's `SCHEMA` header.
    pub schema: AvroSchema,
    /// The records, in block order.
    pub records: Vec<Value>,
}

fn corrupt(block: &LogBlock, path: &str, reason: String) -> FormatError {
    FormatError::CorruptBlock {
        path: path.to_string(),
        offset: block.offset,
        reason,
    }
}

fn unsupported(block: &LogBlock, path: &str, reason: String) -> FormatError {
    FormatError::UnsupportedBlock {
        path: path.to_string(),
        offset: block.offset,
        reason,
    }
}

fn header_schema(block: &LogBlock, path: &str) -> Result<AvroSchema> {
    let json = block.schema_json().ok_or_else(|| {
        corrupt(
            block,
            path,
            format!("{} has no SCHEMA header", block.block_type),
        )
    })?;
    let schema = parse_avro_schema(json).map_err(|e| FormatError::Avro {
        path: block_location(block, path),
        reason: e.to_string(),
    })?;
    // A recursive schema would let nested data drive the decoder's recursion; arbor cannot map
    // such a schema to Arrow anyway.
    check_not_recursive(&schema).map_err(|e| FormatError::Avro {
        path: block_location(block, path),
        reason: e.to_string(),
    })?;
    Ok(schema)
}

/// `path (block at offset N)`, the location errors of one block name.
fn block_location(block: &LogBlock, path: &str) -> String {
    format!("{path} (block at offset {})", block.offset)
}

/// Adds the file and block offset to an error raised while converting a block's content: a
/// [`FormatError::Schema`] becomes `wrap(location, message)` (the message names the field), an
/// [`FormatError::Arrow`] gets the location as its path; other errors already name the block.
fn locate(
    e: FormatError,
    block: &LogBlock,
    path: &str,
    wrap: fn(String, String) -> FormatError,
) -> FormatError {
    match e {
        e @ FormatError::Schema { .. } => wrap(block_location(block, path), e.to_string()),
        FormatError::Arrow { reason, .. } => FormatError::Arrow {
            path: block_location(block, path),
            reason,
        },
        other => other,
    }
}

fn avro_at(path: String, reason: String) -> FormatError {
    FormatError::Avro { path, reason }
}

fn parquet_at(path: String, reason: String) -> FormatError {
    FormatError::Parquet { path, reason }
}

/// Decodes an Avro data block (content version 3: `i32 3`, `i32 count`, per record `i32 length`
/// and an Avro binary datum of the header `SCHEMA`).
pub fn decode_avro_data_block(block: &LogBlock, path: &str) -> Result<AvroDataBlock> {
    let schema = avro_block_schema(block, path)?;
    let mut records = Vec::new();
    for_each_record(block, path, &schema, |value| {
        records.push(value);
        Ok(())
    })?;
    Ok(AvroDataBlock { schema, records })
}

/// The writer schema of an Avro data block (its header `SCHEMA`); refuses other blocks.
fn avro_block_schema(block: &LogBlock, path: &str) -> Result<apache_avro::Schema> {
    if block.block_type != BlockType::AvroData {
        return Err(unsupported(
            block,
            path,
            format!("expected an AVRO_DATA_BLOCK, found {}", block.block_type),
        ));
    }
    header_schema(block, path)
}

/// Decodes each record of Avro data block `block` (writer schema `schema`) in order and hands
/// it to `each`; checks the content version, the count and every length against the content.
fn for_each_record(
    block: &LogBlock,
    path: &str,
    schema: &apache_avro::Schema,
    mut each: impl FnMut(apache_avro::types::Value) -> Result<()>,
) -> Result<()> {
    let avro_err = |i: Option<usize>, e: apache_avro::Error| FormatError::Avro {
        path: match i {
            Some(i) => record_location(block, path, i),
            None => block_location(block, path),
        },
        reason: e.to_string(),
    };
    let datum_reader = GenericDatumReader::builder(schema)
        .build()
        .map_err(|e| avro_err(None, e))?;
    for_each_datum(block, path, |i, datum| {
        let mut reader = datum;
        let value = datum_reader
            .read_value(&mut reader)
            .map_err(|e| avro_err(Some(i), e))?;
        each(value)
    })
}

/// `path (block at offset N, record I)`, the location of an error in one record.
fn record_location(block: &LogBlock, path: &str, record: usize) -> String {
    format!("{path} (block at offset {}, record {record})", block.offset)
}

/// Hands the binary datum of each record of Avro data block `block` (content version 3: `i32
/// 3`, `i32 count`, per record `i32 length` and the datum) to `each` with its index, in
/// order; checks the content version, the count and every length against the content.
fn for_each_datum(
    block: &LogBlock,
    path: &str,
    mut each: impl FnMut(usize, &[u8]) -> Result<()>,
) -> Result<()> {
    let mut rest: &[u8] = &block.content;
    let mut next_i32 = |what: &str| -> Result<i32> {
        let (head, tail) = rest.split_first_chunk::<4>().ok_or_else(|| {
            corrupt(
                block,
                path,
                format!("avro data block content ends before the {what}"),
            )
        })?;
        rest = tail;
        Ok(i32::from_be_bytes(*head))
    };
    let version = next_i32("content version")?;
    if version != BLOCK_CONTENT_VERSION {
        return Err(unsupported(
            block,
            path,
            format!("avro data block content version {version} (only 3 is read)"),
        ));
    }
    let count = next_i32("record count")?;
    let count = usize::try_from(count)
        .ok()
        // Every record takes at least its 4-byte length.
        .filter(|n| n.saturating_mul(4) <= rest.len())
        .ok_or_else(|| {
            corrupt(
                block,
                path,
                format!("record count {count} does not fit in the content"),
            )
        })?;
    for i in 0..count {
        let (head, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| corrupt(block, path, format!("record {i}: length cut off")))?;
        let len = i32::from_be_bytes(*head);
        let datum = usize::try_from(len)
            .ok()
            .and_then(|n| tail.get(..n))
            .ok_or_else(|| {
                corrupt(
                    block,
                    path,
                    format!("record {i}: length {len} exceeds the content"),
                )
            })?;
        rest = tail.get(datum.len()..).unwrap_or_default();
        each(i, datum)?;
    }
    if !rest.is_empty() {
        return Err(corrupt(
            block,
            path,
            format!("{} bytes after the last record", rest.len()),
        ));
    }
    Ok(())
}

/// How many Avro records [`decode_data_block`] puts in one Arrow batch (and, on the generic
/// path, holds as decoded values before converting them: a record's generic Avro value takes
/// many times its Arrow size, so a block is converted in chunks rather than all at once).
const AVRO_CHUNK_RECORDS: usize = 8192;

/// Decodes an Avro or parquet data block to Arrow. With `target`, columns are matched by name,
/// cast to the target types and missing nullable columns filled with nulls (so log rows can be
/// merged with base-file rows); without, the block's own schema is used (the header `SCHEMA`
/// mapped per [`crate::avro_arrow`] for Avro blocks, the file's schema for parquet blocks).
/// Avro records are decoded straight into Arrow builders, stepping over the fields the schema
/// does not name, whenever every column asked is of a primitive or logical type; a column of
/// a record, array, map or uuid type makes the block go through generic Avro values (the same
/// batches, more slowly). A value the target type cannot hold is an error, never a null.
/// HFile and CDC blocks are [`FormatError::UnsupportedBlock`]. Every error names the file and
/// the block's offset: schema mismatches (a column that cannot be cast, a missing non-nullable
/// column, a recursive or unmappable schema) are [`FormatError::Avro`] (Avro blocks) or
/// [`FormatError::Parquet`] (parquet blocks) whose reason names the field.
pub fn decode_data_block(
    block: &LogBlock,
    path: &str,
    target: Option<&SchemaRef>,
) -> Result<Vec<RecordBatch>> {
    match block.block_type {
        BlockType::AvroData => {
            let avro = avro_block_schema(block, path)?;
            let schema = match target {
                Some(t) => t.clone(),
                None => avro_schema_to_arrow(&avro).map_err(|e| locate(e, block, path, avro_at))?,
            };
            if let Some(mut direct) = DirectDecoder::try_new(&avro, &schema) {
                let mut batches = Vec::new();
                let finish = |direct: &mut DirectDecoder| {
                    direct.finish().map_err(|e| locate(e, block, path, avro_at))
                };
                for_each_datum(block, path, |i, datum| {
                    direct.push(datum).map_err(|reason| FormatError::Avro {
                        path: record_location(block, path, i),
                        reason,
                    })?;
                    if direct.rows() >= AVRO_CHUNK_RECORDS {
                        batches.push(finish(&mut direct)?);
                    }
                    Ok(())
                })?;
                if direct.rows() > 0 || batches.is_empty() {
                    batches.push(finish(&mut direct)?);
                }
                return Ok(batches);
            }
            let convert = |records: &[apache_avro::types::Value]| {
                avro_records_to_batch(&avro, records, &schema)
                    .map_err(|e| locate(e, block, path, avro_at))
            };
            let mut batches = Vec::new();
            let mut chunk = Vec::with_capacity(AVRO_CHUNK_RECORDS.min(MAX_RESERVED_RECORDS));
            for_each_record(block, path, &avro, |value| {
                chunk.push(value);
                if chunk.len() >= AVRO_CHUNK_RECORDS {
                    batches.push(convert(&chunk)?);
                    chunk.clear();
                }
                Ok(())
            })?;
            if !chunk.is_empty() || batches.is_empty() {
                batches.push(convert(&chunk)?);
            }
            Ok(batches)
        }
        BlockType::ParquetData => {
            let parquet_err = |e: parquet::errors::ParquetError| FormatError::Parquet {
                path: format!("{path} (block at offset {})", block.offset),
                reason: e.to_string(),
            };
            let reader = ParquetRecordBatchReaderBuilder::try_new(block.content.clone())
                .map_err(parquet_err)?
                .build()
                .map_err(parquet_err)?;
            let mut out = Vec::new();
            for batch in reader {
                let batch = batch.map_err(|e| FormatError::Arrow {
                    path: format!("{path} (block at offset {})", block.offset),
                    reason: e.to_string(),
                })?;
                out.push(match target {
                    Some(t) => conform_batch(&batch, t, path)
                        .map_err(|e| locate(e, block, path, parquet_at))?,
                    None => batch,
                });
            }
            Ok(out)
        }
        other => Err(unsupported(
            block,
            path,
            format!("{other} content is not decoded to Arrow"),
        )),
    }
}

/// Reshapes `batch` to `target`: columns matched by name and cast to the target type; target
/// columns the batch lacks are null (an error if not nullable); other columns are dropped.
pub fn conform_batch(batch: &RecordBatch, target: &SchemaRef, path: &str) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let mut columns = Vec::with_capacity(target.fields().len());
    for field in target.fields() {
        let column = match batch.column_by_name(field.name()) {
            Some(c) if c.data_type() == field.data_type() => c.clone(),
            Some(c) => {
                crate::exact_cast(c, field.data_type()).map_err(|e| FormatError::Schema {
                    field: Some(field.name().clone()),
                    reason: format!(
                        "cannot cast {} to {} in {path}: {e}",
                        c.data_type(),
                        field.data_type()
                    ),
                })?
            }
            None if field.is_nullable() => new_null_array(field.data_type(), rows),
            None => {
                return Err(FormatError::Schema {
                    field: Some(field.name().clone()),
                    reason: format!("column is not nullable and {path} has no such column"),
                })
            }
        };
        columns.push(column);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(target.clone(), columns, &options).map_err(|e| {
        FormatError::Arrow {
            path: path.to_string(),
            reason: e.to_string(),
        }
    })
}
