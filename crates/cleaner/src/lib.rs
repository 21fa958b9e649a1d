//! `arbor-cleaner`: savepoints, cleaning and archival of Hudi tables, designed so that no file
//! anybody still needs is ever deleted.
//!
//! - [`ProtectionSource`]: who needs which files. The cleaner deletes a committed data file only
//!   if no source protects it; savepoints, pending instants and the clean policy's retention
//!   window are sources ([`protection`]); every other live root of the table (main, each
//!   working branch, with its tags and what its own policy retains) is a source every clean
//!   discovers from storage itself ([`roots`]), so no entry point can skip one; later holders
//!   (clone pins) plug in at [`roots::discovered_sources`].
//! - [`restore()`] never rolls back an instant another live root also has.
//! - [`clean()`]: plan, record in the metadata table, delete, complete ([`mod@clean`] module doc),
//!   with the three Hudi policies ([`CleanPolicy`]) and a dry run; deleted partitions nobody
//!   keeps anything of are removed ([`partitions`]).
//! - [`holders_of_partitions`]: which refs keep files of given partitions (TTL dry runs).
//! - [`savepoint`]: savepoints (data table and metadata table as a pair).
//! - [`restore()`]: restore to a savepoint ([module doc](mod@restore)).

pub mod clean;
mod error;
pub mod holders;
pub mod merge_bases;
pub mod partitions;
pub mod policy;
pub mod protection;
pub mod reclaim;
pub mod restore;
pub mod roots;
pub mod savepoint;

pub use clean::{
    archive, clean, clean_locked, plan_clean, Archived, CleanOptions, CleanOutcome, CleanPlan,
};
pub use error::{CleanerError, Result};
pub use holders::holders_of_partitions;
pub use policy::CleanPolicy;
pub use protection::{
    PendingProtection, ProtectionContext, ProtectionSource, RetentionProtection,
    SavepointProtection,
};
pub use restore::{restore, restore_locked, RestoreOutcome};
pub use roots::{live_roots, BranchProtection};
pub use savepoint::{
    create_savepoint, create_savepoint_locked, delete_savepoint, delete_savepoint_locked,
    list_savepoints, SavepointInfo,
};
