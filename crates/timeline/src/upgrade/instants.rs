//! The active timeline of a table version 6 (layout 1, instant files directly in `.hoodie/`)
//! rewritten in layout 2 (`.hoodie/timeline/`), as Java's `SevenToEightUpgradeHandler` does:
//!
//! - every instant file moves, pending ones included;
//! - a completed instant gets the completion time Java gives it: the **modification time of
//!   its completed file** (`InstantGeneratorV1.createNewInstant`:
//!   `HoodieInstantTimeGenerator.formatDate(new Date(modificationTime))`), formatted as a
//!   17-digit instant time in the table's timeline time zone (`LOCAL`: this process's local
//!   zone, Java's default; `UTC`). Unlike Java, two corrections keep the 0.x commit order
//!   (requested-time order) in layout 2, where readers order commits by completion time: a
//!   modification time earlier than the instant's requested time (a copy that reset times,
//!   a skewed writer) is raised to the requested time, and one not after the previous
//!   completed instant's (files copied or unzipped in another order) is set 1 ms after it;
//! - `commit` and `deltacommit` files (every state) and completed `replacecommit` files are
//!   re-encoded from 0.x JSON to Avro, as layout 2 readers (hudi-rs, Java's V2 serde) expect;
//!   the other files keep their bytes;
//! - a pending `replacecommit` becomes a pending `clustering` (Java's
//!   `SIX_TO_EIGHT_TIMELINE_ACTION_MAP`; completed instants keep their action).
//!
//! Nothing here changes the v6 table: [`plan_layout2_timeline`] reads, [`write_layout2_timeline`]
//! writes only below `.hoodie/timeline/`, which layout-1 readers (arbor, hudi-rs, Java 0.x)
//! never list; [`remove_layout1_instants`] runs once `hoodie.properties` says layout 2.

use std::collections::BTreeSet;

use arbor_storage::{Storage, StorageExt};
use bytes::Bytes;
use chrono::{DateTime, Utc};

use crate::avro::{decode_instant, encode_instant, InstantContent};
use crate::config::TimelineTimezone;
use crate::error::{Result, TimelineError};
use crate::instant::{Action, Instant, InstantTime, State};
use crate::layout::TableLayout;
use crate::naming::{instant_file_name, parse_instant_file_name, LayoutVersion};

/// One instant file of the layout-1 timeline and its layout-2 counterpart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertedInstant {
    /// Key of the layout-1 file (`.hoodie/<t>.<action>[.<state>]`).
    pub source_key: String,
    /// The instant as layout 2 names it (completion time set for completed instants).
    pub instant: Instant,
    /// Key of the layout-2 file (`.hoodie/timeline/<t>[_<c>].<action>[.<state>]`).
    pub target_key: String,
    /// The layout-2 file's bytes.
    pub bytes: Bytes,
}

/// Names in a layout-1 meta directory that are not instant files.
fn is_instant_candidate(name: &str) -> bool {
    !name.ends_with(".crc") && !name.starts_with("hoodie.properties")
}

/// The completion time Java gives a layout-1 completed instant: its file's modification time
/// in `tz`, but never before `requested`.
pub fn completion_time_from_mtime(
    mtime: DateTime<Utc>,
    tz: TimelineTimezone,
    requested: &InstantTime,
) -> Result<InstantTime> {
    let text = match tz {
        TimelineTimezone::Utc => mtime.format("%Y%m%d%H%M%S%3f").to_string(),
        TimelineTimezone::Local => mtime
            .with_timezone(&chrono::Local)
            .format("%Y%m%d%H%M%S%3f")
            .to_string(),
    };
    let t = InstantTime::parse(&text)?;
    Ok(if &t < requested { requested.clone() } else { t })
}

