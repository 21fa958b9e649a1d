//! Codecs of instant file contents: plain serde data types for Hudi's Avro records (no I/O),
//! the Avro Object Container File framing Hudi stores them in, and the choice of record by
//! action and state.
//!
//! # Encoding
//! Every non-empty instant file of table versions 8 and 9 is an Avro Object Container File
//! (magic `Obj\x01`, header with the writer schema, codec `null`, one record). [`encode`] writes
//! exactly that shape with the schema text Hudi embeds ([`InstantSchema::json`]); map entries
//! are written in key order and the sync marker is derived from the content, so equal values
//! give equal bytes.
//!
//! # Decoding
//! [`decode`] reads the writer schema from the file and resolves the record to the type's
//! schema by field name: writer fields the type does not know are dropped, fields the writer
//! lacks take their schema default. Any malformed input (0 bytes, truncation, garbage, JSON)
//! gives [`TimelineError::Decode`] naming the path; nothing panics.
//!
//! Table version 6 stored commit/deltacommit/replacecommit metadata (completed and inflight) as
//! Jackson JSON with the same camelCase keys; [`decode_instant`] reads it when `legacy_json` is
//! set. Every other action was Avro in version 6 too.
//!
//! # Empty files
//! Reading is lenient, writing strict. [`decode_instant`] returns [`InstantContent::Empty`] for
//! a 0-byte file wherever Java accepts one, including a completed `commit`, `deltacommit` or
//! `replacecommit` (Java reads it as empty metadata). hudi-rs 0.5.0 cannot read such a file,
//! so [`encode_instant_for`] refuses to produce one; [`ExpectedContent::empty_writable`] says
//! where arbor may write 0 bytes.

mod clean;
mod clustering;
mod commit;
mod compaction;
mod datum;
mod index;
pub mod ocf;
mod restore;
mod rollback;
mod savepoint;
mod schemas;

use serde::de::DeserializeOwned;
use serde::Serialize;

pub use clean::{
    HoodieActionInstant, HoodieCleanFileInfo, HoodieCleanMetadata, HoodieCleanPartitionMetadata,
    HoodieCleanerPlan,
};
pub use clustering::{
    HoodieClusteringGroup, HoodieClusteringPlan, HoodieClusteringStrategy,
    HoodieRequestedReplaceMetadata, HoodieSliceInfo,
};
pub use commit::{
    HoodieCommitMetadata, HoodieReplaceCommitMetadata, HoodieRuntimeStats, HoodieWriteStat,
    WriteOperationType, SCHEMA_KEY,
};
pub use compaction::{HoodieCompactionOperation, HoodieCompactionPlan, HoodieCompactionStrategy};
pub use index::{HoodieIndexCommitMetadata, HoodieIndexPartitionInfo, HoodieIndexPlan};
pub use restore::{HoodieRestoreMetadata, HoodieRestorePlan};
pub use rollback::{
    HoodieInstantInfo, HoodieRollbackMetadata, HoodieRollbackPartitionMetadata, HoodieRollbackPlan,
    HoodieRollbackRequest,
};
pub use savepoint::{HoodieSavepointMetadata, HoodieSavepointPartitionMetadata};
pub use schemas::InstantSchema;

use crate::error::{Result, TimelineError};
use crate::instant::{Action, Instant, State};

/// A serde type that is one of Hudi's instant-content records, tied to its schema.
pub trait AvroRecord: Serialize + DeserializeOwned {
    /// The schema the type is written with and resolved to when read.
    const SCHEMA: InstantSchema;
}

/// Decodes an Avro Object Container File holding one `T` record, resolving the file's writer
/// schema to `T`'s schema by field name. `path` names the file in errors
/// ([`TimelineError::Decode`]); 0 bytes, JSON, garbage and truncated input are errors.
pub fn decode<T: AvroRecord>(bytes: &[u8], path: &str) -> Result<T> {
    let container = ocf::read_single(bytes, path)?;
    decode_container(&container, T::SCHEMA, path)
}

