//! The MDT index partitions' values and keys (spec §6.2, §6.3): `record_index` records
//! (`HoodieMetadataRecord` type 5, payload `HoodieRecordIndexInfo`), `secondary_index_<name>`
//! records (type 7, payload `HoodieSecondaryIndexInfo`), the secondary-index key escaping of
//! Java's `SecondaryIndexKeyUtils`, and the key -> file-group hash of Java's
//! `HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex`.
//!
//! Values are encoded with the same writer schema as the `files` partition's
//! ([`super::mdt::metadata_record_schema`]); decoding takes the writer schema of the file or
//! block the value came from.

use apache_avro::types::Value;
use apache_avro::Schema;

use super::mdt::metadata_record_schema;
use crate::{FormatError, Result};

/// Record type of a `record_index` record.
pub const RECORD_TYPE_RECORD_INDEX: i32 = 5;
/// Record type of a `secondary_index_*` record.
pub const RECORD_TYPE_SECONDARY_INDEX: i32 = 7;

/// `fileIdEncoding` 0: the file id is `<uuid>[-<fileIndex>]`, stored as the UUID's two signed
/// 64-bit halves and `fileIndex` (`fileId` is the empty string).
pub const FILE_ID_ENCODING_UUID: i32 = 0;
/// `fileIdEncoding` 1: the file id is stored as is in `fileId` (the bits and index are -1).
pub const FILE_ID_ENCODING_RAW: i32 = 1;
/// `fileIndex` of a UUID-encoded file id without a `-<N>` suffix (Java
/// `RECORD_INDEX_MISSING_FILEINDEX_FALLBACK`).
pub const MISSING_FILE_INDEX: i32 = -1;

/// The separator between the escaped secondary value and the escaped record key in a
/// secondary-index record key.
pub const SECONDARY_KEY_SEPARATOR: char = '$';
/// The escape character of secondary-index keys.
pub const SECONDARY_KEY_ESCAPE: char = '\\';
/// The whole escaped form of a null secondary value (Java `NULL_CHAR`).
pub const SECONDARY_KEY_NULL: char = '\0';

/// `HoodieRecordIndexInfo` as stored: the payload of one `record_index` record.
///
/// Guarantees: [`RecordIndexInfo::from_location`] and [`RecordIndexInfo::location`] are
/// inverse for every file id (UUID-shaped ids use encoding 0 like Java, others encoding 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordIndexInfo {
    /// `partitionName`: the data partition path of the record (`""` when non-partitioned).
    pub partition_name: String,
    /// `fileIdHighBits`: the UUID's most significant 64 bits (encoding 0), else -1.
    pub file_id_high_bits: i64,
    /// `fileIdLowBits`: the UUID's least significant 64 bits (encoding 0), else -1.
    pub file_id_low_bits: i64,
    /// `fileIndex`: the `-<N>` suffix of the file id, [`MISSING_FILE_INDEX`] if none.
    pub file_index: i32,
    /// `fileId`: the raw file id (encoding 1), `""` with encoding 0.
    pub file_id: String,
    /// `instantTime`: epoch milliseconds of the instant that wrote the record (the instant
    /// time parsed in the table's timeline time zone).
    pub instant_time_millis: i64,
    /// `fileIdEncoding`: [`FILE_ID_ENCODING_UUID`] or [`FILE_ID_ENCODING_RAW`].
    pub file_id_encoding: i32,
    /// `position`: the record's position in the file group (Java writes null).
    pub position: Option<i64>,
}

/// Where a record lives, decoded from a [`RecordIndexInfo`] (Java `HoodieRecordGlobalLocation`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordLocation {
    /// The data partition path (`""` when non-partitioned).
    pub partition: String,
    /// The data file group id (`<uuid>-<N>` for Hudi-written files).
    pub file_id: String,
    /// Epoch milliseconds of the instant that wrote the record.
    pub instant_time_millis: i64,
}

