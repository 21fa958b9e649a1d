//! The table lock of the CLI: `--lock URL` (unknown schemes, PostgreSQL, ZooKeeper), a holder
//! killed with `kill -9` (the next writer commits within 15 s), SIGTERM (the lock is released and
//! the exit code is 143), and the table's own `hoodie.write.lock.provider`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::create_write::{fails, file, ok, read_jsonl, s, trips_table};

const PAUSE_ENV: &str = "ARBOR_TEST_PAUSE_IN_LOCK_MS";

/// Starts `arbor args...` with the pause-in-lock test hook (`pause_ms`) and waits until it holds
/// the lock (it says so on stderr).
fn start_holder(args: &[&str], pause_ms: u64) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_arbor"))
        .args(args)
        .env("ARBOR_LOG", "off")
        .env(PAUSE_ENV, pause_ms.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(
        line.contains("test hook: holding lock"),
        "the holder did not reach the lock: {line:?}"
    );
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut rest = String::new();
        while stderr.read_line(&mut rest).unwrap_or(0) > 0 {}
    });
    child
}

/// A one-row CSV for city `city` with key `id`.
fn one_row(dir: &Path, id: &str, city: &str) -> PathBuf {
    file(
        dir,
        &format!("{id}.csv"),
        &format!("id,city,fare,n\n{id},{city},9.5,9\n"),
    )
}

fn row_ids(table: &Path) -> Vec<String> {
    let mut ids: Vec<String> = read_jsonl(table, &[])
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

fn lock_state(table: &Path) -> Value {
    let text = std::fs::read_to_string(table.join(".hoodie/.locks/table_lock.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn test_lock_unknown_scheme_errors_naming_it_and_the_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let input = one_row(dir.path(), "d", "la");
    let line = fails(&["--lock", "redis://h:1", "write", s(&table), s(&input)]);
    assert!(line.contains("redis://h:1"), "{line}");
    assert!(
        line.contains("zk://") && line.contains("postgres://") && line.contains("storage"),
        "{line}"
    );
    assert_eq!(row_ids(&table), ["a", "b", "c"]);
}

#[test]
fn test_lock_kill_9_of_the_holder_next_writer_commits_within_15_s() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let killed = one_row(dir.path(), "k", "la");
    let next = one_row(dir.path(), "n", "tx");
    let mut holder = start_holder(&["write", s(&table), s(&killed), "--op", "insert"], 120_000);
    holder.kill().unwrap(); // SIGKILL
    holder.wait().unwrap();
    let killed_at = Instant::now();
    ok(&["write", s(&table), s(&next), "--op", "insert"]);
    let took = killed_at.elapsed();
    eprintln!("kill -9 of the lock holder: the next writer committed {took:?} later");
    // The measured bound the issue asks for (the lease is 10 s).
    assert!(
        took < Duration::from_secs(15),
        "the next writer needed {took:?} after the holder was killed"
    );
    assert_eq!(row_ids(&table), ["a", "b", "c", "n"]);
}

#[test]
fn test_lock_sigterm_releases_the_lock_and_exits_143() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let stopped = one_row(dir.path(), "t", "la");
    let holder = start_holder(
        &["write", s(&table), s(&stopped), "--op", "insert"],
        120_000,
    );
    let held = lock_state(&table);
    assert!(held["owner"].is_string(), "{held}");
    let status = Command::new("kill")
        .args(["-TERM", &holder.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = holder.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143));
    let after = lock_state(&table);
    assert!(
        after["owner"].is_null(),
        "SIGTERM left the lock held: {after}"
    );
    assert_eq!(after["token"], held["token"]);
    let next = one_row(dir.path(), "n", "tx");
    ok(&["write", s(&table), s(&next), "--op", "insert"]);
    assert_eq!(row_ids(&table), ["a", "b", "c", "n"]);
}

#[test]
fn test_lock_from_table_properties_in_process_provider_used() {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let before = lock_state(&table);
    let props = table.join(".hoodie/hoodie.properties");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&props)
        .unwrap();
    writeln!(
        f,
        "hoodie.write.lock.provider=org.apache.hudi.client.transaction.lock.InProcessLockProvider"
    )
    .unwrap();
    drop(f);
    let input = one_row(dir.path(), "d", "la");
    ok(&["write", s(&table), s(&input), "--op", "insert"]);
    assert_eq!(
        lock_state(&table),
        before,
        "the storage lock was used although the table names another provider"
    );
    let bogus = std::fs::read_to_string(&props).unwrap().replace(
        "org.apache.hudi.client.transaction.lock.InProcessLockProvider",
        "com.example.NoSuchLockProvider",
    );
    std::fs::write(&props, bogus).unwrap();
    let line = fails(&["write", s(&table), s(&input), "--op", "upsert"]);
    assert!(line.contains("com.example.NoSuchLockProvider"), "{line}");
    // --lock wins over the table's properties.
    ok(&[
        "--lock",
        "storage",
        "write",
        s(&table),
        s(&input),
        "--op",
        "upsert",
    ]);
}