/// Encodes `value` as an Avro Object Container File byte-compatible with Hudi's: header with
/// only `avro.schema` (the text of [`InstantSchema::json`]), codec null, one block holding one
/// record. Deterministic: equal values give equal bytes. Fails with [`TimelineError::Encode`]
/// if the value does not fit the schema.
pub fn encode<T: AvroRecord>(value: &T) -> Result<Vec<u8>> {
    encode_as(value, T::SCHEMA)
}

fn encode_as<T: Serialize>(value: &T, schema: InstantSchema) -> Result<Vec<u8>> {
    let datum = datum::encode_datum(value, schema.schema()?, schema.record_name())?;
    let json = schema.json();
    Ok(ocf::write_single(
        json,
        &datum,
        ocf::sync_marker_for(json, &datum),
    ))
}

fn decode_container<T: DeserializeOwned>(
    container: &ocf::SingleRecord<'_>,
    schema: InstantSchema,
    path: &str,
) -> Result<T> {
    let writer = parse_writer_schema(container, path)?;
    datum::decode_datum(&writer, schema.schema()?, container.datum, path)
}

fn parse_writer_schema(
    container: &ocf::SingleRecord<'_>,
    path: &str,
) -> Result<apache_avro::Schema> {
    apache_avro::Schema::parse_str(container.schema_json)
        .map_err(|e| TimelineError::decode(path, format!("invalid writer schema: {e}")))
}

fn decode_legacy_json<T: DeserializeOwned>(bytes: &[u8], path: &str) -> Result<T> {
    serde_json::from_slice(bytes)
        .map_err(|e| TimelineError::decode(path, format!("invalid legacy JSON metadata: {e}")))
}

/// The decoded content of one instant file.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InstantContent {
    /// A 0-byte file.
    Empty,
    /// `HoodieCommitMetadata` (commit, deltacommit, inflight replacecommit, schemacommit).
    Commit(Box<HoodieCommitMetadata>),
    /// `HoodieReplaceCommitMetadata` (completed replacecommit).
    ReplaceCommit(Box<HoodieReplaceCommitMetadata>),
    /// `HoodieRequestedReplaceMetadata` (requested replacecommit or clustering).
    RequestedReplace(Box<HoodieRequestedReplaceMetadata>),
    /// `HoodieCompactionPlan` (requested compaction or log compaction).
    Compaction(Box<HoodieCompactionPlan>),
    /// `HoodieCleanerPlan` (requested clean).
    CleanerPlan(Box<HoodieCleanerPlan>),
    /// `HoodieCleanMetadata` (completed clean).
    Clean(Box<HoodieCleanMetadata>),
    /// `HoodieRollbackPlan` (requested rollback).
    RollbackPlan(Box<HoodieRollbackPlan>),
    /// `HoodieRollbackMetadata` (completed rollback).
    Rollback(Box<HoodieRollbackMetadata>),
    /// `HoodieRestorePlan` (requested restore).
    RestorePlan(Box<HoodieRestorePlan>),
    /// `HoodieRestoreMetadata` (completed restore).
    Restore(Box<HoodieRestoreMetadata>),
    /// `HoodieSavepointMetadata` (completed savepoint).
    Savepoint(Box<HoodieSavepointMetadata>),
    /// `HoodieIndexPlan` (requested indexing).
    IndexPlan(Box<HoodieIndexPlan>),
    /// `HoodieIndexCommitMetadata` (completed indexing).
    IndexCommit(Box<HoodieIndexCommitMetadata>),
}

