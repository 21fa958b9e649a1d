//! `arbor-branching`: branches, tags, publication and shallow clones (RFC-116).
//!
//! Built so far (issue 6, first slice): the identity files, `branch.json` ([`BranchInfo`]) and
//! tag definitions ([`TagInfo`]), with their validation. Branch metadata roots and main
//! resolution live in `arbor_timeline::metaroot`. Branch creation, branch writes, tags,
//! publication and cross-branch cleaning are not built yet.

mod error;
pub mod identity;

pub use error::{BranchingError, Result};
pub use identity::{BranchInfo, TagInfo};
