//! Integration tests of arbor-table.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod cache;
mod cluster;
mod column_stats;
mod compaction;
mod contention;
mod crash_sweep;
mod data_skipping;
mod data_skipping_props;
mod doctor;
mod fixture_key_layouts;
mod fixtures_read;
mod foreign_shapes;
mod in_filters;
mod keygen;
mod lock_fencing;
mod mdt;
mod mdt_clean;
mod mdt_compaction;
mod no_meta_fields;
mod null_ordering;
mod ownership;
mod partition_conflicts;
mod partition_layouts;
mod read_options;
mod read_stream;
mod record_index;
mod repeated_keys;
mod robustness;
mod rollback;
mod scan_plan;
mod schema_on_read;
mod secondary_index;
mod support_tables;
mod ttl;
mod ttl_crash;
mod ttl_fixture;
mod ttl_props;
mod ttl_support;
mod upgrade;
mod value_types;
mod versions;
mod write_changes;
mod write_cow;
mod write_history;
mod write_mor;
mod write_occ;
mod write_parallel;
mod write_reread;
mod write_stream;
mod write_support;
mod write_validation;
