//! The conformance suite of [`LockProvider`]: mutual exclusion, fencing, expiry and takeover,
//! renewal, release by strangers, name validation.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;

use crate::error::LockError;
use crate::lock::{Lease, LockProvider};

/// Contenders in the mutual-exclusion check.
const CONTENDERS: usize = 8;
/// Acquisitions per contender (8 x 25 = 200 in all).
const ROUNDS: usize = 25;
/// A lease no check outlives.
const LONG_LEASE: Duration = Duration::from_secs(30);
/// A wait that only a broken provider (or a dead machine) exceeds.
const PATIENCE: Duration = Duration::from_secs(30);

/// Runs every check of the [`LockProvider`] contract against one kind of provider and panics
/// with a message naming `backend` and the broken property at the first failure.
///
/// `make` returns a fresh handle on one shared lock space each time it is called: a new provider
/// on the same directory, storage, database (or a clone of one in-process provider). Contenders
/// use separate handles, as separate processes would. Lock names are unique per run
/// (`conf-<check>-<uuid>`), so the suite can run again and again against a shared database or
/// bucket. It takes a few seconds; the expiry checks depend on the wall clock advancing normally.
///
/// Checks:
/// 1. mutual exclusion: 8 contenders make 200 acquisitions of one lock in all, and no critical
///    section overlaps another;
/// 2. fencing: the tokens of those 200 acquisitions, in acquisition order, strictly increase;
/// 3. takeover: a holder that stops renewing loses the lock after its lease lapses; the new
///    holder's token is larger, and the old holder's `renew` and `release` fail with `NotHolder`;
/// 4. strangers: `renew` or `release` with a wrong owner or token fails with `NotHolder` and
///    changes nothing (the holder still holds; a contender times out with `Timeout`); a released
///    lease cannot be released again;
/// 5. renewal: a holder renewing past its original expiry keeps the lock;
/// 6. names: `""`, `../x`, `a/b` and friends are rejected with `InvalidName`;
/// 7. a zero timeout on a free lock acquires it; locks of different names are independent;
/// 8. huge durations do not overflow: `acquire` with `Duration::MAX` as timeout (and as lease)
///    gets a free lock at once, and a `Duration::MAX` waiter gets a held lock once its lease
///    lapses.
pub async fn run_lock_suite<F, Fut>(backend: &str, mut make: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn LockProvider>>,
{
    let mut handles = Vec::with_capacity(CONTENDERS);
    for _ in 0..CONTENDERS {
        handles.push(make().await);
    }
    check_invalid_names(backend, &handles[0]).await;
    check_zero_timeout_and_independence(backend, &handles[0], &handles[1]).await;
    check_huge_durations(backend, &handles[0], &handles[1]).await;
    check_strangers(backend, &handles[0], &handles[1]).await;
    check_takeover(backend, &handles[0], &handles[1]).await;
    check_renewal(backend, &handles[2], &handles[3]).await;
    check_mutual_exclusion_and_fencing(backend, handles).await;
}

/// A lock name unique to this run.
fn unique_name(check: &str) -> String {
    format!("conf-{check}-{}", uuid::Uuid::new_v4().simple())
}

fn assert_not_holder(backend: &str, what: &str, result: Result<impl std::fmt::Debug, LockError>) {
    match result {
        Err(LockError::NotHolder { .. }) => {}
        other => panic!("[{backend}] {what}: expected NotHolder, got {other:?}"),
    }
}

fn assert_timeout(backend: &str, what: &str, lock: &str, result: Result<Lease, LockError>) {
    match result {
        Err(LockError::Timeout { lock: l, .. }) if l == lock => {}
        other => panic!("[{backend}] {what}: expected Timeout on {lock}, got {other:?}"),
    }
}

async fn check_invalid_names(backend: &str, p: &Arc<dyn LockProvider>) {
    for bad in [
        "",
        "../x",
        "a/b",
        ".",
        "..",
        "x y",
        "ü",
        "x".repeat(129).as_str(),
    ] {
        let result = p.acquire(bad, LONG_LEASE, Duration::ZERO).await;
        assert!(
            matches!(&result, Err(LockError::InvalidName { lock, .. }) if lock == bad),
            "[{backend}] acquire({bad:?}): expected InvalidName, got {result:?}"
        );
        let fake = Lease {
            lock: bad.to_string(),
            owner: "nobody".to_string(),
            token: 1,
            expires_at: Utc::now(),
        };
        let renewed = p.renew(&fake, LONG_LEASE).await;
        assert!(
            matches!(renewed, Err(LockError::InvalidName { .. })),
            "[{backend}] renew({bad:?}): expected InvalidName, got {renewed:?}"
        );
        let released = p.release(&fake).await;
        assert!(
            matches!(released, Err(LockError::InvalidName { .. })),
            "[{backend}] release({bad:?}): expected InvalidName, got {released:?}"
        );
    }
}

async fn check_zero_timeout_and_independence(
    backend: &str,
    a: &Arc<dyn LockProvider>,
    b: &Arc<dyn LockProvider>,
) {
    let first = unique_name("zero");
    let second = unique_name("zero");
    let held = a
        .acquire(&first, LONG_LEASE, Duration::ZERO)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] zero-timeout acquire of a free lock: {e}"));
    assert_eq!(held.lock, first, "[{backend}] lease names the wrong lock");
    assert!(
        held.expires_at > Utc::now(),
        "[{backend}] a fresh 30 s lease already lapsed: {held:?}"
    );
    let other = b
        .acquire(&second, LONG_LEASE, Duration::ZERO)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] a lock blocked another of a different name: {e}"));
    a.release(&held)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] release: {e}"));
    b.release(&other)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] release: {e}"));
}

