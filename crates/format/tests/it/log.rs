//! Log format: fixture files from Spark, round trips, and corrupt input.

use std::io::{Read, Write};

use arbor_format::log::{
    decode_avro_data_block, decode_data_block, decode_delete_block, encode_avro_data_block,
    encode_block, encode_command_block, encode_delete_block, read_log_file, read_log_file_with,
    BlockType, DeleteRecord, HeaderKey, LogBlock, OrderingValue, ReadMode,
};
use arbor_format::FormatError;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use proptest::prelude::*;

/// A file read from a fixture zip: `(zip name, path inside the zip, bytes)`.
pub(crate) type FixtureFile = (String, String, Vec<u8>);

/// Every file of every fixture zip whose base name satisfies `want` (macOS resource forks
/// skipped), read into memory.
pub(crate) fn fixture_files(want: impl Fn(&str) -> bool) -> Option<Vec<FixtureFile>> {
    let dir = arbor_testkit::fixtures_root_or_skip("format fixture files")?;
    let zips = arbor_testkit::fixture_zips(&dir);
    assert!(!zips.is_empty(), "no fixture zips under {}", dir.display());
    let mut out = Vec::new();
    for zip_path in zips {
        let zip_name = zip_path.strip_prefix(&dir).unwrap().display().to_string();
        let mut archive = zip::ZipArchive::new(std::fs::File::open(&zip_path).unwrap()).unwrap();
        for i in 0..archive.len() {
            let mut entry = archive.by_index(i).unwrap();
            let name = entry.name().to_string();
            if !entry.is_file() || name.contains("__MACOSX") {
                continue;
            }
            let base = name.rsplit('/').next().unwrap_or(&name);
            if !want(base) {
                continue;
            }
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            out.push((zip_name.clone(), name, bytes));
        }
    }
    Some(out)
}

/// Hudi log file names: `.<fileId>_<instant>.log.<version>_<token>`.
pub(crate) fn is_log_file_name(base: &str) -> bool {
    base.starts_with('.') && base.contains(".log.") && !base.starts_with(".hoodie")
}

fn block_bytes<'a>(file: &'a [u8], block: &LogBlock) -> &'a [u8] {
    &file[block.offset as usize..(block.offset + block.size) as usize]
}

/// Header key ids in file order (the model keeps them sorted by id).
fn header_ids_in_file_order(file: &[u8], block: &LogBlock) -> Vec<i32> {
    let mut pos = block.offset as usize + 22;
    let count = i32::from_be_bytes(file[pos..pos + 4].try_into().unwrap());
    pos += 4;
    let mut ids = Vec::new();
    for _ in 0..count {
        ids.push(i32::from_be_bytes(file[pos..pos + 4].try_into().unwrap()));
        let len = i32::from_be_bytes(file[pos + 4..pos + 8].try_into().unwrap()) as usize;
        pos += 8 + len;
    }
    ids
}

/// Encoded bytes equal the file's block; when Spark wrote the header in another key order
/// (v8 writers put SCHEMA first), equal after reading back.
fn assert_same_block(encoded: &[u8], file: &[u8], block: &LogBlock, what: &str, seen: &mut Seen) {
    let ids = header_ids_in_file_order(file, block);
    if ids.windows(2).all(|w| w[0] < w[1]) {
        assert!(
            encoded == block_bytes(file, block),
            "{what}: re-encoded bytes differ"
        );
        seen.exact += 1;
    } else {
        assert_eq!(encoded.len(), block.size as usize, "{what}");
        let again = read_log_file(encoded, what).unwrap();
        assert_eq!(again.blocks.len(), 1, "{what}");
        assert_eq!(again.blocks[0].header, block.header, "{what}");
        assert!(
            again.blocks[0].content == block.content,
            "{what}: content differs"
        );
    }
}

#[derive(Default, Debug)]
struct Seen {
    files: usize,
    avro: usize,
    parquet: usize,
    delete: usize,
    hfile: usize,
    rows: usize,
    exact: usize,
}

