//! [`FileSystemView::writes_between`]: the completed writes of a range of requested times and
//! the file groups each changed, from their commit metadata (active or archived): what a
//! diff between two states of one timeline has to read.

use std::collections::{BTreeMap, BTreeSet};

use arbor_timeline::avro::{InstantContent, WriteOperationType, SCHEMA_KEY};
use arbor_timeline::{Instant, InstantTime};

use super::FileSystemView;
use crate::error::{FsViewError, Result};
use crate::listing::validate_partition;
use crate::naming::parse_data_file_name;

/// One completed write and the file groups it changed, as `(partition, file id)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteTouch {
    /// The completed instant (`commit`, `deltacommit` or `replacecommit`).
    pub instant: Instant,
    /// The operation its metadata records (`None` when it records none).
    pub operation: Option<WriteOperationType>,
    /// The file groups its write stats name (files written).
    pub written: BTreeSet<(String, String)>,
    /// The file groups a `replacecommit` replaced (`partitionToReplaceFileIds`).
    pub replaced: BTreeSet<(String, String)>,
    /// Its `extraMetadata`, except the schema.
    pub extra: BTreeMap<String, String>,
}

impl WriteTouch {
    /// Every file group the write changed: written or replaced.
    pub fn file_groups(&self) -> impl Iterator<Item = &(String, String)> {
        self.written.iter().chain(self.replaced.iter())
    }
}

impl FileSystemView {
    /// The completed writes whose **requested** time `t` is in `(after, upto]` (`after`
    /// `None`: from the first), in requested-time order, each with the file groups its
    /// metadata says it wrote or replaced: exactly the writes that make the state as of `upto`
    /// ([`crate::Horizon::AsOf`]) differ from the state as of `after`. Archived instants are
    /// read from the archived timeline. A write whose metadata cannot be read is an error
    /// naming the instant (a diff must never miss a change); an empty metadata file (a
    /// write that wrote nothing) touches nothing.
    pub async fn writes_between(
        &self,
        after: Option<&InstantTime>,
        upto: &InstantTime,
    ) -> Result<Vec<WriteTouch>> {
        let instants: Vec<Instant> = self
            .index
            .completed_writes()
            .filter(|i| after.is_none_or(|a| &i.requested_time > a) && &i.requested_time <= upto)
            .cloned()
            .collect();
        let mut out = Vec::with_capacity(instants.len());
        for instant in instants {
            let content = self.read_completed(&instant).await?;
            let mut touch = WriteTouch {
                instant: instant.clone(),
                operation: None,
                written: BTreeSet::new(),
                replaced: BTreeSet::new(),
                extra: BTreeMap::new(),
            };
            let extra = |m: &Option<BTreeMap<String, String>>| -> BTreeMap<String, String> {
                m.iter()
                    .flatten()
                    .filter(|(k, _)| k.as_str() != SCHEMA_KEY)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            };
            let stats: Vec<(String, Option<String>, Option<String>)> = match &content {
                None => Vec::new(),
                Some(InstantContent::Commit(m)) => {
                    touch.operation = m.operation_type();
                    touch.extra = extra(&m.extra_metadata);
                    m.write_stats()
                        .map(|(p, s)| (p.to_string(), s.file_id.clone(), s.path.clone()))
                        .collect()
                }
                Some(InstantContent::ReplaceCommit(m)) => {
                    touch.operation = m.operation_type();
                    touch.extra = extra(&m.extra_metadata);
                    for (p, id) in m.replaced_file_ids() {
                        touch.replaced.insert((p.to_string(), id.to_string()));
                    }
                    m.write_stats()
                        .map(|(p, s)| (p.to_string(), s.file_id.clone(), s.path.clone()))
                        .collect()
                }
                Some(_) => {
                    return Err(FsViewError::InvalidInstantContent {
                        instant: instant.to_string(),
                        reason: "a completed write whose content is not commit metadata".into(),
                    })
                }
            };
            for (partition, file_id, path) in stats {
                validate_partition(&partition)?;
                let file_id = file_id.filter(|f| !f.is_empty()).or_else(|| {
                    let name = path.as_deref()?.rsplit('/').next()?;
                    parse_data_file_name(name, 0)
                        .ok()
                        .flatten()
                        .map(|d| d.file_id().to_string())
                });
                match file_id {
                    Some(f) => {
                        touch.written.insert((partition, f));
                    }
                    None => {
                        return Err(FsViewError::InvalidInstantContent {
                            instant: instant.to_string(),
                            reason: format!(
                                "a write stat of partition {partition:?} names no file group"
                            ),
                        })
                    }
                }
            }
            out.push(touch);
        }
        Ok(out)
    }
}
