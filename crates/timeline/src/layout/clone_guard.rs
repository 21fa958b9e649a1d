//! The legacy-reader guard of an active shallow clone (`docs/clones.md`, "What other engines
//! see").
//!
//! A shallow clone's data files and metadata-table base files stay in its sources, where only
//! arbor ([`super::ClonedStorage`]) finds them. A Hudi reader that knows nothing of clones lists
//! the clone's own directory: hudi-rs 0.5.0 merges the clone's own metadata-table log files
//! without the base file (which is in the source), finds no file slice, and reads **0 rows with
//! no error**; a table the clone partly rewrote would read only the rewritten file groups. To
//! make every such reader fail instead, the clone's root `hoodie.properties` (and its transient
//! backup) carries a table type no engine knows, [`GUARDED_TABLE_TYPE`], with the real type
//! kept under [`REAL_TABLE_TYPE_KEY`]:
//!
//! - hudi-rs refuses to open the table: `Config error: Config value
//!   'arbor_shallow_clone__read_with_arbor_or_run_arbor_clone_detach' is not valid`;
//! - Java Hudi's `HoodieTableMetaClient` reads the table type right after loading the config
//!   (`HoodieTableType.valueOf`) and fails with `IllegalArgumentException: No enum constant
//!   org.apache.hudi.common.model.HoodieTableType.ARBOR_SHALLOW_CLONE__...` (Spark, Flink,
//!   Hive, Trino and Presto all open a table through it). The checksum (database and table name
//!   only) stays valid, so Java does not fall back to the backup file.
//!
//! arbor never sees the guard: [`super::ClonedStorage`] removes it from every
//! `hoodie.properties` it reads ([`unguard`]) and adds it to every root config it writes
//! ([`guard`]). Creation guards the clone before it is activated; `detach` removes the guard
//! once the clone holds every file it reads, before the clone is switched to `detached`.

use arbor_storage::{Storage, StorageError, StorageExt};
use bytes::Bytes;

use super::paths::DEFAULT_META_DIR;
use crate::config::{keys, Properties, PROPERTIES_BACKUP_FILE, PROPERTIES_FILE};
use crate::error::Result;

/// `hoodie.table.type` in the root `hoodie.properties` of an active shallow clone: no Hudi
/// engine knows it, so every legacy reader (and writer) refuses the table, naming it.
pub const GUARDED_TABLE_TYPE: &str =
    "ARBOR_SHALLOW_CLONE__READ_WITH_ARBOR_OR_RUN_ARBOR_CLONE_DETACH";

/// The key holding a guarded clone's real table type.
pub const REAL_TABLE_TYPE_KEY: &str = "arbor.clone.table.type";

/// How often [`guard_location`] and [`unguard_location`] retry a compare-and-swap that lost a
/// race with a concurrent config update.
const ATTEMPTS: usize = 5;

/// True for the keys the guard is written into: the root data-side `hoodie.properties` and
/// its backup (the files legacy readers load).
pub fn is_guarded_key(key: &str) -> bool {
    key == format!("{DEFAULT_META_DIR}/{PROPERTIES_FILE}")
        || key == format!("{DEFAULT_META_DIR}/{PROPERTIES_BACKUP_FILE}")
}

/// True for every `hoodie.properties` or `hoodie.properties.backup` key (reads remove the guard
/// wherever a copy of a guarded file ended up).
pub fn is_properties_key(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    name == PROPERTIES_FILE || name == PROPERTIES_BACKUP_FILE
}

/// The comment lines of `text` (without their `#`/`!`), to keep them on a rewrite.
fn comments(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim_start)
        .filter_map(|l| l.strip_prefix('#').or_else(|| l.strip_prefix('!')))
        .filter(|c| c.is_ascii() && !c.contains('\r'))
        .collect()
}

/// The parsed properties of `bytes`, when they are UTF-8 `java.util.Properties` text.
fn parse(bytes: &[u8]) -> Option<(&str, Properties)> {
    let text = std::str::from_utf8(bytes).ok()?;
    Some((text, Properties::parse(text).ok()?))
}

/// True when `bytes` is a config carrying the guard.
pub fn is_guarded(bytes: &[u8]) -> bool {
    parse(bytes).is_some_and(|(_, p)| p.get(keys::TYPE).map(str::trim) == Some(GUARDED_TABLE_TYPE))
}

/// `bytes` (a `hoodie.properties` text) with the guard: the table type moved to
/// [`REAL_TABLE_TYPE_KEY`] and [`GUARDED_TABLE_TYPE`] in its place; every other entry and the
/// comment lines kept. `None` when nothing changes: already guarded, or not a config with a
/// table type (left for the reader to report).
pub fn guard(bytes: &[u8]) -> Option<Bytes> {
    let (text, mut props) = parse(bytes)?;
    let real = props.get(keys::TYPE)?.trim().to_string();
    if real == GUARDED_TABLE_TYPE || real.is_empty() {
        return None;
    }
    props.set(keys::TYPE, GUARDED_TABLE_TYPE);
    props.set(REAL_TABLE_TYPE_KEY, real);
    Some(Bytes::from(props.render(&comments(text))))
}