#[test]
fn test_read_log_file_every_fixture_log_parses_and_decodes() {
    let Some(files) = fixture_files(is_log_file_name) else {
        return;
    };
    let mut seen = Seen::default();
    for (zip, name, bytes) in &files {
        let path = format!("{zip}:{name}");
        let contents = read_log_file(bytes, &path).unwrap();
        assert!(
            contents.corrupt.is_empty(),
            "{path}: {:?}",
            contents.corrupt
        );
        assert!(!contents.blocks.is_empty(), "{path}: no blocks");
        let strict = read_log_file_with(bytes, &path, ReadMode::Strict).unwrap();
        assert_eq!(strict, contents);
        seen.files += 1;
        for block in &contents.blocks {
            assert!(
                block.instant_time().is_some(),
                "{path}@{}: no instant",
                block.offset
            );
            // The encoder reproduces Spark's bytes from the parsed parts.
            let what = format!("{path}@{}", block.offset);
            let again = encode_block(
                block.block_type,
                &block.header,
                &block.content,
                &block.footer,
            )
            .unwrap();
            assert_same_block(&again, bytes, block, &what, &mut seen);
            match block.block_type {
                BlockType::AvroData => {
                    seen.avro += 1;
                    let decoded = decode_avro_data_block(block, &path).unwrap();
                    let batches = decode_data_block(block, &path, None).unwrap();
                    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                    let declared =
                        i32::from_be_bytes(block.content[4..8].try_into().unwrap()) as usize;
                    assert_eq!(rows, declared, "{path}@{}", block.offset);
                    assert_eq!(decoded.records.len(), declared);
                    seen.rows += rows;
                    // Re-encoding the decoded records gives Spark's exact block.
                    let encoded = encode_avro_data_block(
                        block.instant_time().unwrap(),
                        block.schema_json().unwrap(),
                        &decoded.records,
                    )
                    .unwrap();
                    assert_same_block(&encoded, bytes, block, &what, &mut seen);
                }
                BlockType::ParquetData => {
                    seen.parquet += 1;
                    let expected = ParquetRecordBatchReaderBuilder::try_new(block.content.clone())
                        .unwrap()
                        .metadata()
                        .file_metadata()
                        .num_rows() as usize;
                    let batches = decode_data_block(block, &path, None).unwrap();
                    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                    assert_eq!(rows, expected, "{path}@{}", block.offset);
                    assert!(rows > 0);
                    seen.rows += rows;
                }
                BlockType::Delete => {
                    seen.delete += 1;
                    let records = decode_delete_block(block, &path).unwrap();
                    // Re-encoding gives Spark's exact block.
                    let encoded = encode_delete_block(
                        block.instant_time().unwrap(),
                        block.schema_json(),
                        &records,
                    )
                    .unwrap();
                    assert_same_block(&encoded, bytes, block, &what, &mut seen);
                }
                BlockType::HfileData => {
                    seen.hfile += 1;
                    assert!(
                        block.content.starts_with(b"DATABLK*"),
                        "{path}@{}",
                        block.offset
                    );
                    assert!(block.schema_json().is_some());
                }
                BlockType::Command => {
                    assert!(block.rollback_target().is_some(), "{path}@{}", block.offset);
                }
                other => panic!("{path}@{}: unexpected {other}", block.offset),
            }
        }
    }
    assert!(
        seen.files > 100 && seen.avro > 0 && seen.parquet > 0 && seen.delete > 0 && seen.hfile > 0,
        "{seen:?}"
    );
    assert!(seen.rows > 0 && seen.exact > 100, "{seen:?}");
    let _ = writeln!(std::io::stderr(), "log fixtures: {seen:?}");
}

#[test]
fn test_decode_delete_block_spark_sql_delete_has_long_zero_ordering() {
    let Some(files) = fixture_files(|b| {
        b == ".39cc539f-61e9-4996-8096-4d89715c4142-0_20260307162636727.log.1_0-78-180"
    }) else {
        return;
    };
    let (_, name, bytes) = files
        .iter()
        .find(|(zip, _, _)| zip.contains("mor/avro/v9_txns_complex_meta"))
        .unwrap();
    let contents = read_log_file(bytes, name).unwrap();
    assert_eq!(contents.blocks.len(), 1);
    let records = decode_delete_block(&contents.blocks[0], name).unwrap();
    assert_eq!(
        records,
        vec![DeleteRecord {
            record_key: Some("txn_id:TXN-002,account_id:ACC-B".to_string()),
            partition_path: Some("region=us".to_string()),
            // Spark SQL DELETE writes IntWrapper(0): Java's default ordering value.
            ordering_value: Some(OrderingValue::Int(0)),
        }]
    );
}

