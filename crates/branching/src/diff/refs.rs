//! Refs: the text a user types for a state of the table (`main`, a branch, `tag:T`, an
//! instant, `<branch>@<instant>`), parsed and resolved to a root and a completed write.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use arbor_storage::Storage;
use arbor_table::read::{ListingSource, TableReader};
use arbor_timeline::metaroot::MAIN;
use arbor_timeline::{InstantTime, MetaRoot};

use crate::error::{BranchingError, Result};
use crate::roots::{branch_identity, branch_names, select_root};
use crate::tag::{find_tag, resolve_tag};

/// A state of the table, as a user names it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefSpec {
    /// Main's latest completed write.
    Main,
    /// A working branch's latest completed write.
    Branch(String),
    /// The instant of an unexpired tag (main's tags first, then each branch's).
    Tag(String),
    /// A root as of an instant (requested times at or before it, as time travel reads).
    At {
        /// The branch (`None`: main).
        branch: Option<String>,
        /// The instant.
        instant: InstantTime,
    },
}

impl RefSpec {
    /// Parses `main`, `tag:<name>`, `<instant>` (main as of it), `<branch>@<instant>` and
    /// `<branch>`. An instant is 14 or 17 digits (`yyyyMMddHHmmss[SSS]`); a name made only of
    /// digits that is not a valid instant is a branch name.
    pub fn parse(text: &str) -> Result<RefSpec> {
        let text = text.trim();
        if text.is_empty() {
            return Err(invalid_ref(text, "a ref is empty"));
        }
        if let Some(tag) = text.strip_prefix("tag:") {
            if tag.is_empty() {
                return Err(invalid_ref(text, "tag: needs a tag name"));
            }
            return Ok(RefSpec::Tag(tag.to_string()));
        }
        if let Some((branch, instant)) = text.rsplit_once('@') {
            let instant = InstantTime::parse(instant)
                .map_err(|e| invalid_ref(text, format!("after @: {e}")))?;
            let branch = (!branch.is_empty() && branch != MAIN).then(|| branch.to_string());
            return Ok(RefSpec::At { branch, instant });
        }
        if text == MAIN {
            return Ok(RefSpec::Main);
        }
        if text.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(instant) = InstantTime::parse(text) {
                return Ok(RefSpec::At {
                    branch: None,
                    instant,
                });
            }
        }
        Ok(RefSpec::Branch(text.to_string()))
    }
}

impl fmt::Display for RefSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefSpec::Main => f.write_str(MAIN),
            RefSpec::Branch(b) => f.write_str(b),
            RefSpec::Tag(t) => write!(f, "tag:{t}"),
            RefSpec::At {
                branch: None,
                instant,
            } => write!(f, "{instant}"),
            RefSpec::At {
                branch: Some(b),
                instant,
            } => write!(f, "{b}@{instant}"),
        }
    }
}

fn invalid_ref(text: &str, reason: impl Into<String>) -> BranchingError {
    BranchingError::Invalid {
        path: format!("ref {text:?}"),
        reason: reason.into(),
    }
}

/// A ref resolved: the root it reads and the completed write its state is as of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRef {
    /// What the user typed, normalised (`main`, `feature`, `tag:T`, `main@<instant>`).
    pub label: String,
    /// The branch whose timeline the state is on (`None`: main).
    pub branch: Option<String>,
    /// The root that branch resolves to now.
    pub root: MetaRoot,
    /// The latest completed write at or before the ref (`None`: the table had no completed
    /// write then: the state is empty).
    pub instant: Option<InstantTime>,
}

impl TableRef {
    /// The branch name, `main` for main.
    pub fn branch_label(&self) -> &str {
        self.branch.as_deref().unwrap_or(MAIN)
    }
}

/// The timeline facts of one root that diffs and merges use.
pub(crate) struct RootTimeline {
    /// A reader of the root's latest state.
    pub reader: TableReader,
    /// The requested times of its completed writes (active and archived).
    pub writes: BTreeSet<InstantTime>,
}

impl RootTimeline {
    /// Opens `root` for reading and collects its completed writes.
    pub async fn open(storage: &Arc<dyn Storage>, root: &MetaRoot) -> Result<RootTimeline> {
        // The FILES listing is read per partition, for the partitions a diff touches only.
        let reader = TableReader::open_view_with(
            root.view(storage.clone()),
            ListingSource::AutoPerPartition,
        )
        .await?;
        let writes = reader
            .view()
            .index()
            .completed_writes()
            .map(|i| i.requested_time.clone())
            .collect();
        Ok(RootTimeline { reader, writes })
    }

