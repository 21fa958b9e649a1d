//! Integration tests of the `arbor` binary.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod azure;
mod branch;
mod cli_output;
mod clone;
mod closed_pipes;
mod cluster;
mod compact;
mod concurrent_writers;
mod create_write;
mod demo;
mod doctor;
mod exact_inputs;
mod holder_log;
mod index;
mod issue33;
mod lance;
mod locks;
mod maintain;
mod mdt;
mod merge_diff;
mod read;
mod read_output;
mod read_predicates;
mod read_streamed;
mod read_where;
mod rebase;
mod reclaim;
mod restore;
mod sql;
mod stalled_writer;
mod table_services;
mod timeline;
mod ttl;
mod upgrade;
mod values;
mod versions;
mod write_counts;
mod write_fixtures;
