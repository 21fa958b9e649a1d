//! The Spark stage of `cargo xtask interop` (`spark/<hudi version>/<scenario>/<check>`): Java
//! Hudi under Apache Spark 3.5, the engine that writes and reads almost every Hudi table, run
//! against arbor both ways (issue 34). `scripts/spark.sh` installs pyspark and fetches the Hudi
//! Spark bundles once per machine; then, per Hudi version, one `scripts/spark_stage.py` process
//! (one JVM, one `local[2]` SparkSession) runs every scenario (`scripts/spark_stage_*.py`:
//! Spark reads what arbor writes, Spark writes and runs its services on arbor's tables and
//! arbor carries on, Java's cleaner against arbor's protections, metadata arbitration,
//! concurrent writers under ZooKeeper, the table shapes Java writes) with the debug `arbor`
//! CLI. Every check is one line of JSON; a failed one prints `FAIL spark/...` with its error
//! (`KNOWN spark/...` for the open findings of [`KNOWN_FAILURES`], which do not fail the
//! stage). Closes with `spark: N passed, M failed (K known failures; ...)`.
//!
//! Without Java, Maven or the jars the stage is skipped with a visible message, and is an
//! error when `CI` (or `ARBOR_REQUIRE_SPARK`) is set. `ARBOR_HUDI_VERSIONS` ("1.0.2 1.1.1
//! 1.2.0") picks the versions, `ARBOR_SPARK_SCENARIOS` ("reads,writes") the scenarios,
//! `ARBOR_SPARK_SESSIONS` (3) how many versions run side by side.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Checks known to fail, by id without the version (`*` matches any run of characters), with
/// why: they run and print `KNOWN`, and do not fail the stage. Each is an open finding of
/// issue 34 (README "What other engines see"); a known check that passes is reported so the
/// entry can go.
const KNOWN_FAILURES: [(&str, &str); 0] = [];

fn matches(pattern: &str, id: &str) -> bool {
    let mut rest = id;
    let mut parts = pattern.split('*').peekable();
    let mut first = true;
    while let Some(part) = parts.next() {
        if first {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
            first = false;
        } else if parts.peek().is_none() {
            return part.is_empty() || rest.ends_with(part);
        } else if let Some(at) = rest.find(part) {
            rest = &rest[at + part.len()..];
        } else {
            return false;
        }
    }
    rest.is_empty()
}

fn known(id: &str) -> Option<&'static str> {
    known_entry(id).map(|(_, why)| why)
}

/// The entry of [`KNOWN_FAILURES`] matching `id`: (pattern, why).
fn known_entry(id: &str) -> Option<(&'static str, &'static str)> {
    KNOWN_FAILURES.iter().find(|(p, _)| matches(p, id)).copied()
}

/// Whether a missing Spark is a failure rather than a skip.
fn required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("ARBOR_REQUIRE_SPARK").is_some()
}

/// What `scripts/spark.sh` installed: the Python with pyspark and the Hudi versions whose bundle
/// is cached.
struct Install {
    python: PathBuf,
    versions: Vec<String>,
    missing: Vec<String>,
}

fn install() -> Result<Install, String> {
    let out = crate::script_output("spark.sh", &[])?;
    let doc: serde_json::Value = serde_json::from_str(out.trim())
        .map_err(|e| format!("scripts/spark.sh printed no JSON ({e}): {out}"))?;
    let python = doc
        .get("python")
        .and_then(|p| p.as_str())
        .ok_or("scripts/spark.sh printed no python")?;
    let cached: Vec<String> = doc
        .get("versions")
        .and_then(|v| v.as_object())
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    let wanted: Vec<String> = std::env::var("ARBOR_HUDI_VERSIONS")
        .unwrap_or_else(|_| "1.0.2 1.1.1 1.2.0".to_string())
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let missing = wanted
        .iter()
        .filter(|v| !cached.contains(v))
        .cloned()
        .collect();
    Ok(Install {
        python: PathBuf::from(python),
        versions: wanted.into_iter().filter(|v| cached.contains(v)).collect(),
        missing,
    })
}

