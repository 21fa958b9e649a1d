//! The Hudi log format (HoodieLogFormat v1, block content version 3; spec §5).
//!
//! A log file is a concatenation of blocks:
//!
//! ```text
//! "#HUDI#" | i64 L | i32 version=1 | i32 type | header map | i64 n | content[n] | footer map | i64 L+6
//! ```
//!
//! where `L` counts the bytes after itself up to and including the trailing reverse pointer, and
//! a map is `i32 count` then per entry `i32 key id, i32 length, UTF-8 bytes` (all big-endian).
//!
//! - [`block`]: the block model ([`LogBlock`], [`BlockType`], [`HeaderKey`]);
//! - [`reader`]: [`read_log_file`] splits a file into blocks, detecting corrupt or truncated
//!   blocks and resynchronising at the next magic like Java and hudi-rs do (or failing, in
//!   [`ReadMode::Strict`]);
//! - [`data`]: Avro and parquet data blocks to Avro records or Arrow batches;
//! - [`delete`]: delete blocks ([`DeleteRecord`] with a branch-preserving [`OrderingValue`]);
//! - [`writer`]: block encoders producing the bytes Spark writes.

pub mod block;
pub mod data;
pub mod delete;
pub mod reader;
pub mod writer;

pub use block::{BlockType, CommandBlockType, HeaderKey, LogBlock, MAGIC};
pub use data::{conform_batch, decode_avro_data_block, decode_data_block, AvroDataBlock};
pub use delete::{decode_delete_block, DeleteRecord, OrderingValue};
pub use reader::{
    read_log_bytes, read_log_file, read_log_file_with, CorruptRegion, LogFileContents, ReadMode,
};
pub use writer::{
    encode_avro_data_block, encode_avro_data_block_from_batch, encode_avro_data_block_with,
    encode_block, encode_command_block, encode_delete_block, encode_delete_block_with,
    encode_parquet_data_block,
};
