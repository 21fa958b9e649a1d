//! [`ZookeeperLockProvider`] (feature `zookeeper`): the lock recipe of Apache Curator's
//! `InterProcessMutex`, which Hudi's `ZookeeperBasedLockProvider` uses, so that arbor writers and
//! Spark writers configured with the same ZooKeeper, base path and lock key exclude each other.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError, Stat};

use super::state::{lease_end, new_owner, not_holder};
use super::{validate_lock_name, Deadline, Lease, LockProvider};
use crate::error::{LockError, LockHolder, LockResult};

/// Curator's lock node name (`LockInternals`' `LOCK_NAME` of `InterProcessMutex`): each
/// contender creates `<lock path>/_c_<uuid>-lock-<10-digit sequence>`.
const LOCK_NAME: &str = "lock-";

/// The default ZooKeeper session timeout. A process that dies holding a lock loses it when its
/// session expires, at the latest this long after its last heartbeat (or earlier, when its lease
/// lapses and a waiter removes its node).
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a waiter sleeps on its predecessor's watch before looking again.
const MAX_WATCH_WAIT: Duration = Duration::from_secs(1);

/// What an arbor contender stores in its lock node. Nodes of other clients (Curator stores the
/// client's IP address) are not of this form and never expire before their session does.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct NodeData {
    /// The owner id of the acquisition (the `<uuid>` of the node's name).
    owner: String,
    /// False while the contender waits; true once it holds the lock.
    held: bool,
    /// When the holder's lease lapses unless renewed.
    expires_at: DateTime<Utc>,
}

impl NodeData {
    fn encode(&self, lock: &str) -> LockResult<Vec<u8>> {
        serde_json::to_vec(self).map_err(|e| LockError::Corrupt {
            lock: lock.to_string(),
            reason: format!("cannot encode lock node data: {e}"),
        })
    }

    fn decode(bytes: &[u8]) -> Option<NodeData> {
        serde_json::from_slice(bytes).ok()
    }
}

/// Locks kept in ZooKeeper with Curator's inter-process mutex recipe.
///
/// Lock `name` lives under the persistent node `<base_path>/<lock_key>` (or
/// `<base_path>/<name>` when no lock key is set); each `acquire` creates an ephemeral sequential
/// child named as Curator's protected mode names it, `_c_<owner uuid>-lock-<sequence>`. Children
/// are ordered by the sequence after the last `lock-`; the lowest holds the lock and every other
/// contender watches the one just before it, exactly as `StandardLockInternalsDriver` does, so
/// Curator-based clients (Hudi's `ZookeeperBasedLockProvider` in Spark) and arbor exclude each
/// other on the same path.
///
/// **Leases.** On top of the recipe, an arbor holder stores its lease end in its node (JSON
/// `{"owner", "held", "expires_at"}`), renews it by a versioned `setData` and releases by
/// deleting the node. A contender next in line that finds the holder's lease lapsed deletes the
/// holder's node (versioned, so a concurrent renewal wins) and takes over; a node without arbor's
/// data (a Curator client's) is waited for until its owner deletes it or its session expires. A
/// process that dies loses its nodes when its session expires (the default session timeout (10 s)).
/// Clocks of arbor clients must agree as for the object-store provider.
///
/// **Fencing token.** The token is the `czxid` of the holder's node: the ZooKeeper transaction
/// id of its creation. Contenders hold the lock in the order their nodes were created, and
/// zxids strictly increase over the whole ensemble's history, so tokens strictly increase in
/// acquisition order, across releases, takeovers, session losses and even the removal of the
/// lock's parent node.
pub struct ZookeeperLockProvider {
    client: Client,
    cluster: String,
    base_path: String,
    lock_key: Option<String>,
}

impl fmt::Debug for ZookeeperLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZookeeperLockProvider")
            .field("cluster", &self.cluster)
            .field("base_path", &self.base_path)
            .field("lock_key", &self.lock_key)
            .finish()
    }
}

