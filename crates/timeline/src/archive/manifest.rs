//! The snapshot files of the LSM timeline: `manifest_<N>` (the valid data files of snapshot `N`)
//! and `_version_` (the number of the current snapshot).
//!
//! A manifest is JSON `{"files":[{"fileName":"<min>_<max>_<level>.parquet","fileLen":<bytes>}]}`
//! (Java's `HoodieLSMTimelineManifest`). `_version_` holds the decimal text of `N`. Readers take
//! `N` from `_version_` and fall back to the highest `manifest_<N>` present when `_version_` is
//! missing or unreadable.
//!
//! A new snapshot is committed by creating `manifest_<N+1>` with create-if-absent, where `N` is
//! the highest snapshot number seen (in `_version_` or among the manifest files, so an orphan
//! manifest left by a crashed attempt is never overwritten), then rewriting `_version_`. Until
//! `_version_` is rewritten readers keep seeing the previous snapshot (except on a table whose
//! `_version_` was never written, where the fallback already sees the new manifest; both are
//! consistent states).

use std::collections::BTreeSet;

use arbor_storage::{Storage, StorageError, StorageExt};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::{Result, TimelineError};

/// Name of the file holding the current snapshot number.
pub const VERSION_FILE: &str = "_version_";

/// Prefix of the manifest files (`manifest_<N>`).
pub const MANIFEST_PREFIX: &str = "manifest_";

/// One data file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// The data file's name (not key) inside the history directory.
    #[serde(rename = "fileName")]
    pub file_name: String,
    /// Its length in bytes.
    #[serde(rename = "fileLen")]
    pub file_len: u64,
}

/// The valid data files of one snapshot of the LSM timeline.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The files, in the order they were added.
    pub files: Vec<ManifestEntry>,
}

impl Manifest {
    /// Parses a manifest's JSON; `path` names the file in the error.
    pub fn from_json(path: &str, bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| TimelineError::Archive {
            path: path.to_string(),
            reason: format!("invalid manifest JSON: {e}"),
        })
    }

    /// The manifest as JSON bytes.
    pub fn to_json(&self) -> Result<Bytes> {
        serde_json::to_vec(self)
            .map(Bytes::from)
            .map_err(|e| TimelineError::Encode {
                what: "LSM timeline manifest".into(),
                reason: e.to_string(),
            })
    }

    /// True if a file of that name is in the manifest.
    pub fn contains(&self, file_name: &str) -> bool {
        self.files.iter().any(|f| f.file_name == file_name)
    }

    /// The file names.
    pub fn file_names(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(|f| f.file_name.as_str())
    }
}

