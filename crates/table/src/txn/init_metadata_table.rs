//! Creating the metadata table of a table that has none ([`crate::Table::init_metadata_table`]).

use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::TableConfig;

use super::context::Table;
use super::transaction::{Entry, Transaction};
use crate::error::{Result, TableError};
use crate::write::mdt_sync;

/// Creates the metadata table of a table that has none (under the table lock, after rolling
/// back failed writes), from a directory listing of its committed files; from then on
/// every commit updates it and readers list through it. Returns the number of files
/// recorded. Errors: `Unsupported` when the table already has one or has pending instants
/// (e.g. a live writer's).
pub(crate) async fn init_metadata_table(table: &Table) -> Result<usize> {
    let ctx = &table.ctx;
    ctx.refuse_on_branch("creating the metadata table")?;
    // Refused before the lock is taken (and checked again under it).
    let config = TableConfig::load(ctx.storage.as_ref(), DEFAULT_META_DIR).await?;
    if config
        .metadata_partitions()
        .iter()
        .any(|p| p == arbor_mdt::FILES_PARTITION)
    {
        return Err(TableError::Unsupported {
            reason: "the table already has a metadata table with partition files".to_string(),
        });
    }
    Transaction::run(table, Entry::Begin, |txn| async move {
        let out = mdt_sync::init(&ctx.storage, &ctx.layout, &ctx.generator).await?;
        txn.mirror_properties().await?;
        Ok(out)
    })
    .await
}
