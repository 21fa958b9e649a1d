//! HFile v3 reader/writer: Java/Spark-written fixture files (MDT base files and HFILE_DATA log
//! blocks), write -> read round trips, and corruption robustness.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arbor_format::hfile::mdt::{
    decode_files_record, decode_files_record_direct, encode_files_record, metadata_record_schema,
    FilesEntry, FilesRecord, METADATA_RECORD_SCHEMA_JSON, RECORD_TYPE_ALL_PARTITIONS,
    RECORD_TYPE_FILES,
};
use arbor_format::hfile::{Compression, HFileReader, HFileWriter, HFileWriterOptions};
use arbor_format::log::{read_log_bytes, BlockType, ReadMode};
use arbor_format::FormatError;
use arbor_testkit::fixtures::{fixture_zips, fixtures_root_or_skip, unzip_table};
use bytes::Bytes;
use proptest::prelude::*;

/// Every file below `dir` (recursively), sorted, without macOS resource forks.
fn walk(dir: &Path) -> Vec<PathBuf> {
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
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Opens `bytes`, iterates it (keys strictly increasing, count = trailer count) and looks
/// every key up; returns the number of entries.
fn check_hfile(bytes: Bytes, path: &str) -> usize {
    let reader = HFileReader::open(bytes, path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let entries = reader.entries().unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(entries.len() as u64, reader.entry_count(), "{path}");
    for w in entries.windows(2) {
        assert!(w[0].0 < w[1].0, "{path}: keys not strictly increasing");
    }
    for (k, v) in &entries {
        assert_eq!(
            reader.get(k).unwrap().as_ref(),
            Some(v),
            "{path}: get {k:?}"
        );
        let mut missing = k.to_vec();
        missing.push(0);
        if !entries
            .iter()
            .any(|(k2, _)| k2.as_ref() == missing.as_slice())
        {
            assert_eq!(
                reader.get(&missing).unwrap(),
                None,
                "{path}: get {missing:?}"
            );
        }
    }
    assert!(
        reader.file_info_str("schema").is_some(),
        "{path}: no schema in file info"
    );
    entries.len()
}

#[test]
fn test_open_fixture_mdt_base_hfiles_iterate_and_get_every_key() {
    let Some(root) = fixtures_root_or_skip("hfile base files") else {
        return;
    };
    let (mut files, mut entries) = (0, 0);
    for zip in fixture_zips(&root) {
        let (_dir, base) = unzip_table(&zip);
        for f in walk(&base.join(".hoodie/metadata")) {
            if f.extension().is_some_and(|e| e == "hfile") {
                let bytes = Bytes::from(std::fs::read(&f).unwrap());
                entries += check_hfile(bytes, &f.display().to_string());
                files += 1;
            }
        }
    }
    println!("checked {files} fixture base HFiles with {entries} entries");
    assert!(files > 0, "no .hfile in any fixture MDT");
    assert!(entries > 0);
}

#[test]
fn test_open_fixture_mdt_hfile_log_blocks_iterate_and_get_every_key() {
    let Some(root) = fixtures_root_or_skip("hfile log blocks") else {
        return;
    };
    let (mut blocks, mut entries) = (0, 0);
    for zip in fixture_zips(&root) {
        let (_dir, base) = unzip_table(&zip);
        for f in walk(&base.join(".hoodie/metadata")) {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            if !(name.starts_with('.') && name.contains(".log.")) {
                continue;
            }
            let path = f.display().to_string();
            let bytes = Bytes::from(std::fs::read(&f).unwrap());
            let log = read_log_bytes(&bytes, &path, ReadMode::Strict).unwrap();
            for block in log.blocks {
                if block.block_type == BlockType::HfileData {
                    let what = format!("{path}@{}", block.offset);
                    entries += check_hfile(block.content.clone(), &what);
                    blocks += 1;
                }
            }
        }
    }
    println!("checked {blocks} fixture HFILE_DATA blocks with {entries} entries");
    assert!(blocks > 0, "no HFILE_DATA block in any fixture MDT log");
}

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

#[test]
fn test_writer_roundtrip_many_blocks_both_codecs_reads_back() {
    let entries = sample(3000);
    for compression in [Compression::None, Compression::Gz] {
        let bytes = write(&entries, 4096, compression);
        let r = HFileReader::open(bytes, "mem.hfile").unwrap();
        assert_eq!(r.compression(), compression);
        assert!(r.data_block_count() > 10, "{}", r.data_block_count());
        let read = r.entries().unwrap();
        assert_eq!(read.len(), entries.len());
        for ((k, v), (rk, rv)) in entries.iter().zip(&read) {
            assert_eq!(k.as_slice(), rk.as_ref());
            assert_eq!(v.as_slice(), rv.as_ref());
            assert_eq!(r.get(k).unwrap().as_deref(), Some(v.as_slice()));
        }
        assert_eq!(r.get(b"a").unwrap(), None);
        assert_eq!(r.get(b"key-000100a").unwrap(), None);
        assert_eq!(r.get(b"zzz").unwrap(), None);
        assert_eq!(r.get(b"").unwrap(), None);
        assert_eq!(r.file_info_str("schema"), Some("{\"type\":\"string\"}"));
        assert_eq!(
            &r.file_info()[b"maxRecordKey".as_slice()][..],
            b"key-002999"
        );
        assert_eq!(r.file_info_str("minRecordKey"), Some("key-000000"));
        assert_eq!(
            r.comparator(),
            "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
        );
        check_hfile(write(&entries, 4096, compression), "again");
    }
}

#[test]
fn test_writer_roundtrip_large_blocks_and_values_reads_back() {
    // Blocks above 16 KiB need several checksum chunks.
    let entries: Vec<_> = (0..50)
        .map(|i| (format!("k{i:03}").into_bytes(), vec![i as u8; 20_000]))
        .collect();
    for compression in [Compression::None, Compression::Gz] {
        let r = HFileReader::open(write(&entries, 100_000, compression), "big").unwrap();
        assert!(r.data_block_count() > 1);
        let read = r.entries().unwrap();
        assert_eq!(read.len(), 50);
        assert_eq!(r.get(b"k049").unwrap().unwrap().len(), 20_000);
    }
}

#[test]
fn test_writer_empty_file_reads_back_empty() {
    for compression in [Compression::None, Compression::Gz] {
        let r = HFileReader::open(write(&[], 1024, compression), "empty").unwrap();
        assert_eq!(r.entry_count(), 0);
        assert!(r.entries().unwrap().is_empty());
        assert_eq!(r.get(b"x").unwrap(), None);
    }
}

#[test]
fn test_append_non_increasing_key_errors() {
    let mut w = HFileWriter::new(HFileWriterOptions::default());
    w.append(b"b", b"1").unwrap();
    assert!(matches!(
        w.append(b"b", b"2"),
        Err(FormatError::HFile { .. })
    ));
    assert!(matches!(
        w.append(b"a", b"2"),
        Err(FormatError::HFile { .. })
    ));
    w.append(b"c", b"3").unwrap();
    let r = HFileReader::open(w.finish().unwrap(), "w").unwrap();
    assert_eq!(r.entries().unwrap().len(), 2);
}

#[test]
fn test_open_wrong_version_and_garbage_errors_naming_path() {
    let mut bytes = write(&sample(10), 1024, Compression::None).to_vec();
    let n = bytes.len();
    bytes[n - 1] = 2; // major version 2
    let err = HFileReader::open(Bytes::from(bytes), "v2.hfile").unwrap_err();
    assert!(err.to_string().contains("v2.hfile"), "{err}");
    assert!(err.to_string().contains("version"), "{err}");
    let err = HFileReader::open(Bytes::from_static(b"short"), "short.hfile").unwrap_err();
    assert!(err.to_string().contains("short.hfile"), "{err}");
}

/// Opens, iterates and looks up everything in `bytes`; returns the first error.
fn exercise(bytes: Bytes, path: &str, keys: &[Vec<u8>]) -> Result<(), FormatError> {
    let r = HFileReader::open(bytes, path)?;
    r.entries()?;
    for k in keys {
        r.get(k)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn test_open_truncated_file_errors_without_panic(cut in 1usize..20_000, gz in any::<bool>()) {
        let codec = if gz { Compression::Gz } else { Compression::None };
        let entries = sample(200);
        let bytes = write(&entries, 1024, codec);
        let cut = cut.min(bytes.len());
        let keys: Vec<_> = entries.iter().map(|(k, _)| k.clone()).collect();
        let err = exercise(bytes.slice(..bytes.len() - cut), "cut.hfile", &keys).unwrap_err();
        prop_assert!(err.to_string().contains("cut.hfile"), "{}", err);
    }

    #[test]
    fn test_open_bit_flipped_file_never_panics(pos in any::<prop::sample::Index>(), bit in 0u8..8, gz in any::<bool>()) {
        let codec = if gz { Compression::Gz } else { Compression::None };
        let entries = sample(200);
        let mut bytes = write(&entries, 1024, codec).to_vec();
        let i = pos.index(bytes.len());
        bytes[i] ^= 1 << bit;
        let keys: Vec<_> = entries.iter().map(|(k, _)| k.clone()).collect();
        if let Err(err) = exercise(Bytes::from(bytes), "flip.hfile", &keys) {
            prop_assert!(err.to_string().contains("flip.hfile"), "{}", err);
        }
    }
}

/// A `files`-partition record decoded through apache-avro's generic values, independently of
/// arbor's decoders.
fn generic_files(value: &[u8], schema: &apache_avro::Schema) -> FilesRecord {
    use apache_avro::types::Value;
    let inner = |v: &Value| match v {
        Value::Union(_, b) => (**b).clone(),
        other => other.clone(),
    };
    let reader = apache_avro::reader::datum::GenericDatumReader::builder(schema)
        .build()
        .unwrap();
    let Value::Record(fields) = reader.read_value(&mut &value[..]).unwrap() else {
        panic!("not a record");
    };
    let mut out = FilesRecord::default();
    for (name, v) in &fields {
        match (name.as_str(), inner(v)) {
            ("type", Value::Int(t)) => out.record_type = t,
            ("_hoodie_file_name", Value::String(s)) => out.file_name = Some(s),
            ("filesystemMetadata", Value::Map(m)) => {
                for (file, info) in m {
                    let Value::Record(info) = inner(&info) else {
                        panic!("info of {file}");
                    };
                    let mut e = FilesEntry {
                        size: 0,
                        is_deleted: false,
                    };
                    for (f, fv) in &info {
                        match (f.as_str(), inner(fv)) {
                            ("size", Value::Long(n)) => e.size = n,
                            ("isDeleted", Value::Boolean(d)) => e.is_deleted = d,
                            _ => {}
                        }
                    }
                    out.files.insert(file, e);
                }
            }
            _ => {}
        }
    }
    out
}

/// Decodes every value of `files`-partition HFile `bytes` with its own file-info schema.
fn decode_files_hfile(bytes: Bytes, path: &str) -> usize {
    let r = HFileReader::open(bytes, path).unwrap();
    let schema = apache_avro::Schema::parse_str(r.file_info_str("schema").unwrap()).unwrap();
    let mut n = 0;
    for (key, value) in r.entries().unwrap() {
        let rec = decode_files_record(&value, &schema, path).unwrap_or_else(|e| panic!("{e}"));
        // The direct decoder reads every Spark-written value itself, and equals a decoding
        // through apache-avro's generic values.
        let direct = decode_files_record_direct(&value, &schema);
        assert_eq!(direct.as_ref(), Some(&rec), "{path} {key:?}");
        assert_eq!(generic_files(&value, &schema), rec, "{path} {key:?}");
        if key.as_ref() == b"__all_partitions__" {
            assert_eq!(rec.record_type, RECORD_TYPE_ALL_PARTITIONS, "{path}");
        } else {
            assert_eq!(rec.record_type, RECORD_TYPE_FILES, "{path} {key:?}");
            assert!(
                rec.files.keys().all(|f| !f.contains('/')),
                "{path}: {rec:?}"
            );
        }
        n += 1;
    }
    n
}

#[test]
fn test_decode_files_record_fixture_files_partition_decodes_every_value() {
    let Some(root) = fixtures_root_or_skip("hfile files records") else {
        return;
    };
    let mut records = 0;
    for zip in fixture_zips(&root) {
        let (_dir, base) = unzip_table(&zip);
        for f in walk(&base.join(".hoodie/metadata/files")) {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            let path = f.display().to_string();
            let bytes = Bytes::from(std::fs::read(&f).unwrap());
            if name.ends_with(".hfile") {
                records += decode_files_hfile(bytes, &path);
            } else if name.starts_with('.') && name.contains(".log.") {
                let log = read_log_bytes(&bytes, &path, ReadMode::Strict).unwrap();
                for block in log.blocks {
                    if block.block_type == BlockType::HfileData {
                        records += decode_files_hfile(block.content.clone(), &path);
                    }
                }
            }
        }
    }
    println!("decoded {records} fixture files-partition records");
    assert!(records > 0);
}

#[test]
fn test_writer_files_partition_shape_reads_back() {
    for compression in [Compression::None, Compression::Gz] {
        let mut partitions = BTreeMap::new();
        let mut w = HFileWriter::new(HFileWriterOptions {
            block_size: 64 * 1024,
            compression,
        });
        w.set_file_info("schema", METADATA_RECORD_SCHEMA_JSON);
        let mut expected = Vec::new();
        let names: Vec<String> = (0..20).map(|i| format!("region=r{i:02}")).collect();
        for p in &names {
            partitions.insert(
                p.clone(),
                FilesEntry {
                    size: 0,
                    is_deleted: false,
                },
            );
        }
        let all = FilesRecord {
            record_type: RECORD_TYPE_ALL_PARTITIONS,
            file_name: None,
            files: partitions,
        };
        expected.push(("__all_partitions__".to_string(), all.clone()));
        for (i, p) in names.iter().enumerate() {
            let files = (0..3)
                .map(|j| {
                    let entry = FilesEntry {
                        size: 1000 + (i * 10 + j) as i64,
                        is_deleted: j == 2,
                    };
                    (format!("f{i}-{j}_0-1-0_20250101000000000.parquet"), entry)
                })
                .collect();
            let rec = FilesRecord {
                record_type: RECORD_TYPE_FILES,
                file_name: Some("files-0000-0_0-0-0_00000000000000000.hfile".into()),
                files,
            };
            expected.push((p.clone(), rec));
        }
        // "__all_partitions__" sorts before "region=..."
        for (k, rec) in &expected {
            w.append(k.as_bytes(), &encode_files_record(rec).unwrap())
                .unwrap();
        }
        let bytes = w.finish().unwrap();
        assert_eq!(decode_files_hfile(bytes.clone(), "files.hfile"), 21);
        let r = HFileReader::open(bytes, "files.hfile").unwrap();
        let schema = metadata_record_schema().unwrap();
        for (k, rec) in &expected {
            let v = r.get(k.as_bytes()).unwrap().unwrap();
            assert_eq!(
                &decode_files_record(&v, schema, "files.hfile").unwrap(),
                rec
            );
        }
    }
}
