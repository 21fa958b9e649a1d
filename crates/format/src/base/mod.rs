//! Base files with the `_hoodie_*` meta columns (spec 4.2, 4.3): parquet, and Lance (Hudi 1.2,
//! with the `lance` feature) through arbor-lance. The format follows the file's extension
//! ([`BaseFormat`]).
//!
//! - [`BaseFileReader`] (and the shortcuts [`read_base_file`], [`base_file_schema`],
//!   [`base_file_metadata`]) read a base file through [`arbor_storage::Storage`] with ranged
//!   reads: the footer first, then only the column chunks of the projected columns (chunks less
//!   than 1 MiB apart fetched with one read). ORC and HFile base files are
//!   [`FormatError::UnsupportedFormat`](crate::FormatError::UnsupportedFormat).
//! - [`BaseFileWriter`] writes a base file the way Spark does: the five meta columns first
//!   (nullable strings), then the data columns; footer key/values `hoodie_min_record_key`,
//!   `hoodie_max_record_key`, `parquet.avro.schema` and `writer.model.name=avro`; timestamps as
//!   INT64 `TIMESTAMP(MICROS, isAdjustedToUTC=true)`, decimals as `FIXED_LEN_BYTE_ARRAY`.
//!   A file named `*.lance` is written as a Lance file (format 2.0, meta columns as strings,
//!   the record key range in the schema metadata, as Hudi 1.2's Java writer does).
//!   Files are created with [`arbor_storage::Storage::put_if_absent`]: a data file is never
//!   overwritten.

mod dictionary;
mod format;
#[cfg(feature = "lance")]
mod lance;
mod meta_columns;
mod reader;
mod stream;
mod writer;

pub use format::{holds_map, BaseFormat};
pub use reader::{
    base_file_metadata, base_file_schema, check_base_file_format, read_base_file, BaseFileReader,
    ReadOptions,
};
pub use stream::BaseFileStream;
pub use writer::{
    BaseFileWriter, Compression, EncodedBaseFile, WrittenFile, FOOTER_AVRO_SCHEMA,
    FOOTER_MAX_RECORD_KEY, FOOTER_MIN_RECORD_KEY, FOOTER_WRITER_MODEL,
};
