//! `arbor-format`: the contents of Hudi data files, independent of the timeline.
//!
//! - [`avro_arrow`]: Avro schemas and values <-> Arrow schemas and arrays;
//! - [`log`]: the Hudi log format (blocks: Avro data, parquet data, delete, command), read and
//!   written, with corruption detection;
//! - [`base`]: parquet base files with the `_hoodie_*` meta columns, read to Arrow and written
//!   from Arrow.

pub mod avro_arrow;
pub mod base;
mod error;
mod exact_cast;
pub mod hfile;
pub mod log;
pub mod meta;
pub mod stats;

pub use error::{FormatError, Result};
pub(crate) use exact_cast::exact_cast;
