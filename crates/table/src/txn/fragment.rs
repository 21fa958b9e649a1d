//! The two serializable halves of a distributed write ([`crate::Table::begin_write`]):
//! [`WriteContext`], what a fragment writer needs to write into the write's instant, and
//! [`Fragment`], the description of what one fragment wrote; and how the coordinator combines
//! fragments into one commit ([`combine`]), refusing fragments that would make a table no
//! single-process write could make (two fragments rewriting one file group, one key written by
//! two fragments of an upsert or delete, fragments of different schemas).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;

use arbor_format::hfile::mdt_index::RecordLocation;
use arbor_mdt::index_writer::RecordIndexDelta;
use arbor_mdt::secondary_index_writer::SecondaryEntry;
use arbor_timeline::avro::HoodieCommitMetadata;
use arbor_timeline::{Action, InstantTime};
use serde::{Deserialize, Serialize};

use super::write::WrittenInput;
use crate::error::{Result, TableError};
use crate::keygen::HoodieKey;
use crate::write::options::WriteOperation;
use crate::write::schema::{DataSchema, SchemaChange};

/// The version of the [`WriteContext`] and [`Fragment`] encodings.
const FORMAT: u32 = 1;

/// The leading bytes of an encoded [`Fragment`].
const FRAGMENT_MAGIC: &[u8; 4] = b"ARBF";

/// What a fragment writer needs to write into a distributed write's instant: the instant, its
/// action, the operation and the metadata root (main or a branch) the write belongs to.
/// Small and serializable ([`WriteContext::to_json`]): send it to every worker, which opens
/// the same table and branch and calls [`crate::Table::write_fragment`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ContextWire")]
pub struct WriteContext {
    format: u32,
    instant: String,
    action: String,
    operation: String,
    root: String,
}

/// A [`WriteContext`] as deserialized, before it is checked: every way of reading a context
/// (serde in a caller's own structures too) goes through [`WriteContext::try_from`].
#[derive(Deserialize)]
struct ContextWire {
    format: u32,
    instant: String,
    action: String,
    operation: String,
    root: String,
}

impl TryFrom<ContextWire> for WriteContext {
    type Error = String;

    fn try_from(w: ContextWire) -> std::result::Result<WriteContext, String> {
        let context = WriteContext {
            format: w.format,
            instant: w.instant,
            action: w.action,
            operation: w.operation,
            root: w.root,
        };
        if context.format != FORMAT {
            return Err(format!(
                "write context format {} (this arbor reads {FORMAT})",
                context.format
            ));
        }
        operation_from_name(&context.operation).map_err(|e| e.to_string())?;
        context.action().map_err(|e| e.to_string())?;
        context.instant_time().map_err(|e| e.to_string())?;
        Ok(context)
    }
}

impl WriteContext {
    pub(super) fn new(
        instant: &InstantTime,
        action: Action,
        operation: WriteOperation,
        root: String,
    ) -> WriteContext {
        WriteContext {
            format: FORMAT,
            instant: instant.to_string(),
            action: action.name().to_string(),
            operation: operation_name(operation).to_string(),
            root,
        }
    }

    /// The instant (requested time) every fragment writes under.
    pub fn instant(&self) -> &str {
        &self.instant
    }

    /// The write operation.
    pub fn operation(&self) -> WriteOperation {
        operation_from_name(&self.operation).unwrap_or(WriteOperation::Insert)
    }

    /// The metadata directory of the root the write belongs to (`.hoodie` for main's
    /// initial root, `.hoodie/.branches/<name>` for a branch).
    pub fn root(&self) -> &str {
        &self.root
    }

    pub(super) fn action(&self) -> Result<Action> {
        Action::ALL
            .iter()
            .copied()
            .find(|a| a.name() == self.action)
            .ok_or_else(|| bad_encoding(format!("unknown action {:?}", self.action)))
    }

    pub(super) fn instant_time(&self) -> Result<InstantTime> {
        InstantTime::parse(&self.instant)
            .map_err(|e| bad_encoding(format!("instant {:?}: {e}", self.instant)))
    }

