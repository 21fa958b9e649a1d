//! Every fixed path of the table layout, relative to the table base, as every component
//! addresses it (a root's view, see [`super::rooted`]). Other crates name these constants
//! instead of spelling the paths again; the on-disk layout is exactly Hudi's (and RFC-116's for
//! branches, publications and tags).

use crate::instant::InstantTime;

/// The data-side meta directory of main's root (and, in a root's view, of every root).
pub const DEFAULT_META_DIR: &str = ".hoodie";
/// The file holding a table's (or a root's) config, in its meta directory.
pub use crate::config::PROPERTIES_FILE;
/// The metadata table's base directory (its partitions' files are shared by every root).
pub const MDT_BASE: &str = ".hoodie/metadata";
/// The metadata table's own meta directory of main's root (and, in a root's view, of every
/// root).
pub const MDT_META_DIR: &str = ".hoodie/metadata/.hoodie";
/// Alias of [`MDT_META_DIR`] (the name metadata-root code uses).
pub const MDT_ROOT_META_DIR: &str = MDT_META_DIR;
/// The data-side directory holding working branches and publications.
pub const BRANCHES_DIR: &str = ".hoodie/branches";
/// The directory below a meta directory holding branches (both sides).
pub const BRANCHES_SUBDIR: &str = "branches";
/// The reserved name of the publications directory.
pub const PUBLICATIONS: &str = "publications";
/// The file whose presence completes a publication (data side).
pub const SUCCESS_FILE: &str = "_SUCCESS";
/// The identity file of a working branch (both sides).
pub const BRANCH_JSON: &str = "branch.json";
/// Where a root keeps its tag definitions, as its view shows it (`tags/<name>.json` in the
/// root's data meta directory, RFC-116 section 3).
pub const TAGS_DIR: &str = ".hoodie/tags";
/// The name of the table lock (kept by the default provider at `.hoodie/.locks/table_lock.json`).
pub const LOCK_NAME: &str = "table_lock";
/// Where the default lock provider keeps its locks (Hudi's `FileSystemBasedLockProvider` uses
/// the same directory): one table lock for every root.
pub const LOCK_DIR: &str = ".hoodie/.locks";
/// The directory of the table's commit record and staged commit contents
/// (`crate::commit_point`): shared by every root, outside the lock directory so that losing the
/// lock state does not lose it.
pub const COMMIT_DIR: &str = ".hoodie/.commit";
/// Where writers keep their heartbeats: one object per pending instant, named by its time,
/// holding the epoch milliseconds of the last beat; shared by every root (instant times are
/// unique table-wide).
pub const HEARTBEAT_DIR: &str = ".hoodie/.heartbeat";
/// Where Hudi keeps the index definitions (the default of `hoodie.table.index.defs.path`).
pub const INDEX_DEFS_DIR: &str = ".hoodie/.index_defs";
/// The index definitions file (the default of `hoodie.table.index.defs.path`).
pub const INDEX_DEFS_PATH: &str = ".hoodie/.index_defs/index.json";
/// Where schema-evolution commits are kept (`.hoodie/.schema/<instant>.schemacommit`).
pub const SCHEMA_DIR: &str = ".hoodie/.schema";
/// The file name of the partition marker (spec 1.4).
pub const PARTITION_MARKER: &str = ".hoodie_partition_metadata";

/// The key of the heartbeat of pending instant `instant`.
pub fn heartbeat_key(instant: &InstantTime) -> String {
    format!("{HEARTBEAT_DIR}/{instant}")
}

/// The key of tag `name`'s definition, as the owning root's view shows it.
pub fn tag_key(name: &str) -> String {
    format!("{TAGS_DIR}/{name}.json")
}

/// The tag name a key listed below [`TAGS_DIR`] stands for: its file name without `.json`
/// (`None` when the file name does not end in `.json`). The name is not validated here.
pub fn tag_name_of(key: &str) -> Option<&str> {
    key.rsplit('/').next().and_then(|n| n.strip_suffix(".json"))
}

/// The table's key of working branch `name`'s data-side `branch.json`.
pub fn data_identity_key(name: &str) -> String {
    format!("{BRANCHES_DIR}/{name}/{BRANCH_JSON}")
}

/// The table's key of working branch `name`'s MDT-side `branch.json`.
pub fn mdt_identity_key(name: &str) -> String {
    format!("{MDT_META_DIR}/{BRANCHES_SUBDIR}/{name}/{BRANCH_JSON}")
}

/// The key of `hoodie.properties` in meta directory `meta_dir`.
pub fn properties_key(meta_dir: &str) -> String {
    format!("{meta_dir}/{PROPERTIES_FILE}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_paths_are_the_hudi_and_rfc_116_ones() {
        let t = InstantTime::parse("20261026103000000").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(heartbeat_key(&t), ".hoodie/.heartbeat/20261026103000000");
        assert_eq!(tag_key("T2"), ".hoodie/tags/T2.json");
        assert_eq!(tag_name_of(".hoodie/tags/T2.json"), Some("T2"));
        assert_eq!(tag_name_of(".hoodie/tags/T2.txt"), None);
        assert_eq!(
            data_identity_key("audit"),
            ".hoodie/branches/audit/branch.json"
        );
        assert_eq!(
            mdt_identity_key("audit"),
            ".hoodie/metadata/.hoodie/branches/audit/branch.json"
        );
        assert_eq!(properties_key(".hoodie"), ".hoodie/hoodie.properties");
    }
}
