//! Eight `arbor write` processes, each with its own `TMPDIR`, upserting into one table at the
//! same time, every commit a separate process (commits per writer:
//! `ARBOR_TEST_COMMITS_PER_WRITER`, default 15 copy-on-write, 10 merge-on-read): every row of
//! every commit that succeeded is read back exactly once with its value, nothing of a failed
//! one is visible, `arbor validate` passes, and the holder logs of all processes show one table
//! lock holder at a time with increasing fencing tokens.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::Value;

use super::create_write::{read_jsonl, s};
use super::holder_log::{check, logged_arbor, parse, LockEvent};

const WRITERS: usize = 8;

/// The rows of one commit: three new keys, plus an update of the first key of the writer's
/// last successful commit.
const NEW_ROWS: usize = 3;

/// What one `arbor write` process did.
struct Outcome {
    writer: usize,
    commit: usize,
    /// `(key, fare)` of every row the commit wrote.
    rows: Vec<(String, f64)>,
    code: Option<i32>,
    /// The reported instant (on success).
    instant: Option<String>,
    stderr: String,
    secs: f64,
}

fn key(writer: usize, commit: usize, row: usize) -> String {
    format!("w{writer}-c{commit:02}-r{row}")
}

/// The fare of row `row` of commit `commit` of `writer` (exact in binary: `n.5`), negative for
/// an update.
fn fare(writer: usize, commit: usize, row: usize, update: bool) -> f64 {
    let v = (writer * 100_000 + commit * 10 + row) as f64 + 0.5;
    if update {
        -v
    } else {
        v
    }
}

/// Writes `commits` sequential upserts as writer `w`, each its own process with `TMPDIR=tmp`.
fn writer(w: usize, commits: usize, table: PathBuf, inputs: PathBuf, tmp: PathBuf) -> Vec<Outcome> {
    let mut out = Vec::new();
    let mut last_ok: Option<usize> = None;
    for c in 0..commits {
        let mut rows: Vec<(String, f64)> = (0..NEW_ROWS)
            .map(|r| (key(w, c, r), fare(w, c, r, false)))
            .collect();
        if let Some(prev) = last_ok {
            rows.push((key(w, prev, 0), fare(w, c, 9, true)));
        }
        let mut csv = String::from("id,city,fare,n\n");
        for (k, f) in &rows {
            // One partition per writer: the writers contend for the table lock, the commit
            // record, the timeline and the metadata table, not for file groups (sharing them
            // made most commits conflict and retry: 8 x 50 took over 600 s on 2 cores).
            csv.push_str(&format!("{k},w{w},{f},{c}\n"));
        }
        let input = inputs.join(format!("w{w}-c{c}.csv"));
        std::fs::write(&input, csv).unwrap();
        let started = Instant::now();
        let res = logged_arbor(&["write", s(&table), s(&input), "--json"], Some(&tmp))
            .output()
            .unwrap();
        let instant = res.status.success().then(|| {
            let report: Value = serde_json::from_slice(&res.stdout).unwrap();
            report["instant"].as_str().unwrap().to_string()
        });
        if instant.is_some() {
            last_ok = Some(c);
        }
        out.push(Outcome {
            writer: w,
            commit: c,
            rows,
            code: res.status.code(),
            instant,
            stderr: String::from_utf8_lossy(&res.stderr).into_owned(),
            secs: started.elapsed().as_secs_f64(),
        });
    }
    out
}

