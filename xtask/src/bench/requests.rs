//! `cargo xtask bench requests`: the HTTP requests each everyday operation sends to S3, counted
//! by the server.
//!
//! A copy-on-write table with the metadata table and `--partitions` partitions (default 1,000;
//! ten rows each) is written straight to S3 by one `arbor write --op bulk-insert`. Then, each as
//! one whole `arbor` process with the table at `s3://arbor-bench/<prefix>/t`:
//! 1. a 100-row upsert (100 existing keys in 100 partitions);
//! 2. `branch create` (branch `dev` from main's latest write);
//! 3. `tag create` (tag `v1` on main);
//! 4. a publication: `branch publish` of `dev` after a 100-row upsert on it (the upsert is not
//!    counted);
//! 5. `clean` (after the upsert and the publication left replaced file slices);
//! 6. a one-key read, `read --where id=k00042`.
//!
//! The server is the moto of `scripts/moto.sh`; it runs single-threaded and logs one line per
//! request, so the requests of an operation are the log lines it added (the bench waits until
//! the log stops growing after the process exits). Each request is counted by kind: GET (whole
//! or ranged), HEAD, PUT (copies included), LIST (`list-type=2`), DELETE (a batch delete is one
//! `POST ?delete`) and other POSTs. Printed beside each operation: the minimum the protocol
//! needs for it on this table ([`minimum`]), and where the difference goes (the keys asked for
//! more than once). Each operation's requests, in order, are written to
//! `requests-<operation>.txt` in the bench directory (kept with `--dir`).
//!
//! Usage: `cargo xtask bench requests [--partitions 1000] [--arbor PATH] [--dir DIR]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::mdt::s3;
use super::start;

const USAGE: &str = "usage: cargo xtask bench requests [--partitions N] [--arbor PATH] [--dir DIR]";

/// Rows of each partition.
const ROWS_PER_PARTITION: u64 = 10;
/// Rows of each upsert.
const UPSERT_ROWS: u64 = 100;

#[derive(Debug, Clone, PartialEq)]
struct Options {
    partitions: u64,
    arbor: Option<PathBuf>,
    dir: Option<PathBuf>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        partitions: 1_000,
        arbor: None,
        dir: None,
    };
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--partitions" => {
                o.partitions = value()?
                    .replace('_', "")
                    .parse()
                    .ok()
                    .filter(|n| *n >= UPSERT_ROWS)
                    .ok_or_else(|| {
                        format!("--partitions wants a number of at least {UPSERT_ROWS}\n{USAGE}")
                    })?
            }
            "--arbor" => o.arbor = Some(PathBuf::from(value()?)),
            "--dir" => o.dir = Some(PathBuf::from(value()?)),
            _ => return Err(format!("unknown argument {a}\n{USAGE}")),
        }
    }
    Ok(o)
}

/// The kinds of requests counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Get,
    Head,
    Put,
    List,
    Delete,
    Post,
}

const KINDS: [Kind; 6] = [
    Kind::Get,
    Kind::Head,
    Kind::Put,
    Kind::List,
    Kind::Delete,
    Kind::Post,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Get => "GET",
            Kind::Head => "HEAD",
            Kind::Put => "PUT",
            Kind::List => "LIST",
            Kind::Delete => "DELETE",
            Kind::Post => "POST",
        }
    }
}

/// One request of the server's log: its kind and the key or listing prefix it names (relative
/// to the table).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Request {
    kind: Kind,
    target: String,
}

/// Parses one line of moto's (werkzeug's) request log, `... "GET /bucket/key?query HTTP/1.1"
/// 200 -`; `None` for other lines. `table` is the table's key prefix in the bucket.
fn parse_line(line: &str, table: &str) -> Option<Request> {
    let line = strip_ansi(line);
    let quoted = line.split('"').nth(1)?;
    let mut parts = quoted.split(' ');
    let (method, url) = (parts.next()?, parts.next()?);
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let kind = match method {
        "GET" if query.split('&').any(|q| q == "list-type=2") => Kind::List,
        "GET" => Kind::Get,
        "HEAD" => Kind::Head,
        "PUT" => Kind::Put,
        "DELETE" => Kind::Delete,
        "POST" if query.split('&').any(|q| q == "delete" || q == "delete=") => Kind::Delete,
        "POST" => Kind::Post,
        _ => return None,
    };
    let decoded = percent_decode(if kind == Kind::List {
        query
            .split('&')
            .find_map(|q| q.strip_prefix("prefix="))
            .unwrap_or("")
    } else {
        path
    });
    let target = decoded
        .trim_start_matches('/')
        .trim_start_matches(s3::BUCKET)
        .trim_start_matches('/');
    let target = target
        .strip_prefix(table)
        .map(|t| t.trim_start_matches('/'))
        .unwrap_or(target);
    Some(Request {
        kind,
        target: target.to_string(),
    })
}