// ---------------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------------

const SCHEMA: &str = r#"{"type":"record","name":"t_record","namespace":"hoodie.t","fields":[{"name":"_hoodie_commit_time","type":["null","string"],"doc":"","default":null},{"name":"id","type":["null","string"],"default":null},{"name":"ts","type":["null","long"],"default":null}]}"#;

fn record(id: &str, ts: i64) -> apache_avro::types::Value {
    use apache_avro::types::Value;
    Value::Record(vec![
        (
            "_hoodie_commit_time".into(),
            Value::Union(1, Box::new(Value::String("20240101000000000".into()))),
        ),
        (
            "id".into(),
            Value::Union(1, Box::new(Value::String(id.into()))),
        ),
        ("ts".into(), Value::Union(1, Box::new(Value::Long(ts)))),
    ])
}

/// Three blocks (data, delete, command) and their offsets.
fn three_block_file() -> (Vec<u8>, [usize; 3]) {
    let a = encode_avro_data_block(
        "20240101000000000",
        SCHEMA,
        &[record("a", 1), record("b", 2)],
    )
    .unwrap();
    let b = encode_delete_block("20240101000000001", None, &[DeleteRecord::new("a", "p")]).unwrap();
    let c = encode_command_block("20240101000000002", "20240101000000000").unwrap();
    let offsets = [0, a.len(), a.len() + b.len()];
    let mut file = a.to_vec();
    file.extend_from_slice(&b);
    file.extend_from_slice(&c);
    (file, offsets)
}

#[test]
fn test_encode_blocks_read_back_same_records() {
    let (file, offsets) = three_block_file();
    let contents = read_log_file_with(&file, "f.log", ReadMode::Strict).unwrap();
    assert!(contents.corrupt.is_empty());
    let types: Vec<_> = contents.blocks.iter().map(|b| b.block_type).collect();
    assert_eq!(
        types,
        [BlockType::AvroData, BlockType::Delete, BlockType::Command]
    );
    let got_offsets: Vec<_> = contents.blocks.iter().map(|b| b.offset as usize).collect();
    assert_eq!(got_offsets, offsets);

    let data = decode_avro_data_block(&contents.blocks[0], "f.log").unwrap();
    assert_eq!(data.records, vec![record("a", 1), record("b", 2)]);
    let batch = &decode_data_block(&contents.blocks[0], "f.log", None).unwrap()[0];
    assert_eq!(batch.num_rows(), 2);
    assert_eq!(
        contents.blocks[0].header_value(HeaderKey::Schema),
        Some(SCHEMA)
    );

    assert_eq!(
        decode_delete_block(&contents.blocks[1], "f.log").unwrap(),
        vec![DeleteRecord::new("a", "p")]
    );
    assert_eq!(
        contents.blocks[2].rollback_target(),
        Some("20240101000000000")
    );
    assert_eq!(contents.blocks[2].instant_time(), Some("20240101000000002"));
    assert!(contents.blocks[2].content.is_empty());
}

#[test]
fn test_encode_block_layout_matches_spec() {
    let bytes = encode_command_block("1", "0").unwrap();
    assert_eq!(&bytes[..6], b"#HUDI#");
    let l = i64::from_be_bytes(bytes[6..14].try_into().unwrap());
    assert_eq!(l as usize + 14, bytes.len());
    assert_eq!(i32::from_be_bytes(bytes[14..18].try_into().unwrap()), 1);
    assert_eq!(i32::from_be_bytes(bytes[18..22].try_into().unwrap()), 0);
    let rp = i64::from_be_bytes(bytes[bytes.len() - 8..].try_into().unwrap());
    assert_eq!(rp, l + 6);
}