impl InstantContent {
    /// The record schema of the content; `None` for `Empty`.
    pub fn schema(&self) -> Option<InstantSchema> {
        Some(match self {
            InstantContent::Empty => return None,
            InstantContent::Commit(_) => InstantSchema::CommitMetadata,
            InstantContent::ReplaceCommit(_) => InstantSchema::ReplaceCommitMetadata,
            InstantContent::RequestedReplace(_) => InstantSchema::RequestedReplaceMetadata,
            InstantContent::Compaction(_) => InstantSchema::CompactionPlan,
            InstantContent::CleanerPlan(_) => InstantSchema::CleanerPlan,
            InstantContent::Clean(_) => InstantSchema::CleanMetadata,
            InstantContent::RollbackPlan(_) => InstantSchema::RollbackPlan,
            InstantContent::Rollback(_) => InstantSchema::RollbackMetadata,
            InstantContent::RestorePlan(_) => InstantSchema::RestorePlan,
            InstantContent::Restore(_) => InstantSchema::RestoreMetadata,
            InstantContent::Savepoint(_) => InstantSchema::SavepointMetadata,
            InstantContent::IndexPlan(_) => InstantSchema::IndexPlan,
            InstantContent::IndexCommit(_) => InstantSchema::IndexCommitMetadata,
        })
    }

    /// True for `Empty`.
    pub fn is_empty(&self) -> bool {
        matches!(self, InstantContent::Empty)
    }

    /// The commit metadata, for `Commit`.
    pub fn as_commit(&self) -> Option<&HoodieCommitMetadata> {
        match self {
            InstantContent::Commit(m) => Some(m),
            _ => None,
        }
    }

    /// The replace commit metadata, for `ReplaceCommit`.
    pub fn as_replace_commit(&self) -> Option<&HoodieReplaceCommitMetadata> {
        match self {
            InstantContent::ReplaceCommit(m) => Some(m),
            _ => None,
        }
    }

    /// Decodes a container whose record is `schema`, into the matching variant.
    fn decode_as(
        container: &ocf::SingleRecord<'_>,
        schema: InstantSchema,
        path: &str,
    ) -> Result<Self> {
        fn d<T: DeserializeOwned>(
            c: &ocf::SingleRecord<'_>,
            s: InstantSchema,
            p: &str,
        ) -> Result<Box<T>> {
            decode_container::<T>(c, s, p).map(Box::new)
        }
        let (c, s, p) = (container, schema, path);
        Ok(match schema {
            InstantSchema::CommitMetadata => InstantContent::Commit(d(c, s, p)?),
            InstantSchema::ReplaceCommitMetadata => InstantContent::ReplaceCommit(d(c, s, p)?),
            InstantSchema::RequestedReplaceMetadata => {
                InstantContent::RequestedReplace(d(c, s, p)?)
            }
            InstantSchema::CompactionPlan => InstantContent::Compaction(d(c, s, p)?),
            InstantSchema::CleanerPlan => InstantContent::CleanerPlan(d(c, s, p)?),
            InstantSchema::CleanMetadata => InstantContent::Clean(d(c, s, p)?),
            InstantSchema::RollbackPlan => InstantContent::RollbackPlan(d(c, s, p)?),
            InstantSchema::RollbackMetadata => InstantContent::Rollback(d(c, s, p)?),
            InstantSchema::RestorePlan => InstantContent::RestorePlan(d(c, s, p)?),
            InstantSchema::RestoreMetadata => InstantContent::Restore(d(c, s, p)?),
            InstantSchema::SavepointMetadata => InstantContent::Savepoint(d(c, s, p)?),
            InstantSchema::IndexPlan => InstantContent::IndexPlan(d(c, s, p)?),
            InstantSchema::IndexCommitMetadata => InstantContent::IndexCommit(d(c, s, p)?),
        })
    }
}

/// What the file of an instant may contain, by action and state (hudi-format §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpectedContent {
    /// The records the file may hold; the first is the one Hudi 1.x writes.
    pub schemas: &'static [InstantSchema],
    /// True if a reader accepts a 0-byte file (as Java does).
    pub empty_readable: bool,
    /// True if arbor may write a 0-byte file: like `empty_readable`, except for completed
    /// `commit`/`deltacommit`/`replacecommit`/`schemacommit`, which hudi-rs cannot read empty.
    pub empty_writable: bool,
}

