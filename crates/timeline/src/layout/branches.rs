//! Working branches as storage shows them: the identity file `branch.json` (both sides of a
//! branch, same never-reused `branchId`, RFC-116) and the discovery of every live root (main
//! and each working branch), which every operation that must respect other roots (clean,
//! archive, restore, validation) starts from.

use std::sync::Arc;

use arbor_storage::{Storage, StorageExt};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::metaroot::{resolve_main, validate_branch_name, MetaRoot, MAIN};
use super::paths::{data_identity_key, mdt_identity_key, BRANCHES_DIR, BRANCH_JSON, PUBLICATIONS};
use crate::error::{Result, TimelineError};

/// `branch.json`: written on the MDT side first and the data side last; the data-side file
/// makes the branch discoverable only when both carry the same `branchId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchInfo {
    /// The branch name (validated by [`validate_branch_name`]).
    pub name: String,
    /// A never-reused id (a UUID v4).
    pub branch_id: String,
    /// The main data instant the branch was created from (`None` when main had no completed
    /// commit).
    pub base_instant: Option<String>,
    /// The tag the branch was created from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_tag: Option<String>,
    /// When the branch was created.
    pub created_at: DateTime<Utc>,
}

fn invalid(path: &str, reason: impl Into<String>) -> TimelineError {
    TimelineError::InvalidIdentity {
        path: path.to_string(),
        reason: reason.into(),
    }
}

impl BranchInfo {
    /// A new identity for branch `name` (validated) with a fresh `branchId`.
    pub fn new(name: &str, base_instant: Option<String>, from_tag: Option<String>) -> Result<Self> {
        validate_branch_name(name)?;
        Ok(BranchInfo {
            name: name.to_string(),
            branch_id: uuid::Uuid::new_v4().to_string(),
            base_instant,
            from_tag,
            created_at: Utc::now(),
        })
    }

    /// Parses a `branch.json` read from `path`, checking the name and the id.
    pub fn parse(bytes: &[u8], path: &str) -> Result<Self> {
        let info: BranchInfo =
            serde_json::from_slice(bytes).map_err(|e| invalid(path, e.to_string()))?;
        validate_branch_name(&info.name)?;
        if info.branch_id.is_empty() {
            return Err(invalid(path, "empty branchId"));
        }
        Ok(info)
    }

    /// The JSON text written to `branch.json`.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| invalid(BRANCH_JSON, e.to_string()))
    }
}

/// The identity of working branch `name`: `None` when its data-side `branch.json` is absent
/// (the branch does not exist, or its creation or drop was interrupted). An error when the
/// data side exists but the MDT side is missing, unreadable or carries another `branchId`
/// (the branch is then not usable).
pub async fn read_identity(storage: &Arc<dyn Storage>, name: &str) -> Result<Option<BranchInfo>> {
    validate_branch_name(name)?;
    let data_key = data_identity_key(name);
    let Some((bytes, _)) = storage.get_opt(&data_key).await? else {
        return Ok(None);
    };
    let data = BranchInfo::parse(&bytes, &data_key)?;
    let mdt_key = mdt_identity_key(name);
    let Some((bytes, _)) = storage.get_opt(&mdt_key).await? else {
        return Err(invalid(
            &mdt_key,
            format!("branch {name} has no MDT-side identity"),
        ));
    };
    let mdt = BranchInfo::parse(&bytes, &mdt_key)?;
    if mdt.branch_id != data.branch_id || mdt.name != data.name || data.name != name {
        return Err(invalid(
            &data_key,
            format!(
                "branch {name}: data-side branchId {} does not match MDT-side {}",
                data.branch_id, mdt.branch_id
            ),
        ));
    }
    Ok(Some(data))
}