    /// The latest completed write at or before `t` (`None` for `t`: the latest of all).
    pub fn write_at_or_before(&self, t: Option<&InstantTime>) -> Option<InstantTime> {
        match t {
            Some(t) => self.writes.range(..=t.clone()).next_back().cloned(),
            None => self.writes.iter().next_back().cloned(),
        }
    }
}

/// Resolves `spec` against the table at `storage`, returning the ref and its root's timeline.
pub(crate) async fn resolve(
    storage: &Arc<dyn Storage>,
    spec: &RefSpec,
) -> Result<(TableRef, RootTimeline)> {
    let (branch, at, label) = match spec {
        RefSpec::Main => (None, None, MAIN.to_string()),
        RefSpec::Branch(b) => {
            let info = branch_identity(storage, b).await?;
            (Some(info.name.clone()), None, info.name)
        }
        RefSpec::At { branch, instant } => {
            let branch = match branch {
                Some(b) => Some(branch_identity(storage, b).await?.name),
                None => None,
            };
            let label = format!("{}@{instant}", branch.as_deref().unwrap_or(MAIN));
            (branch, Some(instant.clone()), label)
        }
        RefSpec::Tag(name) => {
            let (branch, instant) = find_tag_anywhere(storage, name).await?;
            (branch, Some(instant), format!("tag:{name}"))
        }
    };
    let root = select_root(storage, branch.as_deref()).await?;
    let timeline = RootTimeline::open(storage, &root).await?;
    let instant = timeline.write_at_or_before(at.as_ref());
    Ok((
        TableRef {
            label,
            branch,
            root,
            instant,
        },
        timeline,
    ))
}

/// The branch (`None`: main) holding tag `name` and the tag's instant: main's tags first,
/// then the branches'; a tag found on several branches (and not on main) is ambiguous.
async fn find_tag_anywhere(
    storage: &Arc<dyn Storage>,
    name: &str,
) -> Result<(Option<String>, InstantTime)> {
    let main_root = select_root(storage, None).await?;
    if find_tag(&main_root.view(storage.clone()), name)
        .await?
        .is_some()
    {
        let (_, tag) = resolve_tag(storage, None, name).await?;
        return Ok((None, InstantTime::parse(&tag.instant)?));
    }
    let mut found: Vec<String> = Vec::new();
    for b in branch_names(storage).await? {
        let root = MetaRoot::Branch(b.clone());
        if find_tag(&root.view(storage.clone()), name).await?.is_some() {
            found.push(b);
        }
    }
    match found.as_slice() {
        [] => Err(BranchingError::TagNotFound {
            name: name.to_string(),
            branch: "main or any branch".to_string(),
            reason: "no such tag".to_string(),
        }),
        [b] => {
            let (_, tag) = resolve_tag(storage, Some(b), name).await?;
            Ok((Some(b.clone()), InstantTime::parse(&tag.instant)?))
        }
        many => Err(BranchingError::TagNotFound {
            name: name.to_string(),
            branch: many.join(", "),
            reason: "several branches have a tag of this name; name the state as \
                     <branch>@<instant> instead"
                .to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn test_parse_refs() {
        assert_eq!(RefSpec::parse("main").unwrap(), RefSpec::Main);
        assert_eq!(
            RefSpec::parse("feature").unwrap(),
            RefSpec::Branch("feature".into())
        );
        assert_eq!(RefSpec::parse("tag:v1").unwrap(), RefSpec::Tag("v1".into()));
        let t = InstantTime::parse("20261205101010123").unwrap();
        assert_eq!(
            RefSpec::parse("20261205101010123").unwrap(),
            RefSpec::At {
                branch: None,
                instant: t.clone()
            }
        );
        assert_eq!(
            RefSpec::parse("dev@20261205101010123").unwrap(),
            RefSpec::At {
                branch: Some("dev".into()),
                instant: t.clone()
            }
        );
        assert_eq!(
            RefSpec::parse("main@20261205101010123").unwrap(),
            RefSpec::At {
                branch: None,
                instant: t
            }
        );
        // Digits that are no instant name a branch.
        assert_eq!(
            RefSpec::parse("2024").unwrap(),
            RefSpec::Branch("2024".into())
        );
        assert!(RefSpec::parse("dev@yesterday").is_err());
        assert!(RefSpec::parse("tag:").is_err());
        assert!(RefSpec::parse(" ").is_err());
        assert_eq!(
            RefSpec::parse("dev@20261205101010123").unwrap().to_string(),
            "dev@20261205101010123"
        );
    }
}
