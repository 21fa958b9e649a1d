//! The table lock's state lost or damaged (issue 32): its state object, its fencing mark, both,
//! or its whole directory; deleted, truncated or overwritten with garbage; while the lock is
//! held and between holders. Tokens strictly increase across every case, and a second holder
//! never holds the lock while the first one's lease is live (the first one finds out at its next
//! renewal).

use std::sync::Arc;
use std::time::Duration;

use arbor_storage::{
    Lease, LockProvider, ObjectStoreLockProvider, ObjectStoreStorage, Storage, StorageExt,
    TABLE_DURABLE_FENCE_DIR, TABLE_LOCK_DIR,
};
use bytes::Bytes;
use chrono::Utc;

const LOCK: &str = "table_lock";
const LEASE: Duration = Duration::from_millis(400);

#[derive(Debug, Clone, Copy)]
enum What {
    State,
    Fence,
    Both,
    Directory,
}

#[derive(Debug, Clone, Copy)]
enum How {
    Deleted,
    Truncated,
    Garbage,
}

/// The lock's own objects that `what` names.
async fn targets(storage: &Arc<dyn Storage>, what: What) -> Vec<String> {
    let state = format!("{TABLE_LOCK_DIR}/{LOCK}.json");
    let fence = format!("{TABLE_LOCK_DIR}/{LOCK}.fence");
    match what {
        What::State => vec![state],
        What::Fence => vec![fence],
        What::Both => vec![state, fence],
        What::Directory => storage
            .list_all(TABLE_LOCK_DIR)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect(),
    }
}

async fn damage(storage: &Arc<dyn Storage>, what: What, how: How) {
    for key in targets(storage, what).await {
        let Some((bytes, _)) = storage.get_opt(&key).await.unwrap() else {
            continue;
        };
        match how {
            How::Deleted => storage.delete(&key).await.unwrap(),
            How::Truncated => {
                let half = bytes.slice(..bytes.len() / 2);
                storage.put(&key, half).await.unwrap();
            }
            How::Garbage => {
                storage
                    .put(&key, Bytes::from_static(b"\x00\xffnot a lock{"))
                    .await
                    .unwrap();
            }
        }
    }
}

/// Renews `held` every third of the lease until a renewal fails; returns the expiry of the last
/// successful renewal (or of the grant) and whether a renewal failed.
fn keep_renewing(
    lock: Arc<ObjectStoreLockProvider>,
    held: Lease,
) -> tokio::task::JoinHandle<(chrono::DateTime<Utc>, bool)> {
    tokio::spawn(async move {
        let mut current = held;
        for _ in 0..30 {
            tokio::time::sleep(LEASE / 3).await;
            match lock.renew(&current, LEASE).await {
                Ok(l) => current = l,
                Err(_) => return (current.expires_at, true),
            }
        }
        (current.expires_at, false)
    })
}

async fn case(what: What, how: How, while_held: bool) {
    let when = if while_held {
        "while held"
    } else {
        "between holders"
    };
    let label = format!("{what:?} {how:?} {when}");
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let lock = Arc::new(ObjectStoreLockProvider::for_table(storage.clone()));
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let l = lock.acquire(LOCK, LEASE, Duration::ZERO).await.unwrap();
        tokens.push(l.token);
        lock.release(&l).await.unwrap();
    }
    let first = if while_held {
        let a = lock.acquire(LOCK, LEASE, Duration::ZERO).await.unwrap();
        tokens.push(a.token);
        Some((a.clone(), keep_renewing(lock.clone(), a)))
    } else {
        None
    };
    damage(&storage, what, how).await;
    // A second process: its own provider over the same storage.
    let other = ObjectStoreLockProvider::for_table(storage.clone());
    let b = other
        .acquire(LOCK, LEASE, Duration::from_secs(20))
        .await
        .unwrap_or_else(|e| panic!("{label}: the lock is never taken again: {e}"));
    let granted_at = Utc::now();
    let max = tokens.iter().copied().max().unwrap();
    assert!(
        b.token > max,
        "{label}: token {} after tokens up to {max}",
        b.token
    );
    if let Some((_, renewing)) = first {
        let (a_expiry, a_lost) = renewing.await.unwrap();
        assert!(
            granted_at >= a_expiry,
            "{label}: granted at {granted_at} while the first holder's lease ran until {a_expiry}"
        );
        // With its state damaged, the first holder finds out at its next renewal (with only
        // the mark damaged it keeps the lock until it stops renewing).
        assert!(
            a_lost || matches!(what, What::Fence),
            "{label}: the first holder never found out it lost the lock"
        );
    }
    // The lock keeps working: tokens keep growing.
    other.release(&b).await.unwrap();
    let c = lock
        .acquire(LOCK, LEASE, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(c.token > b.token, "{label}: {} after {}", c.token, b.token);
    lock.release(&c).await.unwrap();
}

#[tokio::test]
async fn test_lock_state_loss_matrix_tokens_increase_and_holders_never_overlap() {
    let mut cases = Vec::new();
    for what in [What::State, What::Fence, What::Both, What::Directory] {
        for how in [How::Deleted, How::Truncated, How::Garbage] {
            for while_held in [false, true] {
                cases.push(tokio::spawn(case(what, how, while_held)));
            }
        }
    }
    for c in cases {
        c.await.unwrap();
    }
}

#[tokio::test]
async fn test_lock_state_loss_durable_fence_is_outside_the_lock_directory() {
    let storage: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::memory());
    let lock = ObjectStoreLockProvider::for_table(storage.clone());
    let l = lock.acquire(LOCK, LEASE, Duration::ZERO).await.unwrap();
    lock.release(&l).await.unwrap();
    let durable = format!("{TABLE_DURABLE_FENCE_DIR}/{LOCK}.fence");
    let (mark, _) = storage.get(&durable).await.unwrap();
    let mark: u64 = std::str::from_utf8(&mark).unwrap().parse().unwrap();
    assert!(
        mark >= l.token,
        "{durable} holds {mark}, below token {}",
        l.token
    );
    assert!(!durable.starts_with(TABLE_LOCK_DIR));
}
