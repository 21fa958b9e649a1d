//! [`KnownLocations`]: where the caller of a write already knows each key is stored (a merge
//! that read the target's file groups), and the index that answers from it, asking the table's
//! own index only about the keys it does not know.

use std::collections::HashMap;

use arbor_fsview::FileSystemView;
use async_trait::async_trait;

use super::index::{Index, RecordLocation};
use crate::error::{Result, TableError};
use crate::read::OrderKey;

/// Where keys of one write are stored in the table state the caller read: per (partition,
/// record key), the file group holding it with its record's ordering value, or `None` for a
/// key the table does not hold. A key not listed is looked up by the table's index.
///
/// Guarantee the caller gives: every listed location is the file group that holds the key in
/// the table's latest state (a location naming a file group without a latest slice fails the
/// write, never writes elsewhere).
#[derive(Debug, Clone, Default)]
pub struct KnownLocations {
    map: HashMap<(String, String), Option<(String, OrderKey)>>,
}

impl KnownLocations {
    /// No known location.
    pub fn new() -> Self {
        Self::default()
    }

    /// Key `key` of `partition` is in file group `file_id` with ordering value `ordering`
    /// ([`OrderKey::Default`] when unknown), or (`None`) not in the table.
    pub fn insert(&mut self, partition: &str, key: &str, location: Option<(String, OrderKey)>) {
        self.map
            .insert((partition.to_string(), key.to_string()), location);
    }

    /// How many keys are listed.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when no key is listed.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn get(&self, partition: &str, key: &str) -> Option<&Option<(String, OrderKey)>> {
        self.map.get(&(partition.to_string(), key.to_string()))
    }
}

/// [`KnownLocations`] first, `fallback` for the keys they do not list.
#[derive(Debug)]
pub(crate) struct KnownIndex<'a> {
    pub known: &'a KnownLocations,
    pub fallback: &'a dyn Index,
    pub view: &'a FileSystemView,
}

impl KnownIndex<'_> {
    /// The known answers (with the base instant of each group's latest slice) and the keys
    /// left for the fallback.
    async fn split(
        &self,
        partition: &str,
        keys: &[String],
    ) -> Result<(HashMap<String, (RecordLocation, OrderKey)>, Vec<String>)> {
        let mut known = HashMap::new();
        let mut rest = Vec::new();
        let mut slices = None;
        for k in keys {
            match self.known.get(partition, k) {
                None => rest.push(k.clone()),
                Some(None) => {}
                Some(Some((file_id, order))) => {
                    if slices.is_none() {
                        slices = Some(
                            self.view
                                .latest_file_slices(Some(partition), None)
                                .await
                                .map_err(TableError::from_fsview)?,
                        );
                    }
                    let slice = slices
                        .as_ref()
                        .and_then(|s| s.iter().find(|s| &s.file_id == file_id))
                        .ok_or_else(|| TableError::Unsupported {
                            reason: format!(
                                "the write was told key {k:?} is in file group {file_id} of \
                                 partition {partition:?}, which has no latest slice"
                            ),
                        })?;
                    known.insert(
                        k.clone(),
                        (
                            RecordLocation {
                                partition: partition.to_string(),
                                file_id: file_id.clone(),
                                base_instant: slice.base_instant.clone(),
                            },
                            order.clone(),
                        ),
                    );
                }
            }
        }
        Ok((known, rest))
    }
}

#[async_trait]
impl Index for KnownIndex<'_> {
    async fn locate(
        &self,
        partition: &str,
        keys: &[String],
    ) -> Result<HashMap<String, RecordLocation>> {
        let (known, rest) = self.split(partition, keys).await?;
        let mut out: HashMap<String, RecordLocation> =
            known.into_iter().map(|(k, (l, _))| (k, l)).collect();
        if !rest.is_empty() {
            out.extend(self.fallback.locate(partition, &rest).await?);
        }
        Ok(out)
    }

    async fn locate_with_ordering(
        &self,
        partition: &str,
        keys: &[String],
        ordering_field: &str,
    ) -> Result<HashMap<String, (RecordLocation, Option<OrderKey>)>> {
        let (known, rest) = self.split(partition, keys).await?;
        let mut out: HashMap<String, (RecordLocation, Option<OrderKey>)> = known
            .into_iter()
            .map(|(k, (l, o))| (k, (l, Some(o))))
            .collect();
        if !rest.is_empty() {
            out.extend(
                self.fallback
                    .locate_with_ordering(partition, &rest, ordering_field)
                    .await?,
            );
        }
        Ok(out)
    }

    async fn locate_all(
        &self,
        partition: &str,
        keys: &[String],
    ) -> Result<HashMap<String, Vec<RecordLocation>>> {
        let (known, rest) = self.split(partition, keys).await?;
        let mut out: HashMap<String, Vec<RecordLocation>> =
            known.into_iter().map(|(k, (l, _))| (k, vec![l])).collect();
        if !rest.is_empty() {
            out.extend(self.fallback.locate_all(partition, &rest).await?);
        }
        Ok(out)
    }
}