impl RecordIndexInfo {
    /// The payload Java writes for `location` (`createRecordIndexUpdate`): a file id of the
    /// form `<uuid>` or `<uuid>-<N>` (lowercase or uppercase hex, 8-4-4-4-12) is stored with
    /// encoding 0; any other id is stored raw with encoding 1. `position` is null.
    pub fn from_location(location: &RecordLocation) -> Self {
        if let Some((uuid, file_index)) = split_uuid_file_id(&location.file_id) {
            // The two halves of the UUID as Java's signed longs (bit reinterpretation).
            let high = (uuid >> 64) as u64 as i64;
            let low = uuid as u64 as i64;
            RecordIndexInfo {
                partition_name: location.partition.clone(),
                file_id_high_bits: high,
                file_id_low_bits: low,
                file_index,
                file_id: String::new(),
                instant_time_millis: location.instant_time_millis,
                file_id_encoding: FILE_ID_ENCODING_UUID,
                position: None,
            }
        } else {
            RecordIndexInfo {
                partition_name: location.partition.clone(),
                file_id_high_bits: -1,
                file_id_low_bits: -1,
                file_index: -1,
                file_id: location.file_id.clone(),
                instant_time_millis: location.instant_time_millis,
                file_id_encoding: FILE_ID_ENCODING_RAW,
                position: None,
            }
        }
    }

    /// The location this payload names (Java `getLocationFromRecordIndexInfo`): with encoding
    /// 0 the file id is the UUID in canonical lowercase form, followed by `-<fileIndex>` unless
    /// `fileIndex` is [`MISSING_FILE_INDEX`]; with any other encoding it is `fileId` as stored.
    pub fn location(&self) -> RecordLocation {
        let file_id = if self.file_id_encoding == FILE_ID_ENCODING_UUID {
            let uuid = format_uuid(self.file_id_high_bits, self.file_id_low_bits);
            if self.file_index == MISSING_FILE_INDEX {
                uuid
            } else {
                format!("{uuid}-{}", self.file_index)
            }
        } else {
            self.file_id.clone()
        };
        RecordLocation {
            partition: self.partition_name.clone(),
            file_id,
            instant_time_millis: self.instant_time_millis,
        }
    }
}

/// The canonical lowercase text of the UUID whose halves are `high` and `low` (Java
/// `new UUID(high, low).toString()`).
pub fn format_uuid(high: i64, low: i64) -> String {
    let v = (u128::from(high as u64) << 64) | u128::from(low as u64);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        (v >> 96) as u32,
        (v >> 80) as u16,
        (v >> 64) as u16,
        (v >> 48) as u16,
        v & 0xFFFF_FFFF_FFFF
    )
}

/// Parses a canonical 36-character UUID (8-4-4-4-12 hex digits, either case).
fn parse_uuid(s: &str) -> Option<u128> {
    let groups: Vec<&str> = s.split('-').collect();
    let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lens != [8, 4, 4, 4, 12] {
        return None;
    }
    let mut v: u128 = 0;
    for g in groups {
        if !g.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let part = u64::from_str_radix(g, 16).ok()?;
        v = (v << (4 * g.len())) | u128::from(part);
    }
    Some(v)
}

/// Splits `<uuid>` / `<uuid>-<N>` into the UUID and the file index (Java's
/// `createRecordIndexUpdate` rule: 36 characters means no index, otherwise the part after the
/// last `-` is a decimal int).
fn split_uuid_file_id(file_id: &str) -> Option<(u128, i32)> {
    if file_id.len() == 36 {
        return parse_uuid(file_id).map(|u| (u, MISSING_FILE_INDEX));
    }
    let (uuid, index) = file_id.rsplit_once('-')?;
    let uuid = parse_uuid(uuid)?;
    if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index: i32 = index.parse().ok()?;
    Some((uuid, index))
}

fn avro_err(path: &str, reason: impl Into<String>) -> FormatError {
    FormatError::Avro {
        path: path.to_string(),
        reason: reason.into(),
    }
}

fn unwrap_union(v: &Value) -> &Value {
    match v {
        Value::Union(_, inner) => inner,
        other => other,
    }
}

