//! The table lock of the commands that write: chosen by `--lock URL`, else by the table's Hudi
//! lock properties (`hoodie.write.lock.provider` ... in `hoodie.properties`), else the storage
//! default; released when the process is interrupted (SIGINT, SIGTERM).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arbor_storage::{
    lock_provider_from_hudi_config, lock_provider_from_url, release_held_leases, Lease,
    LockProvider, LockResult, ObjectStoreLockProvider, Storage, TrackedLockProvider,
};
use arbor_table::Table;
use arbor_timeline::TableConfig;
use async_trait::async_trait;

use crate::error::{CliError, CliResult};

/// Test hook: when set (milliseconds), the first acquisition of a table lock in the process
/// prints `arbor: test hook: holding lock ...` to stderr and then sleeps this long while
/// holding the lock, renewing it as work under the lock would (the CLI's crash and signal tests
/// kill the process there).
pub const PAUSE_IN_LOCK_ENV: &str = "ARBOR_TEST_PAUSE_IN_LOCK_MS";

/// How long an interrupted process spends releasing each lock it holds before exiting.
const RELEASE_ON_EXIT: Duration = Duration::from_secs(3);

/// The `--lock` URL of this process (set once by `main`).
static LOCK_URL: OnceLock<Option<String>> = OnceLock::new();

/// Records the global `--lock` URL (`None`: not given). Only the first call counts.
pub fn set_lock_url(url: Option<String>) {
    let _ = LOCK_URL.set(url);
}

/// The default table lock, as `Table` would make it, but tracked so an interrupt releases it.
fn storage_default(view_storage: &Arc<dyn Storage>) -> Arc<dyn LockProvider> {
    Arc::new(TrackedLockProvider::new(Arc::new(
        ObjectStoreLockProvider::for_table(view_storage.clone()),
    )))
}

/// `table` with the lock provider this process uses: `--lock URL` when given (`storage` is the
/// default provider), else what the table's `hoodie.write.lock.*` properties name, else the
/// default object-store lock under `.hoodie/.locks`.
pub async fn with_chosen_lock(location: &str, table: Table) -> CliResult<Table> {
    let provider = chosen_lock(
        location,
        table.config(),
        table.view_storage(),
        table.table_storage(),
    )
    .await?;
    Ok(table.with_lock_provider(provider))
}

/// The lock provider [`with_chosen_lock`] chooses, for a table with config `config` seen
/// through `view_storage` (its metadata root's view) at `table_storage`.
pub async fn chosen_lock(
    location: &str,
    config: &TableConfig,
    view_storage: &Arc<dyn Storage>,
    table_storage: &Arc<dyn Storage>,
) -> CliResult<Arc<dyn LockProvider>> {
    let url = LOCK_URL.get().cloned().flatten();
    let provider = match url.as_deref().map(str::trim) {
        Some("storage") => storage_default(view_storage),
        Some(url) => lock_provider_from_url(url, table_storage)
            .await
            .map_err(|e| CliError::at(location, e))?,
        None => {
            let from_table = lock_provider_from_hudi_config(
                |k| config.get(k).map(str::to_string),
                Some(config.name()),
                table_storage,
            )
            .await
            .map_err(|e| CliError::at(location, e))?;
            from_table.unwrap_or_else(|| storage_default(view_storage))
        }
    };
    Ok(
        match std::env::var(PAUSE_IN_LOCK_ENV)
            .ok()
            .and_then(|ms| ms.trim().parse::<u64>().ok())
        {
            Some(ms) => Arc::new(PauseInLock {
                inner: provider,
                pause: Duration::from_millis(ms),
            }),
            None => provider,
        },
    )
}

/// Installs the interrupt handler: on SIGINT or SIGTERM (Ctrl-C elsewhere) every table lock
/// this process holds is released, then the process exits with 130 (SIGINT) or 143 (SIGTERM).
/// Must be called inside the runtime, before any lock is taken.
pub fn release_locks_on_interrupt() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            tracing::warn!("cannot install the SIGINT/SIGTERM handler; locks are not released");
            return;
        };
        tokio::spawn(async move {
            let code = tokio::select! {
                _ = int.recv() => 130,
                _ = term.recv() => 143,
            };
            exit_releasing(code).await;
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            exit_releasing(130).await;
        }
    });
}

async fn exit_releasing(code: i32) {
    let released = release_held_leases(RELEASE_ON_EXIT).await;
    errln!("arbor: interrupted; released {released} held lock(s)");
    std::process::exit(code);
}

/// The [`PAUSE_IN_LOCK_ENV`] test hook around a provider.
#[derive(Debug)]
struct PauseInLock {
    inner: Arc<dyn LockProvider>,
    pause: Duration,
}

/// Whether the hook has paused already (it pauses once per process).
static PAUSED: AtomicBool = AtomicBool::new(false);

#[async_trait]
impl LockProvider for PauseInLock {
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease> {
        let held = self.inner.acquire(lock, lease, timeout).await?;
        if !PAUSED.swap(true, Ordering::SeqCst) {
            errln!(
                "arbor: test hook: holding lock {} (token {}); pausing {} ms",
                held.lock,
                held.token,
                self.pause.as_millis()
            );
            // Keep the lease alive while pausing, as the work under the lock would.
            let until = tokio::time::Instant::now() + self.pause;
            let mut held = held;
            loop {
                let now = tokio::time::Instant::now();
                if now >= until {
                    break;
                }
                tokio::time::sleep((until - now).min(lease / 3)).await;
                held = self.inner.renew(&held, lease).await?;
            }
            return Ok(held);
        }
        Ok(held)
    }

    async fn renew(&self, held: &Lease, lease: Duration) -> LockResult<Lease> {
        self.inner.renew(held, lease).await
    }

    async fn release(&self, held: &Lease) -> LockResult<()> {
        self.inner.release(held).await
    }
}