async fn check_huge_durations(backend: &str, a: &Arc<dyn LockProvider>, b: &Arc<dyn LockProvider>) {
    let name = unique_name("huge");
    let held = a
        .acquire(&name, LONG_LEASE, Duration::MAX)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] acquire of a free lock, timeout MAX: {e}"));
    a.release(&held)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] release: {e}"));
    let forever = a
        .acquire(&name, Duration::MAX, Duration::MAX)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] acquire, lease and timeout MAX: {e}"));
    assert!(
        forever.expires_at > Utc::now() + chrono::TimeDelta::days(365),
        "[{backend}] a lease of Duration::MAX expires within a year: {forever:?}"
    );
    let renewed = a
        .renew(&forever, Duration::MAX)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] renew, lease MAX: {e}"));
    a.release(&renewed)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] release: {e}"));

    // A waiter with timeout MAX: it must wait (not overflow, not give up) and take the lock over
    // when the holder's short lease lapses.
    let short = a
        .acquire(&name, Duration::from_millis(300), PATIENCE)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] acquire: {e}"));
    let next = tokio::time::timeout(PATIENCE, b.acquire(&name, LONG_LEASE, Duration::MAX))
        .await
        .unwrap_or_else(|_| {
            panic!("[{backend}] a timeout-MAX waiter did not get a lapsed lock in {PATIENCE:?}")
        })
        .unwrap_or_else(|e| panic!("[{backend}] takeover by a timeout-MAX waiter: {e}"));
    assert!(
        next.token > short.token,
        "[{backend}] takeover token {} is not larger than {}",
        next.token,
        short.token
    );
    b.release(&next)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] release: {e}"));
}

async fn check_strangers(backend: &str, a: &Arc<dyn LockProvider>, b: &Arc<dyn LockProvider>) {
    let name = unique_name("stranger");
    let held = a
        .acquire(&name, LONG_LEASE, PATIENCE)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] acquire of a free lock: {e}"));
    let fakes = [
        Lease {
            owner: "intruder".to_string(),
            ..held.clone()
        },
        Lease {
            token: held.token + 1,
            ..held.clone()
        },
        Lease {
            token: held.token.saturating_sub(1),
            ..held.clone()
        },
    ];
    for fake in &fakes {
        assert_not_holder(backend, "release by a stranger", b.release(fake).await);
        assert_not_holder(
            backend,
            "renew by a stranger",
            b.renew(fake, LONG_LEASE).await,
        );
    }
    assert_timeout(
        backend,
        "acquire after strangers' release attempts (the holder must still hold)",
        &name,
        b.acquire(&name, LONG_LEASE, Duration::from_millis(150))
            .await,
    );
    a.release(&held)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] release by the holder: {e}"));
    assert_not_holder(backend, "second release", a.release(&held).await);
    assert_not_holder(
        backend,
        "renew after release",
        a.renew(&held, LONG_LEASE).await,
    );
    let next = b
        .acquire(&name, LONG_LEASE, PATIENCE)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] acquire after release: {e}"));
    assert!(
        next.token > held.token,
        "[{backend}] token after release did not increase: {} then {}",
        held.token,
        next.token
    );
    assert_ne!(next.owner, held.owner, "[{backend}] owner id reused");
    b.release(&next)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] release: {e}"));
}