fn backend(lock: &str, e: impl std::error::Error + Send + Sync + 'static) -> LockError {
    LockError::Backend {
        lock: lock.to_string(),
        source: Box::new(e),
    }
}

/// One `acquire` in progress: the lock, its parent path, the contender's node and owner id, and
/// the lease it asks for.
#[derive(Clone, Copy)]
struct Contender<'a> {
    lock: &'a str,
    parent: &'a str,
    ours: &'a str,
    owner: &'a str,
    lease: Duration,
}

/// The sequence part of a Curator lock node name (what follows its last `lock-`), as Curator's
/// `standardFixForSorting` cuts it.
fn sort_key(child: &str) -> &str {
    match child.rfind(LOCK_NAME) {
        Some(i) => child.get(i + LOCK_NAME.len()..).unwrap_or(""),
        None => child,
    }
}

/// The lock nodes among `children`, ordered as Curator orders them.
fn sorted_lock_nodes(mut children: Vec<String>) -> Vec<String> {
    children.retain(|c| c.contains(LOCK_NAME));
    children.sort_by(|a, b| sort_key(a).cmp(sort_key(b)));
    children
}

/// The name prefix of the node of acquisition `owner`.
fn node_prefix(owner: &str) -> String {
    format!("_c_{owner}-{LOCK_NAME}")
}

impl ZookeeperLockProvider {
    /// Connects to the ZooKeeper ensemble `cluster` (`host:port[,host:port...]`) with
    /// the default session timeout (10 s); locks go under `base_path` (absolute, e.g. `/hudi/locks`),
    /// each at `<base_path>/<lock_key>` when `lock_key` is given (Hudi's
    /// `hoodie.write.lock.zookeeper.lock_key`), else at `<base_path>/<lock name>`.
    pub async fn connect(
        cluster: &str,
        base_path: &str,
        lock_key: Option<&str>,
    ) -> LockResult<Self> {
        Self::connect_with_session_timeout(cluster, base_path, lock_key, DEFAULT_SESSION_TIMEOUT)
            .await
    }

    /// [`connect`](Self::connect) with a session timeout of its own.
    pub async fn connect_with_session_timeout(
        cluster: &str,
        base_path: &str,
        lock_key: Option<&str>,
        session_timeout: Duration,
    ) -> LockResult<Self> {
        let base = format!("/{}", base_path.trim_matches('/'));
        let what = format!("zk://{cluster}{base}");
        if let Some(key) = lock_key {
            validate_lock_name(key)?;
        }
        let client = Client::connector()
            .with_session_timeout(session_timeout)
            .with_connection_timeout(session_timeout)
            .connect(cluster)
            .await
            .map_err(|e| backend(&what, e))?;
        Ok(ZookeeperLockProvider {
            client,
            cluster: cluster.to_string(),
            base_path: if base == "/" { String::new() } else { base },
            lock_key: lock_key.map(str::to_string),
        })
    }

    /// The ZooKeeper path of lock `lock` (the parent of its contenders' nodes).
    pub fn lock_path(&self, lock: &str) -> String {
        let key = self.lock_key.as_deref().unwrap_or(lock);
        format!("{}/{key}", self.base_path)
    }

    /// Creates the persistent parents of `path` if absent.
    async fn ensure_path(&self, lock: &str, path: &str) -> LockResult<()> {
        let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
        self.client
            .mkdir(path, &options)
            .await
            .map_err(|e| backend(lock, e))
    }

    /// The lock nodes of `parent` in Curator's order (none if `parent` does not exist).
    async fn contenders(&self, lock: &str, parent: &str) -> LockResult<Vec<String>> {
        match self.client.list_children(parent).await {
            Ok(children) => Ok(sorted_lock_nodes(children)),
            Err(ZkError::NoNode) => Ok(Vec::new()),
            Err(e) => Err(backend(lock, e)),
        }
    }

