//! One side of a merge: the two states whose difference is that side's changes, over the file
//! groups that can hold them.

use std::collections::BTreeSet;

use arbor_fsview::WriteTouch;
use arbor_timeline::avro::WriteOperationType;
use arbor_timeline::{InstantTime, MetaRoot};
use arrow::datatypes::SchemaRef;

use super::resolve::Overwrites;
use crate::diff::state::{Groups, StateScan};
use crate::diff::{compare, PartitionChanges, RefSpec, RootTimeline};
use crate::error::Result;

/// What `writes` replaced wholesale.
pub(crate) fn overwrites(writes: &[WriteTouch]) -> Overwrites {
    let mut o = Overwrites::default();
    for w in writes {
        match w.operation {
            Some(WriteOperationType::InsertOverwriteTable) => o.table = true,
            Some(WriteOperationType::InsertOverwrite | WriteOperationType::DeletePartition) => {
                o.partitions.extend(w.file_groups().map(|(p, _)| p.clone()));
            }
            _ => {}
        }
    }
    o
}

/// One side of a merge, planned: its changes' two states over the file groups that may hold
/// them.
pub(crate) struct Side {
    pub groups: Groups,
    pub before: StateScan,
    pub after: StateScan,
    pub overwrites: Overwrites,
    label: String,
}

impl Side {
    /// The changes from `before` (a root's state) to `after` (the same root's, or another
    /// root's whose differences lie in `groups`), with what `writes` replaced wholesale.
    pub async fn plan(
        before: (&RootTimeline, Option<&InstantTime>),
        after: (&RootTimeline, Option<&InstantTime>),
        groups: Groups,
        writes: &[WriteTouch],
        label: String,
    ) -> Result<Side> {
        let b = StateScan::plan(&before.0.reader, before.1, &groups, &label).await?;
        let a = StateScan::plan(&after.0.reader, after.1, &groups, &label).await?;
        Ok(Side {
            overwrites: overwrites(writes),
            groups,
            before: b,
            after: a,
            label,
        })
    }

    /// The side's changes in `partition`, in `schema` (empty when it did not touch it).
    pub async fn changes(&self, partition: &str, schema: &SchemaRef) -> Result<PartitionChanges> {
        let empty = BTreeSet::new();
        let ids = self.groups.get(partition).unwrap_or(&empty);
        let before = self.before.read(partition, ids).await?;
        let after = self.after.read(partition, ids).await?;
        compare(partition, &before, &after, schema, &self.label)
    }

    /// How many file groups it reads (in each of its two states).
    pub fn file_groups(&self) -> usize {
        self.groups.values().map(BTreeSet::len).sum()
    }
}

/// The spec naming `root`'s branch.
pub(crate) fn spec_of(root: &MetaRoot) -> RefSpec {
    match root {
        MetaRoot::Branch(b) => RefSpec::Branch(b.clone()),
        _ => RefSpec::Main,
    }
}
