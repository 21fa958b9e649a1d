//! The conditional commit point: one compare-and-swap decides whether a state change took
//! effect, whatever happened to the writer's lock lease in the meantime.
//!
//! The table lock excludes concurrent writers only while its holder keeps renewing its lease. A
//! holder that stalls for longer than a lease (a GC pause, a VM stall, a laptop going to sleep,
//! `SIGSTOP`) loses the lock to the next writer without knowing it; when it resumes, whatever it
//! writes next lands on a table that changed under it. Checking the lease just before the commit
//! point narrows that window but cannot close it: the stall can fall between the check and the
//! write.
//!
//! So the visible change itself is made conditional. A table has one **commit record**
//! ([`COMMIT_RECORD_KEY`], shared by every metadata root, outside the lock directory). Each
//! locked step reads it when it starts ([`CommitGate::enter`]) and remembers its version; every
//! commit point of the step (the creation of a completed instant file of the step's own
//! timeline, a publication's `_SUCCESS`) first replaces the record with one naming that file,
//! by [`Storage::put_if_match`] on the remembered version, and only then creates the file. The
//! replacement succeeds only if no other commit point of any writer happened since the step
//! began, so its success alone means the change took effect; a writer whose replacement fails
//! learns that its change did **not** take effect ([`TimelineError::CommitPointLost`]) and has
//! changed nothing visible. The record also holds the file's content, so a crash between the
//! replacement and the file's creation is **rolled forward** by the next step that enters the
//! gate (or `arbor doctor`): the file is created from the record.
//!
//! Instant times and contents never repeat, so a record's bytes never repeat either (its
//! sequence number grows by one per commit): a compare-and-swap on a content hash (S3's ETag)
//! cannot be fooled by an old record coming back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arbor_storage::{Storage, StorageError, StorageExt, Version};
use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::{Result, TimelineError};
use crate::layout::metaroot::MetaRoot;
use crate::layout::rooted::table_key_of;

/// The directory of the commit record and of staged contents (shared by every root; never
/// copied into branches, publications or clones).
pub use crate::layout::paths::COMMIT_DIR;

/// The table's commit record.
pub const COMMIT_RECORD_KEY: &str = ".hoodie/.commit/commit_point.json";

/// Contents up to this size are kept inside the record; larger ones are staged in their own
/// object first (`.hoodie/.commit/staged/`).
const INLINE_LIMIT: usize = 64 * 1024;

/// The record of the last commit point of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitRecord {
    /// Grows by one per commit point (0 before the first).
    pub seq: u64,
    /// The table key of the file the commit point creates (a completed instant file, a
    /// publication's `_SUCCESS`).
    pub target: String,
    /// A table key that exists while the commit can still be rolled forward (the instant's
    /// inflight file): once it is gone (the instant was archived), nothing is rolled forward.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
    /// The target's content, base64, when small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The table key of the staged content, when large.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<String>,
    /// The fencing token of the committer's lease (0 when it held none).
    #[serde(default)]
    pub token: u64,
    /// When the commit point passed, by the committer's clock (RFC 3339).
    pub at: String,
}

impl CommitRecord {
    /// Decodes a stored record.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| TimelineError::Decode {
            path: COMMIT_RECORD_KEY.to_string(),
            reason: e.to_string(),
        })
    }

    fn encode(&self) -> Result<Bytes> {
        serde_json::to_vec(self)
            .map(Bytes::from)
            .map_err(|e| TimelineError::Encode {
                what: COMMIT_RECORD_KEY.to_string(),
                reason: e.to_string(),
            })
    }

    /// The target's content: inline or staged.
    async fn target_content(&self, table: &Arc<dyn Storage>) -> Result<Bytes> {
        if let Some(text) = &self.content {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| TimelineError::Decode {
                    path: format!("{COMMIT_RECORD_KEY} (content of {})", self.target),
                    reason: e.to_string(),
                })?;
            return Ok(Bytes::from(bytes));
        }
        match &self.staged {
            Some(key) => Ok(table.get(key).await?.0),
            None => Ok(Bytes::new()),
        }
    }
}

