//! The FILES listing of the metadata table against the data table's directory listing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use arbor_fsview::{FileSystemView, Horizon};
use arbor_mdt::MetadataTable;
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_testkit::fixtures::{fixture_name, fixture_zips, fixtures_root_or_skip, unzip_table};

type Listing = BTreeMap<String, BTreeSet<(String, u64)>>;

fn storage_at(base: &Path) -> Arc<dyn Storage> {
    Arc::new(ObjectStoreStorage::local(base).unwrap())
}

/// Every committed data file (all slices of all file groups, replaced groups included) per
/// partition, as the data table's directory listing shows it.
async fn committed_data_files(storage: Arc<dyn Storage>) -> Listing {
    let view = FileSystemView::open(storage).await.unwrap();
    let mut out = Listing::new();
    for partition in view.partitions().await.unwrap().iter() {
        let mut files = BTreeSet::new();
        for group in view.file_groups(partition, &Horizon::Latest).await.unwrap() {
            for slice in group.slices.values() {
                if let Some(b) = &slice.base_file {
                    files.insert((b.file_name(), b.size));
                }
                for l in &slice.log_files {
                    files.insert((l.file_name(), l.size));
                }
            }
        }
        if !files.is_empty() {
            out.insert(partition.clone(), files);
        }
    }
    out
}

async fn mdt_listing(storage: Arc<dyn Storage>) -> Option<Listing> {
    let mdt = MetadataTable::open(storage).await.unwrap()?;
    let listing = mdt.files_listing().await.unwrap();
    Some(
        listing
            .into_iter()
            .filter(|(_, files)| !files.is_empty())
            .map(|(p, files)| (p, files.into_iter().collect()))
            .collect(),
    )
}

#[tokio::test]
async fn test_files_listing_fixtures_match_committed_data_files() {
    let Some(root) = fixtures_root_or_skip("mdt files listing") else {
        return;
    };
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for zip in fixture_zips(&root) {
        let name = fixture_name(&root, &zip);
        let (_dir, base) = unzip_table(&zip);
        if !base.join(".hoodie/metadata/files").is_dir() {
            continue;
        }
        let storage = storage_at(&base);
        let mdt = mdt_listing(storage.clone())
            .await
            .unwrap_or_else(|| panic!("{name}: MDT present but open returned None"));
        let data = committed_data_files(storage).await;
        checked += 1;
        if mdt == data {
            let n: usize = data.values().map(BTreeSet::len).sum();
            println!("{name}: MATCH ({} partitions, {n} files)", data.len());
        } else {
            println!("{name}: MISMATCH");
            for p in mdt.keys().chain(data.keys()).collect::<BTreeSet<_>>() {
                let m = mdt.get(p).cloned().unwrap_or_default();
                let d = data.get(p).cloned().unwrap_or_default();
                for f in m.difference(&d) {
                    println!("  [{p}] only in MDT: {f:?}");
                }
                for f in d.difference(&m) {
                    println!("  [{p}] only in listing: {f:?}");
                }
            }
            mismatches.push(name);
        }
    }
    println!("checked {checked} fixtures with an MDT");
    assert!(checked > 0, "no fixture has .hoodie/metadata/files");
    assert!(
        mismatches.is_empty(),
        "mismatching fixtures: {mismatches:?}"
    );
}

#[tokio::test]
async fn test_open_without_mdt_returns_none() {
    let dir = tempfile::tempdir().unwrap();
    let storage = storage_at(dir.path());
    assert!(MetadataTable::open(storage).await.unwrap().is_none());
}

/// The partition-scoped listing a writer uses (ranged HFile reads of the asked partitions'
/// records, the MDT's active timeline only) equals the full listing, partition by partition
/// and for all partitions at once, on every fixture with a metadata table.
#[tokio::test]
async fn test_scoped_files_listing_equals_full_listing_on_fixtures() {
    let Some(root) = fixtures_root_or_skip("mdt scoped files listing") else {
        return;
    };
    let mut checked = 0;
    for zip in fixture_zips(&root) {
        let name = fixture_name(&root, &zip);
        let (_dir, base) = unzip_table(&zip);
        if !base.join(".hoodie/metadata/files").is_dir() {
            continue;
        }
        let storage = storage_at(&base);
        let full = MetadataTable::open(storage.clone())
            .await
            .unwrap()
            .unwrap()
            .files_listing()
            .await
            .unwrap();
        let active = MetadataTable::open_active(storage.clone())
            .await
            .unwrap()
            .unwrap();
        let mut partitions: Vec<&str> = full.keys().map(String::as_str).collect();
        partitions.push("no/such/partition");
        for p in &partitions {
            let one = active.files_listing_of(&[p]).await.unwrap();
            assert_eq!(one.get(*p), full.get(*p), "{name}: partition {p:?}");
            assert!(one.len() <= 1, "{name}: {p:?} answered {:?}", one.keys());
        }
        let all = active.files_listing_of(&partitions).await.unwrap();
        assert_eq!(all, full, "{name}");
        assert_eq!(active.files_listing().await.unwrap(), full, "{name}");
        checked += 1;
    }
    println!("checked {checked} fixtures with an MDT");
    assert!(checked > 0, "no fixture has .hoodie/metadata/files");
}