/// Reads the layout-1 timeline in `meta_dir` and returns every instant file converted to
/// layout 2 (see the module doc), ordered by source key. Read only.
///
/// Errors: an instant file whose content cannot be decoded ([`TimelineError::Decode`], naming
/// it), storage failures.
pub async fn plan_layout2_timeline(
    storage: &dyn Storage,
    meta_dir: &str,
    tz: TimelineTimezone,
) -> Result<Vec<ConvertedInstant>> {
    let target = TableLayout::v2(meta_dir);
    let (objects, _dirs) = storage.list_dir(meta_dir).await?;
    let mut found = Vec::new();
    for meta in objects {
        let name = meta.key.rsplit('/').next().unwrap_or(&meta.key).to_string();
        if !is_instant_candidate(&name) {
            continue;
        }
        if let Ok(old) = parse_instant_file_name(&name, LayoutVersion::V1) {
            found.push((meta, old));
        }
    }
    // Completion times in requested-time order (the order of the 0.x timeline), each after
    // the previous one.
    found.sort_by(|a, b| {
        (&a.1.requested_time, a.1.action.name()).cmp(&(&b.1.requested_time, b.1.action.name()))
    });
    let mut previous: Option<InstantTime> = None;
    let mut out = Vec::new();
    for (meta, old) in found {
        let (bytes, _) = storage.get(&meta.key).await?;
        let mut instant = old.clone();
        if instant.state == State::Completed {
            let mut c =
                completion_time_from_mtime(meta.last_modified, tz, &instant.requested_time)?;
            if let Some(p) = &previous {
                if &c <= p {
                    c = one_ms_after(p)?;
                }
            }
            previous = Some(c.clone());
            instant.completion_time = Some(c);
        } else if instant.action == Action::ReplaceCommit {
            instant.action = Action::Clustering;
        }
        let bytes = convert_content(&old, &instant, bytes, &meta.key)?;
        out.push(ConvertedInstant {
            source_key: meta.key.clone(),
            target_key: format!(
                "{}/{}",
                target.timeline_dir,
                instant_file_name(&instant, LayoutVersion::V2)?
            ),
            instant,
            bytes,
        });
    }
    out.sort_by(|a, b| a.source_key.cmp(&b.source_key));
    Ok(out)
}

/// The instant time one millisecond after `t`.
fn one_ms_after(t: &InstantTime) -> Result<InstantTime> {
    let dt = t
        .to_datetime()
        .ok_or_else(|| TimelineError::InvalidInstantTime {
            value: t.to_string(),
            reason: "not a calendar time".to_string(),
        })?;
    Ok(InstantTime::from_datetime(
        dt + chrono::Duration::milliseconds(1),
    ))
}

/// The layout-2 bytes of one file: commit-family metadata re-encoded as Avro, else unchanged.
fn convert_content(old: &Instant, new: &Instant, bytes: Bytes, key: &str) -> Result<Bytes> {
    let reencode = matches!(old.action, Action::Commit | Action::DeltaCommit)
        || (old.action == Action::ReplaceCommit && old.state == State::Completed);
    if !reencode {
        return Ok(bytes);
    }
    let content = decode_instant(old, &bytes, key, true)?;
    let content = match content {
        // An empty completed commit (0.x writes none, but accepts one) becomes empty metadata,
        // as Java reads and rewrites it: hudi-rs cannot read a 0-byte completed file.
        InstantContent::Empty if new.state == State::Completed => {
            InstantContent::Commit(Box::default())
        }
        other => other,
    };
    let encoded = encode_instant(&content).map_err(|e| TimelineError::Upgrade {
        path: key.to_string(),
        reason: format!("cannot re-encode {old} as Avro: {e}"),
    })?;
    Ok(Bytes::from(encoded))
}

/// Writes the converted files into the layout-2 timeline directory (each overwritten, so a
/// retry after a crash rewrites the same bytes) and deletes every other file directly in it
/// (leftovers of an interrupted earlier attempt over a timeline that changed since). Touches
/// nothing outside `<meta_dir>/timeline/` (its `history/` sub-directory is left alone).
pub async fn write_layout2_timeline(
    storage: &dyn Storage,
    meta_dir: &str,
    plan: &[ConvertedInstant],
) -> Result<()> {
    for c in plan {
        storage.put(&c.target_key, c.bytes.clone()).await?;
    }
    let wanted: BTreeSet<&str> = plan.iter().map(|c| c.target_key.as_str()).collect();
    let (objects, _dirs) = storage
        .list_dir(&TableLayout::v2(meta_dir).timeline_dir)
        .await?;
    let stray: Vec<String> = objects
        .into_iter()
        .map(|o| o.key)
        .filter(|k| !wanted.contains(k.as_str()))
        .collect();
    if !stray.is_empty() {
        storage.delete_all(&stray).await?;
    }
    Ok(())
}

/// Deletes the layout-1 instant files directly in `meta_dir` (what an upgrade leaves once
/// `hoodie.properties` says layout 2; layout-2 readers never list them). Returns how many were
/// deleted. Only names that parse as layout-1 instant files are touched.
pub async fn remove_layout1_instants(storage: &dyn Storage, meta_dir: &str) -> Result<usize> {
    let old = layout1_instant_keys(storage, meta_dir).await?;
    if !old.is_empty() {
        storage.delete_all(&old).await?;
    }
    Ok(old.len())
}

