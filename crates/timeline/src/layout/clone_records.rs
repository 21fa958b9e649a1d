//! What a shallow clone records on both sides: the clone's descriptor (`.hoodie/clone.json` in
//! the clone's own location: its id, state and the locations it reads files from) and a
//! source's pins (`.hoodie/.clones/<id>.json`, one per clone that references its files).
//!
//! Both are small JSON documents, written create-if-absent or compare-and-swap; the rule that
//! maps a file to the location holding it is in [`super::clone_rule`], the storage that applies
//! it in [`super::clone_storage`]. `docs/clones.md` describes the whole design.

use arbor_storage::{Storage, StorageError, StorageExt, Version};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::{Result, TimelineError};
use crate::instant::InstantTime;

/// The clone descriptor's key in the clone's own location (never redirected to a branch: every
/// root of a clone reads the same sources).
pub const CLONE_FILE: &str = ".hoodie/clone.json";
/// Where a source table keeps the pins of its clones (shared by every root of the source).
pub const PINS_DIR: &str = ".hoodie/.clones";

/// The key of the pin of clone `clone_id` in a source table.
pub fn pin_key(clone_id: &str) -> String {
    format!("{PINS_DIR}/{clone_id}.json")
}

/// Where a clone is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CloneState {
    /// Being created: its metadata may be incomplete; it cannot be opened. Written first, so it
    /// reserves the location; a retry of the same clone resumes it.
    Creating,
    /// A shallow clone: files it did not write are read from its sources.
    Active,
    /// Self-contained (detached, or a finished deep clone): every file it references is in its
    /// own location; `sources` stays as the record of the pins to remove.
    Detached,
}

/// One location a clone reads files from, with the instant it references there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloneSource {
    /// The source table's location (an absolute path or a URL).
    pub location: String,
    /// The instant whose snapshot the clone references in that table (its clone point there).
    pub instant: String,
    /// The root of the source the snapshot belongs to: `main` or a working branch's name.
    pub root: String,
    /// How the snapshot was named when cloning: `tag:<t>`, `branch:<b>`, `instant:<i>` or
    /// `main`.
    pub reference: String,
}

impl CloneSource {
    /// The referenced instant, parsed.
    pub fn instant_time(&self) -> Result<InstantTime> {
        InstantTime::parse(&self.instant)
    }
}

/// The descriptor of a clone (`.hoodie/clone.json` in its own location).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloneDescriptor {
    /// The clone's id, unique across every table (the name of its pins).
    pub id: String,
    /// Where the clone is in its life.
    pub state: CloneState,
    /// True for a deep clone (its files were copied at creation).
    #[serde(default)]
    pub deep: bool,
    /// When the clone was created (RFC 3339, UTC).
    pub created: String,
    /// The locations the clone reads files from, nearest first: its direct source, then that
    /// table's source, ... Their instants never increase along the list (a clone is never
    /// made at an instant before its source's own clone point).
    pub sources: Vec<CloneSource>,
}

impl CloneDescriptor {
    /// The instant the clone was made at (its direct source's instant): the clone's own
    /// instants are all later.
    pub fn clone_point(&self) -> Result<Option<InstantTime>> {
        self.sources
            .first()
            .map(CloneSource::instant_time)
            .transpose()
    }

    /// The JSON stored in [`CLONE_FILE`].
    pub fn to_bytes(&self) -> Result<Bytes> {
        serde_json::to_vec_pretty(self)
            .map(Bytes::from)
            .map_err(|e| TimelineError::Encode {
                what: CLONE_FILE.to_string(),
                reason: e.to_string(),
            })
    }

    /// Parses [`CLONE_FILE`]'s content, checking the sources' instants and their order.
    pub fn from_bytes(data: &[u8]) -> Result<Self> {
        let d: CloneDescriptor =
            serde_json::from_slice(data).map_err(|e| TimelineError::decode(CLONE_FILE, e))?;
        let mut last: Option<InstantTime> = None;
        for s in &d.sources {
            let t = s.instant_time()?;
            if last.as_ref().is_some_and(|l| t > *l) {
                return Err(TimelineError::decode(
                    CLONE_FILE,
                    format!(
                        "source {} at {t} is later than the nearer source's instant",
                        s.location
                    ),
                ));
            }
            last = Some(t);
        }
        if d.state == CloneState::Active && d.sources.is_empty() {
            return Err(TimelineError::decode(
                CLONE_FILE,
                "an active clone lists no source",
            ));
        }
        Ok(d)
    }

    /// The descriptor stored in `own` (a table's own location) and its version, or `None` for
    /// a table that is not a clone.
    pub async fn load(own: &dyn Storage) -> Result<Option<(Self, Version)>> {
        match own.get_opt(CLONE_FILE).await? {
            None => Ok(None),
            Some((data, meta)) => Ok(Some((Self::from_bytes(&data)?, meta.version))),
        }
    }

    /// Stores a new descriptor in `own`, create-if-absent (`AlreadyExists` when the location
    /// already holds a clone).
    pub async fn create(&self, own: &dyn Storage) -> Result<Version> {
        Ok(own.put_if_absent(CLONE_FILE, self.to_bytes()?).await?)
    }

