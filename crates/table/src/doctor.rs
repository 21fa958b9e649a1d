//! `arbor doctor`'s library: what a table's concurrency state looks like (its clock, its lock,
//! its commit record, its pending instants) and the repairs that are always safe.

use std::time::Duration;

use arbor_storage::{LockState, StorageExt, TABLE_DURABLE_FENCE_DIR, TABLE_LOCK_DIR};
use arbor_timeline::commit_point::{self, RollForward};
use arbor_timeline::generator::SHARED_CLOCK_KEY;
use arbor_timeline::{InstantTime, State};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::Result;
use crate::txn::context::Table;
use crate::txn::transaction::{Entry, Transaction};
use crate::write::commit::{self, LOCK_NAME};

/// The table's clock against this machine's.
#[derive(Debug, Clone, Serialize)]
pub struct ClockReport {
    /// This machine's time, as an instant time.
    pub now: String,
    /// The shared instant clock's value (`None`: missing or unreadable).
    pub shared_clock: Option<String>,
    /// The latest time on the handle's timeline (requested or completion).
    pub timeline_max: Option<String>,
    /// How far the table's clock (the greater of the two) runs ahead of this machine, in
    /// seconds (negative: behind).
    pub ahead_s: i64,
    /// The allowed skew, in seconds.
    pub max_ahead_s: i64,
}

impl ClockReport {
    /// True when writes are refused for the clock ([`crate::TableError`] `ClockAhead`).
    pub fn is_ahead(&self) -> bool {
        self.ahead_s > self.max_ahead_s
    }
}

/// The table lock's stored state.
#[derive(Debug, Clone, Serialize)]
pub struct LockReport {
    /// `free`, `held`, `expired` (a holder's lease lapsed), `missing` or `corrupt`.
    pub state: String,
    /// The holder's owner id, when held or expired.
    pub owner: Option<String>,
    /// The last token handed out (from the state).
    pub token: Option<u64>,
    /// When the holder's lease lapses.
    pub expires_at: Option<String>,
    /// The fencing marks: the lock directory's and the durable one.
    pub marks: Vec<(String, Option<u64>)>,
}

/// One pending instant of the handle's timeline.
#[derive(Debug, Clone, Serialize)]
pub struct PendingReport {
    /// Its time.
    pub instant: String,
    /// Its action.
    pub action: String,
    /// `requested` or `inflight`.
    pub state: String,
    /// Seconds since its writer's last heartbeat (`None`: no heartbeat).
    pub heartbeat_age_s: Option<i64>,
    /// True when it counts as failed (heartbeat missing or older than the timeout): the next
    /// state change rolls it back.
    pub orphaned: bool,
}

/// The last commit point.
#[derive(Debug, Clone, Serialize)]
pub struct CommitReport {
    /// Its sequence number.
    pub seq: u64,
    /// The file it created.
    pub target: String,
    /// True when that file exists (false: the commit is rolled forward by the next state
    /// change, or by `--fix`).
    pub complete: bool,
    /// When it passed.
    pub at: String,
}

/// Everything [`diagnose`] found.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    /// The clock.
    pub clock: ClockReport,
    /// The lock.
    pub lock: LockReport,
    /// The commit record (`None`: no commit point passed yet).
    pub commit: Option<CommitReport>,
    /// Pending instants.
    pub pending: Vec<PendingReport>,
}

impl Diagnosis {
    /// Problems, one line each (empty: healthy).
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.clock.is_ahead() {
            out.push(format!(
                "the table's clock runs {} s ahead of this machine (allowed: {} s): writes are refused",
                self.clock.ahead_s, self.clock.max_ahead_s
            ));
        }
        if matches!(self.lock.state.as_str(), "missing" | "corrupt")
            && self.lock.marks.iter().any(|(_, m)| m.is_some())
        {
            out.push(format!("the table lock's state is {}", self.lock.state));
        }
        if let Some(c) = self.commit.as_ref().filter(|c| !c.complete) {
            out.push(format!(
                "commit {} of {} is not rolled forward yet",
                c.seq, c.target
            ));
        }
        for p in self.pending.iter().filter(|p| p.orphaned) {
            out.push(format!(
                "pending {} {} has no live writer (rolled back by the next state change)",
                p.action, p.instant
            ));
        }
        out
    }
}

