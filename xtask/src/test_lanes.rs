//! `cargo test --workspace` with the test binaries run side by side (`cargo xtask test`).
//!
//! Most test binaries keep one of the two CPUs idle for most of their run (a long model or
//! sweep test alone at the end, tests waiting on services or child processes): run one by
//! one they took 17 minutes of CI for about 9 minutes of CPU. So the workspace's tests are
//! built once (`cargo test --no-run`), then run by `ARBOR_TEST_LANES` (default 2) lanes that
//! each take the next binary, longest first, with the environment `cargo test` gives them
//! (the package's directory as working directory, `CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`).
//! The documentation tests run as one more job (`cargo test --doc`). Each binary's output is
//! printed whole when it ends, under a line naming it and its time; the run closes with
//! `tests: N passed, N failed, N skipped` over every `test result:` line.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

/// Test binaries known to run longest (`<package>:<target>`), started first so that the
/// lanes end together; the others follow in build order.
const LONGEST_FIRST: [&str; 6] = [
    "arbor-table:it",
    "arbor-branching:it",
    "arbor-cleaner:it",
    "arbor-cli:it",
    "arbor-storage:it",
    "arbor-datafusion:it",
];

/// One thing to run: a test binary or the documentation tests.
struct Job {
    label: String,
    command: Command,
}

/// What the jobs added up to.
#[derive(Default)]
struct Totals {
    passed: u64,
    failed: u64,
    ignored: u64,
    failed_jobs: Vec<String>,
}

impl Totals {
    fn count(&mut self, line: &str) {
        let Some(rest) = line.strip_prefix("test result: ") else {
            return;
        };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(label), Some(n)) = (words.next(), words.next()) else {
                continue;
            };
            let n: u64 = n.parse().unwrap_or(0);
            match label {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                "ignored" => self.ignored += n,
                _ => {}
            }
        }
    }
}

/// A test binary the build produced: (`<package>:<target>`, executable, package directory,
/// package name).
pub(crate) type Built = Vec<(String, PathBuf, PathBuf, String)>;

/// Builds every test binary of the workspace (and, when `examples`, the examples, which
/// `cargo test` leaves out when they say `test = false`).
pub(crate) fn build(examples: bool) -> Result<Built, String> {
    let found = build_tests()?;
    if examples {
        let shown = "cargo build --workspace --examples";
        eprintln!("+ {shown}");
        let status = Command::new("cargo")
            .args(["build", "--workspace", "--examples"])
            .current_dir(crate::repo_root())
            .status()
            .map_err(|e| format!("cannot run {shown}: {e}"))?;
        if !status.success() {
            return Err(format!("{shown} failed with {status}"));
        }
    }
    Ok(found)
}

