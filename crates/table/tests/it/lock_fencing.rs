//! Fencing at the commit point: a writer that can no longer confirm its lease with its token
//! aborts the commit before the completion is written.

use std::sync::Arc;
use std::time::Duration;

use arbor_storage::{InProcessLockProvider, Lease, LockError, LockProvider, LockResult};
use arbor_table::{Table, TableError, WriteOperation};
use arbor_timeline::config::TableType;

use super::write_support::*;

/// A lock whose leases cannot be renewed: as if each lapsed and was taken over at once.
#[derive(Debug)]
struct LostOnRenew(InProcessLockProvider);

#[async_trait::async_trait]
impl LockProvider for LostOnRenew {
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease> {
        self.0.acquire(lock, lease, timeout).await
    }

    async fn renew(&self, held: &Lease, _lease: Duration) -> LockResult<Lease> {
        Err(LockError::NotHolder {
            lock: held.lock.clone(),
            owner: held.owner.clone(),
            token: held.token,
        })
    }

    async fn release(&self, held: &Lease) -> LockResult<()> {
        self.0.release(held).await
    }
}

#[tokio::test]
async fn test_commit_lease_lost_before_commit_point_aborts_with_lock_lost() {
    let t = create(TableType::CopyOnWrite, Layout::Plain).await;
    t.write(WriteOperation::Insert, &rows(0..4, 1, "a")).await;
    let completed_before = t.timeline().await.completed_writes().len();
    let fenced = Table::open(t.storage.clone())
        .await
        .unwrap()
        .with_lock_provider(Arc::new(LostOnRenew(InProcessLockProvider::new())));
    let prepared = fenced
        .prepare(WriteOperation::Upsert, vec![batch(&rows(0..4, 2, "b"))])
        .await
        .unwrap();
    let err = fenced.commit(prepared).await.unwrap_err();
    assert!(matches!(err, TableError::LockLost { .. }), "{err:?}");
    assert!(err.to_string().contains("commit aborted"), "{err}");
    assert_eq!(
        t.timeline().await.completed_writes().len(),
        completed_before,
        "a commit whose lease was lost completed"
    );
    let mut m = Model::default();
    m.upsert(&rows(0..4, 1, "a"));
    assert_snapshot(&t, &m, "after the aborted commit").await;
}