fn ms_of(t: &InstantTime) -> Option<i64> {
    t.to_datetime().map(|d| d.timestamp_millis())
}

/// Looks at the handle's table: clock, lock, commit record, pending instants. Reads only.
pub async fn diagnose(table: &Table) -> Result<Diagnosis> {
    let ctx = &table.ctx;
    let now: DateTime<Utc> = ctx.generator.now();
    let shared = match ctx.root_storage.get_opt(SHARED_CLOCK_KEY).await? {
        Some((bytes, _)) => InstantTime::parse(String::from_utf8_lossy(&bytes).trim()).ok(),
        None => None,
    };
    let tl = ctx.timeline().await?;
    let timeline_max = tl.max_time();
    let table_clock = [shared.as_ref(), timeline_max.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(ms_of)
        .max();
    let ahead_s = table_clock.map_or(i64::MIN / 2, |ms| (ms - now.timestamp_millis()) / 1000);
    let clock = ClockReport {
        now: InstantTime::from_datetime(now).to_string(),
        shared_clock: shared.map(|t| t.to_string()),
        timeline_max: timeline_max.map(|t| t.to_string()),
        ahead_s,
        max_ahead_s: i64::try_from(ctx.options.max_clock_ahead.as_secs()).unwrap_or(i64::MAX),
    };

    let state_key = format!("{TABLE_LOCK_DIR}/{LOCK_NAME}.json");
    let mut marks = Vec::new();
    for dir in [TABLE_LOCK_DIR, TABLE_DURABLE_FENCE_DIR] {
        let key = format!("{dir}/{LOCK_NAME}.fence");
        let mark = match ctx.root_storage.get_opt(&key).await? {
            Some((b, _)) => String::from_utf8_lossy(&b).trim().parse::<u64>().ok(),
            None => None,
        };
        marks.push((key, mark));
    }
    let lock = match ctx.root_storage.get_opt(&state_key).await? {
        None => LockReport {
            state: "missing".into(),
            owner: None,
            token: None,
            expires_at: None,
            marks,
        },
        Some((bytes, _)) => match serde_json::from_slice::<LockState>(&bytes) {
            Err(_) => LockReport {
                state: "corrupt".into(),
                owner: None,
                token: None,
                expires_at: None,
                marks,
            },
            Ok(s) => LockReport {
                state: if s.is_held_at(Utc::now()) {
                    "held"
                } else if s.owner.is_some() {
                    "expired"
                } else {
                    "free"
                }
                .into(),
                owner: s.owner.clone(),
                token: Some(s.token),
                expires_at: s.expires_at.map(|e| e.to_rfc3339()),
                marks,
            },
        },
    };

    let commit = match commit_point::read_record(&ctx.root_storage).await {
        Ok(Some((r, _))) => Some(CommitReport {
            seq: r.seq,
            complete: ctx.root_storage.exists(&r.target).await?,
            target: r.target,
            at: r.at,
        }),
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(error = %e, "unreadable commit record");
            None
        }
    };

    let mut pending = Vec::new();
    for i in tl.pending() {
        let key = arbor_timeline::layout::paths::heartbeat_key(&i.requested_time);
        let (age, java) = match ctx.root_storage.get_opt(&key).await? {
            Some((b, meta)) => {
                let (ms, java) = crate::write::commit::last_beat_ms(&b, &meta);
                (Some((Utc::now().timestamp_millis() - ms) / 1000), java)
            }
            None => (None, false),
        };
        let is_write = matches!(
            i.action,
            arbor_timeline::Action::Commit
                | arbor_timeline::Action::DeltaCommit
                | arbor_timeline::Action::ReplaceCommit
        );
        let window = if java {
            crate::write::commit::java_heartbeat_window(ctx.options.heartbeat_timeout)
        } else {
            ctx.options.heartbeat_timeout
        };
        let timeout = i64::try_from(window.as_secs()).unwrap_or(i64::MAX);
        pending.push(PendingReport {
            instant: i.requested_time.to_string(),
            action: i.action.name().to_string(),
            state: if i.state == State::Requested {
                "requested"
            } else {
                "inflight"
            }
            .into(),
            heartbeat_age_s: age,
            orphaned: is_write && age.is_none_or(|a| a > timeout),
        });
    }
    Ok(Diagnosis {
        clock,
        lock,
        commit,
        pending,
    })
}

