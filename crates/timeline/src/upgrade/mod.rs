//! The timeline side of `arbor upgrade`: what a table version 6 (timeline layout 1) or 8
//! becomes at version 8 or 9, as Java Hudi's upgrade handlers make it.
//!
//! - [`properties`]: the upgraded `hoodie.properties` ([`upgraded_config`]);
//! - [`instants`]: the layout-1 active timeline rewritten in layout 2 with completion times
//!   ([`plan_layout2_timeline`], [`write_layout2_timeline`]), the removal of the old files
//!   ([`remove_layout1_instants`]) and the 0.x archived timeline's files
//!   ([`legacy_archive_keys`]).
//!
//! The order of the storage operations (and so crash safety) is the caller's: arbor-table's
//! `txn/upgrade.rs`.

pub mod instants;
pub mod properties;

pub use instants::{
    completion_time_from_mtime, layout1_instant_keys, legacy_archive_keys, plan_layout2_timeline,
    remove_layout1_instants, write_layout2_timeline, ConvertedInstant,
};
pub use properties::upgraded_config;
