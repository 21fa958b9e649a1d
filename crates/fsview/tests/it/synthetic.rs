//! A small in-memory table builder: instant files and data files written directly, so that
//! tests can set up any timeline state (pending, archived boundary, replaced, pending plans).

use std::sync::Arc;

use arbor_fsview::{FileSystemView, StorageListing};
use arbor_storage::{FaultInjectingStorage, ObjectStoreStorage, OpKind, Storage};
use arbor_timeline::avro::{
    encode, HoodieCommitMetadata, HoodieReplaceCommitMetadata, HoodieWriteStat,
};
use arbor_timeline::naming::{instant_file_name, LayoutVersion};
use arbor_timeline::{Action, Instant, InstantTime, State, TableLayout};
use bytes::Bytes;

/// `2025-01-01 00:00:00.<ms>`.
pub fn t(ms: u32) -> InstantTime {
    InstantTime::parse(&format!("20250101000000{ms:03}")).unwrap()
}

/// A file id made of one repeated hex digit.
pub fn fid(c: char) -> String {
    format!("{}-0000-0000-0000-000000000000-0", c.to_string().repeat(8))
}

/// A base file name of group `f` written at `ms`.
pub fn base_name(f: char, ms: u32) -> String {
    format!("{}_0-1-2_{}.parquet", fid(f), t(ms))
}

/// A log file name of group `f` written by deltacommit `ms`.
pub fn log_name(f: char, ms: u32) -> String {
    format!(".{}_{}.log.1_0-1-2", fid(f), t(ms))
}

/// A table under construction (layout 2, `.hoodie/timeline/`), in memory behind a
/// fault-injecting wrapper that records every operation.
pub struct Synthetic {
    pub storage: Arc<FaultInjectingStorage>,
}

impl Synthetic {
    pub fn new() -> Self {
        let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        Synthetic {
            storage: Arc::new(FaultInjectingStorage::new(inner)),
        }
    }

    pub async fn put(&self, key: &str, data: Vec<u8>) {
        self.storage
            .inner()
            .put(key, Bytes::from(data))
            .await
            .unwrap();
    }

    /// Writes one instant file.
    pub async fn instant_file(
        &self,
        requested: u32,
        completion: Option<u32>,
        action: Action,
        state: State,
        content: Vec<u8>,
    ) {
        let instant = Instant {
            requested_time: t(requested),
            completion_time: completion.map(t),
            action,
            state,
        };
        let name = instant_file_name(&instant, LayoutVersion::V2).unwrap();
        self.put(&format!(".hoodie/timeline/{name}"), content).await;
    }

    /// Writes `requested` and `inflight` (empty) of a pending write.
    pub async fn pending(&self, requested: u32, action: Action) {
        self.instant_file(requested, None, action, State::Requested, vec![])
            .await;
        self.instant_file(requested, None, action, State::Inflight, vec![])
            .await;
    }

    /// A data file (content irrelevant to the view).
    pub async fn data(&self, partition: &str, name: &str) {
        let key = if partition.is_empty() {
            name.to_string()
        } else {
            format!("{partition}/{name}")
        };
        self.put(&key, b"data".to_vec()).await;
    }

    /// Write stats for files `(partition, name)`.
    pub fn metadata(files: &[(&str, &str)]) -> HoodieCommitMetadata {
        let mut m = HoodieCommitMetadata::default();
        for (p, name) in files {
            let file_id = arbor_fsview::parse_data_file_name(name, 0)
                .unwrap()
                .unwrap()
                .file_id()
                .to_string();
            let path = if p.is_empty() {
                name.to_string()
            } else {
                format!("{p}/{name}")
            };
            m.add_write_stat(
                *p,
                HoodieWriteStat {
                    file_id: Some(file_id),
                    path: Some(path),
                    partition_path: Some(p.to_string()),
                    ..Default::default()
                },
            );
        }
        m
    }

    /// A completed commit/deltacommit that wrote `files` (the data files are written too).
    pub async fn commit(
        &self,
        requested: u32,
        completion: u32,
        action: Action,
        files: &[(&str, &str)],
    ) {
        for (p, name) in files {
            self.data(p, name).await;
        }
        self.pending(requested, action).await;
        let content = encode(&Self::metadata(files)).unwrap();
        self.instant_file(
            requested,
            Some(completion),
            action,
            State::Completed,
            content,
        )
        .await;
    }

    /// A completed replacecommit that wrote `files` and replaced `replaced` `(partition, fid)`.
    pub async fn replace(
        &self,
        requested: u32,
        completion: u32,
        files: &[(&str, &str)],
        replaced: &[(&str, char)],
    ) {
        for (p, name) in files {
            self.data(p, name).await;
        }
        self.pending(requested, Action::ReplaceCommit).await;
        let mut map = std::collections::BTreeMap::<String, Vec<String>>::new();
        for (p, f) in replaced {
            map.entry(p.to_string()).or_default().push(fid(*f));
        }
        let m = HoodieReplaceCommitMetadata::from_commit_metadata(Self::metadata(files), map);
        let content = encode(&m).unwrap();
        self.instant_file(
            requested,
            Some(completion),
            Action::ReplaceCommit,
            State::Completed,
            content,
        )
        .await;
    }

    pub async fn view(&self) -> FileSystemView {
        let storage: Arc<dyn Storage> = self.storage.clone();
        let listing = Arc::new(StorageListing::new(storage.clone()));
        FileSystemView::load(storage, TableLayout::v2(".hoodie"), listing)
            .await
            .unwrap()
    }

    /// The prefixes listed with `list_dir` since the last reset, minus timeline directories.
    pub fn data_dirs_listed(&self) -> Vec<String> {
        self.storage
            .ops()
            .into_iter()
            .filter(|o| o.kind == OpKind::ListDir && !o.key.starts_with(".hoodie"))
            .map(|o| o.key)
            .collect()
    }
}