    /// The context as JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a context written by [`WriteContext::to_json`]; an unknown format version, action,
    /// operation or a malformed instant is [`TableError::InvalidInput`].
    pub fn from_json(text: &str) -> Result<WriteContext> {
        serde_json::from_str(text).map_err(|e| bad_encoding(format!("not a write context: {e}")))
    }
}

/// The name of `operation` as users spell it (`Table.write(op=...)` in Python, the CLI).
pub(crate) fn operation_name(operation: WriteOperation) -> &'static str {
    match operation {
        WriteOperation::Insert => "insert",
        WriteOperation::BulkInsert => "bulk_insert",
        WriteOperation::Upsert => "upsert",
        WriteOperation::Delete => "delete",
        WriteOperation::InsertOverwrite => "insert_overwrite",
        WriteOperation::InsertOverwriteTable => "insert_overwrite_table",
    }
}

fn operation_from_name(name: &str) -> Result<WriteOperation> {
    [
        WriteOperation::Insert,
        WriteOperation::BulkInsert,
        WriteOperation::Upsert,
        WriteOperation::Delete,
        WriteOperation::InsertOverwrite,
        WriteOperation::InsertOverwriteTable,
    ]
    .into_iter()
    .find(|op| operation_name(*op) == name)
    .ok_or_else(|| bad_encoding(format!("unknown write operation {name:?}")))
}

fn bad_encoding(reason: String) -> TableError {
    TableError::InvalidInput {
        column: None,
        row: None,
        reason,
    }
}

/// What one fragment of a distributed write wrote ([`crate::Table::write_fragment`]): its data
/// files with their write stats, the index changes they make, the record counts, and (for
/// upserts and deletes) a 128-bit hash of every key it wrote, so that the coordinator can
/// refuse a key written by two fragments. Serializable ([`Fragment::to_bytes`]): return it
/// from the worker to the coordinator, which commits all fragments at once
/// ([`crate::Table::commit_fragments`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Fragment {
    body: FragmentBody,
    keys: Vec<u128>,
}

/// Record index upserts as `(key, partition, file id, instant millis)`, and deletes.
type IndexDeltaBody = (Vec<(String, String, String, i64)>, Vec<String>);

/// Per secondary index, the entries added and removed.
type SecondaryDeltasBody = BTreeMap<String, (Vec<SecondaryEntry>, Vec<SecondaryEntry>)>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FragmentBody {
    format: u32,
    instant: String,
    task: u64,
    metadata: HoodieCommitMetadata,
    replaced: Option<BTreeMap<String, Vec<String>>>,
    planned_against: BTreeSet<String>,
    touched: BTreeSet<(String, String)>,
    inserted: u64,
    updated: u64,
    deleted: u64,
    skipped_stale: u64,
    record_index: Option<IndexDeltaBody>,
    secondary: Option<SecondaryDeltasBody>,
}

impl Fragment {
    /// Describes `written` (task `task` of the write at `instant`), with the hashes of `keys`
    /// when given (`global`: keys are unique across partitions).
    pub(super) fn new(
        instant: &InstantTime,
        task: u64,
        written: WrittenInput,
        keys: Option<(&[HoodieKey], bool)>,
    ) -> Fragment {
        let record_index = written.index_delta.map(|d| {
            (
                d.upserts
                    .into_iter()
                    .map(|(k, l)| (k, l.partition, l.file_id, l.instant_time_millis))
                    .collect(),
                d.deletes.into_iter().collect(),
            )
        });
        let secondary = written.secondary_deltas.map(|all| {
            all.into_iter()
                .map(|(name, d)| {
                    (
                        name,
                        (
                            d.added.into_iter().collect(),
                            d.removed.into_iter().collect(),
                        ),
                    )
                })
                .collect()
        });
        // A key the input holds twice was combined by the write (pre-combine, as
        // `Table::write` does): the fragment wrote it once.
        let mut keys: Vec<u128> = keys
            .map(|(keys, global)| keys.iter().map(|k| key_hash(k, global)).collect())
            .unwrap_or_default();
        keys.sort_unstable();
        keys.dedup();
        Fragment {
            body: FragmentBody {
                format: FORMAT,
                instant: instant.to_string(),
                task,
                metadata: written.metadata,
                replaced: written.replaced,
                planned_against: written
                    .planned_against
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
                touched: written.touched,
                inserted: written.inserted,
                updated: written.updated,
                deleted: written.deleted,
                skipped_stale: written.skipped_stale,
                record_index,
                secondary,
            },
            keys,
        }
    }

