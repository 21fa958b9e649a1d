//! Choosing a [`LockProvider`] by URL (`--lock` of the CLI) or by Hudi's lock configuration keys
//! (set by a library user or carried in a table's `hoodie.properties`).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::file::FileLockProvider;
use super::held::TrackedLockProvider;
use super::memory::InProcessLockProvider;
use super::object::ObjectStoreLockProvider;
use super::LockProvider;
use crate::error::{LockError, LockResult};
use crate::storage::Storage;

pub use super::TABLE_LOCK_DIR;

/// The lock URLs [`lock_provider_from_url`] accepts, for error messages.
pub const ACCEPTED_LOCK_URLS: &str = "storage (the default: an object in the table's storage \
     under .hoodie/.locks), file (OS-locked files in a local table's .hoodie/.locks), \
     file:///DIR, postgres://USER:PASSWORD@HOST:PORT/DB (also postgresql://), \
     zk://HOST:PORT[,HOST:PORT...]/BASE/PATH[?lock_key=KEY&session_timeout_ms=MS]";

/// Hudi's configuration key naming the lock provider class.
pub const HUDI_LOCK_PROVIDER: &str = "hoodie.write.lock.provider";
/// Hudi's ZooKeeper connection string (hosts, optionally with ports).
pub const HUDI_ZK_URL: &str = "hoodie.write.lock.zookeeper.url";
/// Hudi's ZooKeeper port (for hosts given without one).
pub const HUDI_ZK_PORT: &str = "hoodie.write.lock.zookeeper.port";
/// Hudi's ZooKeeper base path of the locks.
pub const HUDI_ZK_BASE_PATH: &str = "hoodie.write.lock.zookeeper.base_path";
/// Hudi's ZooKeeper lock key (the lock's node under the base path; Hudi's default is the table
/// name).
pub const HUDI_ZK_LOCK_KEY: &str = "hoodie.write.lock.zookeeper.lock_key";
/// Hudi's ZooKeeper session timeout in milliseconds.
pub const HUDI_ZK_SESSION_TIMEOUT_MS: &str = "hoodie.write.lock.zookeeper.session_timeout_ms";

/// Hudi's provider classes this crate honours, and what each maps to.
const HUDI_ZK_CLASS: &str = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider";
const HUDI_FS_CLASS: &str = "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider";
const HUDI_IN_PROCESS_CLASS: &str = "org.apache.hudi.client.transaction.lock.InProcessLockProvider";

/// The values of `hoodie.write.lock.provider` [`lock_provider_from_hudi_config`] accepts.
pub const ACCEPTED_HUDI_PROVIDERS: &str = "org.apache.hudi.client.transaction.lock.\
     ZookeeperBasedLockProvider (or zookeeper), org.apache.hudi.client.transaction.lock.\
     FileSystemBasedLockProvider (or storage), org.apache.hudi.client.transaction.lock.\
     InProcessLockProvider (or in-process), file, or any lock URL (postgres://..., zk://..., \
     file:///...)";

fn invalid(given: &str, reason: impl Into<String>) -> LockError {
    LockError::InvalidProvider {
        given: redact(given),
        reason: reason.into(),
    }
}