/// `line` without ANSI colour sequences (`ESC [ ... m`), with which werkzeug marks some
/// statuses (206, 404, ...).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Decodes `%XX` escapes (keys are UTF-8).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes.get(i), hex) {
            (Some(b'%'), Some(b)) => {
                out.push(b);
                i += 3;
            }
            (Some(b), _) => {
                out.push(*b);
                i += 1;
            }
            (None, _) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the server logs its requests, and how far the log has been read.
struct RequestLog {
    path: PathBuf,
    offset: u64,
}

impl RequestLog {
    /// The log of the moto `scripts/moto.sh` started on `endpoint`'s port.
    fn of_moto(endpoint: &str) -> Result<Self, String> {
        if std::env::var_os("ARBOR_TEST_S3_ENDPOINT").is_some() {
            return Err("bench requests: counts the requests moto logs; unset ARBOR_TEST_S3_ENDPOINT so that scripts/moto.sh's moto (whose log it reads) is used".into());
        }
        let port = endpoint
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .filter(|p| p.chars().all(|c| c.is_ascii_digit()))
            .ok_or_else(|| format!("bench requests: no port in {endpoint}"))?;
        let path = crate::repo_root()
            .join(".arbor-test")
            .join(format!("moto-{port}.log"));
        let mut log = RequestLog { path, offset: 0 };
        log.offset = log.len()?;
        Ok(log)
    }

    fn len(&self) -> Result<u64, String> {
        std::fs::metadata(&self.path)
            .map(|m| m.len())
            .map_err(|e| format!("bench requests: moto's log {}: {e}", self.path.display()))
    }

    /// The requests logged since the last call, once the log has been still for 300 ms (moto
    /// logs a request after answering it).
    fn take(&mut self, table: &str) -> Result<Vec<Request>, String> {
        let mut len = self.len()?;
        loop {
            std::thread::sleep(Duration::from_millis(300));
            let now = self.len()?;
            if now == len {
                break;
            }
            len = now;
        }
        let bytes = std::fs::read(&self.path)
            .map_err(|e| format!("bench requests: {}: {e}", self.path.display()))?;
        let new = bytes
            .get(usize::try_from(self.offset).unwrap_or(usize::MAX)..)
            .unwrap_or_default();
        self.offset = len;
        Ok(String::from_utf8_lossy(new)
            .lines()
            .filter_map(|l| parse_line(l, table))
            .collect())
    }
}

/// Requests by kind.
fn by_kind(requests: &[Request]) -> BTreeMap<Kind, usize> {
    let mut m = BTreeMap::new();
    for r in requests {
        *m.entry(r.kind).or_insert(0) += 1;
    }
    m
}

/// The requests of `requests` that repeat an earlier one of the same kind and target, most
/// repeated first: `(kind, target, times asked)`.
fn repeats(requests: &[Request]) -> Vec<(Kind, String, usize)> {
    let mut m: BTreeMap<(Kind, &str), usize> = BTreeMap::new();
    for r in requests {
        *m.entry((r.kind, r.target.as_str())).or_insert(0) += 1;
    }
    let mut out: Vec<(Kind, String, usize)> = m
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|((k, t), n)| (k, t.to_string(), n))
        .collect();
    out.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.1.cmp(&b.1)));
    out
}

/// Runs the arbor CLI with the S3 options (through [`super::commits::arbor`]).
fn arbor(bin: &Path, s3_options: &[String], args: &[&str]) -> Result<String, String> {
    let all: Vec<&str> = s3_options
        .iter()
        .map(String::as_str)
        .chain(args.iter().copied())
        .collect();
    super::commits::arbor(bin, &all)
}

/// The CSV of keys `keys` (partition `key % partitions`) at `version`.
fn csv(keys: impl Iterator<Item = u64>, partitions: u64, version: u64) -> String {
    let mut out = String::from("id,part,ts,v\n");
    for k in keys {
        out.push_str(&format!(
            "k{k:05},p{:04},{version},{}\n",
            k % partitions,
            k ^ version
        ));
    }
    out
}