    /// The instant the fragment was written under.
    pub fn instant(&self) -> &str {
        &self.body.instant
    }

    /// The task number the fragment was written as.
    pub fn task(&self) -> u64 {
        self.body.task
    }

    /// Records the fragment inserted, updated and deleted.
    pub fn records(&self) -> (u64, u64, u64) {
        (self.body.inserted, self.body.updated, self.body.deleted)
    }

    /// The storage keys of the data files the fragment wrote.
    pub fn files(&self) -> Vec<String> {
        self.body
            .metadata
            .write_stats()
            .filter_map(|(_, s)| s.path.clone())
            .collect()
    }

    /// The fragment as bytes: `ARBF`, the format version and the JSON length (little
    /// endian), the JSON description, then the key hashes (16 bytes each).
    pub fn to_bytes(&self) -> Vec<u8> {
        let json = serde_json::to_vec(&self.body).unwrap_or_default();
        let mut out = Vec::with_capacity(16 + json.len() + 16 * self.keys.len());
        out.extend_from_slice(FRAGMENT_MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&(json.len() as u64).to_le_bytes());
        out.extend_from_slice(&json);
        for k in &self.keys {
            out.extend_from_slice(&k.to_le_bytes());
        }
        out
    }

    /// Reads a fragment written by [`Fragment::to_bytes`]; anything else is
    /// [`TableError::InvalidInput`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Fragment> {
        let not = |why: &str| bad_encoding(format!("not an arbor fragment: {why}"));
        let (magic, rest) = bytes.split_at_checked(4).ok_or_else(|| not("too short"))?;
        if magic != FRAGMENT_MAGIC {
            return Err(not("wrong leading bytes"));
        }
        let (version, rest) = rest.split_at_checked(4).ok_or_else(|| not("too short"))?;
        let version = u32::from_le_bytes(version.try_into().map_err(|_| not("too short"))?);
        if version != FORMAT {
            return Err(bad_encoding(format!(
                "fragment format {version} (this arbor reads {FORMAT})"
            )));
        }
        let (len, rest) = rest.split_at_checked(8).ok_or_else(|| not("too short"))?;
        let len = u64::from_le_bytes(len.try_into().map_err(|_| not("too short"))?);
        let len = usize::try_from(len).map_err(|_| not("bad length"))?;
        let (json, hashes) = rest.split_at_checked(len).ok_or_else(|| not("truncated"))?;
        let body: FragmentBody = serde_json::from_slice(json).map_err(|e| not(&e.to_string()))?;
        if hashes.len() % 16 != 0 {
            return Err(not("truncated key hashes"));
        }
        let keys = hashes
            .chunks_exact(16)
            .map(|c| {
                let mut b = [0u8; 16];
                b.copy_from_slice(c);
                u128::from_le_bytes(b)
            })
            .collect();
        Ok(Fragment { body, keys })
    }
}

/// The 128-bit hash of a key: of the record key alone for a global index, else of the
/// partition and the record key.
fn key_hash(key: &HoodieKey, global: bool) -> u128 {
    let hash = |seed: u64| {
        let mut h = twox_hash::XxHash64::with_seed(seed);
        if !global {
            h.write(key.partition_path.as_bytes());
            h.write(&[0xff]);
        }
        h.write(key.record_key.as_bytes());
        h.finish()
    };
    (u128::from(hash(0)) << 64) | u128::from(hash(0x9e37_79b9_7f4a_7c15))
}

