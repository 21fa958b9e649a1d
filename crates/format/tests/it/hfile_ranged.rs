//! `HFileRangedReader`: lookups through ranged reads give `HFileReader::get`'s answers and
//! fetch only the trailer, the load-on-open section and the needed data blocks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbor_format::hfile::{
    Compression, HFileRangedReader, HFileReader, HFileWriter, HFileWriterOptions,
};
use arbor_storage::{FaultInjectingStorage, ObjectStoreStorage, OpKind, Storage};
use arbor_testkit::fixtures::{fixture_zips, fixtures_root_or_skip, unzip_table};
use bytes::Bytes;

fn sample(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let key = format!("key-{i:06}").into_bytes();
            let value = format!("value {i} {}", "x".repeat(i % 97)).into_bytes();
            (key, value)
        })
        .collect()
}

fn write(entries: &[(Vec<u8>, Vec<u8>)], block_size: usize, compression: Compression) -> Bytes {
    let mut w = HFileWriter::new(HFileWriterOptions {
        block_size,
        compression,
    });
    w.set_file_info("schema", "{\"type\":\"string\"}");
    for (k, v) in entries {
        w.append(k, v).unwrap();
    }
    w.finish().unwrap()
}

/// A counting storage holding `bytes` at `f.hfile`; the op log starts empty.
async fn stored(bytes: &Bytes) -> FaultInjectingStorage {
    let inner: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    inner.put("f.hfile", bytes.clone()).await.unwrap();
    FaultInjectingStorage::new(inner)
}

/// What `HFileReader::get` answers for `keys` (present keys only).
fn expected(reader: &HFileReader, keys: &[&[u8]]) -> BTreeMap<Bytes, Bytes> {
    keys.iter()
        .filter_map(|k| {
            reader
                .get(k)
                .unwrap()
                .map(|v| (Bytes::copy_from_slice(k), v))
        })
        .collect()
}

/// The kinds of the operations logged so far; fails on any whole-object GET.
fn ranged_reads(storage: &FaultInjectingStorage) -> usize {
    let ops = storage.ops();
    assert!(
        ops.iter().all(|o| o.kind == OpKind::GetRange),
        "only ranged reads expected: {ops:?}"
    );
    ops.len()
}

