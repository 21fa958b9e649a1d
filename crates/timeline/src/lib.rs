//! `arbor-timeline`: the metadata side of a Hudi table that does not involve data files.
//!
//! - [`TableConfig`]: `hoodie.properties`, with Hudi's checksum and atomic replacement;
//! - [`InstantTime`], [`Instant`], [`Action`], [`State`]: instants and their file names in
//!   timeline layout 2 (table versions 8 and 9) and layout 1 (version 6, read only);
//! - [`InstantTimeGenerator`]: strictly increasing 17-digit UTC instant times;
//! - [`avro`]: the Avro codecs of instant file contents (commit metadata, plans, clean,
//!   rollback, restore, savepoint, ...);
//! - [`ActiveTimeline`]: loading, filtering, ordering and state transitions of instants;
//! - [`summary`]: what `arbor timeline` lists;
//! - [`archive`]: the LSM archived timeline under `timeline/history/`, its reader and the
//!   archiver;
//! - [`layout`]: every path of the table layout (metadata roots, branches, publications, tags,
//!   locks, heartbeats, the metadata table), branch identities and live roots, and
//!   [`RootedStorage`], which resolves a logical file to the storage and key holding it
//!   ([`metaroot`] and [`rooted`] are its modules, re-exported here);
//! - [`upgrade`]: the upgraded `hoodie.properties` and the layout-1 timeline rewritten in
//!   layout 2 (`arbor upgrade`);
//! - [`legacy`]: the root `hoodie.properties` files that lead branch-unaware readers and
//!   writers to main after a publication.
//!
//! All I/O goes through [`arbor_storage::Storage`]; keys are relative to the table's base path.

pub mod active;
pub mod archive;
pub mod avro;
pub mod commit_point;
pub mod config;
mod error;
pub mod generator;
pub mod instant;
pub mod layout;
pub mod legacy;
pub mod naming;
pub mod summary;
pub mod upgrade;

pub use layout::{metaroot, rooted};

pub use active::ActiveTimeline;
pub use config::TableConfig;
pub use error::{Result, TimelineError};
pub use generator::InstantTimeGenerator;
pub use instant::{Action, Instant, InstantTime, State};
pub use layout::TableLayout;
pub use metaroot::{resolve_main, MetaRoot};
pub use rooted::RootedStorage;
