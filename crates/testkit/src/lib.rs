//! Test support shared by arbor's integration tests: the Spark-written fixture tables in
//! `../shared/fixtures` ([`fixtures`]), the peer reader (hudi-rs 0.5.0) and the row digests of
//! `scripts/canonical_rows.py` ([`peer`]), visible skips ([`skip`]), the rows, schema and model of
//! the small table most integration tests write ([`tables`]) and what the crash sweeps share
//! ([`crash`]).
//!
//! Only for tests (`publish = false`, used as a dev-dependency). A helper that cannot do its
//! job fails the calling test at once, so `unwrap`, `expect`, `panic!` and indexing are
//! allowed here as they are in the tests themselves.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::Write;
use std::path::{Path, PathBuf};

pub mod crash;
pub mod fixtures;
pub mod peer;
pub mod tables;

pub use fixtures::{
    expected_dir, expected_json, files_with_extension, find_table_base, fixture_name, fixture_zips,
    fixtures_dir, fixtures_root, fixtures_root_or_skip, unzip, unzip_table,
};
pub use peer::{
    assert_peer_snapshot_matches, batches_digest, canonical_digest, peer_digest_batch, peer_python,
    peer_python_or_skip, peer_read, write_arrow_ipc,
};

/// The root of the checkout (the directory holding the workspace `Cargo.toml` and `scripts/`).
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // crates/testkit -> crates -> the checkout.
    manifest
        .parent()
        .and_then(Path::parent)
        .map_or_else(|| manifest.join("../.."), Path::to_path_buf)
}

/// Reports a skipped test: `msg` (by convention starting with `SKIPPED:`) is written straight
/// to the process's stderr, so it shows even for passing tests (libtest captures
/// `eprintln!`). Under CI (`CI` set) nothing may be skipped: this panics with
/// `"{msg}, but CI is set"` instead.
pub fn skip(msg: &str) {
    assert!(std::env::var_os("CI").is_none(), "{msg}, but CI is set");
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// Every file under the local table base `base` outside `.hoodie/`, with its size (a directory
/// walk: what a table's data costs on disk).
pub fn data_walk(base: &Path) -> std::collections::BTreeMap<String, u64> {
    fn go(dir: &Path, base: &Path, out: &mut std::collections::BTreeMap<String, u64>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            if rel == ".hoodie" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                go(&p, base, out);
            } else {
                out.insert(rel, e.metadata().unwrap().len());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    go(base, base, &mut out);
    out
}
