//! Working branches as storage shows them: the identity file `branch.json` (both sides of a
//! branch, same never-reused `branchId`, RFC-116) and the discovery of every live root (main
//! and each working branch), which every operation that must respect other roots (clean,
//! archive, restore, validation) starts from.

use std::sync::Arc;

use arbor_storage::{Storage, StorageExt};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::metaroot::{
    nfc_name, normalize_branch_name, resolve_main, same_name, validate_branch_name, MetaRoot, MAIN,
};
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
    /// Set on the branch a rebase builds the rebased state in (`<b>~rebase`) until it
    /// replaces branch `b`: the branch it rebases, as it was when the rebase began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebase_of: Option<RebaseRecord>,
    /// Set on the branch a rebase kept branch `b`'s earlier history in (`<b>-pre-rebase`,
    /// holding the tags the rebased branch no longer has): `b` as it was before the rebase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_rebase_of: Option<RebaseRecord>,
}

/// The branch a rebase works on, as identified when it began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RebaseRecord {
    /// The branch's name.
    pub branch: String,
    /// Its `branchId` before the rebase (the rebased branch gets a new one).
    pub branch_id: String,
}

fn invalid(path: &str, reason: impl Into<String>) -> TimelineError {
    TimelineError::InvalidIdentity {
        path: path.to_string(),
        reason: reason.into(),
    }
}