/// One counted operation.
struct Counted {
    name: &'static str,
    requests: Vec<Request>,
    minimum: Minimum,
    seconds: f64,
}

/// The fewest requests an operation needs on this table, by kind, with what they are for.
struct Minimum {
    counts: BTreeMap<Kind, usize>,
    why: &'static str,
}

/// The protocol's minimum for each operation, on a copy-on-write table with the metadata table
/// (FILES partition, no record index), the storage lock (`.hoodie/.locks`) and `touched` file
/// groups changed by an upsert.
///
/// Every write: read `hoodie.properties` (1 GET), list the timeline (1 LIST), read the
/// latest commit's metadata for the schema (1 GET); take and release the lock (a GET and a
/// conditional PUT to take, a PUT to release); list the timeline again under the lock to see
/// concurrent commits (1 LIST); requested, inflight and completed files (3 PUT); the metadata
/// table's deltacommit: its properties and timeline (1 GET, 1 LIST), its FILES partition's
/// base and log blocks for the touched partitions (at least 1 GET), one log block and three
/// instant files (4 PUT). An upsert reads each touched base file (one GET for a small file of
/// known size, footer and data otherwise) and writes its new version (1 PUT). A one-key read
/// without a record index reads every file's footer (its bloom filter and key range): one GET
/// each for small files.
fn minimum(op: &str, touched: usize, files: usize) -> Minimum {
    let mut counts = BTreeMap::new();
    let mut set = |k: Kind, n: usize| {
        counts.insert(k, n);
    };
    let why = match op {
        "upsert" => {
            set(Kind::Get, 6 + touched);
            set(Kind::Put, 9 + touched);
            set(Kind::List, 3);
            "properties, schema, lock (GET + PUT, release PUT), timeline twice, MDT properties, timeline and FILES; per touched file group its base file (one GET) and its new version; 3 instant files; MDT log block and 3 instant files"
        }
        "branch create" => {
            set(Kind::Get, 3);
            set(Kind::Put, 6);
            set(Kind::List, 2);
            "properties, timeline, the head commit; lock; the branch's properties, head pointer and copied head instant; the branch registry entry"
        }
        "tag create" => {
            set(Kind::Get, 4);
            set(Kind::Put, 7);
            set(Kind::List, 2);
            "properties, timeline (twice: under the lock), the tagged commit; lock; savepoint requested, inflight, completed on the data table and its MDT; the tag entry"
        }
        "publish" => {
            set(Kind::Get, 5);
            set(Kind::Put, 5);
            set(Kind::List, 3);
            "properties, both timelines (main under the lock), the branch's head; lock; the publication record and main's new head pointer (create-if-absent)"
        }
        "clean" => {
            set(Kind::Get, 6);
            set(Kind::Put, 7);
            set(Kind::List, 3);
            set(Kind::Delete, 1);
            "properties, timeline, the commits since the last clean (replaced file groups), savepoints and branch pins; lock; clean requested, inflight, completed; the MDT's deltacommit; one batch delete of the replaced files"
        }
        "one-key read" => {
            set(Kind::Get, 6 + files);
            set(Kind::List, 2);
            "properties, timeline, latest commit (schema); MDT properties, timeline, FILES; without a record index, every base file's footer (one GET per small file)"
        }
        _ => "",
    };
    Minimum { counts, why }
}