/// What [`repair`] did, one line each.
pub type Repairs = Vec<String>;

/// Repairs what is always safe to repair: a shared clock file ahead of this machine while the
/// timeline is not is set back to the timeline's latest time; the last commit is rolled
/// forward; a missing or corrupt lock state is rebuilt (by taking and releasing the lock, with
/// a greater token); failed writes are rolled back (one locked step). This handle's instant
/// time generator forgets the far time; other processes that saw it refuse writes (with
/// `ClockAhead`) until they reopen the table. A timeline whose instants
/// themselves are ahead cannot be set back: that is reported as an error-free note.
pub async fn repair(table: &Table) -> Result<Repairs> {
    let ctx = &table.ctx;
    let mut done = Vec::new();
    let before = diagnose(table).await?;
    if before.clock.is_ahead() {
        let now_ms = ctx.generator.now().timestamp_millis();
        let max_ahead_ms =
            i64::try_from(ctx.options.max_clock_ahead.as_millis()).unwrap_or(i64::MAX);
        let timeline_ok = before
            .clock
            .timeline_max
            .as_deref()
            .and_then(|t| InstantTime::parse(t).ok())
            .and_then(|t| ms_of(&t))
            .is_none_or(|ms| ms - now_ms <= max_ahead_ms);
        if timeline_ok {
            let back = before
                .clock
                .timeline_max
                .clone()
                .unwrap_or_else(|| before.clock.now.clone());
            if let Some((_, meta)) = ctx.root_storage.get_opt(SHARED_CLOCK_KEY).await? {
                ctx.root_storage
                    .put_if_match(SHARED_CLOCK_KEY, Bytes::from(back.clone()), &meta.version)
                    .await?;
                // This handle observed the far time: forget it too (other processes that saw
                // it refuse writes until they reopen the table).
                if let Ok(t) = InstantTime::parse(&back) {
                    ctx.generator.reset_floor(&t);
                }
                done.push(format!(
                    "set the table's clock back from {} to {back} (the timeline's latest time)",
                    before.clock.shared_clock.unwrap_or_default()
                ));
            }
        } else {
            done.push(format!(
                "the timeline itself has times up to {} ({} s ahead): writes resume once this \
                 machine's clock is within {} s of it; fix the clock of the writer that wrote \
                 them",
                before.clock.timeline_max.unwrap_or_default(),
                before.clock.ahead_s,
                before.clock.max_ahead_s
            ));
        }
    }
    if let RollForward::RolledForward { target } =
        commit_point::roll_forward(&ctx.root_storage).await?
    {
        done.push(format!("rolled forward the last commit ({target})"));
    }
    if matches!(before.lock.state.as_str(), "missing" | "corrupt") {
        let lock = ctx.lock_provider();
        let lease = commit::acquire(lock.as_ref(), Duration::from_secs(30)).await?;
        commit::release(lock.as_ref(), &lease, Ok(())).await?;
        done.push(format!(
            "rebuilt the {} table lock state (token {})",
            before.lock.state, lease.token
        ));
    }
    if before.pending.iter().any(|p| p.orphaned) && !diagnose(table).await?.clock.is_ahead() {
        // A service step: `Entry::Begin` would roll them back before `work` could say which.
        let rolled = Transaction::run(table, Entry::Service, |txn| async move {
            txn.rollback_failed().await
        })
        .await?;
        for t in rolled {
            done.push(format!("rolled back failed write {t}"));
        }
    }
    Ok(done)
}