/// What the file of `instant` may contain. Fails with [`TimelineError::InvalidInstantName`] for
/// a combination that has no file (a completed `clustering`, `compaction` or `logcompaction`:
/// those complete as `replacecommit`, `commit` and `deltacommit`).
pub fn expected_content(instant: &Instant) -> Result<ExpectedContent> {
    use InstantSchema as S;
    const COMMIT: &[InstantSchema] = &[S::CommitMetadata];
    let (schemas, empty_readable): (&'static [InstantSchema], bool) =
        match (instant.action, instant.state) {
            (Action::Commit | Action::DeltaCommit | Action::SchemaCommit, _) => (COMMIT, true),
            (Action::ReplaceCommit, State::Requested) => (&[S::RequestedReplaceMetadata], true),
            (Action::ReplaceCommit, State::Inflight) => {
                (&[S::CommitMetadata, S::RequestedReplaceMetadata], true)
            }
            (Action::ReplaceCommit, State::Completed) => (&[S::ReplaceCommitMetadata], true),
            (Action::Clustering, State::Requested) => (&[S::RequestedReplaceMetadata], false),
            (Action::Clustering, State::Inflight) => (&[S::RequestedReplaceMetadata], true),
            (Action::Compaction | Action::LogCompaction, State::Requested) => {
                (&[S::CompactionPlan], false)
            }
            (Action::Compaction | Action::LogCompaction, State::Inflight) => {
                (&[S::CompactionPlan], true)
            }
            (Action::Clustering | Action::Compaction | Action::LogCompaction, State::Completed) => {
                return Err(TimelineError::InvalidInstantName {
                    name: instant.to_string(),
                    reason: format!(
                        "{} completes as {}",
                        instant.action,
                        instant.action.completed_action()
                    ),
                })
            }
            (Action::Clean, State::Requested) => (&[S::CleanerPlan], false),
            (Action::Clean, State::Inflight) => (&[S::CleanerPlan], true),
            (Action::Clean, State::Completed) => (&[S::CleanMetadata], false),
            (Action::Rollback, State::Requested) => (&[S::RollbackPlan], false),
            (Action::Rollback, State::Inflight) => (&[S::RollbackPlan], true),
            (Action::Rollback, State::Completed) => (&[S::RollbackMetadata], false),
            (Action::Restore, State::Requested) => (&[S::RestorePlan], false),
            (Action::Restore, State::Inflight) => (&[S::RestorePlan], true),
            (Action::Restore, State::Completed) => (&[S::RestoreMetadata], false),
            (Action::Savepoint, State::Requested | State::Inflight) => {
                (&[S::SavepointMetadata], true)
            }
            (Action::Savepoint, State::Completed) => (&[S::SavepointMetadata], false),
            (Action::Indexing, State::Requested) => (&[S::IndexPlan], false),
            (Action::Indexing, State::Inflight) => (&[S::IndexPlan], true),
            (Action::Indexing, State::Completed) => (&[S::IndexCommitMetadata], false),
        };
    let completed_write = instant.state == State::Completed
        && matches!(
            instant.action,
            Action::Commit | Action::DeltaCommit | Action::ReplaceCommit | Action::SchemaCommit
        );
    Ok(ExpectedContent {
        schemas,
        empty_readable,
        empty_writable: empty_readable && !completed_write,
    })
}

/// Decodes the file of `instant`, choosing the record by action and state
/// ([`expected_content`]) and checking the record named by the file's writer schema against it.
///
/// A 0-byte file gives [`InstantContent::Empty`] where readers accept one (lenient, as Java:
/// this includes completed commits, which arbor never writes). With `legacy_json` (table
/// version 6, or a layout-2 completed file without completion time) commit-family metadata that
/// does not start with the Avro magic is read as Jackson JSON; Avro is accepted either way.
/// Errors are [`TimelineError::Decode`] naming `path`.
pub fn decode_instant(
    instant: &Instant,
    bytes: &[u8],
    path: &str,
    legacy_json: bool,
) -> Result<InstantContent> {
    let expected =
        expected_content(instant).map_err(|e| TimelineError::decode(path, e.to_string()))?;
    if bytes.is_empty() {
        return if expected.empty_readable {
            Ok(InstantContent::Empty)
        } else {
            Err(TimelineError::decode(
                path,
                format!(
                    "0-byte file, but {instant} must hold {}",
                    expected
                        .schemas
                        .first()
                        .map_or("a record", |s| s.record_name())
                ),
            ))
        };
    }
    if legacy_json && !ocf::has_magic(bytes) {
        let json_schema = expected.schemas.iter().copied().find(|s| {
            matches!(
                s,
                InstantSchema::CommitMetadata | InstantSchema::ReplaceCommitMetadata
            )
        });
        return match json_schema {
            Some(InstantSchema::ReplaceCommitMetadata) => Ok(InstantContent::ReplaceCommit(
                Box::new(decode_legacy_json(bytes, path)?),
            )),
            Some(_) => Ok(InstantContent::Commit(Box::new(decode_legacy_json(
                bytes, path,
            )?))),
            None => Err(TimelineError::decode(
                path,
                format!("{instant} is Avro in every table version, but the file is not"),
            )),
        };
    }
    let container = ocf::read_single(bytes, path)?;
    let writer = parse_writer_schema(&container, path)?;
    let found = writer
        .name()
        .map(|n| n.name().to_string())
        .unwrap_or_default();
    let schema = expected
        .schemas
        .iter()
        .copied()
        .find(|s| s.record_name() == found)
        .ok_or_else(|| {
            let want: Vec<&str> = expected.schemas.iter().map(|s| s.record_name()).collect();
            TimelineError::decode(
                path,
                format!(
                    "{instant} must hold {}, but the file holds {found:?}",
                    want.join(" or ")
                ),
            )
        })?;
    InstantContent::decode_as(&container, schema, path)
}

/// Encodes content as instant file bytes: `Empty` gives 0 bytes, every other variant an Avro
/// container ([`encode`]). Does not check the content against an instant; see
/// [`encode_instant_for`].
pub fn encode_instant(content: &InstantContent) -> Result<Vec<u8>> {
    match content {
        InstantContent::Empty => Ok(Vec::new()),
        InstantContent::Commit(m) => encode(m.as_ref()),
        InstantContent::ReplaceCommit(m) => encode(m.as_ref()),
        InstantContent::RequestedReplace(m) => encode(m.as_ref()),
        InstantContent::Compaction(m) => encode(m.as_ref()),
        InstantContent::CleanerPlan(m) => encode(m.as_ref()),
        InstantContent::Clean(m) => encode(m.as_ref()),
        InstantContent::RollbackPlan(m) => encode(m.as_ref()),
        InstantContent::Rollback(m) => encode(m.as_ref()),
        InstantContent::RestorePlan(m) => encode(m.as_ref()),
        InstantContent::Restore(m) => encode(m.as_ref()),
        InstantContent::Savepoint(m) => encode(m.as_ref()),
        InstantContent::IndexPlan(m) => encode(m.as_ref()),
        InstantContent::IndexCommit(m) => encode(m.as_ref()),
    }
}

/// Encodes content for the file of `instant`, strictly: the content's record must be one the
/// instant may hold ([`expected_content`]), and `Empty` is refused where arbor must not write
/// 0 bytes (plans, completed results, and completed commit/deltacommit/replacecommit, which
/// hudi-rs cannot read empty). Fails with [`TimelineError::Encode`].
pub fn encode_instant_for(instant: &Instant, content: &InstantContent) -> Result<Vec<u8>> {
    let expected = expected_content(instant)?;
    let refuse = |reason: String| TimelineError::Encode {
        what: instant.to_string(),
        reason,
    };
    match content.schema() {
        None if !expected.empty_writable => {
            return Err(refuse(format!(
                "a 0-byte file is not allowed here (must hold {})",
                expected
                    .schemas
                    .first()
                    .map_or("a record", |s| s.record_name())
            )))
        }
        Some(s) if !expected.schemas.contains(&s) => {
            return Err(refuse(format!("{s} does not belong in this instant file")))
        }
        _ => {}
    }
    encode_instant(content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instant::InstantTime;

    fn instant(action: Action, state: State) -> Instant {
        let t = InstantTime::parse("20250101000000000").unwrap();
        let mut i = Instant::requested(t, action).with_state(state);
        if state == State::Completed {
            i.completion_time = Some(InstantTime::parse("20250101000000100").unwrap());
        }
        i
    }

    fn samples() -> Vec<(Instant, InstantContent)> {
        use Action as A;
        use State as St;
        vec![
            (
                instant(A::Commit, St::Completed),
                InstantContent::Commit(Box::new(commit::tests::full_commit_metadata())),
            ),
            (
                instant(A::DeltaCommit, St::Inflight),
                InstantContent::Commit(Box::new(commit::tests::full_commit_metadata())),
            ),
            (
                instant(A::ReplaceCommit, St::Completed),
                InstantContent::ReplaceCommit(Box::new(
                    HoodieReplaceCommitMetadata::from_commit_metadata(
                        commit::tests::full_commit_metadata(),
                        Default::default(),
                    ),
                )),
            ),
            (
                instant(A::Clustering, St::Requested),
                InstantContent::RequestedReplace(Box::new(
                    clustering::tests::full_requested_replace(),
                )),
            ),
            (
                instant(A::Compaction, St::Requested),
                InstantContent::Compaction(Box::new(compaction::tests::full_compaction_plan())),
            ),
            (
                instant(A::Clean, St::Requested),
                InstantContent::CleanerPlan(Box::new(clean::tests::full_cleaner_plan())),
            ),
            (
                instant(A::Clean, St::Completed),
                InstantContent::Clean(Box::new(clean::tests::full_clean_metadata())),
            ),
            (
                instant(A::Rollback, St::Requested),
                InstantContent::RollbackPlan(Box::new(rollback::tests::full_rollback_plan())),
            ),
            (
                instant(A::Rollback, St::Completed),
                InstantContent::Rollback(Box::new(rollback::tests::full_rollback_metadata())),
            ),
            (
                instant(A::Restore, St::Requested),
                InstantContent::RestorePlan(Box::new(restore::tests::full_restore_plan())),
            ),
            (
                instant(A::Restore, St::Completed),
                InstantContent::Restore(Box::new(restore::tests::full_restore_metadata())),
            ),
            (
                instant(A::Savepoint, St::Completed),
                InstantContent::Savepoint(Box::new(savepoint::tests::full_savepoint())),
            ),
            (
                instant(A::Indexing, St::Requested),
                InstantContent::IndexPlan(Box::new(index::tests::full_index_plan())),
            ),
            (
                instant(A::Indexing, St::Completed),
                InstantContent::IndexCommit(Box::new(index::tests::full_index_commit())),
            ),
            (instant(A::Commit, St::Requested), InstantContent::Empty),
        ]
    }

    #[test]
    fn test_encode_instant_for_then_decode_instant_round_trips_every_kind() {
        for (i, content) in samples() {
            let bytes = encode_instant_for(&i, &content).unwrap();
            let back = decode_instant(&i, &bytes, "k", false).unwrap();
            assert_eq!(back, content, "{i}");
            // legacy_json still accepts Avro.
            assert_eq!(
                decode_instant(&i, &bytes, "k", true).unwrap(),
                content,
                "{i}"
            );
        }
    }

    #[test]
    fn test_decode_instant_empty_completed_commit_is_lenient_but_encode_refuses() {
        let i = instant(Action::Commit, State::Completed);
        assert_eq!(
            decode_instant(&i, b"", "t/c.commit", false).unwrap(),
            InstantContent::Empty
        );
        let e = encode_instant_for(&i, &InstantContent::Empty).unwrap_err();
        assert!(matches!(e, TimelineError::Encode { .. }), "{e}");
        assert!(e.to_string().contains("0-byte"), "{e}");
        // A typed decode of the same 0 bytes fails naming the path.
        let e = decode::<HoodieCommitMetadata>(b"", "t/c.commit").unwrap_err();
        assert!(
            matches!(&e, TimelineError::Decode { path, .. } if path == "t/c.commit"),
            "{e}"
        );
    }

    #[test]
    fn test_decode_instant_empty_plan_errors() {
        for a in [
            Action::Compaction,
            Action::Clean,
            Action::Rollback,
            Action::Indexing,
        ] {
            let i = instant(a, State::Requested);
            let e = decode_instant(&i, b"", "t/x", false).unwrap_err();
            assert!(
                matches!(&e, TimelineError::Decode { path, .. } if path == "t/x"),
                "{e}"
            );
        }
        let i = instant(Action::Compaction, State::Inflight);
        assert_eq!(
            decode_instant(&i, b"", "t/x", false).unwrap(),
            InstantContent::Empty
        );
    }

    #[test]
    fn test_decode_instant_wrong_record_for_action_errors() {
        let bytes = encode(&clean::tests::full_cleaner_plan()).unwrap();
        let i = instant(Action::Commit, State::Completed);
        let e = decode_instant(&i, &bytes, "t/x.commit", false)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("HoodieCleanerPlan") && e.contains("t/x.commit"),
            "{e}"
        );
        let e = encode_instant_for(
            &i,
            &InstantContent::CleanerPlan(Box::new(clean::tests::full_cleaner_plan())),
        )
        .unwrap_err();
        assert!(matches!(e, TimelineError::Encode { .. }), "{e}");
    }

    #[test]
    fn test_decode_instant_json_where_avro_expected_errors() {
        let json = serde_json::to_vec(&commit::tests::full_commit_metadata()).unwrap();
        let i = instant(Action::Commit, State::Completed);
        let e = decode_instant(&i, &json, "t/x.commit", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("wrong magic") && e.contains("t/x.commit"), "{e}");
        // The same JSON is fine as v6 legacy metadata.
        let got = decode_instant(&i, &json, "t/x.commit", true).unwrap();
        assert_eq!(
            got,
            InstantContent::Commit(Box::new(commit::tests::full_commit_metadata()))
        );
        // But a legacy JSON clean plan is not a thing.
        let i = instant(Action::Clean, State::Requested);
        let e = decode_instant(&i, b"{}", "t/x.clean.requested", true).unwrap_err();
        assert!(matches!(e, TimelineError::Decode { .. }), "{e}");
    }

    #[test]
    fn test_decode_truncated_and_garbage_inputs_error_without_panic() {
        let bytes = encode(&commit::tests::full_commit_metadata()).unwrap();
        let i = instant(Action::Commit, State::Completed);
        for cut in (1..bytes.len()).step_by(7).chain([bytes.len() - 1]) {
            let e = decode::<HoodieCommitMetadata>(&bytes[..cut], "t/x").unwrap_err();
            assert!(
                matches!(&e, TimelineError::Decode { path, .. } if path == "t/x"),
                "{cut}"
            );
            assert!(
                decode_instant(&i, &bytes[..cut], "t/x", false).is_err(),
                "{cut}"
            );
        }
        // Corrupt the datum region (between the header and the final sync marker).
        let datum_start = bytes.len() - 16 - 200;
        for k in 0..200 {
            let mut bad = bytes.clone();
            bad[datum_start + k] = bad[datum_start + k].wrapping_add(0x5b);
            // Must not panic; may decode to something else or fail.
            let _ = decode::<HoodieCommitMetadata>(&bad, "t/x");
        }
        let mut rng = 0x1234_5678_u32;
        for len in [1usize, 4, 5, 17, 64, 300] {
            let mut garbage: Vec<u8> = (0..len)
                .map(|_| {
                    rng = rng.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (rng >> 16) as u8
                })
                .collect();
            assert!(decode::<HoodieCommitMetadata>(&garbage, "g").is_err());
            // Garbage after a valid magic.
            garbage.splice(0..0, ocf::MAGIC);
            assert!(decode::<HoodieCommitMetadata>(&garbage, "g").is_err());
        }
    }

    #[test]
    fn test_expected_content_completed_compaction_is_invalid() {
        assert!(expected_content(&instant(Action::Compaction, State::Completed)).is_err());
        let e = expected_content(&instant(Action::Commit, State::Completed)).unwrap();
        assert!(e.empty_readable && !e.empty_writable);
        let e = expected_content(&instant(Action::DeltaCommit, State::Requested)).unwrap();
        assert!(e.empty_readable && e.empty_writable);
    }
}
