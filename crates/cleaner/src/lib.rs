//! `arbor-cleaner`: savepoints, restore, cleaning and partition TTL.
//!
//! This crate will own clean planning and execution and the `ProtectionSource` trait that keeps
//! every file somebody still needs. It is not implemented yet (issue 5); it exports nothing so
//! that no caller can mistake it for working code.