impl BranchInfo {
    /// A new identity for branch `name` with a fresh `branchId`; the name recorded is `name` in
    /// Unicode NFC, validated ([`normalize_branch_name`]).
    pub fn new(name: &str, base_instant: Option<String>, from_tag: Option<String>) -> Result<Self> {
        let name = normalize_branch_name(name)?;
        Ok(BranchInfo {
            name,
            branch_id: uuid::Uuid::new_v4().to_string(),
            base_instant,
            from_tag,
            created_at: Utc::now(),
            rebase_of: None,
            before_rebase_of: None,
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

/// The identity of the working branch stored under exactly `name` (no normalisation: callers
/// with a name a user typed use [`find_branch`]): `None` when its data-side `branch.json` is
/// absent (the branch does not exist, or its creation or drop was interrupted). An error when
/// the data side exists but the MDT side is missing, unreadable or carries another `branchId`
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

/// The working branch a user's spelling `name` names, with its stored name in
/// [`BranchInfo::name`] (the directory its metadata is in). Every spelling of a name that is
/// the same in Unicode NFC names one branch:
///
/// 1. the branch stored under exactly `name`, if any (so that two branches an older arbor
///    created under two spellings of one name both stay reachable, each by its own spelling);
/// 2. else the branch stored under the NFC form of `name` (every branch created since names
///    are normalised);
/// 3. else the one branch whose stored name is not NFC but normalises to the same name (created
///    by an older arbor); several such branches is [`TimelineError::InvalidBranchName`] naming
///    their stored spellings, each of which reaches its branch by step 1.
///
/// `None` when no branch matches. Costs one or two identity reads; step 3 one delimiter
/// listing of the branches directory.
pub async fn find_branch(storage: &Arc<dyn Storage>, name: &str) -> Result<Option<BranchInfo>> {
    let nfc = nfc_name(name).into_owned();
    let exact_valid = validate_branch_name(name).is_ok();
    let nfc_valid = nfc != name && validate_branch_name(&nfc).is_ok();
    if !exact_valid && !nfc_valid {
        // The error of the spelling given.
        normalize_branch_name(name)?;
    }
    if exact_valid {
        if let Some(info) = read_identity(storage, name).await? {
            return Ok(Some(info));
        }
    }
    if nfc_valid {
        if let Some(info) = read_identity(storage, &nfc).await? {
            return Ok(Some(info));
        }
    }
    let mut found = Vec::new();
    for stored in stored_branch_dirs(storage).await? {
        if stored != nfc && stored != name && same_name(&stored, &nfc) {
            if let Some(info) = read_identity(storage, &stored).await? {
                found.push(info);
            }
        }
    }
    if found.len() > 1 {
        let spellings: Vec<String> = found.iter().map(|i| format!("{:?}", i.name)).collect();
        return Err(TimelineError::InvalidBranchName {
            name: name.to_string(),
            reason: format!(
                "it names several branches created by an older arbor under different Unicode \
                 spellings ({}); give the exact spelling of one",
                spellings.join(", ")
            ),
        });
    }
    Ok(found.pop())
}

/// The names of the directories below the branches directory that may hold a working branch
/// (valid names other than `main` and `publications`), as stored.
async fn stored_branch_dirs(storage: &Arc<dyn Storage>) -> Result<Vec<String>> {
    let (_, dirs) = storage.list_dir(BRANCHES_DIR).await?;
    Ok(dirs
        .iter()
        .filter_map(|d| d.rsplit('/').next())
        .filter(|n| *n != PUBLICATIONS && *n != MAIN && validate_branch_name(n).is_ok())
        .map(str::to_string)
        .collect())
}

/// The names of the working branches whose identity checks out (ascending), as stored: NFC
/// for every branch created since names are normalised; a branch an older arbor created under
/// a name that is not NFC is listed under that name (and [`find_branch`] reaches it by any
/// spelling). Directories
/// without a data-side `branch.json` (interrupted creations or drops) are skipped; a branch
/// whose identity files disagree is an error.
pub async fn branch_names(storage: &Arc<dyn Storage>) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for name in stored_branch_dirs(storage).await? {
        if read_identity(storage, &name).await?.is_some() {
            out.push(name);
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

    /// Writes both identity files of a branch stored under exactly `stored`, as an arbor from
    /// before names were normalised did.
    async fn legacy_branch(s: &Arc<dyn Storage>, stored: &str) -> BranchInfo {
        let mut info = BranchInfo::new("x", None, None).unwrap();
        info.name = stored.to_string();
        let json = Bytes::from(info.to_json().unwrap());
        s.put(&mdt_identity_key(stored), json.clone())
            .await
            .unwrap();
        s.put(&data_identity_key(stored), json).await.unwrap();
        info
    }

    #[tokio::test]
    async fn test_find_branch_every_spelling_finds_one_branch_and_legacy_names_stay_reachable() {
        let s: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
        let composed = "caf\u{e9}";
        let decomposed = "cafe\u{301}";
        assert!(find_branch(&s, composed).await.unwrap().is_none());
        // A branch created now is stored NFC; both spellings find it.
        let info = BranchInfo::new(decomposed, None, None).unwrap();
        assert_eq!(info.name, composed);
        let json = Bytes::from(info.to_json().unwrap());
        s.put(&mdt_identity_key(composed), json.clone())
            .await
            .unwrap();
        s.put(&data_identity_key(composed), json).await.unwrap();
        for spelling in [composed, decomposed] {
            let found = find_branch(&s, spelling).await.unwrap().unwrap();
            assert_eq!(found.branch_id, info.branch_id, "{spelling:?}");
            assert_eq!(found.name, composed);
        }
        assert_eq!(branch_names(&s).await.unwrap(), vec![composed.to_string()]);

        // A branch an older arbor stored under a decomposed name: found by both spellings,
        // listed under its stored name.
        let old = "re\u{301}sume\u{301}";
        let old_nfc = "r\u{e9}sum\u{e9}";
        let legacy = legacy_branch(&s, old).await;
        for spelling in [old, old_nfc] {
            let found = find_branch(&s, spelling).await.unwrap().unwrap();
            assert_eq!(found.branch_id, legacy.branch_id, "{spelling:?}");
            assert_eq!(found.name, old);
        }
        assert!(branch_names(&s).await.unwrap().contains(&old.to_string()));

        // Two legacy spellings of one name: each by its own spelling; any other is ambiguous.
        let a = "e\u{301}\u{323}x";
        let b = "e\u{323}\u{301}x";
        let (ia, ib) = (legacy_branch(&s, a).await, legacy_branch(&s, b).await);
        assert_eq!(
            find_branch(&s, a).await.unwrap().unwrap().branch_id,
            ia.branch_id
        );
        assert_eq!(
            find_branch(&s, b).await.unwrap().unwrap().branch_id,
            ib.branch_id
        );
        let err = find_branch(&s, "\u{1eb9}\u{301}x").await.unwrap_err();
        assert!(
            matches!(err, TimelineError::InvalidBranchName { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("several branches"), "{err}");
        // An invalid spelling is refused before anything is read.
        assert!(find_branch(&s, "../e\u{301}").await.is_err());
    }
}
