//! Loading, creating, recovering and updating `hoodie.properties` on storage, following Java's
//! backup protocol so that a crash at any point leaves a loadable config.

use arbor_storage::{Storage, StorageError, StorageExt};
use bytes::Bytes;

use chrono::Utc;

use super::keys;
use super::table::{invalid, meta_key, TableConfig};
use super::{PROPERTIES_BACKUP_FILE, PROPERTIES_FILE};
use crate::error::{Result, TimelineError};

/// What a load attempt of one file gave.
enum Attempt {
    Missing,
    Loaded(Box<TableConfig>),
    Invalid(TimelineError),
}

impl TableConfig {
    async fn attempt(storage: &dyn Storage, key: &str) -> Result<(Attempt, Option<Bytes>)> {
        match storage.get_opt(key).await? {
            None => Ok((Attempt::Missing, None)),
            Some((bytes, _)) => match TableConfig::parse(&bytes, key) {
                Ok(cfg) => Ok((Attempt::Loaded(Box::new(cfg)), Some(bytes))),
                Err(e) => Ok((Attempt::Invalid(e), Some(bytes))),
            },
        }
    }

    /// True for the errors after which Java falls back to the backup file.
    fn is_recoverable(e: &TimelineError) -> bool {
        matches!(
            e,
            TimelineError::InvalidConfig { .. } | TimelineError::ChecksumMismatch { .. }
        )
    }

    /// Loads `<meta_dir>/hoodie.properties` (`meta_dir` is e.g. `.hoodie` or
    /// `.hoodie/metadata/.hoodie`). Read only: never writes or deletes anything.
    ///
    /// When the file is missing, unreadable as a config (empty, not UTF-8, missing keys,
    /// malformed) or has a wrong checksum, and `hoodie.properties.backup` is a valid config,
    /// the backup is returned (Java's recovery path for an interrupted update). A file without
    /// any checksum is accepted (as Java's reader does) unless a valid backup with a checksum
    /// exists, which then wins (as in Java's `recoverIfNeeded`): Java writes the checksum last,
    /// so such a file may be the torn head of an interrupted rewrite.
    ///
    /// Errors: neither file exists -> `NotATable` naming `<meta_dir>/hoodie.properties`;
    /// otherwise the main file's own error: `InvalidConfig` (with the path and, when one is at
    /// fault, the key), `ChecksumMismatch`, `UnsupportedVersion`; storage failures other than
    /// "not found" are returned as they are, without trying the backup.
    pub async fn load(storage: &dyn Storage, meta_dir: &str) -> Result<TableConfig> {
        let main_key = meta_key(meta_dir, PROPERTIES_FILE);
        let backup_key = meta_key(meta_dir, PROPERTIES_BACKUP_FILE);
        let (main, _) = TableConfig::attempt(storage, &main_key).await?;
        let main_err = match main {
            Attempt::Loaded(cfg) if cfg.checksum().is_some() => return Ok(*cfg),
            Attempt::Loaded(cfg) => {
                // Without a checksum the file may be the torn head of an interrupted rewrite
                // (Java writes the checksum last): a valid backup with a checksum wins, as in
                // Java's recovery.
                return match TableConfig::attempt(storage, &backup_key).await?.0 {
                    Attempt::Loaded(backup) if backup.checksum().is_some() => {
                        tracing::warn!(
                            path = %main_key,
                            "table config has no checksum; using {backup_key}"
                        );
                        Ok(*backup)
                    }
                    _ => Ok(*cfg),
                };
            }
            Attempt::Missing => None,
            Attempt::Invalid(e) if TableConfig::is_recoverable(&e) => Some(e),
            Attempt::Invalid(e) => return Err(e),
        };
        let (backup, _) = TableConfig::attempt(storage, &backup_key).await?;
        match (backup, main_err) {
            (Attempt::Loaded(cfg), e) => {
                tracing::warn!(
                    path = %main_key,
                    error = ?e,
                    "table config unreadable or missing; using {backup_key}"
                );
                Ok(*cfg)
            }
            (_, Some(e)) => Err(e),
            (_, None) => Err(TimelineError::NotATable { path: main_key }),
        }
    }

    /// Creates `<meta_dir>/hoodie.properties` from `config` (with its checksum) if absent.
    ///
    /// Fails with `Storage(AlreadyExists)` naming the path when a config (or a leftover backup
    /// of one) already exists; nothing is overwritten.
    pub async fn create(storage: &dyn Storage, meta_dir: &str, config: &TableConfig) -> Result<()> {
        let main_key = meta_key(meta_dir, PROPERTIES_FILE);
        let backup_key = meta_key(meta_dir, PROPERTIES_BACKUP_FILE);
        if storage.exists(&backup_key).await? {
            return Err(StorageError::AlreadyExists { path: backup_key }.into());
        }
        let text = config.render(Utc::now());
        storage.put_if_absent(&main_key, Bytes::from(text)).await?;
        Ok(())
    }

