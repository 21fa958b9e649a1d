//! Finding and unpacking the Spark-written fixture tables in `../shared/fixtures`.

use std::fs;
use std::path::{Path, PathBuf};

/// `../shared/fixtures` beside the checkout, or `None` (with a visible message) when absent.
pub fn fixtures_root() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures");
    if root.is_dir() {
        Some(root)
    } else {
        // Straight to stderr: libtest captures `eprintln!` of passing tests.
        let msg = format!(
            "SKIPPED: {} not found; fixture tests need ../shared/fixtures beside the checkout",
            root.display()
        );
        assert!(std::env::var_os("CI").is_none(), "{msg}, but CI is set");
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{msg}");
        None
    }
}

/// Every fixture zip under `root`, sorted, as (name relative to root without `.zip`, path).
pub fn all_fixture_zips(root: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "zip") {
                let rel = p.strip_prefix(root).unwrap().with_extension("");
                out.push((rel.to_string_lossy().into_owned(), p));
            }
        }
    }
    out.sort();
    out
}

/// Unzips a fixture into a fresh temp dir and returns it with the table base (the directory
/// that holds `.hoodie`).
pub fn unzip_table(zip_path: &Path) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let file = fs::File::open(zip_path).unwrap();
    let mut archive = zip::ZipArchive::new(file).unwrap();
    archive.extract(tmp.path()).unwrap();
    let base = find_table_base(tmp.path()).unwrap_or_else(|| {
        panic!("no .hoodie directory in {}", zip_path.display());
    });
    (tmp, base)
}

fn find_table_base(dir: &Path) -> Option<PathBuf> {
    if dir.join(".hoodie").is_dir() {
        return Some(dir.to_path_buf());
    }
    let mut kids: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && !p.ends_with("__MACOSX"))
        .collect();
    kids.sort();
    kids.into_iter().find_map(|k| find_table_base(&k))
}
