//! Opening a clone's source and resolving the snapshot a clone references there (creation step
//! 1, `docs/clones.md`): the building block "open source + resolve instant".

use std::sync::Arc;

use arbor_storage::Storage;
use arbor_table::Table;
use arbor_timeline::config::TableVersion;
use arbor_timeline::layout::{
    normalize_location, open_location, CloneDescriptor, CloneState, ClonedStorage, LocationOpener,
    DEFAULT_META_DIR,
};
use arbor_timeline::metaroot::MAIN;
use arbor_timeline::{
    ActiveTimeline, InstantTime, MetaRoot, TableConfig, TableLayout, TimelineError,
};

use super::types::CloneAt;
use crate::error::{BranchingError, Result};
use crate::roots::{branch_identity, is_main, open_table, select_root};
use crate::tag::{find_tag, resolve_tag};

/// A table location opened as a clone source.
#[derive(Debug, Clone)]
pub(crate) struct OpenedSource {
    /// The normalized location.
    pub location: String,
    /// The table's storage as [`open_location`] gives it (a `ClonedStorage` for an active
    /// clone).
    pub storage: Arc<dyn Storage>,
    /// The table's own clone descriptor when it is an active shallow clone (its sources are the
    /// farther sources of a clone made from it).
    pub descriptor: Option<CloneDescriptor>,
}

/// The snapshot of a source a clone references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedRef {
    /// The source root (`main` resolved, or a working branch).
    pub root: MetaRoot,
    /// Its name as pins and descriptors record it (`main` or the branch's name).
    pub root_name: String,
    /// How it was named (`tag:<t>`, `branch:<b>`, `instant:<i>`, `main`).
    pub reference: String,
    /// The referenced completed write.
    pub instant: InstantTime,
}

/// Opens the table at `location` (normalized first) through `opener`, as a source: its own
/// storage, or a `ClonedStorage` when it is an active shallow clone. A clone still being
/// created is refused (`CloneIncomplete`, from [`open_location`]).
pub(crate) async fn open_source(
    opener: &dyn LocationOpener,
    location: &str,
) -> Result<OpenedSource> {
    let location = normalize_location(location)?;
    let storage = open_location(&location, opener).await?;
    let own = opener.open(&location)?;
    let descriptor = CloneDescriptor::load(own.as_ref())
        .await?
        .map(|(d, _)| d)
        .filter(|d| d.state == CloneState::Active);
    Ok(OpenedSource {
        location,
        storage,
        descriptor,
    })
}

/// The metadata root named `name` (`main` resolved, else a working branch whose identity
/// checks out).
pub(crate) async fn root_named(storage: &Arc<dyn Storage>, name: &str) -> Result<MetaRoot> {
    select_root(storage, Some(name)).await
}

/// A write handle of root `name` of the table in `storage` (main follows publications).
pub(crate) async fn open_root(storage: &Arc<dyn Storage>, name: &str) -> Result<Table> {
    open_table(storage.clone(), Some(name)).await
}

/// Checks that the source can be cloned at `root`: table version 8 or 9, with the metadata
/// table's FILES partition (clones, like branches, find their files through it).
pub(crate) async fn check_cloneable(
    src: &OpenedSource,
    root: &MetaRoot,
    op: &str,
) -> Result<TableConfig> {
    let view = root.view(src.storage.clone());
    let config = TableConfig::load(view.as_ref(), DEFAULT_META_DIR).await?;
    if config.version() == TableVersion::Six {
        return Err(BranchingError::refused(
            op,
            format!(
                "{} is a table of version 6; run `arbor upgrade {}` first",
                src.location, src.location
            ),
        ));
    }
    if !config
        .metadata_partitions()
        .iter()
        .any(|p| p == arbor_mdt::FILES_PARTITION)
    {
        return Err(BranchingError::refused(
            op,
            format!(
                "{} has no metadata table (a clone finds the files it reads through its FILES \
                 partition); run `arbor mdt init {}` first",
                src.location, src.location
            ),
        ));
    }
    Ok(config)
}

/// `at` and `tag_branch` with every branch and tag name replaced by the name it is stored
/// under in `src` (a user may spell a name in any Unicode form with the same NFC form), so that
/// pins, descriptors and the resumption of an unfinished clone compare stored names. A tag
/// that does not exist is left as given (resolving it reports the error).
pub(crate) async fn stored_names(
    src: &OpenedSource,
    at: &CloneAt,
    tag_branch: Option<&str>,
) -> Result<(CloneAt, Option<String>)> {
    let tag_branch = match tag_branch {
        Some(b) if !is_main(Some(b)) => Some(branch_identity(&src.storage, b).await?.name),
        other => other.map(str::to_string),
    };
    let at = match at {
        CloneAt::Branch(b) if !is_main(Some(b)) => {
            CloneAt::Branch(branch_identity(&src.storage, b).await?.name)
        }
        CloneAt::Tag(t) => {
            let root = select_root(&src.storage, tag_branch.as_deref()).await?;
            match find_tag(&root.view(src.storage.clone()), t).await? {
                Some(tag) => CloneAt::Tag(tag.name),
                None => at.clone(),
            }
        }
        other => other.clone(),
    };
    Ok((at, tag_branch))
}

/// The root name and the reference a clone at `at` records (`tag_branch`: the working branch
/// whose tag or instant `at` names; `None`: main).
pub(crate) fn names_of(at: &CloneAt, tag_branch: Option<&str>) -> (String, String) {
    let on = tag_branch.unwrap_or(MAIN);
    match at {
        CloneAt::Main => (MAIN.to_string(), "main".to_string()),
        CloneAt::Branch(b) => (b.clone(), format!("branch:{b}")),
        CloneAt::Tag(t) => (on.to_string(), format!("tag:{t}")),
        CloneAt::Instant(i) => (on.to_string(), format!("instant:{i}")),
    }
}

