//! Writing the RECORD_INDEX partition: its initialisation from a full key -> location map, and
//! the per-instant changes recorded as log files of the same MDT deltacommit that records the
//! instant's FILES change ([`crate::MdtWriter::commit`]).
//!
//! Layout (as Java writes it): `record_index/` holds `n` file groups `record-index-0000-0` ...
//! `record-index-<n-1>-0`; a record key lives in group [`file_group_index`]`(key, n)` (the
//! groups sorted by id). Initialisation writes one base HFile per group,
//! `record-index-000i-0_0-0-1_00000000000000001.hfile`, under MDT deltacommit
//! `00000000000000001`. A data instant `T` writes, for each group it touches,
//! `.record-index-000i-0_T.log.1_0-0-1` holding a DELETE block with the deleted keys (if any)
//! and then an HFILE_DATA block with the new locations (if any).

use std::collections::{BTreeMap, BTreeSet};

use arbor_format::hfile::mdt::METADATA_RECORD_SCHEMA_JSON;
use arbor_format::hfile::mdt_index::{
    encode_record_index_value, file_group_index, RecordIndexInfo, RecordLocation,
};
use arbor_format::hfile::{HFileWriter, HFileWriterOptions};
use arbor_format::log::block::BlockMetadata;
use arbor_format::log::writer::{encode_block, encode_delete_block};
use arbor_format::log::{BlockType, DeleteRecord, HeaderKey};
use arbor_timeline::avro::HoodieWriteStat;
use arbor_timeline::InstantTime;
use bytes::{Bytes, BytesMut};

use crate::error::{MdtError, Result};

/// The MDT partition of the record index.
pub const RECORD_INDEX: &str = "record_index";

/// The MDT instant that initialises the record index.
pub const RECORD_INDEX_INIT_INSTANT: &str = "00000000000000001";

/// Java's default (and minimum) number of record-index file groups.
pub const DEFAULT_RECORD_INDEX_GROUPS: usize = 10;

/// The `index.json` definition of the record index that Hudi 1.1 writes on a table of version
/// 9 (and arbor with it; version 8 tables carry none): type `record_index`, no function or
/// source fields, option `isPartitioned=false`, version `V1`.
pub fn record_index_definition() -> crate::secondary_index::IndexDefinition {
    crate::secondary_index::IndexDefinition {
        index_name: RECORD_INDEX.to_string(),
        index_type: RECORD_INDEX.to_string(),
        index_function: String::new(),
        source_fields: Vec::new(),
        index_options: BTreeMap::from([("isPartitioned".to_string(), "false".to_string())]),
        version: Some("V1".to_string()),
    }
}

/// The write token of MDT files written by arbor.
const TOKEN: &str = "0-0-1";

/// The id of record-index file group `i`.
pub fn record_index_file_id(i: usize) -> String {
    format!("record-index-{i:04}-0")
}

/// One data instant's change to the record index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordIndexDelta {
    /// Keys written to a new location (inserted, or moved to another file group).
    pub upserts: BTreeMap<String, RecordLocation>,
    /// Keys that no longer exist. A key in both maps is upserted (its delete is dropped).
    pub deletes: BTreeSet<String>,
}

impl RecordIndexDelta {
    /// True when nothing changes.
    pub fn is_empty(&self) -> bool {
        self.upserts.is_empty() && self.deletes.is_empty()
    }
}

/// The epoch milliseconds of an instant time (the timeline time zone of arbor's tables is UTC);
/// 0 for initialisation instants.
pub fn instant_millis(t: &InstantTime) -> i64 {
    t.to_datetime().map_or(0, |d| d.timestamp_millis())
}

fn fmt_err(path: &str) -> impl Fn(arbor_format::FormatError) -> MdtError + '_ {
    move |source| MdtError::Format {
        path: path.to_string(),
        source,
    }
}

/// An HFile of record-index entries (sorted by key).
fn encode_entries(entries: &BTreeMap<&str, &RecordLocation>, path: &str) -> Result<Bytes> {
    let mut w = HFileWriter::new(HFileWriterOptions::default());
    w.set_file_info("schema", METADATA_RECORD_SCHEMA_JSON.as_bytes().to_vec());
    for (key, loc) in entries {
        let value = encode_record_index_value(&RecordIndexInfo::from_location(loc))
            .map_err(fmt_err(path))?;
        w.append(key.as_bytes(), &value).map_err(fmt_err(path))?;
    }
    w.finish().map_err(fmt_err(path))
}

