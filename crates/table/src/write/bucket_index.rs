//! Tables written with Hudi's bucket index, which arbor does not route keys by.
//!
//! With `hoodie.index.type=BUCKET` a Java writer puts each key in the file group of its bucket
//! (a hash of the key modulo the bucket count), and finds it there again without any lookup.
//! Nothing in `hoodie.properties` records the index (it is a writer setting), so arbor reads the
//! table's own evidence:
//!
//! - the SIMPLE engine numbers file groups by bucket: the first 8 characters of the file id are
//!   the bucket number (`00000003-9f1c-...-0`), where a UUID has 8 hex digits;
//! - the CONSISTENT_HASHING engine keeps its hash ring under `.hoodie/.bucket_index/`.
//!
//! A key arbor put in a new file group (or packed into another bucket's group) would sit in the
//! wrong bucket: Spark's next upsert of that key writes it again in its own bucket, and the
//! table holds it twice. So on such tables arbor writes updates and deletes of existing keys
//! (they stay in their group) and refuses any write that would place a new key.

use arbor_fsview::FileSystemView;
use arbor_storage::Storage;

use crate::error::{Result, TableError};

/// The directory of the consistent-hashing engine's metadata, under the table root.
const CONSISTENT_HASHING_DIR: &str = ".hoodie/.bucket_index";

/// Highest bucket number taken as evidence (Hudi's bucket counts are far below it); an id of a
/// random UUID starts with eight decimal digits below it about once in 65,000 groups.
const MAX_BUCKET: u32 = 65_535;

/// True if `file_id` has the shape of a SIMPLE bucket index's file id: eight decimal digits (a
/// bucket number up to [`MAX_BUCKET`]), then `-`.
pub(crate) fn is_bucket_file_id(file_id: &str) -> bool {
    let Some((head, _)) = file_id.split_once('-') else {
        return false;
    };
    head.len() == 8
        && head.bytes().all(|b| b.is_ascii_digit())
        && head.parse::<u32>().is_ok_and(|n| n <= MAX_BUCKET)
}

/// What shows that the table uses a bucket index, described for an error message; `None` when
/// nothing does. Reads the consistent-hashing directory under the table root (`root`), then the
/// latest file groups of `partitions` (the partitions a write touches): a partition whose every
/// group has a bucket-numbered id is evidence, one with any other id is evidence against. When
/// none of `partitions` has a file group, one other partition of the table decides.
pub(crate) async fn evidence(
    root: &dyn Storage,
    view: &FileSystemView,
    partitions: &[&str],
) -> Result<Option<String>> {
    let (objects, dirs) = root.list_dir(CONSISTENT_HASHING_DIR).await?;
    if !objects.is_empty() || !dirs.is_empty() {
        return Ok(Some(format!(
            "{CONSISTENT_HASHING_DIR} holds a consistent-hashing bucket index"
        )));
    }
    let mut decided = false;
    for p in partitions {
        match partition_evidence(view, p).await? {
            Verdict::Bucket(e) => return Ok(Some(e)),
            Verdict::NotBucket => decided = true,
            Verdict::Empty => {}
        }
    }
    if decided {
        return Ok(None);
    }
    let all = view.partitions().await.map_err(TableError::from_fsview)?;
    for p in all.iter().filter(|p| !partitions.contains(&p.as_str())) {
        match partition_evidence(view, p).await? {
            Verdict::Bucket(e) => return Ok(Some(e)),
            Verdict::NotBucket => return Ok(None),
            Verdict::Empty => {}
        }
    }
    Ok(None)
}

enum Verdict {
    Bucket(String),
    NotBucket,
    Empty,
}

async fn partition_evidence(view: &FileSystemView, partition: &str) -> Result<Verdict> {
    let slices = view
        .latest_file_slices(Some(partition), None)
        .await
        .map_err(TableError::from_fsview)?;
    let Some(first) = slices.first() else {
        return Ok(Verdict::Empty);
    };
    if slices.iter().all(|s| is_bucket_file_id(&s.file_id)) {
        let shown = if partition.is_empty() {
            "the table".to_string()
        } else {
            format!("partition {partition:?}")
        };
        Ok(Verdict::Bucket(format!(
            "the file groups of {shown} are numbered by bucket (file id {})",
            first.file_id
        )))
    } else {
        Ok(Verdict::NotBucket)
    }
}

/// `Err(Unsupported)` when a write places new keys (`new_keys` of them, one in
/// `example_partition`; or replaces file groups, `replaces`) on a table `evidence` shows uses
/// a bucket index.
pub(crate) fn refuse_new_keys(
    new_keys: usize,
    example_partition: Option<&str>,
    replaces: bool,
    evidence: Option<&str>,
) -> Result<()> {
    let Some(evidence) = evidence else {
        return Ok(());
    };
    if new_keys == 0 && !replaces {
        return Ok(());
    }
    let example = example_partition
        .map(|p| format!(" (partition {p:?} among them)"))
        .unwrap_or_default();
    Err(TableError::Unsupported {
        reason: format!(
            "writing {new_keys} new key(s){example} into a table with Hudi's bucket index: {evidence}. \
             arbor does not route keys to buckets, so Spark would write such a key a second time \
             in its own bucket. Updates and deletes of existing keys are written; insert new keys \
             with Spark (hoodie.index.type=BUCKET). Nothing was written"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_bucket_file_ids_are_recognised_uuids_are_not() {
        assert!(is_bucket_file_id("00000003-9f1c-4a7b-8d3e-0123456789ab-0"));
        assert!(is_bucket_file_id("00000000-1503-4a29-b5fe-d5517292dcc4-0"));
        assert!(!is_bucket_file_id("3f1c0a2b-9f1c-4a7b-8d3e-0123456789ab-0"));
        // Eight digits, but far beyond any bucket count.
        assert!(!is_bucket_file_id("83920114-9f1c-4a7b-8d3e-0123456789ab-0"));
        assert!(!is_bucket_file_id("0000003-9f1c"));
        assert!(!is_bucket_file_id("nodash"));
    }
}