/// `given` without credentials: the user info of a URL (`user:password@`) and the value of a
/// `password=` setting are replaced by `***`, so errors never show a password.
fn redact(given: &str) -> String {
    let shown = match given.split_once("://") {
        Some((scheme, rest)) => match rest
            .split_once('/')
            .map_or(rest, |(auth, _)| auth)
            .rfind('@')
        {
            Some(at) => format!("{scheme}://***{}", rest.get(at..).unwrap_or("")),
            None => given.to_string(),
        },
        None => given.to_string(),
    };
    shown
        .split(' ')
        .map(|part| match part.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One in-process lock space per process, shared by every handle that asks for it.
fn in_process() -> Arc<dyn LockProvider> {
    static SHARED: OnceLock<InProcessLockProvider> = OnceLock::new();
    Arc::new(SHARED.get_or_init(InProcessLockProvider::new).clone())
}

/// The local directory of a storage displayed as a `file://` URL, if it is one.
fn local_dir(storage: &Arc<dyn Storage>) -> Option<PathBuf> {
    let shown = storage.to_string();
    let url = url::Url::parse(&shown).ok()?;
    if url.scheme() != "file" {
        return None;
    }
    url.to_file_path().ok()
}

/// The parts of a `zk://` URL: ensemble, base path, lock key, session timeout.
#[derive(Debug, PartialEq, Eq)]
struct ZkUrl {
    cluster: String,
    base_path: String,
    lock_key: Option<String>,
    session_timeout: Option<Duration>,
}

fn parse_zk_url(url: &str) -> LockResult<ZkUrl> {
    let rest = url
        .strip_prefix("zk://")
        .ok_or_else(|| invalid(url, "not a zk:// URL"))?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (cluster, path) = match rest.split_once('/') {
        Some((c, p)) => (c, p),
        None => (rest, ""),
    };
    if cluster.is_empty() || cluster.split(',').any(|h| h.trim().is_empty()) {
        return Err(invalid(
            url,
            "name the ZooKeeper servers: zk://HOST:PORT/BASE/PATH",
        ));
    }
    let mut lock_key = None;
    let mut session_timeout = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("lock_key", v)) if !v.is_empty() => lock_key = Some(v.to_string()),
            Some(("session_timeout_ms", v)) => {
                let ms: u64 = v.parse().map_err(|_| {
                    invalid(
                        url,
                        format!("session_timeout_ms={v:?} is not a number of ms"),
                    )
                })?;
                session_timeout = Some(Duration::from_millis(ms));
            }
            _ => {
                return Err(invalid(
                    url,
                    format!("unknown parameter {pair:?}; accepted: lock_key, session_timeout_ms"),
                ))
            }
        }
    }
    Ok(ZkUrl {
        cluster: cluster.to_string(),
        base_path: format!("/{}", path.trim_matches('/')),
        lock_key,
        session_timeout,
    })
}

/// Connects the ZooKeeper provider described by `zk`.
#[cfg(feature = "zookeeper")]
async fn zookeeper(zk: ZkUrl) -> LockResult<Arc<dyn LockProvider>> {
    use super::zookeeper::{ZookeeperLockProvider, DEFAULT_SESSION_TIMEOUT};
    let provider = ZookeeperLockProvider::connect_with_session_timeout(
        &zk.cluster,
        &zk.base_path,
        zk.lock_key.as_deref(),
        zk.session_timeout.unwrap_or(DEFAULT_SESSION_TIMEOUT),
    )
    .await?;
    Ok(Arc::new(provider))
}

#[cfg(not(feature = "zookeeper"))]
async fn zookeeper(zk: ZkUrl) -> LockResult<Arc<dyn LockProvider>> {
    Err(invalid(
        &format!("zk://{}{}", zk.cluster, zk.base_path),
        "this build of arbor-storage has no ZooKeeper support (cargo feature zookeeper)",
    ))
}

#[cfg(feature = "postgres")]
async fn postgres(url: &str) -> LockResult<Arc<dyn LockProvider>> {
    Ok(Arc::new(
        super::postgres::PostgresLockProvider::connect(url).await?,
    ))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(url: &str) -> LockResult<Arc<dyn LockProvider>> {
    Err(invalid(
        url,
        "this build of arbor-storage has no PostgreSQL support (cargo feature postgres)",
    ))
}

/// The lock provider a lock URL names, for the table whose base is `table_storage`, wrapped in
/// a [`TrackedLockProvider`] (so that [`crate::release_held_leases`] can release its leases):
///
/// - `storage`: [`ObjectStoreLockProvider`] under [`TABLE_LOCK_DIR`] of `table_storage` (the
///   default of arbor's tables);
/// - `file`: [`FileLockProvider`] in the local table's `.hoodie/.locks` (a table that is not
///   local is an error); `file:///DIR`: [`FileLockProvider`] in `DIR`;
/// - `postgres://...` or `postgresql://...`: the PostgreSQL provider connected with that URL
///   (feature `postgres`);
/// - `zk://HOST:PORT[,HOST:PORT...]/BASE/PATH[?lock_key=KEY&session_timeout_ms=MS]`: the ZooKeeper
///   provider (feature `zookeeper`) with locks under `/BASE/PATH`, at `/BASE/PATH/KEY` when a lock
///   key is given (match Hudi's `hoodie.write.lock.zookeeper.lock_key`, by default the table
///   name, to exclude Spark writers), else at `/BASE/PATH/<lock name>`.
///
/// Anything else fails with [`LockError::InvalidProvider`] naming it and the accepted forms.
/// Connecting (PostgreSQL, ZooKeeper) happens here: an unreachable service is an error now.
pub async fn lock_provider_from_url(
    url: &str,
    table_storage: &Arc<dyn Storage>,
) -> LockResult<Arc<dyn LockProvider>> {
    let url = url.trim();
    let provider: Arc<dyn LockProvider> = match url {
        "storage" | "storage:" => {
            Arc::new(ObjectStoreLockProvider::for_table(table_storage.clone()))
        }
        "file" | "file:" => {
            let dir = local_dir(table_storage).ok_or_else(|| {
                invalid(
                    url,
                    format!(
                        "the table at {table_storage} is not on the local file system; \
                         name a directory with file:///DIR"
                    ),
                )
            })?;
            Arc::new(FileLockProvider::new(dir.join(TABLE_LOCK_DIR)))
        }
        _ if url.starts_with("file://") => {
            let dir = url::Url::parse(url)
                .ok()
                .and_then(|u| u.to_file_path().ok())
                .ok_or_else(|| invalid(url, "expected file:///ABSOLUTE/DIR"))?;
            Arc::new(FileLockProvider::new(dir))
        }
        _ if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            postgres(url).await?
        }
        _ if url.starts_with("zk://") => zookeeper(parse_zk_url(url)?).await?,
        _ => {
            return Err(invalid(
                url,
                format!("unknown lock provider; accepted: {ACCEPTED_LOCK_URLS}"),
            ))
        }
    };
    Ok(Arc::new(TrackedLockProvider::new(provider)))
}