/// The snapshot number of a manifest file name (`manifest_12` -> 12); `None` for other names
/// (including Java's `manifest_<N>.tmp`).
pub fn manifest_version(file_name: &str) -> Option<u32> {
    let digits = file_name.strip_prefix(MANIFEST_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Key of `manifest_<version>` in `history_dir`.
pub fn manifest_key(history_dir: &str, version: u32) -> String {
    format!("{history_dir}/{MANIFEST_PREFIX}{version}")
}

/// Key of `_version_` in `history_dir`.
pub fn version_key(history_dir: &str) -> String {
    format!("{history_dir}/{VERSION_FILE}")
}

/// The current snapshot of an LSM timeline as read from storage, with what the directory holds
/// besides it (needed to pick the next snapshot number and to clean up).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The history directory (key relative to the table base).
    pub history_dir: String,
    /// The current snapshot number; `None` when the timeline has no snapshot yet.
    pub version: Option<u32>,
    /// The number stored in `_version_`, when that file exists and parses.
    pub version_file: Option<u32>,
    /// The files of the current snapshot (empty when `version` is `None`).
    pub manifest: Manifest,
    /// Every `manifest_<N>` number present, ascending.
    pub manifest_versions: BTreeSet<u32>,
    /// Every other file name in the directory (data files, strays), ascending.
    pub other_files: BTreeSet<String>,
}

impl Snapshot {
    /// Reads the current snapshot of the LSM timeline in `history_dir`.
    ///
    /// The snapshot number comes from `_version_`; when that file is missing, does not parse, or
    /// names a manifest that does not exist, from the highest `manifest_<N>` present. A manifest
    /// that exists but does not parse is an error ([`TimelineError::Archive`]).
    pub async fn load(storage: &dyn Storage, history_dir: &str) -> Result<Self> {
        let (objects, _dirs) = storage.list_dir(history_dir).await?;
        let mut snap = Snapshot {
            history_dir: history_dir.to_string(),
            ..Snapshot::default()
        };
        let mut has_version_file = false;
        for meta in objects {
            let name = meta.key.rsplit('/').next().unwrap_or(&meta.key);
            if name == VERSION_FILE {
                has_version_file = true;
            } else if let Some(v) = manifest_version(name) {
                snap.manifest_versions.insert(v);
            } else {
                snap.other_files.insert(name.to_string());
            }
        }
        if has_version_file {
            let key = version_key(history_dir);
            if let Some((bytes, _)) = storage.get_opt(&key).await? {
                let parsed = std::str::from_utf8(&bytes)
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok());
                if parsed.is_none() {
                    tracing::warn!(file = %key, "unreadable LSM timeline version file, falling back to the manifests");
                }
                snap.version_file = parsed;
            }
        }
        snap.version = match snap.version_file {
            Some(v) if snap.manifest_versions.contains(&v) => Some(v),
            _ => snap.manifest_versions.last().copied(),
        };
        if let Some(v) = snap.version {
            let key = manifest_key(history_dir, v);
            let bytes = match storage.get(&key).await {
                Ok((bytes, _)) => bytes,
                Err(StorageError::NotFound { .. }) => {
                    return Err(TimelineError::Archive {
                        path: key,
                        reason: "the current manifest disappeared while reading".into(),
                    })
                }
                Err(e) => return Err(e.into()),
            };
            snap.manifest = Manifest::from_json(&key, &bytes)?;
        }
        Ok(snap)
    }

    /// The number the next snapshot gets: one more than every snapshot number seen.
    pub fn next_version(&self) -> u32 {
        let highest = [
            self.version,
            self.version_file,
            self.manifest_versions.last().copied(),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0);
        highest.saturating_add(1)
    }

    /// Makes `manifest` the current snapshot: creates `manifest_<next>` if absent, then rewrites
    /// `_version_`. Updates `self` to the new snapshot and returns its number.
    ///
    /// Fails with [`TimelineError::Archive`] if the manifest file already exists (another
    /// archiver is running: archival must be serialised by the table lock).
    pub async fn commit(&mut self, storage: &dyn Storage, manifest: Manifest) -> Result<u32> {
        let version = self.next_version();
        let key = manifest_key(&self.history_dir, version);
        match storage.put_if_absent(&key, manifest.to_json()?).await {
            Ok(_) => {}
            Err(StorageError::AlreadyExists { path }) => {
                return Err(TimelineError::Archive {
                    path,
                    reason: "manifest already exists: is another archiver running?".into(),
                })
            }
            Err(e) => return Err(e.into()),
        }
        self.manifest_versions.insert(version);
        storage
            .put(
                &version_key(&self.history_dir),
                Bytes::from(version.to_string()),
            )
            .await?;
        self.version = Some(version);
        self.version_file = Some(version);
        self.manifest = manifest;
        Ok(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_manifest_json_round_trip_uses_java_field_names() {
        let m = Manifest {
            files: vec![ManifestEntry {
                file_name: "20250101000000000_20250101000001000_0.parquet".into(),
                file_len: 1234,
            }],
        };
        let json = m.to_json().unwrap();
        assert_eq!(
            std::str::from_utf8(&json).unwrap(),
            r#"{"files":[{"fileName":"20250101000000000_20250101000001000_0.parquet","fileLen":1234}]}"#
        );
        assert_eq!(Manifest::from_json("m", &json).unwrap(), m);
    }

    #[test]
    fn test_manifest_from_json_garbage_fails_with_path() {
        let err = Manifest::from_json("h/manifest_3", b"{not json").unwrap_err();
        assert!(err.to_string().contains("h/manifest_3"), "{err}");
    }

    #[test]
    fn test_manifest_version_parses_only_plain_numbers() {
        assert_eq!(manifest_version("manifest_1"), Some(1));
        assert_eq!(manifest_version("manifest_42"), Some(42));
        assert_eq!(manifest_version("manifest_"), None);
        assert_eq!(manifest_version("manifest_3.tmp"), None);
        assert_eq!(manifest_version("_version_"), None);
        assert_eq!(manifest_version("x_1_0.parquet"), None);
    }

    #[test]
    fn test_next_version_exceeds_every_seen_number() {
        let mut s = Snapshot::default();
        assert_eq!(s.next_version(), 1);
        s.version = Some(2);
        s.version_file = Some(2);
        s.manifest_versions = [1, 2, 5].into_iter().collect();
        assert_eq!(s.next_version(), 6);
        s.manifest_versions = [1].into_iter().collect();
        assert_eq!(s.next_version(), 3);
    }
}