/// One commit's worth of fragments: their written files, index changes and counts combined,
/// the schema changes against `before` (the schema the table had when the write began).
/// Refuses (with [`TableError::InvalidInput`]) fragments of another instant, one fragment
/// twice, two fragments writing a base file of one file group (or one rewriting a group
/// another appends to), a key two fragments of an upsert or delete wrote, fragments recording
/// different schemas, and no fragment at all.
pub(super) fn combine(
    context: &WriteContext,
    before: &DataSchema,
    fragments: Vec<Fragment>,
) -> Result<WrittenInput> {
    let invalid = |reason: String| bad_encoding(reason);
    let Some(first) = fragments.first() else {
        return Err(invalid(format!(
            "no fragment to commit for instant {}: nothing was written",
            context.instant
        )));
    };
    let schema = first.body.metadata.schema().unwrap_or_default().to_string();
    let mut metadata = HoodieCommitMetadata {
        partition_to_write_stats: Some(BTreeMap::new()),
        ..first.body.metadata.clone()
    };
    let mut groups: BTreeMap<(String, String), (u64, bool)> = BTreeMap::new();
    let mut tasks: BTreeSet<u64> = BTreeSet::new();
    let mut keys: Vec<(u128, u64)> = Vec::new();
    let mut planned: Option<BTreeSet<String>> = None;
    let mut out = WrittenInput {
        profile: HoodieCommitMetadata::default(),
        metadata: HoodieCommitMetadata::default(),
        replaced: None,
        planned_against: BTreeSet::new(),
        touched: BTreeSet::new(),
        inserted: 0,
        updated: 0,
        deleted: 0,
        skipped_stale: 0,
        index_delta: None,
        secondary_deltas: None,
        schema_changes: Vec::new(),
    };
    for fragment in fragments {
        let Fragment { body, keys: hashes } = fragment;
        let task = body.task;
        if body.instant != context.instant {
            return Err(invalid(format!(
                "the fragment of task {task} was written for instant {}, not {}",
                body.instant, context.instant
            )));
        }
        if !tasks.insert(task) {
            return Err(invalid(format!(
                "two fragments of task {task}: a retried task's fragment is committed once"
            )));
        }
        if body.metadata.schema().unwrap_or_default() != schema {
            return Err(invalid(format!(
                "the fragments of tasks {} and {task} record different schemas (their input \
                 columns or types differ): a distributed write records one schema",
                first_task(&tasks, task)
            )));
        }
        for (partition, stat) in body.metadata.write_stats() {
            let file_id = stat.file_id.clone().unwrap_or_default();
            let is_log = stat
                .path
                .as_deref()
                .and_then(|p| p.rsplit('/').next())
                .is_some_and(|name| name.starts_with('.'));
            let group = (partition.to_string(), file_id);
            match groups.get(&group) {
                Some(&(other, other_log)) if !(is_log && other_log) => {
                    return Err(invalid(format!(
                        "the fragments of tasks {other} and {task} both write file group {} of \
                         partition {:?}{}: route the rows of one file group to one task \
                         (partition the input by record key)",
                        group.1,
                        group.0,
                        if is_log || other_log {
                            " (one rewrites it, the other appends to it)"
                        } else {
                            ""
                        }
                    )));
                }
                _ => {
                    groups.insert(group, (task, is_log));
                }
            }
            metadata.add_write_stat(partition, stat.clone());
        }
        keys.extend(hashes.into_iter().map(|h| (h, task)));
        if let Some(replaced) = body.replaced {
            let all = out.replaced.get_or_insert_with(BTreeMap::new);
            for (p, ids) in replaced {
                let entry = all.entry(p).or_default();
                for id in ids {
                    if !entry.contains(&id) {
                        entry.push(id);
                    }
                }
            }
        }
        planned = Some(match planned {
            None => body.planned_against,
            Some(p) => p.intersection(&body.planned_against).cloned().collect(),
        });
        out.touched.extend(body.touched);
        out.inserted += body.inserted;
        out.updated += body.updated;
        out.deleted += body.deleted;
        out.skipped_stale += body.skipped_stale;
        if let Some((upserts, deletes)) = body.record_index {
            let delta = out
                .index_delta
                .get_or_insert_with(RecordIndexDelta::default);
            for (key, partition, file_id, instant_time_millis) in upserts {
                delta.upserts.insert(
                    key,
                    RecordLocation {
                        partition,
                        file_id,
                        instant_time_millis,
                    },
                );
            }
            delta.deletes.extend(deletes);
        }
        if let Some(secondary) = body.secondary {
            let all = out.secondary_deltas.get_or_insert_with(BTreeMap::new);
            for (name, (added, removed)) in secondary {
                let d = all.entry(name).or_default();
                d.added.extend(added);
                d.removed.extend(removed);
            }
        }
    }
    keys.sort_unstable();
    let repeated = keys.windows(2).find_map(|w| match w {
        [(x, a), (y, b)] if x == y => Some((*a, *b)),
        _ => None,
    });
    if let Some((a, b)) = repeated {
        return Err(invalid(if a == b {
            // Fragment::new dedupes its keys: only a forged fragment gets here.
            format!("the fragment of task {a} lists one record key twice")
        } else {
            format!(
                "the fragments of tasks {a} and {b} write the same record key: each key of an \
                 upsert or delete must be written by one task (partition the input by record \
                 key)"
            )
        }));
    }
    out.planned_against = planned
        .unwrap_or_default()
        .iter()
        .filter_map(|t| InstantTime::parse(t).ok())
        .collect();
    if !schema.is_empty() {
        let recorded = DataSchema::from_avro_json(&schema)?;
        out.schema_changes = schema_changes(before, &recorded);
    }
    out.profile = crate::write::commit::written_profile(&metadata);
    out.metadata = metadata;
    Ok(out)
}

