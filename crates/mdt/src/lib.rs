//! `arbor-mdt`: the Hudi metadata table (a merge-on-read table under `.hoodie/metadata`).
//!
//! This crate will own the FILES, RECORD_INDEX and SECONDARY_INDEX partitions. It is not
//! implemented yet (issue 4); it exports nothing so that no caller can mistake it for working
//! code.
