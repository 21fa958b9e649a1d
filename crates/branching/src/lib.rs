//! `arbor-branching`: Git-like branches and tags for Hudi tables (RFC-116).
//!
//! - **Roots** ([`roots`]): main is the root metadata until a publication, then the latest
//!   completed publication `p<N>` (`arbor_timeline::resolve_main`); a working branch `b` keeps
//!   its metadata in `.hoodie/branches/b/` and `.hoodie/metadata/.hoodie/branches/b/`, with the
//!   same never-reused `branchId` in `branch.json` on both sides. Every component works on a
//!   branch unchanged through `arbor_timeline::RootedStorage`, which redirects the two meta
//!   directories and shares everything else (data files, metadata-table files, the table lock).
//! - **Branches** ([`branch`]): [`create_branch`] from main's latest completed state or a tag on
//!   main, [`list_branches`], [`drop_branch`]; [`open_branch`] / [`open_table`] /
//!   [`open_reader`] to write and read one.
//! - **Tags** ([`tag`]): [`create_tag`], [`drop_tag`], [`expire_tags`], [`list_tags`], and
//!   [`tag_reader`] for reads as of the tag.
//! - **Publication** ([`publish()`]): strict fast-forward of main to a branch's state; main's
//!   tags at instants of the branch's history are carried over; afterwards the root
//!   `hoodie.properties` files lead branch-unaware readers to the new main
//!   (`arbor_timeline::legacy`); [`publish_and_drop`] then drops the branch under the same lock.
//! - **Diff and merge** ([`diff()`], [`merge()`]): the changes between two refs by record
//!   key, reading only the file groups written since their merge base; a three-way merge of a
//!   ref into a branch or main as one upsert commit, with conflict strategies.
//! - **Validation** ([`validate()`]): one root's metadata table against storage, excusing
//!   shared files another root released.
//! - **Clones** ([`clone`]): shallow clones at another location reading the source's files,
//!   pinned on the source; detach, deep clones, the source's pins.
//! - **Cleaning and restore across branches** ([`protect`]): `arbor_cleaner::clean` and
//!   `arbor_cleaner::restore` discover every live root themselves, so every clean keeps every
//!   file another branch or tag needs ([`BranchProtection`]) and a restore never rolls back
//!   shared instants; [`clean`] and [`restore`] are the same calls.

pub mod branch;
pub mod clone;
mod copy;
pub mod diff;
mod error;
pub mod identity;
pub mod maintain;
pub mod merge;
mod pending;
pub mod protect;
pub mod publish;
pub mod rebase;
pub mod roots;
pub mod tag;
pub mod validate;

pub use branch::{create_branch, drop_branch, list_branches, BranchSource, BranchStatus};
pub use copy::CopyStats;
pub use diff::{diff, RefSpec, TableDiff, TableRef};
pub use error::{BranchingError, Result};
pub use identity::{BranchInfo, TagInfo};
pub use maintain::{maintain, MaintainOptions, MaintenanceReport};
pub use merge::{cherry_pick, merge, MergeConflict, MergeOptions, MergeOutcome, MergeStrategy};
pub use protect::{clean, restore, BranchProtection};
pub use publish::{publish, publish_and_drop, PublishOutcome};
pub use rebase::{rebase, RebaseOutcome};
pub use roots::{live_roots, open_branch, open_reader, open_table, select_root};
pub use tag::{create_tag, drop_tag, expire_tags, list_tags, tag_reader, TagFilter};
pub use validate::validate;