#[test]
fn test_decode_data_block_converts_a_large_avro_block_in_chunks_in_order() {
    use arrow::array::{Array, Int64Array, StringArray};
    let records: Vec<_> = (0..20_000)
        .map(|i| record(&format!("k{i:05}"), i))
        .collect();
    let bytes = encode_avro_data_block("20240101000000000", SCHEMA, &records).unwrap();
    let block = &read_log_file(&bytes, "big.log").unwrap().blocks[0];
    let batches = decode_data_block(block, "big.log", None).unwrap();
    // Converted 8,192 records at a time: a block's generic Avro values never all at once.
    assert_eq!(
        batches.iter().map(|b| b.num_rows()).collect::<Vec<_>>(),
        vec![8192, 8192, 3616]
    );
    let mut next = 0i64;
    for b in &batches {
        let ids = b.column_by_name("id").unwrap();
        let ids = ids.as_any().downcast_ref::<StringArray>().unwrap();
        let ts = b.column_by_name("ts").unwrap();
        let ts = ts.as_any().downcast_ref::<Int64Array>().unwrap();
        for row in 0..b.num_rows() {
            assert_eq!(ids.value(row), format!("k{next:05}"));
            assert_eq!(ts.value(row), next);
            next += 1;
        }
    }
    // An empty block is still one (empty) batch of the block's schema.
    let empty = encode_avro_data_block("20240101000000000", SCHEMA, &[]).unwrap();
    let block = &read_log_file(&empty, "e.log").unwrap().blocks[0];
    let batches = decode_data_block(block, "e.log", None).unwrap();
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].num_rows(), 0);
    assert_eq!(batches[0].num_columns(), 3);
}

