//! [`MergeOptions`] and [`MergeStrategy`]: how a merge runs and what a conflict does.

/// What a conflict does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeStrategy {
    /// Refuse the merge (nothing written).
    #[default]
    Fail,
    /// Take the source's side.
    Source,
    /// Keep the target's side.
    Target,
    /// Keep the record with the greater ordering field (ties: the source's).
    Ordering,
}

impl MergeStrategy {
    /// The name users type (`fail`, `source`, `target`, `ordering`).
    pub fn name(self) -> &'static str {
        match self {
            MergeStrategy::Fail => "fail",
            MergeStrategy::Source => "source",
            MergeStrategy::Target => "target",
            MergeStrategy::Ordering => "ordering",
        }
    }
}

/// How [`merge()`](crate::merge()) and [`cherry_pick`](crate::cherry_pick) run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MergeOptions {
    /// What a conflict does.
    pub strategy: MergeStrategy,
    /// Compute everything, write nothing (conflicts are reported, never refused).
    pub dry_run: bool,
}

impl MergeOptions {
    /// `strategy`, writing.
    pub fn new(strategy: MergeStrategy) -> Self {
        MergeOptions {
            strategy,
            dry_run: false,
        }
    }

    /// The same, as a dry run when `dry_run`.
    pub fn with_dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }
}

/// Refuses `--strategy ordering` on a table without an ordering field (`ordering`), naming
/// `op`.
pub(crate) fn require_ordering(
    op: &str,
    strategy: MergeStrategy,
    ordering: Option<&str>,
) -> crate::error::Result<()> {
    if strategy == MergeStrategy::Ordering && ordering.is_none() {
        return Err(crate::error::BranchingError::refused(
            op,
            "--strategy ordering needs the table's ordering field \
             (hoodie.table.ordering.fields), and this table has none",
        ));
    }
    Ok(())
}
