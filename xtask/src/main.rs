//! Developer tasks for arbor: `cargo xtask test` runs every test (starting PostgreSQL and an S3
//! server first) and then the interop matrix, `cargo xtask interop` runs the interop matrix
//! alone (arbor's writes read by hudi-rs, see `interop/mod.rs`), `cargo xtask demo` runs the
//! main job on the local file system, `cargo xtask cycles` reports import cycles between the files
//! of one crate (also run by `cargo xtask test`, next to clippy).
//!

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

mod bench;
mod cycles;
mod interop;
mod test_lanes;

fn main() -> ExitCode {
    forget_cargo_run_env();
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(args.get(1..).unwrap_or_default()),
        Some("demo") => demo(args.get(1..).unwrap_or_default()),
        Some("interop") => interop::run(args.get(1..).unwrap_or_default(), None),
        Some("bench") => bench::run(args.get(1..).unwrap_or_default()),
        Some("cycles") => cycles::run(args.get(1..).unwrap_or_default()),
        Some("services") => services().map(|envs| {
            for (k, v) in envs {
                println!("export {k}={v:?}");
            }
        }),
        _ => {
            eprintln!(
                "usage: cargo xtask <task>\n\n\
                 tasks:\n  \
                 test [--no-clippy]  start PostgreSQL, moto (S3) and the peer reader, run clippy, every test, the Python package's pytest, then interop\n  \
                 interop [--keep DIR] [--only S] [--no-late-arrivals] [--no-metadata-table] [--table-version 8|9] [--fixtures-allow-fail] [--no-spark]  the interop matrix (arbor's tables read by hudi-rs, arbor and a model), the fixture stage (the Spark tables of ../shared/fixtures managed with the arbor CLI) and the Spark stage (Java Hudi 1.0-1.2 both ways)\n  \
                 demo [DIR] [--type cow|mor]  `arbor demo`: a table written, upserted, deleted and read step by step\n  \
                 bench data-path [--sizes N,N] [--runs N] [--no-peer]  the data-path benchmark (release build)\n  \
                 bench mdt [--only listing|upsert] [--sizes PxF,PxF] [--runs N] [--no-s3]  the metadata-table benchmark (release build)\n  \
                 bench clean [--commits N] [--partitions N] [--sizes N,N] [--runs N]  clean planning (release build)\n  \
                 bench branch [--files N,N] [--instants N,N] [--runs N] [--quick]  create_branch and publish (release build)\n  \
                 bench cache [--sizes PxF,PxF] [--runs N] [--quick]  second open + plan against the first (release build)\n  \
                 bench skipping [--files N] [--rows-per-file N] [--runs N]  a 2% range predicate with and without column stats (release build)\n  \
                 bench history [--instants N,N] [--files N,N] [--runs N]  a 100-row upsert against history and table size (release build)\n  \
                 bench ttl [--sizes N,N] [--runs N]  partition-TTL planning with and without the metadata table (release build)\n  \
                 bench clone [--files N,N] [--runs N] [--quick]  shallow and deep clone against a full listing (release build)\n  \
                 bench rss [--rows N] [--runs N] [--arbor PATH] [--no-peer]  whole-process time and peak RSS of `arbor read --format parquet` against hudi-rs + pyarrow (release build)\n  \
                 bench mdt-clean [--commits N] [--every N]  MDT files over many commits with and without the MDT's own clean (release build)\n  \
                 bench contention [--writers N] [--commits N] [--keys N] [--rows N]  concurrent writers of disjoint keys against one (release build)\n  \
                 bench commits [--commits N] [--arbor PATH]  a 100-row upsert as a whole process at commit 50 and after thousands of commits (release build)\n  \
                 bench requests [--partitions N] [--arbor PATH]  S3 requests per operation (upsert, branch, tag, publish, clean, one-key read) counted by moto (release build)\n  \
                 bench spark [--rows N] [--hudi-version V] [--driver-memory M]  bulk insert, 10% upsert, snapshot and point lookup: arbor's CLI against Spark 3.5 + Hudi in local[2] (release build)\n  \
                 bench writes [--rows N,N] [--partitions N] [--runs N] [--no-upserts]  bulk inserts into an existing many-partition table against one creating it; large upserts and deletes: time and peak RSS (release build)\n  \
                 bench sql [--partitions N] [--files-per-partition N] [--rows-per-file N] [--runs N]  a selective SQL query on a 1,000-file table with and without pruning, and DataFusion's ListingTable (release build)\n  \
                 cycles              report every import cycle between the files of one crate (exit 1 if any)\n  \
                 services            start PostgreSQL, moto, Azurite and ZooKeeper, print their environment"
            );
            Err("no task given".to_string())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Removes what `cargo run -p xtask` put in the environment about the xtask package itself.
/// Build scripts such as ring's and the `cc` crate's declare `rerun-if-env-changed` on
/// `CARGO_MANIFEST_DIR` and `CARGO_PKG_*`, and cargo compares them with its own environment:
/// a cargo started from here with xtask's values would rebuild ring, rustls and everything
/// above them (all of object_store, DataFusion and arbor) that a `cargo test` from the shell
/// built, and the other way round.
fn forget_cargo_run_env() {
    let ours: Vec<std::ffi::OsString> = env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| {
            k.to_str().is_some_and(|k| {
                k.starts_with("CARGO_PKG_")
                    || matches!(
                        k,
                        "CARGO_MANIFEST_DIR"
                            | "CARGO_MANIFEST_PATH"
                            | "CARGO_MANIFEST_LINKS"
                            | "CARGO_CRATE_NAME"
                            | "CARGO_BIN_NAME"
                            | "CARGO_PRIMARY_PACKAGE"
                            | "OUT_DIR"
                    )
            })
        })
        .collect();
    for k in ours {
        // Single-threaded here: nothing else reads the environment yet.
        env::remove_var(k);
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Runs a command inheriting stdio; fails with the command line on a non-zero exit.
fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    eprintln!("+ {shown}");
    let status = cmd
        .current_dir(repo_root())
        .status()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {status}"))
    }
}

/// Runs a script and returns the last line it printed on stdout.
fn script_output(script: &str, args: &[&str]) -> Result<String, String> {
    let path = repo_root().join("scripts").join(script);
    eprintln!("+ {} {}", path.display(), args.join(" "));
    let out = Command::new("bash")
        .arg(&path)
        .args(args)
        .current_dir(repo_root())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed with {}", path.display(), out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .ok_or_else(|| format!("{} printed nothing", path.display()))
}

/// Starts the services the tests need and returns the environment that points tests at them.
fn services() -> Result<Vec<(String, String)>, String> {
    let pg = script_output("postgres.sh", &[])?;
    let s3 = script_output("moto.sh", &[])?;
    let peer = script_output("peer.sh", &[])?;
    // Azurite, with the container the Azure tests use.
    let azurite = script_output("azurite.sh", &["container", "arbor-test"])?;
    let zk = script_output("zookeeper.sh", &[])?;
    let zk = zk
        .strip_prefix("export ARBOR_TEST_ZK_URL=")
        .unwrap_or(&zk)
        .to_string();
    Ok(vec![
        ("ARBOR_TEST_PG_URL".to_string(), pg),
        ("ARBOR_TEST_S3_ENDPOINT".to_string(), s3),
        ("ARBOR_PEER_PYTHON".to_string(), peer),
        // object_store's emulator mode reads the address from here.
        ("AZURITE_BLOB_STORAGE_URL".to_string(), azurite.clone()),
        ("ARBOR_TEST_AZURITE_ENDPOINT".to_string(), azurite),
        ("ARBOR_TEST_ZK_URL".to_string(), zk),
    ])
}

fn test(args: &[String]) -> Result<(), String> {
    let clippy = !args.iter().any(|a| a == "--no-clippy");
    // One full build gains nothing from incremental state, and on a fresh machine that state
    // (several GB for the workspace's test binaries) is what fills the disk. A developer who
    // wants it keeps it by setting CARGO_INCREMENTAL themselves.
    if env::var_os("CARGO_INCREMENTAL").is_none() {
        // xtask is single-threaded here, before any child process starts.
        env::set_var("CARGO_INCREMENTAL", "0");
    }
    report_free_disk();
    // A dependency compiled twice costs minutes of every run: fail (at the end) if the binaries
    // built alone would not reuse the test build's units.
    let unified = run(Command::new("python3").arg(
        repo_root()
            .join("scripts")
            .join("check_unified_features.py"),
    ));
    // Clippy lints the workspace's crates while the test build compiles them (below), instead
    // of in a `cargo clippy` of its own, which checked every crate again (5.5 minutes of CI).
    if clippy {
        lint_while_building()?;
    }
    // Installing and starting the services, and fetching Spark and the Hudi bundles, wait mostly
    // on the network (minutes on a fresh machine): done beside the import-cycle check and the
    // test build, which keep the CPUs busy.
    let prepared = std::thread::spawn(|| {
        let envs = services()?;
        // The test binaries run with fsync a no-op (scripts/eatmydata.sh says why): the
        // preload goes to the lanes below only, to nothing else this run starts.
        let preload = match script_output("eatmydata.sh", &[]) {
            Ok(lib) => Some(lib),
            Err(e) => {
                eprintln!("xtask: the tests run with real fsyncs (slower): {e}");
                None
            }
        };
        // The Spark stage asks again later (a no-op then) and reports a failure itself.
        if let Err(e) = interop::spark::prepare() {
            eprintln!("xtask: the Spark peer could not be installed now: {e}");
        }
        let mut test_envs = envs.clone();
        test_envs.extend(preload.map(|lib| ("LD_PRELOAD".to_string(), lib)));
        Ok::<_, String>((envs, test_envs))
    });
    let cycles = cycles::run(&[]);
    let build = test_lanes::build(clippy);
    let (envs, test_envs) = prepared
        .join()
        .map_err(|_| "starting the services panicked".to_string())??;
    cycles?;
    let result = test_lanes::run(build?, &test_envs);
    // The Python package: built (dev profile, reusing target/) and tested with pytest.
    let python = run(Command::new("bash").arg(repo_root().join("scripts").join("python.sh")));
    let _ = Command::new("bash")
        .arg(repo_root().join("scripts").join("moto.sh"))
        .arg("stop")
        .current_dir(repo_root())
        .status();
    // The interop matrix runs even when a test failed: its report is worth having either way.
    let peer = envs
        .iter()
        .find(|(k, _)| k == "ARBOR_PEER_PYTHON")
        .map(|(_, v)| PathBuf::from(v));
    let interop = interop::run(&[], peer);
    result.and(python).and(interop).and(unified)
}

/// Space the test run needs on the disk of `target/`: the test build (about 4 GiB), the Spark
/// install with three Hudi bundles, the Python environments and the services.
const DISK_NEEDED_GIB: u64 = 8;

/// Says how much disk is free under the repository before the build, and warns when it is
/// less than the run needs: a linker that runs out of disk dies of SIGBUS, naming no cause.
fn report_free_disk() {
    let out = Command::new("df")
        .args(["-Pk"])
        .arg(repo_root())
        .output()
        .ok()
        .filter(|o| o.status.success());
    let free_kib = out.and_then(|o| {
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        text.lines()
            .nth(1)
            .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
            .and_then(|v| v.parse::<u64>().ok())
    });
    match free_kib {
        Some(kib) => {
            let gib = kib / (1024 * 1024);
            eprintln!(
                "xtask: {gib} GiB free on the disk of {}",
                repo_root().display()
            );
            if gib < DISK_NEEDED_GIB {
                eprintln!(
                    "xtask: warning: the test run needs about {DISK_NEEDED_GIB} GiB; with {gib} GiB \
                     the build or the services may fail for want of disk (a linker killed by \
                     SIGBUS is that)"
                );
            }
        }
        None => eprintln!("xtask: could not read the free disk space (df)"),
    }
}

/// Makes every cargo this process starts run clippy on the workspace's crates as it compiles
/// them, warnings denied: `cargo clippy -- -D warnings`'s own mechanism
/// (`RUSTC_WORKSPACE_WRAPPER=clippy-driver`, the arguments after `--` in `CLIPPY_ARGS`), so the
/// test build reports every lint `cargo clippy --workspace --all-targets -- -D warnings`
/// reports (the examples are built too), and every later build of the run (the CLI, the
/// Python extension) reuses its units.
fn lint_while_building() -> Result<(), String> {
    let driver = env::var_os("CARGO")
        .map(PathBuf::from)
        .and_then(|cargo| cargo.parent().map(|d| d.join("clippy-driver")))
        .filter(|d| d.is_file())
        .unwrap_or_else(|| PathBuf::from("clippy-driver"));
    let works = Command::new(&driver)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        return Err(format!(
            "{} does not run: install clippy (`rustup component add clippy`) or pass --no-clippy",
            driver.display()
        ));
    }
    // xtask is single-threaded here, before any child process starts.
    env::set_var("RUSTC_WORKSPACE_WRAPPER", &driver);
    env::set_var(
        "CLIPPY_ARGS",
        "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__",
    );
    Ok(())
}

fn demo(args: &[String]) -> Result<(), String> {
    run(Command::new("cargo").args(["build", "--quiet", "-p", "arbor-cli"]))?;
    let target = env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo_root().join("target"));
    let arbor = target.join("debug").join("arbor");
    // `arbor demo [DIR] [--type cow|mor]`, DIR (default ./arbor-demo) relative to the caller.
    let status = Command::new(&arbor)
        .arg("demo")
        .args(args)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", arbor.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("arbor demo failed with {status}"))
    }
}