/// The smallest task seen before `task` (for messages naming two fragments).
fn first_task(tasks: &BTreeSet<u64>, task: u64) -> u64 {
    tasks.iter().copied().find(|t| *t != task).unwrap_or(task)
}

/// How `after` differs from `before`: columns added, dropped, and types changed.
fn schema_changes(before: &DataSchema, after: &DataSchema) -> Vec<SchemaChange> {
    let mut changes = Vec::new();
    for field in after.arrow.fields() {
        match before.arrow.field_with_name(field.name()) {
            Err(_) => changes.push(SchemaChange::Added {
                column: field.name().clone(),
                data_type: field.data_type().clone(),
            }),
            Ok(old) if old.data_type() != field.data_type() => {
                changes.push(SchemaChange::Promoted {
                    column: field.name().clone(),
                    from: old.data_type().clone(),
                    to: field.data_type().clone(),
                })
            }
            Ok(_) => {}
        }
    }
    for field in before.arrow.fields() {
        if after.arrow.field_with_name(field.name()).is_err() {
            changes.push(SchemaChange::Dropped {
                column: field.name().clone(),
            });
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_a_context_reads_back_and_a_bad_one_is_refused_however_it_is_read() {
        let context = WriteContext::new(
            &InstantTime::parse("20261207010203456").unwrap(),
            Action::DeltaCommit,
            WriteOperation::Upsert,
            ".hoodie".into(),
        );
        let text = context.to_json();
        assert_eq!(WriteContext::from_json(&text).unwrap(), context);
        assert_eq!(context.operation(), WriteOperation::Upsert);
        let bad = text.replace("\"upsert\"", "\"merge\"");
        assert!(WriteContext::from_json(&bad)
            .unwrap_err()
            .to_string()
            .contains("unknown write operation \"merge\""));
        // Through serde directly (a caller's own structure), the same check.
        assert!(serde_json::from_str::<WriteContext>(&bad).is_err());
        let future = text.replace("\"format\":1", "\"format\":2");
        assert!(WriteContext::from_json(&future).is_err());
    }
}
