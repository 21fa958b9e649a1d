//! Secondary indexes (`secondary_index_<name>` MDT partitions): the text Hudi indexes for a
//! column value ([`value_text`]), the change a planned write makes to each index
//! ([`deltas_of`]), creation on an existing table ([`init_secondary_index`]) and lookups that
//! return record keys with their locations ([`secondary_lookup`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arbor_format::base::read_base_file;
use arbor_fsview::FileSlice;
use arbor_mdt::record_index::lookup_record_index;
use arbor_mdt::secondary_index::{secondary_index_partition, IndexDefinition, IndexDefinitions};
use arbor_mdt::secondary_index_writer::{
    is_secondary_index_partition, save_index_definition, secondary_index_definition,
    SecondaryEntry, SecondaryIndexDelta, SecondaryIndexDeltas, DEFAULT_SECONDARY_INDEX_GROUPS,
};
use arbor_mdt::MetadataTable;
use arbor_storage::Storage;
use arbor_timeline::config::keys;
use arbor_timeline::layout::DEFAULT_META_DIR;
use arbor_timeline::{ActiveTimeline, InstantTimeGenerator, TableConfig, TableLayout};
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};

use super::index::RecordLocation;
use super::planner::{Input, WritePlan};
use super::stored_keys::StoredKeys;
use crate::error::{Result, TableError};
use crate::read::{OrderKey, TableReader};

/// The key in `hoodie.properties` naming the index definitions file.
const INDEX_DEFS_PATH_KEY: &str = "hoodie.table.index.defs.path";

/// Java's `Double.toString` of `v` (shortest round-trip digits; plain notation for magnitudes
/// in [1e-3, 1e7), else `d.dddE<exp>`).
fn java_double(v: f64, shortest: String) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let a = v.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        return if shortest.contains('.') || shortest.contains("inf") {
            shortest
        } else {
            format!("{shortest}.0")
        };
    }
    // Scientific: Rust's `{:e}` gives the shortest digits as `d.ddde<exp>`.
    let sci = shortest;
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exp}")
}

/// The text Hudi stores in a secondary index for row `row` of `array` (Java indexes the
/// `toString` of the Avro value): strings as is, integers in decimal, booleans `true`/`false`,
/// dates as their epoch-day number (the Avro `date` int, as the fixtures show), timestamps as
/// the integer in the column's unit (the Avro `timestamp-millis`/`-micros` long), floats as
/// Java's `Float`/`Double.toString`; `None` for null. Other types (decimal, binary, nested) are
/// `Unsupported`.
pub fn value_text(array: &dyn Array, row: usize, column: &str) -> Result<Option<String>> {
    if row >= array.len() || array.is_null(row) {
        return Ok(None);
    }
    let text = match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().value(row).to_string(),
        DataType::LargeUtf8 => array.as_string::<i64>().value(row).to_string(),
        DataType::Utf8View => array.as_string_view().value(row).to_string(),
        DataType::Boolean => array.as_boolean().value(row).to_string(),
        DataType::Int8 => array.as_primitive::<Int8Type>().value(row).to_string(),
        DataType::Int16 => array.as_primitive::<Int16Type>().value(row).to_string(),
        DataType::Int32 => array.as_primitive::<Int32Type>().value(row).to_string(),
        DataType::Int64 => array.as_primitive::<Int64Type>().value(row).to_string(),
        DataType::UInt8 => array.as_primitive::<UInt8Type>().value(row).to_string(),
        DataType::UInt16 => array.as_primitive::<UInt16Type>().value(row).to_string(),
        DataType::UInt32 => array.as_primitive::<UInt32Type>().value(row).to_string(),
        DataType::UInt64 => array.as_primitive::<UInt64Type>().value(row).to_string(),
        DataType::Date32 => array.as_primitive::<Date32Type>().value(row).to_string(),
        DataType::Date64 => array
            .as_primitive::<Date64Type>()
            .value(row)
            .div_euclid(86_400_000)
            .to_string(),
        DataType::Timestamp(unit, _) => match unit {
            TimeUnit::Second => array.as_primitive::<TimestampSecondType>().value(row),
            TimeUnit::Millisecond => array.as_primitive::<TimestampMillisecondType>().value(row),
            TimeUnit::Microsecond => array.as_primitive::<TimestampMicrosecondType>().value(row),
            TimeUnit::Nanosecond => array.as_primitive::<TimestampNanosecondType>().value(row),
        }
        .to_string(),
        DataType::Float32 => {
            let v = array.as_primitive::<Float32Type>().value(row);
            let a = v.abs();
            let s = if a == 0.0 || (1e-3..1e7).contains(&a) {
                format!("{v}")
            } else {
                format!("{v:e}")
            };
            java_double(f64::from(v), s)
        }
        DataType::Float64 => {
            let v = array.as_primitive::<Float64Type>().value(row);
            let a = v.abs();
            let s = if a == 0.0 || (1e-3..1e7).contains(&a) {
                format!("{v}")
            } else {
                format!("{v:e}")
            };
            java_double(v, s)
        }
        other => {
            return Err(TableError::Unsupported {
                reason: format!("a secondary index on column {column:?} of type {other}"),
            })
        }
    };
    Ok(Some(text))
}