    /// The current node of acquisition `held` and its data and stat, if it still exists with the
    /// lease's token.
    async fn own_node(&self, held: &Lease) -> LockResult<Option<(String, NodeData, Stat)>> {
        let parent = self.lock_path(&held.lock);
        let prefix = node_prefix(&held.owner);
        let nodes = self.contenders(&held.lock, &parent).await?;
        let Some(name) = nodes.into_iter().find(|n| n.starts_with(&prefix)) else {
            return Ok(None);
        };
        let path = format!("{parent}/{name}");
        let (bytes, stat) = match self.client.get_data(&path).await {
            Ok(found) => found,
            Err(ZkError::NoNode) => return Ok(None),
            Err(e) => return Err(backend(&held.lock, e)),
        };
        let token = u64::try_from(stat.czxid).unwrap_or(0);
        match NodeData::decode(&bytes) {
            Some(data) if data.held && data.owner == held.owner && token == held.token => {
                Ok(Some((path, data, stat)))
            }
            _ => Ok(None),
        }
    }

    /// Deletes `path`, ignoring a node already gone (best effort cleanup of a waiter's node).
    async fn remove(&self, lock: &str, path: &str) -> LockResult<()> {
        match self.client.delete(path, None).await {
            Ok(()) | Err(ZkError::NoNode) => Ok(()),
            Err(e) => Err(backend(lock, e)),
        }
    }

    /// Waits, as a contender whose node is `ours`, until it is the lowest node; then marks it held
    /// and returns the lease. Returns `Ok(None)` at the deadline.
    async fn wait_for_turn(
        &self,
        me: &Contender<'_>,
        deadline: &Deadline,
        holder: &mut Option<LockHolder>,
    ) -> LockResult<Option<Lease>> {
        let Contender {
            lock,
            parent,
            ours,
            owner,
            lease,
        } = *me;
        loop {
            let nodes = self.contenders(lock, parent).await?;
            let Some(index) = nodes.iter().position(|n| n == ours) else {
                return Err(LockError::Backend {
                    lock: lock.to_string(),
                    source: format!("lock node {parent}/{ours} vanished while waiting").into(),
                });
            };
            let Some(before) = index.checked_sub(1).and_then(|i| nodes.get(i)) else {
                return self.take(lock, parent, ours, owner, lease).await.map(Some);
            };
            let before_path = format!("{parent}/{before}");
            let (stat, watcher) = match self.client.check_and_watch_stat(&before_path).await {
                Ok(found) => found,
                Err(ZkError::NoNode) => continue,
                Err(e) => return Err(backend(lock, e)),
            };
            let Some(stat) = stat else { continue };
            let mut wait = MAX_WATCH_WAIT;
            if index == 1 {
                // Our predecessor holds the lock: has its lease lapsed?
                let data = match self.client.get_data(&before_path).await {
                    Ok((bytes, _)) => NodeData::decode(&bytes),
                    Err(ZkError::NoNode) => continue,
                    Err(e) => return Err(backend(lock, e)),
                };
                if let Some(d) = data.filter(|d| d.held) {
                    *holder = Some(LockHolder {
                        owner: d.owner.clone(),
                        token: u64::try_from(stat.czxid).unwrap_or(0),
                        expires_at: Some(d.expires_at),
                    });
                    let now = Utc::now();
                    if d.expires_at <= now {
                        match self.client.delete(&before_path, Some(stat.version)).await {
                            // Removed, or renewed / gone meanwhile: look again.
                            Ok(()) | Err(ZkError::NoNode) | Err(ZkError::BadVersion) => continue,
                            Err(e) => return Err(backend(lock, e)),
                        }
                    }
                    if let Ok(left) = (d.expires_at - now).to_std() {
                        wait = wait.min(left);
                    }
                }
            }
            let Some(left) = deadline.remaining(Instant::now()) else {
                return Ok(None);
            };
            let _ = tokio::time::timeout(wait.min(left), watcher.changed()).await;
        }
    }

