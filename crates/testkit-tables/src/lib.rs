//! Test support shared by the cleaner's and the branching integration tests: a small table (`id`
//! key, `region` partition, `ts` ordering, `name`) on local storage, rows, canonical reads of main
//! and of branches, metadata-table validation and the peer check.
//!
//! It is a crate of its own, not a module of `arbor-testkit`, because it depends on arbor-table
//! (and on arbor-branching), whose own tests depend on `arbor-testkit`.
//!
//! Only for tests (`publish = false`, used as a path-only dev-dependency). A helper that cannot do
//! its job fails the calling test at once, so `unwrap`, `expect`, `panic!` and indexing are
//! allowed here as they are in the tests themselves.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::PathBuf;
use std::sync::Arc;

use arbor_storage::{ObjectStoreStorage, Storage, StorageExt};
use arbor_table::read::TableReader;
use arbor_table::{CreateOptions, Table, WriteOperation};
use arbor_timeline::config::{RecordMergeMode, TableType, TableVersion};
use arbor_timeline::InstantTime;

pub use arbor_testkit::tables::{batch, rows, rows_of, schema, Model, Row};

/// A table in a temporary directory.
pub struct TestTable {
    /// The temporary directory (removed when dropped).
    pub _tmp: tempfile::TempDir,
    /// The table's base directory (inside `_tmp`).
    pub base: PathBuf,
    /// Local storage over `base`.
    pub storage: Arc<dyn Storage>,
    /// The table's write handle (main).
    pub table: Table,
}

/// Creates the small table (`id` key, `region` partition, `ts` ordering, event-time merging) of
/// `table_type`, with a metadata table when `metadata_table`, in a fresh temporary directory,
/// at the default table version (9).
pub async fn create(table_type: TableType, metadata_table: bool) -> TestTable {
    create_at(table_type, metadata_table, TableVersion::default()).await
}

/// [`create`] at table version `version`.
pub async fn create_at(
    table_type: TableType,
    metadata_table: bool,
    version: TableVersion,
) -> TestTable {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("t");
    std::fs::create_dir_all(&base).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
    let table = Table::create(
        storage.clone(),
        CreateOptions {
            name: "t".into(),
            table_type,
            record_key_fields: vec!["id".into()],
            partition_fields: vec!["region".into()],
            hive_style_partitioning: true,
            ordering_field: Some("ts".into()),
            merge_mode: Some(RecordMergeMode::EventTimeOrdering),
            schema: schema(),
            metadata_table,
            table_version: version,
            base_format: Default::default(),
        },
    )
    .await
    .unwrap();
    TestTable {
        _tmp: tmp,
        base,
        storage,
        table,
    }
}

impl TestTable {
    /// Writes and returns the instant.
    pub async fn write(&self, op: WriteOperation, rows: &[Row]) -> InstantTime {
        self.table
            .write(op, vec![batch(rows)])
            .await
            .unwrap()
            .instant
    }

    /// The rows of main's snapshot as of `as_of` (latest when `None`), sorted.
    pub async fn read(&self, as_of: Option<&InstantTime>) -> Vec<Row> {
        let reader = TableReader::open(self.storage.clone()).await.unwrap();
        rows_of(&reader.snapshot(as_of).await.unwrap())
    }

    /// The rows of `branch` (main for `None`) as of `as_of`, sorted.
    pub async fn read_branch(&self, branch: Option<&str>, as_of: Option<&InstantTime>) -> Vec<Row> {
        let reader = arbor_branching::open_reader(self.storage.clone(), branch)
            .await
            .unwrap();
        rows_of(&reader.snapshot(as_of).await.unwrap())
    }

    /// A write handle of working branch `name`.
    pub async fn branch(&self, name: &str) -> Table {
        arbor_branching::open_branch(self.storage.clone(), name)
            .await
            .unwrap()
    }

    /// Writes on `table` (any root) and returns the instant.
    pub async fn write_on(&self, table: &Table, op: WriteOperation, rows: &[Row]) -> InstantTime {
        table.write(op, vec![batch(rows)]).await.unwrap().instant
    }

    /// Asserts the metadata table of `branch` agrees with storage.
    pub async fn assert_branch_valid(&self, branch: &str, step: &str) {
        let view = arbor_timeline::MetaRoot::Branch(branch.to_string()).view(self.storage.clone());
        let report = arbor_mdt::validate::validate_table(view).await.unwrap();
        assert!(
            report.discrepancies.is_empty(),
            "{step}: {:?}",
            report.discrepancies
        );
    }

    /// Every key in storage (sorted), except locks and heartbeats.
    pub async fn listing(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .storage
            .list_all("")
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .filter(|k| !k.starts_with(".hoodie/.locks") && !k.starts_with(".hoodie/.heartbeat"))
            .collect();
        keys.sort();
        keys
    }

    /// Data files (parquet and log files) in storage.
    pub async fn data_files(&self) -> Vec<String> {
        self.listing()
            .await
            .into_iter()
            .filter(|k| !k.starts_with(".hoodie"))
            .filter(|k| k.ends_with(".parquet") || k.contains(".log."))
            .collect()
    }

    /// Asserts the metadata table of main (as `arbor_timeline::resolve_main` resolves it: the
    /// root while nothing is published) agrees with storage.
    pub async fn assert_valid(&self, step: &str) {
        let main = arbor_timeline::resolve_main(self.storage.as_ref())
            .await
            .unwrap();
        let report = arbor_mdt::validate::validate_table(main.view(self.storage.clone()))
            .await
            .unwrap();
        assert!(
            report.discrepancies.is_empty(),
            "{step}: {:?}",
            report.discrepancies
        );
    }

    /// hudi-rs reads the latest snapshot with the same rows as arbor (`row_count` and
    /// `data_sha256` through `scripts/peer_digest.py`; skipped visibly without the peer
    /// outside CI, the skip naming `need`, e.g. `"cleaner peer check"`).
    pub async fn assert_peer_agrees(&self, need: &str, step: &str) {
        let Some(python) = arbor_testkit::peer_python_or_skip(need) else {
            return;
        };
        let reader = TableReader::open(self.storage.clone()).await.unwrap();
        let ours = reader.snapshot(None).await.unwrap();
        arbor_testkit::assert_peer_snapshot_matches(
            &python,
            &self.base,
            reader.schema(),
            &ours,
            step,
        );
    }
}
