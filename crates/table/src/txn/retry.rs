//! [`crate::Table::write`] with retries: a write that lost a race to another writer
//! ([`TableError::CommitConflict`], [`TableError::InstantRolledBack`]) is prepared and
//! committed again from the start, on the freshly loaded timeline, after a backoff
//! ([`RetryPolicy`]).
//!
//! A failed attempt has already removed its own instant (rolled back under the lock) and
//! files before the next starts, so every prefix of the sequence of attempts leaves the table
//! as a single failed write would. A retry after a file-group conflict plans with small-file
//! packing off: its inserts go to new file groups instead of the contended small file they
//! collided on (docs/concurrency.md).

use arrow::record_batch::RecordBatch;

use super::context::Table;
use crate::error::{Result, TableError};
use crate::write::options::{CommitResult, RetryPolicy, WriteOperation};

/// True for the errors of a write that lost a race and may succeed when re-planned.
pub(crate) fn is_retryable(e: &TableError) -> bool {
    matches!(
        e,
        TableError::CommitConflict { .. } | TableError::InstantRolledBack { .. }
    ) || super::prepared::lost_the_table(e)
}

/// A random number in `[0, 1)` for jitter (from a v4 UUID: no extra dependency).
fn unit_random() -> f64 {
    let bits = uuid::Uuid::new_v4().as_u128() >> 75; // 53 random bits
    bits as f64 / (1u64 << 53) as f64
}

/// Prepares and commits `batches` as one write, retrying as `table`'s
/// [`RetryPolicy`](crate::write::RetryPolicy) says. Returns the result of the attempt that
/// committed, with [`CommitResult::attempts`] set.
pub(crate) async fn write_with_retries(
    table: &Table,
    operation: WriteOperation,
    batches: Vec<RecordBatch>,
) -> Result<CommitResult> {
    let policy: RetryPolicy = table.write_options().retry;
    let max = policy.max_attempts.max(1);
    let mut attempt: u32 = 1;
    // After a file-group conflict, a handle that does not pack inserts into small files.
    let mut unpacked: Option<Table> = None;
    loop {
        let handle = unpacked.as_ref().unwrap_or(table);
        // The batches are reference-counted: a clone per attempt copies no data.
        let result = match handle.prepare(operation, batches.clone()).await {
            Ok(prepared) => handle.commit(prepared).await,
            Err(e) => Err(e),
        };
        let e = match result {
            Ok(mut r) => {
                r.attempts = attempt;
                return Ok(r);
            }
            Err(e) if is_retryable(&e) && attempt < max => e,
            Err(e) if is_retryable(&e) && max > 1 => {
                return Err(TableError::RetriesExhausted {
                    attempts: attempt,
                    last: Box::new(e),
                })
            }
            Err(e) => return Err(e),
        };
        if unpacked.is_none()
            && matches!(&e, TableError::CommitConflict { file_groups, .. } if !file_groups.is_empty())
            && table.write_options().small_file_limit > 0
        {
            let options = crate::write::options::WriteOptions {
                small_file_limit: 0,
                ..table.write_options().clone()
            };
            unpacked = Some(table.clone().with_write_options(options));
        }
        let sleep = policy.backoff(attempt, unit_random());
        tracing::info!(
            attempt,
            max_attempts = max,
            backoff_ms = u64::try_from(sleep.as_millis()).unwrap_or(u64::MAX),
            error = %e,
            "write lost a race; retrying on the fresh timeline"
        );
        tokio::time::sleep(sleep).await;
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_only_lost_races_are_retried() {
        assert!(is_retryable(&TableError::CommitConflict {
            instant: "1".into(),
            other: "2".into(),
            file_groups: "p/f".into(),
            partitions: String::new(),
        }));
        assert!(is_retryable(&TableError::InstantRolledBack {
            instant: "1".into(),
            reason: "x".into(),
        }));
        // A commit point lost by this writer, at the data or the metadata-table timeline.
        let lost = || arbor_timeline::TimelineError::CommitPointLost {
            target: "t".into(),
            reason: "r".into(),
        };
        assert!(is_retryable(&TableError::Timeline(lost())));
        assert!(is_retryable(&TableError::Mdt(Box::new(
            arbor_mdt::MdtError::Timeline(lost())
        ))));
        assert!(!is_retryable(&TableError::InvalidInput {
            column: None,
            row: None,
            reason: "x".into(),
        }));
    }

    #[test]
    fn test_unit_random_is_in_range() {
        for _ in 0..100 {
            let u = unit_random();
            assert!((0.0..1.0).contains(&u));
        }
    }
}
