//! Lance base files of Hudi 1.2 tables (`hoodie.table.base.file.format=LANCE`) for arbor.
//!
//! - [`LanceFileReader`] opens a Lance file through arbor's `Storage` with ranged reads and
//!   decodes it, projected, to arrow 59 batches.
//! - [`encode`] / [`encode_blocking`] write batches as a Lance file (format 2.0, as Hudi 1.2's
//!   Java writer does) in memory; the caller stores the bytes (create-if-absent).
//!
//! The lance-file crates are built on arrow 58 and object_store 0.14; this crate keeps them
//! out of every other arbor crate (arrays cross through the Arrow C data interface without
//! copies).

mod bridge;
mod error;
mod read;
mod store;
mod write;

pub use error::{LanceError, Result};
pub use read::LanceFileReader;
pub use write::{encode, encode_blocking};
