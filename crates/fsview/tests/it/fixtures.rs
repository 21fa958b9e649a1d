//! The Spark-written fixture tables in `../shared/fixtures` (never copied into the repository):
//! find the zips and their expected outputs, unzip one into a temporary directory.

use std::fs;
use std::path::{Path, PathBuf};

/// The fixtures directory (`<workspace>/../shared/fixtures`), if present.
pub fn fixtures_root() -> Option<PathBuf> {
    let root = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures"
    ));
    root.is_dir().then_some(root)
}

/// The fixtures directory, or `None` after writing a visible SKIPPED line for `test` straight
/// to stderr (libtest captures `eprintln!`). Under CI (`CI` set) a missing directory fails.
pub fn fixtures_root_or_skip(test: &str) -> Option<PathBuf> {
    let root = fixtures_root();
    if root.is_none() {
        let msg = format!("SKIPPED: ../shared/fixtures not found ({test})");
        assert!(std::env::var_os("CI").is_none(), "{msg}, but CI is set");
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{msg}");
    }
    root
}

/// Every `*.zip` below the fixtures directory, sorted.
pub fn all_fixture_zips(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect_zips(root, &mut out);
    out.sort();
    out
}

fn collect_zips(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_zips(&path, out);
        } else if path.extension().is_some_and(|e| e == "zip") {
            out.push(path);
        }
    }
}

/// The expected-output directory of a fixture zip: `<root>/expected/<rel dir>/<zip stem>/`.
pub fn expected_dir(root: &Path, zip: &Path) -> PathBuf {
    let rel = zip.strip_prefix(root).unwrap().with_extension("");
    root.join("expected").join(rel)
}

/// Reads one expected JSON file, if present.
pub fn expected_json(dir: &Path, name: &str) -> Option<serde_json::Value> {
    let path = dir.join(name);
    let text = fs::read_to_string(&path).ok()?;
    Some(serde_json::from_str(&text).unwrap())
}

/// Unzips a fixture table into a fresh temporary directory; returns it with the table's base
/// directory (the shallowest directory holding `.hoodie`, ignoring `__MACOSX`).
pub fn unzip_table(zip: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = fs::File::open(zip).unwrap();
    let mut archive = zip::ZipArchive::new(file).unwrap();
    archive.extract(dir.path()).unwrap();
    let base = find_table_base(dir.path())
        .unwrap_or_else(|| panic!("no .hoodie directory in {}", zip.display()));
    (dir, base)
}

fn find_table_base(dir: &Path) -> Option<PathBuf> {
    let mut level = vec![dir.to_path_buf()];
    while !level.is_empty() {
        let mut next = Vec::new();
        level.sort();
        for d in level {
            if d.join(".hoodie").is_dir() {
                return Some(d);
            }
            for entry in fs::read_dir(&d).ok()?.flatten() {
                let p = entry.path();
                if p.is_dir() && entry.file_name() != "__MACOSX" {
                    next.push(p);
                }
            }
        }
        level = next;
    }
    None
}
