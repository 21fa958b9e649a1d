//! The identity files of RFC-116: `branch.json` (both sides of a branch, same never-reused
//! `branchId`; defined with the table layout, `arbor_timeline::layout::branches`, because every
//! clean discovers branches) and tag definitions (`tags/<name>.json`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{BranchingError, Result};

pub use arbor_timeline::layout::BranchInfo;

/// A tag definition (`tags/<name>.json`, RFC-116 section 3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagInfo {
    /// The tag name; matches the file name.
    pub name: String,
    /// The completed data instant it names.
    pub instant: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it stops serving reads (`None`: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

impl TagInfo {
    /// Parses a tag definition read from `path`; the name must be a valid name and match
    /// `file_stem` (the file name without `.json`).
    pub fn parse(bytes: &[u8], path: &str, file_stem: &str) -> Result<Self> {
        let tag: TagInfo = serde_json::from_slice(bytes).map_err(|e| BranchingError::Invalid {
            path: path.to_string(),
            reason: e.to_string(),
        })?;
        arbor_timeline::metaroot::validate_branch_name(&tag.name)?;
        if tag.name != file_stem {
            return Err(BranchingError::Invalid {
                path: path.to_string(),
                reason: format!("names tag {:?} but the file is {file_stem}.json", tag.name),
            });
        }
        arbor_timeline::InstantTime::parse(&tag.instant)?;
        Ok(tag)
    }

    /// True when the tag has expired at `now` (expired tags serve no reads and are not shown;
    /// their name and instant stay reserved until removed).
    pub fn is_expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|e| e <= now)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_tag_info_parses_the_rfc_example_and_checks_name_and_expiry() {
        let rfc = r#"{
          "name": "T2",
          "instant": "20261026103000000",
          "createdAt": "2026-10-26T11:00:00Z",
          "expiresAt": "2026-11-02T11:00:00Z"
        }"#;
        let tag = TagInfo::parse(rfc.as_bytes(), "tags/T2.json", "T2").unwrap();
        assert_eq!(tag.instant, "20261026103000000");
        let before: DateTime<Utc> = "2026-11-01T00:00:00Z".parse().unwrap();
        let after: DateTime<Utc> = "2026-11-02T11:00:00Z".parse().unwrap();
        assert!(!tag.is_expired(before));
        assert!(tag.is_expired(after));
        assert!(TagInfo::parse(rfc.as_bytes(), "tags/T3.json", "T3").is_err());
        let bad_instant = rfc.replace("20261026103000000", "yesterday");
        assert!(TagInfo::parse(bad_instant.as_bytes(), "tags/T2.json", "T2").is_err());
        let forever =
            r#"{"name":"keep","instant":"20261026103000000","createdAt":"2026-10-26T11:00:00Z"}"#;
        let t = TagInfo::parse(forever.as_bytes(), "tags/keep.json", "keep").unwrap();
        assert!(!t.is_expired(after));
    }
}