    /// Replaces the descriptor at `expected` (compare-and-swap: `PreconditionFailed` when it
    /// changed since it was read).
    pub async fn replace(&self, own: &dyn Storage, expected: &Version) -> Result<Version> {
        Ok(own
            .put_if_match(CLONE_FILE, self.to_bytes()?, expected)
            .await?)
    }
}

/// A pin: the record in a source table of one clone that references its files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinRecord {
    /// The clone's id.
    pub clone_id: String,
    /// The clone's location.
    pub location: String,
    /// The pinned instant: the snapshot the clone references (held by a savepoint pair at this
    /// instant on `root`).
    pub instant: String,
    /// The root of this table the instant belongs to: `main` or a working branch's name.
    pub root: String,
    /// How the snapshot was named when cloning (`tag:<t>`, `branch:<b>`, `instant:<i>`,
    /// `main`).
    pub reference: String,
    /// When the pin was created (RFC 3339, UTC).
    pub created: String,
}

impl PinRecord {
    /// The pinned instant, parsed.
    pub fn instant_time(&self) -> Result<InstantTime> {
        InstantTime::parse(&self.instant)
    }

    /// The JSON stored at [`pin_key`].
    pub fn to_bytes(&self) -> Result<Bytes> {
        serde_json::to_vec_pretty(self)
            .map(Bytes::from)
            .map_err(|e| TimelineError::Encode {
                what: pin_key(&self.clone_id),
                reason: e.to_string(),
            })
    }

    /// Parses a pin stored at `key`.
    pub fn from_bytes(key: &str, data: &[u8]) -> Result<Self> {
        let p: PinRecord =
            serde_json::from_slice(data).map_err(|e| TimelineError::decode(key, e))?;
        p.instant_time()?;
        if pin_key(&p.clone_id) != key {
            return Err(TimelineError::decode(
                key,
                format!("the pin names clone {:?}", p.clone_id),
            ));
        }
        Ok(p)
    }

    /// Every pin of the table at `storage` (its own location or any root's view), by clone id.
    pub async fn list(storage: &dyn Storage) -> Result<Vec<PinRecord>> {
        let mut out = Vec::new();
        for meta in storage.list_all(PINS_DIR).await? {
            if !meta.key.ends_with(".json") {
                continue;
            }
            match storage.get(&meta.key).await {
                Ok((data, _)) => out.push(Self::from_bytes(&meta.key, &data)?),
                // Removed between the listing and the read: no longer a pin.
                Err(StorageError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        out.sort_by(|a, b| a.clone_id.cmp(&b.clone_id));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use arbor_storage::ObjectStoreStorage;

    use super::*;

    fn source(location: &str, instant: &str) -> CloneSource {
        CloneSource {
            location: location.to_string(),
            instant: instant.to_string(),
            root: "main".to_string(),
            reference: "main".to_string(),
        }
    }

    fn descriptor(sources: Vec<CloneSource>) -> CloneDescriptor {
        CloneDescriptor {
            id: "c1".to_string(),
            state: CloneState::Active,
            deep: false,
            created: "2026-12-02T00:00:00Z".to_string(),
            sources,
        }
    }

    #[tokio::test]
    async fn test_descriptor_round_trips_create_if_absent_and_swap() {
        let own = ObjectStoreStorage::memory();
        let d = descriptor(vec![
            source("/t/c1", "20261202000000200"),
            source("/t/s", "20261202000000100"),
        ]);
        let v = d.create(&own).await.unwrap();
        assert!(d.create(&own).await.is_err(), "a second create must fail");
        let (back, version) = CloneDescriptor::load(&own).await.unwrap().unwrap();
        assert_eq!(back, d);
        assert_eq!(version, v);
        let mut detached = d.clone();
        detached.state = CloneState::Detached;
        detached.replace(&own, &version).await.unwrap();
        assert!(
            detached.replace(&own, &version).await.is_err(),
            "stale version"
        );
        assert_eq!(
            d.clone_point().unwrap().unwrap().as_str(),
            "20261202000000200"
        );
    }

    #[test]
    fn test_descriptor_refuses_increasing_instants_and_active_without_source() {
        let bad = descriptor(vec![
            source("/t/c1", "20261202000000100"),
            source("/t/s", "20261202000000200"),
        ]);
        let err = CloneDescriptor::from_bytes(&bad.to_bytes().unwrap()).unwrap_err();
        assert!(err.to_string().contains("later"), "{err}");
        let empty = descriptor(vec![]);
        assert!(CloneDescriptor::from_bytes(&empty.to_bytes().unwrap()).is_err());
    }

    #[tokio::test]
    async fn test_pins_list_sorted_and_checked_against_their_key() {
        let s = ObjectStoreStorage::memory();
        for id in ["b", "a"] {
            let p = PinRecord {
                clone_id: id.to_string(),
                location: format!("/t/{id}"),
                instant: "20261202000000100".to_string(),
                root: "main".to_string(),
                reference: "tag:t1".to_string(),
                created: "2026-12-02T00:00:00Z".to_string(),
            };
            s.put(&pin_key(id), p.to_bytes().unwrap()).await.unwrap();
        }
        let pins = PinRecord::list(&s).await.unwrap();
        let ids: Vec<&str> = pins.iter().map(|p| p.clone_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        let (data, _) = s.get(&pin_key("a")).await.unwrap();
        assert!(PinRecord::from_bytes(&pin_key("b"), &data).is_err());
    }
}