/// `bytes` without the guard: the real table type back in `hoodie.table.type` and
/// [`REAL_TABLE_TYPE_KEY`] removed. `None` when nothing changes (not guarded, or guarded
/// without a real type: left for the reader to report the unknown table type).
pub fn unguard(bytes: &[u8]) -> Option<Bytes> {
    let (text, mut props) = parse(bytes)?;
    if props.get(keys::TYPE).map(str::trim) != Some(GUARDED_TABLE_TYPE) {
        return None;
    }
    let real = props.get(REAL_TABLE_TYPE_KEY)?.trim().to_string();
    props.set(keys::TYPE, real);
    props.remove(REAL_TABLE_TYPE_KEY);
    Some(Bytes::from(props.render(&comments(text))))
}

/// Applies `change` to the guarded keys of `own` (a clone's own location, not its
/// `ClonedStorage`), each by compare-and-swap. Returns how many files changed.
async fn rewrite(own: &dyn Storage, change: fn(&[u8]) -> Option<Bytes>) -> Result<usize> {
    let mut changed = 0;
    for file in [PROPERTIES_FILE, PROPERTIES_BACKUP_FILE] {
        let key = format!("{DEFAULT_META_DIR}/{file}");
        for attempt in 1..=ATTEMPTS {
            let Some((bytes, meta)) = own.get_opt(&key).await? else {
                break;
            };
            let Some(next) = change(&bytes) else {
                break;
            };
            match own.put_if_match(&key, next.clone(), &meta.version).await {
                Ok(_) => {
                    changed += 1;
                    break;
                }
                Err(StorageError::NotSupported { .. }) => {
                    own.put(&key, next).await?;
                    changed += 1;
                    break;
                }
                Err(StorageError::PreconditionFailed { .. }) if attempt < ATTEMPTS => continue,
                Err(StorageError::NotFound { .. }) => break,
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(changed)
}

/// Guards the root config of the clone whose own location is `own` (idempotent). Returns how
/// many files (`hoodie.properties`, its backup) it changed.
pub async fn guard_location(own: &dyn Storage) -> Result<usize> {
    rewrite(own, guard).await
}

/// Removes the guard from the root config of the clone whose own location is `own`
/// (idempotent): every Hudi reader opens it again. Returns how many files it changed.
pub async fn unguard_location(own: &dyn Storage) -> Result<usize> {
    rewrite(own, unguard).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use arbor_storage::ObjectStoreStorage;

    use super::*;
    use crate::config::{TableConfig, TableType};

    fn config_text() -> String {
        let config = TableConfig::new_v8("t", TableType::MergeOnRead).unwrap();
        config.render(chrono::Utc::now())
    }

    #[test]
    fn test_guard_round_trips_and_hides_the_type_from_other_readers() {
        let text = config_text();
        let guarded = guard(text.as_bytes()).unwrap();
        assert!(is_guarded(&guarded));
        let g = std::str::from_utf8(&guarded).unwrap();
        assert!(
            g.contains(&format!("hoodie.table.type={GUARDED_TABLE_TYPE}")),
            "{g}"
        );
        assert!(g.contains("arbor.clone.table.type=MERGE_ON_READ"), "{g}");
        // arbor's own parser refuses the guarded text (so only unguarded text ever reaches it).
        assert!(TableConfig::parse(&guarded, "p").is_err());
        // Idempotent.
        assert!(guard(&guarded).is_none());
        let back = unguard(&guarded).unwrap();
        assert!(!is_guarded(&back));
        assert!(unguard(&back).is_none());
        let before = TableConfig::parse(text.as_bytes(), "p").unwrap();
        let after = TableConfig::parse(&back, "p").unwrap();
        assert_eq!(before.properties(), after.properties());
        assert_eq!(after.table_type(), TableType::MergeOnRead);
        // The comment lines stay.
        let first = text.lines().next().unwrap();
        assert!(std::str::from_utf8(&back).unwrap().starts_with(first));
        // Not a config: untouched.
        assert!(guard(b"\xff\xfe").is_none());
        assert!(guard(b"a=b").is_none());
    }

    #[tokio::test]
    async fn test_guard_location_touches_only_the_root_config_and_its_backup() {
        let s: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        let text = Bytes::from(config_text());
        for key in [
            ".hoodie/hoodie.properties",
            ".hoodie/hoodie.properties.backup",
            ".hoodie/metadata/.hoodie/hoodie.properties",
        ] {
            s.put(key, text.clone()).await.unwrap();
        }
        assert_eq!(guard_location(s.as_ref()).await.unwrap(), 2);
        assert_eq!(guard_location(s.as_ref()).await.unwrap(), 0);
        for (key, guarded) in [
            (".hoodie/hoodie.properties", true),
            (".hoodie/hoodie.properties.backup", true),
            (".hoodie/metadata/.hoodie/hoodie.properties", false),
        ] {
            let (b, _) = s.get(key).await.unwrap();
            assert_eq!(is_guarded(&b), guarded, "{key}");
        }
        assert_eq!(unguard_location(s.as_ref()).await.unwrap(), 2);
        let (b, _) = s.get(".hoodie/hoodie.properties").await.unwrap();
        assert!(TableConfig::parse(&b, "p").is_ok());
        assert!(is_guarded_key(".hoodie/hoodie.properties"));
        assert!(!is_guarded_key(".hoodie/branches/b/hoodie.properties"));
        assert!(is_properties_key(".hoodie/branches/b/hoodie.properties"));
        assert!(!is_properties_key(".hoodie/timeline/x.commit"));
    }
}