/// The secondary indexes the table has: the definitions in `index.json` whose partition is
/// listed in `hoodie.table.metadata.partitions`.
pub async fn secondary_indexes(
    storage: &dyn Storage,
    config: &TableConfig,
) -> Result<Vec<IndexDefinition>> {
    let listed: BTreeSet<String> = config
        .metadata_partitions()
        .into_iter()
        .filter(|p| is_secondary_index_partition(p))
        .collect();
    if listed.is_empty() {
        return Ok(Vec::new());
    }
    let defs = IndexDefinitions::load(storage).await?.unwrap_or_default();
    let mut out = Vec::new();
    for p in &listed {
        match defs.get(p) {
            Some(d) => out.push(d.clone()),
            None => {
                return Err(TableError::Corrupt {
                    path: arbor_mdt::secondary_index::INDEX_DEFS_PATH.to_string(),
                    reason: format!(
                        "the table lists metadata partition {p} but has no definition for it"
                    ),
                })
            }
        }
    }
    Ok(out)
}

/// The single indexed column of `def`.
fn column_of(def: &IndexDefinition) -> Result<&str> {
    match def.source_fields.as_slice() {
        [c] if def.index_function == "identity" || def.index_function.is_empty() => Ok(c),
        _ => Err(TableError::Unsupported {
            reason: format!(
                "secondary index {} (function {:?} over {:?}): arbor maintains only identity \
                 indexes on one column",
                def.index_name, def.index_function, def.source_fields
            ),
        }),
    }
}

/// The (record key, value text) of every record of one latest slice for each of `columns`:
/// column -> key -> value. A slice without log files is read projected to the key and the
/// columns; a slice with log files is merged.
pub async fn slice_values(
    storage: &Arc<dyn Storage>,
    reader: &TableReader,
    slice: &FileSlice,
    columns: &[String],
) -> Result<BTreeMap<String, BTreeMap<String, Option<String>>>> {
    Ok(slice_values_ordered(storage, reader, slice, columns, None)
        .await?
        .0)
}

/// Column values by key (as [`slice_values`]) and, with `ordering`, each key's ordering value.
type SliceValues = (
    BTreeMap<String, BTreeMap<String, Option<String>>>,
    HashMap<String, OrderKey>,
);