/// Decodes one `HoodieMetadataRecord` and returns its top-level fields.
fn decode_record(value: &[u8], writer_schema: &Schema, path: &str) -> Result<Fields> {
    let mut reader = value;
    let datum_reader = apache_avro::reader::datum::GenericDatumReader::builder(writer_schema)
        .build()
        .map_err(|e| avro_err(path, format!("HoodieMetadataRecord schema unusable: {e}")))?;
    let decoded = datum_reader
        .read_value(&mut reader)
        .map_err(|e| avro_err(path, format!("HoodieMetadataRecord cannot be decoded: {e}")))?;
    if !reader.is_empty() {
        return Err(avro_err(
            path,
            format!("{} trailing bytes after HoodieMetadataRecord", reader.len()),
        ));
    }
    match decoded {
        Value::Record(fields) => Ok(fields),
        _ => Err(avro_err(path, "HoodieMetadataRecord is not a record")),
    }
}

/// The fields of a decoded Avro record.
type Fields = Vec<(String, Value)>;

/// The record's `type` and its payload field `payload` (null union branches as `None`).
fn type_and_payload<'a>(
    fields: &'a [(String, Value)],
    payload: &str,
) -> (Option<i32>, Option<&'a Fields>) {
    let mut record_type = None;
    let mut inner = None;
    for (name, v) in fields {
        match (name.as_str(), unwrap_union(v)) {
            ("type", Value::Int(t)) => record_type = Some(*t),
            (n, Value::Record(r)) if n == payload => inner = Some(r),
            _ => {}
        }
    }
    (record_type, inner)
}

fn check_type(found: Option<i32>, expected: i32, path: &str) -> Result<()> {
    match found {
        Some(t) if t == expected => Ok(()),
        Some(t) => Err(avro_err(
            path,
            format!("HoodieMetadataRecord has type {t}, expected {expected}"),
        )),
        None => Err(avro_err(path, "HoodieMetadataRecord has no int `type`")),
    }
}

/// Decodes one value of the `record_index` partition written with `writer_schema` (the HFile
/// file-info `schema` or the log block `SCHEMA` header). Fails, naming `path`, unless the
/// record has type [`RECORD_TYPE_RECORD_INDEX`] and a non-null `recordIndexMetadata`.
/// Null `partitionName`/`fileId` decode as `""`, null bits/index/instant as -1.
pub fn decode_record_index_value(
    value: &[u8],
    writer_schema: &Schema,
    path: &str,
) -> Result<RecordIndexInfo> {
    let fields = decode_record(value, writer_schema, path)?;
    let (record_type, payload) = type_and_payload(&fields, "recordIndexMetadata");
    check_type(record_type, RECORD_TYPE_RECORD_INDEX, path)?;
    let payload = payload
        .ok_or_else(|| avro_err(path, "record index record has null recordIndexMetadata"))?;
    let mut info = RecordIndexInfo {
        partition_name: String::new(),
        file_id_high_bits: -1,
        file_id_low_bits: -1,
        file_index: MISSING_FILE_INDEX,
        file_id: String::new(),
        instant_time_millis: -1,
        file_id_encoding: FILE_ID_ENCODING_UUID,
        position: None,
    };
    for (name, v) in payload {
        match (name.as_str(), unwrap_union(v)) {
            ("partitionName", Value::String(s)) => info.partition_name = s.clone(),
            ("fileIdHighBits", Value::Long(x)) => info.file_id_high_bits = *x,
            ("fileIdLowBits", Value::Long(x)) => info.file_id_low_bits = *x,
            ("fileIndex", Value::Int(x)) => info.file_index = *x,
            ("fileId", Value::String(s)) => info.file_id = s.clone(),
            ("instantTime", Value::Long(x)) => info.instant_time_millis = *x,
            ("fileIdEncoding", Value::Int(x)) => info.file_id_encoding = *x,
            ("position", Value::Long(x)) => info.position = Some(*x),
            _ => {}
        }
    }
    Ok(info)
}