/// Runs [`WRITERS`] writers of `commits` commits each against a new table of type `kind` and
/// checks everything the module doc says.
fn eight_writers(kind: &str, commits: usize) {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let inputs = dir.path().join("inputs");
    std::fs::create_dir(&inputs).unwrap();
    let seed = inputs.join("seed.csv");
    std::fs::write(&seed, "id,city,fare,n\nseed-0,w0,0.5,0\nseed-1,w1,0.5,0\n").unwrap();
    let created = logged_arbor(
        &[
            "write",
            s(&table),
            s(&seed),
            "--op",
            "insert",
            "--type",
            kind,
            "--key",
            "id",
            "--partition-by",
            "city",
            "--merge-mode",
            "commit-time",
        ],
        None,
    )
    .output()
    .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );

    let started = Instant::now();
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let tmp = dir.path().join(format!("tmp-{w}"));
            std::fs::create_dir(&tmp).unwrap();
            let (table, inputs) = (table.clone(), inputs.clone());
            std::thread::spawn(move || writer(w, commits, table, inputs, tmp))
        })
        .collect();
    let outcomes: Vec<Outcome> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let took = started.elapsed();

    // Exit statuses: 0, or a one-line error of a write that did not take effect.
    let failed: Vec<&Outcome> = outcomes.iter().filter(|o| o.instant.is_none()).collect();
    for o in &failed {
        assert_eq!(
            o.code,
            Some(1),
            "writer {} commit {}: {}",
            o.writer,
            o.commit,
            o.stderr
        );
    }
    let succeeded = outcomes.len() - failed.len();
    assert!(succeeded > 0, "no write succeeded");

    // Every row of every successful write, exactly once, with the value of its last
    // successful write and that write's instant; nothing of a failed one.
    let mut expected: BTreeMap<String, (f64, String)> = BTreeMap::new();
    let seed_instant = read_jsonl(&table, &["--meta"])
        .iter()
        .find(|r| r["id"] == "seed-0")
        .map(|r| r["_hoodie_commit_time"].as_str().unwrap().to_string())
        .unwrap();
    for k in ["seed-0", "seed-1"] {
        expected.insert(k.to_string(), (0.5, seed_instant.clone()));
    }
    let mut by_writer: Vec<&Outcome> = outcomes.iter().collect();
    by_writer.sort_by_key(|o| (o.writer, o.commit));
    for o in by_writer.iter().filter(|o| o.instant.is_some()) {
        for (k, f) in &o.rows {
            expected.insert(k.clone(), (*f, o.instant.clone().unwrap()));
        }
    }
    let rows = read_jsonl(&table, &["--meta"]);
    let mut seen: BTreeMap<String, Vec<(f64, String)>> = BTreeMap::new();
    for r in &rows {
        seen.entry(r["id"].as_str().unwrap().to_string())
            .or_default()
            .push((
                r["fare"].as_f64().unwrap(),
                r["_hoodie_commit_time"].as_str().unwrap().to_string(),
            ));
    }
    let duplicated: Vec<&String> = seen
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(k, _)| k)
        .collect();
    assert!(
        duplicated.is_empty(),
        "keys read more than once: {duplicated:?}"
    );
    let missing: Vec<&String> = expected.keys().filter(|k| !seen.contains_key(*k)).collect();
    assert!(
        missing.is_empty(),
        "rows of successful writes lost: {missing:?}"
    );
    let unexpected: Vec<&String> = seen.keys().filter(|k| !expected.contains_key(*k)).collect();
    assert!(
        unexpected.is_empty(),
        "rows of failed writes visible: {unexpected:?}"
    );
    for (k, want) in &expected {
        assert_eq!(&seen[k][0], want, "key {k}: (fare, commit time)");
    }

    // The timeline holds exactly the successful writes (and the seed).
    let timeline = super::create_write::instants(&table);
    let rollbacks = timeline
        .iter()
        .filter(|i| i["action"] == "rollback")
        .count();
    let completed = timeline
        .iter()
        .filter(|i| {
            let action = i["action"].as_str().unwrap_or_default();
            action == "commit" || action == "deltacommit"
        })
        .count();
    assert_eq!(completed, succeeded + 1, "completed writes on the timeline");

    let validate = logged_arbor(&["validate", s(&table)], None)
        .output()
        .unwrap();
    assert!(
        validate.status.success(),
        "arbor validate: {}{}",
        String::from_utf8_lossy(&validate.stdout),
        String::from_utf8_lossy(&validate.stderr)
    );

    // The holder logs of every process that wrote.
    let mut events: Vec<LockEvent> = parse(&String::from_utf8_lossy(&created.stderr));
    for o in &outcomes {
        events.extend(parse(&o.stderr));
    }
    let holders = check(&events);
    let slowest = outcomes.iter().map(|o| o.secs).fold(0.0, f64::max);
    eprintln!(
        "{kind}: {WRITERS} writers x {commits} commits in {:.1} s: {succeeded} committed, {} \
         failed, {rollbacks} lost races rolled back, slowest process {slowest:.1} s; holder log: \
         {}",
        took.as_secs_f64(),
        failed.len(),
        holders.summary()
    );
    for o in &failed {
        eprintln!(
            "  failed: writer {} commit {}: {}",
            o.writer,
            o.commit,
            o.stderr.lines().last().unwrap_or_default()
        );
    }
    assert!(
        holders.is_clean(),
        "overlaps: {:#?}\nduplicate tokens: {:?}\ntoken order: {:#?}",
        holders.overlaps,
        holders.duplicate_tokens,
        holders.token_order
    );
    // Each write took the lock at least twice (start and commit).
    assert!(
        holders.grants >= 2 * (succeeded + 1),
        "{} grants for {} writes",
        holders.grants,
        succeeded + 1
    );
}

/// Commits per writer: `ARBOR_TEST_COMMITS_PER_WRITER`, else `default` (sized for about a
/// minute on two loaded cores: the writes of one table are serialised by its lock, held
/// 0.1-0.7 s per write there, longer as the timeline grows).
fn commits_per_writer(default: usize) -> usize {
    std::env::var("ARBOR_TEST_COMMITS_PER_WRITER")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// On two cores busy with other builds: 8 x 20 took 111 s, 8 x 50
/// (`ARBOR_TEST_COMMITS_PER_WRITER=50`) 225 s.
#[test]
fn test_eight_writers_own_tmpdirs_cow_sequential_upserts_no_row_lost_one_holder_at_a_time() {
    eight_writers("cow", commits_per_writer(15));
}

/// On two cores busy with other builds: 8 x 12 took 56 s, 8 x 25
/// (`ARBOR_TEST_COMMITS_PER_WRITER=25`) 113 s.
#[test]
fn test_eight_writers_own_tmpdirs_mor_sequential_upserts_no_row_lost_one_holder_at_a_time() {
    eight_writers("mor", commits_per_writer(10));
}