async fn slice_values_ordered(
    storage: &Arc<dyn Storage>,
    reader: &TableReader,
    slice: &FileSlice,
    columns: &[String],
    ordering: Option<&str>,
) -> Result<SliceValues> {
    let source = StoredKeys::for_table(reader.config())?;
    let batches: Vec<RecordBatch> = if slice.log_files.is_empty() {
        match slice.base_file_path() {
            Some(path) => {
                let mut projection = source.columns();
                for c in columns.iter().map(String::as_str).chain(ordering) {
                    if !projection.iter().any(|p| p == c) {
                        projection.push(c.to_string());
                    }
                }
                read_base_file(
                    storage.clone(),
                    &path,
                    slice.base_file_size(),
                    Some(&projection),
                )
                .await?
            }
            None => Vec::new(),
        }
    } else {
        reader
            .read_slice(slice, None, false)
            .await?
            .into_iter()
            .collect()
    };
    let context = format!(
        "file group {} in partition {:?}",
        slice.file_id, slice.partition
    );
    let mut out: BTreeMap<String, BTreeMap<String, Option<String>>> = BTreeMap::new();
    let mut orders = HashMap::new();
    for b in &batches {
        let keys = source.keys(b, &context)?;
        for c in columns {
            let col = b.column_by_name(c);
            let entry = out.entry(c.clone()).or_default();
            for (i, key) in keys.iter().enumerate() {
                let Some(key) = key else { continue };
                // A base file written before the column existed holds nulls.
                let v = match col {
                    Some(col) => value_text(col.as_ref(), i, c)?,
                    None => None,
                };
                entry.insert(key.clone(), v);
            }
        }
        if let Some(o) = ordering {
            let col = b.column_by_name(o);
            for (i, key) in keys.iter().enumerate() {
                let Some(key) = key else { continue };
                let order = match col {
                    Some(c) => OrderKey::from_column(c, i),
                    None => OrderKey::Default,
                };
                orders.insert(key.clone(), order);
            }
        }
    }
    Ok((out, orders))
}

/// The change a planned write makes to each secondary index of `defs` (keyed by MDT
/// partition; every index listed, possibly with an empty change): inserted rows add (value,
/// key); updated rows remove (old value, key) and add (new value, key); deleted keys remove
/// (old value, key); every entry of a replaced file group is removed. Old values come from
/// reading the latest slices of the file groups the write updates or deletes from (projected
/// to key and indexed columns), only for those groups.
///
/// With `ordering` (the ordering field of an event-time-ordered table), an update whose
/// ordering value is lower than the stored record's changes nothing (the merge keeps the
/// stored record, as readers and the copy-on-write writer do).
pub async fn deltas_of(
    storage: &Arc<dyn Storage>,
    reader: &TableReader,
    input: &Input,
    plan: &WritePlan,
    defs: &[IndexDefinition],
    ordering: Option<&str>,
) -> Result<SecondaryIndexDeltas> {
    let mut out = SecondaryIndexDeltas::new();
    if defs.is_empty() {
        return Ok(out);
    }
    let columns: Vec<String> = defs
        .iter()
        .map(|d| column_of(d).map(str::to_string))
        .collect::<Result<Vec<_>>>()?;
    let unique: Vec<String> = columns
        .iter()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let key_of = |r: usize| input.keys.get(r).map(|k| k.record_key.clone());
    // Old values of the groups with updates or deletes, and of replaced groups.
    let mut old: HashMap<(String, String), SliceValues> = HashMap::new();
    for g in &plan.groups {
        if g.updates.is_empty() && g.deletes.is_empty() {
            continue;
        }
        if let Some(slice) = &g.existing {
            let at = (g.partition.clone(), g.file_id.clone());
            if let std::collections::hash_map::Entry::Vacant(e) = old.entry(at) {
                e.insert(slice_values_ordered(storage, reader, slice, &unique, ordering).await?);
            }
        }
    }
    let mut replaced_values = Vec::new();
    for (partition, ids) in &plan.replaced {
        let wanted: HashSet<&String> = ids.iter().collect();
        for slice in reader
            .view()
            .latest_file_slices(Some(partition), None)
            .await
            .map_err(TableError::from_fsview)?
        {
            if wanted.contains(&slice.file_id) {
                replaced_values.push(slice_values(storage, reader, &slice, &unique).await?);
            }
        }
    }
    let new_order = ordering.and_then(|o| input.batch.column_by_name(o));
    // Whether update row `r` of key `k` of group `at` replaces the stored record.
    let wins = |at: &(String, String), k: &str, r: usize| -> bool {
        let (Some(col), Some(stored)) =
            (new_order, old.get(at).and_then(|(_, orders)| orders.get(k)))
        else {
            return true;
        };
        crate::read::newer_wins(stored, &OrderKey::from_column(col, r))
    };
    for (def, column) in defs.iter().zip(&columns) {
        let mut delta = SecondaryIndexDelta::default();
        let new_col = input.batch.column_by_name(column);
        let new_value = |r: usize| -> Result<Option<String>> {
            match new_col {
                Some(c) => value_text(c.as_ref(), r, column),
                None => Ok(None),
            }
        };
        for values in &replaced_values {
            if let Some(m) = values.get(column) {
                delta
                    .removed
                    .extend(m.iter().map(|(k, v)| (v.clone(), k.clone())));
            }
        }
        for g in &plan.groups {
            let at = (g.partition.clone(), g.file_id.clone());
            let olds = old.get(&at).and_then(|(m, _)| m.get(column));
            let old_entry = |key: &str| -> Option<SecondaryEntry> {
                olds.and_then(|m| m.get(key))
                    .map(|v| (v.clone(), key.to_string()))
            };
            for &r in &g.deletes {
                if let Some(k) = key_of(r) {
                    delta.removed.extend(old_entry(&k));
                }
            }
            for &r in &g.updates {
                if let Some(k) = key_of(r).filter(|k| wins(&at, k, r)) {
                    delta.removed.extend(old_entry(&k));
                    delta.added.insert((new_value(r)?, k));
                }
            }
            for &r in &g.inserts {
                if let Some(k) = key_of(r) {
                    delta.added.insert((new_value(r)?, k));
                }
            }
        }
        delta.normalize();
        out.insert(secondary_index_partition(&def.index_name), delta);
    }
    Ok(out)
}