/// Whether `java -version` runs.
fn has_java() -> bool {
    Command::new("java")
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs pyspark and fetches the Hudi bundles ahead of the stage (`scripts/spark.sh`; once
/// per machine). Nothing to do without Java: the stage says so when it runs.
pub(crate) fn prepare() -> Result<(), String> {
    if has_java() {
        install().map(|_| ())
    } else {
        Ok(())
    }
}

/// Runs the stage in `work/spark/`. Returns `(passed, failed)` checks; `(0, 0)` when skipped
/// outside CI.
pub fn run(work: &Path, arbor: &Path) -> Result<(usize, usize), String> {
    let started = Instant::now();
    let skip = |why: String| -> Result<(usize, usize), String> {
        if required() {
            Err(format!("spark stage cannot run: {why}"))
        } else {
            eprintln!("interop: spark: SKIPPED: {why} (CI runs it; see docs/spark_peer.md)");
            Ok((0, 0))
        }
    };
    if !has_java() {
        return skip("no `java` on PATH (Spark needs a JDK 17)".to_string());
    }
    let inst = match install() {
        Ok(i) => i,
        Err(e) => return skip(e),
    };
    if !inst.missing.is_empty() {
        let why = format!(
            "the Hudi Spark bundle of {} could not be fetched",
            inst.missing.join(", ")
        );
        if required() {
            return Err(format!("spark stage: {why}"));
        }
        eprintln!("interop: spark: {why}; running the others");
    }
    if inst.versions.is_empty() {
        return skip("no Hudi Spark bundle is cached".to_string());
    }
    let dir = work.join("spark");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut passed = 0;
    let mut failed = 0;
    let mut known_failed = 0;
    // Two streams of versions at once: one Spark session keeps about 1.5 of the 2 cores busy,
    // so two take 6.5 minutes where one after the other took 11 to 13.
    let streams = streams(&inst.versions, parallel_sessions());
    let results: Vec<Result<(usize, usize, usize), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = streams
            .iter()
            .map(|stream| {
                let (python, dir) = (&inst.python, &dir);
                scope.spawn(move || {
                    let mut sum = (0, 0, 0);
                    for v in stream {
                        let (p, f, k) = run_version(python, arbor, v, dir)?;
                        sum = (sum.0 + p, sum.1 + f, sum.2 + k);
                    }
                    Ok(sum)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a Spark stream's thread panicked".to_string()))
            })
            .collect()
    });
    for r in results {
        let (p, f, k) = r?;
        passed += p;
        failed += f;
        known_failed += k;
    }
    println!(
        "spark: {passed} passed, {failed} failed ({known_failed} known failures; Hudi {}; {:.0} s)",
        inst.versions.join(", "),
        started.elapsed().as_secs_f64()
    );
    Ok((passed, failed))
}

/// How many Spark sessions run at once: `ARBOR_SPARK_SESSIONS`, else 3 (one per version:
/// the stage waits on its JVMs and the arbor processes it starts, so a third session overlaps
/// what two leave idle).
fn parallel_sessions() -> usize {
    std::env::var("ARBOR_SPARK_SESSIONS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(3)
}

/// The versions split into at most `n` streams run side by side, each in the given order: the
/// newest version (whose CI scenarios take longest) alone, the others shared round-robin.
fn streams(versions: &[String], n: usize) -> Vec<Vec<String>> {
    let Some((newest, rest)) = versions.split_last() else {
        return Vec::new();
    };
    if n <= 1 {
        return vec![versions.to_vec()];
    }
    let others = (n - 1).min(rest.len());
    let mut out = vec![vec![newest.clone()]];
    for k in 0..others {
        out.push(rest.iter().skip(k).step_by(others).cloned().collect());
    }
    out
}

/// One Hudi version: one `spark_stage.py` process; its JSON lines are saved in
/// `dir/<version>.jsonl` and Spark's log in `dir/<version>.log`.
fn run_version(
    python: &Path,
    arbor: &Path,
    version: &str,
    dir: &Path,
) -> Result<(usize, usize, usize), String> {
    let started = Instant::now();
    let log_path = dir.join(format!("{version}.log"));
    let log = std::fs::File::create(&log_path)
        .map_err(|e| format!("creating {}: {e}", log_path.display()))?;
    let script = crate::repo_root().join("scripts").join("spark_stage.py");
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .arg("--hudi-version")
        .arg(version)
        .arg("--arbor")
        .arg(arbor)
        .arg("--workdir")
        .arg(dir.join(version))
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log));
    if let Ok(s) = std::env::var("ARBOR_SPARK_SCENARIOS") {
        cmd.arg("--scenarios").arg(s);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    let stdout = child.stdout.take().ok_or("spark_stage.py: no stdout")?;
    let results_path = dir.join(format!("{version}.jsonl"));
    let mut results = std::fs::File::create(&results_path)
        .map_err(|e| format!("creating {}: {e}", results_path.display()))?;
    let mut passed = 0;
    let mut failed = 0;
    let mut known_failed = 0;
    // Per known-failure pattern: (checks that passed, checks that failed).
    let mut entries: std::collections::BTreeMap<&str, (u32, u32)> = Default::default();
    let mut summary = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| format!("reading spark_stage.py: {e}"))?;
        let _ = writeln!(results, "{line}");
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if doc.get("summary").is_some() {
            summary = true;
            continue;
        }
        let id = doc.get("id").and_then(|v| v.as_str()).unwrap_or("?");
        let ok = doc.get("ok").and_then(serde_json::Value::as_bool) == Some(true);
        let err = doc.get("error").and_then(|v| v.as_str()).unwrap_or("");
        let err: String = err.chars().take(600).collect();
        match (ok, known(id)) {
            (true, None) => passed += 1,
            (true, Some(_)) => {
                passed += 1;
                if let Some((pattern, _)) = known_entry(id) {
                    entries.entry(pattern).or_insert((0, 0)).0 += 1;
                }
            }
            (false, Some(why)) => {
                known_failed += 1;
                if let Some((pattern, _)) = known_entry(id) {
                    entries.entry(pattern).or_insert((0, 0)).1 += 1;
                }
                println!("KNOWN spark/{version}/{id}: {why}: {err}");
            }
            (false, None) => {
                failed += 1;
                println!("FAIL spark/{version}/{id}: {err}");
            }
        }
    }
    for (pattern, (ok, _)) in entries.iter().filter(|(_, (_, bad))| *bad == 0) {
        eprintln!(
            "interop: spark/{version}: known failure {pattern:?} matched {ok} check(s), all \
             passing; remove its entry"
        );
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for spark_stage.py: {e}"))?;
    if !summary || !status.success() {
        failed += 1;
        println!(
            "FAIL spark/{version}: spark_stage.py ended without its summary (exit {status}); log: {}",
            log_path.display()
        );
    }
    eprintln!(
        "interop: spark: Hudi {version}: {passed} passed, {failed} failed, {known_failed} known \
         failures in {:.0} s ({})",
        started.elapsed().as_secs_f64(),
        results_path.display()
    );
    Ok((passed, failed, known_failed))
}

#[cfg(test)]
mod tests {
    use super::{known, matches, streams};

    #[test]
    fn streams_put_the_newest_version_alone_and_share_the_others() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let all = v(&["1.0.2", "1.1.1", "1.2.0"]);
        assert_eq!(
            streams(&all, 2),
            vec![v(&["1.2.0"]), v(&["1.0.2", "1.1.1"])]
        );
        assert_eq!(streams(&all, 1), vec![all.clone()]);
        assert_eq!(
            streams(&all, 5),
            vec![v(&["1.2.0"]), v(&["1.0.2"]), v(&["1.1.1"])]
        );
        assert_eq!(streams(&v(&["1.1.1"]), 2), vec![v(&["1.1.1"])]);
        assert!(streams(&[], 2).is_empty());
    }

    #[test]
    fn known_patterns_match_whole_ids_with_stars_anywhere() {
        assert!(matches(
            "writes/*/S8_restore_past_tag/*",
            "writes/cow/S8_restore_past_tag/agree"
        ));
        assert!(!matches(
            "writes/*/S8_restore_past_tag/*",
            "writes/cow/S7_x/agree"
        ));
        assert!(matches("a/b", "a/b"));
        assert!(!matches("a/b", "a/bc"));
        assert!(!matches("a/*/c", "a/b/cd"));
        assert!(known("writes/mor/S7_rollback_to_savepoint/tags_after_restore").is_none());
        assert!(known("writes/mor/S2_clustering/agree_after_service").is_none());
        assert!(known("reads/cow/snapshot").is_none());
    }
}