    /// Repairs the state an interrupted [`update`](Self::update) may leave (Java's
    /// `recoverIfNeeded`): if `hoodie.properties` is missing, invalid, or has no checksum while
    /// the backup is valid with one, the backup's bytes are written back as
    /// `hoodie.properties`; then a leftover backup is deleted. Returns true if anything was changed.
    ///
    /// Errors as [`load`](Self::load) when neither file is a valid config; nothing is deleted
    /// in that case.
    pub async fn recover(storage: &dyn Storage, meta_dir: &str) -> Result<bool> {
        let main_key = meta_key(meta_dir, PROPERTIES_FILE);
        let backup_key = meta_key(meta_dir, PROPERTIES_BACKUP_FILE);
        let (main, _) = TableConfig::attempt(storage, &main_key).await?;
        let (backup, backup_bytes) = TableConfig::attempt(storage, &backup_key).await?;
        let backup_exists = !matches!(backup, Attempt::Missing);
        let backup_has_checksum = matches!(&backup, Attempt::Loaded(b) if b.checksum().is_some());
        match main {
            Attempt::Loaded(cfg) if cfg.checksum().is_some() || !backup_has_checksum => {}
            Attempt::Invalid(e) if !TableConfig::is_recoverable(&e) => return Err(e),
            main => match (backup, backup_bytes) {
                (Attempt::Loaded(_), Some(bytes)) => {
                    storage.put(&main_key, bytes).await?;
                }
                _ => {
                    return Err(match main {
                        Attempt::Invalid(e) => e,
                        _ => TimelineError::NotATable { path: main_key },
                    })
                }
            },
        }
        if backup_exists {
            storage.delete(&backup_key).await?;
        }
        Ok(backup_exists)
    }

    /// Replaces `<meta_dir>/hoodie.properties` with the result of `change` applied to the
    /// current config, returning the new config. Callers serialise updates with the table lock.
    ///
    /// Protocol (Java's, with an atomic put in place of delete-then-create):
    /// 0. [`recover`](Self::recover) from an earlier interrupted update;
    /// 1. read the current file;
    /// 2. write its bytes to `hoodie.properties.backup`;
    /// 3. replace `hoodie.properties` with the new text (fresh checksum), compare-and-swap on
    ///    the version read in 1 (a concurrent change fails with `Storage(PreconditionFailed)`);
    /// 4. read it back and verify the checksum;
    /// 5. delete the backup.
    ///
    /// A crash after any step leaves a config that [`load`](Self::load) reads: the old one
    /// until step 3 is done, the new one after.
    pub async fn update<F>(storage: &dyn Storage, meta_dir: &str, change: F) -> Result<TableConfig>
    where
        F: FnOnce(&mut TableConfig) -> Result<()>,
    {
        let main_key = meta_key(meta_dir, PROPERTIES_FILE);
        let backup_key = meta_key(meta_dir, PROPERTIES_BACKUP_FILE);
        TableConfig::recover(storage, meta_dir).await?;
        let (bytes, meta) = match storage.get(&main_key).await {
            Ok(found) => found,
            Err(e) if e.is_not_found() => return Err(TimelineError::NotATable { path: main_key }),
            Err(e) => return Err(e.into()),
        };
        let current = TableConfig::parse(&bytes, &main_key)?;
        let mut next = current.clone();
        change(&mut next)?;
        let text = next.render(Utc::now());
        // Check the new text before touching anything.
        let expected = TableConfig::parse(text.as_bytes(), &main_key)?;

        storage.put(&backup_key, bytes).await?;
        let new_bytes = Bytes::from(text);
        match storage
            .put_if_match(&main_key, new_bytes.clone(), &meta.version)
            .await
        {
            Ok(_) => {}
            Err(StorageError::NotSupported { .. }) => {
                storage.put(&main_key, new_bytes).await?;
            }
            Err(e) => return Err(e.into()),
        }
        // Hadoop's local file system keeps a checksum beside each file it wrote
        // (`.hoodie.properties.crc`) and verifies it on read: left over from a Java writer, it
        // would make Spark fail on the new bytes. Object stores have none (nothing to delete).
        for name in [PROPERTIES_FILE, PROPERTIES_BACKUP_FILE] {
            let crc = meta_key(meta_dir, &format!(".{name}.crc"));
            match storage.delete(&crc).await {
                Ok(()) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        let (written, _) = storage.get(&main_key).await?;
        let verified = TableConfig::parse(&written, &main_key)?;
        if verified.checksum() != expected.checksum() {
            return Err(invalid(
                &main_key,
                Some(keys::CHECKSUM),
                "read-back after update does not carry the checksum just written; \
                 the backup is kept",
            ));
        }
        storage.delete(&backup_key).await?;
        Ok(verified)
    }
}