fn build_tests() -> Result<Built, String> {
    let shown = "cargo test --workspace --no-run --message-format=json-render-diagnostics";
    eprintln!("+ {shown}");
    let mut child = Command::new("cargo")
        .args([
            "test",
            "--workspace",
            "--no-run",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(crate::repo_root())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    let mut found: Built = Vec::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let line = line.map_err(|e| format!("reading {shown}: {e}"))?;
            let Ok(doc) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if doc.get("reason").and_then(|r| r.as_str()) != Some("compiler-artifact") {
                continue;
            }
            let (Some(exe), Some(manifest), Some(target)) = (
                doc.get("executable").and_then(|e| e.as_str()),
                doc.get("manifest_path").and_then(|m| m.as_str()),
                doc.pointer("/target/name").and_then(|n| n.as_str()),
            ) else {
                continue;
            };
            let is_test = doc
                .pointer("/profile/test")
                .and_then(|t| t.as_bool())
                .unwrap_or(false);
            if !is_test {
                continue;
            }
            let dir = PathBuf::from(manifest)
                .parent()
                .map(PathBuf::from)
                .unwrap_or_default();
            let package = package_name(&doc).unwrap_or_else(|| target.to_string());
            found.push((
                format!("{package}:{target}"),
                PathBuf::from(exe),
                dir,
                package,
            ));
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {shown}: {e}"))?;
    if !status.success() {
        return Err(format!("{shown} failed with {status}"));
    }
    Ok(found)
}

/// The jobs (longest first), with the documentation tests after the two longest.
fn jobs(mut found: Built, envs: &[(String, String)]) -> Vec<Job> {
    found.sort_by_key(|(label, ..)| {
        LONGEST_FIRST
            .iter()
            .position(|l| l == label)
            .unwrap_or(LONGEST_FIRST.len())
    });
    let mut out: Vec<Job> = found
        .into_iter()
        .map(|(label, exe, dir, package)| {
            let mut command = Command::new(exe);
            command
                .current_dir(&dir)
                .env("CARGO_MANIFEST_DIR", &dir)
                .env("CARGO_PKG_NAME", package);
            for (k, v) in envs {
                command.env(k, v);
            }
            Job { label, command }
        })
        .collect();
    let mut doc = Command::new("cargo");
    doc.args(["test", "--workspace", "--doc"])
        .current_dir(crate::repo_root());
    for (k, v) in envs {
        doc.env(k, v);
    }
    // After the two longest: the doctests compile, which the lanes' idle time absorbs.
    out.insert(
        out.len().min(2),
        Job {
            label: "doctests".to_string(),
            command: doc,
        },
    );
    out
}

/// The package name of a `compiler-artifact` message (`package_id` is
/// `path+file:///...#name@version` or `name version (...)`).
fn package_name(doc: &serde_json::Value) -> Option<String> {
    let id = doc.get("package_id")?.as_str()?;
    if let Some((_, rest)) = id.rsplit_once('#') {
        let name = rest.split('@').next()?;
        // `#version` alone (the directory names the package): take the directory's name.
        if name.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            return id
                .split('#')
                .next()
                .and_then(|p| p.rsplit('/').next())
                .map(str::to_string);
        }
        return Some(name.to_string());
    }
    id.split_whitespace().next().map(str::to_string)
}

/// Runs every test of the workspace in lanes (module doc) with `envs` set.
pub(crate) fn run(built: Built, envs: &[(String, String)]) -> Result<(), String> {
    let lanes: usize = std::env::var("ARBOR_TEST_LANES")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(2);
    let queue = Mutex::new(jobs(built, envs).into_iter().collect::<VecDeque<Job>>());
    let totals = Mutex::new(Totals::default());
    let started = Instant::now();
    eprintln!("+ the test binaries, {lanes} at a time");
    std::thread::scope(|s| {
        for _ in 0..lanes {
            s.spawn(|| loop {
                let job = match queue.lock() {
                    Ok(mut q) => q.pop_front(),
                    Err(_) => None,
                };
                let Some(mut job) = job else { break };
                eprintln!("---- {} started", job.label);
                let t = Instant::now();
                let output = job.command.stdin(Stdio::null()).output();
                let seconds = t.elapsed().as_secs_f64();
                let Ok(mut totals) = totals.lock() else { break };
                let mut stdout = std::io::stdout().lock();
                match output {
                    Ok(out) => {
                        let _ = writeln!(
                            stdout,
                            "==== {} ({seconds:.1} s, {})",
                            job.label,
                            if out.status.success() { "ok" } else { "FAILED" }
                        );
                        let text = String::from_utf8_lossy(&out.stdout);
                        for line in text.lines() {
                            totals.count(line);
                        }
                        let _ = stdout.write_all(&out.stdout);
                        let _ = stdout.write_all(&out.stderr);
                        if !out.status.success() {
                            totals
                                .failed_jobs
                                .push(format!("{} ({})", job.label, out.status));
                        }
                    }
                    Err(e) => {
                        let _ = writeln!(stdout, "==== {}: cannot run: {e}", job.label);
                        totals
                            .failed_jobs
                            .push(format!("{} (cannot run: {e})", job.label));
                    }
                }
                let _ = stdout.flush();
            });
        }
    });
    let totals = totals
        .into_inner()
        .map_err(|_| "a test lane panicked".to_string())?;
    println!(
        "tests: {} passed, {} failed, {} skipped ({:.0} s in {lanes} lanes)",
        totals.passed,
        totals.failed,
        totals.ignored,
        started.elapsed().as_secs_f64()
    );
    if !totals.failed_jobs.is_empty() {
        return Err(format!(
            "test binaries failed: {}",
            totals.failed_jobs.join(", ")
        ));
    }
    if totals.passed == 0 {
        return Err("cargo test ran no test".to_string());
    }
    Ok(())
}
