//! What a write knows of the table's history: the active timeline, and whether anything older
//! was archived. A write never reads the archived timeline (its cost would grow with the
//! table's age); the checks that look back to the table's first write
//! ([`crate::read::skipping::unique_keys`]) assume the worst when the archive may hold a write.

use std::sync::Arc;

use arbor_storage::{Storage, StorageExt};
use arbor_timeline::archive::manifest::version_key;
use arbor_timeline::archive::TimelineHistory;
use arbor_timeline::TableLayout;

use crate::error::Result;
use crate::read::skipping::unique_keys;

/// The history a write plans with: the active timeline (as a [`TimelineHistory`] without
/// archived side, from [`crate::read::TableReader::open_for_write`]) and where to ask whether
/// the archive holds anything.
#[derive(Clone, Copy)]
pub(crate) struct WriteHistory<'a> {
    /// The active timeline the write's view was built from.
    pub(crate) active: &'a TimelineHistory,
    pub(crate) storage: &'a Arc<dyn Storage>,
    pub(crate) layout: &'a TableLayout,
}

impl WriteHistory<'_> {
    /// True when an instant may be only in the archived timeline: the LSM timeline's
    /// `_version_` file exists. The archiver writes it after the first manifest and deletes
    /// active instant files only after that, so while it is absent every archived instant is
    /// still active too. One HEAD, whatever the archive's size.
    pub(crate) async fn may_have_archived(&self) -> Result<bool> {
        match self.layout.history_dir.as_deref() {
            Some(dir) => Ok(self.storage.exists(&version_key(dir)).await?),
            None => Ok(false),
        }
    }

    /// [`unique_keys::repeat_risk`] of the whole history, without reading the archive: when
    /// something is archived, an archived insert may have stored a key twice in one file, so
    /// the answer is a risk.
    pub(crate) async fn repeat_risk(&self) -> Result<Option<String>> {
        if self.may_have_archived().await? {
            return Ok(Some(archived_reason()));
        }
        Ok(unique_keys::repeat_risk(self.active).await)
    }

    /// [`unique_keys::duplicate_risk`] of the whole history, without reading the archive: when
    /// something is archived, the table's first write is not on the active timeline and an
    /// archived insert may have written a key that already existed elsewhere.
    pub(crate) async fn duplicate_risk(&self) -> Result<Option<String>> {
        if self.may_have_archived().await? {
            return Ok(Some(archived_reason()));
        }
        Ok(unique_keys::duplicate_risk(self.active).await)
    }
}

fn archived_reason() -> String {
    "the table has archived instants, which a write does not read; any of them may be an insert"
        .to_string()
}
