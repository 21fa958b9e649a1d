//! Which MDT log blocks a reader may use (spec §6.5, hudi-rs 0.5.0 `valid_instant_timestamps`,
//! Java `HoodieTableMetadataUtil.getValidInstantTimestamps`).
//!
//! A log block of the MDT is used only if its `INSTANT_TIME` is in the valid set:
//! 1. every completed data `commit`, `deltacommit` and `replacecommit` of the active timeline;
//! 2. every completed MDT `deltacommit` whose time is not pending on the data timeline (any
//!    action) — this is what makes the MDT write invisible until the data instant completes;
//! 3. every completed MDT instant of the sentinel times `00000000000000000…` (initialisation);
//! 4. every instant rolled back by a completed data rollback or restore newer than the earliest
//!    instant of 1–3;
//! 5. every completed MDT rollback and restore.

use std::collections::BTreeSet;

use arbor_timeline::avro::{
    decode, HoodieRestoreMetadata, HoodieRollbackMetadata, HoodieRollbackPlan,
};
use arbor_timeline::{Action, ActiveTimeline, InstantTime, State};

use crate::error::Result;

/// The instant-time prefix of MDT instants written outside the data timeline (initialisation
/// of a partition: `00000000000000000` for FILES, `...001`, `...002` for later partitions).
/// hudi-rs 0.5.0 and Java test `startsWith` against these 14 zeros.
pub const SOLO_COMMIT_TIMESTAMP: &str = "00000000000000";

/// The MDT instant that initialises the FILES partition.
pub const FILES_INIT_INSTANT: &str = "00000000000000000";

/// True for MDT instants written outside the data timeline ([`SOLO_COMMIT_TIMESTAMP`] prefix).
pub fn is_init_instant(t: &InstantTime) -> bool {
    t.as_str().starts_with(SOLO_COMMIT_TIMESTAMP)
}

/// The set of instant times whose MDT log blocks are valid, computed from the data table's
/// active timeline and the MDT's active timeline as described in the module doc.
pub async fn valid_instants(
    data: &ActiveTimeline,
    mdt: &ActiveTimeline,
) -> Result<BTreeSet<InstantTime>> {
    let mut valid: BTreeSet<InstantTime> = data
        .completed_writes()
        .into_iter()
        .map(|i| i.requested_time)
        .collect();
    let data_pending: BTreeSet<InstantTime> = data
        .pending()
        .into_iter()
        .map(|i| i.requested_time)
        .collect();
    for i in mdt.completed() {
        let t = i.requested_time;
        if i.action == Action::DeltaCommit && !data_pending.contains(&t) {
            valid.insert(t.clone());
        }
        if is_init_instant(&t) {
            valid.insert(t);
        }
    }
    let earliest = valid
        .iter()
        .next()
        .cloned()
        .map_or_else(|| FILES_INIT_INSTANT.to_string(), |t| t.to_string());
    for r in data.filter(&[Action::Rollback, Action::Restore], &[State::Completed]) {
        if r.requested_time.as_str() <= earliest.as_str() {
            continue;
        }
        for t in rolled_back_by(data, &r).await? {
            if let Ok(t) = InstantTime::parse(&t) {
                valid.insert(t);
            }
        }
    }
    for r in mdt.filter(&[Action::Rollback, Action::Restore], &[State::Completed]) {
        valid.insert(r.requested_time);
    }
    Ok(valid)
}

/// The instant times a completed rollback or restore rolled back (a rollback whose completed
/// file names none falls back to its plan, as Java and hudi-rs do).
async fn rolled_back_by(
    tl: &ActiveTimeline,
    instant: &arbor_timeline::Instant,
) -> Result<Vec<String>> {
    let key = tl.key_of(instant)?;
    let bytes = tl.read(instant).await?;
    if instant.action == Action::Restore {
        let m: HoodieRestoreMetadata = decode(&bytes, &key)?;
        let mut out = m.instants_to_rollback.clone();
        for list in m.hoodie_restore_metadata.values() {
            for r in list.iter().flatten() {
                out.extend(r.commits_rollback.iter().cloned());
            }
        }
        return Ok(out);
    }
    let from_metadata = if bytes.is_empty() {
        Vec::new()
    } else {
        match decode::<HoodieRollbackMetadata>(&bytes, &key) {
            Ok(m) => m.commits_rollback,
            Err(e) => {
                tracing::warn!(path = %key, error = %e, "unreadable rollback metadata; reading its plan");
                Vec::new()
            }
        }
    };
    if !from_metadata.is_empty() {
        return Ok(from_metadata);
    }
    let requested = instant.with_state(State::Requested);
    let key = tl.key_of(&requested)?;
    let plan: HoodieRollbackPlan = decode(&tl.read(&requested).await?, &key)?;
    Ok(plan
        .instant_to_rollback
        .map(|i| vec![i.commit_time])
        .unwrap_or_default())
}