#[test]
fn test_encode_delete_block_empty_list_is_one_zero_byte() {
    let bytes = encode_delete_block("1", None, &[]).unwrap();
    let block = &read_log_file(&bytes, "x").unwrap().blocks[0];
    assert_eq!(&block.content[..], &[0, 0, 0, 3, 0, 0, 0, 1, 0]);
    assert!(decode_delete_block(block, "x").unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Corrupt input
// ---------------------------------------------------------------------------------------------

fn assert_corrupt_at(err: FormatError, path: &str, offset: usize, reason_part: &str) {
    match err {
        FormatError::CorruptBlock {
            path: p,
            offset: o,
            reason,
        } => {
            assert_eq!(p, path);
            assert_eq!(o, offset as u64);
            assert!(reason.contains(reason_part), "{reason}");
        }
        other => panic!("expected CorruptBlock, got {other}"),
    }
}

#[test]
fn test_read_log_file_truncated_last_block_reported_and_skipped() {
    let (mut file, offsets) = three_block_file();
    file.truncate(file.len() - 5);
    let contents = read_log_file(&file, "t.log").unwrap();
    assert_eq!(contents.blocks.len(), 2);
    assert_eq!(contents.corrupt.len(), 1);
    let region = &contents.corrupt[0];
    assert_eq!(region.offset as usize, offsets[2]);
    assert_eq!((region.offset + region.len) as usize, file.len());
    assert!(
        region.reason.contains("past the end of file"),
        "{}",
        region.reason
    );

    let err = read_log_file_with(&file, "t.log", ReadMode::Strict).unwrap_err();
    assert_corrupt_at(err, "t.log", offsets[2], "truncated");
}

#[test]
fn test_read_log_file_wrong_reverse_pointer_skips_block_recovers_next() {
    let (mut file, offsets) = three_block_file();
    let pointer = offsets[2] - 8;
    file[pointer + 7] ^= 0x01;
    let contents = read_log_file(&file, "r.log").unwrap();
    let types: Vec<_> = contents.blocks.iter().map(|b| b.block_type).collect();
    assert_eq!(types, [BlockType::AvroData, BlockType::Command]);
    assert_eq!(contents.corrupt.len(), 1);
    assert_eq!(contents.corrupt[0].offset as usize, offsets[1]);
    assert_eq!(contents.corrupt[0].len as usize, offsets[2] - offsets[1]);
    assert!(contents.corrupt[0].reason.contains("reverse pointer"));

    let err = read_log_file_with(&file, "r.log", ReadMode::Strict).unwrap_err();
    assert_corrupt_at(err, "r.log", offsets[1], "reverse pointer");
}

#[test]
fn test_read_log_file_garbage_between_blocks_recovers_following_blocks() {
    let (file, offsets) = three_block_file();
    let mut bad = file[..offsets[1]].to_vec();
    bad.extend_from_slice(b"garbage!!");
    bad.extend_from_slice(&file[offsets[1]..]);
    let contents = read_log_file(&bad, "g.log").unwrap();
    // As in Java and hudi-rs, a block not followed by a magic is itself suspect.
    let types: Vec<_> = contents.blocks.iter().map(|b| b.block_type).collect();
    assert_eq!(types, [BlockType::Delete, BlockType::Command]);
    assert_eq!(contents.blocks[0].offset as usize, offsets[1] + 9);
    assert_eq!(contents.corrupt.len(), 1);
    assert_eq!(contents.corrupt[0].offset, 0);
    assert_eq!(contents.corrupt[0].len as usize, offsets[1] + 9);
    assert!(contents.corrupt[0].reason.contains("followed neither"));

    let err = read_log_file_with(&bad, "g.log", ReadMode::Strict).unwrap_err();
    assert_corrupt_at(err, "g.log", 0, "magic");
}

#[test]
fn test_read_log_file_garbage_before_first_block_reported_with_offset() {
    let (file, _) = three_block_file();
    let mut bad = b"xx".to_vec();
    bad.extend_from_slice(&file);
    let contents = read_log_file(&bad, "s.log").unwrap();
    assert_eq!(contents.blocks.len(), 3);
    assert_eq!(contents.corrupt.len(), 1);
    assert_eq!(
        (contents.corrupt[0].offset, contents.corrupt[0].len),
        (0, 2)
    );
    let err = read_log_file_with(&bad, "s.log", ReadMode::Strict).unwrap_err();
    assert_corrupt_at(err, "s.log", 0, "no block magic");
}

#[test]
fn test_decode_avro_data_block_bad_content_version_unsupported() {
    let good = encode_avro_data_block("1", SCHEMA, &[record("a", 1)]).unwrap();
    let mut block = read_log_file(&good, "v.log").unwrap().blocks.remove(0);
    let mut content = block.content.to_vec();
    content[3] = 2;
    block.content = content.into();
    let err = decode_avro_data_block(&block, "v.log").unwrap_err();
    assert!(
        matches!(err, FormatError::UnsupportedBlock { offset: 0, .. }),
        "{err}"
    );
}

#[test]
fn test_read_log_file_empty_input_no_blocks() {
    let contents = read_log_file(&[], "e.log").unwrap();
    assert!(contents.blocks.is_empty() && contents.corrupt.is_empty());
}

/// Decoding whatever blocks come out must not panic either.
fn decode_all(bytes: &[u8]) -> usize {
    let contents = read_log_file(bytes, "p.log").unwrap();
    for block in &contents.blocks {
        let _ = decode_data_block(block, "p.log", None);
        let _ = decode_delete_block(block, "p.log");
        let _ = block.rollback_target();
    }
    let _ = read_log_file_with(bytes, "p.log", ReadMode::Strict);
    contents.blocks.len()
}

proptest! {
    #[test]
    fn test_read_log_file_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut with_magic = b"#HUDI#".to_vec();
        with_magic.extend_from_slice(&bytes);
        decode_all(&bytes);
        decode_all(&with_magic);
    }

    #[test]
    fn test_read_log_file_truncated_valid_file_yields_prefix_blocks(cut in 0usize..2000) {
        let (file, offsets) = three_block_file();
        let cut = cut.min(file.len());
        let truncated = &file[..cut];
        let contents = read_log_file(truncated, "p.log").unwrap();
        let complete = offsets.iter().skip(1).chain(std::iter::once(&file.len())).filter(|end| **end <= cut).count();
        prop_assert_eq!(contents.blocks.len(), complete);
        let covered: u64 = contents.blocks.iter().map(|b| b.size).sum::<u64>()
            + contents.corrupt.iter().map(|c| c.len).sum::<u64>();
        prop_assert_eq!(covered as usize, cut);
        decode_all(truncated);
    }

    #[test]
    fn test_read_log_file_bit_flips_never_panic(flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..6)) {
        let (mut file, _) = three_block_file();
        for (idx, bit) in &flips {
            let i = idx.index(file.len());
            file[i] ^= 1 << bit;
        }
        let contents = read_log_file(&file, "p.log").unwrap();
        let covered: u64 = contents.blocks.iter().map(|b| b.size).sum::<u64>()
            + contents.corrupt.iter().map(|c| c.len).sum::<u64>();
        prop_assert_eq!(covered as usize, file.len());
        decode_all(&file);
    }
}
