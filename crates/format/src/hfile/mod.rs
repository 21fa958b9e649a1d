//! HFile v3: the base-file format of the metadata table (MDT) and the content of
//! `HFILE_DATA` log blocks (spec §6.4).
//!
//! Keys are byte strings (the HBase row; MDT record keys such as partition paths), values are
//! opaque bytes (Avro-encoded `HoodieMetadataRecord`s in the MDT; [`mdt`] decodes and encodes
//! the `files` partition's). Only what Hudi
//! writes is supported: major version 3, codecs NONE and GZ, a single-level root index.
//!
//! - [`HFileReader`]: open + validate, point lookup through the root index, ordered iteration;
//! - [`HFileRangedReader`]: point lookups in a file on storage that read only the trailer, the
//!   load-on-open section and the data blocks the keys fall in;
//! - [`HFileWriter`]: strictly increasing appends, output readable by [`HFileReader`] and laid
//!   out like the Python prototype writer that hudi-rs 0.5.0 accepted.

mod block;
pub mod mdt;
pub mod mdt_column_stats;
mod mdt_files_direct;
mod mdt_files_record;
pub mod mdt_index;
mod mdt_stat_value;
mod proto;
mod ranged;
mod reader;
mod trailer;
mod writer;

pub use ranged::HFileRangedReader;
pub use reader::{HFileIter, HFileReader};
pub use writer::{HFileWriter, HFileWriterOptions};

use crate::FormatError;

/// The block codec of an HFile (trailer `compression_codec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Codec id 2: blocks stored as is.
    #[default]
    None,
    /// Codec id 1: every block payload is a gzip member.
    Gz,
}

/// An [`FormatError::HFile`] naming `path`.
fn hfile_err(path: &str, reason: impl Into<String>) -> FormatError {
    FormatError::HFile {
        path: path.to_string(),
        reason: reason.into(),
    }
}