    /// Marks our node `ours` (now the lowest) as held for `lease` and returns the lease.
    async fn take(
        &self,
        lock: &str,
        parent: &str,
        ours: &str,
        owner: &str,
        lease: Duration,
    ) -> LockResult<Lease> {
        let path = format!("{parent}/{ours}");
        let expires_at = lease_end(Utc::now(), lease);
        let data = NodeData {
            owner: owner.to_string(),
            held: true,
            expires_at,
        };
        let stat = self
            .client
            .set_data(&path, &data.encode(lock)?, None)
            .await
            .map_err(|e| backend(lock, e))?;
        Ok(Lease {
            lock: lock.to_string(),
            owner: owner.to_string(),
            token: u64::try_from(stat.czxid).map_err(|_| LockError::Corrupt {
                lock: lock.to_string(),
                reason: format!("negative czxid {} of {path}", stat.czxid),
            })?,
            expires_at,
        })
    }
}

#[async_trait]
impl LockProvider for ZookeeperLockProvider {
    async fn acquire(&self, lock: &str, lease: Duration, timeout: Duration) -> LockResult<Lease> {
        validate_lock_name(lock)?;
        let deadline = Deadline::after(timeout);
        let parent = self.lock_path(lock);
        self.ensure_path(lock, &parent).await?;
        let owner = new_owner();
        let waiting = NodeData {
            owner: owner.clone(),
            held: false,
            expires_at: Utc::now(),
        };
        let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        let prefix = format!("{parent}/{}", node_prefix(&owner));
        let (_, sequence) = self
            .client
            .create(&prefix, &waiting.encode(lock)?, &options)
            .await
            .map_err(|e| backend(lock, e))?;
        let ours = format!("{}{sequence}", node_prefix(&owner));
        let mut holder = None;
        let me = Contender {
            lock,
            parent: &parent,
            ours: &ours,
            owner: &owner,
            lease,
        };
        let outcome = self.wait_for_turn(&me, &deadline, &mut holder).await;
        match outcome {
            Ok(Some(held)) => Ok(held),
            Ok(None) => {
                self.remove(lock, &format!("{parent}/{ours}")).await?;
                Err(deadline.timeout_error(lock, holder))
            }
            Err(e) => {
                let _ = self.remove(lock, &format!("{parent}/{ours}")).await;
                Err(e)
            }
        }
    }

    async fn renew(&self, held: &Lease, lease: Duration) -> LockResult<Lease> {
        validate_lock_name(&held.lock)?;
        let Some((path, mut data, stat)) = self.own_node(held).await? else {
            return Err(not_holder(held));
        };
        data.expires_at = lease_end(Utc::now(), lease);
        match self
            .client
            .set_data(&path, &data.encode(&held.lock)?, Some(stat.version))
            .await
        {
            Ok(_) => Ok(Lease {
                expires_at: data.expires_at,
                ..held.clone()
            }),
            Err(ZkError::NoNode) | Err(ZkError::BadVersion) => Err(not_holder(held)),
            Err(e) => Err(backend(&held.lock, e)),
        }
    }

    async fn release(&self, held: &Lease) -> LockResult<()> {
        validate_lock_name(&held.lock)?;
        let Some((path, _, stat)) = self.own_node(held).await? else {
            return Err(not_holder(held));
        };
        match self.client.delete(&path, Some(stat.version)).await {
            Ok(()) => Ok(()),
            Err(ZkError::NoNode) | Err(ZkError::BadVersion) => Err(not_holder(held)),
            Err(e) => Err(backend(&held.lock, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_sorted_lock_nodes_orders_by_sequence_like_curator() {
        let children = vec![
            "_c_b5f0a0e2-1111-4d3b-9f6e-000000000002-lock-0000000011".to_string(),
            "unrelated".to_string(),
            "_c_00000000-2222-4d3b-9f6e-000000000001-lock-0000000003".to_string(),
            "_c_ffffffff-3333-4d3b-9f6e-000000000003-lock-0000000007".to_string(),
        ];
        let sorted = sorted_lock_nodes(children);
        let seqs: Vec<&str> = sorted.iter().map(|c| sort_key(c)).collect();
        assert_eq!(seqs, vec!["0000000003", "0000000007", "0000000011"]);
    }

    #[test]
    fn test_node_prefix_is_curators_protected_name() {
        assert_eq!(node_prefix("abc"), "_c_abc-lock-");
    }
}
