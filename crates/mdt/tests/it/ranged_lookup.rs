//! `lookup_record_index` reads only the blocks of the base HFiles that the keys fall in: its
//! cost follows the number of keys, not the size of the record index.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use arbor_format::hfile::mdt::METADATA_RECORD_SCHEMA_JSON;
use arbor_format::hfile::mdt_index::{
    encode_record_index_value, file_group_index, RecordIndexInfo, RecordLocation,
};
use arbor_format::hfile::{HFileWriter, HFileWriterOptions};
use arbor_mdt::index_writer::{delta_files, initial_files, RecordIndexDelta};
use arbor_mdt::{lookup_record_index, read_record_index, FilesDelta, MdtWriter, MetadataTable};
use arbor_storage::{ListPage, ObjectMeta, ObjectStoreStorage, Storage, StorageExt, Version};
use arbor_timeline::config::TableType;
use arbor_timeline::{InstantTimeGenerator, TableConfig};
use async_trait::async_trait;
use bytes::Bytes;

/// A read-only [`Storage`] wrapper that records every read: (key, bytes returned, ranged?).
#[derive(Debug)]
struct CountingStorage {
    inner: Arc<dyn Storage>,
    reads: Mutex<Vec<(String, usize, bool)>>,
}

impl CountingStorage {
    fn new(inner: Arc<dyn Storage>) -> Self {
        Self {
            inner,
            reads: Mutex::new(Vec::new()),
        }
    }

    fn reads(&self) -> Vec<(String, usize, bool)> {
        self.reads.lock().unwrap().clone()
    }

    fn record(&self, key: &str, len: usize, ranged: bool) {
        self.reads
            .lock()
            .unwrap()
            .push((key.to_string(), len, ranged));
    }
}

impl fmt::Display for CountingStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "counting({})", self.inner)
    }
}

#[async_trait]
impl Storage for CountingStorage {
    async fn get(&self, key: &str) -> arbor_storage::Result<(Bytes, ObjectMeta)> {
        let r = self.inner.get(key).await?;
        self.record(key, r.0.len(), false);
        Ok(r)
    }

    async fn get_range(&self, key: &str, range: Range<u64>) -> arbor_storage::Result<Bytes> {
        let r = self.inner.get_range(key, range).await?;
        self.record(key, r.len(), true);
        Ok(r)
    }

    async fn head(&self, key: &str) -> arbor_storage::Result<ObjectMeta> {
        self.record(key, 0, false);
        self.inner.head(key).await
    }

    async fn put(&self, _: &str, _: Bytes) -> arbor_storage::Result<Version> {
        unreachable!("lookups do not write")
    }

    async fn put_if_absent(&self, _: &str, _: Bytes) -> arbor_storage::Result<Version> {
        unreachable!("lookups do not write")
    }

    async fn put_if_match(&self, _: &str, _: Bytes, _: &Version) -> arbor_storage::Result<Version> {
        unreachable!("lookups do not write")
    }

    async fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max_keys: usize,
    ) -> arbor_storage::Result<ListPage> {
        self.inner.list_page(prefix, start_after, max_keys).await
    }

    async fn list_dir(
        &self,
        prefix: &str,
    ) -> arbor_storage::Result<(Vec<ObjectMeta>, Vec<String>)> {
        self.inner.list_dir(prefix).await
    }

    async fn delete_batch(
        &self,
        _: &[String],
    ) -> arbor_storage::Result<Vec<arbor_storage::Result<()>>> {
        unreachable!("lookups do not delete")
    }

    async fn copy(&self, _: &str, _: &str) -> arbor_storage::Result<()> {
        unreachable!("lookups do not copy")
    }
}

fn key(i: usize) -> String {
    format!("key-{i:07}")
}

fn loc(file: usize, millis: i64) -> RecordLocation {
    RecordLocation {
        partition: format!("p={}", file % 7),
        file_id: format!("0000{:04}-aaaa-bbbb-cccc-dddddddddddd-0", file),
        instant_time_millis: millis,
    }
}

