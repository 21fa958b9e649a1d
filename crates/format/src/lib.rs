//! `arbor-format`: the contents of Hudi data files.
//!
//! This crate will own parquet base files with the `_hoodie_*` meta columns, the Hudi log format
//! and the HFile reader and writer. It is not implemented yet (issue 3); it exports nothing so
//! that no caller can mistake it for working code.
