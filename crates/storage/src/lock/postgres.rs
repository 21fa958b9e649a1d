//! [`PostgresLockProvider`] (feature `postgres`): locks kept in a PostgreSQL database.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_postgres::{Client, NoTls};

use super::state::{new_owner, not_holder, MAX_LEASE};
use super::{backoff, validate_lock_name, Deadline, Lease, LockProvider};
use crate::error::{LockError, LockHolder, LockResult};

/// Creates the state table if absent; serialised by an advisory lock because concurrent
/// `CREATE TABLE IF NOT EXISTS` can fail on PostgreSQL's catalog unique indexes.
const SCHEMA: &str = "
    SELECT pg_advisory_xact_lock(hashtext('arbor:schema'));
    CREATE TABLE IF NOT EXISTS arbor_locks (
        name       text PRIMARY KEY,
        owner      text,
        token      bigint NOT NULL,
        expires_at timestamptz
    );";

/// Takes the per-lock advisory transaction lock that serialises all bookkeeping of one lock.
const LOCK_ROW: &str = "SELECT pg_advisory_xact_lock(hashtext('arbor:' || $1::text))";

/// Reads a lock's row and whether its lease is live by the database's clock.
const READ: &str = "
    SELECT owner, token, (owner IS NOT NULL AND expires_at > clock_timestamp()) AS live,
           (extract(epoch FROM expires_at) * 1000000)::bigint AS expires_micros
    FROM arbor_locks WHERE name = $1";

/// The lease end `$2` microseconds from now by the database's clock, as microseconds since the
/// Unix epoch (returned as an integer so no date-time type mapping is needed).
const EXPIRES_MICROS: &str = "(extract(epoch FROM expires_at) * 1000000)::bigint AS expires_micros";

/// Locks kept in PostgreSQL: mutual exclusion for every client of one database, on any machine.
///
/// Each lock is a row of table `arbor_locks(name, owner, token, expires_at)`, created on
/// [`connect`](Self::connect) if absent. Every acquire, renew and release is one short transaction
/// that first takes the transaction-scoped advisory lock `pg_advisory_xact_lock(hashtext('arbor:'
/// || name))`, so the bookkeeping of one lock is serialised (two names with the same hash merely
/// serialise each other's bookkeeping). Whether a lease is live is decided with the database's
/// clock (`clock_timestamp()`), so the clocks of the clients do not matter; `expires_at` in a
/// returned [`Lease`] is that database time. Tokens are `bigint` and survive releases and
/// restarts.
///
/// A provider keeps one connection (its operations run one at a time); when the connection is
/// lost the failing operation returns [`LockError::Backend`] and the next one reconnects. A holder
/// whose process dies stops renewing, and its lease lapses as usual.
pub struct PostgresLockProvider {
    conn_str: String,
    client: Mutex<Option<Client>>,
}

impl fmt::Debug for PostgresLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The connection string may hold a password: show only where it points.
        let target = match self.conn_str.split_once("://") {
            // URL form: drop the user info (`user:password@`).
            Some((scheme, rest)) => {
                let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
                format!("{scheme}://{host}")
            }
            None => self
                .conn_str
                .split_whitespace()
                .filter(|kv| {
                    ["host=", "port=", "dbname=", "user="]
                        .iter()
                        .any(|k| kv.starts_with(k))
                })
                .collect::<Vec<_>>()
                .join(" "),
        };
        f.debug_struct("PostgresLockProvider")
            .field("target", &target)
            .finish_non_exhaustive()
    }
}

/// A lock-service failure of `lock`.
fn backend(lock: &str, e: impl std::error::Error + Send + Sync + 'static) -> LockError {
    LockError::Backend {
        lock: lock.to_string(),
        source: Box::new(e),
    }
}

/// Converts a lease to whole microseconds for the database, clamped to [`MAX_LEASE`].
fn lease_micros(lease: Duration) -> i64 {
    i64::try_from(lease.min(MAX_LEASE).as_micros()).unwrap_or(i64::MAX)
}

/// Converts a database token (never negative: it starts at 1 and only grows) to a fencing token.
fn token_of(lock: &str, token: i64) -> LockResult<u64> {
    u64::try_from(token).map_err(|_| LockError::Corrupt {
        lock: lock.to_string(),
        reason: format!("negative token {token} in arbor_locks"),
    })
}

/// Converts the database's lease end (microseconds since the epoch) to a time.
fn expiry_of(lock: &str, micros: i64) -> LockResult<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros).ok_or_else(|| LockError::Corrupt {
        lock: lock.to_string(),
        reason: format!("lease end {micros} µs out of range"),
    })
}

/// The outcome of one acquisition attempt.
enum Attempt {
    Granted(Lease),
    Held { holder: Option<LockHolder> },
}