#[tokio::test]
async fn test_lookup_record_index_100_keys_of_200k_reads_few_bytes_and_matches_full_read() {
    const N: usize = 200_000;
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let generator = InstantTimeGenerator::new();
    let config = TableConfig::builder_v8("t", TableType::CopyOnWrite)
        .record_key_fields(["id"])
        .build()
        .unwrap();
    TableConfig::create(storage.as_ref(), ".hoodie", &config)
        .await
        .unwrap();
    let writer = MdtWriter::create(storage.clone(), &config, &BTreeMap::new(), &generator)
        .await
        .unwrap();
    // The record index is initialised empty, then its ten base files are replaced by files of
    // N entries laid out as `initial_files` lays them out (values encoded once per location:
    // Avro encoding of 200k values takes tens of seconds in a debug build).
    writer
        .init_record_index(&BTreeMap::new(), 10, &generator)
        .await
        .unwrap();
    let mut encoded: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
    let mut groups: Vec<Vec<(String, usize)>> = vec![Vec::new(); 10];
    for i in 0..N {
        let k = key(i);
        groups[file_group_index(&k, 10)].push((k, i / 1000));
    }
    for ((rel, _, _), mut group) in initial_files(&BTreeMap::new(), 10)
        .unwrap()
        .into_iter()
        .zip(groups)
    {
        group.sort();
        let mut w = HFileWriter::new(HFileWriterOptions::default());
        w.set_file_info("schema", METADATA_RECORD_SCHEMA_JSON);
        for (k, file) in &group {
            let value = encoded.entry(*file).or_insert_with(|| {
                let info = RecordIndexInfo::from_location(&loc(*file, 1_700_000_000_000));
                encode_record_index_value(&info).unwrap()
            });
            w.append(k.as_bytes(), value).unwrap();
        }
        storage
            .put(&format!(".hoodie/metadata/{rel}"), w.finish().unwrap())
            .await
            .unwrap();
    }

    // One later MDT deltacommit with record-index log files: keys of the looked-up range are
    // moved, deleted and inserted.
    let t = generator.next().unwrap();
    let mut delta = RecordIndexDelta::default();
    for i in (100_000..100_100).step_by(3) {
        delta.upserts.insert(key(i), loc(999, 1_800_000_000_000));
    }
    for i in (100_001..100_100).step_by(5) {
        delta.deletes.insert(key(i));
    }
    delta
        .upserts
        .insert("key-0100050x".to_string(), loc(998, 1_800_000_000_000));
    writer
        .commit_files(&t, &FilesDelta::default(), &generator)
        .await
        .unwrap();
    for (rel, bytes, _) in delta_files(&t, &delta, 10).unwrap() {
        storage
            .put(&format!(".hoodie/metadata/{rel}"), bytes)
            .await
            .unwrap();
    }

    let mdt = MetadataTable::open(storage.clone()).await.unwrap().unwrap();
    let base_files: BTreeMap<String, u64> = storage
        .list_all(".hoodie/metadata/record_index")
        .await
        .unwrap()
        .into_iter()
        .filter(|o| o.key.ends_with(".hfile"))
        .map(|o| (o.key, o.size))
        .collect();
    assert_eq!(base_files.len(), 10);
    let base_total: u64 = base_files.values().sum();

    let mut wanted: Vec<String> = (100_000..100_100).map(key).collect();
    wanted.push("key-0100050x".to_string());
    wanted.push("absent".to_string());
    let wanted_refs: Vec<&str> = wanted.iter().map(String::as_str).collect();
    let counting = CountingStorage::new(storage.clone());
    let got = lookup_record_index(&counting, &mdt, &wanted_refs)
        .await
        .unwrap();

    // Same answers as the full read.
    let full = read_record_index(storage.as_ref(), &mdt).await.unwrap();
    assert_eq!(full.len(), N - 13 + 1);
    let wanted_set: BTreeSet<&str> = wanted_refs.iter().copied().collect();
    let expected: BTreeMap<_, _> = full
        .into_iter()
        .filter(|(k, _)| wanted_set.contains(k.as_str()))
        .collect();
    assert_eq!(got, expected);
    // 100 keys, 20 deleted of which 7 are upserted again by the same instant, 1 new key.
    assert_eq!(got.len(), 100 - 20 + 7 + 1);
    assert_eq!(got[&key(100_000)].location.file_id, loc(999, 0).file_id);
    assert_eq!(got[&key(100_006)].location.file_id, loc(999, 0).file_id);
    assert_eq!(got[&key(100_002)].location.file_id, loc(100, 0).file_id);
    assert!(!got.contains_key(&key(100_001)), "deleted key");
    assert_eq!(got["key-0100050x"].location.file_id, loc(998, 0).file_id);

    // Base files are read by ranged reads only, and only a small part of them.
    let reads = counting.reads();
    let base_reads: Vec<_> = reads
        .iter()
        .filter(|(k, _, _)| base_files.contains_key(k))
        .collect();
    assert!(base_reads.iter().all(|(_, _, ranged)| *ranged), "{reads:?}");
    let base_read: usize = base_reads.iter().map(|(_, n, _)| n).sum();
    let all_read: usize = reads.iter().map(|(_, n, _)| n).sum();
    println!(
        "lookup of {} keys: {} reads, {all_read} bytes ({base_read} of base files) of {base_total} \
         bytes in the base files ({:.2}%)",
        wanted.len(),
        reads.len(),
        100.0 * all_read as f64 / base_total as f64
    );
    assert!(
        (all_read as u64) * 10 < base_total,
        "{all_read} bytes read of {base_total}"
    );
}