/// Reads the table's commit record and its version (`None` before the first commit point).
/// An unreadable record fails with `Decode`.
pub async fn read_record(table: &Arc<dyn Storage>) -> Result<Option<(CommitRecord, Version)>> {
    match table.get_opt(COMMIT_RECORD_KEY).await? {
        None => Ok(None),
        Some((bytes, meta)) => Ok(Some((CommitRecord::decode(&bytes)?, meta.version))),
    }
}

/// What [`roll_forward`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollForward {
    /// No record, or its target exists: nothing to do.
    Complete,
    /// The target was missing and has been created from the record.
    RolledForward {
        /// The table key created.
        target: String,
    },
    /// The target is missing but so is its pending file (the instant was archived or removed
    /// since): nothing is created.
    Stale {
        /// The missing target.
        target: String,
    },
}

/// Finishes the last commit point if a crash fell between its record and its file: creates
/// the record's target (create-if-absent) from the record when it is missing and its pending
/// file still exists. Safe to run at any time by anyone (it creates at most the one file the
/// record promises); removes a staged content once its target exists.
pub async fn roll_forward(table: &Arc<dyn Storage>) -> Result<RollForward> {
    let Some((record, _)) = read_record(table).await? else {
        return Ok(RollForward::Complete);
    };
    roll_forward_record(table, &record).await
}