/// Resolves `at` on `src` (`tag_branch`: the working branch whose tag or instant `at` names;
/// `None`: main): `Main`/`Branch` = the root's latest completed write; `Tag` = the unexpired
/// tag's instant; `Instant` = a completed write of the root's active timeline. When the source
/// is itself a clone, an instant before its own clone point is refused (its history before it
/// is not retained). Reads only.
pub(crate) async fn resolve_at(
    src: &OpenedSource,
    at: &CloneAt,
    tag_branch: Option<&str>,
    op: &str,
) -> Result<ResolvedRef> {
    let (root_name, reference) = names_of(at, tag_branch);
    let root = root_named(&src.storage, &root_name).await?;
    check_cloneable(src, &root, op).await?;
    let view = root.view(src.storage.clone());
    let config = TableConfig::load(view.as_ref(), DEFAULT_META_DIR).await?;
    let layout = TableLayout::from_config(DEFAULT_META_DIR, &config)?;
    let tl = ActiveTimeline::load(view, layout).await?;
    let writes: Vec<InstantTime> = tl
        .completed_writes()
        .into_iter()
        .map(|i| i.requested_time)
        .collect();
    let instant = match at {
        CloneAt::Main | CloneAt::Branch(_) => writes.iter().max().cloned().ok_or_else(|| {
            BranchingError::refused(
                op,
                format!("{root} of {} has no completed write", src.location),
            )
        })?,
        CloneAt::Tag(t) => {
            let (_, tag) = resolve_tag(&src.storage, Some(&root_name), t).await?;
            InstantTime::parse(&tag.instant)?
        }
        CloneAt::Instant(i) => {
            if !writes.contains(i) {
                return Err(BranchingError::refused(
                    op,
                    format!(
                        "{i} is not a completed write of {root} of {} (its active timeline)",
                        src.location
                    ),
                ));
            }
            i.clone()
        }
    };
    check_after_clone_point(src, &instant, op)?;
    Ok(ResolvedRef {
        root,
        root_name,
        reference,
        instant,
    })
}

/// Refuses an instant before the source's own clone point (when the source is a clone).
pub(crate) fn check_after_clone_point(
    src: &OpenedSource,
    instant: &InstantTime,
    op: &str,
) -> Result<()> {
    let Some(d) = &src.descriptor else {
        return Ok(());
    };
    if let (Some(point), Some(farther)) = (d.clone_point()?, d.sources.first()) {
        if *instant < point {
            return Err(BranchingError::refused(
                op,
                format!(
                    "{instant} is before {}'s own clone point {point} (a clone does not retain \
                     its source's history before it); clone the farther source {} directly",
                    src.location, farther.location
                ),
            ));
        }
    }
    Ok(())
}

/// The `ClonedStorage` of clone `d` whose own location is `own`, over each source's own storage
/// (usable before activation, when `open_location` still refuses the clone).
pub(crate) fn cloned_storage(
    opener: &dyn LocationOpener,
    own: &Arc<dyn Storage>,
    d: &CloneDescriptor,
) -> Result<Arc<dyn Storage>> {
    let mut sources = Vec::with_capacity(d.sources.len());
    for s in &d.sources {
        let storage = opener
            .open(&s.location)
            .map_err(|e| TimelineError::CloneSource {
                location: s.location.clone(),
                reason: e.to_string(),
            })?;
        sources.push((s.clone(), storage));
    }
    Ok(Arc::new(ClonedStorage::new(own.clone(), sources)?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use arbor_storage::ObjectStoreStorage;
    use arbor_timeline::layout::CloneSource;

    use super::*;

    #[test]
    fn test_names_of_records_root_and_reference() {
        let t = InstantTime::parse("20261202000000100").unwrap();
        assert_eq!(
            names_of(&CloneAt::Main, None),
            ("main".to_string(), "main".to_string())
        );
        assert_eq!(
            names_of(&CloneAt::Branch("dev".into()), None),
            ("dev".to_string(), "branch:dev".to_string())
        );
        assert_eq!(
            names_of(&CloneAt::Tag("v1".into()), Some("dev")),
            ("dev".to_string(), "tag:v1".to_string())
        );
        assert_eq!(
            names_of(&CloneAt::Instant(t.clone()), None),
            ("main".to_string(), format!("instant:{t}"))
        );
    }

    #[test]
    fn test_an_instant_before_the_sources_clone_point_is_refused() {
        let source = |location: &str, instant: &str| CloneSource {
            location: location.to_string(),
            instant: instant.to_string(),
            root: "main".to_string(),
            reference: "main".to_string(),
        };
        let src = OpenedSource {
            location: "/b".to_string(),
            storage: Arc::new(ObjectStoreStorage::memory()),
            descriptor: Some(CloneDescriptor {
                id: "b".to_string(),
                state: CloneState::Active,
                deep: false,
                created: "2026-12-02T00:00:00Z".to_string(),
                sources: vec![source("/a", "20261202000000200")],
            }),
        };
        let at = |s: &str| InstantTime::parse(s).unwrap();
        let err = check_after_clone_point(&src, &at("20261202000000100"), "clone").unwrap_err();
        assert!(err.to_string().contains("/a"), "{err}");
        check_after_clone_point(&src, &at("20261202000000200"), "clone").unwrap();
        check_after_clone_point(&src, &at("20261202000000300"), "clone").unwrap();
        let plain = OpenedSource {
            descriptor: None,
            ..src
        };
        check_after_clone_point(&plain, &at("20261202000000100"), "clone").unwrap();
    }
}
