//! One module per subcommand; each parses its arguments, calls the library and prints.

pub mod archive;
pub mod branch;
pub mod cherry_pick;
pub mod clean;
pub mod clone;
pub mod compact;
pub mod create;
pub mod delete_partition;
pub mod demo;
pub mod diff;
pub mod doctor;
pub mod files;
pub mod index;
pub mod mdt;
pub mod read;
pub mod read_rows;
pub mod restore;
pub mod savepoint;
#[cfg(feature = "sql")]
pub mod sql;
pub mod tag;
pub mod timeline;
pub mod ttl;
pub mod upgrade;
pub mod validate;
pub mod write;