/// Decodes one value of a `secondary_index_*` partition and returns its `isDeleted` flag.
/// Fails, naming `path`, unless the record has type [`RECORD_TYPE_SECONDARY_INDEX`] and a
/// non-null `SecondaryIndexMetadata`.
pub fn decode_secondary_index_value(
    value: &[u8],
    writer_schema: &Schema,
    path: &str,
) -> Result<bool> {
    let fields = decode_record(value, writer_schema, path)?;
    let (record_type, payload) = type_and_payload(&fields, "SecondaryIndexMetadata");
    check_type(record_type, RECORD_TYPE_SECONDARY_INDEX, path)?;
    let payload = payload.ok_or_else(|| {
        avro_err(
            path,
            "secondary index record has null SecondaryIndexMetadata",
        )
    })?;
    payload
        .iter()
        .find_map(|(name, v)| match (name.as_str(), unwrap_union(v)) {
            ("isDeleted", Value::Boolean(d)) => Some(*d),
            _ => None,
        })
        .ok_or_else(|| avro_err(path, "HoodieSecondaryIndexInfo has no boolean isDeleted"))
}

fn null() -> Value {
    Value::Union(0, Box::new(Value::Null))
}

fn some(v: Value) -> Value {
    Value::Union(1, Box::new(v))
}

/// Encodes a whole `HoodieMetadataRecord` the way Spark writes index records (`key` empty,
/// `_hoodie_*` and the other payloads null) with `record_type` and the given payload fields.
fn encode_record(
    record_type: i32,
    record_index: Option<Value>,
    secondary_index: Option<Value>,
) -> Result<Vec<u8>> {
    let schema = metadata_record_schema()?;
    let value = Value::Record(vec![
        ("_hoodie_commit_time".into(), null()),
        ("_hoodie_commit_seqno".into(), null()),
        ("_hoodie_record_key".into(), null()),
        ("_hoodie_partition_path".into(), null()),
        ("_hoodie_file_name".into(), null()),
        ("key".into(), Value::String(String::new())),
        ("type".into(), Value::Int(record_type)),
        ("filesystemMetadata".into(), null()),
        ("BloomFilterMetadata".into(), null()),
        ("ColumnStatsMetadata".into(), null()),
        (
            "recordIndexMetadata".into(),
            record_index.map_or_else(null, some),
        ),
        (
            "SecondaryIndexMetadata".into(),
            secondary_index.map_or_else(null, some),
        ),
    ]);
    let err =
        |e: apache_avro::Error| avro_err("HoodieMetadataRecord", format!("cannot be encoded: {e}"));
    let writer = apache_avro::writer::datum::GenericDatumWriter::builder(schema)
        .build()
        .map_err(err)?;
    let mut out = Vec::new();
    writer.write_value_ref(&mut out, &value).map_err(err)?;
    Ok(out)
}

/// Encodes a `record_index` value (type [`RECORD_TYPE_RECORD_INDEX`]) with
/// [`metadata_record_schema`]; [`decode_record_index_value`] returns `info` unchanged.
pub fn encode_record_index_value(info: &RecordIndexInfo) -> Result<Vec<u8>> {
    let payload = Value::Record(vec![
        (
            "partitionName".into(),
            some(Value::String(info.partition_name.clone())),
        ),
        (
            "fileIdHighBits".into(),
            some(Value::Long(info.file_id_high_bits)),
        ),
        (
            "fileIdLowBits".into(),
            some(Value::Long(info.file_id_low_bits)),
        ),
        ("fileIndex".into(), some(Value::Int(info.file_index))),
        ("fileId".into(), some(Value::String(info.file_id.clone()))),
        (
            "instantTime".into(),
            some(Value::Long(info.instant_time_millis)),
        ),
        ("fileIdEncoding".into(), Value::Int(info.file_id_encoding)),
        (
            "position".into(),
            info.position.map_or_else(null, |p| some(Value::Long(p))),
        ),
    ]);
    encode_record(RECORD_TYPE_RECORD_INDEX, Some(payload), None)
}