#[tokio::test]
async fn test_get_many_many_blocks_both_codecs_matches_hfile_reader() {
    let entries = sample(3000);
    for compression in [Compression::None, Compression::Gz] {
        let bytes = write(&entries, 1024, compression);
        let full = HFileReader::open(bytes.clone(), "f.hfile").unwrap();
        assert!(full.data_block_count() > 100, "{}", full.data_block_count());
        let storage = stored(&bytes).await;
        let r = HFileRangedReader::open(&storage, "f.hfile", bytes.len() as u64)
            .await
            .unwrap();
        assert_eq!(r.entry_count(), 3000);
        assert_eq!(r.compression(), compression);
        assert_eq!(r.data_block_count(), full.data_block_count());
        assert_eq!(r.file_info(), full.file_info());
        assert_eq!(r.file_info_str("schema"), Some("{\"type\":\"string\"}"));

        let mut keys: Vec<Vec<u8>> = entries.iter().step_by(7).map(|(k, _)| k.clone()).collect();
        for absent in ["", "a", "key-000100a", "key-002999z", "zzz", "key-000007"] {
            keys.push(absent.as_bytes().to_vec());
        }
        keys.push(b"key-000014".to_vec()); // a duplicate
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let got = r.get_many(&keys).await.unwrap();
        assert_eq!(got, expected(&full, &keys), "{compression:?}");
        assert_eq!(got.len(), 3000_usize.div_ceil(7));
        assert!(got.contains_key(b"key-000007".as_slice()));

        let all: Vec<&[u8]> = entries.iter().map(|(k, _)| k.as_slice()).collect();
        let got = r.get_many(&all).await.unwrap();
        let want: BTreeMap<Bytes, Bytes> = full.entries().unwrap().into_iter().collect();
        assert_eq!(got, want, "{compression:?}");
        assert!(r.get_many(&[]).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn test_get_many_keys_in_one_block_reads_trailer_index_and_that_block_only() {
    let entries = sample(3000);
    for compression in [Compression::None, Compression::Gz] {
        let bytes = write(&entries, 1024, compression);
        let storage = stored(&bytes).await;
        let r = HFileRangedReader::open(&storage, "f.hfile", bytes.len() as u64)
            .await
            .unwrap();
        assert_eq!(ranged_reads(&storage), 2, "trailer + load-on-open");

        // The first three keys share block 0.
        let got = r
            .get_many(&[b"key-000000", b"key-000002", b"key-000001"])
            .await
            .unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(ranged_reads(&storage), 3, "one data block read");
        let block0 = storage.ops()[2].clone();
        assert_eq!(block0.key, "f.hfile");

        // Keys in the first and last blocks: two separate reads.
        storage.reset();
        let got = r.get_many(&[b"key-000000", b"key-002999"]).await.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(ranged_reads(&storage), 2);

        // A key before the first block needs no read at all.
        storage.reset();
        assert!(r.get_many(&[b"a"]).await.unwrap().is_empty());
        assert_eq!(ranged_reads(&storage), 0);

        // Every block is needed and they are contiguous: one coalesced read.
        storage.reset();
        let all: Vec<&[u8]> = entries.iter().map(|(k, _)| k.as_slice()).collect();
        assert_eq!(r.get_many(&all).await.unwrap().len(), 3000);
        assert_eq!(ranged_reads(&storage), 1);
    }
}

#[tokio::test]
async fn test_open_wrong_size_or_missing_file_errors_naming_file() {
    let bytes = write(&sample(100), 1024, Compression::None);
    let storage = stored(&bytes).await;
    let err = HFileRangedReader::open(&storage, "f.hfile", bytes.len() as u64 - 1)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("f.hfile"), "{err}");
    let err = HFileRangedReader::open(&storage, "f.hfile", 100)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("f.hfile"), "{err}");
    let err = HFileRangedReader::open(&storage, "missing.hfile", 5000)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("missing.hfile"), "{err}");
}

/// Every file below `dir` (recursively) ending in `.hfile`, sorted.
fn hfiles(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name == "__MACOSX" || name.starts_with("._") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if name.ends_with(".hfile") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn test_get_many_fixture_mdt_base_hfiles_matches_hfile_reader() {
    let Some(root) = fixtures_root_or_skip("ranged hfile reads") else {
        return;
    };
    let (mut files, mut entries) = (0, 0);
    for zip in fixture_zips(&root) {
        let (_dir, base) = unzip_table(&zip);
        let storage = ObjectStoreStorage::local(&base).unwrap();
        for f in hfiles(&base.join(".hoodie/metadata")) {
            let key = f.strip_prefix(&base).unwrap().to_string_lossy().to_string();
            let bytes = Bytes::from(std::fs::read(&f).unwrap());
            let full = HFileReader::open(bytes.clone(), &key).unwrap();
            let r = HFileRangedReader::open(&storage, &key, bytes.len() as u64)
                .await
                .unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(r.file_info(), full.file_info(), "{key}");
            let all = full.entries().unwrap();
            let mut keys: Vec<Vec<u8>> = Vec::new();
            for (k, _) in &all {
                keys.push(k.to_vec());
                let mut after = k.to_vec();
                after.push(0);
                keys.push(after);
            }
            keys.push(Vec::new());
            keys.push(b"\xff\xff".to_vec());
            let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let got = r
                .get_many(&keys)
                .await
                .unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(got, expected(&full, &keys), "{key}");
            assert_eq!(got.len(), all.len(), "{key}");
            entries += all.len();
            files += 1;
        }
    }
    println!("checked {files} fixture base HFiles ({entries} entries) with ranged reads");
    assert!(files > 0, "no .hfile in any fixture MDT");
}
