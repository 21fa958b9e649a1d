//! The ZooKeeper lock provider against a real ZooKeeper (`scripts/zookeeper.sh`): the lock
//! conformance suite, Curator's node naming, and exclusion of a Curator-style contender.

use std::io::Write;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arbor_storage::conformance::run_lock_suite;
use arbor_storage::{LockError, LockProvider, ZookeeperLockProvider};
use zookeeper_client::{Acls, Client, CreateMode};

const LONG: Duration = Duration::from_secs(30);

/// The ensemble (`host:port`) of the test ZooKeeper: `ARBOR_TEST_ZK_URL` (`zk://host:port`), else
/// what `scripts/zookeeper.sh` starts. `None` (after printing SKIPPED) when none can be had
/// outside CI; in CI (env `CI` set) that is a failure.
fn zk_cluster() -> Option<String> {
    static CLUSTER: OnceLock<Result<String, String>> = OnceLock::new();
    let found = CLUSTER.get_or_init(|| {
        let url = match std::env::var("ARBOR_TEST_ZK_URL") {
            Ok(url) => url,
            Err(_) => start_zookeeper()?,
        };
        let cluster = url.trim().trim_start_matches("zk://").trim_end_matches('/');
        if cluster.is_empty() {
            return Err(format!("ARBOR_TEST_ZK_URL={url:?} names no server"));
        }
        Ok(cluster.to_string())
    });
    match found {
        Ok(c) => Some(c.clone()),
        Err(reason) => {
            unavailable(reason);
            None
        }
    }
}

fn start_zookeeper() -> Result<String, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/zookeeper.sh");
    let out = std::process::Command::new("bash")
        .arg(script)
        .output()
        .map_err(|e| format!("cannot run {script}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{script} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("export ARBOR_TEST_ZK_URL="))
        .map(str::to_string)
        .ok_or_else(|| format!("{script} printed no URL: {stdout:?}"))
}

fn unavailable(reason: &str) {
    if std::env::var_os("CI").is_some() {
        panic!(
            "ZooKeeper tests need a ZooKeeper but it is unavailable (CI is set, so they must not \
             skip): {reason}"
        );
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: ZooKeeper tests need ZooKeeper: {reason}"
    );
}

/// A connected provider, or `None` (skipped) when ZooKeeper is unavailable outside CI.
async fn provider(base: &str, key: Option<&str>) -> Option<ZookeeperLockProvider> {
    let cluster = zk_cluster()?;
    match ZookeeperLockProvider::connect(&cluster, base, key).await {
        Ok(p) => Some(p),
        Err(e) => {
            unavailable(&format!("cannot connect to {cluster}: {e}"));
            None
        }
    }
}

fn unique_base() -> String {
    format!("/arbor-test/{}", uuid::Uuid::new_v4().simple())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn test_zookeeper_lock_suite_passes() {
    let base = unique_base();
    if provider(&base, None).await.is_none() {
        return;
    }
    let cluster = zk_cluster().unwrap();
    run_lock_suite("zookeeper", || {
        let (cluster, base) = (cluster.clone(), base.clone());
        async move {
            Arc::new(
                ZookeeperLockProvider::connect(&cluster, &base, None)
                    .await
                    .unwrap(),
            ) as Arc<dyn LockProvider>
        }
    })
    .await;
}

#[tokio::test]
async fn test_zookeeper_acquire_node_named_as_curator_names_it() {
    let base = unique_base();
    let Some(p) = provider(&base, Some("my_table")).await else {
        return;
    };
    let held = p.acquire("table_lock", LONG, LONG).await.unwrap();
    assert_eq!(p.lock_path("table_lock"), format!("{base}/my_table"));
    let client = Client::connect(&zk_cluster().unwrap()).await.unwrap();
    let children = client
        .list_children(&format!("{base}/my_table"))
        .await
        .unwrap();
    assert_eq!(children.len(), 1, "{children:?}");
    let name = &children[0];
    let prefix = format!("_c_{}-lock-", held.owner);
    assert!(name.starts_with(&prefix), "{name} lacks {prefix}");
    let seq = &name[prefix.len()..];
    assert_eq!(seq.len(), 10, "{name}");
    assert!(seq.chars().all(|c| c.is_ascii_digit()), "{name}");
    p.release(&held).await.unwrap();
    assert!(client
        .list_children(&format!("{base}/my_table"))
        .await
        .unwrap()
        .is_empty());
}

/// A Curator client (as Spark's Hudi writer runs it) holding the lock node: an ephemeral
/// sequential `_c_<uuid>-lock-` child with its IP address as data. arbor waits for it (never
/// expiring it), and gets the lock once its node is deleted.
#[tokio::test]
async fn test_zookeeper_curator_holder_excludes_arbor_until_it_releases() {
    let base = unique_base();
    let Some(p) = provider(&base, Some("t")).await else {
        return;
    };
    let client = Client::connect(&zk_cluster().unwrap()).await.unwrap();
    let parent = format!("{base}/t");
    let dirs = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client.mkdir(&parent, &dirs).await.unwrap();
    let node = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let curator_prefix = format!("{parent}/_c_{}-lock-", uuid::Uuid::new_v4());
    let (_, seq) = client
        .create(&curator_prefix, b"127.0.0.1", &node)
        .await
        .unwrap();
    let err = p
        .acquire(
            "table_lock",
            Duration::from_millis(100),
            Duration::from_millis(1500),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Timeout { .. }), "{err:?}");
    // The timed-out waiter removed its own node: only Curator's is left.
    assert_eq!(client.list_children(&parent).await.unwrap().len(), 1);
    let waiter = tokio::spawn(async move { p.acquire("table_lock", LONG, LONG).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "arbor took a lock Curator holds");
    client
        .delete(&format!("{curator_prefix}{seq}"), None)
        .await
        .unwrap();
    let held = tokio::time::timeout(LONG, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(held.token > 0);
}