/// Runs the bench.
pub fn run(args: &[String]) -> Result<(), String> {
    let options = parse_args(args)?;
    let Some(bin) = super::release_cli("requests", options.arbor.as_deref(), args)? else {
        return Ok(());
    };
    let b = start("requests", options.dir.as_deref())?;
    let env = s3::env()?;
    let mut log = RequestLog::of_moto(&env.endpoint)?;
    let mut s3_options = Vec::new();
    for (k, v) in env.options.iter() {
        s3_options.push("-o".to_string());
        s3_options.push(format!("{k}={v}"));
    }
    let prefix = format!(
        "requests-{}-{}",
        std::process::id(),
        chrono::Utc::now().format("%Y%m%d%H%M%S")
    );
    let table_prefix = format!("{prefix}/t");
    let url = format!("s3://{}/{table_prefix}", s3::BUCKET);
    let parts = options.partitions;
    let file = |name: &str, body: String| -> Result<String, String> {
        let path = b.work.join(name);
        std::fs::write(&path, body).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path.to_string_lossy().to_string())
    };
    let init = file("init.csv", csv(0..parts * ROWS_PER_PARTITION, parts, 0))?;
    // 100 existing keys in 100 different partitions.
    let step = parts / UPSERT_ROWS;
    let upsert_keys = |shift: u64| (0..UPSERT_ROWS).map(move |j| j * step + shift);
    let upsert_main = file("main.csv", csv(upsert_keys(0), parts, 1))?;
    let upsert_dev = file("dev.csv", csv(upsert_keys(parts), parts, 2))?;

    eprintln!(
        "bench requests: writing {} rows in {parts} partitions to {url}",
        parts * ROWS_PER_PARTITION
    );
    let started = Instant::now();
    let create_args = [
        "write",
        &url,
        &init,
        "--key",
        "id",
        "--partition-by",
        "part",
        "--ordering",
        "ts",
        "--type",
        "cow",
        "--op",
        "bulk-insert",
    ];
    arbor(&bin, &s3_options, &create_args)?;
    let created = log.take(&table_prefix)?;
    let create_seconds = started.elapsed().as_secs_f64();

    let mut counted = Vec::new();
    let mut op =
        |name: &'static str, args: &[&str], log: &mut RequestLog| -> Result<String, String> {
            let started = Instant::now();
            let out = arbor(&bin, &s3_options, args)?;
            let seconds = started.elapsed().as_secs_f64();
            let requests = log.take(&table_prefix)?;
            let dump = b
                .work
                .join(format!("requests-{}.txt", name.replace(' ', "-")));
            let text: String = requests
                .iter()
                .map(|r| format!("{} {}\n", r.kind.name(), r.target))
                .collect();
            std::fs::write(&dump, text).map_err(|e| format!("{}: {e}", dump.display()))?;
            counted.push(Counted {
                name,
                requests,
                minimum: minimum(name, UPSERT_ROWS as usize, parts as usize),
                seconds,
            });
            Ok(out)
        };
    let out = op(
        "upsert",
        &["write", &url, &upsert_main, "--op", "upsert", "--json"],
        &mut log,
    )?;
    check_updated(&out)?;
    op(
        "branch create",
        &["branch", "create", &url, "dev"],
        &mut log,
    )?;
    op("tag create", &["tag", "create", &url, "v1"], &mut log)?;
    let out = arbor(
        &bin,
        &s3_options,
        &[
            "write",
            &url,
            &upsert_dev,
            "--op",
            "upsert",
            "--branch",
            "dev",
            "--json",
        ],
    )?;
    check_updated(&out)?;
    log.take(&table_prefix)?;
    op("publish", &["branch", "publish", &url, "dev"], &mut log)?;
    op("clean", &["clean", &url], &mut log)?;
    let out = op(
        "one-key read",
        &["read", &url, "--where", "id=k00042", "--format", "csv"],
        &mut log,
    )?;
    if !out.contains("k00042") || out.lines().count() != 2 {
        return Err(format!("the one-key read returned:\n{out}"));
    }

    println!();
    println!("machine: {}", b.machine.describe());
    println!("load average (1, 5, 15 min) at the start: {}", b.load);
    println!("server: {}", env.describe());
    println!(
        "table: copy-on-write with the metadata table, {} rows in {parts} partitions, written by one bulk insert ({} requests, {create_seconds:.1} s); each operation one whole `arbor` process",
        parts * ROWS_PER_PARTITION,
        created.len()
    );
    println!();
    let header: Vec<&str> = KINDS.iter().map(|k| k.name()).collect();
    println!(
        "| operation | requests | {} | protocol minimum | time |",
        header.join(" | ")
    );
    println!("|---|---|{}---|---|", "---|".repeat(KINDS.len()));
    for c in &counted {
        let counts = by_kind(&c.requests);
        let cells: Vec<String> = KINDS
            .iter()
            .map(|k| {
                let n = counts.get(k).copied().unwrap_or(0);
                match c.minimum.counts.get(k) {
                    Some(m) => format!("{n} ({m})"),
                    None => n.to_string(),
                }
            })
            .collect();
        let min_total: usize = c.minimum.counts.values().sum();
        println!(
            "| {} | {} | {} | {min_total} | {:.2} s |",
            c.name,
            c.requests.len(),
            cells.join(" | "),
            c.seconds
        );
    }
    println!();
    println!("Counts per kind, with the protocol minimum in brackets. What the minimum counts:");
    for c in &counted {
        println!("- {}: {}", c.name, c.minimum.why);
    }
    println!();
    println!("Requests asked more than once (kind, key or listing prefix, times):");
    for c in &counted {
        let r = repeats(&c.requests);
        let shown: Vec<String> = r
            .iter()
            .take(6)
            .map(|(k, t, n)| format!("{} {t} x{n}", k.name()))
            .collect();
        println!(
            "- {}: {}{}",
            c.name,
            if shown.is_empty() {
                "none".to_string()
            } else {
                shown.join("; ")
            },
            if r.len() > 6 {
                format!("; {} more", r.len() - 6)
            } else {
                String::new()
            }
        );
    }
    let storage = env.storage(&prefix)?;
    s3::remove_all(&b.rt, &storage)?;
    Ok(())
}

