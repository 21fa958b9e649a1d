//! Helpers shared by the clone tests: a registry opener over local directories, clone requests,
//! and reads of a clone through `open_location`.

use std::path::Path;
use std::sync::Arc;

use arbor_branching::clone::{clone_table, CloneAt, CloneOutcome, CloneRequest};
use arbor_storage::{Storage, StorageOptions};
use arbor_table::read::TableReader;
use arbor_table::{Table, WriteOperation};
use arbor_testkit_tables::{batch, rows_of, Row};
use arbor_timeline::layout::{open_location, RegistryOpener};
use arbor_timeline::InstantTime;

/// Opens local directories (and any registered URL) with default options.
pub fn opener() -> RegistryOpener {
    RegistryOpener::new(StorageOptions::default())
}

/// The location string of a local directory.
pub fn loc(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A shallow clone request.
pub fn request(source: &Path, target: &Path, at: CloneAt) -> CloneRequest {
    CloneRequest {
        source: loc(source),
        target: loc(target),
        at,
        tag_branch: None,
        deep: false,
    }
}

/// Clones and unwraps.
pub async fn clone_ok(source: &Path, target: &Path, at: CloneAt) -> CloneOutcome {
    clone_table(&opener(), &request(source, target, at))
        .await
        .unwrap()
}

/// The table storage at `location` (a clone through its sources).
pub async fn storage_at(location: &Path) -> Arc<dyn Storage> {
    open_location(&loc(location), &opener()).await.unwrap()
}

/// The rows of main of the table at `location` as of `as_of` (latest when `None`), sorted.
pub async fn read_at(location: &Path, as_of: Option<&InstantTime>) -> Vec<Row> {
    let reader = TableReader::open(storage_at(location).await).await.unwrap();
    rows_of(&reader.snapshot(as_of).await.unwrap())
}

/// Main's write handle of the table at `location`.
pub async fn table_at(location: &Path) -> Table {
    Table::open(storage_at(location).await).await.unwrap()
}

/// Writes `rows` on main of the table at `location`; returns the instant.
pub async fn write_at(location: &Path, op: WriteOperation, rows: &[Row]) -> InstantTime {
    table_at(location)
        .await
        .write(op, vec![batch(rows)])
        .await
        .unwrap()
        .instant
}