/// Encodes a `secondary_index_*` value (type [`RECORD_TYPE_SECONDARY_INDEX`]) with
/// [`metadata_record_schema`]; [`decode_secondary_index_value`] returns `is_deleted`.
pub fn encode_secondary_index_value(is_deleted: bool) -> Result<Vec<u8>> {
    let payload = Value::Record(vec![("isDeleted".into(), Value::Boolean(is_deleted))]);
    encode_record(RECORD_TYPE_SECONDARY_INDEX, None, Some(payload))
}

/// Java's `SecondaryIndexKeyUtils.escapeSpecialChars`: `None` becomes the single character
/// U+0000; otherwise `\`, `$` and U+0000 are each preceded by `\`.
pub fn escape_secondary_key_part(s: Option<&str>) -> String {
    let Some(s) = s else {
        return SECONDARY_KEY_NULL.to_string();
    };
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == SECONDARY_KEY_ESCAPE || c == SECONDARY_KEY_SEPARATOR || c == SECONDARY_KEY_NULL {
            out.push(SECONDARY_KEY_ESCAPE);
        }
        out.push(c);
    }
    out
}

/// Java's `SecondaryIndexKeyUtils.unescapeSpecialChars`: the single character U+0000 is
/// `None`; otherwise every `\` is dropped and the character after it kept as is.
pub fn unescape_secondary_key_part(s: &str) -> Option<String> {
    if s.len() == 1 && s.starts_with(SECONDARY_KEY_NULL) {
        return None;
    }
    let mut out = String::with_capacity(s.len());
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            out.push(c);
            escaped = false;
        } else if c == SECONDARY_KEY_ESCAPE {
            escaped = true;
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// The MDT record key of a secondary-index entry: `<escaped value>$<escaped record key>`
/// (Java `constructSecondaryIndexKey`; a `None` value is stored as U+0000).
pub fn secondary_index_key(value: Option<&str>, record_key: &str) -> String {
    let mut key = escape_secondary_key_part(value);
    key.push(SECONDARY_KEY_SEPARATOR);
    key.push_str(&escape_secondary_key_part(Some(record_key)));
    key
}

/// The byte position of the first unescaped `$` of a secondary-index key, if any.
fn separator_position(key: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in key.char_indices() {
        if c == SECONDARY_KEY_ESCAPE && !escaped {
            escaped = true;
        } else if c == SECONDARY_KEY_SEPARATOR && !escaped {
            return Some(i);
        } else {
            escaped = false;
        }
    }
    None
}

/// The escaped secondary value of a secondary-index key: everything before the first
/// unescaped `$`. `None` if the key has no unescaped `$`.
pub fn escaped_secondary_value(key: &str) -> Option<&str> {
    key.get(..separator_position(key)?)
}

/// The escaped secondary value of a secondary-index key followed by its `$` separator (Java
/// `getUnescapedSecondaryKeyPrefixFromSecondaryIndexKey`, despite its name the escaped form):
/// what Java 1.1 hashes to place entries of index version V2 and later. `None` if the key
/// has no unescaped `$`.
pub fn secondary_key_prefix(key: &str) -> Option<&str> {
    key.get(..separator_position(key)? + 1)
}

/// Splits a secondary-index key into the secondary value (`None` for a null value) and the
/// record key (Java `getSecondaryKeyRecordKeyPair`). Fails, naming the key, if it has no
/// unescaped `$` or the record-key part is the null marker.
pub fn parse_secondary_index_key(key: &str) -> Result<(Option<String>, String)> {
    let bad = |reason: &str| FormatError::Schema {
        field: None,
        reason: format!("secondary index key {key:?}: {reason}"),
    };
    let pos = separator_position(key).ok_or_else(|| bad("no unescaped '$' separator"))?;
    let value = key
        .get(..pos)
        .ok_or_else(|| bad("bad separator position"))?;
    let record = key
        .get(pos + 1..)
        .ok_or_else(|| bad("bad separator position"))?;
    let record_key =
        unescape_secondary_key_part(record).ok_or_else(|| bad("record key part is null"))?;
    Ok((unescape_secondary_key_part(value), record_key))
}

/// Java's `String.hashCode` of `s`: `h = 31 * h + c` over the UTF-16 code units, in wrapping
/// 32-bit arithmetic.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The MDT file group (0-based, `< num_file_groups`) that holds `key` (Java
/// `mapRecordKeyToFileGroupIndex`: `abs(abs(hashCode) % n)`). Used as is for `files`,
/// `record_index` (non-partitioned) and secondary indexes of version V1; secondary indexes of
/// version V2+ hash only the escaped secondary value and `$` ([`secondary_index_file_group`]).
/// Returns 0 when `num_file_groups` is 0.
pub fn file_group_index(key: &str, num_file_groups: usize) -> usize {
    let Ok(n) = i32::try_from(num_file_groups) else {
        return 0;
    };
    if n == 0 {
        return 0;
    }
    // Java: Math.abs(Integer.MIN_VALUE) stays negative; the remainder is then in (-n, 0], and
    // the outer abs makes it non-negative.
    let h = java_string_hash(key).wrapping_abs();
    let r = (h % n).unsigned_abs();
    r as usize
}

/// The file group of a secondary-index entry whose MDT key is `key`: with `hash_value_only`
/// (index version V2 and later, Java `getSecondaryKeyToFileGroupMappingFunction(true)`) the
/// hash is over [`secondary_key_prefix`] (escaped value and `$`, so every entry of one value
/// is in one file group); otherwise (V1) over the whole key. A key without a separator is
/// hashed whole.
pub fn secondary_index_file_group(
    key: &str,
    num_file_groups: usize,
    hash_value_only: bool,
) -> usize {
    let hashed = if hash_value_only {
        secondary_key_prefix(key).unwrap_or(key)
    } else {
        key
    };
    file_group_index(hashed, num_file_groups)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn schema() -> &'static Schema {
        metadata_record_schema().unwrap()
    }

    #[test]
    fn test_record_index_value_round_trip_uuid_encoding() {
        let loc = RecordLocation {
            partition: "region=us".into(),
            file_id: "4b63f708-eab3-4bdf-ba38-ce90f356fce2-0".into(),
            instant_time_millis: 1_772_900_757_587,
        };
        let info = RecordIndexInfo::from_location(&loc);
        assert_eq!(info.file_id_encoding, FILE_ID_ENCODING_UUID);
        assert_eq!(info.file_index, 0);
        assert_eq!(info.file_id, "");
        assert_eq!(info.file_id_high_bits, 0x4b63_f708_eab3_4bdf_u64 as i64);
        assert_eq!(info.file_id_low_bits, 0xba38_ce90_f356_fce2_u64 as i64);
        assert!(info.file_id_low_bits < 0, "low bits are signed");
        let bytes = encode_record_index_value(&info).unwrap();
        let back = decode_record_index_value(&bytes, schema(), "t").unwrap();
        assert_eq!(back, info);
        assert_eq!(back.location(), loc);
    }

    #[test]
    fn test_record_index_value_round_trip_raw_encoding() {
        for file_id in [
            "files-0000-0",
            "not-a-uuid",
            "4b63f708-eab3-4bdf-ba38-ce90f356fce2-x",
        ] {
            let loc = RecordLocation {
                partition: String::new(),
                file_id: file_id.into(),
                instant_time_millis: 5,
            };
            let info = RecordIndexInfo::from_location(&loc);
            assert_eq!(info.file_id_encoding, FILE_ID_ENCODING_RAW, "{file_id}");
            let bytes = encode_record_index_value(&info).unwrap();
            let back = decode_record_index_value(&bytes, schema(), "t").unwrap();
            assert_eq!(back.location(), loc);
        }
    }

    #[test]
    fn test_location_uuid_without_index_has_no_suffix() {
        let loc = RecordLocation {
            partition: "p".into(),
            file_id: "00000000-0000-0000-8000-00000000000A".into(),
            instant_time_millis: 1,
        };
        let info = RecordIndexInfo::from_location(&loc);
        assert_eq!(info.file_index, MISSING_FILE_INDEX);
        assert_eq!(
            info.location().file_id,
            "00000000-0000-0000-8000-00000000000a",
            "Java prints the UUID in lowercase"
        );
    }

    #[test]
    fn test_decode_record_index_value_wrong_type_fails() {
        let bytes = encode_secondary_index_value(false).unwrap();
        let err = decode_record_index_value(&bytes, schema(), "some/file").unwrap_err();
        assert!(err.to_string().contains("some/file"), "{err}");
    }

    #[test]
    fn test_secondary_index_value_round_trip() {
        for deleted in [false, true] {
            let bytes = encode_secondary_index_value(deleted).unwrap();
            assert_eq!(
                decode_secondary_index_value(&bytes, schema(), "t").unwrap(),
                deleted
            );
        }
    }

    #[test]
    fn test_secondary_index_key_java_examples() {
        // TestSecondaryIndexKeyUtils / TestHoodieMetadataPayload vectors.
        assert_eq!(
            secondary_index_key(Some("user_id"), "record_123"),
            "user_id$record_123"
        );
        assert_eq!(secondary_index_key(Some(""), ""), "$");
        assert_eq!(
            secondary_index_key(Some("part\\one"), "key$two"),
            "part\\\\one$key\\$two"
        );
        assert_eq!(secondary_index_key(None, "record_123"), "\0$record_123");
        assert_eq!(secondary_index_key(Some("a\0b"), "k"), "a\\\0b$k");
    }

    #[test]
    fn test_parse_secondary_index_key_round_trips() {
        let cases: &[(Option<&str>, &str)] = &[
            (Some("Spotify"), "TXN-018"),
            (None, "TXN-003"),
            (Some(""), ""),
            (Some("comp\\lex$sec"), "prim\\ary$k\\ey"),
            (Some("\0"), "x"),
            (Some("$$"), "\\"),
            (Some("ünï¢ødé"), "κλειδί"),
        ];
        for (value, record) in cases {
            let key = secondary_index_key(*value, record);
            let (v, r) = parse_secondary_index_key(&key).unwrap();
            assert_eq!(v.as_deref(), *value, "{key:?}");
            assert_eq!(r, *record, "{key:?}");
            assert_eq!(
                escaped_secondary_value(&key).unwrap(),
                escape_secondary_key_part(*value)
            );
        }
        assert!(parse_secondary_index_key("no separator").is_err());
        assert!(parse_secondary_index_key("escaped\\$only").is_err());
    }

    #[test]
    fn test_java_string_hash_known_values() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        // Overflowing and non-BMP (surrogate pair) input.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn test_file_group_index_java_vectors() {
        // HoodieTableMetadataUtil tests: mapRecordKeyToFileGroupIndex.
        assert_eq!(file_group_index("test_key", 10), 8);
        assert_eq!(file_group_index("secondary_key$primary_key", 10), 0);
        assert_eq!(file_group_index("test@key#123", 10), 0);
        assert_eq!(file_group_index("primary_key_secondary_key", 10), 7);
        assert_eq!(file_group_index("", 10), 0);
        assert_eq!(file_group_index("anything", 1), 0);
        assert_eq!(file_group_index("anything", 0), 0);
        // hashCode == Integer.MIN_VALUE: Java gives abs(MIN % 10) = 8.
        assert_eq!(file_group_index("polygenelubricants", 10), 8);
        assert_eq!(
            secondary_index_file_group("secondary_key$primary_key", 10, true),
            8
        );
        assert_eq!(
            secondary_index_file_group("secondary_key$primary_key", 10, false),
            0
        );
        assert_eq!(
            secondary_index_file_group(&secondary_index_key(Some("$"), "reckey"), 10, true),
            file_group_index(&format!("{}$", escape_secondary_key_part(Some("$"))), 10)
        );
        assert_eq!(secondary_key_prefix("a\\$b$c"), Some("a\\$b$"));
    }
}