fn check_updated(out: &str) -> Result<(), String> {
    let v: serde_json::Value =
        serde_json::from_str(out).map_err(|e| format!("upsert output: {e}: {out}"))?;
    match v.get("updated").and_then(serde_json::Value::as_u64) {
        Some(UPSERT_ROWS) => Ok(()),
        other => Err(format!(
            "upsert updated {other:?} rows, expected {UPSERT_ROWS}: {out}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse_line_classifies_requests_relative_to_the_table() {
        let t = "requests-1-2/t";
        let line = |q: &str| format!("127.0.0.1 - - [07/Dec/2026 11:55:57] \"{q} HTTP/1.1\" 200 -");
        let cases = [
            (
                "GET /arbor-bench?list-type=2&prefix=requests-1-2%2Ft%2F.hoodie%2Ftimeline%2F&delimiter=%2F",
                Kind::List,
                ".hoodie/timeline/",
            ),
            (
                "GET /arbor-bench/requests-1-2/t/.hoodie/hoodie.properties",
                Kind::Get,
                ".hoodie/hoodie.properties",
            ),
            ("HEAD /arbor-bench/requests-1-2/t/p0001/f.parquet", Kind::Head, "p0001/f.parquet"),
            ("PUT /arbor-bench/requests-1-2/t/p%C3%BC/x", Kind::Put, "pü/x"),
            ("POST /arbor-bench?delete", Kind::Delete, ""),
            ("DELETE /arbor-bench/requests-1-2/t/a", Kind::Delete, "a"),
            ("POST /arbor-bench/requests-1-2/t/big?uploads", Kind::Post, "big"),
        ];
        for (q, kind, target) in cases {
            assert_eq!(
                parse_line(&line(q), t),
                Some(Request {
                    kind,
                    target: target.to_string()
                }),
                "{q}"
            );
        }
        // werkzeug colours some statuses.
        let coloured = "127.0.0.1 - - [07/Dec/2026 12:17:26] \"\u{1b}[35m\u{1b}[1mGET /arbor-bench/requests-1-2/t/p0010/f.parquet HTTP/1.1\u{1b}[0m\" 206 -";
        assert_eq!(
            parse_line(coloured, t),
            Some(Request {
                kind: Kind::Get,
                target: "p0010/f.parquet".to_string()
            })
        );
        assert_eq!(parse_line(" * Running on http://127.0.0.1:5055", t), None);
        assert_eq!(parse_line("\"OPTIONS / HTTP/1.1\" 200", t), None);
    }

    #[test]
    fn test_repeats_and_counts() {
        let r = |kind, t: &str| Request {
            kind,
            target: t.to_string(),
        };
        let reqs = vec![
            r(Kind::List, ".hoodie/timeline/"),
            r(Kind::Get, "a"),
            r(Kind::List, ".hoodie/timeline/"),
            r(Kind::List, ".hoodie/timeline/"),
            r(Kind::Get, "a"),
            r(Kind::Head, "a"),
        ];
        assert_eq!(
            repeats(&reqs),
            vec![
                (Kind::List, ".hoodie/timeline/".to_string(), 3),
                (Kind::Get, "a".to_string(), 2)
            ]
        );
        let k = by_kind(&reqs);
        assert_eq!(k.get(&Kind::List), Some(&3));
        assert_eq!(k.get(&Kind::Head), Some(&1));
        assert_eq!(k.get(&Kind::Put), None);
    }

    #[test]
    fn test_parse_args() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_args(&args(&["requests"])).map(|o| o.partitions),
            Ok(1_000)
        );
        assert!(parse_args(&args(&["requests", "--partitions", "10"])).is_err());
        assert!(parse_args(&args(&["requests", "--bogus"])).is_err());
    }
}
