//! Write markers (Java Hudi's direct markers): before a fragment of a distributed write
//! ([`crate::Table::write_fragment`]) stores a data file, it creates
//! `.hoodie/.temp/<instant>/<partition>/<file name>.marker.<IO type>` (`CREATE` for a base
//! file, `APPEND` for a log file). The coordinator then knows every data file any attempt of
//! any fragment may have stored, also those of attempts that died or were retried and whose
//! fragment never reached it: before completing the instant it deletes the marked files no
//! committed fragment names (a stray file carrying a completed instant's time would be
//! visible to readers that list files), then the markers. Java's marker-based rollback reads
//! the same layout.

use std::collections::BTreeSet;

use arbor_fsview::slice::join;
use arbor_storage::{Storage, StorageError, MAX_DELETE_BATCH};
use bytes::Bytes;

use crate::error::Result;

/// The directory holding the markers of `instant` (relative to the table's view).
pub fn marker_dir(instant: &str) -> String {
    format!(".hoodie/.temp/{instant}")
}

/// The IO type a marker records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerType {
    /// A new base file (Java's `CREATE`).
    Create,
    /// A log file appended to a file group (Java's `APPEND`).
    Append,
}

impl MarkerType {
    fn suffix(self) -> &'static str {
        match self {
            MarkerType::Create => "CREATE",
            MarkerType::Append => "APPEND",
        }
    }
}

/// Creates the marker of data file `key` (`<partition>/<file name>`) of `instant`. A marker
/// already there (a retried attempt's) is not an error.
pub async fn create_marker(
    storage: &dyn Storage,
    instant: &str,
    key: &str,
    kind: MarkerType,
) -> Result<()> {
    let marker = format!("{}/{key}.marker.{}", marker_dir(instant), kind.suffix());
    match storage.put_if_absent(&marker, Bytes::new()).await {
        Ok(_) | Err(StorageError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The data files (storage keys) the markers of `instant` name, and the marker keys. Walks
/// the marker directory one directory listing at a time (each listing is one request that
/// the store pages itself), so the cost follows the number of markers.
pub async fn marked_files(
    storage: &dyn Storage,
    instant: &str,
) -> Result<(BTreeSet<String>, Vec<String>)> {
    let dir = marker_dir(instant);
    let prefix = format!("{dir}/");
    let mut files = BTreeSet::new();
    let mut markers = Vec::new();
    let mut pending = vec![dir];
    while let Some(next) = pending.pop() {
        let (objects, dirs) = match storage.list_dir(&next).await {
            Ok(listed) => listed,
            Err(StorageError::NotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        pending.extend(dirs);
        for meta in objects {
            let Some(relative) = meta.key.strip_prefix(&prefix) else {
                continue;
            };
            if let Some((file, _)) = relative.rsplit_once(".marker.") {
                let (partition, name) = file.rsplit_once('/').unwrap_or(("", file));
                files.insert(join(partition, name));
            }
            markers.push(meta.key);
        }
    }
    Ok((files, markers))
}

/// Deletes the data files `files` (missing ones are not an error) or the markers; every
/// failure is returned as one error after all were tried.
pub async fn delete_keys(storage: &dyn Storage, keys: &[String]) -> Result<()> {
    let mut first = None;
    for chunk in keys.chunks(MAX_DELETE_BATCH) {
        for r in storage.delete_batch(chunk).await? {
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        }
    }
    match first {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arbor_storage::ObjectStoreStorage;
    use std::sync::Arc;

    #[tokio::test]
    async fn test_marked_files_name_the_data_files_of_every_partition() {
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        create_marker(
            storage.as_ref(),
            "20261207",
            "a/b/f1.parquet",
            MarkerType::Create,
        )
        .await
        .unwrap();
        create_marker(
            storage.as_ref(),
            "20261207",
            ".f2_1.log.1_0-1-0",
            MarkerType::Append,
        )
        .await
        .unwrap();
        // A retried attempt's marker again: not an error.
        create_marker(
            storage.as_ref(),
            "20261207",
            "a/b/f1.parquet",
            MarkerType::Create,
        )
        .await
        .unwrap();
        create_marker(
            storage.as_ref(),
            "20261208",
            "c/f3.parquet",
            MarkerType::Create,
        )
        .await
        .unwrap();
        let (files, markers) = marked_files(storage.as_ref(), "20261207").await.unwrap();
        assert_eq!(
            files.into_iter().collect::<Vec<_>>(),
            vec![
                ".f2_1.log.1_0-1-0".to_string(),
                "a/b/f1.parquet".to_string()
            ]
        );
        assert_eq!(markers.len(), 2);
        delete_keys(storage.as_ref(), &markers).await.unwrap();
        assert!(marked_files(storage.as_ref(), "20261207")
            .await
            .unwrap()
            .0
            .is_empty());
    }
}
