//! `arbor-fsview`: the file-system view of a Hudi table.
//!
//! This crate will own the file model (base files, log files, file slices, file groups), the
//! `PartitionListing` trait and the `FileSystemView` that answers "which file slices are visible
//! as of instant T". It is not implemented yet (issue 3); it exports nothing so that no caller
//! can mistake it for working code.
