//! The open base files of a streamed bulk insert ([`super::write_stream`]): a lane of new
//! file groups per partition the input touches, encoded on the [`EncoderPool`] (a file closes
//! once it reaches `WriteOptions::max_file_size`), and stored (create-if-absent) on runtime
//! tasks while the input goes on.
//!
//! Memory is bounded by `WriteOptions::stream_memory`: the open files' memory, plus the bytes
//! of files closed and not yet stored, stays under it. Half of it is shared by the row groups
//! in progress: an open file's row group is cut once it holds `stream_memory / 2 / lanes`
//! (at least 512 KiB), since a row group in progress costs several times its encoded bytes.
//! Over the bound, the writer first waits for files being closed or stored, then closes the
//! largest open file early (so a write into many partitions makes files smaller than
//! `max_file_size` rather than holding them all).
//!
//! Every partition's marker is created before its first rows are sent. Whatever the outcome,
//! [`OpenFiles::finish`] and [`OpenFiles::abandon`] return only once every store they started
//! has ended, so a rollback after a failure sees every file the write made.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tokio::task::JoinSet;

use super::context::Table;
use super::stream_pool::{Closed, EncoderPool, FileSpec, Lane};
use crate::error::{Result, TableError};
use crate::write::commit;
use crate::write::cow::{store_base_file, EncodedGroup, WrittenGroup};
use crate::write::planner::{rows_by_partition, Input};
use crate::write::schema::DataSchema;

/// The smallest memory at which an open file's row group is cut, however many lanes are
/// open (below it row groups would hold a few hundred rows).
const MIN_ROW_GROUP_MEMORY: u64 = 512 * 1024;

/// The open files (see the module doc).
pub(super) struct OpenFiles<'a> {
    table: &'a Table,
    instant: String,
    schema: DataSchema,
    pool: EncoderPool,
    budget: u64,
    max_storing: usize,
    lanes: BTreeMap<String, Lane>,
    /// Lanes asked to close, with their memory when asked (counted until the answer).
    asked: HashMap<u64, u64>,
    storing: JoinSet<(u64, Result<WrittenGroup>)>,
    storing_bytes: HashMap<u64, u64>,
    stores: u64,
    written: Vec<WrittenGroup>,
}

impl<'a> OpenFiles<'a> {
    /// No file open yet; files of `schema` for `instant`, made as `spec` says, on a pool of
    /// `WriteOptions::parallelism` threads.
    pub(super) fn new(table: &'a Table, schema: DataSchema, spec: FileSpec) -> Self {
        let options = &table.ctx.options;
        let threads = options.parallelism.get();
        OpenFiles {
            table,
            instant: spec.instant.clone(),
            schema,
            pool: EncoderPool::start(threads, spec),
            budget: options.stream_memory,
            max_storing: threads * 2,
            lanes: BTreeMap::new(),
            asked: HashMap::new(),
            storing: JoinSet::new(),
            storing_bytes: HashMap::new(),
            stores: 0,
            written: Vec::new(),
        }
    }

    /// The schema every file is written with.
    pub(super) fn schema(&self) -> &DataSchema {
        &self.schema
    }

    /// Sends every row of `input` to its partition's lane, then keeps memory within the bound.
    pub(super) async fn add(&mut self, input: Input) -> Result<()> {
        let input = Arc::new(input);
        let by_partition = rows_by_partition(&input, (0..input.keys.len()).collect())?;
        for (partition, rows) in by_partition {
            if !self.lanes.contains_key(partition) {
                commit::ensure_partition_marker(&self.table.ctx.storage, partition, &self.instant)
                    .await?;
                let lane = self.pool.lane(partition);
                self.lanes.insert(partition.to_string(), lane);
                // Half the bound for the row groups in progress, shared by the open lanes.
                let lanes = self.lanes.len() as u64;
                self.pool
                    .spec()
                    .set_row_group_memory((self.budget / 2 / lanes).max(MIN_ROW_GROUP_MEMORY));
            }
            if let Some(lane) = self.lanes.get(partition) {
                self.pool.append(lane, &input, rows).await?;
            }
        }
        drop(input);
        while let Some(closed) = self.pool.try_closed() {
            self.closed(closed)?;
        }
        self.bound_memory().await?;
        while self.storing.len() > self.max_storing {
            self.wait_one().await?;
        }
        Ok(())
    }

