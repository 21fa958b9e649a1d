//! The error type of this crate.

/// Result of a branching operation.
pub type Result<T, E = BranchingError> = std::result::Result<T, E>;

/// Everything branch and tag operations can fail with; variants name the file, branch or tag.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BranchingError {
    /// The timeline, config or a name check failed.
    #[error(transparent)]
    Timeline(#[from] arbor_timeline::TimelineError),
    /// Storage failed.
    #[error(transparent)]
    Storage(#[from] arbor_storage::StorageError),
    /// Opening, reading or writing a branch's table failed.
    #[error(transparent)]
    Table(#[from] arbor_table::TableError),
    /// Reading or validating the metadata table failed.
    #[error(transparent)]
    Mdt(#[from] arbor_mdt::MdtError),
    /// The file-system view failed (reading a commit's metadata).
    #[error(transparent)]
    FsView(#[from] arbor_fsview::FsViewError),
    /// A savepoint, clean or restore failed or was refused.
    #[error(transparent)]
    Cleaner(#[from] arbor_cleaner::CleanerError),
    /// A `branch.json` or tag definition cannot be read as one.
    #[error("invalid {path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A table service `maintain` ran (or judged) failed; the services before it completed.
    #[error("maintain: {service}: {reason}")]
    Service {
        /// The service (`compaction`, `clean`, ...).
        service: String,
        /// What failed.
        reason: String,
    },
    /// No working branch of this name exists (or its identity files do not match).
    #[error("branch {name} does not exist{}", rebase_hint(.name, .interrupted_rebase.as_deref()))]
    BranchNotFound {
        /// The branch.
        name: String,
        /// The branch an interrupted rebase of this name left (`<name>~rebase`): the branch is
        /// between its old and its rebased state, and running the rebase again finishes it.
        interrupted_rebase: Option<String>,
    },
    /// No tag of this name exists on the branch (or it has expired, for reads).
    #[error("tag {name} on {branch}: {reason}")]
    TagNotFound {
        /// The tag.
        name: String,
        /// The owning branch (`main` or a working branch).
        branch: String,
        /// Absent or expired.
        reason: String,
    },
    /// The operation was refused; nothing was changed.
    #[error("{operation} refused: {reason}")]
    Refused {
        /// What was asked (`create branch audit`, `publish audit`, ...).
        operation: String,
        /// Why.
        reason: String,
    },
    /// Publication is not a fast-forward: main made logical writes after the branch's base
    /// that the branch does not have. Nothing was changed.
    #[error(
        "publish {branch} refused: main has writes after the branch's base {base} that the \
         branch does not have: {missing_on_branch:?} (the branch's own writes since then: \
         {branch_only:?}); branches publish only by fast-forward: rebase it onto main first \
         (`arbor branch rebase <table> {branch}`), or merge it (`arbor branch merge <table> \
         {branch}`)"
    )]
    Divergent {
        /// The branch.
        branch: String,
        /// The branch's base instant (`none` when created from an empty main).
        base: String,
        /// Main's instants missing from the branch.
        missing_on_branch: Vec<String>,
        /// The branch's logical writes after its base that main does not have.
        branch_only: Vec<String>,
    },
    /// A clone's target location already holds a table (or another clone).
    #[error("cannot clone into {location}: {reason}")]
    CloneTargetNotEmpty {
        /// The target location.
        location: String,
        /// What it holds.
        reason: String,
    },
    /// A pin cannot be removed: its clone still exists and references the source's files.
    #[error(
        "clone {id} at {location} still exists and reads files of this table: detach it \
         (`arbor clone detach {location}`) or remove it first, or forget its pin with --force \
         (the clone may then lose files)"
    )]
    CloneAlive {
        /// The clone's id.
        id: String,
        /// The clone's location.
        location: String,
    },
    /// No pin of the source names this clone (id or location).
    #[error("{source_location} has no clone pin for {clone}")]
    PinNotFound {
        /// The source's location.
        source_location: String,
        /// The id or location asked for.
        clone: String,
    },
    /// A savepoint, branch or instant is held by clone pins; nothing was changed.
    #[error(
        "{operation} refused: instant {instant} of {root} is pinned by clone(s) {clones:?} \
             (see `arbor clone list`; detach or forget those clones first)"
    )]
    PinHeld {
        /// What was asked.
        operation: String,
        /// The pinned instant.
        instant: String,
        /// The root (`main` or a branch) holding it.
        root: String,
        /// The pinning clones' ids and locations.
        clones: Vec<String>,
    },
    /// A file a snapshot of the clone reads is missing from the location that should hold it.
    #[error(
        "clone {location}: {key} is missing from {source_location}, and a snapshot the clone \
         keeps reads it: nothing was detached (the clone is still shallow); restore the file \
         there, or drop the clone's tags or branches that read it, then detach again"
    )]
    DetachMissing {
        /// The clone's location.
        location: String,
        /// The file's key.
        key: String,
        /// The location that should hold it.
        source_location: String,
    },
    /// A merge or cherry-pick found keys (or partitions) changed differently on both sides
    /// and its strategy is `fail`; nothing was written.
    #[error("{0}")]
    MergeConflicts(Box<crate::merge::conflict::MergeRefusal>),
}

impl BranchingError {
    /// A refusal of `operation` for `reason`.
    pub fn refused(operation: impl Into<String>, reason: impl Into<String>) -> Self {
        BranchingError::Refused {
            operation: operation.into(),
            reason: reason.into(),
        }
    }
}

/// The end of [`BranchingError::BranchNotFound`]'s message when a rebase was interrupted.
fn rebase_hint(name: &str, staging: Option<&str>) -> String {
    match staging {
        Some(s) => format!(
            " (a rebase of it was interrupted; its rebased state is on branch {s}: run `arbor \
             branch rebase <table> {name}` to finish it)"
        ),
        None => String::new(),
    }
}
