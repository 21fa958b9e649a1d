//! Cleaning and restoring with every branch in mind. The protections live in the cleaner,
//! which discovers every live root from storage on each run (`arbor_cleaner::roots`), so
//! `arbor_cleaner::clean` and `arbor_cleaner::restore` are branch-safe on their own; these are
//! the same calls under the names this crate has always offered.

use arbor_cleaner::{CleanOptions, CleanOutcome, RestoreOutcome};
use arbor_table::Table;
use arbor_timeline::InstantTime;

pub use arbor_cleaner::roots::retained_by;
pub use arbor_cleaner::BranchProtection;

use crate::error::Result;

/// Cleans `table`'s root (main or a working branch) with `options`, keeping every file another
/// live root needs (`arbor_cleaner::clean`, which adds [`BranchProtection`] itself).
pub async fn clean(table: &Table, options: CleanOptions) -> Result<CleanOutcome> {
    Ok(arbor_cleaner::clean(table, &options).await?)
}

/// Restores `table`'s root to its savepoint `to`, refusing (nothing changed) when an instant it
/// would roll back is also completed on another live root (`arbor_cleaner::restore`).
pub async fn restore(table: &Table, to: &InstantTime) -> Result<RestoreOutcome> {
    Ok(arbor_cleaner::restore(table, to).await?)
}
