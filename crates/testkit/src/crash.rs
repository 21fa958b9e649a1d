//! What the crash sweeps share: a fingerprint of a table directory (so that two crash points
//! that left the same storage are checked once) and a plain recursive copy of a directory (each
//! crash point starts from a copy of the same template table).

use std::hash::{Hash, Hasher};
use std::path::Path;

/// A hash of every file under `base` (relative path and content), lock state and heartbeats
/// excepted: two crash points with the same fingerprint left the same storage.
pub fn fingerprint(base: &Path) -> u64 {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let path = e.path();
            let rel = path
                .strip_prefix(base)
                .unwrap()
                .to_string_lossy()
                .to_string();
            // Lock state (also the durable copy of the lock's fencing mark) and heartbeats
            // change whenever the lock is taken, even by a refused operation.
            if rel.starts_with(".hoodie/.locks")
                || rel.starts_with(".hoodie/.heartbeat")
                || rel.starts_with(".hoodie/.commit/table_lock")
            {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                walk(&path, base, out);
            } else {
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut files = Vec::new();
    walk(base, base, &mut files);
    files.sort();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    files.hash(&mut h);
    h.finish()
}

/// Copies directory `from` to `to` (created), recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