async fn roll_forward_record(
    table: &Arc<dyn Storage>,
    record: &CommitRecord,
) -> Result<RollForward> {
    let outcome = if table.exists(&record.target).await? {
        RollForward::Complete
    } else {
        let alive = match &record.pending {
            Some(p) => table.exists(p).await?,
            None => true,
        };
        if !alive || superseded(table, &record.target).await? {
            return Ok(RollForward::Stale {
                target: record.target.clone(),
            });
        }
        let content = record.target_content(table).await?;
        match table.put_if_absent(&record.target, content).await {
            Ok(_) | Err(StorageError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        tracing::warn!(
            file = %record.target,
            "rolled forward a commit whose writer stopped between its commit point and its file"
        );
        RollForward::RolledForward {
            target: record.target.clone(),
        }
    };
    if let Some(staged) = &record.staged {
        let _ = table.delete(staged).await;
    }
    Ok(outcome)
}

/// True when an instant of `target`'s timeline directory was requested after `target`'s
/// completion time (`<requested>_<completion>.<action>`): a later state change (a rollback or a
/// restore removing it) happened since, so a missing target must not come back. Every locked
/// step rolls the last commit forward before it starts an instant, so a crash between a commit
/// point and its file is never followed by a later instant.
async fn superseded(table: &Arc<dyn Storage>, target: &str) -> Result<bool> {
    let (dir, name) = target.rsplit_once('/').unwrap_or(("", target));
    let Some(completion) = name
        .split_once('_')
        .and_then(|(_, rest)| rest.get(..17))
        .filter(|t| t.bytes().all(|b| b.is_ascii_digit()))
    else {
        return Ok(false);
    };
    let (objects, _) = table.list_dir(dir).await?;
    Ok(objects.iter().any(|m| {
        let file = m.key.rsplit('/').next().unwrap_or(&m.key);
        file.get(..17)
            .filter(|t| t.bytes().all(|b| b.is_ascii_digit()))
            .is_some_and(|t| t > completion)
    }))
}

/// One locked step's view of the commit record: the version it read when the step began, and
/// the metadata roots whose timelines it commits to.
#[derive(Debug)]
pub struct CommitGate {
    table: Arc<dyn Storage>,
    token: u64,
    state: Mutex<GateState>,
    /// (address of a root's view storage, the root).
    views: Mutex<Vec<(usize, MetaRoot)>>,
    passed: AtomicU64,
}

#[derive(Debug, Clone)]
struct GateState {
    version: Option<Version>,
    seq: u64,
    /// Set once a commit point of this step failed: the step lost the table.
    lost: Option<String>,
    /// The staged content of the last commit point passed, until its target exists.
    staged: Option<String>,
}

fn address(storage: &Arc<dyn Storage>) -> usize {
    Arc::as_ptr(storage) as *const () as usize
}

tokio::task_local! {
    static GATE: Arc<CommitGate>;
}

impl CommitGate {
    /// Enters a locked step of the table stored in `table`: rolls forward an unfinished commit
    /// ([`roll_forward`]) and remembers the record's version. `token` is the fencing token of
    /// the step's lease (recorded with each commit). An unreadable record is replaced by the
    /// first commit point (compare-and-swap on its version).
    pub async fn enter(table: Arc<dyn Storage>, token: u64) -> Result<Arc<CommitGate>> {
        let (version, seq) = match table.get_opt(COMMIT_RECORD_KEY).await? {
            None => (None, 0),
            Some((bytes, meta)) => match CommitRecord::decode(&bytes) {
                Ok(record) => {
                    roll_forward_record(&table, &record).await?;
                    (Some(meta.version), record.seq)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "unreadable commit record; the next commit replaces it");
                    (Some(meta.version), 0)
                }
            },
        };
        Ok(Arc::new(CommitGate {
            table,
            token,
            state: Mutex::new(GateState {
                version,
                seq,
                lost: None,
                staged: None,
            }),
            views: Mutex::new(Vec::new()),
            passed: AtomicU64::new(0),
        }))
    }

    /// Makes completions on the timeline stored in `view` (a root's view of the table, as
    /// [`crate::RootedStorage`] shows it) commit points of this gate. Timelines of other
    /// storages (the metadata table's) complete without it.
    pub fn register(&self, view: &Arc<dyn Storage>, root: MetaRoot) {
        let mut views = match self.views.lock() {
            Ok(v) => v,
            Err(poisoned) => poisoned.into_inner(),
        };
        let a = address(view);
        if !views.iter().any(|(x, _)| *x == a) {
            views.push((a, root));
        }
    }

    /// True if this gate is the one of the table stored in `table` (the same storage handle).
    pub fn is_table(&self, table: &Arc<dyn Storage>) -> bool {
        address(&self.table) == address(table)
    }

    /// How many commit points passed this gate.
    pub fn passed(&self) -> u64 {
        self.passed.load(Ordering::SeqCst)
    }

    fn root_of(&self, view: &Arc<dyn Storage>) -> Option<MetaRoot> {
        let views = match self.views.lock() {
            Ok(v) => v,
            Err(poisoned) => poisoned.into_inner(),
        };
        let a = address(view);
        views.iter().find(|(x, _)| *x == a).map(|(_, r)| r.clone())
    }

    fn state(&self) -> GateState {
        match self.state.lock() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set_state(&self, f: impl FnOnce(&mut GateState)) {
        match self.state.lock() {
            Ok(mut s) => f(&mut s),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Passes the commit point of creating table key `target` with `content`: replaces the
    /// record by compare-and-swap on the version this step read. `pending`: a table key whose
    /// absence later means the commit must not be rolled forward. On success the caller must
    /// create `target` (a failure to do so is rolled forward by the next step); on
    /// [`TimelineError::CommitPointLost`] it must not.
    pub async fn pass(&self, target: &str, pending: Option<&str>, content: &Bytes) -> Result<()> {
        let state = self.state();
        if let Some(reason) = state.lost {
            return Err(TimelineError::CommitPointLost {
                target: target.to_string(),
                reason,
            });
        }
        let seq = state.seq.saturating_add(1);
        let file_name = target.rsplit('/').next().unwrap_or(target);
        let (inline, staged) = if content.len() <= INLINE_LIMIT {
            (
                Some(base64::engine::general_purpose::STANDARD.encode(content)),
                None,
            )
        } else {
            let key = format!("{COMMIT_DIR}/staged/{seq}_{file_name}");
            self.table.put(&key, content.clone()).await?;
            (None, Some(key))
        };
        let record = CommitRecord {
            seq,
            target: target.to_string(),
            pending: pending.map(str::to_string),
            content: inline,
            staged,
            token: self.token,
            at: chrono::Utc::now().to_rfc3339(),
        };
        let data = record.encode()?;
        let result = match &state.version {
            Some(v) => {
                self.table
                    .put_if_match(COMMIT_RECORD_KEY, data.clone(), v)
                    .await
            }
            None => {
                self.table
                    .put_if_absent(COMMIT_RECORD_KEY, data.clone())
                    .await
            }
        };
        let version = match result {
            Ok(v) => v,
            Err(StorageError::PreconditionFailed { .. } | StorageError::AlreadyExists { .. }) => {
                return Err(self.lose(target, "another writer committed since this step began"));
            }
            Err(StorageError::NotFound { .. }) => {
                return Err(self.lose(
                    target,
                    "the commit record was removed since this step began",
                ));
            }
            Err(e) => {
                // The outcome is unknown: the record tells. Ours (same bytes: sequence, target
                // and time) means it took effect.
                match self.table.get_opt(COMMIT_RECORD_KEY).await {
                    Ok(Some((bytes, meta))) if bytes == data => meta.version,
                    Ok(Some((bytes, _))) => {
                        // Replaced again since? Then whoever replaced it rolled ours forward.
                        let ours_landed = CommitRecord::decode(&bytes)
                            .map(|r| r.seq > seq)
                            .unwrap_or(false)
                            && self.table.exists(target).await.unwrap_or(false);
                        if ours_landed {
                            self.set_state(|s| s.lost = Some("the table moved on".into()));
                            self.passed.fetch_add(1, Ordering::SeqCst);
                            return Ok(());
                        }
                        return Err(self.lose(
                            target,
                            &format!("the commit record could not be replaced: {e}"),
                        ));
                    }
                    _ => return Err(e.into()),
                }
            }
        };
        self.set_state(|s| {
            s.version = Some(version);
            s.seq = seq;
            s.staged = record.staged.clone();
        });
        self.passed.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// After the target of the last [`pass`](Self::pass) was created: drops its staged content.
    async fn after_created(&self) {
        let mut staged = None;
        self.set_state(|s| staged = s.staged.take());
        if let Some(key) = staged {
            let _ = self.table.delete(&key).await;
        }
    }

    fn lose(&self, target: &str, reason: &str) -> TimelineError {
        self.set_state(|s| s.lost = Some(reason.to_string()));
        TimelineError::CommitPointLost {
            target: target.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// Runs `fut` with `gate` as the commit gate of every completion it makes on a registered
/// view ([`CommitGate::register`]).
pub async fn scope<F: std::future::Future>(gate: Arc<CommitGate>, fut: F) -> F::Output {
    GATE.scope(gate, fut).await
}

/// The gate of the current task, if it runs inside [`scope`].
pub fn current() -> Option<Arc<CommitGate>> {
    GATE.try_with(Arc::clone).ok()
}

/// The commit point of creating `key` (a key of `view`, a root's view of the table) with
/// `content`: when the current task runs inside a gate's [`scope`] and `view` is registered
/// with it, passes the gate ([`CommitGate::pass`]) and returns `true`; otherwise does nothing
/// and returns `false`. `pending`: a key of `view` that exists while the commit can be rolled
/// forward.
pub async fn pass_for(
    view: &Arc<dyn Storage>,
    key: &str,
    pending: Option<&str>,
    content: &Bytes,
) -> Result<bool> {
    let Some(gate) = current() else {
        return Ok(false);
    };
    let Some(root) = gate.root_of(view) else {
        return Ok(false);
    };
    let target = table_key_of(&root, key);
    let pending = pending.map(|p| table_key_of(&root, p));
    gate.pass(&target, pending.as_deref(), content).await?;
    Ok(true)
}

/// After the file of a passed commit point was created: removes its staged content, if any.
pub async fn created() {
    if let Some(gate) = current() {
        gate.after_created().await;
    }
}

/// The commit point of creating table key `key` (a key of the table itself, not of a root's
/// view: a publication's `_SUCCESS`) with `content` in `table`, then the creation itself
/// (create-if-absent; an existing object with the same content counts as created). Inside a
/// gate's [`scope`] the record is replaced first (`pending`: a table key that exists while
/// the commit may be rolled forward); outside, this is a plain create-if-absent.
pub async fn create_gated(
    table: &Arc<dyn Storage>,
    key: &str,
    pending: Option<&str>,
    content: Bytes,
) -> Result<()> {
    let gate = current().filter(|g| g.is_table(table));
    if let Some(gate) = &gate {
        gate.pass(key, pending, &content).await?;
    }
    match table.put_if_absent(key, content.clone()).await {
        Ok(_) => {}
        Err(StorageError::AlreadyExists { path }) => match table.get_opt(key).await? {
            Some((bytes, _)) if bytes == content => {}
            _ => return Err(StorageError::AlreadyExists { path }.into()),
        },
        Err(e) => return Err(e.into()),
    }
    if let Some(gate) = gate {
        gate.after_created().await;
    }
    Ok(())
}