/// The base files of a new record index over `entries` with `groups` file groups: (relative
/// path `record_index/<name>`, bytes, entry count), one per group (empty groups included).
pub fn initial_files(
    entries: &BTreeMap<String, RecordLocation>,
    groups: usize,
) -> Result<Vec<(String, Bytes, usize)>> {
    let groups = groups.max(1);
    let mut split: Vec<BTreeMap<&str, &RecordLocation>> = vec![BTreeMap::new(); groups];
    for (k, loc) in entries {
        if let Some(g) = split.get_mut(file_group_index(k, groups)) {
            g.insert(k.as_str(), loc);
        }
    }
    let mut out = Vec::with_capacity(groups);
    for (i, part) in split.iter().enumerate() {
        let rel = format!(
            "{RECORD_INDEX}/{}_{TOKEN}_{RECORD_INDEX_INIT_INSTANT}.hfile",
            record_index_file_id(i)
        );
        let bytes = encode_entries(part, &rel)?;
        out.push((rel, bytes, part.len()));
    }
    Ok(out)
}

/// The log files of one instant's record-index change over `groups` file groups: (relative
/// path, bytes, write stat) per touched group.
pub fn delta_files(
    time: &InstantTime,
    delta: &RecordIndexDelta,
    groups: usize,
) -> Result<Vec<(String, Bytes, HoodieWriteStat)>> {
    let groups = groups.max(1);
    let mut upserts: Vec<BTreeMap<&str, &RecordLocation>> = vec![BTreeMap::new(); groups];
    let mut deletes: Vec<Vec<&str>> = vec![Vec::new(); groups];
    for (k, loc) in &delta.upserts {
        if let Some(g) = upserts.get_mut(file_group_index(k, groups)) {
            g.insert(k.as_str(), loc);
        }
    }
    for k in &delta.deletes {
        if delta.upserts.contains_key(k) {
            continue;
        }
        if let Some(g) = deletes.get_mut(file_group_index(k, groups)) {
            g.push(k.as_str());
        }
    }
    let mut out = Vec::new();
    for (i, (ups, dels)) in upserts.iter().zip(&deletes).enumerate() {
        if ups.is_empty() && dels.is_empty() {
            continue;
        }
        let file_id = record_index_file_id(i);
        let name = format!(".{file_id}_{time}.log.1_{TOKEN}");
        let rel = format!("{RECORD_INDEX}/{name}");
        let mut bytes = BytesMut::new();
        let mut blocks = 0i64;
        if !dels.is_empty() {
            let records: Vec<DeleteRecord> = dels
                .iter()
                .map(|k| DeleteRecord::new(*k, RECORD_INDEX))
                .collect();
            let block =
                encode_delete_block(time.as_str(), None, &records).map_err(fmt_err(&rel))?;
            bytes.extend_from_slice(&block);
            blocks += 1;
        }
        if !ups.is_empty() {
            let hfile = encode_entries(ups, &rel)?;
            let mut header = BlockMetadata::new();
            header.insert(HeaderKey::InstantTime, time.to_string());
            header.insert(HeaderKey::Schema, METADATA_RECORD_SCHEMA_JSON.to_string());
            let block = encode_block(BlockType::HfileData, &header, &hfile, &BlockMetadata::new())
                .map_err(fmt_err(&rel))?;
            bytes.extend_from_slice(&block);
            blocks += 1;
        }
        let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        let n = i64::try_from(ups.len() + dels.len()).unwrap_or(i64::MAX);
        let stat = HoodieWriteStat {
            file_id: Some(file_id),
            path: Some(rel.clone()),
            prev_commit: Some(RECORD_INDEX_INIT_INSTANT.to_string()),
            num_writes: Some(n),
            num_update_writes: Some(i64::try_from(ups.len()).unwrap_or(i64::MAX)),
            num_deletes: Some(i64::try_from(dels.len()).unwrap_or(i64::MAX)),
            total_write_bytes: Some(size),
            file_size_in_bytes: Some(size),
            partition_path: Some(RECORD_INDEX.to_string()),
            log_version: Some(1),
            log_offset: Some(0),
            base_file: Some(String::new()),
            log_files: Some(vec![name]),
            total_log_blocks: Some(blocks),
            ..HoodieWriteStat::default()
        };
        out.push((rel, bytes.freeze(), stat));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(p: &str, f: &str) -> RecordLocation {
        RecordLocation {
            partition: p.to_string(),
            file_id: f.to_string(),
            instant_time_millis: 1,
        }
    }

    #[test]
    fn test_initial_files_one_per_group_keys_hashed() {
        let mut e = BTreeMap::new();
        for i in 0..50 {
            e.insert(format!("k{i}"), loc("p", "f-0"));
        }
        let files = initial_files(&e, 4).unwrap();
        assert_eq!(files.len(), 4);
        assert_eq!(files.iter().map(|f| f.2).sum::<usize>(), 50);
        assert!(files[2].0.starts_with("record_index/record-index-0002-0_"));
    }

    #[test]
    fn test_delta_files_upsert_wins_over_delete_and_untouched_groups_skipped() {
        let mut d = RecordIndexDelta::default();
        d.upserts.insert("a".into(), loc("p", "f-0"));
        d.deletes.insert("a".into());
        let t = InstantTime::parse("20260101000000000").unwrap();
        let files = delta_files(&t, &d, 10).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].2.num_deletes, Some(0));
    }
}