impl PostgresLockProvider {
    /// Connects (without TLS) with a libpq-style connection string such as
    /// `host=127.0.0.1 port=5432 user=arbor password=arbor dbname=arbor_test` or a
    /// `postgresql://` URL, and creates table `arbor_locks` if absent. Fails with
    /// [`LockError::Backend`] (lock name `""`) if the database cannot be reached.
    pub async fn connect(conn_str: &str) -> LockResult<Self> {
        let provider = PostgresLockProvider {
            conn_str: conn_str.to_string(),
            client: Mutex::new(None),
        };
        provider
            .with_client("", |_| Box::pin(async { Ok(()) }))
            .await?;
        Ok(provider)
    }

    /// Opens a connection, drives it on a background task and makes sure the table exists.
    async fn open(&self, lock: &str) -> LockResult<Client> {
        let (client, connection) = tokio_postgres::connect(&self.conn_str, NoTls)
            .await
            .map_err(|e| backend(lock, e))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(error = %e, "PostgreSQL lock connection ended");
            }
        });
        client
            .batch_execute(SCHEMA)
            .await
            .map_err(|e| backend(lock, e))?;
        Ok(client)
    }

    /// Runs `op` on the provider's connection, (re)opened first if there is none or it was lost.
    /// After a database failure the connection is dropped, so the next operation starts on a
    /// fresh one (a dead connection is not always flagged closed right away).
    async fn with_client<T>(
        &self,
        lock: &str,
        op: impl for<'c> FnOnce(&'c mut Client) -> BoxFuture<'c, LockResult<T>>,
    ) -> LockResult<T> {
        let mut slot = self.client.lock().await;
        if slot.as_ref().is_none_or(Client::is_closed) {
            *slot = None;
            *slot = Some(self.open(lock).await?);
        }
        let result = match slot.as_mut() {
            Some(client) => op(client).await,
            None => Err(LockError::Backend {
                lock: lock.to_string(),
                source: "no PostgreSQL connection".into(),
            }),
        };
        if matches!(result, Err(LockError::Backend { .. })) {
            *slot = None;
        }
        result
    }

    /// One acquisition attempt: a transaction that takes the lock if it is free or its lease has
    /// lapsed by the database's clock.
    async fn try_acquire(&self, lock: &str, lease: Duration) -> LockResult<Attempt> {
        // The operation may borrow only the client, so it gets its own copies of the arguments.
        let name = lock.to_string();
        self.with_client(lock, move |client| {
            Box::pin(async move { try_acquire_on(client, &name, lease).await })
        })
        .await
    }

    /// Runs `sql` (an `UPDATE ... WHERE name = $1 AND owner = $2 AND token = $3 RETURNING ...`,
    /// with the lease in microseconds as `$4` if given) for the holder `held` under the lock's
    /// advisory lock, returning the updated row or `NotHolder` if no row matched.
    async fn update_held(
        &self,
        held: &Lease,
        sql: &str,
        lease: Option<i64>,
    ) -> LockResult<tokio_postgres::Row> {
        validate_lock_name(&held.lock)?;
        let (h, sql) = (held.clone(), sql.to_string());
        self.with_client(&held.lock, move |client| {
            Box::pin(async move { update_held_on(client, &h, &sql, lease).await })
        })
        .await
    }
}

async fn try_acquire_on(client: &mut Client, lock: &str, lease: Duration) -> LockResult<Attempt> {
    let owner = new_owner();
    let micros = lease_micros(lease);
    let tx = client.transaction().await.map_err(|e| backend(lock, e))?;
    tx.execute(LOCK_ROW, &[&lock])
        .await
        .map_err(|e| backend(lock, e))?;
    let current = tx
        .query_opt(READ, &[&lock])
        .await
        .map_err(|e| backend(lock, e))?;
    let granted = match current {
        Some(row) => {
            let live: bool = row.try_get("live").map_err(|e| backend(lock, e))?;
            if live {
                let owner: Option<String> = row.try_get("owner").map_err(|e| backend(lock, e))?;
                let token: i64 = row.try_get("token").map_err(|e| backend(lock, e))?;
                let micros: Option<i64> = row
                    .try_get("expires_micros")
                    .map_err(|e| backend(lock, e))?;
                let expires_at = micros.and_then(DateTime::from_timestamp_micros);
                let token = token_of(lock, token)?;
                let holder = owner.map(|owner| LockHolder {
                    owner,
                    token,
                    expires_at,
                });
                // Dropping the transaction rolls it back; nothing was changed.
                return Ok(Attempt::Held { holder });
            }
            let sql = format!(
                "UPDATE arbor_locks SET owner = $2, token = token + 1, \
                 expires_at = clock_timestamp() + ($3::bigint)::float8 * interval '1 microsecond' \
                 WHERE name = $1 RETURNING token, {EXPIRES_MICROS}"
            );
            tx.query_one(&sql, &[&lock, &owner, &micros]).await
        }
        None => {
            let sql = format!(
                "INSERT INTO arbor_locks (name, owner, token, expires_at) VALUES ($1, $2, 1, \
                 clock_timestamp() + ($3::bigint)::float8 * interval '1 microsecond') \
                 RETURNING token, {EXPIRES_MICROS}"
            );
            tx.query_one(&sql, &[&lock, &owner, &micros]).await
        }
    }
    .map_err(|e| backend(lock, e))?;
    let token: i64 = granted.try_get("token").map_err(|e| backend(lock, e))?;
    let expires: i64 = granted
        .try_get("expires_micros")
        .map_err(|e| backend(lock, e))?;
    tx.commit().await.map_err(|e| backend(lock, e))?;
    Ok(Attempt::Granted(Lease {
        lock: lock.to_string(),
        owner,
        token: token_of(lock, token)?,
        expires_at: expiry_of(lock, expires)?,
    }))
}