/// The names of the working branches whose identity checks out (ascending). Directories
/// without a data-side `branch.json` (interrupted creations or drops) are skipped; a branch
/// whose identity files disagree is an error.
pub async fn branch_names(storage: &Arc<dyn Storage>) -> Result<Vec<String>> {
    let (_, dirs) = storage.list_dir(BRANCHES_DIR).await?;
    let mut out = Vec::new();
    for d in dirs {
        let Some(name) = d.rsplit('/').next() else {
            continue;
        };
        if name == PUBLICATIONS || name == MAIN || validate_branch_name(name).is_err() {
            continue;
        }
        if read_identity(storage, name).await?.is_some() {
            out.push(name.to_string());
        }
    }
    Ok(out)
}

/// Every live root of the table at `storage` (its own storage, not a root's view): main
/// (resolved) first, then each working branch.
pub async fn live_roots(storage: &Arc<dyn Storage>) -> Result<Vec<MetaRoot>> {
    let mut out = vec![resolve_main(storage.as_ref()).await?];
    out.extend(
        branch_names(storage)
            .await?
            .into_iter()
            .map(MetaRoot::Branch),
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use arbor_storage::ObjectStoreStorage;
    use bytes::Bytes;

    use super::*;
    use crate::config::{TableConfig, TableType};

    #[test]
    fn test_branch_info_round_trips_and_ids_are_unique() {
        let a = BranchInfo::new("audit", Some("20261026103000000".into()), None).unwrap();
        let b = BranchInfo::new("audit", None, None).unwrap();
        assert_ne!(a.branch_id, b.branch_id);
        let json = a.to_json().unwrap();
        assert!(json.contains("\"branchId\""), "{json}");
        assert!(json.contains("\"baseInstant\""), "{json}");
        assert_eq!(
            BranchInfo::parse(json.as_bytes(), "branch.json").unwrap(),
            a
        );
    }

    #[test]
    fn test_branch_info_hostile_or_broken_refused() {
        assert!(BranchInfo::new("../x", None, None).is_err());
        let bad_name = r#"{"name":"../x","branchId":"1","baseInstant":null,"createdAt":"2026-10-26T11:00:00Z"}"#;
        assert!(BranchInfo::parse(bad_name.as_bytes(), "b.json").is_err());
        let no_id =
            r#"{"name":"x","branchId":"","baseInstant":null,"createdAt":"2026-10-26T11:00:00Z"}"#;
        assert!(BranchInfo::parse(no_id.as_bytes(), "b.json").is_err());
        let err = BranchInfo::parse(b"{not json", "x/branch.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("x/branch.json"), "{err}");
    }

    #[tokio::test]
    async fn test_live_roots_lists_main_and_branches_whose_identity_checks_out() {
        let s: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        let config = TableConfig::new_v8("t", TableType::CopyOnWrite).unwrap();
        TableConfig::create(s.as_ref(), ".hoodie", &config)
            .await
            .unwrap();
        assert_eq!(live_roots(&s).await.unwrap(), vec![MetaRoot::Root]);
        let info = BranchInfo::new("audit", None, None).unwrap();
        let json = Bytes::from(info.to_json().unwrap());
        // MDT side first: not yet discoverable.
        s.put(&mdt_identity_key("audit"), json.clone())
            .await
            .unwrap();
        assert_eq!(live_roots(&s).await.unwrap(), vec![MetaRoot::Root]);
        // A directory without identity (interrupted creation) is skipped.
        s.put(".hoodie/branches/half/hoodie.properties", Bytes::new())
            .await
            .unwrap();
        s.put(&data_identity_key("audit"), json).await.unwrap();
        assert_eq!(
            live_roots(&s).await.unwrap(),
            vec![MetaRoot::Root, MetaRoot::Branch("audit".into())]
        );
        // Disagreeing sides are an error, never a silently skipped branch.
        let other = BranchInfo::new("audit", None, None).unwrap();
        s.put(
            &mdt_identity_key("audit"),
            Bytes::from(other.to_json().unwrap()),
        )
        .await
        .unwrap();
        let err = live_roots(&s).await.unwrap_err();
        assert!(
            matches!(err, TimelineError::InvalidIdentity { .. }),
            "{err}"
        );
    }
}
