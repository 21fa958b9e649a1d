//! Key generation checked against the Spark-written fixture tables: for every base file of
//! every table with meta fields and a key generator arbor reproduces, the record keys and
//! partition paths recomputed from the data columns equal `_hoodie_record_key` and
//! `_hoodie_partition_path`.
//!
//! Not reproduced (skipped, listed in the test's output): TIMESTAMP key generator tables
//! (`*timebasedkeygen*`), tables without meta fields, Lance base files.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_format::base::read_base_file;
use arbor_format::meta;
use arbor_storage::{ObjectStoreStorage, Storage};
use arbor_table::keygen::{KeyGenerator, KeyGeneratorType};
use arbor_table::TableError;
use arbor_timeline::TableConfig;
use arrow_array::cast::AsArray;
use arrow_array::RecordBatch;

fn fixtures_root_or_skip(test: &str) -> Option<PathBuf> {
    let root = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures"
    ));
    if root.is_dir() {
        return Some(root);
    }
    let msg = format!("SKIPPED: ../shared/fixtures not found ({test})");
    assert!(std::env::var_os("CI").is_none(), "{msg}, but CI is set");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{msg}");
    None
}

fn collect(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if path.is_dir() {
            if name != "__MACOSX" && name != ".hoodie" {
                collect(&path, ext, out);
            }
        } else if !name.starts_with("._") && path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// The table base: the shallowest directory holding `.hoodie` (ignoring `__MACOSX`).
fn table_base(dir: &Path) -> Option<PathBuf> {
    let mut level = vec![dir.to_path_buf()];
    while !level.is_empty() {
        let mut next = Vec::new();
        for d in level {
            if d.join(".hoodie").is_dir() {
                return Some(d);
            }
            for entry in fs::read_dir(&d).ok()?.flatten() {
                if entry.path().is_dir() && entry.file_name() != "__MACOSX" {
                    next.push(entry.path());
                }
            }
        }
        level = next;
    }
    None
}

#[tokio::test]
async fn test_keys_recomputed_from_data_equal_fixture_meta_columns() {
    let Some(root) = fixtures_root_or_skip("keygen against fixtures") else {
        return;
    };
    let mut zips = Vec::new();
    collect(&root, "zip", &mut zips);
    zips.sort();
    let mut checked_tables = Vec::new();
    let mut skipped = Vec::new();
    let mut kinds_checked = std::collections::BTreeSet::new();
    let mut rows_checked = 0usize;
    for zip in &zips {
        let dir = tempfile::tempdir().unwrap();
        zip::ZipArchive::new(fs::File::open(zip).unwrap())
            .unwrap()
            .extract(dir.path())
            .unwrap();
        let name = zip.file_stem().unwrap().to_string_lossy().to_string();
        let Some(base) = table_base(dir.path()) else {
            skipped.push(format!("{name}: no .hoodie"));
            continue;
        };
        let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(&base).unwrap());
        let config = TableConfig::load(storage.as_ref(), ".hoodie")
            .await
            .unwrap();
        if !config.populate_meta_fields() {
            skipped.push(format!("{name}: no meta fields"));
            continue;
        }
        let generator = match KeyGenerator::from_table_config(&config) {
            Ok(g) => g,
            Err(TableError::Unsupported { reason }) => {
                skipped.push(format!("{name}: {reason}"));
                continue;
            }
            Err(e) => panic!("{name}: {e}"),
        };
        let mut files = Vec::new();
        collect(&base, "parquet", &mut files);
        files.sort();
        if files.is_empty() {
            skipped.push(format!("{name}: no parquet base files"));
            continue;
        }
        for file in &files {
            let key = file
                .strip_prefix(&base)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let batches = read_base_file(Arc::clone(&storage), &key, None)
                .await
                .unwrap();
            let mut first_row = 0;
            for batch in &batches {
                check_batch(&generator, batch, first_row, &format!("{name}/{key}"));
                first_row += batch.num_rows();
            }
            rows_checked += first_row;
        }
        kinds_checked.insert(generator.config().kind.name());
        checked_tables.push(name);
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "keygen fixtures: checked {} tables ({rows_checked} rows): {checked_tables:?}; skipped: {skipped:?}",
        checked_tables.len()
    );
    // The fixtures cover all three reproduced generators, hive and non-hive style.
    for kind in [
        KeyGeneratorType::Simple,
        KeyGeneratorType::Complex,
        KeyGeneratorType::NonPartition,
    ] {
        assert!(
            kinds_checked.contains(kind.name()),
            "{kind:?} never checked"
        );
    }
    assert!(rows_checked > 100, "only {rows_checked} rows checked");
    assert!(
        skipped
            .iter()
            .any(|s| s.contains("TIMESTAMP") || s.contains("Timestamp")),
        "timestamp keygen tables were expected to be skipped: {skipped:?}"
    );
}

fn check_batch(generator: &KeyGenerator, batch: &RecordBatch, first_row: usize, what: &str) {
    let keys = generator.keys_at(batch, first_row).unwrap();
    let stored_keys = batch
        .column_by_name(meta::RECORD_KEY)
        .unwrap()
        .as_string::<i32>();
    let stored_paths = batch
        .column_by_name(meta::PARTITION_PATH)
        .unwrap()
        .as_string::<i32>();
    for (row, key) in keys.iter().enumerate() {
        assert_eq!(key.record_key, stored_keys.value(row), "{what} row {row}");
        assert_eq!(
            key.partition_path,
            stored_paths.value(row),
            "{what} row {row}"
        );
    }
}
