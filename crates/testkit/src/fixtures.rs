//! The Spark-written fixture tables in `../shared/fixtures` beside the checkout (never copied
//! into the repository): find them, list their zips and expected outputs, unzip one into a
//! temporary directory and find the table's base directory.

use std::fs;
use std::path::{Path, PathBuf};

use crate::{repo_root, skip};

/// Where the fixtures directory is expected: `<checkout>/../shared/fixtures` (it may be absent).
pub fn fixtures_dir() -> PathBuf {
    repo_root().join("../shared/fixtures")
}

/// The fixtures directory, if present.
pub fn fixtures_root() -> Option<PathBuf> {
    let root = fixtures_dir();
    root.is_dir().then_some(root)
}

/// The fixtures directory, or `None` after a visible
/// `SKIPPED: ../shared/fixtures not found ({what})` line (see [`skip`]: under CI the fixtures
/// are always present, so their absence panics).
pub fn fixtures_root_or_skip(what: &str) -> Option<PathBuf> {
    let root = fixtures_root();
    if root.is_none() {
        skip(&format!("SKIPPED: ../shared/fixtures not found ({what})"));
    }
    root
}

/// Every file below `dir` whose extension is `ext`, sorted; directories named `__MACOSX` or
/// `.hoodie` and macOS resource forks (`._*`) are left out. Empty if `dir` cannot be read.
pub fn files_with_extension(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect(dir, ext, &mut out);
    out.sort();
    out
}

fn collect(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if name != "__MACOSX" && name != ".hoodie" {
                collect(&path, ext, out);
            }
        } else if !name.starts_with("._") && path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// Every fixture zip below `root` (the fixtures directory), sorted.
pub fn fixture_zips(root: &Path) -> Vec<PathBuf> {
    files_with_extension(root, "zip")
}

/// A fixture's name: its zip's path relative to `root` without `.zip`
/// (`sample_table/cow/v6_empty`), as the expected outputs are named.
pub fn fixture_name(root: &Path, zip: &Path) -> String {
    zip.strip_prefix(root)
        .unwrap()
        .with_extension("")
        .to_string_lossy()
        .into_owned()
}

/// The expected-output directory of a fixture zip: `<root>/expected/<fixture name>/`.
pub fn expected_dir(root: &Path, zip: &Path) -> PathBuf {
    root.join("expected").join(fixture_name(root, zip))
}

/// Reads the expected JSON file `name` of `dir`; `None` if it does not exist (panics if it is
/// not JSON).
pub fn expected_json(dir: &Path, name: &str) -> Option<serde_json::Value> {
    let text = fs::read_to_string(dir.join(name)).ok()?;
    Some(serde_json::from_str(&text).unwrap())
}

/// Unzips `zip` into a fresh temporary directory (removed when the result is dropped).
pub fn unzip(zip: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let file = fs::File::open(zip).unwrap();
    zip::ZipArchive::new(file)
        .unwrap()
        .extract(dir.path())
        .unwrap();
    dir
}

/// Unzips a fixture table into a fresh temporary directory and returns it with the table's
/// base directory (see [`find_table_base`]). Panics if the zip holds no table.
pub fn unzip_table(zip: &Path) -> (tempfile::TempDir, PathBuf) {
    let dir = unzip(zip);
    let base = find_table_base(dir.path())
        .unwrap_or_else(|| panic!("no .hoodie directory in {}", zip.display()));
    (dir, base)
}

/// The table base below `dir`: the shallowest directory that holds `.hoodie` (the first in
/// path order among equally shallow ones), never inside `__MACOSX`.
pub fn find_table_base(dir: &Path) -> Option<PathBuf> {
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