/// Two writers through `lock`: one holds the lock (pausing 1.5 s inside it), the other starts
/// meanwhile and must wait for it; both commits are kept, and the storage lock is never used.
fn two_concurrent_writers(lock: &str) {
    let dir = tempfile::tempdir().unwrap();
    let table = trips_table(dir.path(), "cow");
    let before = lock_state(&table);
    let first = one_row(dir.path(), "x", "la");
    let second = one_row(dir.path(), "y", "tx");
    let holder = start_holder(
        &[
            "--lock",
            lock,
            "write",
            s(&table),
            s(&first),
            "--op",
            "insert",
        ],
        1_500,
    );
    ok(&[
        "--lock",
        lock,
        "write",
        s(&table),
        s(&second),
        "--op",
        "insert",
    ]);
    let out = holder.wait_with_output().unwrap();
    assert!(out.status.success(), "the first writer failed");
    assert_eq!(row_ids(&table), ["a", "b", "c", "x", "y"]);
    assert_eq!(
        lock_state(&table),
        before,
        "the storage lock was used instead of {lock}"
    );
}

/// Reports a missing service: a failure under `CI`, else a visible skip.
fn unavailable(what: &str, reason: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{what} is unavailable (CI is set, so this test must not skip): {reason}");
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED: needs {what}: {reason}");
}

/// The last line a script of the repository prints on stdout.
fn script_output(name: &str) -> Result<String, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts")
        .join(name);
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", script.display(), out.status));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .ok_or_else(|| format!("{} printed nothing", script.display()))
}

/// `postgres://user:password@host:port/db` from a `key=value` connection string (or the URL).
fn pg_url(conn: &str) -> String {
    if conn.contains("://") {
        return conn.to_string();
    }
    let get = |k: &str| {
        conn.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap_or("")
            .to_string()
    };
    format!(
        "postgres://{}:{}@{}:{}/{}",
        get("user"),
        get("password"),
        get("host"),
        get("port"),
        get("dbname")
    )
}

fn pg_lock_url() -> Option<String> {
    static URL: OnceLock<Result<String, String>> = OnceLock::new();
    match URL.get_or_init(|| match std::env::var("ARBOR_TEST_PG_URL") {
        Ok(conn) => Ok(pg_url(&conn)),
        Err(_) => script_output("postgres.sh").map(|c| pg_url(&c)),
    }) {
        Ok(url) => Some(url.clone()),
        Err(reason) => {
            unavailable("PostgreSQL", reason);
            None
        }
    }
}

fn zk_lock_url(base: &str) -> Option<String> {
    static URL: OnceLock<Result<String, String>> = OnceLock::new();
    match URL.get_or_init(|| match std::env::var("ARBOR_TEST_ZK_URL") {
        Ok(url) => Ok(url),
        Err(_) => script_output("zookeeper.sh").map(|l| {
            l.trim_start_matches("export ARBOR_TEST_ZK_URL=")
                .to_string()
        }),
    }) {
        Ok(url) => Some(format!("{}{base}", url.trim_end_matches('/'))),
        Err(reason) => {
            unavailable("ZooKeeper", reason);
            None
        }
    }
}

#[test]
fn test_lock_postgres_two_concurrent_cli_writers_both_commit() {
    let Some(url) = pg_lock_url() else {
        return;
    };
    two_concurrent_writers(&url);
}

#[test]
fn test_lock_zookeeper_two_concurrent_cli_writers_both_commit() {
    let base = format!("/arbor-cli-test/{}", std::process::id());
    let Some(url) = zk_lock_url(&base) else {
        return;
    };
    two_concurrent_writers(&format!("{url}?lock_key=trips"));
}
