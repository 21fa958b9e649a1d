//! Creating an index in the metadata table: the record index
//! ([`crate::Table::create_record_index`]) and secondary indexes
//! ([`crate::Table::create_secondary_index`]), column and partition stats
//! ([`crate::Table::create_stats_indexes`]).

use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::TableConfig;

use super::context::Table;
use super::transaction::{Entry, Transaction};
use crate::error::{Result, TableError};
use crate::write::column_stats::{init_stats_indexes, StatsIndexes};
use crate::write::record_index::has_record_index;
use crate::write::{mdt_sync, secondary_index};

/// Creates the record index (in the metadata table, which must exist) under the table lock:
/// from then on upserts and deletes find their file groups through it and keys are global
/// (see [`WriteOptions::key_move`]). Returns the number of keys indexed. Errors:
/// `Unsupported` without a metadata table, with a record index, or with pending instants.
pub(crate) async fn record_index(table: &Table) -> Result<usize> {
    let ctx = &table.ctx;
    ctx.refuse_on_branch("creating a record index")?;
    let config = TableConfig::load(ctx.storage.as_ref(), DEFAULT_META_DIR).await?;
    if has_record_index(&config) {
        return Err(TableError::Unsupported {
            reason: "the table already has a record index".to_string(),
        });
    }
    Transaction::run(table, Entry::Begin, |txn| async move {
        let out = mdt_sync::init_record_index(&ctx.storage, &ctx.layout, &ctx.generator).await?;
        txn.mirror_properties().await?;
        Ok(out)
    })
    .await
}

/// Creates secondary index `name` (MDT partition `secondary_index_<name>`) on `column`
/// under the table lock (after rolling back failed writes): from then on every write keeps
/// it in step and [`crate::secondary_lookup`] answers from it. Returns the number of
/// (value, key) entries indexed. Errors: `Unsupported` without a metadata table, with
/// pending instants, for an existing index of that name or a column type without a known
/// text form; `InvalidInput` for an unknown column or a bad name.
pub(crate) async fn secondary(table: &Table, name: &str, column: &str) -> Result<usize> {
    let ctx = &table.ctx;
    ctx.refuse_on_branch("creating a secondary index")?;
    Transaction::run(table, Entry::Begin, |txn| async move {
        let out = secondary_index::init_secondary_index(
            &ctx.storage,
            &ctx.layout,
            &ctx.generator,
            &ctx.schema.arrow,
            name,
            column,
        )
        .await?;
        txn.mirror_properties().await?;
        Ok(out)
    })
    .await
}

/// Creates the `column_stats` and/or `partition_stats` partitions under the table lock (see
/// [`crate::Table::create_stats_indexes`]).
pub(crate) async fn stats(
    table: &Table,
    column_stats: bool,
    partition_stats: bool,
) -> Result<usize> {
    let ctx = &table.ctx;
    ctx.refuse_on_branch("creating column or partition stats")?;
    let which = StatsIndexes {
        column_stats,
        partition_stats,
    };
    Transaction::run(table, Entry::Begin, |txn| async move {
        let out = init_stats_indexes(&ctx.storage, &ctx.layout, &ctx.generator, which).await?;
        txn.mirror_properties().await?;
        Ok(out)
    })
    .await
}
