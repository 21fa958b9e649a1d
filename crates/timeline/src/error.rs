//! The error type of this crate.

use arbor_storage::StorageError;

/// Result of a timeline operation.
pub type Result<T, E = TimelineError> = std::result::Result<T, E>;

/// Everything the timeline crate can fail with. Variants carry the key (path relative to the
/// table base), the instant or the config key concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TimelineError {
    /// The storage underneath failed.
    #[error(transparent)]
    Storage(#[from] StorageError),

    /// There is no `.hoodie/` (or no `hoodie.properties`) at the given location.
    #[error("not a Hudi table: {path} does not exist")]
    NotATable {
        /// The missing path.
        path: String,
    },

    /// `hoodie.properties` is unreadable, incomplete or inconsistent.
    #[error("invalid table config {path}: {reason}")]
    InvalidConfig {
        /// Key of the properties file.
        path: String,
        /// The offending config key, when one is at fault.
        key: Option<String>,
        /// What is wrong.
        reason: String,
    },

    /// The stored checksum does not match the one computed from the table name.
    #[error("checksum mismatch in {path}: stored {stored}, computed {computed}")]
    ChecksumMismatch {
        /// Key of the properties file.
        path: String,
        /// The value of `hoodie.table.checksum`.
        stored: String,
        /// The checksum computed from database and table name.
        computed: u32,
    },

    /// The table version is not one arbor reads (6, 8, 9).
    #[error("unsupported table version {version} in {path} (arbor reads 6, 8 and 9)")]
    UnsupportedVersion {
        /// Key of the properties file.
        path: String,
        /// The version found.
        version: String,
    },

    /// An instant time is not 14 or 17 digits of a valid timestamp.
    #[error("invalid instant time {value:?}: {reason}")]
    InvalidInstantTime {
        /// The rejected text.
        value: String,
        /// Why.
        reason: String,
    },

    /// The next instant time would be further ahead of this machine's clock than allowed: the
    /// table's clock (its shared instant clock or its latest instant) runs ahead, because a
    /// writer's clock was wrong or the clock file was edited.
    #[error(
        "refusing to issue instant time {next}: it is {ahead_s} s ahead of this machine's clock \
         ({now}), more than the allowed {max_s} s; the table's clock runs ahead (a writer with a \
         wrong clock, or an edited {clock_key}). Check this machine's clock, then run \
         `arbor doctor <table>` to see and `arbor doctor <table> --fix` to repair the table's \
         clock"
    )]
    ClockAhead {
        /// The time that would have been issued.
        next: String,
        /// This machine's time, as an instant time.
        now: String,
        /// How far ahead, in seconds.
        ahead_s: i64,
        /// The allowed skew, in seconds.
        max_s: i64,
        /// The shared clock's key.
        clock_key: String,
    },

    /// A file in the timeline directory has a name that is not an instant file.
    #[error("invalid instant file name {name:?}: {reason}")]
    InvalidInstantName {
        /// The file name.
        name: String,
        /// Why.
        reason: String,
    },

    /// A table cannot be upgraded as asked (unsupported source or target version, a
    /// downgrade, or content the upgrade cannot convert); nothing was changed.
    #[error("cannot upgrade the table at {path}: {reason}")]
    Upgrade {
        /// The key concerned (usually `.hoodie/hoodie.properties` or an instant file).
        path: String,
        /// Why.
        reason: String,
    },

    /// An instant file's content could not be decoded or encoded.
    #[error("cannot decode {path}: {reason}")]
    Decode {
        /// Key of the instant file.
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// An instant content value could not be encoded.
    #[error("cannot encode {what}: {reason}")]
    Encode {
        /// What was being encoded.
        what: String,
        /// What went wrong.
        reason: String,
    },

    /// A state transition is not allowed (e.g. completing an instant that is not inflight).
    #[error("invalid transition of {instant}: {reason}")]
    InvalidTransition {
        /// The instant, as `<time>.<action>.<state>`.
        instant: String,
        /// Why.
        reason: String,
    },

    /// A commit point did not pass: another writer committed since the locked step began (this
    /// writer lost the table lock, e.g. by stalling longer than a lease), so the change did not
    /// take effect and nothing of it is visible (see [`crate::commit_point`]).
    #[error(
        "the commit of {target} did not take effect: {reason} (this writer lost the table lock, \
         e.g. it stalled for longer than a lease); nothing of it is visible and it can be retried"
    )]
    CommitPointLost {
        /// The table key the commit would have created.
        target: String,
        /// Why the commit record could not be replaced.
        reason: String,
    },

    /// The instant is already completed (its completed file exists).
    #[error("instant {instant} is already completed ({path})")]
    AlreadyCompleted {
        /// The instant time.
        instant: String,
        /// Key of the existing completed file.
        path: String,
    },

    /// The instant time already exists on the timeline.
    #[error("instant time {instant} already exists on the timeline")]
    DuplicateInstant {
        /// The instant time.
        instant: String,
    },

    /// The instant does not exist.
    #[error("instant {instant} not found on the timeline")]
    InstantNotFound {
        /// The instant time (and action, when known).
        instant: String,
    },

    /// The archived timeline is inconsistent.
    #[error("invalid archived timeline at {path}: {reason}")]
    Archive {
        /// Key of the offending file.
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// The archiver refused to run with the given settings.
    #[error("invalid archival settings: {reason}")]
    ArchiveConfig {
        /// What is wrong.
        reason: String,
    },

    /// A branch name is not acceptable (RFC-116 naming rules), naming it.
    #[error("invalid branch name {name:?}: {reason}")]
    InvalidBranchName {
        /// The name as given.
        name: String,
        /// Why it is refused.
        reason: String,
    },

    /// A branch identity file (`branch.json`) cannot be read as one, or the two sides of a
    /// branch disagree.
    #[error("invalid {path}: {reason}")]
    InvalidIdentity {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// Main cannot be resolved: the selected publication's metadata is missing or unreadable
    /// (never a silent fallback to an older main).
    #[error("cannot resolve main: {path}: {reason}")]
    MainUnresolvable {
        /// The publication directory or file concerned.
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// The location holds a clone whose creation has not finished: it cannot be opened until
    /// `arbor clone` is run again for it (which resumes it) or the location is removed.
    #[error("{location} is clone {id}, still being created: run the clone again to finish it, or remove {location}")]
    CloneIncomplete {
        /// The clone's location.
        location: String,
        /// The clone's id.
        id: String,
    },

    /// A clone's source location cannot be opened.
    #[error("cannot open clone source {location}: {reason}")]
    CloneSource {
        /// The source's location.
        location: String,
        /// Why.
        reason: String,
    },
}

impl TimelineError {
    pub(crate) fn decode(path: impl Into<String>, reason: impl ToString) -> Self {
        TimelineError::Decode {
            path: path.into(),
            reason: reason.to_string(),
        }
    }
}