/// An unchanged delta for every secondary index the table has (what a compaction records).
pub async fn unchanged(
    storage: &dyn Storage,
    config: &TableConfig,
) -> Result<SecondaryIndexDeltas> {
    Ok(secondary_indexes(storage, config)
        .await?
        .into_iter()
        .map(|d| {
            (
                secondary_index_partition(&d.index_name),
                SecondaryIndexDelta::default(),
            )
        })
        .collect())
}

/// The (value, key) pairs of `column` over every latest file slice of the table `reader` is
/// opened at.
pub async fn table_entries(
    storage: &Arc<dyn Storage>,
    reader: &TableReader,
    column: &str,
) -> Result<BTreeSet<SecondaryEntry>> {
    let mut out = BTreeSet::new();
    let columns = [column.to_string()];
    for p in reader
        .view()
        .partitions()
        .await
        .map_err(TableError::from_fsview)?
        .iter()
    {
        for slice in reader
            .view()
            .latest_file_slices(Some(p), None)
            .await
            .map_err(TableError::from_fsview)?
        {
            let values = slice_values(storage, reader, &slice, &columns).await?;
            if let Some(m) = values.get(column) {
                out.extend(m.iter().map(|(k, v)| (v.clone(), k.clone())));
            }
        }
    }
    Ok(out)
}