async fn check_takeover(backend: &str, dead: &Arc<dyn LockProvider>, heir: &Arc<dyn LockProvider>) {
    let name = unique_name("takeover");
    let lease = Duration::from_millis(500);
    let gone = dead
        .acquire(&name, lease, PATIENCE)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] acquire of a free lock: {e}"));
    // The holder now "dies": it never renews nor releases. Before its lease lapses the lock is
    // still held.
    assert_timeout(
        backend,
        "acquire before the dead holder's lease lapsed",
        &name,
        heir.acquire(&name, LONG_LEASE, Duration::from_millis(50))
            .await,
    );
    let next = heir
        .acquire(&name, LONG_LEASE, Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("[{backend}] takeover after the lease lapsed: {e}"));
    assert!(
        next.token > gone.token,
        "[{backend}] takeover token {} is not larger than the dead holder's {}",
        next.token,
        gone.token
    );
    assert_not_holder(
        backend,
        "renew by a holder that was taken over",
        dead.renew(&gone, LONG_LEASE).await,
    );
    assert_not_holder(
        backend,
        "release by a holder that was taken over",
        dead.release(&gone).await,
    );
    // The failed renew and release changed nothing: the heir still holds.
    assert_timeout(
        backend,
        "acquire while the heir holds",
        &name,
        dead.acquire(&name, LONG_LEASE, Duration::from_millis(50))
            .await,
    );
    heir.release(&next)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] release by the heir: {e}"));
}

async fn check_renewal(
    backend: &str,
    holder: &Arc<dyn LockProvider>,
    other: &Arc<dyn LockProvider>,
) {
    let name = unique_name("renew");
    let lease = Duration::from_millis(1000);
    let original = holder
        .acquire(&name, lease, PATIENCE)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] acquire of a free lock: {e}"));
    let mut current = original.clone();
    // Renew every 300 ms for 1.2 s: past the original expiry.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        current = holder
            .renew(&current, lease)
            .await
            .unwrap_or_else(|e| panic!("[{backend}] renew by the holder: {e}"));
        assert_eq!(
            (current.token, &current.owner),
            (original.token, &original.owner),
            "[{backend}] renew changed the token or owner"
        );
    }
    assert!(
        current.expires_at > original.expires_at,
        "[{backend}] renew did not move the expiry: {} then {}",
        original.expires_at,
        current.expires_at
    );
    assert_timeout(
        backend,
        "acquire after the holder renewed past its original expiry",
        &name,
        other
            .acquire(&name, lease, Duration::from_millis(200))
            .await,
    );
    holder
        .release(&current)
        .await
        .unwrap_or_else(|e| panic!("[{backend}] release after renewals: {e}"));
}

async fn check_mutual_exclusion_and_fencing(backend: &str, handles: Vec<Arc<dyn LockProvider>>) {
    let name = Arc::new(unique_name("mutex"));
    let inside = Arc::new(AtomicUsize::new(0));
    // Tokens in acquisition order: pushed inside the critical section.
    let tokens = Arc::new(Mutex::new(Vec::with_capacity(CONTENDERS * ROUNDS)));
    let mut tasks = Vec::with_capacity(handles.len());
    for (i, p) in handles.into_iter().enumerate() {
        let (name, inside, tokens) = (name.clone(), inside.clone(), tokens.clone());
        let backend = backend.to_string();
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                let held = p
                    .acquire(&name, LONG_LEASE, PATIENCE)
                    .await
                    .unwrap_or_else(|e| {
                        panic!("[{backend}] contender {i} round {round}: acquire: {e}")
                    });
                let before = inside.fetch_add(1, Ordering::SeqCst);
                assert_eq!(
                    before, 0,
                    "[{backend}] mutual exclusion broken: contender {i} entered while {before} \
                     other holder(s) were inside"
                );
                tokens.lock().unwrap().push(held.token);
                tokio::task::yield_now().await;
                tokio::time::sleep(Duration::from_millis(1)).await;
                let after = inside.fetch_sub(1, Ordering::SeqCst);
                assert_eq!(
                    after, 1,
                    "[{backend}] mutual exclusion broken: another holder entered while contender \
                     {i} was inside"
                );
                p.release(&held).await.unwrap_or_else(|e| {
                    panic!("[{backend}] contender {i} round {round}: release: {e}")
                });
            }
        }));
    }
    for task in tasks {
        if let Err(e) = task.await {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
            panic!("[{backend}] contender task failed: {e}");
        }
    }
    let tokens = tokens.lock().unwrap();
    assert_eq!(
        tokens.len(),
        CONTENDERS * ROUNDS,
        "[{backend}] not every acquisition completed"
    );
    for pair in tokens.windows(2) {
        assert!(
            pair[0] < pair[1],
            "[{backend}] fencing tokens not strictly increasing in acquisition order: {} then {}",
            pair[0],
            pair[1]
        );
    }
}