/// The lock provider Hudi's lock configuration names, or `None` when `get` has no
/// [`HUDI_LOCK_PROVIDER`] (the caller then uses its default). `get` looks a key up (in a
/// table's `hoodie.properties`, a writer's options ...); `table_name` is the default of
/// [`HUDI_ZK_LOCK_KEY`], as in Hudi.
///
/// - `org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider` (or `zookeeper`): the
///   ZooKeeper provider on [`HUDI_ZK_URL`] (hosts without a port get [`HUDI_ZK_PORT`], default
///   2181), locks at [`HUDI_ZK_BASE_PATH`]`/`[`HUDI_ZK_LOCK_KEY`] exactly where Spark's writers put
///   theirs, session timeout [`HUDI_ZK_SESSION_TIMEOUT_MS`] if set;
/// - `org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider` (or `storage`):
///   arbor's object-store lock under the table's `.hoodie/.locks` (the same directory; it
///   excludes arbor writers only, not Java writers using Hudi's file);
/// - `org.apache.hudi.client.transaction.lock.InProcessLockProvider` (or `in-process`): one lock
///   space shared by the handles of this process;
/// - `file` or any URL [`lock_provider_from_url`] accepts.
///
/// The provider is wrapped in a [`TrackedLockProvider`]. An unknown class, or a ZooKeeper
/// configuration lacking its URL or base path, fails with [`LockError::InvalidProvider`].
pub async fn lock_provider_from_hudi_config(
    get: impl Fn(&str) -> Option<String>,
    table_name: Option<&str>,
    table_storage: &Arc<dyn Storage>,
) -> LockResult<Option<Arc<dyn LockProvider>>> {
    let Some(class) = get(HUDI_LOCK_PROVIDER).map(|c| c.trim().to_string()) else {
        return Ok(None);
    };
    let shown = format!("{HUDI_LOCK_PROVIDER}={class}");
    let provider = match class.as_str() {
        HUDI_ZK_CLASS | "zookeeper" | "zk" => {
            let hosts = get(HUDI_ZK_URL)
                .filter(|h| !h.trim().is_empty())
                .ok_or_else(|| invalid(&shown, format!("{HUDI_ZK_URL} is not set")))?;
            let base = get(HUDI_ZK_BASE_PATH)
                .filter(|b| !b.trim().is_empty())
                .ok_or_else(|| invalid(&shown, format!("{HUDI_ZK_BASE_PATH} is not set")))?;
            let port = get(HUDI_ZK_PORT).unwrap_or_else(|| "2181".to_string());
            let port = port.trim().to_string();
            if port.parse::<u16>().is_err() {
                return Err(invalid(
                    &shown,
                    format!("{HUDI_ZK_PORT}={port:?} is not a port"),
                ));
            }
            let cluster = hosts
                .split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(|h| {
                    if h.contains(':') {
                        h.to_string()
                    } else {
                        format!("{h}:{port}")
                    }
                })
                .collect::<Vec<_>>()
                .join(",");
            let session_timeout = match get(HUDI_ZK_SESSION_TIMEOUT_MS) {
                None => None,
                Some(ms) => Some(Duration::from_millis(ms.trim().parse().map_err(|_| {
                    invalid(
                        &shown,
                        format!("{HUDI_ZK_SESSION_TIMEOUT_MS}={ms:?} is not a number of ms"),
                    )
                })?)),
            };
            let lock_key = get(HUDI_ZK_LOCK_KEY)
                .filter(|k| !k.trim().is_empty())
                .or_else(|| table_name.map(str::to_string));
            let zk = ZkUrl {
                cluster,
                base_path: format!("/{}", base.trim().trim_matches('/')),
                lock_key,
                session_timeout,
            };
            Arc::new(TrackedLockProvider::new(zookeeper(zk).await?))
        }
        HUDI_FS_CLASS | "storage" => lock_provider_from_url("storage", table_storage).await?,
        HUDI_IN_PROCESS_CLASS | "in-process" => {
            Arc::new(TrackedLockProvider::new(in_process())) as Arc<dyn LockProvider>
        }
        other if other == "file" || other.contains("://") => {
            lock_provider_from_url(other, table_storage).await?
        }
        _ => {
            return Err(invalid(
                &shown,
                format!("unknown lock provider class; accepted: {ACCEPTED_HUDI_PROVIDERS}"),
            ))
        }
    };
    Ok(Some(provider))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectStoreStorage;

    fn memory() -> Arc<dyn Storage> {
        Arc::new(ObjectStoreStorage::memory())
    }

    #[test]
    fn test_redact_hides_passwords() {
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://***@h:5432/db"
        );
        assert_eq!(
            redact("host=h user=u password=secret dbname=d"),
            "host=h user=u password=*** dbname=d"
        );
        assert_eq!(redact("zk://h:1/a@b"), "zk://h:1/a@b");
    }

    #[test]
    fn test_parse_zk_url_parts() {
        let zk =
            parse_zk_url("zk://a:2181,b:2182/hudi/locks?lock_key=trips&session_timeout_ms=5000")
                .unwrap();
        assert_eq!(
            zk,
            ZkUrl {
                cluster: "a:2181,b:2182".to_string(),
                base_path: "/hudi/locks".to_string(),
                lock_key: Some("trips".to_string()),
                session_timeout: Some(Duration::from_millis(5000)),
            }
        );
        assert_eq!(parse_zk_url("zk://h:1").unwrap().base_path, "/");
        assert!(parse_zk_url("zk:///x").is_err());
        assert!(parse_zk_url("zk://h:1/x?bogus=1").is_err());
    }

    #[tokio::test]
    async fn test_lock_provider_from_url_unknown_scheme_names_it_and_the_accepted() {
        let err = lock_provider_from_url("redis://x", &memory())
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("redis://x"), "{text}");
        assert!(
            text.contains("zk://") && text.contains("postgres://"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn test_lock_provider_from_url_file_needs_a_local_table() {
        let err = lock_provider_from_url("file", &memory()).await.unwrap_err();
        assert!(matches!(err, LockError::InvalidProvider { .. }), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let local: Arc<dyn Storage> = Arc::new(ObjectStoreStorage::local(dir.path()).unwrap());
        let p = lock_provider_from_url("file", &local).await.unwrap();
        let held = p
            .acquire("t", Duration::from_secs(5), Duration::ZERO)
            .await
            .unwrap();
        p.release(&held).await.unwrap();
        assert!(dir.path().join(".hoodie/.locks/t.lock.json").exists());
    }

    #[tokio::test]
    async fn test_lock_provider_from_url_storage_uses_the_table_lock_dir() {
        let storage = memory();
        let p = lock_provider_from_url("storage", &storage).await.unwrap();
        let held = p
            .acquire("t", Duration::from_secs(5), Duration::ZERO)
            .await
            .unwrap();
        assert!(storage.head(".hoodie/.locks/t.json").await.is_ok());
        p.release(&held).await.unwrap();
    }

    #[tokio::test]
    async fn test_hudi_config_without_provider_is_none_unknown_class_errors() {
        let none = lock_provider_from_hudi_config(|_| None, None, &memory())
            .await
            .unwrap();
        assert!(none.is_none());
        let err = lock_provider_from_hudi_config(
            |k| (k == HUDI_LOCK_PROVIDER).then(|| "com.example.DynamoDBLock".to_string()),
            None,
            &memory(),
        )
        .await
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("com.example.DynamoDBLock"), "{text}");
        assert!(text.contains("ZookeeperBasedLockProvider"), "{text}");
    }

    #[tokio::test]
    async fn test_hudi_config_zookeeper_without_url_names_the_key() {
        let err = lock_provider_from_hudi_config(
            |k| (k == HUDI_LOCK_PROVIDER).then(|| HUDI_ZK_CLASS.to_string()),
            Some("trips"),
            &memory(),
        )
        .await
        .unwrap_err();
        assert!(err.to_string().contains(HUDI_ZK_URL), "{err}");
    }
}