/// Creates secondary index `name` on `column` of a table that has a metadata table (the
/// caller holds the table lock): every (value, key) of the latest file slices in
/// [`DEFAULT_SECONDARY_INDEX_GROUPS`] MDT file groups, the definition added to `index.json`
/// (and `hoodie.table.index.defs.path` set), then `secondary_index_<name>` listed last in
/// `hoodie.table.metadata.partitions` (the step that turns it on). Refuses (`Unsupported` /
/// `InvalidInput`) a table without metadata table, with pending instants, an unknown column
/// or an existing index of that name. Returns the number of entries indexed.
pub async fn init_secondary_index(
    storage: &Arc<dyn Storage>,
    layout: &TableLayout,
    generator: &InstantTimeGenerator,
    schema: &arrow::datatypes::SchemaRef,
    name: &str,
    column: &str,
) -> Result<usize> {
    let partition = secondary_index_partition(name);
    if partition.len() == arbor_mdt::secondary_index::SECONDARY_INDEX_PREFIX.len()
        || !partition
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(TableError::InvalidInput {
            column: None,
            row: None,
            reason: format!(
                "index name {name:?}: use letters, digits, '_' and '-' only (and at least one)"
            ),
        });
    }
    let Ok(field) = schema.field_with_name(column) else {
        return Err(TableError::InvalidInput {
            column: Some(column.to_string()),
            row: None,
            reason: "the column to index is not in the table schema".to_string(),
        });
    };
    // Refuse types whose text form is unknown before anything is written.
    if !matches!(
        field.data_type(),
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(_, _)
            | DataType::Float32
            | DataType::Float64
    ) {
        return Err(TableError::Unsupported {
            reason: format!(
                "a secondary index on column {column:?} of type {}",
                field.data_type()
            ),
        });
    }
    let config = TableConfig::load(storage.as_ref(), DEFAULT_META_DIR).await?;
    let partitions = config.metadata_partitions();
    if partitions.iter().any(|p| p == &partition)
        || config
            .metadata_partitions_inflight()
            .iter()
            .any(|p| p == &partition)
    {
        return Err(TableError::Unsupported {
            reason: format!("the table already has an index named {partition}"),
        });
    }
    let Some(writer) = super::mdt_sync::writer_if_enabled(storage).await? else {
        return Err(TableError::Unsupported {
            reason:
                "secondary indexes live in the metadata table; create it first (arbor mdt init)"
                    .to_string(),
        });
    };
    let tl = ActiveTimeline::load(storage.clone(), layout.clone()).await?;
    if let Some(p) = tl.pending().first() {
        return Err(TableError::Unsupported {
            reason: format!(
                "the table has pending instants (first: {p}); finish or roll them back before \
                 creating a secondary index"
            ),
        });
    }
    let reader = TableReader::open_view(storage.clone()).await?;
    let entries = table_entries(storage, &reader, column).await?;
    let def = secondary_index_definition(&partition, column, config.version());
    save_index_definition(storage.as_ref(), &def).await?;
    let value_only = def.hashes_value_only(config.version().code());
    writer
        .init_secondary_index(
            &partition,
            &entries,
            DEFAULT_SECONDARY_INDEX_GROUPS,
            value_only,
            generator,
        )
        .await?;
    let mut listed = partitions;
    listed.push(partition);
    TableConfig::update(storage.as_ref(), DEFAULT_META_DIR, |c| {
        c.set(
            INDEX_DEFS_PATH_KEY,
            arbor_mdt::secondary_index::INDEX_DEFS_PATH,
        )?;
        c.set(keys::METADATA_PARTITIONS, listed.join(","))
    })
    .await?;
    Ok(entries.len())
}