    /// Closes and stores every open file; waits for every store. Returns the stored files, or
    /// the first error (after every started store has ended).
    pub(super) async fn finish(mut self) -> Result<Vec<WrittenGroup>> {
        let result = self.close_all().await;
        self.drain().await;
        result.map(|()| self.written)
    }

    /// Ends the write after an error: waits for every store it started (their results
    /// dropped) and stops the pool, so no file appears after the caller rolls back.
    pub(super) async fn abandon(mut self) {
        self.drain().await;
    }

    async fn drain(&mut self) {
        while self.storing.join_next().await.is_some() {}
        self.pool.shut_down().await;
    }

    async fn close_all(&mut self) -> Result<()> {
        // Earlier asks answered first: a lane is asked at most once at a time.
        while !self.asked.is_empty() {
            self.wait_one().await?;
        }
        let ids: Vec<u64> = self.lanes.values().map(Lane::id).collect();
        for lane in self.lanes.values() {
            self.pool.close(lane).await?;
        }
        for id in ids {
            self.asked.insert(id, 0);
        }
        while !self.asked.is_empty() || !self.storing.is_empty() {
            self.wait_one().await?;
        }
        Ok(())
    }

    /// Keeps the open files plus the files not yet stored within the memory bound.
    async fn bound_memory(&mut self) -> Result<()> {
        loop {
            let open: u64 = self
                .lanes
                .values()
                .filter(|l| !self.asked.contains_key(&l.id()))
                .map(Lane::memory)
                .sum();
            let pending: u64 =
                self.asked.values().sum::<u64>() + self.storing_bytes.values().sum::<u64>();
            if open + pending <= self.budget {
                return Ok(());
            }
            if !self.asked.is_empty() || !self.storing.is_empty() {
                self.wait_one().await?;
                continue;
            }
            let largest = self
                .lanes
                .values()
                .filter(|l| l.memory() > 0)
                .max_by_key(|l| l.memory());
            let Some(lane) = largest else {
                return Ok(());
            };
            self.asked.insert(lane.id(), lane.memory());
            self.pool.close(lane).await?;
        }
    }

    /// Waits for one closed file (while a lane's answer is due) or one finished store.
    async fn wait_one(&mut self) -> Result<()> {
        if !self.asked.is_empty() {
            let closed = self
                .pool
                .next_closed()
                .await
                .ok_or_else(|| TableError::Unsupported {
                    reason: "a streamed write's encoder threads stopped".into(),
                })?;
            return self.closed(closed);
        }
        if let Some(joined) = self.storing.join_next().await {
            self.stored(joined)?;
        }
        Ok(())
    }

    /// Starts storing a closed file, or fails with the error that stopped its lane.
    fn closed(&mut self, closed: Closed) -> Result<()> {
        if closed.asked {
            self.asked.remove(&closed.lane);
        }
        let Some(file) = closed.result? else {
            return Ok(());
        };
        let id = self.stores;
        self.stores += 1;
        self.storing_bytes
            .insert(id, file.encoded.bytes.len() as u64);
        let group = EncodedGroup::inserted(file.key, file.partition, file.file_id, file.encoded);
        let storage = Arc::clone(&self.table.ctx.storage);
        self.storing
            .spawn(async move { (id, store_base_file(storage.as_ref(), group).await) });
        Ok(())
    }

    /// Records a finished store.
    fn stored(
        &mut self,
        joined: std::result::Result<(u64, Result<WrittenGroup>), tokio::task::JoinError>,
    ) -> Result<()> {
        let (id, result) = joined.map_err(|e| TableError::Unsupported {
            reason: format!("storing a streamed write's file: {e}"),
        })?;
        self.storing_bytes.remove(&id);
        self.written.push(result?);
        Ok(())
    }
}