async fn update_held_on(
    client: &mut Client,
    held: &Lease,
    sql: &str,
    lease: Option<i64>,
) -> LockResult<tokio_postgres::Row> {
    let lock = held.lock.as_str();
    let Ok(token) = i64::try_from(held.token) else {
        return Err(not_holder(held));
    };
    let tx = client.transaction().await.map_err(|e| backend(lock, e))?;
    tx.execute(LOCK_ROW, &[&lock])
        .await
        .map_err(|e| backend(lock, e))?;
    let row = match lease {
        Some(micros) => {
            tx.query_opt(sql, &[&lock, &held.owner, &token, &micros])
                .await
        }
        None => tx.query_opt(sql, &[&lock, &held.owner, &token]).await,
    }
    .map_err(|e| backend(lock, e))?;
    let Some(row) = row else {
        return Err(not_holder(held));
    };
    tx.commit().await.map_err(|e| backend(lock, e))?;
    Ok(row)
}

#[async_trait]
impl LockProvider for PostgresLockProvider {
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease> {
        validate_lock_name(lock)?;
        let deadline = Deadline::after(timeout);
        let mut attempt = 0u32;
        loop {
            let holder = match self.try_acquire(lock, lease).await? {
                Attempt::Granted(held) => return Ok(held),
                Attempt::Held { holder } => holder,
            };
            let Some(left) = deadline.remaining(Instant::now()) else {
                return Err(deadline.timeout_error(lock, holder));
            };
            tokio::time::sleep(backoff(attempt).min(left)).await;
            attempt = attempt.saturating_add(1);
        }
    }

    async fn renew(&self, held: &Lease, lease: Duration) -> LockResult<Lease> {
        let sql = format!(
            "UPDATE arbor_locks \
             SET expires_at = clock_timestamp() + ($4::bigint)::float8 * interval '1 microsecond' \
             WHERE name = $1 AND owner = $2 AND token = $3 RETURNING {EXPIRES_MICROS}"
        );
        let row = self
            .update_held(held, &sql, Some(lease_micros(lease)))
            .await?;
        let expires: i64 = row
            .try_get("expires_micros")
            .map_err(|e| backend(&held.lock, e))?;
        Ok(Lease {
            expires_at: expiry_of(&held.lock, expires)?,
            ..held.clone()
        })
    }

    async fn release(&self, held: &Lease) -> LockResult<()> {
        const SQL: &str = "UPDATE arbor_locks SET owner = NULL, expires_at = NULL \
                           WHERE name = $1 AND owner = $2 AND token = $3 RETURNING token";
        self.update_held(held, SQL, None).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_lease_micros_huge_lease_is_clamped() {
        assert_eq!(lease_micros(Duration::from_millis(1500)), 1_500_000);
        assert_eq!(
            lease_micros(Duration::MAX),
            i64::try_from(MAX_LEASE.as_micros()).unwrap()
        );
    }

    #[test]
    fn test_token_of_negative_corrupt() {
        assert_eq!(token_of("t", 7).unwrap(), 7);
        assert!(matches!(token_of("t", -1), Err(LockError::Corrupt { .. })));
    }

    #[test]
    fn test_debug_hides_password() {
        let p = PostgresLockProvider {
            conn_str: "host=db port=5432 user=u password=secret dbname=d".to_string(),
            client: Mutex::new(None),
        };
        let shown = format!("{p:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("host=db"), "{shown}");
        let p = PostgresLockProvider {
            conn_str: "postgresql://u:secret@db:5432/d".to_string(),
            client: Mutex::new(None),
        };
        let shown = format!("{p:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("postgresql://db:5432/d"), "{shown}");
    }
}