/// Keys of the layout-1 instant files directly in `meta_dir`.
pub async fn layout1_instant_keys(storage: &dyn Storage, meta_dir: &str) -> Result<Vec<String>> {
    let (objects, _dirs) = storage.list_dir(meta_dir).await?;
    Ok(objects
        .into_iter()
        .filter(|o| {
            let name = o.key.rsplit('/').next().unwrap_or(&o.key);
            is_instant_candidate(name) && parse_instant_file_name(name, LayoutVersion::V1).is_ok()
        })
        .map(|o| o.key)
        .collect())
}

/// Keys of the files of the 0.x archived timeline (`<meta_dir>/<folder>/`, Hudi log files of
/// `HoodieArchivedMetaEntry` records), recursively.
pub async fn legacy_archive_keys(
    storage: &dyn Storage,
    meta_dir: &str,
    folder: &str,
) -> Result<Vec<String>> {
    let folder = folder.trim().trim_matches('/');
    if folder.is_empty() {
        return Ok(Vec::new());
    }
    Ok(storage
        .list_all(&format!("{meta_dir}/{folder}"))
        .await?
        .into_iter()
        .map(|o| o.key)
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use arbor_storage::ObjectStoreStorage;

    use super::*;

    fn t(s: &str) -> InstantTime {
        InstantTime::parse(s).unwrap()
    }

    #[test]
    fn test_completion_time_is_mtime_in_utc_never_before_requested() {
        let mtime = DateTime::parse_from_rfc3339("2025-03-31T03:06:44.123Z")
            .unwrap()
            .with_timezone(&Utc);
        let c = completion_time_from_mtime(mtime, TimelineTimezone::Utc, &t("20250331030642808"))
            .unwrap();
        assert_eq!(c.as_str(), "20250331030644123");
        let late = t("20250331030645000");
        assert_eq!(
            completion_time_from_mtime(mtime, TimelineTimezone::Utc, &late).unwrap(),
            late
        );
    }

    #[tokio::test]
    async fn test_plan_converts_names_and_json_content() {
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        let json = br#"{"partitionToWriteStats":{},"compacted":false,"extraMetadata":{},"operationType":"UPSERT"}"#;
        for (k, v) in [
            (".hoodie/hoodie.properties", &b"x"[..]),
            (".hoodie/20250331030642808.deltacommit.requested", &b""[..]),
            (".hoodie/20250331030642808.deltacommit.inflight", &json[..]),
            (".hoodie/20250331030642808.deltacommit", &json[..]),
            (
                ".hoodie/20250331030650000.replacecommit.requested",
                &b""[..],
            ),
            (".hoodie/README", &b"not an instant"[..]),
        ] {
            storage.put(k, Bytes::from_static(v)).await.unwrap();
        }
        let plan = plan_layout2_timeline(storage.as_ref(), ".hoodie", TimelineTimezone::Utc)
            .await
            .unwrap();
        assert_eq!(plan.len(), 4);
        let completed = plan
            .iter()
            .find(|c| c.instant.state == State::Completed)
            .unwrap();
        let c = completed.instant.completion_time.clone().unwrap();
        assert!(c >= t("20250331030642808"));
        assert_eq!(
            completed.target_key,
            format!(".hoodie/timeline/20250331030642808_{c}.deltacommit")
        );
        assert!(crate::avro::ocf::has_magic(&completed.bytes), "Avro");
        let decoded = decode_instant(&completed.instant, &completed.bytes, "k", false).unwrap();
        assert!(decoded.as_commit().is_some());
        assert!(plan
            .iter()
            .any(|c| c.target_key == ".hoodie/timeline/20250331030650000.clustering.requested"));
        // Writing twice is idempotent and removes strays; the v6 files stay until removed.
        storage
            .put(
                ".hoodie/timeline/20990101000000000.commit.requested",
                Bytes::new(),
            )
            .await
            .unwrap();
        write_layout2_timeline(storage.as_ref(), ".hoodie", &plan)
            .await
            .unwrap();
        write_layout2_timeline(storage.as_ref(), ".hoodie", &plan)
            .await
            .unwrap();
        let (written, _) = storage.list_dir(".hoodie/timeline").await.unwrap();
        assert_eq!(written.len(), 4);
        assert_eq!(
            remove_layout1_instants(storage.as_ref(), ".hoodie")
                .await
                .unwrap(),
            4
        );
        assert!(storage.exists(".hoodie/hoodie.properties").await.unwrap());
        assert!(storage.exists(".hoodie/README").await.unwrap());
        assert_eq!(written.len(), 4);
    }
}
