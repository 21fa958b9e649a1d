//! The table layout, in one place: every path of a table (metadata roots, branches,
//! publications, tags, locks, heartbeats, the metadata table, partition markers) and the
//! resolution of a logical file to the storage and key holding it.
//!
//! - [`paths`]: the fixed paths, as every component addresses them;
//! - [`TableLayout`] ([`timeline_dirs`]): where one timeline's meta directory, active instants
//!   and archived history are;
//! - [`metaroot`]: where main, publications and working branches keep their metadata
//!   (RFC-116), and main resolution;
//! - [`branches`]: branch identities and the discovery of every live root;
//! - [`rooted`]: [`RootedStorage`], the resolver: the table as one root sees it, its metadata
//!   where main's root metadata would be, the shared files where [`FileLocations`] says
//!   ([`location`]: the table's own location; a shallow clone's table storage is a
//!   [`ClonedStorage`], which reads the files it did not write from its sources).
//! - [`clone_records`], [`clone_rule`], [`clone_storage`], [`clone_guard`]: shallow clones: the
//!   descriptor and pins, the rule that puts each file in one location, [`ClonedStorage`]
//!   applying it, and the guard that makes Hudi readers unaware of clones refuse an active one
//!   (`docs/clones.md`).

pub mod branches;
pub mod clone_guard;
pub mod clone_records;
pub mod clone_rule;
pub mod clone_storage;
pub mod location;
pub mod metaroot;
pub mod paths;
pub mod rooted;
pub mod timeline_dirs;

pub use branches::{find_branch, live_roots, BranchInfo, RebaseRecord};
pub use clone_guard::{guard_location, unguard_location, GUARDED_TABLE_TYPE};
pub use clone_records::{
    pin_key, CloneDescriptor, CloneSource, CloneState, PinRecord, CLONE_FILE, PINS_DIR,
};
pub use clone_rule::{CloneRule, Home};
pub use clone_storage::{
    normalize_location, open_cloned, open_location, ClonedStorage, LocationOpener, RegistryOpener,
};
pub use location::{FileLocations, Located, OwnLocation};
pub use metaroot::{resolve_main, MetaRoot};
pub use paths::DEFAULT_META_DIR;
pub use rooted::RootedStorage;
pub use timeline_dirs::TableLayout;