/// The record keys whose indexed column has text `value` (`None` = null, see `value_text`
/// for the text of non-string columns) in secondary index `index_name` (with or without the
/// `secondary_index_` prefix), each with its current location, sorted by key.
///
/// Cost: the index read is one MDT partition (V1 indexes spread a value over every file group;
/// all are read, filtered by the value's key prefix). Locations come from the record index
/// when the table has one (reads only the groups the keys hash to); otherwise every latest
/// file slice of the table is scanned for the keys' record-key column (as costly as a full
/// key scan). Keys the index names but no latest slice holds are left out. Errors:
/// `InvalidInput` when the table has no such index.
pub async fn secondary_lookup(
    storage: &Arc<dyn Storage>,
    index_name: &str,
    value: Option<&str>,
) -> Result<Vec<(String, RecordLocation)>> {
    let reader = TableReader::open_view(storage.clone()).await?;
    let partition = secondary_index_partition(index_name);
    if !reader
        .config()
        .metadata_partitions()
        .iter()
        .any(|p| p == &partition)
    {
        return Err(TableError::InvalidInput {
            column: None,
            row: None,
            reason: format!("the table has no secondary index {partition}"),
        });
    }
    let Some(mdt) =
        MetadataTable::open_with(storage.clone(), reader.view().history().active()).await?
    else {
        return Err(TableError::InvalidInput {
            column: None,
            row: None,
            reason: "the table has no metadata table".to_string(),
        });
    };
    let keys = arbor_mdt::secondary_lookup(storage.as_ref(), &mdt, &partition, value).await?;
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut bases: HashMap<(String, String), arbor_timeline::InstantTime> = HashMap::new();
    let mut out = Vec::new();
    if super::record_index::has_record_index(reader.config()) {
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let found = lookup_record_index(storage.as_ref(), &mdt, &refs).await?;
        let partitions: BTreeSet<&str> = found
            .values()
            .map(|e| e.location.partition.as_str())
            .collect();
        for p in partitions {
            for s in reader
                .view()
                .latest_file_slices(Some(p), None)
                .await
                .map_err(TableError::from_fsview)?
            {
                bases.insert((s.partition.clone(), s.file_id.clone()), s.base_instant);
            }
        }
        for k in &keys {
            if let Some(e) = found.get(k) {
                let at = (e.location.partition.clone(), e.location.file_id.clone());
                if let Some(base) = bases.get(&at) {
                    out.push((
                        k.clone(),
                        RecordLocation {
                            partition: at.0,
                            file_id: at.1,
                            base_instant: base.clone(),
                        },
                    ));
                }
            }
        }
    } else {
        let wanted: HashSet<&str> = keys.iter().map(String::as_str).collect();
        for p in reader
            .view()
            .partitions()
            .await
            .map_err(TableError::from_fsview)?
            .iter()
        {
            for slice in reader
                .view()
                .latest_file_slices(Some(p), None)
                .await
                .map_err(TableError::from_fsview)?
            {
                for k in super::index::SimpleIndex::slice_keys(storage, &reader, &slice).await? {
                    if wanted.contains(k.as_str()) {
                        out.push((
                            k,
                            RecordLocation {
                                partition: slice.partition.clone(),
                                file_id: slice.file_id.clone(),
                                base_instant: slice.base_instant.clone(),
                            },
                        ));
                    }
                }
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use arrow::array::{
        BooleanArray, Date32Array, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray,
    };

    #[test]
    fn test_value_text_strings_ints_booleans_and_null() {
        let s = StringArray::from(vec![Some("a$b"), None]);
        assert_eq!(value_text(&s, 0, "c").unwrap().as_deref(), Some("a$b"));
        assert_eq!(value_text(&s, 1, "c").unwrap(), None);
        let i = Int64Array::from(vec![-42]);
        assert_eq!(value_text(&i, 0, "c").unwrap().as_deref(), Some("-42"));
        let b = BooleanArray::from(vec![true]);
        assert_eq!(value_text(&b, 0, "c").unwrap().as_deref(), Some("true"));
    }

    #[test]
    fn test_value_text_date_is_epoch_day_and_timestamp_raw_micros() {
        // 2024-03-01 is day 19783.
        let d = Date32Array::from(vec![19_783]);
        assert_eq!(value_text(&d, 0, "c").unwrap().as_deref(), Some("19783"));
        let t = TimestampMicrosecondArray::from(vec![1_700_000_000_123_456]);
        assert_eq!(
            value_text(&t, 0, "c").unwrap().as_deref(),
            Some("1700000000123456")
        );
    }

    #[test]
    fn test_value_text_doubles_follow_java_to_string() {
        let f = Float64Array::from(vec![1.0, 2.5, 1e7, 1.5e-4, 0.0, 123.456]);
        let got: Vec<String> = (0..f.len())
            .map(|i| value_text(&f, i, "c").unwrap().unwrap())
            .collect();
        assert_eq!(got, ["1.0", "2.5", "1.0E7", "1.5E-4", "0.0", "123.456"]);
    }

    #[test]
    fn test_value_text_decimal_unsupported() {
        let a = arrow::array::Decimal128Array::from(vec![1])
            .with_precision_and_scale(10, 2)
            .unwrap();
        assert!(value_text(&a, 0, "amount").is_err());
    }
}
